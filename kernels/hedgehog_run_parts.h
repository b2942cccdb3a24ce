/* The Hedgehog kernel's launches as tk_hedgehog_forward makes them
 * (kernels/hedgehog_run.c): the config and arguments from checked
 * parameters, so the interpreter tests run exactly the calls the GPU gets
 * (tests/test_hedgehog.c). */
#ifndef TK_KERNELS_HEDGEHOG_RUN_PARTS_H
#define TK_KERNELS_HEDGEHOG_RUN_PARTS_H

#include <stddef.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_HEDGEHOG_MAX_ARGS     12
#define TK_HEDGEHOG_MAX_LAUNCHES 1 /* the forward */

typedef struct tk_hedgehog_launch {
    tk_hedgehog_config cfg; /* resolved: v_cols and warps set */
    int n;
    tk_arg args[TK_HEDGEHOG_MAX_ARGS];
} tk_hedgehog_launch;

/* The configuration the forward runs for checked parameters on a GPU whose
 * blocks have `smem_max` bytes of shared memory: p's v_cols and warps, or
 * (where 0) the defaults, smaller until it fits. */
tk_hedgehog_config tk_hedgehog_config_of(const tk_hedgehog_params *p, size_t smem_max);
/* The forward's launches for checked parameters (smem_max as above).
 * Returns the count. */
int tk_hedgehog_fwd_launches(const tk_hedgehog_params *p, size_t smem_max,
                             tk_hedgehog_launch out[TK_HEDGEHOG_MAX_LAUNCHES]);

#endif
