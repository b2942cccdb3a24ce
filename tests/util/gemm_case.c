/* One tk_gemm call of the GEMM tests, and their suite (see gemm_case.h). */
#define _GNU_SOURCE /* M_PI */
#include "util/gemm_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk_jit.h"
#include "util/devbuf.h"
#include "util/harness.h"
#include "util/run.h"
#include "util/tmpdir.h"

const char *const tu_gemm_kernel_names[TU_K_COUNT] = {
    "auto", "mma 128x128", "mma 64x64", "wgmma 128x256", "wgmma 128x128", "wgmma 64x128"};

bool tu_gemm_kernel_cfg(int which, const tu_gemm_case *e, tk_gemm_config *c) {
    if (which == TU_K_AUTO) return false;
    *c = tk_gemm_default_config(e->in, e->out, e->tb);
    if (which == TU_K_MMA_SMALL) c->block_m = 64, c->block_n = 64, c->block_k = 32, c->stages = 2;
    if (which == TU_K_WGMMA) *c = tk_gemm_config_for(e->in, e->out, e->tb, 8192, 8192, "sm_90a");
    if (which == TU_K_WGMMA_MID) *c = tk_gemm_config_for(e->in, e->out, e->tb, 512, 4096, "sm_90a");
    if (which == TU_K_WGMMA_ONE)
        c->block_m = 64, c->block_n = 128, c->block_k = 32, c->warps = 4, c->wgmma = 1;
    c->transpose_a = e->ta, c->bias = e->bias, c->act = e->act, c->aux = e->aux;
    c->accumulate = e->acc, c->split_k = e->S;
    return true;
}

void tu_gemm_describe(char *buf, size_t n, const tu_gemm_case *e, int which) {
    static const char *const acts[3] = {"", " gelu", " dgelu"};
    char split[16] = ""; /* only where the case asks for a count */
    if (e->S) snprintf(split, sizeof split, " S%d", e->S);
    snprintf(buf, n, "%s->%s %s%s %lldx%lldx%lld%s%s%s%s%s%s [%s]", tk_dtype_name(e->in),
             tk_dtype_name(e->out), e->ta ? "At" : "A", e->tb ? "Bt" : "B", (long long)e->M,
             (long long)e->N, (long long)e->K, split, e->bias ? " bias" : "", acts[e->act],
             e->aux ? " aux" : "", e->acc ? " acc" : "", e->in_place ? " in-place" : "",
             tu_gemm_kernel_names[which]);
}

/* Aux has a buffer of its own (in place, it is C's). */
static bool own_aux(const tu_gemm_case *e) { return e->aux && !e->in_place; }

/* ---- Host tensors and their device copies -------------------------------- */
void tu_gemm_host_make(const tu_gemm_case *e, int64_t pad, int64_t aux_pad, tu_gemm_host *h) {
    memset(h, 0, sizeof *h);
    int64_t da[2] = {e->ta ? e->K : e->M, e->ta ? e->M : e->K};
    int64_t db[2] = {e->tb ? e->N : e->K, e->tb ? e->K : e->N}, dc[2] = {e->M, e->N};
    h->a = ref_tensor_new_layout(e->in, 2, da, NULL, pad);
    h->b = ref_tensor_new_layout(e->in, 2, db, NULL, pad);
    h->c = ref_tensor_new_layout(e->out, 2, dc, NULL, pad);
    ref_tensor_random(&h->a, -1, 1), ref_tensor_random(&h->b, -1, 1);
    ref_tensor_fill_all(&h->c, NAN);
    if (e->acc) ref_tensor_random(&h->c, -2, 2), h->c_old = ref_tensor_to_f64(&h->c);
    if (e->bias) {
        h->bias = ref_tensor_new(e->out, 1, &e->N);
        ref_tensor_random(&h->bias, -1, 1);
    }
    if (e->in_place) { /* C holds the pre-activation, and gets the gradient */
        ref_tensor_random(&h->c, -4, 4);
        h->aux_in = ref_tensor_to_f64(&h->c);
    } else if (e->aux) {
        h->aux = ref_tensor_new_layout(e->out, 2, dc, NULL, aux_pad);
        ref_tensor_fill_all(&h->aux, NAN);
        if (e->act == DGELU) { /* the pre-activation, over GELU's bend */
            ref_tensor_random(&h->aux, -4, 4);
            h->aux_in = ref_tensor_to_f64(&h->aux);
        }
        h->before_aux = ref_tensor_snapshot(&h->aux);
    }
    h->before_c = ref_tensor_snapshot(&h->c);
}

void tu_gemm_host_free(tu_gemm_host *h) {
    ref_tensor_free(&h->a), ref_tensor_free(&h->b), ref_tensor_free(&h->c);
    ref_tensor_free(&h->bias), ref_tensor_free(&h->aux);
    free(h->c_old), free(h->aux_in), free(h->before_c), free(h->before_aux);
}

tu_gemm_dev tu_gemm_dev_in(tk_ctx *ctx, const tu_gemm_case *e, const tu_gemm_host *h) {
    tu_gemm_dev d = {.a = tu_dev_in(ctx, &h->a), .b = tu_dev_in(ctx, &h->b)};
    d.c = tu_dev_in(ctx, &h->c); /* NaN-poisoned unless read */
    if (e->bias) d.bias = tu_dev_in(ctx, &h->bias);
    if (e->in_place) d.aux = d.c;
    if (own_aux(e)) d.aux = tu_dev_in(ctx, &h->aux);
    return d;
}

void tu_gemm_dev_free(tk_ctx *ctx, tu_gemm_dev *d) {
    void *all[6] = {d->a, d->b, d->c, d->bias, d->aux == d->c ? NULL : d->aux, d->ws};
    for (int i = 0; i < 6; i++)
        if (all[i]) ck_assert_int_eq(tk_gpu_free(ctx, all[i]), TK_OK);
    memset(d, 0, sizeof *d);
}

tk_gemm_params tu_gemm_case_params(const tu_gemm_case *e, const tu_gemm_host *h,
                                   const tu_gemm_dev *d, const tk_gemm_config *cfg) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = e->in, p.out_dtype = e->out, p.transpose_a = e->ta, p.transpose_b = e->tb;
    p.m = e->M, p.n = e->N, p.k = e->K, p.act = e->act, p.accumulate = e->acc, p.config = cfg;
    p.a = d->a, p.b = d->b, p.c = d->c, p.bias = d->bias, p.aux = d->aux;
    p.lda = h->a.strides[0], p.ldb = h->b.strides[0], p.ldc = h->c.strides[0];
    p.ldaux = e->in_place ? p.ldc : own_aux(e) ? h->aux.strides[0] : 0;
    p.workspace = d->ws, p.workspace_bytes = d->ws_bytes, p.split_k = cfg ? 0 : e->S;
    return p;
}

void tu_gemm_case_run(tk_ctx *ctx, const tu_gemm_case *e, const tk_gemm_config *cfg,
                      tu_gemm_host *h, const tu_gemm_dev *d) {
    tk_gemm_params p = tu_gemm_case_params(e, h, d, cfg);
    tk_status s = tk_gemm(ctx, &p, NULL);
    ck_assert_msg(s == TK_OK, "tk_gemm: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, h->c.data, d->c, tu_bytes_of(&h->c)), TK_OK);
    if (own_aux(e))
        ck_assert_int_eq(tk_gpu_download(ctx, h->aux.data, d->aux, tu_bytes_of(&h->aux)), TK_OK);
}

/* ---- Float64 reference ------------------------------------------------------- */
static double gelu(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x) {
    double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

/* An f32 C is never rounded to 16 bits: held closer than tu_tol_of's. */
static double tol(tk_dtype out) { return out == TK_F32 ? 2e-3 : tu_tol_of(out); }

/* Every `step`th row of M and the last, into a new array of *n rows. */
static int64_t *sampled_rows(int64_t M, int64_t step, int64_t *n) {
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)M);
    ck_assert_ptr_nonnull(rows);
    *n = 0;
    for (int64_t i = 0; i < M; i++)
        if (i % step == 0 || i == M - 1) rows[(*n)++] = i;
    return rows;
}

/* x = op(A)·op(B) [+ C_old] [+ bias] on rows[0..n), [n, N]. */
static double *ref_x(const tu_gemm_case *e, const tu_gemm_host *h, const int64_t *rows, int64_t n) {
    double *a = ref_tensor_to_f64(&h->a), *b = ref_tensor_to_f64(&h->b);
    double *ar = tu_f64_new(n * e->K), *x = tu_f64_new(n * e->N);
    for (int64_t r = 0; r < n; r++)
        for (int64_t p = 0; p < e->K; p++)
            ar[r * e->K + p] = e->ta ? a[p * e->M + rows[r]] : a[rows[r] * e->K + p];
    ref_gemm(ar, b, x, n, e->N, e->K, e->tb);
    double *bias = e->bias ? ref_tensor_to_f64(&h->bias) : NULL;
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < e->N; j++) {
            double *v = &x[r * e->N + j];
            if (e->acc) *v += h->c_old[rows[r] * e->N + j];
            if (bias) *v += bias[j];
        }
    free(a), free(b), free(ar), free(bias);
    return x;
}

/* C's reference from x on rows[0..n): x, GELU(x), or x·gelu'(Aux given). */
static double *ref_c(const tu_gemm_case *e, const tu_gemm_host *h, const int64_t *rows, int64_t n,
                     const double *x) {
    double *want = tu_f64_new(n * e->N);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < e->N; j++) {
            double v = x[r * e->N + j];
            if (e->act == GELU) v = gelu(v);
            if (e->act == DGELU) v *= gelu_grad(h->aux_in[rows[r] * e->N + j]);
            want[r * e->N + j] = v;
        }
    return want;
}

/* t's rows[0..n) against want: no NaN, rel err within tl. */
static void expect_rows(const char *what, const ref_tensor *t, const int64_t *rows, int64_t n,
                        const double *want, double tl) {
    double *all = ref_tensor_to_f64(t), *got = tu_f64_new(n * t->dims[1]);
    for (int64_t r = 0; r < n; r++)
        memcpy(got + r * t->dims[1], all + rows[r] * t->dims[1], sizeof(double) * t->dims[1]);
    int64_t cnt = n * t->dims[1], nan = ref_count_nan(got, cnt);
    double err = ref_rel_err(got, want, cnt);
    printf("%-66s rel err %.2e\n", what, err);
    ck_assert_msg(nan == 0, "%s: %lld of %lld checked elements NaN (unwritten)", what,
                  (long long)nan, (long long)cnt);
    ck_assert_msg(err <= tl, "%s: rel err %.3e > %.1e", what, err, tl); /* NaN fails too */
    free(all), free(got);
}

void tu_gemm_case_expect(const char *what, const tu_gemm_case *e, const tu_gemm_host *h,
                         int64_t step) {
    int64_t n, *rows = sampled_rows(e->M, step, &n);
    double *x = ref_x(e, h, rows, n), *want = ref_c(e, h, rows, n, x), tl = tol(e->out);
    expect_rows(what, &h->c, rows, n, want, tl);
    ck_assert_msg(ref_tensor_stray_writes(&h->c, h->before_c) == 0, "%s: writes outside C", what);
    if (e->act == GELU && e->aux) { /* Aux keeps x, GELU's input */
        char what_aux[200];
        snprintf(what_aux, sizeof what_aux, "%s: aux", what);
        expect_rows(what_aux, &h->aux, rows, n, x, tl);
        ck_assert_msg(ref_tensor_stray_writes(&h->aux, h->before_aux) == 0, "%s: stray", what_aux);
    }
    free(rows), free(x), free(want);
}

/* ---- "checks" --------------------------------------------------------------- */
void tu_gemm_expect_err(tk_ctx *ctx, tk_gemm_params p, tk_status want, const char *frag) {
    for (int run = 0; run < 2; run++) {
        tk_status s = run ? tk_gemm(ctx, &p, NULL) : tk_gemm_prepare(ctx, &p, NULL);
        ck_assert_msg(s == want, "got %s (%s), want %s", tk_status_name(s), tk_ctx_error(ctx),
                      tk_status_name(want));
        ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    }
}

void tu_gemm_expect_build_err(tk_ctx *ctx, const tk_gemm_config *c, const char *frag) {
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_gemm_build(ctx, c, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    ck_assert_ptr_null(k);
}

/* ---- The suite ------------------------------------------------------------ */
static char tmp_root[256];
static const char *suite_name;
static tk_ctx *gctx;

/* The GPU context's kernels go to the scratch directory, not the user's cache. */
static void gpu_setup(void) {
    static char cache[512];
    ck_assert_int_eq(tk_ctx_create(&gctx), TK_OK);
    tu_join(cache, sizeof cache, tmp_root, "gpu-cache");
    ck_assert_int_eq(tk_cache_set_dir(gctx, cache), TK_OK);
}

static void gpu_teardown(void) {
    tk_ctx_destroy(gctx);
    gctx = NULL;
}

Suite *tu_gemm_suite(const char *name, const char *tag, const TTest *const *checks, size_t n,
                     TCase *tc[TU_TC_COUNT]) {
    static const char *const names[TU_TC_COUNT] = {"interp", "checks", "gpu"};
    static const int timeouts[TU_TC_COUNT] = {900, 120, 900};
    if (tu_tmpdir_make(tmp_root, sizeof tmp_root, tag)) return NULL;
    tu_set_cache_dir(tmp_root);
    suite_name = name;
    Suite *s = suite_create(name);
    for (int i = 0; i < TU_TC_COUNT; i++) {
        tc[i] = tcase_create(names[i]);
        tcase_set_timeout(tc[i], timeouts[i]);
        suite_add_tcase(s, tc[i]);
    }
    for (size_t i = 0; i < n; i++) tcase_add_test(tc[TU_TC_CHECKS], checks[i]);
    tcase_add_checked_fixture(tc[TU_TC_GPU], gpu_setup, gpu_teardown);
    return s;
}

int tu_gemm_suite_run(Suite *s) {
    int rc = run_suite(s);
    tu_tmpdir_remove(tmp_root);
    return rc;
}

tk_ctx *tu_gemm_gpu(int i, int which) {
    if (th_gpu_or_skip(gctx)) return NULL;
    char arch[16] = "";
    ck_assert_int_eq(tk_gpu_arch(gctx, arch, sizeof arch), TK_OK);
    if (which >= TU_K_WGMMA && strcmp(arch, "sm_90a")) {
        printf("%s %d: %s needs sm_90a, the GPU is %s: skipped\n", suite_name, i,
               tu_gemm_kernel_names[which], arch);
        return NULL;
    }
    return gctx;
}
