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

#include "kernels/norm_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

static const float EPS = 1e-5f;

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
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
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_norm_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    TU_EXPECT_BUILD_ARGS(tk_norm_build, ctx, &ok);
    tk_ctx_destroy(ctx);
}
END_TEST

static tk_kernel *build(tk_ctx *ctx, const tk_norm_config *cfg) {
    tk_kernel *k = NULL;
    ck_assert_msg(tk_norm_build(ctx, cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* Runs launch l of the run API on the interpreter. */
static void interp(tk_ctx *ctx, const tk_norm_launch *l) {
    tk_kernel *k = build(ctx, &l->cfg);
    ck_assert_msg(tk_interp_run(k, l->n, l->args) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* ---- the run API's checks (no launch: they fail before any) ---------- */
START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char x[64], y[64]; /* never read: every call fails its checks first */
    float st[4];
    tk_norm_params ok = TK_NORM_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.kind = TK_NORM_LAYER, ok.eps = 1e-5f, ok.rows = 2, ok.cols = 8;
    ok.x = x, ok.y = y, ok.mean = st, ok.rstd = st + 2;
    static const char *fmsg[] = {"dtype is f32",
                                 "kind is 5",
                                 "eps nan",
                                 "rows x cols is 2 x 0",
                                 "x_stride is 4",
                                 "h is NULL",
                                 "TK_NORM_RMS, which has no bias",
                                 "rstd is NULL and mean",
                                 "y is NULL",
                                 "struct_size"};
    for (int i = 0; i < (int)(sizeof fmsg / sizeof fmsg[0]); i++) {
        tk_norm_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_F32; break;
        case 1: p.kind = 5; break;
        case 2: p.eps = NAN; break;
        case 3: p.cols = 0; break;
        case 4: p.x_stride = 4; break;
        case 5: p.residual = x; break;
        case 6: p.kind = TK_NORM_RMS, p.bias = x; break;
        case 7: p.rstd = NULL; break;
        case 8: p.y = NULL; break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_norm_forward(ctx, &p, NULL), TK_ERR_INVALID_ARG, fmsg[i]);
    }
    ck_assert_int_eq(tk_norm_forward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_norm_forward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);

    tk_norm_bwd_params bok = TK_NORM_BWD_PARAMS_INIT;
    bok.dtype = TK_BF16, bok.kind = TK_NORM_LAYER, bok.rows = 2, bok.cols = 8;
    bok.h = x, bok.dy = y, bok.dx = y, bok.mean = st, bok.rstd = st + 2;
    size_t bytes = 1;
    ck_assert_int_eq(tk_norm_backward_workspace(ctx, &bok, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 0); /* no weight, no bias: no partials */
    static const char *bmsg[] = {"dweight is set and weight is NULL",
                                 "grad_dtype is i32",
                                 "mean is NULL",
                                 "workspace_bytes is 0",
                                 "workspace is NULL",
                                 "dbias is set with TK_NORM_RMS",
                                 "dh_stride is 3"};
    for (int i = 0; i < (int)(sizeof bmsg / sizeof bmsg[0]); i++) {
        tk_norm_bwd_params p = bok;
        switch (i) {
        case 0: p.dweight = st; break;
        case 1: p.grad_dtype = TK_I32; break;
        case 2: p.mean = NULL; break;
        case 3: p.weight = x, p.dweight = st, p.workspace = st; break;
        case 4: p.dbias = st, p.workspace_bytes = 1 << 20; break;
        case 5: p.kind = TK_NORM_RMS, p.dbias = st; break;
        default: p.dh = x, p.dh_stride = 3; break;
        }
        tu_expect_status(ctx, tk_norm_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG, bmsg[i]);
    }
    ck_assert_int_eq(tk_norm_backward_workspace(ctx, &bok, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* No rows: the forward launches nothing; the backward only the reductions,
 * which write zero gradients. */
START_TEST(no_rows) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    float dw[40], db[40], st[1];
    for (int i = 0; i < 40; i++) dw[i] = db[i] = NAN;
    tk_norm_params fp = TK_NORM_PARAMS_INIT;
    fp.dtype = TK_F16, fp.kind = TK_NORM_LAYER, fp.cols = 40, fp.x = st, fp.y = st;
    tk_norm_launch l[3];
    ck_assert_int_eq(tk_norm_fwd_launches(&fp, l), 0);
    tk_norm_bwd_params p = TK_NORM_BWD_PARAMS_INIT;
    p.dtype = TK_F16, p.kind = TK_NORM_LAYER, p.cols = 40;
    p.h = p.dy = p.weight = st, p.dx = st, p.mean = p.rstd = st;
    p.dweight = dw, p.dbias = db;
    ck_assert_int_eq(tk_norm_backward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
    ck_assert_uint_eq(p.workspace_bytes, 0);
    ck_assert_int_eq(tk_norm_bwd_launches(&p, l), 2);
    for (int i = 0; i < 2; i++) interp(ctx, &l[i]);
    for (int i = 0; i < 40; i++) ck_assert(dw[i] == 0.0f && db[i] == 0.0f);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- one case: tensors, the float64 reference ---------------------------- */
typedef struct ncase {
    int kind, residual, weight, bias;
    tk_dtype dt;
    int64_t R, C;
    tk_norm_config shape; /* warps, cols; 0: the run API's choice */
} ncase;

typedef struct nbufs {
    ref_tensor x, res, w, b, h, y, mean, rstd; /* forward */
    ref_tensor dy, dh, dx, dw, db, ws;         /* backward (ws: the partials) */
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
    b->ws = vec(TK_F32, 2 * ((b->P * C + 63) / 64 * 64));
    b->dw = vec(TK_F32, C), b->db = vec(TK_F32, C);
    ref_tensor_random(&b->x, 2.0, 4.0);
    ref_tensor_random(&b->res, -1.0, 1.0);
    ref_tensor_random(&b->w, 0.5, 1.5);
    ref_tensor_random(&b->b, -1.0, 1.0);
    ref_tensor_random(&b->dy, -1.0, 1.0);
    ref_tensor_random(&b->dh, -1.0, 1.0);
    ref_tensor *outs[] = {&b->h, &b->y, &b->mean, &b->rstd, &b->dx, &b->ws, &b->dw, &b->db};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ref_tensor_fill_all(outs[i], NAN);
}

static void bufs_free(nbufs *b) {
    ref_tensor *all[] = {&b->x,    &b->res, &b->w,  &b->b,  &b->h,  &b->y,  &b->mean,
                         &b->rstd, &b->dy,  &b->dh, &b->dx, &b->ws, &b->dw, &b->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* The run API's parameters over the host buffers (tk/tk_run.h): the tests
 * run the launches tk_norm_forward / tk_norm_backward make. */
static tk_norm_params fwd_params(const ncase *c, nbufs *b) {
    tk_norm_params p = TK_NORM_PARAMS_INIT;
    p.dtype = c->dt, p.kind = c->kind, p.eps = EPS, p.rows = c->R, p.cols = c->C;
    p.x = b->x.data, p.y = b->y.data, p.rstd = b->rstd.data;
    p.mean = c->kind == TK_NORM_LAYER ? b->mean.data : NULL;
    if (c->residual) p.residual = b->res.data, p.h = b->h.data;
    if (c->weight) p.weight = b->w.data;
    if (c->bias) p.bias = b->b.data;
    if (c->shape.warps) p.config = &c->shape;
    return p;
}

static tk_norm_bwd_params bwd_params(tk_ctx *ctx, const ncase *c, nbufs *b) {
    tk_norm_bwd_params p = TK_NORM_BWD_PARAMS_INIT;
    p.dtype = c->dt, p.kind = c->kind, p.rows = c->R, p.cols = c->C;
    p.h = c->residual ? b->h.data : b->x.data, p.dy = b->dy.data, p.dx = b->dx.data;
    p.rstd = b->rstd.data, p.mean = c->kind == TK_NORM_LAYER ? b->mean.data : NULL;
    if (c->residual) p.dh = b->dh.data;
    if (c->weight) p.weight = b->w.data, p.dweight = b->dw.data;
    if (c->bias) p.dbias = b->db.data;
    if (c->shape.warps) p.config = &c->shape;
    ck_assert_msg(tk_norm_backward_workspace(ctx, &p, &p.workspace_bytes) == TK_OK, "%s",
                  tk_ctx_error(ctx));
    /* the partials are the workspace: dWp then dBp, each 256-byte aligned */
    size_t part = ((size_t)(b->P * c->C) * 4 + 255) / 256 * 256;
    ck_assert_uint_eq(p.workspace_bytes, (size_t)(c->weight + c->bias) * part);
    ck_assert_int_ge(b->ws.elems * 4, (int64_t)p.workspace_bytes);
    p.workspace = b->ws.data;
    return p;
}

/* A launch's arguments as host tensors (th_compare uploads them; a partial
 * is a [P, C] view of the workspace) and its scalars. */
static void launch_refs(const tk_norm_launch *l, nbufs *b, ref_tensor *t, tk_arg *s) {
    ref_tensor *all[] = {&b->x,    &b->res, &b->w,  &b->b,  &b->h,  &b->y, &b->mean,
                         &b->rstd, &b->dy,  &b->dh, &b->dx, &b->dw, &b->db};
    for (int i = 0; i < l->n; i++) {
        const tk_arg *a = &l->args[i];
        memset(&t[i], 0, sizeof t[i]);
        s[i] = *a;
        if (a->kind != TK_KIND_GVIEW) continue;
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            if (all[j]->data == a->data) t[i] = *all[j];
        if (!t[i].rank) {
            t[i] = b->ws;
            t[i].rank = 2, t[i].data = a->data;
            t[i].dims[0] = a->dims[0], t[i].dims[1] = a->dims[1];
            t[i].strides[0] = a->strides[0], t[i].strides[1] = 1;
            t[i].elems = a->dims[0] * a->strides[0];
        }
    }
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

/* The shapes: the run API's, and rounds narrower than the row (read twice,
 * the last round ragged) down to one warp. */
#define SHAPE(w, c)                                                                                \
    { .warps = w, .cols = c }
static const ncase cases[] = {
    {TK_NORM_LAYER, 0, 1, 1, TK_BF16, 17, 33, SHAPE(0, 0)},
    {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 100, 257, SHAPE(2, 64)},
    {TK_NORM_LAYER, 0, 0, 0, TK_F16, 1, 1, SHAPE(0, 0)},
    {TK_NORM_LAYER, 1, 0, 0, TK_BF16, 64, 100, SHAPE(1, 32)},
    {TK_NORM_RMS, 0, 1, 0, TK_BF16, 33, 64, SHAPE(0, 0)},
    {TK_NORM_RMS, 1, 1, 0, TK_F16, 130, 1000, SHAPE(4, 256)},
    {TK_NORM_RMS, 0, 0, 0, TK_BF16, 5, 31, SHAPE(16, 512)},
    {TK_NORM_LAYER, 1, 1, 0, TK_F16, 3, 2049, SHAPE(0, 0)},
    {TK_NORM_RMS, 1, 0, 0, TK_BF16, 70, 96, SHAPE(2, 128)},
    {TK_NORM_LAYER, 0, 1, 0, TK_BF16, 16, 16, SHAPE(0, 0)},
    {TK_NORM_RMS, 1, 1, 0, TK_BF16, 2, 16384, SHAPE(0, 0)},
    {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 3, 16384, SHAPE(16, 1024)},
    {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 19, 700, SHAPE(8, 1024)},
    /* 282 partial rows: the reduction's warps take 3 trips, the last ragged */
    {TK_NORM_LAYER, 1, 1, 1, TK_BF16, 4500, 40, SHAPE(1, 32)},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void label(const ncase *c, char *buf, size_t n) {
    snprintf(buf, n, "%s R%lld C%lld %s%s%s%s w%d c%d", c->kind ? "rms  " : "layer",
             (long long)c->R, (long long)c->C, tk_dtype_name(c->dt), c->residual ? " res" : "",
             c->weight ? " w" : "", c->bias ? " b" : "", c->shape.warps, c->shape.cols);
}

/* Forward, then the backward on the forward's outputs, on the interpreter. */
START_TEST(interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const ncase *c = &cases[_i];
    nbufs b;
    bufs_make(&b, c);
    tk_norm_params fp = fwd_params(c, &b);
    tk_norm_launch l[3];
    ck_assert_int_eq(tk_norm_fwd_launches(&fp, l), 1);
    interp(ctx, &l[0]);
    tk_norm_bwd_params bp = bwd_params(ctx, c, &b);
    int n = tk_norm_bwd_launches(&bp, l);
    ck_assert_int_eq(n, 1 + c->weight + c->bias);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);

    nref o;
    reference(c, &b, &o);
    double ey = ref_tensor_rel_err(&b.y, o.y), er = ref_tensor_rel_err(&b.rstd, o.rstd),
           edx = ref_tensor_rel_err(&b.dx, o.dx);
    double eh = c->residual ? ref_tensor_rel_err(&b.h, o.h) : 0, em = 0, ew = 0, eb = 0;
    if (c->kind == TK_NORM_LAYER) em = ref_tensor_rel_err(&b.mean, o.mean);
    if (c->weight) ew = ref_tensor_rel_err(&b.dw, o.dw);
    if (c->bias) eb = ref_tensor_rel_err(&b.db, o.db);
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
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Each launch on the GPU against the interpreter, same inputs. */
START_TEST(gpu_against_interp) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const ncase *c = &cases[_i];
    nbufs b;
    bufs_make(&b, c);
    ref_tensor t[TK_NORM_MAX_ARGS];
    tk_arg s[TK_NORM_MAX_ARGS];
    tk_norm_params fp = fwd_params(c, &b);
    tk_norm_launch l[3];
    double err[4] = {0}; /* forward, backward, the reductions */
    ck_assert_int_eq(tk_norm_fwd_launches(&fp, l), 1);
    launch_refs(&l[0], &b, t, s);
    tk_kernel *k = build(ctx, &l[0].cfg);
    ck_assert_msg(th_compare(ctx, k, l[0].n, t, s, &err[0]) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
    interp(ctx, &l[0]); /* h and the statistics for the backward */
    tk_norm_bwd_params bp = bwd_params(ctx, c, &b);
    int n = tk_norm_bwd_launches(&bp, l);
    for (int i = 0; i < n; i++) {
        if (i) ref_tensor_random(&b.ws, -1.0, 1.0); /* partials from a GPU run are not kept */
        launch_refs(&l[i], &b, t, s);
        k = build(ctx, &l[i].cfg);
        ck_assert_msg(th_compare(ctx, k, l[i].n, t, s, &err[i + 1]) == TK_OK, "%s",
                      tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    char name[96];
    label(c, name, sizeof name);
    printf("norm gpu %s: rel err against the interpreter fwd %.2e bwd %.2e reduce %.2e %.2e\n",
           name, err[0], err[1], err[2], err[3]);
    ck_assert_msg(err[0] <= 1e-2 && err[1] <= 1e-2 && err[2] <= 1e-5 && err[3] <= 1e-5, "%s", name);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("norm");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_params);
    tcase_add_test(tc, no_rows);
    tc = tu_tcase(s, "interp", 300);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tc = tu_tcase(s, "gpu", 300);
    tcase_add_loop_test(tc, gpu_against_interp, 0, NCASES);
    return run_suite(s);
}
