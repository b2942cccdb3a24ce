"""Softmax cross-entropy, loss and gradient fused (tk_cross_entropy): first checked against
float64 PyTorch (F.cross_entropy with reduction='none' and its autograd gradient for the
per-row upstream gradient or a scalar scale) at ragged shapes, every dtype, ignored rows,
outputs poisoned with NaN, in place and not; then timed beside torch eager and torch.compile
of F.cross_entropy (mean over the rows, forward and backward) at a GPT-2 trainer's shapes:
µs and GB/s of the bytes a call must move (logits read, gradient written, per-row losses
written; the forward alone: logits read, losses written), against the 4.27 TB/s copy line
(bench/RESULTS.md). triton do_bench, median, L2 flushed before each run.

Ours runs the two-pass kernel (statistics, then the gradient) and the mean's reduction; the
scale is 1/N as the mean's gradient. Torch's eager backward is its own pass (log_softmax
saved, then its backward), torch.compile fuses what Triton can.
Environment: XENT_SHAPES=N:V,... replaces the timed shapes; XENT_CHECK_ONLY=1 skips timing;
XENT_SWEEP=1 times ours alone at each layout and block shape (split, warps, round columns),
the forward and backward in bf16 (what tk_xent_rows_config's choice is to be tuned on).
Usage (GPU machine): python3 bench/bench_xent.py build-device"""
import os
import sys

import torch
import torch._dynamo
import torch.nn.functional as F
from triton.testing import do_bench

from bench_util import bandwidth_table, rel
from tk_ctypes import TK

COPY_TBS = 4.27
IGNORE = -1
# (N, V, dtype, per-row dloss, in place, lse + mean, extreme logits)
CHECK_CASES = [
    (1, 1, torch.bfloat16, 0, 0, 1, 0), (37, 7, torch.float16, 1, 0, 1, 0),
    (100, 256, torch.bfloat16, 0, 1, 1, 0), (333, 1000, torch.float32, 1, 0, 1, 1),
    (64, 4099, torch.bfloat16, 0, 0, 1, 0), (3, 50257, torch.bfloat16, 1, 1, 1, 0),
    (129, 50257, torch.float16, 0, 0, 0, 0), (17, 65536, torch.float32, 0, 0, 1, 0),
    (1000, 300, torch.float16, 1, 1, 0, 1), (513, 2049, torch.bfloat16, 0, 0, 1, 1),
    (2048, 50304, torch.bfloat16, 0, 1, 1, 0), (4097, 256, torch.float32, 1, 0, 1, 0),
]
TIME_SHAPES = [(8192, 256), (16384, 256), (8192, 50257), (16 * 1024, 50304)]


def make(N, V, dt, extreme=False):
    scale = 1e4 if extreme and dt != torch.float16 else 4.0
    x = ((torch.rand(N, V, device="cuda") * 2 - 1) * scale).to(dt)
    t = torch.randint(0, V, (N,), device="cuda", dtype=torch.int32)
    t[3::7] = IGNORE  # every seventh row from the fourth: ignored
    t[:1] = 0
    t[1:2] = V - 1
    return x, t


def check(tk, stream, N, V, dt, per_row, in_place, stats, extreme):
    x, t = make(N, V, dt, extreme)
    x0 = x.clone()
    nan = lambda *s, d=torch.float32: torch.full(s, float("nan"), device="cuda", dtype=d)
    loss, lse, mean = nan(N), nan(N), nan(1)
    dx = x if in_place else nan(N, V, d=dt)
    dloss = torch.randn(N, device="cuda") if per_row else None
    scale = 1.0 / N
    p = tk.xent_params(x, t, loss, dx, dloss, scale, lse if stats else None,
                       mean if stats else None, IGNORE)
    tk.cross_entropy(p, stream)
    torch.cuda.synchronize()

    x64 = x0.double().requires_grad_()
    l64 = F.cross_entropy(x64, t.long(), reduction="none", ignore_index=IGNORE)
    up = dloss.double() if per_row else torch.full_like(l64, scale)
    (g64,) = torch.autograd.grad(l64, x64, up)
    e = {"loss": rel(loss, l64), "dx": rel(dx, g64)}
    if stats:
        e["lse"] = rel(lse, torch.logsumexp(x0.double(), -1))
        counted = (t != IGNORE).sum()
        e["mean"] = rel(mean, (l64.sum() / counted).reshape(1))
    tol = {torch.bfloat16: 1e-2, torch.float16: 3e-3, torch.float32: 1e-5}[dt]
    ok = all(v <= tol for k, v in e.items() if k in ("loss", "dx", "lse"))
    ok = ok and e.get("mean", 0) <= 1e-5
    name = (f"{N}x{V} {str(dt)[6:]}{' rowscale' if per_row else ''}"
            f"{' inplace' if in_place else ''}{' lse+mean' if stats else ''}"
            f"{' extreme' if extreme else ''}")
    print(f"check {name}: " + " ".join(f"{k} {v:.1e}" for k, v in e.items()) +
          ("" if ok else "  FAIL"), flush=True)
    return ok


def timed(N, V, tk, stream):
    """{(side, pass): µs} at N x V, bf16: ours, torch eager, torch.compile; the forward
    alone (the loss, no gradient) and forward + backward (mean loss, its gradient)."""
    dt = torch.bfloat16
    x, t = make(N, V, dt)
    loss, mean = torch.empty(N, device="cuda"), torch.empty(1, device="cuda")
    dx = torch.empty_like(x)
    pf = tk.xent_params(x, t, loss, ignore_index=IGNORE)
    pb = tk.xent_params(x, t, loss, dx, None, 1.0 / N, None, mean, IGNORE)
    us = {("ours", "fwd"): do_bench(lambda: tk.cross_entropy(pf, stream), return_mode="median"),
          ("ours", "fwd+bwd"): do_bench(lambda: tk.cross_entropy(pb, stream),
                                        return_mode="median")}
    tl = t.long()

    def fwd(x):
        return F.cross_entropy(x, tl, ignore_index=IGNORE, reduction="none")

    def mean_loss(x):
        return F.cross_entropy(x, tl, ignore_index=IGNORE)

    for name, wrap in (("eager", lambda f: f), ("compile", torch.compile)):
        f, fm = wrap(fwd), wrap(mean_loss)
        with torch.no_grad():
            f(x)  # compile the inference graph before timing
            us[name, "fwd"] = do_bench(lambda: f(x), return_mode="median")
        xs = x.clone().requires_grad_()
        fb = lambda: torch.autograd.grad(fm(xs), xs)[0]  # AOTAutograd: both graphs compiled
        fb()
        us[name, "fwd+bwd"] = do_bench(fb, return_mode="median")
    return {k: v * 1e3 for k, v in us.items()}


def sweep(tk, stream, shapes):
    for N, V in shapes:
        x, t = make(N, V, torch.bfloat16)
        loss, dx = torch.empty(N, device="cuda"), torch.empty_like(x)
        gb = 2 * N * V * 2 / 1e9
        for split in (0, 1):
            for warps in (4, 8, 16):
                span = 32 * warps
                for cols in sorted({span, 2 * span, 4 * span}):
                    if cols > 1024 or (split and cols < 128):
                        continue
                    p = tk.xent_params(x, t, loss, dx, None, 1.0 / N, ignore_index=IGNORE)
                    tk.xent_shape(p, split, warps, cols)
                    try:
                        tk.cross_entropy(p, stream)
                        us = do_bench(lambda: tk.cross_entropy(p, stream),
                                      return_mode="median") * 1e3
                        res = f"{us:8.1f} us {gb / (us * 1e-6):6.0f} GB/s"
                    except RuntimeError as e:
                        res = f"({str(e)[-60:]})"
                    print(f"sweep {N}x{V} split{split} w{warps} c{cols}: {res}", flush=True)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    fails = 0
    for case in [] if os.environ.get("XENT_SWEEP") else CHECK_CASES:
        fails += not check(tk, stream, *case)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("XENT_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    env = os.environ.get("XENT_SHAPES")
    shapes = [tuple(int(v) for v in s.split(":")) for s in env.split(",")] if env else TIME_SHAPES
    if os.environ.get("XENT_SWEEP"):
        return sweep(tk, stream, shapes)
    torch._dynamo.config.recompile_limit = 64  # a graph per shape and grad mode
    rows = []
    for N, V in shapes:
        us = timed(N, V, tk, stream)
        # bytes a call must move: logits read, the gradient written (fwd+bwd), losses written
        x_gb = N * V * 2 / 1e9
        gb = {"fwd": x_gb + 4 * N / 1e9, "fwd+bwd": 2 * x_gb + 4 * N / 1e9}
        for d in ("fwd", "fwd+bwd"):
            bw = {s: gb[d] / (us[s, d] * 1e-6) for s in ("ours", "eager", "compile")}
            rows.append(("xent", f"{N}x{V}", d, us["ours", d], bw["ours"], bw["eager"],
                         bw["compile"]))
            print(f"xent {N}x{V} {d}: ours {us['ours', d]:.1f} us, eager "
                  f"{us['eager', d]:.1f}, compile {us['compile', d]:.1f}", flush=True)
    bandwidth_table("xent", "N x V", rows, COPY_TBS)


if __name__ == "__main__":
    main()
