"""The optimizer step of a GPT-2 trainer (tk_grad_norm + tk_adamw): the global gradient norm,
clipping and AdamW over one flat parameter, with the weights' bf16 copy written.

First checked against float64 PyTorch: torch.nn.utils.clip_grad_norm_ then one step of
torch.optim.AdamW with the same hyperparameters, in float64 from the same f32 state (the
moments of earlier steps at t > 1), at ragged sizes up to GPT-2 124M's parameter count, f32 and
bf16 gradients, clipping active and not, weight decay 0 and 0.1; outputs poisoned with NaN.
Then timed at 124,475,904 parameters beside torch.optim.AdamW(fused=True) after
clip_grad_norm_(foreach=True) and the bf16 cast of the weights (what a torch trainer with a
bf16 forward runs): triton do_bench, median, L2 flushed before each run. GB/s counts the bytes
a step must move: G read by the norm, then W, m, v, G read and W, m, v and the bf16 copy written
(34 bytes a parameter with f32 gradients, 30 with bf16; torch's fused AdamW takes the
parameter's dtype for its gradient, so its side reads f32 gradients in both rows), against a device copy's GB/s measured
in the same run.
Environment: ADAMW_N=n times another size; ADAMW_CHECK_ONLY=1 skips timing; ADAMW_SWEEP=1
times our two kernels alone at each block shape (warps, round columns) and row width instead.
Usage (GPU machine): python3 bench/bench_adamw.py build-device"""
import os
import sys

import torch
from triton.testing import do_bench

from bench_util import rel
from tk_ctypes import TK

GPT2_124M = 124_475_904
CHECK_NS = [1, 5, 1000, 4097, 100_003, 1_000_003, GPT2_124M]
LR, BETAS, EPS = 6e-4, (0.9, 0.95), 1e-8


def state(n, gdt, t, seed):
    """W, m, v (f32; the moments zero at t = 1) and G (gdt) on the device."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda lo, hi: torch.rand(n, device="cuda", generator=g) * (hi - lo) + lo
    w = r(-1, 1)
    m = r(-0.01, 0.01) if t > 1 else torch.zeros(n, device="cuda")
    v = r(0, 1e-3) if t > 1 else torch.zeros(n, device="cuda")
    return w, m, v, r(-0.05, 0.05).to(gdt)


def ours(tk, stream, w, m, v, grad, wl, norm, max_norm, wd, t):
    """Our step in place on w, m, v; wl and norm written."""
    tk.grad_norm(tk.grad_norm_params(grad, norm), stream)
    p = tk.adamw_params(w, m, v, grad, wl, norm if max_norm else None, max_norm, LR, *BETAS, EPS,
                        wd, t)
    tk.adamw(p, stream)


def reference(w, m, v, grad, max_norm, wd, t):
    """Float64 torch: (weights, m, v, the norm) after clip_grad_norm_ and one AdamW step."""
    p = torch.nn.Parameter(w.double().clone())
    p.grad = grad.double().clone()
    norm = torch.linalg.vector_norm(p.grad)
    if max_norm:
        norm = torch.nn.utils.clip_grad_norm_([p], max_norm, foreach=False)
    opt = torch.optim.AdamW([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=wd, foreach=False)
    opt.state[p] = {"step": torch.tensor(float(t - 1)), "exp_avg": m.double().clone(),
                    "exp_avg_sq": v.double().clone()}
    opt.step()
    s = opt.state[p]
    return p.detach(), s["exp_avg"], s["exp_avg_sq"], norm


def check(tk, stream, n, gdt, clip, wd, t, seed):
    w0, m0, v0, grad = state(n, gdt, t, seed)
    norm64 = torch.linalg.vector_norm(grad.double()).item()
    max_norm = {0: 0.0, 1: norm64 / 2, 2: norm64 * 2}[clip]  # off, active, inactive
    w, m, v = w0.clone(), m0.clone(), v0.clone()
    wl = torch.full((n,), float("nan"), device="cuda", dtype=torch.bfloat16)
    norm = torch.full((2,), float("nan"), device="cuda")
    ours(tk, stream, w, m, v, grad, wl, norm, max_norm, wd, t)
    torch.cuda.synchronize()
    rw, rm, rv, rn = reference(w0, m0, v0, grad, max_norm, wd, t)
    e = {"norm": abs(norm[0].item() - rn.item()) / rn.item(), "W": rel(w, rw), "m": rel(m, rm),
         "v": rel(v, rv), "dW": rel(w.double() - w0.double(), rw - w0.double())}
    copy_ok = bool((wl == w.to(torch.bfloat16)).all()) and torch.isnan(norm[1]).item()
    # The update read back from f32 weights cannot be closer than the exact step rounded to f32:
    # at lr 6e-4 and |W| ~ 1 that floor alone is ~5e-5, so dW's limit stands on top of it.
    floor = rel(rw.float().double() - w0.double(), rw - w0.double())
    limit = {"norm": 1e-6, "W": 1e-6, "m": 1e-6, "v": 1e-6, "dW": 2e-5 + 2 * floor}
    ok = copy_ok and all(v <= limit[k] for k, v in e.items())
    name = f"n {n} {str(gdt)[6:]} clip {('off', 'active', 'inactive')[clip]} wd {wd} t {t}"
    print(f"check {name}: " + " ".join(f"{k} {v:.1e}" for k, v in e.items()) +
          f" (f32 floor {floor:.1e}) copy {'exact' if copy_ok else 'WRONG'}" + ("" if ok else "  FAIL"), flush=True)
    return ok


def ms(fn):
    return do_bench(fn, return_mode="median")


def copy_line(n):
    """GB/s of a device copy of n f32 (read + write)."""
    a, b = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    return 8 * n / (ms(lambda: b.copy_(a)) * 1e-3) / 1e9


def timed(tk, stream, n, gdt):
    """Microseconds of ours and of torch's steps (and of their parts) at n parameters."""
    w, m, v, grad = state(n, gdt, 10, 1)
    wl, norm = torch.empty(n, device="cuda", dtype=torch.bfloat16), torch.empty(1, device="cuda")
    max_norm = torch.linalg.vector_norm(grad.double()).item() / 2
    pn = tk.grad_norm_params(grad, norm)
    pa = tk.adamw_params(w, m, v, grad, wl, norm, max_norm, LR, *BETAS, EPS, 0.1, 10)
    us = {"ours": ms(lambda: (tk.grad_norm(pn, stream), tk.adamw(pa, stream))) * 1e3,
          "ours norm": ms(lambda: tk.grad_norm(pn, stream)) * 1e3,
          "ours step": ms(lambda: tk.adamw(pa, stream)) * 1e3}
    p = torch.nn.Parameter(w.clone())
    p.grad = grad.clone() if gdt == torch.float32 else grad.float()  # torch: the param's dtype
    opt = torch.optim.AdamW([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=0.1, fused=True)
    opt.step()  # the state exists before timing
    clip = lambda: torch.nn.utils.clip_grad_norm_([p], max_norm, foreach=True)
    cast = lambda: wl.copy_(p.detach())
    us["torch"] = ms(lambda: (clip(), opt.step(), cast())) * 1e3
    us["torch no cast"] = ms(lambda: (clip(), opt.step())) * 1e3
    us["torch clip"] = ms(clip) * 1e3
    us["torch step"] = ms(opt.step) * 1e3
    return us


def sweep(tk, stream, n):
    """Our kernels alone at each block shape and row width (f32 and bf16 gradients)."""
    for gdt in (torch.float32, torch.bfloat16):
        w, m, v, grad = state(n, gdt, 10, 2)
        wl, norm = torch.empty(n, device="cuda", dtype=torch.bfloat16), torch.ones(1, device="cuda")
        gs = grad.element_size()
        widths = os.environ.get("ADAMW_WIDTHS", "1024,4096,16384")
        for width in (int(x) for x in widths.split(",")):
            for warps in (4, 8, 16):
                for cols in (16 * warps, 32 * warps, 64 * warps, 128 * warps):
                    res = []
                    for part in ("norm", "step"):
                        if part == "norm":
                            p, call, gb = tk.grad_norm_params(grad, norm, width), tk.grad_norm, gs
                        else:
                            p = tk.adamw_params(w, m, v, grad, wl, norm, 1.0, LR, *BETAS, EPS,
                                                0.1, 10, width)
                            call, gb = tk.adamw, 26 + gs
                        tk.adamw_shape(p, warps, cols)
                        try:
                            call(p, stream)
                            t = ms(lambda: call(p, stream)) * 1e3
                            res.append(f"{t:7.1f} us {gb * n / (t * 1e3):5.0f} GB/s")
                        except RuntimeError as e:
                            res.append(f"({str(e)[-50:]})")
                    print(f"sweep {str(gdt)[6:]} width {width} w{warps} c{cols}: norm {res[0]} | "
                          f"step {res[1]}", flush=True)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    stream = torch.cuda.current_stream().cuda_stream
    n_env = os.environ.get("ADAMW_N")
    n = int(n_env) if n_env else GPT2_124M
    if os.environ.get("ADAMW_SWEEP"):
        return sweep(tk, stream, n)
    fails = 0
    for i, cn in enumerate(CHECK_NS):
        gdt = torch.bfloat16 if i % 2 else torch.float32
        for clip, wd, t in ((1, 0.1, 1), (2, 0.0, 1000), (0, 0.1, 1000)):
            fails += not check(tk, stream, cn, gdt, clip, wd, t, seed=i * 7 + clip)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("ADAMW_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    line = copy_line(n)
    print(f"\ncopy line: {line:.0f} GB/s (f32 copy of {n} elements)")
    print("\n| grad | n | what | µs | GB/s | % copy | ours/torch |")
    print("|---|---|---|---|---|---|---|")
    for gdt in (torch.float32, torch.bfloat16):
        us = timed(tk, stream, n, gdt)
        gb = (26 + 2 * torch.empty(0, dtype=gdt).element_size()) * n / 1e9
        for k, t in us.items():
            bw = gb / (t * 1e-6) if k in ("ours", "torch", "torch no cast") else float("nan")
            ratio = f"{us['torch'] / t:.2f}" if k == "ours" else ""
            print(f"| {str(gdt)[6:]} | {n} | {k} | {t:.1f} | {bw:.0f} | {100 * bw / line:.0f} | "
                  f"{ratio} |", flush=True)


if __name__ == "__main__":
    main()
