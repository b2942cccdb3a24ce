/* GEMM block shapes side by side at one size (default 4096³, bf16 → bf16):
 * each configuration is built, compiled, checked against the default
 * configuration's output (itself verified against float64 in
 * tests/test_gpu_kernels.c), and timed: median over 7 batches of 20
 * back-to-back launches, host clock around a device sync.
 *   bench_gemm_configs [n] */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "bench_util.h"

typedef struct cfg {
    int bm, bn, bk, warps, stages, tma;
} cfg;

static const cfg configs[] = {
    /* the last six through the copy engine (sm_90) */
    {128, 128, 64, 4, 3, 0},  {128, 128, 32, 4, 4, 0}, {128, 256, 32, 8, 3, 0},
    {256, 128, 32, 8, 3, 0},  {128, 256, 64, 8, 3, 0}, {128, 256, 64, 8, 4, 0},
    {256, 128, 64, 8, 3, 0},  {256, 128, 64, 8, 4, 0}, {128, 256, 128, 8, 2, 0},
    {128, 128, 64, 4, 3, 1},  {128, 128, 32, 4, 4, 1}, {128, 256, 64, 8, 3, 1},
    {128, 256, 128, 8, 2, 1}, {128, 256, 64, 8, 4, 1}, {256, 128, 64, 8, 4, 1},
};

/* Times one configuration; returns TFLOP/s (0 on failure). out: its C. */
static double run(tk_ctx *ctx, const cfg *c, int64_t n, void *a, void *b, void *dc,
                  uint16_t *host_c) {
    tk_gemm_config g = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    g.block_m = c->bm, g.block_n = c->bn, g.block_k = c->bk, g.warps = c->warps;
    g.stages = c->stages, g.tma = c->tma;
    tk_kernel *k = NULL;
    tk_program *p = NULL;
    int64_t d[2] = {n, n};
    tk_arg args[3] = {tk_arg_tensor(a, TK_BF16, 2, d), tk_arg_tensor(b, TK_BF16, 2, d),
                      tk_arg_tensor(dc, TK_BF16, 2, d)};
    tk_status s = tk_gemm_build(ctx, &g, &k);
    if (!s) s = tk_compile(ctx, k, &p);
    if (!s) s = tk_gpu_memset(ctx, dc, 0xff, (size_t)(n * n * 2));
    for (int i = 0; i < 3 && !s; i++) s = tk_launch(p, 3, args, NULL);
    if (!s) s = tk_gpu_sync(ctx);
    if (!s) s = tk_gpu_download(ctx, host_c, dc, (size_t)(n * n * 2));
    double t[7];
    for (int r = 0; r < 7 && !s; r++) {
        double t0 = bench_now_ms();
        for (int i = 0; i < 20 && !s; i++) s = tk_launch(p, 3, args, NULL);
        if (!s) s = tk_gpu_sync(ctx);
        t[r] = (bench_now_ms() - t0) / 20;
    }
    if (s)
        fprintf(stderr, "%dx%dx%d w%d s%d: %s\n", c->bm, c->bn, c->bk, c->warps, c->stages,
                tk_ctx_error(ctx));
    tk_program_release(p);
    tk_kernel_destroy(k);
    if (s) return 0;
    return 2.0 * (double)n * (double)n * (double)n / (bench_median(t, 7) * 1e-3) / 1e12;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx) || tk_gpu_init(ctx)) {
        printf("bench_gemm_configs: no GPU\n");
        return 0;
    }
    size_t bytes = (size_t)(n * n * 2);
    uint16_t *h = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
    void *a, *b, *c;
    srand(7);
    for (int64_t i = 0; i < n * n; i++) h[i] = tk_f32_to_bf16((float)rand() / RAND_MAX - 0.5f);
    if (tk_gpu_alloc(ctx, bytes, &a) || tk_gpu_alloc(ctx, bytes, &b) ||
        tk_gpu_alloc(ctx, bytes, &c) || tk_gpu_upload(ctx, a, h, bytes) ||
        tk_gpu_upload(ctx, b, h, bytes))
        return printf("%s\n", tk_ctx_error(ctx)), 1;
    printf("| block (m x n x k) | warps | stages | copies | TFLOP/s at %lld³ | max diff vs default "
           "|\n",
           (long long)n);
    printf("|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        double tf = run(ctx, &configs[i], n, a, b, c, i ? got : ref);
        double diff = 0;
        for (int64_t e = 0; i && e < n * n; e++) {
            double x = tk_bf16_to_f32(got[e]), y = tk_bf16_to_f32(ref[e]);
            diff = isnan(x) || isnan(y) ? INFINITY : fmax(diff, fabs(x - y));
        }
        printf("| %d x %d x %d | %d | %d | %s | %.0f | %.3g |\n", configs[i].bm, configs[i].bn,
               configs[i].bk, configs[i].warps, configs[i].stages,
               configs[i].tma ? "TMA" : "cp.async", tf, diff);
        fflush(stdout);
    }
    tk_gpu_free(ctx, a), tk_gpu_free(ctx, b), tk_gpu_free(ctx, c);
    free(h), free(ref), free(got);
    tk_ctx_destroy(ctx);
    return 0;
}
