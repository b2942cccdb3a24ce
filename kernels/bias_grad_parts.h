/* The column sums' streaming loop of kernels/bias_grad.c, which the
 * embedding's position gradient (kernels/embedding.c) runs too: both are
 * sums of [16, cols] slabs of a view down one axis. */
#ifndef TK_KERNELS_BIAS_GRAD_PARTS_H
#define TK_KERNELS_BIAS_GRAD_PARTS_H

#include "tk/tk.h"

#define TK_SLAB_COLS 32 /* a warp's columns of a slab */

/* A block's stream of [16, 32·W] slabs of X (rank 2 or 3): round r is the
 * slab at (lead0 + r·dlead, row0 + r·drow, c0), without the first index
 * for rank 2 (lead0, dlead NULL); nr rounds. */
typedef struct tk_slabs {
    tk_kernel *k;
    int W; /* the block's warps */
    tk_dtype dt;
    tk_value *X, *lead0, *dlead, *row0, *drow, *c0, *nr;
} tk_slabs;

/* Σ over the rounds, in round order, of this warp's [16, 32] columns of
 * each slab (columns c0 + 32·warp ..), in f32. The whole block copies each
 * slab into shared memory with cp.async (16-byte copies, zero past the
 * view's edges), rounds r + 1 .. r + 3 while round r is read. */
tk_value *tk_slabs_sum(const tk_slabs *s);

#endif
