"""A few launches of one TileKittens attention forward, for a profiler (ncu):
  python3 bench/attention_once.py BUILD D B H N CAUSAL KERNEL
KERNEL: 0 the library's choice, 1 mma.sync, 2 the Hopper (wgmma) kernel. The
first launch compiles; profile a later one (ncu --launch-skip 2)."""
import sys

import torch

from tk_ctypes import TK


def main():
    build, d, b, h, n, causal, kernel = sys.argv[1], *map(int, sys.argv[2:8])
    tk = TK(build)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    p = tk.attention_params(q, k, v, o, lse, bool(causal), kernel=kernel)
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(4):
        tk.attention(p, stream)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
