/* The embedding kernels' pieces shared between their files: the builders
 * of kernels/embedding_sort.c and embedding_sum.c, which tk_embedding_build
 * (kernels/embedding.c) dispatches to, and the run API's choice of the row
 * tile (kernels/embedding_run.c), which the tests print. */
#ifndef TK_KERNELS_EMBEDDING_PARTS_H
#define TK_KERNELS_EMBEDDING_PARTS_H

#include <stdint.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

/* A builder's state: the kernel and its config, with warps resolved. */
typedef struct tk_emb {
    tk_kernel *k;
    const tk_embedding_config *c;
    int W; /* warps */
} tk_emb;

/* The sort (kernels/embedding_sort.c). */
void tk_emb_build_keys(tk_emb *a);
void tk_emb_build_hist(tk_emb *a);
void tk_emb_build_scan(tk_emb *a);
void tk_emb_build_scatter(tk_emb *a);
/* The runs' sums (kernels/embedding_sum.c). */
void tk_emb_build_segsum(tk_emb *a);
void tk_emb_build_fixup(tk_emb *a);

/* Warps of the sort's three kernels: one per 16 entries of a chunk (or 16
 * digits of the 256). */
#define TK_EMB_SORT_WARPS (TK_EMB_CHUNK / 16)

/* The row tile's width W the run API takes for rows of C elements (a
 * multiple of 16 up to 64): the fewest [16, W] tiles a row (the tail's
 * launch, where W does not divide C, counting as one more), then the least
 * tile area (768: 48, one tile of 16 x 48; 1600: 64, two tiles). */
int tk_emb_cols_for(int64_t C);

/* The launches as the entry points make them (kernels/embedding_run.c),
 * from parameters they accepted: each kernel's config and arguments. */
#define TK_EMB_MAX_ARGS     10
#define TK_EMB_MAX_LAUNCHES 16
typedef struct tk_emb_launch {
    tk_embedding_config cfg;
    int n;
    tk_arg args[TK_EMB_MAX_ARGS];
} tk_emb_launch;

/* The forward: the rows' launch and the tail's (each where there is one). */
int tk_emb_fwd_launches(const tk_embedding_params *p, tk_emb_launch out[2]);
/* The backward, in order: dWte zeroed (accumulate 0), dWpe, the sort's
 * keys, each pass's HIST, SCAN, SCATTER, then SEGSUM and FIXUP on the rows
 * and on the tail. Returns the count. */
int tk_emb_bwd_launches(const tk_embedding_bwd_params *p, tk_emb_launch out[TK_EMB_MAX_LAUNCHES]);
/* The sort's passes for a vocabulary (8 bits of the largest key, V, each). */
int tk_emb_passes(int64_t vocab);

#endif
