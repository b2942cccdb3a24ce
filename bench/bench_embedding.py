"""Token and position embeddings (tk_embedding_forward / tk_embedding_backward) and the
linear layers' bias gradient (tk_bias_grad): first checked against float64 PyTorch at ragged
shapes (out = wte[tokens] + wpe[t]; the gradients by autograd: dwte summed by token,
dwpe over the batch, dbias = dy.sum(0); accumulate on and off; bf16, f16, f32; outputs
poisoned with NaN), each backward run twice (the same bits); then timed beside torch eager
and torch.compile at GPT-2 124M's shapes (B·T = 16 x 1024, C = 768, V = 50257 and 256; the
bias of c_proj, c_attn and c_fc: 768, 2304, 3072): µs, and GB/s of the bytes a call must
move beside a measured copy line (a device-to-device copy of 1 GiB). triton do_bench,
median, L2 flushed before each run.

Torch's side: the forward F.embedding(tokens, wte) + wpe[:T]; its backward by autograd
(embedding_dense_backward: a sort of the tokens, then a dense [V, C] gradient written whole,
and the sum over the batch for wpe), from bf16 dout into bf16 grads; the bias
dy.sum(0, dtype=float32). Ours accumulates into f32 grads (accumulate 1: a trainer's
gradient accumulation), touching only the rows its tokens name.
Bytes a call must move: forward, the tokens, the rows read (wte's of each position, wpe's
T rows) and out written; backward, dout read once, the distinct tokens' dwte rows and dwpe's
T rows read and written in f32; bias, dy read and dbias read and written.
Environment: EMB_CHECK_ONLY=1 skips timing.
Usage (GPU machine): python3 bench/bench_embedding.py build-device"""
import os
import sys

import torch
import torch._dynamo
import torch.nn.functional as F
from triton.testing import do_bench

from bench_util import rel
from tk_ctypes import TK

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# (B, T, C, V, max_seq, out dtype, weight dtype, accumulate, hot tokens, bad tokens)
EMB_CHECKS = [
    (1, 1, 16, 1, 1, "f32", "f32", 0, 0, 0),
    (3, 37, 100, 7, 40, "bf16", "bf16", 1, 0, 1),
    (2, 50, 200, 256, 64, "f16", "f16", 0, 1, 0),
    (4, 64, 768, 50257, 128, "bf16", "bf16", 1, 0, 1),
    (5, 200, 768, 300, 256, "bf16", "f32", 1, 1, 0),
    (2, 300, 48, 70000, 300, "bf16", "bf16", 0, 0, 1),
    (3, 1000, 16, 2, 1000, "f32", "bf16", 1, 2, 0),
    (2, 333, 1600, 50304, 512, "bf16", "bf16", 0, 1, 1),
    (16, 1024, 768, 50257, 1024, "bf16", "bf16", 1, 0, 0),
    (16, 1024, 768, 256, 1024, "bf16", "bf16", 0, 1, 0),
]
# (M, N, dtype, accumulate, row pad)
BIAS_CHECKS = [(1, 1, "bf16", 0, 0), (1000, 100, "bf16", 1, 0), (257, 2304, "f16", 0, 8),
               (513, 64, "f32", 1, 3), (16384, 3072, "bf16", 1, 0), (12345, 768, "bf16", 0, 0)]
EMB_TIMED = [(16, 1024, 768, 50257), (16, 1024, 768, 256)]
BIAS_TIMED = [(16384, 768), (16384, 2304), (16384, 3072)]


def tokens_for(B, T, V, hot, bad):
    t = torch.randint(0, V, (B, T), device="cuda", dtype=torch.int32)
    u = torch.rand(B, T, device="cuda")
    if hot == 1:  # runs: 70 % of the tokens one of three values
        t = torch.where(u < 0.2, 0, torch.where(u < 0.45, V // 2, torch.where(u < 0.7, V - 1, t)))
    if hot == 2:  # nearly all one token: a run over many summing warps
        t = torch.where(u < 0.94, V - 1, t)
    t = t.to(torch.int32)
    if bad:  # out of range: NaN rows forward, no dwte row backward
        flat = t.view(-1)
        vals = torch.tensor([-1, V, -2**31, 2**31 - 1], device="cuda", dtype=torch.int32)
        idx = torch.arange(5, flat.numel(), 13, device="cuda")
        flat[idx] = vals[idx % 4]
    return t


def nan(*shape, dt=torch.float32):
    return torch.full(shape, float("nan"), device="cuda", dtype=dt)


def check_embedding(tk, stream, B, T, C, V, P, dt, wdt, acc, hot, bad):
    dt, wdt = DT[dt], DT[wdt]
    tok = tokens_for(B, T, V, hot, bad)
    wte = (torch.rand(V, C, device="cuda") * 2 - 1).to(wdt)
    wpe = (torch.rand(P, C, device="cuda") * 2 - 1).to(wdt)
    out = nan(B, T, C, dt=dt)
    tk.embedding_forward(tk.embedding_params(tok, wte, out, wpe), stream)
    dout = (torch.rand(B, T, C, device="cuda") * 2 - 1).to(dt)
    dwte0 = torch.rand(V, C, device="cuda") * 2 - 1 if acc else nan(V, C)
    dwpe0 = torch.rand(P, C, device="cuda") * 2 - 1 if acc else nan(P, C)
    dwte, dwpe = dwte0.clone(), dwpe0.clone()
    p = tk.embedding_bwd_params(tok, dout, dwte, dwpe, acc)
    tk.embedding_backward(p, stream)
    torch.cuda.synchronize()
    first = (dwte.clone(), dwpe.clone())
    dwte.copy_(dwte0), dwpe.copy_(dwpe0)
    tk.embedding_backward(p, stream)  # again: the same bits
    torch.cuda.synchronize()
    same = torch.equal(first[0].view(torch.int32), dwte.view(torch.int32)) and \
        torch.equal(first[1].view(torch.int32), dwpe.view(torch.int32))

    ok = (tok >= 0) & (tok < V)
    w64 = wte.double().requires_grad_()
    p64 = wpe.double().requires_grad_()
    ref = F.embedding(torch.where(ok, tok, 0).long(), w64) + p64[:T]
    ref = torch.where(ok[..., None], ref, float("nan"))
    g64 = torch.where(ok[..., None], dout.double(), 0.0)
    gw, _ = torch.autograd.grad(ref, (w64, p64), g64, allow_unused=True)
    gp = dout.double().sum(0)
    base_w = dwte0.double() if acc else torch.zeros_like(gw)
    base_p = dwpe0.double() if acc else torch.zeros(P, C, device="cuda", dtype=torch.float64)
    want_p = base_p.clone()
    want_p[:T] += gp
    e = {"out": rel(torch.where(ok[..., None], out, 0), torch.where(ok[..., None], ref, 0)),
         "nan rows": 0.0 if torch.isnan(out[~ok]).all() else float("inf"),
         "dwte": rel(dwte, base_w + gw), "dwpe": rel(dwpe, want_p)}
    tol = {torch.bfloat16: 1e-2, torch.float16: 3e-3, torch.float32: 1e-6}[dt]
    good = e["out"] <= tol / 2 and e["nan rows"] == 0 and e["dwte"] <= 1e-5 and \
        e["dwpe"] <= 1e-5 and same
    print(f"check emb B{B} T{T} C{C} V{V} {str(dt)[6:]}<-{str(wdt)[6:]}"
          f"{' acc' if acc else ''}{' hot' if hot else ''}{' bad' if bad else ''}: " +
          " ".join(f"{k} {v:.1e}" for k, v in e.items()) + ("" if same else " BITS MOVED") +
          ("" if good else "  FAIL"), flush=True)
    return good


def check_bias(tk, stream, M, N, dt, acc, pad):
    dt = DT[dt]
    dy = (torch.rand(M, N + pad, device="cuda") * 2 - 1).to(dt)[:, :N]
    db0 = torch.rand(N, device="cuda") * 2 - 1 if acc else nan(N)
    db = db0.clone()
    p = tk.bias_grad_params(dy, db, acc)
    tk.bias_grad(p, stream)
    torch.cuda.synchronize()
    first = db.clone()
    db.copy_(db0)
    tk.bias_grad(p, stream)
    torch.cuda.synchronize()
    same = torch.equal(first.view(torch.int32), db.view(torch.int32))
    want = dy.double().sum(0) + (db0.double() if acc else 0)
    e = rel(db, want)
    good = e <= 1e-5 and same
    print(f"check bias M{M} N{N} {str(dt)[6:]}{' acc' if acc else ''} pad{pad}: dbias {e:.1e}" +
          ("" if same else " BITS MOVED") + ("" if good else "  FAIL"), flush=True)
    return good


def us(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, return_mode="median") * 1e3


def copy_line():
    """GB/s of a device-to-device copy of 1 GiB (read + write)."""
    a = torch.empty(1 << 28, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    return 2 * a.numel() * 4 / (us(lambda: b.copy_(a)) * 1e-6) / 1e9


def time_embedding(tk, stream, B, T, C, V):
    bf = torch.bfloat16
    tok = tokens_for(B, T, V, 0, 0)
    wte = (torch.rand(V, C, device="cuda") * 2 - 1).to(bf)
    wpe = (torch.rand(T, C, device="cuda") * 2 - 1).to(bf)
    out, dout = torch.empty(B, T, C, device="cuda", dtype=bf), torch.randn(B, T, C, device="cuda",
                                                                          dtype=bf)
    dwte, dwpe = torch.zeros(V, C, device="cuda"), torch.zeros(T, C, device="cuda")
    pf = tk.embedding_params(tok, wte, out, wpe)
    pb = tk.embedding_bwd_params(tok, dout, dwte, dwpe, 1)
    tl = tok.long()
    r = {("ours", "fwd"): us(lambda: tk.embedding_forward(pf, stream)),
         ("ours", "bwd"): us(lambda: tk.embedding_backward(pb, stream))}

    def fwd(w, p):
        return F.embedding(tl, w) + p[:T]

    for name, wrap in (("eager", lambda f: f), ("compile", torch.compile)):
        f = wrap(fwd)
        with torch.no_grad():
            r[name, "fwd"] = us(lambda: f(wte, wpe))
        w, p = wte.clone().requires_grad_(), wpe.clone().requires_grad_()
        o = f(w, p)
        r[name, "bwd"] = us(lambda: torch.autograd.grad(o, (w, p), dout, retain_graph=True))
    N, U = B * T, torch.unique(tok).numel()
    gb = {"fwd": (4 * N + 2 * N * C + 2 * T * C + 2 * N * C) / 1e9,
          "bwd": (4 * N + 2 * N * C + 8 * U * C + 8 * T * C) / 1e9}
    return r, gb


def time_bias(tk, stream, M, N):
    dy = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    db = torch.zeros(N, device="cuda")
    p = tk.bias_grad_params(dy, db, 1)
    f = lambda x: x.sum(0, dtype=torch.float32)  # noqa: E731
    fc = torch.compile(f)
    r = {("ours", "bwd"): us(lambda: tk.bias_grad(p, stream)),
         ("eager", "bwd"): us(lambda: f(dy)), ("compile", "bwd"): us(lambda: fc(dy))}
    return r, {"bwd": (2 * M * N + 8 * N) / 1e9}


def table(rows, copy_gbs):
    print(f"\ncopy line (1 GiB device-to-device): {copy_gbs:.0f} GB/s")
    print("| kernel | shape | pass | ours µs | ours GB/s | % copy | eager µs | compile µs "
          "| eager/ours | compile/ours |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, s, d, r, gb in rows:
        o, e, c = r["ours", d], r["eager", d], r["compile", d]
        bw = gb[d] / (o * 1e-6)
        print(f"| {k} | {s} | {d} | {o:.1f} | {bw:.0f} | {100 * bw / copy_gbs:.0f} | {e:.1f} "
              f"| {c:.1f} | {e / o:.2f} | {c / o:.2f} |")


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    fails = sum(not check_embedding(tk, stream, *c) for c in EMB_CHECKS)
    fails += sum(not check_bias(tk, stream, *c) for c in BIAS_CHECKS)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("EMB_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    torch._dynamo.config.recompile_limit = 64
    rows = []
    for B, T, C, V in EMB_TIMED:
        r, gb = time_embedding(tk, stream, B, T, C, V)
        for d in ("fwd", "bwd"):
            rows.append(("embedding", f"B{B} T{T} C{C} V{V}", d, r, gb))
            print(f"embedding B{B} T{T} C{C} V{V} {d}: ours {r['ours', d]:.1f} us, eager "
                  f"{r['eager', d]:.1f}, compile {r['compile', d]:.1f}", flush=True)
    for M, N in BIAS_TIMED:
        r, gb = time_bias(tk, stream, M, N)
        rows.append(("bias_grad", f"{M}x{N}", "bwd", r, gb))
        print(f"bias_grad {M}x{N}: ours {r['ours', 'bwd']:.1f} us, eager "
              f"{r['eager', 'bwd']:.1f}, compile {r['compile', 'bwd']:.1f}", flush=True)
    table(rows, copy_line())


if __name__ == "__main__":
    main()
