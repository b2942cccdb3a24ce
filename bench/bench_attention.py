"""Attention forward TFLOP/s: TileKittens beside torch SDPA with the flash
(FlashAttention-2) and cuDNN backends, same run, same GPU, median of triton
do_bench. Each configuration is checked against SDPA first.
FLOPs: 4·B·H·N²·D (half when causal).
Usage (GPU machine): python3 bench/bench_attention.py build-device"""
import sys

import torch
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench_util import ATTENTION_CONFIGS, sdpa
from tk_ctypes import TK


def bench_one(tk, stream, d, b, h, n, causal):
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
    p = tk.attention_params(q, k, v, o, lse, causal)
    tk.attention_prepare(p)
    tk.attention(p, stream)
    ref = sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal)
    err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    t = lambda f: flops / do_bench(f, warmup=40, rep=200, return_mode="median") / 1e9
    ours = t(lambda: tk.attention(p, stream))
    fa2 = t(lambda: sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal))
    try:
        cud = t(lambda: sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, causal))
    except RuntimeError:
        cud = float("nan")
    return ours, fa2, cud, err


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    print("| D | B | H | N | causal | TileKittens | FA2 (flash) | cuDNN | ours/FA2 | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for causal in (False, True):
        for d, b, h, n in ATTENTION_CONFIGS:
            o, f, c, e = bench_one(tk, stream, d, b, h, n, causal)
            print(f"| {d} | {b} | {h} | {n} | {int(causal)} | {o:.0f} | {f:.0f} | {c:.0f} | "
                  f"{o / f:.2f} | {e:.1e} |", flush=True)


if __name__ == "__main__":
    main()
