/* The backward of forward.c and the optimizer step. The gradient along the
 * residual stream (d_stream) comes down from the head: each LayerNorm's
 * backward adds the gradient that its output brings to the one the stream
 * already carries (dh), which makes its dx the gradient of both the branch
 * output and the stream before it. Weight gradients are GEMMs with a
 * transposed A written in f32 straight into the gradient buffer, bias
 * gradients tk_bias_grad; nothing accumulates across steps, every element
 * of m->grads is written each step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dp.h"
#include "gpt.h"

/* dW [n, k] = dYᵀ·X (f32, overwritten) for dY [rows, n], X [rows, k]. */
static tk_gemm_params weight_grad(int64_t rows, int64_t n, int64_t k, const void *dy, const void *x,
                                  float *dw) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_F32, p.transpose_a = 1;
    p.m = n, p.n = k, p.k = rows, p.a = dy, p.b = x, p.c = dw;
    return p;
}

/* dX [rows, k] = dY·W for dY [rows, n], W [n, k] (bf16). */
static tk_gemm_params input_grad(int64_t rows, int64_t n, int64_t k, const void *dy, const void *w,
                                 void *dx) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_BF16;
    p.m = rows, p.n = k, p.k = n, p.a = dy, p.b = w, p.c = dx;
    return p;
}

/* The backward of y = x·Wᵀ + b (W: parameter w of layer l, b the one after
 * it in wb) from dy [rows, n]: dW, db and dx [rows, k]; with u, dx is
 * multiplied by gelu'(u) in the GEMM's epilogue (the MLP's fc). */
static int linear_bwd(gpt_model *m, const char *name, int l, gpt_param w, gpt_param b, int64_t rows,
                      int64_t n, int64_t k, const void *dy, const void *x, void *dx, void *u) {
    char what[64];
    tk_bias_grad_params bg = TK_BIAS_GRAD_PARAMS_INIT;
    bg.dtype = TK_BF16, bg.rows = rows, bg.cols = n, bg.dy = dy, bg.dbias = gpt_grad(m, l, b);
    snprintf(what, sizeof what, "tk_bias_grad (%s)", name);
    if (gpt_op_bias_grad(m, what, &bg)) return 1;
    tk_gemm_params dw = weight_grad(rows, n, k, dy, x, gpt_grad(m, l, w));
    snprintf(what, sizeof what, "tk_gemm (%s dW)", name);
    if (gpt_op_gemm(m, what, &dw)) return 1;
    tk_gemm_params dx_p = input_grad(rows, n, k, dy, gpt_w16(m, l, w), dx);
    if (u) dx_p.act = TK_GEMM_ACT_DGELU, dx_p.aux = u;
    snprintf(what, sizeof what, "tk_gemm (%s dX%s)", name, u ? ", DGELU" : "");
    return gpt_op_gemm(m, what, &dx_p);
}

/* dx = LN'(h)ᵀ·dy + dh: the gradient of the norm's input h (and, with dh,
 * of the stream h came from); dweight, dbias into the f32 gradients. */
static int norm_bwd(gpt_model *m, const char *what, int64_t rows, const void *h, const void *dy,
                    const void *dh, void *dx, int l, gpt_param w, const float *mean,
                    const float *rstd) {
    tk_norm_bwd_params p = TK_NORM_BWD_PARAMS_INIT;
    p.dtype = TK_BF16, p.kind = TK_NORM_LAYER, p.rows = rows, p.cols = m->cfg.C;
    p.h = h, p.dy = dy, p.dh = dh, p.dx = dx, p.weight = gpt_w16(m, l, w);
    p.mean = mean, p.rstd = rstd, p.grad_dtype = TK_F32;
    p.dweight = gpt_grad(m, l, w), p.dbias = gpt_grad(m, l, (gpt_param)(w + 1));
    return gpt_op_norm_bwd(m, what, &p);
}

/* dq, dk, dv into d_qkv, laid out as qkv, from dy (attention's output
 * gradient) in m->d_c. */
static int attn_bwd(gpt_model *m, int l, int B, int T) {
    tk_attention_params f = gpt_attn_params(m, l, B, T);
    int64_t C = m->cfg.C;
    uint16_t *dqkv = m->d_qkv;
    tk_attention_bwd_params p = TK_ATTENTION_BWD_PARAMS_INIT;
    p.dtype = f.dtype, p.head_dim = f.head_dim, p.causal = f.causal, p.batch = f.batch;
    p.heads_q = f.heads_q, p.heads_kv = f.heads_kv, p.seq_q = f.seq_q, p.seq_kv = f.seq_kv;
    p.q = f.q, p.k = f.k, p.v = f.v, p.o = f.o, p.dout = m->d_c, p.lse = f.lse;
    p.dq = dqkv, p.dk = dqkv + C, p.dv = dqkv + 2 * C;
    for (int i = 0; i < 4; i++) {
        p.q_strides[i] = p.k_strides[i] = p.v_strides[i] = f.q_strides[i];
        p.dq_strides[i] = p.dk_strides[i] = p.dv_strides[i] = f.q_strides[i];
        p.o_strides[i] = p.dout_strides[i] = f.o_strides[i];
    }
    p.mode = TK_ATTN_BWD_DETERMINISTIC;
    return gpt_op_attn_bwd(m, "tk_attention_backward", &p);
}

/* Layer l from d_stream = ∂loss/∂r_{l+1} to d_stream = ∂loss/∂r_l. */
static int block_bwd(gpt_model *m, int l, int B, int T) {
    gpt_layer_acts *a = &m->layer[l];
    int64_t rows = (int64_t)B * T, C = m->cfg.C;
    /* r_{l+1} = s + fcproj(g): d_stream is fcproj's output gradient */
    if (linear_bwd(m, "fcproj", l, GPT_FCPROJ_W, GPT_FCPROJ_B, rows, C, 4 * C, m->d_stream, a->g,
                   m->d_4c, a->u) ||
        linear_bwd(m, "fc", l, GPT_FC_W, GPT_FC_B, rows, 4 * C, C, m->d_4c, a->m, m->d_c, NULL))
        return 1;
    /* m = LN2(s): d_stream becomes ∂loss/∂s, in place over dh */
    if (norm_bwd(m, "tk_norm_backward (ln2)", rows, a->s, m->d_c, m->d_stream, m->d_stream, l,
                 GPT_LN2_W, a->ln2_mean, a->ln2_rstd))
        return 1;
    /* s = r + proj(y) */
    if (linear_bwd(m, "proj", l, GPT_PROJ_W, GPT_PROJ_B, rows, C, C, m->d_stream, a->y, m->d_c,
                   NULL) ||
        attn_bwd(m, l, B, T) ||
        linear_bwd(m, "qkv", l, GPT_QKV_W, GPT_QKV_B, rows, 3 * C, C, m->d_qkv, a->a, m->d_c, NULL))
        return 1;
    /* a = LN1(r) */
    return norm_bwd(m, "tk_norm_backward (ln1)", rows, a->r, m->d_c, m->d_stream, m->d_stream, l,
                    GPT_LN1_W, a->ln1_mean, a->ln1_rstd);
}

/* The tied head and the final norm: dwte = dlogitsᵀ·f (overwritten; the
 * embedding's share is added last), df = dlogits·wte, then d_stream. */
static int head_bwd(gpt_model *m, int B, int T) {
    const gpt_config *c = &m->cfg;
    int64_t rows = (int64_t)B * T;
    tk_gemm_params dw = weight_grad(rows, c->V, c->C, m->logits, m->f, gpt_grad(m, 0, GPT_WTE));
    tk_gemm_params df = input_grad(rows, c->V, c->C, m->logits, gpt_w16(m, 0, GPT_WTE), m->d_c);
    if (gpt_op_gemm(m, "tk_gemm (head dW)", &dw) || gpt_op_gemm(m, "tk_gemm (head dX)", &df))
        return 1;
    return norm_bwd(m, "tk_norm_backward (lnf)", rows, m->r_out, m->d_c, NULL, m->d_stream, 0,
                    GPT_LNF_W, m->lnf_mean, m->lnf_rstd);
}

/* r_0 = wte[x] + wpe: dwte += the rows of d_stream by token, dwpe = their
 * sum over the batch (zeroed first: the call adds to both). */
static int embed_bwd(gpt_model *m, int B, int T) {
    const gpt_config *c = &m->cfg;
    float *dwpe = gpt_grad(m, 0, GPT_WPE);
    if (gpt_op_zero(m, "tk_gpu_memset (dwpe)", dwpe, (size_t)c->T_max * c->C * sizeof(float)))
        return 1;
    tk_embedding_bwd_params p = TK_EMBEDDING_BWD_PARAMS_INIT;
    p.dtype = TK_BF16, p.accumulate = 1, p.batch = B, p.seq = T, p.channels = c->C;
    p.vocab = c->V, p.max_seq = c->T_max, p.tokens = m->tokens, p.dout = m->d_stream;
    p.dwte = gpt_grad(m, 0, GPT_WTE), p.dwpe = dwpe;
    return gpt_op_embed_bwd(m, "tk_embedding_backward", &p);
}

/* The gradients of tensors a .. b (ids of m->lay, adjacent in the buffer)
 * are final for this step: with the data-parallel overlap their sum over
 * the ranks starts now, beside the rest of the backward (dp.h). Each
 * tensor is posted once a step (gpt_backward checks it on every run, the
 * interpreter's in CI too), so a gradient the posts miss or repeat is an
 * error here, not a silent divergence between ranks. */
static int post(gpt_model *m, int a, int b, unsigned char *posted) {
    const gpt_tensor *t = m->lay.t;
    for (int i = a; i <= b; i++)
        if (posted[i]++)
            return fprintf(stderr, "gpt-train: %s's gradient posted twice\n", t[i].name), 1;
    size_t off = t[a].off, n = t[b].off + t[b].n - off;
    /* only a step's: the startup's dry runs (gpt_model_prepare) leave
     * m->grads unset, and a sum of them still in flight could land over a
     * rank's first real gradients */
    if (m->dp && m->mode == GPT_RUN && gpt_dp_bucket_ready(m->dp, m->grads + off, n, m->stream))
        return fprintf(stderr, "gpt-train: all-reduce of %s .. %s: %s\n", t[a].name, t[b].name,
                       gpt_dp_error(m->dp)),
               1;
    return 0;
}

/* Layer l's gradients: its matrices, then its vectors (two ranges). */
static int post_layer(gpt_model *m, int l, unsigned char *posted) {
    const gpt_config *c = &m->cfg;
    return post(m, gpt_tensor_id(c, l, GPT_QKV_W), gpt_tensor_id(c, l, GPT_FCPROJ_W), posted) ||
           post(m, gpt_tensor_id(c, l, GPT_LN1_W), gpt_tensor_id(c, l, GPT_FCPROJ_B), posted);
}

/* Ranges are posted as soon as nothing later in the step writes them: the
 * final norm's after the head, a layer's after its block, and the tied wte
 * (written by the head first, the embedding last) with wpe at the end. */
static int backward(gpt_model *m, int B, int T, unsigned char *posted) {
    const gpt_config *c = &m->cfg;
    if (head_bwd(m, B, T) ||
        post(m, gpt_tensor_id(c, 0, GPT_LNF_W), gpt_tensor_id(c, 0, GPT_LNF_B), posted))
        return 1;
    for (int l = c->L - 1; l >= 0; l--)
        if (block_bwd(m, l, B, T) || post_layer(m, l, posted)) return 1;
    if (embed_bwd(m, B, T) || post(m, GPT_WTE, GPT_WPE, posted)) return 1;
    for (int i = 0; i < m->lay.count; i++)
        if (!posted[i])
            return fprintf(stderr, "gpt-train: %s's gradient never posted\n", m->lay.t[i].name), 1;
    return 0;
}

int gpt_backward(gpt_model *m, int B, int T) {
    unsigned char *posted = calloc((size_t)m->lay.count, 1);
    if (!posted) return fprintf(stderr, "gpt-train: out of memory\n"), 1;
    int err = backward(m, B, T, posted);
    free(posted);
    return err;
}

/* ---- AdamW ------------------------------------------------------------------------ */
static tk_adamw_params adamw(gpt_model *m, size_t off, size_t n, int64_t t, float lr, float wd) {
    tk_adamw_params p = TK_ADAMW_PARAMS_INIT;
    p.grad_dtype = TK_F32, p.lowp_dtype = TK_BF16, p.n = (int64_t)n;
    p.weight = m->params + off, p.m = m->m + off, p.v = m->v + off;
    p.grad = m->grads + off, p.weight_lowp = m->params16 + off;
    p.grad_norm = m->scalars + 1, p.max_norm = 1.0f;
    p.lr = lr, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-8f, p.weight_decay = wd, p.step = t;
    return p;
}

int gpt_optimizer(gpt_model *m, int64_t t, float lr) {
    size_t n = m->lay.n_params, nm = m->lay.n_matrix;
    tk_grad_norm_params gn = TK_GRAD_NORM_PARAMS_INIT;
    gn.grad_dtype = TK_F32, gn.n = (int64_t)n, gn.grad = m->grads, gn.norm = m->scalars + 1;
    if (gpt_op_grad_norm(m, "tk_grad_norm", &gn)) return 1;
    /* one norm, two ranges: decay on the matrices, none on the vectors */
    tk_adamw_params mat = adamw(m, 0, nm, t, lr, 0.1f), vec = adamw(m, nm, n - nm, t, lr, 0.0f);
    return gpt_op_adamw(m, "tk_adamw (matrices)", &mat) ||
           gpt_op_adamw(m, "tk_adamw (vectors)", &vec);
}

double gpt_lr(int64_t t, int64_t N, int64_t W, double lr_max) {
    if (t <= W) return lr_max * (double)t / (double)W;
    double lr_min = 0.1 * lr_max, pi = 3.14159265358979323846;
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(pi * (double)(t - W) / (double)(N - W)));
}
