/* Lowering tests (jit/lower.h): every op family and every ready-made kernel
 * lowers to a module that LLVM verifies, to PTX for sm_80 and sm_90a that
 * ptxas assembles, and the GEMM without spills. On a GPU machine the op
 * kernels (tests/util/fixture_ops.c, fixture_copy.c) also run against the interpreter
 * (memory paths: every shared layout, sync/async/engine copies, strided and
 * ragged views; control flow; a warp-specialized k-loop). Without ptxas or
 * a GPU those parts skip with one line. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/lower.h"
#include "jit/plan.h"
#include "ops/erf.h"
#include "ops/trig.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/fixture_ops.h"
#include "util/harness.h"
#include "util/lowers.h"
#include "util/run.h"

/* ---- tests --------------------------------------------------------------- */
START_TEST(op_lowers) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = tu_op_kernel(ctx, tu_op_fixtures[_i / 2].build, _i % 2 ? TK_F16 : TK_BF16);
    tu_check_lowers(k);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Every fixture runs on the interpreter, race checker on, here too: the GPU
 * comparison below starts with this run, and CI has no GPU to reach it. */
START_TEST(op_runs_on_the_interpreter) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const tu_op_fixture *c = &tu_op_fixtures[_i / 2];
    ref_tensor ts[TU_OP_MAX_ARGS] = {0};
    tk_arg sc[TU_OP_MAX_ARGS], args[TU_OP_MAX_ARGS];
    int n = 0;
    tk_kernel *k = c->build(ctx, _i % 2 ? TK_F16 : TK_BF16, ts, sc, &n);
    ck_assert_msg(tk_kernel_status(k) == TK_OK, "%s: %s", c->name, tk_kernel_error(k));
    for (int i = 0; i < n; i++) args[i] = ts[i].rank ? ref_tensor_arg(&ts[i]) : sc[i];
    tk_status s = tk_interp_run(k, n, args);
    ck_assert_msg(s == TK_OK, "%s: %s", c->name, tk_ctx_error(ctx));
    tu_free_tensors(ts, n);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(op_matches_interpreter_on_gpu) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (th_gpu_or_skip(ctx) == TK_OK) {
        const tu_op_fixture *c = &tu_op_fixtures[_i / 2];
        tk_dtype dt = _i % 2 ? TK_F16 : TK_BF16;
        ref_tensor ts[TU_OP_MAX_ARGS] = {0};
        tk_arg sc[TU_OP_MAX_ARGS];
        int n = 0;
        tk_kernel *k = c->build(ctx, dt, ts, sc, &n);
        ck_assert_msg(tk_kernel_status(k) == TK_OK, "%s: %s", c->name, tk_kernel_error(k));
        double worst = 0;
        tk_status s = th_compare(ctx, k, n, ts, sc, &worst);
        printf("lower gpu %-12s %-4s rel err %.3g\n", c->name, tk_dtype_name(dt), worst);
        tu_free_tensors(ts, n);
        tk_kernel_destroy(k);
        ck_assert_msg(s == TK_OK, "%s: %s", c->name, tk_ctx_error(ctx));
        ck_assert_msg(worst <= c->tol, "%s %s: rel err %g", c->name, tk_dtype_name(dt), worst);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_param_set_cache reaches every whole-chunk copy path of the memory
 * fixture but cp.async (sync loads, stores, the engine's loads and stores on
 * sm_90a) as one createpolicy per policy; without it, none. cp.async never
 * carries it: ptxas 13.0 miscompiles the hinted form (ops/nv/copy.c). */
START_TEST(l2_policies_reach_the_copies) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const char *all[] = {"createpolicy.fractional.L2::evict_first.b64",
                         "createpolicy.fractional.L2::evict_last.b64",
                         "ld.global.L2::cache_hint.v4.u32", "st.global.L2::cache_hint.v4.u32"};
    const char *engine[] = {"tile.mbarrier::complete_tx::bytes.L2::cache_hint",
                            "tile.bulk_group.L2::cache_hint"};
    for (int arch = 0; arch < 2; arch++)
        for (int l2 = 0; l2 < 2; l2++) {
            tk_kernel *k = tu_op_kernel(ctx, l2 ? tu_memory_l2 : tu_memory, TK_BF16);
            char *ptx;
            tk_diag dg = {0};
            ck_assert_int_eq(tk_lower_ptx(k, arch ? "sm_90a" : "sm_80", &ptx, &dg), TK_OK);
            for (size_t i = 0; l2 && i < sizeof all / sizeof *all; i++)
                ck_assert_msg(strstr(ptx, all[i]), "arch %d: PTX lacks %s", arch, all[i]);
            for (size_t i = 0; l2 && arch && i < sizeof engine / sizeof *engine; i++)
                ck_assert_msg(strstr(ptx, engine[i]), "sm_90a: PTX lacks %s", engine[i]);
            const char *pol = strstr(ptx, "createpolicy");
            ck_assert(!pol == !l2);
            ck_assert(!pol || !strstr(strstr(pol + 1, "createpolicy") + 1, "createpolicy"));
            ck_assert(l2 || !strstr(ptx, "cache_hint"));
            ck_assert_msg(strstr(ptx, "cp.async.cg.shared.global") &&
                              !strstr(ptx, "cp.async.cg.shared.global.L2::cache_hint"),
                          "arch %d: cp.async with a cache hint, or no cp.async", arch);
            free(ptx);
            tk_kernel_destroy(k);
        }
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arch_and_kernel) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char *out = (char *)1;
    tk_diag dg = {0}; /* cleared before each call: the first failure wins */
    tk_kernel *k = tu_op_kernel(ctx, tu_ids, TK_BF16);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_75", &out, &dg), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(dg.msg, "sm_75"));
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_lower_ptx(k, NULL, &out, &dg), TK_ERR_UNSUPPORTED);
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_lower_ptx(NULL, "sm_90a", &out, &dg), TK_ERR_INVALID_ARG);
    tk_kernel_destroy(k);
    tk_kernel *open;
    ck_assert_int_eq(tk_kernel_create(ctx, "open", 1, &open), TK_OK);
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_lower_llvm_text(open, "sm_80", &out, &dg), TK_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(dg.msg, "not finished"));
    tk_kernel_destroy(open);
    /* Every supported arch, and the tk_jit.h wrapper. */
    k = tu_op_kernel(ctx, tu_ids, TK_BF16);
    const char *all[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(tk_emit_ptx(ctx, k, all[i], &out), TK_OK);
        char want[32];
        snprintf(want, sizeof want, ".target %s", all[i]);
        ck_assert_ptr_nonnull(strstr(out, want));
        tk_free(out);
    }
    ck_assert_int_eq(tk_emit_llvm(ctx, k, "sm_80", &out), TK_OK);
    ck_assert_ptr_nonnull(strstr(out, "ptx_kernel void @t_ids"));
    tk_free(out);
    ck_assert_int_eq(tk_emit_ptx(ctx, k, "sm_100", &out), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "sm_100"));
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The instructions the representation promises show up in the PTX. */
START_TEST(ptx_uses_the_intended_instructions) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    tk_kernel *k;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    char *ptx;
    tk_diag dg = {0};
    ck_assert_int_eq(tk_lower_ptx(k, "sm_80", &ptx, &dg), TK_OK);
    const char *want[] = {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                          "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                          "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                          "cp.async.cg.shared.global",
                          "cp.async.commit_group",
                          "cp.async.wait_group",
                          "bar.sync",
                          ".reqntid 128"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(ptx, want[i]), "GEMM PTX lacks %s", want[i]);
    free(ptx);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    ck_assert_msg(!strstr(ptx, "cp.async.bulk") && !strstr(ptx, "mbarrier"),
                  "the default GEMM uses the copy engine");
    free(ptx);
    tk_kernel_destroy(k);
    /* asked for, sm_90: tiles through the copy engine, every warp in
     * lockstep, groups also on mbarriers */
    cfg.tma = 1;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90", &ptx, &dg), TK_OK);
    const char *want90[] = {"cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                            "mbarrier.try_wait.parity",
                            "mbarrier.arrive.shared",
                            "mbarrier.expect_tx",
                            ".param .align 64 .b8",
                            "cp.async.cg.shared",
                            "cp.async.wait_group",
                            "fence.proxy.async.shared::cta",
                            ".reqntid 128"};
    for (size_t i = 0; i < sizeof want90 / sizeof *want90; i++)
        ck_assert_msg(strstr(ptx, want90[i]), "sm_90 GEMM PTX lacks %s", want90[i]);
    ck_assert_ptr_null(strstr(ptx, "setmaxnreg"));
    free(ptx);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    ck_assert_ptr_null(strstr(ptx, "setmaxnreg")); /* 4 warps: lockstep on sm_90a too */
    free(ptx);
    tk_kernel_destroy(k);
    /* 8 warps, sm_90a: a producer warpgroup issues the copies (jit/plan.c);
     * the consumers' barriers are mbarrier releases, the one bar.sync is the
     * ring's setup */
    cfg = tk_gemm_default_config(TK_BF16, TK_BF16, 0); /* the mma.sync producer kernel */
    cfg.block_n = 256, cfg.block_k = 128, cfg.warps = 8, cfg.stages = 2, cfg.tma = 1;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    const char *want90a[] = {"cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                             "setmaxnreg.dec.sync.aligned.u32 \t48",
                             "setmaxnreg.inc.sync.aligned.u32 \t224",
                             ".reqntid 384",
                             ".minnctapersm 1",
                             "mbarrier.try_wait.parity",
                             "mbarrier.arrive.shared",
                             "cp.async.mbarrier.arrive.noinc.shared",
                             "mbarrier.expect_tx",
                             "cp.async.cg.shared",
                             "fence.proxy.async.shared::cta"};
    for (size_t i = 0; i < sizeof want90a / sizeof *want90a; i++)
        ck_assert_msg(strstr(ptx, want90a[i]), "sm_90a GEMM PTX lacks %s", want90a[i]);
    ck_assert_ptr_null(strstr(ptx, "cp.async.wait_group"));
    const char *bar = strstr(ptx, "bar.sync");
    ck_assert_msg(bar && !strstr(bar + 1, "bar.sync"), "sm_90a GEMM: one bar.sync expected");
    free(ptx);
    tk_kernel_destroy(k);
    k = tu_op_kernel(ctx, tu_memory, TK_F16);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    ck_assert_ptr_nonnull(strstr(ptx, "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
    /* a cp.async copy beside the engine's: every warp in lockstep, the
     * groups on cp.async's own and on the mbarrier ring */
    const char *lockstep[] = {"cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                              "mbarrier.try_wait.parity",
                              "mbarrier.arrive.shared",
                              "mbarrier.expect_tx",
                              "cp.async.wait_group",
                              "fence.proxy.async.shared::cta",
                              ".reqntid 128"};
    for (size_t i = 0; i < sizeof lockstep / sizeof *lockstep; i++)
        ck_assert_msg(strstr(ptx, lockstep[i]), "memory-op PTX lacks %s", lockstep[i]);
    free(ptx);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_80", &ptx, &dg), TK_OK);
    ck_assert_ptr_null(strstr(ptx, "stmatrix"));
    free(ptx);
    tk_kernel_destroy(k);
    k = tu_op_kernel(ctx, tu_elementwise, TK_BF16);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    ck_assert_ptr_nonnull(strstr(ptx, "ex2.approx"));
    ck_assert_ptr_nonnull(strstr(ptx, "lg2.approx"));
    ck_assert_ptr_nonnull(strstr(ptx, "shfl.sync.bfly.b32"));
    ck_assert_ptr_nonnull(strstr(ptx, "cvt.rn.bf16x2.f32"));
    free(ptx);
    tk_kernel_destroy(k);
    k = tu_op_kernel(ctx, tu_epilogue, TK_BF16); /* tanh.approx; erf, sigmoid: ex2, no call */
    for (int a = 0; a < 2; a++) {
        ck_assert_int_eq(tk_lower_ptx(k, tu_archs[a], &ptx, &dg), TK_OK);
        ck_assert(strstr(ptx, "tanh.approx.f32") && strstr(ptx, "ex2.approx.ftz.f32"));
        ck_assert(strstr(ptx, "selp.") && !strstr(ptx, "call"));
        free(ptx);
    }
    tk_kernel_destroy(k);
    k = tu_op_kernel(ctx, tu_trig, TK_BF16); /* sin/cos: reduction + polynomials, no call */
    for (int a = 0; a < 2; a++) {
        ck_assert_int_eq(tk_lower_ptx(k, tu_archs[a], &ptx, &dg), TK_OK);
        ck_assert(strstr(ptx, "cvt.rni.f32.f32") && strstr(ptx, "fma.rn.f32"));
        ck_assert(!strstr(ptx, "sin.approx") && !strstr(ptx, "cos.approx") && !strstr(ptx, "call"));
        free(ptx);
    }
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The sin/cos lowering's own error, measured on the host with the same f32
 * operations (ops/trig.h): within 1e-7 of double sin/cos for |x| <= 1e5
 * (rotary angles), over every 256th float there and its negative. */
START_TEST(trig_polynomial_error) {
    float lim = 1e5f;
    uint32_t end;
    memcpy(&end, &lim, sizeof end);
    double worst = 0;
    for (uint32_t b = 0; b <= end; b += 256) {
        float x;
        memcpy(&x, &b, sizeof x);
        for (int sg = 0; sg < 2; sg++, x = -x) {
            double es = fabs(tk_trig_f32(x, 0) - sin((double)x));
            double ec = fabs(tk_trig_f32(x, 1) - cos((double)x));
            worst = fmax(worst, fmax(es, ec));
        }
    }
    ck_assert_msg(worst <= 1e-7, "sin/cos max abs error %g", worst);
    ck_assert(tk_trig_f32(0.0f, 1) == 1.0f && isnan(tk_trig_f32(INFINITY, 0)));
}
END_TEST

/* The erf lowering's own error, measured on the host with the same f32
 * operations (ops/erf.h; exp2f for ex2.approx): within 1.1e-7 of double erf
 * over every 16th float in [0, 6] (ops/erf.h measured all); odd; +-1 at
 * +-inf, NaN for NaN. */
START_TEST(erf_polynomial_error) {
    double worst = 0;
    float lim = 6.0f;
    uint32_t end;
    memcpy(&end, &lim, sizeof end);
    for (uint32_t b = 0; b <= end; b += 16) {
        float x;
        memcpy(&x, &b, sizeof x);
        worst = fmax(worst, fabs(tk_erf_f32(x) - erf((double)x)));
        ck_assert(tk_erf_f32(-x) == -tk_erf_f32(x));
    }
    ck_assert_msg(worst <= 1.1e-7, "erf max abs error %g", worst);
    ck_assert(tk_erf_f32(INFINITY) == 1.0f && tk_erf_f32(-INFINITY) == -1.0f);
    ck_assert(isnan(tk_erf_f32(NAN)));
}
END_TEST

/* The Hopper attention (kernels/attention_hopper.c) on sm_90a: split into a
 * producer warpgroup and two consumer warpgroups (three at D 64), every tile on the engine
 * (Q, K, V: three maps), both multiplies on wgmma, and ptxas without
 * spills; sm_80 gets a status naming the target. _i: D 64/128/256 x causal. */
START_TEST(attention_wgmma_lowers) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_attention_config cfg = {
        .dtype = TK_BF16, .head_dim = 64 << (_i / 2), .causal = _i % 2, .wgmma = 1};
    tk_kernel *k;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &cfg, &k), TK_OK);
    tk_plan pl;
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 3);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert(pl.descriptors);
    ck_assert(!pl.generic_engine_tiles);
    tk_diag dg = {0};
    char *ptx = NULL, log[8192];
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &ptx, &dg), TK_OK);
    ck_assert_ptr_nonnull(strstr(ptx, "wgmma.mma_async.sync.aligned"));
    ck_assert_ptr_nonnull(strstr(ptx, "cp.async.bulk.tensor.4d"));
    ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32"));
    ck_assert_int_eq(pl.consumer_regs, cfg.head_dim == 64 ? 152 : 224); /* 3 or 2 warpgroups */
    long spills = 0;
    int rc = tu_run_ptxas(ptx, "sm_90a", &spills, log, sizeof log);
    ck_assert_msg(rc <= 0, "ptxas rejected %s:\n%s", tk_kernel_name(k), log);
    ck_assert_msg(spills == 0, "%s: %ld bytes of spills", tk_kernel_name(k), spills);
    free(ptx);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_80", &ptx, &dg), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(dg.msg, "needs sm_90a"));
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(gemm_lowers_without_spills) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const int shapes[][5] = {
        {0}, {128, 128, 32, 4, 4}, {64, 64, 32, 4, 3}, {128, 256, 32, 8, 3}};
    for (int t = 0; t < 4; t++) {
        tk_dtype in = t % 2 ? TK_F16 : TK_BF16, out = t < 2 ? in : TK_F32;
        tk_gemm_config cfg = tk_gemm_default_config(in, out, t % 2);
        const int *sh = shapes[_i % 4];
        cfg.tma = _i >= 4; /* the copy engine's variant too */
        if (sh[0])
            cfg.block_m = sh[0], cfg.block_n = sh[1], cfg.block_k = sh[2], cfg.warps = sh[3],
            cfg.stages = sh[4];
        tk_kernel *k;
        ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
        long spills = tu_check_lowers(k);
        ck_assert_msg(spills == 0, "%s: %ld bytes of spills", tk_kernel_name(k), spills);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(attention_lowers) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    /* _i / 4: d=64; d=128 (4 warps, Q re-read from shared); d=128, 8 warps (Q in
     * registers); d=256 (4 warps of 16 rows, Q re-read from shared) */
    static const int dims[4] = {64, 128, 128, 256};
    tk_attention_config cfg = {.dtype = _i % 2 ? TK_F16 : TK_BF16,
                               .head_dim = dims[_i / 4],
                               .causal = (_i / 2) % 2,
                               .warps = _i / 4 == 2 ? 8 : 0};
    tk_kernel *k;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &cfg, &k), TK_OK);
    long spills = tu_check_lowers(k);
    if (spills) printf("note: %s spills %ld bytes on one arch\n", tk_kernel_name(k), spills);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("lower");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, op_lowers, 0, 2 * tu_nop_fixtures);
    tcase_add_loop_test(tc, op_runs_on_the_interpreter, 0, 2 * tu_nop_fixtures);
    tcase_add_test(tc, bad_arch_and_kernel);
    tcase_add_test(tc, ptx_uses_the_intended_instructions);
    tcase_add_test(tc, l2_policies_reach_the_copies);
    tcase_add_test(tc, trig_polynomial_error);
    tcase_add_test(tc, erf_polynomial_error);
    tcase_add_loop_test(tc, gemm_lowers_without_spills, 0, 8);
    tcase_add_loop_test(tc, attention_lowers, 0, 16);
    tcase_add_loop_test(tc, attention_wgmma_lowers, 0, 6);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("gpu");
    tcase_set_timeout(tg, 600);
    tcase_add_loop_test(tg, op_matches_interpreter_on_gpu, 0, 2 * tu_nop_fixtures);
    suite_add_tcase(s, tg);
    return run_suite(s);
}
