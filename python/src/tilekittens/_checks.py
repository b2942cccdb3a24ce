"""Checks of tensor arguments before any C call, on anything tensor-like
(shape, stride(), dtype, device): torch tensors, or the tests' stand-ins,
so this file never imports torch.

What is checked here is what the C library cannot see: which memory layout
the caller meant, the device a tensor lives on, dtypes matching each other.
Sizes and head dims the library checks itself and reports."""
import math
from dataclasses import dataclass

from . import _lib

_IN_DTYPES = {"torch.bfloat16": _lib.BF16, "torch.float16": _lib.F16}
_OUT_DTYPES = dict(_IN_DTYPES, **{"torch.float32": _lib.F32})
_DTYPE_NAMES = {_lib.BF16: "bf16", _lib.F16: "f16", _lib.F32: "f32"}
# layout -> the user's dim that holds each of [B, H, N, D]
_LAYOUTS = {"bhnd": (0, 1, 2, 3), "bnhd": (0, 2, 1, 3)}
_KERNELS = {"auto": 0, "mma_sync": 1, "wgmma": 2}


def dtype_name(code):
    return _DTYPE_NAMES[code]


def _tensor(t, name, ndim):
    for attr in ("shape", "stride", "dtype", "device", "data_ptr"):
        if not hasattr(t, attr):
            raise TypeError(f"tilekittens: {name} must be a torch.Tensor (or an array with "
                            f"__dlpack__), got {type(t).__name__}")
    if len(t.shape) != ndim:
        raise ValueError(f"tilekittens: {name} must have {ndim} dims, got shape {tuple(t.shape)}")


def _device(tensors):
    """The one CUDA device of all `tensors` ({name: tensor}); the library
    runs on device 0's primary context, the one PyTorch's cuda:0 uses."""
    first = None
    for name, t in tensors.items():
        dev = t.device
        if dev.type != "cuda":
            raise ValueError(f"tilekittens: {name} is on {dev}; tilekittens runs on CUDA "
                             "tensors only (move it with .cuda())")
        index = 0 if dev.index is None else dev.index
        if first is None:
            first = (name, index)
        elif index != first[1]:
            raise ValueError(f"tilekittens: {name} is on cuda:{index} but {first[0]} on "
                             f"cuda:{first[1]}")
    if first[1] != 0:
        raise ValueError(f"tilekittens: tensors are on cuda:{first[1]}; the library runs on "
                         "CUDA device 0 (choose the GPU with CUDA_VISIBLE_DEVICES)")
    return first[1]


def _in_dtype(tensors):
    names = list(tensors)
    dt = str(tensors[names[0]].dtype)
    if dt not in _IN_DTYPES:
        raise ValueError(f"tilekittens: {names[0]} is {dt}; expected torch.bfloat16 or "
                         "torch.float16")
    for name in names[1:]:
        other = str(tensors[name].dtype)
        if other != dt:
            raise ValueError(f"tilekittens: {name} is {other} but {names[0]} is {dt}")
    return _IN_DTYPES[dt]


@dataclass(frozen=True)
class AttentionSpec:
    dtype: int  # tk_dtype
    layout: str
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    head_dim: int
    causal: bool
    scale: float
    kernel: int  # tk_attn_kernel

    def strides(self, t):
        """t's strides in the library's [B, H, N, D] order."""
        s = t.stride()
        return tuple(s[d] for d in _LAYOUTS[self.layout])

    def describe(self):
        return (f"attention {dtype_name(self.dtype)} D{self.head_dim}" +
                (" causal" if self.causal else ""))


def attention(q, k, v, causal=False, scale=None, layout="bhnd", kernel="auto"):
    """The AttentionSpec of an attention call, or the exception that says
    what is wrong with it."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensor(t, name, 4)
    if layout not in _LAYOUTS:
        raise ValueError(f"tilekittens: layout must be 'bhnd' or 'bnhd', got {layout!r}")
    if kernel not in _KERNELS:
        raise ValueError(f"tilekittens: kernel must be one of {sorted(_KERNELS)}, got {kernel!r}")
    tensors = {"q": q, "k": k, "v": v}
    dtype = _in_dtype(tensors)
    _device(tensors)
    perm = _LAYOUTS[layout]
    (b, hq, nq, d), (bk, hkv, nkv, dk) = ([t.shape[i] for i in perm] for t in (q, k))
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"tilekittens: k {tuple(k.shape)} and v {tuple(v.shape)} differ in shape")
    where = "[B, H, N, D]" if layout == "bhnd" else "[B, N, H, D]"
    if bk != b or dk != d:
        raise ValueError(f"tilekittens: q {tuple(q.shape)} and k {tuple(k.shape)} ({where}) "
                         "differ in batch or head dim")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"tilekittens: q's {hq} heads are not a multiple of k's {hkv} "
                         f"(grouped-query attention; layout {layout!r}: {where})")
    for name, t in tensors.items():
        if t.stride()[3] != 1:
            raise ValueError(f"tilekittens: {name}'s last dim must be contiguous (stride 1); its "
                             f"strides are {tuple(t.stride())} (use .contiguous())")
    if scale is None:
        scale = 1.0 / math.sqrt(d) if d > 0 else 1.0
    else:
        scale = float(scale)
        # the library reads 0 as "the default": never let a 0 through
        if not (scale > 0.0 and math.isfinite(scale)):
            raise ValueError(f"tilekittens: scale must be a finite number > 0, got {scale}")
    return AttentionSpec(dtype, layout, b, hq, hkv, nq, nkv, d, bool(causal), scale,
                         _KERNELS[kernel])


@dataclass(frozen=True)
class GemmSpec:
    in_dtype: int
    out_dtype: int
    out_torch_dtype: str  # e.g. "torch.float32"
    m: int
    n: int
    k: int
    transpose_b: bool
    lda: int
    ldb: int

    def describe(self):
        return (f"gemm {dtype_name(self.in_dtype)}->{dtype_name(self.out_dtype)}" +
                (" B^T" if self.transpose_b else ""))


def _pitch(rows, cols, row_stride, col_stride):
    """The row pitch of a rows x cols matrix stored row by row (columns
    contiguous, rows apart), else None. Rows that overlap (an expand's 0
    stride) are refused: the library would read a pitch of 0 as "dense". A
    single row has any pitch, so the smallest valid one."""
    if cols != 1 and col_stride != 1:
        return None
    if rows == 1:
        return cols
    return row_stride if row_stride >= cols else None


def gemm(a, b, transpose_b=False, out_dtype=None):
    """The GemmSpec of a gemm call. B stored column by column (a transposed
    view, e.g. w.t()) is read as the row-major matrix it views, with
    transpose_b flipped: no copy, and never a silent reading of the wrong
    layout. A must be row-major."""
    _tensor(a, "a", 2)
    _tensor(b, "b", 2)
    in_dtype = _in_dtype({"a": a, "b": b})
    _device({"a": a, "b": b})
    out = str(a.dtype) if out_dtype is None else str(out_dtype)
    if out not in _OUT_DTYPES:
        raise ValueError(f"tilekittens: out_dtype must be torch.bfloat16, torch.float16 or "
                         f"torch.float32, got {out}")
    m, k = a.shape
    kb, n = (b.shape[1], b.shape[0]) if transpose_b else tuple(b.shape)
    if kb != k:
        op = "b.T" if transpose_b else "b"
        raise ValueError(f"tilekittens: a {tuple(a.shape)} @ {op} ({kb}x{n}): inner dims "
                         f"{k} and {kb} differ")
    lda = _pitch(m, k, *a.stride())
    if lda is None:
        raise ValueError(f"tilekittens: a must be row-major (last dim contiguous, rows apart); "
                         f"its strides are {tuple(a.stride())} (use .contiguous())")
    (r, c), (sr, sc) = tuple(b.shape), tuple(b.stride())
    ldb = _pitch(r, c, sr, sc)
    if ldb is None:
        # Column by column: the row-major transpose of what b views.
        ldb = _pitch(c, r, sc, sr)
        transpose_b = not transpose_b
    if ldb is None:
        raise ValueError(f"tilekittens: b is neither row- nor column-major with distinct rows; "
                         f"its strides are {tuple(b.stride())} (use .contiguous())")
    return GemmSpec(in_dtype, _OUT_DTYPES[out], out, m, n, k, bool(transpose_b), lda, ldb)
