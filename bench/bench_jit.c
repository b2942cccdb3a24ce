/* JIT latencies: building the IR, compiling cold (LLVM + PTX → cubin), loading
 * from the disk cache in a fresh context, a memory-cache hit, and the host
 * cost of one call of each entry point (tk_attention_forward on either
 * kernel, tk_gemm on the wgmma kernel, tk_launch of a built kernel): the
 * time the call takes on the host, launches queued back to back. Medians of
 * repeated runs.
 *   bench_jit            (needs a GPU; cache in a fresh temporary directory) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static tk_kernel *attention(tk_ctx *ctx) {
    tk_attention_config c = {.dtype = TK_BF16, .head_dim = 128};
    tk_kernel *k = NULL;
    if (tk_attention_fwd_build(ctx, &c, &k)) fprintf(stderr, "%s\n", tk_ctx_error(ctx));
    return k;
}

int main(void) {
    char dir[] = "/tmp/tk-bench-jit-XXXXXX";
    if (!mkdtemp(dir)) return 1;
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
    tk_gpu_free(ctx, buf);

    printf("| step | time |\n|---|---|\n");
    printf("| build attention IR (D128) | %.0f us |\n", build);
    printf("| compile cold (LLVM %.1f ms + PTX->cubin %.1f ms) | %.1f ms |\n", st.llvm_ms,
           st.ptx_to_cubin_ms, cold / 1e3);
    printf("| disk-cache hit, fresh context | %.2f ms |\n", disk / 1e3);
    printf("| memory-cache hit (tk_compile) | %.2f us |\n", mem);
    printf("| host cost of tk_attention_forward (library's kernel) | %.2f us |\n", launch);
    printf("| host cost of tk_attention_forward (mma.sync kernel) | %.2f us |\n", launch_mma);
    printf("| host cost of tk_gemm (wgmma kernel, 256^3) | %.2f us |\n", gemm);
    printf("| host cost of tk_launch (mma.sync attention, built) | %.2f us |\n", raw);
    tk_program_release(p);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
