/* `--check`: the device's loss and gradients of one batch against a float64
 * CPU forward and backward of SPEC.md's model, written from the math alone
 * (no kernel, no bf16 activations), at the weights the kernels read (the
 * bf16 copy). Beside each tensor's error, its bf16 floor: how far the same
 * reference moves when it rounds to bf16 wherever the kernels store bf16
 * (emu), the error bf16 storage alone explains; a kernel bug shows as an
 * error well above it. The reference's own gradients are checked by
 * central differences of its loss, one element per tensor (the largest),
 * so that the comparison stands on an independently verified reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

typedef struct ref_layer {
    double *r, *xh1, *rs1, *a, *qkv, *p, *y, *s, *xh2, *rs2, *m, *u, *g;
} ref_layer;

typedef struct ref {
    const gpt_model *mod;
    int emu; /* 1: round to bf16 where the kernels store bf16 */
    int B, T, H, D;
    int64_t rows, C, V;
    const int32_t *tok, *tgt;
    ref_layer *l;
    double *r_out, *xhf, *rsf, *f, *prob;
    double *mem; /* every cache above */
} ref;

static const double *param(const ref *R, const double *W, int l, gpt_param p) {
    return W + R->mod->lay.t[gpt_tensor_id(&R->mod->cfg, l, p)].off;
}

static double *gparam(const ref *R, double *G, int l, gpt_param p) {
    return G + R->mod->lay.t[gpt_tensor_id(&R->mod->cfg, l, p)].off;
}

static int ref_init(ref *R, const gpt_model *m, int B, int T, const int32_t *tok,
                    const int32_t *tgt) {
    const gpt_config *c = &m->cfg;
    *R = (ref){.mod = m, .B = B, .T = T, .H = c->H, .D = c->C / c->H, .rows = (int64_t)B * T};
    R->C = c->C, R->V = c->V, R->tok = tok, R->tgt = tgt;
    size_t rc = (size_t)(R->rows * R->C), rw = (size_t)R->rows, att = (size_t)B * c->H * T * T;
    size_t per = rc * (1 + 1 + 1 + 3 + 1 + 1 + 1 + 1 + 4 + 4) + 2 * rw + att;
    size_t total = per * (size_t)c->L + 3 * rc + rw + (size_t)(R->rows * R->V);
    R->l = gpt_malloc((size_t)c->L * sizeof *R->l);
    R->mem = gpt_malloc(total * sizeof(double));
    if (!R->l || !R->mem) return 1;
    double *p = R->mem;
#define TAKE(n) (p += (n), p - (n))
    for (int l = 0; l < c->L; l++) {
        ref_layer *L = &R->l[l];
        L->r = TAKE(rc), L->xh1 = TAKE(rc), L->rs1 = TAKE(rw), L->a = TAKE(rc);
        L->qkv = TAKE(3 * rc), L->p = TAKE(att), L->y = TAKE(rc), L->s = TAKE(rc);
        L->xh2 = TAKE(rc), L->rs2 = TAKE(rw), L->m = TAKE(rc), L->u = TAKE(4 * rc);
        L->g = TAKE(4 * rc);
    }
    R->r_out = TAKE(rc), R->xhf = TAKE(rc), R->rsf = TAKE(rw), R->f = TAKE(rc);
    R->prob = TAKE((size_t)(R->rows * R->V));
#undef TAKE
    return 0;
}

static void ref_free(ref *R) {
    free(R->l);
    free(R->mem);
}

/* ---- Pieces ------------------------------------------------------------------------ */
/* In the emulating reference, x rounded to bf16 as a kernel stores it. */
static void rnd(const ref *R, double *x, int64_t n) {
    if (R->emu)
        for (int64_t i = 0; i < n; i++) x[i] = tk_bf16_to_f32(tk_f32_to_bf16((float)x[i]));
}

/* s = rnd(rnd(x) + r): a branch output added to the stream by the norm */
static void residual(const ref *R, double *x, const double *r, double *s) {
    int64_t n = R->rows * R->C;
    rnd(R, x, n);
    for (int64_t i = 0; i < n; i++) s[i] = x[i] + r[i];
    rnd(R, s, n);
}

static void ln_fwd(const ref *R, const double *x, const double *w, const double *b, double *xh,
                   double *rs, double *y) {
    int64_t C = R->C;
    for (int64_t i = 0; i < R->rows; i++) {
        const double *xi = x + i * C;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < C; j++) mean += xi[j];
        mean /= (double)C;
        for (int64_t j = 0; j < C; j++) var += (xi[j] - mean) * (xi[j] - mean);
        rs[i] = 1.0 / sqrt(var / (double)C + 1e-5);
        for (int64_t j = 0; j < C; j++) {
            xh[i * C + j] = (xi[j] - mean) * rs[i];
            y[i * C + j] = xh[i * C + j] * w[j] + b[j];
        }
    }
    rnd(R, y, R->rows * C);
}

/* dx = LN'ᵀ·dy + dh (dx may be dh); dw, db added to. */
static void ln_bwd(const ref *R, const double *dy, const double *xh, const double *rs,
                   const double *w, const double *dh, double *dx, double *dw, double *db) {
    int64_t C = R->C;
    for (int64_t i = 0; i < R->rows; i++) {
        double m1 = 0, m2 = 0;
        for (int64_t j = 0; j < C; j++) {
            double d = dy[i * C + j] * w[j];
            m1 += d, m2 += d * xh[i * C + j];
            dw[j] += dy[i * C + j] * xh[i * C + j], db[j] += dy[i * C + j];
        }
        m1 /= (double)C, m2 /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            double d = dy[i * C + j] * w[j];
            dx[i * C + j] = rs[i] * (d - m1 - xh[i * C + j] * m2) + (dh ? dh[i * C + j] : 0);
        }
    }
    rnd(R, dx, R->rows * C);
}

/* y [rows, n] = x [rows, k]·Wᵀ + b (not rounded: the caller's epilogue) */
static void lin_fwd(const ref *R, const double *x, const double *W, const double *b, int64_t n,
                    int64_t k, double *y) {
    for (int64_t i = 0; i < R->rows; i++)
        for (int64_t o = 0; o < n; o++) {
            double acc = b ? b[o] : 0;
            for (int64_t j = 0; j < k; j++) acc += x[i * k + j] * W[o * k + j];
            y[i * n + o] = acc;
        }
}

/* dx = dy·W (overwritten), dW += dyᵀ·x, db += Σ dy */
static void lin_bwd(const ref *R, const double *dy, const double *x, const double *W, int64_t n,
                    int64_t k, double *dx, double *dW, double *db) {
    memset(dx, 0, (size_t)(R->rows * k) * sizeof(double));
    for (int64_t i = 0; i < R->rows; i++)
        for (int64_t o = 0; o < n; o++) {
            double d = dy[i * n + o];
            if (db) db[o] += d;
            for (int64_t j = 0; j < k; j++)
                dx[i * k + j] += d * W[o * k + j], dW[o * k + j] += d * x[i * k + j];
        }
}

static const double GELU_K = 0.7978845608028654; /* sqrt(2/π) */

static double gelu(double u) { return 0.5 * u * (1 + tanh(GELU_K * (u + 0.044715 * u * u * u))); }

static double dgelu(double u) {
    double th = tanh(GELU_K * (u + 0.044715 * u * u * u));
    return 0.5 * (1 + th) + 0.5 * u * (1 - th * th) * GELU_K * (1 + 3 * 0.044715 * u * u);
}

/* causal attention of qkv [B, T, 3C] into y [B, T, C]; P [B, H, T, T] kept */
static void attn_fwd(const ref *R, const double *qkv, double *P, double *y) {
    int64_t C = R->C, D = R->D, T = R->T;
    double scale = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < R->B; b++)
        for (int64_t h = 0; h < R->H; h++)
            for (int64_t i = 0; i < T; i++) {
                const double *q = qkv + (b * T + i) * 3 * C + h * D;
                double *p = P + ((b * R->H + h) * T + i) * T, mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *k = qkv + (b * T + j) * 3 * C + C + h * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += q[d] * k[d];
                    p[j] = s * scale, mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++) sum += p[j] = exp(p[j] - mx);
                double *yi = y + (b * T + i) * C + h * D;
                for (int64_t d = 0; d < D; d++) yi[d] = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *v = qkv + (b * T + j) * 3 * C + 2 * C + h * D;
                    p[j] /= sum;
                    for (int64_t d = 0; d < D; d++) yi[d] += p[j] * v[d];
                }
            }
    rnd(R, y, R->rows * C);
}

/* dqkv (overwritten) from dy [B, T, C] */
static void attn_bwd(const ref *R, const double *qkv, const double *P, const double *dy,
                     double *dqkv, double *dp) {
    int64_t C = R->C, D = R->D, T = R->T;
    double scale = 1.0 / sqrt((double)D);
    memset(dqkv, 0, (size_t)(R->rows * 3 * C) * sizeof(double));
    for (int64_t b = 0; b < R->B; b++)
        for (int64_t h = 0; h < R->H; h++)
            for (int64_t i = 0; i < T; i++) {
                const double *p = P + ((b * R->H + h) * T + i) * T,
                             *g = dy + (b * T + i) * C + h * D;
                const double *q = qkv + (b * T + i) * 3 * C + h * D;
                double *dq = dqkv + (b * T + i) * 3 * C + h * D, rowdot = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *v = qkv + (b * T + j) * 3 * C + 2 * C + h * D;
                    double *dv = dqkv + (b * T + j) * 3 * C + 2 * C + h * D;
                    dp[j] = 0;
                    for (int64_t d = 0; d < D; d++) dp[j] += g[d] * v[d], dv[d] += p[j] * g[d];
                    rowdot += p[j] * dp[j];
                }
                for (int64_t j = 0; j <= i; j++) {
                    const double *k = qkv + (b * T + j) * 3 * C + C + h * D;
                    double *dk = dqkv + (b * T + j) * 3 * C + C + h * D;
                    double ds = scale * p[j] * (dp[j] - rowdot);
                    for (int64_t d = 0; d < D; d++) dq[d] += ds * k[d], dk[d] += ds * q[d];
                }
            }
    rnd(R, dqkv, R->rows * 3 * C);
}

/* ---- The model --------------------------------------------------------------------- */
static double ref_forward(ref *R, const double *W) {
    int64_t C = R->C, V = R->V, rows = R->rows, rc = rows * C;
    const double *wte = param(R, W, 0, GPT_WTE), *wpe = param(R, W, 0, GPT_WPE);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < C; j++)
            R->l[0].r[i * C + j] = wte[R->tok[i] * C + j] + wpe[(i % R->T) * C + j];
    rnd(R, R->l[0].r, rc);
    for (int l = 0; l < R->mod->cfg.L; l++) {
        ref_layer *L = &R->l[l];
        double *next = l + 1 < R->mod->cfg.L ? R->l[l + 1].r : R->r_out, *tmp = R->f;
        ln_fwd(R, L->r, param(R, W, l, GPT_LN1_W), param(R, W, l, GPT_LN1_B), L->xh1, L->rs1, L->a);
        lin_fwd(R, L->a, param(R, W, l, GPT_QKV_W), param(R, W, l, GPT_QKV_B), 3 * C, C, L->qkv);
        rnd(R, L->qkv, 3 * rc);
        attn_fwd(R, L->qkv, L->p, L->y);
        lin_fwd(R, L->y, param(R, W, l, GPT_PROJ_W), param(R, W, l, GPT_PROJ_B), C, C, tmp);
        residual(R, tmp, L->r, L->s);
        ln_fwd(R, L->s, param(R, W, l, GPT_LN2_W), param(R, W, l, GPT_LN2_B), L->xh2, L->rs2, L->m);
        lin_fwd(R, L->m, param(R, W, l, GPT_FC_W), param(R, W, l, GPT_FC_B), 4 * C, C, L->u);
        /* GELU of the f32 sum; u and g rounded apart */
        for (int64_t i = 0; i < 4 * rc; i++) L->g[i] = gelu(L->u[i]);
        rnd(R, L->u, 4 * rc), rnd(R, L->g, 4 * rc);
        lin_fwd(R, L->g, param(R, W, l, GPT_FCPROJ_W), param(R, W, l, GPT_FCPROJ_B), C, 4 * C, tmp);
        residual(R, tmp, L->s, next);
    }
    ln_fwd(R, R->r_out, param(R, W, 0, GPT_LNF_W), param(R, W, 0, GPT_LNF_B), R->xhf, R->rsf, R->f);
    lin_fwd(R, R->f, wte, NULL, V, C, R->prob);
    rnd(R, R->prob, rows * V); /* the logits */
    double loss = 0;
    for (int64_t i = 0; i < rows; i++) {
        double *p = R->prob + i * V, mx = -INFINITY, sum = 0;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, p[v]);
        for (int64_t v = 0; v < V; v++) sum += p[v] = exp(p[v] - mx);
        for (int64_t v = 0; v < V; v++) p[v] /= sum;
        loss -= log(p[R->tgt[i]]);
    }
    return loss / (double)rows;
}

/* G (zeroed here) = ∂loss/∂W after ref_forward(R, W). */
static int ref_backward(ref *R, const double *W, double *G) {
    int64_t C = R->C, V = R->V, rows = R->rows, rc = rows * C;
    memset(G, 0, R->mod->lay.n_params * sizeof(double));
    double *buf = gpt_malloc((size_t)(rows * V + 2 * rc + 2 * 4 * rc + R->T) * sizeof(double));
    if (!buf) return 1;
    double *dlog = buf, *dr = dlog + rows * V, *dc = dr + rc, *d4 = dc + rc, *d3 = d4 + 4 * rc;
    double *dp = d3 + 4 * rc;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t v = 0; v < V; v++)
            dlog[i * V + v] = (R->prob[i * V + v] - (v == R->tgt[i])) / (double)rows;
    rnd(R, dlog, rows * V);
    double *dwte = gparam(R, G, 0, GPT_WTE);
    lin_bwd(R, dlog, R->f, param(R, W, 0, GPT_WTE), V, C, dc, dwte, NULL);
    rnd(R, dc, rc);
    ln_bwd(R, dc, R->xhf, R->rsf, param(R, W, 0, GPT_LNF_W), NULL, dr, gparam(R, G, 0, GPT_LNF_W),
           gparam(R, G, 0, GPT_LNF_B));
    for (int l = R->mod->cfg.L - 1; l >= 0; l--) {
        ref_layer *L = &R->l[l];
        lin_bwd(R, dr, L->g, param(R, W, l, GPT_FCPROJ_W), C, 4 * C, d4,
                gparam(R, G, l, GPT_FCPROJ_W), gparam(R, G, l, GPT_FCPROJ_B));
        for (int64_t i = 0; i < 4 * rc; i++) d4[i] *= dgelu(L->u[i]);
        rnd(R, d4, 4 * rc); /* the DGELU epilogue rounds once */
        lin_bwd(R, d4, L->m, param(R, W, l, GPT_FC_W), 4 * C, C, dc, gparam(R, G, l, GPT_FC_W),
                gparam(R, G, l, GPT_FC_B));
        rnd(R, dc, rc);
        ln_bwd(R, dc, L->xh2, L->rs2, param(R, W, l, GPT_LN2_W), dr, dr, gparam(R, G, l, GPT_LN2_W),
               gparam(R, G, l, GPT_LN2_B));
        lin_bwd(R, dr, L->y, param(R, W, l, GPT_PROJ_W), C, C, dc, gparam(R, G, l, GPT_PROJ_W),
                gparam(R, G, l, GPT_PROJ_B));
        rnd(R, dc, rc);
        attn_bwd(R, L->qkv, L->p, dc, d3, dp);
        lin_bwd(R, d3, L->a, param(R, W, l, GPT_QKV_W), 3 * C, C, dc, gparam(R, G, l, GPT_QKV_W),
                gparam(R, G, l, GPT_QKV_B));
        rnd(R, dc, rc);
        ln_bwd(R, dc, L->xh1, L->rs1, param(R, W, l, GPT_LN1_W), dr, dr, gparam(R, G, l, GPT_LN1_W),
               gparam(R, G, l, GPT_LN1_B));
    }
    double *dwpe = gparam(R, G, 0, GPT_WPE);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < C; j++) {
            dwte[R->tok[i] * C + j] += dr[i * C + j];
            dwpe[(i % R->T) * C + j] += dr[i * C + j];
        }
    free(buf);
    return 0;
}

/* ---- The comparison ------------------------------------------------------------------ */
/* Central differences of the reference's loss at the largest element of
 * each tensor's gradient: the worst relative error. */
static double fd_worst(ref *R, double *W, const double *G, const char **where) {
    double worst = 0, h = 1e-5;
    for (int i = 0; i < R->mod->lay.count; i++) {
        const gpt_tensor *t = &R->mod->lay.t[i];
        size_t at = t->off;
        for (size_t j = t->off; j < t->off + t->n; j++)
            if (fabs(G[j]) > fabs(G[at])) at = j;
        double w = W[at];
        W[at] = w + h;
        double up = ref_forward(R, W);
        W[at] = w - h;
        double down = ref_forward(R, W);
        W[at] = w;
        double fd = (up - down) / (2 * h), err = fabs(fd - G[at]) / fmax(fabs(G[at]), 1e-12);
        if (err > worst) worst = err, *where = t->name;
    }
    return worst;
}

static double rel_err(const gpt_tensor *t, const double *x, const double *G) {
    double d2 = 0, r2 = 0;
    for (size_t j = t->off; j < t->off + t->n; j++)
        d2 += (x[j] - G[j]) * (x[j] - G[j]), r2 += G[j] * G[j];
    return r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
}

/* Per tensor ‖dev − G‖/‖G‖ for the device's gradients against G (float64)
 * beside the bf16 floor ‖E − G‖/‖G‖, E the float64 reference that rounds
 * to bf16 where the kernels store bf16: how far bf16 storage alone moves
 * the gradients. The worst device error. */
static double compare(const ref *R, const double *dev, const double *G, const double *E, double tol,
                      double *ratio) {
    double worst = 0;
    *ratio = 0;
    printf("  %-12s %10s %14s %14s\n", "tensor", "|grad|", "device err", "bf16 floor");
    for (int i = 0; i < R->mod->lay.count; i++) {
        const gpt_tensor *t = &R->mod->lay.t[i];
        double r2 = 0, err = rel_err(t, dev, G);
        for (size_t j = t->off; j < t->off + t->n; j++) r2 += G[j] * G[j];
        double bf16 = rel_err(t, E, G), q = err / fmax(bf16, 1e-6);
        if (!(err <= worst)) worst = err; /* NaN sticks */
        if (!(q <= *ratio)) *ratio = q;
        printf("  %-12s %10.3e %14.3e %14.3e%s\n", t->name, sqrt(r2), err, bf16,
               err <= tol && q <= 3 ? "" : "  FAIL");
    }
    return worst;
}

/* The device's loss and gradients (as double) of m->tokens / targets. */
static int device_step(gpt_model *m, int B, int T, double *grads, float *loss) {
    size_t n = m->lay.n_params;
    float *g = gpt_malloc(n * sizeof(float));
    if (!g) return 1;
    tk_status s = TK_OK;
    int err = gpt_forward(m, B, T, GPT_FWD_LOSS | GPT_FWD_GRAD) || gpt_backward(m, B, T);
    if (!err) s = tk_gpu_download(m->ctx, g, m->grads, n * sizeof(float));
    if (!err && !s) s = tk_gpu_download(m->ctx, loss, m->scalars, sizeof(float));
    for (size_t i = 0; i < n && !err && !s; i++) grads[i] = g[i];
    free(g);
    return err || (s && gpt_tk_fail(m->ctx, s, "tk_gpu_download (check)"));
}

/* The host's copies of the batch and of the weights the kernels read. */
static int host_inputs(gpt_model *m, int B, int T, int32_t *tok, double *W) {
    size_t n = m->lay.n_params, rows = (size_t)B * T;
    uint16_t *w16 = gpt_malloc(n * sizeof(uint16_t));
    if (!w16) return 1;
    tk_status s = tk_gpu_download(m->ctx, w16, m->params16, n * sizeof(uint16_t));
    if (!s) s = tk_gpu_download(m->ctx, tok, m->tokens, rows * sizeof(int32_t));
    if (!s) s = tk_gpu_download(m->ctx, tok + rows, m->targets, rows * sizeof(int32_t));
    for (size_t i = 0; i < n && !s; i++) W[i] = tk_bf16_to_f32(w16[i]);
    free(w16);
    return s ? gpt_tk_fail(m->ctx, s, "tk_gpu_download (check)") : 0;
}

/* The reference's loss and gradients G, plain (emu 0) or rounding as the
 * kernels do (1). */
static int reference(ref *R, int emu, double *W, double *G, double *loss) {
    R->emu = emu;
    *loss = ref_forward(R, W);
    return ref_backward(R, W, G);
}

int gpt_check(gpt_model *m, int B, int T, double tol) {
    size_t n = m->lay.n_params, rows = (size_t)B * T;
    float loss_dev = 0;
    /* G: float64 gradients, then the bf16-emulating ones, then the device's */
    double *W = gpt_malloc(n * sizeof(double)), *G = gpt_malloc(3 * n * sizeof(double));
    int32_t *tok = gpt_malloc(2 * rows * sizeof(int32_t));
    double loss = 0, loss_emu = 0;
    ref R = {0};
    int err = !W || !G || !tok || device_step(m, B, T, G + 2 * n, &loss_dev) ||
              host_inputs(m, B, T, tok, W) || ref_init(&R, m, B, T, tok, tok + rows) ||
              reference(&R, 1, W, G + n, &loss_emu) || reference(&R, 0, W, G, &loss);
    if (!err) {
        const char *fd_at = "";
        double lerr = fabs(loss_dev - loss) / fabs(loss);
        printf("check: batch %d x %d, loss device %.6f, float64 %.6f (rel err %.2e), "
               "bf16-emulating float64 %.6f\n",
               B, T, (double)loss_dev, loss, lerr, loss_emu);
        double ratio, worst = compare(&R, G + 2 * n, G, G + n, tol, &ratio);
        /* last: it perturbs W and overwrites the caches */
        double fd = fd_worst(&R, W, G, &fd_at);
        printf("check: worst gradient rel err %.3e (limit %.0e), at most %.2fx the bf16 floor "
               "(limit 3); the float64 gradients vs central differences: worst %.2e (%s; "
               "limit 1e-4)\n",
               worst, tol, ratio, fd, fd_at);
        err = !(worst <= tol && ratio <= 3 && lerr <= tol && fd <= 1e-4);
        printf("check: %s\n", err ? "FAIL" : "PASS");
    }
    ref_free(&R);
    free(W), free(G), free(tok);
    return err;
}
