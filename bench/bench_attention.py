"""Attention forward TFLOP/s: TileKittens (the mma.sync kernel and, on sm_90a, the
Hopper wgmma kernel) beside torch SDPA with the flash (FlashAttention-2) and cuDNN
backends, same run, same GPU, median of triton do_bench. Each configuration is
checked against SDPA first (a wrong result prints ERR instead of its speed).
FLOPs: 4·B·H·N²·D (half when causal).
Usage (GPU machine): python3 bench/bench_attention.py build-device"""
import sys

import torch
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench_util import ATTENTION_CONFIGS, sdpa
from tk_ctypes import TK


MMA_SYNC, WGMMA = 1, 2  # tk_attn_kernel


def bench_one(tk, stream, d, b, h, n, causal, kernels, hkv=None):
    """TFLOP/s of each of our kernels (None where it does not apply, "ERR" where it
    is wrong), FA2, cuDNN, and the worst rel err of ours against SDPA flash.
    hkv: K/V heads (grouped-query attention), default h."""
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv or h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    try:
        ref = sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal)
    except RuntimeError:  # a backend without GQA: the reference from the math one
        ref = sdpa(SDPBackend.MATH, q, k, v, causal)
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    t = lambda f: flops / do_bench(f, warmup=40, rep=200, return_mode="median") / 1e9
    ours, worst = [], 0.0
    for kernel in kernels:
        o = torch.full_like(q, float("nan"))
        lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
        p = tk.attention_params(q, k, v, o, lse, causal, kernel=kernel)
        tk.attention_prepare(p)
        tk.attention(p, stream)
        err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        worst = max(worst, err) if err == err else float("nan")
        ours.append(t(lambda p=p: tk.attention(p, stream)) if err <= 1e-2 else "ERR")
    try:
        fa2 = t(lambda: sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal))
    except RuntimeError:
        fa2 = float("nan")
    try:
        cud = t(lambda: sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, causal))
    except RuntimeError:
        cud = float("nan")
    return ours, fa2, cud, worst


def cell(x, digits=0):
    return "–" if x is None else x if isinstance(x, str) else f"{x:.{digits}f}"


def ratio(x, y):
    return cell(x / y if isinstance(x, float) else x, 2)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    hopper = torch.cuda.get_device_capability() == (9, 0)
    kernels = [MMA_SYNC, WGMMA] if hopper else [MMA_SYNC]
    configs = ATTENTION_CONFIGS + [(256, 4, 8, 4096), (256, 1, 8, 16384)]
    rows = [(c, causal, None) for causal in (False, True) for c in configs]
    rows.append(((128, 1, 32, 8192), True, 8))  # GQA Hq 32 / Hkv 8 (issue 13)
    print("| D | B | H | N | causal | mma.sync | wgmma | FA2 (flash) | cuDNN | mma.sync/FA2 | "
          "wgmma/cuDNN | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (d, b, h, n), causal, hkv in rows:
        ours, f, c, e = bench_one(tk, stream, d, b, h, n, causal, kernels, hkv)
        ms, wg = ours[0], ours[1] if len(ours) > 1 else None
        hs = f"{h}/{hkv}" if hkv else f"{h}"
        print(f"| {d} | {b} | {hs} | {n} | {int(causal)} | {cell(ms)} | {cell(wg)} | {f:.0f} | "
              f"{c:.0f} | {ratio(ms, f)} | {ratio(wg, c)} | {e:.1e} |", flush=True)


if __name__ == "__main__":
    main()
