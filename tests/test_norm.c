/* LayerNorm and RMSNorm (tk_norm_build, kernels/norm.c): the config checks;
 * on the interpreter, forward and backward (dX, dW, dB through the partials'
 * reduction) against float64 at ragged shapes, every specialization; on the
 * GPU, each kernel against the interpreter on the same inputs (skipped, with
 * a line, without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

static const float EPS = 1e-5f;

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = (tk_kernel *)1;
    tk_norm_config ok = {.dtype = TK_BF16, .kind = TK_NORM_LAYER, .part = TK_NORM_FWD};
    static const struct {
        tk_norm_config c;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_F32}, "dtype is f32"},
        {{.dtype = TK_BF16, .kind = 2}, "kind is 2"},
        {{.dtype = TK_BF16, .part = 3}, "part is 3"},
        {{.dtype = TK_BF16, .residual = 2}, "residual is 2"},
        {{.dtype = TK_BF16, .kind = TK_NORM_RMS, .bias = 1}, "no bias"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(tk_norm_build(ctx, &bad[i].c, &k), TK_ERR_INVALID_ARG);
        ck_assert_ptr_null(k);
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].msg), "%s", tk_ctx_error(ctx));
    }
    ck_assert_int_eq(tk_norm_build(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_norm_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_norm_build(NULL, &ok, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_norm_build(ctx, &ok, &k), TK_OK);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- one case: tensors, the float64 reference ---------------------------- */
typedef struct ncase {
    int kind, residual, weight, bias;
    tk_dtype dt;
    int64_t R, C;
} ncase;

typedef struct nbufs {
    ref_tensor x, res, w, b, h, y, mean, rstd;    /* forward */
    ref_tensor dy, dh, dx, dwp, dbp, dw, db, hin; /* backward (hin: h as H) */
    int64_t P;
} nbufs;

static ref_tensor mat(tk_dtype dt, int64_t r, int64_t c) {
    int64_t d[2] = {r, c};
    return ref_tensor_new(dt, 2, d);
}
static ref_tensor vec(tk_dtype dt, int64_t n) {
    int64_t d[1] = {n};
    return ref_tensor_new(dt, 1, d);
}

/* Inputs random (rows offset by 3 so a cancelling variance would show),
 * outputs NaN. */
static void bufs_make(nbufs *b, const ncase *c) {
    memset(b, 0, sizeof *b);
    int64_t R = c->R, C = c->C;
    b->P = (R + 15) / 16;
    b->x = mat(c->dt, R, C), b->res = mat(c->dt, R, C), b->h = mat(c->dt, R, C);
    b->y = mat(c->dt, R, C), b->w = vec(c->dt, C), b->b = vec(c->dt, C);
    b->mean = vec(TK_F32, R), b->rstd = vec(TK_F32, R);
    b->dy = mat(c->dt, R, C), b->dh = mat(c->dt, R, C), b->dx = mat(c->dt, R, C);
    b->dwp = mat(TK_F32, b->P, C), b->dbp = mat(TK_F32, b->P, C);
    b->dw = vec(TK_F32, C), b->db = vec(TK_F32, C);
    ref_tensor_random(&b->x, 2.0, 4.0);
    ref_tensor_random(&b->res, -1.0, 1.0);
    ref_tensor_random(&b->w, 0.5, 1.5);
    ref_tensor_random(&b->b, -1.0, 1.0);
    ref_tensor_random(&b->dy, -1.0, 1.0);
    ref_tensor_random(&b->dh, -1.0, 1.0);
    ref_tensor *outs[] = {&b->h,   &b->y,   &b->mean, &b->rstd, &b->dx,
                          &b->dwp, &b->dbp, &b->dw,   &b->db};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ref_tensor_fill_all(outs[i], NAN);
}

static void bufs_free(nbufs *b) {
    ref_tensor *all[] = {&b->x,  &b->res, &b->w,  &b->b,   &b->h,   &b->y,  &b->mean, &b->rstd,
                         &b->dy, &b->dh,  &b->dx, &b->dwp, &b->dbp, &b->dw, &b->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* The kernels' argument lists (tk/tk_kernels.h, "Normalization"). */
static int fwd_args(const ncase *c, nbufs *b, ref_tensor *t, tk_arg *s) {
    int n = 0;
    t[n++] = b->x;
    if (c->residual) t[n++] = b->res;
    if (c->weight) t[n++] = b->w;
    if (c->bias) t[n++] = b->b;
    if (c->residual) t[n++] = b->h;
    t[n++] = b->y;
    if (c->kind == TK_NORM_LAYER) t[n++] = b->mean;
    t[n++] = b->rstd;
    memset(&t[n], 0, sizeof t[n]);
    s[n] = tk_arg_f32(EPS);
    return n + 1;
}

static int bwd_args(const ncase *c, nbufs *b, ref_tensor *t) {
    int n = 0;
    t[n++] = c->residual ? b->h : b->x;
    t[n++] = b->dy;
    if (c->residual) t[n++] = b->dh;
    if (c->weight) t[n++] = b->w;
    if (c->kind == TK_NORM_LAYER) t[n++] = b->mean;
    t[n++] = b->rstd;
    t[n++] = b->dx;
    if (c->weight) t[n++] = b->dwp;
    if (c->bias) t[n++] = b->dbp;
    return n;
}

static tk_kernel *build(tk_ctx *ctx, const ncase *c, int part) {
    tk_norm_config cfg = {.dtype = c->dt,
                          .kind = c->kind,
                          .part = part,
                          .residual = c->residual,
                          .weight = c->weight,
                          .bias = c->bias};
    tk_kernel *k = NULL;
    ck_assert_msg(tk_norm_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* The three kernels of case c: forward, backward, reduction. */
enum { FWD, BWD, RED };
static void build_all(tk_ctx *ctx, const ncase *c, tk_kernel *ks[3]) {
    ks[FWD] = build(ctx, c, TK_NORM_FWD);
    ks[BWD] = build(ctx, c, TK_NORM_BWD);
    ks[RED] = build(ctx, c, TK_NORM_BWD_REDUCE);
}

static void destroy_all(tk_kernel *ks[3]) {
    for (int i = 0; i < 3; i++) tk_kernel_destroy(ks[i]);
}

static tk_status run(tk_kernel *k, int n, const ref_tensor *t, const tk_arg *s) {
    tk_arg a[16];
    for (int i = 0; i < n; i++) a[i] = t[i].rank ? ref_tensor_arg(&t[i]) : s[i];
    return tk_interp_run(k, n, a);
}

/* Float64: h, mean, rstd, y of row r; then the gradients from the h the
 * kernels read (as stored, rounded) and the statistics of that h. */
typedef struct nref {
    double *h, *y, *mean, *rstd, *dx, *dw, *db;
} nref;

static void reference(const ncase *c, const nbufs *b, nref *o) {
    int64_t R = c->R, C = c->C;
    double *x = ref_tensor_to_f64(&b->x), *rs = ref_tensor_to_f64(&b->res);
    double *w = ref_tensor_to_f64(&b->w), *bb = ref_tensor_to_f64(&b->b);
    double *dy = ref_tensor_to_f64(&b->dy), *dh = ref_tensor_to_f64(&b->dh);
    o->h = calloc((size_t)(R * C), 8), o->y = calloc((size_t)(R * C), 8);
    o->dx = calloc((size_t)(R * C), 8), o->dw = calloc((size_t)C, 8), o->db = calloc((size_t)C, 8);
    o->mean = calloc((size_t)R, 8), o->rstd = calloc((size_t)R, 8);
    ref_tensor hr = mat(c->dt, 1, 1); /* rounds h to the dtype as H stores it */
    bool layer = c->kind == TK_NORM_LAYER;
    for (int64_t r = 0; r < R; r++) {
        double *h = o->h + r * C, m = 0, v = 0;
        for (int64_t j = 0; j < C; j++) {
            double s = x[r * C + j] + (c->residual ? rs[r * C + j] : 0);
            ref_tensor_set(&hr, 0, s);
            h[j] = c->residual ? ref_tensor_get(&hr, 0) : s;
            m += h[j];
        }
        m = layer ? m / (double)C : 0;
        for (int64_t j = 0; j < C; j++) v += (h[j] - m) * (h[j] - m);
        double rstd = 1.0 / sqrt(v / (double)C + EPS), sg = 0, sgx = 0;
        o->mean[r] = m, o->rstd[r] = rstd;
        for (int64_t j = 0; j < C; j++) {
            double xh = (h[j] - m) * rstd, g = dy[r * C + j] * (c->weight ? w[j] : 1);
            o->y[r * C + j] = xh * (c->weight ? w[j] : 1) + (c->bias ? bb[j] : 0);
            sg += g, sgx += g * xh;
            o->dw[j] += dy[r * C + j] * xh;
            o->db[j] += dy[r * C + j];
        }
        for (int64_t j = 0; j < C; j++) {
            double xh = (h[j] - m) * rstd, g = dy[r * C + j] * (c->weight ? w[j] : 1);
            double t = g - xh * sgx / (double)C - (layer ? sg / (double)C : 0);
            o->dx[r * C + j] = rstd * t + (c->residual ? dh[r * C + j] : 0);
        }
    }
    ref_tensor_free(&hr);
    free(x), free(rs), free(w), free(bb), free(dy), free(dh);
}

static void ref_free(nref *o) {
    free(o->h), free(o->y), free(o->mean), free(o->rstd), free(o->dx), free(o->dw), free(o->db);
}

static double err_of(const ref_tensor *t, const double *ref) {
    double *out = ref_tensor_to_f64(t);
    double e = ref_rel_err(out, ref, ref_tensor_count(t));
    free(out);
    return e;
}

static const ncase cases[] = {
    {TK_NORM_LAYER, 0, 1, 1, TK_BF16, 17, 33}, {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 100, 257},
    {TK_NORM_LAYER, 0, 0, 0, TK_F16, 1, 1},    {TK_NORM_LAYER, 1, 0, 0, TK_BF16, 64, 100},
    {TK_NORM_RMS, 0, 1, 0, TK_BF16, 33, 64},   {TK_NORM_RMS, 1, 1, 0, TK_F16, 130, 1000},
    {TK_NORM_RMS, 0, 0, 0, TK_BF16, 5, 31},    {TK_NORM_LAYER, 1, 1, 0, TK_F16, 3, 2049},
    {TK_NORM_RMS, 1, 0, 0, TK_BF16, 70, 96},   {TK_NORM_LAYER, 0, 1, 0, TK_BF16, 16, 16},
    {TK_NORM_RMS, 1, 1, 0, TK_BF16, 2, 16384}, {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 3, 16384},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void label(const ncase *c, char *buf, size_t n) {
    snprintf(buf, n, "%s R%lld C%lld %s%s%s%s", c->kind ? "rms  " : "layer", (long long)c->R,
             (long long)c->C, tk_dtype_name(c->dt), c->residual ? " res" : "",
             c->weight ? " w" : "", c->bias ? " b" : "");
}

/* Forward, then the backward on the forward's outputs, on the interpreter. */
START_TEST(interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const ncase *c = &cases[_i];
    nbufs b;
    bufs_make(&b, c);
    ref_tensor t[16];
    tk_arg s[16];
    tk_kernel *ks[3];
    build_all(ctx, c, ks);
    int n = fwd_args(c, &b, t, s);
    ck_assert_msg(run(ks[FWD], n, t, s) == TK_OK, "%s", tk_ctx_error(ctx));
    n = bwd_args(c, &b, t);
    ck_assert_msg(run(ks[BWD], n, t, s) == TK_OK, "%s", tk_ctx_error(ctx));
    ref_tensor rw[2] = {b.dwp, b.dw}, rb[2] = {b.dbp, b.db};
    if (c->weight) ck_assert_msg(run(ks[RED], 2, rw, s) == TK_OK, "%s", tk_ctx_error(ctx));
    if (c->bias) ck_assert_msg(run(ks[RED], 2, rb, s) == TK_OK, "%s", tk_ctx_error(ctx));

    nref o;
    reference(c, &b, &o);
    double ey = err_of(&b.y, o.y), er = err_of(&b.rstd, o.rstd), edx = err_of(&b.dx, o.dx);
    double eh = c->residual ? err_of(&b.h, o.h) : 0, em = 0, ew = 0, eb = 0;
    if (c->kind == TK_NORM_LAYER) em = err_of(&b.mean, o.mean);
    if (c->weight) ew = err_of(&b.dw, o.dw);
    if (c->bias) eb = err_of(&b.db, o.db);
    char name[96];
    label(c, name, sizeof name);
    printf("norm interp %s: rel err Y %.2e H %.2e mean %.2e rstd %.2e dX %.2e dW %.2e dB %.2e\n",
           name, ey, eh, em, er, edx, ew, eb);
    /* 16-bit outputs: 1e-2; f32 statistics and sums of 16-bit inputs: tighter */
    ck_assert_msg(ey <= 1e-2 && edx <= 1e-2, "%s: Y %g dX %g", name, ey, edx);
    ck_assert_msg(eh <= 1e-6, "%s: H %g (the rounded sum, exactly)", name, eh);
    ck_assert_msg(em <= 1e-5 && er <= 1e-4, "%s: mean %g rstd %g", name, em, er);
    ck_assert_msg(ew <= 1e-4 && eb <= 1e-5, "%s: dW %g dB %g", name, ew, eb);
    ref_free(&o);
    destroy_all(ks);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Each kernel on the GPU against the interpreter, same inputs. */
START_TEST(gpu_against_interp) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (th_gpu_or_skip(ctx) != TK_OK) {
        tk_ctx_destroy(ctx);
        return;
    }
    const ncase *c = &cases[_i];
    nbufs b;
    bufs_make(&b, c);
    ref_tensor t[16];
    tk_arg s[16];
    tk_kernel *ks[3];
    build_all(ctx, c, ks);
    double ef = 0, eg = 0, er = 0;
    int n = fwd_args(c, &b, t, s);
    ck_assert_msg(th_compare(ctx, ks[FWD], n, t, s, &ef) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(run(ks[FWD], n, t, s) == TK_OK, "%s", tk_ctx_error(ctx)); /* H, stats for bwd */
    n = bwd_args(c, &b, t);
    ck_assert_msg(th_compare(ctx, ks[BWD], n, t, s, &eg) == TK_OK, "%s", tk_ctx_error(ctx));
    ref_tensor rw[2] = {b.dwp, b.dw};
    ref_tensor_random(&b.dwp, -1.0, 1.0);
    ck_assert_msg(th_compare(ctx, ks[RED], 2, rw, s, &er) == TK_OK, "%s", tk_ctx_error(ctx));
    char name[96];
    label(c, name, sizeof name);
    printf("norm gpu %s: rel err against the interpreter fwd %.2e bwd %.2e reduce %.2e\n", name, ef,
           eg, er);
    ck_assert_msg(ef <= 1e-2 && eg <= 1e-2 && er <= 1e-5, "%s", name);
    destroy_all(ks);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("norm");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, bad_configs);
    suite_add_tcase(s, tc);
    tc = tcase_create("interp");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, gpu_against_interp, 0, NCASES);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
