/* The context: all state a TileKittens user holds. No global mutable state
 * exists anywhere else in the library. */
#ifndef TK_CTX_H
#define TK_CTX_H

#include "tk/tk.h"

struct tk_jit;      /* jit/jit.h: driver table, caches, statistics (lazily made) */
struct tk_runcache; /* kernels/run.c: compiled ready-made kernels (lazily made)  */

struct tk_ctx {
    char error[2048];     /* last context-level error message            */
    struct tk_jit *jit;   /* NULL until a JIT/GPU entry point is used     */
    struct tk_runcache *run; /* NULL until a ready-made kernel is used   */
};

/* Records a context-level error; returns `s`. */
tk_status tk_ctx_fail(tk_ctx *ctx, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tk_ctx_clear_error(tk_ctx *ctx);

/* Implemented in jit/: frees what ctx->jit holds (NULL-safe). */
void tk_jit_destroy(struct tk_jit *jit);
/* Implemented in kernels/run.c (NULL-safe). */
void tk_runcache_destroy(struct tk_runcache *rc);

#endif
