/* The CPU interpreter's tk_narrow (ops/memory_interp.c narrow(), the views
 * table of ops/interp.c) against C references: run-time start and len, in
 * range and clamped (negative start, start past the size, len past the
 * end, negative and zero len, the integer extremes), loads reading `fill`
 * outside the narrowed view even where the parent has elements, stores
 * through a narrowed view leaving the rest of the tensor alone, tk_dim and
 * scalar loads of narrowed views, chains on one axis and on two, rank-1
 * vectors, and block copies (sync, cp.async, the copy engine: async in the
 * interpreter) from and to narrowed views. Inputs are random and fresh on
 * every run (the seed is printed; TK_TEST_SEED replays it). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "tk/tk.h"
#include "util/interp.h"

/* tk_narrow's clamp (include/tk/tk.h): start to [0, size], len to
 * [0, size - start]. */
typedef struct cut {
    int64_t s, n;
} cut;

static cut clamp_cut(int64_t size, int64_t start, int64_t len) {
    int64_t s = start < 0 ? 0 : start > size ? size : start;
    return (cut){s, len < 0 ? 0 : len > size - s ? size - s : len};
}

/* One (start, len) pair of kind `kind` for an axis of `size`, i64 pairs
 * reaching the i64 extremes. */
enum {
    IN_RANGE,
    START_NEG,
    START_PAST,
    LEN_PAST,
    LEN_NEG,
    LEN_ZERO,
    EXTREME_ALL,
    EXTREME_NONE,
    NKINDS
};

static void pick(rng *r, int kind, int64_t size, bool wide, int64_t *start, int64_t *len) {
    int64_t big = wide ? INT64_MAX : INT32_MAX, small = wide ? INT64_MIN : INT32_MIN;
    switch (kind) {
    case IN_RANGE:
        *start = irand(r, 1, (int)size / 2), *len = irand(r, 1, (int)(size - *start) - 1);
        break;
    case START_NEG: *start = -irand(r, 1, 40), *len = irand(r, 1, (int)size); break;
    case START_PAST: *start = size + irand(r, 0, 10), *len = irand(r, 1, (int)size); break;
    case LEN_PAST:
        *start = irand(r, 0, (int)size - 1), *len = size - *start + irand(r, 1, 30);
        break;
    case LEN_NEG: *start = irand(r, 0, (int)size - 1), *len = -irand(r, 1, 30); break;
    case LEN_ZERO: *start = irand(r, 0, (int)size - 1), *len = 0; break;
    case EXTREME_ALL: *start = small, *len = big; break;
    default: *start = big, *len = big; break; /* EXTREME_NONE: an empty view */
    }
}

static tk_arg sarg(bool wide, int64_t v) { return wide ? tk_arg_i64(v) : tk_arg_i32((int32_t)v); }

/* ---- rank 2: loads, stores, dims, scalar loads ------------------------------------ */
/* V = narrow(A, ax, s, l), W = narrow(P, ax, s2, l2) of same-shaped A and
 * P. One warp: O = the 64x64 tile of V at (-16, -16) with fill -3.5 (V's
 * elements, and fill where V ends, although A goes on); the tile of A at
 * (-16, -16) stored through W at (-16, -16) (P's rows or columns outside W
 * keep -99); D = 16-row bands of V's two dims, V(0, 0), V's last element on
 * the axis and V(-1, 0) (scalar loads, fill 7). */
static tk_kernel *rank2_kernel(int ax, tk_dtype sdt) {
    tk_kernel *k = kern("narrow2", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *P = tk_param_tensor(k, "P", TK_F32, 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *D = tk_param_tensor(k, "D", TK_F32, 2);
    tk_value *s = tk_param_scalar(k, "s", sdt), *l = tk_param_scalar(k, "l", sdt);
    tk_value *s2 = tk_param_scalar(k, "s2", sdt), *l2 = tk_param_scalar(k, "l2", sdt);
    tk_value *V = tk_narrow(k, A, ax, s, l), *W = tk_narrow(k, P, ax, s2, l2);
    tk_value *m16 = c32(k, -16), *z = c32(k, 0);
    tk_type big = wtile(TK_F32, 64, 64), band = wtile(TK_F32, 16, 16);
    st2(k, O, z, z, ld2(k, big, V, m16, m16, -3.5f));
    st2(k, W, m16, m16, ld2(k, big, A, m16, m16, 0.25f));
    tk_value *out[5];
    out[0] = tk_cvt(k, tk_dim(k, V, 0), TK_F32);
    out[1] = tk_cvt(k, tk_dim(k, V, 1), TK_F32);
    tk_value *at0[2] = {z, z}, *atm[2] = {z, z}, *atl[2] = {z, z};
    atl[ax] = tk_sub(k, tk_dim(k, V, ax), tk_const_i64(k, 1));
    atm[ax] = c32(k, -1);
    out[2] = tk_load(k, tk_scalar_type(TK_F32), V, at0, 7.0f);
    out[3] = tk_load(k, tk_scalar_type(TK_F32), V, atl, 7.0f);
    out[4] = tk_load(k, tk_scalar_type(TK_F32), V, atm, 7.0f);
    for (int i = 0; i < 5; i++) st2(k, D, c32(k, 16 * i), z, tk_fill(k, band, out[i]));
    finish(k);
    return k;
}

static void check_rank2(int ax, bool wide, rng *r) {
    tk_kernel *k = rank2_kernel(ax, wide ? TK_I64 : TK_I32);
    for (int kind = 0; kind < NKINDS; kind++) {
        int64_t dims[2] = {irand(r, 20, 48), irand(r, 20, 48)}, size = dims[ax];
        size_t n = (size_t)(dims[0] * dims[1]);
        hbuf hA = hb(TK_F32, n), hP = hb(TK_F32, n), hO = hb(TK_F32, 64 * 64),
             hD = hb(TK_F32, 80 * 16);
        hrand(&hA, r, -9, 9), hfill(&hP, -99), hfill(&hO, NAN), hfill(&hD, NAN);
        int64_t s, l, s2, l2;
        pick(r, kind, size, wide, &s, &l);
        pick(r, (kind + 3) % NKINDS, size, wide, &s2, &l2);
        tk_arg args[8] = {targ(&hA, 2, dims[0], dims[1], 0, 0),
                          targ(&hP, 2, dims[0], dims[1], 0, 0),
                          targ(&hO, 2, 64, 64, 0, 0),
                          targ(&hD, 2, 80, 16, 0, 0),
                          sarg(wide, s),
                          sarg(wide, l),
                          sarg(wide, s2),
                          sarg(wide, l2)};
        run_ok(k, 8, args);
        cut c = clamp_cut(size, s, l), c2 = clamp_cut(size, s2, l2);
        int64_t vd[2] = {dims[0], dims[1]}, org[2] = {0, 0};
        vd[ax] = c.n, org[ax] = c.s;
        ck_assert_msg(c.n >= 0 && c.s + c.n <= size, "bad reference cut");
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 64; j++) {
                int64_t vi = i - 16, vj = j - 16;
                bool in = vi >= 0 && vi < vd[0] && vj >= 0 && vj < vd[1];
                float want =
                    in ? hget(&hA, (size_t)((vi + org[0]) * dims[1] + vj + org[1])) : -3.5f;
                ck_assert_msg(same(hget(&hO, (size_t)(i * 64 + j)), want),
                              "kind %d axis %d s %lld l %lld: O[%d][%d] = %g, want %g (seed %llu)",
                              kind, ax, (long long)s, (long long)l, i, j,
                              (double)hget(&hO, (size_t)(i * 64 + j)), (double)want,
                              (unsigned long long)seed);
            }
        for (int64_t i = 0; i < dims[0]; i++)
            for (int64_t j = 0; j < dims[1]; j++) {
                int64_t w[2] = {i, j};
                bool in = w[ax] >= c2.s && w[ax] < c2.s + c2.n;
                w[ax] -= c2.s; /* W's coordinates: W(w) is A-tile (w + 16) = A(w) */
                float want = in ? hget(&hA, (size_t)(w[0] * dims[1] + w[1])) : -99.0f;
                ck_assert_msg(same(hget(&hP, (size_t)(i * dims[1] + j)), want),
                              "kind %d axis %d s2 %lld l2 %lld: P[%lld][%lld] = %g, want %g "
                              "(seed %llu)",
                              kind, ax, (long long)s2, (long long)l2, (long long)i, (long long)j,
                              (double)hget(&hP, (size_t)(i * dims[1] + j)), (double)want,
                              (unsigned long long)seed);
            }
        bool nonempty = vd[0] > 0 && vd[1] > 0;
        int64_t last[2] = {org[0], org[1]};
        last[ax] += c.n - 1;
        float wantd[5] = {(float)vd[0], (float)vd[1],
                          nonempty ? hget(&hA, (size_t)(org[0] * dims[1] + org[1])) : 7.0f,
                          nonempty ? hget(&hA, (size_t)(last[0] * dims[1] + last[1])) : 7.0f, 7.0f};
        for (int i = 0; i < 5; i++)
            for (int e = 0; e < 256; e++)
                EXPECT_F("dims and scalar loads", i * 256 + e, hget(&hD, (size_t)(i * 256 + e)),
                         wantd[i]);
        hfree(&hA), hfree(&hP), hfree(&hO), hfree(&hD);
    }
    tk_kernel_destroy(k);
}

START_TEST(narrow_rank2) {
    rng r = rng_for(__func__);
    for (int ax = 0; ax < 2; ax++)
        for (int wide = 0; wide < 2; wide++) check_rank2(ax, wide, &r);
}
END_TEST

/* ---- chains on a rank-3 tensor ------------------------------------------------------ */
/* V = A narrowed by each (axes[i], s_i, l_i) in turn. Block b (of dim 0 + 2)
 * stores V's 64x64 tile at (b - 1, -16, -16) (fill 5: the leading index -1
 * and those past V's dim 0 read all fill) into O[b], and V's dims into
 * D[b] (16x16 bands). */
static tk_kernel *chain_kernel(const int *axes, int n) {
    tk_kernel *k = kern("narrow_chain", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *D = tk_param_tensor(k, "D", TK_F32, 3), *V = A;
    for (int i = 0; i < n; i++) {
        char sn[8] = {'s', (char)('0' + i), 0}, ln[8] = {'l', (char)('0' + i), 0};
        tk_value *s = tk_param_scalar(k, sn, TK_I32), *l = tk_param_scalar(k, ln, TK_I32);
        V = tk_narrow(k, V, axes[i], s, l);
    }
    tk_set_grid(k, tk_add(k, tk_dim(k, A, 0), tk_const_i64(k, 2)), NULL, NULL);
    tk_value *b = tk_block_id(k, 0), *z = c32(k, 0), *m16 = c32(k, -16);
    tk_value *vi[3] = {tk_sub(k, b, c32(k, 1)), m16, m16}, *oi[3] = {b, z, z};
    tk_store(k, O, oi, tk_load(k, wtile(TK_F32, 64, 64), V, vi, 5.0f));
    for (int d = 0; d < 3; d++) {
        tk_value *di[3] = {b, z, c32(k, 16 * d)};
        tk_store(k, D, di, tk_fill(k, wtile(TK_F32, 16, 16), tk_cvt(k, tk_dim(k, V, d), TK_F32)));
    }
    finish(k);
    return k;
}

static void check_chain(const int *axes, int n, rng *r) {
    tk_kernel *k = chain_kernel(axes, n);
    for (int rep = 0; rep < 2 * NKINDS; rep++) {
        int64_t dims[3] = {irand(r, 1, 5), irand(r, 20, 48), irand(r, 20, 48)};
        int64_t nb = dims[0] + 2;
        hbuf hA = hb(TK_F32, (size_t)(dims[0] * dims[1] * dims[2]));
        hbuf hO = hb(TK_F32, (size_t)nb * 4096), hD = hb(TK_F32, (size_t)nb * 16 * 48);
        hrand(&hA, r, -9, 9), hfill(&hO, NAN), hfill(&hD, NAN);
        tk_arg args[3 + 2 * 3] = {targ(&hA, 3, dims[0], dims[1], dims[2], 0),
                                  targ(&hO, 3, nb, 64, 64, 0), targ(&hD, 3, nb, 16, 48, 0)};
        int64_t org[3] = {0, 0, 0}, vd[3] = {dims[0], dims[1], dims[2]};
        for (int i = 0; i < n; i++) { /* each narrow clamps to what the previous left */
            int64_t s, l;
            if (axes[i] == 0) /* the leading axis is short: any bounds around it */
                s = irand(r, -2, (int)dims[0]), l = irand(r, -1, (int)dims[0] + 1);
            else
                pick(r, (rep + 2 * i) % NKINDS, dims[axes[i]], false, &s, &l);
            cut c = clamp_cut(vd[axes[i]], s, l);
            org[axes[i]] += c.s, vd[axes[i]] = c.n;
            args[3 + 2 * i] = tk_arg_i32((int32_t)s), args[4 + 2 * i] = tk_arg_i32((int32_t)l);
        }
        run_ok(k, 3 + 2 * n, args);
        for (int64_t b = 0; b < nb; b++) {
            int64_t lead = b - 1;
            for (int i = 0; i < 64; i++)
                for (int j = 0; j < 64; j++) {
                    int64_t x[3] = {lead, i - 16, j - 16};
                    bool in = true;
                    for (int d = 0; d < 3; d++) in = in && x[d] >= 0 && x[d] < vd[d];
                    size_t at =
                        in ? (size_t)(((x[0] + org[0]) * dims[1] + x[1] + org[1]) * dims[2] + x[2] +
                                      org[2])
                           : 0;
                    size_t o = (size_t)b * 4096 + (size_t)(i * 64 + j);
                    EXPECT_F("chained narrow", o, hget(&hO, o), in ? hget(&hA, at) : 5.0f);
                }
            for (int d = 0; d < 3; d++)
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 16; j++) {
                        size_t o = (size_t)b * 768 + (size_t)(i * 48 + 16 * d + j);
                        EXPECT_F("chained dims", o, hget(&hD, o), (float)vd[d]);
                    }
        }
        hfree(&hA), hfree(&hO), hfree(&hD);
    }
    tk_kernel_destroy(k);
}

START_TEST(narrow_chains) {
    rng r = rng_for(__func__);
    static const int same_axis[2] = {1, 1}, two_axes[2] = {0, 2}, three[3] = {2, 1, 2};
    check_chain(same_axis, 2, &r);
    check_chain(two_axes, 2, &r);
    check_chain(three, 3, &r);
}
END_TEST

/* ---- rank 1: vectors --------------------------------------------------------------- */
/* A 64-vector of narrow(X, 0, s, l) at -8 (fill 2.5) into OV, and stored
 * at -8 through narrow(Y, 0, s2, l2): Y keeps -99 outside that view. */
START_TEST(narrow_vectors) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("narrow_vec", 1);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 1), *Y = tk_param_tensor(k, "Y", TK_F32, 1);
    tk_value *OV = tk_param_tensor(k, "OV", TK_F32, 1);
    tk_value *s = tk_param_scalar(k, "s", TK_I64), *l = tk_param_scalar(k, "l", TK_I64);
    tk_value *s2 = tk_param_scalar(k, "s2", TK_I64), *l2 = tk_param_scalar(k, "l2", TK_I64);
    tk_value *at[1] = {c32(k, -8)}, *z[1] = {c32(k, 0)};
    tk_value *v = tk_load(k, cvec(TK_F32, 64), tk_narrow(k, X, 0, s, l), at, 2.5f);
    tk_store(k, OV, z, v);
    tk_store(k, tk_narrow(k, Y, 0, s2, l2), at, v);
    finish(k);
    for (int kind = 0; kind < NKINDS; kind++) {
        int64_t n = irand(&r, 20, 60), a, b, a2, b2;
        pick(&r, kind, n, true, &a, &b);
        pick(&r, (kind + 5) % NKINDS, n, true, &a2, &b2);
        hbuf hX = hb(TK_F32, (size_t)n), hY = hb(TK_F32, (size_t)n), hO = hb(TK_F32, 64);
        hrand(&hX, &r, -9, 9), hfill(&hY, -99), hfill(&hO, NAN);
        tk_arg args[7] = {targ(&hX, 1, n, 0, 0, 0),
                          targ(&hY, 1, n, 0, 0, 0),
                          targ(&hO, 1, 64, 0, 0, 0),
                          tk_arg_i64(a),
                          tk_arg_i64(b),
                          tk_arg_i64(a2),
                          tk_arg_i64(b2)};
        run_ok(k, 7, args);
        cut c = clamp_cut(n, a, b), c2 = clamp_cut(n, a2, b2);
        float vec[64];
        for (int i = 0; i < 64; i++) {
            int64_t x = i - 8;
            vec[i] = x >= 0 && x < c.n ? hget(&hX, (size_t)(c.s + x)) : 2.5f;
            EXPECT_F("narrowed vector load", i, hget(&hO, (size_t)i), vec[i]);
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t w = i - c2.s; /* Y(i) is W(w), which holds vec[w + 8] */
            bool in = w >= 0 && w < c2.n && w + 8 < 64;
            EXPECT_F("narrowed vector store", i, hget(&hY, (size_t)i), in ? vec[w + 8] : -99.0f);
        }
        hfree(&hX), hfree(&hY), hfree(&hO);
    }
    tk_kernel_destroy(k);
}
END_TEST

/* ---- packed sequences: narrows in a loop and under a warp's if -------------------------- */
/* Sequence b of X's rows is [OFF[b], OFF[b + 1]) (scalar loads; the table
 * may be corrupt: offsets past X, decreasing, negative). Trip b of a loop
 * narrows X to it (the view of each trip replaces the last's); each warp
 * stores its 16 rows of the sequence's first 32 (fill -1) into O[b]; warp 1
 * alone also narrows that view to its rows [8, 12) and stores them (fill
 * -2) into P[b]. */
START_TEST(narrow_packed_sequences) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("narrow_packed", 2);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *OFF = tk_param_tensor(k, "OFF", TK_I32, 1);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 3), *P = tk_param_tensor(k, "P", TK_F32, 3);
    tk_value *nseq = tk_sub(k, tk_dim(k, OFF, 0), tk_const_i64(k, 1));
    tk_value *b = tk_for_begin(k, tk_const_i64(k, 0), nseq, tk_const_i64(k, 1), 0, NULL, NULL);
    tk_value *i0[1] = {b}, *i1[1] = {tk_add(k, b, tk_const_i64(k, 1))};
    tk_value *s = tk_load(k, tk_scalar_type(TK_I32), OFF, i0, 0.0f);
    tk_value *e = tk_load(k, tk_scalar_type(TK_I32), OFF, i1, 0.0f);
    tk_value *V = tk_narrow(k, X, 0, s, tk_sub(k, e, s)), *z = c32(k, 0);
    tk_value *w = tk_warp_id(k), *wr = tk_mul(k, w, c32(k, 16));
    tk_value *oi[3] = {b, wr, z};
    tk_store(k, O, oi, ld2(k, wtile(TK_F32, 16, 32), V, wr, z, -1.0f));
    tk_if_begin(k, tk_eq(k, w, c32(k, 1)));
    tk_value *U = tk_narrow(k, V, 0, c32(k, 8), c32(k, 4)), *pi[3] = {b, z, z};
    tk_store(k, P, pi, ld2(k, wtile(TK_F32, 16, 32), U, z, z, -2.0f));
    tk_if_end(k, 0, NULL, NULL);
    tk_for_end(k, 0, NULL, NULL);
    finish(k);
    for (int rep = 0; rep < 8; rep++) {
        int ns = irand(&r, 1, 7);
        int32_t off[8] = {0};
        for (int i = 0; i < ns; i++) off[i + 1] = off[i] + irand(&r, 0, 40);
        int64_t nx = off[ns] + irand(&r, 0, 8);
        if (rep % 2) /* a corrupt table: one offset anywhere from before X to past it */
            off[irand(&r, 0, ns)] = irand(&r, -20, (int)nx + 20);
        hbuf hX = hb(TK_F32, (size_t)nx * 32 + 1), hO = hb(TK_F32, (size_t)ns * 1024),
             hP = hb(TK_F32, (size_t)ns * 512);
        hrand(&hX, &r, -9, 9), hfill(&hO, NAN), hfill(&hP, NAN);
        int64_t od[1] = {ns + 1};
        tk_arg args[4] = {targ(&hX, 2, nx, 32, 0, 0), tk_arg_tensor(off, TK_I32, 1, od),
                          targ(&hO, 3, ns, 32, 32, 0), targ(&hP, 3, ns, 16, 32, 0)};
        run_ok(k, 4, args);
        for (int q = 0; q < ns; q++) {
            cut c = clamp_cut(nx, off[q], (int64_t)off[q + 1] - off[q]), u = clamp_cut(c.n, 8, 4);
            for (int i = 0; i < 32; i++)
                for (int j = 0; j < 32; j++) {
                    size_t o = (size_t)q * 1024 + (size_t)(i * 32 + j);
                    float want = i < c.n ? hget(&hX, (size_t)((c.s + i) * 32 + j)) : -1.0f;
                    EXPECT_F("sequence rows", o, hget(&hO, o), want);
                    if (i >= 16) continue;
                    o = (size_t)q * 512 + (size_t)(i * 32 + j);
                    want = i < u.n ? hget(&hX, (size_t)((c.s + u.s + i) * 32 + j)) : -2.0f;
                    EXPECT_F("warp 1's narrower rows", o, hget(&hP, o), want);
                }
        }
        hfree(&hX), hfree(&hO), hfree(&hP);
    }
    tk_kernel_destroy(k);
}
END_TEST

/* ---- block copies ------------------------------------------------------------------- */
/* Two warps: the 64x64 tile of narrow(A, ax, s, l) at run-time (r0, c0)
 * into shared memory with `mode` (sync: fill 1.5; cp.async and the engine:
 * 0), each warp's 32 rows of it on to O, then the shared tile through
 * narrow(P, ax, s2, l2) at (r0, c0): P keeps -99 outside that view. */
static tk_kernel *copy_kernel(tk_dtype dt, int ax, int mode) {
    tk_kernel *k = kern("narrow_copy", 2);
    tk_value *sm = tk_shared(k, dt, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *P = tk_param_tensor(k, "P", dt, 2);
    tk_value *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *s = tk_param_scalar(k, "s", TK_I32), *l = tk_param_scalar(k, "l", TK_I32);
    tk_value *s2 = tk_param_scalar(k, "s2", TK_I32), *l2 = tk_param_scalar(k, "l2", TK_I32);
    tk_value *r0 = tk_param_scalar(k, "r0", TK_I32), *c0 = tk_param_scalar(k, "c0", TK_I32);
    tk_value *g[2] = {r0, c0};
    tk_copy_to_shared(k, sm, tk_narrow(k, A, ax, s, l), g, mode ? 0.0f : 1.5f, mode);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *wr = tk_mul(k, tk_warp_id(k), c32(k, 32)), *z = c32(k, 0);
    st2(k, O, wr, z, ld2(k, wtile(dt, 32, 64), sm, wr, z, 0));
    tk_copy_to_global(k, tk_narrow(k, P, ax, s2, l2), g, sm);
    finish(k);
    return k;
}

static void check_copy(tk_dtype dt, int ax, int mode, rng *r) {
    tk_kernel *k = copy_kernel(dt, ax, mode);
    for (int kind = 0; kind < NKINDS - 2; kind++) { /* i32 scalars: no i64 extremes */
        int64_t dims[2] = {irand(r, 20, 90), irand(r, 20, 90)}, size = dims[ax];
        int64_t s, l, s2, l2, r0 = irand(r, -20, 30), c0 = irand(r, -20, 30);
        pick(r, kind, size, false, &s, &l);
        pick(r, (kind + 1) % (NKINDS - 2), size, false, &s2, &l2);
        size_t n = (size_t)(dims[0] * dims[1]);
        hbuf hA = hb(dt, n), hP = hb(dt, n), hO = hb(dt, 64 * 64);
        hrand(&hA, r, -9, 9), hfill(&hP, -99), hfill(&hO, NAN);
        tk_arg args[9] = {targ(&hA, 2, dims[0], dims[1], 0, 0),
                          targ(&hP, 2, dims[0], dims[1], 0, 0),
                          targ(&hO, 2, 64, 64, 0, 0),
                          tk_arg_i32((int32_t)s),
                          tk_arg_i32((int32_t)l),
                          tk_arg_i32((int32_t)s2),
                          tk_arg_i32((int32_t)l2),
                          tk_arg_i32((int32_t)r0),
                          tk_arg_i32((int32_t)c0)};
        run_ok(k, 9, args);
        cut c = clamp_cut(size, s, l), c2 = clamp_cut(size, s2, l2);
        int64_t vd[2] = {dims[0], dims[1]}, org[2] = {0, 0};
        vd[ax] = c.n, org[ax] = c.s;
        float fill = rnd(dt, mode ? 0.0f : 1.5f), *tile = malloc(64 * 64 * sizeof *tile);
        ck_assert_ptr_nonnull(tile);
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 64; j++) {
                int64_t vi = r0 + i, vj = c0 + j;
                bool in = vi >= 0 && vi < vd[0] && vj >= 0 && vj < vd[1];
                tile[i * 64 + j] =
                    in ? hget(&hA, (size_t)((vi + org[0]) * dims[1] + vj + org[1])) : fill;
                EXPECT_F("copy from a narrowed view", i * 64 + j, hget(&hO, (size_t)(i * 64 + j)),
                         tile[i * 64 + j]);
            }
        for (int64_t i = 0; i < dims[0]; i++)
            for (int64_t j = 0; j < dims[1]; j++) {
                int64_t w[2] = {i, j};
                bool in = w[ax] >= c2.s && w[ax] < c2.s + c2.n;
                w[ax] -= c2.s;
                int64_t ti = w[0] - r0, tj = w[1] - c0; /* W(w) holds tile(w - (r0, c0)) */
                in = in && ti >= 0 && ti < 64 && tj >= 0 && tj < 64;
                EXPECT_F("copy to a narrowed view", i * dims[1] + j,
                         hget(&hP, (size_t)(i * dims[1] + j)),
                         in ? tile[ti * 64 + tj] : rnd(dt, -99.0f));
            }
        free(tile);
        hfree(&hA), hfree(&hP), hfree(&hO);
    }
    tk_kernel_destroy(k);
}

START_TEST(narrow_copies) {
    rng r = rng_for(__func__);
    for (int mode = TK_COPY_SYNC; mode <= TK_COPY_TMA; mode++)
        for (int ax = 0; ax < 2; ax++) {
            check_copy(TK_F32, ax, mode, &r);
            check_copy(TK_BF16, ax, mode, &r);
        }
}
END_TEST

/* ---- main ----------------------------------------------------------------------------- */
int main(void) {
    const interp_test tests[] = {{"rank2", narrow_rank2},
                                 {"chains", narrow_chains},
                                 {"vectors", narrow_vectors},
                                 {"packed", narrow_packed_sequences},
                                 {"copies", narrow_copies}};
    return interp_run("test_interp_narrow", "interp_narrow", tests, sizeof tests / sizeof tests[0]);
}
