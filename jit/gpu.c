/* Public device entry points of tk_jit.h: the choice of GPU, device memory
 * and synchronization on that GPU's primary context (device 0 unless
 * tk_gpu_set_device chose another). Each one starts the driver on first use and
 * reports failures (no driver, CUDA errors) through the context's error.
 * On a context of the interpreter backend they never touch the driver: host
 * memory stands in for the device's (jit/host.c). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jit/host.h"
#include "jit/jit.h"

/* The driver, with the primary context current on this thread. */
static tk_status tk_gpu_begin(tk_ctx *ctx, const char *what, tk_cuda **cu) {
    tk_diag dg = {0};
    if (!ctx) return TK_ERR_INVALID_ARG;
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", what);
    tk_status s = tk_jit_cuda(j, cu, &dg);
    if (s == TK_OK) s = tk_cuda_enter(*cu, &dg);
    if (s != TK_OK) return tk_ctx_fail(ctx, s, "%s: %s", what, dg.msg);
    return TK_OK;
}

/* Reports a failed driver call made by `what`. */
static tk_status tk_gpu_check(tk_ctx *ctx, const tk_cuda *cu, CUresult r, const char *what,
                              const char *call) {
    tk_diag dg = {0};
    tk_status s = tk_cuda_check(cu, r, call, &dg);
    return s == TK_OK ? TK_OK : tk_ctx_fail(ctx, s, "%s: %s", what, dg.msg);
}

static CUdeviceptr tk_dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

tk_status tk_gpu_init(tk_ctx *ctx) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return TK_OK; /* the interpreter needs no device */
    return tk_gpu_begin(ctx, "tk_gpu_init", &cu);
}

/* The device is fixed when the driver starts (the context's modules, memory
 * and cache live there), so choosing it is only allowed before; the
 * interpreter stands in for one GPU, number 0. */
tk_status tk_gpu_set_device(tk_ctx *ctx, int ordinal) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (ordinal < 0)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_gpu_set_device: device %d; devices are numbered from 0", ordinal);
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_gpu_set_device: out of memory");
    pthread_mutex_lock(&j->lock);
    bool interp = j->backend == TK_BACKEND_INTERP, started = j->cu_tried;
    int was = j->device;
    if (!started && !interp) j->device = ordinal;
    pthread_mutex_unlock(&j->lock);
    if (interp)
        return ordinal == 0 ? TK_OK
                            : tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                                          "tk_gpu_set_device: device %d on the interpreter "
                                          "backend, which is one device, 0",
                                          ordinal);
    if (started)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_gpu_set_device: the context already started (or tried) the GPU "
                           "on device %d; choose the device before tk_gpu_init, memory or a "
                           "compile",
                           was);
    return TK_OK;
}

/* arch into buf, which must hold it. */
static tk_status tk_gpu_arch_copy(tk_ctx *ctx, const char *arch, char *buf, size_t n) {
    if (!buf || n <= strlen(arch))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_arch: buffer too small for \"%s\"",
                           arch);
    memcpy(buf, arch, strlen(arch) + 1);
    return TK_OK;
}

tk_status tk_gpu_arch(tk_ctx *ctx, char *buf, size_t n) {
    tk_cuda *cu;
    tk_host_target t;
    if (tk_host_backend(ctx, &t)) return tk_gpu_arch_copy(ctx, t.arch, buf, n);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_arch", &cu);
    return s != TK_OK ? s : tk_gpu_arch_copy(ctx, cu->arch, buf, n);
}

tk_status tk_gpu_sm_count(tk_ctx *ctx, int *n) {
    tk_cuda *cu;
    if (!n)
        return ctx ? tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_sm_count: n is NULL")
                   : TK_ERR_INVALID_ARG;
    *n = 0;
    tk_host_target t;
    if (tk_host_backend(ctx, &t)) {
        *n = t.sms;
        return TK_OK;
    }
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_sm_count", &cu);
    if (s == TK_OK) *n = cu->sm_count;
    return s;
}

tk_status tk_gpu_alloc(tk_ctx *ctx, size_t bytes, void **dptr) {
    tk_cuda *cu;
    if (!dptr)
        return ctx ? tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_alloc: dptr is NULL")
                   : TK_ERR_INVALID_ARG;
    *dptr = NULL;
    if (tk_host_backend(ctx, NULL)) return tk_host_alloc(ctx, bytes, dptr);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_alloc", &cu);
    if (s != TK_OK || bytes == 0) /* zero bytes: NULL, like malloc may */
        return s;
    CUdeviceptr p = 0;
    s = tk_gpu_check(ctx, cu, cu->cuMemAlloc(&p, bytes), "tk_gpu_alloc", "cuMemAlloc");
    if (s == TK_OK) {
        tk_jit_commit(tk_jit_of(ctx)); /* made by tk_gpu_begin */
        *dptr = (void *)(uintptr_t)p;
    }
    return s;
}

tk_status tk_gpu_free(tk_ctx *ctx, void *dptr) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return tk_host_free(ctx, dptr);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_free", &cu);
    if (s != TK_OK || !dptr) return s;
    return tk_gpu_check(ctx, cu, cu->cuMemFree(tk_dptr(dptr)), "tk_gpu_free", "cuMemFree");
}

tk_status tk_gpu_upload(tk_ctx *ctx, void *dst, const void *src, size_t bytes) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return tk_host_copy(ctx, "tk_gpu_upload", dst, src, bytes);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_upload", &cu);
    if (s != TK_OK || bytes == 0) return s;
    if (!dst || !src) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_upload: NULL pointer");
    return tk_gpu_check(ctx, cu, cu->cuMemcpyHtoD(tk_dptr(dst), src, bytes), "tk_gpu_upload",
                        "cuMemcpyHtoD");
}

tk_status tk_gpu_download(tk_ctx *ctx, void *dst, const void *src, size_t bytes) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return tk_host_copy(ctx, "tk_gpu_download", dst, src, bytes);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_download", &cu);
    if (s != TK_OK || bytes == 0) return s;
    if (!dst || !src) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_download: NULL pointer");
    return tk_gpu_check(ctx, cu, cu->cuMemcpyDtoH(dst, tk_dptr(src), bytes), "tk_gpu_download",
                        "cuMemcpyDtoH");
}

tk_status tk_gpu_memset(tk_ctx *ctx, void *dst, uint8_t byte, size_t bytes) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return tk_host_memset(ctx, dst, byte, bytes);
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_memset", &cu);
    if (s != TK_OK || bytes == 0) return s;
    if (!dst) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_memset: NULL pointer");
    return tk_gpu_check(ctx, cu, cu->cuMemsetD8(tk_dptr(dst), byte, bytes), "tk_gpu_memset",
                        "cuMemsetD8");
}

tk_status tk_gpu_sync(tk_ctx *ctx) {
    tk_cuda *cu;
    if (tk_host_backend(ctx, NULL)) return TK_OK; /* launches there are synchronous */
    tk_status s = tk_gpu_begin(ctx, "tk_gpu_sync", &cu);
    if (s != TK_OK) return s;
    return tk_gpu_check(ctx, cu, cu->cuCtxSynchronize(), "tk_gpu_sync", "cuCtxSynchronize");
}
