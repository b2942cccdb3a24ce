/* Attention block shapes side by side (tk_attention_config.warps, and on
 * sm_90a the wgmma kernel's): for each head dim, causal flag and shape,
 * every shape of the kernels is built,
 * compiled, checked against the default shape's output (itself verified
 * against float64 in tests/test_gpu_kernels.c) and timed: median over 7
 * batches of 10 back-to-back launches, host clock around a device sync.
 *   bench_attention_configs */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "bench_util.h"

typedef struct shape {
    int64_t b, h, n;
    int d, causal;
} shape;

static const shape shapes[] = {
    {4, 16, 3072, 128, 0}, {4, 16, 4096, 128, 0}, {1, 16, 16384, 128, 0},
    {4, 16, 4096, 128, 1}, {4, 32, 4096, 64, 0},  {4, 32, 4096, 64, 1},
    {16, 32, 1024, 64, 0}, {1, 32, 16384, 64, 0}, {1, 32, 16384, 64, 1},
};

/* Times one kernel shape; returns TFLOP/s (0 on failure); O lands in `o`. */
static double run(tk_ctx *ctx, const shape *sh, int warps, int wgmma, void *const dev[5],
                  uint16_t *o) {
    tk_attention_config c = {
        .dtype = TK_BF16, .head_dim = sh->d, .causal = sh->causal, .warps = warps, .wgmma = wgmma};
    int64_t dq[4] = {sh->b, sh->h, sh->n, sh->d}, dl[3] = {sh->b, sh->h, sh->n};
    size_t obytes = (size_t)(sh->b * sh->h * sh->n * sh->d * 2);
    tk_arg args[6] = {
        tk_arg_tensor(dev[0], TK_BF16, 4, dq), tk_arg_tensor(dev[1], TK_BF16, 4, dq),
        tk_arg_tensor(dev[2], TK_BF16, 4, dq), tk_arg_tensor(dev[3], TK_BF16, 4, dq),
        tk_arg_tensor(dev[4], TK_F32, 3, dl),  tk_arg_f32(1.0f / sqrtf((float)sh->d))};
    tk_kernel *k = NULL;
    tk_program *p = NULL;
    tk_status s = tk_attention_fwd_build(ctx, &c, &k);
    if (!s) s = tk_compile(ctx, k, &p);
    if (!s) s = tk_gpu_memset(ctx, dev[3], 0xff, obytes); /* NaN poison */
    for (int i = 0; i < 3 && !s; i++) s = tk_launch(p, 6, args, NULL);
    if (!s) s = tk_gpu_sync(ctx);
    if (!s) s = tk_gpu_download(ctx, o, dev[3], obytes);
    double t[7];
    for (int r = 0; r < 7 && !s; r++) {
        double t0 = bench_now_ms();
        for (int i = 0; i < 10 && !s; i++) s = tk_launch(p, 6, args, NULL);
        if (!s) s = tk_gpu_sync(ctx);
        t[r] = (bench_now_ms() - t0) / 10;
    }
    if (s) fprintf(stderr, "d%d w%d: %s\n", sh->d, warps, tk_ctx_error(ctx));
    tk_program_release(p);
    tk_kernel_destroy(k);
    if (s) return 0;
    double flops = 4.0 * (double)(sh->b * sh->h) * (double)sh->n * (double)sh->n * sh->d;
    return flops / (sh->causal ? 2 : 1) / (bench_median(t, 7) * 1e-3) / 1e12;
}

int main(void) {
    tk_ctx *ctx = NULL;
    if (tk_ctx_create(&ctx) || tk_gpu_init(ctx)) {
        printf("bench_attention_configs: no GPU%s%s\n", ctx ? ": " : "",
               ctx ? tk_ctx_error(ctx) : "");
        tk_ctx_destroy(ctx);
        return 0;
    }
    size_t most = 4 * 32 * 4096 * 128; /* elements of the largest Q */
    uint16_t *h = malloc(most * 2), *ref = malloc(most * 2), *got = malloc(most * 2);
    void *dev[5] = {0};
    int rc = 1;
    if (!h || !ref || !got) {
        fprintf(stderr, "bench_attention_configs: out of host memory\n");
        goto done;
    }
    srand(11);
    for (size_t i = 0; i < most; i++) h[i] = tk_f32_to_bf16((float)rand() / RAND_MAX * 2 - 1);
    for (int i = 0; i < 5; i++)
        if (tk_gpu_alloc(ctx, most * (i == 4 ? 1 : 2), &dev[i]) ||
            (i < 3 && tk_gpu_upload(ctx, dev[i], h, most * 2))) {
            fprintf(stderr, "%s\n", tk_ctx_error(ctx));
            goto done;
        }
    char arch[16] = "";
    bool hopper = !tk_gpu_arch(ctx, arch, sizeof arch) && !strcmp(arch, "sm_90a");
    printf("| shape | causal | mma.sync default | mma.sync w4 | mma.sync w8 | wgmma w8 | "
           "wgmma w12 | max diff vs default |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    /* (warps, wgmma) of the columns after the default; w12: D 64 only */
    static const int cols[4][2] = {{4, 0}, {8, 0}, {8, 1}, {12, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *sh = &shapes[i];
        size_t n = (size_t)(sh->b * sh->h * sh->n * sh->d);
        double def = run(ctx, sh, 0, 0, dev, ref);
        double tf[4] = {0, 0, 0, 0}, diff = def > 0 ? 0 : NAN; /* NaN: nothing to compare */
        for (int c = 0; c < 4; c++) {
            if (cols[c][1] && (!hopper || (cols[c][0] == 12 && sh->d != 64))) continue;
            tf[c] = run(ctx, sh, cols[c][0], cols[c][1], dev, got);
            for (size_t e = 0; tf[c] > 0 && def > 0 && e < n; e++) {
                double x = tk_bf16_to_f32(got[e]), y = tk_bf16_to_f32(ref[e]);
                diff = isnan(x) || isnan(y) ? INFINITY : fmax(diff, fabs(x - y));
            }
        }
        char cell[4][16]; /* "–": not built for this shape or GPU */
        for (int c = 0; c < 4; c++)
            snprintf(cell[c], sizeof cell[c], tf[c] > 0 ? "%.0f" : "–", tf[c]);
        printf("| B%lld H%lld N%lld D%d | %d | %.0f | %s | %s | %s | %s | %.3g |\n",
               (long long)sh->b, (long long)sh->h, (long long)sh->n, sh->d, sh->causal, def,
               cell[0], cell[1], cell[2], cell[3], diff);
        fflush(stdout);
    }
    rc = 0;
done:
    for (int i = 0; i < 5; i++)
        if (dev[i]) tk_gpu_free(ctx, dev[i]);
    free(h), free(ref), free(got);
    tk_ctx_destroy(ctx);
    return rc;
}
