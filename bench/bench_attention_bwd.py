"""Attention backward TFLOP/s: TileKittens (tk_attention_backward) in both modes
on both kernel sets (the Hopper one on wgmma, the mma.sync one):
  fast: P and dS once, in a kernel over key blocks that adds each block's
    share of dQ into an f32 accumulator (atomics), between a pre-pass (D =
    rowsum(dO*O), the accumulator zeroed) and a conversion;
  det (deterministic): a dQ kernel with the pre-pass fused in, then a dK/dV
    kernel; P and dS computed by both (7 products instead of 5), no atomics,
beside torch SDPA backward with the flash (FlashAttention-2) and cuDNN
backends, same run, same GPU, median of triton do_bench. Each configuration's
gradients are checked first against torch autograd of the float32 attention
math, next to the error of SDPA flash's own bf16 backward on the same inputs;
each variant runs 3 times: the deterministic ones must be bit-identical (the
fast ones are, but for dQ's last bits).
FLOPs: 2.5 x the forward's 4*B*H*N^2*D (half when causal): the 5 matrix
products of the FA2 backward, as FA2 and ThunderKittens count them.
Shapes: D 64 / 128, causal and not, N 1024 / 4096 / 16384 with B*N = 16384,
and B4 H16 N3072 D128 (issue 14). BWD_VARIANTS (e.g. "wgmma fast,wgmma det")
picks variants, BWD_CONFIGS (e.g. "128,1,16,16384;64,4,32,4096": D,B,H,N) and
BWD_CAUSAL ("0", "1" or "0,1") the shapes.
Usage (GPU machine): python3 bench/bench_attention_bwd.py build-device"""
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from bench_util import ATTENTION_CONFIGS, sdpa
from tk_ctypes import TK

# (name, tk_attn_kernel, tk_attn_bwd_mode): all of ours, same run
VARIANTS = (("wgmma fast", 2, 1), ("wgmma det", 2, 0), ("mma.sync fast", 1, 1),
            ("mma.sync det", 1, 0))
if os.environ.get("BWD_VARIANTS"):
    _want = [w.strip() for w in os.environ["BWD_VARIANTS"].split(",")]
    VARIANTS = tuple(v for v in VARIANTS if v[0] in _want)


def torch_bwd(backend, q, k, v, do, causal):
    """A closure timing SDPA's backward alone (the forward runs once here)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = sdpa(backend, q, k, v, causal)

    def run():
        with sdpa_kernel(backend):
            return torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    return run


def ref_grads(q, k, v, do, causal):
    """torch autograd of the float32 math (no fused kernel)."""
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n, m = q.shape[2], k.shape[2]
        mask = torch.ones(n, m, device=q.device, dtype=torch.bool).tril(m - n)
        s = s.masked_fill(~mask, float("-inf"))
    o = torch.softmax(s, -1) @ v.float()
    return torch.autograd.grad(o, (q, k, v), do.float())


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def run_ours(tk, stream, q, k, v, o, lse, do, causal, kernel, mode):
    """Gradients of one of our variants (3 runs, NaN-poisoned first), whether the
    runs are bit-identical (the fast mode: dK and dV), and a closure timing it."""
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (q, k, v))
    p = tk.attention_bwd_params(q, k, v, o, lse, do, dq, dk, dv, causal, kernel, mode)
    tk.attention_backward_prepare(p)
    runs = []
    for _ in range(3):
        for t in (dq, dk, dv):
            t.fill_(float("nan"))
        tk.attention_backward(p, stream)
        torch.cuda.synchronize()
        runs.append([t.clone() for t in (dq, dk, dv)])
    same = all(torch.equal(runs[0][i].view(torch.int16), r[i].view(torch.int16))
               for r in runs[1:] for i in range(1 if mode else 0, 3))
    return runs[0], same, lambda: tk.attention_backward(p, stream)


def bench_one(tk, stream, d, b, h, n, causal):
    q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty((b, h, n), device="cuda", dtype=torch.float32)
    tk.attention(tk.attention_params(q, k, v, o, lse, causal), stream)
    ours = {name: run_ours(tk, stream, q, k, v, o, lse, do, causal, kern, mode)
            for name, kern, mode in VARIANTS}
    err, fa2_err = 0.0, 0.0
    if b * h * n * n <= 16 * 16 * 4096 * 4096:  # the f32 reference fits in memory
        want = ref_grads(q, k, v, do, causal)
        flash = torch_bwd(SDPBackend.FLASH_ATTENTION, q, k, v, do, causal)()
        err = max(rel(g, w) for name in ours for g, w in zip(ours[name][0], want))
        fa2_err = max(rel(g, w) for g, w in zip(flash, want))
        del want, flash
    flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)
    t = lambda f: flops / do_bench(f, warmup=40, rep=200, return_mode="median") / 1e9
    speed = {name: t(ours[name][2]) for name in ours}
    fa2 = t(torch_bwd(SDPBackend.FLASH_ATTENTION, q, k, v, do, causal))
    try:
        cud = t(torch_bwd(SDPBackend.CUDNN_ATTENTION, q, k, v, do, causal))
    except RuntimeError:
        cud = float("nan")
    same = all(ours[name][1] for name in ours)
    return speed, fa2, cud, err, fa2_err, same


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    names = [v[0] for v in VARIANTS]
    best = names[0]  # the ratios: the first variant (wgmma fast by default)
    print("| D | B | H | N | causal | " + " | ".join(names) + f" | FA2 (flash) | cuDNN | "
          f"{best}/FA2 | {best}/cuDNN | max rel err (ours) | FA2 rel err | bit-identical x3 |")
    print("|---" * (len(names) + 12) + "|")
    configs = ATTENTION_CONFIGS
    if os.environ.get("BWD_CONFIGS"):
        configs = [tuple(int(x) for x in c.split(",")) for c in os.environ["BWD_CONFIGS"].split(";")]
    for causal in (bool(int(c)) for c in os.environ.get("BWD_CAUSAL", "0,1").split(",")):
        for d, b, h, n in configs:
            o, f, c, e, fe, same = bench_one(tk, stream, d, b, h, n, causal)
            cols = " | ".join(f"{o[name]:.0f}" for name in names)
            print(f"| {d} | {b} | {h} | {n} | {int(causal)} | {cols} | {f:.0f} | {c:.0f} | "
                  f"{o[best] / f:.2f} | {o[best] / c:.2f} | {e:.1e} | {fe:.1e} | "
                  f"{'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
