/* Hedgehog linear attention, backward (tk_hedgehog_backward; the kernels:
 * kernels/hedgehog_bwd.c, hedgehog_dphi.c, hedgehog_fmap.c, the forward
 * for dv, hedgehog_fm.c's MAP): the PREP kernel, then the run API's
 * launches on the interpreter against a float64 reference of every
 * gradient (dq, dk, dv, dWq, dWk, dbq, dbk) at ragged shapes, both head
 * dims and dtypes, normalized or not, bias or not, per-head weights, fla's
 * [B, T, H, D] layout, the maps fused and apart (the same bits); the
 * parameter checks and their messages; on the GPU, the run API against
 * float64 and twice for bitwise-equal results (skipped, with a line,
 * without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hedgehog_parts.h"
#include "kernels/hedgehog_run_parts.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/ref_hedgehog.h"
#include "util/run.h"
#include "util/runapi.h"

#define EPS 1e-6

typedef struct bcase {
    tk_dtype dt;
    int D, normalize, bias, per_head;
    int64_t B, H, T, Dv;
    double scale;
    int bthd; /* q, k, v, dout, dq, dk, dv laid out [B, T, H, D], through strides */
    int sms;  /* the GPU the plan is made for (few: more features and runs a block) */
} bcase;

/* dt, D, normalize, bias, per-head W, B, H, T, Dv, scale, bthd, sms. No
 * normalized single token: there o = v·a/(a + eps), the true gradients of
 * q, k and the weights are about eps and their relative error measures
 * only o's rounding. Nor a few (T 3, bf16): dφ is then mostly the
 * cancellation of dz_i against dn_i·v_j (Σ_j a_ij dA_ij = 0), and the
 * dtype's rounding of the mma inputs (dA, φ, G) leaves dq, dk at 0.5-2e-2
 * of float64 from run to run, the reference's o rounded as the kernels'. */
static const bcase cases[] = {
    {TK_BF16, 64, 1, 1, 0, 1, 2, 150, 64, 1.0, 0, 132},
    {TK_F16, 128, 1, 1, 0, 2, 1, 67, 40, 1.0, 1, 4},
    {TK_BF16, 64, 0, 0, 0, 1, 1, 97, 72, 0.125, 0, 132},
    {TK_BF16, 64, 1, 0, 1, 1, 2, 200, 48, 1.0, 1, 2},
    {TK_F16, 64, 0, 1, 1, 2, 2, 33, 16, 0.0884, 0, 132},
    {TK_BF16, 128, 0, 1, 0, 1, 1, 1, 128, 1.0, 0, 132},
    {TK_BF16, 128, 0, 1, 1, 1, 2, 90, 32, 0.0625, 1, 8},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* GPU only: many chunks, the library's shapes */
static const bcase big_cases[] = {
    {TK_BF16, 128, 1, 1, 0, 2, 2, 1100, 128, 1.0, 1, 0},
    {TK_BF16, 64, 0, 0, 0, 1, 3, 2049, 64, 0.0884, 0, 0},
    {TK_F16, 128, 1, 1, 1, 1, 2, 3000, 96, 1.0, 1, 0},
    {TK_BF16, 64, 1, 1, 0, 4, 4, 1024, 256, 1.0, 0, 0},
};
#define NBIG (int)(sizeof big_cases / sizeof big_cases[0])

/* the inputs, then the outputs (poisoned) */
typedef struct bbufs {
    ref_tensor q, k, v, dout, o, z, wq, wk, bq, bk;
    ref_tensor dq, dk, dv, dwq, dwk, dbq, dbk;
} bbufs;
#define NBUFS 17
#define NIN   10

static ref_tensor *buf_at(bbufs *b, int i) { return &b->q + i; }

/* The reference's gradients, dense. */
typedef struct grads {
    double *dq, *dk, *dv, *dwq, *dwk, *dbq, *dbk;
} grads;

static void bufs_make(bbufs *b, const bcase *c) {
    int64_t dq[4] = {c->B, c->H, c->T, c->D}, dv[4] = {c->B, c->H, c->T, c->Dv},
            dz[3] = {c->B, c->H, c->T};
    int64_t hw = c->per_head ? c->H : 1, dw[3] = {hw, c->D, c->D}, db[2] = {hw, c->D};
    static const int perm[4] = {0, 2, 1, 3};
    const int *pm = c->bthd ? perm : NULL;
    b->q = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->k = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->v = ref_tensor_new_layout(c->dt, 4, dv, pm, 0);
    b->dout = ref_tensor_new_layout(c->dt, 4, dv, pm, 8);
    b->o = ref_tensor_new(c->dt, 4, dv);
    b->z = ref_tensor_new(TK_F32, 3, dz);
    b->wq = ref_tensor_new(c->dt, 3, dw), b->wk = ref_tensor_new(c->dt, 3, dw);
    b->bq = ref_tensor_new(c->dt, 2, db), b->bk = ref_tensor_new(c->dt, 2, db);
    b->dq = ref_tensor_new_layout(c->dt, 4, dq, pm, 8);
    b->dk = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    b->dv = ref_tensor_new_layout(c->dt, 4, dv, pm, 8);
    b->dwq = ref_tensor_new(c->dt, 3, dw), b->dwk = ref_tensor_new(c->dt, 3, dw);
    b->dbq = ref_tensor_new(c->dt, 2, db), b->dbk = ref_tensor_new(c->dt, 2, db);
    ref_tensor_random(&b->q, -1.0, 1.0), ref_tensor_random(&b->k, -1.0, 1.0);
    ref_tensor_random(&b->v, -1.0, 1.0), ref_tensor_random(&b->dout, -1.0, 1.0);
    double ws = 2.0 / sqrt((double)c->D); /* y's spread about 1 */
    ref_tensor_random(&b->wq, -ws, ws), ref_tensor_random(&b->wk, -ws, ws);
    ref_tensor_random(&b->bq, -0.5, 0.5), ref_tensor_random(&b->bk, -0.5, 0.5);
    for (int i = NIN; i < NBUFS; i++) ref_tensor_fill_all(buf_at(b, i), NAN);
}

static void bufs_free(bbufs *b) {
    for (int i = 0; i < NBUFS; i++) ref_tensor_free(buf_at(b, i));
}

/* ---- the reference ---------------------------------------------------------- */
typedef struct head_in {
    const double *q, *k, *v, *dout, *wq, *wk, *bq, *bk;
} head_in;

/* One (batch, head) of T tokens: o, z (the forward's, into o and z; o
 * rounded into ot too, the backward's input), then dq, dk, dv written and
 * dW, db added to (weights' entry of the head). dz_i takes the rounded o,
 * as the kernels do: with few keys dφ is mostly the cancellation of dz_i
 * against dn_i·v_j, and only the same o makes the reference the exact
 * gradient of the kernels' inputs (ref_attention_bwd's Drows, likewise). */
static void ref_head(const bcase *c, const head_in *in, ref_tensor *ot, double *o, double *z,
                     grads *g, int64_t bh, int64_t hw) {
    int D = c->D, F = 2 * D;
    int64_t T = c->T, Dv = c->Dv;
    double s = c->scale;
    double *pq = malloc(sizeof(double) * (size_t)(T * F)),
           *pk = malloc(sizeof(double) * (size_t)(T * F));
    double *dpq = calloc((size_t)(T * F), sizeof(double)),
           *dpk = calloc((size_t)(T * F), sizeof(double));
    double *dn = malloc(sizeof(double) * (size_t)(T * Dv)),
           *dz = malloc(sizeof(double) * (size_t)T);
    for (int64_t i = 0; i < T; i++) {
        ref_hedgehog_phi(in->q + i * D, in->wq, c->bias ? in->bq : NULL, D, pq + i * F);
        ref_hedgehog_phi(in->k + i * D, in->wk, c->bias ? in->bk : NULL, D, pk + i * F);
    }
    for (int64_t i = 0; i < T; i++) { /* the forward, and dnum, dz */
        double zi = 0, *oi = o + (bh * T + i) * Dv;
        for (int64_t d = 0; d < Dv; d++) oi[d] = 0;
        for (int64_t j = 0; j <= i; j++) {
            double a = 0;
            for (int f = 0; f < F; f++) a += pq[i * F + f] * pk[j * F + f];
            a *= s, zi += a;
            for (int64_t d = 0; d < Dv; d++) oi[d] += a * in->v[j * Dv + d];
        }
        z[bh * T + i] = zi;
        double den = c->normalize ? zi + EPS : 1, dot = 0;
        for (int64_t d = 0; d < Dv; d++) {
            oi[d] /= den;
            ref_tensor_set(ot, (bh * T + i) * Dv + d, oi[d]);
            dot += in->dout[i * Dv + d] * ref_tensor_get(ot, (bh * T + i) * Dv + d);
            dn[i * Dv + d] = in->dout[i * Dv + d] / den;
        }
        dz[i] = c->normalize ? -dot / den : 0;
    }
    double *dv = g->dv + bh * T * Dv;
    memset(dv, 0, sizeof(double) * (size_t)(T * Dv));
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j <= i; j++) {
            double a = 0, da = dz[i];
            for (int f = 0; f < F; f++) a += pq[i * F + f] * pk[j * F + f];
            for (int64_t d = 0; d < Dv; d++) {
                dv[j * Dv + d] += s * a * dn[i * Dv + d];
                da += dn[i * Dv + d] * in->v[j * Dv + d];
            }
            for (int f = 0; f < F; f++) {
                dpq[i * F + f] += s * da * pk[j * F + f];
                dpk[j * F + f] += s * da * pq[i * F + f];
            }
        }
    for (int64_t i = 0; i < T; i++) {
        double *dbq = c->bias ? g->dbq + hw * D : NULL, *dbk = c->bias ? g->dbk + hw * D : NULL;
        ref_hedgehog_phi_bwd(in->q + i * D, in->wq, pq + i * F, dpq + i * F, D,
                             g->dq + (bh * T + i) * D, g->dwq + hw * D * D, dbq);
        ref_hedgehog_phi_bwd(in->k + i * D, in->wk, pk + i * F, dpk + i * F, D,
                             g->dk + (bh * T + i) * D, g->dwk + hw * D * D, dbk);
    }
    free(pq), free(pk), free(dpq), free(dpk), free(dn), free(dz);
}

/* Every gradient of b's inputs in float64 (from the same rounded values),
 * and the forward's o, z into b's o (rounded) and z (f32): the backward's
 * inputs. */
static void reference(const bcase *c, bbufs *b, grads *g) {
    double *in[NIN];
    for (int i = 0; i < NIN; i++) in[i] = ref_tensor_to_f64(buf_at(b, i));
    double *o = in[4], *z = in[5];
    int64_t D = c->D, T = c->T, Dv = c->Dv;
    for (int i = 0; i < 7; i++)
        (&g->dq)[i] = calloc((size_t)ref_tensor_count(buf_at(b, NIN + i)), sizeof(double));
    for (int64_t bh = 0; bh < c->B * c->H; bh++) {
        int64_t e = c->per_head ? bh % c->H : 0;
        head_in h = {in[0] + bh * T * D,  in[1] + bh * T * D, in[2] + bh * T * Dv,
                     in[3] + bh * T * Dv, in[6] + e * D * D,  in[7] + e * D * D,
                     in[8] + e * D,       in[9] + e * D};
        ref_head(c, &h, &b->o, o, z, g, bh, e);
    }
    for (int64_t i = 0; i < ref_tensor_count(&b->z); i++) ref_tensor_set(&b->z, i, z[i]);
    for (int i = 0; i < NIN; i++) free(in[i]);
}

static void grads_free(grads *g) {
    for (int i = 0; i < 7; i++) free((&g->dq)[i]);
}

/* ---- the run API ---------------------------------------------------------------- */
static tk_hedgehog_bwd_params params_of(const bcase *c, bbufs *b, void *ws, size_t ws_bytes) {
    tk_hedgehog_bwd_params p = TK_HEDGEHOG_BWD_PARAMS_INIT;
    p.dtype = c->dt, p.head_dim = c->D, p.normalize = c->normalize, p.per_head = c->per_head;
    p.scale = (float)c->scale, p.eps = (float)EPS;
    p.batch = c->B, p.heads = c->H, p.seq = c->T, p.head_dim_v = c->Dv;
    p.q = b->q.data, p.k = b->k.data, p.v = b->v.data, p.dout = b->dout.data;
    if (c->normalize) p.o = b->o.data, p.z = b->z.data;
    p.wq = b->wq.data, p.wk = b->wk.data;
    if (c->bias) p.bq = b->bq.data, p.bk = b->bk.data, p.dbq = b->dbq.data, p.dbk = b->dbk.data;
    p.dq = b->dq.data, p.dk = b->dk.data, p.dv = b->dv.data;
    p.dwq = b->dwq.data, p.dwk = b->dwk.data;
    tu_strides(p.q_strides, &b->q, c->bthd), tu_strides(p.k_strides, &b->k, c->bthd);
    tu_strides(p.v_strides, &b->v, c->bthd), tu_strides(p.dout_strides, &b->dout, true);
    tu_strides(p.dq_strides, &b->dq, true), tu_strides(p.dk_strides, &b->dk, c->bthd);
    tu_strides(p.dv_strides, &b->dv, true);
    p.workspace = ws, p.workspace_bytes = ws_bytes;
    return p;
}

/* Every gradient against the reference's; prints a line. */
static void check_grads(const char *what, const bcase *c, bbufs *b, const grads *g) {
    static const char *const names[7] = {"dq", "dk", "dv", "dWq", "dWk", "dbq", "dbk"};
    double tol = c->dt == TK_BF16 ? 1e-2 : 5e-3, e[7] = {0}, worst = 0;
    char line[256];
    int at =
        snprintf(line, sizeof line, "hedgehog bwd %s %s D%d%s%s%s B%lld H%lld T%lld Dv%lld:", what,
                 tk_dtype_name(c->dt), c->D, c->normalize ? " norm" : "", c->bias ? " bias" : "",
                 c->per_head ? " per-head" : "", (long long)c->B, (long long)c->H, (long long)c->T,
                 (long long)c->Dv);
    for (int i = 0; i < (c->bias ? 7 : 5); i++) {
        e[i] = ref_tensor_rel_err(buf_at(b, NIN + i), (&g->dq)[i]);
        worst = isnan(e[i]) || e[i] > worst ? e[i] : worst;
        at += snprintf(line + at, sizeof line - (size_t)at, " %s %.1e", names[i], e[i]);
    }
    printf("%s\n", line);
    ck_assert_msg(worst <= tol, "%s", line); /* NaN fails */
}

/* The launches for p on the interpreter, the plan made for c->sms SMs;
 * returns their count. */
static int run_interp(tk_ctx *ctx, const tk_hedgehog_bwd_params *p, int sms) {
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    int n = tk_hedgehog_bwd_launches(p, TK_HEDGEHOG_SMEM_MAX, sms, l);
    for (int i = 0; i < n; i++) {
        tk_kernel *k = NULL;
        ck_assert_msg(tk_hedgehog_build(ctx, &l[i].cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_msg(tk_interp_run(k, l[i].n, l[i].args) == TK_OK, "launch %d: %s", i,
                      tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    return n;
}

/* The plan for p reads the maps apart (three MAPs; DPHI twice and dv's
 * forward with phi) or fused (none of them). */
static void check_plan(const tk_hedgehog_bwd_params *p, int sms, bool apart) {
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    int n = tk_hedgehog_bwd_launches(p, TK_HEDGEHOG_SMEM_MAX, sms, l), maps = 0, phi = 0;
    for (int i = 0; i < n; i++) maps += l[i].cfg.part == TK_HEDGEHOG_MAP, phi += l[i].cfg.phi;
    ck_assert_int_eq(maps, apart ? 3 : 0);
    ck_assert_int_eq(phi, apart ? 3 : 0);
}

/* The gradients of a run, copied (res[i]: output i); then poisoned again
 * for the next run. */
static void take_grads(bbufs *b, void *res[NBUFS - NIN]) {
    for (int i = NIN; i < NBUFS; i++) {
        res[i - NIN] = ref_tensor_snapshot(buf_at(b, i));
        ref_tensor_fill_all(buf_at(b, i), NAN);
    }
}

/* The backward's launches with the maps fused (the kernels map q and k
 * themselves: PREP, DPHI, FMAP, REDUCEs, DPHI, FMAP, REDUCEs, FWD) and
 * apart (three MAPs more, their φᵀ in a workspace that grows by them):
 * each against float64, and every gradient the same bits. */
START_TEST(bwd_interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const bcase *c = &cases[_i];
    bbufs b;
    grads g;
    bufs_make(&b, c);
    reference(c, &b, &g);
    void *gaps[2] = {ref_tensor_snapshot(&b.dq), ref_tensor_snapshot(&b.dv)};
    void *res[2][NBUFS - NIN];
    size_t bytes[2];
    for (int fm = 1; fm >= 0; fm--) { /* fused, then apart */
        tk_hedgehog_bwd_params p = params_of(c, &b, NULL, 0);
        p.fused_maps = fm;
        bytes[fm] = tk_hedgehog_bwd_workspace_bytes(&p, TK_HEDGEHOG_SMEM_MAX, c->sms);
        p.workspace = tu_host_workspace(bytes[fm]), p.workspace_bytes = bytes[fm];
        check_plan(&p, c->sms, !fm);
        ck_assert_int_eq(run_interp(ctx, &p, c->sms), (c->bias ? 10 : 8) + (fm ? 0 : 3));
        check_grads(fm ? "interp, maps fused" : "interp, maps apart", c, &b, &g);
        ck_assert_int_eq(ref_tensor_stray_writes(&b.dq, gaps[0]), 0);
        ck_assert_int_eq(ref_tensor_stray_writes(&b.dv, gaps[1]), 0);
        take_grads(&b, res[fm]);
        free(p.workspace);
    }
    /* apart: PK, PQr, PKr [B, H, 2D, ceil(T/128)·128] in the dtype after the rest */
    size_t map = (size_t)(c->B * c->H * 2 * c->D * ((c->T + 127) / 128 * 128)) * 2;
    ck_assert_uint_eq(bytes[0], bytes[1] + 3 * ((map + 255) / 256 * 256));
    for (int i = 0; i < NBUFS - NIN; i++)
        ck_assert_msg(!memcmp(res[0][i], res[1][i], tu_bytes_of(buf_at(&b, NIN + i))),
                      "the maps apart changed output %d's bits", i);
    for (int i = 0; i < NBUFS - NIN; i++) free(res[0][i]), free(res[1][i]);
    free(gaps[0]), free(gaps[1]);
    grads_free(&g);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- PREP alone ------------------------------------------------------------------ */
START_TEST(prep_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    int norm = _i;
    tk_dtype dt = norm ? TK_BF16 : TK_F16;
    int64_t B = 2, H = 1, T = 77, Dv = 40, dv[4] = {B, H, T, Dv}, dz[3] = {B, H, T};
    ref_tensor dO = ref_tensor_new(dt, 4, dv), O = ref_tensor_new(dt, 4, dv);
    ref_tensor Z = ref_tensor_new(TK_F32, 3, dz), G = ref_tensor_new_layout(dt, 4, dv, NULL, 8);
    ref_tensor C = ref_tensor_new(TK_F32, 3, dz);
    ref_tensor_random(&dO, -1, 1), ref_tensor_random(&O, -1, 1), ref_tensor_random(&Z, 0.5, 4);
    ref_tensor_fill_all(&G, NAN), ref_tensor_fill_all(&C, NAN);
    void *gaps = ref_tensor_snapshot(&G);
    double s = 0.7, *d = ref_tensor_to_f64(&dO), *o = ref_tensor_to_f64(&O);
    double *z = ref_tensor_to_f64(&Z), *g = malloc(sizeof(double) * (size_t)(B * H * T * Dv));
    double *c = malloc(sizeof(double) * (size_t)(B * H * T));
    for (int64_t r = 0; r < B * H * T; r++) {
        double den = norm ? z[r] + EPS : 1, dot = 0;
        for (int64_t j = 0; j < Dv; j++) {
            g[r * Dv + j] = s * d[r * Dv + j] / den;
            dot += d[r * Dv + j] * o[r * Dv + j];
        }
        c[r] = -s * dot / den;
    }
    tk_hedgehog_config cfg = {.dtype = dt, .normalize = norm, .part = TK_HEDGEHOG_BWD_PREP};
    tk_kernel *k = NULL;
    ck_assert_msg(tk_hedgehog_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_arg a[7];
    int n = 0;
    a[n++] = ref_tensor_arg(&dO);
    if (norm) a[n++] = ref_tensor_arg(&O), a[n++] = ref_tensor_arg(&Z);
    a[n++] = ref_tensor_arg(&G);
    if (norm) a[n++] = ref_tensor_arg(&C);
    a[n++] = tk_arg_f32((float)s), a[n++] = tk_arg_f32((float)EPS);
    ck_assert_msg(tk_interp_run(k, n, a) == TK_OK, "%s", tk_ctx_error(ctx));
    double eg = ref_tensor_rel_err(&G, g), ec = norm ? ref_tensor_rel_err(&C, c) : 0;
    printf("hedgehog prep %s: G %.2e C %.2e\n", norm ? "norm" : "plain", eg, ec);
    ck_assert_msg(eg <= 1e-2 && ec <= 1e-5, "G %.3e C %.3e", eg, ec);
    ck_assert_int_eq(ref_tensor_stray_writes(&G, gaps), 0);
    tk_kernel_destroy(k);
    free(gaps), free(d), free(o), free(z), free(g), free(c);
    ref_tensor *all[] = {&dO, &O, &Z, &G, &C};
    for (int i = 0; i < 5; i++) ref_tensor_free(all[i]);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the checks -------------------------------------------------------------------- */
START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char buf[64]; /* never read: every call fails its checks first */
    tk_hedgehog_bwd_params ok = TK_HEDGEHOG_BWD_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.head_dim = 64, ok.batch = 2, ok.heads = 3, ok.seq = 5;
    ok.head_dim_v = 64, ok.q = ok.k = ok.v = ok.dout = ok.wq = ok.wk = buf;
    ok.dq = ok.dk = ok.dv = ok.dwq = ok.dwk = buf;
    static const char *const msg[] = {
        "dtype is f32",
        "head_dim is 32",
        "normalize is 2",
        "per_head is 5",
        "scale is -1",
        "eps is nan",
        "seq is 0",
        "head_dim_v is 20",
        "dout is NULL",
        "dwk is NULL",
        "o is NULL (normalize)",
        "z is NULL (normalize)",
        "dbq is NULL (bias)",
        "bq is NULL and bk is not",
        "dk_strides[3] is 2",
        "z_strides[2] is -3",
        "workspace is NULL",
        "fused_maps is 2; expected 0 or 1",
        "struct_size",
    };
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_hedgehog_bwd_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_F32; break;
        case 1: p.head_dim = 32; break;
        case 2: p.normalize = 2; break;
        case 3: p.per_head = 5; break;
        case 4: p.scale = -1; break;
        case 5: p.eps = NAN; break;
        case 6: p.seq = 0; break;
        case 7: p.head_dim_v = 20; break;
        case 8: p.dout = NULL; break;
        case 9: p.dwk = NULL; break;
        case 10: p.normalize = 1, p.z = (float *)buf; break;
        case 11: p.normalize = 1, p.o = buf; break;
        case 12: p.bq = p.bk = buf, p.dbk = buf; break;
        case 13: p.bk = buf, p.dbq = p.dbk = buf; break;
        case 14: p.dk_strides[3] = 2; break;
        case 15: p.normalize = 1, p.o = buf, p.z = (float *)buf, p.z_strides[2] = -3; break;
        case 16: break;
        case 17: p.fused_maps = 2; break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_hedgehog_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_hedgehog_backward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_hedgehog_backward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    size_t bytes = 0;
    ck_assert_int_eq(tk_hedgehog_backward_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "bytes is NULL"), "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_hedgehog_backward_workspace(ctx, &ok, &bytes), TK_OK);
    ck_assert_uint_gt(bytes, 0);
    tk_hedgehog_bwd_params p = ok;
    p.workspace = buf, p.workspace_bytes = bytes - 1;
    ck_assert_int_eq(tk_hedgehog_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "the call needs"), "%s", tk_ctx_error(ctx));
    p.workspace = buf + 1, p.workspace_bytes = bytes; /* its parts' offsets are 256-aligned */
    ck_assert_int_eq(tk_hedgehog_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "workspace is not 256-byte aligned"), "%s",
                  tk_ctx_error(ctx));
    p.fused_maps = 1; /* a smaller workspace then: the maps' share of it */
    size_t fused = 0;
    ck_assert_int_eq(tk_hedgehog_backward_workspace(ctx, &p, &fused), TK_OK);
    ck_assert_uint_lt(fused, bytes);
    p.seq = -4;
    ck_assert_int_eq(tk_hedgehog_backward_prepare(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "tk_hedgehog_backward_prepare: seq is -4"), "%s",
                  tk_ctx_error(ctx));
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_part) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = (tk_kernel *)1;
    tk_hedgehog_config c = {.dtype = TK_BF16, .head_dim = 64, .part = 9};
    ck_assert_int_eq(tk_hedgehog_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(k);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "part is 9"), "%s", tk_ctx_error(ctx));
    c = (tk_hedgehog_config){.dtype = TK_BF16, .head_dim = 64, .f_cols = 32};
    ck_assert_int_eq(tk_hedgehog_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "f_cols is 32; the forward takes 0"), "%s",
                  tk_ctx_error(ctx));
    c = (tk_hedgehog_config){
        .dtype = TK_BF16, .head_dim = 64, .part = TK_HEDGEHOG_BWD_FMAP, .phi = 1};
    ck_assert_int_eq(tk_hedgehog_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "phi is 1; only the forward (part 0) and BWD_DPHI"),
                  "%s", tk_ctx_error(ctx));
    c = (tk_hedgehog_config){.dtype = TK_F32, .part = TK_HEDGEHOG_BWD_PREP};
    ck_assert_int_eq(tk_hedgehog_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "dtype is f32"), "%s", tk_ctx_error(ctx));
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the GPU -------------------------------------------------------------------------- */
/* tk_hedgehog_backward on device buffers (outputs and workspace poisoned)
 * against float64, then again, then with the maps fused (the workspace
 * the apart plan's, which holds the fused one's): the gradients bitwise
 * the same each time. */
START_TEST(run_api_gpu) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const bcase *c = _i < NCASES ? &cases[_i] : &big_cases[_i - NCASES];
    bbufs b, d;
    grads g;
    bufs_make(&b, c);
    reference(c, &b, &g);
    d = b;
    for (int i = 0; i < NBUFS; i++)
        ck_assert_ptr_nonnull(buf_at(&d, i)->data = th_upload(ctx, buf_at(&b, i)));
    tk_hedgehog_bwd_params p = params_of(c, &d, NULL, 0);
    size_t bytes;
    ck_assert_int_eq(tk_hedgehog_backward_workspace(ctx, &p, &bytes), TK_OK);
    void *ws = NULL;
    ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, &ws), TK_OK);
    ck_assert_int_eq(tk_gpu_memset(ctx, ws, 0xff, bytes), TK_OK);
    p.workspace = ws, p.workspace_bytes = bytes;
    void *first[7];
    for (int run = 0; run < 3; run++) {
        p.fused_maps = run == 2;
        ck_assert_msg(tk_hedgehog_backward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
        for (int i = NIN; i < NBUFS; i++) {
            ref_tensor *h = buf_at(&b, i);
            size_t n = tu_bytes_of(h);
            tu_dev_get(ctx, h, buf_at(&d, i)->data);
            if (!run)
                first[i - NIN] = ref_tensor_snapshot(h);
            else
                ck_assert_msg(!memcmp(first[i - NIN], h->data, n), "run %d%s differs in output %d",
                              run + 1, run == 2 ? " (maps fused)" : "", i - NIN);
        }
        if (!run) check_grads("gpu", c, &b, &g);
    }
    for (int i = 0; i < 7; i++) free(first[i]);
    for (int i = 0; i < NBUFS; i++) tk_gpu_free(ctx, buf_at(&d, i)->data);
    tk_gpu_free(ctx, ws);
    grads_free(&g);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("hedgehog_bwd");
    TCase *t = tu_tcase(s, "checks", 0);
    tcase_add_test(t, bad_params);
    tcase_add_test(t, bad_part);
    t = tu_tcase(s, "interp", 900);
    tcase_add_loop_test(t, prep_against_f64, 0, 2);
    tcase_add_loop_test(t, bwd_interp_against_f64, 0, NCASES);
    t = tu_tcase(s, "gpu", 900);
    tcase_add_loop_test(t, run_api_gpu, 0, NCASES + NBIG);
    return s;
}

int main(void) { return run_suite(suite()); }
