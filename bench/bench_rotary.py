"""Rotary position embeddings on Q and K (tk_rotary): first checked against a float64 PyTorch
reference at ragged shapes (NeoX and GPT-J, cos/sin tables and a base, positions, partial
rotary_dim, in place, a [B, N, H, D] layout, bf16 and f16; forward and the backward, rotation
by -θ; outputs poisoned with NaN, fresh inputs each run), then timed beside torch eager and
torch.compile of the same rotation (the usual apply_rotary_pos_emb on cos/sin tables): GB/s of
the bytes each call must move (q and k read once and written once; the tables are small and
not counted), against the 4.27 TB/s copy line (bench/RESULTS.md). triton do_bench, median.
Environment: ROTARY_SHAPES=B:N:Hq:Hk:D,... replaces the timed shapes; ROTARY_CHECK_ONLY=1 skips
timing.
Usage (GPU machine): python3 bench/bench_rotary.py build-device"""
import os
import sys

import torch
import torch._dynamo
from triton.testing import do_bench

from bench_util import bandwidth_table, rel
from tk_ctypes import TK

COPY_TBS = 4.27
NEOX, GPTJ = 0, 1
BASE = 10000.0
# B, N, Hq, Hk, D, rd, style, tables, positions, in place, bnhd layout, dtype
CHECK = [
    (1, 1, 8, 2, 128, 128, NEOX, 0, 1, 0, 0, torch.bfloat16),
    (2, 17, 3, 1, 128, 128, NEOX, 1, 0, 0, 0, torch.bfloat16),
    (2, 100, 9, 3, 128, 128, GPTJ, 0, 1, 0, 1, torch.float16),
    (1, 33, 2, 0, 256, 128, GPTJ, 0, 0, 1, 0, torch.bfloat16),
    (3, 50, 4, 4, 128, 64, NEOX, 1, 0, 0, 1, torch.float16),
    (1, 70, 5, 2, 256, 256, NEOX, 0, 1, 0, 0, torch.bfloat16),
    (1, 16, 16, 8, 64, 32, GPTJ, 0, 0, 0, 0, torch.bfloat16),
    (2, 129, 1, 1, 128, 96, NEOX, 0, 1, 1, 0, torch.float16),
    (1, 7, 3, 0, 128, 100, GPTJ, 0, 0, 0, 0, torch.bfloat16),
    (2, 40, 2, 1, 64, 20, NEOX, 1, 0, 1, 1, torch.bfloat16),
    (4, 1000, 32, 8, 128, 128, NEOX, 1, 0, 1, 1, torch.bfloat16),
    (2, 2049, 16, 16, 64, 64, GPTJ, 0, 1, 0, 0, torch.float16),
    (3, 77, 8, 2, 128, 128, NEOX, 1, 1, 0, 0, torch.bfloat16),
    (1, 300, 4, 4, 64, 48, NEOX, 1, 1, 1, 1, torch.float16),
]
TIME_SHAPES = [(1, 4096, 32, 8, 128), (4, 4096, 32, 32, 128), (8, 2048, 32, 8, 128),
               (1, 16384, 64, 8, 128), (2, 4096, 16, 16, 256), (16, 1024, 32, 32, 64)]


def rotate(x, cos, sin, style, rd, inverse):
    """x [B, H, N, D]; cos, sin broadcast to [., ., N, rd/2]; in x's dtype (f64 for the
    reference), the tail past rd unchanged."""
    xr, tail = x[..., :rd], x[..., rd:]
    if style == NEOX:
        x1, x2 = xr[..., :rd // 2], xr[..., rd // 2:]
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    s = -sin if inverse else sin
    o1, o2 = x1 * cos - x2 * s, x2 * cos + x1 * s
    out = torch.cat((o1, o2), -1) if style == NEOX else torch.stack((o1, o2), -1).flatten(-2)
    return torch.cat((out, tail), -1)


def angles(pos, rd, base=BASE, dtype=torch.float64):
    """cos, sin [..., N, rd/2] of pos [..., N] (f64 for the reference)."""
    i = torch.arange(rd // 2, device=pos.device, dtype=dtype)
    th = pos.to(dtype)[..., None] * base ** (-2 * i / rd)
    return th.cos(), th.sin()


def qk(B, H, N, D, dt, bnhd):
    if bnhd:  # a [B, N, H, D] buffer seen as [B, H, N, D]
        return (torch.rand(B, N, H, D, device="cuda") * 4 - 2).to(dt).transpose(1, 2)
    return (torch.rand(B, H, N, D, device="cuda") * 4 - 2).to(dt)


def check(tk, stream, B, N, Hq, Hk, D, rd, style, tables, positions, inplace, bnhd, dt):
    ok, errs = True, []
    cos = sin = None
    rows = N + 3
    # with tables, positions are table rows (one past the end reads 0: that token's rd columns)
    top = rows + 1 if tables else 5000
    pos = torch.randint(0, top, (B, N), device="cuda", dtype=torch.int32) if positions else None
    if tables:  # a scaled base, stored in f32
        c64, s64 = angles(torch.arange(rows, device="cuda") * 0.5, rd, base=500.0)
        cos, sin = c64.float().contiguous(), s64.float().contiguous()
    for inverse in (0, 1):
        q, k = qk(B, Hq, N, D, dt, bnhd), qk(B, Hk, N, D, dt, bnhd) if Hk else None
        q0, k0 = q.clone(), k.clone() if Hk else None
        if inplace:
            qo, ko = q, k
        else:
            qo = torch.full_like(q, float("nan"))
            ko = torch.full_like(k, float("nan")) if Hk else None
        p = tk.rotary_params(q, qo, k, ko, style, rd, inverse, cos, sin, pos)
        tk.rotary(p, stream)
        torch.cuda.synchronize()
        if tables and positions:  # rows gathered at the positions, 0 past the table
            pad = torch.zeros(1, rd // 2, device="cuda")
            c = torch.cat((cos, pad))[pos.clamp(max=rows).long()][:, None].double()
            s = torch.cat((sin, pad))[pos.clamp(max=rows).long()][:, None].double()
        elif tables:
            c, s = cos[:N].double(), sin[:N].double()
        else:
            c, s = angles(pos[:, None] if positions else torch.arange(N, device="cuda"), rd)
        for name, out, x in (("q", qo, q0), ("k", ko, k0)):
            if x is None:
                continue
            errs.append((f"{'bwd' if inverse else 'fwd'} {name}",
                         rel(out, rotate(x.double(), c, s, style, rd, inverse))))
    limit = 1e-2 if dt == torch.bfloat16 else 2e-3
    ok = all(e <= limit for _, e in errs)
    name = (f"{'gptj' if style else 'neox'} {str(dt)[6:]} B{B} N{N} H{Hq}/{Hk} D{D} rd{rd}"
            f"{' tables' if tables else ''}{' pos' if positions else ''}"
            f"{' inplace' if inplace else ''}{' bnhd' if bnhd else ''}")
    print(f"check {name}: " + " ".join(f"{n} {e:.1e}" for n, e in errs) +
          ("" if ok else "  FAIL"), flush=True)
    return ok


def timed(tk, stream, B, N, Hq, Hk, D, style, tables):
    """(ours, eager, compiled) microseconds, forward and backward, bf16, out of place."""
    dt, rd = torch.bfloat16, D
    q, k = qk(B, Hq, N, D, dt, 0), qk(B, Hk, N, D, dt, 0)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    c64, s64 = angles(torch.arange(N, device="cuda"), rd)
    cos, sin = c64.float().contiguous(), s64.float().contiguous()
    tc, ts = (cos, sin) if tables else (None, None)
    us = {}
    for d, inv in (("fwd", 0), ("bwd", 1)):
        p = tk.rotary_params(q, qo, k, ko, style, rd, inv, tc, ts)
        us["ours", d] = do_bench(lambda: tk.rotary(p, stream), return_mode="median") * 1e3

    def apply(q, k, cos, sin, inverse):
        qf = rotate(q.float(), cos, sin, style, rd, inverse).to(q.dtype)
        return qf, rotate(k.float(), cos, sin, style, rd, inverse).to(k.dtype)

    for name, f in (("eager", apply), ("compile", torch.compile(apply, dynamic=True))):
        for d, inv in (("fwd", 0), ("bwd", 1)):
            f(q, k, cos, sin, inv)
            us[name, d] = do_bench(lambda: f(q, k, cos, sin, inv), return_mode="median") * 1e3
    return us


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    stream = torch.cuda.current_stream().cuda_stream
    fails = sum(not check(tk, stream, *c) for c in CHECK)
    print(f"checks: {fails} failed", flush=True)
    if fails or os.environ.get("ROTARY_CHECK_ONLY"):
        sys.exit(1 if fails else 0)
    env = os.environ.get("ROTARY_SHAPES")
    shapes = ([tuple(int(v) for v in s.split(":")) for s in env.split(",")] if env
              else TIME_SHAPES)
    torch._dynamo.config.recompile_limit = 64
    rows = []
    for style, tables in ((NEOX, 1), (GPTJ, 0)):
        for B, N, Hq, Hk, D in shapes:
            us = timed(tk, stream, B, N, Hq, Hk, D, style, tables)
            gb = 2 * B * N * (Hq + Hk) * D * 2 / 1e9  # q and k read once, written once
            kind = f"{'gptj' if style else 'neox'} {'tables' if tables else 'base'}"
            for d in ("fwd", "bwd"):
                bw = {s: gb / (us[s, d] * 1e-6) for s in ("ours", "eager", "compile")}
                rows.append((kind, f"{B}x{N}x{Hq}/{Hk}x{D}", d, us["ours", d], bw["ours"],
                             bw["eager"], bw["compile"]))
                print(f"{kind} {rows[-1][1]} {d}: ours {us['ours', d]:.1f} us", flush=True)
    bandwidth_table("rotary", "B x N x Hq/Hk x D", rows, COPY_TBS)


if __name__ == "__main__":
    main()
