/* The ready-made kernels through their public entry points (tk_run.h):
 * - argument validation (runs everywhere: bad input never reaches a launch);
 * - on a GPU: GEMM at 27 shapes with the library's block shape (and 3 long-K
 *   ones with two blocks per SM, every 16th row checked, also through the
 *   copy engine) and 16 other shapes at 3 sizes each (5 with the engine), attention at 32 shapes, all against float64 CPU
 *   references, outputs NaN-poisoned first, ragged shapes included; tk_gemm
 *   keys its kernels on the block shape it picks;
 * - shape polymorphism: 20 (B, H, N) triples compile nothing after the first
 *   call, and a second process loads the kernel from the disk cache.
 * GPU parts skip with one line where there is no GPU. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tk/tk_run.h"
#include "util/harness.h"
#include "util/run.h"
#include "util/params.h"

static tk_ctx *ctx;
static char cache_dir[64];

/* TK_TEST_CACHE_DIR keeps the disk cache between runs, so a second run of
 * this binary exercises every kernel through the disk cache. */
static const char *kept_dir(void) { return getenv("TK_TEST_CACHE_DIR"); }

static void setup(void) {
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (kept_dir()) {
        snprintf(cache_dir, sizeof cache_dir, "%s", kept_dir());
    } else {
        snprintf(cache_dir, sizeof cache_dir, "/tmp/tk-gpu-kernels-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(cache_dir));
    }
    ck_assert_int_eq(tk_cache_set_dir(ctx, cache_dir), TK_OK);
}

static void teardown(void) {
    tk_ctx_destroy(ctx);
    if (kept_dir()) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *origin_name(tk_origin o) {
    return o == TK_FROM_COMPILE ? "compiled"
           : o == TK_FROM_DISK  ? "loaded from the disk cache"
                                : "memory hit";
}

/* ---- validation ---------------------------------------------------------- */
static tk_attention_params good_attention(void) {
    static char dummy[64];
    return tu_attention_params(TK_BF16, 64, 4, 2, 64, dummy); /* above decoding's 16 queries */
}

/* The forward refuses p, and tk_attention_kernel_for alike. */
static void expect_attention_error(tk_attention_params p, tk_status want, const char *frag) {
    for (int which = 0; which < 2; which++) {
        tk_attn_kernel kern;
        tk_status s =
            which ? tk_attention_kernel_for(ctx, &p, &kern) : tk_attention_forward(ctx, &p, NULL);
        ck_assert_msg(s == want, "got %s (%s), want %s", tk_status_name(s), tk_ctx_error(ctx),
                      tk_status_name(want));
        ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    }
}

START_TEST(attention_rejects_bad_params) {
    tk_attention_params p = good_attention();
    ck_assert_int_eq(tk_attention_forward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_forward(NULL, &p, NULL), TK_ERR_INVALID_ARG);
    p.q = NULL;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "q is NULL");
    p = good_attention(), p.lse = NULL;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "lse is NULL");
    p = good_attention(), p.heads_q = 3;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "not a multiple of heads_kv");
    p = good_attention(), p.head_dim = 96;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "head_dim is 96");
    p = good_attention(), p.seq_q = 0;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "seq_q is 0");
    p = good_attention(), p.batch = -2;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "batch is -2");
    p = good_attention(), p.dtype = TK_F32;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "dtype is f32");
    p = good_attention(), p.causal = 2;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "causal is 2");
    p = good_attention(), p.scale = NAN;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "scale");
    p = good_attention(), p.k_strides[0] = 64, p.k_strides[3] = 2;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "k_strides[3] is 2");
    p = good_attention(), p.lse_strides[1] = -3;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "lse_strides[1] is negative");
    p = good_attention(), p.kernel = 4;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "kernel is 4");
    p = good_attention(), p.kernel = TK_ATTN_DECODE, p.seq_q = 17;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "TK_ATTN_DECODE takes at most 16 queries");
    p = good_attention(), p.head_dim = 512;
    expect_attention_error(p, TK_ERR_INVALID_ARG, "head_dim is 512");
    char arch[16] = "";
    bool hopper = !tk_gpu_arch(ctx, arch, sizeof arch) && !strcmp(arch, "sm_90a");
    if (!hopper) {
        p = good_attention(), p.kernel = TK_ATTN_WGMMA; /* no GPU here, or not sm_90a */
        expect_attention_error(p, TK_ERR_UNSUPPORTED, "TK_ATTN_WGMMA needs an sm_90a GPU");
    }
    /* the library's choice, said before any launch */
    tk_attn_kernel kern = TK_ATTN_AUTO;
    p = good_attention();
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &p, &kern), TK_OK);
    ck_assert_int_eq(kern, hopper ? TK_ATTN_WGMMA : TK_ATTN_MMA_SYNC);
    p.kernel = TK_ATTN_MMA_SYNC;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &p, &kern), TK_OK);
    ck_assert_int_eq(kern, TK_ATTN_MMA_SYNC);
    p.kernel = TK_ATTN_AUTO, p.seq_q = 16; /* few queries: the decoding kernels */
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &p, &kern), TK_OK);
    ck_assert_int_eq(kern, TK_ATTN_DECODE);
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "out is NULL"));
    ck_assert_int_eq(tk_attention_kernel_for(NULL, &p, &kern), TK_ERR_INVALID_ARG);
}
END_TEST

START_TEST(gemm_rejects_bad_params) {
    static char dummy[64];
    tk_gemm_params g = tu_gemm_params(TK_BF16, TK_F32, 4, 4, 4, dummy);
    tk_gemm_params b = g;
    b.k = 0;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "each must be >= 1"));
    b = g, b.c = NULL;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "c is NULL"));
    b = g, b.in_dtype = TK_I32;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    b = g, b.lda = 2;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "leading dimension"));
    ck_assert_int_eq(tk_gemm(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_BF16, 0); /* C is f32 in g */
    b = g, b.config = &cfg;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "config is for bf16 -> bf16"));
    cfg = tk_gemm_default_config(TK_F16, TK_F32, 0); /* A and B are bf16 in g */
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "config is for f16 -> f32"));
    cfg = tk_gemm_default_config(TK_BF16, TK_F32, 1); /* g is A·B */
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "transpose_b 1"));
    cfg.transpose_b = 2;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "transpose_b 2"));
    cfg = tk_gemm_default_config(TK_BF16, TK_F32, 0), cfg.warps = 3;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "3 warps cannot split"));
    cfg.warps = 4, cfg.stages = 9;
    ck_assert_int_eq(tk_gemm(ctx, &b, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "stages is 9"));
}
END_TEST

/* ---- GEMM on the GPU ------------------------------------------------------ */
static const int64_t gemm_shapes[][3] = {
    {1, 1, 1},
    {17, 33, 65},
    {100, 200, 300},
    {128, 128, 128},
    {255, 257, 129},
    {64, 1000, 40},
    {1000, 64, 72},
    {513, 1, 256},
    {1, 513, 64},
    {300, 300, 17},
    {256, 384, 512},
    {1024, 1024, 1024},
    {777, 555, 333},
    {130, 130, 1000},
    {2048, 256, 64},
    {96, 96, 4096},
    {1023, 1025, 64},
    {33, 2000, 128},
    {512, 512, 7},
    {640, 320, 160},
    {129, 127, 255},
    {2000, 48, 96},
    {4096, 128, 256},
    {200, 1500, 64},
    /* large enough for tk_gemm_config_for's 128x256 blocks (>= 264 of them);
     * the last with 16-byte pitches: the copy engine's kernel on sm_90a */
    {4200, 2050, 80},
    {2304, 4100, 64},
    {4160, 2100, 48},
    {4104, 2056, 72},
};

static double tol(tk_dtype out) { return out == TK_F32 ? 2e-3 : out == TK_F16 ? 3e-3 : 1e-2; }

/* One GEMM on the GPU against float64; cfg NULL: the library's choice.
 * Rows i with i % step == 0 and the last row are checked (step 1: all). */
static void check_gemm_rows(int64_t M, int64_t N, int64_t K, tk_dtype in, tk_dtype out, int tb,
                            const tk_gemm_config *cfg, int64_t step) {
    int64_t ad[2] = {M, K}, bd[2] = {tb ? N : K, tb ? K : N}, cd[2] = {M, N};
    ref_tensor A = ref_tensor_new(in, 2, ad), B = ref_tensor_new(in, 2, bd);
    ref_tensor C = ref_tensor_new(out, 2, cd);
    ref_tensor_random(&A, -1, 1);
    ref_tensor_random(&B, -1, 1);
    ref_tensor_fill_all(&C, NAN);
    void *da = th_upload(ctx, &A), *db = th_upload(ctx, &B), *dc = th_upload(ctx, &C);
    ck_assert(da && db && dc);
    tk_gemm_params p = {.struct_size = sizeof(tk_gemm_params),
                        .in_dtype = in,
                        .out_dtype = out,
                        .transpose_b = tb,
                        .m = M,
                        .n = N,
                        .k = K,
                        .a = da,
                        .b = db,
                        .c = dc,
                        .config = cfg};
    /* cfg NULL: tk_gemm uses tk_gemm_config_for's choice, named "auto" */
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    tk_gemm_config chosen = tk_gemm_config_for_call(&p, arch);
    const tk_gemm_config *used = cfg ? cfg : &chosen;
    char shape[64];
    snprintf(shape, sizeof shape, "%s%dx%dx%d w%d s%d%s%s%s", cfg ? "" : "auto ", used->block_m,
             used->block_n, used->block_k, used->warps, used->stages, used->tma ? " tma" : "",
             used->wgmma ? " wgmma" : "", used->cluster == 2 ? " pairs" : "");
    tk_prepare_info info;
    ck_assert_msg(tk_gemm_prepare(ctx, &p, &info) == TK_OK, "%s", tk_ctx_error(ctx));
    printf("gemm kernel %s->%s %s %s: %s\n", tk_dtype_name(in), tk_dtype_name(out),
           tb ? "A·Bᵀ" : "A·B", shape, origin_name(info.origin));
    tk_status s = tk_gemm(ctx, &p, NULL);
    ck_assert_msg(s == TK_OK, "tk_gemm: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, C.data, dc, (size_t)C.elems * tk_dtype_size(out)), TK_OK);
    double *a = ref_tensor_to_f64(&A), *b = ref_tensor_to_f64(&B), *c = ref_tensor_to_f64(&C);
    int64_t rows = 0;
    for (int64_t i = 0; i < M; i++) /* the rows checked, packed to the front */
        if (i % step == 0 || i == M - 1) {
            memmove(a + rows * K, a + i * K, sizeof(double) * (size_t)K);
            memmove(c + rows * N, c + i * N, sizeof(double) * (size_t)N);
            rows++;
        }
    double *r = malloc(sizeof(double) * (size_t)(rows * N));
    ref_gemm(a, b, r, rows, N, K, tb);
    double e = ref_rel_err(c, r, rows * N);
    printf("gpu gemm %5lldx%5lldx%5lld %s %s->%s %s  rel err %.2e\n", (long long)M, (long long)N,
           (long long)K, tb ? "A·Bᵀ" : "A·B ", tk_dtype_name(in), tk_dtype_name(out), shape, e);
    ck_assert_msg(e <= tol(out), "rel err %g", e);
    free(a), free(b), free(c), free(r);
    tk_gpu_free(ctx, da), tk_gpu_free(ctx, db), tk_gpu_free(ctx, dc);
    ref_tensor_free(&A), ref_tensor_free(&B), ref_tensor_free(&C);
}

static void check_gemm(int64_t M, int64_t N, int64_t K, tk_dtype in, tk_dtype out, int tb,
                       const tk_gemm_config *cfg) {
    check_gemm_rows(M, N, K, in, out, tb, cfg, 1);
}

START_TEST(gemm_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    const int64_t *sh = gemm_shapes[_i];
    tk_dtype in = _i % 2 ? TK_F16 : TK_BF16;
    tk_dtype out = (tk_dtype[]){TK_BF16, TK_F32, TK_F16}[_i % 3];
    check_gemm(sh[0], sh[1], sh[2], in, out, (_i / 2) % 2, NULL);
}
END_TEST

/* Long k-loops with two blocks on each SM (>= 264 128x128 blocks), where
 * every shared stage is refilled many times while the other block keeps the
 * SM's load pipes busy: with the copy engine (the second three), a missing
 * cross-proxy fence between the warps' ldmatrix reads and the engine's
 * refill tore tiles in bench_gemm_configs at 4096³ and nowhere in
 * gemm_on_gpu. The last three: the warp-specialized kernel, whose release
 * and group rings wrap several times. Every 16th row is checked (the
 * float64 reference of the whole product would take seconds). */
static const int64_t gemm_long_shapes[][3] = {
    {2048, 2048, 4096},
    {2000, 2100, 3000},
    {2304, 2176, 2056},
};

START_TEST(gemm_long_k_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    const int64_t *sh = gemm_long_shapes[_i % 3];
    tk_dtype in = _i % 3 == 1 ? TK_F16 : TK_BF16, out = _i % 3 == 2 ? TK_F32 : TK_BF16;
    tk_gemm_config cfg = tk_gemm_default_config(in, out, _i % 3 == 1);
    cfg.tma = 1; /* _i 3..5: 4 warps in lockstep, two blocks per SM */
    if (_i >= 6) /* the producer warpgroup's kernel on sm_90a, its ring wrapping 4-6 times */
        cfg.block_n = 256, cfg.block_k = 128, cfg.warps = 8, cfg.stages = 2;
    check_gemm_rows(sh[0], sh[1], sh[2], in, out, _i % 3 == 1, _i < 3 ? NULL : &cfg, 16);
}
END_TEST

/* The other block shapes a caller can ask for (tk_gemm_params.config), each
 * on ragged and multi-tile problems, A·B and A·Bᵀ. */
static const int gemm_alt_shapes[][6] = {
    /* block m, n, k, warps, stages, tma */
    {128, 256, 64, 8, 4, 0},
    {256, 128, 64, 8, 4, 0},
    {128, 256, 64, 8, 3, 0},
    {256, 128, 64, 8, 3, 0},
    {128, 256, 32, 8, 6, 0},
    {64, 64, 32, 4, 2, 0},
    {128, 64, 64, 2, 3, 0},
    {64, 128, 64, 2, 3, 0},
    {64, 64, 64, 4, 3, 0},
    {64, 64, 64, 1, 3, 0},
    {128, 64, 64, 4, 3, 0},
    /* through the copy engine: 128-byte rows, wider (column blocks), 64-byte;
     * on sm_90a fed by a producer warpgroup (its fallback copies where a
     * pitch is not 16-byte aligned), with 2 warps in lockstep */
    {128, 128, 64, 4, 3, 1},
    {128, 256, 64, 8, 3, 1},
    {128, 128, 32, 4, 4, 1},
    {64, 64, 32, 4, 2, 1},
    {128, 64, 64, 4, 3, 1},
    {128, 256, 128, 8, 2, 1},
    {256, 128, 64, 8, 4, 1},
    {64, 64, 64, 2, 3, 1},
};
static const int64_t gemm_alt_sizes[][3] = {{300, 700, 200}, {1024, 1024, 512}, {257, 129, 1000}};

START_TEST(gemm_configs_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    const int *cs = gemm_alt_shapes[_i];
    for (int j = 0; j < 3; j++) {
        int tb = (_i + j) % 2;
        tk_dtype in = j == 1 ? TK_F16 : TK_BF16, out = j == 2 ? TK_F32 : in;
        tk_gemm_config cfg = tk_gemm_default_config(in, out, tb);
        cfg.block_m = cs[0], cfg.block_n = cs[1], cfg.block_k = cs[2];
        cfg.warps = cs[3], cfg.stages = cs[4], cfg.tma = cs[5];
        const int64_t *sz = gemm_alt_sizes[j];
        check_gemm(sz[0], sz[1], sz[2], in, out, tb, &cfg);
    }
}
END_TEST

/* The wgmma GEMM (sm_90a): every shape of gemm_on_gpu and the long-k ones,
 * both transposes and all output dtypes, in four block shapes: the
 * producer-fed 128x256 (its fallback copies where a pitch is not 16-byte
 * aligned), the same by cp.async in lockstep, a 128x128 producer kernel (6 stages, as the library picks it), and
 * one warpgroup with 64-byte rows (the 64-byte swizzle). */
static const int gemm_wgmma_shapes[][6] = {
    /* block m, n, k, warps, stages, tma */
    {128, 256, 64, 8, 4, 1},
    {128, 256, 64, 8, 4, 0},
    {128, 128, 64, 8, 6, 1},
    {64, 128, 32, 4, 3, 0},
};
#define N_GEMM_SHAPES (int)(sizeof gemm_shapes / sizeof *gemm_shapes)
#define N_LONG_SHAPES (int)(sizeof gemm_long_shapes / sizeof *gemm_long_shapes)

/* Case i of the wgmma loops (gemm_shapes, then gemm_long_shapes): its
 * shape, dtypes and transpose, spread over i; false (and a line, once) when
 * the GPU is not sm_90a, or no GPU. */
typedef struct wgmma_case {
    const int64_t *sh;
    tk_dtype in, out;
    int tb;
    bool lng;
} wgmma_case;

static bool wgmma_case_for(int i, const char *what, wgmma_case *w) {
    if (th_gpu_or_skip(ctx)) return false;
    char arch[16];
    if (tk_gpu_arch(ctx, arch, sizeof arch) || strcmp(arch, "sm_90a")) {
        if (i == 0) printf("gpu gemm %s skipped: the GPU is %s, it needs sm_90a\n", what, arch);
        return false;
    }
    w->lng = i >= N_GEMM_SHAPES;
    w->sh = w->lng ? gemm_long_shapes[i - N_GEMM_SHAPES] : gemm_shapes[i];
    w->in = i % 2 ? TK_F16 : TK_BF16;
    w->out = (tk_dtype[]){TK_BF16, TK_F32, TK_F16}[i % 3];
    w->tb = (i / 2) % 2;
    return true;
}

START_TEST(gemm_wgmma_on_gpu) {
    wgmma_case w;
    if (!wgmma_case_for(_i, "wgmma", &w)) return;
    const int *cs = gemm_wgmma_shapes[_i % 4];
    tk_gemm_config cfg = tk_gemm_default_config(w.in, w.out, w.tb);
    cfg.block_m = cs[0], cfg.block_n = cs[1], cfg.block_k = cs[2];
    cfg.warps = cs[3], cfg.stages = cs[4], cfg.tma = cs[5], cfg.wgmma = 1;
    check_gemm_rows(w.sh[0], w.sh[1], w.sh[2], w.in, w.out, w.tb, &cfg, w.lng ? 16 : 1);
}
END_TEST

/* The wgmma GEMM's pairs of blocks sharing B (tk_gemm_config.cluster = 2:
 * clusters of two, B multicast): every shape of gemm_on_gpu and the long-k
 * ones, both transposes and all output dtypes, on the library's two wgmma
 * blocks; odd tile counts of M run a pair's second tile past M. */
START_TEST(gemm_cluster_on_gpu) {
    wgmma_case w;
    if (!wgmma_case_for(_i, "pairs", &w)) return;
    int wide = (_i / 4) % 2 == 0;
    tk_gemm_config cfg = tk_gemm_default_config(w.in, w.out, w.tb);
    cfg.block_m = 128, cfg.block_n = wide ? 256 : 128, cfg.block_k = 64;
    cfg.warps = 8, cfg.stages = wide ? 4 : 6, cfg.tma = 1, cfg.wgmma = 1, cfg.cluster = 2;
    check_gemm_rows(w.sh[0], w.sh[1], w.sh[2], w.in, w.out, w.tb, &cfg, w.lng ? 16 : 1);
}
END_TEST

/* tk_gemm's kernel table keys on the block shape: the automatic choice for a
 * size is the same kernel as naming that configuration, and on an H200 the
 * large, middle and small sizes get three different kernels. */
START_TEST(gemm_choice_is_keyed) {
    if (th_gpu_or_skip(ctx)) return;
    static char dummy[64]; /* prepare checks and compiles; it launches nothing */
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    tk_gemm_params p = tu_gemm_params(TK_BF16, TK_BF16, 8192, 8192, 64, dummy);
    tk_gemm_config big = tk_gemm_config_for(TK_BF16, TK_BF16, 0, p.m, p.n, arch);
    tk_gemm_config dflt = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    tk_prepare_info info;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_ne(info.origin, TK_FROM_MEMORY);
    p.config = &big;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    p.config = &dflt;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    if (memcmp(&big, &dflt, sizeof big)) /* sm_90: two shapes, two kernels */
        ck_assert_int_ne(info.origin, TK_FROM_MEMORY);
    else
        ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    p.config = NULL, p.m = p.n = 2048; /* between the two rules: the default */
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    tk_gemm_config small = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 512, 512, arch);
    p.m = p.n = 512; /* sm_90: fewer blocks than SMs, a third kernel */
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    if (memcmp(&small, &dflt, sizeof small)) ck_assert_int_ne(info.origin, TK_FROM_MEMORY);
    p.config = &small;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
}
END_TEST

/* ---- attention on the GPU ------------------------------------------------- */
typedef struct acase {
    int64_t b, hq, hkv, nq, nkv;
    int d, causal, bnhd;
    tk_dtype dt;
    int pad; /* elements after each row of D (ref_tensor_new_layout) */
} acase;

static const acase attn_cases[] = {
    {1, 1, 1, 1, 1, 64, 0, 0, TK_BF16, 0},
    {1, 2, 2, 17, 17, 64, 1, 0, TK_BF16, 0},
    {2, 2, 1, 63, 63, 128, 0, 0, TK_F16, 0},
    {1, 4, 4, 64, 64, 128, 1, 1, TK_BF16, 0},
    {2, 3, 3, 65, 65, 64, 0, 1, TK_F16, 0},
    {1, 2, 2, 1000, 1000, 128, 1, 0, TK_BF16, 0},
    {1, 1, 1, 4097, 4097, 64, 0, 0, TK_BF16, 0},
    {1, 1, 1, 4097, 4097, 128, 1, 1, TK_F16, 0},
    {1, 2, 2, 100, 300, 64, 0, 0, TK_BF16, 0},
    {1, 2, 2, 100, 300, 64, 1, 0, TK_BF16, 0},
    {1, 2, 2, 300, 100, 128, 1, 0, TK_F16, 0},
    {1, 2, 2, 300, 100, 128, 0, 1, TK_BF16, 0},
    {2, 8, 2, 129, 129, 64, 1, 0, TK_BF16, 0},
    {1, 8, 1, 77, 200, 128, 0, 1, TK_F16, 0},
    {3, 4, 2, 33, 1, 64, 0, 0, TK_BF16, 0},
    {1, 4, 2, 1, 33, 128, 1, 0, TK_BF16, 0},
    {1, 6, 3, 250, 250, 64, 1, 1, TK_F16, 0},
    {2, 2, 2, 512, 512, 128, 0, 0, TK_BF16, 0},
    {1, 1, 1, 2048, 31, 64, 1, 0, TK_BF16, 0},
    {1, 1, 1, 31, 2048, 64, 1, 0, TK_F16, 0},
    {4, 4, 4, 128, 128, 128, 1, 1, TK_BF16, 0},
    {1, 16, 4, 96, 96, 64, 0, 0, TK_BF16, 0},
    {2, 2, 1, 192, 191, 128, 0, 0, TK_F16, 0},
    {1, 3, 1, 1500, 700, 64, 1, 0, TK_BF16, 0},
    {1, 2, 2, 700, 1500, 128, 1, 1, TK_BF16, 0},
    {1, 1, 1, 16, 4097, 128, 0, 0, TK_BF16, 0},
    {2, 4, 4, 200, 200, 64, 1, 0, TK_F16, 0},
    {1, 2, 1, 333, 333, 128, 1, 0, TK_BF16, 0},
    {1, 2, 2, 64, 1, 64, 1, 0, TK_BF16, 0},
    {5, 1, 1, 40, 40, 128, 0, 1, TK_F16, 0},
    {1, 4, 4, 1024, 1024, 64, 0, 1, TK_BF16, 0},
    {1, 2, 2, 1024, 1024, 128, 1, 0, TK_F16, 0},
    /* D 256 */
    {1, 2, 2, 333, 333, 256, 1, 0, TK_BF16, 0},
    {2, 2, 1, 1000, 700, 256, 0, 1, TK_F16, 0},
    {1, 1, 1, 1, 129, 256, 1, 0, TK_BF16, 0},
    {1, 1, 1, 2049, 2049, 256, 0, 0, TK_BF16, 0},
    /* padded rows: 16-byte multiples (the copy engine maps them), then not
     * (the Hopper kernel's producer copies them on its fallback path) */
    {1, 2, 1, 200, 333, 64, 1, 0, TK_BF16, 8},
    {2, 2, 2, 129, 65, 128, 0, 1, TK_F16, 1},
    {1, 1, 1, 300, 300, 64, 1, 0, TK_BF16, 3},
};
#define N_ATTN (int)(sizeof attn_cases / sizeof *attn_cases)

static ref_tensor qkv(const acase *c, int64_t h, int64_t n, int poison) {
    int64_t d[4] = {c->b, h, n, c->d};
    static const int bnhd[4] = {0, 2, 1, 3};
    ref_tensor t = ref_tensor_new_layout(c->dt, 4, d, c->bnhd ? bnhd : NULL, c->pad);
    if (poison)
        ref_tensor_fill_all(&t, NAN);
    else
        ref_tensor_random(&t, -2, 2);
    return t;
}

static void copy_strides(int64_t *dst, const ref_tensor *t) {
    for (int i = 0; i < t->rank; i++) dst[i] = t->strides[i];
}

/* _i < N_ATTN: the mma.sync kernel; after that the Hopper kernel (sm_90a). */
START_TEST(attention_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    const acase *c = &attn_cases[_i % N_ATTN];
    const int kernel = _i < N_ATTN ? TK_ATTN_MMA_SYNC : TK_ATTN_WGMMA;
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    if (kernel == TK_ATTN_WGMMA && strcmp(arch, "sm_90a")) {
        if (_i == N_ATTN) printf("gpu attn wgmma skipped: the GPU is %s, it needs sm_90a\n", arch);
        return;
    }
    ref_tensor Q = qkv(c, c->hq, c->nq, 0), K = qkv(c, c->hkv, c->nkv, 0);
    ref_tensor V = qkv(c, c->hkv, c->nkv, 0), O = qkv(c, c->hq, c->nq, 1);
    int64_t ld[3] = {c->b, c->hq, c->nq};
    ref_tensor L = ref_tensor_new(TK_F32, 3, ld);
    ref_tensor_fill_all(&L, NAN);
    void *dq = th_upload(ctx, &Q), *dk = th_upload(ctx, &K), *dv = th_upload(ctx, &V);
    void *dO = th_upload(ctx, &O), *dl = th_upload(ctx, &L);
    ck_assert(dq && dk && dv && dO && dl);
    tk_attention_params p = {.struct_size = sizeof(tk_attention_params),
                             .dtype = c->dt,
                             .head_dim = c->d,
                             .causal = c->causal,
                             .batch = c->b,
                             .heads_q = c->hq,
                             .heads_kv = c->hkv,
                             .seq_q = c->nq,
                             .seq_kv = c->nkv,
                             .q = dq,
                             .k = dk,
                             .v = dv,
                             .o = dO,
                             .lse = dl,
                             .kernel = kernel};
    copy_strides(p.q_strides, &Q), copy_strides(p.k_strides, &K);
    copy_strides(p.v_strides, &V), copy_strides(p.o_strides, &O);
    copy_strides(p.lse_strides, &L);
    tk_status s = tk_attention_forward(ctx, &p, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_forward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, O.data, dO, (size_t)O.elems * 2), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, L.data, dl, (size_t)L.elems * 4), TK_OK);
    double *q = ref_tensor_to_f64(&Q), *k = ref_tensor_to_f64(&K), *v = ref_tensor_to_f64(&V);
    double *o = ref_tensor_to_f64(&O), *l = ref_tensor_to_f64(&L);
    int64_t no = ref_tensor_count(&O), nl = ref_tensor_count(&L);
    double *ro = malloc(sizeof(double) * (size_t)no), *rl = malloc(sizeof(double) * (size_t)nl);
    ref_attention(q, k, v, ro, rl, c->b, c->hq, c->hkv, c->nq, c->nkv, c->d,
                  1.0 / sqrt((double)c->d), c->causal);
    double eo = ref_rel_err(o, ro, no), el = ref_rel_err(l, rl, nl);
    printf("gpu attn %s B%lld Hq%lld Hkv%lld Nq%lld Nkv%lld D%d causal%d %s %s pad%d  O %.2e  "
           "L %.2e\n",
           kernel == TK_ATTN_WGMMA ? "wgmma" : "mma.sync", (long long)c->b, (long long)c->hq,
           (long long)c->hkv, (long long)c->nq, (long long)c->nkv, c->d, c->causal,
           c->bnhd ? "bnhd" : "bhnd", tk_dtype_name(c->dt), c->pad, eo, el);
    ck_assert_msg(eo <= 1e-2, "O rel err %g", eo);
    ck_assert_msg(el <= 1e-3, "L rel err %g", el);
    free(q), free(k), free(v), free(o), free(l), free(ro), free(rl);
    void *dev[5] = {dq, dk, dv, dO, dl};
    for (int i = 0; i < 5; i++) tk_gpu_free(ctx, dev[i]);
    ref_tensor_free(&Q), ref_tensor_free(&K), ref_tensor_free(&V), ref_tensor_free(&O);
    ref_tensor_free(&L);
}
END_TEST

/* ---- shape polymorphism and the disk cache -------------------------------- */
/* Runs 20 (B, H, N) triples through one context; returns the compiles and
 * disk loads seen, or -1 after printing why a call failed. Plain returns,
 * no ck_assert: the second process runs this outside any Check test. */
static int64_t run_triples(tk_ctx *c, tk_origin *first) {
    tk_cache_stats before, after;
    tk_cache_stats_get(c, &before);
    void *buf = NULL;
    size_t bytes = (size_t)4 * 8 * 300 * 64 * 2;
    tk_status s = tk_gpu_alloc(c, bytes, &buf);
    for (int i = 0; i < 20 && !s; i++) {
        int64_t b = 1 + i % 4, h = 1 + (i * 7) % 8, n = 1 + (i * 37) % 300;
        tk_attention_params p = tu_attention_params(TK_BF16, 64, h, h, n, buf);
        p.batch = b;
        if (i == 0) {
            tk_prepare_info info;
            if ((s = tk_attention_prepare(c, &p, &info))) break;
            *first = info.origin;
            printf("pid %d first call: %s in %.1f ms (%s)\n", (int)getpid(),
                   origin_name(info.origin), info.ms, info.arch);
        }
        s = tk_attention_forward(c, &p, NULL);
    }
    if (!s) s = tk_gpu_sync(c);
    if (buf) tk_gpu_free(c, buf);
    if (s) {
        printf("pid %d: %s: %s\n", (int)getpid(), tk_status_name(s), tk_ctx_error(c));
        return -1;
    }
    tk_cache_stats_get(c, &after);
    return (int64_t)((after.misses - before.misses) + (after.disk_hits - before.disk_hits));
}

START_TEST(one_kernel_serves_all_shapes) {
    if (th_gpu_or_skip(ctx)) return;
    tk_origin first;
    int64_t builds = run_triples(ctx, &first);
    ck_assert(first == TK_FROM_COMPILE || (kept_dir() && first == TK_FROM_DISK));
    ck_assert_msg(builds == 1, "%lld compiles/loads for 20 shapes", (long long)builds);
    fflush(stdout);
    /* A second process (exec'ed: CUDA does not survive fork), same cache.
     * This one lets go of the GPU first: the device may be in an
     * exclusive-process compute mode. */
    tk_ctx_destroy(ctx);
    ctx = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_gpu_kernels", "--second-process", cache_dir, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK); /* for teardown */
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second process did not load from disk");
}
END_TEST

/* The second process of one_kernel_serves_all_shapes. */
static int second_process(const char *dir) {
    tk_ctx *c;
    tk_origin o = TK_FROM_COMPILE;
    int ok = tk_ctx_create(&c) == TK_OK && tk_cache_set_dir(c, dir) == TK_OK;
    int64_t builds = ok ? run_triples(c, &o) : -1;
    printf("second process: %lld compiles/loads, origin %d\n", (long long)builds, (int)o);
    ok = builds == 1 && o == TK_FROM_DISK;
    tk_ctx_destroy(c);
    fflush(stdout);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--second-process")) return second_process(argv[2]);
    Suite *s = suite_create("gpu_kernels");
    TCase *tv = tcase_create("validation");
    tcase_add_checked_fixture(tv, setup, teardown);
    tcase_add_test(tv, attention_rejects_bad_params);
    tcase_add_test(tv, gemm_rejects_bad_params);
    suite_add_tcase(s, tv);
    TCase *tt = tcase_create("run_table"); /* which kernel tk_gemm runs (no launches) */
    tcase_add_checked_fixture(tt, setup, teardown);
    tcase_set_timeout(tt, 120);
    tcase_add_test(tt, gemm_choice_is_keyed);
    suite_add_tcase(s, tt);
    TCase *tg = tcase_create("gpu");
    tcase_add_checked_fixture(tg, setup, teardown);
    tcase_set_timeout(tg, 900);
    tcase_add_loop_test(tg, gemm_on_gpu, 0, (int)(sizeof gemm_shapes / sizeof *gemm_shapes));
    tcase_add_loop_test(tg, gemm_long_k_on_gpu, 0,
                        3 * (int)(sizeof gemm_long_shapes / sizeof *gemm_long_shapes));
    tcase_add_loop_test(tg, gemm_configs_on_gpu, 0,
                        (int)(sizeof gemm_alt_shapes / sizeof *gemm_alt_shapes));
    tcase_add_loop_test(tg, gemm_wgmma_on_gpu, 0, N_GEMM_SHAPES + N_LONG_SHAPES);
    tcase_add_test(tg, one_kernel_serves_all_shapes);
    suite_add_tcase(s, tg);
    TCase *ta = tcase_create("gpu_attention"); /* alone: CK_RUN_CASE=gpu_attention */
    tcase_add_checked_fixture(ta, setup, teardown);
    tcase_set_timeout(ta, 900);
    tcase_add_loop_test(ta, attention_on_gpu, 0, 2 * N_ATTN);
    suite_add_tcase(s, ta);
    TCase *tp = tcase_create("gpu_pairs"); /* alone: CK_RUN_CASE=gpu_pairs */
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_set_timeout(tp, 900);
    tcase_add_loop_test(tp, gemm_cluster_on_gpu, 0, N_GEMM_SHAPES + N_LONG_SHAPES);
    suite_add_tcase(s, tp);
    return run_suite(s);
}
