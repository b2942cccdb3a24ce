"""The argument checks made before any C call, on tensor stand-ins (fakes.py):
no torch, no GPU."""
import importlib.util
import math

import pytest

import fakes
import tilekittens
from fakes import Device, Tensor
from tilekittens import _checks


def qkv(b=2, hq=8, hkv=2, nq=100, nkv=130, d=64, layout="bhnd", **kw):
    if layout == "bhnd":
        return Tensor((b, hq, nq, d), **kw), Tensor((b, hkv, nkv, d), **kw), Tensor(
            (b, hkv, nkv, d), **kw)
    return Tensor((b, nq, hq, d), **kw), Tensor((b, nkv, hkv, d), **kw), Tensor(
        (b, nkv, hkv, d), **kw)


def test_attention_bhnd():
    q, k, v = qkv()
    s = _checks.attention(q, k, v, causal=True)
    sizes = (s.batch, s.heads_q, s.heads_kv, s.seq_q, s.seq_kv, s.head_dim)
    assert sizes == (2, 8, 2, 100, 130, 64)
    assert s.causal and s.kernel == 0 and s.dtype == tilekittens._lib.BF16
    assert s.scale == pytest.approx(1 / 8)
    assert s.strides(q) == (8 * 100 * 64, 100 * 64, 64, 1)
    assert s.describe() == "attention bf16 D64 causal"


def test_attention_bnhd_reads_heads_and_rows_from_their_dims():
    q, k, v = qkv(layout="bnhd", dtype=fakes.f16)
    s = _checks.attention(q, k, v, layout="bnhd", scale=0.5, kernel="wgmma")
    assert (s.heads_q, s.heads_kv, s.seq_q, s.seq_kv) == (8, 2, 100, 130)
    # [B, N, H, D] memory, passed in [B, H, N, D] order
    assert s.strides(q) == (100 * 8 * 64, 64, 8 * 64, 1)
    assert s.scale == 0.5 and s.kernel == 2 and s.describe() == "attention f16 D64"


def test_attention_strided_views_pass_their_strides():
    # q from a packed [B, N, 3, H, D] qkv buffer: non-dense, last dim contiguous
    b, n, h, d = 2, 50, 4, 128
    q = Tensor((b, n, h, d), strides=(n * 3 * h * d, 3 * h * d, d, 1))
    s = _checks.attention(q, q, q, layout="bnhd")
    assert s.strides(q) == (n * 3 * h * d, d, 3 * h * d, 1)


@pytest.mark.parametrize("kwargs,message", [
    (dict(layout="bshd"), "layout must be 'bhnd' or 'bnhd'"),
    (dict(kernel="fast"), "kernel must be one of"),
    (dict(scale=0.0), "scale must be a finite number > 0"),
    (dict(scale=-1.0), "scale must be a finite number > 0"),
    (dict(scale=math.nan), "scale must be a finite number > 0"),
    (dict(scale=math.inf), "scale must be a finite number > 0"),
])
def test_attention_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _checks.attention(*qkv(), **kwargs)


def test_attention_gqa_needs_a_multiple():
    with pytest.raises(ValueError, match="q's 8 heads are not a multiple of k's 3"):
        _checks.attention(*qkv(hkv=3))


def test_attention_wrong_layout_is_caught_by_the_head_counts():
    # [B, N, H, D] tensors read as [B, H, N, D]: 100 "heads" vs 130
    q, k, v = qkv(layout="bnhd")
    with pytest.raises(ValueError, match="not a multiple"):
        _checks.attention(q, k, v, layout="bhnd")


@pytest.mark.parametrize("which,tensor,message", [
    ("k", Tensor((2, 2, 130, 64), dtype=fakes.f16), "k is torch.float16 but q is torch.bfloat16"),
    ("q", Tensor((2, 8, 100, 64), dtype=fakes.f32), "q is torch.float32; expected"),
    ("v", Tensor((2, 2, 131, 64)), r"k \(2, 2, 130, 64\) and v \(2, 2, 131, 64\) differ"),
    ("q", Tensor((3, 8, 100, 64)), "differ in batch or head dim"),
    ("q", Tensor((2, 8, 100, 128)), "differ in batch or head dim"),
    ("q", Tensor((2, 8, 100)), r"q must have 4 dims, got shape \(2, 8, 100\)"),
    ("v", Tensor((2, 2, 130, 64), strides=(2 * 130 * 128, 130 * 128, 128, 2)),
     r"v's last dim must be contiguous \(stride 1\)"),
    ("q", Tensor((2, 8, 100, 64), device=Device("cpu", None)),
     "q is on cpu; tilekittens runs on CUDA tensors only"),
    ("k", Tensor((2, 2, 130, 64), device=Device("cuda", 1)), "k is on cuda:1 but q on cuda:0"),
])
def test_attention_bad_tensors(which, tensor, message):
    t = dict(zip("qkv", qkv()))
    t[which] = tensor
    with pytest.raises(ValueError, match=message):
        _checks.attention(t["q"], t["k"], t["v"])


def test_attention_other_gpu_refused():
    q, k, v = qkv(device=Device("cuda", 1))
    with pytest.raises(ValueError, match="the library runs on CUDA device 0"):
        _checks.attention(q, k, v)


def test_attention_cuda_without_index_is_device_0():
    _checks.attention(*qkv(device=Device("cuda", None)))


def test_not_a_tensor_is_a_type_error():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=r"k must be a torch.Tensor \(or an array with __dlpack__\), got list"):
        _checks.attention(q, [[1.0]], v)


# ---- GEMM ------------------------------------------------------------------------
def test_gemm_row_major():
    s = _checks.gemm(Tensor((100, 48)), Tensor((48, 72)))
    assert (s.m, s.n, s.k, s.transpose_b, s.lda, s.ldb) == (100, 72, 48, False, 48, 72)
    assert s.out_torch_dtype == "torch.bfloat16" and s.describe() == "gemm bf16->bf16"


def test_gemm_transpose_b():
    s = _checks.gemm(Tensor((100, 48)), Tensor((72, 48)), transpose_b=True, out_dtype=fakes.f32)
    assert (s.n, s.k, s.transpose_b, s.ldb) == (72, 48, True, 48)
    assert s.out_dtype == tilekittens._lib.F32 and s.describe() == "gemm bf16->f32 B^T"


def test_gemm_transposed_view_of_b_is_read_in_place():
    w = Tensor((72, 48))  # a Linear weight [out, in]: x @ w.t()
    s = _checks.gemm(Tensor((100, 48)), w.t())
    assert (s.n, s.k, s.transpose_b, s.ldb) == (72, 48, True, 48)
    # and a transposed view with transpose_b: plain B again
    s = _checks.gemm(Tensor((100, 48)), Tensor((48, 72)).t(), transpose_b=True)
    assert (s.n, s.k, s.transpose_b, s.ldb) == (72, 48, False, 72)


def test_gemm_padded_rows_pass_their_pitch():
    a = Tensor((100, 48), strides=(64, 1))  # a[:, :48] of a [100, 64]
    assert _checks.gemm(a, Tensor((48, 72))).lda == 64


def test_gemm_single_row_any_stride():
    a = Tensor((1, 48), strides=(1, 1))  # e.g. the transpose of a [48, 1] column
    assert _checks.gemm(a, Tensor((48, 72))).lda == 48


@pytest.mark.parametrize("a,b,kwargs,message", [
    (Tensor((100, 48)), Tensor((47, 72)), {}, "inner dims 48 and 47 differ"),
    (Tensor((100, 48)), Tensor((48, 72)), dict(transpose_b=True), "inner dims 48 and 72 differ"),
    (Tensor((48, 100)).t(), Tensor((48, 72)), {}, "a must be row-major"),
    (Tensor((100, 48), strides=(0, 1)), Tensor((48, 72)), {}, "a must be row-major"),
    (Tensor((100, 48)), Tensor((48, 72), strides=(144, 2)), {}, "b is neither row- nor"),
    (Tensor((100, 48)), Tensor((48, 72), strides=(0, 1)), {}, "b is neither row- nor"),
    (Tensor((100, 48)), Tensor((48, 72), dtype=fakes.f16), {}, "b is torch.float16 but a"),
    (Tensor((100, 48)), Tensor((48, 72)), dict(out_dtype=fakes.Dtype("int8")),
     "out_dtype must be"),
    (Tensor((100, 48), device=Device("cpu", None)), Tensor((48, 72)), {}, "a is on cpu"),
    (Tensor((2, 100, 48)), Tensor((48, 72)), {}, "a must have 2 dims"),
])
def test_gemm_bad_arguments(a, b, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _checks.gemm(a, b, **kwargs)


def test_calls_without_torch_say_so():
    if importlib.util.find_spec("torch"):
        pytest.skip("torch is installed")
    with pytest.raises(ImportError, match="torch is not installed"):
        tilekittens.attention(*qkv())
    with pytest.raises(ImportError, match="torch is not installed"):
        tilekittens.gemm(Tensor((4, 4)), Tensor((4, 4)))
