/* Context lifetime and context-level errors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/ctx.h"

tk_status tk_ctx_create(tk_ctx **out) {
    if (!out) return TK_ERR_INVALID_ARG;
    *out = calloc(1, sizeof(tk_ctx));
    return *out ? TK_OK : TK_ERR_NO_MEMORY;
}

void tk_ctx_destroy(tk_ctx *ctx) {
    if (!ctx) return;
    tk_runcache_destroy(ctx->run); /* releases programs: before the JIT goes */
    tk_jit_destroy(ctx->jit);
    free(ctx);
}

const char *tk_ctx_error(const tk_ctx *ctx) {
    return ctx ? ctx->error : "tk_ctx_error: ctx is NULL";
}

tk_status tk_ctx_fail(tk_ctx *ctx, tk_status s, const char *fmt, ...) {
    if (!ctx) return s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    return s;
}

void tk_ctx_clear_error(tk_ctx *ctx) {
    if (ctx) ctx->error[0] = '\0';
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
