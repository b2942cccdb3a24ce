/* The attention forward on Hopper's warpgroup multiply (kernels/attention_hopper.c),
 * built by tk_attention_fwd_build when the config asks for wgmma. */
#ifndef TK_KERNELS_ATTENTION_HOPPER_H
#define TK_KERNELS_ATTENTION_HOPPER_H

#include "tk/tk_kernels.h"

/* Builds the kernel named `name` for cfg (dtype, head_dim 64/128/256,
 * causal: already checked). Same parameters, grid and results as the
 * mma.sync kernel. */
tk_status tk_attn_hopper_build(tk_ctx *ctx, const tk_attention_config *cfg, const char *name,
                               tk_kernel **out);

#endif
