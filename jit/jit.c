/* The per-context JIT state (a context slot) and the small public entry
 * points around it: cache settings and statistics, PTX / LLVM text
 * emission. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/host.h"
#include "jit/jit.h"
#include "jit/lower.h"
#include "jit/program.h"

double tk_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

struct tk_jit *tk_jit_new(void) {
    struct tk_jit *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_mutex_init(&j->lock, NULL) != 0) {
        free(j);
        return NULL;
    }
    if (tk_cache_init(&j->cache, tk_program_retain_v, tk_program_release_v) != 0) {
        pthread_mutex_destroy(&j->lock);
        free(j);
        return NULL;
    }
    return j;
}

/* The cache's first problem with its directory, or a default kernel pack
 * that cannot be used, as a context warning. */
static void tk_jit_warn(void *ctx, tk_status s, const char *msg) { tk_ctx_log(ctx, s, "%s", msg); }

static void *tk_jit_make(tk_ctx *ctx) {
    struct tk_jit *j = tk_jit_new();
    if (j) {
        j->cache.warn = tk_jit_warn;
        j->cache.warn_user = ctx;
    }
    return j;
}

static void tk_jit_destroy_v(void *j) { tk_jit_destroy(j); }

static const tk_ctx_slot_def tk_jit_slot = {"jit", tk_jit_make, tk_jit_destroy_v};

struct tk_jit *tk_jit_of(tk_ctx *ctx) {
    return tk_ctx_slot(ctx, &tk_jit_slot);
}

struct tk_jit *tk_jit_find(const tk_ctx *ctx) {
    return tk_ctx_slot_find(ctx, &tk_jit_slot);
}

void tk_jit_destroy(struct tk_jit *j) {
    if (!j) return;
    /* Programs still held by users keep their own driver reference. */
    tk_cache_fini(&j->cache);
    tk_host_free_all(j);
    tk_cuda_unref(j->cu);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

tk_status tk_jit_cuda(struct tk_jit *j, tk_cuda **cu, tk_diag *dg) {
    pthread_mutex_lock(&j->lock);
    if (!j->cu_tried) {
        j->cu_tried = true;
        tk_cuda_open(&j->cu, j->device, &j->cu_diag);
    }
    tk_status s = j->cu_diag.st;
    *cu = j->cu;
    if (s != TK_OK) tk_diag_fail(dg, s, "%s", j->cu_diag.msg);
    pthread_mutex_unlock(&j->lock);
    return s;
}

tk_status tk_jit_ptxas(struct tk_jit *j, const tk_ptxas **out, tk_diag *dg) {
    pthread_mutex_lock(&j->lock);
    if (!j->ptxas_tried) {
        j->ptxas_tried = true;
        tk_ptxas_find(&j->ptxas, &j->ptxas_diag);
    }
    tk_status s = j->ptxas_diag.st;
    *out = &j->ptxas;
    if (s != TK_OK) tk_diag_fail(dg, s, "%s", j->ptxas_diag.msg);
    pthread_mutex_unlock(&j->lock);
    return s;
}

/* ---- Cache settings and statistics ---------------------------------------- */
void tk_cache_stats_get(const tk_ctx *ctx, tk_cache_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    struct tk_jit *j = tk_jit_find(ctx);
    if (j) tk_cache_stats_copy(&j->cache, out);
}

tk_status tk_cache_set_dir(tk_ctx *ctx, const char *dir) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j || tk_cache_dir_set(&j->cache, dir) != TK_OK)
        return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_cache_set_dir: out of memory");
    return TK_OK;
}

const char *tk_cache_dir(const tk_ctx *ctx) {
    /* The context is never a const object; its JIT state is made lazily. */
    struct tk_jit *j = ctx ? tk_jit_of((tk_ctx *)ctx) : NULL;
    return j ? j->cache.dir : NULL;
}

tk_status tk_cache_add_pack(tk_ctx *ctx, const char *dir) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!dir || !*dir)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_cache_add_pack: dir is %s",
                           dir ? "empty" : "NULL");
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_cache_add_pack: out of memory");
    tk_diag dg = {0};
    if (tk_pack_add(&j->cache, dir, &dg) != TK_OK)
        return tk_ctx_fail(ctx, dg.st, "tk_cache_add_pack: %s", dg.msg);
    return TK_OK;
}

const char *tk_cache_pack(tk_ctx *ctx, int i) {
    struct tk_jit *j = ctx ? tk_jit_of(ctx) : NULL;
    if (!j) return NULL;
    tk_pack_defaults(&j->cache, NULL);
    pthread_mutex_lock(&j->cache.lock);
    const char *dir = i >= 0 && i < j->cache.npacks ? j->cache.packs[i].dir : NULL;
    pthread_mutex_unlock(&j->cache.lock);
    return dir;
}

tk_status tk_cache_set_limit(tk_ctx *ctx, uint64_t bytes) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_cache_set_limit: out of memory");
    pthread_mutex_lock(&j->cache.lock);
    j->cache.limit = bytes;
    pthread_mutex_unlock(&j->cache.lock);
    return TK_OK;
}

/* ---- PTX / LLVM text --------------------------------------------------------- */
/* A finished, error-free kernel and a known target, or why not. */
tk_status tk_jit_check_kernel(tk_ctx *ctx, const char *what, const tk_kernel *k, const char *arch) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!k) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: kernel is NULL", what);
    if (tk_kernel_status(k) != TK_OK)
        return tk_ctx_fail(ctx, tk_kernel_status(k), "%s: kernel '%s' has an error: %s", what,
                           tk_kernel_name(k), tk_kernel_error(k));
    if (!k->finished)
        return tk_ctx_fail(ctx, TK_ERR_STATE, "%s: kernel '%s' is not finished (tk_kernel_finish)",
                           what, tk_kernel_name(k));
    if (arch && !tk_arch_valid(arch))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: invalid target \"%s\"", what, arch);
    return TK_OK;
}

/* tk_emit_ptx / tk_emit_llvm: check, lower with `lower`, report as `what`. */
typedef tk_status (*lower_text_fn)(const tk_kernel *, const char *, char **, tk_diag *);

static tk_status emit_text(tk_ctx *ctx, const tk_kernel *k, const char *arch, char **out,
                           const char *what, const char *outname, lower_text_fn lower) {
    tk_diag dg = {0};
    if (out) *out = NULL;
    tk_status s = tk_jit_check_kernel(ctx, what, k, arch ? arch : "");
    if (s != TK_OK) return s;
    if (!out) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", what, outname);
    s = lower(k, arch, out, &dg);
    return s == TK_OK ? s : tk_ctx_fail(ctx, s, "%s: %s", what, dg.msg);
}

tk_status tk_emit_ptx(tk_ctx *ctx, const tk_kernel *k, const char *arch, char **ptx) {
    return emit_text(ctx, k, arch, ptx, "tk_emit_ptx", "ptx", tk_lower_ptx);
}

tk_status tk_emit_llvm(tk_ctx *ctx, const tk_kernel *k, const char *arch, char **ir) {
    return emit_text(ctx, k, arch, ir, "tk_emit_llvm", "ir", tk_lower_llvm_text);
}
