/* The interpreter's race checker and warp shuffle (ops/race.h,
 * tk_interp_options): kernels with their barriers pass, their broken twins
 * fail with a message naming both accesses (a warpgroup multiply's shared
 * reads last until its wait), and the shuffle makes a missing barrier change
 * results. */
#include "util/interp.h"

#include <stdio.h>
#include <string.h>

/* The messages below name the first access in lockstep order: no shuffle
 * (whatever TK_INTERP_SHUFFLE says), race checker on. */
static void lockstep(void) {
    tk_interp_options o = {.race_check = 1, .shuffle_seed = 0};
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
}

/* ---- a cp.async GEMM -------------------------------------------------------- */
/* C[32, 16] = A[32, K] · B[K, 16] on 2 warps (16 rows each) through a
 * 2-stage ring: trip kt prefetches k-tile kt+1, waits for k-tile kt, then
 * (b1) a barrier makes it visible to every warp; after the mma (b2) a
 * barrier ends every warp's reads of the stage trip kt+1 refills. */
static tk_kernel *gemm(bool b1, bool b2) {
    tk_kernel *k = kern("race_gemm", 2);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *B = tk_param_tensor(k, "B", TK_BF16, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2);
    tk_value *sA = tk_shared(k, TK_BF16, 32, 16, TK_SMEM_SWIZZLE, 2);
    tk_value *sB = tk_shared(k, TK_BF16, 16, 16, TK_SMEM_SWIZZLE, 2);
    tk_value *z = c32(k, 0), *wr = tk_mul(k, tk_warp_id(k), c32(k, 16));
    tk_value *nk = tk_ceil_div(k, tk_dim(k, A, 1), tk_const_i64(k, 16));
    nk = tk_cvt(k, nk, TK_I32);
    tk_copy_to_shared(k, tk_stage(k, sA, z), A, ((tk_value *[]){z, z}), 0, 1);
    tk_copy_to_shared(k, tk_stage(k, sB, z), B, ((tk_value *[]){z, z}), 0, 1);
    tk_async_commit(k);
    tk_value *acc0 = tk_zeros(k, wtile(TK_F32, 16, 16)), *acc, *res;
    tk_value *kt = tk_for_begin(k, z, nk, c32(k, 1), 1, &acc0, &acc);
    tk_value *nx = tk_add(k, kt, c32(k, 1)), *st = tk_rem(k, kt, c32(k, 2));
    tk_if_begin(k, tk_lt(k, nx, nk));
    tk_value *k1 = tk_mul(k, nx, c32(k, 16)), *s1 = tk_rem(k, nx, c32(k, 2));
    tk_copy_to_shared(k, tk_stage(k, sA, s1), A, ((tk_value *[]){z, k1}), 0, 1);
    tk_copy_to_shared(k, tk_stage(k, sB, s1), B, ((tk_value *[]){k1, z}), 0, 1);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, 1);
    if (b1) tk_barrier(k);
    tk_value *ta = ld2(k, wtile(TK_BF16, 16, 16), tk_stage(k, sA, st), wr, z, 0);
    tk_value *tb =
        ld2(k, tk_tile_type(TK_BF16, 16, 16, TK_WARP, TK_COL), tk_stage(k, sB, st), z, z, 0);
    tk_value *next = tk_mma(k, TK_MMA_AB, ta, tb, acc);
    if (b2) tk_barrier(k);
    tk_for_end(k, 1, &next, &res);
    st2(k, C, wr, z, res);
    finish(k);
    return k;
}

typedef struct gemm_bufs {
    hbuf a, b, c;
    tk_arg args[3];
} gemm_bufs;

/* Small integers: every product and sum is exact, so C is exactly A·B. */
static gemm_bufs gemm_inputs(rng *r, int kdim) {
    gemm_bufs g;
    g.a = hb(TK_BF16, 32 * (size_t)kdim);
    g.b = hb(TK_BF16, (size_t)kdim * 16);
    g.c = hb(TK_F32, 512);
    for (size_t i = 0; i < g.a.n; i++) hset(&g.a, i, (float)irand(r, -3, 3));
    for (size_t i = 0; i < g.b.n; i++) hset(&g.b, i, (float)irand(r, -3, 3));
    g.args[0] = targ(&g.a, 2, 32, kdim, 0, 0);
    g.args[1] = targ(&g.b, 2, kdim, 16, 0, 0);
    g.args[2] = targ(&g.c, 2, 32, 16, 0, 0);
    return g;
}

static void gemm_expect(const gemm_bufs *g, int kdim) {
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++) {
            float s = 0;
            for (int x = 0; x < kdim; x++)
                s += hget(&g->a, (size_t)(i * kdim + x)) * hget(&g->b, (size_t)(x * 16 + j));
            EXPECT_F("C", i * 16 + j, hget(&g->c, (size_t)(i * 16 + j)), s);
        }
}

static void gemm_free(gemm_bufs *g) { hfree(&g->a), hfree(&g->b), hfree(&g->c); }

START_TEST(race_gemm) {
    lockstep();
    rng r = rng_for(__func__);
    gemm_bufs g = gemm_inputs(&r, 64);
    tk_kernel *k = gemm(true, true);
    run_ok(k, 3, g.args);
    gemm_expect(&g, 64);
    tk_kernel_destroy(k);
    /* Without its first barrier a warp reads a stage the other warp's share
     * of the copy may not have reached. */
    k = gemm(false, true);
    run_fails(k, 3, g.args, TK_ERR_RUNTIME, "block (0,0,0): race: warp 0 reads shared tile %");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "stage 0 element (0, 0) (op #"));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_load) after the block wrote it (op #"));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_copy_to_shared) with no barrier "
                                                    "between"));
    /* Without the lockstep's help it still computes the right C. */
    set_race_check(false);
    run_ok(k, 3, g.args);
    gemm_expect(&g, 64);
    tk_kernel_destroy(k);
    gemm_free(&g);
}
END_TEST

/* The second barrier missing: trip 1 refills the stage trip 0 read. */
START_TEST(race_stage_refilled_early) {
    lockstep();
    rng r = rng_for(__func__);
    gemm_bufs g = gemm_inputs(&r, 64);
    tk_kernel *k = gemm(true, false);
    run_fails(k, 3, g.args, TK_ERR_RUNTIME, "race: the block writes shared tile %");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "stage 0 element (0, 0) (op #"));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_copy_to_shared) after warp 0 read it "
                                                    "(op #"));
    /* Two k-tiles: nothing is refilled, so nothing races. */
    gemm_bufs g2 = gemm_inputs(&r, 32);
    run_ok(k, 3, g2.args);
    gemm_expect(&g2, 32);
    tk_kernel_destroy(k);
    gemm_free(&g), gemm_free(&g2);
}
END_TEST

/* ---- warps sharing a shared tile (attention's K/V tiles) --------------------- */
/* Each warp stores its 16 rows of X into a shared tile and reads the other
 * warp's: O = X with its two row blocks swapped, if a barrier separates the
 * stores from the loads. */
static tk_kernel *exchange(bool barrier) {
    tk_kernel *k = kern("race_exchange", 2);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *sm = tk_shared(k, TK_F32, 32, 16, TK_SMEM_PLAIN, 1), *z = c32(k, 0);
    tk_value *w = tk_warp_id(k), *mine = tk_mul(k, w, c32(k, 16));
    tk_value *theirs = tk_mul(k, tk_sub(k, c32(k, 1), w), c32(k, 16));
    st2(k, sm, mine, z, ld2(k, wtile(TK_F32, 16, 16), X, mine, z, 0));
    if (barrier) tk_barrier(k);
    st2(k, O, mine, z, ld2(k, wtile(TK_F32, 16, 16), sm, theirs, z, 0));
    finish(k);
    return k;
}

/* Whether O holds X with its row blocks swapped. */
static bool swapped(const hbuf *x, const hbuf *o) {
    for (size_t i = 0; i < 512; i++)
        if (!same(hget(o, i), hget(x, (i + 256) % 512))) return false;
    return true;
}

START_TEST(race_shared_exchange) {
    lockstep();
    rng r = rng_for(__func__);
    hbuf x = hb(TK_F32, 512), o = hb(TK_F32, 512);
    hrand(&x, &r, -1, 1);
    tk_arg a[2] = {targ(&x, 2, 32, 16, 0, 0), targ(&o, 2, 32, 16, 0, 0)};
    tk_kernel *good = exchange(true), *bad = exchange(false);
    run_ok(good, 2, a);
    ck_assert(swapped(&x, &o));
    run_fails(bad, 2, a, TK_ERR_RUNTIME, "race: warp 0 reads shared tile %");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "stage 0 element (16, 0) (op #"));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_load) after warp 1 wrote it (op #"));
    /* Lockstep hides the missing barrier; every shuffled order shows it
     * (whichever warp runs first reads rows nobody wrote: NaN). */
    set_race_check(false);
    hfill(&o, 0);
    run_ok(bad, 2, a);
    ck_assert(swapped(&x, &o));
    for (uint64_t seed_i = 1; seed_i <= 4; seed_i++) {
        tk_interp_options opt = {.race_check = 0, .shuffle_seed = seed_i};
        ck_assert_int_eq(tk_interp_set_options(ctx, &opt), TK_OK);
        hfill(&o, 0);
        run_ok(bad, 2, a);
        ck_assert_msg(!swapped(&x, &o), "shuffle seed %llu", (unsigned long long)seed_i);
        hfill(&o, 0);
        opt.race_check = 1; /* both at once: the barrier makes every order agree */
        ck_assert_int_eq(tk_interp_set_options(ctx, &opt), TK_OK);
        run_ok(good, 2, a);
        ck_assert(swapped(&x, &o));
    }
    tk_kernel_destroy(good), tk_kernel_destroy(bad);
    hfree(&x), hfree(&o);
}
END_TEST

/* ---- global memory, async reads, options ------------------------------------- */
/* Two warps storing the same tile of O race; a barrier does not help two
 * warps writing the same element, but it does order a write and a read. */
START_TEST(race_global) {
    lockstep();
    tk_kernel *k = kern("race_global", 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *z = c32(k, 0);
    st2(k, O, z, z, tk_zeros(k, wtile(TK_F32, 16, 16)));
    finish(k);
    hbuf o = hb(TK_F32, 256);
    tk_arg a[1] = {targ(&o, 2, 16, 16, 0, 0)};
    run_fails(k, 1, a, TK_ERR_RUNTIME,
              "race: warp 1 writes tensor 'O' (argument 0) element "
              "offset 0 (op #");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_store) after warp 0 wrote it"));
    tk_kernel_destroy(k);
    /* Warp 1 reads what warp 0 stored: needs the barrier. */
    for (int b = 0; b < 2; b++) {
        k = kern("race_global_rw", 2);
        O = tk_param_tensor(k, "O", TK_F32, 2), z = c32(k, 0);
        tk_value *w = tk_warp_id(k);
        tk_if_begin(k, tk_eq(k, w, z));
        st2(k, O, z, z, tk_fill(k, wtile(TK_F32, 16, 16), tk_const_f32(k, 2)));
        tk_if_end(k, 0, NULL, NULL);
        if (b) tk_barrier(k);
        tk_value *t = ld2(k, wtile(TK_F32, 16, 16), O, z, z, 0);
        st2(k, O, tk_mul(k, w, c32(k, 16)), c32(k, 16), t);
        finish(k);
        hbuf o2 = hb(TK_F32, 32 * 32);
        tk_arg a2[1] = {targ(&o2, 2, 32, 32, 0, 0)};
        if (b)
            run_ok(k, 1, a2);
        else
            run_fails(k, 1, a2, TK_ERR_RUNTIME, "race: warp 1 reads tensor 'O'");
        hfree(&o2);
        tk_kernel_destroy(k);
    }
    hfree(&o);
}
END_TEST

/* tk_store_add: two warps adding into one element commute, no barrier
 * needed, and the sum lands whole (3 + 2·(1 + 2) = 9 at every element);
 * another warp reading an added element needs a barrier, as after a store. */
START_TEST(race_store_add) {
    lockstep();
    for (int b = 0; b < 3; b++) {
        tk_kernel *k = kern("race_store_add", 2);
        tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *z = c32(k, 0), *zz[2] = {z, z};
        tk_value *one = tk_fill(k, wtile(TK_F32, 16, 16), tk_const_f32(k, 1));
        tk_store_add(k, O, zz, one);
        tk_store_add(k, O, zz, tk_add(k, one, one));
        if (b == 1) tk_barrier(k);
        if (b) { /* warp 1 copies the sums into rows 16.. */
            tk_if_begin(k, tk_eq(k, tk_warp_id(k), c32(k, 1)));
            st2(k, O, c32(k, 16), z, ld2(k, wtile(TK_F32, 16, 16), O, z, z, 0));
            tk_if_end(k, 0, NULL, NULL);
        }
        finish(k);
        char *txt = NULL; /* the IR text (the cache key) tells an add from a store */
        ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
        ck_assert_ptr_nonnull(strstr(txt, " add\n"));
        tk_free(txt);
        hbuf o = hb(TK_F32, 512);
        for (size_t i = 0; i < 512; i++) hset(&o, i, 3.0f);
        tk_arg a[1] = {targ(&o, 2, 32, 16, 0, 0)};
        if (b == 2) {
            run_fails(k, 1, a, TK_ERR_RUNTIME, "race: warp 1 reads tensor 'O'");
        } else {
            run_ok(k, 1, a);
            for (int i = 0; i < 16 * (b ? 32 : 16); i++)
                EXPECT_F("O", i, hget(&o, (size_t)i), 9.0f);
        }
        hfree(&o);
        tk_kernel_destroy(k);
    }
}
END_TEST

/* ---- narrowed views of one tensor ---------------------------------------------- */
/* What warp 1 does through the second view. */
enum { NV_STORE, NV_TILE_LOAD, NV_SCALAR_LOAD };

/* T narrowed twice along `ax` to 32 rows (columns): from 0 and from the
 * run-time `s1`; warp 0 stores a tile through the first view, then warp 1
 * stores one through the second, or loads a tile or (scalar) its element
 * (0, 0) through it, no barrier between. The checker tracks T's elements,
 * whichever view reaches them: s1 = 16 overlaps the views and races on T's
 * element (16, 0) (or (0, 16)), s1 = 32 makes them disjoint. */
static tk_kernel *narrowed_writers(int ax, int what) {
    tk_kernel *k = kern("race_narrow", 2);
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *s1 = tk_param_scalar(k, "s1", TK_I32), *z = c32(k, 0), *w = tk_warp_id(k);
    tk_value *V0 = tk_narrow(k, T, ax, z, c32(k, 32)), *V1 = tk_narrow(k, T, ax, s1, c32(k, 32));
    tk_type t = ax ? wtile(TK_F32, 16, 32) : wtile(TK_F32, 32, 16);
    tk_if_begin(k, tk_eq(k, w, z));
    st2(k, V0, z, z, tk_fill(k, t, tk_const_f32(k, 1)));
    tk_if_end(k, 0, NULL, NULL);
    tk_if_begin(k, tk_eq(k, w, c32(k, 1)));
    tk_value *zz[2] = {z, z};
    if (what == NV_TILE_LOAD) st2(k, O, z, z, ld2(k, t, V1, z, z, 0));
    if (what == NV_SCALAR_LOAD)
        st2(k, O, z, z, tk_fill(k, t, tk_load(k, tk_scalar_type(TK_F32), V1, zz, 0)));
    if (what == NV_STORE) st2(k, V1, z, z, tk_fill(k, t, tk_const_f32(k, 2)));
    tk_if_end(k, 0, NULL, NULL);
    finish(k);
    return k;
}

START_TEST(race_narrowed_views) {
    lockstep();
    for (int ax = 0; ax < 2; ax++)
        for (int what = NV_STORE; what <= NV_SCALAR_LOAD; what++) {
            tk_kernel *k = narrowed_writers(ax, what);
            hbuf t = hb(TK_F32, 64 * 64), o = hb(TK_F32, 64 * 64);
            hfill(&t, -1);
            tk_arg a[3] = {ax ? targ(&t, 2, 16, 64, 0, 0) : targ(&t, 2, 64, 16, 0, 0),
                           targ(&o, 2, 64, 64, 0, 0), tk_arg_i32(16)};
            char want[128];
            snprintf(want, sizeof want, /* T(16, 0) of 16 columns, or T(0, 16) */
                     "race: warp 1 %s tensor 'T' (argument 0) element offset %d (op #",
                     what == NV_STORE ? "writes" : "reads", ax ? 16 : 256);
            run_fails(k, 3, a, TK_ERR_RUNTIME, want);
            ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "after warp 0 wrote it"));
            a[2] = tk_arg_i32(32); /* disjoint views: no race, each view's own elements */
            hfill(&t, -1);
            run_ok(k, 3, a);
            for (int i = 0; i < 1024; i++) {
                int along = ax ? i % 64 : i / 16; /* the narrowed coordinate */
                float want_t = along < 32 ? 1.0f : what == NV_STORE ? 2.0f : -1.0f;
                EXPECT_F("T", i, hget(&t, (size_t)i), want_t);
            }
            if (what != NV_STORE)
                for (int i = 0; i < (ax ? 16 : 32); i++)
                    for (int j = 0; j < (ax ? 32 : 16); j++)
                        EXPECT_F("O", i * 64 + j, hget(&o, (size_t)(i * 64 + j)), -1.0f);
            hfree(&t), hfree(&o);
            tk_kernel_destroy(k);
        }
}
END_TEST

/* ---- the warpgroup multiply's asynchronous reads ------------------------------ */
/* One warpgroup: C = A·B, then B's tile is refilled with B2 and C += A·B2.
 * The first multiply reads sB until a wait retires it: `wait_first` does so
 * before the refill; without it the refill overwrites what the tensor cores
 * may still be reading, and the wait comes only after. `barrier` is the one
 * that publishes the first copies to the warpgroup. */
static tk_kernel *wgmma_refill(bool wait_first, bool barrier) {
    tk_kernel *k = kern("race_wgmma", 4);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *B = tk_param_tensor(k, "B", TK_BF16, 2);
    tk_value *B2 = tk_param_tensor(k, "B2", TK_BF16, 2), *C = tk_param_tensor(k, "C", TK_F32, 2);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *sB = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *z = c32(k, 0), *zz[2] = {z, z};
    tk_copy_to_shared(k, sA, A, zz, 0, TK_COPY_ASYNC);
    tk_copy_to_shared(k, sB, B, zz, 0, TK_COPY_ASYNC);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    if (barrier) tk_barrier(k);
    tk_value *acc = tk_zeros(k, tk_tile_type(TK_F32, 64, 64, TK_WARPGROUP, TK_ROW));
    acc = tk_wgmma(k, TK_MMA_AB, acc, sA, sB, z);
    if (wait_first) acc = tk_wgmma_wait(k, acc, 0);
    tk_barrier(k);
    tk_copy_to_shared(k, sB, B2, zz, 0, TK_COPY_ASYNC);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    acc = tk_wgmma_wait(k, acc, 0);
    acc = tk_wgmma_wait(k, tk_wgmma(k, TK_MMA_AB, acc, sA, sB, z), 0);
    st2(k, C, z, z, acc);
    finish(k);
    return k;
}

START_TEST(race_wgmma_reads_until_retired) {
    lockstep();
    rng r = rng_for(__func__);
    hbuf a = hb(TK_BF16, 64 * 64), b = hb(TK_BF16, 64 * 64), b2 = hb(TK_BF16, 64 * 64);
    hbuf c = hb(TK_F32, 64 * 64);
    hrand(&a, &r, -4, 4), hrand(&b, &r, -4, 4), hrand(&b2, &r, -4, 4);
    for (size_t i = 0; i < 64 * 64; i++) /* small integers: exact sums */
        hset(&a, i, (float)(int)hget(&a, i)), hset(&b, i, (float)(int)hget(&b, i)),
            hset(&b2, i, (float)(int)hget(&b2, i));
    tk_arg args[4] = {targ(&a, 2, 64, 64, 0, 0), targ(&b, 2, 64, 64, 0, 0),
                      targ(&b2, 2, 64, 64, 0, 0), targ(&c, 2, 64, 64, 0, 0)};
    tk_kernel *k = wgmma_refill(true, true);
    run_ok(k, 4, args);
    for (int i = 0; i < 64; i += 21)
        for (int j = 0; j < 64; j += 13) {
            float want = 0;
            for (int l = 0; l < 64; l++)
                want += hget(&a, (size_t)(i * 64 + l)) *
                        (hget(&b, (size_t)(l * 64 + j)) + hget(&b2, (size_t)(l * 64 + j)));
            ck_assert_float_eq(hget(&c, (size_t)(i * 64 + j)), want);
        }
    tk_kernel_destroy(k);
    k = wgmma_refill(false, true); /* refilled while the first multiply may still read */
    run_fails(k, 4, args, TK_ERR_RUNTIME, "race: the block writes shared tile %");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "while warpgroup 0's tk_wgmma (op #"));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "no tk_wgmma_wait has retired its group"));
    tk_kernel_destroy(k);
    k = wgmma_refill(true, false); /* the copies landed, but no barrier published them */
    run_fails(k, 4, args, TK_ERR_RUNTIME, "race: warpgroup 0 reads shared tile %");
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), ", tk_wgmma) after the block wrote it"));
    tk_kernel_destroy(k);
    hfree(&a), hfree(&b), hfree(&b2), hfree(&c);
}
END_TEST

START_TEST(race_options) {
    tk_interp_options o = {0};
    ck_assert_int_eq(tk_interp_set_options(NULL, &o), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_interp_get_options(NULL, &o), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_interp_set_options(ctx, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_interp_set_options: opts is NULL"));
    ck_assert_int_eq(tk_interp_get_options(ctx, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
    ck_assert_int_eq(o.race_check, 1); /* the test fixture's default */
    o = (tk_interp_options){.race_check = 0, .shuffle_seed = 42};
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
    o = (tk_interp_options){0};
    ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
    ck_assert_int_eq(o.race_check, 0);
    ck_assert_uint_eq(o.shuffle_seed, 42);
}
END_TEST

int main(void) {
    const interp_test tests[] = {{"gemm", race_gemm},
                                 {"gemm", race_stage_refilled_early},
                                 {"shared", race_shared_exchange},
                                 {"global", race_global},
                                 {"global", race_store_add},
                                 {"global", race_narrowed_views},
                                 {"wgmma", race_wgmma_reads_until_retired},
                                 {"options", race_options}};
    return interp_run("test_interp_race", "interp_race", tests, sizeof tests / sizeof tests[0]);
}
