"""The GEMMs of a GPT-2 124M training step (T = 16·1024 tokens, D 768) through tk_gemm's
epilogues (bias, GELU keeping its input, DGELU, transposed A, accumulate) beside what torch
runs for the same result, in the same run on the same GPU:
  forward   qkv = x·Wqkv + b, proj = y·Wo + b, h = x·Wfc + b and a = gelu_tanh(h)
            (torch: addmm, then F.gelu(approximate='tanh')), fc proj = a·Wp + b; qkv, proj
            and fc proj also without the bias (torch: matmul), to show what the bias costs;
  backward  dh = (dy·Wpᵀ)·gelu'(h) (torch: matmul on a transposed view, then
            aten.gelu_backward), and each weight gradient dW += xᵀ·dy with A = x read as
            stored [T, D] (transpose_a): into f32 (torch: dW.add_(x.t() @ dy), or one mm with
            out_dtype where this torch has it) and into bf16 (torch: dW.addmm_(x.t(), dy));
            then the same split over K (a workspace: tk_gemm_workspace's bytes): the library's
            S, and S = 2, 3, 4, 6, 8 forced, so one run shows where the choice stands.
Each call is checked against torch in float64 first (NaN-poisoned outputs; rel err printed,
a failure is marked and not timed); then the median of triton's do_bench (L2 flushed
before every call). TFLOP/s count the GEMM's 2·M·N·K.
Usage (GPU machine): python3 bench/bench_gemm_epilogue.py build-device"""
import sys

import torch
import torch.nn.functional as F

from bench_util import median_us, rel
from tk_ctypes import TK

T, D = 16 * 1024, 768
GELU, DGELU = 1, 2


def bf16(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)


def nan_like(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def mm_f32(a, b):
    """a·b into f32 in one call where this torch offers out_dtype, else None."""
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        return None


class Row:
    def __init__(self, op, m, n, k, choice, err, ours, peer, peer_name):
        self.op, self.mnk, self.choice, self.err = op, (m, n, k), choice, err
        self.ours, self.peer, self.peer_name = ours, peer, peer_name


def run(tk, stream, op, p, check, peer, peer_name, tol=1e-2, reset=None):
    """check(): (out, ref) after one call of ours; then the timings of ours and of peer."""
    m, n, k = p.m, p.n, p.k
    if reset:
        reset()
    tk.gemm_prepare(p)
    tk.gemm(p, stream)
    torch.cuda.synchronize()
    err = max(rel(o, r) for o, r in check())
    choice = tk.gemm_choice(p)
    if not err <= tol:
        print(f"FAIL {op}: rel err {err:.2e} > {tol:g}; not timed", flush=True)
        return Row(op, m, n, k, choice, err, float("nan"), float("nan"), peer_name)
    ours = median_us(lambda: tk.gemm(p, stream))
    theirs = median_us(peer)
    print(f"{op}: ours {ours:.1f} us, {peer_name} {theirs:.1f} us, rel err {err:.1e}", flush=True)
    return Row(op, m, n, k, choice, err, ours, theirs, peer_name)


def forward(tk, stream):
    rows = []
    x = bf16(T, D)
    for name, n, k in (("qkv", 3 * D, D), ("attn proj", D, D), ("fc proj", D, 4 * D)):
        a = x if k == D else bf16(T, k)
        w, b = bf16(k, n, scale=0.02), bf16(n, scale=0.1)
        c = nan_like((T, n), torch.bfloat16)
        p = tk.gemm_epilogue_params(a, w, c, bias=b)
        ref = lambda a=a, w=w, b=b: torch.addmm(b.double(), a.double(), w.double())
        rows.append(run(tk, stream, name + " + bias", p, lambda c=c, ref=ref: [(c, ref())],
                        lambda a=a, w=w, b=b: torch.addmm(b, a, w), "torch.addmm"))
        # the same product without the bias, both sides: what the bias costs each
        p = tk.gemm_epilogue_params(a, w, c)
        ref = lambda a=a, w=w: a.double() @ w.double()
        rows.append(run(tk, stream, name + ", no bias", p, lambda c=c, ref=ref: [(c, ref())],
                        lambda a=a, w=w: torch.matmul(a, w), "torch.matmul",
                        reset=lambda c=c: c.fill_(float("nan"))))
    w, b = bf16(D, 4 * D, scale=0.02), bf16(4 * D, scale=0.1)
    out, h = nan_like((T, 4 * D), torch.bfloat16), nan_like((T, 4 * D), torch.bfloat16)
    href = torch.addmm(b.double(), x.double(), w.double())
    torch_fc = lambda: F.gelu(torch.addmm(b, x, w), approximate="tanh")
    for aux in (h, None):
        p = tk.gemm_epilogue_params(x, w, out, bias=b, act=GELU, aux=aux)
        checks = lambda aux=aux: [(out, F.gelu(href, approximate="tanh"))] + (
            [(aux, href)] if aux is not None else [])
        rows.append(run(tk, stream, "fc + bias + GELU" + (", h kept" if aux is not None else ""),
                        p, checks, torch_fc, "addmm + F.gelu",
                        reset=lambda: out.fill_(float("nan"))))
    return rows, x, h


def backward(tk, stream, x, h):
    rows = []
    dy, wp = bf16(T, D), bf16(4 * D, D, scale=0.02)  # fc proj: a[T, 4D]·Wp[4D, D]
    dh = nan_like((T, 4 * D), torch.bfloat16)
    p = tk.gemm_epilogue_params(dy, wp, dh, transpose_b=True, act=DGELU, aux=h)
    ref = lambda: torch.ops.aten.gelu_backward(dy.double() @ wp.double().t(), h.double(),
                                               approximate="tanh")
    torch_dh = lambda: torch.ops.aten.gelu_backward(dy @ wp.t(), h, approximate="tanh")
    rows.append(run(tk, stream, "dh = (dy·Wpᵀ)·gelu'(h)", p, lambda: [(dh, ref())], torch_dh,
                    "matmul + gelu_backward"))
    a = F.gelu(h, approximate="tanh")
    grads = (("dWqkv", x, bf16(T, 3 * D)), ("dWo", x, dy), ("dWfc", x, bf16(T, 4 * D)),
             ("dWp", a, dy))
    for name, xin, g in grads:
        rows += weight_grads(tk, stream, name, xin, g)
    return rows


def weight_grads(tk, stream, name, xin, g):
    """dW += xinᵀ·g into f32 and into bf16, and dW = xinᵀ·g."""
    rows, k, m, n = [], xin.shape[0], xin.shape[1], g.shape[1]
    ref = xin.double().t() @ g.double()
    for dt in (torch.float32, torch.bfloat16):
        dw = torch.empty(m, n, device="cuda", dtype=dt)
        start = (torch.randn(m, n, device="cuda") * 0.01).to(dt)
        reset = lambda dw=dw, start=start: dw.copy_(start)
        p = tk.gemm_epilogue_params(xin, g, dw, transpose_a=True, accumulate=True)
        check = lambda dw=dw, start=start: [(dw, start.double() + ref)]
        if dt == torch.float32:
            one = mm_f32(xin.t(), g) is not None
            peer = ((lambda: dw.add_(torch.mm(xin.t(), g, out_dtype=torch.float32))) if one
                    else (lambda: dw.add_(xin.t() @ g)))
            peer_name = "add_(mm out f32)" if one else "add_(matmul)"
        else:
            peer, peer_name = (lambda dw=dw: dw.addmm_(xin.t(), g)), "addmm_"
        rows.append(run(tk, stream, f"{name} += xᵀ·dy ({str(dt)[6:]})", p, check, peer,
                        peer_name, reset=reset))
    dw = nan_like((m, n), torch.bfloat16)
    p = tk.gemm_epilogue_params(xin, g, dw, transpose_a=True)
    rows.append(run(tk, stream, f"{name} = xᵀ·dy", p, lambda: [(dw, ref)],
                    lambda: torch.matmul(xin.t(), g), "matmul(x.t(), dy)"))
    return rows + split_grads(tk, stream, name, xin, g, ref)


def split_grads(tk, stream, name, xin, g, ref):
    """weight_grads' products split over K: dW += xinᵀ·g into f32 with the library's S, and
    dW = xinᵀ·g into bf16 with its S and with S forced."""
    rows, m, n = [], xin.shape[1], g.shape[1]
    cases = ((torch.float32, True, (0,)), (torch.bfloat16, False, (0, 2, 3, 4, 6, 8)))
    for dt, acc, splits in cases:
        for s in splits:
            dw = nan_like((m, n), dt)
            start = (torch.randn(m, n, device="cuda") * 0.01).to(dt)
            p = tk.gemm_epilogue_params(xin, g, dw, transpose_a=True, accumulate=acc, split_k=s)
            ws = torch.empty(max(tk.gemm_workspace(p), 16) // 4, device="cuda",
                             dtype=torch.float32)
            p = tk.gemm_epilogue_params(xin, g, dw, transpose_a=True, accumulate=acc,
                                        workspace=ws, split_k=s)
            want = (lambda start=start: start.double() + ref) if acc else (lambda: ref)
            reset = (lambda dw=dw, start=start: dw.copy_(start)) if acc else None
            peer = ((lambda dw=dw: dw.add_(xin.t() @ g)) if acc
                    else (lambda: torch.matmul(xin.t(), g)))
            op = f"{name} {'+' if acc else ''}= xᵀ·dy ({str(dt)[6:]}), split {s or 'auto'}"
            rows.append(run(tk, stream, op, p, lambda dw=dw, want=want: [(dw, want())], peer,
                            "add_(matmul)" if acc else "matmul(x.t(), dy)", reset=reset))
            if not deterministic(tk, stream, p, dw, reset):
                print(f"FAIL {op}: two runs differ", flush=True)
                rows[-1].err = float("nan")
    return rows


def deterministic(tk, stream, p, out, reset):
    """Whether two calls from the same start give the same bits (the split's fixed order)."""
    got = []
    for _ in range(2):
        if reset:
            reset()
        tk.gemm(p, stream)
        torch.cuda.synchronize()
        got.append(out.clone())
    bits = torch.int16 if out.element_size() == 2 else torch.int32
    return torch.equal(got[0].view(bits), got[1].view(bits))


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    rows, x, h = forward(tk, stream)
    rows += backward(tk, stream, x, h)
    print(f"\nGPT-2 124M GEMMs, T = {T}, on {torch.cuda.get_device_name()}"
          " (median µs, L2 flushed; TFLOP/s of 2·M·N·K)")
    print("| op | M×N×K | our kernel | ours µs | peer | peer µs | ours TFLOP/s | peer TFLOP/s "
          "| peer/ours time | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, n, k = r.mnk
        fl = 2 * m * n * k / 1e6
        print(f"| {r.op} | {m}×{n}×{k} | {r.choice} | {r.ours:.1f} | {r.peer_name} | "
              f"{r.peer:.1f} | {fl / r.ours:.0f} | {fl / r.peer:.0f} | {r.peer / r.ours:.2f} | "
              f"{r.err:.1e} |")
    if any(not r.err <= 1e-2 for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
