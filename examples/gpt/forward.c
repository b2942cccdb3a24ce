/* The forward of SPEC.md on the library's kernels: embeddings, per layer
 * LayerNorm (fused with the residual add of the branch before it), the qkv
 * GEMM with its bias, causal attention on strided views of qkv, the
 * projection, the MLP (bias and GELU in fc's epilogue, its input kept for
 * the backward), the final LayerNorm, the tied head and the loss. Every
 * activation is bf16; the weights are read as their bf16 copy. */
#include "gpt.h"

tk_gemm_params gpt_linear(int64_t rows, int64_t n, int64_t k, const void *x, const void *w,
                          const void *bias, void *y) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_BF16, p.transpose_b = 1;
    p.m = rows, p.n = n, p.k = k, p.a = x, p.b = w, p.c = y, p.bias = bias;
    return p;
}

tk_attention_params gpt_attn_params(const gpt_model *m, int l, int B, int T) {
    const gpt_config *c = &m->cfg;
    int64_t C = c->C, D = C / c->H;
    const uint16_t *qkv = m->layer[l].qkv;
    tk_attention_params p = TK_ATTENTION_PARAMS_INIT;
    p.dtype = TK_BF16, p.head_dim = (int32_t)D, p.causal = 1;
    p.batch = B, p.heads_q = p.heads_kv = c->H, p.seq_q = p.seq_kv = T;
    /* q, k, v are column blocks of qkv [B, T, 3C]: (b, h, n, d) strides */
    p.q = qkv, p.k = qkv + C, p.v = qkv + 2 * C, p.o = m->layer[l].y, p.lse = m->layer[l].lse;
    int64_t in[4] = {T * 3 * C, D, 3 * C, 1}, out[4] = {T * C, D, C, 1};
    for (int i = 0; i < 4; i++)
        p.q_strides[i] = p.k_strides[i] = p.v_strides[i] = in[i], p.o_strides[i] = out[i];
    return p; /* lse dense [B, H, T] */
}

/* y = LN(h) with h = x + residual written (the new stream) when there is a
 * residual; mean and rstd saved for the backward. */
static int layer_norm(gpt_model *m, const char *what, int64_t rows, const void *x,
                      const void *residual, void *h, void *y, int l, gpt_param w, float *mean,
                      float *rstd) {
    tk_norm_params p = TK_NORM_PARAMS_INIT;
    p.dtype = TK_BF16, p.kind = TK_NORM_LAYER, p.eps = 1e-5f;
    p.rows = rows, p.cols = m->cfg.C, p.x = x, p.residual = residual, p.h = h, p.y = y;
    p.weight = gpt_w16(m, l, w), p.bias = gpt_w16(m, l, (gpt_param)(w + 1));
    p.mean = mean, p.rstd = rstd;
    return gpt_op_norm(m, what, &p);
}

static int embed(gpt_model *m, int B, int T) {
    tk_embedding_params p = TK_EMBEDDING_PARAMS_INIT;
    p.dtype = TK_BF16, p.weight_dtype = TK_BF16;
    p.batch = B, p.seq = T, p.channels = m->cfg.C, p.vocab = m->cfg.V, p.max_seq = m->cfg.T_max;
    p.tokens = m->tokens, p.wte = gpt_w16(m, 0, GPT_WTE), p.wpe = gpt_w16(m, 0, GPT_WPE);
    p.out = m->layer[0].r;
    return gpt_op_embed(m, "tk_embedding_forward", &p);
}

/* Layer l: its input stream r_l is m->branch + the previous layer's s (the
 * last projection's output and its residual, added by LN1 into a->r), or
 * the embeddings for layer 0; it leaves fcproj's output in m->branch. */
static int block(gpt_model *m, int l, int B, int T) {
    gpt_layer_acts *a = &m->layer[l];
    int64_t rows = (int64_t)B * T, C = m->cfg.C;
    const void *x = l ? m->branch : a->r, *res = l ? m->layer[l - 1].s : NULL;
    if (layer_norm(m, "tk_norm_forward (ln1)", rows, x, res, l ? a->r : NULL, a->a, l, GPT_LN1_W,
                   a->ln1_mean, a->ln1_rstd))
        return 1;
    tk_gemm_params qkv = gpt_linear(rows, 3 * C, C, a->a, gpt_w16(m, l, GPT_QKV_W),
                                    gpt_w16(m, l, GPT_QKV_B), a->qkv);
    if (gpt_op_gemm(m, "tk_gemm (qkv)", &qkv)) return 1;
    tk_attention_params at = gpt_attn_params(m, l, B, T);
    if (gpt_op_attn(m, "tk_attention_forward", &at)) return 1;
    tk_gemm_params proj = gpt_linear(rows, C, C, a->y, gpt_w16(m, l, GPT_PROJ_W),
                                     gpt_w16(m, l, GPT_PROJ_B), m->branch);
    if (gpt_op_gemm(m, "tk_gemm (proj)", &proj)) return 1;
    if (layer_norm(m, "tk_norm_forward (ln2)", rows, m->branch, a->r, a->s, a->m, l, GPT_LN2_W,
                   a->ln2_mean, a->ln2_rstd))
        return 1;
    /* g = gelu(u), u = m·fc_wᵀ + fc_b kept in aux for the backward's DGELU */
    tk_gemm_params fc =
        gpt_linear(rows, 4 * C, C, a->m, gpt_w16(m, l, GPT_FC_W), gpt_w16(m, l, GPT_FC_B), a->g);
    fc.act = TK_GEMM_ACT_GELU, fc.aux = a->u;
    if (gpt_op_gemm(m, "tk_gemm (fc, GELU)", &fc)) return 1;
    tk_gemm_params fcproj = gpt_linear(rows, C, 4 * C, a->g, gpt_w16(m, l, GPT_FCPROJ_W),
                                       gpt_w16(m, l, GPT_FCPROJ_B), m->branch);
    return gpt_op_gemm(m, "tk_gemm (fcproj)", &fcproj);
}

/* The mean loss into scalars[0] and, for a backward, dlogits over the
 * logits: (softmax - onehot) / (rows·nranks), this rank's share of the
 * gradient of the mean over every rank's rows. */
static int loss(gpt_model *m, int64_t rows, int grad) {
    tk_xent_params p = TK_XENT_PARAMS_INIT;
    p.dtype = TK_BF16, p.rows = rows, p.vocab = m->cfg.V;
    p.logits = m->logits, p.targets = m->targets, p.dlogits = grad ? m->logits : NULL;
    p.dloss_scale = 1.0f / ((float)rows * (float)m->nranks);
    p.loss = m->losses, p.loss_mean = m->scalars;
    return gpt_op_xent(m, grad ? "tk_cross_entropy (backward)" : "tk_cross_entropy", &p);
}

int gpt_forward(gpt_model *m, int B, int T, int what) {
    const gpt_config *c = &m->cfg;
    int64_t rows = (int64_t)B * T;
    if (embed(m, B, T)) return 1;
    for (int l = 0; l < c->L; l++)
        if (block(m, l, B, T)) return 1;
    if (layer_norm(m, "tk_norm_forward (lnf)", rows, m->branch, m->layer[c->L - 1].s, m->r_out,
                   m->f, 0, GPT_LNF_W, m->lnf_mean, m->lnf_rstd))
        return 1;
    /* the tied head: logits = f·wteᵀ */
    tk_gemm_params head =
        gpt_linear(rows, c->V, c->C, m->f, gpt_w16(m, 0, GPT_WTE), NULL, m->logits);
    if (gpt_op_gemm(m, "tk_gemm (head)", &head)) return 1;
    return (what & GPT_FWD_LOSS) ? loss(m, rows, what & GPT_FWD_GRAD) : 0;
}
