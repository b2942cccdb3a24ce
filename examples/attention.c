/* TileKittens' main example: build the FlashAttention-2 forward kernel, look
 * at it, run it, and check it against a plain C reference.
 *
 *   ./attention            runs on the CPU interpreter (B=1, H=2, N=100, D=64)
 *
 * The run is one call, run_kernel(), so another backend (the GPU through
 * tk_compile / tk_launch) slots in next to the interpreter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_kernels.h"

enum { B = 1, H = 2, N = 100, D = 64 };

typedef enum backend { ON_INTERPRETER, ON_GPU } backend;

/* Runs k over its grid with args (host buffers). */
static tk_status run_kernel(tk_ctx *ctx, backend where, tk_kernel *k, int nargs, tk_arg *args) {
    switch (where) {
    case ON_INTERPRETER: return tk_interp_run(k, nargs, args);
    case ON_GPU: /* run_on_gpu(ctx, k, nargs, args): upload, tk_compile, tk_launch, download */
        fprintf(stderr, "the GPU path is not wired into this example yet\n");
        return TK_ERR_UNSUPPORTED;
    }
    (void)ctx;
    return TK_ERR_INVALID_ARG;
}

/* Plain softmax(scale·Q·Kᵀ)·V and log-sum-exp, in double. */
static void reference(const float *q, const float *k, const float *v, double scale, double *o,
                      double *lse) {
    double s[N];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            const float *qi = q + ((size_t)h * N + i) * D;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < N; j++) {
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qi[d] * k[((size_t)h * N + j) * D + d];
                s[j] = scale * dot;
                m = fmax(m, s[j]);
            }
            double *oi = o + ((size_t)h * N + i) * D;
            memset(oi, 0, sizeof(double) * D);
            for (int j = 0; j < N; j++) {
                double p = exp(s[j] - m);
                l += p;
                for (int d = 0; d < D; d++) oi[d] += p * v[((size_t)h * N + j) * D + d];
            }
            for (int d = 0; d < D; d++) oi[d] /= l;
            lse[h * N + i] = m + log(l);
        }
}

int main(void) {
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;

    /* 1. Build: bf16, head dim 64, not causal. */
    tk_attention_config cfg = {.dtype = TK_BF16, .head_dim = D, .causal = 0};
    tk_kernel *k;
    if (tk_attention_fwd_build(ctx, &cfg, &k)) {
        fprintf(stderr, "build failed: %s\n", tk_ctx_error(ctx));
        tk_ctx_destroy(ctx);
        return 1;
    }
    char *ir = NULL;
    if (tk_kernel_print(k, &ir) == TK_OK) {
        int lines = 0;
        for (const char *c = ir; *c; c++) lines += *c == '\n';
        printf("kernel %s: %d warps, %zu bytes of shared memory, IR %d lines (%zu bytes)\n",
               tk_kernel_name(k), tk_kernel_warps(k), tk_kernel_smem_bytes(k), lines, strlen(ir));
        tk_free(ir);
    }

    /* 2. Inputs: random bf16 values (the reference reads the same rounded values). */
    size_t n = (size_t)B * H * N * D;
    uint16_t *q = malloc(n * 2), *kk = malloc(n * 2), *v = malloc(n * 2), *o = malloc(n * 2);
    float *qf = malloc(n * 4), *kf = malloc(n * 4), *vf = malloc(n * 4);
    float *lse = malloc(sizeof(float) * B * H * N);
    double *o_ref = malloc(n * sizeof(double)), *l_ref = malloc(sizeof(double) * B * H * N);
    if (!q || !kk || !v || !o || !qf || !kf || !vf || !lse || !o_ref || !l_ref) return 1;
    srand(1234);
    uint16_t *bufs[3] = {q, kk, v};
    float *fl[3] = {qf, kf, vf};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < n; i++) {
            bufs[t][i] = tk_f32_to_bf16(2.0f * rand() / (float)RAND_MAX - 1.0f);
            fl[t][i] = tk_bf16_to_f32(bufs[t][i]);
        }
    float scale = 1.0f / sqrtf((float)D);
    memset(o, 0xff, n * 2); /* NaN: an element the kernel misses shows up */
    memset(lse, 0xff, sizeof(float) * B * H * N);

    /* 3. Run: Q, K, V, O are [B, H, N, D], L is [B, H, N], then the scale. */
    int64_t d4[4] = {B, H, N, D}, d3[3] = {B, H, N};
    tk_arg args[6] = {tk_arg_tensor(q, TK_BF16, 4, d4), tk_arg_tensor(kk, TK_BF16, 4, d4),
                      tk_arg_tensor(v, TK_BF16, 4, d4), tk_arg_tensor(o, TK_BF16, 4, d4),
                      tk_arg_tensor(lse, TK_F32, 3, d3), tk_arg_f32(scale)};
    int64_t grid[3] = {0, 0, 0};
    tk_kernel_grid(k, 6, args, grid);
    printf("grid %lld x %lld x %lld blocks\n", (long long)grid[0], (long long)grid[1],
           (long long)grid[2]);
    tk_status s = run_kernel(ctx, ON_INTERPRETER, k, 6, args);
    if (s) {
        fprintf(stderr, "run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
        return 1;
    }

    /* 4. Check: relative L2 error of O and of the log-sum-exp L. */
    reference(qf, kf, vf, scale, o_ref, l_ref);
    double no = 0, eo = 0, nl = 0, el = 0;
    for (size_t i = 0; i < n; i++) {
        double d = tk_bf16_to_f32(o[i]) - o_ref[i];
        eo += d * d;
        no += o_ref[i] * o_ref[i];
    }
    for (size_t i = 0; i < (size_t)B * H * N; i++) {
        double d = lse[i] - l_ref[i];
        el += d * d;
        nl += l_ref[i] * l_ref[i];
    }
    eo = sqrt(eo / no);
    el = sqrt(el / nl);
    int ok = eo <= 1e-2 && el <= 1e-3; /* NaN fails both */
    printf("B=%d H=%d N=%d D=%d: rel err O %.3e, L %.3e: %s\n", B, H, N, D, eo, el,
           ok ? "PASS" : "FAIL");

    free(q); free(kk); free(v); free(o); free(qf); free(kf); free(vf); free(lse);
    free(o_ref); free(l_ref);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
