"""Prefill on packed variable-length batches: tk_attention_forward with cu_seqlens_q/kv
over tensors packed as [total, H, D] (FlashAttention's varlen layout), beside the same
library's dense call on the same tokens, same run, median of triton do_bench.
 - equal lengths: B sequences of N tokens packed, against the dense call on the same
   buffer seen as [B, N, H, D] (the same work: the issue's "within 5%" line);
 - mixed lengths: against the dense call on the batch padded to the longest sequence
   (what a caller without varlen runs), and torch SDPA (flash) on that padded batch;
 - the backward (deterministic) of each call, timed the same way.
TFLOP/s count the work of the real tokens only (causal: the pairs attended). Each shape
is checked against float32 SDPA, sequence by sequence, first.
Environment: VARLEN_KERNEL=1 (mma.sync) or 2 (wgmma) forces the kernel (default: the
library's choice). Usage (GPU machine): python3 bench/bench_varlen.py build-device"""
import ctypes
import os
import sys

import torch
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench_util import sdpa
from tk_ctypes import TK

# (lengths, Hq, Hkv, D, causal)
SHAPES = [
    ([4096] * 4, 16, 16, 128, False), ([4096] * 4, 16, 16, 128, True),
    ([1024] * 16, 16, 16, 128, True), ([2048] * 8, 32, 32, 64, True),
    ([8192] * 2, 32, 8, 128, True),
    ([512, 3000, 1024, 7000, 200, 4096, 1, 17], 16, 16, 128, True),
    ([100, 2000, 700, 5000, 300, 1500, 64, 129], 32, 8, 128, False),
    ([70000, 1000, 17, 1, 0], 8, 2, 128, True),
]


def pairs(n, causal):
    """Query-key pairs attended by a sequence of n queries and n keys."""
    return n * (n + 1) // 2 if causal else n * n


def us(f):
    return do_bench(f, warmup=25, rep=200, return_mode="median") * 1e3


def run(tk, stream, lens, hq, hkv, d, causal, kernel):
    dev, bf = "cuda", torch.bfloat16
    tot, b = sum(lens), len(lens)
    q = torch.randn(tot, hq, d, device=dev, dtype=bf)
    k, v = (torch.randn(tot, hkv, d, device=dev, dtype=bf) for _ in range(2))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((hq, tot), float("nan"), device=dev, dtype=torch.float32)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device=dev, dtype=torch.int32)
    # the varlen call: logical [1, H, T, D] views of the packed tensors
    view = lambda t: t.permute(1, 0, 2).unsqueeze(0)
    p = tk.attention_params(view(q), view(k), view(v), view(o), lse.unsqueeze(0), causal,
                            kernel=kernel)
    p.batch, p.seq_q, p.seq_kv = b, tot, tot
    p.cu_seqlens_q = p.cu_seqlens_kv = cu.data_ptr()
    p.max_seqlen_q = p.max_seqlen_kv = max(lens)
    tk.attention_prepare(p)
    tk.attention(p, stream)
    torch.cuda.synchronize()
    err_num = err_den = 0.0
    for i, n in enumerate(lens):  # float32 SDPA per sequence
        if not n:
            continue
        s = slice(int(cu[i]), int(cu[i + 1]))
        qs, ks, vs = (view(t[s]) for t in (q, k, v))
        # float32 math where its n x n scores fit; flash on bf16 beyond
        ref = sdpa(SDPBackend.MATH, qs.float(), ks.float(), vs.float(), causal) if n <= 8192 \
            else sdpa(SDPBackend.FLASH_ATTENTION, qs, ks, vs, causal).float()
        err_num += (view(o[s]).float() - ref).norm().item() ** 2
        err_den += ref.norm().item() ** 2
    err = (err_num / err_den) ** 0.5
    ours = us(lambda: tk.attention(p, stream)) if err <= 1e-2 else float("nan")
    # the dense call: equal lengths on the same buffer, else padded to the longest
    n = max(lens)
    if len(set(lens)) == 1:
        qd, kd, vd, od = (t.view(b, n, -1, d).permute(0, 2, 1, 3) for t in (q, k, v, o))
    else:
        def pad(t):
            out = torch.zeros(b, n, t.shape[1], d, device=dev, dtype=bf)
            for i, m in enumerate(lens):
                out[i, :m] = t[int(cu[i]):int(cu[i + 1])]
            return out.permute(0, 2, 1, 3)
        qd, kd, vd = pad(q), pad(k), pad(v)
        od = torch.empty_like(qd)
    lsed = torch.empty(b, hq, n, device=dev, dtype=torch.float32)
    pd = tk.attention_params(qd, kd, vd, od, lsed, causal, kernel=kernel)
    tk.attention_prepare(pd)
    dense = us(lambda: tk.attention(pd, stream))
    try:
        flash = us(lambda: sdpa(SDPBackend.FLASH_ATTENTION, qd, kd, vd, causal))
    except RuntimeError:
        flash = float("nan")
    flops = 4 * d * hq * sum(pairs(m, causal) for m in lens)
    # the backward (deterministic) of both calls, from their own forwards
    g = torch.randn_like(q)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    b_var = tk.attention_bwd_params(view(q), view(k), view(v), view(o), lse.unsqueeze(0),
                                    view(g), view(dq), view(dk), view(dv), causal, kernel=kernel)
    b_var.batch, b_var.seq_q, b_var.seq_kv = b, tot, tot  # workspace: one sequence of tot rows
    b_var.cu_seqlens_q = b_var.cu_seqlens_kv = cu.data_ptr()
    b_var.max_seqlen_q = b_var.max_seqlen_kv = max(lens)
    tk.attention_backward_prepare(b_var)
    bwd = us(lambda: tk.attention_backward(b_var, stream))
    gd = torch.randn_like(qd)
    dqd, dkd, dvd = torch.empty_like(qd), torch.empty_like(kd), torch.empty_like(vd)
    b_den = tk.attention_bwd_params(qd, kd, vd, od, lsed, gd, dqd, dkd, dvd, causal, kernel=kernel)
    tk.attention_backward_prepare(b_den)
    tk.attention(pd, stream)  # the dense O and L the backward reads
    bwd_dense = us(lambda: tk.attention_backward(b_den, stream))
    return ours, dense, flash, flops, err, bwd, bwd_dense


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    kernel = int(os.environ.get("VARLEN_KERNEL", "0"))
    print("| lengths | Hq/Hkv | D | causal | varlen µs | dense µs (same tokens / padded) | "
          "varlen/dense speed | varlen TFLOP/s | SDPA flash padded µs | bwd varlen µs | "
          "bwd dense µs | bwd varlen/dense speed | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lens, hq, hkv, d, causal in SHAPES:
        ours, dense, flash, flops, err, bwd, bwd_d = run(tk, stream, lens, hq, hkv, d, causal,
                                                         kernel)
        same = "same" if len(set(lens)) == 1 else "padded"
        ls = f"{len(lens)}x{lens[0]}" if same == "same" else ",".join(map(str, lens))
        print(f"| {ls} | {hq}/{hkv} | {d} | {int(causal)} | {ours:.1f} | {dense:.1f} ({same}) | "
              f"{dense / ours:.3f} | {flops / ours / 1e6:.0f} | {flash:.1f} | {bwd:.1f} | "
              f"{bwd_d:.1f} | {bwd_d / bwd:.3f} | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
