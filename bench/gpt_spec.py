"""The torch-free half of the PyTorch reference of examples/gpt (gpt-train): the SPEC's
(examples/gpt/SPEC.md) configuration and parameter layout, the splitmix64 generator and its
init, the data walk, split and sampler, the learning-rate schedule, the checkpoint and gradient
dump formats and the progress line. bench/gpt_reference.py (the torch model and its modes)
and bench/test_gpt_reference.py import it; nothing here imports torch."""
import ctypes
import hashlib
import json
import math
import os
import re
import stat
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# --------------------------------------------------------------------------------------------
# Configuration and the parameter buffer's layout
# --------------------------------------------------------------------------------------------

VOCAB = 256
PRESETS = {  # name: (L, H, C, T_max)
    "tiny": (2, 2, 128, 64),
    "small": (4, 4, 256, 256),
    "124m": (12, 12, 768, 1024),
}
PEAK_FLOPS = 989e12  # H100/H200 SXM dense bf16, the MFU's denominator
DEFAULT_DATA = ["/usr/include"]
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_SEED = 1337  # not in SPEC.md: pass --seed to both sides
LN_EPS = 1e-5


class Config:
    """The model's shape: L layers, H heads, C wide, context T_max, vocabulary V."""

    def __init__(self, L, H, C, T_max, V=VOCAB):
        self.L, self.H, self.C, self.T_max, self.V = int(L), int(H), int(C), int(T_max), int(V)

    @classmethod
    def preset(cls, name):
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r} (one of {', '.join(PRESETS)})")
        return cls(*PRESETS[name])

    def check(self):
        """Raises ValueError for a config the SPEC (the kernels) does not allow."""
        L, H, C, T, V = self.L, self.H, self.C, self.T_max, self.V
        if min(L, H, C, T, V) <= 0:
            raise ValueError(f"config {self}: every size must be positive")
        if C % H or C // H not in (64, 128):
            raise ValueError(f"config {self}: head dim C/H must be 64 or 128")
        if C % 64:
            raise ValueError(f"config {self}: C must be a multiple of 64")
        if V != VOCAB:
            raise ValueError(f"config {self}: the vocabulary is bytes, V = {VOCAB}")
        return self

    @property
    def D(self):
        return self.C // self.H

    def as_tuple(self):
        return (self.L, self.H, self.C, self.T_max, self.V)

    def __eq__(self, other):
        return isinstance(other, Config) and self.as_tuple() == other.as_tuple()

    def __repr__(self):
        return "L=%d H=%d C=%d T_max=%d V=%d" % self.as_tuple()

    def as_dict(self):
        return dict(zip(("L", "H", "C", "T_max", "V"), self.as_tuple()))


def layout(cfg):
    """[(name, shape, is_matrix)] in the order of the flat parameter buffer (SPEC "Parameters")."""
    L, C, T, V = cfg.L, cfg.C, cfg.T_max, cfg.V
    out = [("wte", (V, C), True), ("wpe", (T, C), True)]
    for l in range(L):
        out += [(f"h{l}.qkv_w", (3 * C, C), True), (f"h{l}.proj_w", (C, C), True),
                (f"h{l}.fc_w", (4 * C, C), True), (f"h{l}.fcproj_w", (C, 4 * C), True)]
    for l in range(L):
        out += [(f"h{l}.ln1_w", (C,), False), (f"h{l}.ln1_b", (C,), False),
                (f"h{l}.qkv_b", (3 * C,), False), (f"h{l}.proj_b", (C,), False),
                (f"h{l}.ln2_w", (C,), False), (f"h{l}.ln2_b", (C,), False),
                (f"h{l}.fc_b", (4 * C,), False), (f"h{l}.fcproj_b", (C,), False)]
    out += [("lnf_w", (C,), False), ("lnf_b", (C,), False)]
    return out


def offsets(cfg):
    """{name: (offset, shape, is_matrix)}, offsets in elements of the flat buffer."""
    res, off = {}, 0
    for name, shape, mat in layout(cfg):
        res[name] = (off, shape, mat)
        off += int(np.prod(shape))
    return res


def n_params(cfg):
    return sum(int(np.prod(s)) for _, s, _ in layout(cfg))


def n_matrix_params(cfg):
    return sum(int(np.prod(s)) for _, s, m in layout(cfg) if m)


def flops_per_token(cfg, T):
    """6·N + 12·L·T·C (N: every parameter, wpe and the tied wte included; T: the run's
    sequence length)."""
    return 6 * n_params(cfg) + 12 * cfg.L * T * cfg.C


def layer_of(name):
    """'embeddings', 'layer l' or 'final': the group a tensor is printed under."""
    if name in ("wte", "wpe"):
        return "embeddings"
    if name.startswith("h"):
        return "layer " + name[1:name.index(".")]
    return "final"


# --------------------------------------------------------------------------------------------
# splitmix64, uniform, Box-Muller (SPEC "Random numbers")
# --------------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
DATA_SEED_XOR = 0xDA7A5EED0000D47A
TWO_PI = 2.0 * math.pi


def splitmix64_mix(z):
    """The output function of splitmix64 on one state (Python ints, mod 2^64)."""
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


class SplitMix64:
    """The scalar generator, one value per call, exactly as the SPEC writes it."""

    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + GOLDEN) & MASK64
        return splitmix64_mix(self.state)

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def normal(self):
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(TWO_PI * u2)


def advance(state, k):
    """The generator's state after k more draws."""
    return (state + k * GOLDEN) & MASK64


def splitmix64_block(state, n, start=0):
    """Draws start+1 .. start+n of a generator whose state is `state` (uint64 array of n):
    draw k's state is state + k·GOLDEN mod 2^64, so every draw is independent of the others."""
    with np.errstate(over="ignore"):
        z = np.arange(start + 1, start + n + 1, dtype=np.uint64)
        z *= np.uint64(GOLDEN)
        z += np.uint64(state & MASK64)
        t = np.empty_like(z)
        np.right_shift(z, np.uint64(30), out=t)
        z ^= t
        z *= np.uint64(MIX1)
        np.right_shift(z, np.uint64(27), out=t)
        z ^= t
        z *= np.uint64(MIX2)
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
    return z


def uniforms_block(state, n, start=0):
    """uniform() for draws start+1 .. start+n (float64 in [0, 1))."""
    z = splitmix64_block(state, n, start)
    z >>= np.uint64(11)
    return z.astype(np.float64) * (2.0 ** -53)


def normals_block(state, n, start=0):
    """Normals start .. start+n-1 (0-based) of a generator whose state is `state`; normal i
    takes draws 2i+1 (u1) and 2i+2 (u2). float64, as libm's log/cos would give (numpy's may
    differ from glibc's in the last bit, which the f32 rounding absorbs but for ~1 in 2^29)."""
    u = uniforms_block(state, 2 * n, 2 * start)
    u1, u2 = u[0::2], u[1::2]
    r = np.log(1.0 - u1)
    r *= -2.0
    np.sqrt(r, out=r)
    c = u2 * TWO_PI
    np.cos(c, out=c)
    r *= c
    return r


def init_params(cfg, seed, threads=None, chunk=1 << 21):
    """The flat f32 parameter buffer of the SPEC's init: matrices N(0, 0.02) (proj_w and
    fcproj_w N(0, 0.02/sqrt(2L))), normals drawn in buffer order from a generator whose state
    is the seed, one per element; biases 0, LayerNorm weights 1. Vectorized and threaded."""
    cfg.check()
    out = np.zeros(n_params(cfg), dtype=np.float32)
    jobs = []  # (dst offset, count, std): normal index == buffer offset (matrices come first)
    for name, (off, shape, mat) in offsets(cfg).items():
        n = int(np.prod(shape))
        if mat:
            std = 0.02 / math.sqrt(2 * cfg.L) if name.endswith(("proj_w",)) else 0.02
            for s in range(0, n, chunk):
                jobs.append((off + s, min(chunk, n - s), std))
        elif name.endswith(("ln1_w", "ln2_w", "lnf_w")):
            out[off:off + n] = 1.0

    def work(job):
        off, n, std = job
        x = normals_block(seed, n, off)
        x *= std
        out[off:off + n] = x  # one rounding to f32 of the double product

    threads = threads or min(8, os.cpu_count() or 1)
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(work, jobs))
    else:
        for j in jobs:
            work(j)
    return out


def init_param_scalar(cfg, seed, index):
    """Element `index` of the init buffer with the scalar generator (the test's cross-check)."""
    for name, (off, shape, mat) in offsets(cfg).items():
        n = int(np.prod(shape))
        if off <= index < off + n:
            if not mat:
                return np.float32(1.0 if name.endswith(("ln1_w", "ln2_w", "lnf_w")) else 0.0)
            std = 0.02 / math.sqrt(2 * cfg.L) if name.endswith("proj_w") else 0.02
            g = SplitMix64(advance(seed, 2 * index))
            return np.float32(std * g.normal())
    raise IndexError(index)


# --------------------------------------------------------------------------------------------
# Data (SPEC "Data")
# --------------------------------------------------------------------------------------------

class DataError(Exception):
    pass


def _walk_dir(d, out):
    try:
        names = sorted(os.listdir(d))  # bytes names: unsigned bytewise order, as strcmp
    except OSError as e:
        raise DataError(f"{os.fsdecode(d)}: cannot list: {e.strerror}") from None
    for name in names:
        full = os.path.join(d, name)
        try:
            st = os.lstat(full)
        except OSError as e:
            raise DataError(f"{os.fsdecode(full)}: {e.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk_dir(full, out)
        elif stat.S_ISREG(st.st_mode) and name.endswith(b".h"):
            out.append(full)


def data_files(paths):
    """The files the data is read from, in order: each path named (a symlink named is
    followed), a directory as its regular `.h` files below it, depth first, each directory's
    entries in strcmp order, symlinks below it skipped. Paths are bytes."""
    out = []
    for p in paths:
        p = os.fsencode(p)
        try:
            st = os.stat(p)
        except OSError as e:
            raise DataError(f"{os.fsdecode(p)}: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            _walk_dir(p, out)
        elif stat.S_ISREG(st.st_mode):
            out.append(p)
        else:
            raise DataError(f"{os.fsdecode(p)}: not a regular file or a directory")
    return out


def load_data(paths=None, max_bytes=DEFAULT_MAX_BYTES, files=None):
    """The byte tokens (uint8 array): the files concatenated, capped at max_bytes."""
    if max_bytes <= 0:
        raise DataError(f"--max-bytes {max_bytes}: must be positive")
    files = data_files(paths if paths is not None else DEFAULT_DATA) if files is None else files
    buf = bytearray()
    for f in files:
        left = max_bytes - len(buf)
        if left <= 0:
            break
        try:
            with open(f, "rb") as fh:
                buf += fh.read(left)
        except OSError as e:
            raise DataError(f"{os.fsdecode(f)}: {e.strerror}") from None
    return np.frombuffer(bytes(buf), dtype=np.uint8)


def split(n):
    """(n_train, n_val): the first floor(0.9 n) bytes train, the rest validate."""
    n_train = n * 9 // 10
    return n_train, n - n_train


def check_data(n, T, B=1, val_batches=0):
    n_train, n_val = split(n)
    if n_train - T <= 0:
        raise DataError(f"{n} bytes of data: the training split ({n_train}) must exceed T = {T}")
    if val_batches and (n_val - T - 1 < 0 or val_batches * B < 2):
        raise DataError(f"{n} bytes of data: the validation split ({n_val}) is too short "
                        f"for {val_batches} batches of {B} x {T + 1} (or fewer than 2 rows)")


class Sampler:
    """The training batches' row offsets: row b of a step starts at next() % (n_train - T) of
    the data generator, B draws per step in row order (every process draws all B_global)."""

    def __init__(self, state, n_train, T):
        self.state, self.n_train, self.T = state & MASK64, int(n_train), int(T)
        if self.n_train - self.T <= 0:
            raise DataError(f"training split of {n_train} bytes is not longer than T = {T}")

    def draw(self, B):
        z = splitmix64_block(self.state, B)
        self.state = advance(self.state, B)
        return (z % np.uint64(self.n_train - self.T)).astype(np.int64)


def data_state(seed):
    return (seed ^ DATA_SEED_XOR) & MASK64


def val_offsets(n_val, T, B, val_batches):
    """Validation rows' offsets inside the validation split: i·(n_val − T − 1) / (NB·B − 1),
    integer arithmetic."""
    rows = val_batches * B
    return np.array([i * (n_val - T - 1) // (rows - 1) for i in range(rows)], dtype=np.int64)


def rows(data, offs, T):
    """(x, y) int64 [B, T]: x = data[off .. off+T-1], y = data[off+1 .. off+T]."""
    idx = offs[:, None] + np.arange(T + 1)[None, :]
    r = data[idx].astype(np.int64)
    return r[:, :-1], r[:, 1:]


# --------------------------------------------------------------------------------------------
# Learning rate (SPEC "Optimizer")
# --------------------------------------------------------------------------------------------

def warmup_steps(N, W=20):
    """The warm-up: 20 steps, or the run's length / 10 (integer) if smaller."""
    return min(W, N // 10)


def lr_at(t, N, lr_max=6e-4, W=None):
    """The learning rate of step t (1-based) of an N-step run."""
    W = warmup_steps(N) if W is None else W
    if t <= W:
        return lr_max * t / W
    lr_min = 0.1 * lr_max
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + math.cos(math.pi * (t - W) / (N - W)))


# --------------------------------------------------------------------------------------------
# FNV-1a 64, checkpoints and gradient dumps (SPEC "Checkpoint file", "Gradient dump")
# --------------------------------------------------------------------------------------------

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_FNV_C = r"""
#include <stddef.h>
#include <stdint.h>
uint64_t tk_fnv1a64(const unsigned char *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ull; }
    return h;
}
"""
_fnv_lib = None


def _fnv_native():
    """The C loop of FNV-1a, built once with the system's cc (a checkpoint is ~1 GB at 124M:
    seconds in C, a quarter of an hour in Python); None where no compiler works."""
    global _fnv_lib
    if _fnv_lib is None:
        _fnv_lib = False
        key = hashlib.sha1(_FNV_C.encode()).hexdigest()[:12]
        d = os.path.join(tempfile.gettempdir(), f"tk-gpt-fnv-{os.getuid()}-{key}")
        so = os.path.join(d, "fnv.so")
        try:
            if not os.path.exists(so):
                os.makedirs(d, exist_ok=True)
                src = os.path.join(d, f"fnv{os.getpid()}.c")
                with open(src, "w") as f:
                    f.write(_FNV_C)
                tmp = os.path.join(d, f"fnv{os.getpid()}.so")
                cc = os.environ.get("CC", "cc")
                subprocess.run([cc, "-O2", "-shared", "-fPIC", src, "-o", tmp], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                os.replace(tmp, so)
            lib = ctypes.CDLL(so)
            lib.tk_fnv1a64.restype = ctypes.c_uint64
            lib.tk_fnv1a64.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64]
            _fnv_lib = lib
        except (OSError, subprocess.CalledProcessError):
            pass
    return _fnv_lib or None


def fnv1a64_py(data, h=FNV_OFFSET):
    for b in bytes(data):
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def fnv1a64(data, h=FNV_OFFSET):
    """FNV-1a 64 of `data` (bytes-like), continuing from hash h."""
    mv = memoryview(data).cast("B")
    lib = _fnv_native()
    if lib is None:
        if len(mv) > (64 << 20):
            print(f"gpt_reference: no C compiler for FNV-1a: hashing {len(mv) >> 20} MiB in "
                  "Python (slow)", file=sys.stderr)
        return fnv1a64_py(mv, h)
    arr = np.frombuffer(mv, dtype=np.uint8)
    if arr.size == 0:
        return h
    return lib.tk_fnv1a64(arr.ctypes.data, arr.size, h)


CKPT_MAGIC = b"TKGPT\x00\x00\x01"
CKPT_VERSION = 1
CKPT_HEADER = struct.Struct("<8sII6iQqQQ")  # magic, version, header_bytes, L H C T_max V pad,
assert CKPT_HEADER.size == 72               # seed, step, data_rng_state, n_params


class CheckpointError(Exception):
    pass


class Checkpoint:
    def __init__(self, cfg, seed, step, data_rng_state, params, m, v):
        self.cfg, self.seed, self.step, self.data_rng_state = cfg, seed, step, data_rng_state
        self.params, self.m, self.v = params, m, v


def read_checkpoint(path, expect_cfg=None, verify_checksum=True):
    """Parses a gpt-train checkpoint; raises CheckpointError saying what is wrong."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror}") from None
    if len(buf) < CKPT_HEADER.size + 8:
        raise CheckpointError(f"{path}: {len(buf)} bytes, shorter than a header and checksum")
    (magic, version, header_bytes, L, H, C, T_max, V, pad, seed, step, drs,
     n) = CKPT_HEADER.unpack_from(buf)
    if magic != CKPT_MAGIC:
        raise CheckpointError(f"{path}: not a gpt-train checkpoint (magic {magic!r}, "
                              f"expected {CKPT_MAGIC!r})")
    if version != CKPT_VERSION:
        raise CheckpointError(f"{path}: checkpoint version {version}, this reader knows "
                              f"{CKPT_VERSION}")
    if header_bytes != CKPT_HEADER.size:
        raise CheckpointError(f"{path}: header_bytes {header_bytes}, expected {CKPT_HEADER.size}")
    if pad != 0:
        raise CheckpointError(f"{path}: header pad is {pad}, expected 0")
    cfg = Config(L, H, C, T_max, V)
    try:
        cfg.check()
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None
    if expect_cfg is not None and cfg != expect_cfg:
        raise CheckpointError(f"{path}: config {cfg}, expected {expect_cfg}")
    if n != n_params(cfg):
        raise CheckpointError(f"{path}: n_params {n}, but config {cfg} has {n_params(cfg)}")
    if step < 0:
        raise CheckpointError(f"{path}: step {step} is negative")
    want = CKPT_HEADER.size + 12 * n + 8
    if len(buf) != want:
        raise CheckpointError(f"{path}: {len(buf)} bytes, expected {want} for {n} parameters")
    stored = struct.unpack_from("<Q", buf, want - 8)[0]
    if verify_checksum:
        got = fnv1a64(memoryview(buf)[:want - 8])
        if got != stored:
            raise CheckpointError(f"{path}: checksum mismatch (stored {stored:#018x}, "
                                  f"computed {got:#018x}): the file is corrupt")
    arrs = [np.frombuffer(buf, dtype="<f4", count=n, offset=CKPT_HEADER.size + 4 * n * i)
            for i in range(3)]
    return Checkpoint(cfg, seed, step, drs, *arrs)


def write_checkpoint(path, cfg, seed, step, data_rng_state, params, m, v):
    """Writes FILE.tmp, then renames it over FILE (a failed save leaves the old file)."""
    n = n_params(cfg)
    arrs = [np.ascontiguousarray(a, dtype="<f4").reshape(-1) for a in (params, m, v)]
    if any(a.size != n for a in arrs):
        raise ValueError(f"write_checkpoint: arrays must hold {n} values")
    head = CKPT_HEADER.pack(CKPT_MAGIC, CKPT_VERSION, CKPT_HEADER.size, *cfg.as_tuple(), 0,
                            seed & MASK64, step, data_rng_state & MASK64, n)
    h = fnv1a64(head)
    for a in arrs:
        h = fnv1a64(a.data, h)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for a in arrs:
            f.write(a.data)
        f.write(struct.pack("<Q", h))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_grad_dump(path, n):
    """(grads f32[n], loss): n f32 gradients in buffer order, then the batch's f32 loss."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror}") from None
    if size != 4 * (n + 1):
        raise CheckpointError(f"{path}: {size} bytes, expected {4 * (n + 1)} "
                              f"({n} gradients and the loss)")
    raw = np.fromfile(path, dtype="<f4")
    return raw[:n], float(raw[n])


# --------------------------------------------------------------------------------------------
# The progress line, logs and loss files
# --------------------------------------------------------------------------------------------

def progress_line(step, total, loss, lr, norm, ms, tok_s, mfu):
    """SPEC "Progress line": step 12/50 | loss 3.123456 | lr 6.0e-04 | norm 1.234 |
    123.4 ms | 132768 tok/s | MFU 41.2%  (mfu as a fraction)."""
    return (f"step {step}/{total} | loss {loss:.6f} | lr {lr:.1e} | norm {norm:.3f} | "
            f"{ms:.1f} ms | {tok_s:.0f} tok/s | MFU {100 * mfu:.1f}%")


_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
_FREE = r"(?<![\w.=:/-])" + _NUM  # a number standing alone: "123.4 ms", not "norm=0.5 ms"
_STEP_RE = re.compile(r"^\s*step[\s=:]+(\d+)(?:\s*/\s*(\d+))?", re.I)
_FIELDS = {  # key: patterns tried in order ("key value", "key=value", "value unit")
    "loss": [r"\bloss[\s=:]+" + _NUM],
    "lr": [r"\blr[\s=:]+" + _NUM],
    "norm": [r"\b(?:grad_?)?norm[\s=:]+" + _NUM],
    "ms": [r"\bms\s*[=:]\s*" + _NUM, _FREE + r"\s*ms\b"],
    "tok_s": [r"\btok[/_]s\s*[=:]\s*" + _NUM, _FREE + r"\s*tok/s\b"],
    "mfu": [r"\bMFU[\s=:]+" + _NUM + r"\s*%?"],
}
_FIELDS = {k: [re.compile(p, re.I) for p in v] for k, v in _FIELDS.items()}


def parse_progress(line):
    """A progress line's fields {step, total, loss, lr, norm, ms, tok_s, mfu (percent)}, those
    present; None unless the line begins with `step N` and has a loss."""
    m = _STEP_RE.match(line)
    if not m:
        return None
    rec = {"step": int(m.group(1))}
    if m.group(2):
        rec["total"] = int(m.group(2))
    rest = line[m.end():]
    for key, pats in _FIELDS.items():
        for p in pats:
            f = p.search(rest)
            if f:
                rec[key] = float(f.group(1))
                break
    return rec if "loss" in rec else None


def parse_log(text):
    """A run's record from a trainer's stdout: its progress lines (a step seen twice keeps its
    last line, as after a resume), in step order."""
    by_step = {}
    for line in text.splitlines():
        rec = parse_progress(line)
        if rec:
            by_step[rec["step"]] = rec
    steps = sorted(by_step)
    run = {"steps": steps}
    for key in ("loss", "lr", "norm", "ms", "tok_s", "mfu"):
        run[key] = [by_step[s].get(key, float("nan")) for s in steps]
    return run


def load_run(path, name=None):
    """A run's record (steps, loss, ...) from a --losses-out JSON, bench_gpt.py's JSON (its run
    `name`, else its first), or a trainer's stdout log."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        obj = json.loads(text)
    except ValueError:
        run = parse_log(text)
        if not run["steps"]:
            raise ValueError(f"{path}: neither JSON nor a log with progress lines") from None
        return run
    if "runs" in obj:
        runs = obj["runs"]
        if name is None:
            name = next(iter(runs))
        if name not in runs:
            raise ValueError(f"{path}: no run {name!r} (has {', '.join(runs)})")
        obj = runs[name]
    if "loss" not in obj:
        raise ValueError(f"{path}: a JSON without a 'loss' list")
    obj.setdefault("steps", list(range(1, len(obj["loss"]) + 1)))
    return obj


def compare_losses(run, ref, steps=50, tol=0.01):
    """(ok, rows, message): rows of (step, run loss, ref loss, rel diff) over the first `steps`
    steps of ref that run has too; ok when every rel diff <= tol (NaN never passes) and run
    has each of those steps."""
    a = {s: float(l) for s, l in zip(run["steps"], run["loss"]) if l is not None}
    b = {s: float(l) for s, l in zip(ref["steps"], ref["loss"]) if l is not None}
    want = sorted(b)[:steps]
    rows, missing = [], [s for s in want if s not in a]
    for s in want:
        if s in a:
            d = abs(a[s] - b[s]) / abs(b[s]) if b[s] != 0 else abs(a[s] - b[s])
            rows.append((s, a[s], b[s], d if d == d else float("nan")))
    ok = bool(rows) and not missing and len(want) >= steps and \
        all(d == d and d <= tol for *_, d in rows)
    if not rows:
        msg = "no common steps"
    elif missing or len(want) < steps:
        msg = (f"{len(rows)} common steps of the {steps} asked for"
               + (f"; run lacks steps {missing[:5]}" if missing else ""))
    else:
        worst = max(rows, key=lambda r: r[3] if r[3] == r[3] else float("inf"))
        msg = f"max rel diff {worst[3]:.3e} at step {worst[0]} over {len(rows)} steps"
    return ok, rows, msg


def median(xs):
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else 0.5 * (xs[k - 1] + xs[k])


def summarize(run, skip, cfg, B, T):
    """Median ms/step over steps after the first `skip`, and its tokens/s and MFU."""
    ms = run.get("ms") or []
    tail = ms[skip:] if len(ms) > skip else ms
    m = median(tail)
    tok = B * T / (m / 1e3) if m == m and m > 0 else float("nan")
    return {"ms": m, "tok_s": tok, "mfu": tok * flops_per_token(cfg, T) / PEAK_FLOPS,
            "steps_timed": len(tail)}


