/* Lowering tests (jit/lower.h): every op family and every ready-made kernel
 * lowers to a module that LLVM verifies, to PTX for sm_80 and sm_90a that
 * ptxas assembles, and the GEMM without spills. On a GPU machine the op
 * kernels (tests/util/fixture_ops.c) also run against the interpreter
 * (memory paths: every shared layout, sync/async/engine copies, strided and
 * ragged views; control flow; a warp-specialized k-loop). Without ptxas or
 * a GPU those parts skip with one line. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/lower.h"
#include "jit/plan.h"
#include "ops/erf.h"
#include "ops/trig.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/fixture_ops.h"
#include "util/harness.h"
#include "util/run.h"

static const char *const archs[2] = {"sm_80", "sm_90a"};

/* ---- ptxas --------------------------------------------------------------- */
static const char *ptxas_path(void) {
    static char path[512];
    const char *env = getenv("TK_PTXAS");
    const char *cands[2] = {env, "/usr/local/cuda/bin/ptxas"};
    for (int i = 0; i < 2; i++)
        if (cands[i] && access(cands[i], X_OK) == 0) {
            snprintf(path, sizeof path, "%s", cands[i]);
            return path;
        }
    static int said;
    if (!said++) printf("ptxas checks skipped: no ptxas (set TK_PTXAS or install CUDA)\n");
    return NULL;
}

/* Assembles ptx with `ptxas -v`; returns its exit status (-1: skipped) and
 * the spill bytes (stores + loads) it reported. */
static int run_ptxas(const char *ptx, const char *arch, long *spills, char *log, size_t logn) {
    const char *px = ptxas_path();
    *spills = 0;
    log[0] = 0;
    if (!px) return -1;
    char file[] = "/tmp/tk_lower_XXXXXX";
    int fd = mkstemp(file);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(ptx);
    ck_assert_int_eq((long)write(fd, ptx, len), (long)len);
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -arch=%s -v %s -o /dev/null 2>&1", px, arch, file);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t used = 0;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        long st, ld;
        const char *sp = strstr(line, "bytes spill stores");
        if (sp) {
            while (sp > line && sp[-1] == ' ') sp--;
            while (sp > line && sp[-1] >= '0' && sp[-1] <= '9') sp--;
            if (sscanf(sp, "%ld bytes spill stores, %ld bytes spill loads", &st, &ld) == 2)
                *spills += st + ld;
        }
        used += (size_t)snprintf(log + used, used < logn ? logn - used : 0, "%s", line);
        if (used >= logn) used = logn - 1;
    }
    int rc = pclose(p);
    unlink(file);
    return rc;
}

/* Lowers k for both archs: IR verifies, PTX assembles. Returns the spill
 * bytes of the worse arch (0 when ptxas is missing). */
static long check_lowers(const tk_kernel *k) {
    char log[8192];
    tk_diag dg = {0};
    long worst = 0;
    ck_assert_msg(tk_kernel_status(k) == TK_OK, "build: %s", tk_kernel_error(k));
    for (int a = 0; a < 2; a++) {
        char *text = NULL, *ptx = NULL;
        tk_status s = tk_lower_llvm_text(k, archs[a], &text, &dg);
        ck_assert_msg(s == TK_OK, "%s %s: %s", tk_kernel_name(k), archs[a], dg.msg);
        ck_assert_ptr_nonnull(strstr(text, "ptx_kernel"));
        free(text);
        s = tk_lower_ptx(k, archs[a], &ptx, &dg);
        ck_assert_msg(s == TK_OK, "%s %s: %s", tk_kernel_name(k), archs[a], dg.msg);
        ck_assert_ptr_nonnull(strstr(ptx, ".entry"));
        long spills;
        int rc = run_ptxas(ptx, archs[a], &spills, log, sizeof log);
        ck_assert_msg(rc <= 0, "ptxas %s rejected %s:\n%s", archs[a], tk_kernel_name(k), log);
        if (spills > worst) worst = spills;
        free(ptx);
    }
    return worst;
}

static tk_value *c64(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *c32(tk_kernel *k, int32_t v) { return tk_const_i32(k, v); }

static tk_kernel *finish(tk_kernel *k) {
    tk_set_grid(k, NULL, NULL, NULL); /* one block: the plan tests run nothing */
    tk_kernel_finish(k);
    return k;
}

/* ---- tests --------------------------------------------------------------- */
START_TEST(op_lowers) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = tu_op_kernel(ctx, tu_op_fixtures[_i / 2].build, _i % 2 ? TK_F16 : TK_BF16);
    check_lowers(k);
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

/* The target table through the public query, and a plan handed to the
 * lowering: the same PTX as one made for the call, refused for another
 * target. */
START_TEST(target_caps_and_plans) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_target_caps c;
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_80", &c), TK_OK);
    ck_assert_str_eq(c.arch, "sm_80");
    ck_assert_int_eq(c.sm, 80);
    ck_assert(c.mma_sync && c.ldmatrix && c.cp_async);
    ck_assert(!c.stmatrix && !c.tma && !c.wgmma && !c.setmaxnreg);
    ck_assert_uint_eq(c.smem_per_block, 163 * 1024);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_89", &c), TK_OK);
    ck_assert_uint_eq(c.smem_per_block, 99 * 1024);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_90", &c), TK_OK);
    ck_assert(c.stmatrix && c.tma && !c.wgmma && !c.setmaxnreg);
    ck_assert_uint_eq(c.smem_per_block, 227 * 1024);
    ck_assert_int_eq(tk_target_caps_get(NULL, "sm_90a", &c), TK_OK);
    ck_assert(c.tma && c.wgmma && c.setmaxnreg);
    ck_assert_str_eq(c.llvm_cpu, "sm_90a");
    ck_assert_str_eq(c.llvm_features, "+ptx83");
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_100", &c), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "'sm_100' (known: sm_80, sm_86, sm_89, "
                                                    "sm_90, sm_90a)"));
    ck_assert_int_eq(tk_target_caps_get(NULL, "sm_75", &c), TK_ERR_UNSUPPORTED);
    ck_assert_int_eq(tk_target_caps_get(ctx, NULL, &c), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_target_caps_get(ctx, "sm_80", NULL), TK_ERR_INVALID_ARG);

    tk_kernel *k = tu_op_kernel(ctx, tu_pipe, TK_BF16);
    tk_plan pl;
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    char *a = NULL, *b = NULL;
    tk_diag dg = {0};
    ck_assert_msg(tk_lower_ptx_plan(k, "sm_90a", &pl, &a, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_int_eq(tk_lower_ptx(k, "sm_90a", &b, &dg), TK_OK);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    ck_assert_int_eq(tk_lower_ptx_plan(k, "sm_90", &pl, &a, &dg), TK_ERR_STATE);
    ck_assert_ptr_null(a);
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
        ck_assert_int_eq(tk_lower_ptx(k, archs[a], &ptx, &dg), TK_OK);
        ck_assert(strstr(ptx, "tanh.approx.f32") && strstr(ptx, "ex2.approx.ftz.f32"));
        ck_assert(strstr(ptx, "selp.") && !strstr(ptx, "call"));
        free(ptx);
    }
    tk_kernel_destroy(k);
    k = tu_op_kernel(ctx, tu_trig, TK_BF16); /* sin/cos: reduction + polynomials, no call */
    for (int a = 0; a < 2; a++) {
        ck_assert_int_eq(tk_lower_ptx(k, archs[a], &ptx, &dg), TK_OK);
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

/* What one_copy adds beside its copy. */
enum {
    PLAIN_COPY,
    WRITES_A,
    COMMIT_IN_WARP_IF,
    FILL_209K,
    FILL_208K,
    TWO_WARPS,
    ASYNC_TOO,
    SHARED_STORE,
    MANY_WARPS,
    FOUR_WARPS,
    GLOBAL_RAW,
    STORE_OUT,
    LOOP_STORE
};

/* A kernel with one engine copy of an rows x cols tile of `dt` (layout l,
 * fill f) from a rank-`rank` tensor, for the copy-engine plan; `extra` adds
 * what may disqualify it. */
static tk_kernel *one_copy(tk_ctx *ctx, tk_dtype dt, int rows, int cols, tk_smem_layout l, float f,
                           int rank, int extra) {
    tk_kernel *k;
    int warps = extra == TWO_WARPS ? 2 : extra == FOUR_WARPS ? 4 : extra == MANY_WARPS ? 32 : 8;
    tk_kernel_create(ctx, "t_tma", warps, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, rank), *idx[3];
    tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, 1); /* 1024 bytes first */
    tk_value *sm = tk_shared(k, dt, rows, cols, l, 2);
    for (int kib = extra == FILL_209K ? 209 : extra == FILL_208K ? 208 : 0; kib > 0; kib -= 16)
        tk_shared(k, TK_F32, 16, 16, TK_SMEM_PLAIN, kib < 16 ? kib : 16); /* 1 KiB stages */
    for (int d = 0; d < rank; d++) idx[d] = c64(k, 0);
    tk_copy_to_shared_n(k, tk_stage(k, sm, c32(k, 1)), A, rank, idx, f, TK_COPY_TMA);
    if (extra == COMMIT_IN_WARP_IF) tk_if_begin(k, tk_eq(k, tk_warp_id(k), c32(k, 0)));
    tk_async_commit(k);
    tk_async_wait(k, 0);
    if (extra == COMMIT_IN_WARP_IF) tk_if_end(k, 0, NULL, NULL);
    if (extra == WRITES_A) tk_copy_to_global_n(k, A, rank, idx, tk_stage(k, sm, c32(k, 0)));
    if (extra == ASYNC_TOO) /* a cp.async copy beside the engine's */
        tk_copy_to_shared_n(k, tk_stage(k, sm, c32(k, 0)), A, rank, idx, f, TK_COPY_ASYNC);
    if (extra == GLOBAL_RAW) { /* a store, then other warps' loads of the same tensor */
        tk_value *O = tk_param_tensor(k, "O", dt, 2), *at[2] = {c64(k, 0), c64(k, 0)};
        tk_type t = tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW);
        tk_store(k, O, at, tk_zeros(k, t));
        tk_barrier(k);
        tk_store(k, O, at, tk_load(k, t, O, at, 0.0f));
    }
    if (extra == LOOP_STORE) { /* a barrier, then a shared store, in a loop: only the
                                  back edge puts the store before the barrier */
        tk_value *z = tk_zeros(k, tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW));
        tk_value *at[2] = {c32(k, 0), c32(k, 0)}, *own = tk_shared(k, dt, 16, 16, TK_SMEM_PLAIN, 1);
        tk_for_begin(k, c32(k, 0), c32(k, 3), c32(k, 1), 0, NULL, NULL);
        tk_barrier(k);
        tk_store(k, own, at, z);
        tk_for_end(k, 0, NULL, NULL);
    }
    if (extra == STORE_OUT) { /* the landed tile on to O, which nothing reads */
        tk_value *O = tk_param_tensor(k, "O", dt, rank);
        tk_copy_to_global_n(k, O, rank, idx, tk_stage(k, sm, c32(k, 1)));
    }
    if (extra == SHARED_STORE) {
        tk_value *z = tk_zeros(k, tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW));
        tk_value *at[2] = {c32(k, 0), c32(k, 0)};
        tk_store(k, tk_stage(k, sm, c32(k, 0)), at, z);
        tk_barrier(k);
    }
    return finish(k);
}

/* How many barriers the plan's consumers also sync among themselves. */
static int synced_barriers(const tk_plan *pl) {
    int n = 0;
    for (int i = 0; i < TK_WS_MAX_IDS / 64; i++) n += __builtin_popcountll(pl->slice.sync_bar[i]);
    return n;
}

/* Which copies go through the copy engine, and which kernels get a producer
 * (jit/plan.c). */
START_TEST(tma_plan) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_plan pl;
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    tk_kernel *k;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl); /* cp.async unless asked */
    ck_assert_int_eq(pl.nmaps, 0);
    tk_kernel_destroy(k);
    cfg.tma = 1;
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 2); /* A: 128x64 in one box; B: 64x128 as two 64x64 boxes */
    ck_assert_int_eq(pl.maps[0].param, 0);
    ck_assert_int_eq(pl.maps[0].box_rows, 128);
    ck_assert_int_eq(pl.maps[0].box_cols, 64);
    ck_assert_int_eq(pl.maps[1].param, 1);
    ck_assert_int_eq(pl.maps[1].box_rows, 64);
    ck_assert_int_eq(pl.maps[1].box_cols, 64);
    ck_assert_int_eq(pl.maps[1].swizzle, 128);
    ck_assert_uint_gt(pl.smem_extra, 0);
    tk_plan_make(k, tk_target_find("sm_90"), &pl);
    ck_assert_int_eq(pl.nmaps, 2);
    tk_plan_make(k, tk_target_find("sm_89"), &pl);
    ck_assert_int_eq(pl.nmaps, 0);
    ck_assert_uint_eq(pl.smem_extra, 0);
    tk_plan_make(k, NULL, &pl);
    ck_assert_int_eq(pl.nmaps, 0);
    tk_kernel_destroy(k);
    static const struct {
        tk_dtype dt;
        int rows, cols, layout, rank, maps, swizzle, extra;
    } cases[] = {
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, PLAIN_COPY}, /* 128-byte rows */
        {TK_BF16, 64, 16, TK_SMEM_SWIZZLE, 2, 1, 32, PLAIN_COPY},  /* 32-byte rows */
        {TK_F32, 32, 16, TK_SMEM_SWIZZLE, 3, 1, 64, PLAIN_COPY},   /* 64-byte rows, rank 3 */
        {TK_F16, 32, 256, TK_SMEM_SWIZZLE, 2, 1, 128, PLAIN_COPY}, /* 512-byte rows: 4 blocks */
        {TK_BF16, 64, 48, TK_SMEM_SWIZZLE, 2, 0, 0, PLAIN_COPY},   /* 96-byte rows */
        {TK_BF16, 64, 64, TK_SMEM_PAD, 2, 0, 0, PLAIN_COPY},       /* not the engine's layout */
        {TK_BF16, 512, 16, TK_SMEM_SWIZZLE, 2, 0, 0, PLAIN_COPY},  /* more rows than a box */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, WRITES_A},     /* the kernel writes A */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, COMMIT_IN_WARP_IF}, /* warp 0 commits */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 0, 0, FILL_209K},         /* 1 KiB left: no ring */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, FILL_208K},       /* 2 KiB left: room */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, TWO_WARPS},       /* half a warpgroup */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, FOUR_WARPS},      /* one: lockstep pays */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, MANY_WARPS},      /* no room for 4 more */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, ASYNC_TOO},       /* no producer: cp.async */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, SHARED_STORE},    /* consumers sync too */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, GLOBAL_RAW},      /* ... through O */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 2, 128, STORE_OUT},       /* and the engine stores */
        {TK_BF16, 64, 48, TK_SMEM_SWIZZLE, 2, 0, 0, STORE_OUT},         /* neither: 96-byte rows */
        {TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 2, 1, 128, LOOP_STORE}, /* synced by the back edge */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        k = one_copy(ctx, cases[i].dt, cases[i].rows, cases[i].cols, cases[i].layout, 0.0f,
                     cases[i].rank, cases[i].extra);
        ck_assert_msg(tk_kernel_status(k) == TK_OK, "case %zu: %s", i, tk_kernel_error(k));
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_msg(pl.nmaps == cases[i].maps, "case %zu: %d maps", i, pl.nmaps);
        ck_assert_int_eq(pl.stores, cases[i].extra == STORE_OUT && pl.nmaps > 0);
        if (pl.nmaps) {
            ck_assert_int_eq(pl.maps[0].swizzle, cases[i].swizzle);
            ck_assert_int_eq(pl.maps[0].rank, cases[i].rank);
            ck_assert_int_eq(pl.maps[0].box_rows, cases[i].rows);
        }
        /* a producer warpgroup whenever the engine has every async copy */
        int e = cases[i].extra;
        bool ws =
            pl.nmaps && e != ASYNC_TOO && e != MANY_WARPS && e != TWO_WARPS && e != FOUR_WARPS;
        ck_assert_msg(pl.producer_warps == (ws ? 4 : 0), "case %zu: %d producer warps", i,
                      pl.producer_warps);
        ck_assert_int_eq(pl.threads, 32 * (tk_kernel_warps(k) + (ws ? 4 : 0)));
        if (ws)
            ck_assert_int_eq(synced_barriers(&pl),
                             e == SHARED_STORE || e == GLOBAL_RAW || e == LOOP_STORE);
        check_lowers(k);
        tk_kernel_destroy(k);
    }
    /* the GPU test's pipelined loop: split, with its consumers' barriers
     * kept among themselves; the ring stage index is the producer's only
     * carried value */
    k = tu_op_kernel(ctx, tu_pipe, TK_BF16);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 2);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_gt(synced_barriers(&pl), 0);
    ck_assert(pl.generic_engine_tiles); /* ldmatrix reads the stages: refills fence */
    ck_assert_int_eq(pl.producer_regs, 48);
    ck_assert_int_eq(pl.consumer_regs, 224);
    tk_plan_make(k, tk_target_find("sm_90"), &pl); /* no setmaxnreg: lockstep */
    ck_assert_int_eq(pl.nmaps, 2);
    ck_assert_int_eq(pl.producer_warps, 0);
    tk_kernel_destroy(k);
    /* the wgmma GEMM: C through the engine's store, from a tile in two
     * column pieces; of its 6 barriers the consumers sync among themselves
     * at the 4 around the epilogue's tile (the next tile's first barrier
     * included), never in the k-loop */
    cfg = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 4096, 4096, "sm_90a");
    ck_assert_int_eq(cfg.wgmma, 1);
    ck_assert_int_eq(tk_gemm_build(ctx, &cfg, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.nmaps, 3);
    ck_assert_int_eq(pl.maps[2].param, 2);
    ck_assert(pl.stores);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_eq(synced_barriers(&pl), 4);
    ck_assert(!pl.generic_engine_tiles); /* wgmma alone reads the stages */
    tk_kernel_destroy(k);
    /* the fast attention backward's fused kernel: wgmma reads dSᵀ, a tile
     * the consumers write, until the wait that retires it; so of the loop's
     * four barriers, the one after that wait syncs the consumers too
     * (before the next trip's dSᵀ is written), beside the ones after dSᵀ's
     * and dQᵀ's stores and the one after the engine's add of dQᵀ: 4 (3
     * without the rule) */
    tk_attention_bwd_config bc = {
        .dtype = TK_BF16, .head_dim = 128, .part = TK_ATTN_BWD_FUSED, .wgmma = 1};
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &bc, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(pl.producer_warps, 4);
    ck_assert_int_eq(pl.nmaps, 5); /* Q, K, V, dO and dQacc (the engine's add) */
    ck_assert(pl.stores);
    ck_assert_int_eq(synced_barriers(&pl), 4);
    tk_kernel_destroy(k);
    bc.part = TK_ATTN_BWD_DKDV; /* the deterministic one: no consumer tile, no sync */
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &bc, &k), TK_OK);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl);
    ck_assert_int_eq(synced_barriers(&pl), 0);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* A copy-engine copy of rows [s, s + 32) of A into shared memory, s a
 * scalar parameter or (NARROW_OFFSET*) read from the table T (8 warps:
 * the producer's slice loads it); `extra` adds what changes the plan. */
enum { NARROW_STORE_OUT, NARROW_WRITES_A, NARROW_OFFSET, NARROW_OFFSET_WRITTEN };
static tk_kernel *narrow_copy(tk_ctx *ctx, int extra) {
    tk_kernel *k;
    bool table = extra == NARROW_OFFSET || extra == NARROW_OFFSET_WRITTEN;
    tk_kernel_create(ctx, "t_narrow_copy", table ? 8 : 4, &k);
    tk_value *sm = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_BF16, 2);
    tk_value *T = tk_param_tensor(k, "T", TK_F32, 1), *s = tk_param_scalar(k, "s", TK_I64);
    tk_value *n32 = c64(k, 32), *z = c64(k, 0), *g[2] = {z, z}, *ti[1] = {z};
    if (table) s = tk_cvt(k, tk_load(k, tk_scalar_type(TK_F32), T, ti, 0.0f), TK_I64);
    tk_copy_to_shared(k, sm, tk_narrow(k, A, 0, s, n32), g, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_type row = tk_tile_type(TK_BF16, 16, 64, TK_WARP, TK_ROW);
    if (extra == NARROW_STORE_OUT) tk_copy_to_global(k, tk_narrow(k, O, 0, s, n32), g, sm);
    if (extra == NARROW_WRITES_A)
        tk_store(k, tk_narrow(k, A, 1, s, n32), g, tk_load(k, row, sm, g, 0));
    if (table) tk_store(k, O, g, tk_load(k, row, sm, g, 0));
    if (extra == NARROW_OFFSET_WRITTEN)
        tk_store(k, T, ti, tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_COL, TK_WARP, TK_ROW)));
    return finish(k);
}

/* tk_narrow and the copy engine (jit/plan.c, ops/nv/tma.c): a narrowed
 * view's copies use its root parameter's map, stores through a narrowing
 * too; a tensor written through a narrowing is written; the packed
 * sequences' fixture splits off a producer that loads the offsets and
 * narrows (not when the offsets' tensor is written). The PTX has the
 * engine's copies on sm_90a beside the cp.async they fall back to, and
 * plain cp.async on sm_80. */
START_TEST(narrow_on_the_engine) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_plan pl;
    static const struct {
        int extra, maps, producer;
    } cases[] = {
        {NARROW_STORE_OUT, 2, 0},      /* A's map, and O's for the store; 4 warps: lockstep */
        {NARROW_WRITES_A, 0, 0},       /* A written through another narrowing */
        {NARROW_OFFSET, 1, 4},         /* the producer loads the offset and narrows */
        {NARROW_OFFSET_WRITTEN, 1, 0}, /* ... not from a tensor the kernel writes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_kernel *k = narrow_copy(ctx, cases[i].extra);
        ck_assert_msg(tk_kernel_status(k) == TK_OK, "case %zu: %s", i, tk_kernel_error(k));
        tk_plan_make(k, tk_target_find("sm_90a"), &pl);
        ck_assert_msg(pl.nmaps == cases[i].maps, "case %zu: %d maps", i, pl.nmaps);
        for (int m = 0; m < pl.nmaps; m++) ck_assert_int_eq(pl.maps[m].param, m); /* A, O */
        ck_assert_int_eq(pl.stores, cases[i].extra == NARROW_STORE_OUT);
        ck_assert_msg(pl.producer_warps == cases[i].producer, "case %zu: %d producer warps", i,
                      pl.producer_warps);
        check_lowers(k);
        tk_kernel_destroy(k);
    }
    tk_kernel *k = tu_op_kernel(ctx, tu_narrow, TK_BF16);
    tk_plan_make(k, tk_target_find("sm_90a"), &pl); /* X's map; O stored from registers */
    ck_assert(pl.nmaps == 1 && pl.maps[0].param == 0 && pl.maps[0].box_rows == 128 && !pl.stores);
    ck_assert_int_eq(pl.producer_warps, 4);
    tk_diag dg = {0};
    char *ptx = NULL;
    ck_assert_msg(tk_lower_ptx(k, "sm_90a", &ptx, &dg) == TK_OK, "%s", dg.msg);
    const char *want90a[] = {"cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                             "mbarrier.expect_tx", "cp.async.cg.shared", "setmaxnreg"};
    for (size_t i = 0; i < sizeof want90a / sizeof *want90a; i++)
        ck_assert_msg(strstr(ptx, want90a[i]), "narrow sm_90a PTX lacks %s", want90a[i]);
    free(ptx);
    ck_assert_msg(tk_lower_ptx(k, "sm_80", &ptx, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_ptr_nonnull(strstr(ptx, "cp.async.cg.shared.global"));
    ck_assert(!strstr(ptx, "cp.async.bulk") && !strstr(ptx, "mbarrier"));
    free(ptx);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
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
    int rc = run_ptxas(ptx, "sm_90a", &spills, log, sizeof log);
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
        long spills = check_lowers(k);
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
    long spills = check_lowers(k);
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
    tcase_add_test(tc, target_caps_and_plans);
    tcase_add_test(tc, ptx_uses_the_intended_instructions);
    tcase_add_test(tc, trig_polynomial_error);
    tcase_add_test(tc, erf_polynomial_error);
    tcase_add_test(tc, tma_plan);
    tcase_add_test(tc, narrow_on_the_engine);
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
