/* Based linear attention (tk_based_build, kernels/based.c, based_bwd.c):
 * the config checks with their messages; on the interpreter, each kernel
 * against a float64 reference of the quadratic form at ragged shapes
 * (chunks, value slices and tokens not multiples of anything), normalized
 * and not, bf16 and f16; on the GPU, each kernel against the interpreter on
 * the same inputs (skipped, with a line, without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/based_run_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/runapi.h"

#define EPS 1e-6

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        tk_based_config c;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_F32}, "dtype is f32"},
        {{.dtype = TK_BF16, .part = 5}, "part is 5"},
        {{.dtype = TK_BF16, .normalize = 2}, "normalize is 2"},
        {{.dtype = TK_BF16, .stats = -1}, "stats is -1"},
        {{.dtype = TK_BF16, .v_cols = 24}, "v_cols is 24"},
        {{.dtype = TK_BF16, .v_cols = 144}, "v_cols is 144"},
        {{.dtype = TK_BF16, .warps = 3}, "warps is 3"},
        {{.dtype = TK_BF16, .seg = 3}, "seg is 3"},
        {{.dtype = TK_BF16, .part = TK_BASED_BWD_SUM, .seg = 1}, "row kernels"},
        {{.dtype = TK_BF16, .part = TK_BASED_BWD_DQ, .seg = 2}, "no state pass of its own"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_based_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    tk_based_config ok = {.dtype = TK_BF16};
    TU_EXPECT_BUILD_ARGS(tk_based_build, ctx, &ok);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- cases -------------------------------------------------------------- */
typedef struct bcase {
    tk_dtype dt;
    int normalize, stats, v_cols, warps;
    int64_t B, H, T, Dv;
    double scale;
    int bthd;     /* tensors laid out [B, T, H, D] (fla's layout), through strides */
    int segments; /* the run API's (0: the library's choice)                      */
} bcase;

/* The run API's chunks are 64 rows: segments 3 at T 150 is one chunk each;
 * 2 at T 200 two chunks each; 2 at T 130 two and one. */
static const bcase cases[] = {
    {TK_BF16, 1, 1, 32, 4, 1, 2, 150, 64, 0.25, 0, 3},
    {TK_F16, 1, 1, 16, 4, 2, 1, 67, 40, 0.25, 1, 0},
    {TK_BF16, 0, 0, 64, 2, 1, 1, 97, 64, 0.25, 0, 0},
    {TK_BF16, 1, 0, 32, 8, 1, 1, 200, 48, 0.2, 1, 2},
    {TK_F16, 0, 1, 16, 1, 2, 2, 33, 16, 0.25, 0, 0},
    {TK_BF16, 1, 1, 128, 4, 1, 1, 1, 128, 0.25, 0, 0},
    {TK_BF16, 1, 1, 16, 4, 2, 3, 130, 64, 0.25, 1, 2},
    {TK_F16, 0, 1, 16, 4, 1, 2, 260, 32, 0.25, 0, 5},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* GPU only: many chunks (the interpreter would take minutes) */
static const bcase big_cases[] = {
    {TK_BF16, 1, 1, 16, 4, 2, 2, 1100, 64, 0.25, 0, 5},
    {TK_BF16, 0, 0, 32, 4, 1, 3, 2049, 64, 0.25, 1, 0},
    {TK_F16, 1, 1, 64, 4, 1, 1, 3000, 128, 0.25, 1, 0},
    {TK_BF16, 1, 1, 16, 4, 1, 1, 3000, 64, 0.25, 0, 1},
    {TK_BF16, 1, 0, 16, 4, 1, 2, 16384, 64, 0.25, 1, 0},
};
#define NBIG (int)(sizeof big_cases / sizeof big_cases[0])

typedef struct bbufs {
    ref_tensor q, k, v, o, z;
    ref_tensor dout, dq, dk, dv; /* the backward's */
} bbufs;

static void bufs_make(bbufs *b, const bcase *c) {
    int64_t dq[4] = {c->B, c->H, c->T, 16}, dv[4] = {c->B, c->H, c->T, c->Dv},
            dz[3] = {c->B, c->H, c->T};
    static const int perm[4] = {0, 2, 1, 3};
    const int *pm = c->bthd ? perm : NULL;
    b->q = ref_tensor_new_layout(c->dt, 4, dq, pm, 0),
    b->k = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->v = ref_tensor_new_layout(c->dt, 4, dv, pm, 0),
    b->o = ref_tensor_new_layout(c->dt, 4, dv, pm, 8);
    b->z = ref_tensor_new(TK_F32, 3, dz);
    ref_tensor_random(&b->q, -1.0, 1.0), ref_tensor_random(&b->k, -1.0, 1.0);
    ref_tensor_random(&b->v, -1.0, 1.0);
    ref_tensor_fill_all(&b->o, NAN), ref_tensor_fill_all(&b->z, NAN);
    b->dout = ref_tensor_new_layout(c->dt, 4, dv, pm, 0);
    b->dq = ref_tensor_new_layout(c->dt, 4, dq, pm, 8),
    b->dk = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->dv = ref_tensor_new_layout(c->dt, 4, dv, pm, 8);
    ref_tensor_random(&b->dout, -1.0, 1.0);
    ref_tensor_fill_all(&b->dq, NAN), ref_tensor_fill_all(&b->dk, NAN),
        ref_tensor_fill_all(&b->dv, NAN);
}

static void bufs_free(bbufs *b) {
    ref_tensor *all[] = {&b->q, &b->k, &b->v, &b->o, &b->z, &b->dout, &b->dq, &b->dk, &b->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* Float64, the quadratic form: o [B, H, T, Dv] and z [B, H, T]. */
static void reference(const bcase *c, const bbufs *b, double *o, double *z) {
    double *q = ref_tensor_to_f64(&b->q), *k = ref_tensor_to_f64(&b->k);
    double *v = ref_tensor_to_f64(&b->v);
    for (int64_t bh = 0; bh < c->B * c->H; bh++)
        for (int64_t i = 0; i < c->T; i++) {
            double *oi = o + (bh * c->T + i) * c->Dv, zi = 0;
            memset(oi, 0, sizeof(double) * (size_t)c->Dv);
            for (int64_t j = 0; j <= i; j++) {
                double s = 0;
                for (int f = 0; f < 16; f++)
                    s += q[(bh * c->T + i) * 16 + f] * k[(bh * c->T + j) * 16 + f];
                s *= c->scale;
                double a = 1 + s + 0.5 * s * s;
                zi += a;
                for (int64_t d = 0; d < c->Dv; d++) oi[d] += a * v[(bh * c->T + j) * c->Dv + d];
            }
            if (c->normalize)
                for (int64_t d = 0; d < c->Dv; d++) oi[d] /= zi + EPS;
            z[bh * c->T + i] = zi;
        }
    free(q), free(k), free(v);
}

/* Float64 gradients of the quadratic form: dq, dk [B, H, T, 16], dv. */
static void reference_bwd(const bcase *c, const bbufs *b, double *dq, double *dk, double *dv) {
    double *q = ref_tensor_to_f64(&b->q), *k = ref_tensor_to_f64(&b->k);
    double *v = ref_tensor_to_f64(&b->v), *d = ref_tensor_to_f64(&b->dout);
    int64_t T = c->T, Dv = c->Dv;
    memset(dq, 0, sizeof(double) * (size_t)(c->B * c->H * T * 16));
    memset(dk, 0, sizeof(double) * (size_t)(c->B * c->H * T * 16));
    memset(dv, 0, sizeof(double) * (size_t)(c->B * c->H * T * Dv));
    double *num = malloc(sizeof(double) * (size_t)Dv), *dn = malloc(sizeof(double) * (size_t)Dv);
    for (int64_t bh = 0; bh < c->B * c->H; bh++) {
        const double *qh = q + bh * T * 16, *kh = k + bh * T * 16, *vh = v + bh * T * Dv;
        for (int64_t i = 0; i < T; i++) {
            double z = 0, s[1] = {0};
            memset(num, 0, sizeof(double) * (size_t)Dv);
            for (int64_t j = 0; j <= i; j++) { /* the forward's z and num of row i */
                s[0] = 0;
                for (int f = 0; f < 16; f++) s[0] += qh[i * 16 + f] * kh[j * 16 + f];
                double sij = c->scale * s[0], a = 1 + sij + 0.5 * sij * sij;
                z += a;
                for (int64_t e = 0; e < Dv; e++) num[e] += a * vh[j * Dv + e];
            }
            double g = c->normalize ? 1.0 / (z + EPS) : 1.0, dz = 0;
            for (int64_t e = 0; e < Dv; e++) {
                dn[e] = g * d[(bh * T + i) * Dv + e];
                if (c->normalize) dz -= dn[e] * num[e] * g;
            }
            for (int64_t j = 0; j <= i; j++) {
                double sij = 0, dvn = 0;
                for (int f = 0; f < 16; f++) sij += qh[i * 16 + f] * kh[j * 16 + f];
                sij *= c->scale;
                double a = 1 + sij + 0.5 * sij * sij;
                for (int64_t e = 0; e < Dv; e++) {
                    dvn += dn[e] * vh[j * Dv + e];
                    dv[(bh * T + j) * Dv + e] += a * dn[e];
                }
                double ds = (dvn + dz) * (1 + sij) * c->scale;
                for (int f = 0; f < 16; f++) {
                    dq[(bh * T + i) * 16 + f] += ds * kh[j * 16 + f];
                    dk[(bh * T + j) * 16 + f] += ds * qh[i * 16 + f];
                }
            }
        }
    }
    free(num), free(dn), free(q), free(k), free(v), free(d);
}

static tk_kernel *build(tk_ctx *ctx, const bcase *c, int part) {
    tk_based_config cfg = {.dtype = c->dt,
                           .part = part,
                           .normalize = c->normalize,
                           .stats = part == TK_BASED_FWD ? c->stats : 0,
                           .v_cols = c->v_cols,
                           .warps = c->warps};
    tk_kernel *k = NULL;
    ck_assert_msg(tk_based_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* The forward's tensors in parameter order, and its scalars. */
static int fwd_args(const bcase *c, bbufs *b, ref_tensor ts[8], tk_arg sc[8]) {
    int n = 0;
    ts[n++] = b->q, ts[n++] = b->k, ts[n++] = b->v, ts[n++] = b->o;
    if (c->stats) ts[n++] = b->z;
    memset(sc, 0, sizeof(tk_arg) * 8);
    ts[n] = (ref_tensor){0}, sc[n++] = tk_arg_f32((float)c->scale);
    ts[n] = (ref_tensor){0}, sc[n++] = tk_arg_f32((float)EPS);
    return n;
}

START_TEST(fwd_interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const bcase *c = &cases[_i];
    bbufs b;
    bufs_make(&b, c);
    tk_kernel *k = build(ctx, c, TK_BASED_FWD);
    ref_tensor ts[8];
    tk_arg sc[8];
    tu_interp_run_refs(ctx, k, fwd_args(c, &b, ts, sc), ts, sc);
    double *o = malloc(sizeof(double) * (size_t)ref_tensor_count(&b.o));
    double *z = malloc(sizeof(double) * (size_t)ref_tensor_count(&b.z));
    reference(c, &b, o, z);
    double tol = c->dt == TK_BF16 ? 1e-2 : 3e-3;
    double eo = ref_tensor_rel_err(&b.o, o), ez = c->stats ? ref_tensor_rel_err(&b.z, z) : 0;
    printf("based fwd %s%s B%lld H%lld T%lld Dv%lld v%d w%d: o %.2e z %.2e\n", tk_dtype_name(c->dt),
           c->normalize ? " norm" : "", (long long)c->B, (long long)c->H, (long long)c->T,
           (long long)c->Dv, c->v_cols, c->warps, eo, ez);
    ck_assert_msg(eo <= tol && ez <= tol, "o %.3e z %.3e", eo, ez);
    free(o), free(z);
    tk_kernel_destroy(k);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the run API ---------------------------------------------------------- */
static tk_based_params params_of(const bcase *c, bbufs *b) {
    tk_based_params p = TK_BASED_PARAMS_INIT;
    p.dtype = c->dt, p.normalize = c->normalize, p.scale = (float)c->scale, p.eps = (float)EPS;
    p.batch = c->B, p.heads = c->H, p.seq = c->T, p.head_dim_v = c->Dv, p.v_cols = c->v_cols;
    p.q = b->q.data, p.k = b->k.data, p.v = b->v.data, p.o = b->o.data;
    p.z = c->stats ? b->z.data : NULL;
    p.segments = c->segments;
    tu_strides(p.q_strides, &b->q, c->bthd), tu_strides(p.k_strides, &b->k, c->bthd);
    tu_strides(p.v_strides, &b->v, c->bthd), tu_strides(p.o_strides, &b->o, true);
    return p;
}

START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char buf[64]; /* never read: every call fails its checks first */
    tk_based_params ok = TK_BASED_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.batch = 2, ok.heads = 3, ok.seq = 5, ok.head_dim_v = 64;
    ok.q = ok.k = ok.v = buf, ok.o = buf;
    static const char *const msg[] = {
        "dtype is f32",         "normalize is 2",     "v_cols is 8",
        "scale is -1",          "eps is inf",         "batch is 0",
        "heads is 65536",       "seq is 0",           "head_dim_v is 300",
        "head_dim_v is 20",     "k is NULL",          "o is NULL",
        "q_strides[3] is 2",    "v_strides[0] is -1", "reach past 2^60",
        "z_strides[2] is -3",   "segments is -1",     "with no workspace",
        "workspace_bytes is 4", "struct_size"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_based_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_F32; break;
        case 1: p.normalize = 2; break;
        case 2: p.v_cols = 8; break;
        case 3: p.scale = -1; break;
        case 4: p.eps = INFINITY; break;
        case 5: p.batch = 0; break;
        case 6: p.heads = 65536; break;
        case 7: p.seq = 0; break;
        case 8: p.head_dim_v = 300; break;
        case 9: p.head_dim_v = 20; break;
        case 10: p.k = NULL; break;
        case 11: p.o = NULL; break;
        case 12: p.q_strides[3] = 2; break;
        case 13: p.v_strides[0] = -1, p.v_strides[3] = 1; break;
        case 14: p.o_strides[0] = (int64_t)1 << 60, p.o_strides[3] = 1; break;
        case 15: p.z = (float *)buf, p.z_strides[2] = -3; break;
        case 16: p.segments = -1; break;
        case 17: p.segments = 2; break;
        case 18: p.seq = 1000, p.segments = 4, p.workspace = buf, p.workspace_bytes = 4; break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_based_forward(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_based_forward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_based_forward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    /* the forward's workspace: none for one chunk, some for a long
     * sequence of few heads (the library's segments), none for segments 1 */
    size_t bytes = 1;
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "bytes is NULL"));
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &ok, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 0);
    tk_based_params ws = ok;
    ws.batch = 1, ws.heads = 1, ws.seq = 100000;
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &ws, &bytes), TK_OK);
    ck_assert_uint_gt(bytes, 0);
    ws.segments = 1;
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &ws, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 0);
    ws.segments = -3;
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &ws, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "segments is -3"));
    tk_based_params p = ok;
    p.seq = -4;
    ck_assert_int_eq(tk_based_prepare(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_bwd_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char buf[64]; /* never read: every call fails its checks first */
    tk_based_bwd_params ok = TK_BASED_BWD_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.batch = 2, ok.heads = 3, ok.seq = 500, ok.head_dim_v = 64;
    ok.q = ok.k = ok.v = ok.dout = buf, ok.dq = ok.dk = ok.dv = buf;
    ok.workspace = buf, ok.workspace_bytes = 4;
    static const char *const msg[] = {"dout is NULL",     "dv is NULL",         "o is NULL",
                                      "z is NULL",        "dk_strides[3] is 4", "segments is -2",
                                      "workspace is set", "workspace is NULL"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_based_bwd_params p = ok;
        switch (i) {
        case 0: p.dout = NULL; break;
        case 1: p.dv = NULL; break;
        case 2: p.normalize = 1, p.z = (float *)buf; break;
        case 3: p.normalize = 1, p.o = buf; break;
        case 4: p.dk_strides[3] = 4; break;
        case 5: p.segments = -2; break;
        case 6: break; /* 4 bytes */
        default: p.workspace = NULL; break;
        }
        tu_expect_status(ctx, tk_based_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    size_t bytes = 0, split = 0;
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &ok, &bytes), TK_OK);
    tk_based_bwd_params p = ok;
    p.segments = 4; /* 8 chunks: states for 4 segments more */
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &p, &split), TK_OK);
    ck_assert_uint_gt(split, bytes);
    ck_assert_int_eq(tk_based_backward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_based_backward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The interpreter's launches assume an H100 / H200 (as the run API does
 * without a GPU). */
#define SMS 132

static void run_launches(tk_ctx *ctx, const tk_based_launch *l, int n) {
    for (int i = 0; i < n; i++) {
        tk_kernel *k = NULL;
        ck_assert_msg(tk_based_build(ctx, &l[i].cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_msg(tk_interp_run(k, l[i].n, l[i].args) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
}

/* The forward's workspace in host memory, poisoned (NaN: unwritten states
 * show); NULL when the call does not split. */
static void fwd_workspace(tk_ctx *ctx, tk_based_params *p) {
    ck_assert_int_eq(tk_based_forward_workspace(ctx, p, &p->workspace_bytes), TK_OK);
    p->workspace = tu_host_workspace(p->workspace_bytes);
}

/* tk_based_forward's launches (from the parameters) on the interpreter. */
START_TEST(run_api_interp) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const bcase *c = &cases[_i];
    bbufs b;
    bufs_make(&b, c);
    tk_based_params p = params_of(c, &b);
    void *gaps = ref_tensor_snapshot(&b.o); /* o has padding between rows */
    fwd_workspace(ctx, &p);
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    int n = tk_based_fwd_launches(&p, SMS, l);
    ck_assert_int_eq(n, c->segments > 1 ? 2 : 1);
    run_launches(ctx, l, n);
    double *o = malloc(sizeof(double) * (size_t)ref_tensor_count(&b.o));
    double *z = malloc(sizeof(double) * (size_t)ref_tensor_count(&b.z));
    reference(c, &b, o, z);
    double tol = c->dt == TK_BF16 ? 1e-2 : 3e-3;
    double eo = ref_tensor_rel_err(&b.o, o), ez = c->stats ? ref_tensor_rel_err(&b.z, z) : 0;
    ck_assert_msg(eo <= tol && ez <= tol, "o %.3e z %.3e", eo, ez);
    ck_assert_int_eq(ref_tensor_stray_writes(&b.o, gaps), 0);
    free(o), free(z), free(gaps), free(p.workspace);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

static tk_based_bwd_params bwd_params_of(const bcase *c, bbufs *b) {
    tk_based_bwd_params p = TK_BASED_BWD_PARAMS_INIT;
    p.dtype = c->dt, p.normalize = c->normalize, p.scale = (float)c->scale, p.eps = (float)EPS;
    p.batch = c->B, p.heads = c->H, p.seq = c->T, p.head_dim_v = c->Dv, p.v_cols = c->v_cols;
    p.segments = c->segments;
    p.q = b->q.data, p.k = b->k.data, p.v = b->v.data, p.dout = b->dout.data;
    p.dq = b->dq.data, p.dk = b->dk.data, p.dv = b->dv.data;
    if (c->normalize) p.o = b->o.data, p.z = b->z.data;
    tu_strides(p.q_strides, &b->q, c->bthd), tu_strides(p.k_strides, &b->k, c->bthd);
    tu_strides(p.v_strides, &b->v, c->bthd), tu_strides(p.dout_strides, &b->dout, c->bthd);
    tu_strides(p.o_strides, &b->o, true), tu_strides(p.dq_strides, &b->dq, true);
    tu_strides(p.dk_strides, &b->dk, c->bthd), tu_strides(p.dv_strides, &b->dv, true);
    return p;
}

/* The forward (o, z) then tk_based_backward's launches on the interpreter,
 * dq, dk, dv against float64. */
START_TEST(bwd_interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    bcase c = cases[_i];
    c.stats = c.normalize; /* the backward takes z */
    bbufs b;
    bufs_make(&b, &c);
    tk_based_params fp = params_of(&c, &b);
    fp.segments = 1; /* the forward's split: run_api_interp */
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    run_launches(ctx, l, tk_based_fwd_launches(&fp, SMS, l));
    tk_based_bwd_params p = bwd_params_of(&c, &b);
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
    p.workspace = tu_host_workspace(p.workspace_bytes); /* NaN: unwritten partials show */
    int n = tk_based_bwd_launches(&p, SMS, l);
    ck_assert_int_eq(n, 4 + c.normalize + 2 * (c.segments > 1));
    run_launches(ctx, l, n);
    size_t nq = (size_t)ref_tensor_count(&b.dq), nv = (size_t)ref_tensor_count(&b.dv);
    double *dq = malloc(sizeof(double) * nq), *dk = malloc(sizeof(double) * nq);
    double *dv = malloc(sizeof(double) * nv);
    reference_bwd(&c, &b, dq, dk, dv);
    double tol = c.dt == TK_BF16 ? 1e-2 : 3e-3;
    double eq = ref_tensor_rel_err(&b.dq, dq), ek = ref_tensor_rel_err(&b.dk, dk),
           ev = ref_tensor_rel_err(&b.dv, dv);
    printf("based bwd %s%s B%lld H%lld T%lld Dv%lld v%d: dq %.2e dk %.2e dv %.2e\n",
           tk_dtype_name(c.dt), c.normalize ? " norm" : "", (long long)c.B, (long long)c.H,
           (long long)c.T, (long long)c.Dv, c.v_cols, eq, ek, ev);
    if (c.normalize && c.T == 1) {
        /* one key: o = v·a/(a + eps) does not depend on q or k, so dq and
         * dk are 0 up to rounding (dn·v - do·o/(z + eps) cancels: bf16's
         * 2^-8 of |do·v|, a few units in 1e-3 here), and a relative error
         * means nothing */
        double *gq = ref_tensor_to_f64(&b.dq), *gk = ref_tensor_to_f64(&b.dk);
        for (size_t i = 0; i < nq; i++)
            ck_assert_msg(fabs(gq[i]) < 2e-2 && fabs(gk[i]) < 2e-2, "%zu: dq %g dk %g ref %g", i,
                          gq[i], gk[i], dq[i]);
        free(gq), free(gk);
        eq = ek = 0;
    }
    ck_assert_msg(eq <= tol && ek <= tol && ev <= tol, "dq %.3e dk %.3e dv %.3e", eq, ek, ev);
    free(dq), free(dk), free(dv), free(p.workspace);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The GPU against the interpreter on the same inputs (poisoned outputs). */
START_TEST(fwd_gpu) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const bcase *c = &cases[_i];
    bbufs b;
    bufs_make(&b, c);
    tk_kernel *k = build(ctx, c, TK_BASED_FWD);
    ref_tensor ts[8];
    tk_arg sc[8];
    int n = fwd_args(c, &b, ts, sc);
    double worst = 0;
    ck_assert_msg(th_compare(ctx, k, n, ts, sc, &worst) == TK_OK, "%s", tk_ctx_error(ctx));
    printf("based fwd gpu case %d: worst rel diff %.2e\n", _i, worst);
    tk_kernel_destroy(k);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_based_forward and tk_based_backward on the GPU (device buffers,
 * outputs and workspace poisoned), every result against float64. */
START_TEST(run_api_gpu) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    bcase c = _i < NCASES ? cases[_i] : big_cases[_i - NCASES];
    c.stats = c.normalize;
    bbufs b, d;
    bufs_make(&b, &c);
    d = b;
    ref_tensor *host[9] = {&b.q, &b.k, &b.v, &b.o, &b.z, &b.dout, &b.dq, &b.dk, &b.dv};
    ref_tensor *dev[9] = {&d.q, &d.k, &d.v, &d.o, &d.z, &d.dout, &d.dq, &d.dk, &d.dv};
    for (int i = 0; i < 9; i++) ck_assert_ptr_nonnull(dev[i]->data = th_upload(ctx, host[i]));
    tk_based_params fp = params_of(&c, &d);
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &fp, &fp.workspace_bytes), TK_OK);
    if (fp.workspace_bytes) {
        ck_assert_int_eq(tk_gpu_alloc(ctx, fp.workspace_bytes, &fp.workspace), TK_OK);
        ck_assert_int_eq(tk_gpu_memset(ctx, fp.workspace, 0xff, fp.workspace_bytes), TK_OK);
    }
    ck_assert_msg(tk_based_forward(ctx, &fp, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_based_bwd_params p = bwd_params_of(&c, &d);
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
    ck_assert_int_eq(tk_gpu_alloc(ctx, p.workspace_bytes, &p.workspace), TK_OK);
    ck_assert_int_eq(tk_gpu_memset(ctx, p.workspace, 0xff, p.workspace_bytes), TK_OK);
    ck_assert_msg(tk_based_backward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = 3; i < 9; i++) tu_dev_get(ctx, host[i], dev[i]->data);
    size_t no = (size_t)ref_tensor_count(&b.o), nq = (size_t)ref_tensor_count(&b.dq);
    double *o = malloc(sizeof(double) * no),
           *z = malloc(sizeof(double) * (size_t)ref_tensor_count(&b.z));
    double *dq = malloc(sizeof(double) * nq), *dk = malloc(sizeof(double) * nq);
    double *dv = malloc(sizeof(double) * no);
    reference(&c, &b, o, z);
    reference_bwd(&c, &b, dq, dk, dv);
    double tol = c.dt == TK_BF16 ? 1e-2 : 3e-3, e[5];
    e[0] = ref_tensor_rel_err(&b.o, o), e[1] = c.stats ? ref_tensor_rel_err(&b.z, z) : 0;
    e[2] = c.normalize && c.T == 1 ? 0
                                   : ref_tensor_rel_err(&b.dq, dq); /* see bwd_interp_against_f64 */
    e[3] = c.normalize && c.T == 1 ? 0 : ref_tensor_rel_err(&b.dk, dk);
    e[4] = ref_tensor_rel_err(&b.dv, dv);
    printf("based gpu case %d (T %lld, segments %d: fwd ws %zu B): o %.2e z %.2e dq %.2e dk %.2e "
           "dv %.2e\n",
           _i, (long long)c.T, c.segments, fp.workspace_bytes, e[0], e[1], e[2], e[3], e[4]);
    for (int i = 0; i < 5; i++) ck_assert_msg(e[i] <= tol, "%d: %.3e", i, e[i]);
    free(o), free(z), free(dq), free(dk), free(dv);
    tk_gpu_free(ctx, p.workspace);
    if (fp.workspace) tk_gpu_free(ctx, fp.workspace);
    for (int i = 0; i < 9; i++) tk_gpu_free(ctx, dev[i]->data);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("based");
    TCase *t = tu_tcase(s, "checks", 0);
    tcase_add_test(t, bad_configs);
    tcase_add_test(t, bad_params);
    tcase_add_test(t, bad_bwd_params);
    t = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(t, fwd_interp_against_f64, 0, NCASES);
    tcase_add_loop_test(t, run_api_interp, 0, NCASES);
    tcase_add_loop_test(t, bwd_interp_against_f64, 0, NCASES);
    t = tu_tcase(s, "gpu", 600);
    tcase_add_loop_test(t, fwd_gpu, 0, NCASES);
    tcase_add_loop_test(t, run_api_gpu, 0, NCASES + NBIG);
    return s;
}

int main(void) { return run_suite(suite()); }
