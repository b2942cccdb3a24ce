/* What the attention backward's kernels share (kernels/attention_bwd.c: the
 * mma.sync kernels and these helpers; attention_bwd_hopper.c: the wgmma
 * kernels; attention_bwd_run.c: the entry points of tk/tk_run.h). Both
 * kernel sets have the same parameters, grids' meaning and results. */
#ifndef TK_KERNELS_ATTENTION_BWD_PARTS_H
#define TK_KERNELS_ATTENTION_BWD_PARTS_H

#include <stdbool.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_LOG2E 1.4426950408889634f

/* A kernel being built. */
typedef struct bwd {
    tk_kernel *k;
    tk_dtype dt;
    int D, ND, causal;
    tk_value *b;      /* batch                                         */
    tk_value *scale;  /* the parameter                                 */
    tk_value *scale2; /* c = scale·log2 e, >= FLT_MIN as in the forward */
    int tile;         /* the Hopper kernels: rows a tile of the loop        */
    bool varlen;      /* packed sequences (tk_attn_bwd_grid)            */
} bwd;

/* The parameters of the kernels over Q, K, V, declared in a signature's
 * order: Q, K, V, O (the dQ kernel only), dO, L, Dw, then its `nouts`
 * outputs, dQacc (with_acc: the fused kernels' f32 dQ accumulator) and the
 * scalars; and the sizes all read: heads and lengths of Q and of K. */
typedef struct bwd_io {
    tk_value *Q, *K, *V, *O, *dO, *L, *Dw, *out[2], *acc;
    tk_value *Hq, *Nq, *Hkv, *Nkv;
    tk_value *cu_q, *cu_kv, *max_q, *max_kv; /* varlen: after the scale */
} bwd_io;

bwd_io tk_attn_bwd_io(bwd *w, int with_o, const char *const *outs, int nouts, int with_acc);
/* The grid over tiles of `rows` query rows (by_keys: key rows) and, for
 * varlen, the views of the block's sequence (block_id(2)) cut from the
 * packed tensors by its prefix sums, as in the forward (tk_attn_fwd_grid:
 * clamped to the tensors), with Nq and Nkv its lengths. Returns the tiles
 * of rows the block's sequence has (a varlen block from block_id(0) at or
 * past that count has no rows). */
tk_value *tk_attn_bwd_grid(bwd *w, bwd_io *io, int rows, bool by_keys);
/* The batch index of the views (after the grid): block_id(2), or 0 for
 * varlen, whose views are the sequence's. */
tk_value *tk_attn_bwd_batch(bwd *w);
/* n, or 0 for a varlen block whose tile `t` (of the grid's x) lies past its
 * sequence's `tiles`. */
tk_value *tk_attn_bwd_live(bwd *w, tk_value *n, tk_value *t, tk_value *tiles);
/* The dK/dV kernels' first query tile (of bq rows; nqt of them) that sees
 * a key of the block from key k0: 0, or when causal the tile of query
 * k0 - diag, the first to see key k0 (diag = Nkv - Nq). */
tk_value *tk_attn_bwd_qlo(bwd *w, tk_value *k0, tk_value *diag, tk_value *nqt, int bq);
/* The fused kernels' Sᵀ (warp or warpgroup band of `rows` keys from kw)
 * with its key rows past Nkv at -inf, on a ragged band only: their dSᵀ
 * meets K's zero rows in dQ += dS·K, where an inf in P would make 0·inf. */
tk_value *tk_attn_bwd_ragged_keys(bwd *w, tk_value *s, tk_value *kw, int rows, tk_value *Nkv);
/* L₂ = max(L·log2 e, -FLT_MAX) for the rows or columns of vector type vt
 * at idx (reading `fill` past N). */
tk_value *tk_attn_bwd_l2(bwd *w, tk_value *L, tk_type vt, tk_value *idx[3], float fill);
/* Whether kernel `part` is one kernel for both sets, causal or not (the fast
 * mode's prep and convert): its name and registry key drop those. */
static inline bool tk_attn_bwd_any_set(int part) {
    return part == TK_ATTN_BWD_PREP || part == TK_ATTN_BWD_CONVERT;
}
/* The specialization, checked alike by every entry point (`fn` names it). */
tk_status tk_attn_bwd_check_spec(tk_ctx *ctx, const char *fn, tk_dtype dt, int head_dim,
                                 int causal);

/* The kernels a checked call of tk_attention_backward runs (p->kernel
 * resolved: TK_ATTN_WGMMA or TK_ATTN_MMA_SYNC), in launch order, each with
 * its part and arguments; returns how many (2, or 3 in the fast mode). */
typedef struct tk_attn_bwd_call {
    int part; /* tk_attention_bwd_part */
    int nargs;
    tk_arg args[14];
} tk_attn_bwd_call;
int tk_attn_bwd_calls(const tk_attention_bwd_params *p, tk_attn_bwd_call *calls);

/* The wgmma kernels (attention_bwd_hopper.c), 8 warps: the body of the dQ
 * kernel, and of the dK/dV kernel, into w->k. */
void tk_attn_bwd_hopper_dq(bwd *w);
void tk_attn_bwd_hopper_dkdv(bwd *w);
/* The fused kernel of the non-deterministic mode: dK/dV and each key
 * block's share of dQ, added into the f32 accumulator. */
void tk_attn_bwd_hopper_fused(bwd *w);

#endif
