/* Cubins through the caches: the pipeline behind tk_compile and
 * tk_precompile, callable without lowering (tests pass PTX directly). */
#ifndef TK_JIT_BUILD_H
#define TK_JIT_BUILD_H

#include "jit/jit.h"

/* Produces PTX on a cache miss (malloc'd into *ptx). */
typedef tk_status (*tk_ptx_fn)(void *user, char **ptx, tk_diag *dg);

/* Ahead of time: the ptxas disk entry for (ir_text, arch, local ptxas
 * version); on a miss (or a rejected entry) make_ptx + ptxas build it and
 * it is stored. *cubin is malloc'd; *from says where it came from. Counts
 * disk_hits / misses / llvm_ms (time in make_ptx) / ptx_to_cubin_ms. */
tk_status tk_cubin_via_ptxas(struct tk_jit *j, const char *ir_text, const char *arch,
                             tk_ptx_fn make_ptx, void *user, void **cubin, size_t *n,
                             tk_origin *from, tk_diag *dg);

/* k compiled for arch with ptxas into j's disk cache under the key a GPU
 * machine with the same ptxas looks up (a disk hit if there already):
 * tk_precompile's step for one kernel. */
tk_status tk_precompile_kernel(struct tk_jit *j, const tk_kernel *k, const char *arch, tk_diag *dg);

/* tk_compile of a checked, finished kernel, its failure in *dg (the message
 * tk_compile would set: "tk_compile: kernel 'name': why") and never on the
 * context, so that threads may compile side by side (jit/registry.c). */
tk_status tk_compile_dg(tk_ctx *ctx, const tk_kernel *k, tk_program **out, tk_diag *dg);

#endif
