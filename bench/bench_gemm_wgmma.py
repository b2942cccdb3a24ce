"""Issue 12's GEMM table: the wgmma kernel (sm_90a) beside the best mma.sync kernel
(MMA_SYNC), the library's own choice for the call (tk_gemm with no config and a workspace,
so that it may split K: what a user calling tk_gemm gets) and torch.matmul (cuBLAS), same
run, same GPU, bf16 in and out.
Each shape is checked against torch first (rel err of the bf16 output; NaN-poisoned
C), so nothing wrong gets timed. Timing: triton do_bench (median after warm-up; it
clears the L2 before every call), ours and cuBLAS alternating over ROUNDS rounds
under the GPU's power limit; the SM clock is sampled by nvidia-smi while it runs.
Usage (GPU machine): python3 bench/bench_gemm_wgmma.py build-device [quick|sweep|splits|pairs]
(GEMM_SHAPES=M:N:K,... replaces the table's shapes.)
sweep: the wgmma block shapes (SWEEP_CONFIGS) side by side with cuBLAS over SWEEP_SHAPES,
A·B, the data tk_gemm_config_for's sm_90a choice stands on. GEMM_SWEEP_SHAPES=M:N:K,...
replaces the shapes; GEMM_SWEEP_TB=1 multiplies by Bᵀ (B stored [N, K], a linear layer's
x·Wᵀ) instead.
splits: at skinny M (SPLIT_SHAPES; GEMM_SPLIT_SHAPES=M:N:K,... replaces them) each block
shape of SPLIT_CONFIGS with the split over K forced to S = 1, 2, 4, 8, 16 (a workspace),
beside cuBLAS: the data the split's candidates and cost model (kernels/gemm_split.c)
stand on.
pairs: each block shape of PAIR_CONFIGS alone and in clusters of two sharing B
(tk_gemm_config.cluster = 2, B multicast), A·B and A·Bᵀ over PAIR_SHAPES
(GEMM_PAIR_SHAPES=M:N:K,... replaces them), beside cuBLAS, alternating over ROUNDS."""
import os
import subprocess
import sys

import torch
from triton.testing import do_bench

from bench_util import env_shapes, rel
from tk_ctypes import TK

ROUNDS = 3
# (block_m, block_n, block_k, warps, stages, tma, wgmma)
WGMMA = (128, 256, 64, 8, 4, 1, 1)
MMA_SYNC = (128, 256, 128, 8, 2, 1, 0)  # the library's pick before wgmma (producer + TMA)
SHAPES = [(n, n, n) for n in (1024, 2048, 4096, 6144, 8192)] + [
    (8192, 4096, 4096), (8192, 11008, 4096), (8192, 4096, 11008), (16384, 3 * 4096, 4096),
    (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096)]


SWEEP_CONFIGS = [(128, 256, 64, 8, 4, 1, 1), (128, 256, 64, 8, 3, 1, 1), (128, 128, 64, 8, 4, 1, 1),
                 (128, 128, 64, 8, 6, 1, 1), (64, 256, 64, 4, 4, 1, 1), (64, 128, 64, 4, 4, 1, 1)]
SPLIT_CONFIGS = [(128, 256, 64, 8, 4, 1, 1), (128, 128, 64, 8, 6, 1, 1), (64, 256, 64, 4, 4, 1, 1),
                 (64, 128, 64, 4, 6, 1, 1), (128, 64, 64, 4, 3, 0, 0)]
SPLIT_SHAPES = [(16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096)]
SPLIT_S = (1, 2, 4, 8, 16)
PAIR_CONFIGS = [(128, 256, 64, 8, 4, 1, 1), (128, 128, 64, 8, 6, 1, 1)]
PAIR_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (2048, 2048, 2048),
               (16384, 3 * 4096, 4096), (8192, 11008, 4096), (4096, 4096, 1024)]
SWEEP_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                (128, 4096, 4096), (512, 4096, 4096), (2048, 8192, 1024)]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def name_of(cfg):
    return f"{cfg[0]}x{cfg[1]}x{cfg[2]} w{cfg[3]} s{cfg[4]}"


def sweep(tk):
    """TFLOP/s of each wgmma block shape and of cuBLAS per shape (A·B, bf16 out),
    alternating over ROUNDS rounds; a config whose output is wrong shows ERR."""
    stream = torch.cuda.current_stream().cuda_stream
    names = [name_of(c) for c in SWEEP_CONFIGS] + ["library", "cuBLAS"]
    shapes = env_shapes("GEMM_SWEEP_SHAPES", SWEEP_SHAPES)
    tb = os.environ.get("GEMM_SWEEP_TB") == "1"
    print(f"A·B{'ᵀ' if tb else ''}, bf16 out, TFLOP/s")
    print("| M | N | K | " + " | ".join(names) + " | library's pick |")
    print("|---|---|---|" + "---|" * (len(names) + 1))
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(*((n, k) if tb else (k, n)), device="cuda", dtype=torch.bfloat16)
        bb = b.t() if tb else b
        ref = (a @ bb).float()
        fns, bad = {}, set()
        for name, cfg in zip(names, SWEEP_CONFIGS + [None]):
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            p = tk.gemm_params(a, b, c, tb, cfg)
            tk.gemm_prepare(p)
            tk.gemm(p, stream)
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            if not err <= 1e-2:
                bad.add(name)
            fns[name] = (lambda p=p: tk.gemm(p, stream))
            if cfg is None:
                pick = tk.gemm_choice(p)
        fns["cuBLAS"] = lambda: torch.matmul(a, bb)
        fl = 2 * m * n * k / 1e9
        per_round = [{x: fl / do_bench(f, warmup=25, rep=100, return_mode="median")
                      for x, f in fns.items()} for _ in range(ROUNDS)]
        cells = ["ERR" if x in bad else f"{median([r[x] for r in per_round]):.0f}" for x in names]
        print(f"| {m} | {n} | {k} | " + " | ".join(cells) + f" | {pick} |", flush=True)


def splits(tk):
    """Each SPLIT_CONFIGS block shape at each forced S, TFLOP/s (A·B, bf16, median)."""
    shapes = env_shapes("GEMM_SPLIT_SHAPES", SPLIT_SHAPES)
    stream = torch.cuda.current_stream().cuda_stream
    print("| M | N | K | block | " + " | ".join(f"S {s}" for s in SPLIT_S) + " | library | cuBLAS |")
    print("|---|---|---|---|" + "---|" * (len(SPLIT_S) + 2))
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = (a.double() @ b.double())
        fl = 2 * m * n * k / 1e9

        def timed(p):
            c = p.keep_c
            c.fill_(float("nan"))
            tk.gemm(p, stream)
            torch.cuda.synchronize()
            err = rel(c, ref)
            if not err <= 1e-2:
                return f"FAIL {err:.1e}"
            return f"{fl / do_bench(lambda: tk.gemm(p, stream), warmup=50, rep=200, return_mode='median'):.0f}"

        def params(shape, s):
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            p = tk.gemm_params(a, b, c, False, shape + (0, 0, 0, 0, 0, s, 0) if shape else None)
            ws = torch.empty(max(tk.gemm_workspace(p), 16) // 4, device="cuda")
            p.workspace, p.workspace_bytes = ws.data_ptr(), ws.numel() * 4
            p.keep, p.keep_c = ws, c
            return p
        cub = fl / do_bench(lambda: torch.matmul(a, b), warmup=50, rep=200, return_mode="median")
        lib = params(None, 0)
        lib_cell = f"{timed(lib)} ({tk.gemm_choice(lib)})"
        for shape in SPLIT_CONFIGS:
            cells = [timed(params(shape, s)) for s in SPLIT_S]
            print(f"| {m} | {n} | {k} | {name_of(shape)} | " + " | ".join(cells) +
                  f" | {lib_cell} | {cub:.0f} |", flush=True)


def pairs(tk):
    """TFLOP/s of each PAIR_CONFIGS block shape alone and in pairs sharing B, and cuBLAS."""
    stream = torch.cuda.current_stream().cuda_stream
    names = [f"{name_of(c)}{' pairs' if cl else ''}" for c in PAIR_CONFIGS for cl in (0, 2)]
    print("bf16 in and out, TFLOP/s (median of rounds; ERR: wrong output)")
    print("| M | N | K | op | " + " | ".join(names) + " | cuBLAS | best pairs / cuBLAS |")
    print("|---|---|---|---|" + "---|" * (len(names) + 2))
    for m, n, k in env_shapes("GEMM_PAIR_SHAPES", PAIR_SHAPES):
        for tb in (False, True):
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(*((n, k) if tb else (k, n)), device="cuda", dtype=torch.bfloat16)
            bb = b.t() if tb else b
            ref = (a @ bb).float()
            fns, bad = {}, set()
            for name, (cfg, cl) in zip(names, [(c, cl) for c in PAIR_CONFIGS for cl in (0, 2)]):
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                p = tk.gemm_params(a, b, c, tb, cfg, cluster=cl)
                tk.gemm_prepare(p)
                tk.gemm(p, stream)
                torch.cuda.synchronize()
                if not ((c.float() - ref).norm() / ref.norm()).item() <= 1e-2:
                    bad.add(name)
                fns[name] = (lambda p=p: tk.gemm(p, stream))
            fns["cuBLAS"] = lambda: torch.matmul(a, bb)
            fl = 2 * m * n * k / 1e9
            per_round = [{x: fl / do_bench(f, warmup=50, rep=200, return_mode="median")
                          for x, f in fns.items()} for _ in range(ROUNDS)]
            med = {x: median([r[x] for r in per_round]) for x in fns}
            cells = ["ERR" if x in bad else f"{med[x]:.0f}" for x in names]
            best = max(med[x] for x in names if x.endswith("pairs") and x not in bad) \
                if any(x.endswith("pairs") and x not in bad for x in names) else 0
            print(f"| {m} | {n} | {k} | {'A·Bᵀ' if tb else 'A·B'} | " + " | ".join(cells) +
                  f" | {med['cuBLAS']:.0f} | {best / med['cuBLAS']:.2f} |", flush=True)


def main():
    tk = TK(sys.argv[1] if len(sys.argv) > 1 else "build-device")
    if "sweep" in sys.argv:
        torch.manual_seed(0)
        return sweep(tk)
    if "splits" in sys.argv:
        torch.manual_seed(0)
        return splits(tk)
    if "pairs" in sys.argv:
        torch.manual_seed(0)
        return pairs(tk)
    # GEMM_SHAPES=M:N:K,... replaces the table's shapes
    shapes = env_shapes("GEMM_SHAPES", SHAPES[2:3] if "quick" in sys.argv else SHAPES)
    torch.manual_seed(0)
    stream = torch.cuda.current_stream().cuda_stream
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                            "--format=csv,noheader", "-lms", "200"],
                           stdout=subprocess.PIPE, text=True)
    rows, picks = [], {}
    for m, n, k in shapes:
        for tb in (False, True):
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) if tb else \
                torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            bb = b.t() if tb else b
            ref = (a @ bb).float()
            fns, errs = {}, {}
            for name, shape in (("wgmma", WGMMA), ("mma.sync", MMA_SYNC), ("library", None)):
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                if shape is None:  # the library's pick, free to split K into a workspace
                    p = tk.gemm_epilogue_params(a, b, c, transpose_b=tb)
                    ws = torch.empty(max(tk.gemm_workspace(p), 16) // 4, device="cuda")
                    p = tk.gemm_epilogue_params(a, b, c, transpose_b=tb, workspace=ws)
                    p.keep = ws  # p holds only its address
                    picks[(m, n, k, tb)] = tk.gemm_choice(p)
                else:
                    p = tk.gemm_params(a, b, c, tb, shape)
                tk.gemm_prepare(p)
                tk.gemm(p, stream)
                torch.cuda.synchronize()
                errs[name] = ((c.float() - ref).norm() / ref.norm()).item()
                fns[name] = (lambda p=p: tk.gemm(p, stream))
            fns["cuBLAS"] = lambda: torch.matmul(a, bb)
            fl = 2 * m * n * k / 1e9
            per_round = []
            for _ in range(ROUNDS):
                per_round.append({x: fl / do_bench(f, warmup=50, rep=250, return_mode="median")
                                  for x, f in fns.items()})
            med = {x: median([r[x] for r in per_round]) for x in fns}
            ratio = median([r["wgmma"] / r["cuBLAS"] for r in per_round])
            lib = median([r["library"] / r["cuBLAS"] for r in per_round])
            rows.append((m, n, k, "A·Bᵀ" if tb else "A·B", med, ratio, lib, errs,
                         picks[(m, n, k, tb)]))
    smi.terminate()
    clocks = [line.split(",")[0].strip() for line in smi.stdout.read().splitlines() if line]
    print("| M | N | K | op | wgmma | mma.sync | library | cuBLAS | wgmma / cuBLAS | "
          "library / cuBLAS | library's pick | rel err wgmma / mma.sync / library |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, n, k, op, med, r, lib, e, pick in rows:
        print(f"| {m} | {n} | {k} | {op} | {med['wgmma']:.0f} | {med['mma.sync']:.0f} | "
              f"{med['library']:.0f} | {med['cuBLAS']:.0f} | {r:.2f} | {lib:.2f} | {pick} | "
              f"{e['wgmma']:.1e} / {e['mma.sync']:.1e} / {e['library']:.1e} |")
    print(f"SM clock while timing (nvidia-smi, {len(clocks)} samples): "
          f"median {median(clocks) if clocks else '?'}")


if __name__ == "__main__":
    main()
