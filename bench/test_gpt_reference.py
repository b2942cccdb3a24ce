"""Tests of bench/gpt_reference.py's torch-free parts: the generator, the init, the data walk,
the sampler, the lr schedule, checkpoints and gradient dumps, progress lines and loss compares.

    python3 -m pytest -q bench/test_gpt_reference.py

Nothing here imports torch."""
import math
import os
import struct
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as G  # noqa: E402
import gpt_spec as S  # noqa: E402

M64 = (1 << 64) - 1


def sm64(state):
    """splitmix64 written out once more, independently of the module: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def sm64_seq(state, n):
    out = []
    for _ in range(n):
        state, z = sm64(state)
        out.append(z)
    return out


# ---------------------------------------------------------------- generator

def test_splitmix64_known_values():
    # Published outputs of splitmix64 (Vigna's reference code) for seed 1234567 and seed 0.
    assert sm64_seq(1234567, 5) == [6457827717110365317, 3203168211198807973,
                                    9817491932198370423, 4593380528125082431,
                                    16408922859458223821]
    assert sm64_seq(0, 1) == [0xE220A8397B1DCDAF]
    g = S.SplitMix64(1234567)
    assert [g.next() for _ in range(5)] == sm64_seq(1234567, 5)


def test_splitmix64_vectorized_equals_scalar_with_wraparound():
    for seed in (0, 1234567, M64 - 3, 0x9E3779B97F4A7C15 * 7 & M64, 2 ** 63 + 11):
        ref = sm64_seq(seed, 1000)
        got = S.splitmix64_block(seed, 1000)
        assert got.dtype == np.uint64
        assert [int(v) for v in got] == ref
        # a block that starts later: draws 501..1000
        assert [int(v) for v in S.splitmix64_block(seed, 500, start=500)] == ref[500:]
        assert S.advance(seed, 1000) == (seed + 1000 * 0x9E3779B97F4A7C15) & M64


def test_uniform_and_normals_match_scalar():
    seed = 42
    u = S.uniforms_block(seed, 64)
    zs = sm64_seq(seed, 64)
    assert [float(x) for x in u] == [(z >> 11) * 2.0 ** -53 for z in zs]
    assert all(0.0 <= x < 1.0 for x in u)
    g = S.SplitMix64(seed)
    ref = np.array([g.normal() for _ in range(5000)])
    got = S.normals_block(seed, 5000)
    # numpy's log/cos against libm's: equal to the last bit or within one ulp
    np.testing.assert_allclose(got, ref, rtol=4e-16, atol=0)
    assert np.array_equal((0.02 * got).astype(np.float32), (0.02 * ref).astype(np.float32))
    # normal i uses draws 2i+1 and 2i+2: a block starting at normal 1000
    np.testing.assert_allclose(S.normals_block(seed, 10, start=1000), ref[1000:1010],
                               rtol=4e-16, atol=0)
    # by hand: the first normal from the first two draws
    u1, u2 = (zs[0] >> 11) * 2.0 ** -53, (zs[1] >> 11) * 2.0 ** -53
    assert abs(got[0] - math.sqrt(-2 * math.log(1 - u1)) * math.cos(2 * math.pi * u2)) < 1e-15
    # the normals look normal
    big = S.normals_block(7, 200000)
    assert abs(big.mean()) < 0.01 and abs(big.std() - 1) < 0.01


# ---------------------------------------------------------------- init

def test_layout_sizes():
    cfg = S.Config.preset("124m")
    L, C, T, V = 12, 768, 1024, 256
    assert S.n_params(cfg) == V * C + T * C + L * 12 * C * C + L * 13 * C + 2 * C == 86039040
    assert S.n_matrix_params(cfg) == V * C + T * C + L * 12 * C * C
    offs = S.offsets(cfg)
    assert offs["wte"][0] == 0 and offs["wpe"][0] == V * C
    assert offs["h0.qkv_w"][0] == V * C + T * C
    assert offs["h1.qkv_w"][0] == V * C + T * C + 12 * C * C
    assert offs["h0.ln1_w"][0] == S.n_matrix_params(cfg)
    assert offs["lnf_b"][0] == S.n_params(cfg) - C
    assert all(int(np.prod(s)) % 64 == 0 for _, s, _ in S.layout(cfg))
    assert S.flops_per_token(cfg, 1024) == 6 * 86039040 + 12 * 12 * 1024 * 768
    for p in S.PRESETS:
        S.Config.preset(p).check()
    S.Config(2, 3, 192, 64).check()  # head dim 64
    with pytest.raises(ValueError, match="head dim"):
        S.Config(2, 2, 96, 64).check()  # head dim 48
    with pytest.raises(ValueError, match="head dim"):
        S.Config(2, 4, 128, 64).check()  # head dim 32
    with pytest.raises(ValueError, match="bytes"):
        S.Config(2, 2, 128, 64, V=512).check()


def test_init_first_values_and_tensor_boundaries():
    cfg = S.Config.preset("tiny")
    seed = 1337
    flat = S.init_params(cfg, seed, threads=4, chunk=5000)  # chunks and threads cross tensors
    assert flat.dtype == np.float32 and flat.size == S.n_params(cfg)
    g = S.SplitMix64(seed)
    first = np.array([np.float32(0.02 * g.normal()) for _ in range(2000)], dtype=np.float32)
    assert np.array_equal(flat[:2000], first)
    offs = S.offsets(cfg)
    std_proj = 0.02 / math.sqrt(2 * cfg.L)
    for name, (off, shape, mat) in offs.items():
        n = int(np.prod(shape))
        for i in (off, off + 1, off + n - 1):
            assert flat[i] == S.init_param_scalar(cfg, seed, i), (name, i)
        if mat:
            # the i-th normal of the whole stream sits at buffer offset i
            h = S.SplitMix64(S.advance(seed, 2 * off))
            std = std_proj if name.endswith(("proj_w", "fcproj_w")) else 0.02
            assert flat[off] == np.float32(std * h.normal())
            assert abs(flat[off:off + n].std() / std - 1) < 0.1 or n < 2000
        elif name.endswith("_w"):
            assert np.all(flat[off:off + n] == 1.0), name
        else:
            assert np.all(flat[off:off + n] == 0.0), name
    # the same buffer single-threaded, and a different seed differs
    assert np.array_equal(flat, S.init_params(cfg, seed, threads=1))
    assert not np.array_equal(flat, S.init_params(cfg, seed + 1))


# ---------------------------------------------------------------- data

@pytest.fixture
def tree(tmp_path):
    """A tree of .h files, others, and symlinks."""
    r = tmp_path / "inc"
    (r / "sub" / "deep").mkdir(parents=True)
    (r / "ab").mkdir()
    (r / "dir.h").mkdir()  # a directory named *.h is walked, not read
    files = {
        "a.h": b"AAAA", "B.h": b"BB", "a.hh": b"no", "a.c": b"no", "_u.h": b"U",
        "ab/x.h": b"X", "sub/z.h": b"ZZZ", "sub/deep/d.h": b"DDDDD", "sub/a.h": b"sa",
        "dir.h/in.h": b"II", "zz.h": b"zz",
    }
    for k, v in files.items():
        (r / k).write_bytes(v)
    (r / "\xe9.h").write_bytes(b"E")  # a high byte sorts after every ASCII name
    os.symlink(r / "a.h", r / "link.h")  # symlinks are skipped, to files and to directories
    os.symlink(r / "sub", r / "linkdir")
    os.symlink(r / "nowhere.h", r / "broken.h")
    return r


def test_data_walk_order_symlinks_and_cap(tree, tmp_path):
    got = [os.path.relpath(os.fsdecode(p), tree) for p in S.data_files([str(tree)])]
    # strcmp order of each directory's entries, depth first; uppercase before '_' before
    # lowercase; 'a.h' < 'a.hh' (not .h) < 'ab/'; 'dir.h/' walked; symlinks skipped
    assert got == ["B.h", "_u.h", "a.h", "ab/x.h", "dir.h/in.h", "sub/a.h", "sub/deep/d.h",
                   "sub/z.h", "zz.h", "\xe9.h"]
    data = S.load_data([str(tree)], max_bytes=1 << 20)
    assert data.tobytes() == b"BB" + b"U" + b"AAAA" + b"X" + b"II" + b"sa" + b"DDDDD" + \
        b"ZZZ" + b"zz" + b"E"
    # the cap cuts inside a file
    assert S.load_data([str(tree)], max_bytes=8).tobytes() == b"BBUAAAAX"
    assert S.load_data([str(tree)], max_bytes=5).tobytes() == b"BBUAA"
    # files named on the command line are read whatever their name, in the order named
    other = tmp_path / "notes.txt"
    other.write_bytes(b"TXT")
    data = S.load_data([str(other), str(tree / "sub")], max_bytes=100)
    assert data.tobytes() == b"TXT" + b"sa" + b"DDDDD" + b"ZZZ"
    with pytest.raises(S.DataError, match="missing"):
        S.data_files([str(tmp_path / "missing")])
    with pytest.raises(S.DataError):
        S.load_data([str(tree)], max_bytes=0)


def test_split_and_check():
    assert S.split(1000) == (900, 100)
    assert S.split(15) == (13, 2)
    assert S.split(67108864) == (60397977, 6710887)
    for n in (1, 7, 123456789, 10 ** 9 + 7):
        assert S.split(n)[0] == math.floor(n * 0.9)
    with pytest.raises(S.DataError):
        S.check_data(100, 90)


def test_sampler_offsets():
    seed = 1337
    state = S.data_state(seed)
    assert state == seed ^ 0xDA7A5EED0000D47A
    n_train, T, B = 60397977, 1024, 16
    s = S.Sampler(state, n_train, T)
    steps = [s.draw(B) for _ in range(3)]
    zs = sm64_seq(state, 3 * B)
    ref = [z % (n_train - T) for z in zs]
    assert [int(o) for st in steps for o in st] == ref
    assert all(0 <= o and o + T < n_train for o in ref)  # a row of T+1 bytes stays in train
    # the state after k steps resumes the same sequence (what a checkpoint saves)
    assert s.state == S.advance(state, 3 * B)
    s2 = S.Sampler(S.advance(state, 2 * B), n_train, T)
    assert np.array_equal(s2.draw(B), steps[2])
    # rows: x and the targets shifted by one
    data = np.arange(200, dtype=np.uint8)
    x, y = S.rows(data, np.array([0, 5, 100]), 8)
    assert x.shape == (3, 8) and x[1, 0] == 5 and y[1, 0] == 6 and y[2, -1] == 108


def test_val_offsets():
    n_val, T, B, nb = 6710887, 1024, 16, 4
    v = S.val_offsets(n_val, T, B, nb)
    assert len(v) == 64 and v[0] == 0 and v[-1] == n_val - T - 1
    assert [int(o) for o in v] == [i * (n_val - T - 1) // 63 for i in range(64)]
    assert np.all(np.diff(v) > 0)


# ---------------------------------------------------------------- lr

def test_lr_schedule():
    lr_max, lr_min = 6e-4, 6e-5
    N = 50
    W = S.warmup_steps(N)
    assert W == 5
    assert S.lr_at(1, N) == pytest.approx(lr_max / 5, rel=1e-15)
    assert S.lr_at(W, N) == pytest.approx(lr_max, rel=1e-15)
    assert S.lr_at(W + 1, N) == pytest.approx(
        lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi / 45)), rel=1e-15)
    assert S.lr_at(N, N) == pytest.approx(lr_min, rel=1e-12)
    # long runs warm up 20 steps
    assert S.warmup_steps(1000) == 20
    assert S.lr_at(1, 1000) == pytest.approx(3e-5, rel=1e-15)
    assert S.lr_at(20, 1000) == pytest.approx(lr_max, rel=1e-15)
    assert S.lr_at(21, 1000) < lr_max
    assert S.lr_at(1000, 1000) == pytest.approx(lr_min, rel=1e-12)
    mid = 20 + (1000 - 20) / 2
    assert S.lr_at(mid, 1000) == pytest.approx(0.5 * (lr_max + lr_min), rel=1e-12)
    # runs shorter than 10 steps: no warm-up, straight into the cosine
    assert S.warmup_steps(5) == 0
    assert S.lr_at(5, 5) == pytest.approx(lr_min, rel=1e-12)
    assert S.lr_at(1, 5) < lr_max
    # monotone decay after the warm-up
    lrs = [S.lr_at(t, 50) for t in range(1, 51)]
    assert lrs[:5] == sorted(lrs[:5]) and lrs[4:] == sorted(lrs[4:], reverse=True)


# ---------------------------------------------------------------- checkpoints

def fnv(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def tiny_writer(path, L, H, C, T, V, seed, step, drs, params, m, v, magic=b"TKGPT\0\0\1",
                version=1, header_bytes=72, n=None):
    """The SPEC's layout written out by hand."""
    n = len(params) if n is None else n
    head = magic + struct.pack("<II", version, header_bytes) + \
        struct.pack("<6i", L, H, C, T, V, 0) + struct.pack("<QqQQ", seed, step, drs, n)
    body = head + b"".join(struct.pack(f"<{len(a)}f", *a) for a in (params, m, v))
    body += struct.pack("<Q", fnv(body))
    with open(path, "wb") as f:
        f.write(body)
    return body


def test_fnv1a64():
    assert S.fnv1a64(b"") == 0xCBF29CE484222325
    assert S.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert S.fnv1a64(b"foobar") == 0x85944171F73967E8
    rnd = np.random.default_rng(0).integers(0, 256, 100000, dtype=np.uint8).tobytes()
    assert S.fnv1a64(rnd) == S.fnv1a64_py(rnd) == fnv(rnd)
    assert S.fnv1a64(rnd[5000:], S.fnv1a64(rnd[:5000])) == fnv(rnd)


def test_checkpoint_round_trip_and_corruption(tmp_path):
    cfg = S.Config.preset("tiny")
    n = S.n_params(cfg)
    rng = np.random.default_rng(1)
    params = rng.standard_normal(n).astype(np.float32)
    m = rng.standard_normal(n).astype(np.float32)
    v = rng.random(n).astype(np.float32)
    path = str(tmp_path / "ck.bin")
    body = tiny_writer(path, *cfg.as_tuple(), seed=1337, step=7, drs=0xDEADBEEFCAFEF00D,
                       params=params.tolist(), m=m.tolist(), v=v.tolist())
    assert len(body) == 72 + 12 * n + 8
    ck = S.read_checkpoint(path, expect_cfg=cfg)
    assert ck.cfg == cfg and ck.seed == 1337 and ck.step == 7
    assert ck.data_rng_state == 0xDEADBEEFCAFEF00D
    assert np.array_equal(ck.params, params) and np.array_equal(ck.m, m)
    assert np.array_equal(ck.v, v)
    # the module's writer gives the same bytes, through FILE.tmp
    path2 = str(tmp_path / "ck2.bin")
    S.write_checkpoint(path2, cfg, 1337, 7, 0xDEADBEEFCAFEF00D, params, m, v)
    assert open(path2, "rb").read() == body and not os.path.exists(path2 + ".tmp")

    def corrupt(offset, name, xor=0x01):
        b = bytearray(body)
        b[offset] ^= xor
        p = str(tmp_path / name)
        open(p, "wb").write(bytes(b))
        return p

    with pytest.raises(S.CheckpointError, match="checksum mismatch.*corrupt"):
        S.read_checkpoint(corrupt(72 + 4 * 1234 + 2, "flip_param"))
    with pytest.raises(S.CheckpointError, match="checksum"):
        S.read_checkpoint(corrupt(len(body) - 3, "flip_sum"))
    with pytest.raises(S.CheckpointError, match="checksum"):
        S.read_checkpoint(corrupt(60, "flip_state"))  # data_rng_state
    with pytest.raises(S.CheckpointError, match="magic"):
        S.read_checkpoint(corrupt(0, "magic"))
    with pytest.raises(S.CheckpointError, match="magic"):
        S.read_checkpoint(corrupt(7, "magic7"))
    with pytest.raises(S.CheckpointError, match="version"):
        S.read_checkpoint(corrupt(8, "version"))
    with pytest.raises(S.CheckpointError, match="header_bytes"):
        S.read_checkpoint(corrupt(12, "hb"))
    short = str(tmp_path / "short")
    open(short, "wb").write(body[:-100])
    with pytest.raises(S.CheckpointError, match="bytes, expected"):
        S.read_checkpoint(short)
    with pytest.raises(S.CheckpointError, match="shorter"):
        open(short, "wb").write(body[:40])
        S.read_checkpoint(short)
    with pytest.raises(S.CheckpointError, match="expected L=4"):
        S.read_checkpoint(path, expect_cfg=S.Config.preset("small"))
    bad_n = str(tmp_path / "badn")
    tiny_writer(bad_n, *cfg.as_tuple(), seed=1, step=0, drs=0, params=[0.0] * 64,
                m=[0.0] * 64, v=[0.0] * 64)
    with pytest.raises(S.CheckpointError, match="n_params 64"):
        S.read_checkpoint(bad_n)
    bad_cfg = str(tmp_path / "badcfg")
    tiny_writer(bad_cfg, 2, 4, 128, 64, 256, seed=1, step=0, drs=0, params=[0.0] * 64,
                m=[0.0] * 64, v=[0.0] * 64)
    with pytest.raises(S.CheckpointError, match="head dim"):
        S.read_checkpoint(bad_cfg)
    with pytest.raises(S.CheckpointError, match="No such file"):
        S.read_checkpoint(str(tmp_path / "none"))


def test_grad_dump(tmp_path):
    n = 128
    g = np.arange(n, dtype=np.float32) * 0.5
    p = tmp_path / "g.bin"
    p.write_bytes(g.tobytes() + struct.pack("<f", 5.5))
    got, loss = S.read_grad_dump(str(p), n)
    assert np.array_equal(got, g) and loss == 5.5
    with pytest.raises(S.CheckpointError, match="expected"):
        S.read_grad_dump(str(p), n + 1)


# ---------------------------------------------------------------- progress lines, compare

def test_progress_line_round_trip():
    line = S.progress_line(12, 50, 3.123456, 6e-4, 1.234, 123.4, 132768, 0.412)
    assert line == ("step 12/50 | loss 3.123456 | lr 6.0e-04 | norm 1.234 | 123.4 ms | "
                    "132768 tok/s | MFU 41.2%")
    rec = S.parse_progress(line)
    assert rec == {"step": 12, "total": 50, "loss": 3.123456, "lr": 6e-4, "norm": 1.234,
                   "ms": 123.4, "tok_s": 132768.0, "mfu": 41.2}
    kv = S.parse_progress("step=3 loss=2.5 lr=1e-4 norm=0.5 ms=10.0 tok/s=5000 mfu=12")
    assert kv["step"] == 3 and kv["loss"] == 2.5 and kv["ms"] == 10.0 and kv["tok_s"] == 5000
    assert S.parse_progress("step 4/9 | loss nan | 1.0 ms")["loss"] != \
        S.parse_progress("step 4/9 | loss nan | 1.0 ms")["loss"]
    assert S.parse_progress("val 50/50 | val_loss 3.2") is None
    assert S.parse_progress("  step 7 | val_loss 3.2") is None  # no loss
    assert S.parse_progress("compiled 40 kernels; step 1") is None
    log = "\n".join(["gpt-train: 124m", S.progress_line(1, 3, 5.5, 1e-4, 2, 100, 1e5, 0.3),
                     "val 1/3 | val_loss 5.4", S.progress_line(2, 3, 5.0, 2e-4, 1, 90, 1e5, .3),
                     S.progress_line(3, 3, 4.5, 3e-4, 1, 80, 1e5, .3)])
    run = S.parse_log(log)
    assert run["steps"] == [1, 2, 3] and run["loss"] == [5.5, 5.0, 4.5]
    assert run["ms"] == [100.0, 90.0, 80.0]


def test_compare_losses(tmp_path):
    ref = {"steps": list(range(1, 51)), "loss": [5.0 - 0.05 * i for i in range(50)]}
    close = {"steps": ref["steps"], "loss": [x * 1.009 for x in ref["loss"]]}
    ok, rows, msg = S.compare_losses(close, ref)
    assert ok and len(rows) == 50 and "step" in msg
    far = dict(close, loss=list(close["loss"]))
    far["loss"][30] *= 1.02
    assert not S.compare_losses(far, ref)[0]
    nan = dict(close, loss=list(close["loss"]))
    nan["loss"][3] = float("nan")
    assert not S.compare_losses(nan, ref)[0]
    short = {"steps": ref["steps"][:20], "loss": ref["loss"][:20]}
    assert not S.compare_losses(short, ref)[0]
    assert S.compare_losses(short, ref, steps=20)[0]
    # through files: a JSON and a log, and the CLI's exit code
    import json
    pj = tmp_path / "ref.json"
    pj.write_text(json.dumps(ref))
    pl = tmp_path / "c.log"
    pl.write_text("\n".join(S.progress_line(s, 50, l, 1e-4, 1, 10, 1e5, 0.1)
                            for s, l in zip(close["steps"], close["loss"])))
    assert S.load_run(str(pl))["loss"][0] == pytest.approx(5.0 * 1.009, abs=1e-6)
    assert G.main(["compare", str(pl), str(pj)]) == 0
    pl.write_text("\n".join(S.progress_line(s, 50, l * 1.02, 1e-4, 1, 10, 1e5, 0.1)
                            for s, l in zip(ref["steps"], ref["loss"])))
    assert G.main(["compare", str(pl), str(pj)]) == 1


def test_summarize_and_median():
    cfg = S.Config.preset("124m")
    run = {"ms": [5000.0, 900.0] + [100.0] * 10 + [120.0]}
    s = S.summarize(run, 2, cfg, 16, 1024)
    assert s["ms"] == 100.0 and s["steps_timed"] == 11
    assert s["tok_s"] == pytest.approx(16 * 1024 / 0.1)
    assert s["mfu"] == pytest.approx(s["tok_s"] * S.flops_per_token(cfg, 1024) / 989e12)
    assert S.median([3, 1, 2, float("nan")]) == 2


def test_cli_data_and_init_check(tree, tmp_path, capsys):
    assert G.main(["data", "--data", str(tree), "--seq", "4", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "10 files, 23 bytes: train 20, val 3" in out and "step 1 offsets" in out
    cfg = S.Config.preset("tiny")
    flat = S.init_params(cfg, 99)
    n = flat.size
    p = str(tmp_path / "init.ck")
    S.write_checkpoint(p, cfg, 99, 0, S.data_state(99), flat, np.zeros(n), np.zeros(n))
    assert G.main(["init-check", p]) == 0
    assert G.main(["init-check", p, "--seed", "98"]) == 1
    assert G.main(["train", "--ckpt", str(tmp_path / "missing")]) == 2  # clear error, no torch


# ---------------------------------------------------------------- bench_gpt.py, plot.py

FAKE_TRAINER = r'''#!{python}
import math, sys
a = sys.argv[1:]
n = int(a[a.index("--steps") + 1])
assert a[a.index("--preset") + 1] == "tiny" and "--seed" in a
print("gpt-train: tiny, JIT compiling 30 kernels")
for s in range(1, n + 1):
    print(f"step {{s}}/{{n}} | loss {{5.5 * math.exp(-s / 30):.6f}} | lr 6.0e-04 | norm 1.2 | "
          f"{{10.0 + (90 if s == 1 else 0):.1f}} ms | {{4 * 64 / 0.01:.0f}} tok/s | MFU 1.0%")
    if s % 5 == 0:
        print(f"val {{s}}/{{n}} | val_loss 3.0")
sys.exit({rc})
'''


def fake_build(tmp_path, rc=0):
    d = tmp_path / f"build{rc}"
    d.mkdir()
    exe = d / "gpt-train"
    exe.write_text(FAKE_TRAINER.format(python=sys.executable, rc=rc))
    exe.chmod(0o755)
    return d


def test_bench_gpt_c_side(tmp_path, capsys):
    import json
    import bench_gpt
    out = tmp_path / "runs.json"
    rc = bench_gpt.main([str(fake_build(tmp_path)), "--only", "c", "--preset", "tiny",
                         "--batch", "4", "--steps", "12", "--warmup", "2",
                         "--json-out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "--preset tiny --batch 4 --seq 64 --steps 12 --seed 1337" in text
    assert "| TileKittens | 10.0 | 25600 |" in text
    run = json.loads(out.read_text())["runs"]["TileKittens"]
    assert run["steps"] == list(range(1, 13)) and run["ms"][0] == 100.0
    # a trainer that fails fails the bench
    assert bench_gpt.main([str(fake_build(tmp_path, rc=3)), "--only", "c", "--preset", "tiny",
                           "--batch", "4", "--steps", "3"]) == 1
    assert bench_gpt.main([str(tmp_path), "--only", "c", "--preset", "tiny"]) == 1  # no exe
    capsys.readouterr()


def test_plot_gpt(tmp_path):
    pytest.importorskip("matplotlib")
    import json
    import plot
    ref = {"label": "torch eager", "steps": [1, 2, 3, 4], "loss": [5.5, 5.0, 4.0, 3.5],
           "ms": [300.0, 30.0, 31.0, 30.0], "tok_s": [5e4, 5e5, 4.9e5, 5e5]}
    pj = tmp_path / "ref.json"
    pj.write_text(json.dumps(ref))
    log = tmp_path / "gpt-train.log"
    log.write_text("\n".join(S.progress_line(s, 4, l * 1.001, 1e-4, 1, 25, 6e5, 0.3)
                             for s, l in zip(ref["steps"], ref["loss"])))
    paths = plot.plot_gpt([str(pj), str(log)], str(tmp_path / "plots"))
    assert [os.path.basename(p) for p in paths] == ["gpt_loss.png", "gpt_tokens.png"]
    assert all(os.path.getsize(p) > 1000 for p in paths)
    assert plot.main(["--gpt", str(pj), "--out", str(tmp_path / "p2")]) == 0


def test_no_torch_imported():  # last: nothing above imported torch
    assert "torch" not in sys.modules
