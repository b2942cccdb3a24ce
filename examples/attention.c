/* TileKittens' main example: attention forward from C.
 *
 * With a GPU: prepares the kernel through tk_attention_prepare (saying
 * whether it was compiled, or came from the disk cache, and how long that
 * took), runs tk_attention_forward at a few (B, H, N) shapes — one compiled
 * kernel serves them all — and checks each against a float64 CPU reference.
 * Without a GPU: builds the same kernel and runs it on the CPU interpreter
 * at a small shape, against the same reference.
 *
 *   ./attention        (run it twice: the second run loads from the disk cache) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

typedef struct shape {
    int64_t b, h, n, d;
} shape;

typedef struct problem {
    shape s;
    size_t n; /* elements of Q (= K, V, O)        */
    uint16_t *q, *k, *v, *o;
    float *lse;
} problem;

static problem make_problem(shape s) {
    problem p = {.s = s, .n = (size_t)(s.b * s.h * s.n * s.d)};
    p.q = malloc(p.n * 2), p.k = malloc(p.n * 2), p.v = malloc(p.n * 2), p.o = malloc(p.n * 2);
    p.lse = malloc(sizeof(float) * (size_t)(s.b * s.h * s.n));
    if (!p.q || !p.k || !p.v || !p.o || !p.lse) exit(1);
    uint16_t *in[3] = {p.q, p.k, p.v};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < p.n; i++)
            in[t][i] = tk_f32_to_bf16(4.0f * (float)rand() / (float)RAND_MAX - 2.0f);
    memset(p.o, 0xff, p.n * 2); /* NaN: an element the kernel misses shows up */
    memset(p.lse, 0xff, sizeof(float) * (size_t)(s.b * s.h * s.n));
    return p;
}

static void free_problem(problem *p) {
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->lse);
}

/* ‖O − ref‖/‖ref‖ and the same for L, against softmax(Q·Kᵀ/√D)·V in double. */
static void check(const problem *p, double *eo, double *el) {
    int64_t N = p->s.n, D = p->s.d, rows = p->s.b * p->s.h;
    double so = 0, no = 0, sl = 0, nl = 0, scale = 1.0 / sqrt((double)D);
    double *s = malloc(sizeof(double) * (size_t)N), *acc = malloc(sizeof(double) * (size_t)D);
    for (int64_t bh = 0; bh < rows; bh++)
        for (int64_t i = 0; i < N; i++) {
            const uint16_t *qi = p->q + (bh * N + i) * D;
            double m = -INFINITY, l = 0;
            for (int64_t j = 0; j < N; j++) {
                const uint16_t *kj = p->k + (bh * N + j) * D;
                double dot = 0;
                for (int64_t d = 0; d < D; d++)
                    dot += tk_bf16_to_f32(qi[d]) * tk_bf16_to_f32(kj[d]);
                s[j] = dot * scale;
                m = fmax(m, s[j]);
            }
            memset(acc, 0, sizeof(double) * (size_t)D);
            for (int64_t j = 0; j < N; j++) {
                double e = exp(s[j] - m);
                l += e;
                for (int64_t d = 0; d < D; d++)
                    acc[d] += e * tk_bf16_to_f32(p->v[(bh * N + j) * D + d]);
            }
            for (int64_t d = 0; d < D; d++) {
                double ref = acc[d] / l, got = tk_bf16_to_f32(p->o[(bh * N + i) * D + d]);
                so += (got - ref) * (got - ref), no += ref * ref;
            }
            double lref = m + log(l), lgot = p->lse[bh * N + i];
            sl += (lgot - lref) * (lgot - lref), nl += lref * lref;
        }
    free(s), free(acc);
    *eo = sqrt(so / no), *el = sqrt(sl / nl); /* NaN anywhere makes these NaN */
}

static int report(const problem *p, const char *where) {
    double eo, el;
    check(p, &eo, &el);
    int ok = eo <= 1e-2 && el <= 1e-3; /* NaN fails both */
    printf("  %s B=%lld H=%lld N=%lld D=%lld: rel err O %.2e, L %.2e  %s\n", where,
           (long long)p->s.b, (long long)p->s.h, (long long)p->s.n, (long long)p->s.d, eo, el,
           ok ? "PASS" : "FAIL");
    return ok;
}

/* ---- GPU: the public entry point, one kernel for every shape ------------- */
static int run_gpu(tk_ctx *ctx, const shape *shapes, int nshapes) {
    int ok = 1;
    for (int i = 0; i < nshapes && ok; i++) {
        problem p = make_problem(shapes[i]);
        size_t bytes = p.n * 2, lbytes = sizeof(float) * (size_t)(p.s.b * p.s.h * p.s.n);
        void *d[5] = {0};
        tk_status s = TK_OK;
        for (int t = 0; t < 5 && !s; t++) s = tk_gpu_alloc(ctx, t < 4 ? bytes : lbytes, &d[t]);
        const void *host[5] = {p.q, p.k, p.v, p.o, p.lse};
        for (int t = 0; t < 5 && !s; t++)
            s = tk_gpu_upload(ctx, d[t], host[t], t < 4 ? bytes : lbytes);
        tk_attention_params a = {.struct_size = sizeof(tk_attention_params),
                                 .dtype = TK_BF16,
                                 .head_dim = (int32_t)p.s.d,
                                 .batch = p.s.b,
                                 .heads_q = p.s.h,
                                 .heads_kv = p.s.h,
                                 .seq_q = p.s.n,
                                 .seq_kv = p.s.n,
                                 .q = d[0],
                                 .k = d[1],
                                 .v = d[2],
                                 .o = d[3],
                                 .lse = d[4]};
        if (!s && i == 0) {
            tk_prepare_info info;
            tk_attn_kernel kern = TK_ATTN_AUTO;
            if (!(s = tk_attention_kernel_for(ctx, &a, &kern)) &&
                !(s = tk_attention_prepare(ctx, &a, &info)))
                printf("kernel for bf16, D=%lld, non-causal on %s (%s): %s in %.1f ms\n",
                       (long long)p.s.d, info.arch,
                       kern == TK_ATTN_WGMMA ? "wgmma, the Hopper kernel" : "mma.sync",
                       info.origin == TK_FROM_COMPILE ? "compiled (LLVM NVPTX + driver JIT)"
                       : info.origin == TK_FROM_DISK  ? "loaded from the disk cache"
                                                      : "found in memory",
                       info.ms);
        }
        if (!s) s = tk_attention_forward(ctx, &a, NULL);
        if (!s) s = tk_gpu_sync(ctx);
        if (!s) s = tk_gpu_download(ctx, p.o, d[3], bytes);
        if (!s) s = tk_gpu_download(ctx, p.lse, d[4], lbytes);
        if (s) fprintf(stderr, "GPU run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
        ok = !s && report(&p, "GPU");
        for (int t = 0; t < 5; t++)
            if (d[t]) tk_gpu_free(ctx, d[t]);
        free_problem(&p);
    }
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    printf("cache: %llu compiled, %llu from disk, %llu memory hits (dir %s)\n",
           (unsigned long long)st.misses, (unsigned long long)st.disk_hits,
           (unsigned long long)st.memory_hits, tk_cache_dir(ctx) ? tk_cache_dir(ctx) : "off");
    return ok;
}

/* ---- CPU interpreter: the same kernel, a small shape ------------------------ */
static int run_interpreter(tk_ctx *ctx, shape s) {
    tk_attention_config cfg = {.dtype = TK_BF16, .head_dim = (int)s.d, .causal = 0};
    tk_kernel *k;
    if (tk_attention_fwd_build(ctx, &cfg, &k)) {
        fprintf(stderr, "build failed: %s\n", tk_ctx_error(ctx));
        return 0;
    }
    printf("kernel %s: %d warps, %zu bytes of shared memory\n", tk_kernel_name(k),
           tk_kernel_warps(k), tk_kernel_smem_bytes(k));
    problem p = make_problem(s);
    int64_t d4[4] = {s.b, s.h, s.n, s.d}, d3[3] = {s.b, s.h, s.n};
    tk_arg args[6] = {tk_arg_tensor(p.q, TK_BF16, 4, d4),  tk_arg_tensor(p.k, TK_BF16, 4, d4),
                      tk_arg_tensor(p.v, TK_BF16, 4, d4),  tk_arg_tensor(p.o, TK_BF16, 4, d4),
                      tk_arg_tensor(p.lse, TK_F32, 3, d3), tk_arg_f32(1.0f / sqrtf((float)s.d))};
    tk_status st = tk_interp_run(k, 6, args);
    if (st) fprintf(stderr, "interpreter: %s: %s\n", tk_status_name(st), tk_ctx_error(ctx));
    int ok = !st && report(&p, "interpreter");
    free_problem(&p);
    tk_kernel_destroy(k);
    return ok;
}

int main(void) {
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    srand(1234);
    int ok;
    if (tk_gpu_init(ctx) == TK_OK) {
        static const shape shapes[] = {{2, 8, 1000, 128}, {1, 16, 257, 128}, {4, 2, 64, 128}};
        ok = run_gpu(ctx, shapes, 3);
    } else {
        printf("no GPU (%s): running on the CPU interpreter\n", tk_ctx_error(ctx));
        ok = run_interpreter(ctx, (shape){1, 2, 100, 64});
    }
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
