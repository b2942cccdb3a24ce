/* The builder API's contract for kernel authors (issue 20): index arrays
 * carry their count (a wrong one is a sticky error, never a crash: these
 * tests also run under ASan), the kernel must have a grid, values can be
 * named for the printer and the messages, messages name the public call,
 * the documented dtype rules, and the occupancy options (maxnreg /
 * min_blocks), which ptxas must honour. util/build.h's fixture: a 4-warp
 * kernel k with a one-block grid. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/build.h"

/* ---- index counts ------------------------------------------------------------ */
START_TEST(load_one_index_for_rank2) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[1] = {ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: 1 index given; the rank-2 tensor 'A' takes 2");
    /* sticky: later calls are no-ops, finish reports the first error */
    tk_value *two[2] = {ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, two, 0));
    ck_assert_int_eq(tk_kernel_finish(k), TK_ERR_INVALID_ARG);
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: 1 index given");
}
END_TEST

START_TEST(store_three_for_rank2) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[3] = {ci(0), ci(0), ci(0)};
    tk_store(k, A, idx, f32t(16, 16));
    EXPECT(TK_ERR_INVALID_ARG, "tk_store: 3 indices given; the rank-2 tensor 'A' takes 2");
}
END_TEST

START_TEST(shared_takes_two) {
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[3] = {ci(0), ci(0), ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), s, idx, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: 3 indices given; a shared tile (row, col) takes 2");
}
END_TEST

START_TEST(copy_counts) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[2] = {ci(0), ci(0)};
    tk_copy_to_shared(k, s, A, idx, 0, TK_COPY_SYNC);
    EXPECT(TK_ERR_INVALID_ARG, "tk_copy_to_shared: 2 indices given; the rank-3 tensor 'A' "
                               "takes 3");
}
END_TEST

START_TEST(copy_to_global_count) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *s = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *idx[4] = {ci(0), ci(0), ci(0), ci(0)};
    tk_copy_to_global(k, A, idx, s);
    EXPECT(TK_ERR_INVALID_ARG, "tk_copy_to_global: 4 indices given; the rank-2 tensor 'A' "
                               "takes 2");
}
END_TEST

/* A pointer has no length: the macro rejects it instead of reading past it. */
START_TEST(pointer_rejected) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *one = ci(0);
    tk_value **p = &one;
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, p, 0));
    EXPECT(TK_ERR_INVALID_ARG, "tk_load: idx is not an array of 1..4 indices; pass an array of "
                               "indices or call tk_load_n");
}
END_TEST

START_TEST(explicit_counts) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *idx[2] = {ci(0), ci(0)};
    ck_assert_ptr_nonnull(tk_load_n(k, wtile(TK_F32, 16, 16, TK_ROW), A, 2, idx, 0));
    static const int bad[] = {0, -7, 1, 3, 1000};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rewarp(4);
        A = tk_param_tensor(k, "A", TK_F32, 2);
        tk_value *ix[2] = {ci(0), ci(0)};
        tk_store_n(k, A, bad[i], ix, f32t(16, 16));
        ck_assert_int_eq(tk_kernel_status(k), TK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(tk_kernel_error(k), "tk_store"));
    }
}
END_TEST

START_TEST(const_array_ok) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 1);
    tk_value *const idx[1] = {ci(0)};
    tk_store(k, A, idx, tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW)));
    OK_FINISH();
}
END_TEST

/* ---- grid ----------------------------------------------------------------- */
START_TEST(no_grid_is_an_error) {
    tk_kernel *g = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "nogrid", 1, &g), TK_OK);
    ck_assert_int_eq(tk_kernel_finish(g), TK_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tk_kernel_error(g), "tk_kernel_finish: kernel 'nogrid' has no "
                                                     "grid; call tk_set_grid"));
    tk_kernel_destroy(g);
    ck_assert_int_eq(tk_kernel_create(ctx, "onegrid", 1, &g), TK_OK);
    tk_set_grid(g, NULL, NULL, NULL); /* one block, said explicitly */
    ck_assert_int_eq(tk_kernel_finish(g), TK_OK);
    tk_kernel_destroy(g);
}
END_TEST

/* ---- messages: the public call and the value's name -------------------------- */
START_TEST(message_names_call_and_value) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *row = tk_mul(k, tk_lane_id(k), ci(16));
    ck_assert_int_eq(tk_value_set_name(row, "row"), TK_OK);
    tk_value *idx[2] = {row, ci(0)};
    ck_assert_ptr_null(tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0));
    EXPECT(TK_ERR_SCOPE, "tk_load: operand 1 (%row) varies across the lanes of a warp");
}
END_TEST

START_TEST(names_printed) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *r0 = tk_mul(k, tk_block_id_i64(k, 0), tk_const_i64(k, 16));
    ck_assert_int_eq(tk_value_set_name(r0, "row0"), TK_OK);
    tk_value *idx[2] = {r0, tk_const_i64(k, 0)};
    tk_value *x = tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), A, idx, 0);
    ck_assert_int_eq(tk_value_set_name(x, "x"), TK_OK);
    tk_store(k, A, idx, tk_exp(k, x));
    OK_FINISH();
    char *text = NULL;
    ck_assert_int_eq(tk_kernel_print(k, &text), TK_OK);
    ck_assert_msg(strstr(text, "%row0 = mul") && strstr(text, "load_g2r A, %row0,") &&
                      strstr(text, "%x = load_g2r") && strstr(text, "exp %x"),
                  "%s", text);
    tk_free(text);
}
END_TEST

START_TEST(bad_names) {
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *a = ci(1), *b = ci(2);
    ck_assert_int_eq(tk_value_set_name(NULL, "x"), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_value_set_name(a, "a"), TK_OK);
    ck_assert_int_eq(tk_value_set_name(b, "a"), TK_ERR_INVALID_ARG);
    EXPECT(TK_ERR_INVALID_ARG, "tk_value_set_name: %a already names %");
    rewarp(4);
    ck_assert_int_eq(tk_value_set_name(ci(1), "2x"), TK_ERR_INVALID_ARG);
    EXPECT(TK_ERR_INVALID_ARG, "'2x' is not a C identifier of at most 30 characters");
    rewarp(4);
    ck_assert_int_eq(tk_value_set_name(ci(1), "a_name_that_is_much_too_long_for"),
                     TK_ERR_INVALID_ARG);
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_int_eq(tk_value_set_name(A, "B"), TK_ERR_STATE);
    EXPECT(TK_ERR_STATE, "tk_value_set_name: A already has a name");
    rewarp(4);
    a = ci(1);
    ck_assert_int_eq(tk_value_set_name(a, "a"), TK_OK);
    ck_assert_int_eq(tk_value_set_name(a, "b"), TK_ERR_STATE);
    rewarp(4);
    a = ci(1);
    OK_FINISH();
    ck_assert_int_eq(tk_value_set_name(a, "late"), TK_ERR_STATE);
}
END_TEST

/* ---- dtype rules ------------------------------------------------------------ */
/* A bf16 tile times an f32 scalar: computed in f32 with the scalar as given,
 * rounded once to bf16 (the result keeps the tile's dtype). */
START_TEST(mixed_tile_scalar_rule) {
    tk_value *X = tk_param_tensor(k, "X", TK_BF16, 2);
    tk_value *idx[2] = {tk_const_i64(k, 0), tk_const_i64(k, 0)};
    tk_value *x = tk_load(k, wtile(TK_BF16, 16, 16, TK_ROW), X, idx, 0);
    tk_value *y = tk_mul(k, x, tk_const_f32(k, 1.0f / 3.0f));
    tk_barrier(k); /* every warp read X before warp 0 writes it (the race checker) */
    tk_if_begin(k, tk_eq(k, tk_warp_id(k), tk_const_i32(k, 0)));
    tk_store(k, X, idx, tk_exp(k, y)); /* bf16 exp: f32 math, one rounding */
    tk_if_end(k, 0, NULL, NULL);
    OK_FINISH();
    uint16_t buf[256];
    for (int i = 0; i < 256; i++) buf[i] = tk_f32_to_bf16(1.0f + (float)i / 64.0f);
    int64_t dims[2] = {16, 16};
    tk_arg arg = tk_arg_tensor(buf, TK_BF16, 2, dims);
    ck_assert_int_eq(tk_interp_run(k, 1, &arg), TK_OK);
    for (int i = 0; i < 256; i++) {
        float in = tk_bf16_to_f32(tk_f32_to_bf16(1.0f + (float)i / 64.0f));
        float mul = tk_bf16_to_f32(tk_f32_to_bf16(in * (1.0f / 3.0f)));
        float want = tk_bf16_to_f32(tk_f32_to_bf16(expf(mul)));
        ck_assert_msg(tk_bf16_to_f32(buf[i]) == want, "elem %d: %g, want %g", i,
                      tk_bf16_to_f32(buf[i]), want);
    }
}
END_TEST

START_TEST(ids_i64) {
    tk_value *n = tk_param_scalar(k, "n", TK_I64);
    tk_value *b = tk_block_id_i64(k, 0), *w = tk_warp_id_i64(k), *l = tk_lane_id_i64(k);
    ck_assert_ptr_nonnull(tk_lt(k, tk_add(k, b, w), n)); /* i64 with i64, no cvt */
    ck_assert_ptr_nonnull(tk_add(k, l, n));
    ck_assert_ptr_null(tk_add(k, tk_block_id(k, 0), n)); /* i32 with i64: no implicit mix */
    EXPECT(TK_ERR_TYPE, "tk_add: operands are a i32 and a i64: scalars need one numeric dtype");
}
END_TEST

/* A leading index past its dimension is masked (reads fill, writes nothing),
 * the documented rule; the GPU lowering applies the same mask (ops/nv/mem.c). */
START_TEST(leading_index_masked) {
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 3), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *past[3] = {tk_const_i64(k, 1), tk_const_i64(k, 0), tk_const_i64(k, 0)};
    tk_value *in[3] = {tk_const_i64(k, 0), tk_const_i64(k, 0), tk_const_i64(k, 0)};
    tk_value *x = tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), X, past, 7.0f);
    tk_if_begin(k, tk_eq(k, tk_warp_id(k), tk_const_i32(k, 0))); /* one writer (race checker) */
    tk_store(k, O, in, x);
    tk_store(k, O, past, tk_fill(k, wtile(TK_F32, 16, 16, TK_ROW), tk_const_f32(k, 9.0f)));
    tk_if_end(k, 0, NULL, NULL);
    OK_FINISH();
    float xs[256] = {0}, os[256] = {0};
    int64_t dims[3] = {1, 16, 16};
    tk_arg args[2] = {tk_arg_tensor(xs, TK_F32, 3, dims), tk_arg_tensor(os, TK_F32, 3, dims)};
    ck_assert_int_eq(tk_interp_run(k, 2, args), TK_OK);
    for (int i = 0; i < 256; i++) ck_assert_float_eq(os[i], 7.0f);
}
END_TEST

/* ---- occupancy options ---------------------------------------------------------- */
START_TEST(options_validated_and_printed) {
    ck_assert_int_eq(tk_kernel_set_maxnreg(NULL, 64), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_kernel_set_maxnreg(k, 8), TK_ERR_INVALID_ARG);
    EXPECT(TK_ERR_INVALID_ARG, "tk_kernel_set_maxnreg: 8; expected 0 (no constraint) or 16..255");
    rewarp(4);
    ck_assert_int_eq(tk_kernel_set_min_blocks(k, 33), TK_ERR_INVALID_ARG);
    rewarp(4);
    char *plain = NULL, *capped = NULL;
    OK_FINISH();
    ck_assert_int_eq(tk_kernel_print(k, &plain), TK_OK);
    ck_assert_int_eq(tk_kernel_set_maxnreg(k, 64), TK_ERR_STATE); /* finished */
    rewarp(4);
    ck_assert_int_eq(tk_kernel_set_maxnreg(k, 64), TK_OK);
    ck_assert_int_eq(tk_kernel_set_min_blocks(k, 2), TK_OK);
    OK_FINISH();
    ck_assert_int_eq(tk_kernel_print(k, &capped), TK_OK);
    ck_assert_msg(strstr(capped, "kernel t warps=4 smem=0 maxnreg=64 min_blocks=2\n"), "%s",
                  capped);
    ck_assert_ptr_null(strstr(plain, "maxnreg"));
    tk_free(plain);
    tk_free(capped);
}
END_TEST

/* tk_param_set_cache: tensor parameters of this kernel only, three
 * policies, printed (so in the cache key) only when not NORMAL. */
START_TEST(cache_policy_validated_and_printed) {
    ck_assert_int_eq(tk_param_set_cache(NULL, NULL, TK_CACHE_STREAM), TK_ERR_INVALID_ARG);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *s = tk_param_scalar(k, "s", TK_F32);
    tk_param_set_cache(k, s, TK_CACHE_STREAM);
    EXPECT(TK_ERR_INVALID_ARG, "tk_param_set_cache: the value is not a tensor parameter of 't'");
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2);
    ck_assert_int_eq(tk_param_set_cache(k, A, 3), TK_ERR_INVALID_ARG);
    EXPECT(TK_ERR_INVALID_ARG, "tk_param_set_cache: policy 3 for 'A'; expected TK_CACHE_NORMAL");
    rewarp(4);
    tk_value *B = tk_param_tensor(k, "B", TK_F32, 2);
    ck_assert_int_eq(tk_param_set_cache(k, tk_dim(k, B, 0), TK_CACHE_KEEP), TK_ERR_INVALID_ARG);
    rewarp(4);
    A = tk_param_tensor(k, "A", TK_F32, 2), B = tk_param_tensor(k, "B", TK_F32, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2);
    ck_assert_int_eq(tk_param_set_cache(k, A, TK_CACHE_STREAM), TK_OK);
    ck_assert_int_eq(tk_param_set_cache(k, B, TK_CACHE_KEEP), TK_OK);
    ck_assert_int_eq(tk_param_set_cache(k, C, TK_CACHE_KEEP), TK_OK);
    ck_assert_int_eq(tk_param_set_cache(k, C, TK_CACHE_NORMAL), TK_OK); /* the last one counts */
    OK_FINISH();
    ck_assert_int_eq(tk_param_set_cache(k, A, TK_CACHE_KEEP), TK_ERR_STATE); /* finished */
    char *text = NULL;
    ck_assert_int_eq(tk_kernel_print(k, &text), TK_OK);
    ck_assert_msg(strstr(text, "  param A: f32 tensor rank 2 cache=stream\n"
                               "  param B: f32 tensor rank 2 cache=keep\n"
                               "  param C: f32 tensor rank 2\n"),
                  "%s", text);
    tk_free(text);
}
END_TEST

/* A kernel that wants many registers, capped at 64: ptxas must keep to it. */
static tk_kernel *greedy(int maxnreg) {
    tk_kernel *g = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "greedy", 1, &g), TK_OK);
    tk_value *X = tk_param_tensor(g, "X", TK_F32, 2);
    tk_value *idx[2] = {tk_const_i64(g, 0), tk_const_i64(g, 0)};
    tk_value *x = tk_load(g, tk_tile_type(TK_F32, 64, 64, TK_WARP, TK_ROW), X, idx, 0);
    tk_value *e = tk_exp(g, x);
    tk_store(g, X, idx, tk_add(g, tk_mul(g, e, x), tk_row_max(g, e)));
    tk_set_grid(g, NULL, NULL, NULL);
    if (maxnreg) tk_kernel_set_maxnreg(g, maxnreg);
    ck_assert_msg(tk_kernel_finish(g) == TK_OK, "%s", tk_kernel_error(g));
    return g;
}

static int ptxas_registers(const char *ptx) {
    char dir[] = "/tmp/tk_maxnreg_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[64], cmd[256], line[512];
    snprintf(path, sizeof path, "%s/k.ptx", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(ptx, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/local/cuda/bin/ptxas -arch=sm_90a -v -o %s/k.cubin %s 2>&1",
             dir, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int regs = -1;
    while (fgets(line, sizeof line, p)) {
        const char *u = strstr(line, "Used ");
        if (u && strstr(u, "registers")) regs = atoi(u + 5);
    }
    pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    return regs;
}

START_TEST(maxnreg_honoured_by_ptxas) {
    if (access("/usr/local/cuda/bin/ptxas", X_OK) != 0) {
        printf("maxnreg test skipped: no /usr/local/cuda/bin/ptxas\n");
        return;
    }
    tk_kernel *g = greedy(64);
    char *ptx = NULL;
    ck_assert_int_eq(tk_emit_ptx(ctx, g, "sm_90a", &ptx), TK_OK);
    ck_assert_ptr_nonnull(strstr(ptx, ".maxnreg 64"));
    int regs = ptxas_registers(ptx);
    tk_free(ptx);
    tk_kernel_destroy(g);
    printf("ptxas -v: %d registers under maxnreg 64\n", regs);
    ck_assert_msg(regs > 0 && regs <= 64, "ptxas used %d registers", regs);
}
END_TEST

START_TEST(no_option_no_directive) {
    tk_kernel *g = greedy(0);
    char *ptx = NULL;
    ck_assert_int_eq(tk_emit_ptx(ctx, g, "sm_90a", &ptx), TK_OK);
    ck_assert_ptr_null(strstr(ptx, ".maxnreg"));
    ck_assert_ptr_null(strstr(ptx, ".minnctapersm"));
    tk_free(ptx);
    tk_kernel_destroy(g);
}
END_TEST

/* ---- suite ------------------------------------------------------------------ */
static Suite *contract_suite(void) {
    Suite *s = suite_create("api_contract");
    const TTest *tests[] = {
        load_one_index_for_rank2,
        store_three_for_rank2,
        shared_takes_two,
        copy_counts,
        copy_to_global_count,
        pointer_rejected,
        explicit_counts,
        const_array_ok,
        no_grid_is_an_error,
        message_names_call_and_value,
        names_printed,
        bad_names,
        mixed_tile_scalar_rule,
        ids_i64,
        leading_index_masked,
        options_validated_and_printed,
        cache_policy_validated_and_printed,
        maxnreg_honoured_by_ptxas,
        no_option_no_directive,
    };
    TCase *tc = build_tcase(s, "contract", tests, sizeof tests / sizeof *tests);
    tcase_set_timeout(tc, 60);
    return s;
}

int main(void) { return run_suite(contract_suite()); }
