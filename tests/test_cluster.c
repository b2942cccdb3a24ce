/* Clusters (tk_kernel_set_cluster) and TK_COPY_MULTICAST: the builder's
 * rules, the interpreter's check of the multicast promise, the grid a
 * cluster needs, and what the plan and the lowering make of the wgmma
 * GEMM's pairs (tk_gemm_config.cluster). The GPU runs of that GEMM are in
 * test_gpu_kernels.c (gemm_cluster_on_gpu). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "jit/lower.h"
#include "jit/plan.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/interp.h"

/* A kernel of clusters of two, grid x = 2 * G[0] / 16: block b copies the
 * 16x64 tile of X at rows `row(b)` into shared memory and writes it to O's
 * rows 16 b. `how`: 0 the pair's tile (rows 16 (b / 2): the promise kept),
 * 1 each block its own (rows 16 b: broken), 2 only the cluster's first
 * block copies (the second makes fewer multicast copies). */
static tk_kernel *pair_copy(tk_dtype dt, int how) {
    tk_kernel *k = kern("pair_copy", 4);
    ck_assert_int_eq(tk_kernel_set_cluster(k, 2), TK_OK);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *sm = tk_shared(k, dt, 16, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *b = tk_block_id(k, 0), *z = c32(k, 0);
    tk_value *pairs = tk_cvt(k, tk_ceil_div(k, tk_dim(k, X, 0), tk_const_i64(k, 16)), TK_I32);
    tk_set_grid(k, tk_mul(k, pairs, c32(k, 2)), NULL, NULL);
    tk_value *pair = tk_div(k, b, c32(k, 2));
    tk_value *gi[2] = {tk_mul(k, how == 1 ? b : pair, c32(k, 16)), z};
    if (how == 2) tk_if_begin(k, tk_eq(k, tk_rem(k, b, c32(k, 2)), z));
    tk_copy_to_shared(k, sm, X, gi, 0.0f, TK_COPY_TMA | TK_COPY_MULTICAST);
    if (how == 2) tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *oi[2] = {tk_mul(k, b, c32(k, 16)), z};
    tk_copy_to_global(k, O, oi, sm);
    finish(k);
    return k;
}

START_TEST(promise_kept) {
    rng r = rng_for(__func__);
    tk_kernel *k = pair_copy(TK_BF16, 0);
    char *txt = NULL;
    ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
    ck_assert_ptr_nonnull(strstr(txt, " cluster=2\n"));
    ck_assert_ptr_nonnull(strstr(txt, "async tma multicast"));
    tk_free(txt);
    const int rows = 40; /* 3 pairs: the last pair's tile is ragged */
    hbuf hX = hb(TK_BF16, (size_t)rows * 64), hO = hb(TK_BF16, 96 * 64);
    hrand(&hX, &r, -4, 4);
    hfill(&hO, -99);
    tk_arg args[2] = {targ(&hX, 2, rows, 64, 0, 0), targ(&hO, 2, 96, 64, 0, 0)};
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 2, args, grid), TK_OK);
    ck_assert_int_eq(grid[0], 6);
    run_ok(k, 2, args);
    for (int i = 0; i < 96; i++) /* block b = i / 16 holds the tile of pair b / 2 */
        for (int j = 0; j < 64; j++) {
            int src = (i / 32) * 16 + i % 16;
            float want = src < rows ? hget(&hX, (size_t)src * 64 + j) : 0.0f;
            EXPECT_F("O", i * 64 + j, hget(&hO, (size_t)i * 64 + j), want);
        }
    hfree(&hX), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

START_TEST(promise_broken) {
    hbuf hX = hb(TK_F32, 64 * 64), hO = hb(TK_F32, 128 * 64);
    tk_arg args[2] = {targ(&hX, 2, 64, 64, 0, 0), targ(&hO, 2, 128, 64, 0, 0)};
    tk_kernel *k = pair_copy(TK_F32, 1);
    run_fails(k, 2, args, TK_ERR_RUNTIME,
              "TK_COPY_MULTICAST broken: multicast copy 1 of this block");
    tk_kernel_destroy(k);
    k = pair_copy(TK_F32, 2);
    run_fails(k, 2, args, TK_ERR_RUNTIME,
              "the block made 0 multicast copies, its cluster's first block 1");
    tk_kernel_destroy(k);
    hfree(&hX), hfree(&hO);
}
END_TEST

/* The grid's x must be whole clusters, here and at launch. */
START_TEST(grid_whole_clusters) {
    tk_kernel *k = kern("odd_grid", 1);
    ck_assert_int_eq(tk_kernel_set_cluster(k, 4), TK_OK);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 1);
    tk_set_grid(k, tk_cvt(k, tk_dim(k, O, 0), TK_I32), NULL, NULL);
    finish(k);
    hbuf hO = hb(TK_F32, 6);
    tk_arg args[1] = {targ(&hO, 1, 6, 0, 0, 0)};
    run_fails(k, 1, args, TK_ERR_INVALID_ARG,
              "the grid's x is 6 blocks, not a multiple of the kernel's cluster of 4");
    hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* tk_kernel_set_cluster's range and timing; the multicast flag's rule. */
START_TEST(builder_rules) {
    tk_kernel *k = kern("bad_cluster", 1);
    ck_assert_int_eq(tk_kernel_set_cluster(k, 3), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_kernel_error(k), "3; expected 1, 2, 4 or 8"));
    tk_kernel_destroy(k);
    k = kern("bad_cluster", 1);
    ck_assert_int_eq(tk_kernel_set_cluster(k, 16), TK_ERR_INVALID_ARG);
    tk_kernel_destroy(k);
    k = kern("late_cluster", 1);
    tk_param_tensor(k, "X", TK_F32, 2);
    tk_const_i32(k, 1);
    ck_assert_int_eq(tk_kernel_set_cluster(k, 2), TK_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tk_kernel_error(k), "set the cluster first"));
    tk_kernel_destroy(k);
    for (int c = 0; c < 2; c++) { /* no cluster; a cluster but no TK_COPY_TMA */
        k = kern("bad_multicast", 1);
        if (c) ck_assert_int_eq(tk_kernel_set_cluster(k, 2), TK_OK);
        tk_value *X = tk_param_tensor(k, "X", TK_F32, 2);
        tk_value *sm = tk_shared(k, TK_F32, 16, 16, TK_SMEM_SWIZZLE, 1);
        tk_value *gi[2] = {c32(k, 0), c32(k, 0)};
        tk_copy_to_shared(k, sm, X, gi, 0.0f,
                          (c ? TK_COPY_ASYNC : TK_COPY_TMA) | TK_COPY_MULTICAST);
        ck_assert_int_eq(tk_kernel_status(k), TK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(
            strstr(tk_kernel_error(k), c ? "has no TK_COPY_TMA" : "has no cluster"));
        tk_kernel_destroy(k);
    }
    k = kern("one_block", 1); /* 1 is no cluster: printed as before */
    ck_assert_int_eq(tk_kernel_set_cluster(k, 1), TK_OK);
    finish(k);
    char *txt = NULL;
    ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
    ck_assert_ptr_null(strstr(txt, "cluster"));
    tk_free(txt);
    tk_kernel_destroy(k);
}
END_TEST

static tk_kernel *gemm_pairs(int tb, int warps) {
    tk_gemm_config c = tk_gemm_default_config(TK_BF16, TK_BF16, tb);
    c.block_m = 16 * warps, c.block_n = 256, c.block_k = 64, c.warps = warps, c.stages = 4;
    c.tma = 1, c.wgmma = 1, c.cluster = 2;
    tk_kernel *k = NULL;
    ck_assert_msg(tk_gemm_build(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* The GEMM's pairs: with a producer warpgroup (sm_90a) B's map is half the
 * tile's rows and the copies multicast; without one (sm_90's plan) each
 * block would copy its whole tile; before sm_90 there are no clusters. */
START_TEST(gemm_pairs_plan) {
    for (int tb = 0; tb < 2; tb++) {
        tk_kernel *k = gemm_pairs(tb, 8);
        tk_plan pl;
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_int_eq(pl.cluster, 2);
        ck_assert_int_eq(pl.multicast, 2);
        ck_assert_int_eq(pl.producer_warps, 4);
        int b_rows = -1, a_rows = -1;
        for (int i = 0; i < pl.nmaps; i++) {
            if (pl.maps[i].param == 1) b_rows = pl.maps[i].box_rows;
            if (pl.maps[i].param == 0) a_rows = pl.maps[i].box_rows;
        }
        ck_assert_int_eq(b_rows, tb ? 128 : 32); /* B [N, K]: 256 rows; [K, N]: 64 */
        ck_assert_int_eq(a_rows, 128);
        tk_plan_make(k, tk_target_find("sm_90"), &pl);
        ck_assert_int_eq(pl.cluster, 2);
        ck_assert_int_eq(pl.multicast, 0);
        tk_diag dg = {0};
        char *ptx = NULL;
        ck_assert_msg(tk_lower_ptx(k, "sm_90a", &ptx, &dg) == TK_OK, "%s", dg.msg);
        const char *want[] = {".reqnctapercluster 2, 1, 1", "multicast::cluster",
                              "mapa.shared::cluster",       "mbarrier.arrive.shared::cluster",
                              "barrier.cluster.wait",       "%cluster_ctarank"};
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            ck_assert_msg(strstr(ptx, want[i]), "pairs' PTX lacks %s", want[i]);
        free(ptx);
        tk_diag d80 = {0};
        ck_assert_int_eq(tk_lower_ptx(k, "sm_80", &ptx, &d80), TK_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(d80.msg, "clusters need sm_90"));
        tk_kernel_destroy(k);
    }
    tk_gemm_config c = tk_gemm_default_config(TK_BF16, TK_BF16, 0); /* mma.sync: no pairs */
    c.cluster = 2;
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "cluster is 2; expected 0 or 1"));
}
END_TEST

int main(void) {
    const interp_test tests[] = {{"interp", promise_kept},
                                 {"interp", promise_broken},
                                 {"interp", grid_whole_clusters},
                                 {"builder", builder_rules},
                                 {"plan", gemm_pairs_plan}};
    return interp_run("test_cluster", "cluster", tests, sizeof tests / sizeof tests[0]);
}
