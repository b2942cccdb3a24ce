"""LayerNorm and RMSNorm fused with the residual add (tk_norm_forward / tk_norm_backward):
first checked against float64 PyTorch at ragged shapes (forward and every gradient, outputs
poisoned with NaN, fresh inputs each run), then timed beside torch eager and torch.compile
(Triton) in the same run: GB/s of the bytes each call must move (inputs read once, outputs
written once), against the 4.27 TB/s copy line (bench/RESULTS.md). triton do_bench, median,
L2 flushed before each run.

The forward of every side computes h = x + residual (bf16, written) and y = norm(h)·w (+ b)
with f32 statistics saved; the backward takes dy (and dh, the residual stream's gradient)
and gives dx = dh + ∂y/∂h·dy, dweight and dbias (f32).
Environment: NORM_SHAPES=R:C,... replaces the timed shapes; NORM_CHECK_ONLY=1 skips timing;
NORM_SWEEP=1 times ours alone at each block shape (warps, round columns) instead, LayerNorm
with residual, weight and bias (what tk_norm_shape_for is tuned on).
Usage (GPU machine): python3 bench/bench_norm.py build-device"""
import os
import sys

import torch
import torch._dynamo
import torch._functorch.config
import torch.nn.functional as F
from triton.testing import do_bench

from bench_util import bandwidth_table, rel
from tk_ctypes import TK

COPY_TBS = 4.27
LAYER, RMS = 0, 1
CHECK_SHAPES = [(1, 1), (17, 33), (100, 257), (333, 1000), (1000, 768), (513, 2049),
                (2048, 4096), (64, 5120), (7, 8192), (3, 16384), (4097, 1536), (129, 12288)]
TIME_SHAPES = [(16384, 768), (16384, 1024), (16384, 2048), (16384, 4096), (8192, 8192),
               (4096, 16384)]


def ref_norm(kind, h, w, b, eps):
    """Float64 reference of y from the rounded h."""
    if kind == LAYER:
        return F.layer_norm(h, h.shape[-1:], w, b, eps)
    return F.rms_norm(h, h.shape[-1:], w, eps)


def make(kind, R, C, dt, residual=True, weight=True, bias=True):
    dev = "cuda"
    x = (torch.rand(R, C, device=dev) * 2 + 2).to(dt)  # offset: cancellation would show
    r = (torch.rand(R, C, device=dev) * 2 - 1).to(dt) if residual else None
    w = (torch.rand(C, device=dev) + 0.5).to(dt) if weight else None
    b = (torch.rand(C, device=dev) * 2 - 1).to(dt) if bias and kind == LAYER else None
    return x, r, w, b


def check(tk, stream, kind, R, C, dt, residual, weight, bias, eps=1e-5):
    x, r, w, b = make(kind, R, C, dt, residual, weight, bias)
    nan = lambda *s, d=dt: torch.full(s, float("nan"), device="cuda", dtype=d)
    h = nan(R, C) if residual else None
    y, mean, rstd = nan(R, C), nan(R, d=torch.float32), nan(R, d=torch.float32)
    p = tk.norm_params(kind, x, y, r, h, w, b, mean if kind == LAYER else None, rstd, eps)
    tk.norm_forward(p, stream)
    hin = h if residual else x
    dy = torch.randn(R, C, device="cuda").to(dt)
    dh = torch.randn(R, C, device="cuda").to(dt) if residual else None
    dx = nan(R, C)
    dw = nan(C, d=torch.float32) if weight else None
    db = nan(C, d=torch.float32) if b is not None else None
    q = tk.norm_bwd_params(kind, hin, dy, dx, mean if kind == LAYER else None, rstd, dh, w, dw, db)
    tk.norm_backward(q, stream)
    torch.cuda.synchronize()

    hr = (x + r) if residual else x  # torch rounds the sum to dt as our h does
    h64 = hr.double().requires_grad_()
    w64 = w.double().requires_grad_() if weight else None
    b64 = b.double().requires_grad_() if b is not None else None
    y64 = ref_norm(kind, h64, w64, b64, eps)
    ins = [t for t in (h64, w64, b64) if t is not None]
    grads = torch.autograd.grad(y64, ins, dy.double())
    e = {"y": rel(y, y64), "dx": rel(dx, grads[0] + (dh.double() if residual else 0))}
    if residual:
        e["h"] = rel(h, hr)
    hd = hr.double()
    if kind == LAYER:
        e["mean"] = rel(mean, hd.mean(-1))
        e["rstd"] = rel(rstd, (hd.var(-1, unbiased=False) + eps).rsqrt())
    else:
        e["rstd"] = rel(rstd, ((hd * hd).mean(-1) + eps).rsqrt())
    if weight:
        e["dw"] = rel(dw, grads[1])
    if b is not None:
        e["db"] = rel(db, grads[2])
    limit = {"y": 1e-2, "dx": 1e-2, "h": 0, "mean": 1e-5, "rstd": 1e-4, "dw": 1e-4, "db": 1e-5}
    ok = all(v <= limit[k] for k, v in e.items())
    name = (f"{'layer' if kind == LAYER else 'rms  '} {R}x{C} {str(dt)[6:]}"
            f"{' res' if residual else ''}{' w' if weight else ''}{' b' if b is not None else ''}")
    print(f"check {name}: " + " ".join(f"{k} {v:.1e}" for k, v in e.items()) +
          ("" if ok else "  FAIL"), flush=True)
    return ok


def timed(kind, R, C, tk, stream):
    """(ours, eager, compiled) forward and backward microseconds at R x C, bf16."""
    dt, eps = torch.bfloat16, 1e-5
    x, r, w, b = make(kind, R, C, dt)
    h, y = torch.empty_like(x), torch.empty_like(x)
    mean = torch.empty(R, device="cuda") if kind == LAYER else None
    rstd = torch.empty(R, device="cuda")
    p = tk.norm_params(kind, x, y, r, h, w, b, mean, rstd, eps)
    dy, dh, dx = torch.randn_like(x), torch.randn_like(x), torch.empty_like(x)
    dw = torch.empty(C, device="cuda")
    db = torch.empty(C, device="cuda") if kind == LAYER else None
    q = tk.norm_bwd_params(kind, h, dy, dx, mean, rstd, dh, w, dw, db)
    us = {}
    us["ours", "fwd"] = do_bench(lambda: tk.norm_forward(p, stream), return_mode="median") * 1e3
    us["ours", "bwd"] = do_bench(lambda: tk.norm_backward(q, stream), return_mode="median") * 1e3

    def fwd(x, r, w, b):
        h = x + r
        return h, ref_norm(kind, h, w, b, eps)

    params = [t for t in (w, b) if t is not None]
    for name, f in (("eager", fwd), ("compile", torch.compile(fwd))):
        xs, rs = x.clone().requires_grad_(), r.clone().requires_grad_()
        ps = [t.clone().requires_grad_() for t in params]
        args = (xs, rs, ps[0], ps[1] if len(ps) > 1 else None)
        with torch.no_grad():
            f(*args)  # compile the inference graph before timing
            us[name, "fwd"] = do_bench(lambda: f(*args), return_mode="median") * 1e3
        ho, yo = f(*args)
        bwd = lambda: torch.autograd.grad([ho, yo], [xs] + ps, [dh, dy], retain_graph=True)
        bwd()
        us[name, "bwd"] = do_bench(bwd, return_mode="median") * 1e3
    return us


def sweep(tk, stream, shapes):
    for R, C in shapes:
        x, r, w, b = make(LAYER, R, C, torch.bfloat16)
        h, y, dx = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        mean, rstd = torch.empty(R, device="cuda"), torch.empty(R, device="cuda")
        dy, dh = torch.randn_like(x), torch.randn_like(x)
        dw, db = torch.empty(C, device="cuda"), torch.empty(C, device="cuda")
        gb = 4 * R * C * 2 / 1e9
        for warps in (4, 8, 16):
            span = 32 * warps
            one = min(-(-C // span) * span, 8 * span)
            for cols in sorted({one, span, 2 * span, 4 * span}):
                if cols > one or cols > 1024:  # two rounds' stages: 1024 fits every kernel
                    continue
                res = []
                for d in ("fwd", "bwd"):
                    if d == "fwd":
                        p = tk.norm_params(LAYER, x, y, r, h, w, b, mean, rstd)
                        call = tk.norm_forward
                    else:
                        p = tk.norm_bwd_params(LAYER, h, dy, dx, mean, rstd, dh, w, dw, db)
                        call = tk.norm_backward
                    tk.norm_shape(p, warps, cols)
                    try:
                        call(p, stream)
                        t = do_bench(lambda: call(p, stream), return_mode="median") * 1e3
                        res.append(f"{t:7.1f} us {gb / (t * 1e-6):6.0f} GB/s")
                    except RuntimeError as e:
                        res.append(f"({str(e)[-60:]})")
                print(f"sweep {R}x{C} w{warps} c{cols}: fwd {res[0]} | bwd {res[1]}", flush=True)


def main():
    # the timed backward runs again on one graph (retain_graph), which donated buffers forbid
    torch._functorch.config.donated_buffer = False
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    fails = 0
    for i, (R, C) in enumerate([] if os.environ.get("NORM_SWEEP") else CHECK_SHAPES):
        dt = torch.float16 if i % 4 == 3 else torch.bfloat16
        for kind in (LAYER, RMS):
            flags = [(1, 1, 1), (0, 1, 0), (1, 0, 0)][i % 3]
            fails += not check(tk, stream, kind, R, C, dt, *flags)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("NORM_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    env = os.environ.get("NORM_SHAPES")
    shapes = [tuple(int(v) for v in s.split(":")) for s in env.split(",")] if env else TIME_SHAPES
    if os.environ.get("NORM_SWEEP"):
        return sweep(tk, stream, shapes)
    torch._dynamo.config.recompile_limit = 64  # a graph per shape and grad mode
    rows = []
    for kind in (LAYER, RMS):
        for R, C in shapes:
            us = timed(kind, R, C, tk, stream)
            # bytes: fwd reads x, r and writes h, y; bwd reads h, dy, dh and writes dx
            # (weights, statistics and partials are under 1% at these shapes)
            gb = {"fwd": 4 * R * C * 2 / 1e9, "bwd": 4 * R * C * 2 / 1e9}
            for d in ("fwd", "bwd"):
                bw = {s: gb[d] / (us[s, d] * 1e-6) for s in ("ours", "eager", "compile")}
                rows.append((("layer" if kind == LAYER else "rms"), f"{R}x{C}", d,
                             us["ours", d], bw["ours"], bw["eager"], bw["compile"]))
                print(f"{rows[-1][0]} {R}x{C} {d}: ours {us['ours', d]:.1f} us", flush=True)
    bandwidth_table("norm", "R x C", rows, COPY_TBS)


if __name__ == "__main__":
    main()
