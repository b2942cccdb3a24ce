"""GEMM block shapes beside cuBLAS at one size, with the clock and power each ran at.

Sustained GEMMs on this GPU run under its power limit, where the SM clock falls with
the energy a kernel spends per FLOP; a shape that moves fewer bytes through shared
memory and L2 can gain clock as well as cycles. So each variant is timed twice:
triton do_bench (median, L2 cleared before each call) and a sustained run of about
1.5 s (CUDA events around the whole run) while `nvidia-smi` samples the SM clock,
power draw and temperature every 50 ms; the table gives their means over the run's
second half. Variants run in rounds (cuBLAS, then ours), twice, so that heat
affects both alike. Inputs: torch.randn, A and B distinct; outputs are checked
against torch first.
Usage (GPU machine): python3 bench/bench_gemm_sweep.py build-device [n] [ab|abt] [auto|small|tma]
("auto": only the library's choice beside cuBLAS; "small": the shapes for small problems,
with a short sustained run: at these sizes a long one measures the host's launch rate;
"tma": copy-engine shapes; a shape is (block_m, block_n, block_k, warps, stages[, tma]))"""
import subprocess
import sys
import threading
import time

import torch
from triton.testing import do_bench

from tk_ctypes import TK

SHAPES = [  # (block_m, block_n, block_k, warps, stages); None = the library's choice
    None, (128, 128, 64, 4, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3),
    (128, 256, 32, 8, 6),
]
TMA = [  # the copy engine (tma=1; a producer warpgroup on sm_90a with 8+ warps)
    None, (128, 256, 64, 8, 4, 0), (128, 256, 64, 8, 3, 1), (128, 256, 64, 8, 4, 1),
    (128, 128, 64, 4, 4, 1), (256, 128, 64, 8, 4, 1), (128, 256, 128, 8, 2, 1),
]
SMALL = [  # candidates for problems too small to fill the GPU with 128x128 blocks
    None, (128, 128, 64, 4, 3), (128, 64, 64, 2, 3), (64, 128, 64, 2, 3), (64, 64, 64, 4, 3),
    (64, 64, 64, 1, 3), (128, 64, 64, 4, 3),
]


class Sampler:
    """nvidia-smi in the background; a reader thread stamps each sample as it
    arrives, so a window's mean holds the samples taken inside it."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
             "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
        self.samples = []  # (host time, clock MHz, watts, °C)
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                c, w, t = (float(x) for x in line.split(","))
            except ValueError:
                continue
            with self.lock:
                self.samples.append((time.time(), c, w, t))

    def mean(self, t0, t1):
        time.sleep(0.2)  # lets samples taken just before t1 arrive
        with self.lock:
            sel = [s for s in self.samples if t0 <= s[0] <= t1]
        if not sel:
            return (float("nan"),) * 3
        return tuple(sum(s[i] for s in sel) / len(sel) for i in (1, 2, 3))

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def sustained(fn, seconds, sampler):
    """Milliseconds per call over a run of about `seconds`, and the means of
    clock, power and temperature over its second half."""
    fn()
    torch.cuda.synchronize()
    t_probe = do_bench(fn, warmup=5, rep=20, return_mode="median")
    calls = max(10, int(seconds * 1e3 / t_probe))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    h0 = time.time()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    h1 = time.time()
    ms = start.elapsed_time(end) / calls
    return ms, sampler.mean(h0 + (h1 - h0) / 2, h1)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    tb = len(sys.argv) > 3 and sys.argv[3] == "abt"
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bb = b.t() if tb else b
    ref = (a.double() @ bb.double()).float()
    fl = 2 * n ** 3 / 1e12
    sampler = Sampler()
    variants = [("cuBLAS", lambda: torch.matmul(a, bb), None)]
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    for sh in {"auto": [None], "small": SMALL, "tma": TMA}.get(mode, SHAPES):
        c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        p = tk.gemm_params(a, b, c, tb, sh)
        tk.gemm_prepare(p)
        tk.gemm(p, stream)
        err = ((c.float() - ref).norm() / ref.norm()).item()
        name = (f"auto ({tk.gemm_choice(p)})" if sh is None else
                "%dx%dx%d w%d s%d" % sh[:5] + (" tma" if len(sh) > 5 and sh[5] else ""))
        variants.append((name, (lambda p=p: tk.gemm(p, stream)), err))
    rows = {name: [] for name, _, _ in variants}
    for _ in range(2):
        for name, fn, _ in variants:
            db = do_bench(fn, warmup=50, rep=250, return_mode="median")
            ms, (clk, watt, temp) = sustained(fn, 0.3 if mode == "small" else 1.5, sampler)
            rows[name].append((fl / db * 1e3, fl / ms * 1e3, clk, watt, temp))
    sampler.close()
    peer = [r[0] for r in rows["cuBLAS"]]
    print(f"GEMM {n}³ bf16 {'A·Bᵀ' if tb else 'A·B'}; two rounds, each cell 'round 1 / round 2'")
    print("| variant | rel err | do_bench TFLOP/s | / cuBLAS | sustained TFLOP/s | SM MHz | W | °C |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _, err in variants:
        r = rows[name]
        ratio = " / ".join("%.2f" % (x[0] / pe) for x, pe in zip(r, peer))
        e = "—" if err is None else "%.1e" % err
        print(f"| {name} | {e} | {cell(r, 0, '%.0f')} | {ratio} | {cell(r, 1, '%.0f')} | "
              f"{cell(r, 2, '%.0f')} | {cell(r, 3, '%.0f')} | {cell(r, 4, '%.0f')} |")


def cell(rounds, i, fmt):
    """'round 1 / round 2' of column i."""
    return " / ".join(fmt % x[i] for x in rounds)


if __name__ == "__main__":
    main()
