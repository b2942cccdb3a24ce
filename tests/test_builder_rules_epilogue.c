/* Builder tests, type rules of the epilogue ops: tile compares (bool
 * tiles), tile select, tanh/erf/sigmoid, slices and concatenation. Each bad
 * call must fail with the right tk_status and a precise message
 * (util/build.h's fixture: a 4-warp kernel k). Split from
 * tests/test_builder_rules.c. */
#include <check.h>
#include <math.h>

#include "ir/ir.h" /* a value's type: the rules' results */
#include "tk/tk.h"
#include "util/build.h"

/* ---- masks, select, tanh/erf/sigmoid, slices -------------------------------- */
static tk_type type_of_ok(tk_value *v) {
    ck_assert_msg(v != NULL, "%s", tk_kernel_error(k));
    return v->type;
}

START_TEST(mask_types) { /* compares give bool shapes; select and cvt take them */
    tk_value *x = tile(TK_BF16, 32, 32, TK_ROW), *m = tk_gt(k, x, cf(0));
    tk_type t = type_of_ok(m);
    ck_assert(t.kind == TK_KIND_TILE && t.dtype == TK_BOOL && t.rows == 32 && t.cols == 32);
    tk_value *v = tk_row_max(k, x);
    ck_assert_int_eq(type_of_ok(tk_le(k, v, x)).dtype, TK_BOOL); /* vec broadcast */
    ck_assert_int_eq(type_of_ok(tk_select(k, m, x, cf(0.5f))).dtype, TK_BF16);
    t = type_of_ok(tk_select(k, m, cf(1), cf(0)));
    ck_assert(t.kind == TK_KIND_TILE && t.dtype == TK_F32 && t.rows == 32);
    ck_assert_int_eq(type_of_ok(tk_select(k, tk_const_bool(k, 1), x, x)).dtype, TK_BF16);
    ck_assert_int_eq(type_of_ok(tk_select(k, m, m, m)).dtype, TK_BOOL);
    ck_assert_int_eq(type_of_ok(tk_cvt(k, m, TK_F16)).dtype, TK_F16);
    ck_assert_int_eq(type_of_ok(tk_erf(k, x)).dtype, TK_BF16);
}
END_TEST

START_TEST(mask_arith) {
    tk_value *m = tk_lt(k, f32t(16, 16), cf(0));
    ck_assert_ptr_null(tk_add(k, m, m));
    EXPECT(TK_ERR_TYPE, "tk_add: operands are a 16x16 bool row tile (warp) and a 16x16 bool row "
                        "tile (warp): a bool tile or vector is a mask");
}
END_TEST

START_TEST(mask_store) {
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *idx[2] = {ci(0), ci(0)};
    tk_store(k, O, idx, tk_ne(k, f32t(16, 16), cf(0)));
    EXPECT(TK_ERR_TYPE, "tk_store: a bool tile or vector is a mask, not stored");
}
END_TEST

START_TEST(compare_int_scalar_tile) {
    ck_assert_ptr_null(tk_lt(k, tile(TK_BF16, 16, 16, TK_ROW), ci(0)));
    EXPECT(TK_ERR_TYPE, "tk_lt: operands are a 16x16 bf16 row tile (warp) and a i32: the scalar "
                        "must be f32 or of the tile's dtype");
}
END_TEST

START_TEST(select_mask_shape) {
    tk_value *m = tk_lt(k, f32t(16, 32), cf(0));
    ck_assert_ptr_null(tk_select(k, m, f32t(16, 16), cf(0)));
    EXPECT(TK_ERR_TYPE, "tk_select: condition is a 16x32 bool row tile (warp); expected a 16x16 "
                        "bool row tile (warp)");
}
END_TEST

START_TEST(select_float_cond) {
    ck_assert_ptr_null(tk_select(k, f32t(16, 16), cf(1), cf(0)));
    EXPECT(TK_ERR_TYPE, "tk_select: condition is 16x16 f32 row tile (warp); expected bool");
}
END_TEST

START_TEST(select_vec_branch) {
    tk_value *x = f32t(16, 16), *m = tk_lt(k, x, cf(0));
    ck_assert_ptr_null(tk_select(k, m, x, tk_row_max(k, x)));
    EXPECT(TK_ERR_TYPE, "select broadcasts scalars only, not vectors");
}
END_TEST

START_TEST(select_int_mask) {
    ck_assert_ptr_null(tk_select(k, tk_lt(k, f32t(16, 16), cf(0)), ci(1), ci(0)));
    EXPECT(TK_ERR_TYPE, "tk_select: a bool tile picks between floats, not i32");
}
END_TEST

START_TEST(tanh_int) {
    ck_assert_ptr_null(tk_tanh(k, ci(1)));
    EXPECT(TK_ERR_TYPE, "tk_tanh: operand is a i32; expected a float dtype");
}
END_TEST

START_TEST(sigmoid_mask) {
    ck_assert_ptr_null(tk_sigmoid(k, tk_lt(k, f32t(16, 16), cf(0))));
    EXPECT(TK_ERR_TYPE, "tk_sigmoid: operand is a 16x16 bool row tile (warp); expected a numeric");
}
END_TEST

START_TEST(slice_offset) {
    ck_assert_ptr_null(tk_slice(k, f32t(32, 32), 8, 0, 16, 16));
    EXPECT(TK_ERR_SHAPE, "tk_slice: offset (8, 0): rows must be a multiple of 16 and cols of 16");
}
END_TEST

START_TEST(slice_overrun) {
    ck_assert_ptr_null(tk_slice(k, f32t(32, 32), 16, 16, 16, 32));
    EXPECT(TK_ERR_SHAPE, "tk_slice: a 16x32 slice at (16, 16) overruns a 32x32 f32 row tile");
}
END_TEST

START_TEST(slice_wg_rows) {
    ck_assert_ptr_null(tk_slice(k, wgtile(TK_F32, 128, 32), 16, 0, 64, 32));
    EXPECT(TK_ERR_SHAPE, "rows must be a multiple of 64");
}
END_TEST

START_TEST(slice_vec) {
    ck_assert_ptr_null(tk_slice(k, tk_row_max(k, f32t(32, 16)), 0, 0, 16, 16));
    EXPECT(TK_ERR_TYPE, "tk_slice: operand 0 is a 32 f32 per-row vec");
}
END_TEST

START_TEST(concat_cols) {
    ck_assert_ptr_null(tk_concat(k, 0, f32t(16, 16), f32t(16, 32)));
    EXPECT(TK_ERR_SHAPE, "tk_concat: a 16x16 f32 row tile (warp) and a 16x32 f32 row tile (warp): "
                         "their cols differ");
}
END_TEST

START_TEST(concat_layout) {
    ck_assert_ptr_null(tk_concat(k, 1, f32t(16, 16), tile(TK_F32, 16, 16, TK_COL)));
    EXPECT(TK_ERR_TYPE, "concatenated tiles share dtype, owner and layout");
}
END_TEST

START_TEST(concat_axis_too_big) {
    ck_assert_ptr_null(tk_concat(k, 2, f32t(16, 16), f32t(16, 16)));
    EXPECT(TK_ERR_INVALID_ARG, "tk_concat: axis is 2; expected 0");
    rewarp(4);
    ck_assert_ptr_null(tk_concat(k, 1, f32t(16, 256), f32t(16, 16)));
    EXPECT(TK_ERR_SHAPE, "its cols of 16 (each 16..256)");
}
END_TEST

START_TEST(pair_swap_col) {
    ck_assert_ptr_null(tk_pair_swap(k, tile(TK_F32, 16, 32, TK_COL)));
    EXPECT(TK_ERR_TYPE, "tk_pair_swap: operand 0 is a 16x32 f32 col tile (warp); expected a "
                        "row-layout tile");
}
END_TEST

START_TEST(pair_swap_row_vec) {
    ck_assert_ptr_nonnull(tk_pair_swap(k, tk_col_max(k, f32t(16, 32))));
    ck_assert_ptr_null(tk_pair_swap(k, tk_row_max(k, f32t(16, 32))));
    EXPECT(TK_ERR_TYPE, "tk_pair_swap: operand 0 is a 16 f32 per-row vec");
}
END_TEST

START_TEST(col_bcast_dtype) {
    ck_assert_ptr_nonnull(tk_col_bcast(k, f32t(16, 32), 31));
    ck_assert_ptr_null(tk_col_bcast(k, tile(TK_BF16, 16, 32, TK_ROW), 0));
    EXPECT(TK_ERR_TYPE, "tk_col_bcast: operand 0 is a 16x32 bf16 row tile (warp); expected an "
                        "f32 row-layout tile");
}
END_TEST

START_TEST(col_bcast_layout) {
    ck_assert_ptr_null(tk_col_bcast(k, tile(TK_F32, 16, 32, TK_COL), 0));
    EXPECT(TK_ERR_TYPE, "tk_col_bcast: operand 0 is a 16x32 f32 col tile (warp)");
}
END_TEST

START_TEST(col_bcast_col) {
    ck_assert_ptr_null(tk_col_bcast(k, f32t(16, 32), 32));
    EXPECT(TK_ERR_INVALID_ARG, "tk_col_bcast: col is 32; expected 0 .. 31");
}
END_TEST

START_TEST(col_bcast_negative) {
    ck_assert_ptr_null(tk_col_bcast(k, f32t(16, 32), -1));
    EXPECT(TK_ERR_INVALID_ARG, "tk_col_bcast: col is -1; expected 0 .. 31");
}
END_TEST

START_TEST(iota_dtype) {
    ck_assert_ptr_null(tk_iota(k, tk_tile_type(TK_BF16, 16, 16, TK_WARP, TK_ROW), TK_PER_ROW));
    EXPECT(TK_ERR_TYPE, "tk_iota: the type's dtype is bf16; iota gives TK_F32");
}
END_TEST

START_TEST(iota_axis) {
    ck_assert_ptr_null(tk_iota(k, tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW), 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_iota: axis is 0; expected TK_PER_ROW or TK_PER_COL");
}
END_TEST

START_TEST(iota_vec_axis) {
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    ck_assert_ptr_null(tk_iota(k, vt, TK_PER_COL));
    EXPECT(TK_ERR_INVALID_ARG, "tk_iota: axis is 2; a vector counts along its own axis (1)");
}
END_TEST

static Suite *epilogue_suite(void) {
    Suite *s = suite_create("builder_rules_epilogue");
    const TTest *tests[] = {
        mask_types,
        mask_arith,
        mask_store,
        compare_int_scalar_tile,
        select_mask_shape,
        select_float_cond,
        select_vec_branch,
        select_int_mask,
        tanh_int,
        sigmoid_mask,
        slice_offset,
        slice_overrun,
        slice_wg_rows,
        slice_vec,
        concat_cols,
        concat_layout,
        concat_axis_too_big,
        pair_swap_col,
        pair_swap_row_vec,
        col_bcast_dtype,
        col_bcast_layout,
        col_bcast_col,
        col_bcast_negative,
        iota_dtype,
        iota_axis,
        iota_vec_axis,
    };
    build_tcase(s, "bad_input", tests, sizeof tests / sizeof *tests);
    return s;
}

int main(void) { return run_suite(epilogue_suite()); }
