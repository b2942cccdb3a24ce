/* Hedgehog linear attention (tk_hedgehog_build, kernels/hedgehog.c): the
 * config and parameter checks with their messages; on the interpreter, the
 * kernel and the run API's launches against a float64 reference (φ in
 * double from the same rounded inputs and weights) at ragged shapes (tokens
 * not a multiple of the chunk, value columns not a multiple of v_cols, one
 * token), both head dims and dtypes, normalized and not, fla's [B, T, H, D]
 * layout; on the GPU, the kernel against the interpreter and the run API
 * against float64 (skipped, with a line, without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hedgehog_parts.h"
#include "kernels/hedgehog_run_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/ref_hedgehog.h"
#include "util/run.h"
#include "util/runapi.h"

#define EPS 1e-6
#define SMS 132 /* an H100's SMs: the launches' plan */

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        tk_hedgehog_config c;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_F32, .head_dim = 64}, "dtype is f32"},
        {{.dtype = TK_BF16, .head_dim = 96}, "head_dim is 96"},
        {{.dtype = TK_BF16, .head_dim = 64, .normalize = 2}, "normalize is 2"},
        {{.dtype = TK_BF16, .head_dim = 64, .stats = -1}, "stats is -1"},
        {{.dtype = TK_BF16, .head_dim = 64, .bias = 3}, "bias is 3"},
        {{.dtype = TK_BF16, .head_dim = 64, .v_cols = 24}, "v_cols is 24"},
        {{.dtype = TK_BF16, .head_dim = 64, .v_cols = 144}, "v_cols is 144"},
        {{.dtype = TK_BF16, .head_dim = 64, .warps = 3}, "warps is 3"},
        {{.dtype = TK_BF16, .head_dim = 128, .v_cols = 128, .warps = 4}, "bytes of shared memory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_hedgehog_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    tk_hedgehog_config ok = {.dtype = TK_BF16, .head_dim = 64};
    TU_EXPECT_BUILD_ARGS(tk_hedgehog_build, ctx, &ok);
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_hedgehog_smem_bytes (which the run API sizes configurations by) is
 * what the kernel allocates. */
START_TEST(smem_formula) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const tk_hedgehog_config cs[] = {
        {TK_BF16, 64, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
        {TK_F16, 128, 0, 0, 0, 16, 2, 0, 0, 0, 0, 0},
        {TK_BF16, 128, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0},
        {TK_BF16, 64, 0, 1, 0, 128, 8, 0, 0, 0, 0, 0},
        {TK_BF16, 64, 1, 1, 1, 0, 0, 0, 0, 0, TK_HEDGEHOG_SEG_RUN, 0},
        {TK_F16, 128, 0, 1, 1, 16, 2, 0, 0, 0, TK_HEDGEHOG_SEG_STATE, 0},
        {TK_BF16, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {TK_F16, 64, 1, 1, 0, 64, 8, 0, 0, 0, TK_HEDGEHOG_SEG_RUN, 1},
        {TK_BF16, 128, 0, 0, 0, 32, 4, 0, 0, 0, TK_HEDGEHOG_SEG_STATE, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tk_kernel *k = NULL;
        ck_assert_msg(tk_hedgehog_build(ctx, &cs[i], &k) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_hedgehog_config r = tk_hedgehog_resolve(&cs[i]);
        ck_assert_uint_eq(tk_kernel_smem_bytes(k), tk_hedgehog_smem_bytes(&r));
        tk_kernel_destroy(k);
    }
    static const tk_hedgehog_config maps[] = {
        {.dtype = TK_BF16, .head_dim = 128, .bias = 1, .part = TK_HEDGEHOG_MAP},
        {.dtype = TK_F16, .head_dim = 64, .warps = 8, .part = TK_HEDGEHOG_MAP},
    };
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
        tk_kernel *k = NULL;
        ck_assert_msg(tk_hedgehog_build(ctx, &maps[i], &k) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_uint_eq(tk_kernel_smem_bytes(k), tk_hh_map_smem_bytes(&maps[i]));
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- cases -------------------------------------------------------------- */
typedef struct hcase {
    tk_dtype dt;
    int D, normalize, stats, bias, per_head, v_cols, warps;
    int64_t B, H, T, Dv;
    double scale;
    int bthd; /* q, k, v, o laid out [B, T, H, D] (fla's layout), through strides */
} hcase;

/* dt, D, normalize, stats, bias, per-head W, v_cols, warps, B, H, T, Dv,
 * scale, bthd. Chunks of 16·warps rows (default 4 warps: 64); v_cols 0: the
 * default (D 64: 64, D 128: 32); 8 warps: two key blocks a chunk. */
static const hcase cases[] = {
    {TK_BF16, 64, 1, 1, 1, 0, 32, 4, 1, 2, 150, 64, 1.0, 0},
    {TK_F16, 128, 1, 1, 1, 0, 32, 4, 2, 1, 67, 40, 1.0, 1},
    {TK_BF16, 64, 0, 0, 0, 0, 64, 2, 1, 1, 97, 72, 0.125, 0},
    {TK_BF16, 64, 1, 1, 0, 1, 16, 8, 1, 2, 300, 48, 1.0, 1},
    {TK_F16, 64, 0, 1, 1, 0, 16, 1, 2, 2, 33, 16, 0.0884, 0},
    {TK_BF16, 128, 1, 1, 1, 0, 0, 0, 1, 1, 1, 128, 1.0, 0},
    {TK_F16, 64, 1, 0, 1, 1, 0, 0, 1, 3, 130, 8, 0.5, 1},
    {TK_BF16, 128, 0, 1, 1, 1, 16, 2, 1, 2, 90, 32, 0.0625, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* GPU only: many chunks, the library's shapes */
static const hcase big_cases[] = {
    {TK_BF16, 128, 1, 1, 1, 0, 0, 0, 2, 2, 1100, 128, 1.0, 1},
    {TK_BF16, 64, 0, 0, 0, 0, 0, 0, 1, 3, 2049, 64, 0.0884, 0},
    {TK_F16, 128, 1, 1, 1, 1, 0, 0, 1, 2, 3000, 96, 1.0, 1},
    {TK_BF16, 128, 1, 0, 1, 0, 0, 0, 1, 2, 16384, 128, 1.0, 1},
};
#define NBIG (int)(sizeof big_cases / sizeof big_cases[0])

typedef struct hbufs {
    ref_tensor q, k, v, o, z, wq, wk, bq, bk;
} hbufs;

static void bufs_make(hbufs *b, const hcase *c) {
    int64_t dq[4] = {c->B, c->H, c->T, c->D}, dv[4] = {c->B, c->H, c->T, c->Dv},
            dz[3] = {c->B, c->H, c->T};
    int64_t hw = c->per_head ? c->H : 1, dw[3] = {hw, c->D, c->D}, db[2] = {hw, c->D};
    static const int perm[4] = {0, 2, 1, 3};
    const int *pm = c->bthd ? perm : NULL;
    b->q = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->k = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->v = ref_tensor_new_layout(c->dt, 4, dv, pm, 0);
    b->o = ref_tensor_new_layout(c->dt, 4, dv, pm, 8);
    b->z = ref_tensor_new(TK_F32, 3, dz);
    b->wq = ref_tensor_new(c->dt, 3, dw), b->wk = ref_tensor_new(c->dt, 3, dw);
    b->bq = ref_tensor_new(c->dt, 2, db), b->bk = ref_tensor_new(c->dt, 2, db);
    ref_tensor_random(&b->q, -1.0, 1.0), ref_tensor_random(&b->k, -1.0, 1.0);
    ref_tensor_random(&b->v, -1.0, 1.0);
    /* y's spread about 1: softmaxes neither flat nor one-hot */
    double ws = 2.0 / sqrt((double)c->D);
    ref_tensor_random(&b->wq, -ws, ws), ref_tensor_random(&b->wk, -ws, ws);
    ref_tensor_random(&b->bq, -0.5, 0.5), ref_tensor_random(&b->bk, -0.5, 0.5);
    ref_tensor_fill_all(&b->o, NAN), ref_tensor_fill_all(&b->z, NAN);
}

static void bufs_free(hbufs *b) {
    ref_tensor *all[] = {&b->q, &b->k, &b->v, &b->o, &b->z, &b->wq, &b->wk, &b->bq, &b->bk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* Float64 through the recurrence (S += φ(k_i) v_iᵀ, z1 += φ(k_i), then
 * row i): o [B, H, T, Dv] and z [B, H, T]. */
static void reference(const hcase *c, const hbufs *b, double *o, double *z) {
    double *q = ref_tensor_to_f64(&b->q), *k = ref_tensor_to_f64(&b->k);
    double *v = ref_tensor_to_f64(&b->v), *wq = ref_tensor_to_f64(&b->wq);
    double *wk = ref_tensor_to_f64(&b->wk), *bq = ref_tensor_to_f64(&b->bq);
    double *bk = ref_tensor_to_f64(&b->bk);
    int D = c->D, F = 2 * D;
    int64_t Dv = c->Dv, T = c->T;
    double *S = malloc(sizeof(double) * (size_t)(F * Dv)), *z1 = malloc(sizeof(double) * (size_t)F);
    double *pq = malloc(sizeof(double) * (size_t)F), *pk = malloc(sizeof(double) * (size_t)F);
    for (int64_t bh = 0; bh < c->B * c->H; bh++) {
        int64_t hw = c->per_head ? bh % c->H : 0;
        memset(S, 0, sizeof(double) * (size_t)(F * Dv)), memset(z1, 0, sizeof(double) * (size_t)F);
        for (int64_t i = 0; i < T; i++) {
            const double *vi = v + (bh * T + i) * Dv;
            ref_hedgehog_phi(q + (bh * T + i) * D, wq + hw * D * D, c->bias ? bq + hw * D : NULL, D,
                             pq);
            ref_hedgehog_phi(k + (bh * T + i) * D, wk + hw * D * D, c->bias ? bk + hw * D : NULL, D,
                             pk);
            double zi = 0;
            for (int f = 0; f < F; f++) {
                z1[f] += pk[f];
                zi += pq[f] * z1[f];
                for (int64_t d = 0; d < Dv; d++) S[f * Dv + d] += pk[f] * vi[d];
            }
            zi *= c->scale;
            double *oi = o + (bh * T + i) * Dv;
            for (int64_t d = 0; d < Dv; d++) {
                double num = 0;
                for (int f = 0; f < F; f++) num += pq[f] * S[f * Dv + d];
                num *= c->scale;
                oi[d] = c->normalize ? num / (zi + EPS) : num;
            }
            z[bh * T + i] = zi;
        }
    }
    free(S), free(z1), free(pq), free(pk);
    free(q), free(k), free(v), free(wq), free(wk), free(bq), free(bk);
}

static tk_hedgehog_config config_of(const hcase *c) {
    return (tk_hedgehog_config){.dtype = c->dt,
                                .head_dim = c->D,
                                .normalize = c->normalize,
                                .stats = c->stats,
                                .bias = c->bias,
                                .v_cols = c->v_cols,
                                .warps = c->warps};
}

static tk_kernel *build(tk_ctx *ctx, const hcase *c) {
    tk_hedgehog_config cfg = config_of(c);
    tk_kernel *k = NULL;
    ck_assert_msg(tk_hedgehog_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* The kernel's tensors in parameter order, and its scalars (a scalar's
 * slot has a tensor of rank 0). */
static int fwd_args(const hcase *c, hbufs *b, ref_tensor ts[12], tk_arg sc[12]) {
    int n = 0;
    memset(sc, 0, sizeof(tk_arg) * 12);
    ts[n++] = b->q, ts[n++] = b->k, ts[n++] = b->v, ts[n++] = b->wq, ts[n++] = b->wk;
    if (c->bias) ts[n++] = b->bq, ts[n++] = b->bk;
    ts[n++] = b->o;
    if (c->stats) ts[n++] = b->z;
    ts[n] = (ref_tensor){0}, sc[n++] = tk_arg_f32((float)c->scale);
    ts[n] = (ref_tensor){0}, sc[n++] = tk_arg_f32((float)EPS);
    return n;
}

/* o (and z with stats) of b against float64; prints a line. */
static void check_result(const char *what, const hcase *c, const hbufs *b) {
    double *o = malloc(sizeof(double) * (size_t)ref_tensor_count(&b->o));
    double *z = malloc(sizeof(double) * (size_t)ref_tensor_count(&b->z));
    reference(c, b, o, z);
    double tol = c->dt == TK_BF16 ? 1e-2 : 3e-3;
    double eo = ref_tensor_rel_err(&b->o, o), ez = c->stats ? ref_tensor_rel_err(&b->z, z) : 0;
    printf("hedgehog %s %s D%d%s%s B%lld H%lld T%lld Dv%lld v%d w%d: o %.2e z %.2e\n", what,
           tk_dtype_name(c->dt), c->D, c->normalize ? " norm" : "", c->bias ? " bias" : "",
           (long long)c->B, (long long)c->H, (long long)c->T, (long long)c->Dv, c->v_cols, c->warps,
           eo, ez);
    ck_assert_msg(eo <= tol && ez <= tol, "o %.3e z %.3e", eo, ez); /* NaN fails */
    free(o), free(z);
}

START_TEST(fwd_interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const hcase *c = &cases[_i];
    hbufs b;
    bufs_make(&b, c);
    tk_kernel *k = build(ctx, c);
    ref_tensor ts[12];
    tk_arg sc[12];
    tu_interp_run_refs(ctx, k, fwd_args(c, &b, ts, sc), ts, sc);
    check_result("interp", c, &b);
    tk_kernel_destroy(k);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the run API ---------------------------------------------------------- */
static tk_hedgehog_params params_of(const hcase *c, hbufs *b) {
    tk_hedgehog_params p = TK_HEDGEHOG_PARAMS_INIT;
    p.dtype = c->dt, p.head_dim = c->D, p.normalize = c->normalize;
    p.scale = (float)c->scale, p.eps = (float)EPS;
    p.batch = c->B, p.heads = c->H, p.seq = c->T, p.head_dim_v = c->Dv;
    p.v_cols = c->v_cols, p.warps = c->warps, p.per_head = c->per_head;
    p.q = b->q.data, p.k = b->k.data, p.v = b->v.data, p.o = b->o.data;
    p.wq = b->wq.data, p.wk = b->wk.data;
    if (c->bias) p.bq = b->bq.data, p.bk = b->bk.data;
    p.z = c->stats ? b->z.data : NULL;
    tu_strides(p.q_strides, &b->q, c->bthd), tu_strides(p.k_strides, &b->k, c->bthd);
    tu_strides(p.v_strides, &b->v, c->bthd), tu_strides(p.o_strides, &b->o, true);
    return p;
}

START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char buf[64]; /* never read: every call fails its checks first */
    tk_hedgehog_params ok = TK_HEDGEHOG_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.head_dim = 64, ok.batch = 2, ok.heads = 3, ok.seq = 5;
    ok.head_dim_v = 64, ok.q = ok.k = ok.v = ok.wq = ok.wk = buf, ok.o = buf;
    static const char *const msg[] = {
        "dtype is f32",
        "head_dim is 32",
        "normalize is 2",
        "per_head is 5",
        "scale is -1",
        "eps is inf",
        "v_cols is 8",
        "warps is 6",
        "batch is 0",
        "heads is 65536",
        "seq is 0",
        "head_dim_v is 300",
        "head_dim_v is 20",
        "k is NULL",
        "o is NULL",
        "wk is NULL",
        "bk is NULL and bq is not",
        "bq is NULL and bk is not",
        "q_strides[3] is 2",
        "v_strides[0] is -1",
        "reach past 2^60",
        "z_strides[2] is -3",
        "bytes of shared memory",
        "segments is -2",
        "segments is 3 with no workspace",
        "workspace_bytes is 16; the states of 2 segments need",
        "workspace_bytes is 16; the states of 2 segments and the feature maps need",
        "workspace_bytes is 16; the feature maps need",
        "fused_maps is 3",
        "workspace is not 256-byte aligned",
        "struct_size",
    };
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_hedgehog_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_F32; break;
        case 1: p.head_dim = 32; break;
        case 2: p.normalize = 2; break;
        case 3: p.per_head = 5; break;
        case 4: p.scale = -1; break;
        case 5: p.eps = INFINITY; break;
        case 6: p.v_cols = 8; break;
        case 7: p.warps = 6; break;
        case 8: p.batch = 0; break;
        case 9: p.heads = 65536; break;
        case 10: p.seq = 0; break;
        case 11: p.head_dim_v = 300; break;
        case 12: p.head_dim_v = 20; break;
        case 13: p.k = NULL; break;
        case 14: p.o = NULL; break;
        case 15: p.wk = NULL; break;
        case 16: p.bq = buf; break;
        case 17: p.bk = buf; break;
        case 18: p.q_strides[3] = 2; break;
        case 19: p.v_strides[0] = -1, p.v_strides[3] = 1; break;
        case 20: p.o_strides[0] = (int64_t)1 << 60, p.o_strides[3] = 1; break;
        case 21: p.z = (float *)buf, p.z_strides[2] = -3; break;
        case 22: p.head_dim = 128, p.v_cols = 128, p.warps = 4; break;
        case 23: p.segments = -2; break;
        case 24: p.segments = 3; break;
        case 25:
            p.seq = 300, p.segments = 2, p.workspace = buf, p.workspace_bytes = 16;
            p.fused_maps = 1;
            break;
        case 26: p.seq = 300, p.segments = 2, p.workspace = buf, p.workspace_bytes = 16; break;
        case 27: p.workspace = buf, p.workspace_bytes = 16; break;
        case 28: p.fused_maps = 3; break;
        case 29: p.workspace = buf + 1, p.workspace_bytes = SIZE_MAX / 2; break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_hedgehog_forward(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_hedgehog_forward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_hedgehog_forward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    tk_hedgehog_params p = ok;
    p.seq = -4;
    ck_assert_int_eq(tk_hedgehog_prepare(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "tk_hedgehog_prepare: seq is -4"), "%s",
                  tk_ctx_error(ctx));
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's shapes fit the GPU's shared memory: Hopper's 227 KiB, an
 * A100's 163 (fewer columns and warps at D 128), sm_86's 99. */
START_TEST(config_fits) {
    static const struct {
        int D;
        size_t smem;
        int v_cols, warps;
    } want[] = {
        {64, 227 * 1024, 64, 4}, {128, 227 * 1024, 32, 4}, {128, 163 * 1024, 16, 2},
        {64, 163 * 1024, 64, 4}, {64, 99 * 1024, 32, 4},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tk_hedgehog_params p = TK_HEDGEHOG_PARAMS_INIT;
        p.dtype = TK_BF16, p.head_dim = want[i].D, p.normalize = 1, p.bq = p.bk = &p;
        tk_hedgehog_config c = tk_hedgehog_config_of(&p, want[i].smem);
        ck_assert_msg(c.v_cols == want[i].v_cols && c.warps == want[i].warps,
                      "D %d smem %zu: v_cols %d warps %d", want[i].D, want[i].smem, c.v_cols,
                      c.warps);
        ck_assert_uint_le(tk_hedgehog_smem_bytes(&c), want[i].smem);
    }
}
END_TEST

/* p's launches (tk_hedgehog_forward's) on the interpreter; returns the
 * count. */
static int run_launches(tk_ctx *ctx, const tk_hedgehog_params *p) {
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    int n = tk_hedgehog_fwd_launches(p, TK_HEDGEHOG_SMEM_MAX, SMS, l);
    for (int i = 0; i < n; i++) {
        tk_kernel *k = NULL;
        ck_assert_msg(tk_hedgehog_build(ctx, &l[i].cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_msg(tk_interp_run(k, l[i].n, l[i].args) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    return n;
}

/* o and z of b (the result of a run) as a copy; then poisoned again. */
static void *take_result(hbufs *b) {
    size_t no = tu_bytes_of(&b->o), nz = tu_bytes_of(&b->z);
    char *r = malloc(no + nz);
    memcpy(r, b->o.data, no), memcpy(r + no, b->z.data, nz);
    ref_tensor_fill_all(&b->o, NAN), ref_tensor_fill_all(&b->z, NAN);
    return r;
}

/* tk_hedgehog_forward's launches on the interpreter, the maps fused (no
 * workspace: one launch) and apart (MAP of q, of k, then the forward
 * reading them): each against float64, and the two the same bits. */
START_TEST(run_api_interp) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const hcase *c = &cases[_i];
    hbufs b;
    bufs_make(&b, c);
    tk_hedgehog_params p = params_of(c, &b);
    void *gaps = ref_tensor_snapshot(&b.o); /* o has padding between rows */
    ck_assert_int_eq(run_launches(ctx, &p), 1);
    check_result("run api", c, &b);
    void *fused = take_result(&b);
    p.segments = 1;
    size_t bytes = 0;
    ck_assert_msg(tk_hedgehog_forward_workspace(ctx, &p, &bytes) == TK_OK, "%s", tk_ctx_error(ctx));
    p.workspace = tu_host_workspace(bytes), p.workspace_bytes = bytes;
    ck_assert_int_eq(run_launches(ctx, &p), 3);
    check_result("maps apart", c, &b);
    void *apart = take_result(&b);
    size_t n = tu_bytes_of(&b.o) + tu_bytes_of(&b.z);
    ck_assert_msg(!memcmp(fused, apart, n), "the maps apart changed the result's bits");
    ck_assert_int_eq(ref_tensor_stray_writes(&b.o, gaps), 0);
    free(gaps), free(fused), free(apart), free(p.workspace);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- sequence segments ------------------------------------------------------
 * Forced splits through the run API's launches (a state pass, then the
 * run) against float64, the maps fused and apart (the same bits): the last
 * segment's chunk partial, several value slices, normalized and not, with
 * z, biases, per-head weights; and the library's own split of a small
 * grid. */
typedef struct scase {
    hcase c;
    int32_t segments; /* 0: the library's choice (a workspace given) */
    int64_t ns;       /* the segments the plan makes                 */
} scase;

static const scase seg_cases[] = {
    {{TK_BF16, 64, 1, 1, 1, 0, 32, 4, 1, 2, 300, 64, 1.0, 0}, 3, 3},
    {{TK_F16, 128, 1, 0, 1, 1, 32, 2, 2, 1, 150, 40, 1.0, 1}, 2, 2},
    {{TK_BF16, 64, 0, 1, 0, 0, 16, 1, 1, 1, 70, 16, 0.125, 0}, 3, 3},
    {{TK_BF16, 64, 0, 0, 1, 1, 64, 4, 1, 2, 200, 64, 0.5, 1}, 2, 2},
    {{TK_F16, 64, 1, 1, 0, 0, 16, 1, 1, 1, 150, 32, 1.0, 0}, 0, 2},
};
#define NSEG (int)(sizeof seg_cases / sizeof seg_cases[0])

START_TEST(seg_interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const scase *sc = &seg_cases[_i];
    const hcase *c = &sc->c;
    hbufs b;
    bufs_make(&b, c);
    tk_hedgehog_params p = params_of(c, &b);
    p.segments = sc->segments;
    void *gaps = ref_tensor_snapshot(&b.o), *res[2];
    int64_t nv = (c->Dv + c->v_cols - 1) / c->v_cols;
    size_t st = (size_t)(nv * c->B * sc->ns * c->H * (2 * c->D + 16) * c->v_cols) * 4;
    size_t maps = (size_t)(2 * c->B * c->H * 2 * c->D * ((c->T + 127) / 128 * 128)) * 2;
    for (int fm = 1; fm >= 0; fm--) { /* fused, then apart */
        p.fused_maps = fm;
        size_t bytes = 0;
        ck_assert_msg(tk_hedgehog_forward_workspace(ctx, &p, &bytes) == TK_OK, "%s",
                      tk_ctx_error(ctx));
        ck_assert_uint_eq(bytes, fm ? st : (st + 255) / 256 * 256 + maps);
        p.workspace = tu_host_workspace(bytes), p.workspace_bytes = bytes;
        tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
        int n = tk_hedgehog_fwd_launches(&p, TK_HEDGEHOG_SMEM_MAX, SMS, l);
        ck_assert_int_eq(n, fm ? 2 : 4);
        ck_assert_int_eq(l[n - 2].cfg.seg, TK_HEDGEHOG_SEG_STATE);
        ck_assert_int_eq(l[n - 1].cfg.seg, TK_HEDGEHOG_SEG_RUN);
        run_launches(ctx, &p);
        check_result(fm ? "segments" : "segments, maps apart", c, &b);
        res[fm] = take_result(&b);
        free(p.workspace);
    }
    size_t n = tu_bytes_of(&b.o) + tu_bytes_of(&b.z);
    ck_assert_msg(!memcmp(res[0], res[1], n), "the maps apart changed the result's bits");
    ck_assert_int_eq(ref_tensor_stray_writes(&b.o, gaps), 0);
    free(gaps), free(res[0]), free(res[1]);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_hedgehog_forward_workspace: with the maps fused, 0 where the sequence
 * is not split (a grid of half the SMs or more, one segment asked for, too
 * few chunks), the plan's St otherwise; apart, the maps after it; its bad
 * input named. */
START_TEST(forward_workspace) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char buf[64];
    tk_hedgehog_params p = TK_HEDGEHOG_PARAMS_INIT;
    p.dtype = TK_BF16, p.head_dim = 64, p.batch = 1, p.heads = 1, p.seq = 4096;
    p.head_dim_v = 64, p.q = p.k = p.v = p.wq = p.wk = buf, p.o = buf;
    static const struct {
        int64_t B, H, T;
        int32_t segments;
        size_t bytes; /* D 64, Dv 64: v_cols 64, chunks of 64; F + 16 = 144 rows */
    } want[] = {
        {1, 1, 4096, 0, 16 * 144 * 64 * 4}, /* 64 chunks: 16 segments of 4 */
        {1, 1, 4096, 1, 0},
        {2, 33, 4096, 0, 0},                      /* 66 blocks, half of 132 SMs: no split */
        {1, 1, 200, 0, 0},                        /* 4 chunks: not 2 segments of 4 */
        {2, 3, 300, 3, 2 * 3 * 3 * 144 * 64 * 4}, /* forced */
        {1, 1, 64, 5, 0},                         /* one chunk */
    };
    for (size_t i = 0; i < 2 * sizeof want / sizeof want[0]; i++) { /* fused, then apart */
        size_t w = i % (sizeof want / sizeof want[0]);
        p.batch = want[w].B, p.heads = want[w].H, p.seq = want[w].T, p.segments = want[w].segments;
        p.fused_maps = w == i;
        /* apart: PQ and PK [B, H, 128, T to 128] bf16 after St, at 256 bytes */
        size_t bytes = 1,
               maps = (size_t)(2 * p.batch * p.heads * 128 * ((p.seq + 127) / 128 * 128)) * 2,
               need = p.fused_maps ? want[w].bytes : (want[w].bytes + 255) / 256 * 256 + maps;
        ck_assert_msg(tk_hedgehog_forward_workspace(ctx, &p, &bytes) == TK_OK, "%s",
                      tk_ctx_error(ctx));
        ck_assert_msg(bytes == need, "%zu: %zu bytes, want %zu", i, bytes, need);
    }
    ck_assert_int_eq(tk_hedgehog_forward_workspace(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(
        strstr(tk_ctx_error(ctx), "tk_hedgehog_forward_workspace: bytes is NULL"));
    size_t bytes;
    p.segments = -1;
    ck_assert_int_eq(tk_hedgehog_forward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "segments is -1"));
    p.segments = 0, p.seq = 0;
    ck_assert_int_eq(tk_hedgehog_forward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_hedgehog_forward_workspace: seq is 0"));
    ck_assert_int_eq(tk_hedgehog_forward_workspace(ctx, NULL, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_hedgehog_forward_workspace(NULL, &p, &bytes), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The GPU against the interpreter on the same inputs (poisoned outputs):
 * every tensor's whole allocation within the dtype's tolerance. */
START_TEST(fwd_gpu) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const hcase *c = &cases[_i];
    hbufs b;
    bufs_make(&b, c);
    tk_kernel *k = build(ctx, c);
    ref_tensor ts[12];
    tk_arg sc[12];
    int n = fwd_args(c, &b, ts, sc);
    double worst = 0;
    ck_assert_msg(th_compare(ctx, k, n, ts, sc, &worst) == TK_OK, "%s", tk_ctx_error(ctx));
    printf("hedgehog fwd gpu case %d: worst rel diff %.2e\n", _i, worst);
    /* NaN (a NaN where the other has none) fails too */
    ck_assert_msg(worst <= (c->dt == TK_BF16 ? 1e-2 : 3e-3), "worst rel diff %.3e", worst);
    tk_kernel_destroy(k);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_hedgehog_forward on the GPU (device buffers, outputs poisoned)
 * against float64. */
START_TEST(run_api_gpu) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const hcase *c = _i < NCASES ? &cases[_i] : &big_cases[_i - NCASES];
    hbufs b, d;
    bufs_make(&b, c);
    d = b;
    ref_tensor *host[9] = {&b.q, &b.k, &b.v, &b.o, &b.z, &b.wq, &b.wk, &b.bq, &b.bk};
    ref_tensor *dev[9] = {&d.q, &d.k, &d.v, &d.o, &d.z, &d.wq, &d.wk, &d.bq, &d.bk};
    for (int i = 0; i < 9; i++) ck_assert_ptr_nonnull(dev[i]->data = th_upload(ctx, host[i]));
    tk_hedgehog_params p = params_of(c, &d);
    ck_assert_msg(tk_hedgehog_forward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = 3; i < 5; i++) tu_dev_get(ctx, host[i], dev[i]->data);
    check_result("run api gpu", c, &b);
    for (int i = 0; i < 9; i++) tk_gpu_free(ctx, dev[i]->data);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("hedgehog");
    TCase *t = tu_tcase(s, "checks", 0);
    tcase_add_test(t, bad_configs);
    tcase_add_test(t, smem_formula);
    tcase_add_test(t, bad_params);
    tcase_add_test(t, config_fits);
    tcase_add_test(t, forward_workspace);
    t = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(t, fwd_interp_against_f64, 0, NCASES);
    tcase_add_loop_test(t, run_api_interp, 0, NCASES);
    tcase_add_loop_test(t, seg_interp_against_f64, 0, NSEG);
    t = tu_tcase(s, "gpu", 600);
    tcase_add_loop_test(t, fwd_gpu, 0, NCASES);
    tcase_add_loop_test(t, run_api_gpu, 0, NCASES + NBIG);
    return s;
}

int main(void) { return run_suite(suite()); }
