/* Every op family's GPU lowering against the CPU interpreter: each case is a
 * small kernel run on both with the same random inputs and NaN-poisoned
 * outputs (so an unwritten or wrongly masked element fails), at ragged
 * shapes. Skips with one line where there is no GPU. */
#include <check.h>
#include <math.h>
#include <stdio.h>

#include "util/harness.h"

typedef struct gcase {
    const char *name;
    /* Builds the kernel; fills tensors (rank 0 = scalar slot). */
    tk_kernel *(*build)(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
    double tol;
} gcase;

/* A dense tensor of random values, or NaN-poisoned when `poison`. */
static ref_tensor tensor(tk_dtype dt, int rank, const int64_t *dims, int poison) {
    ref_tensor t = ref_tensor_new(dt, rank, dims);
    if (poison) ref_tensor_fill_all(&t, NAN);
    else ref_tensor_random(&t, -1.0, 1.0);
    return t;
}

static tk_value *c64(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

/* Row offset of this warp's 16-row band within the block's 16*warps rows. */
static tk_value *warp_row0(tk_kernel *k, int rows_per_block, int rows_per_warp) {
    tk_value *b = tk_cvt(k, tk_block_id(k, 0), TK_I64);
    tk_value *w = tk_cvt(k, tk_warp_id(k), TK_I64);
    return tk_add(k, tk_mul(k, b, c64(k, rows_per_block)), tk_mul(k, w, c64(k, rows_per_warp)));
}

static void grid_rows(tk_kernel *k, tk_value *view, int rows_per_block) {
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, view, 0), c64(k, rows_per_block)), NULL, NULL);
}

static tk_kernel *finish(tk_kernel *k) {
    if (tk_kernel_finish(k)) fprintf(stderr, "build failed: %s\n", tk_kernel_error(k));
    return k;
}

/* elementwise: every unary and binary op, broadcasts, scalars, cvt. */
static tk_kernel *k_elementwise(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "ew", 2, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *Y = tk_param_tensor(k, "Y", dt, 2);
    tk_value *O = tk_param_tensor(k, "O", dt, 2), *F = tk_param_tensor(k, "F", TK_F32, 2);
    tk_value *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *idx[2] = {warp_row0(k, 32, 16), c64(k, 0)};
    tk_type t = tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW);
    tk_value *x = tk_cvt(k, tk_load(k, t, X, idx, 0.5f), TK_F32);
    tk_value *y = tk_cvt(k, tk_load(k, t, Y, idx, -0.25f), TK_F32);
    tk_value *a = tk_add(k, tk_mul(k, x, y), tk_sub(k, x, s));
    a = tk_sub(k, a, tk_row_max(k, a));                     /* per-row broadcast */
    a = tk_add(k, a, tk_col_sum(k, y));                     /* per-col broadcast */
    a = tk_div(k, tk_exp2(k, tk_neg(k, tk_abs(k, a))), tk_add(k, tk_exp(k, y), s));
    a = tk_max(k, a, tk_min(k, tk_log2(k, tk_add(k, tk_abs(k, x), s)), tk_log(k, tk_exp(k, x))));
    a = tk_add(k, a, tk_mul(k, tk_sqrt(k, tk_abs(k, y)), tk_rsqrt(k, tk_add(k, tk_abs(k, x), s))));
    tk_value *lo = tk_cvt(k, tk_add(k, tk_cvt(k, x, dt), tk_cvt(k, y, dt)), TK_F32);
    tk_store(k, O, idx, tk_cvt(k, tk_add(k, a, lo), dt));
    tk_store(k, F, idx, a);
    grid_rows(k, X, 32);
    int64_t d[2] = {45, 50}; /* ragged in rows and cols */
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(dt, 2, d, 0);
    ts[2] = tensor(dt, 2, d, 1);
    ts[3] = tensor(TK_F32, 2, d, 1);
    ts[4] = (ref_tensor){0};
    sc[4] = tk_arg_f32(1.5f);
    *n = 5;
    return finish(k);
}

/* reductions into vectors stored to global; masks of all kinds. */
static tk_kernel *k_reduce_mask(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "red", 1, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *R = tk_param_tensor(k, "R", TK_F32, 1);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2), *M = tk_param_tensor(k, "M", TK_F32, 2);
    tk_value *off = tk_param_scalar(k, "off", TK_I64);
    tk_value *row0 = warp_row0(k, 32, 32);
    tk_value *idx[2] = {row0, c64(k, 0)};
    tk_value *x = tk_cvt(k, tk_load(k, tk_tile_type(dt, 32, 48, TK_WARP, TK_ROW), X, idx, 0.0f),
                         TK_F32);
    tk_value *r = tk_add(k, tk_row_max(k, x), tk_row_sum(k, x));
    tk_store(k, R, &row0, r);
    tk_value *cidx[2] = {tk_cvt(k, tk_block_id(k, 0), TK_I64), c64(k, 0)};
    tk_store(k, C, cidx, tk_sub(k, tk_col_max(k, x), tk_col_sum(k, x)));
    tk_value *m = tk_mask(k, x, TK_MASK_CAUSAL, tk_add(k, row0, off), c64(k, 3), -INFINITY);
    m = tk_mask(k, m, TK_MASK_COLS, c64(k, 5), c64(k, 40), -2.0f);
    m = tk_mask(k, m, TK_MASK_ROWS, row0, tk_sub(k, tk_dim(k, X, 0), c64(k, 2)), 7.0f);
    tk_store(k, M, idx, tk_exp2(k, m));
    grid_rows(k, X, 32);
    int64_t d[2] = {70, 48}, r1[1] = {70}, c2[2] = {3, 48};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(TK_F32, 1, r1, 1);
    ts[2] = tensor(TK_F32, 2, c2, 1);
    ts[3] = tensor(TK_F32, 2, d, 1);
    ts[4] = (ref_tensor){0};
    sc[4] = tk_arg_i64(-4);
    *n = 5;
    return finish(k);
}

/* All four mma kinds, with and without an accumulator, from global tiles
 * loaded in the layouts each kind needs. */
static tk_kernel *k_mma(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "mma", 1, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *B = tk_param_tensor(k, "B", dt, 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z[2] = {c64(k, 0), c64(k, 0)};
    tk_value *ar = tk_load(k, tk_tile_type(dt, 32, 48, TK_WARP, TK_ROW), A, z, 0.0f);
    tk_value *ac = tk_load(k, tk_tile_type(dt, 48, 32, TK_WARP, TK_COL), A, z, 0.0f);
    tk_value *br = tk_load(k, tk_tile_type(dt, 64, 48, TK_WARP, TK_ROW), B, z, 0.0f);
    tk_value *bc = tk_load(k, tk_tile_type(dt, 48, 64, TK_WARP, TK_COL), B, z, 0.0f);
    tk_value *c = tk_mma(k, TK_MMA_ABT, ar, br, NULL);      /* 32x64 */
    c = tk_mma(k, TK_MMA_AB, ar, bc, c);                    /* + A·B  */
    tk_value *d = tk_mma(k, TK_MMA_ATB, ac, bc, NULL);
    d = tk_mma(k, TK_MMA_ATBT, ac, br, d);
    tk_store(k, O, z, tk_sub(k, c, tk_mul(k, d, tk_const_f32(k, 0.5f))));
    int64_t da[2] = {48, 48}, db[2] = {64, 64}, dout[2] = {32, 64};
    ts[0] = tensor(dt, 2, da, 0);
    ts[1] = tensor(dt, 2, db, 0);
    ts[2] = tensor(TK_F32, 2, dout, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

/* A warpgroup-owned A times a warp-owned B, 4 warps. */
static tk_kernel *k_mma_wg(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "mma_wg", 4, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *B = tk_param_tensor(k, "B", dt, 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z[2] = {c64(k, 0), c64(k, 0)};
    tk_value *a = tk_load(k, tk_tile_type(dt, 128, 32, TK_WARPGROUP, TK_ROW), A, z, 0.0f);
    tk_value *b = tk_load(k, tk_tile_type(dt, 32, 32, TK_WARP, TK_COL), B, z, 0.0f);
    tk_value *c = tk_mma(k, TK_MMA_AB, a, b, NULL);
    tk_store(k, O, z, tk_exp(k, tk_mul(k, c, tk_const_f32(k, 0.1f))));
    int64_t da[2] = {120, 32}, db[2] = {32, 30}, dout[2] = {120, 30};
    ts[0] = tensor(dt, 2, da, 0);
    ts[1] = tensor(dt, 2, db, 0);
    ts[2] = tensor(TK_F32, 2, dout, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

/* Global -> shared (sync and async, every smem layout, multi-stage) ->
 * registers (row and col layouts) -> shared -> global, inside a k-loop
 * with a carried accumulator and a warp-role if. */
static tk_kernel *k_memory(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "mem", 4, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *P = tk_param_tensor(k, "P", TK_F32, 2);
    tk_value *ring = tk_shared(k, dt, 64, 64, TK_SMEM_SWIZZLE, 2);
    tk_value *pad = tk_shared(k, dt, 64, 64, TK_SMEM_PAD, 1);
    tk_value *plain = tk_shared(k, dt, 64, 64, TK_SMEM_PLAIN, 1);
    tk_value *row0 = tk_mul(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), c64(k, 64));
    tk_value *wrow = tk_mul(k, tk_cvt(k, tk_warp_id(k), TK_I64), c64(k, 16));
    tk_value *acc = tk_zeros(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW)), *car;
    tk_value *ncols = tk_dim(k, A, 1);
    tk_value *si[2] = {wrow, c64(k, 0)}, *z[2] = {c64(k, 0), c64(k, 0)};
    tk_value *it = tk_for_begin(k, c64(k, 0), ncols, c64(k, 64), 1, &acc, &car);
    tk_value *st = tk_stage(k, ring, tk_rem(k, tk_div(k, it, c64(k, 64)), c64(k, 2)));
    tk_value *gi[2] = {row0, it};
    tk_copy_to_shared(k, st, A, gi, 0.0f, 1);
    tk_async_commit(k);
    tk_copy_to_shared(k, pad, A, gi, -1.0f, 0);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *a = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), st, si, 0.0f);
    tk_value *bt = tk_load(k, tk_tile_type(dt, 64, 64, TK_WARP, TK_COL), pad, z, 0.0f);
    tk_value *next = tk_mma(k, TK_MMA_AB, a, bt, car);
    tk_barrier(k);
    tk_for_end(k, 1, &next, &acc);
    tk_value *even = tk_eq(k, tk_rem(k, tk_warp_id(k), tk_const_i32(k, 2)), tk_const_i32(k, 0));
    tk_value *out;
    tk_if_begin(k, even);
    tk_value *t1 = tk_mul(k, acc, tk_const_f32(k, 2.0f));
    tk_else(k, 1, &t1);
    tk_value *t2 = tk_neg(k, acc);
    tk_if_end(k, 1, &t2, &out);
    tk_store(k, plain, si, tk_cvt(k, out, dt));
    tk_barrier(k);
    tk_value *oi[2] = {row0, c64(k, 0)};
    tk_copy_to_global(k, O, oi, plain);
    tk_value *back = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), plain, si, 0.0f);
    tk_value *pi[2] = {tk_add(k, row0, wrow), c64(k, 0)};
    tk_store(k, P, pi, tk_cvt(k, back, TK_F32));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, A, 0), c64(k, 64)), NULL, NULL);
    int64_t da[2] = {100, 136}, dp[2] = {100, 64};
    ts[0] = tensor(dt, 2, da, 0);
    ts[1] = tensor(dt, 2, da, 1);
    ts[2] = tensor(TK_F32, 2, dp, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

static const gcase cases[] = {
    {"elementwise", k_elementwise, 2e-2},
    {"reduce_mask", k_reduce_mask, 1e-3},
    {"mma", k_mma, 1e-3},
    {"mma_warpgroup", k_mma_wg, 1e-3},
    {"memory_control", k_memory, 1e-2},
};

START_TEST(gpu_matches_interpreter) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const gcase *c = &cases[_i / 2];
    tk_dtype dt = _i % 2 ? TK_F16 : TK_BF16;
    ref_tensor ts[8];
    tk_arg sc[8];
    int n = 0;
    /* The kernel builds and verifies everywhere; it runs where there is a GPU. */
    tk_kernel *k = c->build(ctx, dt, ts, sc, &n);
    ck_assert_msg(tk_kernel_status(k) == TK_OK, "%s: %s", c->name, tk_kernel_error(k));
    double worst = 0;
    tk_status s = TK_OK;
    int gpu = th_gpu_or_skip(ctx) == TK_OK;
    if (gpu) {
        s = th_compare(ctx, k, n, ts, sc, &worst);
        printf("gpu %-16s %-4s rel err %.3g\n", c->name, tk_dtype_name(dt), worst);
    }
    for (int i = 0; i < n; i++)
        if (ts[i].rank) ref_tensor_free(&ts[i]);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    ck_assert_msg(s == TK_OK, "%s: %s", c->name, tk_status_name(s));
    ck_assert_msg(!gpu || worst <= c->tol, "%s %s: rel err %g > %g", c->name, tk_dtype_name(dt),
                  worst, c->tol);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, gpu_matches_interpreter, 0, 2 * (int)(sizeof cases / sizeof *cases));
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
