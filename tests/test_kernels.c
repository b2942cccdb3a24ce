/* The ready-made kernels (kernels/gemm.c, kernels/attention.c) on the CPU
 * interpreter against float64 references.
 *
 * Every run draws fresh random inputs (the seed is printed; TK_TEST_SEED
 * repeats it). Outputs start NaN-poisoned, so an element the kernel never
 * writes fails the comparison; output buffers carry gaps (padded rows) that
 * must stay untouched. Shapes stay small: the interpreter is slow and this
 * file also runs under ASan. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/attn_check.h"
#include "util/fixture.h"
#include "util/ref.h"
#include "util/run.h"

/* ---- GEMM ------------------------------------------------------------------ */
/* Configurations: the default one and a few others covering other warp grids
 * (2x2 of 32x32, 4x2, 1x1, 1x2, 2x4) and pipeline depths (2, 3, 6, 8 stages). */
static tk_gemm_config gemm_cfg(int which, tk_dtype in, tk_dtype out, int tb) {
    tk_gemm_config c = tk_gemm_default_config(in, out, tb);
    switch (which) {
    case 1:
        c.block_m = 64;
        c.block_n = 64;
        c.block_k = 32;
        c.warps = 4;
        c.stages = 2;
        break;
    case 2:
        c.block_m = 128;
        c.block_n = 64;
        c.block_k = 64;
        c.warps = 8;
        c.stages = 3;
        break;
    case 3:
        c.block_m = 32;
        c.block_n = 32;
        c.block_k = 16;
        c.warps = 1;
        c.stages = 2;
        break;
    case 4:
        c.block_m = 64;
        c.block_n = 128;
        c.block_k = 32;
        c.warps = 2;
        c.stages = 3;
        break;
    case 5:
        c.block_m = 64;
        c.block_n = 64;
        c.block_k = 16;
        c.warps = 4;
        c.stages = 6;
        break;
    case 6:
        c.block_m = 64;
        c.block_n = 128;
        c.block_k = 32;
        c.warps = 2;
        c.stages = 8;
        break;
    case 7:
        c.block_n = 256;
        c.warps = 8;
        break; /* tk_gemm_config_for's large shape */
    /* wgmma: two warpgroups of 64 rows; a one-warpgroup block with 64-byte rows (SW64) */
    case 8:
        c.block_n = 256;
        c.warps = 8;
        c.stages = 4;
        c.tma = 1;
        c.wgmma = 1;
        break;
    case 9:
        c.block_m = 64;
        c.block_n = 128;
        c.block_k = 32;
        c.warps = 4;
        c.wgmma = 1;
        break;
    /* clusters of two sharing B: 8, and a 4-warp 64-row block whose pairs
     * run on tiles past M more often */
    case 10:
        c = gemm_cfg(8, in, out, tb);
        c.cluster = 2;
        break;
    case 11:
        c = gemm_cfg(9, in, out, tb);
        c.tma = 1;
        c.cluster = 2;
        break;
    default: break;
    }
    return c;
}

typedef struct gemm_case {
    int64_t M, N, K;
    int tb;
    tk_dtype in, out;
    int cfg;
} gemm_case;

static const gemm_case gemm_cases[] = {
    {1, 1, 1, 0, TK_BF16, TK_F32, 0},
    {17, 33, 100, 0, TK_BF16, TK_BF16, 0},
    {64, 64, 64, 1, TK_F16, TK_F32, 0},
    {130, 70, 48, 1, TK_BF16, TK_BF16, 0},
    {100, 17, 130, 0, TK_F16, TK_F16, 1},
    {128, 128, 32, 0, TK_BF16, TK_F32, 0},
    {1, 200, 17, 1, TK_BF16, TK_F32, 2},
    {33, 1, 64, 0, TK_F16, TK_BF16, 3},
    {150, 140, 96, 1, TK_F16, TK_F32, 4},
    {5, 64, 300, 0, TK_BF16, TK_BF16, 2},
    {70, 130, 1, 1, TK_BF16, TK_F16, 1},
    {96, 48, 200, 1, TK_F16, TK_F16, 3},
    {77, 90, 333, 0, TK_BF16, TK_F32, 5}, /* deep pipelines, one k-step per tile */
    {130, 60, 700, 1, TK_F16, TK_F16, 6},
    {40, 40, 70, 0, TK_BF16, TK_F32, 6}, /* fewer k-tiles than stages */
    {150, 300, 200, 0, TK_BF16, TK_BF16, 7},
    {130, 260, 70, 1, TK_F16, TK_F32, 7},
    {150, 300, 200, 0, TK_BF16, TK_BF16, 8},
    {130, 260, 70, 1, TK_F16, TK_F32, 8},
    {1, 1, 1, 0, TK_BF16, TK_F32, 9},
    {70, 150, 90, 0, TK_F16, TK_F16, 9},
    {65, 129, 33, 1, TK_BF16, TK_BF16, 9},
    {150, 300, 200, 0, TK_BF16, TK_BF16, 10}, /* 2 tiles of M: one pair */
    {130, 260, 70, 1, TK_F16, TK_F32, 10},
    {300, 70, 100, 0, TK_BF16, TK_F32, 10}, /* 3 tiles of M: a pair's second past M */
    {200, 130, 90, 1, TK_F16, TK_F16, 11},  /* 4 tiles of 64 rows */
    {1, 1, 1, 0, TK_BF16, TK_F32, 11},
};
#define N_GEMM (int)(sizeof gemm_cases / sizeof gemm_cases[0])

static double out_tol(tk_dtype dt) { return dt == TK_F32 ? 1e-4 : dt == TK_F16 ? 3e-3 : 1e-2; }

static void check_gemm(const gemm_case *g) {
    tk_gemm_config cfg = gemm_cfg(g->cfg, g->in, g->out, g->tb);
    tk_kernel *k = NULL;
    tk_status s = tk_gemm_build(ctx, &cfg, &k);
    ck_assert_msg(s == TK_OK, "gemm build: %s: %s", tk_status_name(s), tk_ctx_error(ctx));

    int64_t da[2] = {g->M, g->K}, db[2] = {g->K, g->N}, dc[2] = {g->M, g->N};
    if (g->tb) {
        db[0] = g->N;
        db[1] = g->K;
    }
    /* A with padded rows (an unaligned leading dimension), C with gaps. */
    ref_tensor A = ref_tensor_new_layout(g->in, 2, da, NULL, 3);
    ref_tensor B = ref_tensor_new(g->in, 2, db);
    ref_tensor C = ref_tensor_new_layout(g->out, 2, dc, NULL, 5);
    ref_tensor_random(&A, -1, 1);
    ref_tensor_random(&B, -1, 1);
    ref_tensor_fill_all(&C, NAN);
    void *before = ref_tensor_snapshot(&C);

    /* the wgmma kernel is persistent: a few blocks loop over all tiles */
    int cl = cfg.cluster == 2 ? 2 : 1; /* pairs of tiles, blocks in pairs */
    int64_t gx = (g->N + cfg.block_n - 1) / cfg.block_n,
            gy = (g->M + cl * cfg.block_m - 1) / (cl * cfg.block_m);
    int blocks = (int)ref_randint(1, 4), nargs = cfg.wgmma ? 4 : 3;
    int nb = cl > 1 ? (blocks / cl > 1 ? blocks / cl : 1) : blocks;
    tk_arg args[4] = {ref_tensor_arg(&A), ref_tensor_arg(&B), ref_tensor_arg(&C),
                      tk_arg_i32(blocks)};
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, nargs, args, grid), TK_OK);
    ck_assert_int_eq(grid[0], cfg.wgmma ? cl * (gx * gy < nb ? gx * gy : nb) : gx);
    ck_assert_int_eq(grid[1], cfg.wgmma ? 1 : gy);
    ck_assert_int_eq(grid[2], 1);
    s = tk_interp_run(k, nargs, args);
    ck_assert_msg(s == TK_OK, "gemm run: %s: %s", tk_status_name(s), tk_ctx_error(ctx));

    double *a = ref_tensor_to_f64(&A), *b = ref_tensor_to_f64(&B), *c = ref_tensor_to_f64(&C);
    double *want = malloc(sizeof(double) * (size_t)(g->M * g->N));
    ck_assert_ptr_nonnull(want);
    ref_gemm(a, b, want, g->M, g->N, g->K, g->tb);
    int64_t n = g->M * g->N, nan = ref_count_nan(c, n), stray = ref_tensor_stray_writes(&C, before);
    double err = ref_rel_err(c, want, n);
    printf("gemm %3lldx%3lldx%3lld %s %s->%s cfg %d (%s): rel err %.2e\n", (long long)g->M,
           (long long)g->N, (long long)g->K, g->tb ? "A*B^T" : "A*B  ", tk_dtype_name(g->in),
           tk_dtype_name(g->out), g->cfg, tk_kernel_name(k), err);
    ck_assert_msg(nan == 0, "%lld of %lld outputs not written", (long long)nan, (long long)n);
    ck_assert_msg(stray == 0, "%lld writes outside C", (long long)stray);
    ck_assert_msg(err <= out_tol(g->out), "rel err %g > %g", err, out_tol(g->out));

    free(a);
    free(b);
    free(c);
    free(want);
    free(before);
    ref_tensor_free(&A);
    ref_tensor_free(&B);
    ref_tensor_free(&C);
    tk_kernel_destroy(k);
}

START_TEST(test_gemm) { check_gemm(&gemm_cases[_i]); }
END_TEST

/* Fresh random shapes and configurations each run. */
START_TEST(test_gemm_random) {
    static const tk_dtype in[2] = {TK_BF16, TK_F16}, out[3] = {TK_BF16, TK_F16, TK_F32};
    gemm_case g = {.M = ref_randint(1, 300),
                   .N = ref_randint(1, 300),
                   .K = ref_randint(1, 300),
                   .tb = (int)ref_randint(0, 1),
                   .in = in[ref_randint(0, 1)],
                   .out = out[ref_randint(0, 2)],
                   .cfg = (int)ref_randint(0, 7)};
    check_gemm(&g);
}
END_TEST

/* The size- and GPU-dependent choice: on sm_90a with the copy engine usable,
 * the wgmma kernel once there are 128 blocks of 128x256 (or of 128x128, in
 * 128x128 blocks), and below that for at most 256 rows in 64x128 blocks of
 * one warpgroup; else (and on sm_90)
 * 128x256 blocks of 8 warps once there are 264 of them (sizes rounded up to
 * whole blocks), 128x64 blocks when there are fewer than 132 of 128x128, else
 * the default; dtypes and transpose_b pass through. */
START_TEST(test_gemm_config_for) {
    tk_gemm_config d = tk_gemm_default_config(TK_F16, TK_F32, 1), c;
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 2048, 2048, "sm_90");
    ck_assert_mem_eq(&c, &d, sizeof c); /* 16 x 8 = 128 large blocks: too few */
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 2048, 2048, "sm_90a"); /* 128: wgmma */
    ck_assert_int_eq(c.wgmma, 1);
    ck_assert_int_eq(c.block_n, 256);
    ck_assert_int_eq(c.stages, 4);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 512, 4096, "sm_90a"); /* 64; 128 of 128x128 */
    ck_assert_int_eq(c.wgmma, 1);
    ck_assert_int_eq(c.block_n, 128);
    ck_assert_int_eq(c.warps, 8);
    ck_assert_int_eq(c.stages, 6);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 8 * 128, 16 * 128 - 127, "sm_90a"); /* 8 x 16 */
    ck_assert_int_eq(c.wgmma, 1);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 7 * 128, 18 * 128, "sm_90a"); /* 126 */
    ck_assert_int_eq(c.wgmma, 0);
    ck_assert_int_eq(c.block_n, 64);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 1024, 1024, "sm_90a"); /* 64 < 132 blocks */
    ck_assert_int_eq(c.block_m, 128);
    ck_assert_int_eq(c.block_n, 64);
    ck_assert_int_eq(c.warps, 4);
    ck_assert_int_eq(c.stages, 3);
    ck_assert_int_eq(c.transpose_b, 1);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 131 * 128, 128, "sm_90"); /* 131 */
    ck_assert_int_eq(c.block_n, 64);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 11 * 128, 11 * 128 + 1, "sm_90"); /* 11 x 12 */
    ck_assert_mem_eq(&c, &d, sizeof c);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 1, 1, "sm_90"); /* no wgmma there */
    ck_assert_int_eq(c.block_n, 64);
    /* skinny M (<= 256 rows, few tiles) on sm_90a: one warpgroup's 64x128 wgmma blocks */
    tk_gemm_config sk = tk_gemm_config_for(TK_F16, TK_F32, 1, 256, 4096, "sm_90a");
    ck_assert(sk.block_m == 64 && sk.block_n == 128 && sk.block_k == 64 && sk.warps == 4);
    ck_assert(sk.stages == 6 && sk.tma == 1 && sk.wgmma == 1 && sk.transpose_b == 1);
    ck_assert_int_eq(tk_gemm_config_for(TK_F16, TK_F32, 1, 1, 1, "sm_90a").block_m, 64);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 257, 4096, "sm_90a"); /* past it: mma.sync */
    ck_assert(c.block_m == 128 && c.block_n == 64 && !c.wgmma);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 1, 1, "sm_86"); /* tuned on sm_90 only */
    ck_assert_mem_eq(&c, &d, sizeof c);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 4096, 4096, "sm_90a");
    ck_assert_int_eq(c.block_m, 128);
    ck_assert_int_eq(c.block_n, 256);
    ck_assert_int_eq(c.block_k, 64);
    ck_assert_int_eq(c.warps, 8);
    ck_assert_int_eq(c.stages, 4);
    ck_assert_int_eq(c.tma, 1);   /* a producer warpgroup feeds the copy engine */
    ck_assert_int_eq(c.wgmma, 1); /* and two warpgroups multiply */
    ck_assert_int_eq(c.in_dtype, TK_F16);
    ck_assert_int_eq(c.out_dtype, TK_F32);
    ck_assert_int_eq(c.transpose_b, 1);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 4096, 4096, "sm_90"); /* no setmaxnreg */
    ck_assert_int_eq(c.block_n, 256);
    ck_assert_int_eq(c.block_k, 64);
    ck_assert_int_eq(c.stages, 3);
    ck_assert_int_eq(c.tma, 0);
    /* a call's choice: the copy engine only for aligned tensors and pitches */
    static char buf[64] __attribute__((aligned(16)));
    tk_gemm_params p = {.struct_size = sizeof(tk_gemm_params),
                        .in_dtype = TK_F16,
                        .out_dtype = TK_F32,
                        .transpose_b = 1,
                        .m = 4096,
                        .n = 4096,
                        .k = 4096,
                        .a = buf,
                        .b = buf,
                        .c = buf};
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").tma, 1);
    p.lda = 4100; /* 8200-byte rows: mma.sync on cp.async */
    c = tk_gemm_config_for_call(&p, "sm_90a");
    ck_assert_int_eq(c.tma, 0);
    ck_assert_int_eq(c.wgmma, 0);
    ck_assert_int_eq(c.block_n, 256);
    p.lda = 0, p.b = buf + 2;
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").tma, 0);
    p.b = buf, p.k = 4095; /* B is [N, K]: its rows are K long */
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").tma, 0);
    p.transpose_b = 0, p.k = 4096, p.n = 4095; /* [K, N]: B's rows are N long */
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").tma, 0);
    p.n = 4096;
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").tma, 1);
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90").tma, 0);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 33 * 128, 8 * 256, "sm_90"); /* 264 exactly */
    ck_assert_int_eq(c.block_n, 256);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 263 * 128, 256, "sm_90"); /* 263 */
    ck_assert_mem_eq(&c, &d, sizeof c);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 32 * 128 + 1, 2048, "sm_90a"); /* 33 x 8 */
    ck_assert_int_eq(c.block_n, 256);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 33 * 128, 7 * 256 + 1, "sm_90a"); /* 33 x 8 */
    ck_assert_int_eq(c.block_n, 256);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, INT64_MAX, INT64_MAX, "sm_90a"); /* no overflow */
    ck_assert_int_eq(c.block_n, 256);
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, (int64_t)1 << 40, 1, "sm_90a");
    ck_assert_int_eq(c.block_n, 256);
    static const char *other[] = {"sm_80", "sm_86", "sm_89", "", NULL}; /* less shared memory */
    for (int i = 0; i < 5; i++) {
        c = tk_gemm_config_for(TK_F16, TK_F32, 1, 8192, 8192, other[i]);
        ck_assert_mem_eq(&c, &d, sizeof c);
    }
    c = tk_gemm_config_for(TK_F16, TK_F32, 1, 0, 1 << 20, "sm_90a"); /* invalid sizes */
    ck_assert_mem_eq(&c, &d, sizeof c);
    tk_kernel *k = NULL; /* the large configuration builds */
    c = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 8192, 8192, "sm_90a");
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_OK);
    tk_kernel_destroy(k);
}
END_TEST

START_TEST(test_gemm_config_errors) {
    tk_kernel *k = (tk_kernel *)&k;
    tk_gemm_config c = tk_gemm_default_config(TK_F32, TK_F32, 0);
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "in_dtype"));
    c = tk_gemm_default_config(TK_BF16, TK_I32, 0);
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.block_k = 24;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    /* wgmma: 64 rows per warpgroup; accumulators that fit the warps' registers */
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.wgmma = 1; /* 128 rows with 4 warps: one warpgroup owns only 64 */
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "block_m = 16 * warps"));
    c.block_m = 192, c.block_n = 256, c.warps = 12, c.stages = 2;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "needs 3..8")); /* one multiply in flight */
    c.stages = 3;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "accumulator registers"));
    c.block_n = 128; /* 64 + 40 <= 152 */
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_OK);
    tk_kernel_destroy(k);
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.warps = 3; /* 128x128 has no 3-warp split into multiples of 16 */
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "warps"));
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.stages = 1;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.transpose_b = 2;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "transpose_b is 2"));
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.tma = 2;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tma is 2"));
    c = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    c.block_m = c.block_n = 256;
    c.block_k = 128;
    c.stages = 8; /* > 227 KiB of shared */
    ck_assert_int_ne(tk_gemm_build(ctx, &c, &k), TK_OK);
    ck_assert_ptr_null(k);
    ck_assert_int_eq(tk_gemm_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_gemm_build(ctx, &c, NULL), TK_ERR_INVALID_ARG);
}
END_TEST

/* ---- Attention --------------------------------------------------------------- */
typedef struct attn_case {
    int64_t B, Hq, Hkv, Nq, Nkv;
    int D, causal;
    tk_dtype dt;
    int bnhd;       /* Q, K, V, O stored as [B, N, H, D] */
    int warps;      /* tk_attention_config.warps (0: default) */
    int ramp;       /* keys grow along the sequence: row maxes keep rising, so
                  the kernel's lazy rescale fires after the first tile too */
    int zero_scale; /* scale 0: uniform weights (the kernel's limit case) */
    int wgmma;      /* tk_attention_config.wgmma: the Hopper kernel */
} attn_case;

static const attn_case attn_cases[] = {
    {1, 1, 1, 1, 1, 64, 0, TK_BF16, 0, 0, 0, 0, 0},
    {1, 2, 2, 17, 17, 64, 1, TK_BF16, 0, 0, 0, 0, 0},
    {2, 2, 1, 64, 64, 64, 0, TK_F16, 0, 0, 0, 0, 0}, /* GQA 2:1 */
    {1, 2, 2, 65, 65, 128, 1, TK_BF16, 0, 0, 0, 0, 0},
    {1, 1, 1, 100, 100, 64, 1, TK_F16, 1, 0, 0, 0, 0}, /* [B,N,H,D] */
    {1, 4, 2, 17, 100, 64, 0, TK_BF16, 0, 0, 0, 0, 0}, /* Nq < Nkv, GQA */
    {1, 2, 1, 100, 17, 64, 1, TK_BF16, 0, 0, 0, 0, 0}, /* Nq > Nkv causal: rows without keys */
    {1, 1, 1, 65, 130, 128, 1, TK_F16, 0, 0, 0, 0, 0}, /* Nq < Nkv causal */
    {2, 1, 1, 1, 65, 128, 0, TK_BF16, 1, 0, 0, 0, 0},
    {1, 3, 1, 64, 1, 64, 1, TK_BF16, 0, 0, 0, 0, 0}, /* one key: only the last row sees it */
    {1, 2, 2, 130, 130, 128, 0, TK_BF16, 1, 0, 0, 0, 0},
    {1, 4, 1, 1, 130, 64, 1, TK_F16, 0, 0, 0, 0, 0},    /* decode-like: one query, GQA 4:1 */
    {1, 2, 1, 150, 140, 64, 1, TK_BF16, 1, 0, 0, 0, 0}, /* two query blocks of 128, Nq > Nkv */
    /* d=128 on 8 warps of 16 rows (Q in registers); d=64 on 8 warps */
    {1, 2, 2, 65, 65, 128, 1, TK_BF16, 0, 8, 0, 0, 0},
    {1, 2, 1, 150, 140, 128, 0, TK_F16, 1, 8, 0, 0, 0},
    {1, 1, 1, 1, 130, 128, 1, TK_BF16, 0, 8, 0, 0, 0},
    {1, 2, 2, 130, 17, 64, 1, TK_BF16, 0, 8, 0, 0, 0},
    {1, 2, 2, 200, 200, 64, 0, TK_BF16, 0, 0, 1, 0, 0},
    {1, 1, 1, 130, 250, 128, 1, TK_F16, 1, 0, 1, 0, 0},
    {1, 1, 1, 300, 100, 128, 1, TK_BF16, 0, 0, 0, 0, 0}, /* d=128: first block has no keys */
    {1, 2, 1, 70, 90, 128, 1, TK_BF16, 0, 0, 0, 1, 0},   /* scale 0, masked tiles */
    {1, 1, 1, 33, 65, 64, 0, TK_F16, 1, 8, 0, 1, 0},
    /* D 256 on mma.sync: 16 rows per warp */
    {1, 2, 1, 70, 130, 256, 1, TK_BF16, 0, 0, 0, 0, 0},
    {2, 1, 1, 130, 65, 256, 0, TK_F16, 1, 8, 1, 0, 0},
    /* the Hopper kernel (wgmma): warpgroups of 64 rows (three at D 64 by default), key tiles
     * of 128 (D 256: 64) */
    {1, 1, 1, 1, 1, 64, 0, TK_BF16, 0, 0, 0, 0, 1},
    {1, 2, 2, 65, 65, 128, 1, TK_BF16, 0, 0, 0, 0, 1},
    {2, 2, 1, 150, 140, 64, 1, TK_F16, 1, 0, 0, 0, 1},   /* GQA, bnhd, Nq > Nkv */
    {1, 1, 1, 300, 100, 128, 1, TK_BF16, 0, 0, 0, 0, 1}, /* blocks without keys */
    {1, 4, 1, 1, 300, 128, 1, TK_F16, 0, 0, 0, 0, 1},    /* one query, GQA 4:1 */
    {1, 1, 1, 130, 270, 128, 0, TK_BF16, 1, 0, 1, 0, 1}, /* three key tiles, ramp */
    {1, 2, 1, 70, 90, 64, 1, TK_BF16, 0, 0, 0, 1, 1},    /* scale 0 */
    {1, 1, 1, 129, 129, 256, 1, TK_BF16, 0, 0, 0, 0, 1}, /* D 256 */
    {1, 2, 2, 40, 200, 256, 0, TK_F16, 1, 8, 1, 0, 1},
    {1, 2, 1, 200, 600, 64, 1, TK_BF16, 0, 8, 1, 0, 1},  /* D 64 on two warpgroups, 5 key tiles */
    {1, 1, 1, 130, 300, 256, 1, TK_BF16, 0, 0, 1, 0, 1}, /* ramp: lazy rescales (D 256) */
    /* D 64 on three warpgroups (192 query rows a block) */
    {1, 2, 1, 390, 333, 64, 1, TK_BF16, 0, 12, 1, 0, 1},
    {2, 3, 1, 193, 130, 64, 0, TK_F16, 1, 12, 0, 0, 1},
};
#define N_ATTN (int)(sizeof attn_cases / sizeof attn_cases[0])

static void check_attention(const attn_case *a) {
    tk_attention_config cfg = {.dtype = a->dt,
                               .head_dim = a->D,
                               .causal = a->causal,
                               .warps = a->warps,
                               .wgmma = a->wgmma};
    tk_kernel *k = NULL;
    tk_status s = tk_attention_fwd_build(ctx, &cfg, &k);
    ck_assert_msg(s == TK_OK, "attention build: %s: %s", tk_status_name(s), tk_ctx_error(ctx));

    static const int perm_bnhd[4] = {0, 2, 1, 3};
    const int *perm = a->bnhd ? perm_bnhd : NULL;
    int64_t dq[4] = {a->B, a->Hq, a->Nq, a->D}, dk[4] = {a->B, a->Hkv, a->Nkv, a->D};
    int64_t dl[3] = {a->B, a->Hq, a->Nq};
    ref_tensor Q = ref_tensor_new_layout(a->dt, 4, dq, perm, 0);
    ref_tensor K = ref_tensor_new_layout(a->dt, 4, dk, perm, 0);
    ref_tensor V = ref_tensor_new_layout(a->dt, 4, dk, perm, 0);
    ref_tensor O = ref_tensor_new_layout(a->dt, 4, dq, perm, a->bnhd ? 0 : 8);
    ref_tensor L = ref_tensor_new_layout(TK_F32, 3, dl, NULL, 2);
    /* Scores of a few units: softmax neither flat nor one-hot. */
    ref_tensor_random(&Q, -2, 2);
    ref_tensor_random(&K, -2, 2);
    ref_tensor_random(&V, -1, 1);
    for (int64_t i = 0; a->ramp && i < ref_tensor_count(&K); i++) {
        int64_t key = i / a->D % a->Nkv;
        ref_tensor_set(&K, i, ref_tensor_get(&K, i) * (1.0 + (double)key / 16.0));
    }
    ref_tensor_fill_all(&O, NAN);
    ref_tensor_fill_all(&L, NAN);
    void *o_before = ref_tensor_snapshot(&O), *l_before = ref_tensor_snapshot(&L);
    float scale =
        a->zero_scale ? 0.0f : (float)((0.75 + 0.25 * ref_uniform()) / sqrt((double)a->D));

    tk_arg args[6] = {ref_tensor_arg(&Q), ref_tensor_arg(&K), ref_tensor_arg(&V),
                      ref_tensor_arg(&O), ref_tensor_arg(&L), tk_arg_f32(scale)};
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, 6, args, grid), TK_OK);
    /* 128 query rows per block; mma.sync at D 256 and wgmma: 16 per warp */
    int64_t bq = a->D == 256 || a->wgmma ? 16 * tk_kernel_warps(k) : 128;
    ck_assert_int_eq(grid[0], (a->Nq + bq - 1) / bq);
    ck_assert_int_eq(grid[1], a->Hq);
    ck_assert_int_eq(grid[2], a->B);
    s = tk_interp_run(k, 6, args);
    ck_assert_msg(s == TK_OK, "attention run: %s: %s", tk_status_name(s), tk_ctx_error(ctx));

    double *q = ref_tensor_to_f64(&Q), *kk = ref_tensor_to_f64(&K), *v = ref_tensor_to_f64(&V);
    int64_t no = ref_tensor_count(&O), nl = ref_tensor_count(&L);
    double *o_ref = malloc(sizeof(double) * (size_t)no),
           *l_ref = malloc(sizeof(double) * (size_t)nl);
    ck_assert(o_ref && l_ref);
    ref_attention(q, kk, v, o_ref, l_ref, a->B, a->Hq, a->Hkv, a->Nq, a->Nkv, a->D, scale,
                  a->causal);
    tu_attn_out r = tu_attn_measure(&O, &L, o_ref, l_ref, o_before, l_before);
    printf("attn B%lld Hq%lld Hkv%lld Nq%3lld Nkv%3lld D%3d %s %s %s%s: rel err O %.2e L %.2e\n",
           (long long)a->B, (long long)a->Hq, (long long)a->Hkv, (long long)a->Nq,
           (long long)a->Nkv, a->D,
           a->wgmma                  ? "wgmma"
           : tk_kernel_warps(k) == 8 ? "w8"
                                     : "w4",
           tk_dtype_name(a->dt), a->causal ? "causal" : "full  ", a->bnhd ? " bnhd" : "", r.eo,
           r.el);
    tu_attn_expect(&r);

    free(q);
    free(kk);
    free(v);
    free(o_ref);
    free(l_ref);
    free(o_before);
    free(l_before);
    ref_tensor_free(&Q);
    ref_tensor_free(&K);
    ref_tensor_free(&V);
    ref_tensor_free(&O);
    ref_tensor_free(&L);
    tk_kernel_destroy(k);
}

START_TEST(test_attention) { check_attention(&attn_cases[_i]); }
END_TEST

START_TEST(test_attention_random) {
    attn_case a = {.B = ref_randint(1, 2),
                   .Hkv = ref_randint(1, 2),
                   .Nq = ref_randint(1, 200),
                   .Nkv = ref_randint(1, 200),
                   .D = ref_randint(0, 1) ? 128 : 64,
                   .causal = (int)ref_randint(0, 1),
                   .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
                   .bnhd = (int)ref_randint(0, 1),
                   .warps = 4 * (int)ref_randint(0, 2),
                   .wgmma = (int)ref_randint(0, 1)};
    a.Hq = a.Hkv * ref_randint(1, 3);
    if (ref_randint(0, 3) == 0) a.D = 256;
    if (a.wgmma) a.warps = 0;                 /* two warpgroups */
    if (ref_randint(0, 2) == 0) a.Nkv = a.Nq; /* the usual self-attention shape */
    check_attention(&a);
}
END_TEST

START_TEST(test_attention_config_errors) {
    tk_kernel *k = (tk_kernel *)&k;
    tk_attention_config c = {.dtype = TK_F32, .head_dim = 64, .causal = 0};
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(k);
    c.dtype = TK_BF16;
    c.head_dim = 96;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "head_dim"));
    c.head_dim = 64;
    c.causal = 2;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c.causal = 0;
    c.warps = 3;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "warps is 3"));
    ck_assert_int_eq(tk_attention_fwd_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, NULL), TK_ERR_INVALID_ARG);
    c.warps = 0;
    c.head_dim = 512;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "head_dim is 512"));
    c.head_dim = 256; /* mma.sync: 16 rows per warp, 64 per block */
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d256_w4");
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), (64 + 4 * 64) * 256 * 2);
    tk_kernel_destroy(k);
    c.wgmma = 1;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d256_wgmma");
    ck_assert_int_eq(tk_kernel_warps(k), 8);
    tk_kernel_destroy(k);
    c.head_dim = 64; /* three warpgroups by default */
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d64_wgmma12");
    ck_assert_int_eq(tk_kernel_warps(k), 12);
    tk_kernel_destroy(k);
    c.head_dim = 128, c.warps = 12; /* its registers would spill */
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "or 12 (three) at head_dim 64"));
    c.warps = 4; /* two warpgroups */
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "8 warps (two warpgroups)"));
    c.warps = 0, c.wgmma = 2;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "wgmma is 2"));
}
END_TEST

/* The kernels' identity: specialization constants and names. */
/* The persistent wgmma GEMM's grid: min(tiles, blocks) with blocks taken
 * in 1..65536; no tiles, no blocks (an empty problem, which tk_launch runs
 * as nothing and tk_kernel_grid reports). */
START_TEST(test_gemm_persistent_grid) {
    tk_gemm_config c = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 4096, 4096, "sm_90a");
    tk_kernel *k;
    ck_assert_int_eq(tk_gemm_build(ctx, &c, &k), TK_OK);
    static const struct {
        int64_t m, n;
        int blocks;
        int64_t grid;
    } cases[] = {
        {4096, 4096, 132, 132}, {300, 300, 132, 6}, {4096, 4096, 0, 1},
        {4096, 4096, -5, 1},    {0, 4096, 132, 0},  {1 << 20, 1 << 16, INT32_MAX, 65536},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t da[2] = {cases[i].m, 64}, db[2] = {64, cases[i].n},
                dc[2] = {cases[i].m, cases[i].n};
        static char buf[16];
        tk_arg args[4] = {tk_arg_tensor(buf, TK_BF16, 2, da), tk_arg_tensor(buf, TK_BF16, 2, db),
                          tk_arg_tensor(buf, TK_BF16, 2, dc), tk_arg_i32(cases[i].blocks)};
        int64_t grid[3];
        tk_status s = tk_kernel_grid(k, 4, args, grid);
        if (!cases[i].grid) { /* tk_kernel_grid names it; tk_launch runs nothing */
            ck_assert_int_ne(s, TK_OK);
            ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "grid dimension 0 is 0"));
            continue;
        }
        ck_assert_msg(s == TK_OK, "case %zu: %s", i, tk_ctx_error(ctx));
        ck_assert_msg(grid[0] == cases[i].grid && grid[1] == 1 && grid[2] == 1,
                      "case %zu: grid %lld x %lld", i, (long long)grid[0], (long long)grid[1]);
    }
    tk_kernel_destroy(k);
}
END_TEST

START_TEST(test_kernel_shape) {
    tk_kernel *k;
    tk_attention_config c = {.dtype = TK_BF16, .head_dim = 128, .causal = 1};
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_int_eq(tk_kernel_warps(k), 4);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d128_w4_causal");
    /* Q (32 rows per warp: re-read from shared memory), K, V: 2 stages each */
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), (128 + 4 * 64) * 128 * 2);
    tk_kernel_destroy(k);
    c.warps = 8; /* 16 rows per warp: Q stays in registers */
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d128_w8_causal");
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 4 * 64 * 128 * 2);
    tk_kernel_destroy(k);
    c.head_dim = 64;
    c.warps = 0;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_int_eq(tk_kernel_warps(k), 4);
    tk_kernel_destroy(k);
    tk_gemm_config g = tk_gemm_default_config(TK_BF16, TK_BF16, 1);
    ck_assert_int_eq(tk_gemm_build(ctx, &g, &k), TK_OK);
    ck_assert_int_eq(tk_kernel_warps(k), 4);
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 3 * (128 * 64 + 128 * 64) * 2);
    tk_kernel_destroy(k);
}
END_TEST

static Suite *kernels_suite(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = ctx_tcase(s, "build", 0);
    tcase_add_test(tc, test_gemm_config_errors);
    tcase_add_test(tc, test_gemm_config_for);
    tcase_add_test(tc, test_attention_config_errors);
    tcase_add_test(tc, test_kernel_shape);
    tcase_add_test(tc, test_gemm_persistent_grid);
    tc = ctx_tcase(s, "gemm", 600);
    tcase_add_loop_test(tc, test_gemm, 0, N_GEMM);
    tcase_add_loop_test(tc, test_gemm_random, 0, 16);
    tc = ctx_tcase(s, "attention", 600);
    tcase_add_loop_test(tc, test_attention, 0, N_ATTN);
    tcase_add_loop_test(tc, test_attention_random, 0, 12);
    return s;
}

int main(void) { return run_suite(kernels_suite()); }
