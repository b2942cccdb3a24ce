/* The startup's prepare pass on threads. In GPT_PREPARE mode each kernel
 * call wrapper queues a copy of its parameters (gpt_prep_add) instead of
 * preparing; gpt_prep_run then makes the queued prepare calls on several
 * threads sharing the context. The library builds each specialization once
 * (a thread asking for one being built waits for it) and compiles different
 * ones at the same time, so a cold start costs about the sum of its
 * compiles over the threads instead of the sum. The copies stay valid: the
 * trainer's parameters hold device pointers and no host configs. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpt.h"

typedef struct gpt_prep_call {
    gpt_prep_kind kind;
    char what[64];
    union {
        tk_gemm_params gemm;
        tk_norm_params norm;
        tk_norm_bwd_params norm_bwd;
        tk_attention_params attn;
        tk_attention_bwd_params attn_bwd;
        tk_xent_params xent;
        tk_embedding_params embed;
        tk_embedding_bwd_params embed_bwd;
        tk_bias_grad_params bias_grad;
        tk_grad_norm_params grad_norm;
        tk_adamw_params adamw;
    } p;
    tk_status s;
} gpt_prep_call;

struct gpt_prep {
    gpt_prep_call *call;
    int n, cap;
    atomic_int next;
    tk_ctx *ctx;
};

int gpt_prep_add(gpt_model *m, gpt_prep_kind kind, const char *what, const void *p, size_t size) {
    gpt_prep *q = m->prep;
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        gpt_prep_call *c = gpt_malloc((size_t)cap * sizeof *c);
        if (!c) return 1;
        if (q->n) memcpy(c, q->call, (size_t)q->n * sizeof *c);
        free(q->call);
        q->call = c, q->cap = cap;
    }
    gpt_prep_call *c = &q->call[q->n++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    snprintf(c->what, sizeof c->what, "%s", what);
    memcpy(&c->p, p, size < sizeof c->p ? size : sizeof c->p);
    return 0;
}

static tk_status prepare(tk_ctx *ctx, const gpt_prep_call *c) {
    switch (c->kind) {
    case GPT_PREP_GEMM: return tk_gemm_prepare(ctx, &c->p.gemm, NULL);
    case GPT_PREP_NORM: return tk_norm_prepare(ctx, &c->p.norm, NULL);
    case GPT_PREP_NORM_BWD: return tk_norm_backward_prepare(ctx, &c->p.norm_bwd, NULL);
    case GPT_PREP_ATTN: return tk_attention_prepare(ctx, &c->p.attn, NULL);
    case GPT_PREP_ATTN_BWD: return tk_attention_backward_prepare(ctx, &c->p.attn_bwd, NULL);
    case GPT_PREP_XENT: return tk_cross_entropy_prepare(ctx, &c->p.xent, NULL);
    case GPT_PREP_EMBED: return tk_embedding_forward_prepare(ctx, &c->p.embed, NULL);
    case GPT_PREP_EMBED_BWD: return tk_embedding_backward_prepare(ctx, &c->p.embed_bwd, NULL);
    case GPT_PREP_BIAS_GRAD: return tk_bias_grad_prepare(ctx, &c->p.bias_grad, NULL);
    case GPT_PREP_GRAD_NORM: return tk_grad_norm_prepare(ctx, &c->p.grad_norm, NULL);
    case GPT_PREP_ADAMW: return tk_adamw_prepare(ctx, &c->p.adamw, NULL);
    }
    return TK_ERR_INVALID_ARG;
}

static void *worker(void *arg) {
    gpt_prep *q = arg;
    for (int i; (i = atomic_fetch_add(&q->next, 1)) < q->n;)
        q->call[i].s = prepare(q->ctx, &q->call[i]);
    return NULL;
}

/* The queued calls on up to `threads` threads (0: one a core, at most 16),
 * the calling one included. A failure is made again alone on this thread,
 * so that the context's message is its own (failures are not memoized). */
static int run_queue(gpt_model *m, gpt_prep *q, int threads) {
    enum { MAX = 16 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = threads > 0 ? threads : cores > 0 ? (int)cores : 1;
    want = want > MAX ? MAX : want > q->n ? q->n : want;
    pthread_t th[MAX];
    int started = 0;
    q->ctx = m->ctx;
    atomic_init(&q->next, 0);
    while (started < want - 1 && pthread_create(&th[started], NULL, worker, q) == 0) started++;
    worker(q);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    m->prep_calls = q->n, m->prep_used = started + 1;
    for (int i = 0; i < q->n; i++) {
        tk_status s = q->call[i].s ? prepare(m->ctx, &q->call[i]) : TK_OK;
        if (s) return gpt_tk_fail(m->ctx, s, q->call[i].what);
    }
    return 0;
}

int gpt_prep_pass(gpt_model *m, int (*pass)(gpt_model *), int threads) {
    gpt_prep q = {0};
    m->prep = &q;
    int err = pass(m);
    m->prep = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!err) err = run_queue(m, &q, threads);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->prep_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    free(q.call);
    return err;
}
