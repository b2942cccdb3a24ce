"""What the benchmarks share: the attention shapes and torch SDPA on one chosen backend
(bench_attention.py, bench_attention_bwd.py); the relative error and the bandwidth table of
the memory-bound kernels (bench_norm.py, bench_rotary.py)."""
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
