/* Builder tests: bad input through the public API must fail with the right
 * tk_status and a precise message, never crash or leak; valid kernels must
 * finish. This file: kernel creation, parameters and specs, operands, ids,
 * control flow, the grid, the builder's sticky state and valid kernels.
 * Type-rule failures per op family: test_builder_rules.c; hand-corrupted IR
 * caught by the verifier: test_verify.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>

#include "ir/ir.h"
#include "tk/tk.h"
#include "util/fixture_ir.h"
#include "util/build.h"

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

/* ---- control flow ----------------------------------------------------------- */
START_TEST(for_mixed_dtypes) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), tk_const_i64(k, 8), ci(1), 0, NULL, NULL));
    EXPECT(TK_ERR_TYPE, "tk_for_begin: lo, hi and step have dtypes i32, i64, i32; they must match");
}
END_TEST

START_TEST(for_float_bound) {
    ck_assert_ptr_null(tk_for_begin(k, ci(0), ci(8), cf(1), 0, NULL, NULL));
    EXPECT(TK_ERR_TYPE, "tk_for_begin: step is a f32; expected an i32/i64 scalar");
}
END_TEST

START_TEST(for_lane_bound) {
    ck_assert_ptr_null(tk_for_begin(k, tk_lane_id(k), ci(32), ci(1), 0, NULL, NULL));
    EXPECT(TK_ERR_SCOPE, "tk_for_begin: lo (%");
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
    EXPECT(TK_ERR_TYPE, "tk_if_begin: cond is a i32; expected a bool scalar");
}
END_TEST

START_TEST(if_lane_cond) {
    tk_if_begin(k, tk_eq(k, tk_lane_id(k), ci(0)));
    EXPECT(TK_ERR_SCOPE, "tk_if_begin: cond (%");
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
    snprintf(frag, sizeof frag,
             "tk_barrier (op #5) is inside an if on %%%u, which differs "
             "between warps: every thread of the block must reach a barrier",
             3u);
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
    EXPECT_FINISH(TK_ERR_SCOPE, "tk_copy_to_shared (op #");
    EXPECT(TK_ERR_SCOPE, "whose hi %");
    EXPECT(TK_ERR_SCOPE, "differs between warps: every thread of the block must reach a "
                         "copy_to_shared equally often");
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

START_TEST(for_too_many_carried) {
    ck_assert_ptr_null(
        tk_for_begin(k, ci(0), ci(4), ci(1), 65, (tk_value *[65]){0}, (tk_value *[65]){0}));
    EXPECT(TK_ERR_INVALID_ARG, "tk_for_begin: n is 65");
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

START_TEST(grid_foreign) {
    tk_kernel *k2;
    ck_assert_int_eq(tk_kernel_create(ctx, "other", 4, &k2), TK_OK);
    tk_set_grid(k, NULL, NULL, tk_const_i32(k2, 4));
    tk_kernel_destroy(k2);
    EXPECT(TK_ERR_INVALID_ARG, "tk_set_grid: operand 2 (%1) belongs to another kernel");
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

/* The grid is part of the printed text the caches key on: fixed at finish. */
START_TEST(grid_after_finish) {
    tk_value *two = ci(2);
    OK_FINISH();
    tk_set_grid(k, two, NULL, NULL);
    EXPECT(TK_ERR_STATE, "tk_set_grid: the kernel is finished; it can no longer change");
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
START_TEST(valid_gemm) {
    tu_build_gemm(k, 64);
    OK_FINISH();
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 2 * 4096 + 2 * 4096);
    ck_assert_str_eq(tk_kernel_name(k), "t");
    ck_assert_int_eq(tk_kernel_warps(k), 4);
}
END_TEST

/* Softmax-like row ops, masks, broadcasts and an if/else with yields. */
START_TEST(valid_softmax) {
    tu_build_softmax(k, -INFINITY);
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
                          ((tk_value *[]){r, z}), 0);
    tk_value *b = tk_load(k, wtile(TK_BF16, 64, 32, TK_ROW), A, ((tk_value *[]){z, z}), 0);
    tk_value *c = tk_mma(k, TK_MMA_ABT, a, b, NULL);
    c = tk_sub(k, c, tk_row_max(k, c));
    tk_if_begin(k, tk_eq(k, tk_warpgroup_id(k), ci(0)));
    tk_store(k, O, ((tk_value *[]){r, z}), c);
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

/* ---- suite ---------------------------------------------------------------------- */
static Suite *builder_suite(void) {
    Suite *s = suite_create("builder");
    const TTest *tests[] = {
        create_null_ctx,
        create_null_out,
        create_null_name,
        null_kernel_calls,
        param_bad_ident,
        param_null_name,
        param_duplicate,
        param_in_region,
        param_tensor_dtype,
        param_scalar_dtype,
        spec_duplicate,
        spec_in_for,
        spec_in_if,
        spec_bad_ident,
        null_operand,
        foreign_operand,
        closed_region_value,
        else_sees_no_then_value,
        block_id_dim,
        dim_not_view,
        dim_out_of_rank,
        for_mixed_dtypes,
        for_float_bound,
        for_lane_bound,
        for_carry_smem,
        for_bad_n,
        for_end_type,
        for_end_count,
        for_end_less_uniform,
        for_end_without_for,
        if_end_closing_for,
        else_without_if,
        finish_open_for,
        if_cond_int,
        if_lane_cond,
        if_no_else_yield,
        if_else_type,
        if_else_count,
        double_else,
        barrier_divergent_if,
        barrier_nested_divergent_if,
        copy_in_divergent_for,
        barrier_under_loop_result,
        warpgroup_needs_4_warps,
        for_too_many_carried,
        if_yields_memory,
        if_end_yields_tensor,
        grid_block_id,
        grid_lane,
        grid_loop_result,
        grid_deep_exp,
        grid_float,
        grid_in_region,
        grid_foreign,
        ops_after_finish,
        param_after_finish,
        grid_after_finish,
        sticky_first_error,
    };
    TCase *tc = build_tcase(s, "bad_input", tests, sizeof tests / sizeof *tests);
    tcase_add_loop_test(tc, create_bad_ident, 0, (int)(sizeof bad_names / sizeof *bad_names));
    tcase_add_loop_test(tc, create_bad_warps, 0, (int)(sizeof bad_warps / sizeof *bad_warps));
    tcase_add_loop_test(tc, param_tensor_rank, 0, (int)(sizeof bad_ranks / sizeof *bad_ranks));

    const TTest *valid[] = {valid_gemm, valid_softmax, valid_warpgroup, valid_grid_expr,
                            valid_empty};
    build_tcase(s, "valid", valid, sizeof valid / sizeof *valid);
    return s;
}

int main(void) { return run_suite(builder_suite()); }
