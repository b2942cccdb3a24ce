/* The cross-entropy launches as tk_cross_entropy makes them
 * (kernels/xent_run.c): each kernel's config and arguments from checked
 * parameters, so the interpreter tests run exactly the calls the GPU gets
 * (tests/test_xent.c). */
#ifndef TK_KERNELS_XENT_PARTS_H
#define TK_KERNELS_XENT_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_XENT_MAX_ARGS 12

/* One kernel launch: which kernel (its config) and its arguments. */
typedef struct tk_xent_launch {
    tk_xent_config cfg;
    int n;
    tk_arg args[TK_XENT_MAX_ARGS];
} tk_xent_launch;

/* The row kernel (none for rows 0), then the mean's (with loss_mean), from
 * parameters tk_cross_entropy accepted. Returns the count. */
int tk_xent_launches(const tk_xent_params *p, tk_xent_launch out[2]);

/* The row kernel's config the run API picks for p (p->config's shape, or
 * the default for the dtype and vocab). */
tk_xent_config tk_xent_rows_config(const tk_xent_params *p);

#endif
