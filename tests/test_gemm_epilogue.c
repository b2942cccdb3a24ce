/* tk_gemm's epilogues and A's layout (tk_gemm_config's transpose_a, bias,
 * act, aux, accumulate) through the public entry point, against float64:
 * - "interp": on the interpreter backend (tk_ctx_set_backend), on both
 *   kernels (mma.sync: sm_80's choice and a small block; wgmma: sm_90a's
 *   three shapes), each option alone, combined, transpose_a x transpose_b,
 *   ragged M, N, K, bf16/f16 in, bf16/f16/f32 out; fresh random inputs,
 *   outputs NaN-poisoned (an element never written fails), rows padded
 *   (gaps that must stay untouched); DGELU in place; random combinations;
 * - "checks": bad input gets a status and a message naming it, from the
 *   run and the build entry points; old struct sizes; the block shape the
 *   library picks does not depend on the new fields;
 * - "gpu": GPT-2-sized calls (T = 4096 tokens) and ragged ones on device
 *   buffers, the library's choice and forced kernels, every 16th row
 *   checked; skipped with one line without a GPU.
 *   CK_RUN_CASE=gpu build-device/test_gemm_epilogue */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/gemm_case.h"
#include "util/ref.h"

/* ---- One call ------------------------------------------------------------------ */
/* The call e on kernel `which` against float64: C (and GELU's Aux) on
 * every step-th row and the last; pad: elements after each row (Aux's 8
 * more: its own pitch). */
static void check_call(tk_ctx *ctx, const tu_gemm_case *e, int which, int64_t step, int64_t pad) {
    tk_gemm_config cfg;
    bool forced = tu_gemm_kernel_cfg(which, e, &cfg);
    tu_gemm_host h;
    tu_gemm_host_make(e, pad, pad + 8, &h);
    tu_gemm_dev d = tu_gemm_dev_in(ctx, e, &h);
    tu_gemm_case_run(ctx, e, forced ? &cfg : NULL, &h, &d);
    tu_gemm_dev_free(ctx, &d);
    char what[160];
    tu_gemm_describe(what, sizeof what, e, which);
    tu_gemm_case_expect(what, e, &h, step);
    tu_gemm_host_free(&h);
}

/* ---- interp ------------------------------------------------------------------- */
/* {M, N, K, in, out, ta, tb, bias, act, aux, acc, in_place, S}, kernel */
static const struct {
    tu_gemm_case e;
    int kernel;
} interp_cases[] = {
    /* each option alone, on mma.sync and on wgmma (two warpgroups, producer) */
    {{70, 50, 40, BF, BF, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_MMA},
    {{100, 90, 72, HF, HF, 0, 0, 1, NONE, 0, 0, 0, 0}, TU_K_MMA},
    {{77, 130, 48, BF, BF, 0, 0, 0, GELU, 0, 0, 0, 0}, TU_K_MMA},
    {{65, 70, 33, BF, F32, 0, 0, 0, GELU, 1, 0, 0, 0}, TU_K_MMA},
    {{90, 60, 100, BF, F32, 0, 0, 0, NONE, 0, 1, 0, 0}, TU_K_MMA},
    {{50, 129, 40, BF, BF, 0, 0, 0, NONE, 0, 1, 0, 0}, TU_K_MMA},
    {{70, 80, 64, HF, HF, 0, 0, 0, DGELU, 1, 0, 0, 0}, TU_K_MMA},
    {{150, 300, 72, BF, BF, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA},
    {{140, 270, 40, HF, HF, 0, 0, 1, NONE, 0, 0, 0, 0}, TU_K_WGMMA},
    {{130, 260, 70, BF, BF, 0, 0, 0, GELU, 0, 0, 0, 0}, TU_K_WGMMA},
    {{129, 300, 50, BF, F32, 0, 0, 0, GELU, 1, 0, 0, 0}, TU_K_WGMMA},
    {{150, 257, 90, HF, F32, 0, 0, 0, NONE, 0, 1, 0, 0}, TU_K_WGMMA},
    {{140, 280, 33, BF, BF, 0, 0, 0, NONE, 0, 1, 0, 0}, TU_K_WGMMA},
    {{135, 270, 64, BF, HF, 0, 0, 0, DGELU, 1, 0, 0, 0}, TU_K_WGMMA},
    /* transpose_a x transpose_b on every kernel */
    {{70, 90, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_MMA},
    {{33, 70, 65, HF, F32, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_MMA_SMALL},
    {{80, 33, 90, BF, HF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_MMA_SMALL},
    {{150, 260, 80, HF, HF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA},
    {{140, 130, 100, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA_MID},
    {{130, 150, 70, BF, BF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA_MID},
    {{70, 150, 90, HF, HF, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA_ONE},
    {{65, 129, 33, BF, BF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA_ONE},
    /* combined: GPT-2's fc forward, its backward (in place), dW, a residual */
    {{90, 70, 60, BF, BF, 1, 1, 1, GELU, 1, 0, 0, 0}, TU_K_MMA},
    {{150, 270, 70, BF, BF, 1, 1, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA},
    {{70, 130, 100, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA_MID},
    {{80, 70, 150, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_MMA_SMALL},
    {{140, 140, 150, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_WGMMA_MID},
    {{70, 90, 64, BF, BF, 0, 1, 0, DGELU, 1, 0, 1, 0}, TU_K_MMA},
    {{140, 270, 64, HF, HF, 0, 1, 0, DGELU, 1, 0, 1, 0}, TU_K_WGMMA},
    {{70, 150, 40, BF, BF, 0, 0, 1, NONE, 0, 1, 0, 0}, TU_K_WGMMA_ONE},
    {{60, 90, 50, HF, F32, 1, 1, 1, NONE, 0, 1, 0, 0}, TU_K_MMA},
    {{70, 100, 60, HF, F32, 0, 0, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA_ONE},
};
#define N_INTERP (int)(sizeof interp_cases / sizeof interp_cases[0])

START_TEST(interp_case) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    check_call(ctx, &interp_cases[_i].e, interp_cases[_i].kernel, 1,
               _i % 3 == 2 ? 3 : 8 * (_i % 2));
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's choice on an A100 (sm_80) and an H100 (sm_90a) context. */
START_TEST(interp_auto) {
    static const char *const archs[2] = {"sm_80", "sm_90a"};
    tk_ctx *ctx = tu_interp_ctx(archs[_i], _i ? 132 : 108);
    tu_gemm_case fc = {100, 130, 70, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 0};
    tu_gemm_case dw = {70, 90, 130, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0};
    check_call(ctx, &fc, TU_K_AUTO, 1, 0);
    check_call(ctx, &dw, TU_K_AUTO, 1, 0);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Fresh random options, shapes, dtypes and kernel each run. */
START_TEST(interp_random) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    static const tk_dtype ins[2] = {BF, HF}, outs[3] = {BF, HF, F32};
    tu_gemm_case e = {.M = ref_randint(1, 200), .N = ref_randint(1, 280), .K = ref_randint(1, 200)};
    e.in = ins[ref_randint(0, 1)], e.out = outs[ref_randint(0, 2)];
    e.ta = (int)ref_randint(0, 1), e.tb = (int)ref_randint(0, 1);
    e.act = (int)ref_randint(0, 2), e.acc = e.act ? 0 : (int)ref_randint(0, 1);
    e.bias = e.act == DGELU ? 0 : (int)ref_randint(0, 1);
    e.aux = e.act == DGELU ? 1 : e.act == GELU ? (int)ref_randint(0, 1) : 0;
    e.in_place = e.act == DGELU ? (int)ref_randint(0, 1) : 0;
    check_call(ctx, &e, (int)ref_randint(TU_K_MMA, TU_K_WGMMA_ONE), 1, ref_randint(0, 1) * 8);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- checks ------------------------------------------------------------------- */
typedef struct bufs {
    void *a, *b, *c, *bias, *aux;
} bufs;

static tk_gemm_params base_params(const bufs *d) {
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = BF, p.out_dtype = BF, p.m = 64, p.n = 64, p.k = 64;
    p.a = d->a, p.b = d->b, p.c = d->c;
    return p;
}

static void expect_ok(tk_ctx *ctx, tk_gemm_params p) {
    ck_assert_msg(tk_gemm_prepare(ctx, &p, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
}

static bufs make_bufs(tk_ctx *ctx) {
    bufs d;
    void **all[5] = {&d.a, &d.b, &d.c, &d.bias, &d.aux};
    for (int i = 0; i < 5; i++) *all[i] = tu_dev_bytes(ctx, 64 * 64 * 4);
    return d;
}

START_TEST(rejects_bad_input) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    expect_ok(ctx, p);
    p.transpose_a = 2, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "transpose_a is 2");
    p = base_params(&d), p.act = 3, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "act is 3");
    p = base_params(&d), p.accumulate = -1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate is -1");
    p = base_params(&d), p.aux = d.aux;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "aux without an activation");
    p = base_params(&d), p.act = DGELU;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU multiplies by gelu'(aux)");
    p.aux = d.aux, p.bias = d.bias;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU takes no bias");
    p = base_params(&d), p.act = GELU, p.accumulate = 1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate with act GELU");
    /* aliasing: what is written must not overlap what any block reads */
    p = base_params(&d), p.accumulate = 1, p.c = d.a;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "accumulate reads and writes c");
    p = base_params(&d), p.accumulate = 1, p.bias = (char *)d.c + 64 * 64 * 2 - 2;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "overlaps bias");
    p = base_params(&d), p.act = GELU, p.aux = (char *)d.c + 16;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "GELU writes aux and c");
    p.aux = d.b, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "GELU writes aux: aux [");
    p = base_params(&d), p.act = DGELU, p.aux = (char *)d.c + 4;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "DGELU reads aux");
    p.aux = d.c, p.ldaux = 80, p.ldc = 64;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "in place only as aux == c, ldaux == ldc");
    p.ldaux = 64, expect_ok(ctx, p); /* in place: the forward's h becomes dh */
    /* alignment, pitches */
    p = base_params(&d), p.bias = (char *)d.bias + 1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "is not aligned to its 2-byte elements");
    p = base_params(&d), p.act = GELU, p.aux = (char *)d.aux + 1;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "aux");
    p.aux = d.aux, p.ldaux = 63, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "ldaux 63 < n 64");
    p = base_params(&d), p.transpose_a = 1, p.m = 70, p.lda = 64;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "lda 64 < m 70");
    tk_ctx_destroy(ctx);
}
END_TEST

/* A caller's config must name the call's options; tk_gemm_build refuses
 * the same bad combinations with the same words. */
START_TEST(config_must_match) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    tk_gemm_config c = tk_gemm_default_config(BF, BF, 0);
    p.transpose_a = 1, p.config = &c;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG,
                       "config has transpose_a 0, bias 0, act 0, aux 0, "
                       "accumulate 0; the params ask for 1, 0, 0, 0, 0");
    c.transpose_a = 1, expect_ok(ctx, p);
    c.bias = 1, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "the params ask for 1, 0, 0, 0, 0");
    p.bias = d.bias, expect_ok(ctx, p);
    c.act = GELU, c.aux = 1, p.act = GELU, p.aux = d.aux, expect_ok(ctx, p);
    p.aux = NULL, tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG,
                                     "config has transpose_a 1, bias 1, act 1, "
                                     "aux 1");
    static const struct {
        int ta, bias, act, aux, acc;
        const char *frag;
    } bad[] = {
        {3, 0, 0, 0, 0, "tk_gemm_build: transpose_a is 3"},
        {0, 0, 7, 0, 0, "tk_gemm_build: act is 7"},
        {0, 0, 0, 1, 0, "tk_gemm_build: aux without an activation"},
        {0, 0, DGELU, 0, 0, "tk_gemm_build: act DGELU multiplies"},
        {0, 1, DGELU, 1, 0, "tk_gemm_build: act DGELU takes no bias"},
        {0, 0, GELU, 0, 1, "tk_gemm_build: accumulate with act GELU"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_gemm_config b = tk_gemm_default_config(BF, F32, 1);
        b.transpose_a = bad[i].ta, b.bias = bad[i].bias, b.act = bad[i].act, b.aux = bad[i].aux;
        b.accumulate = bad[i].acc;
        tu_gemm_expect_build_err(ctx, &b, bad[i].frag);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* A struct that ends before the new fields (a caller built before them)
 * reads them as 0, whatever lies past its size. */
START_TEST(old_struct_sizes) {
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    bufs d = make_bufs(ctx);
    tk_gemm_params p = base_params(&d);
    p.transpose_a = 9, p.act = 9, p.bias = (char *)d.bias + 1;
    p.struct_size = offsetof(tk_gemm_params, transpose_a);
    expect_ok(ctx, p);
    ck_assert_int_eq(tk_gemm_config_for_call(&p, "sm_90a").transpose_a, 0);
    p.struct_size = sizeof p;
    tu_gemm_expect_err(ctx, p, TK_ERR_INVALID_ARG, "transpose_a is 9");
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_gemm_config_for_call picks the same block shape with and without the
 * new fields (which it copies into the config); tk_gemm_config_for and
 * tk_gemm_default_config leave them 0. */
START_TEST(choice_ignores_epilogue) {
    static const int64_t sizes[][2] = {{64, 64},    {1024, 1024},  {512, 4096}, {8192, 8192},
                                       {768, 3072}, {16384, 2304}, {3072, 768}};
    static const char *const archs[] = {"sm_80", "sm_90", "sm_90a", NULL};
    static char buf[256] __attribute__((aligned(256)));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
            tk_gemm_params p = TK_GEMM_PARAMS_INIT;
            p.in_dtype = BF, p.out_dtype = F32, p.m = sizes[s][0], p.n = sizes[s][1], p.k = 768;
            p.a = p.b = p.c = buf;
            tk_gemm_config plain = tk_gemm_config_for_call(&p, archs[a]);
            tk_gemm_config cf = tk_gemm_config_for(BF, F32, 0, p.m, p.n, archs[a]);
            p.transpose_a = 1, p.bias = buf, p.act = GELU, p.aux = buf;
            tk_gemm_config ep = tk_gemm_config_for_call(&p, archs[a]);
            ck_assert_int_eq(ep.transpose_a + ep.bias + ep.act + ep.aux, 4);
            ep.transpose_a = ep.bias = ep.act = ep.aux = 0;
            ck_assert_int_eq(memcmp(&ep, &plain, sizeof ep), 0);
            ck_assert_int_eq(memcmp(&cf, &plain, sizeof cf), 0);
        }
    tk_gemm_config d = tk_gemm_default_config(BF, BF, 1);
    ck_assert_int_eq(d.transpose_a | d.bias | d.act | d.aux | d.accumulate, 0);
}
END_TEST

/* A plain GEMM's kernel names no new spec or parameter; one with options
 * names each, and takes bias and Aux after C (wgmma: blocks last). */
START_TEST(plain_kernel_unchanged) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_gemm_config c = tk_gemm_config_for(BF, BF, 0, 8192, 8192, "sm_90a");
    for (int opt = 0; opt < 2; opt++) {
        if (opt) c.transpose_a = 1, c.bias = 1, c.act = GELU, c.aux = 1;
        tk_kernel *k;
        ck_assert_msg(tk_gemm_build(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        char *txt;
        ck_assert_int_eq(tk_kernel_print(k, &txt), TK_OK);
        static const char *const words[] = {"transpose_a", "bias", "act", "aux", "Aux"};
        for (int w = 0; w < 5; w++)
            ck_assert_msg(!strstr(txt, words[w]) == !opt, "%s in %s", words[w], tk_kernel_name(k));
        ck_assert_int_eq(!strstr(tk_kernel_name(k), "_atb_"), !opt);
        tk_free(txt);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- gpu ---------------------------------------------------------------------- */
/* GPT-2 124M's training GEMMs at T = 4096 tokens (D 768, 4D 3072, qkv
 * 2304) with the library's choice, then ragged calls on forced kernels. */
static const struct {
    tu_gemm_case e;
    int kernel;
} gpu_cases[] = {
    {{4096, 2304, 768, BF, BF, 0, 0, 1, NONE, 0, 0, 0, 0}, TU_K_AUTO}, /* qkv = x·W + b */
    {{4096, 3072, 768, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 0}, TU_K_AUTO}, /* fc, h kept */
    {{4096, 768, 3072, BF, BF, 0, 0, 1, NONE, 0, 0, 0, 0}, TU_K_AUTO}, /* fc proj */
    {{4096, 3072, 768, BF, BF, 0, 1, 0, DGELU, 1, 0, 0, 0}, TU_K_AUTO}, /* dh = (dy·Wᵀ)·gelu'(h) */
    {{4096, 3072, 768, BF, BF, 0, 1, 0, DGELU, 1, 0, 1, 0}, TU_K_AUTO}, /* the same, in place */
    {{768, 3072, 4096, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_AUTO}, /* dW += xᵀ·dy, f32 */
    {{3072, 768, 4096, BF, BF, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_AUTO},  /* dW += hᵀ·dy, bf16 */
    {{768, 2304, 4096, BF, F32, 1, 0, 0, NONE, 0, 0, 0, 0}, TU_K_AUTO}, /* dW = xᵀ·dy */
    {{4096, 768, 768, BF, BF, 0, 0, 1, NONE, 0, 1, 0, 0}, TU_K_AUTO},   /* x += y·W + b */
    {{4096, 3072, 768, HF, HF, 1, 1, 1, GELU, 1, 0, 0, 0}, TU_K_AUTO},
    /* ragged, every kernel */
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0, 0}, TU_K_MMA},
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA},
    {{1000, 777, 520, BF, BF, 1, 0, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA_MID},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0, 0}, TU_K_MMA_SMALL},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0, 0}, TU_K_WGMMA},
    {{1000, 777, 520, HF, F32, 1, 1, 1, NONE, 0, 1, 0, 0}, TU_K_WGMMA_ONE},
    {{513, 1025, 200, BF, HF, 0, 1, 0, DGELU, 1, 0, 0, 0}, TU_K_MMA},
    {{513, 1025, 200, BF, HF, 0, 1, 0, DGELU, 1, 0, 0, 0}, TU_K_WGMMA},
    {{2050, 1030, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA},
    {{2050, 1030, 100, BF, BF, 1, 1, 0, NONE, 0, 0, 0, 0}, TU_K_WGMMA_MID},
    {{2048, 2048, 2048, BF, BF, 0, 0, 1, GELU, 1, 0, 0, 0}, TU_K_WGMMA},
    {{2048, 2048, 2048, BF, F32, 1, 0, 0, NONE, 0, 1, 0, 0}, TU_K_WGMMA_MID},
};
#define N_GPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

START_TEST(gpu_case) {
    int which = gpu_cases[_i].kernel;
    tk_ctx *gctx = tu_gemm_gpu(_i, which);
    if (gctx) check_call(gctx, &gpu_cases[_i].e, which, 16, _i % 4 == 3 ? 8 : 0);
}
END_TEST

int main(void) {
    const TTest *checks[] = {rejects_bad_input, config_must_match, old_struct_sizes,
                             choice_ignores_epilogue, plain_kernel_unchanged};
    TCase *tc[TU_TC_COUNT];
    Suite *s =
        tu_gemm_suite("gemm_epilogue", "gemm-epilogue", checks, sizeof checks / sizeof *checks, tc);
    if (!s) return EXIT_FAILURE;
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_case, 0, N_INTERP);
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_auto, 0, 2);
    tcase_add_loop_test(tc[TU_TC_INTERP], interp_random, 0, 3);
    tcase_add_loop_test(tc[TU_TC_GPU], gpu_case, 0, N_GPU);
    return tu_gemm_suite_run(s);
}
