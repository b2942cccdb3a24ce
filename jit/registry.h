/* The ready-made kernels' registry: one memo per context from a kernel's
 * specialization to its compiled program. This is the one internal header
 * kernels/ may include besides the public headers (include/tk/).
 *
 * A ready-made kernel is one file, kernels/<name>.c, which declares
 *   - its specialization key: a struct of what the compiled kernel depends
 *     on (dtypes, shape constants), never sizes or pointers, which are
 *     run-time arguments. Zero a key (memset) before filling it: the memo
 *     compares keys byte by byte, padding included;
 *   - its builder, from a key to a finished kernel (the public tk.h builder
 *     calls; failures reported with tk_ctx_set_error);
 *   - one static const tk_kernel_def naming both;
 *   - its public entry points (include/tk/tk_run.h), which validate every
 *     parameter, fill the key, ask tk_registry_program for the program and
 *     tk_launch it.
 * No central table lists the kernels: a definition's address identifies it,
 * so adding a kernel edits no other file (beyond its public header and its
 * test). */
#ifndef TK_JIT_REGISTRY_H
#define TK_JIT_REGISTRY_H

#include <stddef.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"

struct tk_diag; /* ir/diag.h: a status and its message */

typedef struct tk_kernel_def {
    const char *name; /* its entry point, for messages ("tk_gemm")                */
    size_t key_size;  /* bytes of its key struct                                  */
    /* A finished kernel for *key (key_size bytes), or a status with the
     * message on ctx. The registry destroys the kernel once compiled. */
    tk_status (*build)(tk_ctx *ctx, const void *key, tk_kernel **out);
} tk_kernel_def;

/* The program of (def, key) in this context: built with def->build and
 * compiled (tk_compile, through the memory and disk caches) on first use,
 * then a lookup. Thread-safe: threads asking for a key not yet built wait
 * for one build, and threads asking for different keys build and compile
 * them at the same time. *out belongs to the context (do not release it) and stays
 * valid until tk_ctx_destroy. info, if not NULL, receives where the program
 * came from (TK_FROM_MEMORY after the first call), the milliseconds this
 * call took and the GPU's arch. A failed build or compile is not memoized:
 * the next call tries again. */
tk_status tk_registry_program(tk_ctx *ctx, const tk_kernel_def *def, const void *key,
                              tk_program **out, tk_prepare_info *info);

/* One program a call needs: a definition and its key. */
typedef struct tk_registry_req {
    const tk_kernel_def *def;
    const void *key;
} tk_registry_req;

/* The programs of n requests (n >= 0; 0 does nothing) into out[0..n-1],
 * each as tk_registry_program gives it, for entry points that launch
 * several kernels: the kernels the memo lacks are built one by one, then
 * compiled side by side (a thread each, up to the cores), so a cold prepare
 * costs about its slowest compile, not their sum. A (def, key) asked twice
 * is built once. info, if not NULL: the least cached origin among the
 * programs (a compile before a disk hit before memory) and the whole call's
 * milliseconds; untouched on failure. On failure out[] is not to be used,
 * the context holds the first failure's message (in request order), and
 * the programs that did compile stay memoized. */
tk_status tk_registry_programs(tk_ctx *ctx, int n, const tk_registry_req *req, tk_program **out,
                               tk_prepare_info *info);
/* The same for n keys of one definition, stored def->key_size bytes apart
 * from `keys` (an array of the kernel's key struct); n <= 16. */
tk_status tk_registry_programs_of(tk_ctx *ctx, const tk_kernel_def *def, int n, const void *keys,
                                  tk_program **out, tk_prepare_info *info);

/* The GPU's arch ("sm_90a") into buf, "" where there is none: asked of the
 * driver once per context (again only while it gave none); on the
 * interpreter backend, the arch tk_ctx_set_backend set. */
void tk_registry_arch(tk_ctx *ctx, char *buf, size_t n);
/* Its SM count, 0 where there is none, asked the same way: an entry point
 * sizing a split per call makes no driver call for it (tk_gpu_sm_count
 * makes the context current, a driver call, each time). */
int tk_registry_sm_count(tk_ctx *ctx);

/* The caller's parameter struct `src` (a tk_attention_params, a
 * tk_gemm_params: a leading size_t struct_size, docs/API.md) into `dst`, the
 * library's own layout of dst_size bytes: the bytes the caller's struct has,
 * zero for fields it ends before (each grown field's 0 means its old
 * behaviour). A NULL src, a struct_size of 0 or below min_size (the end of
 * the first layout), or a larger struct with non-zero bytes this library does
 * not know is an error whose message names fn. */
tk_status tk_params_read(tk_ctx *ctx, const char *fn, const void *src, void *dst, size_t dst_size,
                         size_t min_size);

/* ---- For tests ----------------------------------------------------------- */
/* How the memo compiles a built kernel: tk_compile_dg (jit/build.h) unless a
 * test (without a GPU) sets another. It may run on several threads at once
 * and reports its failure in *dg, never on the context. */
typedef tk_status (*tk_registry_compile_fn)(tk_ctx *ctx, const tk_kernel *k, tk_program **out,
                                            struct tk_diag *dg);
/* Sets this context's compile step (NULL: tk_compile_dg back). */
tk_status tk_registry_set_compile(tk_ctx *ctx, tk_registry_compile_fn compile);

#endif
