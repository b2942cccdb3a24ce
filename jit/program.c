/* Programs: creation from a kernel, module loading, reference counting
 * (see jit/program.h). tk_compile lives in jit/build.c, tk_launch in
 * jit/launch.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/abi.h"
#include "jit/jit.h"
#include "jit/plan.h"
#include "jit/program.h"

/* Launches above this need the function's dynamic shared memory limit raised. */
#define TK_SMEM_DEFAULT_MAX (48u * 1024u)

/* Copies the parameter list: what tk_launch checks and packs. */
static void tk_program_sig(tk_program *p, const tk_kernel *k) {
    tk_sig_of(k, &p->sig);
    p->nslots = 0;
    for (int i = 0; i < k->nparams; i++) {
        const tk_sig_param *s = &p->sig.params[i];
        /* Same count as tk_abi_param_slots, without needing the value later. */
        p->nslots += s->kind == TK_KIND_GVIEW ? 1 + 2 * s->rank : 1;
    }
}

tk_status tk_program_new(tk_ctx *ctx, const tk_kernel *k, const char *arch, tk_program **out,
                         tk_diag *dg) {
    *out = NULL;
    tk_program *p = calloc(1, sizeof *p);
    if (!p || !(p->name = strdup(k->name ? k->name : ""))) {
        free(p);
        return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    }
    atomic_init(&p->refs, 1);
    atomic_init(&p->origin, TK_FROM_COMPILE);
    pthread_mutex_init(&p->maps_mu, NULL);
    p->ctx = ctx;
    tk_plan_make(k, tk_target_find(arch), &p->plan);
    tk_program_sig(p, k);
    /* made here, not at a launch: the launch path allocates nothing */
    if (p->plan.nmaps && !(p->map_memo = calloc(TK_MAP_SETS * TK_MAP_WAYS, sizeof *p->map_memo))) {
        tk_program_release(p);
        return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    }
    tk_status s = tk_grid_build(k, &p->grid, dg);
    if (s != TK_OK) {
        tk_program_release(p);
        return s;
    }
    *out = p;
    return TK_OK;
}

/* Function attributes a launch relies on. */
static tk_status tk_program_setup_fn(tk_program *p, tk_diag *dg) {
    const tk_cuda *cu = p->cu;
    tk_status s = tk_cuda_check(cu, cu->cuModuleGetFunction(&p->fn, p->mod, p->name),
                                "cuModuleGetFunction", dg);
    if (s == TK_OK && p->plan.smem > TK_SMEM_DEFAULT_MAX) {
        if (cu->max_smem_optin > 0 && p->plan.smem > (size_t)cu->max_smem_optin)
            return tk_diag_fail(
                dg, TK_ERR_UNSUPPORTED,
                "kernel '%s' needs %zu bytes of shared memory, the device allows %d", p->name,
                p->plan.smem, cu->max_smem_optin);
        s = tk_cuda_check(cu,
                          cu->cuFuncSetAttribute(p->fn,
                                                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 (int)p->plan.smem),
                          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", dg);
    }
    /* the grid of a persistent kernel (0, not a failed load, when the
     * driver cannot say: it only sizes grids) */
    int n = 0;
    if (s == TK_OK && p->plan.cluster > 1) { /* whole clusters: GPCs may leave SMs unpaired */
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = (unsigned)p->plan.cluster, cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = (unsigned)p->plan.threads, cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = (unsigned)p->plan.smem;
        if (cu->cuOccupancyMaxActiveClusters(&n, p->fn, &cfg) != CUDA_SUCCESS) n = 0;
        p->resident = n * p->plan.cluster;
        return s;
    }
    if (s == TK_OK && cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, p->fn, p->plan.threads,
                                                                      p->plan.smem) != CUDA_SUCCESS)
        n = 0;
    p->resident = n * cu->sm_count;
    return s;
}

tk_status tk_program_load(tk_program *p, tk_cuda *cu, const void *cubin, tk_diag *dg) {
    CUmodule mod = NULL;
    tk_status s = tk_cuda_check(cu, cu->cuModuleLoadData(&mod, cubin), "cuModuleLoadData", dg);
    if (s != TK_OK) return s;
    p->cu = tk_cuda_ref(cu);
    p->mod = mod;
    const char *off = getenv("TK_NO_TMA"); /* A/B runs and a test of the fallback */
    p->tma_off = off && *off && strcmp(off, "0") != 0;
    s = tk_program_setup_fn(p, dg);
    if (s != TK_OK) { /* leave p without a module, as before */
        cu->cuModuleUnload(mod);
        tk_cuda_unref(p->cu);
        p->cu = NULL;
        p->mod = NULL;
        p->fn = NULL;
    }
    return s;
}

tk_program *tk_program_retain(tk_program *p) {
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void tk_program_release(tk_program *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    if (p->mod) {
        /* The module belongs to the primary context: make it current first
         * (this thread may never have used the GPU). */
        tk_diag dg = {0};
        if (tk_cuda_enter(p->cu, &dg) == TK_OK) p->cu->cuModuleUnload(p->mod);
    }
    tk_cuda_unref(p->cu);
    tk_kernel_destroy(p->interp);
    tk_grid_free(&p->grid);
    pthread_mutex_destroy(&p->maps_mu);
    free(p->map_memo);
    free(p->name);
    free(p);
}

int tk_program_resident_blocks(const tk_program *p) { return p ? p->resident : 0; }

tk_origin tk_program_origin(const tk_program *p) {
    return p ? (tk_origin)atomic_load(&((tk_program *)p)->origin) : TK_FROM_COMPILE;
}

void *tk_program_retain_v(void *p) { return tk_program_retain(p); }
void tk_program_release_v(void *p) { tk_program_release(p); }
