"""What the benchmarks share: the attention shapes and torch SDPA on one chosen backend
(bench_attention.py, bench_attention_bwd.py); the relative error and the bandwidth table of
the memory-bound kernels (bench_norm.py, bench_rotary.py); each kernel's time in a call from
the profiler's timeline (bench_decode.py, bench_based.py); flash-linear-attention from the
wheels in bench/wheels (bench_based.py, bench_hedgehog.py)."""
import glob
import os
import sys
import tempfile
import zipfile

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

ATTENTION_CONFIGS = [  # (D, B, H, N): B*N = 16384, and B4 H16 N3072 D128 (issue 14)
    (128, 16, 16, 1024), (128, 4, 16, 4096), (128, 1, 16, 16384),
    (64, 16, 32, 1024), (64, 4, 32, 4096), (64, 1, 32, 16384),
    (128, 4, 16, 3072),
]


def sdpa(backend, q, k, v, causal):
    """torch's scaled_dot_product_attention forced onto `backend` (an SDPBackend);
    fewer K/V heads than Q heads is grouped-query attention (enable_gqa)."""
    gqa = k.shape[1] != q.shape[1]
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)


def bandwidth_table(what, shape, rows, copy_tbs=4.27):
    """Prints a markdown table of memory-bound timings: rows of (kind, shape, pass, ours µs,
    ours GB/s, eager GB/s, compile GB/s), with the share of the copy line (TB/s) and the
    ratios to torch eager and torch.compile."""
    print(f"\n| {what} | {shape} | pass | ours µs | ours GB/s | % copy | eager GB/s "
          "| compile GB/s | ours/eager | ours/compile |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, s, d, t, o, e, c in rows:
        print(f"| {k} | {s} | {d} | {t:.1f} | {o:.0f} | {100 * o / (copy_tbs * 1e3):.0f} | "
              f"{e:.0f} | {c:.0f} | {o / e:.2f} | {o / c:.2f} |")


def rel(out, ref):
    """‖out − ref‖ / ‖ref‖ in float64 (‖out − ref‖ when ref is 0); NaN anywhere in out: inf."""
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return float("inf")
    n = ref.norm()
    return ((out - ref).norm() / (n if n > 0 else 1)).item()


def profile(label, fn, calls=30):
    """Each kernel's median duration (µs) over `calls` calls, and the median span of a
    call (first kernel start to last kernel end: launch gaps included), from the
    profiler's GPU timeline; a 256 MB fill flushes L2 before each call."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    flush = torch.empty(64 << 20, device="cuda", dtype=torch.int32)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.fill_(1)
            torch.cuda._sleep(100000)  # the host queues the call before the GPU reaches it
            fn()
        torch.cuda.synchronize()
    kern = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                  key=lambda e: e.time_range.start)
    calls_k, cur = [], None
    for e in kern:
        if "FillFunctor" in e.name or "spin" in e.name:  # the flush, the sleep
            cur = None
            continue
        if cur is None:
            cur = []
            calls_k.append(cur)
        cur.append(e)
    med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
    spans = [c[-1].time_range.end - c[0].time_range.start for c in calls_k]
    names = {}
    for c in calls_k:
        for e in c:
            names.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    print(f"profile {label}: span {med(spans):.1f} us over {len(spans)} calls;", "; ".join(
        f"{n[:60]} {med(v):.1f} us" for n, v in names.items()), flush=True)


def import_fla(load):
    """load()'s result, where load imports what it needs from fla (flash-linear-attention)
    and returns it, or None with a line saying why. fla and einops come from the wheels in
    bench/wheels (pip download --no-deps fla-core flash-linear-attention einops): first as
    zip imports, then, since a module that reads files beside it fails in a zip, from the
    wheels unpacked into one folder (fla-core's ops and flash-linear-attention's modules)."""
    wheels = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheels")
    fla_whl = sorted(glob.glob(os.path.join(wheels, "fla_core-*.whl")) +
                     glob.glob(os.path.join(wheels, "flash_linear_attention-*.whl")))
    sys.path[:0] = fla_whl[:1] + glob.glob(os.path.join(wheels, "einops-*.whl"))
    try:
        import einops  # noqa: F401
    except ImportError:
        print("fla: einops is not importable (pip install einops, or its wheel in bench/wheels):"
              " the fla columns are skipped", flush=True)
        return None
    try:  # fla.utils imports packaging; pip carries a copy where it is not installed itself
        import packaging.version  # noqa: F401
    except ImportError:
        try:
            from pip._vendor import packaging
            from pip._vendor.packaging import version
            sys.modules["packaging"], sys.modules["packaging.version"] = packaging, version
        except ImportError:
            pass  # the fla import below says what is missing
    for unpack in (False, True):
        if unpack:
            for m in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
                del sys.modules[m]
            d = tempfile.mkdtemp(prefix="fla-")
            for w in fla_whl:
                zipfile.ZipFile(w).extractall(d)
            sys.path.insert(0, d)
        try:
            return load()
        except Exception as e:  # noqa: BLE001 (any failure only drops the fla columns)
            print(f"fla: not importable{' unpacked' if unpack else ''} ({type(e).__name__}: "
                  f"{e}){'' if unpack or not fla_whl else ': unpacking the wheels'}", flush=True)
            if not fla_whl:
                break
    print("fla: the fla columns are skipped", flush=True)
    return None


def median_us(fn):
    """fn's median time in µs (triton do_bench, L2 flushed), after one call outside the
    timing (a JIT or Triton compile)."""
    from triton.testing import do_bench
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, return_mode="median") * 1e3


def env_shapes(var, default):
    """Shapes from the environment variable var ("a:b:c,a:b:c"), else default."""
    env = os.environ.get(var)
    return [tuple(int(x) for x in s.split(":")) for s in env.split(",")] if env else default
