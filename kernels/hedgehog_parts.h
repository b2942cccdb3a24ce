/* What the Hedgehog kernel (kernels/hedgehog.c) shares with its entry
 * points (kernels/hedgehog_run.c): the defaults of a configuration and the
 * shared memory it takes, which decide what a GPU can run. */
#ifndef TK_KERNELS_HEDGEHOG_PARTS_H
#define TK_KERNELS_HEDGEHOG_PARTS_H

#include <stddef.h>

#include "tk/tk_kernels.h"

/* Shared memory a block may take (Hopper's opt-in maximum, the builder's
 * limit); an A100 has 163 KiB, sm_86 / sm_89 99 KiB. */
#define TK_HEDGEHOG_SMEM_MAX (227 * 1024)

/* c with v_cols and warps filled in where 0 (the defaults for its
 * head_dim); the other fields as given. */
tk_hedgehog_config tk_hedgehog_resolve(const tk_hedgehog_config *c);
/* Bytes of shared memory the kernel of a resolved c allocates (what
 * tk_kernel_smem_bytes reports for it). */
size_t tk_hedgehog_smem_bytes(const tk_hedgehog_config *c);

#endif
