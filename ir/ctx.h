/* The context: all state a TileKittens user holds. No global mutable state
 * exists anywhere else in the library.
 *
 * The context knows no layer above the IR. A layer that keeps per-context
 * state (the JIT's driver table and caches, the ready-made kernels' memo)
 * attaches it through a slot: it declares one static tk_ctx_slot_def and
 * asks tk_ctx_slot for its state, which is made on first use and destroyed
 * with the context. */
#ifndef TK_CTX_H
#define TK_CTX_H

#include <pthread.h>

#include "ir/diag.h"
#include "tk/tk.h"

/* A kind of per-context state. Its address is the slot's identity: declare
 * one static const definition per kind. */
typedef struct tk_ctx_slot_def {
    const char *name;             /* for messages                               */
    void *(*make)(tk_ctx *ctx);   /* the state, or NULL when out of memory; may
                                     take other slots (which are then made
                                     first and so destroyed after this one)  */
    void (*destroy)(void *state); /* frees what make returned                 */
} tk_ctx_slot_def;

/* Slots one context can hold: one per layer's kind of state (the library
 * uses two), not per use. */
enum { TK_CTX_SLOTS = 8 };

struct tk_ctx_slot; /* ir/ctx.c: one made slot (its def and state) */

struct tk_ctx_err; /* ir/ctx.c: one thread's last error */

struct tk_ctx {
    /* Each thread's last failed context-level call (tk_ctx_error): threads
     * sharing a context read their own message, never one another thread
     * is writing. The list grows by one entry per thread that fails and
     * is freed with the context; err_mu guards it (each entry is written
     * only by its thread). */
    pthread_mutex_t err_mu;
    struct tk_ctx_err *errs;
    tk_diag no_memory; /* the message when a thread's entry cannot be made */
    /* Made slots in order of creation; NULL past the last. Filled by
     * compare-and-swap, never emptied before tk_ctx_destroy. */
    struct tk_ctx_slot *slots[TK_CTX_SLOTS];
    tk_log_fn log_fn; /* tk_ctx_set_log; NULL: one line to stderr */
    void *log_user;
};

/* The state of `def` in ctx, made with def->make on first use. Thread-safe
 * and lock-free: threads sharing a context may race to make it; one state
 * is published, the others are destroyed by the threads that made them, and
 * every caller gets the published one. NULL (with a message in the context's
 * error) when make fails or all TK_CTX_SLOTS slots are taken.
 * tk_ctx_destroy destroys slots in reverse order of creation. */
void *tk_ctx_slot(tk_ctx *ctx, const tk_ctx_slot_def *def);
/* The state of `def` if it was made, else NULL; never makes it. */
void *tk_ctx_slot_find(const tk_ctx *ctx, const tk_ctx_slot_def *def);

/* Records a context-level error, replacing the last one (each failed
 * public call reports once); returns `s`. NULL ctx: only returns s. */
tk_status tk_ctx_fail(tk_ctx *ctx, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The one place a public entry point hands an internal failure to the
 * context: records "<prefix><d->msg>" with d's status; returns d->st. */
tk_status tk_ctx_report(tk_ctx *ctx, const char *prefix, const tk_diag *d);
void tk_ctx_clear_error(tk_ctx *ctx);
/* A warning through the context's log hook (tk_ctx_set_log), or one line on
 * stderr; the caller makes sure each condition is logged once. NULL ctx:
 * stderr. Leaves the last error alone: nothing failed. */
void tk_ctx_log(tk_ctx *ctx, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
