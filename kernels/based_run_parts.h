/* The Based kernels' launches as tk_based_forward makes them
 * (kernels/based_run.c): the config and arguments from checked parameters,
 * so the interpreter tests run exactly the calls the GPU gets
 * (tests/test_based.c). */
#ifndef TK_KERNELS_BASED_RUN_PARTS_H
#define TK_KERNELS_BASED_RUN_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_BASED_MAX_ARGS 12

typedef struct tk_based_launch {
    tk_based_config cfg;
    int n;
    tk_arg args[TK_BASED_MAX_ARGS];
} tk_based_launch;

/* The forward's launch for checked parameters. */
void tk_based_fwd_launch(const tk_based_params *p, tk_based_launch *l);
/* The backward's launches, in order ([PREP], DQ, DKV, SUM dq, SUM dk),
 * for checked parameters with a workspace. Returns the count. */
int tk_based_bwd_launches(const tk_based_bwd_params *p, tk_based_launch out[5]);

#endif
