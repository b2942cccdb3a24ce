/* Programs without a GPU: tk_launch's argument checks (one signature check,
 * ir/sig.c, shared with the interpreter) and grid evaluation, through
 * programs made by tk_program_new (no module loaded). Split from
 * tests/test_jit.c. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ctx.h"
#include "jit/jit.h"
#include "jit/program.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/run.h"

/* ---- Programs: argument checks and grid, without a GPU ----------------------- */
static tk_kernel *sig_kernel(tk_ctx *ctx) {
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "tk_test_sig", 4, &k), TK_OK);
    tk_value *a = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    tk_param_tensor(k, "V", TK_BF16, 4);
    tk_param_scalar(k, "s", TK_F32);
    tk_value *blocks = tk_spec(k, "BLOCK", 16);
    tk_value *gx = tk_ceil_div(k, tk_dim(k, a, 1), blocks);
    tk_value *gz =
        tk_select(k, tk_gt(k, n, tk_const_i32(k, 0)), tk_const_i32(k, 2), tk_const_i32(k, 3));
    tk_set_grid(k, gx, tk_max(k, n, tk_const_i32(k, 1)), gz);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    return k;
}

/* Expects tk_launch to fail with TK_ERR_LAUNCH and `msg` in the error. */
static void launch_fails(tk_ctx *ctx, tk_program *p, int n, const tk_arg *args, const char *msg) {
    ck_assert_int_eq(tk_launch(p, n, args, NULL), TK_ERR_LAUNCH);
    ck_assert_msg(strstr(tk_ctx_error(ctx), msg), "got \"%s\", want \"%s\"", tk_ctx_error(ctx),
                  msg);
}

START_TEST(test_launch_checks) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = sig_kernel(ctx);
    tk_program *p;
    tk_diag dg = {0};
    ck_assert_msg(tk_program_new(ctx, k, NULL, &p, &dg) == TK_OK, "%s", dg.msg);
    float a[4 * 100];
    uint16_t v[16];
    int64_t ad[2] = {4, 100}, vd[4] = {1, 2, 2, 4};
    tk_arg args[4] = {tk_arg_tensor(a, TK_F32, 2, ad), tk_arg_i32(5),
                      tk_arg_tensor(v, TK_BF16, 4, vd), tk_arg_f32(0.5f)};
    int64_t want[3] = {7, 5, 2}, grid[3];
    /* The interpreter agrees with the program's copy. */
    ck_assert_msg(tk_kernel_grid(k, 4, args, grid) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_mem_eq(grid, want, sizeof want);
    tk_kernel_destroy(k); /* the program must not need it any more */
    ck_assert_int_eq(tk_program_grid(p, args, grid, &dg), TK_OK);
    ck_assert_mem_eq(grid, want, sizeof want);
    args[1] = tk_arg_i32(-3);
    ck_assert_int_eq(tk_program_grid(p, args, grid, &dg), TK_OK);
    ck_assert(grid[0] == 7 && grid[1] == 1 && grid[2] == 3);
    args[1] = tk_arg_i32(5);

    launch_fails(ctx, p, 3, args, "kernel 'tk_test_sig' takes 4 arguments, got 3");
    tk_arg bad[4];
    memcpy(bad, args, sizeof bad);
    bad[1] = args[0];
    launch_fails(ctx, p, 4, bad, "argument 1 ('n') is a tensor, the kernel expects an i32 scalar");
    memcpy(bad, args, sizeof bad);
    bad[2] = tk_arg_f32(1);
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') is a scalar, the kernel expects a rank-4 bf16");
    memcpy(bad, args, sizeof bad);
    bad[2] = tk_arg_tensor(v, TK_BF16, 3, vd);
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') is a rank-3 tensor, the kernel expects rank 4");
    bad[2] = tk_arg_tensor(v, TK_F16, 4, vd);
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') is a f16 tensor, the kernel expects bf16");
    bad[2] = tk_arg_tensor(NULL, TK_BF16, 4, vd);
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') has a NULL data pointer");
    bad[2] = args[2];
    bad[2].rank = 5;
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') has rank 5, ranks 1..4 are supported");
    bad[2] = args[2];
    bad[2].dims[3] = -1;
    launch_fails(ctx, p, 4, bad, "argument 2 ('V') has dims[3] = -1");
    memcpy(bad, args, sizeof bad);
    bad[1] = tk_arg_i64(5);
    launch_fails(ctx, p, 4, bad, "argument 1 ('n') is an i64 scalar, the kernel expects an i32");
    bad[1] = args[1];
    bad[3] = tk_arg_i32(1);
    launch_fails(ctx, p, 4, bad, "argument 3 ('s') is an i32 scalar, the kernel expects a f32");
    /* Valid arguments get as far as the (missing) module. */
    ck_assert_int_eq(tk_launch(p, 4, args, NULL), TK_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "no loaded module"));
    ck_assert_int_eq(tk_program_origin(p), TK_FROM_COMPILE);
    tk_program_release(p);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The interpreter and tk_launch check arguments with one rule (ir/sig.c):
 * each argument list is accepted or rejected by both, with one message. A
 * bool parameter takes a bool or an i32 argument, and reads nonzero as 1. */
START_TEST(test_one_signature_check) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "tk_test_same", 1, &k), TK_OK);
    tk_value *a = tk_param_tensor(k, "A", TK_I32, 1);
    tk_value *b = tk_param_scalar(k, "b", TK_BOOL);
    tk_param_scalar(k, "s", TK_F32);
    (void)a;
    /* grid x = b + 1: both grid paths show how the flag reads. */
    tk_set_grid(k, tk_add(k, tk_cvt(k, b, TK_I32), tk_const_i32(k, 1)), NULL, NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    tk_program *p;
    tk_diag dg = {0};
    ck_assert_msg(tk_program_new(ctx, k, NULL, &p, &dg) == TK_OK, "%s", dg.msg);
    int32_t buf[1] = {-1};
    int64_t d1[2] = {1, 1}; /* room for the rank-2 case below */
    tk_arg ok[3] = {tk_arg_tensor(buf, TK_I32, 1, d1), tk_arg_i32(7), tk_arg_f32(1)};
    tk_arg flag = ok[1];
    flag.dtype = TK_BOOL; /* a bool argument made by hand */
    struct {
        int slot;
        tk_arg arg;
        tk_status want;
    } cases[] = {
        {-1, {0}, TK_OK},                  /* as given: bool <- i32 */
        {1, flag, TK_OK},                  /* bool <- bool */
        {1, tk_arg_i64(1), TK_ERR_LAUNCH}, /* bool <- i64 */
        {1, tk_arg_f32(1), TK_ERR_LAUNCH}, /* bool <- f32 */
        {2, tk_arg_i32(1), TK_ERR_LAUNCH}, /* f32 <- i32 */
        {0, tk_arg_tensor(NULL, TK_I32, 1, d1), TK_ERR_LAUNCH},
        {0, tk_arg_tensor(buf, TK_F32, 1, d1), TK_ERR_LAUNCH},
        {0, tk_arg_tensor(buf, TK_I32, 2, d1), TK_ERR_LAUNCH},
        {0, tk_arg_i32(3), TK_ERR_LAUNCH},
        {3, {0}, TK_ERR_LAUNCH}, /* too few */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tk_arg args[3];
        memcpy(args, ok, sizeof args);
        int n = cases[c].slot == 3 ? 2 : 3;
        if (cases[c].slot >= 0 && cases[c].slot < 3) args[cases[c].slot] = cases[c].arg;
        tk_diag_clear(&dg);
        tk_status sl = tk_program_check_args(p, n, args, &dg);
        tk_status si = tk_interp_run(k, n, args);
        ck_assert_msg(sl == cases[c].want && si == cases[c].want, "case %zu: launch %s, interp %s",
                      c, tk_status_name(sl), tk_status_name(si));
        if (sl == TK_OK) { /* the flag reads as 1 (tk_launch packs nonzero as 1) */
            int64_t gl[3], gi[3];
            ck_assert_int_eq(tk_program_grid(p, args, gl, &dg), TK_OK);
            ck_assert_int_eq(tk_kernel_grid(k, n, args, gi), TK_OK);
            ck_assert(gl[0] == 2 && gi[0] == 2);
            continue;
        }
        /* Same message but for the entry point's name. */
        const char *ml = strchr(dg.msg, ':'), *mi = strchr(tk_ctx_error(ctx), ':');
        ck_assert_ptr_nonnull(ml);
        ck_assert_ptr_nonnull(mi);
        ck_assert_str_eq(ml, mi);
    }
    tk_program_release(p);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The launch's grid and the interpreter's come from one evaluator: they agree
 * where separate code used to differ (a negative ceil_div; float->i32
 * saturating rather than wrapping), and a zero divisor says where. */
START_TEST(test_grid_one_evaluator) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "tk_test_grid", 1, &k), TK_OK);
    tk_value *n = tk_param_scalar(k, "n", TK_I32), *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *d = tk_param_scalar(k, "d", TK_I32);
    tk_value *gx = tk_ceil_div(k, tk_neg(k, n), d);
    tk_value *big = tk_cvt(k, tk_mul(k, s, tk_const_f32(k, 1e10f)), TK_I32);
    tk_value *gy = tk_add(k, tk_rem(k, big, tk_const_i32(k, 7)), tk_const_i32(k, 1));
    tk_set_grid(
        k, gx, gy,
        tk_max(k, tk_cvt(k, tk_mul(k, s, tk_const_f32(k, 10)), TK_I32), tk_const_i32(k, 1)));
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    tk_program *p;
    tk_diag dg = {0};
    ck_assert_msg(tk_program_new(ctx, k, NULL, &p, &dg) == TK_OK, "%s", dg.msg);
    tk_arg args[3] = {tk_arg_i32(8), tk_arg_f32(0.3f), tk_arg_i32(-3)};
    int64_t want[3] = {3, 2, 3}, gi[3], gp[3]; /* ceil(8/3); INT32_MAX % 7 + 1; 3 */
    ck_assert_msg(tk_kernel_grid(k, 3, args, gi) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_program_grid(p, args, gp, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_mem_eq(gi, want, sizeof want);
    ck_assert_mem_eq(gp, want, sizeof want);
    args[2] = tk_arg_i32(0);
    ck_assert_int_eq(tk_program_grid(p, args, gp, &dg), TK_ERR_LAUNCH);
    ck_assert_msg(strstr(dg.msg, "tk_launch: grid dimension 0: op #2 (ceil_div): division by zero"),
                  "%s", dg.msg);
    tk_program_release(p);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("launch_checks");
    TCase *tc = tcase_create("launch_checks");
    tcase_add_test(tc, test_launch_checks);
    tcase_add_test(tc, test_one_signature_check);
    tcase_add_test(tc, test_grid_one_evaluator);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
