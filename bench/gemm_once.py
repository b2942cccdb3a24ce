"""One library GEMM, launched `reps` times (for ncu / nsys):
python3 gemm_once.py BUILD M N K [BM BN BK WARPS STAGES TMA WGMMA] (bf16, A·B)."""
import sys
import torch
from tk_ctypes import TK
tk = TK(sys.argv[1])
m, n, k = (int(x) for x in sys.argv[2:5])
cfg = tuple(int(x) for x in sys.argv[5:12]) or None
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
p = tk.gemm_params(a, b, c, False, cfg)
stream = torch.cuda.current_stream().cuda_stream
for _ in range(3):
    tk.gemm(p, stream)
torch.cuda.synchronize()
