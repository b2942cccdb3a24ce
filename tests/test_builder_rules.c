/* Builder tests, type rules per op family: elementwise, scalar ops, mma,
 * reductions and masks, memory (the epilogue ops' rules:
 * tests/test_builder_rules_epilogue.c). Each bad call must fail with the right
 * tk_status and a precise message (util/build.h's fixture: a 4-warp kernel k). */
#include <check.h>
#include <math.h>

#include "ir/ir.h" /* a value's type: the rules' results */
#include "tk/tk.h"
#include "util/build.h"

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

START_TEST(sin_int) {
    ck_assert_ptr_null(tk_sin(k, ci(1)));
    EXPECT(TK_ERR_TYPE, "tk_sin: operand is a i32; expected a float dtype");
}
END_TEST

START_TEST(cos_i64) {
    ck_assert_ptr_null(tk_cos(k, tk_const_i64(k, 3)));
    EXPECT(TK_ERR_TYPE, "tk_cos: operand is a i64; expected a float dtype");
}
END_TEST

START_TEST(sin_bool) {
    ck_assert_ptr_null(tk_sin(k, tk_const_bool(k, 1)));
    EXPECT(TK_ERR_TYPE, "tk_sin: operand is a bool; expected a numeric scalar, tile or vector");
}
END_TEST

START_TEST(cos_smem) {
    ck_assert_ptr_null(tk_cos(k, tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1)));
    EXPECT(TK_ERR_TYPE, "tk_cos: operand is a 16x16 f32 plain shared; expected a numeric");
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
    ck_assert_ptr_null(tk_and(k, f32t(16, 16), tk_const_bool(k, 1)));
    EXPECT(TK_ERR_TYPE, "tk_and: operand 0 is a 16x16 f32 row tile (warp); expected a scalar");
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

START_TEST(max_all_scalar) {
    ck_assert_ptr_null(tk_max_all(k, cf(1)));
    EXPECT(TK_ERR_TYPE, "tk_max_all: operand is a f32; expected a register tile or vector");
}
END_TEST

/* Of a warpgroup tile: each warp's max over its rows, a warp-uniform f32. */
START_TEST(max_all_warpgroup) {
    tk_value *m = tk_max_all(k, wgtile(TK_F32, 64, 16));
    ck_assert_ptr_nonnull(m);
    tk_if_begin(k, tk_gt(k, m, cf(0.5f))); /* a scalar condition */
    tk_if_end(k, 0, NULL, NULL);
    ck_assert_int_eq(tk_kernel_status(k), TK_OK);
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
    ck_assert_ptr_null(tk_load_n(k, wtile(TK_F32, 16, 16, TK_ROW), A, 2, NULL, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: idx is NULL; expected 2 indices");
}
END_TEST

START_TEST(load_missing_index) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3);
    tk_value *idx[3] = {ci(0), ci(0), NULL}; /* written for a rank-2 tensor */
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: operand 3 is NULL");
}
END_TEST

START_TEST(load_index_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), cf(16)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load: index 1 is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(load_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_BF16, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "memory holds f32 but the register value is bf16; convert with tk_cvt");
}
END_TEST

START_TEST(load_scalar_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *T;
    tk_value *idx[2] = {ci(0), ci(0)}, *ti[1];
    ck_assert_ptr_null(tk_load(k, tk_scalar_type(TK_BF16), A, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load: a scalar load reads i32, i64 or f32, not bf16");
    rewarp(4);
    T = tk_param_tensor(k, "T", TK_I32, 1), ti[0] = ci(3);
    ck_assert_ptr_null(tk_load(k, tk_scalar_type(TK_I64), T, ti, 0));
    EXPECT(TK_ERR_TYPE, "tk_load: memory holds i32 but the register value is i64");
    rewarp(4);
    idx[0] = ci(0), idx[1] = ci(0);
    tk_value *S = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    ck_assert_ptr_null(tk_load(k, tk_scalar_type(TK_F32), S, idx, 0));
    EXPECT(TK_ERR_TYPE, "is not a register tile or vector");
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
    EXPECT(TK_ERR_SHAPE, "tk_load: a 32x16 tile does not fit a 16x16 shared tile");
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
    EXPECT(TK_ERR_SCOPE, "tk_load: operand 1");
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp");
}
END_TEST

START_TEST(store_vec_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, s, idx, tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW)));
    EXPECT(TK_ERR_TYPE, "tk_store: shared memory moves whole tiles, not vectors");
}
END_TEST

START_TEST(store_scalar) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, A, idx, cf(1));
    EXPECT(TK_ERR_TYPE, "tk_store: the stored value is a f32; expected a register tile");
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
    EXPECT(TK_ERR_INVALID_ARG, "tk_copy_to_shared: an asynchronous copy fills out-of-range "
                               "elements with 0, not -1");
}
END_TEST

START_TEST(copy_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_shared(k, s, A, idx, 0, 0);
    EXPECT(TK_ERR_TYPE, "tk_copy_to_shared: memory holds bf16 but the register value is f32");
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
    EXPECT(TK_ERR_TYPE, "tk_copy_to_global: the shared operand has 3 stages");
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
    EXPECT(TK_ERR_TYPE, "tk_load: memory holds f32 but the register value is bf16");
}
END_TEST

START_TEST(load_bad_type) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_type smem = {.kind = TK_KIND_SMEM, .dtype = TK_F32, .rows = 16, .cols = 16, .count = 1};
    ck_assert_ptr_null(tk_load(k, smem, A, idx, 0));
    EXPECT(TK_ERR_TYPE, "tk_load: the requested type (16x16 f32 plain shared) is not a register "
                        "tile or vector");
}
END_TEST

START_TEST(store_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, A, idx, f32t(16, 16));
    EXPECT(TK_ERR_TYPE, "tk_store: memory holds bf16 but the register value is f32");
}
END_TEST

START_TEST(store_null_dst) {
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store(k, NULL, idx, f32t(16, 16));
    EXPECT(TK_ERR_INVALID_ARG, "tk_store: the memory operand is NULL");
}
END_TEST

START_TEST(store_add_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store_add(k, A, idx, tile(TK_BF16, 16, 16, TK_ROW));
    EXPECT(TK_ERR_TYPE, "tk_store: tk_store_add adds f32 values into an f32 tensor, not bf16");
}
END_TEST

START_TEST(store_add_smem) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_store_add(k, s, idx, f32t(16, 16));
    EXPECT(TK_ERR_TYPE, "tk_store_add: the destination is a shared tile; it adds into a tensor "
                        "parameter only");
}
END_TEST

START_TEST(copy_add_dtype) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *s = tk_shared(k, TK_BF16, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_global_add(k, A, idx, s);
    EXPECT(TK_ERR_TYPE, "tk_copy_to_global_add adds an f32 shared tile into an f32 tensor, not "
                        "bf16");
}
END_TEST

START_TEST(copy_rank1) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 1);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[1] = {ci(0)};
    tk_copy_to_shared(k, s, A, idx, 0, 0);
    EXPECT(TK_ERR_SHAPE, "tk_copy_to_shared: a tile needs a tensor of rank >= 2, got rank 1");
}
END_TEST

/* ---- suite ---------------------------------------------------------------------- */
static Suite *rules_suite(void) {
    Suite *s = suite_create("builder_rules");
    const TTest *tests[] = {
        add_tile_shapes,
        add_scalar_dtypes,
        add_bool_scalars,
        tile_int_scalar,
        broadcast_length,
        broadcast_layout,
        exp_int,
        sin_int,
        cos_i64,
        sin_bool,
        cos_smem,
        add_smem,
        neg_view,
        cvt_tile_to_int,
        cvt_scalar_to_bf16,
        fill_bad_shape,
        fill_wg_rows,
        fill_int_tile,
        fill_wg_col,
        fill_no_owner,
        fill_no_layout,
        fill_value_tile,
        zeros_scalar_type,
        vec_bad_axis,
        vec_bad_length,
        rem_float,
        ceil_div_mixed,
        lt_bool,
        and_ints,
        select_cond,
        select_branches,
        scalar_op_tile,
        mma_inner,
        mma_layout,
        mma_layout_atb,
        mma_f32_inputs,
        mma_mixed_inputs,
        mma_b_warpgroup,
        mma_c_shape,
        mma_c_dtype,
        mma_not_tiles,
        mma_bad_kind,
        row_max_vec,
        row_sum_scalar,
        col_max_warpgroup,
        max_all_scalar,
        max_all_warpgroup,
        mask_kind,
        mask_float_bound,
        mask_lane_bound,
        load_null_idx,
        load_missing_index,
        load_index_dtype,
        load_dtype,
        load_scalar_dtype,
        load_tile_rank1,
        load_s2r_too_big,
        load_multistage,
        load_from_tile,
        load_lane_index,
        store_vec_smem,
        store_scalar,
        smem_overflow,
        shared_bad_shape,
        shared_in_for,
        shared_int,
        shared_count,
        shared_layout,
        stage_single,
        stage_float_index,
        async_fill,
        copy_dtype,
        copy_warp_index,
        copy_to_global_stages,
        async_wait_range,
        cvt_smem,
        dim_negative,
        stage_not_smem,
        load_s2r_dtype,
        load_bad_type,
        store_dtype,
        store_null_dst,
        store_add_dtype,
        store_add_smem,
        copy_add_dtype,
        copy_rank1,
    };
    build_tcase(s, "bad_input", tests, sizeof tests / sizeof *tests);
    return s;
}

int main(void) { return run_suite(rules_suite()); }
