/* tk_compile and tk_precompile: IR text -> key -> memory table -> disk ->
 * lowering + PTX->cubin, then loading (see jit/cache.h for the keys). On
 * a context of the interpreter backend tk_compile goes to jit/host.c
 * instead: no key, no cache, no lowering (unless tk_cache_set_precompile:
 * then each kernel also goes through tk_precompile_kernel, into the disk).
 *
 * Which disk entries tk_compile may use: a cubin the driver's JIT linker
 * made (key with "cuLink <driver version>"), else one that tk_precompile
 * made with ptxas (key with "ptxas <build>" of the ptxas found here, if
 * any), so kernels precompiled on a build machine with the same toolkit are
 * reused on the GPU machine. A ptxas-made cubin the driver refuses (a
 * toolkit newer than the driver) is rejected, deleted and rebuilt with the
 * driver. Fresh compiles on the GPU use the driver's linker (no process to
 * spawn) and are stored under the driver key; kernels with a producer
 * warpgroup, which need a whole-program compile, use ptxas first when there
 * is one (else the driver's module loader: jit/link.c). */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/build.h"
#include "jit/host.h"
#include "jit/lower.h"
#include "jit/pool.h"
#include "jit/program.h"

/* What a lowering needs: the kernel, the target, and the plan when a
 * program holds one (NULL: tk_precompile, which has no program, makes it). */
typedef struct tk_lower_req {
    const tk_kernel *k;
    const char *arch;
    const tk_plan *plan;
} tk_lower_req;

static tk_status tk_ptx_from_kernel(void *user, char **ptx, tk_diag *dg) {
    const tk_lower_req *r = user;
    return tk_lower_ptx_plan(r->k, r->arch, r->plan, ptx, dg);
}

/* make_ptx, timed into llvm_ms. */
static tk_status tk_make_ptx_timed(struct tk_jit *j, tk_ptx_fn make, void *user, char **ptx,
                                   tk_diag *dg) {
    *ptx = NULL;
    double t0 = tk_now_ms();
    tk_status s = make(user, ptx, dg);
    tk_cache_note(&j->cache, TK_STAT_LLVM_MS, tk_now_ms() - t0);
    if (s == TK_OK && !*ptx) s = tk_diag_fail(dg, TK_ERR_LLVM, "lowering produced no PTX");
    return s;
}

/* Lowering + ptxas, each timed into the statistics. */
static tk_status tk_ptxas_build(struct tk_jit *j, const tk_ptxas *px, const char *arch,
                                tk_ptx_fn make_ptx, void *user, void **cubin, size_t *n,
                                tk_diag *dg) {
    char *ptx;
    tk_status s = tk_make_ptx_timed(j, make_ptx, user, &ptx, dg);
    if (s != TK_OK) return s;
    double t0 = tk_now_ms();
    s = tk_ptxas_compile(px, ptx, arch, cubin, n, dg);
    tk_cache_note(&j->cache, TK_STAT_CUBIN_MS, tk_now_ms() - t0);
    free(ptx);
    return s;
}

tk_status tk_cubin_via_ptxas(struct tk_jit *j, const char *ir_text, const char *arch,
                             tk_ptx_fn make_ptx, void *user, void **cubin, size_t *n,
                             tk_origin *from, tk_diag *dg) {
    const tk_ptxas *px;
    char comp[192];
    *cubin = NULL;
    tk_status s = tk_jit_ptxas(j, &px, dg);
    if (s != TK_OK) return s;
    tk_compiler_id_ptxas(px, comp, sizeof comp);
    tk_cache_id id;
    tk_cache_id_make(&id, ir_text, arch, comp);
    tk_disk_get(&j->cache, &id, cubin, n, NULL);
    *from = *cubin ? TK_FROM_DISK : TK_FROM_COMPILE;
    tk_cache_note(&j->cache, *cubin ? TK_STAT_DISK_HIT : TK_STAT_MISS, 1);
    if (!*cubin) {
        s = tk_ptxas_build(j, px, arch, make_ptx, user, cubin, n, dg);
        if (s == TK_OK) s = tk_disk_put(&j->cache, &id, *cubin, *n, dg);
    }
    /* the directory is a kernel pack of this ptxas's entries (jit/pack.c);
     * a read-only one without a manifest still serves its hits */
    if (s == TK_OK) s = tk_pack_mark(&j->cache, comp, dg);
    if (s != TK_OK) {
        free(*cubin);
        *cubin = NULL;
    }
    return s;
}

/* Loads the disk entry `id` into p; false on a miss or a cubin the driver
 * refuses (then the entry is rejected and deleted). */
static bool tk_load_from_disk(struct tk_jit *j, tk_cuda *cu, const tk_cache_id *id, tk_program *p) {
    void *cubin;
    size_t n;
    tk_disk_get(&j->cache, id, &cubin, &n, NULL);
    if (!cubin) return false;
    tk_status s = tk_program_load(p, cu, cubin, NULL);
    free(cubin);
    if (s != TK_OK) tk_disk_reject(&j->cache, id);
    return s == TK_OK;
}

/* A hit in a kernel pack, under its compiler's key. A cubin the driver
 * refuses (made by a ptxas newer than the driver) is a miss there, left in
 * place: the directory is not ours. */
static bool tk_load_from_pack(struct tk_jit *j, tk_cuda *cu, const char *text, tk_program *p) {
    tk_pack_defaults(&j->cache, NULL);
    for (int i = 0, n = tk_pack_count(&j->cache); i < n; i++) {
        tk_cache_id id;
        void *cubin;
        size_t sz;
        tk_pack_get(&j->cache, i, text, cu->arch, &id, &cubin, &sz, NULL);
        if (!cubin) continue;
        tk_status s = tk_program_load(p, cu, cubin, NULL);
        free(cubin);
        if (s == TK_OK) return true;
        tk_cache_note(&j->cache, TK_STAT_REJECTED, 1);
    }
    return false;
}

/* A disk hit under the driver key, then under the local ptxas key, then in
 * the kernel packs. */
static bool tk_compile_disk(struct tk_jit *j, tk_cuda *cu, const char *text, const tk_cache_id *drv,
                            tk_program *p) {
    if (tk_load_from_disk(j, cu, drv, p)) return true;
    const tk_ptxas *px;
    if (tk_jit_ptxas(j, &px, NULL) == TK_OK) {
        char comp[192];
        tk_compiler_id_ptxas(px, comp, sizeof comp);
        tk_cache_id id;
        tk_cache_id_make(&id, text, cu->arch, comp);
        if (tk_load_from_disk(j, cu, &id, p)) return true;
    }
    return tk_load_from_pack(j, cu, text, p);
}

/* A kernel with a producer warpgroup needs a whole-program compile
 * (jit/link.c): ptxas makes one, stored under the ptxas key, when it is on
 * this machine and the driver takes its cubin; false otherwise. */
static bool tk_compile_fresh_ptxas(struct tk_jit *j, tk_cuda *cu, const tk_kernel *k,
                                   const char *text, tk_program *p) {
    const tk_ptxas *px;
    if (!p->plan.producer_warps || tk_jit_ptxas(j, &px, NULL) != TK_OK) return false;
    char comp[192];
    tk_compiler_id_ptxas(px, comp, sizeof comp);
    tk_cache_id id;
    tk_cache_id_make(&id, text, cu->arch, comp);
    tk_lower_req req = {k, cu->arch, &p->plan};
    void *cubin = NULL;
    size_t n = 0;
    tk_status s = tk_ptxas_build(j, px, cu->arch, tk_ptx_from_kernel, &req, &cubin, &n, NULL);
    if (s == TK_OK && (s = tk_program_load(p, cu, cubin, NULL)) == TK_OK)
        tk_disk_put(&j->cache, &id, cubin, n, NULL); /* failing only costs time */
    free(cubin);
    return s == TK_OK;
}

/* Lowering + the driver's linker, stored under the driver key, loaded. */
static tk_status tk_compile_fresh(struct tk_jit *j, tk_cuda *cu, const tk_kernel *k,
                                  const char *text, const tk_cache_id *drv, tk_program *p,
                                  tk_diag *dg) {
    if (tk_compile_fresh_ptxas(j, cu, k, text, p)) return TK_OK;
    tk_lower_req req = {k, cu->arch, &p->plan};
    char *ptx;
    void *cubin = NULL;
    size_t n = 0;
    tk_status s = tk_make_ptx_timed(j, tk_ptx_from_kernel, &req, &ptx, dg);
    if (s != TK_OK) return s;
    double t0 = tk_now_ms();
    s = tk_culink_compile(cu, ptx, p->plan.producer_warps > 0, &cubin, &n, dg);
    tk_cache_note(&j->cache, TK_STAT_CUBIN_MS, tk_now_ms() - t0);
    free(ptx);
    if (s == TK_OK) {
        /* the disk cache only saves time: failing to write is no error (NULL: no message) */
        tk_disk_put(&j->cache, drv, cubin, n, NULL);
        s = tk_program_load(p, cu, cubin, dg);
    }
    free(cubin);
    return s;
}

/* Builds a new program for k: disk entry or fresh compile. */
static tk_status tk_compile_new(struct tk_jit *j, tk_cuda *cu, tk_ctx *ctx, const tk_kernel *k,
                                const char *text, const tk_cache_id *drv, tk_program **out,
                                tk_diag *dg) {
    tk_program *p;
    tk_status s = tk_program_new(ctx, k, cu->arch, &p, dg);
    if (s != TK_OK) return s;
    if (tk_compile_disk(j, cu, text, drv, p)) {
        tk_cache_note(&j->cache, TK_STAT_DISK_HIT, 1);
        atomic_store(&p->origin, TK_FROM_DISK);
    } else {
        tk_cache_note(&j->cache, TK_STAT_MISS, 1);
        if ((s = tk_compile_fresh(j, cu, k, text, drv, p, dg)) != TK_OK) {
            tk_program_release(p);
            return s;
        }
    }
    *out = p;
    return TK_OK;
}

/* tk_compile with its failure in *dg ("tk_compile: kernel 'name': why"), not
 * on the context: what a pool's threads may run side by side. A memory hit
 * makes no driver call and hashes no text (the kernel carries its text's
 * hash); a miss makes the context current for the load. */
tk_status tk_compile_dg(tk_ctx *ctx, const tk_kernel *k, tk_program **out, tk_diag *dg) {
    if (tk_host_backend(ctx, NULL)) return tk_host_compile_dg(ctx, k, out, dg);
    struct tk_jit *j = tk_jit_of(ctx);
    tk_cuda *cu;
    char comp[64];
    tk_diag why = {0};
    if (!j) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "tk_compile: out of memory");
    tk_status s = tk_jit_cuda(j, &cu, &why);
    if (s != TK_OK) return tk_diag_fail(dg, s, "tk_compile: %s", why.msg);
    tk_compiler_id_driver(cu, comp, sizeof comp);
    tk_cache_id id;
    tk_cache_id_of(&id, k, cu->arch, comp);
    tk_program *p = tk_mem_find(&j->cache, id.key);
    if (p) {
        tk_cache_note(&j->cache, TK_STAT_MEMORY_HIT, 1);
        atomic_store(&p->origin, TK_FROM_MEMORY);
    } else if ((s = tk_cuda_enter(cu, &why)) == TK_OK &&
               (s = tk_compile_new(j, cu, ctx, k, k->canon, &id, &p, &why)) == TK_OK) {
        tk_program *q = tk_mem_insert(&j->cache, id.key, p);
        if (q != p) { /* another thread compiled it meanwhile: share theirs */
            tk_program_release(p);
            p = q;
        }
    }
    if (s != TK_OK)
        return tk_diag_fail(dg, s, "tk_compile: kernel '%s': %s", tk_kernel_name(k), why.msg);
    tk_jit_commit(j);
    *out = p;
    return TK_OK;
}

tk_status tk_compile(tk_ctx *ctx, const tk_kernel *k, tk_program **out) {
    tk_diag dg = {0};
    if (out) *out = NULL;
    tk_status s = tk_jit_check_kernel(ctx, "tk_compile", k, NULL);
    if (s != TK_OK) return s;
    if (!out) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_compile: out is NULL");
    s = tk_compile_dg(ctx, k, out, &dg);
    return s == TK_OK ? s : tk_ctx_report(ctx, "", &dg);
}

/* One tk_precompile job: the kernels, one per pool job (jit/pool.h). */
typedef struct tk_pre_pool {
    struct tk_jit *j;
    const tk_kernel *const *ks;
    const char *arch;
    int n;
    tk_diag *dg; /* one per kernel: its failure, if any */
} tk_pre_pool;

tk_status tk_precompile_kernel(struct tk_jit *j, const tk_kernel *k, const char *arch,
                               tk_diag *dg) {
    void *cubin = NULL;
    size_t sz;
    tk_origin from;
    tk_lower_req req = {k, arch, NULL};
    /* k->canon: the very text tk_compile keys its lookups on (a finished
     * kernel's, checked by every caller) */
    tk_status s =
        tk_cubin_via_ptxas(j, k->canon, arch, tk_ptx_from_kernel, &req, &cubin, &sz, &from, dg);
    free(cubin);
    return s;
}

/* Print, key, disk hit or lowering + ptxas + store, for kernel i. */
static void tk_pre_one(void *user, int i) {
    tk_pre_pool *pp = user;
    tk_precompile_kernel(pp->j, pp->ks[i], pp->arch, &pp->dg[i]);
}

/* Every failed kernel by name, in input order; the first one's status. */
static tk_status tk_pre_report(tk_ctx *ctx, const tk_pre_pool *pp) {
    char msg[TK_DIAG_LEN];
    size_t len = 0;
    int failed = 0;
    tk_status first = TK_OK;
    for (int i = 0; i < pp->n; i++) {
        if (pp->dg[i].st == TK_OK) continue;
        first = failed++ ? first : pp->dg[i].st;
        if (len < sizeof msg)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%skernel %d '%s': %s",
                                    failed > 1 ? "; " : "", i, tk_kernel_name(pp->ks[i]),
                                    pp->dg[i].msg);
    }
    if (!failed) return TK_OK;
    return tk_ctx_fail(ctx, first, "tk_precompile: %d of %d kernels failed: %s", failed, pp->n,
                       msg);
}

/* What precompiling needs: a usable disk cache and ptxas (failures
 * reported as fn's). */
static tk_status tk_pre_ready(tk_ctx *ctx, struct tk_jit *j, const char *fn) {
    char dir[PATH_MAX];
    tk_diag dg = {0};
    const tk_ptxas *px;
    if (!tk_cache_dir_copy(&j->cache, dir, sizeof dir))
        return tk_ctx_fail(ctx, TK_ERR_CACHE, "%s: the disk cache is disabled", fn);
    /* ptxas first: without it the directory is not even made (an install
     * leaves no empty pack behind) */
    if (tk_jit_ptxas(j, &px, &dg) != TK_OK) return tk_ctx_fail(ctx, dg.st, "%s: %s", fn, dg.msg);
    if (tk_disk_check(&j->cache) != TK_DISK_OK) {
        tk_cache_stats st;
        tk_cache_stats_copy(&j->cache, &st);
        return tk_ctx_fail(ctx, TK_ERR_CACHE, "%s: cache directory %s", fn, st.disk_error);
    }
    return TK_OK;
}

tk_status tk_cache_set_precompile(tk_ctx *ctx, int on) {
    const char *fn = "tk_cache_set_precompile";
    if (!ctx) return TK_ERR_INVALID_ARG;
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", fn);
    if (on && !tk_host_backend(ctx, NULL))
        return tk_ctx_fail(ctx, TK_ERR_STATE,
                           "%s: the context runs on the GPU, whose compiles fill the cache "
                           "already; set the interpreter backend first (tk_ctx_set_backend)",
                           fn);
    tk_status s = on ? tk_pre_ready(ctx, j, fn) : TK_OK;
    if (s) return s;
    pthread_mutex_lock(&j->lock);
    j->precompile = on != 0;
    pthread_mutex_unlock(&j->lock);
    return TK_OK;
}

tk_status tk_precompile(tk_ctx *ctx, const tk_kernel *const *ks, int n, const char *arch) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (n < 0 || (n > 0 && !ks) || !tk_arch_valid(arch))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_precompile: invalid arguments (n = %d, "
                           "arch \"%s\")",
                           n, arch ? arch : "(null)");
    struct tk_jit *j = tk_jit_of(ctx);
    if (!j) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_precompile: out of memory");
    tk_status s = tk_pre_ready(ctx, j, "tk_precompile");
    if (s != TK_OK) return s;
    for (int i = 0; i < n; i++) /* misuse is reported before any work */
        if ((s = tk_jit_check_kernel(ctx, "tk_precompile", ks[i], NULL)) != TK_OK) return s;
    tk_pre_pool pp = {
        .j = j, .ks = ks, .arch = arch, .n = n, .dg = calloc((size_t)n + 1, sizeof(tk_diag))};
    if (!pp.dg) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_precompile: out of memory");
    tk_pool_run(n, tk_pre_one, &pp);
    s = tk_pre_report(ctx, &pp);
    free(pp.dg);
    return s;
}
