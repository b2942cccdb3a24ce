/* Cold compile time on the CPU, stage by stage, for the kernels a user's
 * first calls on sm_90a build (tk_gemm's pick at 8192², the wgmma attention
 * D128 that tk_attention_prepare picks) and their mma.sync twins: IR build, LLVM module build, verifier, O3 pipeline, PTX
 * emission, ptxas (a fresh process each time; no GPU, no driver cache).
 * Then tk_precompile of several specializations one by one against one
 * call (its thread pool). Medians of R runs.
 *   bench_compile [R]       (needs ptxas for the ptxas and precompile rows) */
#define _GNU_SOURCE
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "jit/link.h"
#include "jit/lower.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

typedef tk_status (*build_fn)(tk_ctx *, tk_kernel **);

static tk_status gemm_large(tk_ctx *ctx, tk_kernel **k) { /* tk_gemm's 8192² choice */
    tk_gemm_config c = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 8192, 8192, "sm_90a");
    return tk_gemm_build(ctx, &c, k);
}
static tk_status gemm_default(tk_ctx *ctx, tk_kernel **k) {
    tk_gemm_config c = tk_gemm_default_config(TK_BF16, TK_BF16, 0);
    return tk_gemm_build(ctx, &c, k);
}
static tk_status attn128(tk_ctx *ctx, tk_kernel **k) {
    tk_attention_config c = {.dtype = TK_BF16, .head_dim = 128};
    return tk_attention_fwd_build(ctx, &c, k);
}
static tk_status attn128_wgmma(tk_ctx *ctx, tk_kernel **k) { /* sm_90a's pick */
    tk_attention_config c = {.dtype = TK_BF16, .head_dim = 128, .wgmma = 1};
    return tk_attention_fwd_build(ctx, &c, k);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void stages(tk_ctx *ctx, build_fn build, const tk_ptxas *px, int R) {
    double ir[64], b[64], v[64], o[64], e[64], pt[64];
    char name[64] = "?";
    int nl = 0;
    for (int r = 0; r < R; r++) {
        tk_kernel *k = NULL;
        double t0 = bench_now_ms();
        if (build(ctx, &k)) {
            printf("%s: %s\n", name, tk_ctx_error(ctx));
            return;
        }
        ir[r] = bench_now_ms() - t0;
        snprintf(name, sizeof name, "%s", tk_kernel_name(k));
        char *ptx = NULL;
        tk_lower_times t;
        tk_diag dg = {0};
        if (tk_lower_ptx_timed(k, "sm_90a", NULL, &ptx, &t, &dg)) {
            printf("%s: %s\n", name, dg.msg);
            return;
        }
        b[r] = t.build_ms, v[r] = t.verify_ms, o[r] = t.opt_ms, e[r] = t.emit_ms;
        nl = lines(ptx);
        pt[r] = -1;
        void *cubin = NULL;
        size_t n;
        t0 = bench_now_ms();
        if (px && tk_ptxas_compile(px, ptx, "sm_90a", &cubin, &n, &dg) == TK_OK)
            pt[r] = bench_now_ms() - t0;
        free(cubin);
        free(ptx);
        tk_kernel_destroy(k);
    }
    double mb = bench_median(b, R), mv = bench_median(v, R), mo = bench_median(o, R);
    double me = bench_median(e, R), mp = bench_median(pt, R), mi = bench_median(ir, R);
    printf("| %-48s | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %5d |\n", name, mi,
           mb, mv, mo, me, mp, mi + mb + mv + mo + me + (mp > 0 ? mp : 0), nl);
}

/* The attention backward's deterministic pair (tk_attention_backward's
 * default on sm_90a: dQ, then dK/dV), D128 causal, wgmma. */
static tk_status bwd_part(tk_ctx *ctx, int part, tk_kernel **k) {
    tk_attention_bwd_config c = {
        .dtype = TK_BF16, .head_dim = 128, .causal = 1, .part = part, .wgmma = 1};
    return tk_attention_bwd_build(ctx, &c, k);
}
static tk_status bwd_dq(tk_ctx *ctx, tk_kernel **k) { return bwd_part(ctx, TK_ATTN_BWD_DQ, k); }
static tk_status bwd_dkdv(tk_ctx *ctx, tk_kernel **k) { return bwd_part(ctx, TK_ATTN_BWD_DKDV, k); }

/* n specializations precompiled one call each, then in one call (the pool
 * tk_registry_programs uses for an entry point's several kernels). */
static void pool(const char *what, const build_fn *fns, int nk, int R) {
    tk_ctx *ctx;
    tk_kernel *ks[8];
    if (tk_ctx_create(&ctx)) return;
    for (int i = 0; i < nk; i++) fns[i](ctx, &ks[i]);
    double one[16], all[16];
    int n = R < 16 ? R : 16;
    for (int r = 0; r < n; r++) {
        char d1[] = "/tmp/tk-bench-pre-XXXXXX", d2[] = "/tmp/tk-bench-pre-XXXXXX";
        if (!mkdtemp(d1) || !mkdtemp(d2)) return;
        tk_cache_set_dir(ctx, d1);
        double t0 = bench_now_ms();
        for (int i = 0; i < nk; i++)
            if (tk_precompile(ctx, (const tk_kernel *const *)&ks[i], 1, "sm_90a")) {
                printf("precompile: %s\n", tk_ctx_error(ctx));
                return;
            }
        one[r] = bench_now_ms() - t0;
        tk_cache_set_dir(ctx, d2);
        t0 = bench_now_ms();
        tk_precompile(ctx, (const tk_kernel *const *)ks, nk, "sm_90a");
        all[r] = bench_now_ms() - t0;
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s %s", d1, d2);
        if (system(cmd)) {}
    }
    printf("| %-48s | %5ld | %7.0f | %7.0f |\n", what, sysconf(_SC_NPROCESSORS_ONLN),
           bench_median(one, n), bench_median(all, n));
    for (int i = 0; i < nk; i++) tk_kernel_destroy(ks[i]);
    tk_ctx_destroy(ctx);
}

int main(int argc, char **argv) {
    int R = argc > 1 ? atoi(argv[1]) : 5;
    if (R < 1 || R > 64) R = 5;
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    tk_ptxas px;
    tk_diag dg = {0};
    bool have = tk_ptxas_find(&px, &dg) == TK_OK;
    printf("cold compile stages, sm_90a, median of %d (ms; ptxas: %s)\n\n", R,
           have ? px.version : "not found");
    printf("| %-48s | %6s | %6s | %6s | %6s | %6s | %6s | %6s | %5s |\n", "kernel", "IR", "module",
           "verify", "O3", "emit", "ptxas", "total", "PTX lines");
    printf("|%s|--------|--------|--------|--------|--------|--------|--------|-------|\n",
           "--------------------------------------------------");
    build_fn rows[] = {gemm_large, gemm_default, attn128_wgmma, attn128};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        stages(ctx, rows[i], have ? &px : NULL, R);
    tk_ctx_destroy(ctx);
    if (!have) return 0;
    printf(
        "\ncold compiles one by one against one pooled call, ms (tk_precompile: LLVM + ptxas)\n\n"
        "| %-48s | cores | one by one | pooled |\n|%s|-------|---------|---------|\n",
        "kernels", "--------------------------------------------------");
    build_fn three[] = {gemm_large, gemm_default, attn128_wgmma}, bwd[] = {bwd_dq, bwd_dkdv};
    pool("GEMM 8192² + GEMM default + attention D128 wgmma", three, 3, R < 3 ? R : 3);
    pool("attention backward D128 causal wgmma (dQ, dK/dV)", bwd, 2, R < 3 ? R : 3);
    return 0;
}
