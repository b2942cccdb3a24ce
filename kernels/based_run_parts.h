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

/* [PREP], FWD and DKV state passes, DQ, DKV, SUM dq, SUM dk */
#define TK_BASED_MAX_LAUNCHES 7

/* The forward's launches for checked parameters on a GPU of `sms` SMs
 * ([the state pass], the forward). Returns the count. */
int tk_based_fwd_launches(const tk_based_params *p, int sms,
                          tk_based_launch out[TK_BASED_MAX_LAUNCHES]);
/* The backward's launches, in order ([PREP], [FWD state pass], DQ, [DKV
 * state pass], DKV, SUM dq, SUM dk), for checked parameters with a
 * workspace. Returns the count. */
int tk_based_bwd_launches(const tk_based_bwd_params *p, int sms,
                          tk_based_launch out[TK_BASED_MAX_LAUNCHES]);

#endif
