"""What the attention benchmarks (bench_attention.py, bench_attention_bwd.py)
share: the shapes they time and torch SDPA on one chosen backend."""
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
