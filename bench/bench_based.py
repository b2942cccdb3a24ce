"""Based linear attention, forward (tk_based_forward) and backward (tk_based_backward): first checked against a float64 PyTorch
reference at ragged shapes (o_i = Σ_{j<=i} a_ij v_j / (z_i + 1e-6), a_ij = 1 + s + s²/2,
s = scale·q_i·k_j, feature dim 16; bf16 and f16, normalized or not, z saved or not, dense
[B, H, T, D] or fla's [B, T, H, D] through strides, a non-default scale and v_cols; outputs
poisoned with NaN, fresh inputs each run), then timed beside flash-linear-attention's
fused_chunk_based and parallel_based (bf16, normalized, Dv 64) on the same data: millions of
tokens (B·T·H) per second. Ours reads fla's [B, T, H, D] layout through strides; fla gets [B, T, H, D] views of [B, H, T, D] memory, which
its transpose(1, 2) turns into the contiguous tensors its kernels read, so no input copy is
timed on either side (fla's own output division, transpose and cast are: they are its call).
The backward is checked against float64 autograd of the same reference (dq, dk, dv; dout
random, outputs poisoned) and timed beside fla's autograd backward (torch.autograd.grad with
retain_graph: the backward alone) and as forward + backward on both sides.
Ours splits the sequence into segments where B·H leaves the GPU idle (the library's choice,
tk_based_forward_workspace); the "one segment" columns time the unsplit kernels.
triton do_bench, median, L2 flushed before each run.
fla is imported from bench/wheels/*.whl (zip import: no pip, no network); without einops the
fla columns are skipped.
Environment: BASED_SHAPES=B:H:T,... replaces the timed shapes; BASED_CHECK_ONLY=1 skips timing;
BASED_VCOLS=32,64 also times the forward at those v_cols (printed per shape, not tabled);
BASED_PROFILE=1 prints each kernel's time in a forward + backward call per shape.
Usage (GPU machine): python3 bench/bench_based.py build-device"""
import os
import sys

import torch

from bench_util import env_shapes, import_fla, median_us, profile, rel
from tk_ctypes import TK

BF, F16 = torch.bfloat16, torch.float16
# B, H, T, Dv, dtype, normalize, z saved, [B, T, H, D] layout, scale (0: 1/4), v_cols (0: ours)
CHECK = [
    (1, 1, 1, 64, BF, 1, 1, 0, 0, 0),
    (2, 3, 77, 64, F16, 1, 1, 1, 0, 0),
    (1, 4, 1000, 64, BF, 0, 1, 0, 0, 0),
    (2, 8, 1023, 64, BF, 1, 0, 1, 0.2, 0),
    (1, 2, 4097, 48, F16, 0, 1, 0, 0, 0),
    (4, 16, 2048, 64, BF, 1, 1, 0, 0, 64),
    (1, 16, 16384, 64, BF, 1, 1, 1, 0, 0),
    (2, 4, 300, 128, F16, 1, 1, 0, 0.3, 0),
    (8, 16, 1024, 64, BF, 0, 0, 0, 0, 0),
    (1, 1, 65, 16, F16, 1, 1, 1, 0, 0),
    (1, 2, 500, 256, BF, 1, 1, 0, 0, 128),
    (3, 2, 200, 8, F16, 0, 1, 1, 0, 0),
]
TIME_SHAPES = [(16, 16, 1024), (8, 16, 2048), (4, 16, 4096), (2, 16, 8192), (1, 16, 16384)]
# B, H, T, Dv, dtype, normalize, [B, T, H, D] layout, scale (0: 1/4), v_cols (0: ours)
# (T 1 normalized is left out: o = v·a / (a + eps) there, so the true dq, dk are ~eps and the
# relative error would measure only o's bf16 rounding in the dO·O term)
BWD_CHECK = [
    (1, 1, 1, 64, BF, 0, 0, 0, 0),
    (1, 1, 3, 64, BF, 1, 0, 0, 0),
    (2, 3, 77, 64, F16, 1, 1, 0, 0),
    (1, 2, 1000, 64, BF, 0, 0, 0, 0),
    (2, 4, 1023, 64, BF, 1, 1, 0.2, 0),
    (1, 2, 2049, 48, F16, 0, 0, 0, 32),
    (1, 4, 300, 128, BF, 1, 0, 0.3, 64),
    (1, 16, 2048, 64, BF, 1, 1, 0, 0),
]
FLA_CHECK = (2, 8, 1023, 64)  # fla against the reference, for information


def load_fla():
    """fla's (fused_chunk_based, parallel_based), or None."""
    def load():
        from fla.ops.based import fused_chunk_based, parallel_based
        return fused_chunk_based, parallel_based
    return import_fla(load)


def inputs(B, H, T, Dv, dt, bthd):
    """q, k [B, H, T, 16], v [B, H, T, Dv]: dense, or views of [B, T, H, D] memory."""
    def one(D):
        if bthd:
            return torch.randn(B, T, H, D, device="cuda").to(dt).transpose(1, 2)
        return torch.randn(B, H, T, D, device="cuda").to(dt)
    return one(16), one(16), one(Dv)


def reference(q, k, v, scale=0.25, rows=1024):
    """float64 (o unnormalized, z) of q, k, v [B, H, T, D], per (batch, head) and in blocks of
    `rows` queries (a float64 T x T matrix per head would be 2 GB at T 16384)."""
    B, H, T, Dv = v.shape
    o = torch.empty(B, H, T, Dv, device="cuda", dtype=torch.float64)
    z = torch.empty(B, H, T, device="cuda", dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            qh, kh, vh = q[b, h].double(), k[b, h].double(), v[b, h].double()
            for i in range(0, T, rows):
                e = min(i + rows, T)
                s = scale * (qh[i:e] @ kh[:e].T)
                a = (1 + s + 0.5 * s * s).tril_(i)  # keys j <= query i + r
                z[b, h, i:e] = a.sum(-1)
                o[b, h, i:e] = a @ vh[:e]
    return o, z


def verdict(what, dt, errs, B, H, T, Dv, normalize, zsave, bthd, scale, v_cols):
    """Prints a check's line (its case, each relative error, PASS / FAIL) and returns
    whether every error is within bf16's 1e-2 or f16's 3e-3 (NaN fails)."""
    limit = 1e-2 if dt == BF else 3e-3
    ok = all(e <= limit for e in errs.values())
    name = (f"{str(dt)[6:]} B{B} H{H} T{T} Dv{Dv}{' norm' if normalize else ''}"
            f"{' z' if zsave else ''}{' bthd' if bthd else ''}{f' scale{scale}' if scale else ''}"
            f"{f' vc{v_cols}' if v_cols else ''}")
    print(f"{what} {name}: " + " ".join(f"{n} {e:.1e}" for n, e in errs.items()) +
          ("  PASS" if ok else "  FAIL"), flush=True)
    return ok


def reference_grads(q, k, v, dout, normalize, scale, eps=1e-6):
    """float64 autograd gradients (dq, dk, dv) of the Based forward, head by head."""
    dq, dk, dv = (torch.empty_like(x, dtype=torch.float64) for x in (q, k, v))
    B, H, T, _ = v.shape
    mask = torch.ones(T, T, device="cuda", dtype=torch.bool).tril_()
    for b in range(B):
        for h in range(H):
            qh, kh, vh = (x[b, h].double().requires_grad_() for x in (q, k, v))
            s = scale * (qh @ kh.T)
            a = torch.where(mask, 1 + s + 0.5 * s * s, 0)
            o = a @ vh
            if normalize:
                o = o / (a.sum(-1, keepdim=True) + eps)
            g = torch.autograd.grad(o, (qh, kh, vh), dout[b, h].double())
            dq[b, h], dk[b, h], dv[b, h] = g
    return dq, dk, dv


def check_bwd(tk, stream, B, H, T, Dv, dt, normalize, bthd, scale, v_cols):
    q, k, v = inputs(B, H, T, Dv, dt, bthd)
    dout = inputs(B, H, T, Dv, dt, bthd)[2]
    o = torch.full_like(v, float("nan"))
    z = torch.full((B, H, T), float("nan"), device="cuda")
    tk.based_forward(tk.based_params(q, k, v, o, z, normalize, scale, 0.0, v_cols), stream)
    dq, dk, dv = (torch.full_like(x, float("nan")) for x in (q, k, v))
    p = tk.based_bwd_params(q, k, v, dout, dq, dk, dv, o, z, normalize, scale, 0.0, v_cols)
    tk.based_backward(p, stream)
    torch.cuda.synchronize()
    refs = reference_grads(q, k, v, dout, normalize, scale or 0.25)
    errs = {n: rel(x, r) for n, x, r in zip(("dq", "dk", "dv"), (dq, dk, dv), refs)}
    return verdict("check bwd", dt, errs, B, H, T, Dv, normalize, 0, bthd, scale, v_cols)


def check(tk, stream, B, H, T, Dv, dt, normalize, zsave, bthd, scale, v_cols):
    q, k, v = inputs(B, H, T, Dv, dt, bthd)
    o = torch.full_like(v, float("nan"))  # same layout as v
    z = None
    if zsave:  # [B, T, H] memory with the [B, T, H, D] layout
        z = torch.full((B, T, H) if bthd else (B, H, T), float("nan"), device="cuda")
        z = z.transpose(1, 2) if bthd else z
    tk.based_forward(tk.based_params(q, k, v, o, z, normalize, scale, 0.0, v_cols), stream)
    torch.cuda.synchronize()
    o64, z64 = reference(q, k, v, scale or 0.25)
    errs = {"o": rel(o, o64 / (z64[..., None] + 1e-6) if normalize else o64)}
    if zsave:
        errs["z"] = rel(z, z64)
    return verdict("check", dt, errs, B, H, T, Dv, normalize, zsave, bthd, scale, v_cols)


def fla_check(tk, stream, fla):
    """Ours and fla's two kernels against the reference on one shape (bf16, normalized)."""
    B, H, T, Dv = FLA_CHECK
    q, k, v = inputs(B, H, T, Dv, BF, 1)  # views of [B, T, H, D] memory
    o = torch.full_like(v, float("nan"))
    tk.based_forward(tk.based_params(q, k, v, o), stream)
    o64, z64 = reference(q, k, v)
    ref = o64 / (z64[..., None] + 1e-6)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # fla's [B, T, H, D]
    errs = {"ours": rel(o, ref)}
    for name, f in zip(("fla fused_chunk", "fla parallel"), fla):
        errs[name] = rel(f(qt, kt, vt, scale=None, use_norm=True).transpose(1, 2), ref)
    print(f"check bf16 B{B} H{H} T{T} Dv{Dv} norm, for information: " +
          ", ".join(f"{n} {e:.1e}" for n, e in errs.items()), flush=True)


def timed(tk, stream, fla, B, H, T, Dv=64):
    """Microseconds: ours on [B, T, H, D] (the library's segments, and one); fla's fused_chunk and
    parallel."""
    q, k, v = inputs(B, H, T, Dv, BF, 0)  # dense [B, H, T, D]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # their [B, T, H, D] views
    # ours on real [B, T, H, D] memory (the same values) through strides
    qs, ks, vs = (x.contiguous().transpose(1, 2) for x in (qt, kt, vt))
    os_ = torch.empty_like(vs)  # kept: p holds only its address
    p_bthd, p_one = tk.based_params(qs, ks, vs, os_), tk.based_params(qs, ks, vs, os_, segments=1)
    us = {"bthd": median_us(lambda: tk.based_forward(p_bthd, stream)),
          "one": median_us(lambda: tk.based_forward(p_one, stream))}
    for vc in [int(x) for x in os.environ.get("BASED_VCOLS", "").split(",") if x]:
        p_vc = tk.based_params(qs, ks, vs, os_, v_cols=vc)  # a sweep: printed, not tabled
        us[f"vc{vc}"] = median_us(lambda: tk.based_forward(p_vc, stream))
    for name, f in zip(("chunk", "parallel"), fla or ()):
        us[name] = median_us(lambda: f(qt, kt, vt, scale=None, use_norm=True))
    return us


def timed_bwd(tk, stream, fla, B, H, T, Dv=64):
    """Microseconds, bf16 normalized on [B, T, H, D] memory: our backward alone and forward +
    backward; fla's autograd backward alone (fused_chunk, parallel) and forward + backward."""
    q, k, v = inputs(B, H, T, Dv, BF, 1)  # views of [B, T, H, D] memory
    dout = inputs(B, H, T, Dv, BF, 1)[2]
    o, z = torch.empty_like(v), torch.empty(B, H, T, device="cuda")
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    pf = tk.based_params(q, k, v, o, z)
    tk.based_forward(pf, stream)
    pb = tk.based_bwd_params(q, k, v, dout, dq, dk, dv, o, z)
    pb1 = tk.based_bwd_params(q, k, v, dout, dq, dk, dv, o, z, segments=1)

    def both():
        tk.based_forward(pf, stream)
        tk.based_backward(pb, stream)
    us = {"bwd": median_us(lambda: tk.based_backward(pb, stream)), "fwdbwd": median_us(both),
          "bwd1": median_us(lambda: tk.based_backward(pb1, stream))}
    qt, kt, vt, dt = (x.transpose(1, 2).detach() for x in (q, k, v, dout))
    qt, kt, vt = (x.requires_grad_() for x in (qt, kt, vt))
    for name, f in zip(("chunk", "parallel"), fla or ()):
        out = f(qt, kt, vt, scale=None, use_norm=True)
        us[name + " bwd"] = median_us(lambda: torch.autograd.grad(out, (qt, kt, vt), dt,
                                                              retain_graph=True))
        us[name + " fwdbwd"] = median_us(lambda: torch.autograd.grad(
            f(qt, kt, vt, scale=None, use_norm=True), (qt, kt, vt), dt))
    return us


def profile_call(tk, stream, B, H, T, Dv=64):
    """Each of our kernels' time in a forward + backward call (bf16, normalized)."""
    q, k, v = inputs(B, H, T, Dv, BF, 1)
    dout = inputs(B, H, T, Dv, BF, 1)[2]
    o, z = torch.empty_like(v), torch.empty(B, H, T, device="cuda")
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    pf = tk.based_params(q, k, v, o, z)
    pb = tk.based_bwd_params(q, k, v, dout, dq, dk, dv, o, z)

    def both():
        tk.based_forward(pf, stream)
        tk.based_backward(pb, stream)
    profile(f"B{B} H{H} T{T} fwd+bwd", both)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    fails = sum(not check(tk, stream, *c) for c in CHECK)
    fails += sum(not check_bwd(tk, stream, *c) for c in BWD_CHECK)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("BASED_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    fla = load_fla()
    if fla:
        fla_check(tk, stream, fla)
    shapes = env_shapes("BASED_SHAPES", TIME_SHAPES)
    rows = []
    for B, H, T in shapes:
        us = timed(tk, stream, fla, B, H, T)
        rows.append((B, H, T, us))
        print(f"B{B} H{H} T{T}: " + " ".join(f"{n} {t:.1f} us" for n, t in us.items()),
              flush=True)
    f1 = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print("\n| B x H x T (bf16, Dv 64) | TK µs | TK µs, one segment | fla fused_chunk µs "
          "| fla parallel µs | faster fla / TK | TK Mtok/s | faster fla Mtok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for B, H, T, us in rows:
        best = min((us[n] for n in ("chunk", "parallel") if n in us), default=None)
        speedup = "-" if best is None else f"{best / us['bthd']:.2f}x"
        fla_tok = "-" if best is None else f"{B * H * T / best:.0f}"
        print(f"| {B}x{H}x{T} | {us['bthd']:.1f} | {us['one']:.1f} | {f1(us.get('chunk'))} | "
              f"{f1(us.get('parallel'))} | {speedup} | {B * H * T / us['bthd']:.0f} | {fla_tok} |")

    if os.environ.get("BASED_PROFILE"):
        for B, H, T in shapes:
            profile_call(tk, stream, B, H, T)
    rows = []
    for B, H, T in shapes:
        us = timed_bwd(tk, stream, fla, B, H, T)
        rows.append((B, H, T, us))
        print(f"bwd B{B} H{H} T{T}: " + " ".join(f"{n} {t:.1f} us" for n, t in us.items()),
              flush=True)
    print("\n| B x H x T (bf16, Dv 64, norm) | TK bwd µs, one segment | TK bwd µs "
          "| fla chunk bwd µs | fla parallel bwd µs "
          "| faster fla / TK (bwd) | TK fwd+bwd µs | fla chunk fwd+bwd µs "
          "| fla parallel fwd+bwd µs | faster fla / TK (fwd+bwd) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for B, H, T, us in rows:
        out = [f"{B}x{H}x{T}", f"{us['bwd1']:.1f}"]
        for kind in ("bwd", "fwdbwd"):
            fl = [us.get(f"{n} {kind}") for n in ("chunk", "parallel")]
            best = min((x for x in fl if x is not None), default=None)
            out += [f"{us[kind]:.1f}"] + [f1(x) for x in fl]
            out.append("-" if best is None else f"{best / us[kind]:.2f}x")
        print("| " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()