"""The cost of rotary embeddings fused into the attention forward (tk_attention_params.rotary):
the same call with and without it, the rotation done apart first (tk_rotary on Q and K, then
attention), and torch (the usual rotate_half on Q and K, then SDPA with cuDNN and flash). The
fused Hopper kernel rotates Q in place in shared memory, which turns its key loop's barriers
into a rendezvous of the consumer warpgroups (kernels/attention_hopper.c): this measures that
price. Fused against apart is checked first (rel err; the C tests check both against float64).
NeoX style, base 10000, bf16, [B, H, N, D]. triton do_bench, median µs.
Usage (GPU machine): python3 bench/bench_attention_rope.py build-device"""
import ctypes
import sys

import torch
from torch.nn.attention import SDPBackend
from triton.testing import do_bench

from bench_util import rel, sdpa
from tk_ctypes import TK, RotaryParams

SHAPES = [(16, 16, 1024, 64), (16, 16, 1024, 128), (4, 16, 4096, 128), (1, 16, 16384, 128)]


def torch_rope(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * cos + rot * sin


def tables(n, d, dev):
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
    ang = torch.outer(torch.arange(n, device=dev, dtype=torch.float32), inv)
    emb = torch.cat((ang, ang), dim=-1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    dev, stream = "cuda", torch.cuda.current_stream().cuda_stream
    print("| B x H x N x D | causal | attn µs | attn+rope fused µs | rope apart + attn µs "
          "| fused cost | torch rope+cuDNN µs | torch rope+flash µs | fused err vs apart |")
    print("|---|---|---|---|---|---|---|---|---|")
    for b, h, n, d in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
            o = torch.full_like(q, float("nan"))
            o2, qr, kr = torch.empty_like(q), torch.empty_like(q), torch.empty_like(k)
            lse = torch.empty(b, h, n, device=dev, dtype=torch.float32)
            plain = tk.attention_params(q, k, v, o, lse, causal)
            rp = RotaryParams(struct_size=ctypes.sizeof(RotaryParams), style=0, base=10000.0)
            fused = tk.attention_params(q, k, v, o, lse, causal)
            fused.rotary = ctypes.cast(ctypes.pointer(rp), ctypes.c_void_p)
            ws = torch.empty(tk.attention_workspace(fused), device=dev, dtype=torch.uint8)
            fused.workspace, fused.workspace_bytes = ws.data_ptr(), ws.numel()
            apart_rot = tk.rotary_params(q, qr, k, kr, style=0, base=10000.0)
            apart = tk.attention_params(qr, kr, v, o2, lse, causal)
            tk.attention(fused, stream)
            tk.rotary(apart_rot, stream)
            tk.attention(apart, stream)
            err = rel(o.float(), o2.float())
            cos, sin = tables(n, d, dev)
            t = lambda f: do_bench(f, return_mode="median") * 1e3  # noqa: E731
            us_plain = t(lambda: tk.attention(plain, stream))
            us_fused = t(lambda: tk.attention(fused, stream))
            us_apart = t(lambda: (tk.rotary(apart_rot, stream), tk.attention(apart, stream)))
            ref = {}
            for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                             ("flash", SDPBackend.FLASH_ATTENTION)):
                ref[name] = t(lambda: sdpa(be, torch_rope(q, cos, sin), torch_rope(k, cos, sin),
                                           v, causal))
            print(f"| {b}x{h}x{n}x{d} | {int(causal)} | {us_plain:.1f} | {us_fused:.1f} | "
                  f"{us_apart:.1f} | {100 * (us_fused / us_plain - 1):+.1f}% | "
                  f"{ref['cudnn']:.1f} | {ref['flash']:.1f} | {err:.1e} |")
            if not err < 1e-2:
                print(f"CHECK FAILED: fused vs apart rel err {err}")


if __name__ == "__main__":
    main()
