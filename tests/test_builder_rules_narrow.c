/* Builder tests, tk_narrow (ops/memory.c rule_narrow): a bad axis, a
 * non-view operand, a start or len that is not an integer scalar each fail
 * with the right tk_status and a message naming the problem, and the error
 * sticks; chains of narrows are views like their root (same type, usable by
 * every view op, named after the root in later messages). Split from
 * tests/test_builder_rules.c (util/build.h's fixture: a 4-warp kernel k). */
#include <check.h>
#include <string.h>

#include "ir/ir.h" /* a value's type: the rules' results */
#include "tk/tk.h"
#include "util/build.h"

/* The failed call's error stays: later good calls return NULL and do not
 * replace the message (the first failure wins), and finish refuses. */
static void expect_sticky(tk_status st, const char *frag) {
    tk_value *A = tk_param_tensor(k, "later", TK_F32, 2);
    ck_assert_ptr_null(A);
    ck_assert_ptr_null(tk_const_i32(k, 1));
    EXPECT(st, frag);
    ck_assert_int_eq(tk_kernel_finish(k), st);
    EXPECT(st, frag);
}

/* ---- bad axes --------------------------------------------------------------- */
START_TEST(narrow_axis_negative) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, A, -1, ci(0), ci(16)));
    EXPECT(TK_ERR_INVALID_ARG, "tk_narrow: axis is -1; a rank-2 view has axes 0..1");
    expect_sticky(TK_ERR_INVALID_ARG, "axis is -1");
}
END_TEST

START_TEST(narrow_axis_rank) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3);
    ck_assert_ptr_null(tk_narrow(k, A, 3, ci(0), ci(16)));
    EXPECT(TK_ERR_INVALID_ARG, "tk_narrow: axis is 3; a rank-3 view has axes 0..2");
    expect_sticky(TK_ERR_INVALID_ARG, "axis is 3");
    rewarp(4);
    tk_value *V = tk_param_tensor(k, "V", TK_I32, 1);
    ck_assert_ptr_nonnull(tk_narrow(k, V, 0, ci(0), ci(1)));
    ck_assert_ptr_null(tk_narrow(k, V, 1, ci(0), ci(1)));
    EXPECT(TK_ERR_INVALID_ARG, "axis is 1; a rank-1 view has axes 0..0");
}
END_TEST

/* The axis is checked against the narrowed view's rank, inside a chain too. */
START_TEST(narrow_axis_in_chain) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2);
    tk_value *B = tk_narrow(k, A, 1, ci(0), ci(8));
    ck_assert_ptr_nonnull(B);
    ck_assert_ptr_null(tk_narrow(k, B, 2, ci(0), ci(8)));
    EXPECT(TK_ERR_INVALID_ARG, "axis is 2; a rank-2 view has axes 0..1");
}
END_TEST

/* ---- operands that are not views ---------------------------------------------- */
START_TEST(narrow_shared) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    ck_assert_ptr_null(tk_narrow(k, s, 0, ci(0), ci(8)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: the narrowed operand is a 16x16 f32 plain shared; expected a "
                        "tensor parameter");
    expect_sticky(TK_ERR_TYPE, "the narrowed operand is a 16x16 f32 plain shared");
}
END_TEST

START_TEST(narrow_scalar) {
    ck_assert_ptr_null(tk_narrow(k, ci(7), 0, ci(0), ci(8)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: the narrowed operand is a i32; expected a tensor parameter");
    rewarp(4);
    tk_value *n = tk_param_scalar(k, "n", TK_I64);
    ck_assert_ptr_null(tk_narrow(k, n, 0, ci(0), ci(8)));
    EXPECT(TK_ERR_TYPE, "the narrowed operand is a i64; expected a tensor parameter");
}
END_TEST

START_TEST(narrow_tile) {
    ck_assert_ptr_null(tk_narrow(k, f32t(16, 16), 0, ci(0), ci(8)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: the narrowed operand is a 16x16 f32 row tile (warp); expected "
                        "a tensor parameter");
}
END_TEST

START_TEST(narrow_null_operand) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, NULL, 0, ci(0), ci(8)));
    EXPECT(TK_ERR_INVALID_ARG, "tk_narrow: operand 0 is NULL");
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, A, 0, ci(0), NULL));
    EXPECT(TK_ERR_INVALID_ARG, "tk_narrow: operand 2 is NULL");
}
END_TEST

/* ---- start and len --------------------------------------------------------------- */
START_TEST(narrow_float_start) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, A, 0, cf(2), ci(8)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: start is a f32; expected an i32/i64 scalar");
    expect_sticky(TK_ERR_TYPE, "start is a f32");
}
END_TEST

START_TEST(narrow_float_len) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *f = tk_param_scalar(k, "f", TK_F32);
    ck_assert_ptr_null(tk_narrow(k, A, 1, ci(0), f));
    EXPECT(TK_ERR_TYPE, "tk_narrow: len is a f32; expected an i32/i64 scalar");
    expect_sticky(TK_ERR_TYPE, "len is a f32");
}
END_TEST

START_TEST(narrow_bool_or_tile_len) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, A, 0, ci(0), tk_const_bool(k, 1)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: len is a bool; expected an i32/i64 scalar");
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_ptr_null(tk_narrow(k, A, 0, f32t(16, 16), ci(4)));
    EXPECT(TK_ERR_TYPE, "tk_narrow: start is a 16x16 f32 row tile (warp); expected an i32/i64");
}
END_TEST

/* ---- what is accepted ---------------------------------------------------------------- */
/* narrow(narrow(A)) on one axis and on two, with i32 and i64 bounds: views
 * of A's type that every view op takes, and the kernel finishes. */
START_TEST(narrow_chain_ok) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 3), *O = tk_param_tensor(k, "O", TK_BF16, 3);
    tk_value *n = tk_param_scalar(k, "n", TK_I64);
    tk_value *B = tk_narrow(k, A, 1, tk_const_i64(k, 4), n);
    ck_assert_msg(B != NULL, "%s", tk_kernel_error(k));
    tk_value *C = tk_narrow(k, B, 1, ci(2), ci(40));
    ck_assert_msg(C != NULL, "%s", tk_kernel_error(k));
    tk_value *D = tk_narrow(k, C, 2, n, ci(64));
    ck_assert_msg(D != NULL, "%s", tk_kernel_error(k));
    ck_assert(D != C && C != B && B != A);
    ck_assert_int_eq(D->type.kind, TK_KIND_GVIEW);
    ck_assert_int_eq(D->type.rank, 3);
    ck_assert_int_eq(D->type.dtype, TK_BF16);
    ck_assert_ptr_nonnull(tk_dim(k, D, 1));
    tk_value *z = ci(0), *idx[3] = {z, z, z};
    tk_value *t = tk_load(k, wtile(TK_BF16, 16, 32, TK_ROW), D, idx, -1.0f);
    ck_assert_msg(t != NULL, "%s", tk_kernel_error(k));
    tk_value *s = tk_shared(k, TK_BF16, 16, 32, TK_SMEM_SWIZZLE, 1);
    tk_copy_to_shared(k, s, D, idx, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_store(k, tk_narrow(k, O, 0, ci(1), ci(1)), idx, t);
    OK_FINISH();
}
END_TEST

/* Later ops name the tensor a narrowed view lies in. */
START_TEST(narrow_index_count_names_root) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3);
    tk_value *B = tk_narrow(k, tk_narrow(k, A, 0, ci(1), ci(2)), 2, ci(0), ci(16));
    ck_assert_ptr_nonnull(B);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load_n(k, wtile(TK_F32, 16, 16, TK_ROW), B, 2, idx, 0));
    EXPECT(TK_ERR_INVALID_ARG,
           "tk_load: 2 indices given; the rank-3 tensor 'A' (narrowed) takes 3");
}
END_TEST

/* A start that varies across lanes narrows each lane's view differently: a
 * warp's tile load cannot take such a view. */
START_TEST(narrow_lane_start) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *B = tk_narrow(k, A, 0, tk_lane_id(k), ci(16));
    ck_assert_ptr_nonnull(B);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), B, idx, 0));
    EXPECT(TK_ERR_SCOPE, "varies across the lanes of a warp");
}
END_TEST

/* A narrowed view's size depends on run-time values the host does not
 * have: the grid cannot use it (the parameter's own dim it can). */
START_TEST(narrow_dim_in_grid) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *n = tk_param_scalar(k, "n", TK_I32);
    tk_value *B = tk_narrow(k, A, 0, ci(0), n);
    tk_set_grid(k, tk_dim(k, B, 0), tk_dim(k, A, 1), NULL);
    EXPECT(TK_ERR_SCOPE, "tk_set_grid: dimension 0: the grid depends on op #");
    EXPECT(TK_ERR_SCOPE, "(dim), which the host cannot evaluate");
}
END_TEST

/* Narrowed views are never carried or yielded (tk_view_root in ir/abi.h
 * and the lowering rely on every view being a NARROW chain from a
 * parameter). */
START_TEST(narrow_not_carried) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *n = tk_param_scalar(k, "n", TK_I32), *cur;
    tk_value *B = tk_narrow(k, A, 0, ci(0), n);
    tk_for_begin(k, ci(0), n, ci(1), 1, &B, &cur);
    EXPECT(TK_ERR_TYPE, "tk_for_begin: loop-carried value 0 is a memory handle");
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2), n = tk_param_scalar(k, "n", TK_I32);
    tk_if_begin(k, tk_lt(k, n, ci(3)));
    B = tk_narrow(k, A, 0, ci(0), n);
    tk_else(k, 1, &B);
    EXPECT(TK_ERR_TYPE, "is a memory handle; only scalars, tiles and vectors can be yielded");
}
END_TEST

/* ---- suite ------------------------------------------------------------------------ */
static Suite *narrow_suite(void) {
    Suite *s = suite_create("builder_rules_narrow");
    const TTest *tests[] = {
        narrow_axis_negative,    narrow_axis_rank,   narrow_axis_in_chain,
        narrow_shared,           narrow_scalar,      narrow_tile,
        narrow_null_operand,     narrow_float_start, narrow_float_len,
        narrow_bool_or_tile_len, narrow_chain_ok,    narrow_index_count_names_root,
        narrow_lane_start,       narrow_dim_in_grid, narrow_not_carried,
    };
    build_tcase(s, "narrow", tests, sizeof tests / sizeof *tests);
    return s;
}

int main(void) { return run_suite(narrow_suite()); }
