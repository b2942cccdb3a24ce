/* The Hedgehog kernel's launches as tk_hedgehog_forward makes them
 * (kernels/hedgehog_run.c): the config and arguments from checked
 * parameters, so the interpreter tests run exactly the calls the GPU gets
 * (tests/test_hedgehog.c). */
#ifndef TK_KERNELS_HEDGEHOG_RUN_PARTS_H
#define TK_KERNELS_HEDGEHOG_RUN_PARTS_H

#include <stddef.h>

#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_HEDGEHOG_MAX_ARGS     12
#define TK_HEDGEHOG_MAX_LAUNCHES 13 /* the backward's (the forward: 1 to 4) */

typedef struct tk_hedgehog_launch {
    tk_hedgehog_config cfg; /* resolved: v_cols and warps set */
    int n;
    tk_arg args[TK_HEDGEHOG_MAX_ARGS];
} tk_hedgehog_launch;

/* The configuration the forward runs for checked parameters on a GPU whose
 * blocks have `smem_max` bytes of shared memory: p's v_cols and warps, or
 * (where 0) the defaults, smaller until it fits. */
tk_hedgehog_config tk_hedgehog_config_of(const tk_hedgehog_params *p, size_t smem_max);
/* The forward's launches for checked parameters (smem_max as above) on a
 * GPU of `sms` SMs: with the maps apart, MAP of q and of k first; with
 * sequence segments, the segments' states; then the run. Returns the
 * count (1 to 4). */
int tk_hedgehog_fwd_launches(const tk_hedgehog_params *p, size_t smem_max, int sms,
                             tk_hedgehog_launch out[TK_HEDGEHOG_MAX_LAUNCHES]);

/* ---- shared with the backward's entry points (kernels/hedgehog_bwd_run.c) */
/* The fields the forward's and the backward's parameters share. */
typedef struct tk_hh_common {
    tk_dtype dtype;
    int32_t head_dim, normalize, per_head;
    float scale, eps;
    int64_t batch, heads, seq, head_dim_v;
} tk_hh_common;

/* Checks c's kind, flags, scalars and sizes (errors name fn and the field). */
tk_status tk_hh_check_common(tk_ctx *ctx, const char *fn, const tk_hh_common *c);
/* The programs of launches l compiled side by side on a cold
 * prepare (info: the whole preparation). */
tk_status tk_hh_programs(tk_ctx *ctx, const tk_hedgehog_launch *l, int n,
                         tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES], tk_prepare_info *info);
/* Shared memory a block may have on ctx's GPU (Hopper's without one). */
size_t tk_hh_smem_of_gpu(tk_ctx *ctx);
/* A tensor argument: dense when st is all 0, else strided. */
tk_arg tk_hh_tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                    const int64_t *st);

/* The backward's launches for checked parameters and a GPU of `sms` SMs
 * (smem_max as above). Returns the count. */
int tk_hedgehog_bwd_launches(const tk_hedgehog_bwd_params *p, size_t smem_max, int sms,
                             tk_hedgehog_launch out[TK_HEDGEHOG_MAX_LAUNCHES]);
/* Its workspace in bytes. */
size_t tk_hedgehog_bwd_workspace_bytes(const tk_hedgehog_bwd_params *p, size_t smem_max, int sms);

#endif
