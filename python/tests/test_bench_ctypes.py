"""bench/tk_ctypes.py (the benchmarks' binding of every ready-made kernel) against
the library's own struct sizes: a mismatch would make a benchmark pass fields the
library reads at other offsets. Needs neither torch nor a GPU."""
import ctypes
import importlib.util
import pathlib

import pytest

from tilekittens import _errors, _lib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "tk_ctypes.py"


def _bench_module():
    if not _PATH.exists():  # an installed package's tests, away from the tree
        pytest.skip(f"{_PATH} not present")
    spec = importlib.util.spec_from_file_location("tk_ctypes", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (the struct's name in bench/tk_ctypes.py, a call that checks its struct_size)
CALLS = [
    ("AttentionParams", "tk_attention_prepare"),
    ("AttentionBwdParams", "tk_attention_backward_prepare"),
    ("GemmParams", "tk_gemm_prepare"),
    ("NormParams", "tk_norm_prepare"),
    ("NormBwdParams", "tk_norm_backward_prepare"),
    ("RotaryParams", "tk_rotary_prepare"),
    ("BasedParams", "tk_based_prepare"),
    ("BasedBwdParams", "tk_based_backward_prepare"),
    ("HedgehogParams", "tk_hedgehog_prepare"),
    ("HedgehogBwdParams", "tk_hedgehog_backward_prepare"),
    ("GradNormParams", "tk_grad_norm_prepare"),
    ("AdamwParams", "tk_adamw_prepare"),
    ("XentParams", "tk_cross_entropy_prepare"),
    ("EmbeddingParams", "tk_embedding_forward_prepare"),
    ("EmbeddingBwdParams", "tk_embedding_backward_prepare"),
    ("BiasGradParams", "tk_bias_grad_prepare"),
]


@pytest.mark.parametrize("name,fn", CALLS)
def test_bench_struct_size_equals_the_library_sizeof(name, fn):
    # As test_library's check: a struct 8 bytes longer than ours with its last
    # byte set is refused with the byte where the library's struct ends.
    cls = getattr(_bench_module(), name)
    size = ctypes.sizeof(cls)
    buf = (ctypes.c_ubyte * (size + 8))()
    ctypes.c_size_t.from_buffer(buf).value = size + 8
    buf[size + 7] = 1
    f = getattr(ctypes.CDLL(_lib.path), fn)  # a second handle, its own prototype
    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_void_p] * 3
    with _lib._lock:
        ctx = _lib._context()
        status, msg = f(ctx, ctypes.byref(buf), None), _lib.dll.tk_ctx_error(ctx).decode()
    assert status == _errors.UNSUPPORTED, f"{name}: {msg}"
    assert f"sets fields past byte {size}," in msg, f"{name} is {size} bytes here: {msg}"
