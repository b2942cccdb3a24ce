/* Loading the CUDA driver at run time (see jit/cuda.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda.h"
#include "jit/jit.h"

/* The driver ABI we ask cuGetProcAddress for. Every function below has kept
 * its prototype from CUDA 12.0 through 13.x, so requesting 12000 returns the
 * variants our typedefs describe, whether the driver is older or newer than
 * the headers we build with. */
#define TK_CUDA_ABI 12000

typedef CUresult (*tk_getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                     CUdriverProcAddressQueryResult *);
typedef CUresult (*tk_getproc_v1_fn)(const char *, void **, int, cuuint64_t);

#define TK_CU_SYM(f)                                                                               \
    { #f, offsetof(tk_cuda, f) }
static const struct {
    const char *name;
    size_t off;
} tk_cuda_syms[] = {
    TK_CU_SYM(cuInit),
    TK_CU_SYM(cuDriverGetVersion),
    TK_CU_SYM(cuDeviceGetCount),
    TK_CU_SYM(cuDeviceGet),
    TK_CU_SYM(cuDeviceGetAttribute),
    TK_CU_SYM(cuDevicePrimaryCtxRetain),
    TK_CU_SYM(cuDevicePrimaryCtxRelease),
    TK_CU_SYM(cuCtxSetCurrent),
    TK_CU_SYM(cuCtxSynchronize),
    TK_CU_SYM(cuMemAlloc),
    TK_CU_SYM(cuMemFree),
    TK_CU_SYM(cuMemcpyHtoD),
    TK_CU_SYM(cuMemcpyDtoH),
    TK_CU_SYM(cuMemsetD8),
    TK_CU_SYM(cuLinkCreate),
    TK_CU_SYM(cuLinkAddData),
    TK_CU_SYM(cuLinkComplete),
    TK_CU_SYM(cuLinkDestroy),
    TK_CU_SYM(cuModuleLoadData),
    TK_CU_SYM(cuModuleLoadDataEx),
    TK_CU_SYM(cuModuleUnload),
    TK_CU_SYM(cuModuleGetFunction),
    TK_CU_SYM(cuFuncSetAttribute),
    TK_CU_SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    TK_CU_SYM(cuOccupancyMaxActiveClusters),
    TK_CU_SYM(cuLaunchKernel),
    TK_CU_SYM(cuLaunchKernelEx),
    TK_CU_SYM(cuGetErrorString),
    TK_CU_SYM(cuTensorMapEncodeTiled),
};

void tk_cuda_arch_name(int major, int minor, char *buf, size_t n) {
    /* Hopper's wgmma/TMA instructions need the arch-specific "a" target. */
    if (major == 9 && minor == 0)
        snprintf(buf, n, "sm_90a");
    else
        snprintf(buf, n, "sm_%d%d", major, minor);
}

tk_status tk_cuda_check(const tk_cuda *cu, CUresult r, const char *call, tk_diag *dg) {
    if (r == CUDA_SUCCESS) return TK_OK;
    const char *s = NULL;
    if (!cu || !cu->cuGetErrorString || cu->cuGetErrorString(r, &s) != CUDA_SUCCESS || !s)
        s = "unknown CUDA error";
    return tk_diag_fail(dg, TK_ERR_CUDA, "%s: %s (CUresult %d)", call, s, (int)r);
}

/* Finds cuGetProcAddress (the _v2 export first: since CUDA 12 the plain
 * name keeps the old 4-argument prototype) and resolves the table. */
static tk_status tk_cuda_resolve(tk_cuda *cu, tk_diag *dg) {
    tk_getproc_v2_fn gp2 = NULL;
    tk_getproc_v1_fn gp1 = NULL;
    void *sym = dlsym(cu->dl, "cuGetProcAddress_v2");
    if (sym)
        memcpy(&gp2, &sym, sizeof sym);
    else if ((sym = dlsym(cu->dl, "cuGetProcAddress")))
        memcpy(&gp1, &sym, sizeof sym);
    else
        return tk_diag_fail(dg, TK_ERR_NO_DRIVER,
                            "no CUDA driver (libcuda.so.1 has no cuGetProcAddress: driver older "
                            "than 11.3)");
    for (size_t i = 0; i < sizeof tk_cuda_syms / sizeof tk_cuda_syms[0]; i++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult r =
            gp2 ? gp2(tk_cuda_syms[i].name, &p, TK_CUDA_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &q)
                : gp1(tk_cuda_syms[i].name, &p, TK_CUDA_ABI, CU_GET_PROC_ADDRESS_DEFAULT);
        if (r != CUDA_SUCCESS || !p || q != CU_GET_PROC_ADDRESS_SUCCESS)
            return tk_diag_fail(dg, TK_ERR_NO_DRIVER,
                                "CUDA driver lacks %s (cuGetProcAddress: CUresult %d)",
                                tk_cuda_syms[i].name, (int)r);
        memcpy((char *)cu + tk_cuda_syms[i].off, &p, sizeof p);
    }
    return TK_OK;
}

static tk_status tk_cuda_attr(tk_cuda *cu, CUdevice_attribute a, int *v, tk_diag *dg) {
    return tk_cuda_check(cu, cu->cuDeviceGetAttribute(v, a, cu->dev), "cuDeviceGetAttribute", dg);
}

/* cu->ordinal's device, or why there is none: a number past the devices
 * the driver sees (CUDA_VISIBLE_DEVICES may hide some) is the caller's
 * mistake, not the driver's, so it is TK_ERR_INVALID_ARG with the count. */
static tk_status tk_cuda_device(tk_cuda *cu, tk_diag *dg) {
    int n = 0;
    tk_status s = tk_cuda_check(cu, cu->cuDeviceGetCount(&n), "cuDeviceGetCount", dg);
    if (s != TK_OK) return s;
    if (cu->ordinal >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        char why[96] = "";
        if (vis) snprintf(why, sizeof why, "; CUDA_VISIBLE_DEVICES is \"%.60s\"", vis);
        if (n == 0)
            return tk_diag_fail(dg, TK_ERR_INVALID_ARG,
                                "no CUDA device %d (tk_gpu_set_device): the driver sees none%s",
                                cu->ordinal, why);
        return tk_diag_fail(dg, TK_ERR_INVALID_ARG,
                            "no CUDA device %d (tk_gpu_set_device): the driver sees %d, "
                            "numbered 0 .. %d%s",
                            cu->ordinal, n, n - 1, why);
    }
    return tk_cuda_check(cu, cu->cuDeviceGet(&cu->dev, cu->ordinal), "cuDeviceGet", dg);
}

/* cuInit, the chosen device, its primary context, and the facts we key on. */
static tk_status tk_cuda_start(tk_cuda *cu, tk_diag *dg) {
    tk_status s;
    if ((s = tk_cuda_check(cu, cu->cuInit(0), "cuInit", dg)) ||
        (s = tk_cuda_check(cu, cu->cuDriverGetVersion(&cu->driver_version), "cuDriverGetVersion",
                           dg)) ||
        (s = tk_cuda_device(cu, dg)) ||
        (s = tk_cuda_attr(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &cu->cc_major, dg)) ||
        (s = tk_cuda_attr(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &cu->cc_minor, dg)) ||
        (s = tk_cuda_attr(cu, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                          &cu->max_smem_optin, dg)) ||
        (s = tk_cuda_attr(cu, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &cu->sm_count, dg)))
        return s;
    if ((s = tk_cuda_check(cu, cu->cuDevicePrimaryCtxRetain(&cu->pctx, cu->dev),
                           "cuDevicePrimaryCtxRetain", dg)))
        return s;
    tk_cuda_arch_name(cu->cc_major, cu->cc_minor, cu->arch, sizeof cu->arch);
    return tk_cuda_enter(cu, dg);
}

tk_status tk_cuda_open(tk_cuda **out, int ordinal, tk_diag *dg) {
    *out = NULL;
    if (ordinal < 0)
        return tk_diag_fail(dg, TK_ERR_INVALID_ARG, "CUDA device %d: ordinals are >= 0", ordinal);
    tk_cuda *cu = calloc(1, sizeof *cu);
    if (!cu) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    atomic_init(&cu->refs, 1);
    cu->ordinal = ordinal;
    cu->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->dl) {
        const char *why = dlerror();
        tk_diag_fail(dg, TK_ERR_NO_DRIVER, "no CUDA driver (%s)", why ? why : "not found");
        free(cu);
        return TK_ERR_NO_DRIVER;
    }
    tk_status s = tk_cuda_resolve(cu, dg);
    if (s == TK_OK) s = tk_cuda_start(cu, dg);
    if (s != TK_OK) {
        tk_cuda_unref(cu);
        return s;
    }
    *out = cu;
    return TK_OK;
}

tk_cuda *tk_cuda_ref(tk_cuda *cu) {
    if (cu) atomic_fetch_add(&cu->refs, 1);
    return cu;
}

void tk_cuda_unref(tk_cuda *cu) {
    if (!cu || atomic_fetch_sub(&cu->refs, 1) != 1) return;
    if (cu->pctx) cu->cuDevicePrimaryCtxRelease(cu->dev);
    if (cu->dl) dlclose(cu->dl);
    free(cu);
}

tk_status tk_cuda_enter(const tk_cuda *cu, tk_diag *dg) {
    return tk_cuda_check(cu, cu->cuCtxSetCurrent(cu->pctx), "cuCtxSetCurrent", dg);
}
