"""TileKittens' ready-made GPU kernels on PyTorch tensors.

    import torch, tilekittens
    o = tilekittens.attention(q, k, v, causal=True)      # q, k, v: [B, H, N, D] bf16/f16
    c = tilekittens.gemm(a, b, out_dtype=torch.float32)  # a [M, K] @ b [K, N]

ctypes over libtilekittens.so (found inside the package, then at
$TILEKITTENS_LIB, then on the system's library path); no compiled extension.
`import tilekittens` does not import torch: the calls that take tensors do."""
import sys

from . import _lib
from ._errors import DeviceError, InvalidArgumentError, TileKittensError

__version__ = "0.2.0"

__all__ = ["attention", "gemm", "set_quiet", "library_version", "library_path",
           "TileKittensError", "InvalidArgumentError", "DeviceError"]

library_path = _lib.path


def library_version():
    """The loaded libtilekittens.so's version, e.g. "0.2.0"."""
    return _lib.version()


def set_quiet(quiet=True):
    """Silences (or restores) the one stderr line per kernel compile, e.g.
    "tilekittens: compiled attention bf16 D128 for sm_90a in 812 ms".
    TILEKITTENS_QUIET=1 in the environment does the same."""
    _lib.set_quiet(quiet)


def _torch_side():
    try:
        from . import _torch
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise ImportError("tilekittens: this call takes PyTorch tensors, and torch is not "
                          "installed (pip install torch)") from e
    return _torch


def attention(q, k, v, causal=False, scale=None, layout="bhnd", return_lse=False, kernel="auto",
              deterministic=True):
    """Softmax attention, o = softmax(scale * q kᵀ [causal mask]) v.

    q: [B, Hq, Nq, D], k and v: [B, Hkv, Nkv, D] with layout="bhnd", or
    [B, N, H, D] with layout="bnhd"; bf16 or f16 on cuda:0, any strides with
    the last dim contiguous. Hq a multiple of Hkv (grouped-query attention).
    D 64, 128 or 256 (backward: 64 or 128). causal: aligned
    bottom-right, as in FlashAttention-2. scale: default 1/sqrt(D).
    Returns o in q's shape (dense), and with return_lse the natural-log
    log-sum-exp of each score row, f32 [B, Hq, Nq]. Differentiable in q, k, v.
    Runs on the current CUDA stream. kernel: "auto" (the Hopper kernels on
    sm_90a, mma.sync elsewhere), "mma_sync" or "wgmma" (sm_90a only), for
    the forward and the backward alike. deterministic: the backward's mode,
    True (default) for bit-identical gradients (P and dS computed twice),
    False for the fast mode (P and dS once, dQ added with float atomics, so
    its last bits vary from run to run; on an H200 it is not yet faster:
    bench/RESULTS.md); None follows torch.are_deterministic_algorithms_enabled().
    Arrays of other frameworks (CuPy, JAX, ...: anything with __dlpack__)
    are read in place through DLPack; results are torch tensors, which those
    frameworks take back with their from_dlpack."""
    return _torch_side().attention(q, k, v, causal, scale, layout, return_lse, kernel,
                                   deterministic)


def gemm(a, b, transpose_b=False, out_dtype=None):
    """c = a @ b (a @ b.T with transpose_b): a [M, K] row-major, b [K, N] (or
    [N, K]) row- or column-major (a transposed view such as w.t() is read in
    place), both bf16 or both f16 on cuda:0; f32 accumulation; out_dtype
    torch.bfloat16, torch.float16 or torch.float32 (default: a's dtype).
    Forward only (no autograd). Runs on the current CUDA stream. Arrays with
    __dlpack__ are taken as attention() says."""
    return _torch_side().gemm(a, b, transpose_b, out_dtype)


# With torch already loaded, register the custom ops now, so torch.compile
# never traces their registration; otherwise the first call does it.
if "torch" in sys.modules:
    _torch_side()
