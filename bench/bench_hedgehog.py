"""Hedgehog linear attention, forward (tk_hedgehog_forward): first checked against a float64
PyTorch reference at ragged shapes (φ(x) = softmax([2y, -2y]), y = x·Wᵀ + b, computed in
float64 from the same bf16/f16 inputs and weights; o_i = Σ_{j<=i} a_ij v_j / (z_i + 1e-6),
a_ij = scale·φ(q_i)·φ(k_j), z_i = Σ_{j<=i} a_ij; bf16 and f16, D 64 and 128, normalized or
not, bias or not, one W for all heads (fla's layer) or one per head, z saved or not, dense
[B, H, T, D] or fla's [B, T, H, D] through strides, non-default scale, v_cols and warps;
outputs poisoned with NaN, fresh inputs each run), then timed beside flash-linear-attention
0.6.0's pipeline on the same data: its HedgehogFeatureMap (torch: nn.Linear, cat, softmax;
one module for q and one for k, their Linear weights set to ours) followed by
chunk_linear_attn(normalize=True), and by fused_chunk_linear_attn where fla has it. fla's
feature maps are part of its call (they are what our kernel fuses); its feature-map time alone
is printed too. Millions of tokens (B·T·H) per second. Ours reads fla's [B, T, H, D] layout
through strides; fla's feature maps take [B, T, H, D] tensors, its kernels their output.
Ours splits the sequence into segments where B·H leaves the GPU idle (the library's choice,
tk_hedgehog_forward_workspace; the checks' long, narrow shapes run split); the "one segment"
column times the unsplit kernel. With the workspace the feature maps run apart, once (the
checks take that path); the "maps fused" column times the kernel that maps each chunk in each
value slice (fused_maps 1; the C tests check it on the GPU).
The shapes are fla's default LinearAttention layer (hidden 1024, 8 heads of 128; expand_v 1:
Dv 128) and the same hidden size in 16 heads of 64, B·T = 16384, T 1024 .. 16384.
triton do_bench, median, L2 flushed before each run.
fla is imported from bench/wheels/*.whl (zip import, or unpacked to a temporary folder; no
pip, no network); without einops the fla columns are skipped. Where fla's HedgehogFeatureMap
cannot be imported, the same three lines of torch stand in for it (said on a line).
The backward (tk_hedgehog_backward) follows, from bench_hedgehog_bwd.py (its docstring says
how it is checked and timed): its checks after the forward's (one count, one exit status: any
failure exits 1 before timing), its table after the forward's.
Environment: HEDGEHOG_SHAPES=B:H:T:D,... replaces the timed shapes (Dv = D; both tables);
HEDGEHOG_CHECK_ONLY=1 skips timing; HEDGEHOG_TIME_ONLY=1 skips the checks (and fla's
information check: timing alone, for runs that measure what an earlier run checked);
HEDGEHOG_VCOLS=16,64 also times ours at those v_cols,
maps apart and fused (printed per shape, not tabled); HEDGEHOG_BWD=0 skips the backward (its checks and table;
skipped too, with a line, where the library has no tk_hedgehog_backward).
Usage (GPU machine): python3 bench/bench_hedgehog.py build-device"""
import os
import sys

import torch

from bench_util import env_shapes, import_fla, median_us, rel
from tk_ctypes import TK

BF, F16 = torch.bfloat16, torch.float16
EPS = 1e-6
# B, H, T, D, Dv, dtype, normalize, z saved, bias, per-head W, [B, T, H, D] layout,
# scale (0: 1), v_cols (0: ours), warps (0: ours)
CHECK = [
    (1, 1, 1, 128, 128, BF, 1, 1, 1, 0, 0, 0, 0, 0),
    (2, 3, 77, 64, 64, F16, 1, 1, 1, 0, 1, 0, 0, 0),
    (1, 4, 1000, 128, 128, BF, 0, 1, 1, 0, 0, 0.0625, 0, 0),
    (2, 8, 1023, 128, 128, BF, 1, 0, 1, 0, 1, 0, 0, 0),
    (1, 2, 4097, 64, 48, F16, 0, 1, 0, 0, 0, 0, 0, 0),
    (4, 8, 2048, 128, 128, BF, 1, 1, 1, 1, 0, 0, 16, 0),
    (1, 2, 16384, 128, 128, BF, 1, 1, 1, 0, 1, 0, 0, 0),
    (2, 4, 300, 64, 128, F16, 1, 1, 1, 0, 0, 0.5, 0, 0),
    (8, 16, 1024, 64, 64, BF, 0, 0, 0, 0, 0, 0, 0, 0),
    (1, 1, 65, 128, 16, F16, 1, 1, 1, 0, 1, 0, 0, 0),
    (1, 2, 500, 64, 256, BF, 1, 1, 1, 1, 0, 0, 128, 0),
    (3, 2, 200, 128, 8, F16, 0, 1, 0, 0, 1, 0, 0, 2),
    (1, 2, 700, 64, 64, BF, 1, 1, 1, 0, 0, 0, 16, 8),
]
# B, H, T, D (Dv = D): fla's default layer (hidden 1024: 8 heads of 128) and 16 heads of 64
TIME_SHAPES = [(16, 8, 1024, 128), (8, 8, 2048, 128), (4, 8, 4096, 128), (2, 8, 8192, 128),
               (1, 8, 16384, 128),
               (16, 16, 1024, 64), (4, 16, 4096, 64), (1, 16, 16384, 64)]
FLA_CHECK = (2, 8, 1023, 128)  # fla against the reference, for information


def load_fla():
    """fla's (feature map class, chunk_linear_attn, fused_chunk_linear_attn or None), or
    None. The feature map class is fla's HedgehogFeatureMap, or the same computation
    written here where that module does not import."""
    def load():
        from fla.ops.linear_attn import chunk_linear_attn
        try:
            from fla.ops.linear_attn import fused_chunk_linear_attn
        except Exception:  # noqa: BLE001
            fused_chunk_linear_attn = None
            print("fla: no fused_chunk_linear_attn: its column is skipped", flush=True)
        try:
            from fla.modules.feature_map import HedgehogFeatureMap as fmap
        except Exception as e:  # noqa: BLE001
            print(f"fla: HedgehogFeatureMap not importable ({type(e).__name__}: {e}): the same "
                  "computation in torch stands in for it", flush=True)
            fmap = FeatureMap
        return fmap, chunk_linear_attn, fused_chunk_linear_attn
    return import_fla(load)


class FeatureMap(torch.nn.Module):
    """fla's HedgehogFeatureMap, for where fla.modules does not import: Linear(D, D), then
    softmax over [2y, -2y]."""

    def __init__(self, head_dim):
        super().__init__()
        self.layer = torch.nn.Linear(head_dim, head_dim)

    def forward(self, x):
        y = 2 * self.layer(x)
        return torch.cat([y, -y], dim=-1).softmax(-1)


def inputs(B, H, T, D, Dv, dt, bthd):
    """q, k [B, H, T, D], v [B, H, T, Dv]: dense, or views of [B, T, H, D] memory."""
    def one(d):
        if bthd:
            return torch.randn(B, T, H, d, device="cuda").to(dt).transpose(1, 2)
        return torch.randn(B, H, T, d, device="cuda").to(dt)
    return one(D), one(D), one(Dv)


def weights(D, H, dt, bias, per_head):
    """wq, wk [D, D] ([H, D, D] per head), bq, bk [D] ([H, D]) or None, in the dtype: random,
    so that y = x·Wᵀ + b spreads about 1 for x ~ N(0, 1) (softmaxes neither flat nor
    one-hot)."""
    lead = (H,) if per_head else ()
    w = [(torch.rand(*lead, D, D, device="cuda") * 2 - 1) * (1.7 / D ** 0.5) for _ in "qk"]
    b = [(torch.rand(*lead, D, device="cuda") - 0.5) if bias else None for _ in "qk"]
    return tuple(x.to(dt) if x is not None else None for x in w + b)


def feature(x, w, b):
    """float64 φ(x) = softmax([2y, -2y]), y = x·Wᵀ + b, of x [T, D] (one head's W, b)."""
    y = x.double() @ w.double().T
    if b is not None:
        y = y + b.double()
    return torch.cat([2 * y, -2 * y], dim=-1).softmax(-1)


def reference(q, k, v, wq, wk, bq, bk, scale=1.0, rows=1024):
    """float64 (o unnormalized, z) of q, k [B, H, T, D], v [B, H, T, Dv], per (batch, head)
    and in blocks of `rows` queries (a float64 T x T matrix per head would be 2 GB at T
    16384)."""
    B, H, T, Dv = v.shape
    o = torch.empty(B, H, T, Dv, device="cuda", dtype=torch.float64)
    z = torch.empty(B, H, T, device="cuda", dtype=torch.float64)
    for h in range(H):
        hw = h if wq.dim() == 3 else ...  # one W for all heads: the whole tensor
        w_q, w_k = wq[hw], wk[hw]
        b_q = None if bq is None else bq[hw]
        b_k = None if bk is None else bk[hw]
        for b in range(B):
            fq, fk = feature(q[b, h], w_q, b_q), feature(k[b, h], w_k, b_k)
            vh = v[b, h].double()
            for i in range(0, T, rows):
                e = min(i + rows, T)
                a = (scale * (fq[i:e] @ fk[:e].T)).tril_(i)  # keys j <= query i + r
                z[b, h, i:e] = a.sum(-1)
                o[b, h, i:e] = a @ vh[:e]
    return o, z


def verdict(what, dt, errs, case, loose=()):
    """Prints a check's line (its case, each relative error, PASS / FAIL) and returns
    whether every error is within bf16's 1e-2 or f16's 3e-3 (5e-3 for the errors named in
    loose) (NaN fails)."""
    B, H, T, D, Dv, _, normalize, zsave, bias, per_head, bthd, scale, v_cols, warps = case
    limit = {n: 1e-2 if dt == BF else 5e-3 if n in loose else 3e-3 for n in errs}
    ok = all(e <= limit[n] for n, e in errs.items())
    name = (f"{str(dt)[6:]} B{B} H{H} T{T} D{D} Dv{Dv}{' norm' if normalize else ''}"
            f"{' z' if zsave else ''}{' bias' if bias else ''}{' per-head' if per_head else ''}"
            f"{' bthd' if bthd else ''}{f' scale{scale}' if scale else ''}"
            f"{f' vc{v_cols}' if v_cols else ''}{f' w{warps}' if warps else ''}")
    print(f"{what} {name}: " + " ".join(f"{n} {e:.1e}" for n, e in errs.items()) +
          ("  PASS" if ok else "  FAIL"), flush=True)
    return ok


def check(tk, stream, case):
    B, H, T, D, Dv, dt, normalize, zsave, bias, per_head, bthd, scale, v_cols, warps = case
    q, k, v = inputs(B, H, T, D, Dv, dt, bthd)
    wq, wk, bq, bk = weights(D, H, dt, bias, per_head)
    o = torch.full_like(v, float("nan"))  # same layout as v
    z = None
    if zsave:  # [B, T, H] memory with the [B, T, H, D] layout
        z = torch.full((B, T, H) if bthd else (B, H, T), float("nan"), device="cuda")
        z = z.transpose(1, 2) if bthd else z
    p = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, z, normalize, scale, 0.0, v_cols, warps)
    tk.hedgehog_forward(p, stream)
    torch.cuda.synchronize()
    o64, z64 = reference(q, k, v, wq, wk, bq, bk, scale or 1.0)
    errs = {"o": rel(o, o64 / (z64[..., None] + EPS) if normalize else o64)}
    if zsave:
        errs["z"] = rel(z, z64)
    return verdict("check", dt, errs, case)


def fla_maps(fla, D, wq, wk, bq, bk, grad=False):
    """fla's feature-map modules for q and k, their Linear weights (and biases: zero where we
    have none) set to ours, in our dtype; their parameters require grad with grad."""
    maps = []
    for w, b in ((wq, bq), (wk, bk)):
        m = fla[0](head_dim=D).to(device="cuda", dtype=w.dtype)
        with torch.no_grad():
            m.layer.weight.copy_(w)
            m.layer.bias.copy_(b if b is not None else torch.zeros_like(m.layer.bias))
        maps.append(m.requires_grad_(grad))
    return maps


def fla_forward(fla, maps, attn, qt, kt, vt):
    """fla's pipeline on [B, T, H, D] tensors: the feature maps, then `attn` normalized."""
    fq, fk = maps[0](qt), maps[1](kt)
    return attn(fq, fk, vt, normalize=True)[0]


def fla_check(tk, stream, fla):
    """Ours and fla's kernels against the reference on one shape (bf16, normalized, bias)."""
    B, H, T, D = FLA_CHECK
    q, k, v = inputs(B, H, T, D, D, BF, 1)  # views of [B, T, H, D] memory
    wq, wk, bq, bk = weights(D, H, BF, 1, 0)
    o = torch.full_like(v, float("nan"))
    tk.hedgehog_forward(tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk), stream)
    o64, z64 = reference(q, k, v, wq, wk, bq, bk)
    ref = o64 / (z64[..., None] + EPS)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # fla's [B, T, H, D]
    maps = fla_maps(fla, D, wq, wk, bq, bk)
    errs = {"ours": rel(o, ref)}
    for name, f in zip(("fla chunk", "fla fused_chunk"), fla[1:]):
        if f is not None:
            with torch.no_grad():
                errs[name] = rel(fla_forward(fla, maps, f, qt, kt, vt).transpose(1, 2), ref)
    print(f"check bf16 B{B} H{H} T{T} D{D} norm bias, for information (fla rounds y and φ to "
          "bf16): " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()), flush=True)


def timed(tk, stream, fla, B, H, T, D):
    """Microseconds (bf16, normalized, bias, Dv = D): ours on [B, T, H, D] memory (the
    library's segments, and one); fla's feature maps alone, and followed by chunk_linear_attn
    and fused_chunk_linear_attn."""
    q, k, v = inputs(B, H, T, D, D, BF, 1)  # views of [B, T, H, D] memory
    wq, wk, bq, bk = weights(D, H, BF, 1, 0)
    o = torch.empty_like(v)  # kept: p holds only its address
    p = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk)
    p_one = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, segments=1)
    p_fused = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, fused_maps=1)
    us = {"tk": median_us(lambda: tk.hedgehog_forward(p, stream)),
          "tk1": median_us(lambda: tk.hedgehog_forward(p_one, stream)),
          "tkf": median_us(lambda: tk.hedgehog_forward(p_fused, stream))}
    for vc in [int(x) for x in os.environ.get("HEDGEHOG_VCOLS", "").split(",") if x]:
        for fm in (0, 1):  # printed, not tabled
            p_vc = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, v_cols=vc, fused_maps=fm)
            us[f"vc{vc}{'f' if fm else ''}"] = median_us(lambda: tk.hedgehog_forward(p_vc, stream))
    if fla:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # contiguous [B, T, H, D]
        maps = fla_maps(fla, D, wq, wk, bq, bk)
        with torch.no_grad():
            us["fmap"] = median_us(lambda: (maps[0](qt), maps[1](kt)))
            for name, f in zip(("chunk", "fused"), fla[1:]):
                if f is not None:
                    us[name] = median_us(lambda: fla_forward(fla, maps, f, qt, kt, vt))
    return us


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    bwd = None
    if os.environ.get("HEDGEHOG_BWD", "1") == "0":
        pass
    elif not hasattr(tk.lib, "tk_hedgehog_backward"):
        print("the library has no tk_hedgehog_backward: the backward is skipped", flush=True)
    else:
        import bench_hedgehog_bwd as bwd  # imports this file's helpers as bench_hedgehog
    time_only = os.environ.get("HEDGEHOG_TIME_ONLY")
    fails = 0 if time_only else sum(not check(tk, stream, c) for c in CHECK)
    if bwd and not time_only:
        fails += bwd.run_checks(tk, stream)
    print("checks skipped (HEDGEHOG_TIME_ONLY)" if time_only else f"checks: {fails} failed",
          flush=True)
    if fails or os.environ.get("HEDGEHOG_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    fla = load_fla()
    if fla and not time_only:
        fla_check(tk, stream, fla)
        if bwd:
            bwd.fla_check_bwd(tk, stream, fla)
    shapes = env_shapes("HEDGEHOG_SHAPES", TIME_SHAPES)
    rows = []
    for B, H, T, D in shapes:
        us = timed(tk, stream, fla, B, H, T, D)
        rows.append((B, H, T, D, us))
        print(f"B{B} H{H} T{T} D{D}: " + " ".join(f"{n} {t:.1f} us" for n, t in us.items()),
              flush=True)
    f1 = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print("\n| B x H x T (bf16, norm, bias) | D = Dv | TK µs | TK µs, one segment "
          "| TK µs, maps fused | fla feature maps µs "
          "| fla maps + chunk µs | fla maps + fused_chunk µs | faster fla / TK | TK Mtok/s "
          "| faster fla Mtok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for B, H, T, D, us in rows:
        best = min((us[n] for n in ("chunk", "fused") if n in us), default=None)
        speedup = "-" if best is None else f"{best / us['tk']:.2f}x"
        fla_tok = "-" if best is None else f"{B * H * T / best:.0f}"
        print(f"| {B}x{H}x{T} | {D} | {us['tk']:.1f} | {us['tk1']:.1f} | {us['tkf']:.1f} | "
              f"{f1(us.get('fmap'))} | "
              f"{f1(us.get('chunk'))} | {f1(us.get('fused'))} | {speedup} | "
              f"{B * H * T / us['tk']:.0f} | {fla_tok} |")
    if bwd:
        bwd.run_timing(tk, stream, fla, shapes)


if __name__ == "__main__":
    main()
