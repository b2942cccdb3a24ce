/* The optimizer step's launches as tk_grad_norm / tk_adamw make them
 * (kernels/adamw_run.c): each kernel's config and arguments from checked
 * parameters, so the interpreter tests run exactly the calls the GPU gets
 * (tests/test_adamw.c). */
#ifndef TK_KERNELS_ADAMW_PARTS_H
#define TK_KERNELS_ADAMW_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_ADAMW_MAX_ARGS 14

/* One kernel launch: which kernel (its config) and its arguments. */
typedef struct tk_adamw_launch {
    tk_adamw_config cfg;
    int n;
    tk_arg args[TK_ADAMW_MAX_ARGS];
} tk_adamw_launch;

/* The flat buffers' rows: `rows` full rows of `width`, then `tail`
 * elements (0: none). */
typedef struct tk_adamw_rows {
    int64_t width, rows, tail;
} tk_adamw_rows;

tk_adamw_rows tk_adamw_rows_of(int64_t n, int64_t width);
/* The norm's partial rows: one per 16 full rows, one for the tail. */
int64_t tk_grad_norm_partials(tk_adamw_rows r);

/* The norm: SUMSQ over the full rows and over the tail (each where there
 * is one), then NORM. Returns the count. */
int tk_grad_norm_launches(const tk_grad_norm_params *p, tk_adamw_launch out[3]);
/* The step: STEP over the full rows and over the tail. Returns the count. */
int tk_adamw_launches(const tk_adamw_params *p, tk_adamw_launch out[2]);

#endif
