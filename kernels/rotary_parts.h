/* The rotary kernels' launches as tk_rotary makes them (kernels/rotary_run.c):
 * each launch's config and arguments from checked parameters, so the
 * interpreter tests run exactly the calls the GPU gets (tests/test_rotary.c). */
#ifndef TK_KERNELS_ROTARY_PARTS_H
#define TK_KERNELS_ROTARY_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_ROTARY_MAX_ARGS 6

/* One kernel launch: which kernel (its config) and its arguments. */
typedef struct tk_rotary_launch {
    tk_rotary_config cfg;
    int n;
    tk_arg args[TK_ROTARY_MAX_ARGS];
} tk_rotary_launch;

/* q's launch, then k's when p->k is set. Returns the count. */
int tk_rotary_launches(const tk_rotary_params *p, tk_rotary_launch out[2]);

#endif
