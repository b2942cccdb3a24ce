/* The interpreter backend (tk_ctx_set_backend, tk/tk_jit.h): a context
 * whose programs run on the CPU interpreter, with host memory standing in
 * for device memory. The public tk_gpu_*, tk_compile and tk_launch entry
 * points turn here when their context (or program) is on it; everything
 * else (the ready-made kernels' checks and plans) runs unchanged. */
#ifndef TK_JIT_HOST_H
#define TK_JIT_HOST_H

#include <stdbool.h>

#include "jit/jit.h"
#include "jit/program.h"

/* Whether ctx's programs run on the interpreter; *t (may be NULL) receives
 * its target. False for NULL and for a context whose JIT state was never
 * made (the GPU default). */
bool tk_host_backend(const tk_ctx *ctx, tk_host_target *t);
/* Fixes j's backend: the context has made a program or an allocation. */
void tk_jit_commit(struct tk_jit *j);

/* tk_gpu_* on an interpreter context (checked arguments as the GPU's). */
tk_status tk_host_alloc(tk_ctx *ctx, size_t bytes, void **ptr);
tk_status tk_host_free(tk_ctx *ctx, void *ptr);
tk_status tk_host_copy(tk_ctx *ctx, const char *what, void *dst, const void *src, size_t bytes);
tk_status tk_host_memset(tk_ctx *ctx, void *dst, uint8_t byte, size_t bytes);
/* Frees the blocks tk_gpu_free was not given (tk_jit_destroy). */
void tk_host_free_all(struct tk_jit *j);

/* tk_compile_dg for an interpreter context: a program owning a copy of the
 * checked, finished k (program->interp). */
tk_status tk_host_compile_dg(tk_ctx *ctx, const tk_kernel *k, tk_program **out, tk_diag *dg);
/* Runs p's kernel (args already checked, grid not empty); reports on
 * p->ctx. */
tk_status tk_host_launch(tk_program *p, int nargs, const tk_arg *args);

/* A deep copy of finished kernel k that reports to ctx (jit/kernel_copy.c).
 * TK_ERR_NO_MEMORY, or TK_ERR_STATE when the copy would not print as k did
 * (an IR field this copy does not know). */
tk_status tk_kernel_copy(const tk_kernel *k, tk_ctx *ctx, tk_kernel **out, tk_diag *dg);

#endif
