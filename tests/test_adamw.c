/* The optimizer step (tk_adamw_build, kernels/adamw.c; tk_grad_norm and
 * tk_adamw, kernels/adamw_run.c): the config and parameter checks, each by
 * its message; on the interpreter, the launches the entry points make
 * against a float64 reference at ragged sizes (f32, bf16 and f16 gradients,
 * clipping active, inactive and off, weight decay 0 and 0.1, t 1 and 1000,
 * the low-precision copy NaN-poisoned, guard elements past n that must stay
 * untouched); determinism (the same bits run after run and under every warp
 * order the interpreter can draw); on the GPU, through the entry points on
 * device buffers at GPT-2 124M's parameter count and ragged sizes (skipped,
 * with a line, without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/adamw_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

#define GUARD 40 /* elements past n in every buffer: never written */

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = (tk_kernel *)1;
    static const struct {
        tk_adamw_config c;
        const char *msg;
    } bad[] = {
        {{.part = 3}, "part is 3"},
        {{.part = TK_ADAMW_SUMSQ, .grad_dtype = TK_I32}, "grad_dtype is i32"},
        {{.part = TK_ADAMW_STEP, .grad_dtype = TK_F32, .lowp_dtype = TK_F32}, "lowp_dtype is f32"},
        {{.part = TK_ADAMW_STEP, .grad_dtype = TK_F32, .clip = 2}, "clip is 2"},
        {{.part = TK_ADAMW_STEP, .grad_dtype = TK_BF16, .warps = 3}, "warps is 3"},
        {{.part = TK_ADAMW_SUMSQ, .grad_dtype = TK_F32, .cols = 100}, "cols is 100"},
        {{.part = TK_ADAMW_SUMSQ, .grad_dtype = TK_F32, .warps = 1, .cols = 144}, "up to 128"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_adamw_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    tk_adamw_config ok = {.part = TK_ADAMW_STEP, .grad_dtype = TK_BF16, .lowp_dtype = TK_BF16};
    ck_assert_int_eq(tk_adamw_build(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_adamw_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_adamw_build(NULL, &ok, &k), TK_ERR_INVALID_ARG);
    tk_adamw_config oks[3] = {ok,
                              {.part = TK_ADAMW_NORM, .grad_dtype = TK_I32},
                              {.part = TK_ADAMW_SUMSQ, .grad_dtype = TK_F16, .warps = 1}};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(tk_adamw_build(ctx, &oks[i], &k) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the entry points' checks (no launch: each call fails before any) ---- */
START_TEST(bad_norm_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    _Alignas(16) float buf[64];
    tk_grad_norm_params ok = TK_GRAD_NORM_PARAMS_INIT;
    ok.grad_dtype = TK_F32, ok.n = 5000, ok.grad = buf, ok.norm = buf, ok.workspace = buf;
    size_t need = 0;
    ck_assert_int_eq(tk_grad_norm_workspace(ctx, &ok, &need), TK_OK);
    ck_assert_uint_eq(need, 2 * 64); /* one partial row for the full row, one for the tail */
    ok.workspace_bytes = need;
    static const char *msg[] = {"grad_dtype is i32",
                                "n is 0",
                                "n is 1099511627777",
                                "width is 24",
                                "width is 2097152",
                                "grad is NULL",
                                "grad is not 2-byte aligned",
                                "norm is NULL",
                                "norm is not 4-byte aligned",
                                "workspace is NULL",
                                "workspace_bytes is 127; n = 5000 needs 128",
                                "struct_size is 0",
                                "params is NULL"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_grad_norm_params p = ok;
        switch (i) {
        case 0: p.grad_dtype = TK_I32; break;
        case 1: p.n = 0; break;
        case 2: p.n = ((int64_t)1 << 40) + 1; break;
        case 3: p.width = 24; break;
        case 4: p.width = 1 << 21; break;
        case 5: p.grad = NULL; break;
        case 6: p.grad_dtype = TK_BF16, p.grad = (char *)buf + 1; break;
        case 7: p.norm = NULL; break;
        case 8: p.norm = (float *)((char *)buf + 2); break;
        case 9: p.workspace = NULL; break;
        case 10: p.workspace_bytes = 127; break;
        case 11: p.struct_size = 0; break;
        }
        tu_expect_status(ctx, tk_grad_norm(ctx, i == 12 ? NULL : &p, NULL), TK_ERR_INVALID_ARG,
                         msg[i]);
    }
    ck_assert_int_eq(tk_grad_norm_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_grad_norm(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    /* the workspace: 64 bytes per 16 full rows, and the tail's */
    tk_grad_norm_params w = ok;
    w.n = 4096 * 33, w.grad = NULL;
    ck_assert_int_eq(tk_grad_norm_workspace(ctx, &w, &need), TK_OK);
    ck_assert_uint_eq(need, 3 * 64);
    w.n = 17, w.width = 16;
    ck_assert_int_eq(tk_grad_norm_workspace(ctx, &w, &need), TK_OK);
    ck_assert_uint_eq(need, 2 * 64);
    tk_ctx_destroy(ctx);
}
END_TEST

static tk_adamw_params step_ok(float *buf) {
    tk_adamw_params p = TK_ADAMW_PARAMS_INIT;
    p.grad_dtype = TK_F32, p.lowp_dtype = TK_BF16, p.n = 100;
    p.weight = p.m = p.v = buf, p.grad = buf, p.weight_lowp = buf, p.grad_norm = buf;
    p.max_norm = 1.0f, p.lr = 1e-3f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-8f;
    p.weight_decay = 0.1f, p.step = 1;
    return p;
}

START_TEST(bad_step_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    _Alignas(16) float buf[64];
    tk_adamw_params ok = step_ok(buf);
    const tk_adamw_config bad_shape = {.warps = 3};
    static const char *msg[] = {"grad_dtype is i64",
                                "n is -3",
                                "width is 8",
                                "max_norm nan is not a finite value >= 0",
                                "lr -0.001 is not a finite value >= 0",
                                "beta1 1 is outside [0, 1)",
                                "beta2 inf is not a finite",
                                "eps -1 is not",
                                "weight_decay nan is not",
                                "step is 0; expected t >= 1",
                                "lowp_dtype is f32; expected TK_BF16 or TK_F16",
                                "weight_lowp is NULL and lowp_dtype is f16",
                                "weight is NULL",
                                "m is NULL",
                                "v is not 4-byte aligned",
                                "grad is NULL",
                                "weight_lowp is not 2-byte aligned",
                                "grad_norm is not 4-byte aligned",
                                "struct_size is 8; the smallest layout",
                                "warps is 3"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_adamw_params p = ok;
        char *odd = (char *)buf + 1;
        switch (i) {
        case 0: p.grad_dtype = TK_I64; break;
        case 1: p.n = -3; break;
        case 2: p.width = 8; break;
        case 3: p.max_norm = NAN; break;
        case 4: p.lr = -1e-3f; break;
        case 5: p.beta1 = 1.0f; break;
        case 6: p.beta2 = INFINITY; break;
        case 7: p.eps = -1.0f; break;
        case 8: p.weight_decay = NAN; break;
        case 9: p.step = 0; break;
        case 10: p.lowp_dtype = TK_F32; break;
        case 11: p.weight_lowp = NULL, p.lowp_dtype = TK_F16; break;
        case 12: p.weight = NULL; break;
        case 13: p.m = NULL; break;
        case 14: p.v = (float *)((char *)buf + 2); break;
        case 15: p.grad = NULL; break;
        case 16: p.weight_lowp = odd; break;
        case 17: p.grad_norm = (float *)odd; break;
        case 18: p.struct_size = 8; break;
        default: p.config = &bad_shape; break; /* the build's check, through the registry */
        }
        tu_expect_status(ctx, tk_adamw(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_adamw(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_adamw(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The launches' shapes: the full rows, then the tail, each where there is
 * one; the clip and the copy as specializations. */
START_TEST(launch_shapes) {
    _Alignas(16) float buf[64];
    tk_adamw_params p = step_ok(buf);
    tk_adamw_launch l[3];
    p.n = 4096 * 3 + 5;
    ck_assert_int_eq(tk_adamw_launches(&p, l), 2);
    ck_assert_int_eq(l[0].args[0].dims[0], 3);
    ck_assert_int_eq(l[0].args[0].dims[1], 4096);
    ck_assert_int_eq(l[1].args[0].dims[0], 1);
    ck_assert_int_eq(l[1].args[0].dims[1], 5);
    ck_assert_ptr_eq(l[1].args[0].data, buf + 4096 * 3);
    ck_assert_ptr_eq(l[1].args[4].data, (uint16_t *)buf + 4096 * 3); /* the bf16 copy */
    ck_assert_int_eq(l[0].n, 14);
    ck_assert(l[0].cfg.clip == 1 && l[0].cfg.lowp_dtype == TK_BF16);
    p.n = 4096 * 2, p.max_norm = 0.0f, p.weight_lowp = NULL, p.lowp_dtype = TK_DT_NONE;
    ck_assert_int_eq(tk_adamw_launches(&p, l), 1);
    ck_assert_int_eq(l[0].n, 11); /* W, M, V, G and seven scalars */
    ck_assert(l[0].cfg.clip == 0 && l[0].cfg.lowp_dtype == TK_DT_NONE);
    p.n = 7, p.grad_norm = NULL, p.max_norm = 1.0f;
    ck_assert_int_eq(tk_adamw_launches(&p, l), 1);
    ck_assert(l[0].cfg.clip == 0 && l[0].args[0].dims[1] == 7);
    tk_grad_norm_params q = TK_GRAD_NORM_PARAMS_INIT;
    q.grad_dtype = TK_BF16, q.n = 16 * 17 + 3, q.width = 16, q.workspace = buf, q.grad = buf;
    ck_assert_int_eq(tk_grad_norm_launches(&q, l), 3);
    ck_assert_int_eq(l[0].args[1].dims[0], 2);         /* 17 full rows: two partial rows */
    ck_assert_ptr_eq(l[1].args[1].data, buf + 2 * 16); /* the tail's row after them */
    ck_assert_int_eq(l[2].args[0].dims[0], 3);
    ck_assert_int_eq(l[2].cfg.part, TK_ADAMW_NORM);
}
END_TEST

/* ---- one case: buffers, the float64 reference ----------------------------- */
typedef struct acase {
    int64_t n;
    tk_dtype gd, ld;  /* the gradient's and the copy's dtypes (ld 0: none)        */
    int clip;         /* 0 off, 1 active (norm above max_norm), 2 inactive        */
    float wd;         /* weight decay                                             */
    int64_t t, width; /* step; rows' width (0: the run API's)                     */
    int warps, cols;  /* the block shape of both kernels (0: the defaults)        */
} acase;

typedef struct abufs {
    ref_tensor w, m, v, g, l, ws, norm; /* n + GUARD elements each (ws, norm: theirs) */
    double *w0, *m0, *v0;               /* the state before the step               */
    tk_adamw_config shape;
} abufs;

static ref_tensor flat(tk_dtype dt, int64_t n) {
    int64_t d[1] = {n};
    return ref_tensor_new(dt, 1, d);
}

/* Inputs random (a trainer's scales: the moments of earlier steps at t >
 * 1, zero at t = 1), the copy NaN, every guard a sentinel. */
static void bufs_make(abufs *b, const acase *c) {
    memset(b, 0, sizeof *b);
    int64_t n = c->n, N = n + GUARD;
    b->w = flat(TK_F32, N), b->m = flat(TK_F32, N), b->v = flat(TK_F32, N);
    b->g = flat(c->gd, N), b->l = flat(c->ld ? c->ld : TK_BF16, N);
    b->norm = flat(TK_F32, 4);
    ref_tensor_random(&b->w, -1.0, 1.0);
    ref_tensor_random(&b->g, -0.05, 0.05);
    ref_tensor_random(&b->m, c->t > 1 ? -0.01 : 0.0, c->t > 1 ? 0.01 : 0.0);
    ref_tensor_random(&b->v, 0.0, c->t > 1 ? 1e-3 : 0.0);
    ref_tensor_fill_all(&b->l, NAN);
    ref_tensor_fill_all(&b->norm, NAN);
    ref_tensor *all[] = {&b->w, &b->m, &b->v, &b->g};
    for (int i = 0; i < 4; i++)
        for (int64_t j = n; j < N; j++) ref_tensor_set(all[i], j, 96.5);
    b->w0 = ref_tensor_to_f64(&b->w), b->m0 = ref_tensor_to_f64(&b->m);
    b->v0 = ref_tensor_to_f64(&b->v);
    b->shape = (tk_adamw_config){.warps = c->warps, .cols = c->cols};
}

static void bufs_free(abufs *b) {
    ref_tensor *all[] = {&b->w, &b->m, &b->v, &b->g, &b->l, &b->ws, &b->norm};
    for (int i = 0; i < 7; i++) ref_tensor_free(all[i]);
    free(b->w0), free(b->m0), free(b->v0);
}

/* ‖G‖ in float64 over the first n elements. */
static double ref_norm(const ref_tensor *g, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ref_tensor_get(g, i) * ref_tensor_get(g, i);
    return sqrt(s);
}

/* The clip's max_norm: half the norm (active), twice it (inactive). */
static float max_norm_of(const acase *c, double norm) {
    return c->clip == 1 ? (float)(norm / 2) : c->clip == 2 ? (float)(norm * 2) : 0.0f;
}

static tk_grad_norm_params norm_params(tk_ctx *ctx, const acase *c, abufs *b) {
    tk_grad_norm_params p = TK_GRAD_NORM_PARAMS_INIT;
    p.grad_dtype = c->gd, p.n = c->n, p.grad = b->g.data, p.norm = b->norm.data;
    p.width = c->width;
    if (c->warps || c->cols) p.config = &b->shape;
    ck_assert_msg(tk_grad_norm_workspace(ctx, &p, &p.workspace_bytes) == TK_OK, "%s",
                  tk_ctx_error(ctx));
    ref_tensor_free(&b->ws);
    b->ws = flat(TK_F32, (int64_t)p.workspace_bytes / 4);
    ref_tensor_fill_all(&b->ws, NAN); /* every partial row is written before it is read */
    p.workspace = b->ws.data;
    return p;
}

static tk_adamw_params step_params(const acase *c, abufs *b, float max_norm) {
    tk_adamw_params p = TK_ADAMW_PARAMS_INIT;
    p.grad_dtype = c->gd, p.lowp_dtype = c->ld, p.n = c->n;
    p.weight = b->w.data, p.m = b->m.data, p.v = b->v.data, p.grad = b->g.data;
    p.weight_lowp = c->ld ? b->l.data : NULL;
    p.grad_norm = c->clip ? b->norm.data : NULL, p.max_norm = max_norm;
    p.lr = 1e-2f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-8f, p.weight_decay = c->wd;
    p.step = c->t, p.width = c->width;
    if (c->warps || c->cols) p.config = &b->shape;
    return p;
}

static void interp(tk_ctx *ctx, const tk_adamw_launch *l) {
    tk_kernel *k = NULL;
    ck_assert_msg(tk_adamw_build(ctx, &l->cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_interp_run(k, l->n, l->args) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* The norm, then the step, as the entry points launch them. */
static void run_step(tk_ctx *ctx, const acase *c, abufs *b, float max_norm) {
    tk_grad_norm_params np = norm_params(ctx, c, b);
    tk_adamw_launch l[3];
    int n = tk_grad_norm_launches(&np, l);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
    tk_adamw_params sp = step_params(c, b, max_norm);
    n = tk_adamw_launches(&sp, l);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
}

/* The new state in float64 from the same inputs (the hyperparameters as
 * the kernel gets them: f32, the bias corrections from double). */
typedef struct aref {
    double *w, *m, *v, dw_err;
} aref;

static void reference(const acase *c, const abufs *b, const tk_adamw_params *p, double norm,
                      aref *o) {
    int64_t n = c->n;
    o->w = malloc((size_t)n * 8), o->m = malloc((size_t)n * 8), o->v = malloc((size_t)n * 8);
    double cl = c->clip ? fmin(1.0, (double)p->max_norm / (norm + 1e-6)) : 1.0;
    double b1 = p->beta1, b2 = p->beta2, t = (double)p->step;
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    for (int64_t i = 0; i < n; i++) {
        double g = cl * ref_tensor_get(&b->g, i);
        o->m[i] = b1 * b->m0[i] + (1.0 - b1) * g;
        o->v[i] = b2 * b->v0[i] + (1.0 - b2) * g * g;
        double upd = (o->m[i] / bc1) / (sqrt(o->v[i] / bc2) + (double)p->eps) +
                     (double)p->weight_decay * b->w0[i];
        o->w[i] = b->w0[i] - (double)p->lr * upd;
    }
}

static double rel_first(const ref_tensor *t, const double *ref, int64_t n) {
    double *out = ref_tensor_to_f64(t);
    double e = ref_rel_err(out, ref, n);
    free(out);
    return e;
}

/* The new weights' errors from each element's old weight w0, the kernel's
 * f32 W and the float64 one. [0], W: against the sums of |terms| of
 * w0 - lr·upd, not against W, since where a step cancels w0 (at n 1, say)
 * plain relative error measures the cancellation, not the kernel; a correct
 * kernel is within a few 2^-24 of this scale. [1], the step (new - old
 * weights against the reference's: the update's own accuracy, which W's
 * error hides) less the new weight's unavoidable rounding, |fl(x) - x| <=
 * 2^-24·|x|, which alone made 3.4e-5 of a small step at n 5 (seed
 * 1796638661464330516): what is left is at most the computed update's error,
 * a few 2^-24 of it, while a wrong update (bias correction, eps, decay)
 * shows in full. A non-finite W: infinity. */
typedef struct werr {
    double num[2], den[2];
    int64_t bad;
} werr;

static void werr_add(werr *e, double w0, double got, double want) {
    if (!isfinite(got)) {
        e->bad++;
        return;
    }
    double r = fabs(got - want), step = want - w0, terms = fabs(w0) + fabs(step);
    double past = fmax(0.0, r - 0x1p-24 * fabs(want));
    e->num[0] += r * r, e->den[0] += terms * terms;
    e->num[1] += past * past, e->den[1] += step * step;
}

static double werr_of(const werr *e, int i) {
    return e->bad ? INFINITY : e->den[i] > 0 ? sqrt(e->num[i] / e->den[i]) : sqrt(e->num[i]);
}

/* Guards untouched; the copy exactly the new weights rounded. */
static void check_bits(const acase *c, const abufs *b) {
    const ref_tensor *all[] = {&b->w, &b->m, &b->v, &b->g};
    for (int i = 0; i < 4; i++)
        for (int64_t j = c->n; j < c->n + GUARD; j++)
            ck_assert_msg(ref_tensor_get(all[i], j) == 96.5, "buffer %d: guard %lld written", i,
                          (long long)(j - c->n));
    const float *w = b->w.data;
    const uint16_t *l = b->l.data;
    for (int64_t j = 0; j < c->n + GUARD; j++) {
        if (!c->ld || j >= c->n) {
            ck_assert_msg(isnan(ref_tensor_get(&b->l, j)), "copy %lld written", (long long)j);
            continue;
        }
        uint16_t want = c->ld == TK_BF16 ? tk_f32_to_bf16(w[j]) : tk_f32_to_f16(w[j]);
        ck_assert_msg(l[j] == want, "copy %lld: %04x, the weight %a rounds to %04x", (long long)j,
                      l[j], (double)w[j], want);
    }
}

static const acase cases[] = {
    /* n, grad, copy, clip, wd, t, width, warps, cols */
    {1, TK_F32, TK_BF16, 1, 0.1f, 1, 0, 0, 0},
    {5, TK_BF16, TK_BF16, 2, 0.0f, 1000, 0, 0, 0},
    {1000, TK_F32, TK_F16, 0, 0.1f, 1000, 0, 0, 0},
    {1000, TK_BF16, TK_DT_NONE, 1, 0.1f, 1, 16, 1, 0},
    {4097, TK_F32, TK_BF16, 2, 0.1f, 1, 0, 0, 0},
    {4097, TK_BF16, TK_BF16, 1, 0.0f, 1000, 64, 2, 64},
    {4097, TK_F16, TK_BF16, 1, 0.1f, 1000, 256, 4, 0},
    {100003, TK_F32, TK_BF16, 1, 0.1f, 1000, 0, 0, 0},
    {100003, TK_BF16, TK_BF16, 2, 0.1f, 1, 1024, 0, 0},
    {100003, TK_F32, TK_DT_NONE, 0, 0.0f, 1, 256, 8, 256},
    {100003, TK_BF16, TK_F16, 1, 0.0f, 1000, 4080, 16, 256},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void label(const acase *c, char *buf, size_t n) {
    static const char *clip[] = {"off", "active", "inactive"};
    snprintf(buf, n, "n %lld %s->%s clip %s wd %g t %lld width %lld w%d c%d", (long long)c->n,
             tk_dtype_name(c->gd), c->ld ? tk_dtype_name(c->ld) : "none", clip[c->clip],
             (double)c->wd, (long long)c->t, (long long)c->width, c->warps, c->cols);
}

START_TEST(interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const acase *c = &cases[_i];
    abufs b;
    bufs_make(&b, c);
    double norm = ref_norm(&b.g, c->n);
    float max_norm = max_norm_of(c, norm);
    run_step(ctx, c, &b, max_norm);
    tk_adamw_params p = step_params(c, &b, max_norm);
    aref o;
    reference(c, &b, &p, norm, &o);
    double en = fabs(ref_tensor_get(&b.norm, 0) - norm) / norm;
    werr we = {0};
    for (int64_t i = 0; i < c->n; i++) werr_add(&we, b.w0[i], ref_tensor_get(&b.w, i), o.w[i]);
    double ew = werr_of(&we, 0), ed = werr_of(&we, 1), em = rel_first(&b.m, o.m, c->n);
    double ev = rel_first(&b.v, o.v, c->n);
    char name[128];
    label(c, name, sizeof name);
    printf("adamw interp %s: rel err norm %.1e W %.1e dW %.1e m %.1e v %.1e\n", name, en, ew, ed,
           em, ev);
    ck_assert_msg(en <= 1e-6, "%s: norm %g", name, en);
    /* W and the step as werr_add measures them: a few 2^-24 for a correct kernel */
    ck_assert_msg(ew <= 1e-6 && em <= 1e-6 && ev <= 1e-6, "%s: W %g m %g v %g", name, ew, em, ev);
    ck_assert_msg(ed <= 2e-5, "%s: the update %g", name, ed);
    ck_assert_msg(isnan(ref_tensor_get(&b.norm, 1)), "%s: Norm[1] written", name);
    check_bits(c, &b);
    free(o.w), free(o.m), free(o.v);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- determinism ------------------------------------------------------------ */
/* The step's outputs and the norm as bytes. */
typedef struct snap {
    void *w, *m, *v, *l;
    float norm;
} snap;

static snap take(const abufs *b) {
    return (snap){ref_tensor_snapshot(&b->w), ref_tensor_snapshot(&b->m),
                  ref_tensor_snapshot(&b->v), ref_tensor_snapshot(&b->l),
                  (float)ref_tensor_get(&b->norm, 0)};
}

static bool same(const snap *a, const snap *b, size_t bytes) {
    return !memcmp(&a->norm, &b->norm, 4) && !memcmp(a->w, b->w, bytes) &&
           !memcmp(a->m, b->m, bytes) && !memcmp(a->v, b->v, bytes) &&
           !memcmp(a->l, b->l, bytes / 2);
}

static void snap_free(snap *s) { free(s->w), free(s->m), free(s->v), free(s->l); }

/* The same inputs, run after run and with the warps run in orders drawn
 * from several seeds (where the sums' order would show): the same bits. */
START_TEST(deterministic) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const acase c = {40000 + 9, TK_F32, TK_BF16, 1, 0.1f, 7, 256, 0, 0};
    abufs b;
    bufs_make(&b, &c);
    void *g0 = ref_tensor_snapshot(&b.g);
    double norm = ref_norm(&b.g, c.n);
    snap first = {0};
    for (uint64_t seed = 0; seed < 4; seed++) {
        tk_interp_options o = {.race_check = 1, .shuffle_seed = seed};
        ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
        abufs r;
        bufs_make(&r, &c); /* fresh state, then the first run's inputs */
        memcpy(r.g.data, g0, (size_t)(c.n + GUARD) * 4);
        memcpy(r.w.data, b.w.data, (size_t)(c.n + GUARD) * 4);
        memcpy(r.m.data, b.m.data, (size_t)(c.n + GUARD) * 4);
        memcpy(r.v.data, b.v.data, (size_t)(c.n + GUARD) * 4);
        run_step(ctx, &c, &r, (float)(norm / 2));
        snap s = take(&r);
        if (!seed)
            first = s;
        else {
            ck_assert_msg(same(&first, &s, (size_t)(c.n + GUARD) * 4), "seed %llu: other bits",
                          (unsigned long long)seed);
            snap_free(&s);
        }
        bufs_free(&r);
    }
    printf("adamw deterministic: n %lld, 4 warp orders, norm %a each time\n", (long long)c.n,
           (double)first.norm);
    snap_free(&first);
    free(g0);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The norm alone: its bits do not move when the gradient's sign pattern
 * does (squares), nor when run again; and they match the kernels' fixed
 * order of the partial rows (each row of Part summed, rows in order,
 * checked here in float64 against the written partials). */
START_TEST(norm_partials_fixed) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const acase c = {16 * 64 * 3 + 11, TK_BF16, TK_BF16, 1, 0.0f, 1, 64, 2, 0};
    abufs b;
    bufs_make(&b, &c);
    tk_grad_norm_params p = norm_params(ctx, &c, &b);
    tk_adamw_launch l[3];
    int n = tk_grad_norm_launches(&p, l);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
    float norm1 = (float)ref_tensor_get(&b.norm, 0);
    /* every partial row holds its 16 rows' sums of squares (the tail's: one) */
    int64_t rows = c.n / 64, parts = (rows + 15) / 16 + 1;
    ck_assert_int_eq((int64_t)p.workspace_bytes, parts * 64);
    const float *ws = b.ws.data;
    for (int64_t r = 0; r < parts; r++)
        for (int i = 0; i < 16; i++) {
            int64_t row = r < parts - 1 ? r * 16 + i : rows, lo = row * 64;
            double want = 0;
            if ((r < parts - 1 && row < rows) || (r == parts - 1 && i == 0))
                for (int64_t j = lo; j < lo + 64 && j < c.n; j++)
                    want += ref_tensor_get(&b.g, j) * ref_tensor_get(&b.g, j);
            ck_assert_msg(fabs(ws[r * 16 + i] - want) <= 1e-6 * want + 1e-30,
                          "partial %lld,%d: %g, want %g", (long long)r, i, (double)ws[r * 16 + i],
                          want);
        }
    uint16_t *g = b.g.data;
    for (int64_t j = 0; j < c.n; j += 3) g[j] ^= 0x8000; /* -g: the same squares */
    ref_tensor_fill_all(&b.ws, NAN);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
    float norm2 = (float)ref_tensor_get(&b.norm, 0);
    ck_assert_msg(!memcmp(&norm1, &norm2, 4), "%a then %a", (double)norm1, (double)norm2);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- on the GPU, through the entry points ------------------------------------
 * Device buffers, tk_grad_norm then tk_adamw on the default stream (the
 * norm read on the device: no host round trip), against float64 on the
 * host; the norm twice (the same bits). */
typedef struct gcase {
    int64_t n;
    tk_dtype gd, ld;
    int clip;
    float wd;
    int64_t t;
} gcase;

static const gcase gcases[] = {
    {124475904, TK_F32, TK_BF16, 1, 0.1f, 1000},      /* GPT-2 124M: 30389 rows and 2560 */
    {124475904, TK_BF16, TK_BF16, 2, 0.0f, 1},        /* bf16 gradients, clip inactive   */
    {1000003, TK_F32, TK_F16, 1, 0.1f, 1},            /* ragged: 244 rows and 579        */
    {4096 * 16 * 5, TK_BF16, TK_DT_NONE, 0, 0.1f, 2}, /* no tail, no copy, no clip     */
    {5, TK_BF16, TK_BF16, 1, 0.1f, 3},                /* the tail alone                  */
};
#define NGPU (int)(sizeof gcases / sizeof gcases[0])

typedef struct gbufs {
    float *w, *m, *v, *w1, *m1, *v1;
    void *g;
    uint16_t *l;
    void *dev[7]; /* w, m, v, g, l, norm (two), workspace */
} gbufs;

static double gval(const gcase *c, const void *g, int64_t i) {
    if (c->gd == TK_F32) return ((const float *)g)[i];
    uint16_t h = ((const uint16_t *)g)[i];
    return c->gd == TK_BF16 ? tk_bf16_to_f32(h) : tk_f16_to_f32(h);
}

static void gbufs_make(const gcase *c, gbufs *b) {
    size_t n = (size_t)c->n, gs = tk_dtype_size(c->gd);
    memset(b, 0, sizeof *b);
    b->w = malloc(n * 4), b->m = malloc(n * 4), b->v = malloc(n * 4), b->g = malloc(n * gs);
    b->w1 = malloc(n * 4), b->m1 = malloc(n * 4), b->v1 = malloc(n * 4), b->l = malloc(n * 2);
    ck_assert(b->w && b->m && b->v && b->g && b->w1 && b->m1 && b->v1 && b->l);
    for (size_t i = 0; i < n; i++) {
        b->w[i] = (float)ref_uniform();
        b->m[i] = c->t > 1 ? (float)(0.01 * ref_uniform()) : 0.0f;
        b->v[i] = c->t > 1 ? (float)(5e-4 * (ref_uniform() + 1)) : 0.0f;
        float g = (float)(0.05 * ref_uniform());
        if (c->gd == TK_F32)
            ((float *)b->g)[i] = g;
        else
            ((uint16_t *)b->g)[i] = c->gd == TK_BF16 ? tk_f32_to_bf16(g) : tk_f32_to_f16(g);
    }
}

static void *dev_of(tk_ctx *ctx, const void *host, size_t bytes) {
    void *d = NULL;
    ck_assert_msg(tk_gpu_alloc(ctx, bytes, &d) == TK_OK, "%s", tk_ctx_error(ctx));
    if (host)
        ck_assert_int_eq(tk_gpu_upload(ctx, d, host, bytes), TK_OK);
    else
        ck_assert_int_eq(tk_gpu_memset(ctx, d, 0xff, bytes), TK_OK); /* NaN */
    return d;
}

static void gbufs_free(tk_ctx *ctx, gbufs *b) {
    for (int i = 0; i < 7; i++)
        if (b->dev[i]) tk_gpu_free(ctx, b->dev[i]);
    free(b->w), free(b->m), free(b->v), free(b->g), free(b->w1), free(b->m1), free(b->v1);
    free(b->l);
}

/* The norm, the step, the norm again into norm[1]; the results back. */
static void gpu_step(tk_ctx *ctx, const gcase *c, gbufs *b, float max_norm, float norms[2]) {
    size_t n = (size_t)c->n;
    tk_grad_norm_params np = TK_GRAD_NORM_PARAMS_INIT;
    np.grad_dtype = c->gd, np.n = c->n;
    ck_assert_int_eq(tk_grad_norm_workspace(ctx, &np, &np.workspace_bytes), TK_OK);
    void **d = b->dev;
    d[0] = dev_of(ctx, b->w, n * 4), d[1] = dev_of(ctx, b->m, n * 4);
    d[2] = dev_of(ctx, b->v, n * 4), d[3] = dev_of(ctx, b->g, n * tk_dtype_size(c->gd));
    d[4] = dev_of(ctx, NULL, n * 2), d[5] = dev_of(ctx, NULL, 8);
    d[6] = dev_of(ctx, NULL, np.workspace_bytes);
    np.grad = d[3], np.norm = d[5], np.workspace = d[6];
    ck_assert_msg(tk_grad_norm(ctx, &np, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_adamw_params p = TK_ADAMW_PARAMS_INIT;
    p.grad_dtype = c->gd, p.lowp_dtype = c->ld, p.n = c->n;
    p.weight = d[0], p.m = d[1], p.v = d[2], p.grad = d[3], p.weight_lowp = c->ld ? d[4] : NULL;
    p.grad_norm = c->clip ? d[5] : NULL, p.max_norm = max_norm;
    p.lr = 1e-2f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-8f, p.weight_decay = c->wd;
    p.step = c->t;
    ck_assert_msg(tk_adamw(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    np.norm = (float *)d[5] + 1;
    ck_assert_msg(tk_grad_norm(ctx, &np, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_gpu_sync(ctx) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_download(ctx, b->w1, d[0], n * 4), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, b->m1, d[1], n * 4), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, b->v1, d[2], n * 4), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, b->l, d[4], n * 2), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, norms, d[5], 8), TK_OK);
}

/* The errors of W, m, v and the update (W and the update: werr_add's). */
static void gpu_errors(const gcase *c, const gbufs *b, double norm, float max_norm, double e[4],
                       int64_t *bad_copy) {
    werr we = {0};
    double num[2] = {0}, den[2] = {0}, b1 = 0.9f, b2 = 0.95f, t = (double)c->t;
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    double cl = c->clip ? fmin(1.0, (double)max_norm / (norm + 1e-6)) : 1.0;
    *bad_copy = 0;
    for (int64_t i = 0; i < c->n; i++) {
        double g = cl * gval(c, b->g, i);
        double m = b1 * b->m[i] + (1 - b1) * g, v = b2 * b->v[i] + (1 - b2) * g * g;
        double d = -(double)1e-2f *
                   ((m / bc1) / (sqrt(v / bc2) + (double)1e-8f) + (double)c->wd * b->w[i]);
        werr_add(&we, b->w[i], b->w1[i], b->w[i] + d);
        double out[2] = {b->m1[i], b->v1[i]}, ref[2] = {m, v};
        for (int j = 0; j < 2; j++) num[j] += (out[j] - ref[j]) * (out[j] - ref[j]);
        for (int j = 0; j < 2; j++) den[j] += ref[j] * ref[j];
        uint16_t want = c->ld == TK_F16 ? tk_f32_to_f16(b->w1[i]) : tk_f32_to_bf16(b->w1[i]);
        *bad_copy += c->ld ? b->l[i] != want : b->l[i] != 0xffff;
    }
    e[0] = werr_of(&we, 0), e[1] = sqrt(num[0] / den[0]), e[2] = sqrt(num[1] / den[1]);
    e[3] = werr_of(&we, 1);
}

START_TEST(gpu_entry_points) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const gcase *c = &gcases[_i];
    gbufs b;
    gbufs_make(c, &b);
    double norm = 0;
    for (int64_t i = 0; i < c->n; i++) norm += gval(c, b.g, i) * gval(c, b.g, i);
    norm = sqrt(norm);
    float max_norm = c->clip == 1 ? (float)(norm / 2) : c->clip == 2 ? (float)(2 * norm) : 0.0f;
    float norms[2];
    gpu_step(ctx, c, &b, max_norm, norms);
    double e[4];
    int64_t bad_copy;
    gpu_errors(c, &b, norm, max_norm, e, &bad_copy);
    double en = fabs(norms[0] - norm) / norm;
    printf("adamw gpu n %lld %s->%s clip %d wd %g t %lld: rel err norm %.1e W %.1e dW %.1e m %.1e "
           "v %.1e; copy %lld wrong; norm again %s\n",
           (long long)c->n, tk_dtype_name(c->gd), c->ld ? tk_dtype_name(c->ld) : "none", c->clip,
           (double)c->wd, (long long)c->t, en, e[0], e[3], e[1], e[2], (long long)bad_copy,
           memcmp(&norms[0], &norms[1], 4) ? "DIFFERS" : "the same bits");
    ck_assert_msg(en <= 1e-6 && !memcmp(&norms[0], &norms[1], 4), "norm %g", en);
    ck_assert_msg(e[0] <= 1e-6 && e[1] <= 1e-6 && e[2] <= 1e-6 && e[3] <= 2e-5, "W m v dW");
    ck_assert_int_eq(bad_copy, 0);
    gbufs_free(ctx, &b);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("adamw");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_norm_params);
    tcase_add_test(tc, bad_step_params);
    tcase_add_test(tc, launch_shapes);
    tc = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, norm_partials_fixed);
    tc = tu_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, gpu_entry_points, 0, NGPU);
    return run_suite(s);
}
