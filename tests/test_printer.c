/* Printer tests: golden files for a few small kernels, determinism, and the
 * canonical-form guarantees the kernel cache relies on (anything that
 * changes code changes the text).
 *
 * Goldens live in tests/golden/<name>.txt. After an intended change of the
 * printed form, rewrite them with TK_UPDATE_GOLDEN=1 and review the diff. */
#include <check.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tk/tk.h"
#include "util/fixture_ir.h"
#include "util/run.h"

#ifndef TK_SOURCE_DIR
#define TK_SOURCE_DIR "."
#endif

/* Kernels and printed texts a test makes are freed by the fixture, so a
 * failing assertion (which leaves the test early) leaks nothing. */
static tk_ctx *ctx;
static tk_kernel *kernels[64];
static char *texts[64];
static int nkernels, ntexts;

static void setup(void) { ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK); }
static void teardown(void) {
    for (int i = 0; i < nkernels; i++) tk_kernel_destroy(kernels[i]);
    for (int i = 0; i < ntexts; i++) tk_free(texts[i]);
    nkernels = ntexts = 0;
    tk_ctx_destroy(ctx);
    ctx = NULL;
}

static tk_kernel *new_kernel(const char *name, int warps) {
    tk_kernel *k = NULL;
    ck_assert_int_lt(nkernels, 64);
    ck_assert_int_eq(tk_kernel_create(ctx, name, warps, &k), TK_OK);
    tk_set_grid(k, NULL, NULL, NULL); /* prints as the unset grid did: (1, 1, 1) */
    return kernels[nkernels++] = k;
}

static void finish(tk_kernel *k) {
    tk_status s = tk_kernel_finish(k);
    ck_assert_msg(s == TK_OK, "finish: %s: %s", tk_status_name(s), tk_kernel_error(k));
}

/* Prints k; the fixture frees the text. */
static char *print(tk_kernel *k) {
    char *t = NULL;
    ck_assert_int_lt(ntexts, 64);
    ck_assert_int_eq(tk_kernel_print(k, &t), TK_OK);
    ck_assert_ptr_nonnull(t);
    return texts[ntexts++] = t;
}

static tk_type wtile(tk_dtype dt, int r, int c, tk_layout l) {
    return tk_tile_type(dt, r, c, TK_WARP, l);
}

/* ---- golden files ----------------------------------------------------------- */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* 1-based number of the first line where a and b differ; copies both lines. */
static int first_diff(const char *a, const char *b, char *la, char *lb, size_t n) {
    int line = 1;
    const char *sa = a, *sb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            sa = a + 1;
            sb = b + 1;
        }
        a++;
        b++;
    }
    snprintf(la, n, "%.*s", (int)strcspn(sa, "\n"), sa);
    snprintf(lb, n, "%.*s", (int)strcspn(sb, "\n"), sb);
    return line;
}

static void check_golden(const char *name, tk_kernel *k) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/golden/%s.txt", TK_SOURCE_DIR, name);
    char *got = print(k);
    const char *upd = getenv("TK_UPDATE_GOLDEN");
    if (upd && !strcmp(upd, "1")) {
        FILE *f = fopen(path, "wb");
        ck_assert_msg(f != NULL, "cannot write %s", path);
        fputs(got, f);
        fclose(f);
        fprintf(stderr, "golden: rewrote %s\n", path);
        return;
    }
    char *want = read_file(path);
    if (!want) {
        fprintf(stderr, "---- printed %s ----\n%s----\n", name, got);
        ck_abort_msg("golden %s is missing; run with TK_UPDATE_GOLDEN=1 to create it", path);
    }
    int same = !strcmp(want, got);
    if (!same) {
        char la[256], lb[256];
        int line = first_diff(want, got, la, lb, sizeof la);
        fprintf(stderr,
                "golden mismatch in %s at line %d\n  expected: %s\n  actual:   %s\n"
                "---- full actual text ----\n%s----\n(TK_UPDATE_GOLDEN=1 rewrites the goldens)\n",
                path, line, la, lb, got);
    }
    free(want);
    ck_assert_msg(same, "printed %s differs from %s (details on stderr)", name, path);
}

/* ---- the kernels ---------------------------------------------------------------- */
/* Value ids follow creation order, so these builders never pass two
 * op-making calls as arguments of one call (C leaves their order open). */
/* A pipelined bf16 GEMM; `bm` is the BM spec. */
static tk_kernel *build_gemm(int bm) {
    tk_kernel *k = new_kernel("gemm", 4);
    tu_build_gemm(k, bm);
    finish(k);
    return k;
}

/* Masked softmax rows with an if/else; `fill` is the mask fill value. */
static tk_kernel *build_softmax(float fill) {
    tk_kernel *k = new_kernel("softmax", 2);
    tu_build_softmax(k, fill);
    finish(k);
    return k;
}

/* Every memory op: padded multi-stage smem, sync/async copies with fills,
 * shared and global loads/stores of tiles and vectors. */
static tk_kernel *build_memory(int async) {
    tk_kernel *k = new_kernel("memory", 4);
    tk_value *G = tk_param_tensor(k, "G", TK_F16, 4), *V = tk_param_tensor(k, "V", TK_F16, 1);
    tk_value *s = tk_shared(k, TK_F16, 32, 64, TK_SMEM_PAD, 3);
    tk_value *p = tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1);
    tk_value *z = tk_const_i32(k, 0), *i = tk_const_i32(k, 1), *j = tk_const_i32(k, 2);
    tk_value *s1 = tk_stage(k, s, i);
    tk_value *gi[4] = {z, i, j, z};
    tk_copy_to_shared(k, s1, G, gi, async ? 0.0f : 1.5f, async);
    tk_async_commit(k);
    tk_async_wait(k, 2);
    tk_barrier(k);
    tk_value *t = tk_load(k, wtile(TK_F16, 16, 32, TK_COL), s1, ((tk_value *[]){z, z}), 0);
    tk_value *f = tk_exp(k, tk_cvt(k, t, TK_F32));
    tk_value *q = tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), p, ((tk_value *[]){z, z}), 0);
    tk_store(k, p, ((tk_value *[]){z, z}), tk_mul(k, q, tk_const_f32(k, 0.1f)));
    tk_value *v = tk_load(k, tk_vec_type(TK_F16, 32, TK_PER_COL, TK_WARP, TK_COL), V,
                          (tk_value *[]){j}, -0.0f);
    tk_value *tv = tk_add(k, tk_cvt(k, f, TK_F16), v);
    tk_store(k, s1, ((tk_value *[]){tk_const_i32(k, 16), z}), tv);
    tk_store(k, V, (tk_value *[]){z}, v);
    tk_barrier(k);
    tk_copy_to_global(k, G, gi, s1);
    finish(k);
    return k;
}

/* Nested loops with two carried values, ifs with and without results,
 * scalar params, bool/i64/f32 constants, and a grid from host expressions. */
static tk_kernel *build_control(void) {
    tk_kernel *k = new_kernel("control", 8);
    tk_value *n = tk_param_scalar(k, "n", TK_I32), *flag = tk_param_scalar(k, "flag", TK_BOOL);
    tk_value *alpha = tk_param_scalar(k, "alpha", TK_F32);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *S = tk_spec(k, "STEPS", -3);
    tk_value *big = tk_const_i64(k, INT64_C(1) << 40);
    tk_value *gx = tk_select(k, flag, tk_ceil_div(k, n, tk_const_i32(k, 64)), n);
    tk_value *gy = tk_add(k, S, big);
    tk_value *gz = tk_cvt(k, tk_rem(k, n, tk_const_i32(k, 3)), TK_I64);
    tk_set_grid(k, gx, gy, gz);
    tk_value *z = tk_const_i32(k, 0), *one = tk_const_i32(k, 1);
    tk_value *init[2];
    init[0] = tk_zeros(k, wtile(TK_F32, 16, 16, TK_ROW));
    init[1] = tk_const_f32(k, 1.0f);
    tk_value *c[2], *res[2], *c2, *r2;
    tk_value *i = tk_for_begin(k, z, n, one, 2, init, c);
    tk_value *jn = tk_min(k, i, tk_const_i32(k, 4));
    tk_value *j = tk_for_begin(k, z, jn, one, 1, &c[1], &c2);
    tk_value *odd = tk_eq(k, tk_rem(k, j, tk_const_i32(k, 2)), one);
    tk_value *then_v = tk_mul(k, c2, alpha), *nv;
    tk_if_begin(k, tk_and(k, odd, tk_ne(k, n, z)));
    tk_else(k, 1, &then_v);
    tk_value *else_v = tk_neg(k, c2);
    tk_if_end(k, 1, &else_v, &nv);
    tk_for_end(k, 1, &nv, &r2);
    tk_value *next[2] = {tk_add(k, c[0], r2), r2};
    tk_for_end(k, 2, next, res);
    tk_if_begin(k, tk_or(k, flag, tk_const_bool(k, 0)));
    tk_value *w = tk_warp_id(k);
    tk_value *row = tk_mul(k, w, tk_const_i32(k, 16));
    tk_store(k, O, ((tk_value *[]){row, z}), tk_max(k, res[0], tk_abs(k, res[1])));
    tk_if_end(k, 0, NULL, NULL);
    finish(k);
    return k;
}

/* Warpgroup tiles and the four mma kinds. */
static tk_kernel *build_mma(void) {
    tk_kernel *k = new_kernel("mma_kinds", 8);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z = tk_const_i32(k, 0), *wg = tk_warpgroup_id(k);
    tk_value *r = tk_mul(k, wg, tk_const_i32(k, 64));
    tk_value *a = tk_load(k, tk_tile_type(TK_BF16, 64, 32, TK_WARPGROUP, TK_ROW), A,
                          ((tk_value *[]){r, z}), 0);
    tk_value *bt = tk_load(k, wtile(TK_BF16, 16, 32, TK_ROW), A, ((tk_value *[]){z, z}), 0);
    tk_value *c = tk_mma(k, TK_MMA_ABT, a, bt, NULL);
    c = tk_sub(k, c, tk_row_max(k, c));
    tk_store(k, O, ((tk_value *[]){r, z}), c);
    tk_value *ac = tk_load(k, wtile(TK_BF16, 32, 16, TK_COL), A, ((tk_value *[]){z, z}), 0);
    tk_value *bc = tk_load(k, wtile(TK_BF16, 32, 16, TK_COL), A, ((tk_value *[]){z, z}), 0);
    tk_value *br = tk_load(k, wtile(TK_BF16, 16, 32, TK_ROW), A, ((tk_value *[]){z, z}), 0);
    tk_value *d = tk_mma(k, TK_MMA_ATB, ac, bc, NULL);
    d = tk_mma(k, TK_MMA_ATBT, ac, br, d);
    tk_value *ar = tk_load(k, wtile(TK_BF16, 16, 32, TK_ROW), A, ((tk_value *[]){z, z}), 0);
    d = tk_mma(k, TK_MMA_AB, ar, bc, d);
    tk_store(k, O, ((tk_value *[]){z, z}), d);
    finish(k);
    return k;
}

/* A view narrowed twice (the second time on `axis2`), loaded from and
 * stored to, and its dim. */
static tk_kernel *build_narrow(int axis2) {
    tk_kernel *k = new_kernel("narrow", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 3), *s = tk_param_scalar(k, "s", TK_I64);
    tk_value *n = tk_param_scalar(k, "n", TK_I32);
    tk_value *n64 = tk_cvt(k, n, TK_I64);
    tk_value *B = tk_narrow(k, A, 1, s, n64);
    tk_value *c16 = tk_const_i32(k, 16);
    tk_value *C = tk_narrow(k, B, axis2, n, c16);
    tk_value *z = tk_const_i32(k, 0), *idx[3] = {z, z, z};
    tk_value *t = tk_load(k, wtile(TK_F32, 16, 16, TK_ROW), C, idx, 1.0f);
    tk_store(k, C, idx, t);
    tk_dim(k, C, 1);
    finish(k);
    return k;
}

/* ---- golden tests ------------------------------------------------------------------ */
START_TEST(golden_gemm) {
    tk_kernel *k = build_gemm(64);
    check_golden("gemm", k);
}
END_TEST

START_TEST(golden_softmax) {
    tk_kernel *k = build_softmax(-INFINITY);
    check_golden("softmax", k);
}
END_TEST

START_TEST(golden_memory) {
    tk_kernel *k = build_memory(0);
    check_golden("memory", k);
}
END_TEST

START_TEST(golden_control) {
    tk_kernel *k = build_control();
    check_golden("control", k);
}
END_TEST

START_TEST(golden_mma) {
    tk_kernel *k = build_mma();
    check_golden("mma_kinds", k);
}
END_TEST

/* ---- determinism and canonical form ------------------------------------------------ */
/* Prints a and b and checks that the texts are (un)equal. */
static void compare(tk_kernel *a, tk_kernel *b, int want_equal, const char *what) {
    char *ta = print(a), *tb = print(b);
    int eq = !strcmp(ta, tb);
    if (eq != want_equal)
        fprintf(stderr, "---- %s: first ----\n%s---- second ----\n%s", what, ta, tb);
    ck_assert_msg(eq == want_equal, "%s: texts are %s", what, eq ? "equal" : "different");
}

START_TEST(deterministic) {
    compare(build_gemm(64), build_gemm(64), 1, "two gemm builds");
    compare(build_softmax(-INFINITY), build_softmax(-INFINITY), 1, "two softmax builds");
    compare(build_memory(1), build_memory(1), 1, "two memory builds");
    compare(build_control(), build_control(), 1, "two control builds");
    compare(build_mma(), build_mma(), 1, "two mma builds");
}
END_TEST

START_TEST(spec_changes_text) { compare(build_gemm(64), build_gemm(128), 0, "BM 64 vs 128"); }
END_TEST

START_TEST(attr_changes_text) {
    compare(build_softmax(-INFINITY), build_softmax(-1e30f), 0, "mask fill -inf vs -1e30");
    compare(build_softmax(-INFINITY), build_softmax(INFINITY), 0, "mask fill -inf vs +inf");
    compare(build_memory(0), build_memory(1), 0, "sync vs async copy");
    compare(build_memory(1), build_memory(TK_COPY_TMA), 0, "cp.async vs copy-engine copy");
}
END_TEST

/* tk_narrow prints its operands and axis; narrowing another axis is
 * another kernel (the text is the cache key). */
START_TEST(narrow_prints) {
    char *t = print(build_narrow(2));
    static const char *const lines[] = {
        "  %5 = narrow A, s, %4 axis=1 : rank-3 f32 tensor\n",
        "  %7 = narrow %5, n, %6 axis=2 : rank-3 f32 tensor\n",
        "  %9 = load_g2r %7, %8, %8, %8 fill=1 : 16x16 f32 row tile (warp)\n",
        "  store_r2g %7, %8, %8, %8, %9\n",
        "  %10 = dim %7 axis=1 : i64\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        ck_assert_msg(strstr(t, lines[i]) != NULL, "missing '%s' in\n%s", lines[i], t);
    compare(build_narrow(2), build_narrow(2), 1, "two narrow builds");
    compare(build_narrow(2), build_narrow(1), 0, "narrow axis 2 vs 1");
}
END_TEST

/* Kernels differing only in name, warps, a parameter's rank/dtype, or a
 * const value print differently. */
static tk_kernel *tiny(const char *name, int warps, tk_dtype dt, int rank, float c) {
    tk_kernel *k = new_kernel(name, warps);
    tk_param_tensor(k, "A", dt, rank);
    tk_const_f32(k, c);
    finish(k);
    return k;
}

START_TEST(header_changes_text) {
    compare(tiny("a", 4, TK_F32, 2, 1), tiny("a", 4, TK_F32, 2, 1), 1, "same tiny");
    compare(tiny("a", 4, TK_F32, 2, 1), tiny("b", 4, TK_F32, 2, 1), 0, "name");
    compare(tiny("a", 4, TK_F32, 2, 1), tiny("a", 8, TK_F32, 2, 1), 0, "warps");
    compare(tiny("a", 4, TK_F32, 2, 1), tiny("a", 4, TK_F16, 2, 1), 0, "param dtype");
    compare(tiny("a", 4, TK_F32, 2, 1), tiny("a", 4, TK_F32, 3, 1), 0, "param rank");
    compare(tiny("a", 4, TK_F32, 2, 0.0f), tiny("a", 4, TK_F32, 2, -0.0f), 0, "+0 vs -0");
    compare(tiny("a", 4, TK_F32, 2, 0.1f), tiny("a", 4, TK_F32, 2, nextafterf(0.1f, 1)), 0,
            "adjacent floats");
}
END_TEST

static char *print_consts(float f) {
    tk_kernel *k = new_kernel("c", 1);
    tk_const_f32(k, f);
    tk_const_i64(k, INT64_MIN);
    tk_const_bool(k, 1);
    finish(k);
    char *t = print(k);
    return t;
}

START_TEST(float_forms) {
    static const struct {
        float f;
        const char *text;
    } cases[] = {
        {0.1f, "%1 = const f32 0.100000001\n"},
        {-0.0f, "%1 = const f32 -0\n"},
        {1.0f, "%1 = const f32 1\n"},
        {-INFINITY, "%1 = const f32 -inf\n"},
        {3.0e38f, "%1 = const f32 3.00000001e+38\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = print_consts(cases[i].f);
        ck_assert_msg(strstr(t, cases[i].text) != NULL, "missing '%s' in\n%s", cases[i].text, t);
        ck_assert_ptr_nonnull(strstr(t, "%2 = const i64 -9223372036854775808\n"));
        ck_assert_ptr_nonnull(strstr(t, "%3 = const bool 1\n"));
    }
    char *t = print_consts(NAN);
    ck_assert_msg(strstr(t, "%1 = const f32 nan(0x") != NULL, "%s", t);
}
END_TEST

/* The text is a cache key: a host program's LC_NUMERIC must not change it.
 * Needs a locale with a decimal comma (de_DE.UTF-8); skipped without one. */
START_TEST(locale_independent) {
    char *c_text = print_consts(0.1f);
    char *h_text = print(build_softmax(-1e30f));
    if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "de_DE.utf8")) {
        printf("locale test skipped: no de_DE.UTF-8 locale\n");
        return;
    }
    char *d_text = print_consts(0.1f);
    char *dh_text = print(build_softmax(-1e30f));
    setlocale(LC_NUMERIC, "C");
    ck_assert_str_eq(d_text, c_text);
    ck_assert_str_eq(dh_text, h_text);
}
END_TEST

/* Fields an op does not normally use still show when set (hand-made IR),
 * and a double that is not an f32 prints exactly, as a hex float. */
START_TEST(unused_attrs_shown) {
    tk_kernel *k = new_kernel("attrs", 1);
    tk_value *a = tk_const_i32(k, 1), *s = tk_add(k, a, a);
    char *t0 = print(k);
    s->def->attr[1] = 7;
    s->def->fattr = 0.1;
    char *t1 = print(k);
    ck_assert_msg(strstr(t0, "%2 = add %1, %1 : i32\n") != NULL, "%s", t0);
    ck_assert_msg(strstr(t1, "%2 = add %1, %1 a1=7 f=0x1.999999999999ap-4 : i32\n") != NULL, "%s",
                  t1);
}
END_TEST

/* Unfinished and failed kernels print too (for debugging), without crashing. */
START_TEST(partial_kernels_print) {
    tk_kernel *k = new_kernel("open", 4);
    tk_value *init = tk_const_i32(k, 0), *c;
    tk_for_begin(k, init, init, init, 1, &init, &c);
    tk_if_begin(k, tk_const_bool(k, 1));
    char *t = print(k);
    ck_assert_msg(strstr(t, "  %2 = for %3 = %1 to %1 step %1 iter(%4 = %1) -> i32 {\n"
                            "    %5 = const bool 1\n    if %5 {\n    }\n  }\n") != NULL,
                  "%s", t);
    tk_add(k, c, tk_const_f32(k, 1));
    ck_assert_int_eq(tk_kernel_status(k), TK_ERR_TYPE);
    t = print(k);
}
END_TEST

static Suite *printer_suite(void) {
    Suite *s = suite_create("printer");
    TCase *tc = tcase_create("printer");
    tcase_add_checked_fixture(tc, setup, teardown);
    const TTest *tests[] = {golden_gemm,           golden_softmax,     golden_memory,
                            golden_control,        golden_mma,         deterministic,
                            spec_changes_text,     attr_changes_text,  header_changes_text,
                            float_forms,           locale_independent, unused_attrs_shown,
                            partial_kernels_print, narrow_prints};
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(printer_suite()); }
