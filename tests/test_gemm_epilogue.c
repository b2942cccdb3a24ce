/* tk_gemm's epilogues and A's layout (tk_gemm_config's transpose_a, bias,
 * act, aux, accumulate) through the public entry point, against float64:
 * - "interp": on the interpreter backend (tk_ctx_set_backend), on both
 *   kernels (mma.sync: sm_80's choice and a small block; wgmma: sm_90a's
 *   three shapes), each option alone, combined, transpose_a x transpose_b,
 *   ragged M, N, K, bf16/f16 in, bf16/f16/f32 out; fresh random inputs,
 *   outputs NaN-poisoned (an element never written fails), rows padded
 *   (gaps that must stay untouched); DGELU in place; random combinations;
 * - "checks": bad input gets a status and a message naming it, from the
 *   run and the build entry points; old struct sizes; the block shape the
 *   library picks does not depend on the new fields;
 * - "gpu": GPT-2-sized calls (T = 4096 tokens) and ragged ones on device
 *   buffers, the library's choice and forced kernels, every 16th row
 *   checked; skipped with one line without a GPU.
 *   CK_RUN_CASE=gpu build-device/test_gemm_epilogue */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char tmp_root[256];

/* One call: sizes, dtypes and options. */
typedef struct ecase {
    int64_t M, N, K;
    tk_dtype in, out;
    int ta, tb, bias, act, aux, acc;
    int in_place; /* DGELU with Aux read from C's own buffer */
} ecase;

/* Which kernel runs it: the library's choice or a forced config. */
enum { K_AUTO, K_MMA, K_MMA_SMALL, K_WGMMA, K_WGMMA_MID, K_WGMMA_ONE, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"auto",          "mma 128x128",   "mma 64x64",
                                                  "wgmma 128x256", "wgmma 128x128", "wgmma 64x128"};

static bool kernel_cfg(int which, const ecase *e, tk_gemm_config *c) {
    if (which == K_AUTO) return false;
    *c = tk_gemm_default_config(e->in, e->out, e->tb);
    if (which == K_MMA_SMALL) c->block_m = 64, c->block_n = 64, c->block_k = 32, c->stages = 2;
    if (which == K_WGMMA) *c = tk_gemm_config_for(e->in, e->out, e->tb, 8192, 8192, "sm_90a");
    if (which == K_WGMMA_MID) *c = tk_gemm_config_for(e->in, e->out, e->tb, 512, 4096, "sm_90a");
    if (which == K_WGMMA_ONE)
        c->block_m = 64, c->block_n = 128, c->block_k = 32, c->warps = 4, c->wgmma = 1;
    c->transpose_a = e->ta, c->bias = e->bias, c->act = e->act, c->aux = e->aux;
    c->accumulate = e->acc;
    return true;
}

static double tol(tk_dtype out) { return out == TK_F32 ? 2e-3 : tu_tol_of(out); }

/* ---- Float64 reference ------------------------------------------------------- */
static double gelu(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x) {
    double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

/* Host tensors of a call and their device copies. */
typedef struct host {
    ref_tensor a, b, c, bias, aux;
    double *c_old, *aux_in; /* C before the call (accumulate), Aux given (DGELU) */
    void *before_c, *before_aux;
    void *dc, *daux;
} host;

/* Row i of the sampled rows: every `step`th and the last. */
static int64_t sampled(int64_t M, int64_t step, int64_t *rows) {
    int64_t n = 0;
    for (int64_t i = 0; i < M; i++)
        if (i % step == 0 || i == M - 1) rows[n++] = i;
    return n;
}

/* x = A·B [+ C_old] [+ bias] on the sampled rows, [n, N]. */
static double *ref_x(const ecase *e, const host *h, const int64_t *rows, int64_t n) {
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

/* got's sampled rows against want (n rows): no NaN, rel err within tol. */
static void expect_rows(const char *what, const ref_tensor *t, const int64_t *rows, int64_t n,
                        const double *want, double tl) {
    double *all = ref_tensor_to_f64(t), *got = tu_f64_new(n * t->dims[1]);
    for (int64_t r = 0; r < n; r++)
        memcpy(got + r * t->dims[1], all + rows[r] * t->dims[1], sizeof(double) * t->dims[1]);
    int64_t cnt = n * t->dims[1], nan = ref_count_nan(got, cnt);
    double err = ref_rel_err(got, want, cnt);
    printf("%-64s rel err %.2e\n", what, err);
    ck_assert_msg(nan == 0, "%s: %lld of %lld checked elements NaN (unwritten)", what,
                  (long long)nan, (long long)cnt);
    ck_assert_msg(err <= tl, "%s: rel err %.3e > %.1e", what, err, tl); /* NaN fails too */
    free(all), free(got);
}

/* ---- One call ------------------------------------------------------------------ */
static void make_host(const ecase *e, int64_t pad, host *h) {
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
        h->aux = ref_tensor_new_layout(e->out, 2, dc, NULL, pad + 8);
        ref_tensor_fill_all(&h->aux, NAN);
        if (e->act == TK_GEMM_ACT_DGELU) { /* the pre-activation, over GELU's bend */
            ref_tensor_random(&h->aux, -4, 4);
            h->aux_in = ref_tensor_to_f64(&h->aux);
        }
        h->before_aux = ref_tensor_snapshot(&h->aux);
    }
    h->before_c = ref_tensor_snapshot(&h->c);
}

static void free_host(host *h) {
    ref_tensor_free(&h->a), ref_tensor_free(&h->b), ref_tensor_free(&h->c);
    ref_tensor_free(&h->bias), ref_tensor_free(&h->aux);
    free(h->c_old), free(h->aux_in), free(h->before_c), free(h->before_aux);
}

static int64_t ld(const ref_tensor *t) { return t->strides[0]; }

/* Uploads, runs tk_gemm (cfg NULL: the library's choice), downloads C and
 * Aux. */
static void run_call(tk_ctx *ctx, const ecase *e, const tk_gemm_config *cfg, host *h) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = e->in, p.out_dtype = e->out, p.transpose_a = e->ta, p.transpose_b = e->tb;
    p.m = e->M, p.n = e->N, p.k = e->K, p.act = e->act, p.accumulate = e->acc, p.config = cfg;
    p.a = tu_dev_in(ctx, &h->a), p.b = tu_dev_in(ctx, &h->b);
    p.lda = ld(&h->a), p.ldb = ld(&h->b), p.ldc = ld(&h->c);
    h->dc = p.c = tu_dev_in(ctx, &h->c); /* NaN-poisoned unless read */
    if (e->bias) p.bias = tu_dev_in(ctx, &h->bias);
    if (e->in_place) {
        p.aux = p.c, p.ldaux = p.ldc;
    } else if (e->aux) {
        h->daux = p.aux = tu_dev_in(ctx, &h->aux);
        p.ldaux = ld(&h->aux);
    }
    tk_status s = tk_gemm(ctx, &p, NULL);
    ck_assert_msg(s == TK_OK, "tk_gemm: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    tu_dev_take(ctx, &h->c, h->dc);
    if (h->daux) tu_dev_take(ctx, &h->aux, h->daux);
    ck_assert_int_eq(tk_gpu_free(ctx, (void *)p.a), TK_OK);
    ck_assert_int_eq(tk_gpu_free(ctx, (void *)p.b), TK_OK);
    if (p.bias) ck_assert_int_eq(tk_gpu_free(ctx, (void *)p.bias), TK_OK);
}

static void describe(char *buf, size_t n, const ecase *e, int which) {
    static const char *const acts[3] = {"", " gelu", " dgelu"};
    snprintf(buf, n, "%s->%s %s%s %lldx%lldx%lld%s%s%s%s%s [%s]", tk_dtype_name(e->in),
             tk_dtype_name(e->out), e->ta ? "At" : "A", e->tb ? "Bt" : "B", (long long)e->M,
             (long long)e->N, (long long)e->K, e->bias ? " bias" : "", acts[e->act],
             e->aux ? " aux" : "", e->acc ? " acc" : "", e->in_place ? " in-place" : "",
             kernel_names[which]);
}

/* The call e on kernel `which` against float64: C (and GELU's Aux) on
 * every step-th row and the last; pad: elements after each row. */
static void check_call(tk_ctx *ctx, const ecase *e, int which, int64_t step, int64_t pad) {
    tk_gemm_config cfg;
    bool forced = kernel_cfg(which, e, &cfg);
    host h;
    make_host(e, pad, &h);
    run_call(ctx, e, forced ? &cfg : NULL, &h);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)e->M), n = sampled(e->M, step, rows);
    double *x = ref_x(e, &h, rows, n), *want = tu_f64_new(n * e->N);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < e->N; j++) {
            double v = x[r * e->N + j];
            if (e->act == TK_GEMM_ACT_GELU) v = gelu(v);
            if (e->act == TK_GEMM_ACT_DGELU) v *= gelu_grad(h.aux_in[rows[r] * e->N + j]);
            want[r * e->N + j] = v;
        }
    char what[160], what_aux[170];
    describe(what, sizeof what, e, which);
    expect_rows(what, &h.c, rows, n, want, tol(e->out));
    ck_assert_msg(ref_tensor_stray_writes(&h.c, h.before_c) == 0, "%s: writes outside C", what);
    if (e->act == TK_GEMM_ACT_GELU && e->aux) {
        snprintf(what_aux, sizeof what_aux, "%s: aux", what);
        expect_rows(what_aux, &h.aux, rows, n, x, tol(e->out));
        ck_assert_msg(ref_tensor_stray_writes(&h.aux, h.before_aux) == 0, "%s: stray", what_aux);
    }
    free(rows), free(x), free(want);
    free_host(&h);
}

/* ---- interp ------------------------------------------------------------------- */
enum { NONE = TK_GEMM_ACT_NONE, GELU = TK_GEMM_ACT_GELU, DGELU = TK_GEMM_ACT_DGELU };
#define BF  TK_BF16
#define HF  TK_F16
#define F32 TK_F32

/* {M, N, K, in, out, ta, tb, bias, act, aux, acc, in_place}, kernel */
static const struct {
    ecase e;
    int kernel;
} interp_cases[] = {
    /* each option alone, on mma.sync and on wgmma (two warpgroups, producer) */
    {{70, 50, 40, BF, BF, 1, 0, 0, NONE, 0, 0, 0}, K_MMA},
    {{100, 90, 72, HF, HF, 0, 0, 1, NONE, 0, 0, 0}, K_MMA},
    {{77, 130, 48, BF, BF, 0, 0, 0, GELU, 0, 0, 0}, K_MMA},
    {{65, 70, 33, BF, F32, 0, 0, 0, GELU, 1, 0, 0}, K_MMA},
    {{90, 60, 100, BF, F32, 0, 0, 0, NONE, 0, 1, 0}, K_MMA},
    {{50, 129, 40, BF, BF, 0, 0, 0, NONE, 0, 1, 0}, K_MMA},
    {{70, 80, 64, HF, HF, 0, 0, 0, DGELU, 1, 0, 0}, K_MMA},
    {{150, 300, 72, BF, BF, 1, 0, 0, NONE, 0, 0, 0}, K_WGMMA},
    {{140, 270, 40, HF, HF, 0, 0, 1, NONE, 0, 0, 0}, K_WGMMA},
    {{130, 260, 70, BF, BF, 0, 0, 0, GELU, 0, 0, 0}, K_WGMMA},
    {{129, 300, 50, BF, F32, 0, 0, 0, GELU, 1, 0, 0}, K_WGMMA},
    {{150, 257, 90, HF, F32, 0, 0, 0, NONE, 0, 1, 0}, K_WGMMA},
    {{140, 280, 33, BF, BF, 0, 0, 0, NONE, 0, 1, 0}, K_WGMMA},
    {{135, 270, 64, BF, HF, 0, 0, 0, DGELU, 1, 0, 0}, K_WGMMA},
    /* transpose_a x transpose_b on every kernel */
    {{70, 90, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0}, K_MMA},
    {{33, 70, 65, HF, F32, 1, 0, 0, NONE, 0, 0, 0}, K_MMA_SMALL},
    {{80, 33, 90, BF, HF, 1, 1, 0, NONE, 0, 0, 0}, K_MMA_SMALL},
    {{150, 260, 80, HF, HF, 1, 1, 0, NONE, 0, 0, 0}, K_WGMMA},
    {{140, 130, 100, BF, F32, 1, 0, 0, NONE, 0, 0, 0}, K_WGMMA_MID},
    {{130, 150, 70, BF, BF, 1, 1, 0, NONE, 0, 0, 0}, K_WGMMA_MID},
    {{70, 150, 90, HF, HF, 1, 0, 0, NONE, 0, 0, 0}, K_WGMMA_ONE},
    {{65, 129, 33, BF, BF, 1, 1, 0, NONE, 0, 0, 0}, K_WGMMA_ONE},
    /* combined: GPT-2's fc forward, its backward (in place), dW, a residual */
    {{90, 70, 60, BF, BF, 1, 1, 1, GELU, 1, 0, 0}, K_MMA},
    {{150, 270, 70, BF, BF, 1, 1, 1, GELU, 1, 0, 0}, K_WGMMA},
    {{70, 130, 100, BF, BF, 0, 0, 1, GELU, 1, 0, 0}, K_WGMMA_MID},
    {{80, 70, 150, BF, F32, 1, 0, 0, NONE, 0, 1, 0}, K_MMA_SMALL},
    {{140, 140, 150, BF, F32, 1, 0, 0, NONE, 0, 1, 0}, K_WGMMA_MID},
    {{70, 90, 64, BF, BF, 0, 1, 0, DGELU, 1, 0, 1}, K_MMA},
    {{140, 270, 64, HF, HF, 0, 1, 0, DGELU, 1, 0, 1}, K_WGMMA},
    {{70, 150, 40, BF, BF, 0, 0, 1, NONE, 0, 1, 0}, K_WGMMA_ONE},
    {{60, 90, 50, HF, F32, 1, 1, 1, NONE, 0, 1, 0}, K_MMA},
    {{70, 100, 60, HF, F32, 0, 0, 1, GELU, 1, 0, 0}, K_WGMMA_ONE},
};
#define N_INTERP (int)(sizeof interp_cases / sizeof interp_cases[0])

START_TEST(interp_case) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    check_call(ctx, &interp_cases[_i].e, interp_cases[_i].kernel, 1,
               _i % 3 == 2 ? 3 : 8 * (_i % 2));
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's choice on an A100 (sm_80) and an H100 (sm_90a) context. */
START_TEST(interp_auto) {
    static const char *const archs[2] = {"sm_80", "sm_90a"};
    tk_ctx *ctx = tu_interp_ctx(archs[_i], _i ? 132 : 108);
    ecase fc = {100, 130, 70, BF, BF, 0, 0, 1, GELU, 1, 0, 0};
    ecase dw = {70, 90, 130, BF, F32, 1, 0, 0, NONE, 0, 1, 0};
    check_call(ctx, &fc, K_AUTO, 1, 0);
    check_call(ctx, &dw, K_AUTO, 1, 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Fresh random options, shapes, dtypes and kernel each run. */
START_TEST(interp_random) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    static const tk_dtype ins[2] = {BF, HF}, outs[3] = {BF, HF, F32};
    ecase e = {.M = ref_randint(1, 200), .N = ref_randint(1, 280), .K = ref_randint(1, 200)};
    e.in = ins[ref_randint(0, 1)], e.out = outs[ref_randint(0, 2)];
    e.ta = (int)ref_randint(0, 1), e.tb = (int)ref_randint(0, 1);
    e.act = (int)ref_randint(0, 2), e.acc = e.act ? 0 : (int)ref_randint(0, 1);
    e.bias = e.act == DGELU ? 0 : (int)ref_randint(0, 1);
    e.aux = e.act == DGELU ? 1 : e.act == GELU ? (int)ref_randint(0, 1) : 0;
    e.in_place = e.act == DGELU ? (int)ref_randint(0, 1) : 0;
    check_call(ctx, &e, (int)ref_randint(K_MMA, K_WGMMA_ONE), 1, ref_randint(0, 1) * 8);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- checks ------------------------------------------------------------------- */
typedef struct bufs {
    void *a, *b, *c, *bias, *aux;
} bufs;

static tk_gemm_params base_params(const bufs *d) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = BF, p.m = 64, p.n = 64, p.k = 64;
    p.a = d->a, p.b = d->b, p.c = d->c;
    return p;
}

/* tk_gemm and tk_gemm_prepare both refuse p with `want`, naming `frag`. */
static void expect_err(tk_ctx *ctx, tk_gemm_params p, tk_status want, const char *frag) {
    for (int run = 0; run < 2; run++) {
        tk_status s = run ? tk_gemm(ctx, &p, NULL) : tk_gemm_prepare(ctx, &p, NULL);
        ck_assert_msg(s == want, "got %s (%s), want %s", tk_status_name(s), tk_ctx_error(ctx),
                      tk_status_name(want));
        ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    }
}

static void expect_ok(tk_ctx *ctx, tk_gemm_params p) {
    ck_assert_msg(tk_gemm_prepare(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
}

static bufs make_bufs(tk_ctx *ctx) {
    bufs d;
    void **all[5] = {&d.a, &d.b, &d.c, &d.bias, &d.aux};
    for (int i = 0; i < 5; i++) *all[i] = tu_dev_bytes(ctx, 64 * 64 * 4);
    return d;
}

START_TEST(rejects_bad_input) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    expect_ok(ctx, p);
    p.transpose_a = 2, expect_err(ctx, p, TK_ERR_INVALID_ARG, "transpose_a is 2");
    p = base_params(&d), p.act = 3, expect_err(ctx, p, TK_ERR_INVALID_ARG, "act is 3");
    p = base_params(&d), p.accumulate = -1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate is -1");
    p = base_params(&d), p.aux = d.aux;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "aux without an activation");
    p = base_params(&d), p.act = DGELU;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU multiplies by gelu'(aux)");
    p.aux = d.aux, p.bias = d.bias;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU takes no bias");
    p = base_params(&d), p.act = GELU, p.accumulate = 1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate with act GELU");
    /* aliasing: what is written must not overlap what any block reads */
    p = base_params(&d), p.accumulate = 1, p.c = d.a;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate reads and writes c");
    p = base_params(&d), p.accumulate = 1, p.bias = (char *)d.c + 64 * 64 * 2 - 2;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "overlaps bias");
    p = base_params(&d), p.act = GELU, p.aux = (char *)d.c + 16;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "GELU writes aux and c");
    p.aux = d.b, expect_err(ctx, p, TK_ERR_INVALID_ARG, "GELU writes aux: aux [");
    p = base_params(&d), p.act = DGELU, p.aux = (char *)d.c + 4;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU reads aux");
    p.aux = d.c, p.ldaux = 80, p.ldc = 64;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "in place only as aux == c, ldaux == ldc");
    p.ldaux = 64, expect_ok(ctx, p); /* in place: the forward's h becomes dh */
    /* alignment, pitches */
    p = base_params(&d), p.bias = (char *)d.bias + 1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "is not aligned to its 2-byte elements");
    p = base_params(&d), p.act = GELU, p.aux = (char *)d.aux + 1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "aux");
    p.aux = d.aux, p.ldaux = 63, expect_err(ctx, p, TK_ERR_INVALID_ARG, "ldaux 63 < n 64");
    p = base_params(&d), p.transpose_a = 1, p.m = 70, p.lda = 64;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "lda 64 < m 70");
    tk_ctx_destroy(ctx);
}
END_TEST

/* A caller's config must name the call's options; tk_gemm_build refuses
 * the same bad combinations with the same words. */
START_TEST(config_must_match) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    tk_gemm_config c = tk_gemm_default_config(BF, BF, 0);
    p.transpose_a = 1, p.config = &c;
    expect_err(ctx, p, TK_ERR_INVALID_ARG,
               "config has transpose_a 0, bias 0, act 0, aux 0, "
               "accumulate 0; the params ask for 1, 0, 0, 0, 0");
    c.transpose_a = 1, expect_ok(ctx, p);
    c.bias = 1, expect_err(ctx, p, TK_ERR_INVALID_ARG, "the params ask for 1, 0, 0, 0, 0");
    p.bias = d.bias, expect_ok(ctx, p);
    c.act = GELU, c.aux = 1, p.act = GELU, p.aux = d.aux, expect_ok(ctx, p);
    p.aux = NULL, expect_err(ctx, p, TK_ERR_INVALID_ARG,
                             "config has transpose_a 1, bias 1, act 1, "
                             "aux 1");
    static const struct {
        int ta, bias, act, aux, acc;
        const char *frag;
    } bad[] = {
        {3, 0, 0, 0, 0, "tk_gemm_build: transpose_a is 3"},
        {0, 0, 7, 0, 0, "tk_gemm_build: act is 7"},
        {0, 0, 0, 1, 0, "tk_gemm_build: aux without an activation"},
        {0, 0, DGELU, 0, 0, "tk_gemm_build: act DGELU multiplies"},
        {0, 1, DGELU, 1, 0, "tk_gemm_build: act DGELU takes no bias"},
        {0, 0, GELU, 0, 1, "tk_gemm_build: accumulate with act GELU"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_gemm_config b = tk_gemm_default_config(BF, F32, 1);
        b.transpose_a = bad[i].ta, b.bias = bad[i].bias, b.act = bad[i].act, b.aux = bad[i].aux;
        b.accumulate = bad[i].acc;
        tk_kernel *k = NULL;
        ck_assert_int_eq(tk_gemm_build(ctx, &b, &k), TK_ERR_INVALID_ARG);
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].frag), "'%s' lacks '%s'", tk_ctx_error(ctx),
                      bad[i].frag);
        ck_assert_ptr_null(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* A struct that ends before the new fields (a caller built before them)
 * reads them as 0, whatever lies past its size. */
START_TEST(old_struct_sizes) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    p.transpose_a = 9, p.act = 9, p.bias = (char *)d.bias + 1;
    p.struct_size = offsetof(tk_gemm_params, transpose_a);
    expect_ok(ctx, p);
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").transpose_a, 0);
    p.struct_size = sizeof p;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "transpose_a is 9");
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_gemm_config_for_call picks the same block shape with and without the
 * new fields (which it copies into the config); tk_gemm_config_for and
 * tk_gemm_default_config leave them 0. */
START_TEST(choice_ignores_epilogue) {
    static const int64_t sizes[][2] = {{64, 64},    {1024, 1024},  {512, 4096}, {8192, 8192},
                                       {768, 3072}, {16384, 2304}, {3072, 768}};
    static const char *const archs[] = {"sm_80", "sm_90", "sm_90a", NULL};
    static char buf[256] __attribute__((aligned(256)));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
            tk_gemm_params p = TK_GEMM_PARAMS_INIT;
            p.in_dtype = BF, p.out_dtype = F32, p.m = sizes[s][0], p.n = sizes[s][1], p.k = 768;
            p.a = p.b = p.c = buf;
            tk_gemm_config plain = tk_gemm_config_for_call(&p, archs[a]);
            tk_gemm_config cf = tk_gemm_config_for(BF, F32, 0, p.m, p.n, archs[a]);
            p.transpose_a = 1, p.bias = buf, p.act = GELU, p.aux = buf;
            tk_gemm_config ep = tk_gemm_config_for_call(&p, archs[a]);
            ck_assert_int_eq(ep.transpose_a + ep.bias + ep.act + ep.aux, 4);
            ep.transpose_a = ep.bias = ep.act = ep.aux = 0;
            ck_assert_int_eq(memcmp(&ep, &plain, sizeof ep), 0);
            ck_assert_int_eq(memcmp(&cf, &plain, sizeof cf), 0);
        }
    tk_gemm_config d = tk_gemm_default_config(BF, BF, 1);
    ck_assert_int_eq(d.transpose_a | d.bias | d.act | d.aux | d.accumulate, 0);
}
END_TEST

/* A plain GEMM's kernel names no new spec or parameter; one with options
 * names each, and takes bias and Aux after C (wgmma: blocks last). */
START_TEST(plain_kernel_unchanged) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, BF, 0, 8192, 8192, "sm_90a");
    for (int opt = 0; opt < 2; opt++) {
        if (opt) c.transpose_a = 1, c.bias = 1, c.act = GELU, c.aux = 1;
        tk_kernel *k;
        ck_assert_msg(tk_gemm_build(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        char *txt;
        ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
        static const char *const words[] = {"transpose_a", "bias", "act", "aux", "Aux"};
        for (int w = 0; w < 5; w++)
            ck_assert_msg(!strstr(txt, words[w]) == !opt, "%s in %s", words[w], tk_kernel_name(k));
        ck_assert_int_eq(!strstr(tk_kernel_name(k), "_atb_"), !opt);
        tk_free(txt);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- gpu ---------------------------------------------------------------------- */
/* GPT-2 124M's training GEMMs at T = 4096 tokens (D 768, 4D 3072, qkv
 * 2304) with the library's choice, then ragged calls on forced kernels. */
static const struct {
    ecase e;
    int kernel;
} gpu_cases[] = {
    {{4096, 2304, 768, BF, BF, 0, 0, 1, NONE, 0, 0, 0}, K_AUTO},  /* qkv = x·W + b */
    {{4096, 3072, 768, BF, BF, 0, 0, 1, GELU, 1, 0, 0}, K_AUTO},  /* fc, h kept */
    {{4096, 768, 3072, BF, BF, 0, 0, 1, NONE, 0, 0, 0}, K_AUTO},  /* fc proj */
    {{4096, 3072, 768, BF, BF, 0, 1, 0, DGELU, 1, 0, 0}, K_AUTO}, /* dh = (dy·Wᵀ)·gelu'(h) */
    {{4096, 3072, 768, BF, BF, 0, 1, 0, DGELU, 1, 0, 1}, K_AUTO}, /* the same, in place */
    {{768, 3072, 4096, BF, F32, 1, 0, 0, NONE, 0, 1, 0}, K_AUTO}, /* dW += xᵀ·dy, f32 */
    {{3072, 768, 4096, BF, BF, 1, 0, 0, NONE, 0, 1, 0}, K_AUTO},  /* dW += hᵀ·dy, bf16 */
    {{768, 2304, 4096, BF, F32, 1, 0, 0, NONE, 0, 0, 0}, K_AUTO}, /* dW = xᵀ·dy */
    {{4096, 768, 768, BF, BF, 0, 0, 1, NONE, 0, 1, 0}, K_AUTO},   /* x += y·W + b */
    {{4096, 3072, 768, HF, HF, 1, 1, 1, GELU, 1, 0, 0}, K_AUTO},
    /* ragged, every kernel */
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0}, K_MMA},
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0}, K_WGMMA},
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0}, K_WGMMA_MID},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0}, K_MMA_SMALL},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0}, K_WGMMA},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0}, K_WGMMA_ONE},
    {{513, 1025, 200, BF, HF, 0, 1, 0, DGELU, 1, 0, 0}, K_MMA},
    {{513, 1025, 200, BF, HF, 0, 1, 0, DGELU, 1, 0, 0}, K_WGMMA},
    {{2050, 1030, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0}, K_WGMMA},
    {{2050, 1030, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0}, K_WGMMA_MID},
    {{2048, 2048, 2048, BF, BF, 0, 0, 1, GELU, 1, 0, 0}, K_WGMMA},
    {{2048, 2048, 2048, BF, F32, 1, 0, 0, NONE, 0, 1, 0}, K_WGMMA_MID},
};
#define N_GPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

static tk_ctx *gctx;
static char gcache[512];

static void gpu_setup(void) {
    ck_assert_int_eq(tk_ctx_create(&gctx), TK_OK);
    tu_join(gcache, sizeof gcache, tmp_root, "gpu-cache");
    ck_assert_int_eq(tk_cache_set_dir(gctx, gcache), TK_OK);
}

static void gpu_teardown(void) {
    tk_ctx_destroy(gctx);
    gctx = NULL;
}

START_TEST(gpu_case) {
    if (th_gpu_or_skip(gctx)) return;
    char arch[16] = "";
    ck_assert_int_eq(tk_gpu_arch(gctx, arch, sizeof arch), TK_OK);
    int which = gpu_cases[_i].kernel;
    if (which >= K_WGMMA && strcmp(arch, "sm_90a")) {
        printf("gemm epilogue %d: %s needs sm_90a, the GPU is %s: skipped\n", _i,
               kernel_names[which], arch);
        return;
    }
    check_call(gctx, &gpu_cases[_i].e, which, 16, _i % 4 == 3 ? 8 : 0);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(tmp_root, sizeof tmp_root, "gemm-epilogue")) return EXIT_FAILURE;
    tu_set_cache_dir(tmp_root);
    Suite *s = suite_create("gemm_epilogue");
    TCase *ti = tcase_create("interp");
    tcase_set_timeout(ti, 900);
    tcase_add_loop_test(ti, interp_case, 0, N_INTERP);
    tcase_add_loop_test(ti, interp_auto, 0, 2);
    tcase_add_loop_test(ti, interp_random, 0, 3);
    suite_add_tcase(s, ti);
    TCase *tc = tcase_create("checks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rejects_bad_input);
    tcase_add_test(tc, config_must_match);
    tcase_add_test(tc, old_struct_sizes);
    tcase_add_test(tc, choice_ignores_epilogue);
    tcase_add_test(tc, plain_kernel_unchanged);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("gpu");
    tcase_add_checked_fixture(tg, gpu_setup, gpu_teardown);
    tcase_set_timeout(tg, 900);
    tcase_add_loop_test(tg, gpu_case, 0, N_GPU);
    suite_add_tcase(s, tg);
    int rc = run_suite(s);
    tu_tmpdir_remove(tmp_root);
    return rc;
}
