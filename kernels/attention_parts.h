/* What the two attention forward kernels share (kernels/attention.c, the
 * mma.sync kernel, defines these; kernels/attention_hopper.c, the wgmma
 * kernel, is the other user). Same rules, same masks, same results. The
 * backward's Hopper kernels use the masks and the kernel choice too. */
#ifndef TK_KERNELS_ATTENTION_PARTS_H
#define TK_KERNELS_ATTENTION_PARTS_H

#include <stdbool.h>

#include "rotary_parts.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

/* The forward's parameters (tk/tk_kernels.h gives the order), the grid
 * and what a block of bq query rows starts from. Dense: the views as
 * passed, batch b = block_id(2). varlen: the tensors hold packed sequences
 * (batch dimension 1) and the block's sequence, block_id(2), is cut from
 * them by its prefix sums (tk_narrow, clamped to the tensors: sums that
 * are not monotone or run past a tensor read and write nothing outside
 * it); b = 0, Nq and Nkv are the sequence's. */
typedef struct tk_attn_io {
    bool varlen;
    tk_value *Q, *K, *V, *O, *L, *scale; /* views (narrowed: varlen)        */
    tk_value *cu_q, *cu_kv, *max_q;      /* varlen's parameters              */
    tk_value *Hq, *Hkv, *Nq, *Nkv;       /* i32                               */
    tk_value *qt;                        /* the block's query tile: the longest
                                            causal ones run first; varlen: < 0
                                            for blocks past the sequence    */
    tk_value *h, *b;                     /* query head, batch index          */
} tk_attn_io;
/* The parameters (first, before any spec). */
void tk_attn_fwd_params(tk_kernel *k, tk_dtype dt, bool varlen, tk_attn_io *io);
/* Q's fused rotation (cfg->rotary != 0, checked): its parameters, after the
 * forward's (tk/tk_kernels.h: q_pos0, then Cos and Sin or base) into *r and
 * *q_pos0, and its specs; r->src is io->Q. Nothing when rotary is 0. */
void tk_attn_fwd_rope(tk_kernel *k, const tk_attention_config *cfg, const tk_attn_io *io,
                      tk_rope *r, tk_value **q_pos0);
/* The grid of tiles of bq rows and the block's start (after the specs). */
void tk_attn_fwd_grid(tk_kernel *k, tk_attn_io *io, int bq);
/* Key tiles a block visits: ntiles, or 0 for a varlen block past its
 * sequence (qt < 0). */
tk_value *tk_attn_live_tiles(tk_kernel *k, const tk_attn_io *io, tk_value *ntiles);

/* A packed [rows, heads, D] tensor (strides in (batch, head, token, D)
 * order, the batch one ignored; all 0: dense) as the varlen kernels'
 * [1, heads, rows, D] view, and an L of [heads, rows] (strides: batch,
 * head, token) as their [1, heads, rows]. */
tk_arg tk_attn_packed_arg(const void *data, tk_dtype dt, int64_t heads, int64_t rows, int64_t D,
                          const int64_t *st);
tk_arg tk_attn_packed_lse(float *lse, int64_t heads, int64_t rows, const int64_t *st);

/* The forward kernel's arguments for checked parameters p (tk_run.h):
 * dense, or packed sequences (cu_seqlens_q); returns their count. */
#define TK_ATTN_FWD_MAX_ARGS 9
int tk_attn_fwd_args(const tk_attention_params *p, tk_arg *args);

/* What tk_attention_forward launches on the prefill kernels (attention_run.c),
 * so that tests run the very calls on the interpreter: with rotary, K's
 * rotation into the workspace (tk_rotary's kernel) first, then the forward
 * on that K with Q's rotation fused. */
typedef struct tk_attn_fwd_launches {
    int rotate_k;            /* 1: `rot` runs first                          */
    tk_rotary_launch rot;    /* its config and arguments                     */
    tk_attention_config cfg; /* the forward's specialization (default warps) */
    int n;                   /* the forward's arguments                      */
    tk_arg args[TK_ATTN_FWD_MAX_ARGS];
} tk_attn_fwd_launches;
/* The launches of tk_attention_forward(ctx, user) after the same checks
 * (the workspace's too); a call the decoding kernels would run is
 * TK_ERR_UNSUPPORTED here (they have launches of their own). */
tk_status tk_attn_fwd_plan(tk_ctx *ctx, const tk_attention_params *user, tk_attn_fwd_launches *out);

/* Key tiles of bkv keys a block of bq query rows from q0 visits: all of
 * Nkv, or when causal up to the tile of the last key its last valid row
 * attends (possibly none). diag = Nkv - Nq: row i attends keys <= i + diag. */
tk_value *tk_attn_key_tiles(tk_kernel *k, tk_value *Nq, tk_value *Nkv, tk_value *q0, int bq,
                            int bkv, tk_value *diag, int causal);
/* c = scale·log2(e), kept > 0 (attention.c says why). */
tk_value *tk_attn_scale2(tk_kernel *k, tk_value *scale);
/* S (rows from `rows`, keys from kv0) with keys past Nkv and, causal, keys
 * past each row's diagonal at -inf; only tiles that need it pay (q0: the
 * block's first row). */
tk_value *tk_attn_mask(tk_kernel *k, tk_value *s, int bkv, int causal, tk_value *kv0, tk_value *Nkv,
                       tk_value *rows, tk_value *q0, tk_value *diag);
/* The online softmax's rescale: given the tile's scaled row max mx and the
 * carried m = cur[0] with the n - 1 accumulators it scales (l, O...), ref
 * gets them on the reference the tile uses: the new max (m' = max(m, mx),
 * the others times exp2(m - m')); lazy (attention.c says why): unchanged
 * unless some row of the executing warp outgrew m by more than the slack,
 * a branch per warp that skips the multiply of O on most tiles.
 * n <= 18 (m, l and up to 16 slices of O). */
void tk_attn_rescale(tk_kernel *k, tk_value *mx, int n, tk_value *const *cur, tk_value **ref,
                     bool lazy);
/* The online softmax's starting state: init[0] = m = -FLT_MAX (finite, so
 * a row whose first tiles are all masked never computes -inf - -inf),
 * init[1] = l = 0 (vectors of vrow), init[2..2+n) = n zero O tiles of o_t. */
void tk_attn_state_init(tk_kernel *k, tk_type vrow, tk_type o_t, int n, tk_value **init);
/* Packed sequences: sequence s's rows [cu[s], cu[s+1]) of the n views v
 * (NULL entries skipped) by tk_narrow along axes[i] (NULL: axis 2). */
void tk_attn_sequence(tk_kernel *k, tk_value *cu, tk_value *s, int n, tk_value **v,
                      const int *axes);
/* 1 / l, with l = 0 (a row without keys) giving 0 in O = O / l. */
tk_value *tk_attn_inv_l(tk_kernel *k, tk_value *l);
/* L = ln Σ exp(s) = (m + log2 l) · ln 2 from the log2-unit reference m. */
tk_value *tk_attn_lse(tk_kernel *k, tk_value *m, tk_value *l);

/* The wgmma kernel's body (kernels/attention_hopper.c) into k, a kernel of
 * 8 or 12 warps (a warpgroup per 64 query rows), for cfg (checked): same
 * parameters and results as the mma.sync kernel. */
void tk_attn_hopper_body(tk_kernel *k, const tk_attention_config *cfg);
/* Its default warps for head_dim. */
int tk_attn_hopper_warps(int head_dim);

/* Whether a call asking for `kernel` (a tk_attn_kernel) runs the Hopper
 * kernels: TK_ATTN_AUTO does on sm_90a; TK_ATTN_WGMMA elsewhere, or a value
 * out of the enum, is an error naming fn. */
tk_status tk_attn_pick_kernel(tk_ctx *ctx, const char *fn, int kernel, bool *wgmma);

/* The forward's specialization, checked alike by every entry point (`fn`
 * names it in the message). */
tk_status tk_attn_check_spec(tk_ctx *ctx, const char *fn, tk_dtype dt, int head_dim, int causal);

/* The decoding kernels' default ring depth (attention_decode.c). */
int tk_attn_decode_stages(int head_dim);
/* The merge's warps for `partials` partials a tile. */
int tk_attn_decode_merge_warps(int partials);
/* Bytes of a decoding kernel's K/V ring: `stages` stages of `rows` keys of
 * head_dim 2-byte values, K and V; at most TK_ATTN_DECODE_RING_MAX. */
#define TK_ATTN_DECODE_RING_MAX (200 * 1024)
static inline long tk_attn_decode_ring_bytes(int stages, int rows, int head_dim) {
    return 2L * stages * rows * head_dim * 2;
}
/* ... and its key tile's rows. */
int tk_attn_decode_keys(int head_dim);
/* The most shared memory a decoding block takes: its ring, its query tiles'
 * Q and, where they fit too, its warps' O tiles (227 KB a block, less the
 * ring's barriers). */
#define TK_ATTN_DECODE_SMEM_MAX (226 * 1024)
/* Bytes of a block's Q tiles (16 rows of head_dim 2-byte values each, a
 * tile a query-tile warp) and of its O tiles (f32, a tile a warp: the
 * partials' type, at least the output's). */
static inline long tk_attn_decode_q_bytes(int warps, int head_dim) {
    return 16L * head_dim * 2 * warps;
}
static inline long tk_attn_decode_o_bytes(int warps, int key_warps, int head_dim) {
    return 16L * head_dim * 4 * warps * key_warps;
}
/* Whether a block of that ring stages its O tiles in shared memory. */
static inline bool tk_attn_decode_o_staged(long ring, int warps, int key_warps, int head_dim) {
    return ring + tk_attn_decode_q_bytes(warps, head_dim) +
               tk_attn_decode_o_bytes(warps, key_warps, head_dim) <=
           TK_ATTN_DECODE_SMEM_MAX;
}

#endif
