"""What the wgmma GEMM's epilogue costs a tile (docs/PERF_NOTES.md, round 29: the
ceiling of a ping-pong schedule's gain). Run twice, plain and with TK_GEMM_NO_EPI=1
(the epilogue's code kept but never run, C not written): TFLOP/s of the library's
choice and of two 128x128 blocks (the tile a ping-pong warpgroup would own), beside
torch.matmul (cuBLAS) in the same run; median of triton do_bench. Plain runs check C
against torch first (ERR where wrong).
Usage (GPU machine): [TK_GEMM_NO_EPI=1] python3 bench/gemm_epi_ceiling.py build-device"""
import os
import sys

import torch
from triton.testing import do_bench

from tk_ctypes import TK

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 2304, 768), (16384, 768, 768),
          (16384, 3072, 768), (16384, 768, 3072)]  # M, N, K: 4096³, 8192³, GPT-2 124M's
BLOCKS = [None, (128, 128, 128, 8, 3, 1, 1), (128, 128, 64, 8, 5, 1, 1)]


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    skip = os.environ.get("TK_GEMM_NO_EPI") == "1"
    stream = torch.cuda.current_stream().cuda_stream
    torch.manual_seed(0)
    print(f"epilogue {'skipped' if skip else 'run'}")
    print("| M | N | K | cuBLAS | library's choice | 128x128x128 s3 | 128x128x64 s5 |")
    print("|---|---|---|---|---|---|---|")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = a @ b
        t = lambda f: 2 * m * n * k / do_bench(f, warmup=25, rep=150, return_mode="median") / 1e9
        cells = [f"{t(lambda: a @ b):.0f}"]
        for shape in BLOCKS:
            c = torch.full_like(ref, float("nan"))
            p = tk.gemm_params(a, b, c, False, shape)
            try:
                tk.gemm(p, stream)
            except RuntimeError as e:
                cells.append(f"n/a ({e})"[:40])
                continue
            err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
            ok = skip or err <= 1e-2
            cells.append(f"{t(lambda p=p: tk.gemm(p, stream)):.0f}" if ok else "ERR")
        print(f"| {m} | {n} | {k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
