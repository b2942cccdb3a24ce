/* Context lifetime, context-level errors and the context's slots. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ctx.h"

struct tk_ctx_slot {
    const tk_ctx_slot_def *def;
    void *state;
};

struct tk_ctx_err {
    pthread_t thread;
    tk_diag d;
    struct tk_ctx_err *next;
};

tk_status tk_ctx_create(tk_ctx **out) {
    if (!out) return TK_ERR_INVALID_ARG;
    tk_ctx *ctx = calloc(1, sizeof(tk_ctx));
    if (ctx && pthread_mutex_init(&ctx->err_mu, NULL)) {
        free(ctx);
        ctx = NULL;
    }
    *out = ctx;
    return ctx ? TK_OK : TK_ERR_NO_MEMORY;
}

void tk_ctx_destroy(tk_ctx *ctx) {
    if (!ctx) return;
    /* Reverse order of creation: a state made by taking another slot first
     * (the ready-made kernels' memo holds programs of the JIT) goes first. */
    for (int i = TK_CTX_SLOTS - 1; i >= 0; i--) {
        struct tk_ctx_slot *s = ctx->slots[i];
        if (!s) continue;
        s->def->destroy(s->state);
        free(s);
    }
    for (struct tk_ctx_err *e = ctx->errs, *next; e; e = next) {
        next = e->next;
        free(e);
    }
    pthread_mutex_destroy(&ctx->err_mu);
    free(ctx);
}

/* ---- Slots ------------------------------------------------------------------ */
void *tk_ctx_slot_find(const tk_ctx *ctx, const tk_ctx_slot_def *def) {
    if (!ctx || !def) return NULL;
    for (int i = 0; i < TK_CTX_SLOTS; i++) {
        struct tk_ctx_slot *s = __atomic_load_n(&ctx->slots[i], __ATOMIC_ACQUIRE);
        if (!s) return NULL; /* slots fill in order: none is made after a free one */
        if (s->def == def) return s->state;
    }
    return NULL;
}

/* Publishes `mine` in the first free slot and returns its state, unless a
 * thread racing with this one published the same def first: then returns
 * theirs (NULL when every slot is taken) and mine is the caller's to
 * destroy. Slots before the first free one are taken for good, so a def is
 * published at most once. */
static void *publish(tk_ctx *ctx, struct tk_ctx_slot *mine, int *won) {
    *won = 0;
    for (int i = 0; i < TK_CTX_SLOTS; i++) {
        struct tk_ctx_slot *seen = NULL;
        if (__atomic_compare_exchange_n(&ctx->slots[i], &seen, mine, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            *won = 1;
            return mine->state;
        }
        if (seen->def == mine->def) return seen->state;
    }
    return NULL;
}

void *tk_ctx_slot(tk_ctx *ctx, const tk_ctx_slot_def *def) {
    if (!ctx || !def || !def->make || !def->destroy) return NULL;
    void *state = tk_ctx_slot_find(ctx, def);
    if (state) return state;
    struct tk_ctx_slot *mine = malloc(sizeof *mine);
    if (!mine || !(mine->state = def->make(ctx))) {
        free(mine);
        tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "context slot '%s': out of memory", def->name);
        return NULL;
    }
    mine->def = def;
    int won;
    state = publish(ctx, mine, &won);
    if (won) return state;
    def->destroy(mine->state);
    free(mine);
    if (!state)
        tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "context slot '%s': all %d slots are taken", def->name,
                    TK_CTX_SLOTS);
    return state;
}

/* ---- Errors ----------------------------------------------------------------- */
/* The calling thread's error entry; made on first use when `make` (NULL
 * when it cannot be). */
static struct tk_ctx_err *thread_err(tk_ctx *ctx, bool make) {
    pthread_t self = pthread_self();
    pthread_mutex_lock(&ctx->err_mu);
    struct tk_ctx_err *e = ctx->errs;
    while (e && !pthread_equal(e->thread, self)) e = e->next;
    if (!e && make && (e = calloc(1, sizeof *e))) {
        e->thread = self, e->next = ctx->errs;
        ctx->errs = e;
    }
    pthread_mutex_unlock(&ctx->err_mu);
    return e;
}

const char *tk_ctx_error(const tk_ctx *ctx) {
    if (!ctx) return "tk_ctx_error: ctx is NULL";
    /* the lock and the list are not the caller's state: a const context
     * reads the same message either way */
    struct tk_ctx_err *e = thread_err((tk_ctx *)ctx, false);
    return e ? e->d.msg : ctx->no_memory.msg; /* "" unless an entry failed */
}

static void ctx_vfail(tk_ctx *ctx, tk_status s, const char *fmt, va_list ap) {
    struct tk_ctx_err *e = thread_err(ctx, true);
    tk_diag *d = e ? &e->d : &ctx->no_memory;
    tk_diag_clear(d);
    tk_diag_vfail(d, s, fmt, ap);
}

tk_status tk_ctx_fail(tk_ctx *ctx, tk_status s, const char *fmt, ...) {
    if (!ctx) return s;
    va_list ap;
    va_start(ap, fmt);
    ctx_vfail(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

tk_status tk_ctx_set_error(tk_ctx *ctx, tk_status s, const char *fmt, ...) {
    if (!ctx || !fmt) return s;
    va_list ap;
    va_start(ap, fmt);
    ctx_vfail(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

tk_status tk_ctx_report(tk_ctx *ctx, const char *prefix, const tk_diag *d) {
    if (!d || d->st == TK_OK) return TK_OK;
    return tk_ctx_fail(ctx, d->st, "%s%s", prefix ? prefix : "", d->msg);
}

void tk_ctx_clear_error(tk_ctx *ctx) {
    struct tk_ctx_err *e = ctx ? thread_err(ctx, false) : NULL;
    if (e) tk_diag_clear(&e->d);
}

tk_status tk_ctx_set_log(tk_ctx *ctx, tk_log_fn fn, void *user) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    ctx->log_fn = fn;
    ctx->log_user = user;
    return TK_OK;
}

void tk_ctx_log(tk_ctx *ctx, tk_status s, const char *fmt, ...) {
    char msg[TK_DIAG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx && ctx->log_fn)
        ctx->log_fn(ctx->log_user, s, msg);
    else
        fprintf(stderr, "tilekittens: %s\n", msg);
}

void tk_free(void *p) { free(p); }

const char *tk_status_name(tk_status s) {
    switch (s) {
    case TK_OK: return "TK_OK";
    case TK_ERR_INVALID_ARG: return "TK_ERR_INVALID_ARG";
    case TK_ERR_TYPE: return "TK_ERR_TYPE";
    case TK_ERR_SHAPE: return "TK_ERR_SHAPE";
    case TK_ERR_SCOPE: return "TK_ERR_SCOPE";
    case TK_ERR_STATE: return "TK_ERR_STATE";
    case TK_ERR_NO_MEMORY: return "TK_ERR_NO_MEMORY";
    case TK_ERR_NO_DRIVER: return "TK_ERR_NO_DRIVER";
    case TK_ERR_CUDA: return "TK_ERR_CUDA";
    case TK_ERR_LLVM: return "TK_ERR_LLVM";
    case TK_ERR_PTXAS: return "TK_ERR_PTXAS";
    case TK_ERR_CACHE: return "TK_ERR_CACHE";
    case TK_ERR_IO: return "TK_ERR_IO";
    case TK_ERR_UNSUPPORTED: return "TK_ERR_UNSUPPORTED";
    case TK_ERR_LAUNCH: return "TK_ERR_LAUNCH";
    case TK_ERR_RUNTIME: return "TK_ERR_RUNTIME";
    }
    return "TK_ERR_UNKNOWN";
}
