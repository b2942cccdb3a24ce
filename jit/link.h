/* PTX -> cubin, two ways: the driver's JIT linker (needs a GPU) or ptxas
 * ahead of time (needs only the toolkit). Plus the compiler identities that
 * go into cache keys, so a cubin built by one compiler version is never
 * mistaken for another's. */
#ifndef TK_JIT_LINK_H
#define TK_JIT_LINK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "jit/cuda.h"
#include "tk/tk.h"

/* Where ptxas is and which build it is. */
typedef struct tk_ptxas {
    char path[PATH_MAX];
    char version[128]; /* last line of `ptxas --version` (the build id) */
} tk_ptxas;

/* Finds ptxas: $TK_PTXAS, else the first `ptxas` on PATH, else
 * /usr/local/cuda/bin/ptxas; then runs `ptxas --version`. TK_ERR_PTXAS
 * with a message when none is usable. */
tk_status tk_ptxas_find(tk_ptxas *p, tk_diag *dg);
/* Runs `ptxas -arch=<arch> -o <cubin> <ptx>` on private temp files.
 * *cubin is malloc'd. TK_ERR_PTXAS carries ptxas's output. */
tk_status tk_ptxas_compile(const tk_ptxas *p, const char *ptx, const char *arch, void **cubin,
                           size_t *n, tk_diag *dg);
/* The driver's JIT linker on the current device (context must be current).
 * *cubin is malloc'd. TK_ERR_PTXAS carries the linker's error log. With
 * `whole` (PTX that uses setmaxnreg) the module loader compiles it instead
 * and the image is the PTX itself (jit/link.c says why). */
tk_status tk_culink_compile(const tk_cuda *cu, const char *ptx, bool whole, void **cubin, size_t *n,
                            tk_diag *dg);

/* Compiler identities for cache keys and entry headers (< 64 bytes kept in
 * headers; keys hash the whole string). */
void tk_compiler_id_driver(const tk_cuda *cu, char *buf, size_t n); /* "cuLink 12080" */
void tk_compiler_id_ptxas(const tk_ptxas *p, char *buf, size_t n);  /* "ptxas Build ..." */

/* "sm_<digits>[a|f]", short enough for the entry header's 16 bytes. */
bool tk_arch_valid(const char *arch);

#endif
