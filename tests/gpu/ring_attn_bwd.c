/* The attention backward's Hopper kernels at one shape, for compute-sanitizer
 * (scripts/device-run.sh sanitize), as tests/gpu/ring_attn.c is for the
 * forward:
 *   ring_attn_bwd B HQ HKV NQ NKV D CAUSAL [MODE]
 * bf16, [B, H, N, D] dense. The forward (mma.sync) makes O and L; then the
 * backward runs on the Hopper kernels in MODE (a tk_attn_bwd_mode: 0, the
 * default, deterministic; 1 fast) and on the deterministic mma.sync ones,
 * each into
 * gradients poisoned with NaN (all-ones bits), and the two are compared:
 * both are checked against float64 by tests/test_attention_bwd.c, so here a
 * relative difference above 1e-2 (or a NaN: an element not written) means
 * the run under the tool went wrong. Built on the GPU machine against
 * build-device/libtk.so like ring_attn.c.
 * Exit 0: the gradients agree; 1: they do not; 2: error. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"

static int fail(tk_ctx *ctx, const char *what) {
    fprintf(stderr, "ring_attn_bwd: %s: %s\n", what, ctx ? tk_ctx_error(ctx) : "");
    return 2;
}

enum { Q, K, V, O, G, DQ, DK, DV, NT }; /* G: dO */

/* ‖a - b‖ / ‖b‖ over n bf16 values; a NaN anywhere makes it infinite. */
static double rel_diff(const uint16_t *a, const uint16_t *b, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double x = tk_bf16_to_f32(a[i]), y = tk_bf16_to_f32(b[i]);
        if (isnan(x) || isnan(y)) return INFINITY;
        e += (x - y) * (x - y), r += y * y;
    }
    return r > 0 ? sqrt(e / r) : sqrt(e);
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: ring_attn_bwd B HQ HKV NQ NKV D CAUSAL [MODE]\n");
        return 2;
    }
    int mode = argc == 9 ? atoi(argv[8]) : TK_ATTN_BWD_DETERMINISTIC;
    int64_t b = atoll(argv[1]), hq = atoll(argv[2]), hkv = atoll(argv[3]), nq = atoll(argv[4]),
            nkv = atoll(argv[5]), d = atoll(argv[6]);
    int causal = atoi(argv[7]);
    if (b < 1 || hkv < 1 || hq < hkv || hq % hkv || nq < 1 || nkv < 1 ||
        b * hq * nq * d > (1 << 24) || b * hkv * nkv * d > (1 << 24))
        return fprintf(stderr, "ring_attn_bwd: sizes out of range\n"), 2;
    tk_ctx *ctx = NULL;
    if (tk_ctx_create(&ctx)) return fail(NULL, "tk_ctx_create");
    if (tk_gpu_init(ctx)) return fail(ctx, "tk_gpu_init");
    size_t n[NT], nl = (size_t)(b * hq * nq);
    void *dev[NT], *dl, *ws;
    uint16_t *host[NT], *first[3];
    srand(11);
    for (int i = 0; i < NT; i++) {
        bool kv = i == K || i == V || i == DK || i == DV;
        n[i] = (size_t)(b * (kv ? hkv * nkv : hq * nq) * d);
        host[i] = malloc(n[i] * 2);
        if (!host[i] || tk_gpu_alloc(ctx, n[i] * 2, &dev[i])) return fail(ctx, "buffers");
        for (size_t j = 0; i <= G && j < n[i]; j++)
            host[i][j] = tk_f32_to_bf16(4.0f * rand() / RAND_MAX - 2.0f);
        if (i <= G && tk_gpu_upload(ctx, dev[i], host[i], n[i] * 2)) return fail(ctx, "upload");
    }
    if (tk_gpu_alloc(ctx, nl * 4, &dl)) return fail(ctx, "L");
    tk_attention_params f = {.struct_size = sizeof f,
                             .dtype = TK_BF16,
                             .head_dim = (int32_t)d,
                             .causal = causal,
                             .batch = b,
                             .heads_q = hq,
                             .heads_kv = hkv,
                             .seq_q = nq,
                             .seq_kv = nkv,
                             .q = dev[Q],
                             .k = dev[K],
                             .v = dev[V],
                             .o = dev[O],
                             .lse = dl,
                             .kernel = TK_ATTN_MMA_SYNC};
    if (tk_attention_forward(ctx, &f, NULL)) return fail(ctx, "tk_attention_forward");
    tk_attention_bwd_params p = {.struct_size = sizeof p,
                                 .dtype = TK_BF16,
                                 .head_dim = (int32_t)d,
                                 .causal = causal,
                                 .batch = b,
                                 .heads_q = hq,
                                 .heads_kv = hkv,
                                 .seq_q = nq,
                                 .seq_kv = nkv,
                                 .q = dev[Q],
                                 .k = dev[K],
                                 .v = dev[V],
                                 .o = dev[O],
                                 .dout = dev[G],
                                 .lse = dl,
                                 .dq = dev[DQ],
                                 .dk = dev[DK],
                                 .dv = dev[DV],
                                 .mode = TK_ATTN_BWD_FAST};
    if (tk_attention_backward_workspace(ctx, &p, &p.workspace_bytes) ||
        tk_gpu_alloc(ctx, p.workspace_bytes, &ws))
        return fail(ctx, "workspace");
    p.workspace = ws;
    const int kernels[2] = {TK_ATTN_WGMMA, TK_ATTN_MMA_SYNC}, modes[2] = {mode, 0};
    double worst = 0;
    for (int r = 0; r < 2; r++) {
        p.kernel = kernels[r], p.mode = modes[r];
        if (tk_gpu_memset(ctx, ws, 0xff, p.workspace_bytes)) return fail(ctx, "poison");
        for (int i = DQ; i < NT; i++)
            if (tk_gpu_memset(ctx, dev[i], 0xff, n[i] * 2)) return fail(ctx, "poison");
        if (tk_attention_backward(ctx, &p, NULL) || tk_gpu_sync(ctx))
            return fail(ctx, "tk_attention_backward");
        for (int i = DQ; i < NT; i++) {
            if (tk_gpu_download(ctx, host[i], dev[i], n[i] * 2)) return fail(ctx, "download");
            if (!r) { /* keep the Hopper kernels' gradients */
                first[i - DQ] = host[i];
                if (!(host[i] = malloc(n[i] * 2))) return fail(ctx, "malloc");
            } else {
                double e = rel_diff(first[i - DQ], host[i], n[i]);
                worst = e > worst ? e : worst;
            }
        }
    }
    printf("ring_attn_bwd B%lld Hq%lld Hkv%lld Nq%lld Nkv%lld D%lld %s: rel err wgmma%s vs "
           "mma.sync %.2e\n",
           (long long)b, (long long)hq, (long long)hkv, (long long)nq, (long long)nkv, (long long)d,
           causal ? "causal" : "full", mode ? " (fast)" : "", worst);
    for (int i = 0; i < NT; i++) tk_gpu_free(ctx, dev[i]), free(host[i]);
    for (int i = 0; i < 3; i++) free(first[i]);
    tk_gpu_free(ctx, dl), tk_gpu_free(ctx, ws);
    tk_ctx_destroy(ctx);
    return worst <= 1e-2 ? 0 : 1;
}
