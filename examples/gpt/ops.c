/* Every kernel call of the trainer goes through one of these: in the model's
 * mode it adds the call's workspace to the largest (GPT_SIZE), queues its
 * prepare call for the threads of prep.c (GPT_PREPARE) or launches it
 * (GPT_RUN). So the forward and backward
 * are written once and the startup passes see exactly the calls a step
 * makes: one workspace of the right size, every kernel compiled before the
 * first timed step. */
#include "gpt.h"

static int done(gpt_model *m, tk_status s, const char *what) {
    return s ? gpt_tk_fail(m->ctx, s, what) : 0;
}

/* A launch's status; under --profile the call is timed too. */
static int ran(gpt_model *m, tk_status s, const char *what) {
    return done(m, s, what) || (m->prof && gpt_prof_mark(m, what));
}

/* s: the workspace query's status; *bytes: its answer (read after the
 * call, hence the pointer). */
static int need(gpt_model *m, tk_status s, const size_t *bytes, const char *what) {
    if (!s && *bytes > m->ws_need) m->ws_need = *bytes;
    return done(m, s, what);
}

/* Long-K products (the weight gradients: K = tokens) split over K into the
 * shared workspace where the library finds it pays (m->split_k). */
int gpt_op_gemm(gpt_model *m, const char *what, const tk_gemm_params *p) {
    tk_gemm_params q = *p;
    size_t b = 0;
    if (m->split_k != 1) q.workspace = m->ws, q.workspace_bytes = m->ws_bytes;
    q.split_k = m->split_k;
    if (m->mode == GPT_SIZE)
        return m->split_k == 1 ? 0 : need(m, tk_gemm_workspace(m->ctx, &q, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_GEMM, what, &q, sizeof q);
    return ran(m, tk_gemm(m->ctx, &q, m->stream), what);
}

int gpt_op_norm(gpt_model *m, const char *what, const tk_norm_params *p) {
    if (m->mode == GPT_SIZE) return 0;
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_NORM, what, p, sizeof *p);
    return ran(m, tk_norm_forward(m->ctx, p, m->stream), what);
}

int gpt_op_norm_bwd(gpt_model *m, const char *what, tk_norm_bwd_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE) return need(m, tk_norm_backward_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_NORM_BWD, what, p, sizeof *p);
    return ran(m, tk_norm_backward(m->ctx, p, m->stream), what);
}

int gpt_op_attn(gpt_model *m, const char *what, tk_attention_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE)
        return need(m, tk_attention_forward_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_ATTN, what, p, sizeof *p);
    return ran(m, tk_attention_forward(m->ctx, p, m->stream), what);
}

int gpt_op_attn_bwd(gpt_model *m, const char *what, tk_attention_bwd_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE)
        return need(m, tk_attention_backward_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_ATTN_BWD, what, p, sizeof *p);
    return ran(m, tk_attention_backward(m->ctx, p, m->stream), what);
}

int gpt_op_xent(gpt_model *m, const char *what, tk_xent_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE) return need(m, tk_cross_entropy_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_XENT, what, p, sizeof *p);
    return ran(m, tk_cross_entropy(m->ctx, p, m->stream), what);
}

int gpt_op_embed(gpt_model *m, const char *what, const tk_embedding_params *p) {
    if (m->mode == GPT_SIZE) return 0;
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_EMBED, what, p, sizeof *p);
    return ran(m, tk_embedding_forward(m->ctx, p, m->stream), what);
}

int gpt_op_embed_bwd(gpt_model *m, const char *what, tk_embedding_bwd_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE)
        return need(m, tk_embedding_backward_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_EMBED_BWD, what, p, sizeof *p);
    return ran(m, tk_embedding_backward(m->ctx, p, m->stream), what);
}

int gpt_op_bias_grad(gpt_model *m, const char *what, tk_bias_grad_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE) return need(m, tk_bias_grad_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_BIAS_GRAD, what, p, sizeof *p);
    return ran(m, tk_bias_grad(m->ctx, p, m->stream), what);
}

int gpt_op_grad_norm(gpt_model *m, const char *what, tk_grad_norm_params *p) {
    size_t b = 0;
    p->workspace = m->ws, p->workspace_bytes = m->ws_bytes;
    if (m->mode == GPT_SIZE) return need(m, tk_grad_norm_workspace(m->ctx, p, &b), &b, what);
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_GRAD_NORM, what, p, sizeof *p);
    return ran(m, tk_grad_norm(m->ctx, p, m->stream), what);
}

int gpt_op_adamw(gpt_model *m, const char *what, const tk_adamw_params *p) {
    if (m->mode == GPT_SIZE) return 0;
    if (m->mode == GPT_PREPARE) return gpt_prep_add(m, GPT_PREP_ADAMW, what, p, sizeof *p);
    return ran(m, tk_adamw(m->ctx, p, m->stream), what);
}

/* On the default stream, so in order with the kernels (the library has no
 * stream-taking memset; a data-parallel version on its own stream would
 * need one, or a zeroing kernel). */
int gpt_op_zero(gpt_model *m, const char *what, void *p, size_t bytes) {
    if (m->mode != GPT_RUN) return 0;
    return ran(m, tk_gpu_memset(m->ctx, p, 0, bytes), what);
}
