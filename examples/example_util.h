/* What the guide's examples (softmax.c, layernorm.c, gemm_bias_relu.c) share,
 * so that each file shows its kernel and its reference and little else:
 * fresh random inputs, NaN-poisoned outputs, one run on the CPU interpreter
 * or the GPU, the relative error ‖out − ref‖/‖ref‖, and `--ptx FILE`.
 *
 * A header of static functions: CMake builds every .c file in examples/ as its own
 * program, so shared code cannot be a .c file there. */
#ifndef TK_EXAMPLE_UTIL_H
#define TK_EXAMPLE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"

/* Finishes k; on failure prints its error and destroys it: the built kernel
 * or NULL, for a build function to return. */
static inline tk_kernel *ex_finish(tk_kernel *k) {
    if (!tk_kernel_finish(k)) return k;
    fprintf(stderr, "%s: %s\n", tk_kernel_name(k), tk_kernel_error(k));
    tk_kernel_destroy(k);
    return NULL;
}

/* Command line: `--ptx FILE` writes the kernel's PTX for `--arch` (sm_90a)
 * to FILE, for `ptxas -arch=sm_90a -v FILE`; `--interp` stays on the
 * interpreter even where there is a GPU. */
typedef struct ex_opts {
    const char *ptx_file, *arch;
    int interp_only;
} ex_opts;

static inline int ex_parse(int argc, char **argv, ex_opts *o) {
    *o = (ex_opts){.arch = "sm_90a"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ptx") && i + 1 < argc)
            o->ptx_file = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            o->arch = argv[++i];
        else if (!strcmp(argv[i], "--interp"))
            o->interp_only = 1;
        else
            return 0;
    }
    return 1;
}

/* Uniform random floats in [lo, hi), rounded to bf16. */
static inline void ex_fill_bf16(uint16_t *p, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        p[i] = tk_f32_to_bf16(lo + (hi - lo) * (float)rand() / (float)RAND_MAX);
}

/* malloc that cannot return NULL (an example has nothing better to do). */
static inline void *ex_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* An output buffer of NaNs (every bf16/f16/f32 all-ones pattern is a NaN):
 * an element the kernel forgets to write shows up in the error. */
static inline void *ex_poisoned(size_t bytes) { return memset(ex_alloc(bytes), 0xff, bytes); }

static inline size_t ex_arg_bytes(const tk_arg *a) {
    size_t n = tk_dtype_size(a->dtype);
    for (int d = 0; d < a->rank; d++) n *= (size_t)a->dims[d];
    return n;
}

/* Runs finished kernel k on host tensors (dense, as tk_arg_tensor makes
 * them): on the interpreter, or with gpu = 1 through tk_compile/tk_launch,
 * copying every tensor to the device and back. */
static inline tk_status ex_run(tk_ctx *ctx, const tk_kernel *k, int gpu, int n,
                               const tk_arg *args) {
    if (!gpu) return tk_interp_run(k, n, args);
    tk_arg dev[8];
    void *d[8] = {0};
    tk_program *prog = NULL;
    tk_status s = n > 8 ? TK_ERR_INVALID_ARG : tk_compile(ctx, k, &prog);
    for (int i = 0; i < n && !s; i++) {
        dev[i] = args[i];
        if (args[i].kind != TK_KIND_GVIEW) continue;
        size_t bytes = ex_arg_bytes(&args[i]);
        if (!(s = tk_gpu_alloc(ctx, bytes, &d[i])))
            s = tk_gpu_upload(ctx, d[i], args[i].data, bytes);
        dev[i].data = d[i];
    }
    if (!s) s = tk_launch(prog, n, dev, NULL);
    if (!s) s = tk_gpu_sync(ctx);
    for (int i = 0; i < n && !s; i++)
        if (d[i]) s = tk_gpu_download(ctx, args[i].data, d[i], ex_arg_bytes(&args[i]));
    for (int i = 0; i < n; i++)
        if (d[i]) tk_gpu_free(ctx, d[i]);
    tk_program_release(prog);
    return s;
}

/* Emits k's PTX for o->arch, which proves the lowering on any machine, and
 * writes it to o->ptx_file when one was asked for. */
static inline int ex_emit_ptx(tk_ctx *ctx, const tk_kernel *k, const ex_opts *o) {
    char *ptx = NULL;
    tk_status s = tk_emit_ptx(ctx, k, o->arch, &ptx);
    if (s) {
        fprintf(stderr, "tk_emit_ptx: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
        return 0;
    }
    printf("%s: PTX for %s, %zu bytes\n", tk_kernel_name(k), o->arch, strlen(ptx));
    int ok = 1;
    if (o->ptx_file) {
        FILE *f = fopen(o->ptx_file, "w");
        ok = f && fputs(ptx, f) >= 0;
        ok = f && !fclose(f) && ok;
        if (!ok) fprintf(stderr, "cannot write %s\n", o->ptx_file);
    }
    tk_free(ptx);
    return ok;
}

/* ‖got − ref‖² and ‖ref‖², summed element by element. */
typedef struct ex_err {
    double d2, r2;
} ex_err;

static inline void ex_err_add(ex_err *e, double got, double ref) {
    e->d2 += (got - ref) * (got - ref);
    e->r2 += ref * ref;
}

/* ‖got − ref‖/‖ref‖ (‖got − ref‖ when ref is all zeros): NaN when any
 * output was NaN (never written), so that `!(err <= tol)` fails it. */
static inline double ex_err_rel(ex_err e) { return e.r2 > 0 ? sqrt(e.d2 / e.r2) : sqrt(e.d2); }

/* Whether to run on the GPU too (the interpreter always runs): one is there
 * and --interp was not given. Says so when not. */
static inline int ex_use_gpu(tk_ctx *ctx, const ex_opts *o) {
    if (o->interp_only) {
        printf("--interp: running on the CPU interpreter only\n");
        return 0;
    }
    if (tk_gpu_init(ctx) == TK_OK) return 1;
    printf("no GPU (%s): running on the CPU interpreter only\n", tk_ctx_error(ctx));
    return 0;
}

/* A row-wise example's check of one R x C run (interpreter, or gpu = 1). */
typedef int (*ex_check_rc)(tk_ctx *ctx, const tk_kernel *k, int gpu, int64_t R, int64_t C);

/* The shapes a row-wise example runs: `small` (R, C pairs) on the
 * interpreter, then `big` on the GPU when gpu; stops at the first failure. */
static inline int ex_check_shapes(tk_ctx *ctx, const tk_kernel *k, int gpu, ex_check_rc check,
                                  const int64_t (*small)[2], int nsmall, const int64_t (*big)[2],
                                  int nbig) {
    int ok = 1;
    for (int i = 0; ok && i < nsmall; i++) ok = check(ctx, k, 0, small[i][0], small[i][1]);
    for (int i = 0; ok && gpu && i < nbig; i++) ok = check(ctx, k, 1, big[i][0], big[i][1]);
    return ok;
}

#endif
