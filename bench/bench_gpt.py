#!/usr/bin/env python3
"""gpt-train (examples/gpt, TileKittens kernels) beside its PyTorch reference, eager and under
torch.compile, at the same config and global batch on the same GPU, in one run (issue 19).

    bench/bench_gpt.py BUILD_DIR [--steps 50] [--warmup 10] [--preset 124m] [--batch 16]
                       [--seq 1024] [--seed 1337] [--only c,eager,compile] [--c-args "..."]
                       [--sdpa flash,cudnn] [--json-out FILE] [--plot] [--timeout S]

Runs BUILD_DIR/gpt-train --preset P --batch B --seq T --steps N --seed S [C_ARGS], then
bench/gpt_reference.py's trainer on the same init (the SPEC's seed init) and data for N steps,
eager and compiled, on each SDPA backend of --sdpa (flash and cuDNN by default). Prints a
markdown table: the median step time over the steps after the first --warmup, its tokens/s
and MFU (flops/token 6·N_params + 12·L·T·C over 989 TFLOP/s, one formula for every row, from
the median ms), the ratios to the fastest eager and the fastest compiled rows; then the loss
tracking: gpt-train against the first eager run, |Δ|/ref at each of the first 50 steps (the
issue's 1%), and the references against each other (the spread bf16 rounding alone gives).
--json-out writes every run's per-step losses and times (bench/plot.py --gpt FILE draws them;
--plot does it here). Exit 0 when gpt-train ran and tracked the reference.

What this expects from gpt-train's stdout (SPEC.md, "Progress line"): one line per step that
begins with `step`, e.g.

    step 12/50 | loss 3.123456 | lr 6.0e-04 | norm 1.234 | 123.4 ms | 132768 tok/s | MFU 41.2%

parsed by gpt_reference.parse_progress: `step N[/TOTAL]` at the start of the line, then
`loss X` (required), and where present `lr X`, `norm X`, `X ms`, `X tok/s`, `MFU X%`
(`key=value` spellings are accepted too). Any other line (validation, info) must not begin
with `step`. The table takes gpt-train's `ms` (else B·T / tok/s)."""
import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as G  # noqa: E402
import gpt_spec as S  # noqa: E402

C_LABEL, EAGER, COMPILE = "TileKittens", "torch eager", "torch.compile"


def run_c(exe, args, timeout):
    """Runs gpt-train, echoing its output; (run record, exit code, seconds). A run past
    `timeout` seconds is killed (what it printed still counts)."""
    print(f"$ {shlex.join([exe] + args)}", flush=True)
    t0 = time.time()
    lines = []
    try:
        p = subprocess.Popen([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace", bufsize=1)
    except OSError as e:
        print(f"bench_gpt: cannot run {exe}: {e}", file=sys.stderr)
        return None, 127, 0.0
    killed = []
    timer = threading.Timer(timeout, lambda: (killed.append(1), p.kill()))
    timer.start()
    try:
        for line in p.stdout:
            print("  | " + line.rstrip(), flush=True)
            lines.append(line)
        rc = p.wait()
    finally:
        timer.cancel()
    if killed:
        print(f"bench_gpt: gpt-train killed after {timeout} s", file=sys.stderr)
    run = S.parse_log("".join(lines))
    run["label"] = C_LABEL
    run["cmd"] = [exe] + args
    return run, rc, time.time() - t0


def c_times(run, B, T):
    """gpt-train's per-step ms (from tok/s where a line has no ms)."""
    out = []
    for ms, tok in zip(run["ms"], run["tok_s"]):
        if ms == ms:
            out.append(ms)
        elif tok == tok and tok > 0:
            out.append(B * T / tok * 1e3)
        else:
            out.append(float("nan"))
    return out


def table(runs, cfg, B, T, warmup):
    """Prints the markdown table; ratios are to the fastest eager and the fastest compiled
    reference rows (one per SDPA backend timed)."""
    rows = {name: S.summarize(run, warmup, cfg, B, T) for name, run in runs.items()}
    best = {}
    for kind in (EAGER, COMPILE):
        toks = [s["tok_s"] for n, s in rows.items()
                if n.startswith(kind) and s["tok_s"] == s["tok_s"]]
        best[kind] = max(toks) if toks else None
    last = min(len(r["loss"]) for r in runs.values()) if runs else 0
    print(f"\n| impl | ms/step | tok/s | MFU | vs eager | vs compile | loss at step {last} |")
    print("|---|---|---|---|---|---|---|")
    for name, s in rows.items():
        ve = f"{s['tok_s'] / best[EAGER]:.2f}" if best[EAGER] else "-"
        vc = f"{s['tok_s'] / best[COMPILE]:.2f}" if best[COMPILE] else "-"
        loss = runs[name]["loss"][last - 1] if last else float("nan")
        print(f"| {name} | {s['ms']:.1f} | {s['tok_s']:.0f} | {100 * s['mfu']:.1f}% | {ve} | "
              f"{vc} | {loss:.4f} |")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("build", help="the build directory holding gpt-train (build-device/)")
    ap.add_argument("--preset", default="124m", choices=list(S.PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=None, help="T (default: the preset's T_max)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10, help="steps left out of the medians")
    ap.add_argument("--seed", type=int, default=S.DEFAULT_SEED)
    ap.add_argument("--data", nargs="+", default=None, metavar="PATH",
                    help="passed to both (default: each side's default, /usr/include)")
    ap.add_argument("--max-bytes", type=int, default=None)
    ap.add_argument("--only", default="c,eager,compile")
    ap.add_argument("--c-args", default="", help="more gpt-train arguments")
    ap.add_argument("--sdpa", default="flash,cudnn",
                    help="SDPA backends to time the reference on, comma-separated, each eager "
                         "and compiled (auto, flash, cudnn, efficient); ratios take the fastest")
    ap.add_argument("--compile-mode", default=None)
    ap.add_argument("--timeout", type=int, default=420, help="seconds for gpt-train")
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--plot", action="store_true", help="draw bench/plots/gpt_*.png")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    cfg = S.Config.preset(args.preset).check()
    T = args.seq or cfg.T_max
    B, N = args.batch, args.steps
    runs, info = {}, {}

    if "c" in only:
        exe = os.path.join(args.build, "gpt-train")
        cargs = ["--preset", args.preset, "--batch", str(B), "--seq", str(T), "--steps", str(N),
                 "--seed", str(args.seed)]
        if args.max_bytes:
            cargs += ["--max-bytes", str(args.max_bytes)]
        cargs += shlex.split(args.c_args)
        if args.data:
            cargs += args.data  # the data files are gpt-train's positional arguments
        run, rc, secs = run_c(exe, cargs, args.timeout)
        info["c_exit"], info["c_seconds"] = rc, secs
        if run is not None and run["steps"]:
            run["ms"] = c_times(run, B, T)
            runs[C_LABEL] = run
            print(f"gpt-train: exit {rc}, {len(run['steps'])} steps in {secs:.0f} s")
        else:
            print(f"bench_gpt: gpt-train gave no progress lines (exit {rc})", file=sys.stderr)

    if only & {"eager", "compile"}:
        import torch
        data = S.load_data(args.data or S.DEFAULT_DATA, args.max_bytes or S.DEFAULT_MAX_BYTES)
        t0 = time.time()
        flat = S.init_params(cfg, args.seed)
        print(f"\nreference: data {len(data)} bytes, init from seed {args.seed} "
              f"({time.time() - t0:.1f} s), {torch.cuda.get_device_name()}", flush=True)
        backends = args.sdpa.split(",")
        for base, comp, sdpa in [(k, c, b) for k, c in ((EAGER, False), (COMPILE, True))
                                 for b in backends]:
            if ("compile" if comp else "eager") not in only:
                continue
            name = base if len(backends) == 1 else f"{base} ({sdpa})"
            print(f"== {name}", flush=True)
            t0 = time.time()
            run = G.train_run(cfg, flat, B=B, T=T, steps=N, data=data,
                              state=S.data_state(args.seed), warmup=args.warmup, dtype="bf16",
                              compile=comp, compile_mode=args.compile_mode, sdpa=sdpa,
                              seed=args.seed, label=name, log=lambda s: print("  " + s, flush=True))
            print(f"{name}: {time.time() - t0:.0f} s in all (SDPA {run['sdpa']})")
            runs[name] = run
        info["device"] = torch.cuda.get_device_name()

    if not runs:
        print("bench_gpt: nothing ran", file=sys.stderr)
        return 1
    print(f"\n{args.preset} ({cfg}), batch {B} x {T}, {N} steps, medians over steps "
          f"{args.warmup + 1}..{N}, bf16, {info.get('device', '?')}")
    summary = table(runs, cfg, B, T, args.warmup)
    ok = True
    refs = [n for n in runs if n != C_LABEL]
    # gpt-train against the first eager run (the criterion); the references against
    # each other: the spread that bf16 rounding alone gives over the same steps
    checks = [(C_LABEL, refs[0])] if C_LABEL in runs and refs else []
    checks += [(r, refs[0]) for r in refs[1:]]
    for a, b in checks:
        k = min(50, N)
        good, rows, msg = S.compare_losses(runs[a], runs[b], k, args.tol)
        print(f"loss tracking {a} vs {b}: {'PASS' if good else 'FAIL'}: {msg}")
        if a == C_LABEL:
            ok &= good
    if "c" in only and (info.get("c_exit") != 0 or C_LABEL not in runs):
        ok = False
    if args.json_out or args.plot:
        path = args.json_out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "plots", "gpt_runs.json")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"config": cfg.as_dict(), "preset": args.preset, "batch": B, "seq": T,
                       "steps": N, "warmup": args.warmup, "seed": args.seed, "info": info,
                       "summary": summary, "runs": runs}, f, indent=1)
        print(f"wrote {path}")
        if args.plot:
            if importlib.util.find_spec("matplotlib") is None:
                print("bench_gpt: no matplotlib here, no plots (bench/plot.py --gpt "
                      f"{path} draws them elsewhere)")
            else:
                import plot
                for p in plot.plot_gpt([path], os.path.join(os.path.dirname(
                        os.path.abspath(__file__)), "plots")):
                    print(f"wrote {p}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
