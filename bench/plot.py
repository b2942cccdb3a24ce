#!/usr/bin/env python3
"""Draws the benchmark tables of bench/RESULTS.md as PNG bar charts: GEMM beside
cuBLAS, attention forward and backward beside FlashAttention-2 and cuDNN, and the
kernel zoo: LayerNorm/RMSNorm and rotary beside torch eager and torch.compile
(GB/s), Based and Hedgehog beside flash-linear-attention (µs).

    bench/plot.py [--results bench/RESULTS.md] [--entry TEXT] [--out DIR]
    bench/plot.py --gpt FILE [FILE ...] [--out DIR]

--gpt: the loss curves and tokens/s of gpt-train beside its PyTorch reference (issue 19), from
bench_gpt.py's --json-out, gpt_reference.py's --losses-out JSONs or gpt-train stdout logs:
gpt_loss.png (loss per step, one curve per run) and gpt_tokens.png (tokens/s per step, the
median over the steps after the warm-up in the legend).

Reads the newest entry (the last "## " section), or the last whose heading
contains TEXT, and draws each of its tables that has a TileKittens column and
a peer's (cuBLAS, FA2, cuDNN, torch eager / compile, fla): one bar per
implementation and row, in the table's unit (TFLOP/s; GB/s where the columns say
so; µs where the times are). Needs matplotlib (imported only to draw)."""
import argparse
import os
import re
import sys
import textwrap

# Implementation columns: ours, and the peers under the names tables have
# used ("FA2 (flash)", "FA2 (SDPA flash)", "cuDNN (SDPA)", ...).
PEERS = ("cuBLAS", "FA2", "cuDNN", "eager", "compile", "fla")
# Ours: one column, or one per kernel ("mma.sync", "wgmma ...") in attention tables;
# "ours ..." and "TK ..." in the zoo's.
OURS = ("TileKittens", "mma.sync", "wgmma", "ours", "TK")
NOT_TIMES = ("/", "ratio", "err", "b2b", "% copy", "Mtok")
UNITS = ("GB/s", "TFLOP/s", "tok/s")  # a "/" inside a unit is no ratio
# Columns that name a row but would only crowd its label.
NOT_LABELS = {"our block"}


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def entries(text):
    """[(heading, body)] of the "## " sections, in file order."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def tables(body):
    """[(caption, header, rows)]: each markdown table of a section, with the
    paragraph of text above it as its caption."""
    found, para, caption, lines = [], [], "", body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-| :]+\|$",
                                                                    lines[i + 1].strip()):
            header, rows = _cells(line), []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            found.append((caption, header, rows))
            continue
        if line:
            para.append(line.lstrip("#").strip())
            caption = " ".join(para)
        else:
            para = []
        i += 1
    return found


def _number(cell):
    try:
        return float(cell.replace("*", ""))
    except ValueError:
        return None


def _unit(header):
    """The unit a table's bars take: GB/s when a column says so, else µs when
    ours are times, else TFLOP/s (the GEMM and attention tables)."""
    if any("GB/s" in h for h in header):
        return "GB/s"
    if any(h.startswith(OURS) and "µs" in h for h in header):
        return "µs (lower is better)"
    return "TFLOP/s"


def _measure(h, unit):
    """Whether column h holds one implementation's figure in `unit`."""
    bare = h
    for u in UNITS:
        bare = bare.replace(u, "")
    if "/" in bare or any(x in h for x in NOT_TIMES if x != "/"):
        return False
    return unit != "GB/s" or "GB/s" in h


def series(header, rows):
    """(label title, [row labels], {implementation: [figures or None]}, unit),
    or None for a table without a TileKittens column beside a peer's."""
    unit = _unit(header)
    timed = [h for h in header if _measure(h, unit)]
    ours = [h for h in timed if h.startswith(OURS)]
    impls = [h for h in timed if h.startswith(OURS + PEERS)]
    if not ours or len(impls) < 2:
        return None
    first = header.index(ours[0])
    label_cols = [i for i in range(first)
                  if header[i] not in NOT_LABELS and not header[i].startswith(OURS)]
    labels = ["/".join(r[i] for i in label_cols) for r in rows]
    values = {p: [_number(r[header.index(p)]) for r in rows] for p in impls}
    return "/".join(header[i] for i in label_cols), labels, values, unit


def kind(caption, header):
    if "cuBLAS" in header:
        return "gemm"
    if any(h.startswith("fla") for h in header):
        return "hedgehog" if "hedgehog" in caption.lower() else "based"
    if any(h.startswith(("eager", "compile")) for h in header):
        return header[0].lower().replace(" ", "_")  # the first column names the kernel
    backward = "backward" in caption.lower() or any("bit-identical" in h for h in header)
    return "attention_backward" if backward else "attention_forward"


def draw(plt, path, title, label_title, labels, values, unit):
    width = 0.8 / len(values)
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 0.3 * len(labels) * len(values))), 5))
    for j, (impl, ys) in enumerate(values.items()):
        xs = [i + (j - (len(values) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [y if y is not None else 0 for y in ys], width, label=impl)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_xlabel(label_title)
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=7)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _gpt_runs(paths):
    """{label: run record} from bench_gpt.py JSONs (all their runs), gpt_reference.py
    --losses-out JSONs and gpt-train logs (labelled by file name); and the warm-up to skip."""
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt_reference
    runs, warmup = {}, 5
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "runs" in obj:
            warmup = obj.get("warmup", warmup)
            runs.update(obj["runs"])
            continue
        run = gpt_reference.load_run(path)
        label = run.get("label") or os.path.splitext(os.path.basename(path))[0]
        while label in runs:
            label += "'"
        runs[label] = run
    return runs, warmup


def plot_gpt(paths, out):
    """Draws gpt_loss.png and gpt_tokens.png into `out`; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs, warmup = _gpt_runs(paths)
    os.makedirs(out, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, run in runs.items():
        ax.plot(run["steps"], run["loss"], label=label, lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (bytes, nats)")
    ax.set_title("gpt-train beside the PyTorch reference: loss", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(os.path.join(out, "gpt_loss.png"))
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    top = 0.0
    for label, run in runs.items():
        w = min(warmup, max(0, len(run["steps"]) - 1))  # a short run keeps its last step
        steps = run["steps"][w:]
        tok = run.get("tok_s") or []
        ms = run.get("ms") or []
        if not any(t == t for t in tok) and ms:  # a log with times only
            tok = [(1e3 / m if m == m and m > 0 else float("nan")) * run.get("batch", 1) *
                   run.get("seq", 1) for m in ms]
        tok = tok[w:]
        if not tok:
            continue
        good = sorted(t for t in tok if t == t)
        med = good[len(good) // 2] if good else float("nan")
        ax.plot(steps, tok, label=f"{label} (median {med:,.0f})", lw=1.2)
        top = max(top, max(good) if good else 0)
    ax.set_ylim(0, top * 1.15 if top else None)
    ax.set_xlabel(f"step (after {warmup} warm-up steps)")
    ax.set_ylabel("tokens/s")
    ax.set_title("gpt-train beside the PyTorch reference: tokens/s", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(os.path.join(out, "gpt_tokens.png"))
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=os.path.join(here, "RESULTS.md"))
    ap.add_argument("--entry", help="the last entry whose heading contains this text")
    ap.add_argument("--out", default=os.path.join(here, "plots"))
    ap.add_argument("--gpt", nargs="+", metavar="FILE",
                    help="draw gpt-train's loss and tokens/s from these runs instead")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench/plot.py: needs matplotlib (pip install matplotlib)", file=sys.stderr)
        return 1
    if args.gpt:
        print("\n".join(plot_gpt(args.gpt, args.out)))
        return 0
    with open(args.results, encoding="utf-8") as f:
        found = entries(f.read())
    if args.entry:
        found = [e for e in found if args.entry in e[0]]
    if not found:
        print(f"bench/plot.py: no entry in {args.results}" +
              (f" with {args.entry!r} in its heading" if args.entry else ""), file=sys.stderr)
        return 1
    heading, body = found[-1]
    os.makedirs(args.out, exist_ok=True)
    counts, written = {}, []
    for caption, header, rows in tables(body):
        s = series(header, rows)
        if s is None:
            continue
        name = kind(caption, header)
        counts[name] = counts.get(name, 0) + 1
        path = os.path.join(args.out, name + ("" if counts[name] == 1 else f"_{counts[name]}") +
                            ".png")
        title = textwrap.fill(caption.rstrip(":"), 110) + "\n" + textwrap.fill(heading, 110)
        draw(plt, path, title, *s)
        written.append(path)
    if not written:
        print(f"bench/plot.py: no TileKittens-beside-a-peer table in '{heading}'",
              file=sys.stderr)
        return 1
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
