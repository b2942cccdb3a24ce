/* PTX -> cubin through the driver's JIT linker, and compiler identities
 * (see jit/link.h). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"
#include "jit/link.h"

#define TK_LINK_LOG 8192

bool tk_arch_valid(const char *arch) {
    if (!arch || strncmp(arch, "sm_", 3) != 0 || strlen(arch) >= 16) return false;
    const char *p = arch + 3;
    if (!isdigit((unsigned char)*p)) return false;
    while (isdigit((unsigned char)*p)) p++;
    return *p == '\0' || ((*p == 'a' || *p == 'f') && p[1] == '\0');
}

void tk_compiler_id_driver(const tk_cuda *cu, char *buf, size_t n) {
    snprintf(buf, n, "cuLink %d", cu->driver_version);
}

void tk_compiler_id_ptxas(const tk_ptxas *p, char *buf, size_t n) {
    snprintf(buf, n, "ptxas %s", p->version);
}

/* Copies the linker's cubin out (it lives inside the link state). */
static tk_status tk_link_take(const void *img, size_t sz, void **cubin, size_t *n, tk_diag *dg) {
    *cubin = malloc(sz ? sz : 1);
    if (!*cubin)
        return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory for a %zu-byte cubin", sz);
    memcpy(*cubin, img, sz);
    *n = sz;
    return TK_OK;
}

/* One failed link step: the driver's message plus the linker's logs, which
 * hold ptxas's own diagnostics (line numbers, register errors). */
static tk_status tk_link_fail(const tk_cuda *cu, CUresult r, const char *call, const char *elog,
                              const char *ilog, tk_diag *dg) {
    tk_diag what = {0};
    tk_cuda_check(cu, r, call, &what);
    return tk_diag_fail(dg, TK_ERR_PTXAS, "%s\n%s%s%s", what.msg, elog, *ilog ? "\n" : "", ilog);
}

/* ptxas ignores setmaxnreg in relocatable code, which is all the JIT linker
 * makes ("to maintain compatibility across compilation units"), and a
 * warp-specialized kernel's consumers then spill (jit/plan.c). Such PTX is
 * compiled whole by the module loader instead, here once for its log, and
 * the image kept in the caches is the PTX itself: cuModuleLoadData compiles
 * it again at each load, a lookup in the driver's own compute cache (unless
 * CUDA_CACHE_DISABLE is set). jit/build.c prefers ptxas for such kernels,
 * which makes a real cubin. */
static tk_status tk_whole_compile(const tk_cuda *cu, const char *ptx, CUjit_option *opt, void **val,
                                  const char *elog, const char *ilog, void **cubin, size_t *n,
                                  tk_diag *dg) {
    CUmodule mod = NULL;
    CUresult r = cu->cuModuleLoadDataEx(&mod, ptx, 4, opt, val);
    if (r != CUDA_SUCCESS) return tk_link_fail(cu, r, "cuModuleLoadDataEx", elog, ilog, dg);
    cu->cuModuleUnload(mod);
    return tk_link_take(ptx, strlen(ptx) + 1, cubin, n, dg);
}

tk_status tk_culink_compile(const tk_cuda *cu, const char *ptx, bool whole, void **cubin, size_t *n,
                            tk_diag *dg) {
    *cubin = NULL;
    *n = 0;
    char *elog = calloc(2, TK_LINK_LOG);
    if (!elog) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    char *ilog = elog + TK_LINK_LOG;
    CUjit_option opt[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    /* Sizes travel as pointer-sized integers inside the void* array. */
    void *val[] = {elog, (void *)(uintptr_t)(TK_LINK_LOG - 1), ilog,
                   (void *)(uintptr_t)(TK_LINK_LOG - 1)};
    if (whole) {
        tk_status s = tk_whole_compile(cu, ptx, opt, val, elog, ilog, cubin, n, dg);
        free(elog);
        return s;
    }
    CUlinkState st = NULL;
    CUresult r = cu->cuLinkCreate(4, opt, val, &st);
    tk_status s = TK_OK;
    if (r != CUDA_SUCCESS) {
        s = tk_cuda_check(cu, r, "cuLinkCreate", dg);
    } else if ((r = cu->cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1, "tk.ptx",
                                      0, NULL, NULL)) != CUDA_SUCCESS) {
        s = tk_link_fail(cu, r, "cuLinkAddData", elog, ilog, dg);
    } else {
        void *img = NULL;
        size_t sz = 0;
        r = cu->cuLinkComplete(st, &img, &sz);
        s = r != CUDA_SUCCESS ? tk_link_fail(cu, r, "cuLinkComplete", elog, ilog, dg)
                              : tk_link_take(img, sz, cubin, n, dg);
    }
    if (st) cu->cuLinkDestroy(st);
    free(elog);
    return s;
}
