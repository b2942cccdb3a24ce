/* One library GEMM launch with a named block shape, checked against float64
 * on the host: the target that scripts/race-proof.sh runs under
 * compute-sanitizer (racecheck, synccheck), where a test suite would run
 * every kernel and take too long.
 *   ring_gemm M N K BM BN BK WARPS STAGES TMA [TRANSPOSE_B [WGMMA [CLUSTER]]]
 * bf16 in and out; C is poisoned with NaN first. Whether the copies take the
 * copy engine or the producer's fallback follows from the shapes: a row pitch
 * that is not a multiple of 16 bytes (e.g. N = 700 for B in A·B) has no tensor
 * map, and its tiles take the per-thread fallback (the element path when the
 * rows are not 16-byte aligned); TK_NO_TMA=1 sends every copy there.
 * Built on the GPU machine against build-device/libtk.so:
 *   cc -O2 -Iinclude tests/gpu/ring_gemm.c -Lbuild-device -ltk \
 *      -Wl,-rpath,$PWD/build-device -lm -o ring_gemm
 * Exit 0: matches float64 (rel err <= 1e-2); 1: it does not; 2: error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"

static int fail(tk_ctx *ctx, const char *what) {
    fprintf(stderr, "ring_gemm: %s: %s\n", what, ctx ? tk_ctx_error(ctx) : "");
    return 2;
}

/* Relative error of c (bf16, M x N) against the float64 product. */
static double rel_err(const uint16_t *a, const uint16_t *b, const uint16_t *c, int64_t m, int64_t n,
                      int64_t k, int tb) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double r = 0;
            for (int64_t l = 0; l < k; l++)
                r += (double)tk_bf16_to_f32(a[i * k + l]) *
                     (double)tk_bf16_to_f32(tb ? b[j * k + l] : b[l * n + j]);
            double d = (double)tk_bf16_to_f32(c[i * n + j]) - r;
            num += isnan(d) ? INFINITY : d * d;
            den += r * r;
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int main(int argc, char **argv) {
    if (argc < 10) {
        fprintf(
            stderr,
            "usage: ring_gemm M N K BM BN BK WARPS STAGES TMA [TRANSPOSE_B [WGMMA [CLUSTER]]]\n");
        return 2;
    }
    int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
    int tb = argc > 10 ? atoi(argv[10]) : 0;
    if (m < 1 || n < 1 || k < 1 || m * k > (1 << 26) || n * k > (1 << 26) || m * n > (1 << 26))
        return fprintf(stderr, "ring_gemm: sizes out of range\n"), 2;
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_BF16, tb);
    cfg.block_m = atoi(argv[4]), cfg.block_n = atoi(argv[5]), cfg.block_k = atoi(argv[6]);
    cfg.warps = atoi(argv[7]), cfg.stages = atoi(argv[8]), cfg.tma = atoi(argv[9]);
    cfg.wgmma = argc > 11 ? atoi(argv[11]) : 0;
    cfg.cluster = argc > 12 ? atoi(argv[12]) : 0; /* 2: pairs of blocks sharing B */
    tk_ctx *ctx = NULL;
    if (tk_ctx_create(&ctx)) return fail(NULL, "tk_ctx_create");
    if (tk_gpu_init(ctx)) return fail(ctx, "tk_gpu_init");
    size_t na = (size_t)(m * k), nb = (size_t)(n * k), nc = (size_t)(m * n);
    uint16_t *a = malloc(na * 2), *b = malloc(nb * 2), *c = malloc(nc * 2);
    if (!a || !b || !c) return fail(ctx, "malloc");
    srand(12);
    for (size_t i = 0; i < na; i++) a[i] = tk_f32_to_bf16(2.0f * rand() / RAND_MAX - 1.0f);
    for (size_t i = 0; i < nb; i++) b[i] = tk_f32_to_bf16(2.0f * rand() / RAND_MAX - 1.0f);
    void *da, *db, *dc;
    if (tk_gpu_alloc(ctx, na * 2, &da) || tk_gpu_alloc(ctx, nb * 2, &db) ||
        tk_gpu_alloc(ctx, nc * 2, &dc) || tk_gpu_upload(ctx, da, a, na * 2) ||
        tk_gpu_upload(ctx, db, b, nb * 2) || tk_gpu_memset(ctx, dc, 0xff, nc * 2))
        return fail(ctx, "device buffers");
    tk_gemm_params p = {.struct_size = sizeof(tk_gemm_params),
                        .in_dtype = TK_BF16,
                        .out_dtype = TK_BF16,
                        .transpose_b = tb,
                        .m = m,
                        .n = n,
                        .k = k,
                        .a = da,
                        .b = db,
                        .c = dc,
                        .config = &cfg};
    if (tk_gemm(ctx, &p, NULL) || tk_gpu_sync(ctx) || tk_gpu_download(ctx, c, dc, nc * 2))
        return fail(ctx, "tk_gemm");
    double e = rel_err(a, b, c, m, n, k, tb);
    printf("ring_gemm %lldx%lldx%lld %s %dx%dx%d w%d s%d%s: rel err %.2e\n", (long long)m,
           (long long)n, (long long)k, tb ? "A·Bᵀ" : "A·B", cfg.block_m, cfg.block_n, cfg.block_k,
           cfg.warps, cfg.stages, cfg.tma ? " tma" : "", e);
    tk_gpu_free(ctx, da), tk_gpu_free(ctx, db), tk_gpu_free(ctx, dc);
    free(a), free(b), free(c);
    tk_ctx_destroy(ctx);
    return e <= 1e-2 ? 0 : 1;
}
