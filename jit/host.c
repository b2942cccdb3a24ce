/* The interpreter backend (jit/host.h): the backend setting, host memory
 * behind tk_gpu_*, and programs that interpret their kernel.
 *
 * The backend lives in the context's JIT state, so a context is one
 * backend for its whole life: its memory cache and the ready-made kernels'
 * memo (both per context) never mix interpreted programs with GPU ones,
 * and interpreted programs never reach the disk cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "jit/build.h"
#include "jit/host.h"

#define TK_HOST_ALIGN    256 /* what cuMemAlloc guarantees, and more than the kernels ask */
#define TK_HOST_SMS_MAX  4096
#define TK_HOST_SMS_DEF  132 /* an H100 SXM */
#define TK_HOST_ARCH_DEF "sm_90a"

/* ---- The backend --------------------------------------------------------- */
static tk_status tk_backend_check(tk_ctx *ctx, tk_backend b, const char *arch, int sms) {
    if (b != TK_BACKEND_GPU && b != TK_BACKEND_INTERP)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_ctx_set_backend: backend %d is neither TK_BACKEND_GPU (0) nor "
                           "TK_BACKEND_INTERP (1)",
                           (int)b);
    if (!tk_target_find(arch)) {
        char names[160];
        tk_target_names(names, sizeof names);
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_ctx_set_backend: unknown arch \"%s\"; the known ones are %s", arch,
                           names);
    }
    if (sms < 0 || sms > TK_HOST_SMS_MAX)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_ctx_set_backend: sms is %d; expected 1 .. %d, or 0 for %d", sms,
                           TK_HOST_SMS_MAX, TK_HOST_SMS_DEF);
    return TK_OK;
}

tk_status tk_ctx_set_backend(tk_ctx *ctx, tk_backend b, const char *arch, int sms) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!arch) arch = TK_HOST_ARCH_DEF;
    tk_status s = tk_backend_check(ctx, b, arch, sms);
    if (s != TK_OK) return s;
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_ctx_set_backend: out of memory");
    pthread_mutex_lock(&j->lock);
    bool committed = j->committed;
    tk_backend was = j->backend;
    int device = j->device; /* the interpreter is one device, 0 (tk_gpu_set_device) */
    bool moved = b == TK_BACKEND_INTERP && device != 0;
    if (!committed && !moved) {
        j->backend = b;
        snprintf(j->target.arch, sizeof j->target.arch, "%s", tk_target_find(arch)->arch);
        j->target.sms = sms ? sms : TK_HOST_SMS_DEF;
    }
    pthread_mutex_unlock(&j->lock);
    if (committed)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_ctx_set_backend: the context has already compiled a program or "
                           "allocated memory on the %s backend; set the backend before either",
                           was == TK_BACKEND_INTERP ? "interpreter" : "GPU");
    if (moved)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_ctx_set_backend: the context was given GPU %d (tk_gpu_set_device); "
                           "the interpreter backend is one device, 0",
                           device);
    return TK_OK;
}

bool tk_host_backend(const tk_ctx *ctx, tk_host_target *t) {
    struct tk_jit *j = tk_jit_find(ctx);
    if (!j) return false;
    pthread_mutex_lock(&j->lock);
    bool interp = j->backend == TK_BACKEND_INTERP;
    if (interp && t) *t = j->target;
    pthread_mutex_unlock(&j->lock);
    return interp;
}

void tk_jit_commit(struct tk_jit *j) {
    pthread_mutex_lock(&j->lock);
    j->committed = true;
    pthread_mutex_unlock(&j->lock);
}

/* ---- Host memory ----------------------------------------------------------- */
/* Records block p as the context's (the lock held); false when out of memory. */
static bool tk_host_track(struct tk_jit *j, void *p) {
    if (j->nhost == j->caphost) {
        size_t cap = j->caphost ? 2 * j->caphost : 64;
        void **h = realloc(j->host, cap * sizeof *h);
        if (!h) return false;
        j->host = h;
        j->caphost = cap;
    }
    j->host[j->nhost++] = p;
    return true;
}

tk_status tk_host_alloc(tk_ctx *ctx, size_t bytes, void **ptr) {
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_gpu_alloc: out of memory");
    if (bytes == 0) return TK_OK; /* NULL, as on the GPU */
    void *p = NULL;
    if (posix_memalign(&p, TK_HOST_ALIGN, bytes) != 0) p = NULL;
    pthread_mutex_lock(&j->lock);
    bool ok = p && tk_host_track(j, p);
    if (ok) j->committed = true;
    pthread_mutex_unlock(&j->lock);
    if (!ok) {
        free(p);
        return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_gpu_alloc: out of host memory (%zu bytes)",
                           bytes);
    }
    *ptr = p;
    return TK_OK;
}

tk_status tk_host_free(tk_ctx *ctx, void *ptr) {
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_gpu_free: out of memory");
    if (!ptr) return TK_OK;
    bool found = false;
    pthread_mutex_lock(&j->lock);
    for (size_t i = j->nhost; i-- > 0 && !found;)
        if (j->host[i] == ptr) {
            j->host[i] = j->host[--j->nhost];
            found = true;
        }
    pthread_mutex_unlock(&j->lock);
    /* free() of a foreign pointer would corrupt the heap: refuse it, as the
     * driver refuses a pointer it did not allocate */
    if (!found)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_gpu_free: %p is not a block tk_gpu_alloc gave this context (or "
                           "it was freed already)",
                           ptr);
    free(ptr);
    return TK_OK;
}

tk_status tk_host_copy(tk_ctx *ctx, const char *what, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return TK_OK;
    if (!dst || !src) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: NULL pointer", what);
    memmove(dst, src, bytes);
    return TK_OK;
}

tk_status tk_host_memset(tk_ctx *ctx, void *dst, uint8_t byte, size_t bytes) {
    if (bytes == 0) return TK_OK;
    if (!dst) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gpu_memset: NULL pointer");
    memset(dst, byte, bytes);
    return TK_OK;
}

void tk_host_free_all(struct tk_jit *j) {
    for (size_t i = 0; i < j->nhost; i++) free(j->host[i]);
    free(j->host);
    j->host = NULL;
    j->nhost = j->caphost = 0;
}

/* ---- Programs ---------------------------------------------------------------- */
/* Blocks the target's SMs would hold at once: per SM as many as its threads
 * and shared memory allow (1 KiB reserved per block), at most 32. The
 * registers are unknown without ptxas, so this is an upper estimate of the
 * driver's count; it only sizes persistent grids. */
static int32_t tk_host_resident(const tk_plan *pl, const tk_target *t, int sms) {
    int threads = t->sm == 86 || t->sm == 89 ? 1536 : 2048;
    int64_t per = pl->threads > 0 ? threads / pl->threads : 1;
    int64_t by_smem = ((int64_t)t->smem_max + 1024) / ((int64_t)pl->smem + 1024);
    if (by_smem < per) per = by_smem;
    if (per > 32) per = 32;
    int32_t n = (int32_t)(per > 0 ? per : 1) * sms, c = pl->cluster > 1 ? pl->cluster : 1;
    return n / c * c; /* whole clusters */
}

tk_status tk_host_compile_dg(tk_ctx *ctx, const tk_kernel *k, tk_program **out, tk_diag *dg) {
    tk_diag why = {0};
    tk_host_target tg = {{0}, 0};
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j || !tk_host_backend(ctx, &tg))
        return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "tk_compile: out of memory");
    const tk_target *t = tk_target_find(tg.arch);
    tk_program *p = NULL;
    tk_status s = tk_program_new(ctx, k, tg.arch, &p, &why);
    /* the GPU would refuse to load it (jit/program.c): so does its stand-in */
    if (s == TK_OK && p->plan.smem > (size_t)t->smem_max)
        s = tk_diag_fail(&why, TK_ERR_UNSUPPORTED,
                         "kernel '%s' needs %zu bytes of shared memory, %s allows %d", p->name,
                         p->plan.smem, tg.arch, (int)t->smem_max);
    if (s == TK_OK) s = tk_kernel_copy(k, ctx, &p->interp, &why);
    pthread_mutex_lock(&j->lock);
    bool pre = j->precompile;
    pthread_mutex_unlock(&j->lock);
    if (s == TK_OK && pre && (s = tk_precompile_kernel(j, k, tg.arch, &why)) != TK_OK) {
        tk_program_release(p);
        return tk_diag_fail(dg, s,
                            "tk_compile: kernel '%s': precompiling for %s (ptxas into the "
                            "disk cache, tk_cache_set_precompile): %s",
                            tk_kernel_name(k), tg.arch, why.msg);
    }
    if (s != TK_OK) {
        tk_program_release(p);
        return tk_diag_fail(dg, s, "tk_compile: kernel '%s': %s", tk_kernel_name(k), why.msg);
    }
    p->resident = tk_host_resident(&p->plan, t, tg.sms);
    tk_jit_commit(j);
    *out = p;
    return TK_OK;
}

tk_status tk_host_launch(tk_program *p, int nargs, const tk_arg *args) {
    tk_status s = tk_interp_run(p->interp, nargs, args);
    if (s == TK_OK) return TK_OK;
    /* the run reported on p->ctx (the copy's context): prefix the launch */
    char msg[TK_DIAG_LEN];
    snprintf(msg, sizeof msg, "%s", tk_ctx_error(p->ctx));
    return tk_ctx_fail(p->ctx, s, "tk_launch: kernel '%s' on the interpreter: %s", p->name, msg);
}
