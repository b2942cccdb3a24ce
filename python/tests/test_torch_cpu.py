"""The PyTorch plumbing without a GPU: the custom ops' schemas and fake
functions, the autograd Function, and torch.compile capturing attention as
opaque ops. The library runs only on CUDA, so here the ops get CPU kernels
computing the definition in float32 (stand-ins registered for the "cpu"
device only); what is tested is everything around the kernels. Skipped
without torch, or with a torch older than torch.library.custom_op (2.4)."""
import math

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch, which is not installed")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch.library.custom_op needs torch 2.4+", allow_module_level=True)

import tilekittens  # noqa: E402
from tilekittens import _torch  # noqa: E402
from fakes import Foreign  # noqa: E402

BF16 = torch.bfloat16


def _bhnd_f32(ts, layout):
    return [(t.transpose(1, 2) if layout == "bnhd" else t).float() for t in ts]


def _scores(q, k, causal, scale):
    """Scaled scores [B, Hq, Nq, Nkv] with kv heads repeated for GQA."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        nq, nkv = s.shape[-2:]
        keep = torch.arange(nkv)[None, :] <= torch.arange(nq)[:, None] + (nkv - nq)
        s = s.masked_fill(~keep, float("-inf"))
    return s


def _out(t, like, layout):
    return (t.transpose(1, 2) if layout == "bnhd" else t).to(like.dtype).contiguous()


def _definition(q, k, v, causal, scale, layout):
    """(o in q's layout and dtype, lse f32), computed in float32 (differentiable)."""
    qf, kf, vf = _bhnd_f32((q, k, v), layout)
    s = _scores(qf, kf, causal, scale)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    o = p @ vf.repeat_interleave(qf.shape[1] // kf.shape[1], 1)
    return _out(o, q, layout), lse


def _cpu_fwd(q, k, v, causal, scale, layout, kernel):
    return _definition(q, k, v, causal, scale, layout)


def _cpu_bwd(dout, q, k, v, o, lse, causal, scale, layout, kernel, deterministic):
    # By hand: a custom op's kernel runs below autograd, so no autograd here.
    qf, kf, vf, of, df = _bhnd_f32((q, k, v, o, dout), layout)
    g = qf.shape[1] // kf.shape[1]
    sc = scale if scale is not None else 1 / math.sqrt(qf.shape[-1])
    p = torch.exp(_scores(qf, kf, causal, scale) - lse[..., None]).nan_to_num(0.0)
    dv = p.transpose(-1, -2) @ df
    ds = p * (df @ vf.repeat_interleave(g, 1).transpose(-1, -2) - (df * of).sum(-1, True))
    dq = ds @ kf.repeat_interleave(g, 1) * sc
    dk = ds.transpose(-1, -2) @ qf * sc

    def fold(t):  # the query heads of each kv head summed
        b, h, n, d = t.shape
        return t.view(b, h // g, g, n, d).sum(2)
    return _out(dq, q, layout), _out(fold(dk), k, layout), _out(fold(dv), v, layout)


_torch.attention_fwd_op.register_kernel("cpu", _cpu_fwd)
_torch.attention_bwd_op.register_kernel("cpu", _cpu_bwd)


def _qkv(layout="bhnd", b=2, hq=4, hkv=2, nq=33, nkv=47, d=64):
    def make(h, n):
        shape = (b, h, n, d) if layout == "bhnd" else (b, n, h, d)
        return torch.randn(shape).to(BF16).requires_grad_()
    return make(hq, nq), make(hkv, nkv), make(hkv, nkv)


def test_schemas():
    assert str(torch.ops.tilekittens.attention_fwd.default._schema) == (
        "tilekittens::attention_fwd(Tensor q, Tensor k, Tensor v, bool causal, float? scale, "
        "str layout, str kernel) -> (Tensor, Tensor)")
    assert "-> (Tensor, Tensor, Tensor)" in str(torch.ops.tilekittens.attention_bwd.default._schema)
    assert "ScalarType? out_dtype" in str(torch.ops.tilekittens.gemm.default._schema)


def test_fake_functions_give_the_real_shapes():
    q = torch.empty(2, 100, 8, 64, dtype=BF16, device="meta")
    k = torch.empty(2, 130, 2, 64, dtype=BF16, device="meta")
    o, lse = torch.ops.tilekittens.attention_fwd(q, k, k, True, None, "bnhd", "auto")
    assert o.shape == q.shape and o.dtype == BF16 and o.is_contiguous()
    assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
    dq, dk, dv = torch.ops.tilekittens.attention_bwd(o, q, k, k, o, lse, True, None, "bnhd",
                                                     "auto", True)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
    a = torch.empty(5, 7, dtype=BF16, device="meta")
    c = torch.ops.tilekittens.gemm(a, torch.empty(9, 7, dtype=BF16, device="meta"), True,
                                   torch.float32)
    assert c.shape == (5, 9) and c.dtype == torch.float32


def test_public_calls_refuse_cpu_tensors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="q is on cpu"):
        tilekittens.attention(q, k, v)
    with pytest.raises(ValueError, match="a is on cpu"):
        tilekittens.gemm(torch.ones(4, 4, dtype=BF16), torch.ones(4, 4, dtype=BF16))


def test_dlpack_arrays_are_read_in_place():
    """Arrays with __dlpack__ reach the same checks as the tensors they view:
    here they live on the CPU, so the device check names them."""
    q, k, v = (t.detach() for t in _qkv())  # a tensor that needs grad has no DLPack view
    with pytest.raises(ValueError, match="q is on cpu"):
        tilekittens.attention(Foreign(q), Foreign(k), Foreign(v))
    a = torch.ones(4, 4, dtype=BF16)
    with pytest.raises(ValueError, match="a is on cpu"):
        tilekittens.gemm(Foreign(a), Foreign(a))
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="a is on cpu"):  # numpy has __dlpack__ too
        tilekittens.gemm(np.ones((4, 4), np.float16), np.ones((4, 4), np.float16))
    assert _torch._from_dlpack(Foreign(q)).data_ptr() == q.data_ptr()  # no copy


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_autograd_function_routes_gradients(layout):
    q, k, v = _qkv(layout)
    o, lse = _torch.AttentionFunction.apply(q, k, v, True, 0.2, layout, "auto", False)
    assert not lse.requires_grad
    dout = torch.randn_like(o)
    o.backward(dout)
    ref = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref_o, _ = _definition(*ref, True, 0.2, layout)
    ref_o.backward(dout)
    assert torch.equal(o, ref_o)
    for got, want in zip((q.grad, k.grad, v.grad), (r.grad for r in ref)):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


def test_torch_compile_keeps_attention_opaque():
    captured = []

    def backend(gm, example_inputs):
        captured.append(gm)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    def f(q, k, v):
        return tilekittens.attention(q, k, v, causal=True, layout="bnhd").float().square().sum()

    q, k, v = _qkv("bnhd")
    loss = torch.compile(f, backend=backend, fullgraph=True)(q, k, v)
    loss.backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    assert len(captured) == 1  # fullgraph: one graph, no breaks
    code = "".join(m.code for m in captured[0].modules() if hasattr(m, "code"))
    assert "tilekittens.attention_fwd" in code and "tilekittens.attention_bwd" in code
    # eager on the stand-ins, through the autograd Function
    for t in (q, k, v):
        t.grad = None
    o, _ = _torch.AttentionFunction.apply(q, k, v, True, None, "bnhd", "auto", True)
    eager = o.float().square().sum()
    eager.backward()
    assert torch.equal(loss, eager)
    assert all(torch.equal(g, t.grad) for g, t in zip(grads, (q, k, v)))
