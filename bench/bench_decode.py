"""Attention decoding: microseconds of tk_attention_forward at serving shapes (1 and 16
queries against 1k-128k keys, B 1-64, GQA 32/8 and 8/1, D 128, bf16, non-causal: SDPA's
causal with Nq < Nkv is aligned top-left) beside torch SDPA with the cuDNN and flash
backends, same run, median of triton do_bench (which flushes L2 before each run, so K/V
come from DRAM for everyone). Bandwidth: the K/V bytes over our time, against the
4.27 TB/s copy line (bench/RESULTS.md). Each shape is checked against SDPA first.
Environment: DECODE_SPLITS forces num_splits (default: the library's choice);
DECODE_SHAPES=B:Hq:Hkv:Nq:Nkv,... replaces the shape list; DECODE_SWEEP=1 times each
shape at 1, 2, 4, ... 256 splits instead (what the split heuristic is tuned on);
DECODE_PAGE=n runs ours on a paged cache of n-token pages in a shuffled order (the same
keys; seqlens_kv all Nkv) beside the same peers on the dense tensors. DECODE_PROFILE=1
prints, per shape, where a call's GPU time goes: each kernel's median duration and the span
from the call's first kernel start to its last kernel end (torch.profiler, L2 flushed before
each call), ours and cuDNN's. DECODE_NCU=1 only makes a few calls of ours (for ncu).
Usage (GPU machine): python3 bench/bench_decode.py build-device"""
import ctypes
import os
import sys
import time

import torch
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench_util import profile, sdpa
from tk_ctypes import TK

COPY_TBS = 4.27
SHAPES = [(1, 32, 8, 1, n) for n in (1024, 8192, 32768, 131072)] + \
         [(8, 32, 8, 1, 8192), (32, 32, 8, 1, 4096), (64, 32, 8, 1, 4096), (64, 32, 8, 1, 16384)] + \
         [(1, 8, 1, 1, 8192), (16, 8, 1, 1, 32768)] + \
         [(1, 32, 8, 16, 8192), (8, 32, 8, 16, 8192), (1, 8, 1, 16, 65536)]


def shapes():
    env = os.environ.get("DECODE_SHAPES")
    if not env:
        return SHAPES
    return [tuple(int(x) for x in s.split(":")) for s in env.split(",")]


def run(tk, stream, b, hq, hkv, nq, nkv, d=128, splits=0, peers=True):
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, nkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, hq, nq), float("nan"), device="cuda", dtype=torch.float32)
    p = tk.attention_params(q, k, v, o, lse, False)
    p.num_splits = splits
    page = int(os.environ.get("DECODE_PAGE", "0"))
    if page:  # the pool [pages, page, Hkv, D], each sequence's pages shuffled in it
        per = (nkv + page - 1) // page
        order = torch.randperm(b * per, device="cuda", dtype=torch.int32)
        table = order.view(b, per).contiguous()
        pools = []
        for t in (k, v):
            pad = torch.zeros(b, hkv, per * page, d, device="cuda", dtype=t.dtype)
            pad[:, :, :nkv] = t
            pool = torch.empty(b * per, page, hkv, d, device="cuda", dtype=t.dtype)
            pool[order.long()] = pad.view(b, hkv, per, page, d).permute(0, 2, 3, 1, 4) \
                .reshape(b * per, page, hkv, d)
            pools.append(pool)
        lens = torch.full((b,), nkv, device="cuda", dtype=torch.int32)
        p.k, p.v = pools[0].data_ptr(), pools[1].data_ptr()
        p.k_strides = p.v_strides = (ctypes.c_int64 * 4)()
        p.seqlens_kv, p.block_table = lens.data_ptr(), table.data_ptr()
        p.max_pages, p.num_pages, p.page_size = per, b * per, page
        keep = (pools, lens, table)  # alive while p is used
    nbytes = tk.attention_workspace(p)
    ws = torch.empty(max(nbytes, 1) + 256, device="cuda", dtype=torch.uint8)
    p.workspace = (ws.data_ptr() + 255) // 256 * 256
    p.workspace_bytes = nbytes
    tk.attention_prepare(p)
    tk.attention(p, stream)
    ref = sdpa(SDPBackend.MATH, q.float(), k.float(), v.float(), False)
    err = ((o.float() - ref).norm() / ref.norm()).item()
    us = lambda f: do_bench(f, warmup=50, rep=300, return_mode="median") * 1e3
    if os.environ.get("DECODE_NCU"):  # a few calls for a profiler to catch, nothing timed
        for _ in range(4):
            tk.attention(p, stream)
        torch.cuda.synchronize()
        return float("nan"), [float("nan")] * 2, err, 0, 0.0
    if os.environ.get("DECODE_PROFILE") and err <= 1e-2:
        profile(f"B{b} {hq}/{hkv} Nq{nq} Nkv{nkv} ours", lambda: tk.attention(p, stream))
        profile(f"B{b} {hq}/{hkv} Nq{nq} Nkv{nkv} cuDNN",
                lambda: sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, False))
    ours = us(lambda: tk.attention(p, stream)) if err <= 1e-2 else float("nan")
    torch.cuda.synchronize()
    t0 = time.perf_counter()  # the host's share: the call's CPU time, launches queued
    for _ in range(100):
        tk.attention(p, stream)
    host = (time.perf_counter() - t0) * 1e4
    torch.cuda.synchronize()
    peer_us = []
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION) if peers else ():
        try:
            peer_us.append(us(lambda: sdpa(backend, q, k, v, False)))
        except RuntimeError:
            peer_us.append(float("nan"))
    kv_bytes = 2 * b * hkv * nkv * d * 2
    return ours, peer_us, err, kv_bytes, host


def sweep(tk, stream):
    print("| B | Hq/Hkv | Nq | Nkv | " + " | ".join(f"S{s} µs" for s in SWEEP) + " | chosen µs |")
    print("|---|---|---|---|" + "---|" * (len(SWEEP) + 1))
    for b, hq, hkv, nq, nkv in shapes():
        row = []
        for s in SWEEP + [0]:
            row.append(run(tk, stream, b, hq, hkv, nq, nkv, splits=s, peers=False)[0]
                       if s <= (nkv + 63) // 64 else float("nan"))
        print(f"| {b} | {hq}/{hkv} | {nq} | {nkv} | " + " | ".join(f"{t:.1f}" for t in row) +
              " |", flush=True)


SWEEP = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    if os.environ.get("DECODE_SWEEP"):
        return sweep(tk, stream)
    splits = int(os.environ.get("DECODE_SPLITS", "0"))
    print("| B | Hq/Hkv | Nq | Nkv | TileKittens µs | cuDNN µs | FA2 µs | TK/cuDNN speed | "
          "TK TB/s | % of copy | TK host µs/call | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b, hq, hkv, nq, nkv in shapes():
        ours, (cud, fa2), err, kvb, host = run(tk, stream, b, hq, hkv, nq, nkv, splits=splits)
        tbs = kvb / (ours * 1e-6) / 1e12
        print(f"| {b} | {hq}/{hkv} | {nq} | {nkv} | {ours:.1f} | {cud:.1f} | {fa2:.1f} | "
              f"{cud / ours:.2f} | {tbs:.2f} | {100 * tbs / COPY_TBS:.0f} | {host:.1f} | "
              f"{err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
