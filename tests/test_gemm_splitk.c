/* tk_gemm's split over K (tk_gemm_config.split_k, tk_gemm_params.workspace):
 * - "interp": on the interpreter backend, every kernel (mma.sync, wgmma's
 *   three shapes) split in 2..8 ranges, ragged M, N, K, transpose_a and
 *   transpose_b, with and without bias, accumulate, GELU (aux), DGELU, f32
 *   or 16-bit C, against float64; each call run twice with the same bits;
 *   the workspace holds the partials (it is written: the split ran);
 * - "checks": a workspace too small, misaligned or overlapping, split_k out
 *   of range or without a workspace, a config that disagrees; what
 *   tk_gemm_workspace answers; an old struct size; the choice of S as a
 *   pure function (GPT-2's weight gradients split, large or short-K
 *   products do not); a split-less kernel names nothing new;
 * - "gpu": GPT-2's weight gradients (T = 4096, 16384) with the library's
 *   choice, and ragged forced splits, every 16th row against float64, two
 *   runs bit-identical; skipped with one line without a GPU.
 *   CK_RUN_CASE=gpu build-device/test_gemm_splitk */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_parts.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char tmp_root[256];

enum { NONE = TK_GEMM_ACT_NONE, GELU = TK_GEMM_ACT_GELU, DGELU = TK_GEMM_ACT_DGELU };
#define BF  TK_BF16
#define HF  TK_F16
#define F32 TK_F32

/* One call: sizes, dtypes, options and the split (S: split_k; 0 auto). */
typedef struct scase {
    int64_t M, N, K;
    tk_dtype in, out;
    int ta, tb, bias, act, acc, S;
} scase;

/* Which kernel: the library's choice or a forced block shape. */
enum { K_AUTO, K_MMA, K_MMA_SMALL, K_WIDE, K_MID, K_ONE, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"auto",          "mma 128x128",   "mma 64x64",
                                                  "wgmma 128x256", "wgmma 128x128", "wgmma 64x128"};

static bool kernel_cfg(int which, const scase *e, tk_gemm_config *c) {
    if (which == K_AUTO) return false;
    *c = tk_gemm_default_config(e->in, e->out, e->tb);
    if (which == K_MMA_SMALL) c->block_m = 64, c->block_n = 64, c->block_k = 32, c->stages = 2;
    if (which == K_WIDE) *c = tk_gemm_config_for(e->in, e->out, e->tb, 8192, 8192, "sm_90a");
    if (which == K_MID) *c = tk_gemm_config_for(e->in, e->out, e->tb, 512, 4096, "sm_90a");
    if (which == K_ONE)
        c->block_m = 64, c->block_n = 128, c->block_k = 32, c->warps = 4, c->wgmma = 1;
    c->transpose_a = e->ta, c->bias = e->bias, c->act = e->act, c->aux = e->act != NONE;
    c->accumulate = e->acc, c->split_k = e->S;
    return true;
}

/* ---- Float64 reference ------------------------------------------------------- */
static double gelu(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x) {
    double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

/* Host tensors of a call. */
typedef struct host {
    ref_tensor a, b, c, bias, aux;
    double *c_old, *aux_in;
} host;

static void make_host(const scase *e, int64_t pad, host *h) {
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
    if (e->act != NONE) {
        h->aux = ref_tensor_new_layout(e->out, 2, dc, NULL, pad);
        ref_tensor_fill_all(&h->aux, NAN);
        if (e->act == DGELU)
            ref_tensor_random(&h->aux, -4, 4), h->aux_in = ref_tensor_to_f64(&h->aux);
    }
}

static void free_host(host *h) {
    ref_tensor_free(&h->a), ref_tensor_free(&h->b), ref_tensor_free(&h->c);
    ref_tensor_free(&h->bias), ref_tensor_free(&h->aux);
    free(h->c_old), free(h->aux_in);
}

/* x = op(A)·op(B) [+ C_old] [+ bias] on rows[0..n), [n, N]. */
static double *ref_x(const scase *e, const host *h, const int64_t *rows, int64_t n) {
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

/* got's rows against want: no NaN, rel err within tol. */
static void expect_rows(const char *what, const ref_tensor *t, const int64_t *rows, int64_t n,
                        const double *want, double tl) {
    double *all = ref_tensor_to_f64(t), *got = tu_f64_new(n * t->dims[1]);
    for (int64_t r = 0; r < n; r++)
        memcpy(got + r * t->dims[1], all + rows[r] * t->dims[1], sizeof(double) * t->dims[1]);
    int64_t cnt = n * t->dims[1], nan = ref_count_nan(got, cnt);
    double err = ref_rel_err(got, want, cnt);
    printf("%-66s rel err %.2e\n", what, err);
    ck_assert_msg(nan == 0, "%s: %lld of %lld elements NaN", what, (long long)nan, (long long)cnt);
    ck_assert_msg(err <= tl, "%s: rel err %.3e > %.1e", what, err, tl);
    free(all), free(got);
}

/* ---- One call, twice ------------------------------------------------------------ */
/* Device copies of a call's tensors and its workspace. */
typedef struct dev {
    void *a, *b, *c, *bias, *aux, *ws;
    size_t ws_bytes;
} dev;

static tk_gemm_params params_of(const scase *e, const host *h, const dev *d,
                                const tk_gemm_config *cfg) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = e->in, p.out_dtype = e->out, p.transpose_a = e->ta, p.transpose_b = e->tb;
    p.m = e->M, p.n = e->N, p.k = e->K, p.act = e->act, p.accumulate = e->acc, p.config = cfg;
    p.a = d->a, p.b = d->b, p.c = d->c, p.bias = d->bias, p.aux = d->aux;
    p.lda = h->a.strides[0], p.ldb = h->b.strides[0], p.ldc = h->c.strides[0];
    p.ldaux = e->act != NONE ? h->aux.strides[0] : 0;
    p.workspace = d->ws, p.workspace_bytes = d->ws_bytes, p.split_k = cfg ? 0 : e->S;
    return p;
}

/* Runs the call from C's and Aux's bytes `c0` and `x0` (uploaded again:
 * accumulate reads C, DGELU Aux) and downloads C and Aux into h. */
static void run_once(tk_ctx *ctx, const scase *e, const tk_gemm_config *cfg, host *h, const dev *d,
                     const void *c0, const void *x0) {
    ck_assert_int_eq(tk_gpu_upload(ctx, d->c, c0, tu_bytes_of(&h->c)), TK_OK);
    if (d->aux) ck_assert_int_eq(tk_gpu_upload(ctx, d->aux, x0, tu_bytes_of(&h->aux)), TK_OK);
    tk_gemm_params p = params_of(e, h, d, cfg);
    tk_status s = tk_gemm(ctx, &p, NULL);
    ck_assert_msg(s == TK_OK, "tk_gemm: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_download(ctx, h->c.data, d->c, tu_bytes_of(&h->c)), TK_OK);
    if (d->aux)
        ck_assert_int_eq(tk_gpu_download(ctx, h->aux.data, d->aux, tu_bytes_of(&h->aux)), TK_OK);
}

static void describe(char *buf, size_t n, const scase *e, int which) {
    static const char *const acts[3] = {"", " gelu", " dgelu"};
    snprintf(buf, n, "%s->%s %s%s %lldx%lldx%lld S%d%s%s%s [%s]", tk_dtype_name(e->in),
             tk_dtype_name(e->out), e->ta ? "At" : "A", e->tb ? "Bt" : "B", (long long)e->M,
             (long long)e->N, (long long)e->K, e->S, e->bias ? " bias" : "", acts[e->act],
             e->acc ? " acc" : "", kernel_names[which]);
}

/* The workspace's floats were all written (partials, not its 0xff
 * poison): the split ran, and filled what tk_gemm_workspace asked for. */
static void expect_partials(tk_ctx *ctx, const dev *d, const char *what) {
    float *w = malloc(d->ws_bytes);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(tk_gpu_download(ctx, w, d->ws, d->ws_bytes), TK_OK);
    size_t nan = 0;
    for (size_t i = 0; i < d->ws_bytes / 4; i++) nan += isnan(w[i]) != 0;
    ck_assert_msg(nan == 0, "%s: %zu of %zu partials unwritten", what, nan, d->ws_bytes / 4);
    free(w);
}

/* want = C's reference on rows[0..n), and x (Aux's, GELU) in *x. */
static double *ref_out(const scase *e, const host *h, const int64_t *rows, int64_t n, double **x) {
    *x = ref_x(e, h, rows, n);
    double *want = tu_f64_new(n * e->N);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < e->N; j++) {
            double v = (*x)[r * e->N + j];
            if (e->act == GELU) v = gelu(v);
            if (e->act == DGELU) v *= gelu_grad(h->aux_in[rows[r] * e->N + j]);
            want[r * e->N + j] = v;
        }
    return want;
}

static void free_dev(tk_ctx *ctx, dev *d) {
    void *all[6] = {d->a, d->b, d->c, d->bias, d->aux, d->ws};
    for (int i = 0; i < 6; i++)
        if (all[i]) ck_assert_int_eq(tk_gpu_free(ctx, all[i]), TK_OK);
}

/* e on kernel `which` against float64 on every step-th row and the last,
 * run twice with the same bits; `pad`: elements after each row. */
static void check_call(tk_ctx *ctx, const scase *e, int which, int64_t step, int64_t pad) {
    tk_gemm_config cfg;
    bool forced = kernel_cfg(which, e, &cfg);
    host h;
    make_host(e, pad, &h);
    dev d = {.a = tu_dev_in(ctx, &h.a), .b = tu_dev_in(ctx, &h.b), .c = tu_dev_in(ctx, &h.c)};
    if (e->bias) d.bias = tu_dev_in(ctx, &h.bias);
    if (e->act != NONE) d.aux = tu_dev_in(ctx, &h.aux);
    char what[160];
    describe(what, sizeof what, e, which);
    tk_gemm_params q = params_of(e, &h, &d, forced ? &cfg : NULL);
    ck_assert_msg(tk_gemm_workspace(ctx, &q, &d.ws_bytes) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(d.ws_bytes > 0, "%s: no split", what);
    d.ws = tu_dev_bytes(ctx, d.ws_bytes);
    void *c0 = ref_tensor_snapshot(&h.c), *x0 = e->act ? ref_tensor_snapshot(&h.aux) : NULL;
    run_once(ctx, e, forced ? &cfg : NULL, &h, &d, c0, x0);
    expect_partials(ctx, &d, what);
    void *c1 = ref_tensor_snapshot(&h.c), *x1 = e->act ? ref_tensor_snapshot(&h.aux) : NULL;
    run_once(ctx, e, forced ? &cfg : NULL, &h, &d, c0, x0);
    ck_assert_msg(!memcmp(c1, h.c.data, tu_bytes_of(&h.c)), "%s: C differs between runs", what);
    ck_assert_msg(!x1 || !memcmp(x1, h.aux.data, tu_bytes_of(&h.aux)), "%s: Aux differs", what);
    ck_assert_msg(ref_tensor_stray_writes(&h.c, c0) == 0, "%s: writes outside C", what);
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)e->M), n = 0;
    for (int64_t i = 0; i < e->M; i++)
        if (i % step == 0 || i == e->M - 1) rows[n++] = i;
    double *x, *want = ref_out(e, &h, rows, n, &x), tl = e->out == F32 ? 2e-3 : tu_tol_of(e->out);
    expect_rows(what, &h.c, rows, n, want, tl);
    if (e->act == GELU) expect_rows("  ...aux", &h.aux, rows, n, x, tl);
    free(rows), free(x), free(want), free(c0), free(x0), free(c1), free(x1);
    free_dev(ctx, &d);
    free_host(&h);
}

/* ---- interp ------------------------------------------------------------------- */
/* {M, N, K, in, out, ta, tb, bias, act, acc, S}, kernel */
static const struct {
    scase e;
    int kernel;
} interp_cases[] = {
    /* GPT-2's weight gradients in small: dW (+)= xᵀ·dy, f32 and bf16 */
    {{70, 90, 300, BF, F32, 1, 0, 0, NONE, 1, 3}, K_MMA},
    {{70, 90, 300, BF, BF, 1, 0, 0, NONE, 0, 2}, K_MMA},
    {{150, 270, 300, BF, F32, 1, 0, 0, NONE, 1, 4}, K_WIDE},
    {{150, 270, 260, BF, BF, 1, 0, 0, NONE, 1, 5}, K_WIDE},
    {{140, 130, 333, BF, F32, 1, 0, 0, NONE, 0, 8}, K_MID},
    {{70, 150, 200, HF, HF, 1, 0, 0, NONE, 1, 6}, K_ONE},
    /* ragged, both transpositions, the epilogue in kernel 2 */
    {{65, 129, 97, HF, F32, 0, 1, 1, NONE, 0, 2}, K_MMA_SMALL},
    {{33, 70, 250, BF, HF, 1, 1, 1, NONE, 1, 7}, K_MMA_SMALL},
    {{77, 130, 190, BF, BF, 0, 0, 1, GELU, 0, 3}, K_MMA},
    {{129, 300, 150, BF, F32, 0, 0, 1, GELU, 0, 2}, K_WIDE},
    {{70, 80, 200, HF, HF, 0, 1, 0, DGELU, 0, 4}, K_MMA},
    {{135, 270, 140, BF, HF, 0, 1, 0, DGELU, 0, 3}, K_WIDE},
    {{130, 150, 170, BF, BF, 1, 1, 1, NONE, 1, 2}, K_MID},
    {{65, 129, 130, BF, BF, 1, 1, 0, GELU, 0, 8}, K_ONE},
    /* more ranges than k-tiles hold: as many as there are */
    {{50, 60, 40, BF, F32, 1, 0, 0, NONE, 0, 8}, K_MMA_SMALL},
    /* split_k in the params, the library's block shape */
    {{100, 130, 270, BF, F32, 1, 0, 0, NONE, 1, 4}, K_AUTO},
    {{90, 70, 200, BF, BF, 0, 0, 1, GELU, 0, 3}, K_AUTO},
};
#define N_INTERP (int)(sizeof interp_cases / sizeof interp_cases[0])

START_TEST(interp_case) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    check_call(ctx, &interp_cases[_i].e, interp_cases[_i].kernel, 1, _i % 3 == 1 ? 8 : 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Fresh random options, sizes, S and kernel each run. */
START_TEST(interp_random) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    static const tk_dtype ins[2] = {BF, HF}, outs[3] = {BF, HF, F32};
    /* K of at least 3 k-tiles (block_k is 64 at most here): fewer leaves nothing to split */
    scase e = {.M = ref_randint(1, 160), .N = ref_randint(1, 280), .K = ref_randint(130, 300)};
    e.in = ins[ref_randint(0, 1)], e.out = outs[ref_randint(0, 2)];
    e.ta = (int)ref_randint(0, 1), e.tb = (int)ref_randint(0, 1);
    e.act = (int)ref_randint(0, 2), e.acc = e.act ? 0 : (int)ref_randint(0, 1);
    e.bias = e.act == DGELU ? 0 : (int)ref_randint(0, 1), e.S = (int)ref_randint(2, 8);
    check_call(ctx, &e, (int)ref_randint(K_MMA, K_ONE), 1, ref_randint(0, 1) * 8);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's own split (split_k 0, a workspace) on an A100 and an H100
 * context: a long K with few tiles splits. */
START_TEST(interp_auto) {
    static const char *const archs[2] = {"sm_80", "sm_90a"};
    tk_ctx *ctx = tu_interp_ctx(archs[_i], _i ? 132 : 108);
    scase dw = {128, 128, 2048, BF, F32, 1, 0, 0, NONE, 1, 0};
    check_call(ctx, &dw, K_AUTO, 7, 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- checks ------------------------------------------------------------------- */
typedef struct bufs {
    void *a, *b, *c, *ws;
} bufs;

enum { CM = 64, CN = 64, CK = 1024 }; /* a call that splits */

static bufs make_bufs(tk_ctx *ctx) {
    return (bufs){tu_dev_bytes(ctx, CM * CK * 2), tu_dev_bytes(ctx, CK * CN * 2),
                  tu_dev_bytes(ctx, CM * CN * 4), tu_dev_bytes(ctx, 8 * CM * CN * 4)};
}

static tk_gemm_params base_params(const bufs *d) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = F32, p.transpose_a = 1, p.m = CM, p.n = CN, p.k = CK;
    p.a = d->a, p.b = d->b, p.c = d->c, p.workspace = d->ws, p.workspace_bytes = 8 * CM * CN * 4;
    return p;
}

/* tk_gemm and tk_gemm_prepare refuse p with `want`, naming `frag`. */
static void expect_err(tk_ctx *ctx, tk_gemm_params p, tk_status want, const char *frag) {
    for (int run = 0; run < 2; run++) {
        tk_status s = run ? tk_gemm(ctx, &p, NULL) : tk_gemm_prepare(ctx, &p, NULL);
        ck_assert_msg(s == want, "got %s (%s), want %s", tk_status_name(s), tk_ctx_error(ctx),
                      tk_status_name(want));
        ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    }
}

static size_t ws_of(tk_ctx *ctx, tk_gemm_params p) {
    size_t b = 1;
    ck_assert_msg(tk_gemm_workspace(ctx, &p, &b) == TK_OK, "%s", tk_ctx_error(ctx));
    return b;
}

START_TEST(rejects_bad_workspace) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    p.split_k = 4;
    ck_assert_uint_eq(ws_of(ctx, p), 4 * CM * CN * 4);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, NULL), TK_OK);
    p.workspace_bytes = 4 * CM * CN * 4 - 1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "needs a workspace of 65536 bytes");
    p = base_params(&d), p.split_k = 4, p.workspace = (char *)d.ws + 4;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "not 16-byte aligned");
    p = base_params(&d), p.split_k = 4, p.workspace = d.c;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "the split writes its partials to the workspace");
    p = base_params(&d), p.split_k = 4, p.workspace = NULL;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k 4 needs a workspace");
    p = base_params(&d), p.split_k = 65, expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k is 65");
    p.split_k = -1, expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k is -1");
    tk_ctx_destroy(ctx);
}
END_TEST

/* A caller's config decides the split; the params' split_k may only repeat
 * it. tk_gemm_build refuses bad split fields. */
START_TEST(config_split) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    tk_gemm_config c = tk_gemm_default_config(BF, F32, 0);
    c.transpose_a = 1, c.split_k = 3, p.config = &c;
    ck_assert_uint_eq(ws_of(ctx, p), 3 * CM * CN * 4);
    p.split_k = 3;
    ck_assert_uint_eq(ws_of(ctx, p), 3 * CM * CN * 4);
    p.split_k = 2, expect_err(ctx, p, TK_ERR_INVALID_ARG, "config has split_k 3; the params ask");
    c.split_k = 0, p.split_k = 0;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    c.split_k = 2, c.split_reduce = 1;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "config has split_reduce 1");
    static const struct {
        int split_k, split_reduce;
        const char *frag;
    } bad[] = {{65, 0, "tk_gemm_build: split_k is 65"},
               {0, 1, "tk_gemm_build: split_reduce with split_k 0"},
               {2, 2, "tk_gemm_build: split_reduce is 2"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_gemm_config b = tk_gemm_default_config(BF, F32, 1);
        b.split_k = bad[i].split_k, b.split_reduce = bad[i].split_reduce;
        tk_kernel *k = NULL;
        ck_assert_int_eq(tk_gemm_build(ctx, &b, &k), TK_ERR_INVALID_ARG);
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].frag), "'%s' lacks '%s'", tk_ctx_error(ctx),
                      bad[i].frag);
        ck_assert_ptr_null(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* What tk_gemm_workspace answers: the choice's S·M·N·4 with or without a
 * workspace in p; 0 for split_k 1, a short K or a large product. An older
 * struct (ending before workspace) never splits. */
START_TEST(workspace_sizes) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    size_t auto_b = ws_of(ctx, p);
    ck_assert_uint_gt(auto_b, 0);
    ck_assert_uint_eq(auto_b % (CM * CN * 4), 0);
    p.workspace = NULL;
    ck_assert_uint_eq(ws_of(ctx, p), auto_b);
    p.split_k = 1;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    p.split_k = 5; /* 16 k-tiles: 4 ranges of 4 */
    ck_assert_uint_eq(ws_of(ctx, p), 4 * CM * CN * 4);
    p.split_k = 8;
    ck_assert_uint_eq(ws_of(ctx, p), 8 * CM * CN * 4);
    p.k = 64; /* one k-tile: nothing to split */
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    p = base_params(&d), p.m = p.n = 4096, p.k = 4096, p.transpose_a = 0;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    /* a workspace too small, which a struct ending before it never shows */
    p = base_params(&d), p.split_k = 4, p.workspace_bytes = 1;
    p.struct_size = offsetof(tk_gemm_params, workspace);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, NULL), TK_OK);
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").split_k, 0);
    p.struct_size = sizeof p;
    expect_err(ctx, p, TK_ERR_INVALID_ARG, "needs a workspace of");
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_gemm_split_choose as a pure function of sizes and GPU. */
static tk_gemm_config choose_for(const char *arch, int sms, int64_t m, int64_t n, int64_t k,
                                 int want) {
    tk_target_caps caps;
    ck_assert_int_eq(tk_target_caps_get(NULL, arch, &caps), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, F32, 0, m, n, arch);
    c.transpose_a = 1;
    tk_gemm_target t = {&caps, sms, true};
    tk_gemm_config r = tk_gemm_split_choose(&c, m, n, k, want, &t);
    ck_assert_int_eq(r.transpose_a, 1); /* the call's own fields stay */
    ck_assert_int_eq(r.split_reduce, 0);
    return r;
}

START_TEST(choice_pure) {
    /* GPT-2 124M's weight gradients at 16k tokens on an H100: split, wgmma */
    static const int64_t dw[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
    for (int i = 0; i < 4; i++) {
        tk_gemm_config c = choose_for("sm_90a", 132, dw[i][0], dw[i][1], 16384, 0);
        printf("dW %lldx%lldx16384: %dx%dx%d w%d s%d%s, split_k %d\n", (long long)dw[i][0],
               (long long)dw[i][1], c.block_m, c.block_n, c.block_k, c.warps, c.stages,
               c.wgmma ? " wgmma" : "", c.split_k);
        ck_assert_int_ge(c.split_k, 2);
        ck_assert_int_le(c.split_k, TK_GEMM_MAX_SPLIT);
        ck_assert_int_eq(c.wgmma, 1);
        tk_gemm_config again = choose_for("sm_90a", 132, dw[i][0], dw[i][1], 16384, 0);
        ck_assert_int_eq(memcmp(&c, &again, sizeof c), 0);
    }
    /* on an A100 too, on mma.sync */
    tk_gemm_config a = choose_for("sm_80", 108, 768, 768, 16384, 0);
    ck_assert_int_ge(a.split_k, 2);
    ck_assert_int_eq(a.wgmma, 0);
    /* no split: many tiles, or a short K */
    ck_assert_int_eq(choose_for("sm_90a", 132, 4096, 4096, 4096, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 16384, 3072, 768, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 64, 64, 64, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_80", 108, 8192, 8192, 8192, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 16384, 1).split_k, 0);
    /* more SMs, more ranges (never fewer) */
    ck_assert_int_ge(choose_for("sm_90a", 264, 768, 768, 16384, 0).split_k,
                     choose_for("sm_90a", 132, 768, 768, 16384, 0).split_k);
    /* a count asked for: kept, or as many ranges as the k-tiles allow */
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 16384, 6).split_k, 6);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 100, 4).split_k, 2);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 64, 4).split_k, 0);
    /* ranges: equal lengths, none empty */
    ck_assert_int_eq(tk_gemm_split_ranges(16384, 64, 3), 3);
    ck_assert_int_eq(tk_gemm_split_ranges(5 * 64, 64, 4), 3); /* 2 + 2 + 1 k-tiles */
    ck_assert_int_eq(tk_gemm_split_ranges(5 * 64, 64, 8), 5);
    ck_assert_int_eq(tk_gemm_split_ranges(64, 64, 8), 1);
    ck_assert_int_eq(tk_gemm_split_ranges(1000, 64, 1), 1);
    /* tk_gemm_config_for_call plans for 132 SMs, and only with a workspace */
    static char buf[256] __attribute__((aligned(256)));
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = F32, p.transpose_a = 1, p.m = 768, p.n = 768, p.k = 16384;
    p.a = p.b = p.c = buf;
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").split_k, 0);
    p.workspace = buf;
    tk_gemm_config fc = tk_gemm_config_for_call(&p, "sm_90a");
    tk_gemm_config pc = choose_for("sm_90a", 132, 768, 768, 16384, 0);
    ck_assert_int_eq(memcmp(&fc, &pc, sizeof fc), 0);
}
END_TEST

/* Kernel 1 names the split (P, a spec); without it, nothing new. */
START_TEST(kernels_named) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, BF, 0, 8192, 8192, "sm_90a");
    for (int opt = 0; opt < 3; opt++) {
        c.split_k = opt ? 4 : 0, c.split_reduce = opt == 2, c.bias = opt == 2;
        tk_kernel *k;
        ck_assert_msg(tk_gemm_build(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        char *txt;
        ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
        ck_assert_int_eq(!strstr(txt, "split"), !opt);
        ck_assert_int_eq(!strstr(txt, "param P: f32 tensor rank 3"), !opt);
        if (opt == 1) ck_assert_ptr_nonnull(strstr(tk_kernel_name(k), "_f32_")); /* P is f32 */
        if (opt == 2) ck_assert_ptr_nonnull(strstr(tk_kernel_name(k), "reduce_bf16_bias"));
        tk_free(txt);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- gpu ---------------------------------------------------------------------- */
/* GPT-2 124M's weight gradients (D 768, qkv 2304, fc 3072) with the
 * library's split at T 16384 and forced at T 4096, then forced ragged ones. */
static const struct {
    scase e;
    int kernel;
} gpu_cases[] = {
    {{768, 2304, 16384, BF, F32, 1, 0, 0, NONE, 1, 0}, K_AUTO},
    {{768, 768, 16384, BF, F32, 1, 0, 0, NONE, 1, 0}, K_AUTO},
    {{768, 3072, 16384, BF, BF, 1, 0, 0, NONE, 1, 0}, K_AUTO},
    {{3072, 768, 16384, BF, BF, 1, 0, 0, NONE, 0, 0}, K_AUTO},
    /* at T 4096 the library does not split (too few k-tiles to pay, as
     * measured on the H100); forced, on its choice of block */
    {{768, 2304, 4096, BF, F32, 1, 0, 0, NONE, 0, 2}, K_AUTO},
    {{768, 768, 4096, BF, BF, 1, 0, 0, NONE, 1, 3}, K_AUTO},
    {{1000, 777, 5000, BF, F32, 1, 0, 1, NONE, 1, 3}, K_MMA},
    {{1000, 777, 5000, BF, F32, 1, 0, 1, NONE, 1, 5}, K_WIDE},
    {{1000, 777, 5000, HF, HF, 1, 1, 0, NONE, 1, 4}, K_MID},
    {{513, 1025, 3000, BF, BF, 0, 1, 0, DGELU, 0, 3}, K_WIDE},
    {{513, 1025, 3000, BF, BF, 0, 0, 1, GELU, 0, 2}, K_WIDE},
    {{333, 555, 7777, BF, F32, 1, 0, 0, NONE, 0, 8}, K_ONE},
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
    if (which >= K_WIDE && strcmp(arch, "sm_90a")) {
        printf("gemm splitk %d: %s needs sm_90a, the GPU is %s: skipped\n", _i, kernel_names[which],
               arch);
        return;
    }
    check_call(gctx, &gpu_cases[_i].e, which, 16, _i % 4 == 3 ? 8 : 0);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(tmp_root, sizeof tmp_root, "gemm-splitk")) return EXIT_FAILURE;
    tu_set_cache_dir(tmp_root);
    Suite *s = suite_create("gemm_splitk");
    TCase *ti = tcase_create("interp");
    tcase_set_timeout(ti, 900);
    tcase_add_loop_test(ti, interp_case, 0, N_INTERP);
    tcase_add_loop_test(ti, interp_random, 0, 3);
    tcase_add_loop_test(ti, interp_auto, 0, 2);
    suite_add_tcase(s, ti);
    TCase *tc = tcase_create("checks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rejects_bad_workspace);
    tcase_add_test(tc, config_split);
    tcase_add_test(tc, workspace_sizes);
    tcase_add_test(tc, choice_pure);
    tcase_add_test(tc, kernels_named);
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
