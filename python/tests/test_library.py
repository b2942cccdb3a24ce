"""Loading the library and talking to its C API: needs neither torch nor a GPU."""
import ctypes
import os
import subprocess
import sys

import pytest

import tilekittens
from tilekittens import _errors, _lib


def _has_gpu():
    try:
        _lib.gpu_arch()
        return True
    except tilekittens.DeviceError:
        return False


def _run(code, **env):
    """`code` in a fresh interpreter: (returncode, stdout + stderr)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, **env))
    return r.returncode, r.stdout + r.stderr


def test_import_does_not_import_torch():
    rc, out = _run("import sys, tilekittens; assert 'torch' not in sys.modules, 'torch'")
    assert rc == 0, out


def test_version_matches_library():
    major, minor, _ = (int(x) for x in tilekittens.library_version().split("."))
    assert (major, minor) == _lib.ABI
    assert tilekittens.__version__.split(".")[:2] == [str(major), str(minor)]
    assert _lib.dll.tk_version_number() == major * 10000 + minor * 100 + int(
        tilekittens.library_version().split(".")[2])


def test_status_names_come_from_library():
    assert _lib.status_name(_errors.INVALID_ARG) == "TK_ERR_INVALID_ARG"
    assert _lib.status_name(_errors.NO_DRIVER) == "TK_ERR_NO_DRIVER"
    assert _lib.status_name(_errors.RUNTIME) == "TK_ERR_RUNTIME"


# ---- Status -> exception ----------------------------------------------------------
@pytest.mark.parametrize("status", [_errors.INVALID_ARG, _errors.TYPE, _errors.SHAPE])
def test_input_statuses_are_value_errors(status):
    e = _errors.error_for(status, "NAME", "what went wrong")
    assert isinstance(e, ValueError) and isinstance(e, tilekittens.InvalidArgumentError)
    assert not isinstance(e, RuntimeError)
    assert e.status == status and str(e) == "what went wrong [NAME]"


@pytest.mark.parametrize("status", range(4, 16))
def test_other_statuses_are_runtime_errors(status):
    e = _errors.error_for(status, "NAME", "m")
    assert isinstance(e, RuntimeError) and isinstance(e, tilekittens.DeviceError)
    assert not isinstance(e, ValueError)


def test_null_params_raise_the_library_message():
    with pytest.raises(ValueError, match=r"tk_attention_forward: params is NULL") as e:
        _lib.call("tk_attention_prepare", None, None)
    assert e.value.status == _errors.INVALID_ARG
    assert e.value.status_name == "TK_ERR_INVALID_ARG"
    with pytest.raises(tilekittens.InvalidArgumentError, match=r"tk_gemm: params is NULL"):
        _lib.call("tk_gemm", None, None)


# ---- Struct layouts -----------------------------------------------------------------
# (struct, the call that reads it, the name the library's messages use)
STRUCTS = [
    (_lib.AttentionParams, "tk_attention_prepare", "tk_attention_forward"),
    (_lib.AttentionBwdParams, "tk_attention_backward_prepare",
     "tk_attention_backward_prepare"),
    (_lib.GemmParams, "tk_gemm_prepare", "tk_gemm"),
]


def _call_raw(fn, buf):
    """fn(ctx, buf, NULL) with buf any bytes (the prototypes want the struct):
    (status, the library's message)."""
    f = getattr(ctypes.CDLL(_lib.path), fn)  # a second handle, its own prototype
    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    with _lib._lock:
        ctx = _lib._context()
        return f(ctx, ctypes.byref(buf), None), _lib.dll.tk_ctx_error(ctx).decode()


@pytest.mark.parametrize("cls,fn,name", STRUCTS)
def test_struct_size_zero_is_invalid(cls, fn, name):
    p = cls()
    p.struct_size = 0
    with pytest.raises(ValueError, match=rf"{name}: params.struct_size is 0"):
        _lib.call(fn, ctypes.byref(p), None)


@pytest.mark.parametrize("cls,fn,name", STRUCTS)
def test_struct_size_equals_the_library_sizeof(cls, fn, name):
    # A struct longer than the library's, with a byte set past ours: the
    # library refuses it and names where its own struct ends. That is our size.
    size = ctypes.sizeof(cls)
    buf = (ctypes.c_ubyte * (size + 8))()
    ctypes.memmove(buf, ctypes.byref(cls()), size)
    ctypes.c_size_t.from_buffer(buf).value = size + 8
    buf[size + 7] = 1
    status, msg = _call_raw(fn, buf)
    assert status == _errors.UNSUPPORTED, msg
    assert f"sets fields past byte {size}," in msg


@pytest.mark.parametrize("cls,fn,name", STRUCTS)
def test_struct_of_our_size_is_read(cls, fn, name):
    # Zeroed but for struct_size: read, then refused for a zero field.
    with pytest.raises(ValueError, match=rf"^{name}: ") as e:
        _lib.call(fn, ctypes.byref(cls()), None)
    assert "struct_size" not in str(e.value)


def _attention(**fields):
    base = dict(dtype=_lib.BF16, head_dim=64, causal=0, scale=0.0, batch=2, heads_q=4,
                heads_kv=2, seq_q=100, seq_kv=120, q=8, k=16, v=24, o=32, lse=40)
    base.update(fields)
    return _lib.AttentionParams(**base)


# Each field set to a value the library refuses, and what it says: a field
# at the wrong offset would be read as another one, or as 0.
ATTENTION_PROBES = [
    (dict(kernel=7), "kernel is 7"),
    (dict(dtype=_lib.F32), "dtype is f32"),
    (dict(head_dim=80), "80"),
    (dict(causal=2), "causal is 2"),
    (dict(scale=-1.5), "scale -1.5 is not"),
    (dict(batch=0), "batch is 0"),
    (dict(heads_q=0), "heads_q is 0"),
    (dict(heads_kv=-3), "heads_kv is -3"),
    (dict(seq_q=-4), "seq_q is -4"),
    (dict(seq_kv=-5), "seq_kv is -5"),
    (dict(heads_q=6, heads_kv=4), r"heads_q \(6\) is not a multiple of heads_kv \(4\)"),
    (dict(q=0), "q is NULL"),
    (dict(k=0), "k is NULL"),
    (dict(v=0), "v is NULL"),
    (dict(o=0), "o is NULL"),
    (dict(lse=0), "lse is NULL"),
    (dict(q_strides=(_lib._I64x4)(1, 1, 1, 2)), r"q_strides\[3\] is 2"),
    (dict(k_strides=(_lib._I64x4)(1, 1, 1, 3)), r"k_strides\[3\] is 3"),
    (dict(v_strides=(_lib._I64x4)(1, 1, 1, 4)), r"v_strides\[3\] is 4"),
    (dict(o_strides=(_lib._I64x4)(1, -1, 1, 1)), r"o_strides\[1\] is negative"),
]


@pytest.mark.parametrize("fields,message", ATTENTION_PROBES)
def test_attention_fields_reach_the_library(fields, message):
    with pytest.raises(ValueError, match=message):
        _lib.call("tk_attention_prepare", ctypes.byref(_attention(**fields)), None)


def _gemm(**fields):
    base = dict(in_dtype=_lib.BF16, out_dtype=_lib.F32, transpose_b=0, m=64, n=32, k=48,
                a=8, b=16, c=24, lda=48, ldb=32, ldc=32)
    base.update(fields)
    return _lib.GemmParams(**base)


GEMM_PROBES = [
    (dict(in_dtype=_lib.F32), "in_dtype is f32"),
    (dict(out_dtype=0), "out_dtype is"),
    (dict(transpose_b=3), "transpose_b is 3"),
    (dict(m=0), "m, n, k are 0, 32, 48"),
    (dict(n=-2), "m, n, k are 64, -2, 48"),
    (dict(k=0), "m, n, k are 64, 32, 0"),
    (dict(a=0), "a is NULL"),
    (dict(b=0), "b is NULL"),
    (dict(c=0), "c is NULL"),
    (dict(lda=47), "lda 47 < k 48"),
    (dict(ldb=31), "ldb 31 < 32"),
    (dict(ldc=1), "ldc 1 < n 32"),
    # the grown fields (the epilogue), each at its offset
    (dict(transpose_a=2), "transpose_a is 2"),
    (dict(transpose_a=1, lda=63), "lda 63 < m 64"),
    (dict(accumulate=1), "accumulate reads and writes c"),
    (dict(bias=9), "bias 0x9 is not aligned"),
    (dict(aux=1 << 20), "aux without an activation"),
    (dict(act=2), "aux is not set"),
    (dict(act=1, aux=1 << 20, ldaux=5), "ldaux 5 < n 32"),
    (dict(act=3), "act is 3"),
]


@pytest.mark.parametrize("fields,message", GEMM_PROBES)
def test_gemm_fields_reach_the_library(fields, message):
    with pytest.raises(ValueError, match=message):
        _lib.call("tk_gemm_prepare", ctypes.byref(_gemm(**fields)), None)


def _bwd(**fields):
    base = dict(dtype=_lib.F16, head_dim=128, causal=1, scale=0.0, batch=1, heads_q=2,
                heads_kv=1, seq_q=64, seq_kv=64, q=8, k=16, v=24, o=32, dout=40, lse=48,
                dq=56, dk=64, dv=72, workspace=80, workspace_bytes=1 << 20)
    base.update(fields)
    return _lib.AttentionBwdParams(**base)


BWD_PROBES = [
    (dict(head_dim=256), "head_dim is 256"),
    (dict(causal=5), "causal is 5"),
    (dict(seq_kv=0), "seq_kv is 0"),
    (dict(dout=0), "dout is NULL"),
    (dict(dv=0), "dv is NULL"),
    (dict(lse=0), "lse is NULL"),
    (dict(workspace=0), "workspace is NULL"),
    (dict(workspace=82), "workspace is not 4-byte aligned"),
    (dict(workspace_bytes=4), "workspace_bytes is 4"),
    (dict(dout_strides=(_lib._I64x4)(1, 1, 1, 2)), r"dout_strides\[3\] is 2"),
    (dict(dk_strides=(_lib._I64x4)(1, 1, 1, 2)), r"dk_strides\[3\] is 2"),
    (dict(lse_strides=(_lib._I64x3)(1, -1, 1)), r"lse_strides\[1\] is negative"),
    (dict(mode=3), "mode is 3"),
    (dict(mode=1, workspace_bytes=1024), "workspace_bytes is 1024"),  # the accumulator's room
]


@pytest.mark.parametrize("fields,message", BWD_PROBES)
def test_backward_fields_reach_the_library(fields, message):
    with pytest.raises(ValueError, match=message):
        _lib.call("tk_attention_backward_prepare", ctypes.byref(_bwd(**fields)), None)


def test_backward_workspace_size():
    n = ctypes.c_size_t()
    _lib.call("tk_attention_backward_workspace", ctypes.byref(_bwd()), ctypes.byref(n))
    assert n.value >= 4 * 1 * 2 * 64  # f32 [B, Hq, Nq]
    fast = ctypes.c_size_t()
    _lib.call("tk_attention_backward_workspace", ctypes.byref(_bwd(mode=1)), ctypes.byref(fast))
    assert fast.value >= n.value + 4 * 1 * 2 * 64 * 128  # and the f32 dQ accumulator


@pytest.mark.skipif(_has_gpu(), reason="checks the no-GPU path")
def test_valid_params_without_gpu_are_a_runtime_error():
    for fn, p in (("tk_attention_prepare", _attention()), ("tk_gemm_prepare", _gemm()),
                  ("tk_attention_backward_prepare", _bwd())):
        with pytest.raises(RuntimeError) as e:
            _lib.call(fn, ctypes.byref(p), None)
        assert e.value.status in (_errors.NO_DRIVER, _errors.CUDA), str(e.value)


# ---- Compile progress ------------------------------------------------------------
def _info(origin, ms=812.4, arch=b"sm_90a"):
    return _lib.PrepareInfo(origin=origin, ms=ms, arch=arch)


def test_compile_is_reported_once_per_compile(capsys, monkeypatch):
    monkeypatch.delenv("TILEKITTENS_QUIET", raising=False)
    _lib.report("attention bf16 D128", _info(_lib.FROM_COMPILE))
    _lib.report("attention bf16 D128", _info(2))  # a memory hit
    _lib.report("attention bf16 D128", _info(1))  # a disk hit
    err = capsys.readouterr().err
    assert err == "tilekittens: compiled attention bf16 D128 for sm_90a in 812 ms\n"


def test_compile_report_silenced(capsys, monkeypatch):
    monkeypatch.setenv("TILEKITTENS_QUIET", "1")
    _lib.report("gemm bf16->f32", _info(_lib.FROM_COMPILE))
    monkeypatch.delenv("TILEKITTENS_QUIET")
    tilekittens.set_quiet()
    try:
        _lib.report("gemm bf16->f32", _info(_lib.FROM_COMPILE))
    finally:
        tilekittens.set_quiet(False)
    assert capsys.readouterr().err == ""


# ---- Finding the library ---------------------------------------------------------
@pytest.fixture
def bare_package(tmp_path):
    """A copy of the package's Python files without the library, on a path."""
    src = os.path.dirname(tilekittens.__file__)
    dst = tmp_path / "tilekittens"
    dst.mkdir()
    for f in os.listdir(src):
        if f.endswith(".py"):
            (dst / f).write_bytes(open(os.path.join(src, f), "rb").read())
    return str(tmp_path)


def test_inside_the_package_first():
    if os.path.dirname(_lib.path) != os.path.dirname(os.path.abspath(tilekittens.__file__)):
        pytest.skip("this tilekittens has no library inside (TILEKITTENS_LIB or the system's)")
    rc, out = _run("import tilekittens; print(tilekittens.library_path)",
                   TILEKITTENS_LIB="/nonexistent/libtilekittens.so")
    assert rc == 0 and out.strip() == _lib.path, out


def test_env_file_and_directory(bare_package):
    code = "import tilekittens; print(tilekittens.library_path)"
    for where in (_lib.path, os.path.dirname(_lib.path)):
        rc, out = _run(code, PYTHONPATH=bare_package, TILEKITTENS_LIB=where)
        assert rc == 0, out
        assert os.path.realpath(out.strip()) == os.path.realpath(_lib.path)


def test_env_missing_is_a_clear_import_error(bare_package, tmp_path):
    rc, out = _run("import tilekittens", PYTHONPATH=bare_package,
                   TILEKITTENS_LIB=str(tmp_path / "nope.so"))
    assert rc != 0 and "ImportError: tilekittens: TILEKITTENS_LIB=" in out, out
    assert "does not exist" in out
    rc, out = _run("import tilekittens", PYTHONPATH=bare_package, TILEKITTENS_LIB=str(tmp_path))
    assert rc != 0 and "is a directory without libtilekittens.so" in out, out


def test_not_a_library_is_a_clear_import_error(bare_package, tmp_path):
    bogus = tmp_path / "libtilekittens.so"
    bogus.write_text("not an ELF file")
    rc, out = _run("import tilekittens", PYTHONPATH=bare_package, TILEKITTENS_LIB=str(bogus))
    assert rc != 0 and f"ImportError: tilekittens: cannot load {bogus}" in out, out


def test_nowhere_is_a_clear_import_error(bare_package):
    import ctypes.util
    if ctypes.util.find_library("tilekittens"):
        pytest.skip("a libtilekittens is installed on this system")
    env = {k: v for k, v in os.environ.items() if k != "TILEKITTENS_LIB"}
    env["PYTHONPATH"] = bare_package
    r = subprocess.run([sys.executable, "-c", "import tilekittens"], capture_output=True,
                       text=True, env=env)
    assert r.returncode != 0
    assert "ImportError: tilekittens: libtilekittens.so not found" in r.stderr, r.stderr
