"""The PyTorch side: the launches (current stream, output tensors), the custom
ops that torch.compile keeps as single opaque nodes, and the autograd Function
that trains attention with the library's backward kernels.

Imported on the first call that needs torch (or at `import tilekittens` when
torch is already imported), never by `import tilekittens` alone."""
import ctypes
import inspect

import torch

from . import _checks, _lib

_I64x4, _I64x3 = ctypes.c_int64 * 4, ctypes.c_int64 * 3
_LAYOUT_PERM = {"bhnd": (0, 1, 2, 3), "bnhd": (0, 2, 1, 3)}


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream


def _prepare(fn, what, params):
    info = _lib.PrepareInfo()
    _lib.call(fn, ctypes.byref(params), ctypes.byref(info))
    _lib.report(what, info)


def _attention_fwd(q, k, v, causal, scale, layout, kernel):
    s = _checks.attention(q, k, v, causal, scale, layout, kernel)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((s.batch, s.heads_q, s.seq_q), dtype=torch.float32, device=q.device)
    p = _lib.AttentionParams(
        dtype=s.dtype, head_dim=s.head_dim, causal=int(s.causal), scale=s.scale,
        batch=s.batch, heads_q=s.heads_q, heads_kv=s.heads_kv, seq_q=s.seq_q, seq_kv=s.seq_kv,
        q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr(),
        q_strides=_I64x4(*s.strides(q)), k_strides=_I64x4(*s.strides(k)),
        v_strides=_I64x4(*s.strides(v)), o_strides=_I64x4(*s.strides(o)),
        lse_strides=_I64x3(*lse.stride()), kernel=s.kernel)
    # Few queries run the split-KV decoding kernels, whose partials need a
    # workspace (stream-ordered, as in the backward); 0 bytes for the rest.
    need = ctypes.c_size_t()
    _lib.call("tk_attention_forward_workspace", ctypes.byref(p), ctypes.byref(need))
    workspace = None
    if need.value:
        workspace = torch.empty(need.value, dtype=torch.uint8, device=q.device)
        p.workspace, p.workspace_bytes = workspace.data_ptr(), workspace.numel()
    kernel_name = {0: "", 1: " (mma.sync)", 2: " (wgmma)"}[s.kernel]
    _prepare("tk_attention_prepare", s.describe() + kernel_name, p)
    _lib.call("tk_attention_forward", ctypes.byref(p), _stream(q))
    return o, lse


def _attention_bwd(dout, q, k, v, o, lse, causal, scale, layout, kernel, deterministic):
    s = _checks.attention(q, k, v, causal, scale, layout, kernel)
    if tuple(dout.shape) != tuple(o.shape):
        raise ValueError(f"tilekittens: the gradient of o is {tuple(dout.shape)}, o is "
                         f"{tuple(o.shape)}")
    # Autograd hands gradients in any layout (o.sum() gives an all-zero-stride
    # expand, which the library would read as dense): copy unless the last dim
    # is contiguous.
    if dout.stride()[3] != 1:
        dout = dout.contiguous()
    dout = dout.to(q.dtype)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    p = _lib.AttentionBwdParams(
        dtype=s.dtype, head_dim=s.head_dim, causal=int(s.causal), scale=s.scale,
        batch=s.batch, heads_q=s.heads_q, heads_kv=s.heads_kv, seq_q=s.seq_q, seq_kv=s.seq_kv,
        lse=lse.data_ptr(), lse_strides=_I64x3(*lse.stride()), kernel=s.kernel,
        mode=0 if deterministic else 1)
    for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("dout", dout), ("dq", dq),
                    ("dk", dk), ("dv", dv)):
        setattr(p, name, t.data_ptr())
        setattr(p, name + "_strides", _I64x4(*s.strides(t)))
    need = ctypes.c_size_t()
    _lib.call("tk_attention_backward_workspace", ctypes.byref(p), ctypes.byref(need))
    # Stream-ordered like any tensor of the current stream: freed on return,
    # reused only by work queued after the backward's kernels.
    workspace = torch.empty(max(need.value, 4), dtype=torch.uint8, device=q.device)
    p.workspace, p.workspace_bytes = workspace.data_ptr(), workspace.numel()
    _prepare("tk_attention_backward_prepare", s.describe().replace("attention", "attention "
                                                                   "backward", 1), p)
    _lib.call("tk_attention_backward", ctypes.byref(p), _stream(q))
    return dq, dk, dv


def _gemm(a, b, transpose_b, out_dtype):
    s = _checks.gemm(a, b, transpose_b, out_dtype)
    c = torch.empty((s.m, s.n), dtype=getattr(torch, s.out_torch_dtype[len("torch."):]),
                    device=a.device)
    if s.m == 0 or s.n == 0:
        return c
    if s.k == 0:  # an empty sum
        return c.zero_()
    p = _lib.GemmParams(in_dtype=s.in_dtype, out_dtype=s.out_dtype,
                        transpose_b=int(s.transpose_b), m=s.m, n=s.n, k=s.k,
                        a=a.data_ptr(), b=b.data_ptr(), c=c.data_ptr(),
                        lda=s.lda, ldb=s.ldb, ldc=s.n)
    _prepare("tk_gemm_prepare", s.describe(), p)
    _lib.call("tk_gemm", ctypes.byref(p), _stream(a))
    return c


# ---- What torch.compile sees: shapes from the fake functions, the rest opaque.
def _attention_fwd_fake(q, k, v, causal, scale, layout, kernel):
    if layout not in _LAYOUT_PERM:
        raise ValueError(f"tilekittens: layout must be 'bhnd' or 'bnhd', got {layout!r}")
    b, h, n = (q.shape[i] for i in _LAYOUT_PERM[layout][:3])
    return q.new_empty(q.shape), q.new_empty((b, h, n), dtype=torch.float32)


def _attention_bwd_fake(dout, q, k, v, o, lse, causal, scale, layout, kernel, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _gemm_fake(a, b, transpose_b, out_dtype):
    n = b.shape[0] if transpose_b else b.shape[1]
    return a.new_empty((a.shape[0], n), dtype=out_dtype or a.dtype)


def _register():
    """(forward, backward, gemm) as torch.library custom ops where this torch
    has torch.library.custom_op with a schema argument (2.4+), else the plain
    functions (eager and autograd work; torch.compile traces into them)."""
    custom_op = getattr(torch.library, "custom_op", None)
    if custom_op is None or "schema" not in inspect.signature(custom_op).parameters:
        return _attention_fwd, _attention_bwd, _gemm
    ops = []
    for name, fn, fake, schema in (
        ("attention_fwd", _attention_fwd, _attention_fwd_fake,
         "(Tensor q, Tensor k, Tensor v, bool causal, float? scale, str layout, str kernel)"
         " -> (Tensor, Tensor)"),
        ("attention_bwd", _attention_bwd, _attention_bwd_fake,
         "(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, bool causal,"
         " float? scale, str layout, str kernel, bool deterministic)"
         " -> (Tensor, Tensor, Tensor)"),
        ("gemm", _gemm, _gemm_fake,
         "(Tensor a, Tensor b, bool transpose_b, ScalarType? out_dtype) -> Tensor"),
    ):
        op = custom_op(f"tilekittens::{name}", fn, mutates_args=(), schema=schema)
        op.register_fake(fake)
        ops.append(op)
    return tuple(ops)


attention_fwd_op, attention_bwd_op, gemm_op = _register()


class AttentionFunction(torch.autograd.Function):
    """o, lse = AttentionFunction.apply(q, k, v, causal, scale, layout, kernel,
    deterministic); lse carries no gradient."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, layout, kernel, deterministic):
        o, lse = attention_fwd_op(q, k, v, causal, scale, layout, kernel)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale, ctx.layout, ctx.kernel = causal, scale, layout, kernel
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_bwd_op(dout, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.layout,
                                      ctx.kernel, ctx.deterministic)
        return dq, dk, dv, None, None, None, None, None


def _compiling():
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())


def _from_dlpack(x):
    """x if it is a torch tensor or not an array at all; another framework's
    array (CuPy, JAX, ...: anything with __dlpack__) as a torch tensor over
    the same memory, no copy."""
    if isinstance(x, torch.Tensor) or not hasattr(x, "__dlpack__"):
        return x
    return torch.from_dlpack(x)


def attention(q, k, v, causal, scale, layout, return_lse, kernel, deterministic):
    q, k, v = (_from_dlpack(t) for t in (q, k, v))
    # Checked before autograd is involved, so a mistake is reported at the
    # call. While torch.compile traces, the ops check at run time instead
    # (tracing sees fake tensors). scale None: both ops resolve it alike.
    if not _compiling():
        _checks.attention(q, k, v, causal, scale, layout, kernel)
    scale = None if scale is None else float(scale)
    if deterministic is None:  # torch's own switch, as its SDPA backward reads it
        deterministic = torch.are_deterministic_algorithms_enabled()
    o, lse = AttentionFunction.apply(q, k, v, bool(causal), scale, layout, kernel,
                                     bool(deterministic))
    return (o, lse) if return_lse else o


def gemm(a, b, transpose_b, out_dtype):
    a, b = _from_dlpack(a), _from_dlpack(b)
    return gemm_op(a, b, bool(transpose_b), out_dtype)
