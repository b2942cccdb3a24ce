/* Plan tests (jit/plan.h, ops/nv/plan.h): the target table, a plan handed
 * to the lowering, which copies go through the copy engine and which
 * kernels get a producer warpgroup, and narrowed views on the engine. The
 * kernels lower for both archs (util/lowers.h); nothing runs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/lower.h"
#include "jit/plan.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/fixture_ops.h"
#include "util/harness.h"
#include "util/lowers.h"
#include "util/run.h"

static tk_value *c64(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *c32(tk_kernel *k, int32_t v) { return tk_const_i32(k, v); }

static tk_kernel *finish(tk_kernel *k) {
    tk_set_grid(k, NULL, NULL, NULL); /* one block: the plan tests run nothing */
    tk_kernel_finish(k);
    return k;
}

/* The target table through the public query, and a plan handed to the
 * lowering: the same PTX as one made for the call, refused for another
 * target. */
START_TEST(target_caps_and_plans) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_target_caps c;
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_80", &c), TK_OK);
    ck_assert_str_eq(c.arch, "sm_80");
    ck_assert_int_eq(c.sm, 80);
    ck_assert(c.mma_sync && c.ldmatrix && c.cp_async);
    ck_assert(!c.stmatrix && !c.tma && !c.wgmma && !c.setmaxnreg);
    ck_assert_uint_eq(c.smem_per_block, 163 * 1024);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_89", &c), TK_OK);
    ck_assert_uint_eq(c.smem_per_block, 99 * 1024);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_90", &c), TK_OK);
    ck_assert(c.stmatrix && c.tma && !c.wgmma && !c.setmaxnreg);
    ck_assert_uint_eq(c.smem_per_block, 227 * 1024);
    ck_assert_int_eq(tk_target_caps_get(NULL, "sm_90a", &c), TK_OK);
    ck_assert(c.tma && c.wgmma && c.setmaxnreg);
    ck_assert_str_eq(c.llvm_cpu, "sm_90a");
    ck_assert_str_eq(c.llvm_features, "+ptx83");
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_100", &c), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "'sm_100' (known: sm_80, sm_86, sm_89, "
                                                    "sm_90, sm_90a)"));
    ck_assert_int_eq(tk_target_caps_get(NULL, "sm_75", &c), TK_ERR_UNSUPPORTED);
    ck_assert_int_eq(tk_target_caps_get(ctx, NULL, &c), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_80", NULL), TK_ERR_INVALID_ARG);

    tk_kernel *k = tu_op_kernel(ctx, tu_pipe, TK_BF16);
    tk_plan pl;
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    char *a = NULL, *b = NULL;
    tk_diag dg = {0};
    ck_assert_msg(tk_lower_ptx_plan(k, "sm_90a", &pl, &a, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &b, &dg), TK_OK);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    ck_assert_int_eq(tk_lower_ptx_plan(k, "sm_90", &pl, &a, &dg), TK_ERR_STATE);
    ck_assert_ptr_null(a);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The launch order (tk_grid_wait, tk_grid_release): griddepcontrol where
 * the target has it, nothing elsewhere; the plan asks for the early launch
 * only of a kernel that waits, also when the wait is in a branch or a
 * loop, and a producer warpgroup waits as its consumers do. */
static tk_kernel *grid_kernel(tk_ctx *ctx, int warps, bool wait, bool nested, bool release) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_grid", warps, &k);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_BF16, 2);
    tk_value *at[2] = {c32(k, 0), c32(k, 0)};
    if (release) tk_grid_release(k);
    if (nested) tk_if_begin(k, tk_lt(k, tk_dim(k, A, 0), c64(k, 100)));
    if (wait) tk_grid_wait(k);
    if (nested) tk_if_end(k, 0, NULL, NULL);
    tk_value *sm = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_copy_to_shared(k, sm, A, at, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_type t = tk_tile_type(TK_BF16, 16, 16, TK_WARP, TK_ROW);
    tk_store(k, O, at, tk_load(k, t, sm, at, 0.0f));
    return finish(k);
}

/* How often `text` occurs in ptx. */
static int count_of(const char *ptx, const char *text) {
    int n = 0;
    for (const char *p = ptx; (p = strstr(p, text)); p++) n++;
    return n;
}

START_TEST(launch_order) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        int warps;
        bool wait, nested, release;
    } cases[] = {
        {4, true, false, false}, {4, true, true, false},  {4, false, false, true},
        {4, true, false, true},  {8, true, false, false}, /* a producer on sm_90a */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_kernel *k =
            grid_kernel(ctx, cases[i].warps, cases[i].wait, cases[i].nested, cases[i].release);
        ck_assert_msg(tk_kernel_error(k)[0] == 0, "%s", tk_kernel_error(k));
        static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
        for (int a = 0; a < 3; a++) {
            tk_plan pl;
            tk_plan_make(k, tk_target_find(archs[a]), &pl);
            bool hopper = a > 0;
            ck_assert_msg(pl.griddep == (hopper && cases[i].wait), "case %zu %s", i, archs[a]);
            char *ptx = NULL;
            tk_diag dg = {0};
            ck_assert_msg(tk_lower_ptx(k, archs[a], &ptx, &dg) == TK_OK, "%s", dg.msg);
            int waits = count_of(ptx, "griddepcontrol.wait;");
            ck_assert_int_eq(waits > 0, hopper && cases[i].wait);
            ck_assert_int_eq(count_of(ptx, "griddepcontrol.launch_dependents;") > 0,
                             hopper && cases[i].release);
            if (a == 2 && cases[i].warps == 8) { /* the producer's code waits too */
                ck_assert_int_gt(pl.producer_warps, 0);
                ck_assert_int_eq(waits, 2);
            }
            free(ptx);
        }
        tu_check_lowers(k);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* A tile smaller than the 1024-byte alignment (16 x 16 bf16, 32-byte
 * rows: the decoding merge's O slice) takes the engine as a single stage at
 * an aligned offset; in a ring its second stage would not be aligned. */
START_TEST(small_tile_on_the_engine) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    for (int count = 1; count <= 2; count++) {
        tk_kernel *k;
        tk_kernel_create(ctx, "t_small", 4, &k);
        tk_value *O = tk_param_tensor(k, "O", TK_BF16, 4);
        tk_value *sm = tk_shared(k, TK_BF16, 16, 16, TK_SMEM_SWIZZLE, count);
        tk_value *one = count > 1 ? tk_stage(k, sm, c32(k, 1)) : sm;
        tk_value *at[2] = {c32(k, 0), c32(k, 0)},
                 *io[4] = {c32(k, 0), c32(k, 0), c32(k, 0), c32(k, 0)};
        tk_store(k, one, at, tk_zeros(k, tk_tile_type(TK_BF16, 16, 16, TK_WARP, TK_ROW)));
        tk_barrier(k);
        tk_copy_to_global(k, O, io, one);
        finish(k);
        ck_assert_msg(tk_kernel_error(k)[0] == 0, "%s", tk_kernel_error(k));
        tk_plan pl;
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_int_eq(pl.ncopies, count == 1);
        ck_assert_int_eq(pl.stores, count == 1);
        tu_check_lowers(k);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* What one_copy adds beside its copy. */
enum {
    PLAIN_COPY,
    WRITES_A,
    COMMIT_IN_WARP_IF,
    FILL_209K,
    FILL_208K,
    TWO_WARPS,
    ASYNC_TOO,
    SHARED_STORE,
    MANY_WARPS,
    FOUR_WARPS,
    GLOBAL_RAW,
    STORE_OUT,
    LOOP_STORE
};

/* A kernel with one engine copy of an rows x cols tile of `dt` (layout l,
 * fill f) from a rank-`rank` tensor, for the copy-engine plan; `extra` adds
 * what may disqualify it. */
static tk_kernel *one_copy(tk_ctx *ctx, tk_dtype dt, int rows, int cols, tk_smem_layout l, float f,
                           int rank, int extra) {
    tk_kernel *k;
    int warps = extra == TWO_WARPS ? 2 : extra == FOUR_WARPS ? 4 : extra == MANY_WARPS ? 32 : 8;
    tk_kernel_create(ctx, "t_tma", warps, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, rank), *idx[3];
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1); /* 1024 bytes first */
    tk_value *sm = tk_shared(k, dt, rows, cols, l, 2);
    for (int kib = extra == FILL_209K ? 209 : extra == FILL_208K ? 208 : 0; kib > 0; kib -= 16)
        tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, kib < 16 ? kib : 16); /* 1 KiB stages */
    for (int d = 0; d < rank; d++) idx[d] = c64(k, 0);
    tk_copy_to_shared_n(k, tk_stage(k, sm, c32(k, 1)), A, rank, idx, f, TK_COPY_TMA);
    if (extra == COMMIT_IN_WARP_IF) tk_if_begin(k, tk_eq(k, tk_warp_id(k), c32(k, 0)));
    tk_async_commit(k);
    tk_async_wait(k, 0);
    if (extra == COMMIT_IN_WARP_IF) tk_if_end(k, 0, NULL, NULL);
    if (extra == WRITES_A) tk_copy_to_global_n(k, A, rank, idx, tk_stage(k, sm, c32(k, 0)));
    if (extra == ASYNC_TOO) /* a cp.async copy beside the engine's */
        tk_copy_to_shared_n(k, tk_stage(k, sm, c32(k, 0)), A, rank, idx, f, TK_COPY_ASYNC);
    if (extra == GLOBAL_RAW) { /* a store, then other warps' loads of the same tensor */
        tk_value *O = tk_param_tensor(k, "O", dt, 2), *at[2] = {c64(k, 0), c64(k, 0)};
        tk_type t = tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW);
        tk_store(k, O, at, tk_zeros(k, t));
        tk_barrier(k);
        tk_store(k, O, at, tk_load(k, t, O, at, 0.0f));
    }
    if (extra == LOOP_STORE) { /* a barrier, then a shared store, in a loop: only the
                                  back edge puts the store before the barrier */
        tk_value *z = tk_zeros(k, tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW));
        tk_value *at[2] = {c32(k, 0), c32(k, 0)}, *own = tk_shared(k, dt, 16, 16, TK_SMEM_PLAIN, 1);
        tk_for_begin(k, c32(k, 0), c32(k, 3), c32(k, 1), 0, NULL, NULL);
        tk_barrier(k);
        tk_store(k, own, at, z);
        tk_for_end(k, 0, NULL, NULL);
    }
    if (extra == STORE_OUT) { /* the landed tile on to O, which nothing reads */
        tk_value *O = tk_param_tensor(k, "O", dt, rank);
        tk_copy_to_global_n(k, O, rank, idx, tk_stage(k, sm, c32(k, 1)));
    }
    if (extra == SHARED_STORE) {
        tk_value *z = tk_zeros(k, tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW));
        tk_value *at[2] = {c32(k, 0), c32(k, 0)};
        tk_store(k, tk_stage(k, sm, c32(k, 0)), at, z);
        tk_barrier(k);
    }
    return finish(k);
}

/* How many barriers the plan's consumers also sync among themselves. */
static int synced_barriers(const tk_plan *pl) {
    int n = 0;
    for (int i = 0; i < TK_WS_MAX_IDS / 64; i++) n += __builtin_popcountll(pl->slice.sync_bar[i]);
    return n;
}

/* Which copies go through the copy engine, and which kernels get a producer
 * (jit/plan.c). */
START_TEST(tma_plan) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_plan pl;
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    tk_kernel *k;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl); /* cp.async unless asked */
    ck_assert_int_eq(pl.nmaps, 0);
    tk_kernel_destroy(k);
    cfg.tma = 1;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 2); /* A: 128x64 in one box; B: 64x128 as two 64x64 boxes */
    ck_assert_int_eq(pl.maps[0].param, 0);
    ck_assert_int_eq(pl.maps[0].box_rows, 128);
    ck_assert_int_eq(pl.maps[0].box_cols, 64);
    ck_assert_int_eq(pl.maps[1].param, 1);
    ck_assert_int_eq(pl.maps[1].box_rows, 64);
    ck_assert_int_eq(pl.maps[1].box_cols, 64);
    ck_assert_int_eq(pl.maps[1].swizzle, 128);
    ck_assert_uint_gt(pl.smem_extra, 0);
    tk_plan_make(k, tk_target_find("sm_90"), &pl);
    ck_assert_int_eq(pl.nmaps, 2);
    tk_plan_make(k, tk_target_find("sm_89"), &pl);
    ck_assert_int_eq(pl.nmaps, 0);
    ck_assert_uint_eq(pl.smem_extra, 0);
    tk_plan_make(k, NULL, &pl);
    ck_assert_int_eq(pl.nmaps, 0);
    tk_kernel_destroy(k);
    static const struct {
        tk_dtype dt;
        int rows, cols, layout, rank, maps, swizzle, extra;
    } cases[] = {
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, PLAIN_COPY}, /* 128-byte rows */
        {TK_BF16, 64, 16, TK_SMEM_SWIZZLE, 2, 1, 32, PLAIN_COPY},  /* 32-byte rows */
        {TK_F32, 32, 16, TK_SMEM_SWIZZLE, 3, 1, 64, PLAIN_COPY},   /* 64-byte rows, rank 3 */
        {TK_F16, 32, 256, TK_SMEM_SWIZZLE, 2, 1, 128, PLAIN_COPY}, /* 512-byte rows: 4 blocks */
        {TK_BF16, 64, 48, TK_SMEM_SWIZZLE, 2, 0, 0, PLAIN_COPY},   /* 96-byte rows */
        {TK_BF16, 64, 64, TK_SMEM_PAD, 2, 0, 0, PLAIN_COPY},       /* not the engine's layout */
        {TK_BF16, 512, 16, TK_SMEM_SWIZZLE, 2, 0, 0, PLAIN_COPY},  /* more rows than a box */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, WRITES_A},     /* the kernel writes A */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, COMMIT_IN_WARP_IF}, /* warp 0 commits */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, FILL_209K},         /* 1 KiB left: no ring */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, FILL_208K},       /* 2 KiB left: room */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, TWO_WARPS},       /* half a warpgroup */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, FOUR_WARPS},      /* one: lockstep pays */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, MANY_WARPS},      /* no room for 4 more */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, ASYNC_TOO},       /* no producer: cp.async */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, SHARED_STORE},    /* consumers sync too */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, GLOBAL_RAW},      /* ... through O */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 2, 128, STORE_OUT},       /* and the engine stores */
        {TK_BF16, 64, 48, TK_SMEM_SWIZZLE, 2, 0, 0, STORE_OUT},         /* neither: 96-byte rows */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, LOOP_STORE}, /* synced by the back edge */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        k = one_copy(ctx, cases[i].dt, cases[i].rows, cases[i].cols, cases[i].layout, 0.0f,
                     cases[i].rank, cases[i].extra);
        ck_assert_msg(tk_kernel_status(k) == TK_OK, "case %zu: %s", i, tk_kernel_error(k));
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_msg(pl.nmaps == cases[i].maps, "case %zu: %d maps", i, pl.nmaps);
        ck_assert_int_eq(pl.stores, cases[i].extra == STORE_OUT && pl.nmaps > 0);
        if (pl.nmaps) {
            ck_assert_int_eq(pl.maps[0].swizzle, cases[i].swizzle);
            ck_assert_int_eq(pl.maps[0].rank, cases[i].rank);
            ck_assert_int_eq(pl.maps[0].box_rows, cases[i].rows);
        }
        /* a producer warpgroup whenever the engine has every async copy */
        int e = cases[i].extra;
        bool ws =
            pl.nmaps && e != ASYNC_TOO && e != MANY_WARPS && e != TWO_WARPS && e != FOUR_WARPS;
        ck_assert_msg(pl.producer_warps == (ws ? 4 : 0), "case %zu: %d producer warps", i,
                      pl.producer_warps);
        ck_assert_int_eq(pl.threads, 32 * (tk_kernel_warps(k) + (ws ? 4 : 0)));
        if (ws)
            ck_assert_int_eq(synced_barriers(&pl),
                             e == SHARED_STORE || e == GLOBAL_RAW || e == LOOP_STORE);
        tu_check_lowers(k);
        tk_kernel_destroy(k);
    }
    /* the GPU test's pipelined loop: split, with its consumers' barriers
     * kept among themselves; the ring stage index is the producer's only
     * carried value */
    k = tu_op_kernel(ctx, tu_pipe, TK_BF16);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 2);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_gt(synced_barriers(&pl), 0);
    ck_assert(pl.generic_engine_tiles); /* ldmatrix reads the stages: refills fence */
    ck_assert_int_eq(pl.producer_regs, 48);
    ck_assert_int_eq(pl.consumer_regs, 224);
    tk_plan_make(k, tk_target_find("sm_90"), &pl); /* no setmaxnreg: lockstep */
    ck_assert_int_eq(pl.nmaps, 2);
    ck_assert_int_eq(pl.producer_warps, 0);
    tk_kernel_destroy(k);
    /* the wgmma GEMM: C through the engine's store, from a tile in two
     * column pieces; of its 6 barriers the consumers sync among themselves
     * at the 4 around the epilogue's tile (the next tile's first barrier
     * included), never in the k-loop */
    cfg = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 4096, 4096, "sm_90a");
    ck_assert_int_eq(cfg.wgmma, 1);
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 3);
    ck_assert_int_eq(pl.maps[2].param, 2);
    ck_assert(pl.stores);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_eq(synced_barriers(&pl), 4);
    ck_assert(!pl.generic_engine_tiles); /* wgmma alone reads the stages */
    tk_kernel_destroy(k);
    /* the fast attention backward's fused kernel: wgmma reads dSᵀ, a tile
     * the consumers write, until the wait that retires it; so of the loop's
     * four barriers, the one after that wait syncs the consumers too
     * (before the next trip's dSᵀ is written), beside the ones after dSᵀ's
     * and dQᵀ's stores and the one after the engine's add of dQᵀ: 4 (3
     * without the rule) */
    tk_attention_bwd_config bc = {
        .dtype = TK_BF16, .head_dim = 128, .part = TK_ATTN_BWD_FUSED, .wgmma = 1};
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &bc, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_eq(pl.nmaps, 5); /* Q, K, V, dO and dQacc (the engine's add) */
    ck_assert(pl.stores);
    ck_assert_int_eq(synced_barriers(&pl), 4);
    tk_kernel_destroy(k);
    bc.part = TK_ATTN_BWD_DKDV; /* the deterministic one: no consumer tile, no sync */
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &bc, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(synced_barriers(&pl), 0);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* A copy-engine copy of rows [s, s + 32) of A into shared memory, s a
 * scalar parameter or (NARROW_OFFSET*) read from the table T (8 warps:
 * the producer's slice loads it); `extra` adds what changes the plan. */
enum { NARROW_STORE_OUT, NARROW_WRITES_A, NARROW_OFFSET, NARROW_OFFSET_WRITTEN };
static tk_kernel *narrow_copy(tk_ctx *ctx, int extra) {
    tk_kernel *k;
    bool table = extra == NARROW_OFFSET || extra == NARROW_OFFSET_WRITTEN;
    tk_kernel_create(ctx, "t_narrow_copy", table ? 8 : 4, &k);
    tk_value *sm = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_BF16, 2);
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 1), *s = tk_param_scalar(k, "s", TK_I64);
    tk_value *n32 = c64(k, 32), *z = c64(k, 0), *g[2] = {z, z}, *ti[1] = {z};
    if (table) s = tk_cvt(k, tk_load(k, tk_scalar_type(TK_F32), T, ti, 0.0f), TK_I64);
    tk_copy_to_shared(k, sm, tk_narrow(k, A, 0, s, n32), g, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_type row = tk_tile_type(TK_BF16, 16, 64, TK_WARP, TK_ROW);
    if (extra == NARROW_STORE_OUT) tk_copy_to_global(k, tk_narrow(k, O, 0, s, n32), g, sm);
    if (extra == NARROW_WRITES_A)
        tk_store(k, tk_narrow(k, A, 1, s, n32), g, tk_load(k, row, sm, g, 0));
    if (table) tk_store(k, O, g, tk_load(k, row, sm, g, 0));
    if (extra == NARROW_OFFSET_WRITTEN)
        tk_store(k, T, ti, tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_COL, TK_WARP, TK_ROW)));
    return finish(k);
}

/* tk_narrow and the copy engine (jit/plan.c, ops/nv/tma.c): a narrowed
 * view's copies use its root parameter's map, stores through a narrowing
 * too; a tensor written through a narrowing is written; the packed
 * sequences' fixture splits off a producer that loads the offsets and
 * narrows (not when the offsets' tensor is written). The PTX has the
 * engine's copies on sm_90a beside the cp.async they fall back to, and
 * plain cp.async on sm_80. */
START_TEST(narrow_on_the_engine) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_plan pl;
    static const struct {
        int extra, maps, producer;
    } cases[] = {
        {NARROW_STORE_OUT, 2, 0},      /* A's map, and O's for the store; 4 warps: lockstep */
        {NARROW_WRITES_A, 0, 0},       /* A written through another narrowing */
        {NARROW_OFFSET, 1, 4},         /* the producer loads the offset and narrows */
        {NARROW_OFFSET_WRITTEN, 1, 0}, /* ... not from a tensor the kernel writes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_kernel *k = narrow_copy(ctx, cases[i].extra);
        ck_assert_msg(tk_kernel_status(k) == TK_OK, "case %zu: %s", i, tk_kernel_error(k));
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_msg(pl.nmaps == cases[i].maps, "case %zu: %d maps", i, pl.nmaps);
        for (int m = 0; m < pl.nmaps; m++) ck_assert_int_eq(pl.maps[m].param, m); /* A, O */
        ck_assert_int_eq(pl.stores, cases[i].extra == NARROW_STORE_OUT);
        ck_assert_msg(pl.producer_warps == cases[i].producer, "case %zu: %d producer warps", i,
                      pl.producer_warps);
        tu_check_lowers(k);
        tk_kernel_destroy(k);
    }
    tk_kernel *k = tu_op_kernel(ctx, tu_narrow, TK_BF16);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl); /* X's map; O stored from registers */
    ck_assert(pl.nmaps == 1 && pl.maps[0].param == 0 && pl.maps[0].box_rows == 128 && !pl.stores);
    ck_assert_int_eq(pl.producer_warps, 4);
    tk_diag dg = {0};
    char *ptx = NULL;
    ck_assert_msg(tk_lower_ptx(k, "sm_90a", &ptx, &dg) == TK_OK, "%s", dg.msg);
    const char *want90a[] = {"cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                             "mbarrier.expect_tx", "cp.async.cg.shared", "setmaxnreg"};
    for (size_t i = 0; i < sizeof want90a / sizeof *want90a; i++)
        ck_assert_msg(strstr(ptx, want90a[i]), "narrow sm_90a PTX lacks %s", want90a[i]);
    free(ptx);
    ck_assert_msg(tk_lower_ptx(k, "sm_80", &ptx, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_ptr_nonnull(strstr(ptx, "cp.async.cg.shared.global"));
    ck_assert(!strstr(ptx, "cp.async.bulk") && !strstr(ptx, "mbarrier"));
    free(ptx);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, target_caps_and_plans);
    tcase_add_test(tc, tma_plan);
    tcase_add_test(tc, narrow_on_the_engine);
    tcase_add_test(tc, launch_order);
    tcase_add_test(tc, small_tile_on_the_engine);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
