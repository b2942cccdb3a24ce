#!/usr/bin/env python3
"""The PyTorch reference of examples/gpt (gpt-train), built from examples/gpt/SPEC.md.

    bench/gpt_reference.py train   [--preset 124m] [--batch 16] [--seq 1024] [--steps 50]
                                   [--init seed|ckpt] [--seed S | --ckpt FILE] [--compile]
                                   [--dtype bf16|f32] [--sdpa auto|flash|cudnn|efficient|math]
                                   [--losses-out FILE] [--save FILE] [--stop-after K]
                                   [--val-every K] [--val-batches NB] [--data PATH ...]
                                   [--max-bytes N]
    bench/gpt_reference.py grads   --dump GRADS [--ckpt FILE | --seed S --preset P]
                                   --batch B --seq T
                                   [--fp64] [--device cuda|cpu] [--tol 1e-2] [--loss-tol 1e-3]
    bench/gpt_reference.py dump-grads --out FILE [--dtype bf16|f32|f64] [--ckpt FILE | --seed S]
    bench/gpt_reference.py compare RUN REF [--steps 50] [--tol 0.01]
    bench/gpt_reference.py init-check CKPT [--seed S]
    bench/gpt_reference.py data    [--data PATH ...] [--max-bytes N] [--seed S] [--batch B]
                                   [--seq T]

train: N steps at B x T (AdamW, clip 1.0, the SPEC's lr schedule), printing the SPEC's progress
line per step; bf16 autocast over f32 master weights by default. --init seed draws the SPEC's
splitmix64/Box-Muller init; --init ckpt (or --ckpt FILE) loads gpt-train's checkpoint (params,
and m, v, step and the data generator's state to resume; the run continues to --steps in all).
grads: gpt-train's --dump-grads file against this model's gradient of the same batch (the first
batch drawn from the checkpoint's data state, or the seed's), in float32 (TF32 off) and with
--fp64 in float64 too; per tensor ||g_c - g_ref|| / ||g_ref||, layer by layer; PASS (exit 0)
when every tensor is within --tol and the losses agree within --loss-tol (relative).
compare: two runs' losses (this script's --losses-out JSON, bench_gpt.py's JSON, or gpt-train's
stdout log) step by step; PASS when |run - ref| / |ref| <= --tol at every one of the first
--steps steps.
dump-grads: this model's own gradient dump of that batch in the SPEC's format (to test `grads`;
with --dtype bf16 it shows what bf16 compute alone costs against the f32 reference).
init-check: a checkpoint's parameters against the seed's init (what gpt-train saves at step 0).
data: the data walk, the split and the first batch's offsets, to compare with gpt-train's.

Everything that needs no torch (generator, init, data, schedule, checkpoint, progress lines)
is importable without torch (bench/test_gpt_reference.py tests it); torch is imported by the
modes that run the model.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

from gpt_spec import (
    CheckpointError, Config, DATA_SEED_XOR, DEFAULT_DATA, DEFAULT_MAX_BYTES, DEFAULT_SEED,
    DataError, LN_EPS, PEAK_FLOPS, PRESETS, Sampler, check_data, compare_losses, data_files,
    data_state, flops_per_token, fnv1a64, init_params, layer_of, layout, load_data, load_run,
    lr_at, n_params, offsets, progress_line, read_checkpoint, read_grad_dump, rows, split,
    summarize, val_offsets, write_checkpoint,
)

# --------------------------------------------------------------------------------------------
# The model (torch is imported here, never at module import)
# --------------------------------------------------------------------------------------------

_MODEL_CLS = None


def _model_class():
    global _MODEL_CLS
    if _MODEL_CLS is not None:
        return _MODEL_CLS
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            C = cfg.C
            self.H = cfg.H
            self.ln1 = nn.LayerNorm(C, eps=LN_EPS)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C, eps=LN_EPS)
            self.fc = nn.Linear(C, 4 * C)
            self.fcproj = nn.Linear(4 * C, C)

        def forward(self, r):
            B, T, C = r.shape
            q, k, v = self.qkv(self.ln1(r)).split(C, dim=2)
            shape = (B, T, self.H, C // self.H)
            q = q.view(shape).transpose(1, 2)
            k = k.view(shape).transpose(1, 2)
            v = v.view(shape).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, C)
            s = r + self.proj(y)
            return s + self.fcproj(F.gelu(self.fc(self.ln2(s)), approximate="tanh"))

    class GPT(nn.Module):
        """SPEC "Model": pre-norm GPT-2 over bytes with a tied head."""

        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.wte = nn.Embedding(cfg.V, cfg.C)
            self.wpe = nn.Embedding(cfg.T_max, cfg.C)
            self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.L))
            self.lnf = nn.LayerNorm(cfg.C, eps=LN_EPS)

        def forward(self, x, targets=None):
            T = x.shape[1]
            pos = torch.arange(T, device=x.device)
            r = self.wte(x) + self.wpe(pos)
            for blk in self.h:
                r = blk(r)
            logits = F.linear(self.lnf(r), self.wte.weight)
            if targets is None:
                return logits
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

        def named(self, name):
            """The parameter of SPEC name `name` (wte, h3.qkv_w, lnf_b, ...)."""
            if name in ("wte", "wpe"):
                return getattr(self, name).weight
            if name.startswith("lnf_"):
                return self.lnf.weight if name.endswith("_w") else self.lnf.bias
            l, key = name[1:].split(".", 1)
            mod, kind = key.rsplit("_", 1)
            m = getattr(self.h[int(l)], mod)
            return m.weight if kind == "w" else m.bias

    _MODEL_CLS = GPT
    return GPT


def build_model(cfg, flat=None, device="cpu", dtype=None):
    """The torch model of cfg on `device`, its parameters from the flat buffer `flat`."""
    model = _model_class()(cfg)
    if dtype is not None:
        model = model.to(dtype)
    model = model.to(device)
    if flat is not None:
        load_flat(model, flat)
    return model


def load_flat(model, flat):
    import torch
    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    t = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32)).to(dev).to(dt)
    with torch.no_grad():
        for name, (off, shape, _) in offsets(model.cfg).items():
            n = int(np.prod(shape))
            model.named(name).copy_(t[off:off + n].view(shape))


def flat_of(model, what="param"):
    """The parameters ('param') or their gradients ('grad') as one flat tensor, buffer order."""
    import torch
    ts = []
    for name, _, _ in layout(model.cfg):
        p = model.named(name)
        ts.append((p.grad if what == "grad" else p).detach().reshape(-1))
    return torch.cat(ts)


def make_optimizer(model, lr=6e-4):
    """torch.optim.AdamW with the SPEC's groups: decay 0.1 on matrices, 0 on vectors."""
    import torch
    decay = [model.named(n) for n, _, m in layout(model.cfg) if m]
    plain = [model.named(n) for n, _, m in layout(model.cfg) if not m]
    cuda = decay[0].is_cuda
    kw = {"fused": True} if cuda else {"foreach": True}
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": plain, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, **kw)


def load_optimizer_state(opt, model, m, v, step):
    """AdamW's exp_avg = m, exp_avg_sq = v and step from a checkpoint (load_state_dict puts
    each where its parameter and the fused kernels want it)."""
    import torch
    sd = opt.state_dict()
    index = {}
    k = 0
    for g in opt.param_groups:
        for p in g["params"]:
            index[id(p)] = k
            k += 1
    state = {}
    for name, (off, shape, _) in offsets(model.cfg).items():
        n = int(np.prod(shape))
        p = model.named(name)
        state[index[id(p)]] = {
            "step": torch.tensor(float(step), dtype=torch.float32),
            "exp_avg": torch.from_numpy(np.array(m[off:off + n], dtype=np.float32)).view(shape),
            "exp_avg_sq": torch.from_numpy(np.array(v[off:off + n], dtype=np.float32)).view(shape),
        }
    sd["state"] = state
    opt.load_state_dict(sd)


def optimizer_moments(opt, model):
    """(m, v) as flat f32 numpy buffers (zeros for a parameter never stepped)."""
    n = n_params(model.cfg)
    m, v = np.zeros(n, np.float32), np.zeros(n, np.float32)
    for name, (off, shape, _) in offsets(model.cfg).items():
        st = opt.state.get(model.named(name), {})
        k = int(np.prod(shape))
        if "exp_avg" in st:
            m[off:off + k] = st["exp_avg"].detach().float().reshape(-1).cpu().numpy()
            v[off:off + k] = st["exp_avg_sq"].detach().float().reshape(-1).cpu().numpy()
    return m, v


def set_sdpa(kind, dtype_name):
    """Restricts SDPA to one backend (global flags: they also hold while torch.compile traces).
    auto: flash, cuDNN and memory-efficient allowed (math too for f32/f64)."""
    import torch
    b = torch.backends.cuda
    want = {
        "flash": {"flash"}, "cudnn": {"cudnn"}, "efficient": {"efficient"}, "math": {"math"},
        "auto": {"flash", "cudnn", "efficient"} | ({"math"} if dtype_name != "bf16" else set()),
    }[kind]
    b.enable_flash_sdp("flash" in want)
    b.enable_cudnn_sdp("cudnn" in want)
    b.enable_mem_efficient_sdp("efficient" in want)
    b.enable_math_sdp("math" in want)


def try_sdpa(kind, dtype_name, cfg, device):
    """Sets SDPA to `kind`, checks a causal forward and backward at the model's head shape runs
    on it, else falls back to auto; returns the kind in force."""
    import torch
    import torch.nn.functional as F
    if not str(device).startswith("cuda"):
        return "cpu"
    dt = {"bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}[dtype_name]
    for k in ([kind, "auto"] if kind != "auto" else ["auto"]):
        set_sdpa(k, dtype_name)
        try:
            q = torch.randn(2, cfg.H, 256, cfg.D, device=device, dtype=dt, requires_grad=True)
            F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
            torch.cuda.synchronize()
            return k
        except RuntimeError as e:
            print(f"gpt_reference: SDPA backend {k} does not run here ({str(e).splitlines()[0]});"
                  " falling back to auto", file=sys.stderr)
    return "auto"


class Trainer:
    """The SPEC's training loop on torch: one object per run (eager or compiled)."""

    def __init__(self, cfg, flat, *, B, T, steps, data, state, start_step=0, m=None, v=None,
                 dtype="bf16", compile=False, compile_mode=None, sdpa="auto", device=None,
                 lr_max=6e-4, seed=DEFAULT_SEED, log=print, label="torch"):
        import torch
        self.torch = torch
        self.cfg, self.B, self.T, self.steps = cfg, B, T, steps
        self.dtype, self.lr_max, self.seed, self.log, self.label = dtype, lr_max, seed, log, label
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if T > cfg.T_max:
            raise ValueError(f"--seq {T} exceeds the config's T_max {cfg.T_max}")
        cuda = self.device.startswith("cuda")
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = False  # f32 means f32 (bf16 runs: unused)
            torch.backends.cudnn.allow_tf32 = False
            torch.cuda.reset_peak_memory_stats()
        self.sdpa = try_sdpa(sdpa, dtype, cfg, self.device)
        self.model = build_model(cfg, flat, self.device)
        self.opt = make_optimizer(self.model, lr_max)
        self.step_done = start_step
        if start_step > 0 and m is not None:
            load_optimizer_state(self.opt, self.model, m, v, start_step)
        self.params = [self.model.named(n) for n, _, _ in layout(cfg)]
        self.fwd = torch.compile(self.model, mode=compile_mode) if compile else self.model
        self.n_train, self.n_val = split(len(data))
        check_data(len(data), T)
        self.data = torch.from_numpy(np.array(data)).to(self.device)
        self.sampler = Sampler(state, self.n_train, T)
        self.ar = torch.arange(T + 1, device=self.device)
        self.fpt = flops_per_token(cfg, T)
        self.run = {"label": label, "config": cfg.as_dict(), "batch": B, "seq": T,
                    "dtype": dtype, "compile": bool(compile), "sdpa": self.sdpa,
                    "device": self._device_name(), "seed": seed, "steps": [], "loss": [],
                    "lr": [], "norm": [], "ms": [], "tok_s": [], "mfu": [], "val": []}

    def _device_name(self):
        t = self.torch
        return t.cuda.get_device_name() if self.device.startswith("cuda") else "cpu"

    def _autocast(self):
        t = self.torch
        if self.dtype == "bf16":
            return t.autocast(device_type="cuda" if self.device.startswith("cuda") else "cpu",
                              dtype=t.bfloat16)
        import contextlib
        return contextlib.nullcontext()

    def _batch(self, offs, base=0):
        t = self.torch
        o = t.from_numpy(offs + base).to(self.device, non_blocking=True)
        r = self.data[o[:, None] + self.ar[None, :]].long()
        return r[:, :-1], r[:, 1:]

    def _sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def train_step(self):
        t = self.torch
        step = self.step_done + 1
        lr = lr_at(step, self.steps, self.lr_max)
        self._sync()
        t0 = time.perf_counter()
        x, y = self._batch(self.sampler.draw(self.B))
        for g in self.opt.param_groups:
            g["lr"] = lr
        with self._autocast():
            loss = self.fwd(x, y)
        loss.backward()
        norm = t.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        loss_v, norm_v = t.stack([loss.detach().float(), norm.float()]).tolist()
        ms = (time.perf_counter() - t0) * 1e3
        self.step_done = step
        tok_s = self.B * self.T / (ms / 1e3)
        mfu = tok_s * self.fpt / PEAK_FLOPS
        for k, val in zip(("steps", "loss", "lr", "norm", "ms", "tok_s", "mfu"),
                          (step, loss_v, lr, norm_v, ms, tok_s, mfu)):
            self.run[k].append(val)
        self.log(progress_line(step, self.steps, loss_v, lr, norm_v, ms, tok_s, mfu))
        return loss_v

    def val_loss(self, val_batches):
        t = self.torch
        offs = val_offsets(self.n_val, self.T, self.B, val_batches)
        tot = 0.0
        with t.no_grad(), self._autocast():
            for i in range(val_batches):
                x, y = self._batch(offs[i * self.B:(i + 1) * self.B], self.n_train)
                tot += self.fwd(x, y).float().item()
        v = tot / val_batches
        self.run["val"].append([self.step_done, v])
        self.log(f"val {self.step_done}/{self.steps} | val_loss {v:.6f}")
        return v

    def save(self, path):
        m, v = optimizer_moments(self.opt, self.model)
        params = flat_of(self.model).float().cpu().numpy()
        write_checkpoint(path, self.cfg, self.seed, self.step_done, self.sampler.state,
                         params, m, v)


def train_run(cfg, flat, *, B, T, steps, data, state, start_step=0, m=None, v=None,
              stop_after=None, val_every=0, val_batches=0, warmup=5, save=None, **kw):
    """Trains from step start_step+1 to `stop_after` (default: steps); returns the run record
    with a summary (medians over the steps after the first `warmup` of this run)."""
    tr = Trainer(cfg, flat, B=B, T=T, steps=steps, data=data, state=state,
                 start_step=start_step, m=m, v=v, **kw)
    if val_batches:
        check_data(len(data), T, B, val_batches)
    end = steps if stop_after is None else min(steps, stop_after)
    while tr.step_done < end:
        tr.train_step()
        if val_every and val_batches and (tr.step_done % val_every == 0 or tr.step_done == end):
            tr.val_loss(val_batches)
    tr.run["summary"] = summarize(tr.run, warmup, cfg, B, T)
    if tr.device.startswith("cuda"):
        tr.run["summary"]["max_mem_gib"] = tr.torch.cuda.max_memory_allocated() / 2 ** 30
    if save:
        tr.save(save)
        tr.log(f"saved {save} at step {tr.step_done}")
    run = tr.run
    del tr
    _free_cuda()
    return run


def _free_cuda():
    try:
        import gc
        import torch
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------

def _cfg_and_init(args):
    """(cfg, flat params, checkpoint or None) from --init/--ckpt/--seed/--preset."""
    if args.init == "ckpt" or args.ckpt:
        if not args.ckpt:
            raise SystemExit("gpt_reference: --init ckpt needs --ckpt FILE")
        expect = Config.preset(args.preset) if args.preset_given else None
        t0 = time.time()
        ck = read_checkpoint(args.ckpt, expect)
        print(f"loaded {args.ckpt}: {ck.cfg}, step {ck.step}, seed {ck.seed} "
              f"({time.time() - t0:.1f} s)")
        return ck.cfg, ck.params, ck
    cfg = Config.preset(args.preset).check()
    t0 = time.time()
    flat = init_params(cfg, args.seed)
    print(f"init from seed {args.seed}: {cfg}, {n_params(cfg)} parameters "
          f"({time.time() - t0:.1f} s)")
    return cfg, flat, None


def _data(args, T=None):
    t0 = time.time()
    files = data_files(args.data)
    data = load_data(files=files, max_bytes=args.max_bytes)
    n_train, n_val = split(len(data))
    print(f"data: {len(files)} files, {len(data)} bytes (train {n_train}, val {n_val}) "
          f"({time.time() - t0:.1f} s)")
    if T is not None:
        check_data(len(data), T)
    return data


def mode_train(args):
    cfg, flat, ck = _cfg_and_init(args)
    T = args.seq or cfg.T_max
    data = _data(args, T)
    if ck is not None:
        start, state, m, v, seed = ck.step, ck.data_rng_state, ck.m, ck.v, ck.seed
        if start >= args.steps:
            raise SystemExit(f"gpt_reference: checkpoint is at step {start}, --steps {args.steps}")
    else:
        start, state, m, v, seed = 0, data_state(args.seed), None, None, args.seed
    run = train_run(cfg, flat, B=args.batch, T=T, steps=args.steps, data=data, state=state,
                    start_step=start, m=m, v=v, stop_after=args.stop_after,
                    val_every=args.val_every, val_batches=args.val_batches, warmup=args.warmup,
                    save=args.save, dtype=args.dtype, compile=args.compile,
                    compile_mode=args.compile_mode, sdpa=args.sdpa, device=args.device,
                    lr_max=args.lr, seed=seed,
                    label="torch.compile" if args.compile else "torch eager",
                    log=lambda s: print(s, flush=True))
    s = run["summary"]
    print(f"median over {s['steps_timed']} steps after {args.warmup}: {s['ms']:.1f} ms/step, "
          f"{s['tok_s']:.0f} tok/s, MFU {100 * s['mfu']:.1f}% ({run['device']}, {args.dtype}, "
          f"SDPA {run['sdpa']}{', compiled' if args.compile else ''}"
          + (f", {s['max_mem_gib']:.1f} GiB peak" if "max_mem_gib" in s else "") + ")")
    if args.losses_out:
        with open(args.losses_out, "w") as f:
            json.dump(run, f, indent=1)
        print(f"wrote {args.losses_out}")
    return 0


def _ref_grads(cfg, flat, x, y, dtype_name, device, micro):
    """(loss, flat grads as float64 numpy) of the batch in `dtype_name` (f32 or f64 with no
    autocast and no TF32; bf16: autocast over f32 weights, as training runs); rows in
    micro-batches of `micro`, their gradients summed."""
    import contextlib
    import torch
    dt = torch.float64 if dtype_name == "f64" else torch.float32
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try_sdpa({"f64": "math", "f32": "efficient", "bf16": "auto"}[dtype_name], dtype_name,
                 cfg, device)
    model = build_model(cfg, None, device, dt)
    load_flat(model, flat)
    cast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16) \
        if dtype_name == "bf16" else contextlib.nullcontext()
    B = x.shape[0]
    loss_tot = 0.0
    for i in range(0, B, micro):
        xb = torch.from_numpy(x[i:i + micro]).to(device)
        yb = torch.from_numpy(y[i:i + micro]).to(device)
        with cast:
            loss = model(xb, yb) * (xb.shape[0] / B)
        loss.backward()
        loss_tot += loss.item()
    g = flat_of(model, "grad").double().cpu().numpy()
    del model
    _free_cuda()
    return loss_tot, g


def _rel(a, b):
    """||a - b|| / ||b|| in float64 (||a - b|| where b is 0); NaN or inf in a: inf."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not np.all(np.isfinite(a)):
        return float("inf")
    nb = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / (nb if nb > 0 else 1.0)


def _first_batch(args):
    """(cfg, flat, x, y, device): the parameters and the first batch a run would train on."""
    import torch
    cfg, flat, ck = _cfg_and_init(args)
    T = args.seq or cfg.T_max
    B = args.batch
    data = _data(args, T)
    state = ck.data_rng_state if ck is not None else data_state(args.seed)
    if ck is not None and ck.step == 0 and state != data_state(ck.seed):
        print(f"note: step-0 checkpoint's data state {state:#x} is not seed ^ "
              f"{DATA_SEED_XOR:#x} = {data_state(ck.seed):#x}")
    n_train, _ = split(len(data))
    offs = Sampler(state, n_train, T).draw(B)
    x, y = rows(data, offs, T)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"batch {B} x {T} (must be gpt-train's), first offsets {offs[:4].tolist()}, "
          f"device {device}")
    return cfg, flat, x, y, device


def mode_dump_grads(args):
    """The reference's own gradient dump, in the SPEC's format (to test `grads`, or to see
    what bf16 compute alone costs against the f32 reference)."""
    cfg, flat, x, y, device = _first_batch(args)
    micro = args.micro or (min(2, x.shape[0]) if args.dtype == "f64" else x.shape[0])
    loss, g = _ref_grads(cfg, flat, x, y, args.dtype, device, micro)
    with open(args.out, "wb") as f:
        f.write(g.astype("<f4").tobytes())
        f.write(struct.pack("<f", loss))
    print(f"wrote {args.out}: {g.size} gradients ({args.dtype}), loss {loss:.6f}")
    return 0


def mode_grads(args):
    cfg, flat, x, y, device = _first_batch(args)
    B = x.shape[0]
    n = n_params(cfg)
    g_c, loss_c = read_grad_dump(args.dump, n)
    micro = args.micro or B
    t0 = time.time()
    loss32, g32 = _ref_grads(cfg, flat, x, y, "f32", device, micro)
    print(f"float32 reference: loss {loss32:.6f} ({time.time() - t0:.1f} s)")
    refs = [("f32", loss32, g32)]
    if args.fp64:
        t0 = time.time()
        loss64, g64 = _ref_grads(cfg, flat, x, y, "f64", args.fp64_device or device,
                                 args.micro or max(1, min(B, 2)))
        print(f"float64 reference: loss {loss64:.9f} ({time.time() - t0:.1f} s)")
        refs.append(("f64", loss64, g64))
    name_ref, loss_ref, g_ref = refs[-1]
    ok = True
    dl = abs(loss_c - loss_ref) / abs(loss_ref)
    loss_ok = dl == dl and dl <= args.loss_tol
    ok &= loss_ok
    print(f"loss: gpt-train {loss_c:.6f}, reference ({name_ref}) {loss_ref:.6f}, rel diff "
          f"{dl:.2e} ({'ok' if loss_ok else 'FAIL'}, tol {args.loss_tol:g})")
    if not loss_ok:
        print("  (a different batch? --batch, --seq, --data, --max-bytes and the seed or "
              "checkpoint must be those of the gpt-train run that dumped the gradients)")
    hdr = f"{'tensor':<14} {'numel':>9} {'|g_ref|':>10} {'rel err':>9}"
    if args.fp64:
        hdr += f" {'f32 vs f64':>10}"
    offs_map = offsets(cfg)
    names = [nm for nm, _, _ in layout(cfg)]
    order = sorted(names, key=lambda nm: (0, 0) if layer_of(nm) == "embeddings" else
                   ((2, 0) if layer_of(nm) == "final" else (1, int(nm[1:nm.index(".")]))))
    worst, group = (0.0, ""), None
    for nm in order:
        if layer_of(nm) != group:
            group = layer_of(nm)
            print(f"-- {group}\n{hdr}" if group == "embeddings" else f"-- {group}")
        off, shape, _ = offs_map[nm]
        k = int(np.prod(shape))
        e = _rel(g_c[off:off + k], g_ref[off:off + k])
        good = e == e and e <= args.tol
        ok &= good
        if not (e <= worst[0]):
            worst = (e, nm)
        line = f"{nm:<14} {k:>9} {np.linalg.norm(g_ref[off:off + k]):>10.3e} {e:>9.2e}"
        if args.fp64:
            line += f" {_rel(g32[off:off + k], g_ref[off:off + k]):>10.2e}"
        print(line + ("" if good else "  FAIL"))
    tot = _rel(g_c, g_ref)
    print(f"whole buffer rel err {tot:.2e}; worst tensor {worst[1]} {worst[0]:.2e} "
          f"(tol {args.tol:g})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def mode_compare(args):
    run, ref = load_run(args.run, args.run_name), load_run(args.ref, args.ref_name)
    ok, rows_, msg = compare_losses(run, ref, args.steps, args.tol)
    print(f"{'step':>5} {'run':>10} {'ref':>10} {'rel diff':>9}")
    for s, a, b, d in rows_:
        print(f"{s:>5} {a:>10.6f} {b:>10.6f} {d:>9.2e}" + ("" if d <= args.tol else "  FAIL"))
    print(f"{'PASS' if ok else 'FAIL'}: {msg} (tol {args.tol:g})")
    return 0 if ok else 1


def mode_init_check(args):
    ck = read_checkpoint(args.ckpt)
    seed = ck.seed if args.seed_given is None else args.seed_given
    ref = init_params(ck.cfg, seed)
    got = ck.params
    diff = got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64)
    bad = np.nonzero(diff)[0]
    maxd = float(np.max(np.abs(got.astype(np.float64) - ref))) if bad.size else 0.0
    ulps = int(np.max(np.abs(diff))) if bad.size else 0
    print(f"{args.ckpt}: step {ck.step}, seed {seed}: {bad.size} of {ref.size} parameters "
          f"differ from the seed's init (max |diff| {maxd:.3e}, max {ulps} ulp)")
    names = {off: nm for nm, (off, _, _) in offsets(ck.cfg).items()}
    starts = sorted(names)
    for i in bad[:5]:
        o = starts[np.searchsorted(starts, i, side="right") - 1]
        print(f"  [{i}] {names[o]}[{i - o}]: checkpoint {got[i]!r}, init {ref[i]!r}")
    ok = bad.size == 0 or (ulps <= 1 and bad.size <= 16)  # libm's last bit, rarely
    if ck.step == 0:
        mv_zero = not np.any(ck.m) and not np.any(ck.v)
        state_ok = ck.data_rng_state == data_state(seed)
        print(f"m, v all zero: {mv_zero}; data state {'ok' if state_ok else 'DIFFERS'}")
        ok &= mv_zero and state_ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def mode_data(args):
    files = data_files(args.data)
    data = load_data(files=files, max_bytes=args.max_bytes)
    n_train, n_val = split(len(data))
    print(f"{len(files)} files, {len(data)} bytes: train {n_train}, val {n_val}, "
          f"FNV-1a of the bytes {fnv1a64(data.tobytes()):#018x}")
    for f in files[:args.show]:
        print("  " + os.fsdecode(f))
    if len(files) > args.show:
        print(f"  ... ({len(files) - args.show} more) last: {os.fsdecode(files[-1])}")
    T = args.seq or Config.preset(args.preset).T_max
    check_data(len(data), T)
    s = Sampler(data_state(args.seed), n_train, T)
    for step in range(1, 3):
        print(f"step {step} offsets: {s.draw(args.batch).tolist()}")
    if args.val_batches:
        vo = val_offsets(n_val, T, args.batch, args.val_batches)
        print(f"validation offsets (in the split): {vo[:4].tolist()} ... {vo[-1]}")
    return 0


def parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    sub = ap.add_subparsers(dest="mode", required=True)

    def common(p, model=True):
        p.add_argument("--preset", default=None, choices=list(PRESETS))
        p.add_argument("--data", nargs="+", default=DEFAULT_DATA, metavar="PATH")
        p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
        p.add_argument("--seed", type=int, default=None)
        p.add_argument("--batch", type=int, default=16)
        p.add_argument("--seq", type=int, default=None, help="T (default: the config's T_max)")
        if model:
            p.add_argument("--init", choices=["seed", "ckpt"], default=None)
            p.add_argument("--ckpt", help="gpt-train checkpoint (implies --init ckpt)")
            p.add_argument("--device", default=None)

    p = sub.add_parser("train", help="train N steps, print progress lines")
    common(p)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this step (the schedule still spans --steps)")
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default=None)
    p.add_argument("--sdpa", choices=["auto", "flash", "cudnn", "efficient", "math"],
                   default="auto")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the medians")
    p.add_argument("--val-every", type=int, default=0)
    p.add_argument("--val-batches", type=int, default=0)
    p.add_argument("--losses-out", metavar="FILE")
    p.add_argument("--save", metavar="FILE", help="checkpoint at the end (SPEC format)")

    p = sub.add_parser("grads", help="gpt-train's gradient dump against the reference")
    common(p)
    p.add_argument("--dump", required=True, help="gpt-train --dump-grads file")
    p.add_argument("--fp64", action="store_true", help="also in float64 (the PASS reference)")
    p.add_argument("--fp64-device", default=None)
    p.add_argument("--micro", type=int, default=None, help="rows per backward (memory)")
    p.add_argument("--tol", type=float, default=1e-2)
    p.add_argument("--loss-tol", type=float, default=1e-3)

    p = sub.add_parser("dump-grads", help="the reference's gradient dump (SPEC format)")
    common(p)
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["bf16", "f32", "f64"], default="bf16")
    p.add_argument("--micro", type=int, default=None, help="rows per backward (memory)")

    p = sub.add_parser("compare", help="two runs' losses step by step")
    p.add_argument("run", help="JSON or gpt-train stdout log")
    p.add_argument("ref", help="JSON (or log) of the reference")
    p.add_argument("--run-name", default=None, help="the run inside a bench_gpt.py JSON")
    p.add_argument("--ref-name", default=None)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--tol", type=float, default=0.01)

    p = sub.add_parser("init-check", help="a checkpoint's params against the seed's init")
    p.add_argument("ckpt")
    p.add_argument("--seed", dest="seed_given", type=int, default=None,
                   help="default: the checkpoint's seed")

    p = sub.add_parser("data", help="the data walk and the first offsets")
    common(p, model=False)
    p.add_argument("--show", type=int, default=5)
    p.add_argument("--val-batches", type=int, default=0)
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if hasattr(args, "preset"):
        args.preset_given = args.preset is not None
        args.preset = args.preset or "124m"
        if args.seed is None:
            args.seed = DEFAULT_SEED
    modes = {"train": mode_train, "grads": mode_grads, "compare": mode_compare,
             "init-check": mode_init_check, "data": mode_data,
             "dump-grads": mode_dump_grads}
    try:
        return modes[args.mode](args)
    except (CheckpointError, DataError, ValueError) as e:
        print(f"gpt_reference: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
