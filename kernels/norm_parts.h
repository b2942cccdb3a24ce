/* The normalization kernels' launches as tk_norm_forward / tk_norm_backward
 * make them (kernels/norm_run.c): each kernel's config and arguments from
 * checked parameters, so the interpreter tests run exactly the calls the GPU
 * gets (tests/test_norm.c). */
#ifndef TK_KERNELS_NORM_PARTS_H
#define TK_KERNELS_NORM_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_NORM_MAX_ARGS 10

/* One kernel launch: which kernel (its config) and its arguments. */
typedef struct tk_norm_launch {
    tk_norm_config cfg;
    int n;
    tk_arg args[TK_NORM_MAX_ARGS];
} tk_norm_launch;

/* The forward: one launch (rows 0: none). Returns the count. */
int tk_norm_fwd_launches(const tk_norm_params *p, tk_norm_launch out[1]);
/* The backward: the kernel, then one reduction for dweight and one for
 * dbias where wanted (rows 0: none). Returns the count. */
int tk_norm_bwd_launches(const tk_norm_bwd_params *p, tk_norm_launch out[3]);

#endif
