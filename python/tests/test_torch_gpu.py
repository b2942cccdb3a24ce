"""tilekittens on PyTorch CUDA tensors: numerics against PyTorch (SDPA, matmul,
a float32 reference), gradients against autograd, torch.compile, streams and
errors. Skipped, saying why, without torch or a CUDA GPU."""
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch, which is not installed")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)",
                allow_module_level=True)

import tilekittens  # noqa: E402
from fakes import Foreign  # noqa: E402

F = torch.nn.functional
DEV = "cuda:0"
BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


def _rand(*shape, dtype=BF16, scale=1.0):
    return (torch.randn(*shape, device=DEV) * scale).to(dtype)


def _qkv(b, hq, hkv, nq, nkv, d, dtype, layout, requires_grad=False):
    def make(h, n):
        shape = (b, h, n, d) if layout == "bhnd" else (b, n, h, d)
        return _rand(*shape, dtype=dtype).requires_grad_(requires_grad)
    return make(hq, nq), make(hkv, nkv), make(hkv, nkv)


def _bhnd(t, layout):
    return t if layout == "bhnd" else t.transpose(1, 2)


def _causal_mask(nq, nkv):
    """True where query i may attend key j: bottom-right aligned."""
    i = torch.arange(nq, device=DEV)[:, None]
    j = torch.arange(nkv, device=DEV)[None, :]
    return j <= i + (nkv - nq)


def reference(q, k, v, causal, scale, layout):
    """(o, lse) in float32, o in the input's layout: the definition, with
    rows that attend nothing giving o = 0 and lse = -inf."""
    q, k, v = (_bhnd(t, layout).float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~_causal_mask(q.shape[2], k.shape[2]), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return _bhnd(p @ v, layout), lse


def sdpa(q, k, v, causal, scale, layout):
    """PyTorch's SDPA in float32 (GQA by repeating kv heads; the causal mask
    bottom-right aligned, as tilekittens and FlashAttention-2 define it)."""
    q, k, v = (_bhnd(t, layout).float() for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    mask = _causal_mask(q.shape[2], k.shape[2]) if causal else None
    return _bhnd(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale), layout)


TOL = {BF16: 2e-2, F16: 5e-3}

# (B, Hq, Hkv, Nq, Nkv, D, causal, dtype, layout)
ATTENTION_SHAPES = [
    (1, 1, 1, 128, 128, 64, False, BF16, "bhnd"),
    (2, 8, 8, 1024, 1024, 128, True, BF16, "bhnd"),
    (2, 8, 2, 513, 700, 128, False, F16, "bhnd"),  # GQA, ragged
    (1, 4, 1, 77, 333, 64, True, BF16, "bnhd"),  # causal, Nq < Nkv
    (3, 2, 2, 300, 100, 64, True, F16, "bhnd"),  # causal, Nq > Nkv: empty rows
    (1, 16, 4, 1, 4096, 128, False, BF16, "bnhd"),  # one query row (decode)
    (2, 6, 3, 2048, 2048, 64, True, F16, "bnhd"),
    (1, 2, 2, 17, 17, 128, False, BF16, "bhnd"),
    (4, 8, 1, 256, 1024, 128, True, BF16, "bhnd"),  # MQA
    (1, 3, 3, 1000, 1, 64, False, F16, "bhnd"),  # one key
    (2, 4, 4, 4096, 4096, 128, False, BF16, "bnhd"),
]


def _ids(shapes):
    return ["x".join(str(x).replace("torch.", "") for x in s) for s in shapes]


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal,dtype,layout", ATTENTION_SHAPES,
                         ids=_ids(ATTENTION_SHAPES))
def test_attention_forward(b, hq, hkv, nq, nkv, d, causal, dtype, layout):
    torch.manual_seed(nq * 31 + nkv)
    q, k, v = _qkv(b, hq, hkv, nq, nkv, d, dtype, layout)
    scale = 1 / math.sqrt(d)
    o, lse = tilekittens.attention(q, k, v, causal=causal, layout=layout, return_lse=True)
    assert o.shape == q.shape and o.dtype == dtype and lse.shape == (b, hq, nq)
    ref_o, ref_lse = reference(q, k, v, causal, scale, layout)
    torch.testing.assert_close(o.float(), ref_o, atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-3, rtol=1e-3)
    if not (causal and nq > nkv):  # SDPA's rows without keys are NaN
        torch.testing.assert_close(o.float(), sdpa(q, k, v, causal, scale, layout),
                                   atol=TOL[dtype], rtol=TOL[dtype])


def test_attention_strided_views_and_scale():
    # q, k, v as views of one packed [B, N, 3, H, D] projection: no copies
    b, n, h, d = 2, 333, 4, 128
    qkv = _rand(b, n, 3, h, d)
    q, k, v = qkv.unbind(2)
    assert not q.is_contiguous()
    o = tilekittens.attention(q, k, v, causal=True, scale=0.07, layout="bnhd")
    torch.testing.assert_close(o.float(), reference(q, k, v, True, 0.07, "bnhd")[0],
                               atol=2e-2, rtol=2e-2)


def test_attention_runs_on_the_current_stream():
    q, k, v = _qkv(1, 4, 4, 512, 512, 64, BF16, "bhnd")
    expected = tilekittens.attention(q, k, v)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o = tilekittens.attention(q, k, v)
    side.synchronize()
    assert torch.equal(o, expected)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0),
                    reason="the wgmma kernel needs an sm_90a GPU (H100/H200)")
@pytest.mark.parametrize("d", [64, 128, 256])
def test_attention_wgmma(d):
    q, k, v = _qkv(2, 4, 2, 700, 900, d, BF16, "bhnd")
    o = tilekittens.attention(q, k, v, causal=True, kernel="wgmma")
    torch.testing.assert_close(o.float(), reference(q, k, v, True, 1 / math.sqrt(d), "bhnd")[0],
                               atol=2e-2, rtol=2e-2)


# (B, Hq, Hkv, Nq, Nkv, D, causal, dtype, layout)
GRAD_SHAPES = [
    (1, 2, 2, 128, 128, 64, False, BF16, "bhnd"),
    (2, 4, 2, 300, 257, 128, True, BF16, "bhnd"),
    (1, 8, 2, 200, 500, 64, True, F16, "bnhd"),
    (2, 2, 1, 513, 513, 128, False, F16, "bnhd"),
    (1, 4, 4, 1024, 1024, 128, True, BF16, "bhnd"),
]


def _rel_err(x, ref):
    return ((x.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


# "auto" is the Hopper kernels on sm_90a; "mma_sync" runs everywhere; each in
# both backward modes
@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("kernel", ["auto", "mma_sync"])
@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal,dtype,layout", GRAD_SHAPES,
                         ids=_ids(GRAD_SHAPES))
def test_attention_gradients(b, hq, hkv, nq, nkv, d, causal, dtype, layout, kernel,
                             deterministic):
    torch.manual_seed(nq + 7 * nkv)
    q, k, v = _qkv(b, hq, hkv, nq, nkv, d, dtype, layout, requires_grad=True)
    dout = torch.randn_like(q)
    o = tilekittens.attention(q, k, v, causal=causal, layout=layout, kernel=kernel,
                              deterministic=deterministic)
    o.backward(dout)
    rq, rk, rv = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref_o, _ = reference(rq, rk, rv, causal, 1 / math.sqrt(d), layout)
    ref_o.backward(dout.float())
    for name, got, ref in (("dq", q.grad, rq.grad), ("dk", k.grad, rk.grad),
                           ("dv", v.grad, rv.grad)):
        assert got.shape == ref.shape and got.dtype == dtype, name
        assert _rel_err(got, ref) < 2e-2, f"{name}: {_rel_err(got, ref)}"


def test_attention_gradient_of_a_sum():
    # o.sum()'s gradient is an expand with all-zero strides: it must be read
    # as the ones it is, not as a dense tensor
    q, k, v = _qkv(1, 2, 2, 200, 200, 64, BF16, "bhnd", requires_grad=True)
    tilekittens.attention(q, k, v, causal=True).float().sum().backward()
    rq, rk, rv = (t.detach().float().requires_grad_() for t in (q, k, v))
    reference(rq, rk, rv, True, 1 / 8, "bhnd")[0].sum().backward()
    for got, ref in ((q.grad, rq.grad), (k.grad, rk.grad), (v.grad, rv.grad)):
        assert _rel_err(got, ref) < 2e-2


@pytest.mark.parametrize("how", ["argument", "torch switch"])
def test_backward_is_deterministic(how):
    q, k, v = _qkv(2, 4, 2, 300, 300, 128, BF16, "bhnd", requires_grad=True)
    grads = []
    was = torch.are_deterministic_algorithms_enabled()
    try:
        if how == "torch switch":  # deterministic=None follows it
            torch.use_deterministic_algorithms(True)
        for _ in range(3):
            for t in (q, k, v):
                t.grad = None
            o = tilekittens.attention(q, k, v, causal=True,
                                      deterministic=True if how == "argument" else None)
            o.float().square().sum().backward()
            grads.append([t.grad.clone() for t in (q, k, v)])
    finally:
        torch.use_deterministic_algorithms(was)
    assert all(torch.equal(a, b) for a, b in zip(grads[0], grads[1]))
    assert all(torch.equal(a, b) for a, b in zip(grads[0], grads[2]))


# (M, N, K, in dtype, out dtype, transpose_b)
GEMM_SHAPES = [
    (128, 128, 128, BF16, BF16, False),
    (4096, 4096, 4096, BF16, F32, False),
    (1, 4096, 4096, BF16, BF16, True),
    (333, 777, 129, F16, F16, False),
    (1000, 16, 64, BF16, F32, True),
    (64, 64, 16, F16, F32, False),
    (2048, 1024, 512, F16, F32, True),
    (17, 4095, 33, BF16, BF16, False),
    (4096, 1, 4096, BF16, F32, False),
    (513, 257, 1025, BF16, F32, True),
    (8192, 8192, 1024, BF16, BF16, False),
]


@pytest.mark.parametrize("m,n,k,dtype,out,tb", GEMM_SHAPES, ids=_ids(GEMM_SHAPES))
def test_gemm(m, n, k, dtype, out, tb):
    torch.manual_seed(m + n + k)
    a = _rand(m, k, dtype=dtype)
    b = _rand(n, k, dtype=dtype) if tb else _rand(k, n, dtype=dtype)
    c = tilekittens.gemm(a, b, transpose_b=tb, out_dtype=out)
    ref = torch.matmul(a.float(), (b.t() if tb else b).float())
    assert c.shape == (m, n) and c.dtype == out
    tol = 2e-2 if out != F32 else 1e-3
    torch.testing.assert_close(c.float(), ref, rtol=tol, atol=tol * math.sqrt(k))


def test_gemm_views():
    # x @ w.t() for a Linear weight, and A a column slice of a wider tensor
    x, w = _rand(300, 512), _rand(1024, 512)
    torch.testing.assert_close(tilekittens.gemm(x, w.t(), out_dtype=F32),
                               x.float() @ w.float().t(), rtol=1e-3, atol=1e-2)
    wide = _rand(300, 640)
    a = wide[:, :512]
    torch.testing.assert_close(tilekittens.gemm(a, w.t(), out_dtype=F32),
                               a.float() @ w.float().t(), rtol=1e-3, atol=1e-2)


def test_gemm_empty():
    assert tilekittens.gemm(_rand(0, 64), _rand(64, 32)).shape == (0, 32)
    assert torch.count_nonzero(tilekittens.gemm(_rand(8, 0), _rand(0, 32))) == 0


# ---- Other frameworks' arrays (DLPack) ------------------------------------------------
def test_dlpack_arrays():
    q, k, v = _qkv(1, 4, 2, 300, 300, 64, BF16, "bhnd")
    expected = tilekittens.attention(q, k, v, causal=True)
    o = tilekittens.attention(Foreign(q), Foreign(k), Foreign(v), causal=True)
    assert torch.equal(o, expected)
    a, b = torch.randn(130, 70, device="cuda", dtype=BF16), torch.randn(70, 90, device="cuda",
                                                                           dtype=BF16)
    assert torch.equal(tilekittens.gemm(Foreign(a), Foreign(b)), tilekittens.gemm(a, b))


# ---- Errors ------------------------------------------------------------------------
def test_cpu_tensors_refused():
    q = torch.zeros(1, 1, 64, 64, dtype=BF16)
    with pytest.raises(ValueError, match="q is on cpu"):
        tilekittens.attention(q, q, q)


def test_library_errors_are_value_errors():
    q, k, v = _qkv(1, 2, 2, 64, 64, 96, BF16, "bhnd")  # D 96: no kernel
    with pytest.raises(tilekittens.InvalidArgumentError, match="head_dim") as e:
        tilekittens.attention(q, k, v)
    assert isinstance(e.value, ValueError) and e.value.status_name == "TK_ERR_INVALID_ARG"


def test_compile_message_once(tmp_path):
    code = ("import torch, tilekittens\n"
            "q = torch.randn(1, 2, 128, 64, device='cuda', dtype=torch.bfloat16)\n"
            "for _ in range(3): tilekittens.attention(q, q, q, causal=True)\n"
            "torch.cuda.synchronize()\n")
    for quiet, lines in (("0", 1), ("1", 0)):
        env = dict(os.environ, TK_CACHE_DIR=str(tmp_path / f"cache{quiet}"),
                   TILEKITTENS_QUIET=quiet)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        got = [ln for ln in r.stderr.splitlines() if ln.startswith("tilekittens: compiled")]
        assert len(got) == lines, r.stderr
        if lines:
            assert got[0].startswith("tilekittens: compiled attention bf16 D64 causal for sm_")


# ---- torch.compile ------------------------------------------------------------------
needs_custom_op = pytest.mark.skipif(not hasattr(torch.library, "custom_op"),
                                     reason="torch.library.custom_op needs torch 2.4+")


@needs_custom_op
def test_torch_compile_attention_forward_and_backward():
    def f(q, k, v):
        return tilekittens.attention(q, k, v, causal=True, layout="bnhd") * 2

    cf = torch.compile(f, fullgraph=True)  # a graph break fails the test
    q, k, v = _qkv(2, 4, 2, 300, 300, 64, BF16, "bnhd", requires_grad=True)
    eager = f(q, k, v)
    eager.float().sum().backward()
    eager_grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = cf(q, k, v)
    assert torch.equal(compiled, eager)  # the same kernels: bit-identical
    compiled.float().sum().backward()
    assert all(torch.equal(t.grad, g) for t, g in zip((q, k, v), eager_grads))


@needs_custom_op
def test_torch_compile_gemm():
    cf = torch.compile(lambda a, b: tilekittens.gemm(a, b.t(), out_dtype=F32) + 1,
                       fullgraph=True)
    a, b = _rand(256, 128), _rand(512, 128)
    assert torch.equal(cf(a, b), tilekittens.gemm(a, b.t(), out_dtype=F32) + 1)
