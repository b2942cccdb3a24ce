"""Finding and loading libtilekittens.so, and its C API through ctypes.

The structs mirror include/tk/tk_run.h for ABI 0.2. Each opens with
struct_size, set to ctypes' size of the struct: the library reads only the
bytes a caller's struct has (docs/API.md, "Parameter structs"), so a newer
library still reads this binding correctly; an older one refuses a struct
with fields it does not know instead of ignoring them."""
import ctypes
import ctypes.util
import glob
import os
import sys
import threading
import warnings

from . import _errors

# The library ABI these structs describe: before 1.0 a minor version may
# change it, so a library of another MAJOR.MINOR is refused at import.
ABI = (0, 2)

_I64x4 = ctypes.c_int64 * 4
_I64x3 = ctypes.c_int64 * 3

# tk_dtype values (tk.h)
F32, BF16, F16 = 1, 2, 3

# The fields tk_attention_params and tk_attention_bwd_params open with.
_ATTENTION_HEAD = [
    ("struct_size", ctypes.c_size_t),
    ("dtype", ctypes.c_int),
    ("head_dim", ctypes.c_int32),
    ("causal", ctypes.c_int32),
    ("scale", ctypes.c_float),
    ("batch", ctypes.c_int64),
    ("heads_q", ctypes.c_int64),
    ("heads_kv", ctypes.c_int64),
    ("seq_q", ctypes.c_int64),
    ("seq_kv", ctypes.c_int64),
]


class _Params(ctypes.Structure):
    """A parameter struct whose struct_size is already set."""

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(type(self)), **fields)


class AttentionParams(_Params):
    _fields_ = _ATTENTION_HEAD + [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("q_strides", _I64x4),
        ("k_strides", _I64x4),
        ("v_strides", _I64x4),
        ("o_strides", _I64x4),
        ("lse_strides", _I64x3),
        ("kernel", ctypes.c_int32),  # tk_attn_kernel
        ("workspace", ctypes.c_void_p),  # the decoding kernels' split partials
        ("workspace_bytes", ctypes.c_size_t),
        ("num_splits", ctypes.c_int32),  # 0: the library's choice
        # a KV cache (tk_run.h): per-sequence lengths, a paged pool, new rows appended
        ("seqlens_kv", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("max_pages", ctypes.c_int64),
        ("num_pages", ctypes.c_int64),
        ("page_size", ctypes.c_int64),
        ("k_new", ctypes.c_void_p),
        ("v_new", ctypes.c_void_p),
        ("k_new_strides", _I64x4),
        ("v_new_strides", _I64x4),
        # packed variable-length batches (tk_run.h): prefix sums over [total, H, D]
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_kv", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_kv", ctypes.c_int64),
        # Q's rotary embedding fused into the forward (a const tk_rotary_params *; NULL: none)
        ("rotary", ctypes.c_void_p),
    ]


class AttentionBwdParams(_Params):
    _fields_ = _ATTENTION_HEAD + [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("dout", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p),
        ("dk", ctypes.c_void_p),
        ("dv", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("q_strides", _I64x4),
        ("k_strides", _I64x4),
        ("v_strides", _I64x4),
        ("o_strides", _I64x4),
        ("dout_strides", _I64x4),
        ("dq_strides", _I64x4),
        ("dk_strides", _I64x4),
        ("dv_strides", _I64x4),
        ("lse_strides", _I64x3),
        ("kernel", ctypes.c_int32),
        ("mode", ctypes.c_int32),  # tk_attn_bwd_mode: 0 deterministic, 1 fast
        # packed variable-length batches (tk_run.h), as in the forward
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_kv", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_kv", ctypes.c_int64),
    ]


class GemmParams(_Params):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("in_dtype", ctypes.c_int),
        ("out_dtype", ctypes.c_int),
        ("transpose_b", ctypes.c_int32),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("a", ctypes.c_void_p),
        ("b", ctypes.c_void_p),
        ("c", ctypes.c_void_p),
        ("lda", ctypes.c_int64),
        ("ldb", ctypes.c_int64),
        ("ldc", ctypes.c_int64),
        # const tk_gemm_config *: this binding always leaves it NULL, the
        # library's own choice of block shape for each size.
        ("config", ctypes.c_void_p),
        # The epilogue and A's layout (include/tk/tk_run_gemm.h); 0 / NULL: a
        # plain GEMM, which is all this binding asks for today.
        ("transpose_a", ctypes.c_int32),
        ("accumulate", ctypes.c_int32),
        ("bias", ctypes.c_void_p),
        ("aux", ctypes.c_void_p),
        ("ldaux", ctypes.c_int64),
        ("act", ctypes.c_int32),  # tk_gemm_act: 0 none, 1 GELU, 2 DGELU
        # The split over K (tk_run_gemm.h); NULL / 0: none
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("split_k", ctypes.c_int32),  # 0: the library's choice, 1: none, 2..64
    ]


class PrepareInfo(ctypes.Structure):
    _fields_ = [("origin", ctypes.c_int), ("ms", ctypes.c_double), ("arch", ctypes.c_char * 16)]


FROM_COMPILE = 0  # tk_origin: a fresh compile (1: the disk cache, 2: memory)

_P = ctypes.POINTER
_ctx_t = ctypes.c_void_p
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
# name: (restype, argtypes)
_PROTOTYPES = {
    "tk_version": (ctypes.c_char_p, []),
    "tk_version_number": (ctypes.c_int, []),
    "tk_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "tk_ctx_create": (ctypes.c_int, [_P(_ctx_t)]),
    "tk_ctx_destroy": (None, [_ctx_t]),
    "tk_ctx_error": (ctypes.c_char_p, [_ctx_t]),
    "tk_ctx_set_log": (ctypes.c_int, [_ctx_t, _LOG_FN, ctypes.c_void_p]),
    "tk_gpu_arch": (ctypes.c_int, [_ctx_t, ctypes.c_char_p, ctypes.c_size_t]),
    "tk_attention_prepare": (ctypes.c_int, [_ctx_t, _P(AttentionParams), _P(PrepareInfo)]),
    "tk_attention_forward": (ctypes.c_int, [_ctx_t, _P(AttentionParams), ctypes.c_void_p]),
    "tk_attention_forward_workspace": (
        ctypes.c_int, [_ctx_t, _P(AttentionParams), _P(ctypes.c_size_t)]),
    "tk_attention_backward_workspace": (
        ctypes.c_int, [_ctx_t, _P(AttentionBwdParams), _P(ctypes.c_size_t)]),
    "tk_attention_backward_prepare": (
        ctypes.c_int, [_ctx_t, _P(AttentionBwdParams), _P(PrepareInfo)]),
    "tk_attention_backward": (ctypes.c_int, [_ctx_t, _P(AttentionBwdParams), ctypes.c_void_p]),
    "tk_gemm_prepare": (ctypes.c_int, [_ctx_t, _P(GemmParams), _P(PrepareInfo)]),
    "tk_gemm": (ctypes.c_int, [_ctx_t, _P(GemmParams), ctypes.c_void_p]),
}


def _find():
    """(path, how it was found): the package's own copy, then
    $TILEKITTENS_LIB (the file, or a directory holding libtilekittens.so*),
    then the system's search (ctypes.util.find_library)."""
    here = os.path.dirname(os.path.abspath(__file__))
    inside = sorted(glob.glob(os.path.join(here, "libtilekittens.so*")))
    if inside:
        return inside[0], "inside the package"
    env = os.environ.get("TILEKITTENS_LIB")
    if env:
        if os.path.isdir(env):
            found = sorted(glob.glob(os.path.join(env, "libtilekittens.so*")))
            if not found:
                raise ImportError(f"tilekittens: TILEKITTENS_LIB={env} is a directory "
                                  "without libtilekittens.so*")
            return found[0], "TILEKITTENS_LIB"
        if not os.path.exists(env):
            raise ImportError(f"tilekittens: TILEKITTENS_LIB={env} does not exist")
        return env, "TILEKITTENS_LIB"
    name = ctypes.util.find_library("tilekittens")
    if name:
        return name, "the system's library path"
    raise ImportError(
        "tilekittens: libtilekittens.so not found: not inside the package (pip install ./python "
        "from the TileKittens repository builds it in), TILEKITTENS_LIB not set (the path of a "
        "built libtilekittens.so, or its directory), and none on the system's library path")


def _load():
    path, how = _find()
    try:
        dll = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"tilekittens: cannot load {path} (found {how}): {e}") from e
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(dll, name)
        except AttributeError as e:
            raise ImportError(f"tilekittens: {path} (found {how}) has no {name}: "
                              "not a TileKittens library of this version") from e
        fn.restype, fn.argtypes = restype, argtypes
    number = dll.tk_version_number()
    if (number // 10000, number // 100 % 100) != ABI:
        raise ImportError(f"tilekittens: {path} (found {how}) is version "
                          f"{dll.tk_version().decode()}; this package needs "
                          f"{ABI[0]}.{ABI[1]}.x")
    return dll, path


dll, path = _load()


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return dll.tk_version().decode()


def status_name(status):
    return dll.tk_status_name(status).decode()


def _log(user, status, msg):
    # The library's warnings (e.g. an unusable disk cache) through Python's
    # warnings, so a program can filter or escalate them.
    warnings.warn(f"tilekittens: {msg.decode(errors='replace')}", RuntimeWarning, stacklevel=2)


_log_fn = _LOG_FN(_log)  # kept alive: the library holds the pointer
_ctx = None
# One context per process. Its last error message is per context, so a call
# and the reading of its message are one step under this lock.
_lock = threading.RLock()


def _context():
    global _ctx
    if _ctx is None:
        c = ctypes.c_void_p()
        status = dll.tk_ctx_create(ctypes.byref(c))
        if status:
            raise _errors.error_for(status, status_name(status), "tk_ctx_create failed")
        dll.tk_ctx_set_log(c, _log_fn, None)
        _ctx = c
    return _ctx


def call(name, *args):
    """dll.<name>(ctx, *args); a failure raised with the library's message."""
    with _lock:
        ctx = _context()
        status = getattr(dll, name)(ctx, *args)
        if status:
            msg = dll.tk_ctx_error(ctx).decode(errors="replace")
            raise _errors.error_for(status, status_name(status), msg)


def gpu_arch():
    """The GPU's target name, e.g. "sm_90a" (a DeviceError without a GPU)."""
    buf = ctypes.create_string_buffer(32)
    call("tk_gpu_arch", buf, ctypes.sizeof(buf))
    return buf.value.decode()


_quiet = False


def set_quiet(quiet=True):
    global _quiet
    _quiet = bool(quiet)


def report(what, info):
    """One line on stderr for a kernel that `info` says was just compiled."""
    if info.origin != FROM_COMPILE or _quiet or os.environ.get("TILEKITTENS_QUIET") == "1":
        return
    arch = info.arch.decode(errors="replace")
    print(f"tilekittens: compiled {what} for {arch} in {info.ms:.0f} ms", file=sys.stderr,
          flush=True)
