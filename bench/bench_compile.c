/* Cold compile time on the CPU, stage by stage, for GEMM and attention D128
 * on sm_90a: IR build, LLVM module build, verifier, O3 pipeline, PTX
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

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void stages(tk_ctx *ctx, const char *name, build_fn build, const tk_ptxas *px, int R) {
    double ir[64], b[64], v[64], o[64], e[64], pt[64];
    int nl = 0;
    for (int r = 0; r < R; r++) {
        tk_kernel *k = NULL;
        double t0 = bench_now_ms();
        if (build(ctx, &k)) {
            printf("%s: %s\n", name, tk_ctx_error(ctx));
            return;
        }
        ir[r] = bench_now_ms() - t0;
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
    printf("| %-30s | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %5d |\n", name, mi,
           mb, mv, mo, me, mp, mi + mb + mv + mo + me + (mp > 0 ? mp : 0), nl);
}

/* n specializations precompiled one call each, then in one call. */
static void pool(int R) {
    build_fn fns[4] = {gemm_large, gemm_default, attn128, NULL};
    tk_ctx *ctx;
    tk_ctx_create(&ctx);
    tk_kernel *ks[3];
    for (int i = 0; i < 3; i++) fns[i](ctx, &ks[i]);
    double one[16], all[16];
    for (int r = 0; r < R && r < 16; r++) {
        char d1[] = "/tmp/tk-bench-pre-XXXXXX", d2[] = "/tmp/tk-bench-pre-XXXXXX";
        if (!mkdtemp(d1) || !mkdtemp(d2)) return;
        tk_cache_set_dir(ctx, d1);
        double t0 = bench_now_ms();
        for (int i = 0; i < 3; i++)
            if (tk_precompile(ctx, (const tk_kernel *const *)&ks[i], 1, "sm_90a")) {
                printf("precompile: %s\n", tk_ctx_error(ctx));
                return;
            }
        one[r] = bench_now_ms() - t0;
        tk_cache_set_dir(ctx, d2);
        t0 = bench_now_ms();
        tk_precompile(ctx, (const tk_kernel *const *)ks, 3, "sm_90a");
        all[r] = bench_now_ms() - t0;
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s %s", d1, d2);
        if (system(cmd)) {}
    }
    int n = R < 16 ? R : 16;
    printf("\ntk_precompile of 3 kernels (GEMM large, GEMM default, attention D128), %ld cores: "
           "one call each %.0f ms, one call (thread pool) %.0f ms\n",
           sysconf(_SC_NPROCESSORS_ONLN), bench_median(one, n), bench_median(all, n));
    for (int i = 0; i < 3; i++) tk_kernel_destroy(ks[i]);
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
    printf("| %-30s | %6s | %6s | %6s | %6s | %6s | %6s | %6s | %5s |\n", "kernel", "IR", "module",
           "verify", "O3", "emit", "ptxas", "total", "PTX lines");
    printf("|%s|--------|--------|--------|--------|--------|--------|--------|-------|\n",
           "--------------------------------");
    stages(ctx, "GEMM 128x256x128 w8 tma (8192²)", gemm_large, have ? &px : NULL, R);
    stages(ctx, "GEMM 128x128x64 w4 (default)", gemm_default, have ? &px : NULL, R);
    stages(ctx, "attention bf16 D128", attn128, have ? &px : NULL, R);
    tk_ctx_destroy(ctx);
    if (have) pool(R < 3 ? R : 3);
    return 0;
}
