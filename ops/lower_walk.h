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

/* ---- Family entry points (ops/<family>_nv.c), one per family column -------- */
#define X(e, name, mn, mx, nres, scope, fam, ...)                                                  \
    tk_status tk_lower_##fam(tk_lower *L, const tk_op *op);
#include "ir/ops.def"
#undef X

#endif
