/* The ready-made entry points on the interpreter backend (tk_ctx_set_backend,
 * tk/tk_jit.h) through the public API only, as a C host without a GPU runs
 * them: on a context set to TK_BACKEND_INTERP, tk_gpu_alloc'd host memory,
 * uploaded random inputs, NaN-poisoned outputs (tk_gpu_memset 0xff), each
 * entry point, and the downloaded results against float64 references:
 * tk_gemm, tk_attention_forward (the Hopper kernel sm_90a picks, mma.sync
 * asked for, and an sm_80 context), tk_attention_backward, tk_norm_forward
 * and _backward, tk_rotary, tk_based_forward, tk_hedgehog_forward (with and
 * without a workspace) and tk_hedgehog_backward. The backend's own rules are
 * test_backend_interp.c's. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/ref.h"
#include "util/ref_hedgehog.h"
#include "util/ref_rotary.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char tmp_root[256];

/* ---- GEMM -------------------------------------------------------------------- */
static void gemm_case(tk_ctx *ctx, tk_dtype in, tk_dtype out, int tb, int64_t M, int64_t N,
                      int64_t K, const tk_gemm_config *cfg) {
    int64_t da[2] = {M, K}, db[2] = {tb ? N : K, tb ? K : N}, dc[2] = {M, N};
    ref_tensor a = ref_tensor_new(in, 2, da), b = ref_tensor_new(in, 2, db);
    ref_tensor c = ref_tensor_new(out, 2, dc);
    ref_tensor_random(&a, -1, 1), ref_tensor_random(&b, -1, 1);
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = in, p.out_dtype = out, p.transpose_b = tb, p.m = M, p.n = N, p.k = K;
    p.config = cfg;
    void *dc_ = tu_dev_out(ctx, &c);
    p.a = tu_dev_in(ctx, &a), p.b = tu_dev_in(ctx, &b), p.c = dc_;
    ck_assert_msg(tk_gemm(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &c, dc_);
    double *fa = ref_tensor_to_f64(&a), *fb = ref_tensor_to_f64(&b), *want = tu_f64_new(M * N);
    ref_gemm(fa, fb, want, M, N, K, tb);
    char what[64];
    snprintf(what, sizeof what, "gemm %s->%s%s %lldx%lldx%lld%s", tk_dtype_name(in),
             tk_dtype_name(out), tb ? " B^T" : "", (long long)M, (long long)N, (long long)K,
             cfg && cfg->wgmma ? " wgmma" : "");
    tu_expect_close(what, &c, want, tu_tol_of(in)); /* a and b: tk_ctx_destroy frees them */
    free(fa), free(fb), free(want);
    ref_tensor_free(&a), ref_tensor_free(&b), ref_tensor_free(&c);
}

START_TEST(gemm) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    gemm_case(ctx, TK_BF16, TK_BF16, 0, 70, 50, 40, NULL);
    gemm_case(ctx, TK_F16, TK_F32, 1, 33, 65, 24, NULL);
    /* the persistent wgmma kernel sm_90a gets for large sizes: its grid is
     * tk_program_resident_blocks, here the set target's estimate */
    tk_gemm_config w = tk_gemm_config_for(TK_BF16, TK_F32, 0, 8192, 8192, "sm_90a");
    ck_assert(w.wgmma && w.tma);
    gemm_case(ctx, TK_BF16, TK_F32, 0, 150, 70, 72, &w);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- Attention ---------------------------------------------------------------- */
typedef struct acase {
    tk_dtype dt;
    int causal, bnhd; /* bnhd: Q, K, V, O laid out [B, N, H, D] through strides */
    int64_t B, Hq, Hkv, Nq, Nkv, D;
    tk_attn_kernel kernel, expect; /* asked for; what runs */
} acase;

typedef struct atensors {
    ref_tensor q, k, v, o, l;
} atensors;

static void atensors_make(atensors *t, const acase *c) {
    static const int perm[4] = {0, 2, 1, 3};
    const int *pm = c->bnhd ? perm : NULL;
    int64_t dq[4] = {c->B, c->Hq, c->Nq, c->D}, dk[4] = {c->B, c->Hkv, c->Nkv, c->D};
    int64_t dl[3] = {c->B, c->Hq, c->Nq};
    t->q = ref_tensor_new_layout(c->dt, 4, dq, pm, 0);
    t->k = ref_tensor_new_layout(c->dt, 4, dk, pm, 0);
    t->v = ref_tensor_new_layout(c->dt, 4, dk, pm, 0);
    t->o = ref_tensor_new_layout(c->dt, 4, dq, pm, 8);
    t->l = ref_tensor_new(TK_F32, 3, dl);
    ref_tensor_random(&t->q, -2, 2), ref_tensor_random(&t->k, -2, 2);
    ref_tensor_random(&t->v, -1, 1);
}

static void atensors_free(atensors *t) {
    for (ref_tensor *r = &t->q; r <= &t->l; r++) ref_tensor_free(r);
}

static void attn_fwd_case(tk_ctx *ctx, const acase *c) {
    atensors t;
    atensors_make(&t, c);
    tk_attention_params p = TK_ATTENTION_PARAMS_INIT;
    p.dtype = c->dt, p.head_dim = (int32_t)c->D, p.causal = c->causal, p.kernel = c->kernel;
    p.batch = c->B, p.heads_q = c->Hq, p.heads_kv = c->Hkv, p.seq_q = c->Nq, p.seq_kv = c->Nkv;
    for (int d = 0; d < 4; d++) {
        p.q_strides[d] = t.q.strides[d], p.k_strides[d] = t.k.strides[d];
        p.v_strides[d] = t.v.strides[d], p.o_strides[d] = t.o.strides[d];
    }
    void *o = tu_dev_out(ctx, &t.o), *l = tu_dev_out(ctx, &t.l);
    p.q = tu_dev_in(ctx, &t.q), p.k = tu_dev_in(ctx, &t.k), p.v = tu_dev_in(ctx, &t.v), p.o = o,
    p.lse = l;
    tk_attn_kernel runs;
    ck_assert_msg(tk_attention_kernel_for(ctx, &p, &runs) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(runs, c->expect);
    ck_assert_msg(tk_attention_forward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &t.o, o), tu_dev_take(ctx, &t.l, l);
    double *q = ref_tensor_to_f64(&t.q), *k = ref_tensor_to_f64(&t.k), *v = ref_tensor_to_f64(&t.v);
    double *wo = tu_f64_new(ref_tensor_count(&t.o)), *wl = tu_f64_new(ref_tensor_count(&t.l));
    ref_attention(q, k, v, wo, wl, c->B, c->Hq, c->Hkv, c->Nq, c->Nkv, c->D,
                  1.0 / sqrt((double)c->D), c->causal);
    char what[80];
    snprintf(what, sizeof what, "attention %s %s D%lld %lld/%lld x %lld/%lld%s",
             c->kernel ? "" : "auto", c->expect == TK_ATTN_WGMMA ? "wgmma" : "mma.sync",
             (long long)c->D, (long long)c->Hq, (long long)c->Hkv, (long long)c->Nq,
             (long long)c->Nkv, c->causal ? " causal" : "");
    tu_expect_close(what, &t.o, wo, tu_tol_of(c->dt));
    tu_expect_close("  its lse", &t.l, wl, 1e-3);
    tk_gpu_free(ctx, (void *)p.q), tk_gpu_free(ctx, (void *)p.k), tk_gpu_free(ctx, (void *)p.v);
    free(q), free(k), free(v), free(wo), free(wl);
    atensors_free(&t);
}

/* sm_90a (the default target): the library's choice is the Hopper kernel;
 * mma.sync runs when asked for. */
START_TEST(attention_forward) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    const acase a = {TK_BF16, 1, 0, 1, 4, 2, 70, 70, 64, TK_ATTN_AUTO, TK_ATTN_WGMMA};
    const acase b = {TK_F16, 0, 1, 1, 2, 1, 50, 77, 64, TK_ATTN_MMA_SYNC, TK_ATTN_MMA_SYNC};
    attn_fwd_case(ctx, &a);
    attn_fwd_case(ctx, &b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* An sm_80 context: the library's choice is mma.sync. */
START_TEST(attention_forward_sm80) {
    tk_ctx *ctx = tu_interp_ctx("sm_80", 108);
    const acase a = {TK_BF16, 1, 1, 2, 2, 2, 40, 60, 128, TK_ATTN_AUTO, TK_ATTN_MMA_SYNC};
    attn_fwd_case(ctx, &a);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The backward from O and L of the float64 forward (rounded as the kernels
 * read them), against float64 gradients with the same row sums D. */
START_TEST(attention_backward) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    const acase c = {TK_BF16, 1, 0, 1, 2, 1, 40, 40, 64, TK_ATTN_AUTO, TK_ATTN_WGMMA};
    atensors t;
    atensors_make(&t, &c);
    ref_tensor dout = ref_tensor_new(c.dt, 4, t.q.dims), dq = ref_tensor_new(c.dt, 4, t.q.dims);
    ref_tensor dk = ref_tensor_new(c.dt, 4, t.k.dims), dv = ref_tensor_new(c.dt, 4, t.k.dims);
    ref_tensor_random(&dout, -1, 1);
    double *q = ref_tensor_to_f64(&t.q), *k = ref_tensor_to_f64(&t.k), *v = ref_tensor_to_f64(&t.v),
           *g = ref_tensor_to_f64(&dout);
    int64_t nq = ref_tensor_count(&t.q), nk = ref_tensor_count(&t.k), nl = ref_tensor_count(&t.l);
    double *o = tu_f64_new(nq), *l = tu_f64_new(nl), *drows = tu_f64_new(nl);
    double *wq = tu_f64_new(nq), *wk = tu_f64_new(nk), *wv = tu_f64_new(nk), scale = 0.125;
    ref_attention(q, k, v, o, l, c.B, c.Hq, c.Hkv, c.Nq, c.Nkv, c.D, scale, 1);
    for (int64_t i = 0; i < nq; i++) ref_tensor_set(&t.o, i, o[i]);
    for (int64_t i = 0; i < nl; i++) ref_tensor_set(&t.l, i, l[i]);
    double *os = ref_tensor_to_f64(&t.o);
    for (int64_t r = 0; r < nl; r++)
        for (int64_t d = 0; d < c.D; d++) drows[r] += g[r * c.D + d] * os[r * c.D + d];
    ref_attention_bwd(q, k, v, g, drows, wq, wk, wv, c.B, c.Hq, c.Hkv, c.Nq, c.Nkv, c.D, scale, 1);
    tk_attention_bwd_params p = TK_ATTENTION_BWD_PARAMS_INIT;
    p.dtype = c.dt, p.head_dim = (int32_t)c.D, p.causal = 1, p.scale = (float)scale;
    p.batch = c.B, p.heads_q = c.Hq, p.heads_kv = c.Hkv, p.seq_q = c.Nq, p.seq_kv = c.Nkv;
    for (int d = 0; d < 4; d++) p.o_strides[d] = t.o.strides[d]; /* its rows padded */
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
    void *ddq = tu_dev_out(ctx, &dq), *ddk = tu_dev_out(ctx, &dk), *ddv = tu_dev_out(ctx, &dv);
    p.q = tu_dev_in(ctx, &t.q), p.k = tu_dev_in(ctx, &t.k), p.v = tu_dev_in(ctx, &t.v);
    p.o = tu_dev_in(ctx, &t.o), p.dout = tu_dev_in(ctx, &dout), p.lse = tu_dev_in(ctx, &t.l);
    p.dq = ddq, p.dk = ddk, p.dv = ddv, p.workspace = tu_dev_bytes(ctx, p.workspace_bytes);
    ck_assert_msg(tk_attention_backward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &dq, ddq), tu_dev_take(ctx, &dk, ddk), tu_dev_take(ctx, &dv, ddv);
    tu_expect_close("attention bwd auto (wgmma) dQ", &dq, wq, tu_tol_of(c.dt));
    tu_expect_close("  dK", &dk, wk, tu_tol_of(c.dt));
    tu_expect_close("  dV", &dv, wv, tu_tol_of(c.dt));
    const void *in[] = {p.q, p.k, p.v, p.o, p.dout, p.lse, p.workspace};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(tk_gpu_free(ctx, (void *)in[i]), TK_OK);
    free(q), free(k), free(v), free(g), free(o), free(l), free(drows), free(os);
    free(wq), free(wk), free(wv);
    ref_tensor_free(&dout), ref_tensor_free(&dq), ref_tensor_free(&dk), ref_tensor_free(&dv);
    atensors_free(&t);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- LayerNorm, forward and backward ----------------------------------------- */
typedef struct nbufs {
    ref_tensor x, r, w, b, h, y, mean, rstd; /* forward */
    ref_tensor dy, dh, dx, dw, db;           /* backward */
} nbufs;

static void norm_make(nbufs *n, tk_dtype dt, int64_t R, int64_t C) {
    int64_t d2[2] = {R, C}, dc[1] = {C}, dr[1] = {R};
    n->x = ref_tensor_new(dt, 2, d2), n->r = ref_tensor_new(dt, 2, d2);
    n->w = ref_tensor_new(dt, 1, dc), n->b = ref_tensor_new(dt, 1, dc);
    n->h = ref_tensor_new(dt, 2, d2), n->y = ref_tensor_new(dt, 2, d2);
    n->mean = ref_tensor_new(TK_F32, 1, dr), n->rstd = ref_tensor_new(TK_F32, 1, dr);
    n->dy = ref_tensor_new(dt, 2, d2), n->dh = ref_tensor_new(dt, 2, d2);
    n->dx = ref_tensor_new(dt, 2, d2);
    n->dw = ref_tensor_new(TK_F32, 1, dc), n->db = ref_tensor_new(TK_F32, 1, dc);
    ref_tensor_random(&n->x, -2, 2), ref_tensor_random(&n->r, -1, 1);
    ref_tensor_random(&n->w, 0.5, 1.5), ref_tensor_random(&n->b, -0.5, 0.5);
    ref_tensor_random(&n->dy, -1, 1), ref_tensor_random(&n->dh, -1, 1);
}

/* The float64 LayerNorm of rows of h (x + r rounded: written to hr) and its
 * backward; want: y, mean, rstd, dx, dw, db. */
static void norm_reference(nbufs *n, ref_tensor *hr, double *want[6]) {
    int64_t R = n->x.dims[0], C = n->x.dims[1];
    double *x = ref_tensor_to_f64(&n->x), *r = ref_tensor_to_f64(&n->r),
           *w = ref_tensor_to_f64(&n->w), *b = ref_tensor_to_f64(&n->b);
    double *dy = ref_tensor_to_f64(&n->dy), *dh = ref_tensor_to_f64(&n->dh);
    for (int i = 0; i < 6; i++) want[i] = tu_f64_new(i == 1 || i == 2 ? R : i >= 4 ? C : R * C);
    for (int64_t i = 0; i < R * C; i++) ref_tensor_set(hr, i, x[i] + r[i]);
    double *h = ref_tensor_to_f64(hr);
    for (int64_t i = 0; i < R; i++) {
        double m = 0, var = 0, g = 0, gx = 0;
        for (int64_t j = 0; j < C; j++) m += h[i * C + j] / (double)C;
        for (int64_t j = 0; j < C; j++) var += pow(h[i * C + j] - m, 2) / (double)C;
        double rs = 1 / sqrt(var + 1e-5);
        want[1][i] = m, want[2][i] = rs;
        for (int64_t j = 0; j < C; j++) {
            double xh = (h[i * C + j] - m) * rs, gj = dy[i * C + j] * w[j];
            want[0][i * C + j] = xh * w[j] + b[j];
            g += gj / (double)C, gx += gj * xh / (double)C;
            want[4][j] += dy[i * C + j] * xh, want[5][j] += dy[i * C + j];
        }
        for (int64_t j = 0; j < C; j++) {
            double xh = (h[i * C + j] - m) * rs;
            want[3][i * C + j] = rs * (dy[i * C + j] * w[j] - g - xh * gx) + dh[i * C + j];
        }
    }
    free(x), free(r), free(w), free(b), free(dy), free(dh), free(h);
}

START_TEST(norm) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    nbufs n;
    norm_make(&n, TK_BF16, 6, 200);
    ref_tensor hr = ref_tensor_new(TK_BF16, 2, n.x.dims);
    double *want[6];
    norm_reference(&n, &hr, want);
    tk_norm_params p = TK_NORM_PARAMS_INIT;
    p.dtype = TK_BF16, p.kind = TK_NORM_LAYER, p.eps = 1e-5f, p.rows = 6, p.cols = 200;
    void *h = tu_dev_out(ctx, &n.h), *y = tu_dev_out(ctx, &n.y);
    void *mean = tu_dev_out(ctx, &n.mean), *rstd = tu_dev_out(ctx, &n.rstd);
    p.x = tu_dev_in(ctx, &n.x), p.residual = tu_dev_in(ctx, &n.r), p.weight = tu_dev_in(ctx, &n.w);
    p.bias = tu_dev_in(ctx, &n.b), p.h = h, p.y = y, p.mean = mean, p.rstd = rstd;
    ck_assert_msg(tk_norm_forward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    /* the backward reads the forward's h, mean and rstd where they are */
    tk_norm_bwd_params q = TK_NORM_BWD_PARAMS_INIT;
    q.dtype = TK_BF16, q.kind = TK_NORM_LAYER, q.rows = 6, q.cols = 200, q.grad_dtype = TK_F32;
    void *dx = tu_dev_out(ctx, &n.dx), *dw = tu_dev_out(ctx, &n.dw), *db = tu_dev_out(ctx, &n.db);
    q.h = h, q.dy = tu_dev_in(ctx, &n.dy), q.dh = tu_dev_in(ctx, &n.dh), q.weight = p.weight;
    q.mean = mean, q.rstd = rstd, q.dx = dx, q.dweight = dw, q.dbias = db;
    ck_assert_int_eq(tk_norm_backward_workspace(ctx, &q, &q.workspace_bytes), TK_OK);
    q.workspace = tu_dev_bytes(ctx, q.workspace_bytes);
    ck_assert_msg(tk_norm_backward(ctx, &q, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &n.h, h), tu_dev_take(ctx, &n.y, y);
    tu_dev_take(ctx, &n.mean, mean), tu_dev_take(ctx, &n.rstd, rstd);
    tu_dev_take(ctx, &n.dx, dx), tu_dev_take(ctx, &n.dw, dw), tu_dev_take(ctx, &n.db, db);
    double *hw = ref_tensor_to_f64(&hr);
    tu_expect_close("layernorm h = x + residual", &n.h, hw, 1e-6);
    tu_expect_close("  y", &n.y, want[0], 1e-2);
    tu_expect_close("  mean", &n.mean, want[1], 1e-5);
    tu_expect_close("  rstd", &n.rstd, want[2], 1e-5);
    tu_expect_close("layernorm bwd dx", &n.dx, want[3], 1e-2);
    tu_expect_close("  dweight", &n.dw, want[4], 1e-4);
    tu_expect_close("  dbias", &n.db, want[5], 1e-5);
    const void *in[] = {p.x, p.residual, p.weight, p.bias, q.dy, q.dh, q.workspace};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(tk_gpu_free(ctx, (void *)in[i]), TK_OK);
    for (int i = 0; i < 6; i++) free(want[i]);
    free(hw);
    for (ref_tensor *t = &n.x; t <= &n.db; t++) ref_tensor_free(t);
    ref_tensor_free(&hr);
    tk_ctx_destroy(ctx); /* frees nothing: every block was handed back */
}
END_TEST

/* ---- Rotary ---------------------------------------------------------------------- */
START_TEST(rotary) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    int64_t B = 1, Hq = 2, Hk = 1, N = 20, D = 64;
    int64_t dq[4] = {B, Hq, N, D}, dk[4] = {B, Hk, N, D};
    ref_tensor q = ref_tensor_new(TK_F16, 4, dq), k = ref_tensor_new(TK_F16, 4, dk);
    ref_tensor qo = ref_tensor_new(TK_F16, 4, dq), ko = ref_tensor_new(TK_F16, 4, dk);
    ref_tensor_random(&q, -1, 1), ref_tensor_random(&k, -1, 1);
    tk_rotary_params p = TK_ROTARY_PARAMS_INIT;
    p.dtype = TK_F16, p.style = TK_ROTARY_NEOX, p.head_dim = (int32_t)D, p.rotary_dim = 32;
    p.batch = B, p.seq = N, p.heads_q = Hq, p.heads_k = Hk;
    void *dqo = tu_dev_out(ctx, &qo), *dko = tu_dev_out(ctx, &ko);
    p.q = tu_dev_in(ctx, &q), p.k = tu_dev_in(ctx, &k), p.q_out = dqo, p.k_out = dko;
    ck_assert_msg(tk_rotary(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &qo, dqo), tu_dev_take(ctx, &ko, dko);
    ref_rope r = {.style = TK_ROTARY_NEOX, .rotary_dim = 32, .base = 10000};
    double *wq = ref_tensor_to_f64(&q), *wk = ref_tensor_to_f64(&k);
    ref_rotary(&r, wq, B, Hq, N, D, 0), ref_rotary(&r, wk, B, Hk, N, D, 0);
    tu_expect_close("rotary neox f16 q (rd 32 of 64)", &qo, wq, 3e-3);
    tu_expect_close("  k", &ko, wk, 3e-3);
    free(wq), free(wk);
    ref_tensor_free(&q), ref_tensor_free(&k), ref_tensor_free(&qo), ref_tensor_free(&ko);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- Based --------------------------------------------------------------------- */
START_TEST(based) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    int64_t B = 1, H = 2, T = 70, Dv = 64, F = 16;
    int64_t dqk[4] = {B, H, T, F}, dv[4] = {B, H, T, Dv}, dz[3] = {B, H, T};
    ref_tensor q = ref_tensor_new(TK_BF16, 4, dqk), k = ref_tensor_new(TK_BF16, 4, dqk);
    ref_tensor v = ref_tensor_new(TK_BF16, 4, dv), o = ref_tensor_new(TK_BF16, 4, dv);
    ref_tensor z = ref_tensor_new(TK_F32, 3, dz);
    ref_tensor_random(&q, -1, 1), ref_tensor_random(&k, -1, 1), ref_tensor_random(&v, -1, 1);
    tk_based_params p = TK_BASED_PARAMS_INIT;
    p.dtype = TK_BF16, p.normalize = 1, p.batch = B, p.heads = H, p.seq = T, p.head_dim_v = Dv;
    void *dout = tu_dev_out(ctx, &o), *dz_ = tu_dev_out(ctx, &z);
    p.q = tu_dev_in(ctx, &q), p.k = tu_dev_in(ctx, &k), p.v = tu_dev_in(ctx, &v), p.o = dout,
    p.z = dz_;
    ck_assert_msg(tk_based_forward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &o, dout), tu_dev_take(ctx, &z, dz_);
    double *fq = ref_tensor_to_f64(&q), *fk = ref_tensor_to_f64(&k), *fv = ref_tensor_to_f64(&v);
    double *wo = tu_f64_new(B * H * T * Dv), *wz = tu_f64_new(B * H * T);
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t i = 0; i < T; i++) {
            double *oi = wo + (bh * T + i) * Dv, zi = 0;
            for (int64_t j = 0; j <= i; j++) {
                double s = 0;
                for (int64_t f = 0; f < F; f++)
                    s += fq[(bh * T + i) * F + f] * fk[(bh * T + j) * F + f];
                double a = 1 + 0.25 * s + 0.25 * s * 0.25 * s / 2;
                zi += a;
                for (int64_t d = 0; d < Dv; d++) oi[d] += a * fv[(bh * T + j) * Dv + d];
            }
            for (int64_t d = 0; d < Dv; d++) oi[d] /= zi + 1e-6;
            wz[bh * T + i] = zi;
        }
    tu_expect_close("based bf16 normalized o", &o, wo, 1e-2);
    tu_expect_close("  z", &z, wz, 1e-2);
    free(fq), free(fk), free(fv), free(wo), free(wz);
    ref_tensor_free(&q), ref_tensor_free(&k), ref_tensor_free(&v), ref_tensor_free(&o);
    ref_tensor_free(&z);
    tk_ctx_destroy(ctx); /* and with it the inputs' device blocks */
}
END_TEST

/* ---- Hedgehog -------------------------------------------------------------------- */
#define HH_EPS 1e-6

/* Inputs (shared weights with a bias, normalized), the forward's o and z,
 * and the backward's inputs and outputs. */
typedef struct hbufs {
    int64_t B, H, T, D, Dv;
    ref_tensor q, k, v, wq, wk, bq, bk, dout;  /* inputs            */
    ref_tensor o, z;                           /* forward's outputs */
    ref_tensor dq, dk, dv, dwq, dwk, dbq, dbk; /* backward's        */
} hbufs;

static void hh_make(hbufs *h, int64_t B, int64_t H, int64_t T, int64_t D, int64_t Dv) {
    *h = (hbufs){.B = B, .H = H, .T = T, .D = D, .Dv = Dv};
    int64_t dq[4] = {B, H, T, D}, dv[4] = {B, H, T, Dv}, dz[3] = {B, H, T};
    int64_t dw[3] = {1, D, D}, db[2] = {1, D};
    h->q = ref_tensor_new(TK_BF16, 4, dq), h->k = ref_tensor_new(TK_BF16, 4, dq);
    h->v = ref_tensor_new(TK_BF16, 4, dv), h->dout = ref_tensor_new(TK_BF16, 4, dv);
    h->wq = ref_tensor_new(TK_BF16, 3, dw), h->wk = ref_tensor_new(TK_BF16, 3, dw);
    h->bq = ref_tensor_new(TK_BF16, 2, db), h->bk = ref_tensor_new(TK_BF16, 2, db);
    h->o = ref_tensor_new(TK_BF16, 4, dv), h->z = ref_tensor_new(TK_F32, 3, dz);
    h->dq = ref_tensor_new(TK_BF16, 4, dq), h->dk = ref_tensor_new(TK_BF16, 4, dq);
    h->dv = ref_tensor_new(TK_BF16, 4, dv);
    h->dwq = ref_tensor_new(TK_BF16, 3, dw), h->dwk = ref_tensor_new(TK_BF16, 3, dw);
    h->dbq = ref_tensor_new(TK_BF16, 2, db), h->dbk = ref_tensor_new(TK_BF16, 2, db);
    ref_tensor_random(&h->q, -1, 1), ref_tensor_random(&h->k, -1, 1);
    ref_tensor_random(&h->v, -1, 1), ref_tensor_random(&h->dout, -1, 1);
    double ws = 2.0 / sqrt((double)D);
    ref_tensor_random(&h->wq, -ws, ws), ref_tensor_random(&h->wk, -ws, ws);
    ref_tensor_random(&h->bq, -0.5, 0.5), ref_tensor_random(&h->bk, -0.5, 0.5);
}

static void hh_free(hbufs *h) {
    for (ref_tensor *t = &h->q; t <= &h->dbk; t++) ref_tensor_free(t);
}

/* The float64 forward (o, z) and, with g, every gradient (dq, dk, dv, dwq,
 * dwk, dbq, dbk), dz from the o the backward reads (h->o, rounded). */
typedef struct hwant {
    double *o, *z, *g[7];
} hwant;

static void hh_head(const hbufs *h, double *const in[8], hwant *w, int64_t bh, bool grads) {
    int64_t T = h->T, D = h->D, F = 2 * D, Dv = h->Dv;
    const double *q = in[0] + bh * T * D, *k = in[1] + bh * T * D, *v = in[2] + bh * T * Dv;
    const double *go = in[7] + bh * T * Dv;
    double *pq = tu_f64_new(T * F), *pk = tu_f64_new(T * F), *dpq = tu_f64_new(T * F),
           *dpk = tu_f64_new(T * F), *dn = tu_f64_new(T * Dv), *dz = tu_f64_new(T);
    for (int64_t i = 0; i < T; i++) {
        ref_hedgehog_phi(q + i * D, in[3], in[5], (int)D, pq + i * F);
        ref_hedgehog_phi(k + i * D, in[4], in[6], (int)D, pk + i * F);
    }
    for (int64_t i = 0; i < T; i++) {
        double zi = 0, *oi = w->o + (bh * T + i) * Dv;
        for (int64_t j = 0; j <= i; j++) {
            double a = 0;
            for (int64_t f = 0; f < F; f++) a += pq[i * F + f] * pk[j * F + f];
            zi += a;
            for (int64_t d = 0; d < Dv; d++) oi[d] += a * v[j * Dv + d];
        }
        double dot = 0;
        for (int64_t d = 0; d < Dv; d++) {
            oi[d] /= zi + HH_EPS;
            dn[i * Dv + d] = go[i * Dv + d] / (zi + HH_EPS);
            if (grads) dot += go[i * Dv + d] * ref_tensor_get(&h->o, (bh * T + i) * Dv + d);
        }
        w->z[bh * T + i] = zi;
        dz[i] = -dot / (zi + HH_EPS);
    }
    for (int64_t i = 0; grads && i < T; i++)
        for (int64_t j = 0; j <= i; j++) {
            double a = 0, da = dz[i];
            for (int64_t f = 0; f < F; f++) a += pq[i * F + f] * pk[j * F + f];
            for (int64_t d = 0; d < Dv; d++) {
                w->g[2][(bh * T + j) * Dv + d] += a * dn[i * Dv + d];
                da += dn[i * Dv + d] * v[j * Dv + d];
            }
            for (int64_t f = 0; f < F; f++)
                dpq[i * F + f] += da * pk[j * F + f], dpk[j * F + f] += da * pq[i * F + f];
        }
    for (int64_t i = 0; grads && i < T; i++) {
        ref_hedgehog_phi_bwd(q + i * D, in[3], pq + i * F, dpq + i * F, (int)D,
                             w->g[0] + (bh * T + i) * D, w->g[3], w->g[5]);
        ref_hedgehog_phi_bwd(k + i * D, in[4], pk + i * F, dpk + i * F, (int)D,
                             w->g[1] + (bh * T + i) * D, w->g[4], w->g[6]);
    }
    free(pq), free(pk), free(dpq), free(dpk), free(dn), free(dz);
}

static void hh_reference(const hbufs *h, hwant *w, bool grads) {
    double *in[8];
    const ref_tensor *src[8] = {&h->q, &h->k, &h->v, &h->wq, &h->wk, &h->bq, &h->bk, &h->dout};
    for (int i = 0; i < 8; i++) in[i] = ref_tensor_to_f64(src[i]);
    w->o = tu_f64_new(ref_tensor_count(&h->o)), w->z = tu_f64_new(ref_tensor_count(&h->z));
    const ref_tensor *out[7] = {&h->dq, &h->dk, &h->dv, &h->dwq, &h->dwk, &h->dbq, &h->dbk};
    for (int i = 0; i < 7; i++) w->g[i] = grads ? tu_f64_new(ref_tensor_count(out[i])) : NULL;
    for (int64_t bh = 0; bh < h->B * h->H; bh++) hh_head(h, in, w, bh, grads);
    for (int i = 0; i < 8; i++) free(in[i]);
}

static void hwant_free(hwant *w) {
    free(w->o), free(w->z);
    for (int i = 0; i < 7; i++) free(w->g[i]);
}

/* The forward on the run API; a workspace (maps apart, segments for the
 * default 132 SMs) when `ws`. */
static void hh_forward(tk_ctx *ctx, hbufs *h, const hwant *w, bool ws) {
    tk_hedgehog_params p = TK_HEDGEHOG_PARAMS_INIT;
    p.dtype = TK_BF16, p.head_dim = (int32_t)h->D, p.normalize = 1;
    p.batch = h->B, p.heads = h->H, p.seq = h->T, p.head_dim_v = h->Dv;
    void *o = tu_dev_out(ctx, &h->o), *z = tu_dev_out(ctx, &h->z);
    p.q = tu_dev_in(ctx, &h->q), p.k = tu_dev_in(ctx, &h->k), p.v = tu_dev_in(ctx, &h->v);
    p.wq = tu_dev_in(ctx, &h->wq), p.wk = tu_dev_in(ctx, &h->wk);
    p.bq = tu_dev_in(ctx, &h->bq), p.bk = tu_dev_in(ctx, &h->bk), p.o = o, p.z = z;
    if (ws) {
        ck_assert_int_eq(tk_hedgehog_forward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
        ck_assert_uint_gt(p.workspace_bytes, 0);
        p.workspace = tu_dev_bytes(ctx, p.workspace_bytes);
    }
    ck_assert_msg(tk_hedgehog_forward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &h->o, o), tu_dev_take(ctx, &h->z, z);
    tu_expect_close(ws ? "hedgehog fwd, workspace: o" : "hedgehog fwd, no workspace: o", &h->o,
                    w->o, 1e-2);
    tu_expect_close("  z", &h->z, w->z, 1e-2);
    const void *in[] = {p.q, p.k, p.v, p.wq, p.wk, p.bq, p.bk, p.workspace};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(tk_gpu_free(ctx, (void *)in[i]), TK_OK);
}

START_TEST(hedgehog_forward) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    hbufs h;
    hwant w;
    hh_make(&h, 1, 2, 150, 64, 64);
    hh_reference(&h, &w, false);
    hh_forward(ctx, &h, &w, false);
    hh_forward(ctx, &h, &w, true);
    hwant_free(&w);
    hh_free(&h);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The backward from the float64 forward's o and z (as the kernels read
 * them); the maps apart in its workspace. */
START_TEST(hedgehog_backward) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    hbufs h;
    hwant w;
    hh_make(&h, 1, 1, 70, 64, 32);
    hh_reference(&h, &w, false); /* o, z */
    for (int64_t i = 0; i < ref_tensor_count(&h.o); i++) ref_tensor_set(&h.o, i, w.o[i]);
    for (int64_t i = 0; i < ref_tensor_count(&h.z); i++) ref_tensor_set(&h.z, i, w.z[i]);
    hwant_free(&w);
    hh_reference(&h, &w, true);
    tk_hedgehog_bwd_params p = TK_HEDGEHOG_BWD_PARAMS_INIT;
    p.dtype = TK_BF16, p.head_dim = (int32_t)h.D, p.normalize = 1;
    p.batch = h.B, p.heads = h.H, p.seq = h.T, p.head_dim_v = h.Dv;
    ref_tensor *in[10] = {&h.q, &h.k, &h.v, &h.dout, &h.o, &h.z, &h.wq, &h.wk, &h.bq, &h.bk};
    ref_tensor *out[7] = {&h.dq, &h.dk, &h.dv, &h.dwq, &h.dwk, &h.dbq, &h.dbk};
    void *din[10], *dout[7];
    for (int i = 0; i < 10; i++) din[i] = tu_dev_in(ctx, in[i]);
    for (int i = 0; i < 7; i++) dout[i] = tu_dev_out(ctx, out[i]);
    p.q = din[0], p.k = din[1], p.v = din[2], p.dout = din[3], p.o = din[4], p.z = din[5];
    p.wq = din[6], p.wk = din[7], p.bq = din[8], p.bk = din[9];
    p.dq = dout[0], p.dk = dout[1], p.dv = dout[2], p.dwq = dout[3], p.dwk = dout[4];
    p.dbq = dout[5], p.dbk = dout[6];
    ck_assert_int_eq(tk_hedgehog_backward_workspace(ctx, &p, &p.workspace_bytes), TK_OK);
    p.workspace = tu_dev_bytes(ctx, p.workspace_bytes);
    ck_assert_msg(tk_hedgehog_backward(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    static const char *const names[7] = {"hedgehog bwd dq", "  dk",  "  dv", "  dWq",
                                         "  dWk",           "  dbq", "  dbk"};
    for (int i = 0; i < 7; i++) {
        tu_dev_take(ctx, out[i], dout[i]);
        tu_expect_close(names[i], out[i], w.g[i], 1e-2);
    }
    for (int i = 0; i < 10; i++) ck_assert_int_eq(tk_gpu_free(ctx, din[i]), TK_OK);
    ck_assert_int_eq(tk_gpu_free(ctx, p.workspace), TK_OK);
    hwant_free(&w);
    hh_free(&h);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(tmp_root, sizeof tmp_root, "backend-interp-kernels")) return EXIT_FAILURE;
    tu_set_cache_dir(tmp_root);
    Suite *s = suite_create("backend_interp_kernels");
    TCase *tc = tcase_create("entry points");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gemm);
    tcase_add_test(tc, attention_forward);
    tcase_add_test(tc, attention_forward_sm80);
    tcase_add_test(tc, attention_backward);
    tcase_add_test(tc, norm);
    tcase_add_test(tc, rotary);
    tcase_add_test(tc, based);
    tcase_add_test(tc, hedgehog_forward);
    tcase_add_test(tc, hedgehog_backward);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(tmp_root);
    return rc;
}
