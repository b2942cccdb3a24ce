/* One library attention forward launch, checked against float64 on the host:
 * the target scripts/device-run.sh runs under compute-sanitizer (memcheck,
 * racecheck, synccheck), as tests/gpu/ring_gemm.c is for the GEMM.
 *   ring_attn B HQ HKV NQ NKV D CAUSAL KERNEL
 * KERNEL: 1 mma.sync, 2 the Hopper (wgmma) kernel (tk_attn_kernel). bf16,
 * [B, H, N, D] dense; O and L are poisoned (all-ones bits) first.
 * Built on the GPU machine against build-device/libtk.so:
 *   cc -O2 -Iinclude tests/gpu/ring_attn.c -Lbuild-device -ltk \
 *      -Wl,-rpath,$PWD/build-device -lm -o ring_attn
 * Exit 0: O and L match float64 (rel err <= 1e-2 and 1e-3); 1: they do
 * not; 2: error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"

static int fail(tk_ctx *ctx, const char *what) {
    fprintf(stderr, "ring_attn: %s: %s\n", what, ctx ? tk_ctx_error(ctx) : "");
    return 2;
}

static double bf(uint16_t x) { return (double)tk_bf16_to_f32(x); }

typedef struct shape {
    int64_t b, hq, hkv, nq, nkv, d;
    int causal;
} shape;

/* Squared error and squared reference of one query row (b, h, i): O's row
 * into e[0], e[1]; L's into e[2], e[3]. */
static void row_err(const shape *s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                    const uint16_t *o, const float *l, int64_t b, int64_t h, int64_t i, double *e) {
    const int64_t d = s->d, hk = h / (s->hq / s->hkv);
    const uint16_t *qi = q + ((b * s->hq + h) * s->nq + i) * d;
    const uint16_t *kb = k + (b * s->hkv + hk) * s->nkv * d,
                   *vb = v + (b * s->hkv + hk) * s->nkv * d;
    int64_t last = s->causal ? i + s->nkv - s->nq : s->nkv - 1; /* bottom-right aligned */
    double mx = -INFINITY, sum = 0, scale = 1.0 / sqrt((double)d);
    double *p = malloc(sizeof(double) * (size_t)s->nkv), *acc = calloc((size_t)d, sizeof(double));
    for (int64_t j = 0; j <= last && j < s->nkv; j++) {
        double dot = 0;
        for (int64_t c = 0; c < d; c++) dot += bf(qi[c]) * bf(kb[j * d + c]);
        p[j] = dot * scale;
        if (p[j] > mx) mx = p[j];
    }
    for (int64_t j = 0; j <= last && j < s->nkv; j++) {
        double w = exp(p[j] - mx);
        sum += w;
        for (int64_t c = 0; c < d; c++) acc[c] += w * bf(vb[j * d + c]);
    }
    const uint16_t *oi = o + ((b * s->hq + h) * s->nq + i) * d;
    for (int64_t c = 0; c < d; c++) {
        double r = sum > 0 ? acc[c] / sum : 0, x = bf(oi[c]) - r;
        e[0] += isnan(x) ? INFINITY : x * x;
        e[1] += r * r;
    }
    double lr = sum > 0 ? mx + log(sum) : -INFINITY, lo = l[(b * s->hq + h) * s->nq + i];
    if (isinf(lr) || isinf(lo)) {
        e[2] += lr == lo ? 0 : INFINITY;
    } else {
        e[2] += (lo - lr) * (lo - lr);
        e[3] += lr * lr;
    }
    free(p), free(acc);
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: ring_attn B HQ HKV NQ NKV D CAUSAL KERNEL\n");
        return 2;
    }
    shape s = {atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoll(argv[4]),
               atoll(argv[5]), atoll(argv[6]), atoi(argv[7])};
    int kernel = atoi(argv[8]);
    if (s.b < 1 || s.hkv < 1 || s.hq < s.hkv || s.hq % s.hkv || s.nq < 1 || s.nkv < 1 ||
        s.b * s.hq * s.nq * s.d > (1 << 24) || s.b * s.hkv * s.nkv * s.d > (1 << 24))
        return fprintf(stderr, "ring_attn: sizes out of range\n"), 2;
    tk_ctx *ctx = NULL;
    if (tk_ctx_create(&ctx)) return fail(NULL, "tk_ctx_create");
    if (tk_gpu_init(ctx)) return fail(ctx, "tk_gpu_init");
    size_t nq = (size_t)(s.b * s.hq * s.nq * s.d), nk = (size_t)(s.b * s.hkv * s.nkv * s.d);
    size_t nl = (size_t)(s.b * s.hq * s.nq);
    uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2), *o = malloc(nq * 2);
    float *l = malloc(nl * 4);
    if (!q || !k || !v || !o || !l) return fail(ctx, "malloc");
    srand(7);
    for (size_t i = 0; i < nq; i++) q[i] = tk_f32_to_bf16(4.0f * rand() / RAND_MAX - 2.0f);
    for (size_t i = 0; i < nk; i++) k[i] = tk_f32_to_bf16(4.0f * rand() / RAND_MAX - 2.0f);
    for (size_t i = 0; i < nk; i++) v[i] = tk_f32_to_bf16(2.0f * rand() / RAND_MAX - 1.0f);
    void *dq, *dk, *dv, *dO, *dl;
    if (tk_gpu_alloc(ctx, nq * 2, &dq) || tk_gpu_alloc(ctx, nk * 2, &dk) ||
        tk_gpu_alloc(ctx, nk * 2, &dv) || tk_gpu_alloc(ctx, nq * 2, &dO) ||
        tk_gpu_alloc(ctx, nl * 4, &dl) || tk_gpu_upload(ctx, dq, q, nq * 2) ||
        tk_gpu_upload(ctx, dk, k, nk * 2) || tk_gpu_upload(ctx, dv, v, nk * 2) ||
        tk_gpu_memset(ctx, dO, 0xff, nq * 2) || tk_gpu_memset(ctx, dl, 0xff, nl * 4))
        return fail(ctx, "device buffers");
    tk_attention_params p = {.struct_size = sizeof(tk_attention_params),
                             .dtype = TK_BF16,
                             .head_dim = (int32_t)s.d,
                             .causal = s.causal,
                             .batch = s.b,
                             .heads_q = s.hq,
                             .heads_kv = s.hkv,
                             .seq_q = s.nq,
                             .seq_kv = s.nkv,
                             .q = dq,
                             .k = dk,
                             .v = dv,
                             .o = dO,
                             .lse = dl,
                             .kernel = kernel};
    if (tk_attention_forward(ctx, &p, NULL) || tk_gpu_sync(ctx) ||
        tk_gpu_download(ctx, o, dO, nq * 2) || tk_gpu_download(ctx, l, dl, nl * 4))
        return fail(ctx, "tk_attention_forward");
    double e[4] = {0};
    for (int64_t b = 0; b < s.b; b++)
        for (int64_t h = 0; h < s.hq; h++)
            for (int64_t i = 0; i < s.nq; i++) row_err(&s, q, k, v, o, l, b, h, i, e);
    double eo = e[1] > 0 ? sqrt(e[0] / e[1]) : sqrt(e[0]),
           el = e[3] > 0 ? sqrt(e[2] / e[3]) : sqrt(e[2]);
    printf("ring_attn B%lld Hq%lld Hkv%lld Nq%lld Nkv%lld D%lld %s %s: rel err O %.2e L %.2e\n",
           (long long)s.b, (long long)s.hq, (long long)s.hkv, (long long)s.nq, (long long)s.nkv,
           (long long)s.d, s.causal ? "causal" : "full",
           kernel == TK_ATTN_WGMMA ? "wgmma" : "mma.sync", eo, el);
    void *dev[5] = {dq, dk, dv, dO, dl};
    for (int i = 0; i < 5; i++) tk_gpu_free(ctx, dev[i]);
    free(q), free(k), free(v), free(o), free(l);
    tk_ctx_destroy(ctx);
    return eo <= 1e-2 && el <= 1e-3 ? 0 : 1;
}
