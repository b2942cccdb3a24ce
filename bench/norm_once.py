"""A few launches of one TileKittens LayerNorm forward and backward (residual, weight,
bias; bf16), for a profiler (ncu):
  python3 bench/norm_once.py BUILD R C [WARPS COLS]
WARPS COLS: the block shape (0 0: the library's choice). The first launch compiles;
profile a later one (ncu --launch-skip 2)."""
import sys

import torch

from bench_norm import LAYER, make
from tk_ctypes import TK


def main():
    build, R, C = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    warps, cols = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (0, 0)
    tk = TK(build)
    x, r, w, b = make(LAYER, R, C, torch.bfloat16)
    h, y, dx = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    mean, rstd = torch.empty(R, device="cuda"), torch.empty(R, device="cuda")
    dy, dh = torch.randn_like(x), torch.randn_like(x)
    dw, db = torch.empty(C, device="cuda"), torch.empty(C, device="cuda")
    p = tk.norm_params(LAYER, x, y, r, h, w, b, mean, rstd)
    q = tk.norm_bwd_params(LAYER, h, dy, dx, mean, rstd, dh, w, dw, db)
    if warps:
        tk.norm_shape(p, warps, cols)
        tk.norm_shape(q, warps, cols)
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(4):
        tk.norm_forward(p, stream)
        tk.norm_backward(q, stream)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
