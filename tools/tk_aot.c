/* tk-aot: precompiles named ready-made specializations for an arch into a
 * disk cache directory through ptxas, on a machine without a GPU. The
 * directory is a kernel pack (its manifest names the ptxas): a GPU machine
 * given it in TK_KERNEL_PACKS loads them with zero compiles and no ptxas of
 * its own, as does one using it as its disk cache with the same ptxas
 * (docs/DESIGN.md, "Shipping a kernel cache"). The install runs
 * `tk-aot all` into the library's installed pack.
 *   tk-aot [-a ARCH] [-d DIR] [--require-cached] SPEC...
 * SPEC:
 *   gemm:<in>:<out>:<ab|abt>:<auto|default>   in: bf16|f16, out: bf16|f16|f32;
 *       auto: every block shape tk_gemm picks on ARCH (small, default and
 *       large problems), default: tk_gemm_default_config
 *   attention:<bf16|f16>:<64|128|256>:<causal|full>[:wgmma]
 *   attention_bwd:<bf16|f16>:<64|128>:<causal|full>:<det|fast>[:wgmma][:varlen]
 *       every kernel of one tk_attention_backward mode (det: dQ and dK/dV;
 *       fast: the prep, fused and convert kernels)
 *   all    every GEMM (auto), attention and attention backward specialization
 *       (dense: varlen is named)
 * ARCH defaults to sm_90a, DIR to the default cache (TK_CACHE_DIR, ...).
 * --require-cached: fail when any kernel had to be compiled (a check that a
 * shipped directory is complete). Exit status 0 when every kernel is in DIR.
 * --load: on the machine the kernels are for, load each through this GPU's
 * driver (tk_compile) with DIR as a kernel pack and no disk cache, and say
 * where each came from: the deployment side of the round trip (with
 * --require-cached: fail unless every one came from DIR, none compiled).
 * ARCH must then be the GPU's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

enum { MAXK = 256 };

typedef struct aot {
    tk_ctx *ctx;
    const char *arch;
    tk_kernel *ks[MAXK];
    int n;
} aot;

static int dtype_of(const char *s, tk_dtype *dt) {
    static const struct {
        const char *name;
        tk_dtype dt;
    } t[] = {{"bf16", TK_BF16}, {"f16", TK_F16}, {"f32", TK_F32}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name)) return *dt = t[i].dt, 0;
    return -1;
}

/* Adds k unless an equal kernel (same printed text) is there already. */
static int add(aot *a, tk_kernel *k) {
    char *t1 = NULL, *t2 = NULL;
    tk_kernel_print(k, &t1);
    for (int i = 0; i < a->n && t1; i++) {
        tk_kernel_print(a->ks[i], &t2);
        int same = t2 && !strcmp(t1, t2);
        tk_free(t2);
        if (same) return tk_free(t1), tk_kernel_destroy(k), 0;
    }
    tk_free(t1);
    if (a->n == MAXK) return fprintf(stderr, "tk-aot: more than %d kernels\n", MAXK), -1;
    a->ks[a->n++] = k;
    return 0;
}

static int add_gemm(aot *a, tk_gemm_config c) {
    tk_kernel *k;
    if (tk_gemm_build(a->ctx, &c, &k))
        return fprintf(stderr, "tk-aot: %s\n", tk_ctx_error(a->ctx)), -1;
    return add(a, k);
}

static int gemm(aot *a, tk_dtype in, tk_dtype out, int tb, const char *how) {
    if (!strcmp(how, "default")) return add_gemm(a, tk_gemm_default_config(in, out, tb));
    if (strcmp(how, "auto")) return -1;
    /* tk_gemm_config_for's size classes (M, N) */
    static const int64_t sizes[4][2] = {{512, 512}, {512, 4096}, {2048, 2048}, {8192, 8192}};
    for (int i = 0; i < 4; i++)
        if (add_gemm(a, tk_gemm_config_for(in, out, tb, sizes[i][0], sizes[i][1], a->arch)))
            return -1;
    return 0;
}

static int attention(aot *a, tk_dtype dt, int d, int causal, int wgmma) {
    tk_attention_config c = {.dtype = dt, .head_dim = d, .causal = causal, .wgmma = wgmma};
    tk_kernel *k;
    if (tk_attention_fwd_build(a->ctx, &c, &k))
        return fprintf(stderr, "tk-aot: %s\n", tk_ctx_error(a->ctx)), -1;
    return add(a, k);
}

/* The kernels of one backward call in `fast` or deterministic mode. */
static int attention_bwd(aot *a, tk_dtype dt, int d, int causal, int fast, int wgmma, int varlen) {
    static const int det[] = {TK_ATTN_BWD_DQ, TK_ATTN_BWD_DKDV},
                     fst[] = {TK_ATTN_BWD_PREP, TK_ATTN_BWD_FUSED, TK_ATTN_BWD_CONVERT};
    for (int i = 0; i < (fast ? 3 : 2); i++) {
        tk_attention_bwd_config c = {.dtype = dt,
                                     .head_dim = d,
                                     .causal = causal,
                                     .part = fast ? fst[i] : det[i],
                                     .wgmma = wgmma,
                                     .varlen = varlen};
        tk_kernel *k;
        if (tk_attention_bwd_build(a->ctx, &c, &k))
            return fprintf(stderr, "tk-aot: %s\n", tk_ctx_error(a->ctx)), -1;
        if (add(a, k)) return -1;
    }
    return 0;
}

static int all(aot *a) {
    static const tk_dtype in[2] = {TK_BF16, TK_F16}, out[3] = {TK_BF16, TK_F16, TK_F32};
    for (int i = 0; i < 2; i++) {
        for (int o = 0; o < 3; o++)
            for (int tb = 0; tb < 2; tb++)
                if (gemm(a, in[i], out[o], tb, "auto")) return -1;
        for (int d = 64; d <= 128; d += 64)
            for (int c = 0; c < 2; c++)
                if (attention(a, in[i], d, c, 0)) return -1;
        for (int d = 64; d <= 256 && !strcmp(a->arch, "sm_90a"); d *= 2) /* the Hopper kernel */
            for (int c = 0; c < 2; c++)
                if (attention(a, in[i], d, c, 1)) return -1;
        for (int wg = 0; wg <= !strcmp(a->arch, "sm_90a"); wg++)
            for (int d = 64; d <= 128; d += 64)
                for (int c = 0; c < 4; c++) /* causal, then fast */
                    if (attention_bwd(a, in[i], d, c & 1, c >> 1, wg, 0)) return -1;
    }
    return 0;
}

/* attention_bwd's n (5..8) fields after its name: dtype, D, causal|full,
 * det|fast, then wgmma and varlen in any order. */
static int bwd_spec(aot *a, char **f, int n) {
    tk_dtype dt;
    int wgmma = 0, varlen = 0;
    for (int i = 5; i < n; i++) {
        if (!strcmp(f[i], "wgmma") && !wgmma)
            wgmma = 1;
        else if (!strcmp(f[i], "varlen") && !varlen)
            varlen = 1;
        else
            return -1;
    }
    if (dtype_of(f[1], &dt) || (strcmp(f[2], "64") && strcmp(f[2], "128")) ||
        (strcmp(f[3], "causal") && strcmp(f[3], "full")) ||
        (strcmp(f[4], "det") && strcmp(f[4], "fast")))
        return -1;
    return attention_bwd(a, dt, atoi(f[2]), !strcmp(f[3], "causal"), !strcmp(f[4], "fast"), wgmma,
                         varlen);
}

static int spec(aot *a, const char *s) {
    char buf[128], *f[8] = {0};
    int n = 0;
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) {
        fprintf(stderr, "tk-aot: \"%.40s...\" is too long for a spec\n", s);
        return -1;
    }
    for (char *p = strtok(buf, ":"); p; p = strtok(NULL, ":"), n++)
        if (n < 8) f[n] = p; /* n > 8: more fields than any spec has, read as bad below */
    tk_dtype in, out;
    if (n == 1 && !strcmp(f[0], "all")) return all(a);
    if (n == 5 && !strcmp(f[0], "gemm") && !dtype_of(f[1], &in) && !dtype_of(f[2], &out) &&
        (!strcmp(f[3], "ab") || !strcmp(f[3], "abt")) &&
        !gemm(a, in, out, !strcmp(f[3], "abt"), f[4]))
        return 0;
    if ((n == 4 || (n == 5 && !strcmp(f[4], "wgmma"))) && !strcmp(f[0], "attention") &&
        !dtype_of(f[1], &in) &&
        (!strcmp(f[2], "64") || !strcmp(f[2], "128") || !strcmp(f[2], "256")) &&
        (!strcmp(f[3], "causal") || !strcmp(f[3], "full")))
        return attention(a, in, atoi(f[2]), !strcmp(f[3], "causal"), n == 5);
    if (n >= 5 && n <= 8 && !strcmp(f[0], "attention_bwd") && !bwd_spec(a, f, n)) return 0;
    fprintf(stderr, "tk-aot: cannot read \"%s\" (see the usage)\n", s);
    return -1;
}

/* --load: each kernel through tk_compile on this machine's GPU, DIR a pack
 * and the disk cache off, so that a kernel DIR lacks is compiled (counted). */
static int load(aot *a, const char *dir, int require) {
    char arch[16] = "";
    if (tk_gpu_arch(a->ctx, arch, sizeof arch)) {
        fprintf(stderr, "tk-aot --load: %s\n", tk_ctx_error(a->ctx));
        return 1;
    }
    if (strcmp(arch, a->arch)) {
        fprintf(stderr, "tk-aot --load: the GPU is %s, not -a %s\n", arch, a->arch);
        return 1;
    }
    if (!dir || tk_cache_set_dir(a->ctx, NULL) || tk_cache_add_pack(a->ctx, dir)) {
        fprintf(stderr, "tk-aot --load: %s\n", dir ? tk_ctx_error(a->ctx) : "-d DIR is needed");
        return 1;
    }
    int compiled = 0;
    for (int k = 0; k < a->n; k++) {
        tk_program *p;
        if (tk_compile(a->ctx, a->ks[k], &p)) {
            fprintf(stderr, "tk-aot --load: %s\n", tk_ctx_error(a->ctx));
            return 1;
        }
        tk_origin o = tk_program_origin(p);
        compiled += o == TK_FROM_COMPILE;
        printf("%s %s\n", tk_kernel_name(a->ks[k]), o == TK_FROM_COMPILE ? "compiled" : "loaded");
        tk_program_release(p);
    }
    printf("tk-aot --load: %d kernels for %s: %d loaded from %s, %d compiled\n", a->n, arch,
           a->n - compiled, dir, compiled);
    return require && compiled ? 1 : 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int usage(void) {
    fprintf(stderr, "usage: tk-aot [-a ARCH] [-d DIR] [--require-cached] [--load] SPEC...\n"
                    "  SPEC: gemm:<bf16|f16>:<bf16|f16|f32>:<ab|abt>:<auto|default>\n"
                    "        attention:<bf16|f16>:<64|128|256>:<causal|full>[:wgmma]\n"
                    "          (wgmma: the Hopper kernel, sm_90a; 256 needs it)\n"
                    "        attention_bwd:<bf16|f16>:<64|128>:<causal|full>:<det|fast>"
                    "[:wgmma][:varlen]\n"
                    "        all\n");
    return 2;
}

int main(int argc, char **argv) {
    aot a = {.arch = "sm_90a"};
    const char *dir = NULL;
    int require = 0, loading = 0, rc = 1, i = 1;
    if (tk_ctx_create(&a.ctx)) return 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-a") && i + 1 < argc)
            a.arch = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--require-cached"))
            require = 1;
        else if (!strcmp(argv[i], "--load"))
            loading = 1;
        else
            return tk_ctx_destroy(a.ctx), usage();
    }
    if (i == argc) return tk_ctx_destroy(a.ctx), usage();
    for (; i < argc; i++)
        if (spec(&a, argv[i])) goto done;
    if (loading) {
        rc = load(&a, dir, require);
        goto done;
    }
    if (dir && tk_cache_set_dir(a.ctx, dir)) goto done;
    tk_cache_stats st;
    double t0 = now_ms();
    tk_status s = tk_precompile(a.ctx, (const tk_kernel *const *)a.ks, a.n, a.arch);
    double ms = now_ms() - t0;
    tk_cache_stats_get(a.ctx, &st);
    for (int k = 0; k < a.n; k++) printf("%s\n", tk_kernel_name(a.ks[k]));
    printf("tk-aot: %d kernels for %s in %s: %llu compiled, %llu already there (%.0f ms; "
           "LLVM %.0f ms, ptxas %.0f ms summed over threads)\n",
           a.n, a.arch, tk_cache_dir(a.ctx) ? tk_cache_dir(a.ctx) : "(none)",
           (unsigned long long)st.misses, (unsigned long long)st.disk_hits, ms, st.llvm_ms,
           st.ptx_to_cubin_ms);
    if (s != TK_OK) {
        fprintf(stderr, "tk-aot: %s\n", tk_ctx_error(a.ctx));
        goto done;
    }
    if (require && st.misses) {
        fprintf(stderr, "tk-aot: %llu kernels were not in the cache\n",
                (unsigned long long)st.misses);
        goto done;
    }
    rc = 0;
done:
    for (int k = 0; k < a.n; k++) tk_kernel_destroy(a.ks[k]);
    tk_ctx_destroy(a.ctx);
    return rc;
}
