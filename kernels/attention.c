/* Attention forward, the FlashAttention-2 algorithm (see tk/tk_kernels.h for
 * the contract).
 *
 * Block = 128 query rows of one (batch, head): by default 4 warps of R = 32
 * rows (see "Shape" below). Each warp keeps its rows' state in registers for
 * the whole kernel:
 *   O  D/16 tiles R x 16 (f32)
 *   m, l  reference max (log2 units) and sum, one per row
 * and Q either in registers (D/16 tiles R x 16, when R·D <= 2048) or, for
 * D = 128 with R = 32, in shared memory, re-read by 16-column slices.
 * The block walks the keys in tiles of 64: K_j and V_j land in shared memory
 * (two stages each, cp.async). Per tile, each warp computes
 *   S  = Q·K_jᵀ  (R x 64, f32)         from D/16 ldmatrix'd 64x16 K slices
 *   mask ragged keys / causal          only on tiles that need it
 *   mx = c·rowmax S                    c = scale·log2(e) > 0
 *   if some row has mx > m + 8:        lazy rescale (rare after the first
 *     m' = max(m, mx); α = exp2(m - m'); l, O *= α; m = m'     tiles)
 *   P = exp2(c·S - m)                  one fma and one exp2 (ex2.approx)
 *   l += rowsum P; O += P·V_j          (P as R x 64 bf16, V as 64x16 COL
 *                                      slices: ldmatrix.trans)
 * and at the end O /= l, L = (m + log2 l)·ln 2 (natural log of Σ exp(s)).
 * Q and O are split in 16-column tiles because register tiles cannot be
 * sliced: S needs Q by 16 columns of D, and O accumulates P·V by 16 columns
 * of D, each from one small ldmatrix'd slice of K or V (16 regs) instead of a
 * whole 64xD tile (128 regs).
 *
 * Shape. Every K/V element a warp reads from shared memory serves its R
 * query rows, so R sets the ratio of shared-memory traffic to mma work: per
 * key tile, 8 warps x 16 rows read 512 ldmatrix.x4 (2048 cycles of shared
 * bandwidth at 128 B/clock, as long as the tile's 1024 mma); 4 x 32 read 320
 * (Q slices included). R = 32 doubles the per-thread state:
 *   D = 64,  R = 32: Q 32 + O 64 + S 64 + P 32 registers: fits
 *   D = 128, R = 32: O 128 + S 64 + P 32 leaves no room for Q (64): Q is
 *                    re-read from shared memory (16 more ldmatrix per tile);
 *                    255 registers; ptxas spills 16 bytes (36 causal):
 *                    values stored before the key loop and reloaded by the
 *                    K/V copy code (2 loads per key tile on its fast path,
 *                    sm_90a SASS), none inside the mma and softmax code.
 *   D = 256, R = 16: O 128 + S 32 + P 16, Q from shared memory; 64 rows per
 *                    block of 4 warps (96 KiB of tiles: every target);
 *                    ptxas: 254-255 registers, no spills but 16 bytes in
 *                    the causal kernel on sm_90/sm_90a.
 * Measured on an H200 (bf16, TFLOP/s, bench_attention_configs, with the lazy
 * rescale; bench/RESULTS.md):
 *   D=128, 4 x 32, Q in shared: 375-391 non-causal, 303 causal (N 4096)
 *   D=128, 8 x 16, Q in registers: 279-295, 254 causal
 *   D=64,  4 x 32: 314-316; 8 x 16: 204-205
 * Key tiles of 128 measured slower for both head dims (earlier revision).
 *
 * Pipeline per key tile j (commit groups: K0 | V0 K1 | V1 K2 | ...):
 *   copy V_j; commit; wait(1): K_j landed; barrier
 *   S = Q·K_jᵀ
 *   copy K_{j+1} (other stage: its last reader, tile j-1, passed the barrier)
 *   softmax update; wait(1): V_j landed; barrier; O += P·V_j
 * so the V copy overlaps Q·Kᵀ and the next K copy overlaps softmax and P·V.
 * V_j overwrites the stage V_{j-2} used: every warp left tile j-2 before
 * passing tile j-1's first barrier.
 *
 * No NaN: m starts at -FLT_MAX, not -inf, so m - m', mx - m and S - m never
 * compute -inf - (-inf), even for rows whose keys are all masked so far
 * (there exp2(-inf - m) = 0). The first tile in which a row of the warp
 * sees a key rescales (mx - m is huge), which scales l = O = 0. A row that
 * attends no key at all ends with l = 0, O = 0 (divided by max(l, tiny))
 * and L = -inf.
 *
 * Rotary (cfg->rotary): each warp rotates its Q rows once, before the key
 * loop (kernels/rotary_tile.c): in registers, or, Q in shared memory, its
 * rows there once Q's copy (group 0, with K_0) has landed, stored back in
 * place. K comes rotated (tk/tk_kernels.h says why). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "attention_parts.h"
#include "tk/tk_kernels.h"

#define BQ     128 /* query rows per block (D 256: 16 per warp) */
#define BKV    64  /* keys per tile        */
#define MAX_ND 16  /* 16-column slices of the widest head (D 256) */

typedef struct attn {
    tk_kernel *k;
    const tk_attention_config *cfg;
    tk_dtype dt;
    int D, causal;
    int bq;       /* query rows per block                             */
    int wrows;    /* query rows per warp                              */
    int q_shared; /* Q re-read from shared memory, not in registers  */
    int varlen;   /* packed sequences (attention_parts.h, tk_attn_io)  */
    tk_value *Q, *K, *V, *O, *L;
    tk_value *b, *h, *hk; /* batch, query head, kv head                      */
    tk_value *sK, *sV;    /* 2-stage shared rings                              */
    tk_rope rope;         /* Q's rotation (cfg->rotary)                        */
    tk_value *q_pos0;     /* its i64 parameter: row i's position is i + q_pos0 */
} attn;

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }
static tk_value *dim32(tk_kernel *k, tk_value *view, int d) {
    return tk_cvt(k, tk_dim(k, view, d), TK_I32);
}

/* cp.async of the key tile starting at key kv0 of K or V into stage `st`
 * of `ring`; keys past Nkv are zero-filled. */
static void copy_kv(attn *a, tk_value *ring, tk_value *st, tk_value *view, tk_value *kv0) {
    tk_kernel *k = a->k;
    tk_value *idx[4] = {a->b, a->hk, kv0, i32c(k, 0)};
    tk_copy_to_shared(k, tk_stage(k, ring, st), view, idx, 0.0f, 1);
}

/* The warp's rows from query row qw: their first position (i64) and where
 * they lie in Q (at[4]). */
static tk_value *rope_at(attn *a, tk_value *qw, tk_value **at) {
    tk_kernel *k = a->k;
    at[0] = a->b, at[1] = a->h, at[2] = qw, at[3] = i32c(k, 0);
    return tk_add(k, tk_cvt(k, qw, TK_I64), a->q_pos0);
}

/* Q in registers (16-column tiles q[0..ND)): rotated as one tile (concat
 * and slice rename registers). */
static void rope_regs(attn *a, tk_value **q, tk_value *qw) {
    tk_kernel *k = a->k;
    const int ND = a->D / 16;
    tk_value *x = q[0], *at[4], *pos0 = rope_at(a, qw, at);
    for (int d = 1; d < ND; d++) x = tk_concat(k, 1, x, q[d]);
    tk_type xt = tk_tile_type(a->dt, a->wrows, a->D, TK_WARP, TK_ROW);
    x = tk_rope_tile(k, &a->rope, x, xt, pos0, 4, at);
    for (int d = 0; d < ND; d++) q[d] = tk_slice(k, x, 0, 16 * d, a->wrows, 16);
}

/* Q in shared memory: once its copy (group 0) has landed, each warp
 * rotates its own rows in place, 16 columns at a time; the key loop's
 * first barrier orders the stores before the lanes' first reads. */
static void rope_shared(attn *a, tk_value *sQ, tk_value *wr0, tk_value *qw) {
    tk_kernel *k = a->k;
    tk_async_wait(k, 0);
    tk_barrier(k); /* every thread's chunks of Q */
    tk_value *at[4], *pos0 = rope_at(a, qw, at);
    tk_type bt = tk_tile_type(a->dt, a->wrows, 16, TK_WARP, TK_ROW);
    tk_rope_shared(k, &a->rope, sQ, wr0, bt, pos0, 4, at);
}

static void build(attn *a) {
    tk_kernel *k = a->k;
    const int D = a->D, ND = a->D / 16, WROWS = a->wrows;
    tk_dtype dt = a->dt;
    tk_attn_io io;
    tk_attn_fwd_params(k, dt, a->varlen, &io);
    tk_attn_fwd_rope(k, a->cfg, &io, &a->rope, &a->q_pos0);
    tk_spec(k, "head_dim", D);
    tk_spec(k, "causal", a->causal);
    if (a->varlen) tk_spec(k, "varlen", 1);
    tk_attn_fwd_grid(k, &io, a->bq);
    tk_value *Q = a->Q = io.Q, *K = a->K = io.K, *V = a->V = io.V, *O = a->O = io.O;
    tk_value *L = a->L = io.L, *scale = io.scale, *qt = io.qt;
    tk_value *Hq = io.Hq, *Hkv = io.Hkv, *Nq = io.Nq, *Nkv = io.Nkv;
    a->h = io.h;
    a->b = io.b;
    tk_value *group = tk_max(k, tk_div(k, Hq, Hkv), i32c(k, 1));
    a->hk = tk_div(k, a->h, group);
    tk_value *q0 = tk_mul(k, qt, i32c(k, a->bq));
    tk_value *wr0 = tk_mul(k, tk_warp_id(k), i32c(k, WROWS)); /* warp's first row */
    tk_value *qw = tk_add(k, q0, wr0);
    /* Row i attends keys j <= i + diag (bottom-right aligned causal mask). */
    tk_value *diag = tk_sub(k, Nkv, Nq);

    /* Q in registers: each warp reads its own rows once (32-byte row
     * segments per quad, full sectors). Rows past Nq read 0. Q in shared
     * memory (when it would not fit in registers): the block's Q tile joins
     * the first copy group and each warp re-reads its 16-column slices per
     * key tile. */
    tk_value *q[MAX_ND] = {0}, *sQ = NULL;
    tk_type q_t = tk_tile_type(dt, WROWS, 16, TK_WARP, TK_ROW);
    if (!a->q_shared) {
        for (int d = 0; d < ND; d++) {
            tk_value *idx[4] = {a->b, a->h, qw, i32c(k, 16 * d)};
            q[d] = tk_load(k, q_t, Q, idx, 0.0f);
        }
        if (a->q_pos0) rope_regs(a, q, qw);
    } else {
        sQ = tk_shared(k, dt, a->bq, D, TK_SMEM_SWIZZLE, 1);
        tk_value *idx[4] = {a->b, a->h, q0, i32c(k, 0)};
        tk_copy_to_shared(k, sQ, Q, idx, 0.0f, 1);
    }

    a->sK = tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, 2);
    a->sV = tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, 2);

    tk_value *ntiles = tk_attn_key_tiles(k, Nq, Nkv, q0, a->bq, BKV, diag, a->causal);
    ntiles = tk_attn_live_tiles(k, &io, ntiles);
    tk_value *scale2 = tk_attn_scale2(k, scale);

    tk_if_begin(k, tk_lt(k, i32c(k, 0), ntiles));
    copy_kv(a, a->sK, i32c(k, 0), K, i32c(k, 0));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    if (sQ && a->q_pos0) rope_shared(a, sQ, wr0, qw);

    /* Loop-carried state: m, l, O[0..ND). */
    tk_type vrow = tk_vec_type(TK_F32, WROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type o_t = tk_tile_type(TK_F32, WROWS, 16, TK_WARP, TK_ROW);
    tk_value *init[2 + MAX_ND], *cur[2 + MAX_ND], *next[2 + MAX_ND], *fin[2 + MAX_ND];
    tk_attn_state_init(k, vrow, o_t, ND, init);
    tk_value *j = tk_for_begin(k, i32c(k, 0), ntiles, i32c(k, 1), 2 + ND, init, cur);
    {
        tk_value *st = tk_rem(k, j, i32c(k, 2)), *kv0 = tk_mul(k, j, i32c(k, BKV));
        copy_kv(a, a->sV, st, V, kv0);
        tk_async_commit(k);
        tk_async_wait(k, 1); /* K_j has landed (V_j may still be in flight) */
        tk_barrier(k);

        /* S = Q·K_jᵀ, accumulated over D in 16-column slices. */
        tk_value *kst = tk_stage(k, a->sK, st), *s = NULL;
        tk_type kslice = tk_tile_type(dt, BKV, 16, TK_WARP, TK_ROW);
        for (int d = 0; d < ND; d++) {
            tk_value *idx[2] = {i32c(k, 0), i32c(k, 16 * d)};
            tk_value *qd = q[d];
            if (sQ) {
                tk_value *iq[2] = {wr0, i32c(k, 16 * d)};
                qd = tk_load(k, q_t, sQ, iq, 0.0f);
            }
            s = tk_mma(k, TK_MMA_ABT, qd, tk_load(k, kslice, kst, idx, 0.0f), s);
        }

        /* Prefetch K_{j+1} while this tile's softmax and P·V run. */
        tk_value *j1 = tk_add(k, j, i32c(k, 1));
        tk_if_begin(k, tk_lt(k, j1, ntiles));
        copy_kv(a, a->sK, tk_sub(k, i32c(k, 1), st), K, tk_add(k, kv0, i32c(k, BKV)));
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);

        s = tk_attn_mask(k, s, BKV, a->causal, kv0, Nkv, qw, q0, diag);

        /* Online softmax in log2 units with a lazy rescale: m is a running
         * reference, at most RESCALE_SLACK below the row max of s·scale2
         * (scale2 > 0, so that max is scale2 · row max of s). Only when some
         * row of the warp outgrows its reference by more than the slack do
         * the warp's m, l and O move to the new max (α = exp2(m - m') ≤ 1);
         * otherwise P = exp2(s·scale2 - m) stays ≤ 2^slack and O, l go on
         * unscaled, saving the multiply of every O element per tile. The
         * result is the same: O and l share the reference, which cancels
         * in O / l and is added back in L. s·scale2 - m is one fma. */
        tk_value *ref[2 + MAX_ND];
        tk_attn_rescale(k, tk_mul(k, tk_row_max(k, s), scale2), 2 + ND, cur, ref, true);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, scale2), ref[0]));
        next[0] = ref[0];
        next[1] = tk_add(k, ref[1], tk_row_sum(k, p));
        tk_value *pb = tk_cvt(k, p, dt);

        tk_async_wait(k, 1); /* V_j has landed (K_{j+1} may be in flight) */
        tk_barrier(k);
        tk_value *vst = tk_stage(k, a->sV, st);
        tk_type vslice = tk_tile_type(dt, BKV, 16, TK_WARP, TK_COL);
        for (int d = 0; d < ND; d++) {
            tk_value *idx[2] = {i32c(k, 0), i32c(k, 16 * d)};
            next[2 + d] = tk_mma(k, TK_MMA_AB, pb, tk_load(k, vslice, vst, idx, 0.0f), ref[2 + d]);
        }
    }
    tk_for_end(k, 2 + ND, next, fin);
    /* A block without keys to visit still has Q's copy in flight (issuing
     * it only for blocks with keys cost the loop 28 more bytes of spills). */
    tk_async_wait(k, 0);

    tk_value *inv_l = tk_attn_inv_l(k, fin[1]);
    for (int d = 0; d < ND; d++) {
        tk_value *idx[4] = {a->b, a->h, qw, i32c(k, 16 * d)};
        tk_store(k, O, idx, tk_cvt(k, tk_mul(k, fin[2 + d], inv_l), dt));
    }
    tk_value *il[3] = {a->b, a->h, qw};
    tk_store(k, L, il, tk_attn_lse(k, fin[0], fin[1]));
}

/* ---- the pieces both forward kernels use (attention_parts.h) ---------------- */
void tk_attn_fwd_params(tk_kernel *k, tk_dtype dt, bool varlen, tk_attn_io *io) {
    *io = (tk_attn_io){.varlen = varlen};
    io->Q = tk_param_tensor(k, "Q", dt, 4);
    io->K = tk_param_tensor(k, "K", dt, 4);
    io->V = tk_param_tensor(k, "V", dt, 4);
    io->O = tk_param_tensor(k, "O", dt, 4);
    io->L = tk_param_tensor(k, "L", TK_F32, 3);
    io->scale = tk_param_scalar(k, "scale", TK_F32);
    if (!varlen) return;
    io->cu_q = tk_param_tensor(k, "cu_seqlens_q", TK_I32, 1);
    io->cu_kv = tk_param_tensor(k, "cu_seqlens_kv", TK_I32, 1);
    io->max_q = tk_param_scalar(k, "max_seqlen_q", TK_I32);
}

void tk_attn_fwd_rope(tk_kernel *k, const tk_attention_config *cfg, const tk_attn_io *io,
                      tk_rope *r, tk_value **q_pos0) {
    *r = (tk_rope){0};
    *q_pos0 = NULL;
    if (!cfg->rotary) return;
    r->style = cfg->rotary == TK_ATTN_ROTARY_GPTJ ? TK_ROTARY_GPTJ : TK_ROTARY_NEOX;
    r->rotary_dim = cfg->rotary_dim ? cfg->rotary_dim : cfg->head_dim;
    r->src = io->Q;
    *q_pos0 = tk_param_scalar(k, "q_pos0", TK_I64);
    if (cfg->rotary_tables) {
        r->cos = tk_param_tensor(k, "Cos", TK_F32, 2);
        r->sin = tk_param_tensor(k, "Sin", TK_F32, 2);
    } else {
        r->base = tk_param_scalar(k, "base", TK_F32);
    }
    tk_spec(k, "rotary", cfg->rotary);
    tk_spec(k, "rotary_dim", r->rotary_dim);
}

void tk_attn_sequence(tk_kernel *k, tk_value *cu, tk_value *s, int n, tk_value **v,
                      const int *axes) {
    tk_type i32 = tk_scalar_type(TK_I32);
    tk_value *i0[1] = {s}, *i1[1] = {tk_add(k, s, i32c(k, 1))};
    tk_value *lo = tk_load(k, i32, cu, i0, 0.0f), *hi = tk_load(k, i32, cu, i1, 0.0f);
    tk_value *len = tk_sub(k, hi, lo);
    for (int i = 0; i < n; i++)
        if (v[i]) v[i] = tk_narrow(k, v[i], axes ? axes[i] : 2, lo, len);
}

void tk_attn_fwd_grid(tk_kernel *k, tk_attn_io *io, int bq) {
    io->Hq = dim32(k, io->Q, 1);
    if (!io->varlen) {
        io->Nq = dim32(k, io->Q, 2);
        io->Hkv = dim32(k, io->K, 1), io->Nkv = dim32(k, io->K, 2);
        tk_value *nqt = tk_ceil_div(k, io->Nq, i32c(k, bq));
        tk_set_grid(k, nqt, io->Hq, tk_cvt(k, tk_dim(k, io->Q, 0), TK_I32));
        /* Causal blocks near the end of the sequence do the most work: run
         * them first so the short ones fill the tail of the grid. */
        io->qt = tk_sub(k, tk_sub(k, nqt, i32c(k, 1)), tk_block_id(k, 0));
        io->h = tk_block_id(k, 1);
        io->b = tk_block_id(k, 2);
        return;
    }
    io->Hkv = dim32(k, io->K, 1);
    tk_value *seqs = tk_sub(k, dim32(k, io->cu_q, 0), i32c(k, 1));
    tk_set_grid(k, tk_ceil_div(k, io->max_q, i32c(k, bq)), io->Hq, seqs);
    tk_value *s = tk_block_id(k, 2);
    tk_value *q[3] = {io->Q, io->O, io->L}, *kv[2] = {io->K, io->V};
    tk_attn_sequence(k, io->cu_q, s, 3, q, NULL);
    tk_attn_sequence(k, io->cu_kv, s, 2, kv, NULL);
    io->Q = q[0], io->O = q[1], io->L = q[2], io->K = kv[0], io->V = kv[1];
    io->Nq = dim32(k, io->Q, 2), io->Nkv = dim32(k, io->K, 2);
    /* the sequence's last tile first; blocks past its rows get qt < 0 */
    tk_value *nqt = tk_ceil_div(k, io->Nq, i32c(k, bq));
    io->qt = tk_sub(k, tk_sub(k, nqt, i32c(k, 1)), tk_block_id(k, 0));
    io->h = tk_block_id(k, 1);
    io->b = i32c(k, 0);
}

tk_value *tk_attn_live_tiles(tk_kernel *k, const tk_attn_io *io, tk_value *ntiles) {
    if (!io->varlen) return ntiles;
    return tk_select(k, tk_lt(k, io->qt, i32c(k, 0)), i32c(k, 0), ntiles);
}

tk_value *tk_attn_key_tiles(tk_kernel *k, tk_value *Nq, tk_value *Nkv, tk_value *q0, int bq,
                            int bkv, tk_value *diag, int causal) {
    tk_value *ntiles = tk_ceil_div(k, Nkv, i32c(k, bkv));
    if (causal) {
        tk_value *kend = tk_add(k, tk_min(k, tk_add(k, q0, i32c(k, bq)), Nq), diag);
        kend = tk_max(k, kend, i32c(k, 0));
        ntiles = tk_min(k, ntiles, tk_ceil_div(k, kend, i32c(k, bkv)));
    }
    return ntiles;
}

/* c·S's row max is c times S's, and a masked -inf score times c stays -inf
 * (0 · -inf would be NaN); scale <= 0 thus acts as the tiniest positive
 * scale: uniform weights, the limit of scale -> 0. */
tk_value *tk_attn_scale2(tk_kernel *k, tk_value *scale) {
    return tk_max(k, tk_mul(k, scale, tk_const_f32(k, 1.4426950408889634f)),
                  tk_const_f32(k, FLT_MIN));
}

/* Masks cost a compare per element: only the last (ragged) tile and, when
 * causal, tiles crossing the diagonal of the block need one. */
tk_value *tk_attn_mask(tk_kernel *k, tk_value *s, int bkv, int causal, tk_value *kv0, tk_value *Nkv,
                       tk_value *rows, tk_value *q0, tk_value *diag) {
    tk_value *edge = tk_gt(k, tk_add(k, kv0, i32c(k, bkv)), Nkv);
    if (causal)
        edge = tk_or(k, edge, tk_gt(k, tk_add(k, kv0, i32c(k, bkv - 1)), tk_add(k, q0, diag)));
    tk_if_begin(k, edge);
    tk_value *sm = tk_mask(k, s, TK_MASK_COLS, kv0, Nkv, -INFINITY);
    if (causal) sm = tk_mask(k, sm, TK_MASK_CAUSAL, tk_add(k, rows, diag), kv0, -INFINITY);
    tk_else(k, 1, &sm);
    tk_value *unmasked = s, *out;
    tk_if_end(k, 1, &unmasked, &out);
    return out;
}

void tk_attn_state_init(tk_kernel *k, tk_type vrow, tk_type o_t, int n, tk_value **init) {
    init[0] = tk_fill(k, vrow, tk_const_f32(k, -FLT_MAX));
    init[1] = tk_zeros(k, vrow);
    for (int i = 0; i < n; i++) init[2 + i] = tk_zeros(k, o_t);
}

/* A row without keys has l = O = 0: dividing by a tiny number gives 0. */
tk_value *tk_attn_inv_l(tk_kernel *k, tk_value *l) {
    return tk_div(k, tk_const_f32(k, 1.0f), tk_max(k, l, tk_const_f32(k, FLT_MIN)));
}

/* Lazy rescale: how far (log2 units) a row's max may outgrow the reference
 * m before the warp rescales; P ≤ 2^8 = 256 is exact enough in bf16/f16 and
 * leaves f32 l and O ample range. */
#define RESCALE_SLACK 8.0f

/* m' = max(m, mx) and the others times exp2(m - m'), into up. */
static void rescale(tk_kernel *k, tk_value *mx, int n, tk_value *const *cur, tk_value **up) {
    up[0] = tk_max(k, cur[0], mx);
    tk_value *alpha = tk_exp2(k, tk_sub(k, cur[0], up[0]));
    for (int i = 1; i < n; i++) up[i] = tk_mul(k, cur[i], alpha);
}

void tk_attn_rescale(tk_kernel *k, tk_value *mx, int n, tk_value *const *cur, tk_value **ref,
                     bool lazy) {
    if (!lazy) {
        rescale(k, mx, n, cur, ref);
        return;
    }
    tk_value *up[2 + MAX_ND];
    tk_if_begin(k, tk_gt(k, tk_max_all(k, tk_sub(k, mx, cur[0])), tk_const_f32(k, RESCALE_SLACK)));
    rescale(k, mx, n, cur, up);
    tk_else(k, n, up);
    tk_if_end(k, n, cur, ref);
}

tk_value *tk_attn_lse(tk_kernel *k, tk_value *m, tk_value *l) {
    return tk_mul(k, tk_add(k, m, tk_log2(k, l)), tk_const_f32(k, 0.6931471805599453f)); /* ln 2 */
}

tk_status tk_attn_check_spec(tk_ctx *ctx, const char *fn, tk_dtype dt, int head_dim, int causal) {
    if (dt != TK_BF16 && dt != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: dtype is %s; expected bf16 or f16",
                                fn, tk_dtype_name(dt));
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim is %d; expected 64, 128 or 256", fn, head_dim);
    if (causal != 0 && causal != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: causal is %d; expected 0 or 1", fn,
                                causal);
    return TK_OK;
}

/* The fused rotation's fields (tk/tk_kernels.h): all 0 without rotary. */
static tk_status check_rope(tk_ctx *ctx, const char *fn, const tk_attention_config *c) {
    if (c->rotary < TK_ATTN_ROTARY_NONE || c->rotary > TK_ATTN_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary is %d; expected TK_ATTN_ROTARY_NONE (0), "
                                "TK_ATTN_ROTARY_NEOX (1) or TK_ATTN_ROTARY_GPTJ (2)",
                                fn, c->rotary);
    if (!c->rotary && (c->rotary_dim || c->rotary_tables))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary_dim is %d and rotary_tables %d without rotary; "
                                "expected 0",
                                fn, c->rotary_dim, c->rotary_tables);
    if (!c->rotary) return TK_OK;
    if (c->rotary_dim && (c->rotary_dim < 2 || c->rotary_dim > c->head_dim || c->rotary_dim % 2))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary_dim is %d; expected 0 (head_dim) or an even number "
                                "in 2 .. head_dim (%d)",
                                fn, c->rotary_dim, c->head_dim);
    if (c->rotary_tables != 0 && c->rotary_tables != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: rotary_tables is %d; expected 0 or 1",
                                fn, c->rotary_tables);
    if (c->rotary_tables && c->rotary == TK_ATTN_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: rotary tables with TK_ATTN_ROTARY_GPTJ are not supported "
                                "(as in tk_rotary); use a base",
                                fn);
    if (c->varlen)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: rotary with varlen is not supported (a sequence's rows would "
                                "need their own positions)",
                                fn);
    return TK_OK;
}

/* The kernel's name: shape, then the specialization's suffixes. */
static void kernel_name(const tk_attention_config *cfg, int warps, char *name, size_t n) {
    char shape[16], rope[32] = "";
    snprintf(shape, sizeof shape, cfg->wgmma ? (warps == 8 ? "wgmma" : "wgmma12") : "w%d", warps);
    if (cfg->rotary)
        snprintf(rope, sizeof rope, "_rope_%s_r%d%s",
                 cfg->rotary == TK_ATTN_ROTARY_GPTJ ? "gptj" : "neox",
                 cfg->rotary_dim ? cfg->rotary_dim : cfg->head_dim,
                 cfg->rotary_tables ? "_tables" : "");
    snprintf(name, n, "tk_attn_fwd_%s_d%d_%s%s%s%s", tk_dtype_name(cfg->dtype), cfg->head_dim,
             shape, cfg->causal ? "_causal" : "", cfg->varlen ? "_varlen" : "", rope);
}

tk_status tk_attention_fwd_build(tk_ctx *ctx, const tk_attention_config *cfg, tk_kernel **out) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_attention_fwd_build: %s is NULL",
                                out ? "cfg" : "out");
    *out = NULL;
    const char *fn = "tk_attention_fwd_build";
    if (cfg->wgmma != 0 && cfg->wgmma != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: wgmma is %d; expected 0 or 1", fn,
                                cfg->wgmma);
    tk_status s = tk_attn_check_spec(ctx, fn, cfg->dtype, cfg->head_dim, cfg->causal);
    if (s) return s;
    if (cfg->varlen != 0 && cfg->varlen != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: varlen is %d; expected 0 or 1", fn,
                                cfg->varlen);
    if ((s = check_rope(ctx, fn, cfg))) return s;
    /* the wgmma kernel: warpgroups of 64 rows (attention_hopper.c says
     * how many); mma.sync: see "Shape" */
    int warps = cfg->warps ? cfg->warps : cfg->wgmma ? tk_attn_hopper_warps(cfg->head_dim) : 4;
    if (cfg->wgmma && warps != 8 && !(warps == 12 && cfg->head_dim == 64))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; the wgmma kernel has 8 warps (two warpgroups), "
                                "or 12 (three) at head_dim 64",
                                fn, cfg->warps);
    if (!cfg->wgmma && warps != 4 && warps != 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0 (default), 4 or 8", fn, cfg->warps);
    char name[96];
    kernel_name(cfg, warps, name, sizeof name);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, warps, &k))) return s;
    if (cfg->wgmma) {
        tk_attn_hopper_body(k, cfg);
    } else {
        /* D 256: 16 rows per warp (O alone is 128 registers a thread), so
         * 64 rows per block of 4 warps, whose 96 KiB of tiles fit every
         * target */
        const int bq = cfg->head_dim == 256 ? 16 * warps : BQ;
        attn a = {.k = k,
                  .cfg = cfg,
                  .dt = cfg->dtype,
                  .D = cfg->head_dim,
                  .causal = cfg->causal,
                  .bq = bq,
                  .wrows = bq / warps,
                  .q_shared = (bq / warps) * cfg->head_dim > 16 * 128,
                  .varlen = cfg->varlen};
        build(&a);
    }
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
