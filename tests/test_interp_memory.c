/* The CPU interpreter against naive C references: memory (ragged edges,
 * views, shared tiles, the async pipeline), control flow, ids and the grid,
 * and run-time errors. (Elementwise, reductions, mma: test_interp.c.)
 * Inputs are random and fresh on every run: the seed comes from the time
 * (or TK_TEST_SEED) and is printed so a failure can be replayed. Kernels are
 * built through the public builder API only (helpers: util/interp.h). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "tk/tk.h"
#include "util/interp.h"

/* ---- memory -------------------------------------------------------------- */
/* A 37x45 tensor in 16x16 tiles over a 3x3 grid computed from its dims:
 * loads read `fill` past the edges, stores skip them (Q is a strided view
 * inside a larger buffer whose guard must stay intact). */
static void check_ragged(tk_dtype dt, rng *r) {
    tk_kernel *k = kern("ragged", 1);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *P = tk_param_tensor(k, "P", dt, 2);
    tk_value *Q = tk_param_tensor(k, "Q", dt, 2), *s16 = tk_const_i64(k, 16);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, A, 1), s16), tk_ceil_div(k, tk_dim(k, A, 0), s16),
                NULL);
    tk_value *r0 = tk_mul(k, tk_block_id(k, 1), c32(k, 16));
    tk_value *c0 = tk_mul(k, tk_block_id(k, 0), c32(k, 16));
    tk_value *t = ld2(k, wtile(dt, 16, 16), A, r0, c0, 7.25f);
    st2(k, P, r0, c0, t);
    st2(k, Q, r0, c0, t);
    finish(k);
    hbuf hA = hb(dt, 37 * 45), hP = hb(dt, 48 * 48), hQ = hb(dt, 40 * 50);
    hrand(&hA, r, -9, 9);
    hfill(&hQ, -99);
    int64_t qd[2] = {37, 45}, qs[2] = {50, 1};
    tk_arg args[3] = {targ(&hA, 2, 37, 45, 0, 0), targ(&hP, 2, 48, 48, 0, 0),
                      tk_arg_strided(hQ.p, dt, 2, qd, qs)};
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 3, args, grid), TK_OK);
    ck_assert(grid[0] == 3 && grid[1] == 3 && grid[2] == 1);
    run_ok(k, 3, args);
    for (int i = 0; i < 48; i++)
        for (int j = 0; j < 48; j++) {
            bool in = i < 37 && j < 45;
            EXPECT_F("ragged load", i * 48 + j, hget(&hP, (size_t)i * 48 + j),
                     in ? hget(&hA, (size_t)i * 45 + j) : rnd(dt, 7.25f));
            if (i < 40 && j < 50)
                EXPECT_F("ragged store", i * 50 + j, hget(&hQ, (size_t)i * 50 + j),
                         in ? hget(&hA, (size_t)i * 45 + j) : -99.0f);
        }
    hfree(&hA), hfree(&hP), hfree(&hQ);
    tk_kernel_destroy(k);
}

START_TEST(memory_ragged) {
    rng r = rng_for(__func__);
    check_ragged(TK_F32, &r);
    check_ragged(TK_BF16, &r);
    check_ragged(TK_F16, &r);
}
END_TEST

/* Rank-4 views with leading indices (one out of range), a transposed view
 * through strides, ragged vector loads/stores with a negative start. */
START_TEST(memory_views) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("views", 1);
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 4), *AT = tk_param_tensor(k, "AT", TK_F32, 2);
    tk_value *V = tk_param_tensor(k, "V", TK_F32, 1), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *OV = tk_param_tensor(k, "OV", TK_F32, 1);
    tk_type tt = wtile(TK_F32, 16, 16);
    tk_value *i1[4] = {c32(k, 1), c32(k, 2), c32(k, 8), c32(k, 16)};
    tk_value *i2[4] = {c32(k, 2), c32(k, 0), c32(k, 0), c32(k, 0)};
    tk_value *t0 = tk_load(k, tt, T, i1, -1.5f), *t1 = tk_load(k, tt, T, i2, -1.5f);
    tk_value *t2 = ld2(k, tt, AT, c32(k, 4), c32(k, 8), -1.5f);
    tk_value *o[3][3], *ts[3] = {t0, t1, t2};
    for (int i = 0; i < 3; i++) {
        o[i][0] = c32(k, i), o[i][1] = o[i][2] = c32(k, 0);
        tk_store(k, O, o[i], ts[i]);
    }
    tk_value *vi[1] = {c32(k, 32)}, *vn[1] = {c32(k, -8)};
    tk_value *v = tk_load(k, cvec(TK_F32, 16), V, vi, 2.5f);
    tk_store(k, OV, vi, v);
    tk_store(k, OV, vn, v);
    finish(k);
    hbuf hT = hb(TK_F32, 2 * 3 * 20 * 24), hH = hb(TK_F32, 20 * 24), hV = hb(TK_F32, 37);
    hbuf hO = hb(TK_F32, 3 * 256), hOV = hb(TK_F32, 37);
    hrand(&hT, &r, -1, 1), hrand(&hH, &r, -1, 1), hrand(&hV, &r, -1, 1), hfill(&hOV, -99);
    int64_t atd[2] = {24, 20}, ats[2] = {1, 24}; /* AT[i][j] = H[j][i] */
    tk_arg args[5] = {targ(&hT, 4, 2, 3, 20, 24), tk_arg_strided(hH.p, TK_F32, 2, atd, ats),
                      targ(&hV, 1, 37, 0, 0, 0), targ(&hO, 3, 3, 16, 16, 0),
                      targ(&hOV, 1, 37, 0, 0, 0)};
    run_ok(k, 5, args);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            int R = 8 + i, C = 16 + j;
            float w0 =
                R < 20 && C < 24 ? hget(&hT, ((size_t)(1 * 3 + 2) * 20 + R) * 24 + C) : -1.5f;
            float w2 = 8 + j < 20 ? hget(&hH, (size_t)(8 + j) * 24 + 4 + i) : -1.5f;
            EXPECT_F("rank-4 load", i * 16 + j, hget(&hO, (size_t)i * 16 + j), w0);
            EXPECT_F("out-of-range leading index", i * 16 + j, hget(&hO, 256 + (size_t)i * 16 + j),
                     -1.5f);
            EXPECT_F("strided load", i * 16 + j, hget(&hO, 512 + (size_t)i * 16 + j), w2);
        }
    for (int i = 0; i < 37; i++) {
        float want = i >= 32 ? hget(&hV, (size_t)i) : i < 8 ? 2.5f : -99.0f; /* v[8..15] = fill */
        EXPECT_F("vector store", i, hget(&hOV, (size_t)i), want);
    }
    hfree(&hT), hfree(&hH), hfree(&hV), hfree(&hO), hfree(&hOV);
    tk_kernel_destroy(k);
}
END_TEST

/* Scalar loads: exact i32 / i64 values, f32, indices before and past every
 * dim reading the fill, a loaded value as the next load's index. */
START_TEST(memory_scalar_load) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("scalars", 1);
    tk_value *T = tk_param_tensor(k, "T", TK_I32, 2), *L = tk_param_tensor(k, "L", TK_I64, 1);
    tk_value *F = tk_param_tensor(k, "F", TK_F32, 1), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *at[4][2] = {{c32(k, 1), c32(k, 2)},
                          {c32(k, 2), c32(k, 0)},   /* row past dim 0: fill */
                          {c32(k, 0), c32(k, -1)},  /* negative column: fill */
                          {c32(k, -1), c32(k, 0)}}; /* negative row: fill */
    tk_value *out[8];
    for (int i = 0; i < 4; i++)
        out[i] = tk_cvt(k, tk_load(k, tk_scalar_type(TK_I32), T, at[i], -5.0f), TK_F32);
    tk_value *li[1] = {c32(k, 0)};
    tk_value *big = tk_load(k, tk_scalar_type(TK_I64), L, li, 0.0f);
    out[4] = tk_cvt(k, tk_sub(k, big, tk_const_i64(k, (int64_t)1 << 40)), TK_F32); /* exact */
    tk_value *fi[1] = {tk_load(k, tk_scalar_type(TK_I32), T, at[0], 0.0f)};        /* T[1][2] = 3 */
    out[5] = tk_load(k, tk_scalar_type(TK_F32), F, fi, 0.0f);
    tk_value *fo[1] = {c32(k, 9)};
    out[6] = tk_load(k, tk_scalar_type(TK_F32), F, fo, 0.5f);
    out[7] = tk_cvt(k, tk_load(k, tk_scalar_type(TK_I32), T, at[0], 0.0f), TK_F32);
    tk_type row = wtile(TK_F32, 16, 16);
    for (int i = 0; i < 8; i++) {
        tk_value *oi[2] = {c32(k, 16 * i), c32(k, 0)};
        tk_store(k, O, oi, tk_fill(k, row, out[i]));
    }
    finish(k);
    int32_t t[6] = {7, 2147483647, -4, 11, -2147483647 - 1, 3};
    int64_t l[1] = {((int64_t)1 << 40) + 12345};
    hbuf hF = hb(TK_F32, 4), hO = hb(TK_F32, 128 * 16);
    hrand(&hF, &r, -1, 1);
    int64_t td[2] = {2, 3}, ld[1] = {1}, fd[1] = {4}, od[2] = {128, 16};
    tk_arg args[4] = {tk_arg_tensor(t, TK_I32, 2, td), tk_arg_tensor(l, TK_I64, 1, ld),
                      tk_arg_tensor(hF.p, TK_F32, 1, fd), tk_arg_tensor(hO.p, TK_F32, 2, od)};
    run_ok(k, 4, args);
    float want[8] = {3.0f, -5.0f, -5.0f, -5.0f, 12345.0f, hget(&hF, 3), 0.5f, 3.0f};
    for (int i = 0; i < 8; i++)
        EXPECT_F("scalar load", i, hget(&hO, (size_t)i * 256 + 17), want[i]);
    hfree(&hF), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* Sync g2s with fill, s2r by two warps, r2s, s2g with ragged edges. */
static void check_shared(tk_dtype dt, rng *r) {
    tk_kernel *k = kern("shared", 2);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *P = tk_param_tensor(k, "P", dt, 2);
    tk_value *sm = tk_shared(k, dt, 32, 32, TK_SMEM_SWIZZLE, 1);
    tk_value *gi[2] = {c32(k, 16), c32(k, 32)};
    tk_copy_to_shared(k, sm, A, gi, 3.0f, 0);
    tk_barrier(k);
    tk_value *r0 = tk_mul(k, tk_warp_id(k), c32(k, 16)), *z = c32(k, 0);
    tk_value *t = ld2(k, wtile(dt, 16, 16), sm, r0, c32(k, 16), 0);
    st2(k, P, r0, z, t);
    tk_barrier(k);
    st2(k, sm, r0, z, tk_mul(k, t, tk_const_f32(k, 2.0f)));
    tk_barrier(k);
    tk_copy_to_global(k, O, gi, sm);
    finish(k);
    hbuf hA = hb(dt, 37 * 45), hO = hb(dt, 37 * 45), hP = hb(dt, 32 * 16);
    hrand(&hA, r, -9, 9), hfill(&hO, -99);
    tk_arg args[3] = {targ(&hA, 2, 37, 45, 0, 0), targ(&hO, 2, 37, 45, 0, 0),
                      targ(&hP, 2, 32, 16, 0, 0)};
    run_ok(k, 3, args);
    float s0[32][32];
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 32; j++)
            s0[i][j] = 16 + i < 37 && 32 + j < 45 ? hget(&hA, (size_t)(16 + i) * 45 + 32 + j)
                                                  : rnd(dt, 3.0f);
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++)
            EXPECT_F("s2r", i * 16 + j, hget(&hP, (size_t)i * 16 + j), s0[i][16 + j]);
    for (int i = 0; i < 37; i++)
        for (int j = 0; j < 45; j++) {
            int si = i - 16, sj = j - 32;
            float want = si < 0 || sj < 0 ? -99.0f
                         : sj < 16        ? rnd(dt, 2 * s0[si][16 + sj])
                                          : s0[si][sj];
            EXPECT_F("s2g", i * 45 + j, hget(&hO, (size_t)i * 45 + j), want);
        }
    hfree(&hA), hfree(&hO), hfree(&hP);
    tk_kernel_destroy(k);
}

START_TEST(memory_shared) {
    rng r = rng_for(__func__);
    check_shared(TK_F32, &r);
    check_shared(TK_BF16, &r);
}
END_TEST

/* Async copies land only when their group is waited for: reads before the
 * wait see the old contents; an uncommitted copy is not waited for; empty
 * groups count. Those reads are what the race checker forbids, so it is
 * off for the values and on for the verdict. */
START_TEST(memory_async_stale) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("async", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *X = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *Y = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *z = c32(k, 0), *a0[2] = {z, z}, *a1[2] = {c32(k, 16), z}, *t[6];
    tk_type tt = wtile(TK_F32, 16, 16);
    st2(k, X, z, z, tk_zeros(k, tt));
    st2(k, Y, z, z, tk_zeros(k, tt));
    tk_copy_to_shared(k, X, A, a0, 0, 1);
    tk_async_wait(k, 0); /* nothing committed yet: X stays stale */
    t[0] = ld2(k, tt, X, z, z, 0);
    tk_async_commit(k); /* group 1 = {X}; committing alone applies nothing */
    t[1] = ld2(k, tt, X, z, z, 0);
    tk_copy_to_shared(k, Y, A, a1, 0, 1);
    tk_async_commit(k);  /* group 2 = {Y} */
    tk_async_wait(k, 1); /* group 1 lands */
    t[2] = ld2(k, tt, X, z, z, 0);
    t[3] = ld2(k, tt, Y, z, z, 0);
    tk_async_wait(k, 0);
    t[4] = ld2(k, tt, Y, z, z, 0);
    tk_copy_to_shared(k, Y, A, a0, 0, 1);
    tk_async_commit(k);  /* group 3 = {Y <- A0} */
    tk_async_commit(k);  /* group 4, empty */
    tk_async_wait(k, 1); /* group 3 lands, the empty group 4 may stay */
    t[5] = ld2(k, tt, Y, z, z, 0);
    for (int i = 0; i < 6; i++) {
        tk_value *oi[3] = {c32(k, i), z, z};
        tk_store(k, O, oi, t[i]);
    }
    finish(k);
    hbuf hA = hb(TK_F32, 32 * 16), hO = hb(TK_F32, 6 * 256);
    hrand(&hA, &r, 1, 2);
    tk_arg args[2] = {targ(&hA, 2, 32, 16, 0, 0), targ(&hO, 3, 6, 16, 16, 0)};
    run_fails(k, 2, args, TK_ERR_RUNTIME,
              "race: warp 0 reads shared tile %3 stage 0 element "
              "(0, 0) (op #13, tk_load) while the async copy into it (op #11, "
              "tk_copy_to_shared) is still in flight");
    set_race_check(false);
    run_ok(k, 2, args);
    int src[6] = {-1, -1, 0, -1, 1, 0}; /* -1: stale zeros, else A's tile */
    for (int i = 0; i < 6; i++)
        for (int e = 0; e < 256; e++)
            EXPECT_F("async read", i * 256 + e, hget(&hO, (size_t)i * 256 + e),
                     src[i] < 0 ? 0.0f : hget(&hA, (size_t)src[i] * 256 + e));
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* A 3-stage cp.async pipeline summing n 16x16 tiles; with `pending` = 2
 * every read is of landed data, with 3 the first read is of shared memory
 * nothing has written yet (the interpreter fills it with NaN): the race
 * checker fails that run, which is then repeated without it. */
static void run_pipeline(int pending, int n, rng *r, hbuf *hA, hbuf *hO) {
    tk_kernel *k = kern("pipeline", 2);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *N = tk_param_scalar(k, "n", TK_I32);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *sm = tk_shared(k, TK_F32, 16, 16, TK_SMEM_SWIZZLE, 3), *z = c32(k, 0);
    for (int s = 0; s < 2; s++) {
        tk_value *gi[2] = {c32(k, 16 * s), z};
        tk_copy_to_shared(k, tk_stage(k, sm, c32(k, s)), A, gi, 0, 1);
        tk_async_commit(k);
    }
    tk_value *acc = tk_zeros(k, wtile(TK_F32, 16, 16)), *carried, *res;
    tk_value *kt = tk_for_begin(k, z, N, c32(k, 1), 1, &acc, &carried);
    tk_value *nx = tk_add(k, kt, c32(k, 2));
    tk_if_begin(k, tk_lt(k, nx, N));
    tk_value *gi[2] = {tk_mul(k, nx, c32(k, 16)), z};
    tk_copy_to_shared(k, tk_stage(k, sm, tk_rem(k, nx, c32(k, 3))), A, gi, 0, 1);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, pending);
    tk_barrier(k);
    tk_value *t = ld2(k, wtile(TK_F32, 16, 16), tk_stage(k, sm, tk_rem(k, kt, c32(k, 3))), z, z, 0);
    tk_value *next = tk_add(k, carried, t);
    tk_barrier(k);
    tk_for_end(k, 1, &next, &res);
    st2(k, O, tk_mul(k, tk_warp_id(k), c32(k, 16)), z, res);
    finish(k);
    hrand(hA, r, -1, 1);
    tk_arg args[3] = {targ(hA, 2, 16 * n, 16, 0, 0), tk_arg_i32(n), targ(hO, 2, 32, 16, 0, 0)};
    if (pending > 2) {
        run_fails(k, 3, args, TK_ERR_RUNTIME, "is still in flight (no tk_async_wait");
        set_race_check(false);
    }
    run_ok(k, 3, args);
    tk_kernel_destroy(k);
}

START_TEST(memory_pipeline) {
    rng r = rng_for(__func__);
    int n = irand(&r, 2, 9);
    hbuf hA = hb(TK_F32, 16 * 16 * (size_t)n), hO = hb(TK_F32, 512);
    run_pipeline(2, n, &r, &hA, &hO);
    for (int w = 0; w < 2; w++)
        for (int e = 0; e < 256; e++) {
            float s = 0;
            for (int i = 0; i < n; i++) s += hget(&hA, (size_t)i * 256 + e);
            EXPECT_F("pipeline sum", e, hget(&hO, (size_t)w * 256 + e), s);
        }
    run_pipeline(3, n, &r, &hA, &hO); /* waits one group too few */
    ck_assert_msg(isnan(hget(&hO, 0)),
                  "a read before the wait should see unwritten shared "
                  "memory, got %g",
                  hget(&hO, 0));
    hfree(&hA), hfree(&hO);
}
END_TEST

/* ---- control flow ------------------------------------------------------- */
/* A loop carrying a tile and a counter over n tiles (n may be 0). */
START_TEST(control_for_carried) {
    rng r = rng_for(__func__);
    for (int rep = 0; rep < 3; rep++) {
        int n = rep == 0 ? 0 : irand(&r, 1, 6);
        tk_kernel *k = kern("for_carried", 1);
        tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *N = tk_param_scalar(k, "n", TK_I64);
        tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *OC = tk_param_tensor(k, "OC", TK_F32, 2);
        tk_value *z = c32(k, 0);
        tk_value *init[2] = {tk_fill(k, wtile(TK_F32, 16, 32), tk_const_f32(k, 0.5f)),
                             tk_const_i64(k, 0)};
        tk_value *c[2], *res[2];
        tk_value *i = tk_for_begin(k, tk_const_i64(k, 0), N, tk_const_i64(k, 1), 2, init, c);
        tk_value *t = ld2(k, wtile(TK_F32, 16, 32), A, tk_mul(k, i, tk_const_i64(k, 16)), z, 0);
        tk_value *next[2] = {tk_add(k, c[0], t), tk_add(k, c[1], tk_const_i64(k, 1))};
        tk_for_end(k, 2, next, res);
        st2(k, O, z, z, res[0]);
        st2(k, OC, z, z, tk_fill(k, wtile(TK_F32, 16, 16), res[1]));
        finish(k);
        hbuf hA = hb(TK_F32, 16 * 32 * (size_t)(n ? n : 1)), hO = hb(TK_F32, 512);
        hbuf hC = hb(TK_F32, 256);
        hrand(&hA, &r, -1, 1);
        tk_arg args[4] = {targ(&hA, 2, 16 * (n ? n : 1), 32, 0, 0), tk_arg_i64(n),
                          targ(&hO, 2, 16, 32, 0, 0), targ(&hC, 2, 16, 16, 0, 0)};
        run_ok(k, 4, args);
        for (int e = 0; e < 512; e++) {
            float s = 0.5f;
            for (int j = 0; j < n; j++) s += hget(&hA, (size_t)j * 512 + e);
            EXPECT_F("carried tile", e, hget(&hO, (size_t)e), s);
        }
        EXPECT_F("trip count", 0, hget(&hC, 0), (float)n);
        hfree(&hA), hfree(&hO), hfree(&hC);
        tk_kernel_destroy(k);
    }
}
END_TEST

/* for i in [0,3) { for j in [i,5) step 2 { s += 10*i + j; acc += i*j } } */
START_TEST(control_nested_for) {
    tk_kernel *k = kern("nested", 1);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *z = c32(k, 0);
    tk_value *init[2] = {c32(k, 0), tk_zeros(k, wtile(TK_F32, 16, 16))}, *oc[2], *ores[2];
    tk_value *i = tk_for_begin(k, z, c32(k, 3), c32(k, 1), 2, init, oc);
    tk_value *ic[2], *ires[2];
    tk_value *j = tk_for_begin(k, i, c32(k, 5), c32(k, 2), 2, oc, ic);
    tk_value *inext[2] = {tk_add(k, ic[0], tk_add(k, tk_mul(k, i, c32(k, 10)), j)),
                          tk_add(k, ic[1], tk_cvt(k, tk_mul(k, i, j), TK_F32))};
    tk_for_end(k, 2, inext, ires);
    tk_for_end(k, 2, ires, ores);
    st2(k, O, z, z, tk_fill(k, wtile(TK_F32, 16, 16), ores[0]));
    st2(k, O, c32(k, 16), z, ores[1]);
    finish(k);
    hbuf hO = hb(TK_F32, 512);
    tk_arg args[1] = {targ(&hO, 2, 32, 16, 0, 0)};
    run_ok(k, 1, args);
    int s = 0, acc = 0;
    for (int a = 0; a < 3; a++)
        for (int b = a; b < 5; b += 2) s += 10 * a + b, acc += a * b;
    EXPECT_F("nested scalar", 0, hget(&hO, 0), (float)s);
    EXPECT_F("nested tile", 0, hget(&hO, 256), (float)acc);
    hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* Fibonacci through carried values that feed each other, and a pure swap
 * (the yields are the carried values themselves, in the other order). */
START_TEST(control_for_swap) {
    rng r = rng_for(__func__);
    int n = irand(&r, 0, 20);
    tk_kernel *k = kern("swap", 1);
    tk_value *N = tk_param_scalar(k, "n", TK_I32), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_type tt = wtile(TK_F32, 16, 16);
    tk_value *init[6] = {tk_zeros(k, tt), tk_fill(k, tt, tk_const_f32(k, 1)), c32(k, 0),
                         c32(k, 1),       tk_fill(k, tt, tk_const_f32(k, 5)), tk_zeros(k, tt)};
    tk_value *c[6], *res[6];
    tk_for_begin(k, c32(k, 0), N, c32(k, 1), 6, init, c);
    tk_value *next[6] = {c[1], tk_add(k, c[0], c[1]), c[3], tk_add(k, c[2], c[3]), c[5], c[4]};
    tk_for_end(k, 6, next, res);
    tk_value *z = c32(k, 0);
    st2(k, O, z, z, res[0]);
    st2(k, O, c32(k, 16), z, tk_fill(k, tt, res[2]));
    st2(k, O, c32(k, 32), z, res[4]);
    st2(k, O, c32(k, 48), z, res[5]);
    finish(k);
    hbuf hO = hb(TK_F32, 1024);
    tk_arg args[2] = {tk_arg_i32(n), targ(&hO, 2, 64, 16, 0, 0)};
    run_ok(k, 2, args);
    int a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        int t = a + b;
        a = b, b = t;
    }
    EXPECT_F("fib tile", n, hget(&hO, 17), (float)a);
    EXPECT_F("fib scalar", n, hget(&hO, 256 + 17), (float)a);
    EXPECT_F("swap", n, hget(&hO, 512 + 17), n % 2 ? 0.0f : 5.0f);
    EXPECT_F("swap", n, hget(&hO, 768 + 17), n % 2 ? 5.0f : 0.0f);
    hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* if/else on the block parity yielding a tile and a scalar. */
START_TEST(control_if_else) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("if_else", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_set_grid(k, c32(k, 4), NULL, NULL);
    tk_value *b = tk_block_id(k, 0), *r0 = tk_mul(k, b, c32(k, 16)), *z = c32(k, 0);
    tk_value *t = ld2(k, wtile(TK_F32, 16, 16), A, r0, z, 0), *res[2];
    tk_if_begin(k, tk_eq(k, tk_rem(k, b, c32(k, 2)), z));
    tk_value *ty[2] = {tk_mul(k, t, tk_const_f32(k, 2)), tk_const_f32(k, 1)};
    tk_else(k, 2, ty);
    tk_value *ey[2] = {tk_add(k, t, tk_const_f32(k, 1)), tk_const_f32(k, -1)};
    tk_if_end(k, 2, ey, res);
    st2(k, O, r0, z, res[0]);
    st2(k, O, r0, c32(k, 16), tk_fill(k, wtile(TK_F32, 16, 16), res[1]));
    finish(k);
    hbuf hA = hb(TK_F32, 64 * 16), hO = hb(TK_F32, 64 * 32);
    hrand(&hA, &r, -3, 3);
    tk_arg args[2] = {targ(&hA, 2, 64, 16, 0, 0), targ(&hO, 2, 64, 32, 0, 0)};
    run_ok(k, 2, args);
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 16; j++) {
            bool even = (i / 16) % 2 == 0;
            float a = hget(&hA, (size_t)i * 16 + j);
            EXPECT_F("if tile", i * 32 + j, hget(&hO, (size_t)i * 32 + j), even ? a * 2 : a + 1);
            EXPECT_F("if scalar", i * 32 + j, hget(&hO, (size_t)i * 32 + 16 + j),
                     even ? 1.0f : -1.0f);
        }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* Warp roles: warps 0-1 take the then-branch, 2-3 the else-branch; nested
 * ifs store only from warp 3; a loop runs warp_id+1 trips. */
START_TEST(control_warp_roles) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("roles", 4);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *B = tk_param_tensor(k, "B", TK_F32, 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *P = tk_param_tensor(k, "P", TK_F32, 2);
    tk_type tt = wtile(TK_F32, 16, 16);
    tk_value *w = tk_warp_id(k), *r0 = tk_mul(k, w, c32(k, 16)), *z = c32(k, 0), *res;
    tk_if_begin(k, tk_lt(k, w, c32(k, 2)));
    tk_value *ty = ld2(k, tt, A, r0, z, 0);
    tk_else(k, 1, &ty);
    tk_value *ey = tk_neg(k, ld2(k, tt, B, r0, z, 0));
    tk_if_end(k, 1, &ey, &res);
    st2(k, O, r0, z, res);
    tk_if_begin(k, tk_ge(k, w, c32(k, 2))); /* if (w >= 2) { if (w == 2) {} else store } */
    tk_if_begin(k, tk_eq(k, w, c32(k, 2)));
    tk_else(k, 0, NULL);
    st2(k, P, r0, z, tk_fill(k, tt, tk_const_f32(k, 7)));
    tk_if_end(k, 0, NULL, NULL);
    tk_if_end(k, 0, NULL, NULL);
    tk_value *init = tk_zeros(k, tt), *c, *lres;
    tk_for_begin(k, z, tk_add(k, w, c32(k, 1)), c32(k, 1), 1, &init, &c);
    tk_value *nx = tk_add(k, c, tk_const_f32(k, 1));
    tk_for_end(k, 1, &nx, &lres);
    st2(k, O, r0, c32(k, 16), lres);
    finish(k);
    hbuf hA = hb(TK_F32, 64 * 16), hB = hb(TK_F32, 64 * 16), hO = hb(TK_F32, 64 * 32);
    hbuf hP = hb(TK_F32, 64 * 16);
    hrand(&hA, &r, -3, 3), hrand(&hB, &r, -3, 3), hfill(&hP, -99);
    tk_arg args[4] = {targ(&hA, 2, 64, 16, 0, 0), targ(&hB, 2, 64, 16, 0, 0),
                      targ(&hO, 2, 64, 32, 0, 0), targ(&hP, 2, 64, 16, 0, 0)};
    run_ok(k, 4, args);
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 16; j++) {
            size_t e = (size_t)i * 16 + j;
            int wi = i / 16;
            EXPECT_F("role branch", e, hget(&hO, (size_t)i * 32 + j),
                     wi < 2 ? hget(&hA, e) : -hget(&hB, e));
            EXPECT_F("role loop", e, hget(&hO, (size_t)i * 32 + 16 + j), (float)(wi + 1));
            EXPECT_F("role store", e, hget(&hP, e), wi == 3 ? 7.0f : -99.0f);
        }
    hfree(&hA), hfree(&hB), hfree(&hO), hfree(&hP);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- ids and grid --------------------------------------------------------- */
START_TEST(ids_grid) {
    rng r = rng_for(__func__);
    int gx = irand(&r, 1, 5), gy = irand(&r, 1, 4);
    tk_kernel *k = kern("ids", 8);
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 1), *X = tk_param_scalar(k, "gx", TK_I32);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 4);
    tk_set_grid(k, X, tk_dim(k, T, 0), tk_const_i64(k, 2));
    tk_value *bx = tk_block_id(k, 0), *by = tk_block_id(k, 1), *bz = tk_block_id(k, 2);
    tk_value *w = tk_warp_id(k), *g = tk_warpgroup_id(k);
    tk_value *v =
        tk_add(k, tk_add(k, bx, tk_mul(k, by, c32(k, 100))), tk_mul(k, bz, c32(k, 10000)));
    tk_value *f = tk_add(k, tk_cvt(k, v, TK_F32),
                         tk_mul(k, tk_cvt(k, tk_add(k, tk_mul(k, w, c32(k, 10)), g), TK_F32),
                                tk_const_f32(k, 0.0625f)));
    tk_value *idx[4] = {bz, by, bx, tk_mul(k, w, c32(k, 16))};
    tk_store(k, O, idx, tk_fill(k, cvec(TK_F32, 16), f));
    finish(k);
    hbuf hT = hb(TK_F32, (size_t)gy), hO = hb(TK_F32, 2 * (size_t)gy * gx * 128);
    tk_arg args[3] = {targ(&hT, 1, gy, 0, 0, 0), tk_arg_i32(gx), targ(&hO, 4, 2, gy, gx, 128)};
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 3, args, grid), TK_OK);
    ck_assert(grid[0] == gx && grid[1] == gy && grid[2] == 2);
    run_ok(k, 3, args);
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < gy; y++)
            for (int x = 0; x < gx; x++)
                for (int e = 0; e < 128; e++) {
                    size_t o = (((size_t)z * gy + y) * gx + x) * 128 + e;
                    int wi = e / 16;
                    float want =
                        (float)(x + 100 * y + 10000 * z) + (float)(wi * 10 + wi / 4) * 0.0625f;
                    EXPECT_F("block/warp ids", o, hget(&hO, o), want);
                }
    hfree(&hT), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- errors -------------------------------------------------------------- */
START_TEST(errors_args_and_grid) {
    tk_kernel *k = kern("args", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *N = tk_param_scalar(k, "n", TK_I32);
    tk_set_grid(k, N, N, NULL);
    tk_value *z = c32(k, 0);
    st2(k, A, z, z, tk_zeros(k, wtile(TK_F32, 16, 16)));
    hbuf hA = hb(TK_F32, 256), hB = hb(TK_BF16, 256);
    tk_arg ok[2] = {targ(&hA, 2, 16, 16, 0, 0), tk_arg_i32(1)};
    run_fails(k, 2, ok, TK_ERR_STATE, "not finished");
    finish(k);
    run_ok(k, 2, ok);
    run_fails(k, 1, ok, TK_ERR_LAUNCH, "kernel 'args' takes 2 arguments, got 1");
    tk_arg bad[2] = {targ(&hB, 2, 16, 16, 0, 0), tk_arg_i32(1)};
    run_fails(k, 2, bad, TK_ERR_LAUNCH,
              "argument 0 ('A') is a bf16 tensor, the kernel expects f32");
    bad[0] = targ(&hA, 3, 1, 16, 16, 0);
    run_fails(k, 2, bad, TK_ERR_LAUNCH, "rank-3");
    bad[0] = targ(&hA, 2, 16, 16, 0, 0), bad[0].data = NULL;
    run_fails(k, 2, bad, TK_ERR_LAUNCH, "NULL data");
    bad[0] = tk_arg_i32(3);
    run_fails(k, 2, bad, TK_ERR_LAUNCH, "is a scalar");
    bad[0] = targ(&hA, 2, 16, 16, 0, 0), bad[1] = tk_arg_i64(1);
    run_fails(k, 2, bad, TK_ERR_LAUNCH,
              "argument 1 ('n') is an i64 scalar, the kernel expects an i32");
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, st[2] = {INT64_C(1) << 40, 1};
    bad[0] = tk_arg_strided(hA.p, TK_F32, 2, huge, st), bad[1] = tk_arg_i32(1);
    run_fails(k, 2, bad, TK_ERR_LAUNCH, "2^63");
    tk_arg zero[2] = {ok[0], tk_arg_i32(0)}, neg[2] = {ok[0], tk_arg_i32(-3)};
    tk_arg big[2] = {ok[0], tk_arg_i32(1 << 20)};
    run_fails(k, 2, zero, TK_ERR_LAUNCH, "grid dimension 0 is 0");
    run_fails(k, 2, neg, TK_ERR_LAUNCH, "grid dimension 0 is -3");
    run_fails(k, 2, big, TK_ERR_LAUNCH, "2^31");
    big[1] = tk_arg_i32(INT32_MAX);
    run_fails(k, 2, big, TK_ERR_LAUNCH, "2^31");
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 2, zero, grid), TK_ERR_LAUNCH);
    hfree(&hA), hfree(&hB);
    tk_kernel_destroy(k);
}
END_TEST

/* Grid expressions fail at launch, e.g. on a zero divisor. */
START_TEST(errors_grid_division) {
    tk_kernel *k = kern("griddiv", 1);
    tk_value *N = tk_param_scalar(k, "n", TK_I32), *D = tk_param_scalar(k, "d", TK_I32);
    tk_set_grid(k, tk_div(k, N, D), NULL, NULL);
    finish(k);
    tk_arg a[2] = {tk_arg_i32(8), tk_arg_i32(0)};
    run_fails(k, 2, a, TK_ERR_LAUNCH, "division by zero");
    a[1] = tk_arg_i32(3);
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 2, a, grid), TK_OK);
    ck_assert(grid[0] == 2 && grid[1] == 1 && grid[2] == 1);
    tk_kernel_destroy(k);
}
END_TEST

/* Stage index out of range in block 1 only; s2r / r2s outside the tile. */
START_TEST(errors_runtime_memory) {
    tk_kernel *k = kern("rt_mem", 1); /* one warp: two would race on the stage */
    tk_value *base = tk_param_scalar(k, "base", TK_I32), *r0 = tk_param_scalar(k, "r0", TK_I32);
    tk_value *c0 = tk_param_scalar(k, "c0", TK_I32);
    tk_set_grid(k, c32(k, 2), NULL, NULL);
    tk_value *sm = tk_shared(k, TK_F32, 32, 32, TK_SMEM_PLAIN, 3);
    tk_value *st = tk_stage(k, sm, tk_add(k, tk_block_id(k, 0), base));
    tk_type tt = wtile(TK_F32, 16, 16);
    st2(k, st, c32(k, 0), c0, tk_zeros(k, tt));
    tk_value *t = ld2(k, tt, st, r0, c32(k, 0), 0);
    st2(k, st, c32(k, 16), c32(k, 16), t);
    finish(k);
    tk_arg a[3] = {tk_arg_i32(1), tk_arg_i32(0), tk_arg_i32(0)};
    run_ok(k, 3, a);
    a[0] = tk_arg_i32(2);
    run_fails(k, 3, a, TK_ERR_RUNTIME, "block (1,0,0), warp 0: op #");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "(stage): stage index 3 is out of range"));
    a[0] = tk_arg_i32(0), a[1] = tk_arg_i32(24);
    run_fails(k, 3, a, TK_ERR_RUNTIME, "(load_s2r): a 16x16 tile at (24, 0) does not lie inside");
    a[1] = tk_arg_i32(0), a[2] = tk_arg_i32(-1);
    run_fails(k, 3, a, TK_ERR_RUNTIME, "(store_r2s)");
    tk_kernel_destroy(k);
}
END_TEST

/* A zero divisor in lane 3 only; a loop that would never end. */
START_TEST(errors_runtime_scalar) {
    /* Warp 0 fails first in lockstep order (TK_INTERP_SHUFFLE may say otherwise). */
    ck_assert_int_eq(tk_interp_set_options(ctx, &(tk_interp_options){.race_check = 1}), TK_OK);
    tk_kernel *k = kern("rt_scalar", 2);
    tk_value *S = tk_param_scalar(k, "step", TK_I32), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *d = tk_sub(k, tk_lane_id(k), c32(k, 3));
    tk_value *q = tk_rem(k, c32(k, 7), d);
    (void)q;
    tk_value *init = tk_zeros(k, wtile(TK_F32, 16, 16)), *c, *res;
    tk_for_begin(k, c32(k, 0), c32(k, 4), S, 1, &init, &c);
    tk_for_end(k, 1, &c, &res);
    st2(k, O, c32(k, 0), c32(k, 0), res);
    finish(k);
    hbuf hO = hb(TK_F32, 256);
    tk_arg a[2] = {tk_arg_i32(1), targ(&hO, 2, 16, 16, 0, 0)};
    run_fails(k, 2, a, TK_ERR_RUNTIME, "warp 0: op #");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "(rem): division by zero (lane 3)"));
    tk_kernel_destroy(k);
    k = kern("rt_loop", 1);
    S = tk_param_scalar(k, "step", TK_I32);
    tk_for_begin(k, c32(k, 0), c32(k, 4), S, 0, NULL, NULL);
    tk_for_end(k, 0, NULL, NULL);
    finish(k);
    a[0] = tk_arg_i32(0);
    run_fails(k, 1, a, TK_ERR_RUNTIME, "(for): step is 0");
    a[0] = tk_arg_i32(3);
    run_ok(k, 1, a);
    hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- main ---------------------------------------------------------------- */
int main(void) {
    const interp_test tests[] = {
        {"memory", memory_ragged},         {"memory", memory_views},
        {"memory", memory_scalar_load},    {"memory", memory_shared},
        {"memory", memory_async_stale},    {"memory", memory_pipeline},
        {"control", control_for_carried},  {"control", control_nested_for},
        {"control", control_for_swap},     {"control", control_if_else},
        {"control", control_warp_roles},   {"ids", ids_grid},
        {"errors", errors_args_and_grid},  {"errors", errors_grid_division},
        {"errors", errors_runtime_memory}, {"errors", errors_runtime_scalar}};
    return interp_run("test_interp_memory", "interp_memory", tests, sizeof tests / sizeof tests[0]);
}
