/* Parameter checks the run entry points share (kernels/run_checks.c): each
 * returns TK_OK or sets the context's error, naming the call (fn) and the
 * field, and returns TK_ERR_INVALID_ARG. */
#ifndef TK_KERNELS_RUN_CHECKS_H
#define TK_KERNELS_RUN_CHECKS_H

#include <stdint.h>

#include "tk/tk.h"

/* The largest element offset the kernels' i64 address math may reach. */
#define TK_RUN_MAX_OFFSET ((int64_t)1 << 60)

/* The SMs of ctx's GPU, or an H100's / H200's 132 without one (the plans
 * that size grids by it then match what a test's interpreter runs). */
int tk_run_sm_count(tk_ctx *ctx);
/* Both biases or neither (q's and k's, named bq and bk). */
tk_status tk_run_check_bias_pair(tk_ctx *ctx, const char *fn, const void *bq, const void *bk);
/* 1 <= v <= max. */
tk_status tk_run_check_size(tk_ctx *ctx, const char *fn, const char *name, int64_t v, int64_t max);
/* 0 (the library's default) or finite and > 0. */
tk_status tk_run_check_scalar(tk_ctx *ctx, const char *fn, const char *name, float v);
/* Strides of a rank-`rank` tensor of dims: all 0 (dense), or >= 0 with
 * the last one 1 when rank is 4 (the dim stride) and every element's offset
 * below TK_RUN_MAX_OFFSET. */
tk_status tk_run_check_strides(tk_ctx *ctx, const char *fn, const char *name, int rank,
                               const int64_t *st, const int64_t *dims);

#endif
