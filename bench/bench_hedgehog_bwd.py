"""Hedgehog linear attention, backward (tk_hedgehog_backward): every gradient (dq, dk, dv, dWq,
dWk and, with a bias, dbq, dbk) first checked against float64 PyTorch autograd of the forward's
math (bench_hedgehog.py's: φ(x) = softmax([2y, -2y]), y = x·Wᵀ + b; o_i = Σ_{j<=i} a_ij v_j /
(z_i + 1e-6), a_ij = scale·φ(q_i)·φ(k_j)), computed from the same bf16/f16 inputs, weights and
dout at ragged shapes: bf16 and f16, D 64 and 128, Dv ≠ D, normalized or not, bias or not, one
W for all heads or one per head, dense [B, H, T, D] or fla's [B, T, H, D] (q, k, v, dout, o,
z and dq, dk, dv) through strides, non-default scale. The backward's o and z are our
forward's (z saved, f32), as in training; dout random; every output poisoned with NaN first.
Limits: bf16 1e-2; f16 3e-3 for dq, dk, dv (the forward's) and 5e-3 for dW, db, which sum
B·T (and, with one W, H) tokens' terms whose signs differ, so their relative error grows with
the cancellation (tests/test_hedgehog_bwd.c allows 5e-3 for every f16 gradient). NaN fails.

Then timed (bf16, normalized, bias, one W, [B, T, H, D] memory, Dv = D) beside
flash-linear-attention 0.6.0's pipeline as bench_hedgehog.py times its forward: its feature-map
modules (weights and biases requiring grad) on q, k requiring grad, followed by
chunk_linear_attn(normalize=True), and by fused_chunk_linear_attn; v requires grad too. Both
sides produce the same seven gradients. Two columns per side:
  * backward alone: ours is tk_hedgehog_backward given the o and z of one forward run outside
    the timing; fla's is torch.autograd.grad(out, (q, k, v, Wq, bq, Wk, bk), dout,
    retain_graph=True) on one forward's graph, also built outside the timing. fla's backward
    reads the φ its forward saved, ours recomputes φ from q, k and W (it is given only o, z):
    this column favours fla's memory-for-time trade.
  * forward + backward: ours is tk_hedgehog_forward (z saved) then tk_hedgehog_backward; fla's
    is its forward then torch.autograd.grad (a fresh graph each call). The like-for-like total.
triton do_bench, median, L2 flushed before each run. An fla kernel whose backward raises is
reported on a line and its columns are left empty.
Environment: HEDGEHOG_SHAPES=B:H:T:D,... replaces the timed shapes (Dv = D);
HEDGEHOG_CHECK_ONLY=1 skips timing; HEDGEHOG_TIME_ONLY=1 skips the checks (timing alone, for
runs that measure what an earlier run checked). bench_hedgehog.py runs this after its forward (checks with
its checks, one exit status, tables after its table) unless HEDGEHOG_BWD=0.
Usage (GPU machine): python3 bench/bench_hedgehog_bwd.py build-device (the backward alone)"""
import os
import sys

import torch

from bench_hedgehog import (BF, EPS, F16, FLA_CHECK, TIME_SHAPES, feature, fla_forward, fla_maps,
                            inputs, load_fla, verdict, weights)
from bench_util import env_shapes, median_us, rel
from tk_ctypes import TK

NAN = float("nan")
GRADS = ("dq", "dk", "dv", "dwq", "dwk", "dbq", "dbk")
# B, H, T, D, Dv, dtype, normalize, bias, per-head W, [B, T, H, D] layout, scale (0: 1).
# T ≤ 4097: the reference holds a float64 T x T matrix (and its autograd copies) per head.
# T 1 normalized is left out: there o = v·a / (a + eps), so the true dq, dk, dW, db are ~eps
# and their relative error would measure only o's rounding in the dO·O term (as bench_based).
# Few tokens normalized are left out too: with T 3 (bf16) dφ is mostly the cancellation of
# dO·O against dO·v_j, and dq, dk came to 1-2e-2 of float64 (the dtype's rounding of the mma
# inputs, amplified); tests/test_hedgehog_bwd.c says more. From T 16 on, 5e-3 at most.
BWD_CHECK = [
    (1, 1, 1, 64, 64, BF, 0, 1, 0, 0, 0),
    (1, 1, 17, 128, 128, BF, 1, 1, 0, 0, 0),
    (2, 3, 77, 64, 64, F16, 1, 1, 0, 1, 0),
    (1, 4, 1000, 128, 128, BF, 0, 1, 0, 0, 0.0625),
    (2, 8, 1023, 128, 128, BF, 1, 1, 0, 1, 0),
    (1, 2, 4097, 64, 48, F16, 0, 0, 0, 0, 0),
    (2, 4, 2048, 128, 128, BF, 1, 1, 1, 0, 0),
    (2, 4, 300, 64, 128, F16, 1, 1, 0, 0, 0.5),
    (1, 1, 65, 128, 16, F16, 1, 1, 0, 1, 0),
    (1, 2, 500, 64, 256, BF, 1, 0, 1, 0, 0),
    (3, 2, 200, 128, 8, F16, 0, 0, 0, 1, 0),
    (1, 2, 3000, 128, 96, F16, 1, 1, 1, 1, 0),
    (4, 16, 1024, 64, 64, BF, 1, 1, 0, 1, 0),
]


def reference_grads(q, k, v, dout, wq, wk, bq, bk, normalize, scale, eps=EPS):
    """float64 autograd gradients {name: tensor} of the forward (GRADS; dbq, dbk with a bias):
    φ(q), φ(k) for all heads with autograd, then the attention head by head (its T x T scores
    freed after each), the heads' dφ carried back through φ in one last autograd call."""
    q64, k64, wq64, wk64 = (x.detach().double().requires_grad_() for x in (q, k, wq, wk))
    bq64, bk64 = (None if x is None else x.detach().double().requires_grad_() for x in (bq, bk))
    B, H, T, Dv = v.shape

    def phi(x, w, b):  # [B, H, T, 2D]: feature() per head (one W for all: the whole tensor)
        hw = [h if w.dim() == 3 else ... for h in range(H)]
        return torch.stack([feature(x[:, h], w[e], None if b is None else b[e])
                            for h, e in enumerate(hw)], dim=1)
    fq, fk = phi(q64, wq64, bq64), phi(k64, wk64, bk64)
    dfq, dfk = torch.empty_like(fq), torch.empty_like(fk)
    dv = torch.empty(B, H, T, Dv, device=v.device, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            fqh, fkh, vh = (x.detach().double().requires_grad_()
                            for x in (fq[b, h], fk[b, h], v[b, h]))
            a = (scale * (fqh @ fkh.T)).tril()  # keys j <= query i
            o = a @ vh
            if normalize:
                o = o / (a.sum(-1, keepdim=True) + eps)
            dfq[b, h], dfk[b, h], dv[b, h] = torch.autograd.grad(o, (fqh, fkh, vh),
                                                                 dout[b, h].double())
    leaves = [q64, k64, wq64, wk64] + ([bq64, bk64] if bq is not None else [])
    g = torch.autograd.grad((fq, fk), leaves, (dfq, dfk))
    return dict(zip(GRADS, g[:2] + (dv,) + g[2:]))


def check_bwd(tk, stream, case):
    B, H, T, D, Dv, dt, normalize, bias, per_head, bthd, scale = case
    q, k, v = inputs(B, H, T, D, Dv, dt, bthd)
    dout = inputs(B, H, T, D, Dv, dt, bthd)[2]  # v's layout
    wq, wk, bq, bk = weights(D, H, dt, bias, per_head)
    o = z = None
    if normalize:  # our forward's o (v's layout) and z (f32; [B, T, H] memory with bthd)
        o = torch.full_like(v, NAN)
        z = torch.full((B, T, H) if bthd else (B, H, T), NAN, device="cuda")
        z = z.transpose(1, 2) if bthd else z
        tk.hedgehog_forward(tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, z, 1, scale), stream)
    out = {n: torch.full_like(x, NAN) for n, x in zip(GRADS, (q, k, v, wq, wk, bq, bk))
           if x is not None}  # dq, dk, dv in q's and v's layouts; the weights' dense
    p = tk.hedgehog_bwd_params(q, k, v, dout, out["dq"], out["dk"], out["dv"], wq, wk,
                               out["dwq"], out["dwk"], bq, bk, out.get("dbq"), out.get("dbk"),
                               o, z, normalize, scale)
    tk.hedgehog_backward(p, stream)
    torch.cuda.synchronize()
    ref = reference_grads(q, k, v, dout, wq, wk, bq, bk, normalize, scale or 1.0)
    errs = {n: rel(x, ref[n]) for n, x in out.items()}
    fcase = (B, H, T, D, Dv, dt, normalize, 0, bias, per_head, bthd, scale, 0, 0)
    return verdict("check bwd", dt, errs, fcase, loose=("dwq", "dwk", "dbq", "dbk"))


def run_checks(tk, stream):
    """The backward's checks (BWD_CHECK), a line each; returns how many failed."""
    return sum(not check_bwd(tk, stream, c) for c in BWD_CHECK)


def fla_bwd_setup(fla, D, q, k, v, dout, wq, wk, bq, bk):
    """fla's feature maps (weights requiring grad) and its [B, T, H, D] leaves: (maps, qt, kt,
    vt, dout as [B, T, H, Dv], the tensors the gradients are taken for)."""
    qt, kt, vt, dot = (x.transpose(1, 2).detach() for x in (q, k, v, dout))
    qt, kt, vt = (x.requires_grad_() for x in (qt, kt, vt))
    maps = fla_maps(fla, D, wq, wk, bq, bk, grad=True)
    wrt = (qt, kt, vt, maps[0].layer.weight, maps[0].layer.bias, maps[1].layer.weight,
           maps[1].layer.bias)
    return maps, qt, kt, vt, dot, wrt


def fla_check_bwd(tk, stream, fla):
    """Ours and fla's gradients against the reference on one shape (bf16, normalized, bias,
    one W), for information."""
    B, H, T, D = FLA_CHECK
    q, k, v = inputs(B, H, T, D, D, BF, 1)  # views of [B, T, H, D] memory
    dout = inputs(B, H, T, D, D, BF, 1)[2]
    wq, wk, bq, bk = weights(D, H, BF, 1, 0)
    o, z = torch.empty_like(v), torch.empty(B, T, H, device="cuda").transpose(1, 2)
    tk.hedgehog_forward(tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, z), stream)
    ours = {n: torch.full_like(x, NAN) for n, x in zip(GRADS, (q, k, v, wq, wk, bq, bk))}
    tk.hedgehog_backward(tk.hedgehog_bwd_params(
        q, k, v, dout, ours["dq"], ours["dk"], ours["dv"], wq, wk, ours["dwq"], ours["dwk"], bq,
        bk, ours["dbq"], ours["dbk"], o, z), stream)
    ref = reference_grads(q, k, v, dout, wq, wk, bq, bk, 1, 1.0)
    worst = lambda g: max(rel(g[n], ref[n]) for n in GRADS)  # noqa: E731
    errs = {"ours": worst(ours)}
    for name, f in zip(("fla chunk", "fla fused_chunk"), fla[1:]):
        if f is None:
            continue
        maps, qt, kt, vt, dot, wrt = fla_bwd_setup(fla, D, q, k, v, dout, wq, wk, bq, bk)
        try:
            g = torch.autograd.grad(fla_forward(fla, maps, f, qt, kt, vt), wrt, dot)
        except Exception as e:  # noqa: BLE001 (reported; the column is left out)
            print(f"fla {name} backward failed ({type(e).__name__}: {e})", flush=True)
            continue
        g = [x.transpose(1, 2) for x in g[:3]] + [g[3], g[5], g[4], g[6]]  # GRADS' order
        errs[name] = worst(dict(zip(GRADS, g)))
    print(f"check bwd bf16 B{B} H{H} T{T} D{D} norm bias, worst of the 7 gradients, for "
          "information (fla rounds y and φ to bf16): " +
          ", ".join(f"{n} {e:.1e}" for n, e in errs.items()), flush=True)


def timed_bwd(tk, stream, fla, B, H, T, D):
    """Microseconds (bf16, normalized, bias, one W, Dv = D, [B, T, H, D] memory): our backward
    alone and forward + backward; fla's autograd backward alone and forward + backward, after
    chunk_linear_attn ("chunk") and fused_chunk_linear_attn ("fused")."""
    q, k, v = inputs(B, H, T, D, D, BF, 1)  # views of [B, T, H, D] memory
    dout = inputs(B, H, T, D, D, BF, 1)[2]
    wq, wk, bq, bk = weights(D, H, BF, 1, 0)
    o, z = torch.empty_like(v), torch.empty(B, T, H, device="cuda").transpose(1, 2)
    grads = [torch.empty_like(x) for x in (q, k, v, wq, wk, bq, bk)]  # kept: p holds addresses
    dq, dk, dv, dwq, dwk, dbq, dbk = grads
    pf = tk.hedgehog_params(q, k, v, o, wq, wk, bq, bk, z)
    tk.hedgehog_forward(pf, stream)
    pb = tk.hedgehog_bwd_params(q, k, v, dout, dq, dk, dv, wq, wk, dwq, dwk, bq, bk, dbq, dbk,
                                o, z)
    pbf = tk.hedgehog_bwd_params(q, k, v, dout, dq, dk, dv, wq, wk, dwq, dwk, bq, bk, dbq, dbk,
                                 o, z, fused_maps=1)

    def both():
        tk.hedgehog_forward(pf, stream)
        tk.hedgehog_backward(pb, stream)
    us = {"bwd": median_us(lambda: tk.hedgehog_backward(pb, stream)), "fwdbwd": median_us(both),
          "bwdf": median_us(lambda: tk.hedgehog_backward(pbf, stream))}
    if fla:
        maps, qt, kt, vt, dot, wrt = fla_bwd_setup(fla, D, q, k, v, dout, wq, wk, bq, bk)
        for name, f in zip(("chunk", "fused"), fla[1:]):
            if f is None:
                continue
            try:
                out = fla_forward(fla, maps, f, qt, kt, vt)  # the graph the backward reuses
                us[name + " bwd"] = median_us(
                    lambda: torch.autograd.grad(out, wrt, dot, retain_graph=True))
                del out
                us[name + " fwdbwd"] = median_us(
                    lambda: torch.autograd.grad(fla_forward(fla, maps, f, qt, kt, vt), wrt, dot))
            except Exception as e:  # noqa: BLE001 (reported; the columns are left empty)
                print(f"fla {name} backward failed ({type(e).__name__}: {e})", flush=True)
    return us


def run_timing(tk, stream, fla, shapes):
    """Times each (B, H, T, D) of shapes, a line each, then prints the markdown table."""
    rows = []
    for B, H, T, D in shapes:
        us = timed_bwd(tk, stream, fla, B, H, T, D)
        rows.append((B, H, T, D, us))
        print(f"bwd B{B} H{H} T{T} D{D}: " + " ".join(f"{n} {t:.1f} us" for n, t in us.items()),
              flush=True)
    f1 = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print("\n| B x H x T (bf16, norm, bias) | D = Dv | TK bwd µs, maps fused | TK bwd µs "
          "| fla maps + chunk bwd µs "
          "| fla maps + fused_chunk bwd µs | faster fla / TK (bwd) | TK fwd+bwd µs "
          "| fla chunk fwd+bwd µs | fla fused_chunk fwd+bwd µs | faster fla / TK (fwd+bwd) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for B, H, T, D, us in rows:
        out = [f"{B}x{H}x{T}", f"{D}", f"{us['bwdf']:.1f}"]
        for kind in ("bwd", "fwdbwd"):
            fl = [us.get(f"{n} {kind}") for n in ("chunk", "fused")]
            best = min((x for x in fl if x is not None), default=None)
            out += [f"{us[kind]:.1f}"] + [f1(x) for x in fl]
            out.append("-" if best is None else f"{best / us[kind]:.2f}x")
        print("| " + " | ".join(out) + " |")


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    time_only = os.environ.get("HEDGEHOG_TIME_ONLY")
    fails = 0 if time_only else run_checks(tk, stream)
    print("checks skipped (HEDGEHOG_TIME_ONLY)" if time_only else f"checks: {fails} failed",
          flush=True)
    if fails or os.environ.get("HEDGEHOG_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    fla = load_fla()
    if fla and not time_only:
        fla_check_bwd(tk, stream, fla)
    run_timing(tk, stream, fla, env_shapes("HEDGEHOG_SHAPES", TIME_SHAPES))


if __name__ == "__main__":
    main()
