/* Softmax cross-entropy (tk_xent_build, kernels/xent.c; tk_cross_entropy,
 * kernels/xent_run.c): the config and parameter checks; on the
 * interpreter, the launches tk_cross_entropy makes against float64 at
 * ragged shapes, both layouts, every option, outputs poisoned with NaN; on
 * the GPU (skipped, with a line, without one), tk_cross_entropy itself on
 * device buffers at a trainer's sizes against float64, and run twice:
 * bit-identical. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/xent_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_xent_config ok = {.dtype = TK_BF16, .backward = 1};
    static const struct {
        tk_xent_config c;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_I32}, "dtype is i32"},
        {{.dtype = TK_BF16, .part = 2}, "part is 2"},
        {{.dtype = TK_BF16, .backward = 2}, "backward is 2"},
        {{.dtype = TK_BF16, .lse = -1}, "lse is -1"},
        {{.dtype = TK_BF16, .mean = 3}, "mean is 3"},
        {{.dtype = TK_BF16, .split = 2}, "split is 2"},
        {{.dtype = TK_BF16, .per_row_scale = 1}, "per_row_scale is 1 with backward 0"},
        {{.dtype = TK_BF16, .warps = 3}, "warps is 3"},
        {{.dtype = TK_BF16, .warps = 2, .cols = 96}, "cols is 96"},
        {{.dtype = TK_BF16, .warps = 1, .cols = 512}, "cols is 512"},
        {{.dtype = TK_BF16, .split = 1, .warps = 2, .cols = 64}, "at least 128"},
        {{.part = TK_XENT_MEAN, .warps = 32}, "warps is 32"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_xent_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    TU_EXPECT_BUILD_ARGS(tk_xent_build, ctx, &ok);
    tk_xent_config mean = {.part = TK_XENT_MEAN}; /* the mean ignores the dtype */
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_xent_build(ctx, &mean, &k), TK_OK);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the run API's checks (no launch: they fail before any) ---------- */
START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static float buf[64]; /* never read: every call fails its checks first */
    int32_t t[4];
    tk_xent_params ok = TK_XENT_PARAMS_INIT;
    ck_assert_int_eq(ok.ignore_index, -1);
    ok.dtype = TK_BF16, ok.rows = 2, ok.vocab = 8, ok.logits = buf, ok.targets = t;
    ok.loss = buf, ok.dlogits = buf + 8, ok.dloss_scale = 0.5f;
    static const char *msg[] = {"dtype is i32",
                                "rows is -1",
                                "rows is 2147483648",
                                "vocab is 0",
                                "vocab is 16777217",
                                "logits is NULL",
                                "logits is not 2-byte aligned",
                                "logits_stride is 7",
                                "logits_stride is 4611686018427387904",
                                "targets is NULL",
                                "targets is not 4-byte aligned",
                                "loss is NULL",
                                "lse is not 4-byte aligned",
                                "dlogits_stride is 3",
                                "dlogits is logits (in place) with dlogits_stride 8",
                                "dloss_scale nan is not finite",
                                "dloss_scale inf is not finite",
                                "dloss is set and dlogits is NULL",
                                "dloss is not 4-byte aligned",
                                "workspace is NULL",
                                "workspace_bytes is 8; loss_mean over 2 rows needs 512",
                                "loss_mean is not 4-byte aligned",
                                "struct_size"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_xent_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_I32; break;
        case 1: p.rows = -1; break;
        case 2: p.rows = (int64_t)1 << 31; break;
        case 3: p.vocab = 0; break;
        case 4: p.vocab = ((int64_t)1 << 24) + 1; break;
        case 5: p.logits = NULL; break;
        case 6: p.logits = (char *)buf + 1; break;
        case 7: p.logits_stride = 7; break;
        case 8: p.logits_stride = (int64_t)1 << 62; break;
        case 9: p.targets = NULL; break;
        case 10: p.targets = (const int32_t *)((char *)t + 2); break;
        case 11: p.loss = NULL; break;
        case 12: p.lse = (float *)((char *)buf + 2); break;
        case 13: p.dlogits_stride = 3; break;
        case 14: p.dlogits = buf, p.logits_stride = 16; break;
        case 15: p.dloss_scale = NAN; break;
        case 16: p.dloss_scale = INFINITY; break;
        case 17: p.dlogits = NULL, p.dloss = buf; break;
        case 18: p.dloss = (const float *)((char *)buf + 1); break;
        case 19: p.loss_mean = buf; break;
        case 20: p.loss_mean = buf, p.workspace = buf, p.workspace_bytes = 8; break;
        case 21: p.loss_mean = (float *)((char *)buf + 2); break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_cross_entropy(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_cross_entropy(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_cross_entropy(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    size_t bytes = 1;
    ck_assert_int_eq(tk_cross_entropy_workspace(ctx, &ok, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 0); /* no loss_mean: none */
    ok.loss_mean = buf, ok.rows = 100;
    ck_assert_int_eq(tk_cross_entropy_workspace(ctx, &ok, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 1024); /* two partials of 100 floats, in 256-byte units */
    ck_assert_int_eq(tk_cross_entropy_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ok.vocab = 0;
    ck_assert_int_eq(tk_cross_entropy_workspace(ctx, &ok, &bytes), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

static tk_kernel *build(tk_ctx *ctx, const tk_xent_config *cfg) {
    tk_kernel *k = NULL;
    ck_assert_msg(tk_xent_build(ctx, cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* Runs launch l of the run API on the interpreter. */
static void interp(tk_ctx *ctx, const tk_xent_launch *l) {
    tk_kernel *k = build(ctx, &l->cfg);
    ck_assert_msg(tk_interp_run(k, l->n, l->args) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* No rows: only the mean runs, over nothing: NaN, as torch's. */
START_TEST(no_rows) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    float x[1], mean = 0.0f;
    int32_t t[1];
    tk_xent_params p = TK_XENT_PARAMS_INIT;
    p.dtype = TK_F32, p.vocab = 40, p.logits = x, p.targets = t, p.loss = x, p.loss_mean = &mean;
    tk_xent_launch l[2];
    ck_assert_int_eq(tk_xent_launches(&p, l), 1);
    interp(ctx, &l[0]);
    ck_assert(isnan(mean));
    p.loss_mean = NULL;
    ck_assert_int_eq(tk_xent_launches(&p, l), 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- one problem: tensors, the float64 reference -------------------------- */
typedef struct xcase {
    tk_dtype dt;
    int64_t N, V, pad; /* pad: row pitch V + pad */
    int bwd, rowscale, lse, mean, inplace, extreme;
    int shaped;           /* 1: `shape` is the call's config */
    tk_xent_config shape; /* split, warps, cols */
} xcase;

typedef struct xprob {
    xcase c;
    ref_tensor x, dx, loss, lse, ws, mean, dloss; /* dx: x itself in place */
    int32_t *t;
    void *x0, *dx0; /* X as it was (in place, the call overwrites it), dX poisoned */
    float scale;
} xprob;

static ref_tensor vec(tk_dtype dt, int64_t n) { return ref_tensor_new(dt, 1, &n); }

static ref_tensor mat(const xcase *c) {
    int64_t d[2] = {c->N, c->V};
    return ref_tensor_new_layout(c->dt, 2, d, NULL, c->pad);
}

/* Logits in [-4, 4) (extreme: ±1e4; 16-bit ones also two a row at ±1e30
 * in bf16, ±6e4 in f16, away from the target); every seventh row's target ignored, row 0's 0, row 1's
 * V-1; outputs NaN. */
static void fill_x(xprob *p) {
    const xcase *c = &p->c;
    double r = c->extreme ? 1e4 : 4.0;
    ref_tensor_random(&p->x, -r, r);
    for (int64_t i = 0; i < c->N; i++) {
        int64_t t = ref_randint(0, c->V - 1);
        t = i == 0 ? 0 : i == 1 ? c->V - 1 : t;
        p->t[i] = i % 7 == 3 ? -1 : (int32_t)t;
        if (!c->extreme || c->dt == TK_F32 || c->V < 3) continue;
        double big = c->dt == TK_BF16 ? 1e30 : 6e4; /* f16 ends at 65504 */
        for (int j = 0; j < 2; j++) {
            int64_t col = (t + 1 + j) % c->V;
            ref_tensor_set(&p->x, i * c->V + col, j ? -big : big);
        }
    }
}

static void prob_make(xprob *p, const xcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->x = mat(c);
    p->dx = c->inplace ? p->x : mat(c);
    p->loss = vec(TK_F32, c->N), p->lse = vec(TK_F32, c->N), p->dloss = vec(TK_F32, c->N);
    p->ws = vec(TK_F32, c->N > 0 ? (c->N + 63) / 64 * 64 * 2 : 1), p->mean = vec(TK_F32, 1);
    p->t = malloc((size_t)(c->N > 0 ? c->N : 1) * sizeof(int32_t));
    fill_x(p);
    ref_tensor_random(&p->dloss, -2.0, 2.0);
    p->scale = c->N > 0 ? 1.0f / (float)c->N : 1.0f;
    ref_tensor *outs[] = {&p->loss, &p->lse, &p->ws, &p->mean, &p->dx};
    for (int i = 0; i < (c->inplace ? 4 : 5); i++) ref_tensor_fill_all(outs[i], NAN);
    p->x0 = ref_tensor_snapshot(&p->x);
    p->dx0 = ref_tensor_snapshot(&p->dx);
}

static void prob_free(xprob *p) {
    ref_tensor *all[] = {&p->x, &p->loss, &p->lse, &p->ws, &p->mean, &p->dloss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
    if (!p->c.inplace) ref_tensor_free(&p->dx);
    free(p->t), free(p->x0), free(p->dx0);
}

/* tk_cross_entropy's parameters over p's buffers, or over device copies
 * (dev: x, dx, loss, lse, ws, mean, dloss, t; NULL: the host's). */
static tk_xent_params params_of(const xprob *p, void *const *dev) {
    const xcase *c = &p->c;
    void *h[8] = {p->x.data,  p->dx.data,   p->loss.data,  p->lse.data,
                  p->ws.data, p->mean.data, p->dloss.data, p->t};
    void *const *b = dev ? dev : h;
    tk_xent_params q = TK_XENT_PARAMS_INIT;
    q.dtype = c->dt, q.rows = c->N, q.vocab = c->V;
    q.logits = b[0], q.targets = b[7], q.loss = b[2];
    q.logits_stride = q.dlogits_stride = c->V + c->pad;
    if (c->bwd) q.dlogits = c->inplace ? b[0] : b[1];
    if (c->bwd && c->rowscale) q.dloss = b[6];
    q.dloss_scale = p->scale;
    if (c->lse) q.lse = b[3];
    if (c->mean) q.loss_mean = b[5], q.workspace = b[4], q.workspace_bytes = 4 * p->ws.elems;
    if (c->shaped) q.config = &p->c.shape;
    return q;
}

/* Sums of squares for ‖out - ref‖ / ‖ref‖ (err[0] num, err[1] den), any
 * NaN or infinity in out counted apart. */
typedef struct acc {
    double num, den;
    int64_t bad;
} acc;

static void acc_add(acc *a, double out, double ref) {
    if (!isfinite(out)) {
        a->bad++;
        return;
    }
    a->num += (out - ref) * (out - ref), a->den += ref * ref;
}

static double acc_err(const acc *a) {
    if (a->bad) return INFINITY;
    return a->den > 0 ? sqrt(a->num / a->den) : sqrt(a->num);
}

/* Float64 per row from the inputs as they were, against the outputs:
 * e[0] loss, e[1] lse, e[2] dX, e[3] the mean. */
static void check_against_f64(const xprob *p, double e[4]) {
    const xcase *c = &p->c;
    ref_tensor x0 = p->x;
    x0.data = p->x0;
    double *row = malloc((size_t)c->V * sizeof(double));
    acc a[3] = {{0}};
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < c->N; i++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c->V; j++) {
            row[j] = ref_tensor_get(&x0, i * c->V + j);
            m = row[j] > m ? row[j] : m;
        }
        for (int64_t j = 0; j < c->V; j++) s += exp(row[j] - m);
        double lse = m + log(s), t = p->t[i], ign = t < 0;
        double loss = ign ? 0 : lse - row[p->t[i]];
        double sc = ign ? 0 : c->rowscale ? ref_tensor_get(&p->dloss, i) : p->scale;
        acc_add(&a[0], ref_tensor_get(&p->loss, i), loss);
        if (c->lse) acc_add(&a[1], ref_tensor_get(&p->lse, i), lse);
        sum += loss, cnt += !ign;
        for (int64_t j = 0; c->bwd && j < c->V; j++) {
            double g = (exp(row[j] - lse) - (j == t)) * sc;
            acc_add(&a[2], ref_tensor_get(&p->dx, i * c->V + j), g);
        }
    }
    free(row);
    for (int i = 0; i < 3; i++) e[i] = acc_err(&a[i]);
    /* the mean: relative, or absolute below 1 (V 1: every loss is 0) */
    double mean = ((float *)p->mean.data)[0], want = sum / (double)cnt;
    e[3] = !c->mean ? 0 : !isfinite(mean) ? INFINITY : fabs(mean - want) / fmax(fabs(want), 1.0);
}

static double tolerance(tk_dtype dt) { return dt == TK_BF16 ? 1e-2 : dt == TK_F16 ? 3e-3 : 1e-5; }

/* The case and the row kernel's shape the call takes. */
static void label(const xprob *p, char *buf, size_t n) {
    const xcase *c = &p->c;
    tk_xent_params q = params_of(p, NULL);
    tk_xent_config k = tk_xent_rows_config(&q);
    snprintf(buf, n, "%s N%lld V%lld%s%s%s%s%s%s pad%lld: split%d w%d c%d%s", tk_dtype_name(c->dt),
             (long long)c->N, (long long)c->V, c->bwd ? " bwd" : " fwd",
             c->rowscale ? " rowscale" : "", c->lse ? " lse" : "", c->mean ? " mean" : "",
             c->inplace ? " inplace" : "", c->extreme ? " extreme" : "", (long long)c->pad, k.split,
             k.warps, k.cols, c->shaped ? "" : " (default)");
}

/* Every check of a finished problem; where: "interp" or "gpu". */
static void prob_check(const xprob *p, const char *where) {
    const xcase *c = &p->c;
    double e[4], tol = tolerance(c->dt);
    check_against_f64(p, e);
    char name[160];
    label(p, name, sizeof name);
    printf("xent %s %s: rel err loss %.2e lse %.2e dX %.2e mean %.2e\n", where, name, e[0], e[1],
           e[2], e[3]);
    ck_assert_msg(e[0] <= tol && e[1] <= tol && e[2] <= tol, "%s: loss %g lse %g dX %g", name, e[0],
                  e[1], e[2]);
    ck_assert_msg(e[3] <= 1e-5, "%s: mean %g", name, e[3]);
    if (c->pad) /* the pitch's gaps: zeros in X, NaN in dX */
        ck_assert_msg(ref_tensor_stray_writes(&p->dx, p->dx0) == 0, "%s: dX's gaps written", name);
    if (!c->bwd && !c->inplace)
        ck_assert_msg(!memcmp(p->x.data, p->x0, tu_bytes_of(&p->x)), "%s: X written", name);
}

#define SHAPE(s, w, c)                                                                             \
    1, { .split = s, .warps = w, .cols = c }
#define DEFAULT                                                                                    \
    0, { 0 }
/* dt, N, V, pad, bwd, rowscale, lse, mean, inplace, extreme, shape */
static const xcase cases[] = {
    {TK_BF16, 37, 256, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_F16, 3, 7, 0, 1, 1, 0, 0, 0, 0, DEFAULT},
    {TK_F32, 37, 1, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 37, 1000, 24, 1, 0, 0, 1, 1, 0, DEFAULT},
    {TK_F32, 3, 1000, 0, 1, 1, 1, 0, 0, 1, DEFAULT},
    {TK_BF16, 1, 50257, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_F16, 2, 50257, 47, 1, 1, 0, 0, 1, 0, DEFAULT},
    {TK_BF16, 37, 4099, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_F32, 3, 4099, 5, 0, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 37, 4099, 0, 1, 1, 0, 0, 0, 0, SHAPE(0, 4, 256)},
    {TK_BF16, 3, 1000, 0, 1, 0, 1, 0, 0, 1, SHAPE(1, 4, 128)},
    {TK_F16, 37, 256, 0, 0, 0, 1, 0, 0, 0, DEFAULT},
    {TK_BF16, 37, 7, 0, 1, 0, 1, 1, 1, 0, SHAPE(1, 8, 0)},
    {TK_F32, 37, 256, 0, 1, 1, 0, 1, 1, 0, SHAPE(0, 2, 192)},
    {TK_BF16, 1, 65536, 0, 1, 0, 1, 0, 0, 0, DEFAULT},
    {TK_F16, 37, 1000, 3, 1, 0, 0, 0, 0, 1, SHAPE(0, 1, 256)},
    {TK_BF16, 3, 4099, 0, 1, 1, 1, 1, 1, 0, SHAPE(1, 16, 512)},
    {TK_F32, 1, 50257, 0, 1, 0, 1, 0, 1, 1, DEFAULT},
    {TK_BF16, 37, 300, 8, 1, 1, 1, 1, 0, 1, SHAPE(1, 2, 256)},
    /* out of place, rows of V·size not a multiple of 16 at a pitch of 16-byte
     * multiples, NaN gaps: the GPU's copy engine would store dX in whole
     * 16-byte chunks, so its launch encodes no map for dX (jit/launch.c) */
    {TK_BF16, 5, 1001, 7, 1, 0, 1, 0, 0, 0, SHAPE(0, 8, 256)},
    {TK_BF16, 3, 50257, 47, 1, 0, 1, 0, 0, 0, SHAPE(0, 8, 256)},
    {TK_F16, 19, 1001, 7, 1, 1, 0, 0, 0, 0, DEFAULT},
    {TK_F32, 19, 1001, 3, 1, 0, 0, 1, 0, 0, DEFAULT},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* The launches tk_cross_entropy makes, on the interpreter. */
START_TEST(interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    xprob p;
    prob_make(&p, &cases[_i]);
    tk_xent_params q = params_of(&p, NULL);
    tk_xent_launch l[2];
    int n = tk_xent_launches(&q, l);
    ck_assert_int_eq(n, 1 + p.c.mean);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
    prob_check(&p, "interp");
    prob_free(&p);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Targets outside 0..V-1: NaN loss and gradient on that row only;
 * ignore_index -100, so -1 is one of them; the mean NaN with them. */
START_TEST(bad_targets) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    xcase c = {TK_BF16, 5, 300, 0, 1, 0, 1, 1, 0, 0, SHAPE(_i, 8, 256)};
    xprob p;
    prob_make(&p, &c);
    int32_t t[5] = {-100, -1, 300, 0, 299};
    memcpy(p.t, t, sizeof t);
    tk_xent_params q = params_of(&p, NULL);
    q.ignore_index = -100;
    tk_xent_launch l[2];
    int n = tk_xent_launches(&q, l);
    for (int i = 0; i < n; i++) interp(ctx, &l[i]);
    float *loss = p.loss.data;
    ck_assert(loss[0] == 0.0f && isnan(loss[1]) && isnan(loss[2]));
    ck_assert(isfinite(loss[3]) && isfinite(loss[4]) && loss[3] > 0 && loss[4] > 0);
    ck_assert(isnan(((float *)p.mean.data)[0]));
    for (int64_t j = 0; j < c.V; j++) {
        ck_assert(ref_tensor_get(&p.dx, j) == 0.0);
        ck_assert(isnan(ref_tensor_get(&p.dx, c.V + j)) &&
                  isnan(ref_tensor_get(&p.dx, 2 * c.V + j)));
        ck_assert(isfinite(ref_tensor_get(&p.dx, 3 * c.V + j)));
    }
    printf("xent interp bad targets split %d: ignored 0, out of range NaN, mean NaN\n", _i);
    prob_free(&p);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- on a GPU: tk_cross_entropy on device buffers ------------------------- */
static const xcase gpu_cases[] = {
    {TK_BF16, 8192, 256, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 16384, 256, 0, 1, 0, 0, 0, 1, 0, DEFAULT},
    {TK_BF16, 4096, 50257, 0, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 4096, 50257, 47, 1, 0, 0, 0, 1, 0, DEFAULT},
    {TK_F16, 1000, 65536, 0, 1, 1, 1, 0, 0, 0, DEFAULT},
    {TK_F32, 1000, 65536, 0, 1, 0, 1, 1, 0, 1, DEFAULT},
    {TK_BF16, 8192, 50304, 0, 0, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 777, 4099, 0, 1, 1, 1, 1, 0, 1, DEFAULT},
    {TK_F32, 1023, 1000, 3, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_BF16, 4096, 50257, 47, 1, 0, 1, 0, 0, 0, SHAPE(0, 8, 256)},
    /* the copy engine clips its stores in whole 16-byte chunks of a row: rows
     * of V·size not a multiple of 16 at a pitch it takes, NaN gaps (dX gets no
     * map, jit/launch.c) */
    {TK_F32, 1023, 1001, 3, 1, 0, 1, 1, 0, 0, DEFAULT},
    {TK_F16, 777, 4099, 5, 1, 1, 1, 0, 0, 0, SHAPE(0, 4, 256)},
};
#define NGPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

/* The outputs (x too: in place it is one) back from the device. */
static void download(tk_ctx *ctx, xprob *p, void *const dev[8]) {
    ref_tensor *t[6] = {&p->x, &p->dx, &p->loss, &p->lse, &p->ws, &p->mean};
    for (int i = 0; i < 6; i++)
        if (!(i == 1 && p->c.inplace)) tu_dev_get(ctx, t[i], dev[i]);
}

/* Runs p's call on the device (inputs as they were, outputs poisoned). */
static void gpu_run(tk_ctx *ctx, xprob *p, void *const dev[8], void *const poisoned[6]) {
    ref_tensor *t[6] = {&p->x, &p->dx, &p->loss, &p->lse, &p->ws, &p->mean};
    ck_assert_int_eq(tk_gpu_upload(ctx, dev[0], p->x0, tu_bytes_of(&p->x)), TK_OK);
    for (int i = 1; i < 6; i++)
        if (!(i == 1 && p->c.inplace))
            ck_assert_int_eq(tk_gpu_upload(ctx, dev[i], poisoned[i], tu_bytes_of(t[i])), TK_OK);
    tk_xent_params q = params_of(p, dev);
    ck_assert_msg(tk_cross_entropy(ctx, &q, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    download(ctx, p, dev);
}

START_TEST(gpu_against_f64) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    xprob p;
    prob_make(&p, &gpu_cases[_i]);
    ref_tensor *t[6] = {&p.x, &p.dx, &p.loss, &p.lse, &p.ws, &p.mean};
    void *dev[8], *poisoned[6] = {0}, *first[6] = {0};
    for (int i = 0; i < 6; i++) {
        poisoned[i] = ref_tensor_snapshot(t[i]);
        dev[i] = i == 1 && p.c.inplace ? dev[0] : tu_dev_in(ctx, t[i]);
    }
    dev[6] = tu_dev_in(ctx, &p.dloss);
    dev[7] = tu_dev_copy(ctx, p.t, (size_t)p.c.N * sizeof(int32_t));
    gpu_run(ctx, &p, dev, poisoned);
    prob_check(&p, "gpu");
    for (int i = 0; i < 6; i++) first[i] = ref_tensor_snapshot(t[i]);
    gpu_run(ctx, &p, dev, poisoned); /* again: the same bits */
    for (int i = 0; i < 6; i++)
        ck_assert_msg(!memcmp(first[i], t[i]->data, tu_bytes_of(t[i])), "tensor %d differs", i);
    for (int i = 0; i < 8; i++)
        if (!(i == 1 && p.c.inplace)) tk_gpu_free(ctx, dev[i]);
    for (int i = 0; i < 6; i++) free(poisoned[i]), free(first[i]);
    prob_free(&p);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("xent");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_params);
    tcase_add_test(tc, no_rows);
    tc = tu_tcase(s, "interp", 300);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tcase_add_loop_test(tc, bad_targets, 0, 2);
    tc = tu_tcase(s, "gpu", 600);
    tcase_add_loop_test(tc, gpu_against_f64, 0, NGPU);
    return run_suite(s);
}
