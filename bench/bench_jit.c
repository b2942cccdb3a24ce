/* JIT latencies: building the IR, compiling cold (LLVM + PTX → cubin, the
 * driver's compute cache off: CUDA_CACHE_DISABLE=1) for the mma.sync and the
 * wgmma attention D128 (sm_90a's pick: a user's first compile there),
 * loading from the disk cache in a fresh context, a memory-cache hit, and
 * the host cost of one call of each entry point (tk_attention_forward on
 * either kernel, tk_gemm on the wgmma kernel, tk_launch of a built kernel)
 * beside a bare cuLaunchKernel of that built kernel, the floor: the time the
 * call takes on the host, launches queued back to back. Medians of repeated
 * runs.
 *   bench_jit            (needs a GPU; cache in a fresh temporary directory)
 * On the null driver (LD_LIBRARY_PATH=build/null-cuda, tests/nullcuda) it
 * runs without a GPU and says so: the compile's PTX → cubin step and every
 * driver call then cost nothing, so the host costs are the library's own
 * share, and the "floor" is the null driver's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cuda.h"
#include "jit/program.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "bench_util.h"

/* Median host time of one call of `call` (2000 calls after a warm-up). */
typedef tk_status (*entry)(tk_ctx *ctx, void *arg);
static double host_cost(tk_ctx *ctx, entry call, void *arg, double *t) {
    tk_status s = call(ctx, arg);
    tk_gpu_sync(ctx);
    for (int i = 0; i < 2000 && !s; i++) {
        double t0 = bench_now_us();
        s = call(ctx, arg);
        t[i] = bench_now_us() - t0;
        if (i % 64 == 63) tk_gpu_sync(ctx); /* keep the launch queue short */
    }
    tk_gpu_sync(ctx);
    if (s) printf("warning: %s\n", tk_ctx_error(ctx));
    return s ? -1 : bench_median(t, 2000);
}

static tk_status call_attention(tk_ctx *ctx, void *a) { return tk_attention_forward(ctx, a, NULL); }
static tk_status call_gemm(tk_ctx *ctx, void *g) { return tk_gemm(ctx, g, NULL); }

typedef struct launch_arg {
    tk_program *p;
    tk_arg args[6];
} launch_arg;
static tk_status call_launch(tk_ctx *ctx, void *l) {
    (void)ctx;
    launch_arg *x = l;
    return tk_launch(x->p, 6, x->args, NULL);
}

/* The floor: cuLaunchKernel of p with its parameters packed once, in ABI
 * order (ir/abi.h: a tensor is its pointer, dims, strides; then scalars). */
typedef struct bare_arg {
    tk_program *p;
    union {
        uint64_t u;
        float f;
    } slot[64];
    void *ptrs[64];
} bare_arg;
static void bare_pack(bare_arg *b, const tk_arg *args) {
    int n = 0;
    for (int i = 0; i < b->p->sig.nparams && n < 56; i++) {
        const tk_arg *a = &args[i];
        if (b->p->sig.params[i].kind == TK_KIND_GVIEW) {
            b->slot[n++].u = (uint64_t)(uintptr_t)a->data;
            for (int d = 0; d < a->rank; d++) b->slot[n++].u = (uint64_t)a->dims[d];
            for (int d = 0; d < a->rank; d++) b->slot[n++].u = (uint64_t)a->strides[d];
        } else {
            b->slot[n++].f = (float)a->scalar.f; /* the attention's one scalar, f32 */
        }
    }
    for (int i = 0; i < n; i++) b->ptrs[i] = &b->slot[i];
}
static tk_status call_bare(tk_ctx *ctx, void *x) {
    (void)ctx;
    bare_arg *b = x;
    const tk_program *p = b->p;
    /* the grid of seq 64 at 64 rows a block: one block */
    return p->cu->cuLaunchKernel(p->fn, 1, 1, 1, (unsigned)p->plan.threads, 1, 1,
                                 (unsigned)p->plan.smem, NULL, b->ptrs, NULL) == CUDA_SUCCESS
               ? TK_OK
               : TK_ERR_CUDA;
}

/* What tk_launch's cuCtxSetCurrent costs (the context is current already),
 * and cuCtxGetCurrent, the check that could spare it: is it worth a branch? */
static tk_status call_set_current(tk_ctx *ctx, void *x) {
    (void)ctx;
    const tk_program *p = x;
    return p->cu->cuCtxSetCurrent(p->cu->pctx) == CUDA_SUCCESS ? TK_OK : TK_ERR_CUDA;
}
typedef CUresult (*get_current_fn)(CUcontext *);
static get_current_fn g_get_current;
static tk_status call_get_current(tk_ctx *ctx, void *x) {
    (void)ctx, (void)x;
    CUcontext c;
    return g_get_current(&c) == CUDA_SUCCESS ? TK_OK : TK_ERR_CUDA;
}

static tk_kernel *attention_of(tk_ctx *ctx, int wgmma) {
    tk_attention_config c = {.dtype = TK_BF16, .head_dim = 128, .wgmma = wgmma};
    tk_kernel *k = NULL;
    if (tk_attention_fwd_build(ctx, &c, &k)) fprintf(stderr, "%s\n", tk_ctx_error(ctx));
    return k;
}
static tk_kernel *attention(tk_ctx *ctx) { return attention_of(ctx, 0); }

/* A cold compile of the wgmma attention in its own cache directory: ms. */
static double cold_wgmma(tk_ctx *ctx, tk_cache_stats *st) {
    char dir[] = "/tmp/tk-bench-jit-w-XXXXXX";
    tk_ctx *c;
    tk_kernel *k;
    tk_program *p = NULL;
    double ms = -1;
    if (!mkdtemp(dir) || tk_ctx_create(&c)) return -1;
    tk_cache_set_dir(c, dir);
    if (!tk_gpu_init(c) && (k = attention_of(c, 1))) {
        double t0 = bench_now_us();
        if (!tk_compile(c, k, &p)) ms = (bench_now_us() - t0) / 1e3;
        tk_cache_stats_get(c, st);
        tk_program_release(p);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(c);
    (void)ctx;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return ms;
}

int main(void) {
    char dir[] = "/tmp/tk-bench-jit-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("CUDA_CACHE_DISABLE", "1", 1); /* PTX → cubin compiles, not cache hits */
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx) || tk_gpu_init(ctx)) {
        printf("bench_jit: no GPU: %s\n", ctx ? tk_ctx_error(ctx) : "");
        return 0;
    }
    tk_cache_set_dir(ctx, dir);
    enum { R = 9 };
    double t[2000];
    for (int i = 0; i < R; i++) {
        double t0 = bench_now_us();
        tk_kernel *k = attention(ctx);
        t[i] = bench_now_us() - t0;
        tk_kernel_destroy(k);
    }
    double build = bench_median(t, R);

    tk_kernel *k = attention(ctx);
    tk_program *p = NULL;
    double t0 = bench_now_us();
    if (tk_compile(ctx, k, &p)) return printf("%s\n", tk_ctx_error(ctx)), 1;
    double cold = bench_now_us() - t0;
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);

    for (int i = 0; i < R; i++) { /* fresh contexts: disk hits */
        tk_ctx *c2;
        tk_program *p2;
        tk_ctx_create(&c2);
        tk_cache_set_dir(c2, dir);
        tk_gpu_init(c2);
        t0 = bench_now_us();
        tk_compile(c2, k, &p2);
        t[i] = bench_now_us() - t0;
        if (tk_program_origin(p2) != TK_FROM_DISK) printf("warning: not a disk hit\n");
        tk_program_release(p2);
        tk_ctx_destroy(c2);
    }
    double disk = bench_median(t, R);

    for (int i = 0; i < 1000; i++) {
        tk_program *p3;
        t0 = bench_now_us();
        tk_compile(ctx, k, &p3);
        t[i] = bench_now_us() - t0;
        tk_program_release(p3);
    }
    double mem = bench_median(t, 1000);

    /* Host cost of a launch through the public entry points (tiny problems). */
    void *buf;
    tk_gpu_alloc(ctx, 4 << 20, &buf);
    tk_attention_params a = {.struct_size = sizeof(tk_attention_params),
                             .dtype = TK_BF16,
                             .head_dim = 128,
                             .batch = 1,
                             .heads_q = 1,
                             .heads_kv = 1,
                             .seq_q = 64,
                             .seq_kv = 64,
                             .q = buf,
                             .k = buf,
                             .v = buf,
                             .o = buf,
                             .lse = buf};
    double launch = host_cost(ctx, call_attention, &a, t);
    a.kernel = TK_ATTN_MMA_SYNC;
    double launch_mma = host_cost(ctx, call_attention, &a, t);
    tk_gemm_config wg = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    wg.block_n = 256, wg.warps = 8, wg.stages = 4, wg.tma = 1, wg.wgmma = 1;
    tk_gemm_params g = TK_GEMM_PARAMS_INIT;
    g.in_dtype = g.out_dtype = TK_BF16;
    g.m = g.n = g.k = 256;
    g.a = g.b = buf;
    g.c = (char *)buf + (2 << 20);
    g.config = &wg;
    double gemm = host_cost(ctx, call_gemm, &g, t);
    /* the built attention kernel launched directly: Q, K, V, O, L, scale */
    int64_t d4[4] = {1, 1, 64, 128}, d3[3] = {1, 1, 64};
    launch_arg l = {.p = p};
    for (int i = 0; i < 4; i++) l.args[i] = tk_arg_tensor(buf, TK_BF16, 4, d4);
    l.args[4] = tk_arg_tensor(buf, TK_F32, 3, d3);
    l.args[5] = tk_arg_f32(0.088f);
    double raw = host_cost(ctx, call_launch, &l, t);
    bare_arg b = {.p = p};
    bare_pack(&b, l.args);
    double bare = host_cost(ctx, call_bare, &b, t);
    double set_cur = host_cost(ctx, call_set_current, p, t), get_cur = -1;
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *gc = drv ? dlsym(drv, "cuCtxGetCurrent") : NULL; /* the null driver has none */
    if (gc) {
        memcpy(&g_get_current, &gc, sizeof gc);
        get_cur = host_cost(ctx, call_get_current, NULL, t);
    }
    if (drv) dlclose(drv);
    tk_gpu_free(ctx, buf);
    tk_cache_stats sw;
    double cold_w = cold_wgmma(ctx, &sw);

    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (dl && dlsym(dl, "tk_null_cuda_calls"))
        printf("driver: the null driver (tests/nullcuda): no GPU; driver calls cost nothing, so "
               "the host costs below are the library's share alone\n\n");
    if (dl) dlclose(dl);
    printf("| step | time |\n|---|---|\n");
    printf("| build attention IR (D128) | %.0f us |\n", build);
    printf("| compile cold, mma.sync (LLVM %.1f ms + PTX->cubin %.1f ms) | %.1f ms |\n", st.llvm_ms,
           st.ptx_to_cubin_ms, cold / 1e3);
    printf("| compile cold, wgmma: sm_90a's pick (LLVM %.1f ms + PTX->cubin %.1f ms) | %.1f ms |\n",
           sw.llvm_ms, sw.ptx_to_cubin_ms, cold_w);
    printf("| disk-cache hit, fresh context | %.2f ms |\n", disk / 1e3);
    printf("| memory-cache hit (tk_compile) | %.2f us |\n", mem);
    printf("| host cost of tk_attention_forward (library's kernel) | %.2f us |\n", launch);
    printf("| host cost of tk_attention_forward (mma.sync kernel) | %.2f us |\n", launch_mma);
    printf("| host cost of tk_gemm (wgmma kernel, 256^3) | %.2f us |\n", gemm);
    printf("| host cost of tk_launch (mma.sync attention, built) | %.2f us |\n", raw);
    printf("| bare cuLaunchKernel of the same kernel (the floor) | %.2f us |\n", bare);
    printf("| cuCtxSetCurrent, the context current already (each tk_launch) | %.3f us |\n",
           set_cur);
    if (get_cur >= 0)
        printf("| cuCtxGetCurrent (a check that could spare it) | %.3f us |\n", get_cur);
    tk_program_release(p);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
