/* Pieces the Based kernels share (kernels/based_common.c): the block's
 * ids and shared tiles, the chunk ring, the feature map φ and the linear
 * state's slabs. kernels/based.c (forward) and based_bwd.c use them. */
#ifndef TK_KERNELS_BASED_PARTS_H
#define TK_KERNELS_BASED_PARTS_H

#include "tk/tk_kernels.h"

#define TK_BASED_F         16 /* feature dim (q, k columns)                   */
#define TK_BASED_SLABS     18 /* φ in slabs of 16 features: 16 x⊗x, x, 1      */
#define TK_BASED_PHI       (16 * TK_BASED_SLABS)
#define TK_BASED_MAX_SLOTS 18 /* slabs a warp may own (1 warp: all)           */
#define TK_BASED_ROW_WARPS 4  /* PREP and SUM: 16 rows a warp                  */

typedef struct tk_based_kernel {
    tk_kernel *k;
    const tk_based_config *c;
    tk_dtype dt;
    int W, C, DVB, slots; /* warps, chunk rows (16·W), value columns, slabs a warp */
    tk_value *Q, *K, *V, *scale;
    tk_value *DO;           /* the backward's dO [B, H, T, Dv] (NULL: none) */
    int reverse;            /* chunks walked last to first (dk, dv)        */
    tk_value *b, *h, *v0;   /* batch, head, the block's first value column */
    tk_value *w, *r0;       /* warp id, its first row in a chunk (i64)     */
    tk_value *T, *nchunks;  /* tokens, chunks                              */
    tk_value *St, *L;       /* seg: the segments' states, chunks a segment  */
    tk_value *seg, *nseg;   /* seg: this block's segment, the count         */
    tk_value *c_lo, *trips; /* the block's first chunk, its chunk count     */
    tk_value *sQ, *sK, *sV; /* 2-stage rings: the chunk's q, k [C, 16], v [C, DVB] */
    tk_value *sDO;          /* and dO [C, DVB] when DO is set                */
    tk_value *sPhi;         /* φ of a chunk's rows [C, 288]                */
    tk_value *sS;           /* the state in bf16 [288, DVB]                */
    tk_value *sSel;         /* 16 selectors [16, 256] (kernels/based_common.c) */
} tk_based_kernel;

tk_value *tk_based_i64(tk_kernel *k, int64_t v);
/* g's kernel, config and block shape from c (defaults filled in). */
void tk_based_init(tk_based_kernel *g, tk_kernel *k, const tk_based_config *c);
/* Q, K [B, H, T, 16] and V [B, H, T, Dv] parameters (dtype), in order. */
void tk_based_params(tk_based_kernel *g);
/* With c->seg: St [NV·B·NS, H, 320, DVB] f32 and the i64 scalar
 * seg_chunks (tk/tk_kernels.h), declared in that order. */
void tk_based_seg_params(tk_based_kernel *g);
/* Grid (ceil(Dv / DVB), H, B, times the segments with c->seg), ids, the
 * block's chunk range, shared tiles, selectors; the first chunk's copies
 * issued. Call after every parameter. */
void tk_based_setup(tk_based_kernel *g);
/* Top of trip `ch`: its chunk's copies have landed and every warp is past
 * the previous trip; trip ch + 1's copies are issued into the other stage.
 * Returns the stage (i64). */
tk_value *tk_based_arrive(tk_based_kernel *g, tk_value *ch);
/* The chunk trip `ch` works on (last to first when reverse). */
tk_value *tk_based_chunk(tk_based_kernel *g, tk_value *ch);
/* Selector j: a bf16 16x16 ROW tile, column j ones, from sSel. */
tk_value *tk_based_selector(tk_based_kernel *g, int j);
/* x[:, j] broadcast over 16 columns, f32 (an mma with selector j). */
tk_value *tk_based_colcast(tk_based_kernel *g, tk_value *xb, int j);
/* The state's gradient path: Σ_j (∂φ_j(x)/∂x)ᵀ (y·S_jᵀ) over the slabs in
 * sS (16x16 f32), for 16 rows y [16, DVB] (bf16) and x (bf16). Uses that
 * each slab's 16x16 block of Σ x⊗x ⊗ v is symmetric. */
tk_value *tk_based_state_grad(tk_based_kernel *g, tk_value *yb, tk_value *xb);
/* Σ_j φ_j(x) · S_j over sS (16 x DVB f32) added to acc (NULL: none). */
tk_value *tk_based_state_apply(tk_based_kernel *g, tk_value *xb, tk_value *xf, tk_value *acc);
/* This warp's 16 rows of a stage [C, 16] as bf16 (xb) and f32 (xf), times
 * `scale` (NULL: 1) and rounded to the dtype first. */
void tk_based_band(tk_based_kernel *g, tk_value *xst, tk_value *scale, tk_value **xb,
                   tk_value **xf);
/* s = qb · kᵀ over the chunk's keys (kst: a stage [C, 16]); a = 1 + s + s²/2
 * with the keys after each row dropped (0). *s_out (if not NULL) gets s. */
tk_value *tk_based_scores(tk_based_kernel *g, tk_value *qb, tk_value *kst, tk_value **s_out);
/* Slab j of φ(x) for 16 rows (x in bf16 and f32): bf16 16x16. */
tk_value *tk_based_phi(tk_based_kernel *g, tk_value *xb, tk_value *xf, int j);
/* φ of this warp's rows of stage `xst` (times scale, NULL: 1) into sPhi. */
void tk_based_phi_to_shared(tk_based_kernel *g, tk_value *xst, tk_value *scale);
/* The key sums of a stage xst [C, 16]: *nz1 = z1 + Σ_rows x (PER_COL f32
 * vector of 16), *nZ2 = Z2 + xᵀx (16x16 f32). */
void tk_based_sums(tk_based_kernel *g, tk_value *xst, tk_value *z1, tk_value *Z2, tk_value **nz1,
                   tk_value **nZ2);
/* The carried state's first values: init[0 .. slots) the owned slabs,
 * init[slots] the 16-vector (z1 / rz1), init[slots + 1] the 16x16 tile (Z2 /
 * RZ2): zeros, or with TK_BASED_SEG_RUN the sum in order of the earlier
 * segments' states in St (the later ones' when reverse). The slabs go to sS
 * in the dtype. */
void tk_based_state_init(tk_based_kernel *g, tk_value **init);
/* TK_BASED_SEG_STATE: the carried state fin (as init) written to St, unless
 * no other segment reads it (the last one; the first when reverse). */
void tk_based_state_write(tk_based_kernel *g, tk_value *const *fin);
/* For each owned slab j: S_j += sPhi[:, j]ᵀ · y (yst: a stage [C, DVB]),
 * written to sS in bf16; next[s] gets slot s's new tile. */
void tk_based_state_update(tk_based_kernel *g, tk_value *yst, tk_value *const *S, tk_value **next);

tk_status tk_based_build_fwd(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel *k);
tk_status tk_based_build_bwd(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel *k);

#endif
