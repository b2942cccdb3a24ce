/* One tk_gemm call of the GEMM tests (test_gemm_epilogue.c,
 * test_gemm_splitk.c) from case to verdict: its sizes, dtypes and options,
 * the kernel that runs it (the library's choice or a forced block shape),
 * host tensors with padded rows and NaN-poisoned outputs, their device
 * copies, and the float64 check of C (and GELU's Aux) on sampled rows; plus
 * the suite both programs build (an "interp", a "checks" and a "gpu" TCase
 * in a scratch directory) and the error checks of their "checks" cases.
 * What differs between them (one run, or a split run twice with a
 * workspace) stays in each test. */
#ifndef TK_TEST_GEMM_CASE_H
#define TK_TEST_GEMM_CASE_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk/tk.h"
#include "tk/tk_run.h"
#include "util/ref.h"

/* Shorthands that keep a case table's row on one line. */
enum { NONE = TK_GEMM_ACT_NONE, GELU = TK_GEMM_ACT_GELU, DGELU = TK_GEMM_ACT_DGELU };
#define BF  TK_BF16
#define HF  TK_F16
#define F32 TK_F32

/* One call: sizes, dtypes and options, in the order of the case tables:
 * {M, N, K, in, out, ta, tb, bias, act, aux, acc, in_place, S}. */
typedef struct tu_gemm_case {
    int64_t M, N, K;
    tk_dtype in, out;
    int ta, tb, bias, act, aux, acc;
    int in_place; /* DGELU with Aux read from C's own buffer */
    int S;        /* split_k: 0 the library's choice (no split without a workspace) */
} tu_gemm_case;

/* Which kernel runs it: the library's choice or a forced config; the wgmma
 * ones (TU_K_WGMMA and after) need sm_90a. */
enum {
    TU_K_AUTO,
    TU_K_MMA,
    TU_K_MMA_SMALL,
    TU_K_WGMMA,
    TU_K_WGMMA_MID,
    TU_K_WGMMA_ONE,
    TU_K_COUNT
};
extern const char *const tu_gemm_kernel_names[TU_K_COUNT];

/* The config of kernel `which` for e in *c (e's options and split); false
 * for TU_K_AUTO, which leaves the choice to the library. */
bool tu_gemm_kernel_cfg(int which, const tu_gemm_case *e, tk_gemm_config *c);
/* "bf16->f32 AtB 70x90x300 S3 acc [mma 128x128]" into buf (n bytes). */
void tu_gemm_describe(char *buf, size_t n, const tu_gemm_case *e, int which);

/* ---- Host tensors and their device copies -------------------------------- */
/* A, B, C, bias and Aux (aux and not in place) of a call, random inputs in
 * their dtype, outputs NaN-poisoned (an element never written fails). */
typedef struct tu_gemm_host {
    ref_tensor a, b, c, bias, aux;
    double *c_old, *aux_in;      /* C before the call (accumulate), Aux given (DGELU) */
    void *before_c, *before_aux; /* the bytes before the call (stray writes, reruns) */
} tu_gemm_host;

/* pad: elements after each row of A, B and C; aux_pad: after Aux's (a pitch
 * other than C's tests ldaux). */
void tu_gemm_host_make(const tu_gemm_case *e, int64_t pad, int64_t aux_pad, tu_gemm_host *h);
void tu_gemm_host_free(tu_gemm_host *h);

/* Device copies of a call's tensors (aux is c in place) and its workspace. */
typedef struct tu_gemm_dev {
    void *a, *b, *c, *bias, *aux, *ws;
    size_t ws_bytes;
} tu_gemm_dev;

/* Uploads h's tensors; no workspace (the split test sizes its own). */
tu_gemm_dev tu_gemm_dev_in(tk_ctx *ctx, const tu_gemm_case *e, const tu_gemm_host *h);
void tu_gemm_dev_free(tk_ctx *ctx, tu_gemm_dev *d);
/* e's params on d's buffers with h's pitches; cfg NULL: the library's choice
 * (and e->S in the params, which a config would decide instead). */
tk_gemm_params tu_gemm_case_params(const tu_gemm_case *e, const tu_gemm_host *h,
                                   const tu_gemm_dev *d, const tk_gemm_config *cfg);
/* Runs tk_gemm on d (a failure fails the test), then downloads C and Aux
 * into h. */
void tu_gemm_case_run(tk_ctx *ctx, const tu_gemm_case *e, const tk_gemm_config *cfg,
                      tu_gemm_host *h, const tu_gemm_dev *d);

/* h's C (and GELU's Aux) against float64 on every step-th row and the last:
 * no NaN, rel err within the out dtype's tolerance, nothing written outside
 * the rows' elements; `what` names the call in the messages. */
void tu_gemm_case_expect(const char *what, const tu_gemm_case *e, const tu_gemm_host *h,
                         int64_t step);

/* ---- "checks" --------------------------------------------------------------- */
/* tk_gemm and tk_gemm_prepare both refuse p with `want`, naming `frag`. */
void tu_gemm_expect_err(tk_ctx *ctx, tk_gemm_params p, tk_status want, const char *frag);
/* tk_gemm_build refuses c as an invalid argument, naming `frag`, and
 * returns no kernel. */
void tu_gemm_expect_build_err(tk_ctx *ctx, const tk_gemm_config *c, const char *frag);

/* ---- The suite ------------------------------------------------------------ */
enum { TU_TC_INTERP, TU_TC_CHECKS, TU_TC_GPU, TU_TC_COUNT };

/* Makes the scratch directory <tag> for the program's caches and a suite
 * `name` with TCases in tc: "interp" (900 s), "checks" (120 s, with the n
 * tests `checks`) and "gpu" (900 s, a fresh GPU context each test, see
 * tu_gemm_gpu); the caller adds the loop tests. NULL after printing why
 * when the directory cannot be made (main then fails). */
Suite *tu_gemm_suite(const char *name, const char *tag, const TTest *const *checks, size_t n,
                     TCase *tc[TU_TC_COUNT]);
/* Runs s, removes the scratch directory; main's exit status. */
int tu_gemm_suite_run(Suite *s);
/* The "gpu" TCase's context for case i on kernel `which`, or NULL (the test
 * then passes) after one line: no GPU, or a wgmma kernel on one not sm_90a. */
tk_ctx *tu_gemm_gpu(int i, int which);

#endif
