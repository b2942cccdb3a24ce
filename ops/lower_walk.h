/* The region walker of the NVPTX lowering and the op families it dispatches
 * to (ops/<family>_nv.c, the family column of ir/ops.def). The kit they
 * build on is ops/nv/lower.h; the driver that calls the walker is
 * jit/lower.c. */
#ifndef TK_OPS_LOWER_WALK_H
#define TK_OPS_LOWER_WALK_H

#include "ops/nv/lower.h"

/* Lowers every op of a region in order; in a producer warp only the ops of
 * its slice (tk_lw_emits_op). */
tk_status tk_lower_region(tk_lower *L, const tk_region *r);

/* ---- Family entry points (ops/<family>_nv.c) ---------------------------- */
tk_status tk_lower_ids(tk_lower *L, const tk_op *op);
tk_status tk_lower_elementwise(tk_lower *L, const tk_op *op);
tk_status tk_lower_scalar(tk_lower *L, const tk_op *op);
tk_status tk_lower_mma(tk_lower *L, const tk_op *op);
tk_status tk_lower_reduce(tk_lower *L, const tk_op *op);
tk_status tk_lower_memory(tk_lower *L, const tk_op *op);
tk_status tk_lower_control(tk_lower *L, const tk_op *op);

#endif
