/* Builder and verifier tests: bad input through the public API must fail
 * with the right tk_status and a precise message, never crash or leak;
 * valid kernels must finish. The last group corrupts finished-looking IR by
 * hand (through ir/ir.h) to check that the verifier catches it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tk/tk.h"

static tk_ctx *ctx;
static tk_kernel *k;

static void setup(void) {
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_kernel_create(ctx, "t", 4, &k), TK_OK);
}

/* TK_TEST_VERBOSE=1 prints every kernel's final error, to read them. */
static void teardown(void) {
    if (getenv("TK_TEST_VERBOSE") && k && tk_kernel_status(k))
        fprintf(stderr, "%-18s %s\n", tk_status_name(tk_kernel_status(k)), tk_kernel_error(k));
    tk_kernel_destroy(k);
    k = NULL;
    tk_ctx_destroy(ctx);
    ctx = NULL;
}

/* Replaces the fixture's kernel by one with `warps` warps. */
static void rewarp(int warps) {
    tk_kernel_destroy(k);
    k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "t", warps, &k), TK_OK);
}

#define EXPECT(st, frag)                                                                      \
    do {                                                                                      \
        tk_status s_ = tk_kernel_status(k);                                                   \
        const char *e_ = tk_kernel_error(k);                                                  \
        ck_assert_msg(s_ == (st), "status %s, expected %s (error: %s)", tk_status_name(s_),   \
                      tk_status_name(st), e_);                                                \
        ck_assert_msg(strstr(e_, (frag)) != NULL, "error \"%s\" lacks \"%s\"", e_, (frag));   \
    } while (0)

#define EXPECT_FINISH(st, frag)                                                               \
    do {                                                                                      \
        ck_assert_int_eq(tk_kernel_status(k), TK_OK);                                         \
        tk_status f_ = tk_kernel_finish(k);                                                   \
        ck_assert_msg(f_ == (st), "finish: %s, expected %s (error: %s)", tk_status_name(f_),  \
                      tk_status_name(st), tk_kernel_error(k));                                \
        EXPECT(st, frag);                                                                     \
    } while (0)

#define EXPECT_CTX(call, st, frag)                                                            \
    do {                                                                                      \
        tk_status c_ = (call);                                                                \
        ck_assert_msg(c_ == (st), "%s, expected %s", tk_status_name(c_), tk_status_name(st)); \
        ck_assert_msg(strstr(tk_ctx_error(ctx), (frag)) != NULL, "ctx error \"%s\" lacks "    \
                      "\"%s\"", tk_ctx_error(ctx), (frag));                                   \
    } while (0)

#define OK_FINISH()                                                                           \
    do {                                                                                      \
        tk_status f_ = tk_kernel_finish(k);                                                   \
        ck_assert_msg(f_ == TK_OK, "finish: %s: %s", tk_status_name(f_), tk_kernel_error(k)); \
    } while (0)

/* ---- small helpers -------------------------------------------------------- */
static tk_value *ci(int v) { return tk_const_i32(k, v); }
static tk_value *cf(float v) { return tk_const_f32(k, v); }

static tk_type wtile(tk_dtype dt, int r, int c, tk_layout l) {
    return tk_tile_type(dt, r, c, TK_WARP, l);
}
static tk_value *tile(tk_dtype dt, int r, int c, tk_layout l) {
    return tk_zeros(k, wtile(dt, r, c, l));
}
static tk_value *wgtile(tk_dtype dt, int r, int c) {
    return tk_zeros(k, tk_tile_type(dt, r, c, TK_WARPGROUP, TK_ROW));
}
static tk_value *f32t(int r, int c) { return tile(TK_F32, r, c, TK_ROW); }

/* ---- kernel creation (context errors) ------------------------------------- */
START_TEST(create_null_ctx) {
    tk_kernel *kk = (tk_kernel *)1;
    ck_assert_int_eq(tk_kernel_create(NULL, "a", 4, &kk), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(kk);
}
END_TEST

START_TEST(create_null_out) {
    EXPECT_CTX(tk_kernel_create(ctx, "a", 4, NULL), TK_ERR_INVALID_ARG, "out is NULL");
}
END_TEST

START_TEST(create_null_name) {
    tk_kernel *kk;
    EXPECT_CTX(tk_kernel_create(ctx, NULL, 4, &kk), TK_ERR_INVALID_ARG, "name is NULL or empty");
    ck_assert_ptr_null(kk);
    EXPECT_CTX(tk_kernel_create(ctx, "", 4, &kk), TK_ERR_INVALID_ARG, "name is NULL or empty");
}
END_TEST

static const char *bad_names[] = {"1abc", "a-b", "a b", "gemm\n", "x.y", "\xc3\xa9"};
START_TEST(create_bad_ident) {
    tk_kernel *kk;
    EXPECT_CTX(tk_kernel_create(ctx, bad_names[_i], 4, &kk), TK_ERR_INVALID_ARG,
               "is not a C identifier");
    ck_assert_ptr_null(kk);
}
END_TEST

static const int bad_warps[] = {0, -1, 33, 1000};
START_TEST(create_bad_warps) {
    tk_kernel *kk;
    char frag[64];
    snprintf(frag, sizeof frag, "warps is %d, expected 1..32", bad_warps[_i]);
    EXPECT_CTX(tk_kernel_create(ctx, "a", bad_warps[_i], &kk), TK_ERR_INVALID_ARG, frag);
    ck_assert_ptr_null(kk);
}
END_TEST

START_TEST(null_kernel_calls) {
    char *txt = (char *)1;
    ck_assert_int_eq(tk_kernel_finish(NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_kernel_status(NULL), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_kernel_error(NULL), "kernel is NULL");
    ck_assert_int_eq(tk_kernel_print(NULL, &txt), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(txt);
    ck_assert_int_eq(tk_kernel_print(k, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(tk_add(NULL, NULL, NULL));
    ck_assert_ptr_null(tk_param_tensor(NULL, "A", TK_F32, 2));
    tk_barrier(NULL);
    tk_for_end(NULL, 0, NULL, NULL);
    tk_if_end(NULL, 0, NULL, NULL);
    tk_set_grid(NULL, NULL, NULL, NULL);
    tk_kernel_destroy(NULL);
}
END_TEST

/* ---- parameters and specs ------------------------------------------------- */
START_TEST(param_bad_ident) {
    ck_assert_ptr_null(tk_param_tensor(k, "my tensor", TK_F32, 2));
    EXPECT(TK_ERR_INVALID_ARG, "tk_param_tensor: name 'my tensor' is not a C identifier");
}
END_TEST

START_TEST(param_null_name) {
    ck_assert_ptr_null(tk_param_scalar(k, NULL, TK_I32));
    EXPECT(TK_ERR_INVALID_ARG, "tk_param_scalar: name is NULL or empty");
}
END_TEST

START_TEST(param_duplicate) {
    ck_assert_ptr_nonnull(tk_param_tensor(k, "A", TK_F32, 2));
    ck_assert_ptr_null(tk_param_scalar(k, "A", TK_I32));
    EXPECT(TK_ERR_INVALID_ARG, "parameter 'A' is declared twice");
}
END_TEST

START_TEST(param_in_region) {
    tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    ck_assert_ptr_null(tk_param_tensor(k, "A", TK_F32, 2));
    EXPECT(TK_ERR_STATE, "'A' declared inside a for/if region; declare parameters at the top");
}
END_TEST

START_TEST(param_tensor_dtype) {
    ck_assert_ptr_null(tk_param_tensor(k, "A", TK_BOOL, 2));
    EXPECT(TK_ERR_TYPE, "'A' has dtype bool (6); tensors hold");
}
END_TEST

static const int bad_ranks[] = {0, 5, -2};
START_TEST(param_tensor_rank) {
    ck_assert_ptr_null(tk_param_tensor(k, "A", TK_F32, bad_ranks[_i]));
    EXPECT(TK_ERR_INVALID_ARG, "expected 1..4");
}
END_TEST

START_TEST(param_scalar_dtype) {
    ck_assert_ptr_null(tk_param_scalar(k, "s", TK_BF16));
    EXPECT(TK_ERR_TYPE, "scalar parameters are f32, i32, i64 or bool");
}
END_TEST

START_TEST(spec_duplicate) {
    ck_assert_ptr_nonnull(tk_spec(k, "BM", 64));
    ck_assert_ptr_null(tk_spec(k, "BM", 128));
    EXPECT(TK_ERR_INVALID_ARG, "tk_spec: 'BM' is declared twice");
}
END_TEST

/* Specs are signature, like parameters: only at the top level. */
START_TEST(spec_in_for) {
    tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    ck_assert_ptr_null(tk_spec(k, "BM", 64));
    EXPECT(TK_ERR_STATE, "tk_spec: 'BM' declared inside a for/if region; declare specialization "
                         "constants at the top level");
    ck_assert_int_eq(k->nspecs, 0); /* nothing half-recorded */
}
END_TEST

START_TEST(spec_in_if) {
    tk_if_begin(k, tk_const_bool(k, 1));
    ck_assert_ptr_null(tk_spec(k, "BN", 64));
    EXPECT(TK_ERR_STATE, "tk_spec: 'BN' declared inside a for/if region");
}
END_TEST

START_TEST(spec_bad_ident) {
    ck_assert_ptr_null(tk_spec(k, "B M", 64));
    EXPECT(TK_ERR_INVALID_ARG, "tk_spec: name 'B M' is not a C identifier");
}
END_TEST

/* ---- operands ------------------------------------------------------------- */
START_TEST(null_operand) {
    ck_assert_ptr_null(tk_add(k, ci(1), NULL));
    EXPECT(TK_ERR_INVALID_ARG, "tk_add: operand 1 is NULL");
}
END_TEST

START_TEST(foreign_operand) {
    tk_kernel *k2;
    ck_assert_int_eq(tk_kernel_create(ctx, "other", 4, &k2), TK_OK);
    tk_value *x = tk_const_i32(k2, 3);
    tk_value *r = tk_mul(k, ci(1), x);
    tk_status s2 = tk_kernel_status(k2);
    tk_kernel_destroy(k2);
    ck_assert_ptr_null(r);
    EXPECT(TK_ERR_INVALID_ARG, "tk_mul: operand 1 (%1) belongs to another kernel");
    ck_assert_int_eq(s2, TK_OK);
}
END_TEST

START_TEST(closed_region_value) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_value *x = tk_add(k, iv, ci(1));
    tk_for_end(k, 0, NULL, NULL);
    ck_assert_ptr_null(tk_add(k, x, ci(2)));
    EXPECT(TK_ERR_STATE, "tk_add: operand 0 (%");
    EXPECT(TK_ERR_STATE, "is defined inside a region that is already closed");
}
END_TEST

START_TEST(else_sees_no_then_value) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_value *x = ci(1);
    tk_else(k, 0, NULL);
    ck_assert_ptr_null(tk_neg(k, x));
    EXPECT(TK_ERR_STATE, "tk_neg: operand 0");
}
END_TEST

/* ---- ids -------------------------------------------------------------------- */
START_TEST(block_id_dim) {
    ck_assert_ptr_null(tk_block_id(k, 3));
    EXPECT(TK_ERR_INVALID_ARG, "tk_block_id: dim is 3, expected 0, 1 or 2");
}
END_TEST

START_TEST(dim_not_view) {
    ck_assert_ptr_null(tk_dim(k, ci(3), 0));
    EXPECT(TK_ERR_TYPE, "tk_dim: operand is a i32; expected a tensor parameter");
}
END_TEST

START_TEST(dim_out_of_rank) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_dim(k, A, 2));
    EXPECT(TK_ERR_INVALID_ARG, "tk_dim: dim 2 of a rank-2 tensor");
}
END_TEST

/* ---- elementwise ---------------------------------------------------------- */
START_TEST(add_tile_shapes) {
    ck_assert_ptr_null(tk_add(k, f32t(16, 16), f32t(16, 32)));
    EXPECT(TK_ERR_TYPE, "tk_add: operands are a 16x16 f32 row tile (warp) and a 16x32 f32 row "
                        "tile (warp): the two types must be identical");
}
END_TEST

START_TEST(add_scalar_dtypes) {
    ck_assert_ptr_null(tk_sub(k, ci(1), cf(1.0f)));
    EXPECT(TK_ERR_TYPE, "tk_sub: operands are a i32 and a f32: scalars need one numeric dtype");
}
END_TEST

START_TEST(add_bool_scalars) {
    ck_assert_ptr_null(tk_add(k, tk_const_bool(k, 1), tk_const_bool(k, 0)));
    EXPECT(TK_ERR_TYPE, "scalars need one numeric dtype");
}
END_TEST

START_TEST(tile_int_scalar) {
    ck_assert_ptr_null(tk_mul(k, tile(TK_BF16, 16, 16, TK_ROW), ci(2)));
    EXPECT(TK_ERR_TYPE, "the scalar must be f32 or of the tile's dtype");
}
END_TEST

START_TEST(broadcast_length) {
    tk_value *v = tk_zeros(k, tk_vec_type(TK_F32, 32, TK_PER_ROW, TK_WARP, TK_ROW));
    ck_assert_ptr_null(tk_sub(k, f32t(16, 32), v));
    EXPECT(TK_ERR_SHAPE, "tk_sub: a per-row vector of length 32 does not fit a 16x32 tile "
                         "(needs 16)");
}
END_TEST

START_TEST(broadcast_layout) {
    tk_value *v = tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_COL, TK_WARP, TK_COL));
    ck_assert_ptr_null(tk_mul(k, v, f32t(16, 16)));
    EXPECT(TK_ERR_TYPE, "a broadcast vector needs the tile's dtype, owner and layout");
}
END_TEST

START_TEST(exp_int) {
    ck_assert_ptr_null(tk_exp(k, ci(1)));
    EXPECT(TK_ERR_TYPE, "tk_exp: operand is a i32; expected a float dtype");
}
END_TEST

START_TEST(add_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    ck_assert_ptr_null(tk_add(k, s, f32t(16, 16)));
    EXPECT(TK_ERR_TYPE, "elementwise ops take scalars, tiles and vectors");
}
END_TEST

START_TEST(neg_view) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_neg(k, A));
    EXPECT(TK_ERR_TYPE, "tk_neg: operand is a rank-2 f32 tensor; expected a numeric scalar");
}
END_TEST

START_TEST(cvt_tile_to_int) {
    ck_assert_ptr_null(tk_cvt(k, f32t(16, 16), TK_I32));
    EXPECT(TK_ERR_TYPE, "tiles and vectors convert among f32, bf16 and f16");
}
END_TEST

START_TEST(cvt_scalar_to_bf16) {
    ck_assert_ptr_null(tk_cvt(k, ci(1), TK_BF16));
    EXPECT(TK_ERR_TYPE, "tk_cvt: cannot convert a i32 scalar to bf16");
}
END_TEST

START_TEST(fill_bad_shape) {
    ck_assert_ptr_null(tk_zeros(k, wtile(TK_F32, 17, 16, TK_ROW)));
    EXPECT(TK_ERR_SHAPE, "a warp tile's rows must be a multiple of 16");
}
END_TEST

START_TEST(fill_wg_rows) {
    ck_assert_ptr_null(tk_zeros(k, tk_tile_type(TK_F32, 32, 16, TK_WARPGROUP, TK_ROW)));
    EXPECT(TK_ERR_SHAPE, "a warpgroup tile's rows must be a multiple of 64");
}
END_TEST

START_TEST(fill_int_tile) {
    ck_assert_ptr_null(tk_zeros(k, wtile(TK_I32, 16, 16, TK_ROW)));
    EXPECT(TK_ERR_TYPE, "register tiles and vectors hold f32, bf16 or f16, not i32");
}
END_TEST

START_TEST(fill_wg_col) {
    ck_assert_ptr_null(tk_zeros(k, tk_tile_type(TK_F32, 64, 16, TK_WARPGROUP, TK_COL)));
    EXPECT(TK_ERR_TYPE, "warpgroup tiles use the row layout");
}
END_TEST

START_TEST(fill_no_owner) {
    ck_assert_ptr_null(tk_zeros(k, tk_tile_type(TK_F32, 16, 16, TK_OWNER_NONE, TK_ROW)));
    EXPECT(TK_ERR_TYPE, "owner must be TK_WARP or TK_WARPGROUP (got 0)");
}
END_TEST

START_TEST(fill_no_layout) {
    ck_assert_ptr_null(tk_zeros(k, wtile(TK_F32, 16, 16, TK_LAYOUT_NONE)));
    EXPECT(TK_ERR_TYPE, "layout must be TK_ROW or TK_COL (got 0)");
}
END_TEST

START_TEST(fill_value_tile) {
    ck_assert_ptr_null(tk_fill(k, wtile(TK_F32, 16, 16, TK_ROW), f32t(16, 16)));
    EXPECT(TK_ERR_TYPE, "tk_fill: the fill value must be a numeric scalar");
}
END_TEST

START_TEST(zeros_scalar_type) {
    ck_assert_ptr_null(tk_zeros(k, tk_scalar_type(TK_F32)));
    EXPECT(TK_ERR_TYPE, "the requested type (f32) is not a register tile or vector");
}
END_TEST

START_TEST(vec_bad_axis) {
    ck_assert_ptr_null(tk_zeros(k, tk_vec_type(TK_F32, 16, TK_AXIS_NONE, TK_WARP, TK_ROW)));
    EXPECT(TK_ERR_TYPE, "vector axis must be TK_PER_ROW or TK_PER_COL");
}
END_TEST

START_TEST(vec_bad_length) {
    ck_assert_ptr_null(tk_zeros(k, tk_vec_type(TK_F32, 24, TK_PER_ROW, TK_WARP, TK_ROW)));
    EXPECT(TK_ERR_SHAPE, "vector length 24 is not a positive multiple of 16");
}
END_TEST

/* ---- scalar ops ----------------------------------------------------------- */
START_TEST(rem_float) {
    ck_assert_ptr_null(tk_rem(k, cf(1), cf(2)));
    EXPECT(TK_ERR_TYPE, "tk_rem: operands are f32 and f32; expected two i32 or two i64");
}
END_TEST

START_TEST(ceil_div_mixed) {
    ck_assert_ptr_null(tk_ceil_div(k, ci(1), tk_const_i64(k, 2)));
    EXPECT(TK_ERR_TYPE, "tk_ceil_div: operands are i32 and i64");
}
END_TEST

START_TEST(lt_bool) {
    ck_assert_ptr_null(tk_lt(k, tk_const_bool(k, 1), tk_const_bool(k, 0)));
    EXPECT(TK_ERR_TYPE, "tk_lt: cannot compare bool with bool");
}
END_TEST

START_TEST(and_ints) {
    ck_assert_ptr_null(tk_and(k, ci(1), ci(0)));
    EXPECT(TK_ERR_TYPE, "tk_and: operands are i32 and i32; expected bool and bool");
}
END_TEST

START_TEST(select_cond) {
    ck_assert_ptr_null(tk_select(k, ci(1), ci(2), ci(3)));
    EXPECT(TK_ERR_TYPE, "tk_select: condition is i32; expected bool");
}
END_TEST

START_TEST(select_branches) {
    ck_assert_ptr_null(tk_select(k, tk_const_bool(k, 1), ci(2), tk_const_i64(k, 3)));
    EXPECT(TK_ERR_TYPE, "branches are i32 and i64; they must match");
}
END_TEST

START_TEST(scalar_op_tile) {
    ck_assert_ptr_null(tk_eq(k, f32t(16, 16), cf(0)));
    EXPECT(TK_ERR_TYPE, "tk_eq: operand 0 is a 16x16 f32 row tile (warp); expected a scalar");
}
END_TEST

/* ---- mma -------------------------------------------------------------------- */
START_TEST(mma_inner) {
    tk_value *a = tile(TK_BF16, 16, 32, TK_ROW), *b = tile(TK_BF16, 16, 16, TK_COL);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, a, b, NULL));
    EXPECT(TK_ERR_SHAPE, "tk_mma: A*B: A is a 16x32 bf16 row tile (warp), B is a 16x16 bf16 col "
                         "tile (warp): inner dimensions 32 and 16 differ");
}
END_TEST

START_TEST(mma_layout) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_BF16, 16, 16, TK_ROW);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, a, b, NULL));
    EXPECT(TK_ERR_TYPE, "A*B needs A in row layout and B in col layout");
}
END_TEST

START_TEST(mma_layout_atb) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_BF16, 16, 16, TK_COL);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_ATB, a, b, NULL));
    EXPECT(TK_ERR_TYPE, "A^T*B needs A in col layout and B in col layout");
}
END_TEST

START_TEST(mma_f32_inputs) {
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, f32t(16, 16), tile(TK_F32, 16, 16, TK_COL), NULL));
    EXPECT(TK_ERR_TYPE, "inputs must both be bf16 or both f16");
}
END_TEST

START_TEST(mma_mixed_inputs) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_F16, 16, 16, TK_COL);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, a, b, NULL));
    EXPECT(TK_ERR_TYPE, "inputs must both be bf16 or both f16");
}
END_TEST

START_TEST(mma_b_warpgroup) {
    tk_value *a = tile(TK_BF16, 16, 64, TK_ROW), *b = wgtile(TK_BF16, 64, 64);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_ABT, a, b, NULL));
    EXPECT(TK_ERR_TYPE, "B must be owned by a warp");
}
END_TEST

START_TEST(mma_c_shape) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_BF16, 16, 32, TK_COL);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, a, b, f32t(16, 16)));
    EXPECT(TK_ERR_SHAPE, "C is a 16x16 f32 row tile (warp); A*B of these operands makes a 16x32 "
                         "f32 row tile (warp)");
}
END_TEST

START_TEST(mma_c_dtype) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_BF16, 16, 16, TK_COL);
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, a, b, tile(TK_BF16, 16, 16, TK_ROW)));
    EXPECT(TK_ERR_SHAPE, "C is a 16x16 bf16 row tile (warp)");
}
END_TEST

START_TEST(mma_not_tiles) {
    ck_assert_ptr_null(tk_mma(k, TK_MMA_AB, cf(1), tile(TK_BF16, 16, 16, TK_COL), NULL));
    EXPECT(TK_ERR_TYPE, "A is a f32, B is a 16x16 bf16 col tile (warp): both must be register");
}
END_TEST

START_TEST(mma_bad_kind) {
    tk_value *a = tile(TK_BF16, 16, 16, TK_ROW), *b = tile(TK_BF16, 16, 16, TK_COL);
    ck_assert_ptr_null(tk_mma(k, (tk_mma_kind)9, a, b, NULL));
    EXPECT(TK_ERR_INVALID_ARG, "tk_mma: kind is 9; expected a tk_mma_kind");
}
END_TEST

/* ---- reductions and masks ------------------------------------------------- */
START_TEST(row_max_vec) {
    tk_value *v = tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW));
    ck_assert_ptr_null(tk_row_max(k, v));
    EXPECT(TK_ERR_TYPE, "tk_row_max: operand is a 16 f32 per-row vec of row tiles (warp); "
                        "expected a register tile");
}
END_TEST

START_TEST(row_sum_scalar) {
    ck_assert_ptr_null(tk_row_sum(k, cf(1)));
    EXPECT(TK_ERR_TYPE, "tk_row_sum: operand is a f32; expected a register tile");
}
END_TEST

START_TEST(col_max_warpgroup) {
    ck_assert_ptr_null(tk_col_max(k, wgtile(TK_F32, 64, 16)));
    EXPECT(TK_ERR_TYPE, "column reductions of warpgroup tiles would cross warps");
}
END_TEST

START_TEST(mask_kind) {
    ck_assert_ptr_null(tk_mask(k, f32t(16, 16), (tk_mask_kind)7, ci(0), ci(0), -INFINITY));
    EXPECT(TK_ERR_INVALID_ARG, "tk_mask: kind is 7; expected a tk_mask_kind");
}
END_TEST

START_TEST(mask_float_bound) {
    ck_assert_ptr_null(tk_mask(k, f32t(16, 16), TK_MASK_COLS, ci(0), cf(3), 0.0f));
    EXPECT(TK_ERR_TYPE, "tk_mask: b is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(mask_lane_bound) {
    ck_assert_ptr_null(tk_mask(k, f32t(16, 16), TK_MASK_ROWS, tk_lane_id(k), ci(3), 0.0f));
    EXPECT(TK_ERR_SCOPE, "tk_mask: operand 1 (%");
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp, but the op runs once per "
                         "warp/warpgroup");
}
END_TEST

/* ---- memory ----------------------------------------------------------------- */
START_TEST(load_null_idx) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, NULL, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: idx is NULL; expected 2 indices");
}
END_TEST

START_TEST(load_missing_index) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3);
    tk_value *idx[3] = {ci(0), ci(0), NULL}; /* written for a rank-2 tensor */
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load_g2r: operand 3 is NULL");
}
END_TEST

START_TEST(load_index_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), cf(16)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load_g2r: index 1 is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(load_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_BF16, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "memory holds f32 but the register value is bf16; convert with tk_cvt");
}
END_TEST

START_TEST(load_tile_rank1) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 1);
    tk_value *idx[1] = {ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_SHAPE, "a tile needs a tensor of rank >= 2, got rank 1");
}
END_TEST

START_TEST(load_s2r_too_big) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 32, 16, TK_ROW), s, idx, 0));
    EXPECT(TK_ERR_SHAPE, "tk_load_s2r: a 32x16 tile does not fit a 16x16 shared tile");
}
END_TEST

START_TEST(load_multistage) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), s, idx, 0));
    EXPECT(TK_ERR_TYPE, "the shared operand has 2 stages; pick one with tk_stage");
}
END_TEST

START_TEST(load_from_tile) {
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), f32t(16, 16), idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load: the memory operand is a 16x16 f32 row tile (warp); expected a "
                        "tensor parameter or a shared tile");
}
END_TEST

START_TEST(load_lane_index) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {tk_lane_id(k), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_SCOPE, "tk_load_g2r: operand 1");
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp");
}
END_TEST

START_TEST(store_vec_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, s, idx, tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW)));
    EXPECT(TK_ERR_TYPE, "tk_store_r2s: shared memory moves whole tiles, not vectors");
}
END_TEST

START_TEST(store_scalar) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, A, idx, cf(1));
    EXPECT(TK_ERR_TYPE, "tk_store_r2g: the stored value is a f32; expected a register tile");
}
END_TEST

START_TEST(smem_overflow) {
    ck_assert_ptr_nonnull(tk_shared(k, TK_F32, 128, 256, TK_SMEM_PLAIN, 1));
    ck_assert_ptr_null(tk_shared(k, TK_F32, 128, 256, TK_SMEM_PLAIN, 1));
    EXPECT(TK_ERR_SHAPE, "tk_shared: the kernel would use 262144 bytes of shared memory; the "
                         "limit is 232448");
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 131072);
}
END_TEST

START_TEST(shared_bad_shape) {
    ck_assert_ptr_null(tk_shared(k, TK_F32, 20, 16, TK_SMEM_PLAIN, 1));
    EXPECT(TK_ERR_SHAPE, "a 20x16 shared tile: rows and cols must be multiples of 16 up to 1024");
}
END_TEST

START_TEST(shared_in_for) {
    tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    ck_assert_ptr_null(tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1));
    EXPECT(TK_ERR_STATE, "shared memory is allocated at the top level of the kernel");
}
END_TEST

START_TEST(shared_int) {
    ck_assert_ptr_null(tk_shared(k, TK_I32, 16, 16, TK_SMEM_PLAIN, 1));
    EXPECT(TK_ERR_TYPE, "shared tiles hold f32, bf16 or f16, not i32");
}
END_TEST

START_TEST(shared_count) {
    ck_assert_ptr_null(tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 0));
    EXPECT(TK_ERR_INVALID_ARG, "count is 0; expected 1..16");
}
END_TEST

START_TEST(shared_layout) {
    ck_assert_ptr_null(tk_shared(k, TK_F32, 16, 16, (tk_smem_layout)9, 1));
    EXPECT(TK_ERR_INVALID_ARG, "layout 9 is not a tk_smem_layout");
}
END_TEST

START_TEST(stage_single) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    ck_assert_ptr_null(tk_stage(k, s, ci(0)));
    EXPECT(TK_ERR_TYPE, "tk_stage: the shared operand has a single stage");
}
END_TEST

START_TEST(stage_float_index) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 2);
    ck_assert_ptr_null(tk_stage(k, s, cf(0)));
    EXPECT(TK_ERR_TYPE, "tk_stage: index 0 is a f32");
}
END_TEST

START_TEST(async_fill) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_shared(k, s, A, idx, -1.0f, 1);
    EXPECT(TK_ERR_INVALID_ARG, "tk_copy_g2s: an asynchronous copy fills out-of-range elements "
                               "with 0, not -1");
}
END_TEST

START_TEST(copy_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_shared(k, s, A, idx, 0, 0);
    EXPECT(TK_ERR_TYPE, "tk_copy_g2s: memory holds bf16 but the register value is f32");
}
END_TEST

START_TEST(copy_warp_index) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {tk_mul(k, tk_warp_id(k), ci(16)), ci(0)};
    tk_copy_to_global(k, A, idx, s);
    EXPECT(TK_ERR_SCOPE, "varies across warps, but the op runs once per block");
}
END_TEST

START_TEST(copy_to_global_stages) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 3);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_global(k, A, idx, s);
    EXPECT(TK_ERR_TYPE, "tk_copy_s2g: the shared operand has 3 stages");
}
END_TEST

START_TEST(async_wait_range) {
    tk_async_wait(k, 9);
    EXPECT(TK_ERR_INVALID_ARG, "tk_async_wait: pending is 9; expected 0..8");
}
END_TEST

START_TEST(cvt_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    ck_assert_ptr_null(tk_cvt(k, s, TK_BF16));
    EXPECT(TK_ERR_TYPE, "tk_cvt: cannot convert a 16x16 f32 plain shared");
}
END_TEST

START_TEST(dim_negative) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_dim(k, A, -1));
    EXPECT(TK_ERR_INVALID_ARG, "tk_dim: dim -1 of a rank-2 tensor");
}
END_TEST

START_TEST(stage_not_smem) {
    ck_assert_ptr_null(tk_stage(k, f32t(16, 16), ci(0)));
    EXPECT(TK_ERR_TYPE, "tk_stage: the shared operand is a 16x16 f32 row tile (warp); expected a "
                        "single-stage shared tile");
}
END_TEST

START_TEST(load_s2r_dtype) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_BF16, 16, 16, TK_ROW), s, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load_s2r: memory holds f32 but the register value is bf16");
}
END_TEST

START_TEST(load_bad_type) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, tk_scalar_type(TK_F32), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load_g2r: the requested type (f32) is not a register tile or vector");
}
END_TEST

START_TEST(store_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, A, idx, f32t(16, 16));
    EXPECT(TK_ERR_TYPE, "tk_store_r2g: memory holds bf16 but the register value is f32");
}
END_TEST

START_TEST(store_null_dst) {
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, NULL, idx, f32t(16, 16));
    EXPECT(TK_ERR_INVALID_ARG, "tk_store: the memory operand is NULL");
}
END_TEST

START_TEST(copy_rank1) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 1);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[1] = {ci(0)};
    tk_copy_to_shared(k, s, A, idx, 0, 0);
    EXPECT(TK_ERR_SHAPE, "tk_copy_g2s: a tile needs a tensor of rank >= 2, got rank 1");
}
END_TEST

START_TEST(grid_foreign) {
    tk_kernel *k2;
    ck_assert_int_eq(tk_kernel_create(ctx, "other", 4, &k2), TK_OK);
    tk_set_grid(k, NULL, NULL, tk_const_i32(k2, 4));
    tk_kernel_destroy(k2);
    EXPECT(TK_ERR_INVALID_ARG, "tk_set_grid: operand 2 (%1) belongs to another kernel");
}
END_TEST

START_TEST(for_too_many_carried) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), ci(4), ci(1), 65, (tk_value *[65]){0},
                                    (tk_value *[65]){0}));
    EXPECT(TK_ERR_INVALID_ARG, "tk_for_begin: n is 65");
}
END_TEST

/* ---- control flow ----------------------------------------------------------- */
START_TEST(for_mixed_dtypes) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), tk_const_i64(k, 8), ci(1), 0, NULL, NULL));
    EXPECT(TK_ERR_TYPE, "tk_for: lo, hi and step have dtypes i32, i64, i32; they must match");
}
END_TEST

START_TEST(for_float_bound) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), ci(8), cf(1), 0, NULL, NULL));
    EXPECT(TK_ERR_TYPE, "tk_for: step is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(for_lane_bound) {
    ck_assert_ptr_null(tk_for_begin(k, tk_lane_id(k), ci(32), ci(1), 0, NULL, NULL));
    EXPECT(TK_ERR_SCOPE, "tk_for: lo (%");
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp; control flow must be uniform");
}
END_TEST

START_TEST(for_carry_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1), *c;
    ck_assert_ptr_null(tk_for_begin(k, ci(0), ci(8), ci(1), 1, &s, &c));
    EXPECT(TK_ERR_TYPE, "loop-carried value 0 is a memory handle");
}
END_TEST

START_TEST(for_bad_n) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), ci(8), ci(1), 1, NULL, NULL));
    EXPECT(TK_ERR_INVALID_ARG, "tk_for_begin: n is 1 with init NULL and carried NULL");
}
END_TEST

START_TEST(for_end_type) {
    tk_value *acc = f32t(16, 16), *c;
    tk_for_begin(k, ci(0), ci(8), ci(1), 1, &acc, &c);
    tk_value *bad = tk_cvt(k, c, TK_BF16), *r;
    tk_for_end(k, 1, &bad, &r);
    EXPECT(TK_ERR_TYPE, "tk_for_end: value 0 is a 16x16 bf16 row tile (warp), expected a 16x16 "
                        "f32 row tile (warp)");
}
END_TEST

START_TEST(for_end_count) {
    tk_for_begin(k, ci(0), ci(8), ci(1), 0, NULL, NULL);
    tk_value *x = ci(1), *r;
    tk_for_end(k, 1, &x, &r);
    EXPECT(TK_ERR_INVALID_ARG, "tk_for_end: 1 values given, the for carries 0");
}
END_TEST

START_TEST(for_end_less_uniform) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), ci(8), ci(1), 1, &init, &c);
    tk_value *next = tk_add(k, c, tk_warp_id(k));
    tk_for_end(k, 1, &next, &r);
    EXPECT(TK_ERR_SCOPE, "tk_for_end: next value 0 (%");
    EXPECT(TK_ERR_SCOPE, "is less uniform than the value it carries");
}
END_TEST

START_TEST(for_end_without_for) {
    tk_for_end(k, 0, NULL, NULL);
    EXPECT(TK_ERR_STATE, "tk_for_end: the innermost open region is the kernel body, not a 'for'");
}
END_TEST

START_TEST(if_end_closing_for) {
    tk_for_begin(k, ci(0), ci(8), ci(1), 0, NULL, NULL);
    tk_if_end(k, 0, NULL, NULL);
    EXPECT(TK_ERR_STATE, "tk_if_end: the innermost open region is for, not a 'if'");
}
END_TEST

START_TEST(else_without_if) {
    tk_else(k, 0, NULL);
    EXPECT(TK_ERR_STATE, "tk_else: the innermost open region is the kernel body");
}
END_TEST

START_TEST(finish_open_for) {
    tk_for_begin(k, ci(0), ci(8), ci(1), 0, NULL, NULL);
    tk_if_begin(k, tk_const_bool(k, 1));
    ck_assert_int_eq(tk_kernel_finish(k), TK_ERR_STATE);
    EXPECT(TK_ERR_STATE, "2 unclosed region(s); innermost is a 'if'");
}
END_TEST

START_TEST(if_cond_int) {
    tk_if_begin(k, ci(1));
    EXPECT(TK_ERR_TYPE, "tk_if: cond is a i32; expected a bool scalar");
}
END_TEST

START_TEST(if_lane_cond) {
    tk_if_begin(k, tk_eq(k, tk_lane_id(k), ci(0)));
    EXPECT(TK_ERR_SCOPE, "tk_if: cond (%");
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp");
}
END_TEST

START_TEST(if_no_else_yield) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_value *x = ci(1), *r;
    tk_if_end(k, 1, &x, &r);
    EXPECT(TK_ERR_STATE, "tk_if_end: an if without else cannot yield values (1 given)");
}
END_TEST

START_TEST(if_else_type) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_value *a = ci(1), *r;
    tk_else(k, 1, &a);
    tk_value *b = tk_const_i64(k, 2);
    tk_if_end(k, 1, &b, &r);
    EXPECT(TK_ERR_TYPE, "tk_if_end: value 0 is a i64, expected a i32");
}
END_TEST

START_TEST(if_else_count) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_value *a = ci(1);
    tk_else(k, 1, &a);
    tk_if_end(k, 0, NULL, NULL);
    EXPECT(TK_ERR_INVALID_ARG, "tk_if_end: 0 values given, the if carries 1");
}
END_TEST

START_TEST(double_else) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_else(k, 0, NULL);
    tk_else(k, 0, NULL);
    EXPECT(TK_ERR_STATE, "tk_else: this if (op #2) already has an else");
}
END_TEST

START_TEST(barrier_divergent_if) {
    tk_value *cond = tk_eq(k, tk_warp_id(k), ci(0));
    tk_if_begin(k, cond);
    tk_barrier(k);
    tk_if_end(k, 0, NULL, NULL);
    char frag[160];
    snprintf(frag, sizeof frag, "tk_barrier (op #5) is inside an if on %%%u, which differs "
             "between warps: every thread of the block must reach a barrier", 3u);
    EXPECT_FINISH(TK_ERR_SCOPE, frag);
}
END_TEST

START_TEST(barrier_nested_divergent_if) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *cond = tk_lt(k, tk_warpgroup_id(k), ci(1));
    tk_if_begin(k, cond);
    tk_for_begin(k, tk_const_i64(k, 0), tk_dim(k, A, 0), tk_const_i64(k, 16), 0, NULL, NULL);
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_barrier(k);
    tk_if_end(k, 0, NULL, NULL);
    tk_for_end(k, 0, NULL, NULL);
    tk_if_end(k, 0, NULL, NULL);
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_barrier (op #");
    EXPECT(TK_ERR_SCOPE, "which differs between warps: every thread of the block must reach");
}
END_TEST

START_TEST(copy_in_divergent_for) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_for_begin(k, ci(0), tk_warp_id(k), ci(1), 0, NULL, NULL);
    tk_copy_to_shared(k, s, A, idx, 0, 0);
    tk_for_end(k, 0, NULL, NULL);
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_copy_g2s (op #");
    EXPECT(TK_ERR_SCOPE, "whose hi %");
    EXPECT(TK_ERR_SCOPE, "differs between warps: every thread of the block must reach a "
                         "copy_g2s equally often");
}
END_TEST

/* The trip count of a loop with warp-varying bounds differs between warps,
 * so its results do too, even when init and next are block-uniform. */
START_TEST(barrier_under_loop_result) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), tk_warp_id(k), ci(1), 1, &init, &c);
    tk_value *next = tk_add(k, c, ci(1));
    tk_for_end(k, 1, &next, &r);
    tk_if_begin(k, tk_eq(k, r, ci(2)));
    tk_barrier(k);
    tk_if_end(k, 0, NULL, NULL);
    EXPECT_FINISH(TK_ERR_SCOPE, "which differs between warps: every thread of the block must "
                                "reach a barrier");
}
END_TEST

START_TEST(warpgroup_needs_4_warps) {
    rewarp(6);
    wgtile(TK_F32, 64, 16);
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_fill (op #2) makes a 64x16 f32 row tile (warpgroup), but the "
                                "kernel has 6 warps: warpgroup tiles need a multiple of 4 warps");
}
END_TEST

/* ---- grid --------------------------------------------------------------------- */
/* tk_set_grid rejects what the host cannot evaluate at the call itself. */
START_TEST(grid_block_id) {
    tk_value *b = tk_block_id(k, 0);
    tk_set_grid(k, tk_add(k, b, ci(1)), NULL, NULL);
    EXPECT(TK_ERR_SCOPE, "tk_set_grid: dimension 0: the grid depends on op #1 (block_id), which "
                         "the host cannot evaluate");
    ck_assert_ptr_null(k->grid[0]);
}
END_TEST

START_TEST(grid_lane) {
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    tk_set_grid(k, n, tk_max(k, n, tk_lane_id(k)), NULL);
    EXPECT(TK_ERR_SCOPE, "tk_set_grid: dimension 1: the grid depends on op #1 (lane_id)");
}
END_TEST

START_TEST(grid_loop_result) {
    tk_value *init = ci(1), *c, *r;
    tk_for_begin(k, ci(0), ci(4), ci(1), 1, &init, &c);
    tk_value *next = tk_mul(k, c, ci(2));
    tk_for_end(k, 1, &next, &r);
    tk_set_grid(k, r, NULL, NULL);
    EXPECT(TK_ERR_SCOPE, "(for), which the host cannot evaluate");
}
END_TEST

/* Deep in the chain, and behind a dim: only parameters, constants and dims
 * of tensor parameters are leaves. */
START_TEST(grid_deep_exp) {
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    tk_value *e = tk_cvt(k, tk_exp(k, tk_cvt(k, n, TK_F32)), TK_I32);
    tk_set_grid(k, tk_add(k, tk_mul(k, n, ci(2)), e), NULL, NULL);
    EXPECT(TK_ERR_SCOPE, "tk_set_grid: dimension 0: the grid depends on op #2 (exp), which the "
                         "host cannot evaluate");
}
END_TEST

START_TEST(grid_float) {
    tk_set_grid(k, NULL, cf(2), NULL);
    EXPECT(TK_ERR_TYPE, "tk_set_grid: dimension 1 is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(grid_in_region) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_set_grid(k, NULL, NULL, iv);
    EXPECT(TK_ERR_STATE, "tk_set_grid: dimension 2 is computed inside a region");
}
END_TEST

/* ---- builder state ------------------------------------------------------------- */
START_TEST(ops_after_finish) {
    ci(1);
    OK_FINISH();
    ck_assert_int_eq(tk_kernel_finish(k), TK_OK); /* finishing twice is fine */
    ck_assert_ptr_null(tk_const_i32(k, 2));
    EXPECT(TK_ERR_STATE, "tk_const: the kernel is finished; it can no longer change");
}
END_TEST

START_TEST(param_after_finish) {
    OK_FINISH();
    ck_assert_ptr_null(tk_param_scalar(k, "n", TK_I32));
    EXPECT(TK_ERR_STATE, "tk_param_scalar: the kernel is finished");
}
END_TEST

START_TEST(sticky_first_error) {
    tk_value *a = ci(1);
    ck_assert_ptr_null(tk_add(k, a, cf(2)));
    const char *first = "tk_add: operands are a i32 and a f32";
    EXPECT(TK_ERR_TYPE, first);
    /* Later calls, valid or not, return NULL and leave the first message. */
    ck_assert_ptr_null(tk_const_i32(k, 3));
    ck_assert_ptr_null(tk_add(k, a, a));
    ck_assert_ptr_null(tk_param_tensor(k, "A", TK_F32, 9));
    ck_assert_ptr_null(tk_spec(k, "S", 1));
    ck_assert_ptr_null(tk_for_begin(k, a, a, a, 0, NULL, NULL));
    tk_for_end(k, 0, NULL, NULL);
    tk_if_begin(k, NULL);
    tk_barrier(k);
    tk_set_grid(k, a, a, a);
    ck_assert_int_eq(tk_kernel_finish(k), TK_ERR_TYPE);
    EXPECT(TK_ERR_TYPE, first);
    ck_assert_ptr_null(k->grid[0]);
}
END_TEST

/* ---- valid kernels -------------------------------------------------------------- */
/* A pipelined bf16 GEMM: 2-stage shared ring, cp.async, mma, f32 out. */
static void build_gemm(void) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *B = tk_param_tensor(k, "B", TK_BF16, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2);
    tk_value *BM = tk_spec(k, "BM", 64), *BN = tk_spec(k, "BN", 64), *BK = tk_spec(k, "BK", 32);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 32, TK_SMEM_SWIZZLE, 2);
    tk_value *sB = tk_shared(k, TK_BF16, 32, 64, TK_SMEM_SWIZZLE, 2);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, C, 1), BN), tk_ceil_div(k, tk_dim(k, C, 0), BM), NULL);
    tk_value *row = tk_mul(k, tk_cvt(k, tk_block_id(k, 1), TK_I64), BM);
    tk_value *col = tk_mul(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), BN);
    tk_value *wr = tk_mul(k, tk_cvt(k, tk_warp_id(k), TK_I64), tk_const_i64(k, 16));
    tk_value *z = tk_const_i64(k, 0), *one = tk_const_i64(k, 1), *two = tk_const_i64(k, 2);
    tk_value *acc0 = tk_zeros(k, wtile(TK_F32, 16, 64, TK_ROW)), *acc, *res;
    tk_value *kt = tk_for_begin(k, z, tk_ceil_div(k, tk_dim(k, A, 1), BK), one, 1, &acc0, &acc);
    tk_value *st = tk_rem(k, kt, two), *k0 = tk_mul(k, kt, BK);
    tk_value *a = tk_stage(k, sA, st), *b = tk_stage(k, sB, st);
    tk_copy_to_shared(k, a, A, (tk_value *[]){row, k0}, 0, 1);
    tk_copy_to_shared(k, b, B, (tk_value *[]){k0, col}, 0, 1);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *ta = tk_load(k, wtile(TK_BF16, 16, 32, TK_ROW), a, (tk_value *[]){wr, z}, 0);
    tk_value *tb = tk_load(k, wtile(TK_BF16, 32, 64, TK_COL), b, (tk_value *[]){z, z}, 0);
    tk_value *next = tk_mma(k, TK_MMA_AB, ta, tb, acc);
    tk_barrier(k);
    tk_for_end(k, 1, &next, &res);
    tk_store(k, C, (tk_value *[]){tk_add(k, row, wr), col}, res);
}

START_TEST(valid_gemm) {
    build_gemm();
    OK_FINISH();
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 2 * 4096 + 2 * 4096);
    ck_assert_str_eq(tk_kernel_name(k), "t");
    ck_assert_int_eq(tk_kernel_warps(k), 4);
}
END_TEST

/* Softmax-like row ops, masks, broadcasts and an if/else with yields. */
START_TEST(valid_softmax) {
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 3), *n = tk_param_scalar(k, "n", TK_I64);
    tk_value *scale = tk_param_scalar(k, "scale", TK_F32);
    tk_value *h = tk_cvt(k, tk_block_id(k, 1), TK_I64), *z = tk_const_i64(k, 0);
    tk_value *r0 = tk_mul(k, tk_cvt(k, tk_warp_id(k), TK_I64), tk_const_i64(k, 16));
    tk_value *x = tk_load(k, wtile(TK_F32, 16, 64, TK_ROW), X, (tk_value *[]){h, r0, z}, -INFINITY);
    x = tk_mask(k, tk_mul(k, x, scale), TK_MASK_CAUSAL, r0, z, -INFINITY);
    x = tk_mask(k, x, TK_MASK_COLS, z, n, -INFINITY);
    tk_value *m = tk_row_max(k, x), *e = tk_exp2(k, tk_sub(k, x, m));
    tk_value *y = tk_div(k, e, tk_row_sum(k, e)), *res;
    tk_if_begin(k, tk_gt(k, n, tk_const_i64(k, 32)));
    tk_value *t = tk_cvt(k, tk_cvt(k, y, TK_BF16), TK_F32);
    tk_else(k, 1, &t);
    tk_value *u = tk_add(k, y, tk_col_sum(k, y));
    tk_if_end(k, 1, &u, &res);
    tk_store(k, X, (tk_value *[]){h, r0, z}, res);
    tk_set_grid(k, NULL, tk_dim(k, X, 0), NULL);
    OK_FINISH();
}
END_TEST

/* Warpgroup tiles with 8 warps; warp-role ifs; barriers under block-uniform
 * control flow. */
START_TEST(valid_warpgroup) {
    rewarp(8);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z = ci(0), *r = tk_mul(k, tk_warpgroup_id(k), ci(64));
    tk_value *a = tk_load(k, tk_tile_type(TK_BF16, 64, 32, TK_WARPGROUP, TK_ROW), A,
                          (tk_value *[]){r, z}, 0);
    tk_value *b = tk_load(k, wtile(TK_BF16, 64, 32, TK_ROW), A, (tk_value *[]){z, z}, 0);
    tk_value *c = tk_mma(k, TK_MMA_ABT, a, b, NULL);
    c = tk_sub(k, c, tk_row_max(k, c));
    tk_if_begin(k, tk_eq(k, tk_warpgroup_id(k), ci(0)));
    tk_store(k, O, (tk_value *[]){r, z}, c);
    tk_if_end(k, 0, NULL, NULL);
    tk_if_begin(k, tk_lt(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), tk_dim(k, O, 0)));
    tk_barrier(k);
    tk_if_end(k, 0, NULL, NULL);
    tk_for_begin(k, z, ci(3), ci(1), 0, NULL, NULL);
    tk_barrier(k);
    tk_for_end(k, 0, NULL, NULL);
    OK_FINISH();
}
END_TEST

/* Grid from host-evaluable expressions over params, dims and specs. */
START_TEST(valid_grid_expr) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *n = tk_param_scalar(k, "n", TK_I32);
    tk_value *S = tk_spec(k, "S", 3);
    tk_value *big = tk_gt(k, n, ci(100));
    tk_value *gx = tk_select(k, big, tk_ceil_div(k, n, ci(64)), tk_rem(k, n, ci(7)));
    tk_value *gy = tk_min(k, tk_dim(k, A, 0), tk_add(k, S, tk_cvt(k, n, TK_I64)));
    tk_set_grid(k, gx, gy, tk_const_i64(k, 2));
    OK_FINISH();
}
END_TEST

START_TEST(valid_empty) {
    OK_FINISH();
    char *txt;
    ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
    ck_assert_str_eq(txt, "kernel t warps=4 smem=0\n  grid (1, 1, 1)\n");
    tk_free(txt);
}
END_TEST

/* ---- corrupted IR: what the verifier catches that the builder cannot ------- */
static tk_op *def_of(tk_value *v) { return v->def; }

START_TEST(corrupt_result_type) {
    tk_value *s = tk_add(k, f32t(16, 16), f32t(16, 16));
    s->type.dtype = TK_BF16;
    EXPECT_FINISH(TK_ERR_TYPE, "records its result as a 16x16 bf16 row tile (warp), but its type "
                               "rule gives a 16x16 f32 row tile (warp)");
    EXPECT(TK_ERR_TYPE, "tk_add (op #");
}
END_TEST

START_TEST(corrupt_use_before_def) {
    tk_value *a = ci(1), *b = ci(2), *s = tk_add(k, a, b);
    def_of(s)->opnds[1] = cf(1);
    EXPECT_FINISH(TK_ERR_STATE, "tk_add (op #3) uses %4 (operand 1) before it is defined");
}
END_TEST

START_TEST(corrupt_operand_type) {
    tk_value *a = ci(1), *f = cf(2), *s = tk_add(k, a, a);
    def_of(s)->opnds[1] = f;
    EXPECT_FINISH(TK_ERR_TYPE, "tk_add (op #3) fails its type rule: operands are a i32 and a f32");
}
END_TEST

START_TEST(corrupt_closed_use) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_value *in = tk_add(k, iv, iv);
    tk_for_end(k, 0, NULL, NULL);
    tk_value *out = tk_add(k, ci(5), ci(6));
    def_of(out)->opnds[0] = in;
    char frag[128];
    snprintf(frag, sizeof frag, "uses %%%u (operand 0), which is defined inside a region that is "
             "closed here", in->id);
    EXPECT_FINISH(TK_ERR_STATE, frag);
}
END_TEST

START_TEST(corrupt_yield_type) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), ci(4), ci(1), 1, &init, &c);
    tk_value *next = tk_add(k, c, ci(1));
    tk_for_end(k, 1, &next, &r);
    def_of(r)->regions[0]->yield[0] = tk_const_i64(k, 1);
    EXPECT_FINISH(TK_ERR_TYPE, "tk_for (op #5) has body yield 0 of type i64, expected i32");
}
END_TEST

START_TEST(corrupt_yield_later) {
    tk_value *init = ci(0), *c, *r;
    tk_for_begin(k, ci(0), ci(4), ci(1), 1, &init, &c);
    tk_for_end(k, 1, &c, &r);
    def_of(r)->regions[0]->yield[0] = ci(9); /* defined after the loop */
    EXPECT_FINISH(TK_ERR_STATE, "(body yield 0) before it is defined");
}
END_TEST

START_TEST(corrupt_shared_offset) {
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PAD, 1);
    def_of(s)->attr[0] = 64;
    EXPECT_FINISH(TK_ERR_STATE, "tk_shared (op #2) records shared offset 64, but allocation order "
                                "gives 1024");
}
END_TEST

START_TEST(corrupt_smem_total) {
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    k->smem_bytes = 10;
    EXPECT_FINISH(TK_ERR_STATE, "the kernel records 10 bytes of shared memory, its shared tiles "
                                "take 1024");
}
END_TEST

START_TEST(corrupt_scope) {
    tk_value *t = f32t(16, 16);
    def_of(t)->scope = TK_SCOPE_THREAD;
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_fill (op #2) records scope thread, but its table row and "
                                "operands give warp");
}
END_TEST

START_TEST(corrupt_uniformity) {
    tk_value *l = tk_lane_id(k), *x = tk_add(k, l, ci(1));
    x->uni = TK_UNI_BLOCK;
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_add (op #3) marks %3 as block-uniform, but its inputs make it "
                                "per-thread");
}
END_TEST

START_TEST(corrupt_operand_count) {
    tk_value *x = tk_neg(k, ci(1));
    def_of(x)->nopnds = 0;
    EXPECT_FINISH(TK_ERR_STATE, "tk_neg (op #2) has 0 operands, expected 1..1");
}
END_TEST

START_TEST(corrupt_opcode) {
    tk_value *x = tk_neg(k, ci(1));
    def_of(x)->opc = TK_OP_COUNT;
    EXPECT_FINISH(TK_ERR_STATE, "op #2 has opcode");
}
END_TEST

START_TEST(corrupt_cycle) {
    tk_value *a = ci(1);
    ci(2);
    def_of(a)->next = def_of(a); /* the list now loops on op #1 */
    EXPECT_FINISH(TK_ERR_STATE, "tk_const (op #1) defines %1 (result 0) a second time");
}
END_TEST

START_TEST(corrupt_grid_inner) {
    tk_value *iv = tk_for_begin(k, ci(0), ci(4), ci(1), 0, NULL, NULL);
    tk_for_end(k, 0, NULL, NULL);
    k->grid[0] = iv;
    EXPECT_FINISH(TK_ERR_STATE, "grid dimension 0 is not a top-level value of this kernel");
}
END_TEST

START_TEST(corrupt_if_region) {
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_if_end(k, 0, NULL, NULL);
    k->body->last->regions[1] = NULL;
    EXPECT_FINISH(TK_ERR_STATE, "tk_if (op #2) lacks a region");
}
END_TEST

/* Memory handles cannot be yielded: rejected by tk_else / tk_if_end. */
START_TEST(if_yields_memory) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1), *r;
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_else(k, 1, &s);
    EXPECT(TK_ERR_TYPE, "tk_else: value 0 (%1) is a memory handle; only scalars, tiles and "
                        "vectors can be yielded");
    tk_if_end(k, 1, &s, &r);
    ck_assert_int_eq(k->nopen, 1); /* the error stuck: nothing closed */
}
END_TEST

START_TEST(if_end_yields_tensor) {
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 2), *x = ci(1), *r;
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_else(k, 1, &x);
    tk_if_end(k, 1, &T, &r);
    EXPECT(TK_ERR_TYPE, "tk_if_end: value 0 (%1) is a memory handle");
}
END_TEST

/* The verifier still catches a handle yielded behind the builder's back. */
START_TEST(corrupt_if_yields_memory) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1), *x = ci(1), *r;
    tk_if_begin(k, tk_const_bool(k, 1));
    tk_else(k, 1, &x);
    tk_if_end(k, 1, &x, &r);
    r->type = s->type;
    EXPECT_FINISH(TK_ERR_TYPE, "tk_if (op #4) yields a memory handle");
}
END_TEST

/* ... and a grid set behind tk_set_grid's back. */
START_TEST(corrupt_grid_lane) {
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    k->grid[1] = tk_max(k, n, tk_lane_id(k));
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_kernel_finish: the grid depends on op #1 (lane_id), which "
                                "the host cannot evaluate");
}
END_TEST

/* ---- suite ---------------------------------------------------------------------- */
static Suite *builder_suite(void) {
    Suite *s = suite_create("builder");
    TCase *tc = tcase_create("bad_input");
    tcase_add_checked_fixture(tc, setup, teardown);
    const TTest *tests[] = {
        create_null_ctx, create_null_out, create_null_name, null_kernel_calls, param_bad_ident,
        param_null_name, param_duplicate, param_in_region, param_tensor_dtype, param_scalar_dtype,
        spec_duplicate, spec_in_for, spec_in_if, spec_bad_ident, null_operand, foreign_operand, closed_region_value,
        else_sees_no_then_value, block_id_dim, dim_not_view, dim_out_of_rank, add_tile_shapes,
        add_scalar_dtypes, add_bool_scalars, tile_int_scalar, broadcast_length,
        broadcast_layout, exp_int, add_smem, neg_view, cvt_tile_to_int, cvt_scalar_to_bf16,
        fill_bad_shape, fill_wg_rows, fill_int_tile, fill_wg_col, fill_no_owner,
        fill_no_layout, fill_value_tile, zeros_scalar_type, vec_bad_axis, vec_bad_length,
        rem_float, ceil_div_mixed, lt_bool, and_ints, select_cond, select_branches,
        scalar_op_tile, mma_inner, mma_layout, mma_layout_atb, mma_f32_inputs,
        mma_mixed_inputs, mma_b_warpgroup, mma_c_shape, mma_c_dtype, mma_not_tiles,
        mma_bad_kind, row_max_vec, row_sum_scalar, col_max_warpgroup, mask_kind,
        mask_float_bound, mask_lane_bound, load_null_idx, load_missing_index,
        load_index_dtype, load_dtype, load_tile_rank1, load_s2r_too_big, load_multistage,
        load_from_tile, load_lane_index, store_vec_smem, store_scalar, smem_overflow,
        shared_bad_shape, shared_in_for, shared_int, shared_count, shared_layout,
        stage_single, stage_float_index, async_fill, copy_dtype, copy_warp_index,
        copy_to_global_stages, async_wait_range, for_mixed_dtypes, for_float_bound,
        for_lane_bound, for_carry_smem, for_bad_n, for_end_type, for_end_count,
        for_end_less_uniform, for_end_without_for, if_end_closing_for, else_without_if,
        finish_open_for, if_cond_int, if_lane_cond, if_no_else_yield, if_else_type,
        if_else_count, double_else, barrier_divergent_if, barrier_nested_divergent_if,
        copy_in_divergent_for, barrier_under_loop_result, warpgroup_needs_4_warps,
        grid_block_id, grid_lane, grid_loop_result, grid_deep_exp, grid_float, grid_in_region,
        ops_after_finish, param_after_finish, sticky_first_error, if_yields_memory, if_end_yields_tensor,
        cvt_smem,
        dim_negative, stage_not_smem, load_s2r_dtype, load_bad_type, store_dtype,
        store_null_dst, copy_rank1, grid_foreign, for_too_many_carried,
    };
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) tcase_add_test(tc, tests[i]);
    tcase_add_loop_test(tc, create_bad_ident, 0, (int)(sizeof bad_names / sizeof *bad_names));
    tcase_add_loop_test(tc, create_bad_warps, 0, (int)(sizeof bad_warps / sizeof *bad_warps));
    tcase_add_loop_test(tc, param_tensor_rank, 0, (int)(sizeof bad_ranks / sizeof *bad_ranks));
    suite_add_tcase(s, tc);

    TCase *ok = tcase_create("valid");
    tcase_add_checked_fixture(ok, setup, teardown);
    const TTest *valid[] = {valid_gemm, valid_softmax, valid_warpgroup, valid_grid_expr,
                            valid_empty};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) tcase_add_test(ok, valid[i]);
    suite_add_tcase(s, ok);

    TCase *bad = tcase_create("corrupt_ir");
    tcase_add_checked_fixture(bad, setup, teardown);
    const TTest *corrupt[] = {
        corrupt_result_type, corrupt_use_before_def, corrupt_operand_type, corrupt_closed_use,
        corrupt_yield_type, corrupt_yield_later, corrupt_shared_offset, corrupt_smem_total,
        corrupt_scope, corrupt_uniformity, corrupt_operand_count, corrupt_opcode,
        corrupt_cycle, corrupt_grid_inner, corrupt_if_region, corrupt_if_yields_memory,
        corrupt_grid_lane,
    };
    for (size_t i = 0; i < sizeof corrupt / sizeof *corrupt; i++) tcase_add_test(bad, corrupt[i]);
    suite_add_tcase(s, bad);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(builder_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
