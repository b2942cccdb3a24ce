/* tk_gemm's split over K (tk_gemm_config.split_k, tk_gemm_params.workspace):
 * - "interp": on the interpreter backend, every kernel (mma.sync, wgmma's
 *   three shapes) split in 2..8 ranges, ragged M, N, K, transpose_a and
 *   transpose_b, with and without bias, accumulate, GELU (aux), DGELU, f32
 *   or 16-bit C, against float64; each call run twice with the same bits;
 *   the workspace holds the partials (it is written: the split ran);
 * - "checks": a workspace too small, misaligned or overlapping, split_k out
 *   of range or without a workspace, a config that disagrees; what
 *   tk_gemm_workspace answers; an old struct size; the choice of S as a
 *   pure function (GPT-2's weight gradients split, large or short-K
 *   products do not); a split-less kernel names nothing new;
 * - "gpu": GPT-2's weight gradients (T = 4096, 16384) with the library's
 *   choice, and ragged forced splits, every 16th row against float64, two
 *   runs bit-identical; skipped with one line without a GPU.
 *   CK_RUN_CASE=gpu build-device/test_gemm_splitk */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_parts.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/gemm_case.h"
#include "util/ref.h"

/* ---- One call, twice ------------------------------------------------------------ */
/* Runs the call from C's and Aux's first bytes (uploaded again: accumulate
 * reads C, DGELU Aux) and downloads C and Aux into h. */
static void run_once(tk_ctx *ctx, const tu_gemm_case *e, const tk_gemm_config *cfg, tu_gemm_host *h,
                     const tu_gemm_dev *d) {
    ck_assert_int_eq(tk_gpu_upload(ctx, d->c, h->before_c, tu_bytes_of(&h->c)), TK_OK);
    if (h->before_aux)
        ck_assert_int_eq(tk_gpu_upload(ctx, d->aux, h->before_aux, tu_bytes_of(&h->aux)), TK_OK);
    tu_gemm_case_run(ctx, e, cfg, h, d);
}

/* The workspace's floats were all written (partials, not its 0xff
 * poison): the split ran, and filled what tk_gemm_workspace asked for. */
static void expect_partials(tk_ctx *ctx, const tu_gemm_dev *d, const char *what) {
    float *w = malloc(d->ws_bytes);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(tk_gpu_download(ctx, w, d->ws, d->ws_bytes), TK_OK);
    size_t nan = 0;
    for (size_t i = 0; i < d->ws_bytes / 4; i++) nan += isnan(w[i]) != 0;
    ck_assert_msg(nan == 0, "%s: %zu of %zu partials unwritten", what, nan, d->ws_bytes / 4);
    free(w);
}

/* e on kernel `which` against float64 on every step-th row and the last,
 * run twice with the same bits; `pad`: elements after each row. */
static void check_call(tk_ctx *ctx, const tu_gemm_case *e, int which, int64_t step, int64_t pad) {
    tk_gemm_config cfg;
    const tk_gemm_config *c = tu_gemm_kernel_cfg(which, e, &cfg) ? &cfg : NULL;
    tu_gemm_host h;
    tu_gemm_host_make(e, pad, pad, &h);
    tu_gemm_dev d = tu_gemm_dev_in(ctx, e, &h);
    char what[160];
    tu_gemm_describe(what, sizeof what, e, which);
    tk_gemm_params q = tu_gemm_case_params(e, &h, &d, c);
    ck_assert_msg(tk_gemm_workspace(ctx, &q, &d.ws_bytes) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(d.ws_bytes > 0, "%s: no split", what);
    d.ws = tu_dev_bytes(ctx, d.ws_bytes);
    run_once(ctx, e, c, &h, &d);
    expect_partials(ctx, &d, what);
    void *c1 = ref_tensor_snapshot(&h.c), *x1 = h.before_aux ? ref_tensor_snapshot(&h.aux) : NULL;
    run_once(ctx, e, c, &h, &d);
    ck_assert_msg(!memcmp(c1, h.c.data, tu_bytes_of(&h.c)), "%s: C differs between runs", what);
    ck_assert_msg(!x1 || !memcmp(x1, h.aux.data, tu_bytes_of(&h.aux)), "%s: Aux differs", what);
    tu_gemm_dev_free(ctx, &d);
    tu_gemm_case_expect(what, e, &h, step);
    free(c1), free(x1);
    tu_gemm_host_free(&h);
}

/* ---- interp ------------------------------------------------------------------- */
/* {M, N, K, in, out, ta, tb, bias, act, aux, acc, in_place, S}, kernel */
static const struct {
    tu_gemm_case e;
    int kernel;
} interp_cases[] = {
    /* GPT-2's weight gradients in small: dW (+)= xᵀ·dy, f32 and bf16 */
    {{70, 90, 300, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 3}, TU_K_MMA},
    {{70, 90, 300, BF, BF, 1, 0, 0, NONE, 0, 0, 0, 2}, TU_K_MMA},
    {{150, 270, 300, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 4}, TU_K_WGMMA},
    {{150, 270, 260, BF, BF, 1, 0, 0, NONE, 0, 1, 0, 5}, TU_K_WGMMA},
    {{140, 130, 333, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 8}, TU_K_WGMMA_MID},
    {{70, 150, 200, HF, HF, 1, 0, 0, NONE, 0, 1, 0, 6}, TU_K_WGMMA_ONE},
    /* ragged, both transpositions, the epilogue in kernel 2 */
    {{65, 129, 97, HF, F32, 0, 1, 1, NONE, 0, 0, 0, 2}, TU_K_MMA_SMALL},
    {{33, 70, 250, BF, HF, 1, 1, 1, NONE, 0, 1, 0, 7}, TU_K_MMA_SMALL},
    {{77, 130, 190, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 3}, TU_K_MMA},
    {{129, 300, 150, BF, F32, 0, 0, 1, GELU, 1, 0, 0, 2}, TU_K_WGMMA},
    {{70, 80, 200, HF, HF, 0, 1, 0, DGELU, 1, 0, 0, 4}, TU_K_MMA},
    {{135, 270, 140, BF, HF, 0, 1, 0, DGELU, 1, 0, 0, 3}, TU_K_WGMMA},
    {{130, 150, 170, BF, BF, 1, 1, 1, NONE, 0, 1, 0, 2}, TU_K_WGMMA_MID},
    {{65, 129, 130, BF, BF, 1, 1, 0, GELU, 1, 0, 0, 8}, TU_K_WGMMA_ONE},
    /* more ranges than k-tiles hold: as many as there are */
    {{50, 60, 40, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 8}, TU_K_MMA_SMALL},
    /* split_k in the params, the library's block shape */
    {{100, 130, 270, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 4}, TU_K_AUTO},
    {{90, 70, 200, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 3}, TU_K_AUTO},
};
#define N_INTERP (int)(sizeof interp_cases / sizeof interp_cases[0])

START_TEST(interp_case) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    check_call(ctx, &interp_cases[_i].e, interp_cases[_i].kernel, 1, _i % 3 == 1 ? 8 : 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Fresh random options, sizes, S and kernel each run. */
START_TEST(interp_random) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    static const tk_dtype ins[2] = {BF, HF}, outs[3] = {BF, HF, F32};
    /* K of at least 3 k-tiles (block_k is 64 at most here): fewer leaves nothing to split */
    tu_gemm_case e = {
        .M = ref_randint(1, 160), .N = ref_randint(1, 280), .K = ref_randint(130, 300)};
    e.in = ins[ref_randint(0, 1)], e.out = outs[ref_randint(0, 2)];
    e.ta = (int)ref_randint(0, 1), e.tb = (int)ref_randint(0, 1);
    e.act = (int)ref_randint(0, 2), e.acc = e.act ? 0 : (int)ref_randint(0, 1);
    e.bias = e.act == DGELU ? 0 : (int)ref_randint(0, 1), e.S = (int)ref_randint(2, 8);
    e.aux = e.act != NONE; /* a split activation always keeps Aux */
    check_call(ctx, &e, (int)ref_randint(TU_K_MMA, TU_K_WGMMA_ONE), 1, ref_randint(0, 1) * 8);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's own split (split_k 0, a workspace) on an A100 and an H100
 * context: a long K with few tiles splits. */
START_TEST(interp_auto) {
    static const char *const archs[2] = {"sm_80", "sm_90a"};
    tk_ctx *ctx = tu_interp_ctx(archs[_i], _i ? 132 : 108);
    tu_gemm_case dw = {128, 128, 2048, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0};
    check_call(ctx, &dw, TU_K_AUTO, 7, 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- checks ------------------------------------------------------------------- */
typedef struct bufs {
    void *a, *b, *c, *ws;
} bufs;

enum { CM = 64, CN = 64, CK = 1024 }; /* a call that splits */

static bufs make_bufs(tk_ctx *ctx) {
    return (bufs){tu_dev_bytes(ctx, CM * CK * 2), tu_dev_bytes(ctx, CK * CN * 2),
                  tu_dev_bytes(ctx, CM * CN * 4), tu_dev_bytes(ctx, 8 * CM * CN * 4)};
}

static tk_gemm_params base_params(const bufs *d) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = F32, p.transpose_a = 1, p.m = CM, p.n = CN, p.k = CK;
    p.a = d->a, p.b = d->b, p.c = d->c, p.workspace = d->ws, p.workspace_bytes = 8 * CM * CN * 4;
    return p;
}

static size_t ws_of(tk_ctx *ctx, tk_gemm_params p) {
    size_t b = 1;
    ck_assert_msg(tk_gemm_workspace(ctx, &p, &b) == TK_OK, "%s", tk_ctx_error(ctx));
    return b;
}

START_TEST(rejects_bad_workspace) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    p.split_k = 4;
    ck_assert_uint_eq(ws_of(ctx, p), 4 * CM * CN * 4);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, NULL), TK_OK);
    p.workspace_bytes = 4 * CM * CN * 4 - 1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "needs a workspace of 65536 bytes");
    p = base_params(&d), p.split_k = 4, p.workspace = (char *)d.ws + 4;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "not 16-byte aligned");
    p = base_params(&d), p.split_k = 4, p.workspace = d.c;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG,
                       "the split writes its partials to the workspace");
    p = base_params(&d), p.split_k = 4, p.workspace = NULL;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k 4 needs a workspace");
    p = base_params(&d), p.split_k = 65,
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k is 65");
    p.split_k = -1, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "split_k is -1");
    tk_ctx_destroy(ctx);
}
END_TEST

/* A caller's config decides the split; the params' split_k may only repeat
 * it. tk_gemm_build refuses bad split fields. */
START_TEST(config_split) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    tk_gemm_config c = tk_gemm_default_config(BF, F32, 0);
    c.transpose_a = 1, c.split_k = 3, p.config = &c;
    ck_assert_uint_eq(ws_of(ctx, p), 3 * CM * CN * 4);
    p.split_k = 3;
    ck_assert_uint_eq(ws_of(ctx, p), 3 * CM * CN * 4);
    p.split_k = 2,
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "config has split_k 3; the params ask");
    c.split_k = 0, p.split_k = 0;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    c.split_k = 2, c.split_reduce = 1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "config has split_reduce 1");
    static const struct {
        int split_k, split_reduce;
        const char *frag;
    } bad[] = {{65, 0, "tk_gemm_build: split_k is 65"},
               {0, 1, "tk_gemm_build: split_reduce with split_k 0"},
               {2, 2, "tk_gemm_build: split_reduce is 2"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_gemm_config b = tk_gemm_default_config(BF, F32, 1);
        b.split_k = bad[i].split_k, b.split_reduce = bad[i].split_reduce;
        tu_gemm_expect_build_err(ctx, &b, bad[i].frag);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* What tk_gemm_workspace answers: the choice's S·M·N·4 with or without a
 * workspace in p; 0 for split_k 1, a short K or a large product. An older
 * struct (ending before workspace) never splits. */
START_TEST(workspace_sizes) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    size_t auto_b = ws_of(ctx, p);
    ck_assert_uint_gt(auto_b, 0);
    ck_assert_uint_eq(auto_b % (CM * CN * 4), 0);
    p.workspace = NULL;
    ck_assert_uint_eq(ws_of(ctx, p), auto_b);
    p.split_k = 1;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    p.split_k = 5; /* 16 k-tiles: 4 ranges of 4 */
    ck_assert_uint_eq(ws_of(ctx, p), 4 * CM * CN * 4);
    p.split_k = 8;
    ck_assert_uint_eq(ws_of(ctx, p), 8 * CM * CN * 4);
    p.k = 64; /* one k-tile: nothing to split */
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    p = base_params(&d), p.m = p.n = 4096, p.k = 4096, p.transpose_a = 0;
    ck_assert_uint_eq(ws_of(ctx, p), 0);
    /* a workspace too small, which a struct ending before it never shows */
    p = base_params(&d), p.split_k = 4, p.workspace_bytes = 1;
    p.struct_size = offsetof(tk_gemm_params, workspace);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, NULL), TK_OK);
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").split_k, 0);
    p.struct_size = sizeof p;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "needs a workspace of");
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_gemm_split_choose as a pure function of sizes and GPU. */
static tk_gemm_config choose_for(const char *arch, int sms, int64_t m, int64_t n, int64_t k,
                                 int want) {
    tk_target_caps caps;
    ck_assert_int_eq(tk_target_caps_get(NULL, arch, &caps), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, F32, 0, m, n, arch);
    c.transpose_a = 1;
    tk_gemm_target t = {&caps, sms, true};
    tk_gemm_config r = tk_gemm_split_choose(&c, m, n, k, want, &t);
    ck_assert_int_eq(r.transpose_a, 1); /* the call's own fields stay */
    ck_assert_int_eq(r.split_reduce, 0);
    return r;
}

START_TEST(choice_pure) {
    /* GPT-2 124M's weight gradients at 16k tokens on an H100: split, wgmma */
    static const int64_t dw[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
    for (int i = 0; i < 4; i++) {
        tk_gemm_config c = choose_for("sm_90a", 132, dw[i][0], dw[i][1], 16384, 0);
        printf("dW %lldx%lldx16384: %dx%dx%d w%d s%d%s, split_k %d\n", (long long)dw[i][0],
               (long long)dw[i][1], c.block_m, c.block_n, c.block_k, c.warps, c.stages,
               c.wgmma ? " wgmma" : "", c.split_k);
        ck_assert_int_ge(c.split_k, 2);
        ck_assert_int_le(c.split_k, TK_GEMM_MAX_SPLIT);
        ck_assert_int_eq(c.wgmma, 1);
        tk_gemm_config again = choose_for("sm_90a", 132, dw[i][0], dw[i][1], 16384, 0);
        ck_assert_int_eq(memcmp(&c, &again, sizeof c), 0);
    }
    /* skinny M on an H100 (the `splits` table of 2026-12-07): one warpgroup's 64x128
     * blocks, split where M leaves the SMs idle (M 16-128: S 2-4 measured best), not at
     * M 256 (128 tiles: S 1 measured best) */
    static const int64_t sk[][2] = {{16, 4}, {64, 4}, {128, 2}, {256, 0}};
    for (int i = 0; i < 4; i++) {
        tk_gemm_config c = choose_for("sm_90a", 132, sk[i][0], 4096, 4096, 0);
        printf("skinny %lldx4096x4096: %dx%dx%d w%d s%d%s, split_k %d\n", (long long)sk[i][0],
               c.block_m, c.block_n, c.block_k, c.warps, c.stages, c.wgmma ? " wgmma" : "",
               c.split_k);
        ck_assert(c.block_m == 64 && c.block_n == 128 && c.warps == 4 && c.wgmma == 1);
        ck_assert_int_eq(c.split_k, sk[i][1]);
    }
    /* on an A100 too, on mma.sync */
    tk_gemm_config a = choose_for("sm_80", 108, 768, 768, 16384, 0);
    ck_assert_int_ge(a.split_k, 2);
    ck_assert_int_eq(a.wgmma, 0);
    /* no split: many tiles, or a short K */
    ck_assert_int_eq(choose_for("sm_90a", 132, 4096, 4096, 4096, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 16384, 3072, 768, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 64, 64, 64, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_80", 108, 8192, 8192, 8192, 0).split_k, 0);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 16384, 1).split_k, 0);
    /* more SMs, more ranges (never fewer) */
    ck_assert_int_ge(choose_for("sm_90a", 264, 768, 768, 16384, 0).split_k,
                     choose_for("sm_90a", 132, 768, 768, 16384, 0).split_k);
    /* a count asked for: kept, or as many ranges as the k-tiles allow */
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 16384, 6).split_k, 6);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 100, 4).split_k, 2);
    ck_assert_int_eq(choose_for("sm_90a", 132, 768, 768, 64, 4).split_k, 0);
    /* ranges: equal lengths, none empty */
    ck_assert_int_eq(tk_gemm_split_ranges(16384, 64, 3), 3);
    ck_assert_int_eq(tk_gemm_split_ranges(5 * 64, 64, 4), 3); /* 2 + 2 + 1 k-tiles */
    ck_assert_int_eq(tk_gemm_split_ranges(5 * 64, 64, 8), 5);
    ck_assert_int_eq(tk_gemm_split_ranges(64, 64, 8), 1);
    ck_assert_int_eq(tk_gemm_split_ranges(1000, 64, 1), 1);
    /* tk_gemm_config_for_call plans for 132 SMs, and only with a workspace */
    static char buf[256] __attribute__((aligned(256)));
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = F32, p.transpose_a = 1, p.m = 768, p.n = 768, p.k = 16384;
    p.a = p.b = p.c = buf;
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").split_k, 0);
    p.workspace = buf;
    tk_gemm_config fc = tk_gemm_config_for_call(&p, "sm_90a");
    tk_gemm_config pc = choose_for("sm_90a", 132, 768, 768, 16384, 0);
    ck_assert_int_eq(memcmp(&fc, &pc, sizeof fc), 0);
}
END_TEST

/* Kernel 1 names the split (P, a spec); without it, nothing new. */
START_TEST(kernels_named) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, BF, 0, 8192, 8192, "sm_90a");
    for (int opt = 0; opt < 3; opt++) {
        c.split_k = opt ? 4 : 0, c.split_reduce = opt == 2, c.bias = opt == 2;
        tk_kernel *k;
        ck_assert_msg(tk_gemm_build(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        char *txt;
        ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
        ck_assert_int_eq(!strstr(txt, "split"), !opt);
        ck_assert_int_eq(!strstr(txt, "param P: f32 tensor rank 3"), !opt);
        if (opt == 1) ck_assert_ptr_nonnull(strstr(tk_kernel_name(k), "_f32_")); /* P is f32 */
        if (opt == 2) ck_assert_ptr_nonnull(strstr(tk_kernel_name(k), "reduce_bf16_bias"));
        tk_free(txt);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- gpu ---------------------------------------------------------------------- */
/* GPT-2 124M's weight gradients (D 768, qkv 2304, fc 3072) with the
 * library's split at T 16384 and forced at T 4096, then forced ragged ones. */
static const struct {
    tu_gemm_case e;
    int kernel;
} gpu_cases[] = {
    {{768, 2304, 16384, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_AUTO},
    {{768, 768, 16384, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_AUTO},
    {{768, 3072, 16384, BF, BF, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_AUTO},
    {{3072, 768, 16384, BF, BF, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_AUTO},
    /* at T 4096 the library does not split (too few k-tiles to pay, as
     * measured on the H100); forced, on its choice of block */
    {{768, 2304, 4096, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 2}, TU_K_AUTO},
    {{768, 768, 4096, BF, BF, 1, 0, 0, NONE, 0, 1, 0, 3}, TU_K_AUTO},
    {{1000, 777, 5000, BF, F32, 1, 0, 1, NONE, 0, 1, 0, 3}, TU_K_MMA},
    {{1000, 777, 5000, BF, F32, 1, 0, 1, NONE, 0, 1, 0, 5}, TU_K_WGMMA},
    {{1000, 777, 5000, HF, HF, 1, 1, 0, NONE, 0, 1, 0, 4}, TU_K_WGMMA_MID},
    {{513, 1025, 3000, BF, BF, 0, 1, 0, DGELU, 1, 0, 0, 3}, TU_K_WGMMA},
    {{513, 1025, 3000, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 2}, TU_K_WGMMA},
    {{333, 555, 7777, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 8}, TU_K_WGMMA_ONE},
};
#define N_GPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

START_TEST(gpu_case) {
    int which = gpu_cases[_i].kernel;
    tk_ctx *gctx = tu_gemm_gpu(_i, which);
    if (gctx) check_call(gctx, &gpu_cases[_i].e, which, 16, _i % 4 == 3 ? 8 : 0);
}
END_TEST

int main(void) {
    const TTest *checks[] = {rejects_bad_workspace, config_split, workspace_sizes, choice_pure,
                             kernels_named};
    TCase *tc[TU_TC_COUNT];
    Suite *s =
        tu_gemm_suite("gemm_splitk", "gemm-splitk", checks, sizeof checks / sizeof *checks, tc);
    if (!s) return EXIT_FAILURE;
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_case, 0, N_INTERP);
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_random, 0, 3);
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_auto, 0, 2);
    tcase_add_loop_test(tc[TU_TC_GPU], gpu_case, 0, N_GPU);
    return tu_gemm_suite_run(s);
}
