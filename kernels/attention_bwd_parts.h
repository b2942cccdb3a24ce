/* What the attention backward's kernels share (kernels/attention_bwd.c: the
 * mma.sync kernels and these helpers; attention_bwd_hopper.c: the wgmma
 * kernels; attention_bwd_run.c: the entry points of tk/tk_run.h). Both
 * kernel sets have the same parameters, grids' meaning and results. */
#ifndef TK_KERNELS_ATTENTION_BWD_PARTS_H
#define TK_KERNELS_ATTENTION_BWD_PARTS_H

#include <stdbool.h>

#include "tk/tk_kernels.h"

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
} bwd;

/* The parameters of the kernels over Q, K, V, declared in a signature's
 * order: Q, K, V, O (the dQ kernel only), dO, L, Dw, then its `nouts`
 * outputs, dQacc (with_acc: the fused kernels' f32 dQ accumulator) and the
 * scalars; and the sizes all read: heads and lengths of Q and of K. */
typedef struct bwd_io {
    tk_value *Q, *K, *V, *O, *dO, *L, *Dw, *out[2], *acc;
    tk_value *Hq, *Nq, *Hkv, *Nkv;
} bwd_io;

bwd_io tk_attn_bwd_io(bwd *w, int with_o, const char *const *outs, int nouts, int with_acc);
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

/* The wgmma kernels (attention_bwd_hopper.c), 8 warps: the body of the dQ
 * kernel, and of the dK/dV kernel, into w->k. */
void tk_attn_bwd_hopper_dq(bwd *w);
void tk_attn_bwd_hopper_dkdv(bwd *w);
/* The fused kernel of the non-deterministic mode: dK/dV and each key
 * block's share of dQ, added into the f32 accumulator. */
void tk_attn_bwd_hopper_fused(bwd *w);

#endif
