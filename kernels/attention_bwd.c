/* Attention backward, the FlashAttention-2 algorithm without atomics (see
 * tk/tk_kernels.h for the contract; the run entry points are in
 * attention_bwd_run.c).
 *
 * With s = scale·Q Kᵀ (masked), P = exp(s - L) (L: the forward's natural-log
 * log-sum-exp, so P is the forward's softmax) and D = rowsum(dO∘O):
 *   dV = Pᵀ dO      dP = dO Vᵀ      dS = P∘(dP - D)
 *   dQ = scale·dS K                 dK = scale·dSᵀ Q
 * Two kernels, each the only writer of its outputs, so the gradients are
 * bit-identical from run to run (no float atomics, no order-dependent sums):
 *
 *   dQ kernel (TK_ATTN_BWD_DQ), first: one block per (64 query rows, query
 *     head, batch), 4 warps of 16 rows. Each warp computes its rows' D from
 *     dO and O (and writes it to the workspace for the second kernel), keeps
 *     Q, dO in registers, then walks the key tiles (64 keys, K and V in a
 *     2-stage cp.async ring): S = Q·K_jᵀ, P, dP = dO·V_jᵀ, dS, dQ += dS·K_j.
 *   dK/dV kernel (TK_ATTN_BWD_DKDV), second: one block per (64 keys, kv
 *     head, batch), 4 warps of 16 keys. It works on transposed scores, keys
 *     on rows, so every product stays inside a warp's key rows:
 *       Sᵀ = K·Q_iᵀ, Pᵀ = exp2(c·Sᵀ - L₂) (L₂, D per column),
 *       dV += Pᵀ·dO_i, dPᵀ = V·dO_iᵀ, dSᵀ = Pᵀ∘(dPᵀ - D), dK += dSᵀ·Q_i,
 *     over the query tiles of EVERY query head of the kv head's group
 *     (grouped-query attention sums dK, dV over the group inside one block,
 *     in a fixed order). Q_i and dO_i stream through 2-stage rings.
 * The cost of determinism: P and dS are computed twice (once per kernel):
 * the backward does 7 matrix products of the forward's size instead of 5
 * (+40%) in exchange for no atomics and no f32 dQ accumulator (memory
 * traffic for dQ is one store). The fused D pre-pass saves a third launch.
 *
 * Masking: P = exp2(c·s - L₂) with c = scale·log2 e and L₂ = L·log2 e, kept
 * >= -FLT_MAX so that a row without keys (L = -inf) never computes
 * -inf - (-inf): its scores are all masked to -inf, its P is 0.
 *   - ragged keys: the dQ kernel masks columns >= Nkv to -inf; in the dK/dV
 *     kernel a key row past Nkv only feeds its own (unstored) gradient rows;
 *   - ragged queries: Q, dO read 0 and L reads +inf, so P = 0 (dK/dV
 *     kernel); in the dQ kernel they only feed unstored rows;
 *   - causal (bottom-right, key j visible to query i iff j <= i + Nkv - Nq):
 *     fully masked tiles are skipped, tiles crossing the diagonal masked.
 *     The transposed tile has the diagonal the other way round from
 *     TK_MASK_CAUSAL, so the dK/dV kernel adds a 0 / -inf tile made by
 *     masking a -inf tile with fill 0 (one add per element, diagonal tiles
 *     only). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attention_bwd_parts.h"
#include "attention_parts.h"

#define BQ     64 /* query rows per block (dQ) / per tile (dK/dV)   */
#define BKV    64 /* keys per tile (dQ) / per block (dK/dV)         */
#define WR     16 /* rows per warp: 4 warps                         */
#define NWARPS (BQ / WR)

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }
static tk_value *dim32(tk_kernel *k, tk_value *view, int d) {
    return tk_cvt(k, tk_dim(k, view, d), TK_I32);
}

/* The warp's 16 rows of a [B, H, N, D] tensor from global memory, as D/16
 * ROW tiles of 16 x 16 (rows past N read 0). */
static void load_rows(bwd *w, tk_value *view, tk_value *head, tk_value *row, tk_value **out) {
    tk_kernel *k = w->k;
    tk_type t = tk_tile_type(w->dt, WR, 16, TK_WARP, TK_ROW);
    for (int d = 0; d < w->ND; d++) {
        tk_value *idx[4] = {w->b, head, row, i32c(k, 16 * d)};
        out[d] = tk_load(k, t, view, idx, 0.0f);
    }
}

/* Slice d (16 columns) of a warp's 16-row operand: `regs` (registers), or
 * re-read from shared tile `smem` at row `row`. */
static tk_value *slice(bwd *w, tk_value *const *regs, tk_value *smem, tk_value *row, int d) {
    if (regs) return regs[d];
    tk_value *idx[2] = {row, i32c(w->k, 16 * d)};
    return tk_load(w->k, tk_tile_type(w->dt, WR, 16, TK_WARP, TK_ROW), smem, idx, 0.0f);
}

/* X·Yᵀ, 16 x 64 f32: X the warp's 16 rows (see slice), Y a 64-row shared
 * tile read in 64 x 16 ROW slices. */
static tk_value *dot_t(bwd *w, tk_value *const *regs, tk_value *smem, tk_value *row, tk_value *y) {
    tk_kernel *k = w->k;
    tk_type yt = tk_tile_type(w->dt, 64, 16, TK_WARP, TK_ROW);
    tk_value *acc = NULL;
    for (int d = 0; d < w->ND; d++) {
        tk_value *idx[2] = {i32c(k, 0), i32c(k, 16 * d)};
        acc =
            tk_mma(k, TK_MMA_ABT, slice(w, regs, smem, row, d), tk_load(k, yt, y, idx, 0.0f), acc);
    }
    return acc;
}

/* out[d] = acc[d] + X·Y[:, 16d : 16d+16]: X 16 x 64 (the input dtype), Y a
 * 64-row shared tile read in 64 x 16 COL slices (ldmatrix.trans). */
static void mul_acc(bwd *w, tk_value *x, tk_value *y, tk_value *const *acc, tk_value **out) {
    tk_kernel *k = w->k;
    tk_type yt = tk_tile_type(w->dt, 64, 16, TK_WARP, TK_COL);
    for (int d = 0; d < w->ND; d++) {
        tk_value *idx[2] = {i32c(k, 0), i32c(k, 16 * d)};
        out[d] = tk_mma(k, TK_MMA_AB, x, tk_load(k, yt, y, idx, 0.0f), acc[d]);
    }
}

tk_value *tk_attn_bwd_qlo(bwd *w, tk_value *k0, tk_value *diag, tk_value *nqt, int bq) {
    tk_kernel *k = w->k;
    tk_value *qlo = i32c(k, 0);
    if (w->causal) {
        tk_value *first = tk_max(k, tk_sub(k, k0, diag), i32c(k, 0));
        qlo = tk_min(k, tk_div(k, first, i32c(k, bq)), nqt);
    }
    return qlo;
}

tk_value *tk_attn_bwd_ragged_keys(bwd *w, tk_value *s, tk_value *kw, int rows, tk_value *Nkv) {
    tk_kernel *k = w->k;
    tk_if_begin(k, tk_gt(k, tk_add(k, kw, i32c(k, rows)), Nkv));
    tk_value *sm = tk_mask(k, s, TK_MASK_ROWS, kw, Nkv, -INFINITY);
    tk_else(k, 1, &sm);
    tk_value *res;
    tk_if_end(k, 1, &s, &res);
    return res;
}

tk_value *tk_attn_bwd_l2(bwd *w, tk_value *L, tk_type vt, tk_value *idx[3], float fill) {
    tk_kernel *k = w->k;
    tk_value *l = tk_load_n(k, vt, L, 3, idx, fill);
    return tk_max(k, tk_mul(k, l, tk_const_f32(k, TK_LOG2E)), tk_const_f32(k, -FLT_MAX));
}

/* varlen's parameters, after the scale: the prefix sums and the longest
 * sequence's queries and (with_kv: the kernels over Q, K, V) keys. */
static void varlen_params(bwd *w, bwd_io *io, bool with_kv) {
    tk_kernel *k = w->k;
    io->cu_q = tk_param_tensor(k, "cu_seqlens_q", TK_I32, 1);
    if (with_kv) io->cu_kv = tk_param_tensor(k, "cu_seqlens_kv", TK_I32, 1);
    io->max_q = tk_param_scalar(k, "max_seqlen_q", TK_I32);
    if (with_kv) io->max_kv = tk_param_scalar(k, "max_seqlen_kv", TK_I32);
    tk_spec(k, "varlen", 1);
}

/* The run-time scalars both kernels share: c = scale·log2 e, clamped to
 * > 0 as the forward does (so masked -inf scores stay -inf). */
static void common_scalars(bwd *w) {
    tk_kernel *k = w->k;
    w->scale = tk_param_scalar(k, "scale", TK_F32);
    tk_spec(k, "head_dim", w->D);
    tk_spec(k, "causal", w->causal);
    w->scale2 = tk_attn_scale2(k, w->scale);
}

bwd_io tk_attn_bwd_io(bwd *w, int with_o, const char *const *outs, int nouts, int with_acc) {
    tk_kernel *k = w->k;
    bwd_io io = {0};
    io.Q = tk_param_tensor(k, "Q", w->dt, 4);
    io.K = tk_param_tensor(k, "K", w->dt, 4);
    io.V = tk_param_tensor(k, "V", w->dt, 4);
    if (with_o) io.O = tk_param_tensor(k, "O", w->dt, 4);
    io.dO = tk_param_tensor(k, "dO", w->dt, 4);
    io.L = tk_param_tensor(k, "L", TK_F32, 3);
    io.Dw = tk_param_tensor(k, "Dw", TK_F32, 3);
    for (int i = 0; i < nouts; i++) io.out[i] = tk_param_tensor(k, outs[i], w->dt, 4);
    if (with_acc) io.acc = tk_param_tensor(k, "dQacc", TK_F32, 4);
    common_scalars(w);
    if (w->varlen) varlen_params(w, &io, true);
    io.Hq = dim32(k, io.Q, 1), io.Nq = dim32(k, io.Q, 2);
    io.Hkv = dim32(k, io.K, 1), io.Nkv = dim32(k, io.K, 2);
    return io;
}

tk_value *tk_attn_bwd_grid(bwd *w, bwd_io *io, int rows, bool by_keys) {
    tk_kernel *k = w->k;
    tk_value *heads = by_keys ? io->Hkv : io->Hq, *n = by_keys ? io->Nkv : io->Nq;
    if (!w->varlen) {
        tk_value *tiles = tk_ceil_div(k, n, i32c(k, rows));
        tk_set_grid(k, tiles, heads, tk_cvt(k, tk_dim(k, io->Q, 0), TK_I32));
        return tiles;
    }
    tk_value *longest = by_keys ? io->max_kv : io->max_q;
    tk_set_grid(k, tk_ceil_div(k, longest, i32c(k, rows)), heads,
                tk_sub(k, dim32(k, io->cu_q, 0), i32c(k, 1)));
    tk_value *s = tk_block_id(k, 2);
    /* the Hopper kernels keep dQacc transposed, [.., D, Nq'] */
    int acc_ax = w->tile ? 3 : 2;
    tk_value *q[7] = {io->Q, io->O, io->dO, io->L, io->Dw, by_keys ? NULL : io->out[0], io->acc};
    const int qax[7] = {2, 2, 2, 2, 2, 2, acc_ax};
    tk_attn_sequence(k, io->cu_q, s, 7, q, qax);
    io->Q = q[0], io->O = q[1], io->dO = q[2], io->L = q[3], io->Dw = q[4], io->acc = q[6];
    if (!by_keys) io->out[0] = q[5];
    tk_value *kv[4] = {io->K, io->V, by_keys ? io->out[0] : NULL, by_keys ? io->out[1] : NULL};
    tk_attn_sequence(k, io->cu_kv, s, 4, kv, NULL);
    io->K = kv[0], io->V = kv[1];
    if (by_keys) io->out[0] = kv[2], io->out[1] = kv[3];
    io->Nq = dim32(k, io->Q, 2), io->Nkv = dim32(k, io->K, 2);
    return tk_ceil_div(k, by_keys ? io->Nkv : io->Nq, i32c(k, rows));
}

tk_value *tk_attn_bwd_batch(bwd *w) { return w->varlen ? i32c(w->k, 0) : tk_block_id(w->k, 2); }

tk_value *tk_attn_bwd_live(bwd *w, tk_value *n, tk_value *t, tk_value *tiles) {
    if (!w->varlen) return n;
    tk_kernel *k = w->k;
    return tk_select(k, tk_lt(k, t, tiles), n, i32c(k, 0));
}

/* Copies the tile of 64 rows starting at `row` of (b, head) into stage `st`
 * of ring `ring` (rows past N zero-filled). */
static void copy_tile(bwd *w, tk_value *ring, tk_value *st, tk_value *view, tk_value *head,
                      tk_value *row) {
    tk_kernel *k = w->k;
    tk_value *idx[4] = {w->b, head, row, i32c(k, 0)};
    tk_copy_to_shared(k, tk_stage(k, ring, st), view, idx, 0.0f, TK_COPY_ASYNC);
}

/* D = rowsum(dO∘O) in f32 of the warp's 16 rows from qw (the dQ kernel and
 * prep), with dO's slices left in g. */
static tk_value *row_dots(bwd *w, tk_value *dO, tk_value *O, tk_value *h, tk_value *qw,
                          tk_value **g) {
    tk_kernel *k = w->k;
    tk_value *o[8];
    load_rows(w, dO, h, qw, g);
    load_rows(w, O, h, qw, o);
    tk_value *dv = tk_zeros(k, tk_vec_type(TK_F32, WR, TK_PER_ROW, TK_WARP, TK_ROW));
    for (int d = 0; d < w->ND; d++)
        dv = tk_add(k, dv,
                    tk_row_sum(k, tk_mul(k, tk_cvt(k, g[d], TK_F32), tk_cvt(k, o[d], TK_F32))));
    return dv;
}

/* ---- dQ (and D) ---------------------------------------------------------- */
static void build_dq(bwd *w) {
    tk_kernel *k = w->k;
    const int ND = w->ND;
    tk_dtype dt = w->dt;
    bwd_io io = tk_attn_bwd_io(w, 1, (const char *const[]){"dQ"}, 1, 0);
    tk_value *nqt = tk_attn_bwd_grid(w, &io, BQ, false);
    tk_value *Q = io.Q, *K = io.K, *V = io.V, *O = io.O, *dO = io.dO, *L = io.L, *Dw = io.Dw;
    tk_value *dQ = io.out[0];
    tk_value *Hq = io.Hq, *Nq = io.Nq, *Hkv = io.Hkv, *Nkv = io.Nkv;
    /* Causal: the blocks near the end of the sequence see the most keys;
     * run them first. */
    tk_value *qt = tk_sub(k, tk_sub(k, nqt, i32c(k, 1)), tk_block_id(k, 0));
    tk_value *h = tk_block_id(k, 1);
    w->b = tk_attn_bwd_batch(w);
    tk_value *hk = tk_div(k, h, tk_max(k, tk_div(k, Hq, Hkv), i32c(k, 1)));
    tk_value *q0 = tk_mul(k, qt, i32c(k, BQ));
    tk_value *qw = tk_add(k, q0, tk_mul(k, tk_warp_id(k), i32c(k, WR)));
    tk_value *diag = tk_sub(k, Nkv, Nq);

    /* D = rowsum(dO∘O) in f32, for this kernel and the dK/dV kernel. */
    tk_value *q[8], *g[8];
    load_rows(w, Q, h, qw, q);
    tk_value *dv = row_dots(w, dO, O, h, qw, g);
    tk_type vrow = tk_vec_type(TK_F32, WR, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *il[3] = {w->b, h, qw};
    tk_store(k, Dw, il, dv);
    tk_value *l2 = tk_attn_bwd_l2(w, L, vrow, il, 0.0f);

    tk_value *sK = tk_shared(k, dt, BKV, w->D, TK_SMEM_SWIZZLE, 2);
    tk_value *sV = tk_shared(k, dt, BKV, w->D, TK_SMEM_SWIZZLE, 2);
    tk_value *ntiles = tk_ceil_div(k, Nkv, i32c(k, BKV));
    if (w->causal) { /* up to the tile of the last key the block's last row sees */
        tk_value *kend = tk_add(k, tk_min(k, tk_add(k, q0, i32c(k, BQ)), Nq), diag);
        kend = tk_max(k, kend, i32c(k, 0));
        ntiles = tk_min(k, ntiles, tk_ceil_div(k, kend, i32c(k, BKV)));
    }
    ntiles = tk_attn_bwd_live(w, ntiles, tk_block_id(k, 0), nqt);
    tk_if_begin(k, tk_lt(k, i32c(k, 0), ntiles));
    copy_tile(w, sK, i32c(k, 0), K, hk, i32c(k, 0));
    copy_tile(w, sV, i32c(k, 0), V, hk, i32c(k, 0));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);

    tk_type acc_t = tk_tile_type(TK_F32, WR, 16, TK_WARP, TK_ROW);
    tk_value *init[8], *cur[8], *next[8], *fin[8];
    for (int d = 0; d < ND; d++) init[d] = tk_zeros(k, acc_t);
    tk_value *j = tk_for_begin(k, i32c(k, 0), ntiles, i32c(k, 1), ND, init, cur);
    {
        /* Tile j has landed and every warp left tile j-1, whose stage the
         * prefetch of tile j+1 then overwrites while tile j is computed. */
        tk_async_wait(k, 0);
        tk_barrier(k);
        tk_value *st = tk_rem(k, j, i32c(k, 2)), *kv0 = tk_mul(k, j, i32c(k, BKV));
        tk_value *j1 = tk_add(k, j, i32c(k, 1)), *kv1 = tk_add(k, kv0, i32c(k, BKV));
        tk_if_begin(k, tk_lt(k, j1, ntiles));
        copy_tile(w, sK, tk_sub(k, i32c(k, 1), st), K, hk, kv1);
        copy_tile(w, sV, tk_sub(k, i32c(k, 1), st), V, hk, kv1);
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);

        tk_value *kst = tk_stage(k, sK, st), *vst = tk_stage(k, sV, st);
        tk_value *s = dot_t(w, q, NULL, NULL, kst);
        /* Masks: the ragged last tile, and (causal) tiles crossing the
         * diagonal of this warp's rows. */
        tk_value *edge = tk_gt(k, kv1, Nkv);
        if (w->causal)
            edge = tk_or(k, edge, tk_gt(k, tk_add(k, kv0, i32c(k, BKV - 1)), tk_add(k, qw, diag)));
        tk_if_begin(k, edge);
        tk_value *sm = tk_mask(k, s, TK_MASK_COLS, kv0, Nkv, -INFINITY);
        if (w->causal) sm = tk_mask(k, sm, TK_MASK_CAUSAL, tk_add(k, qw, diag), kv0, -INFINITY);
        tk_else(k, 1, &sm);
        tk_value *unmasked = s;
        tk_if_end(k, 1, &unmasked, &s);

        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, w->scale2), l2));
        tk_value *dp = dot_t(w, g, NULL, NULL, vst);
        tk_value *ds = tk_cvt(k, tk_mul(k, p, tk_sub(k, dp, dv)), dt);
        mul_acc(w, ds, kst, cur, next);
    }
    tk_for_end(k, ND, next, fin);
    tk_async_wait(k, 0); /* a block without keys still has its (empty) group */

    for (int d = 0; d < ND; d++) {
        tk_value *idx[4] = {w->b, h, qw, i32c(k, 16 * d)};
        tk_store(k, dQ, idx, tk_cvt(k, tk_mul(k, fin[d], w->scale), dt));
    }
}

/* ---- dK, dV (and, fused, dQ's share) --------------------------------------- */
/* The fused kernel's share of dQ for this trip's query tile: dSᵀ (each
 * warp's 16 key rows, `ds`) through shared memory, then warp w's 16 query
 * rows dQ = dS·K (A: the warp's columns of dSᵀ as a COL tile, Aᵀ·B) by
 * 16-column slices, each added into dQacc ([B, Hq, Nq rounded up to 64, D]:
 * whole tiles) as it is done. The barrier at the next trip's top keeps dSᵀ
 * until every warp has read it. */
static void add_dq(bwd *w, const bwd_io *io, tk_value *ds, tk_value *sDS, tk_value *sK, tk_value *h,
                   tk_value *q0, tk_value *wr) {
    tk_kernel *k = w->k;
    tk_value *at[2] = {wr, i32c(k, 0)};
    tk_store(k, sDS, at, ds);
    tk_barrier(k);
    tk_value *ai[2] = {i32c(k, 0), wr};
    tk_value *a = tk_load(k, tk_tile_type(w->dt, BKV, WR, TK_WARP, TK_COL), sDS, ai, 0.0f);
    tk_type kt = tk_tile_type(w->dt, BKV, 16, TK_WARP, TK_COL);
    for (int d = 0; d < w->ND; d++) {
        tk_value *ki[2] = {i32c(k, 0), i32c(k, 16 * d)};
        tk_value *dq = tk_mma(k, TK_MMA_ATB, a, tk_load(k, kt, sK, ki, 0.0f), NULL);
        tk_value *idx[4] = {w->b, h, tk_add(k, q0, wr), i32c(k, 16 * d)};
        tk_store_add(k, io->acc, idx, dq);
    }
}

static void dkdv(bwd *w, bool fused) {
    tk_kernel *k = w->k;
    const int ND = w->ND;
    tk_dtype dt = w->dt;
    bwd_io io = tk_attn_bwd_io(w, 0, (const char *const[]){"dK", "dV"}, 2, fused);
    tk_value *nkt = tk_attn_bwd_grid(w, &io, BKV, true);
    tk_value *Q = io.Q, *K = io.K, *V = io.V, *dO = io.dO, *L = io.L, *Dw = io.Dw;
    tk_value *dK = io.out[0], *dV = io.out[1];
    tk_value *Hq = io.Hq, *Nq = io.Nq, *Hkv = io.Hkv, *Nkv = io.Nkv;
    /* Causal: the first key blocks are seen by the most queries and run
     * first. */
    tk_value *k0 = tk_mul(k, tk_block_id(k, 0), i32c(k, BKV));
    tk_value *hk = tk_block_id(k, 1);
    w->b = tk_attn_bwd_batch(w);
    tk_value *group = tk_max(k, tk_div(k, Hq, Hkv), i32c(k, 1));
    tk_value *h0 = tk_mul(k, hk, group);
    tk_value *wr = tk_mul(k, tk_warp_id(k), i32c(k, WR));
    tk_value *kw = tk_add(k, k0, wr);
    tk_value *diag = tk_sub(k, Nkv, Nq);

    tk_value *nqt = tk_ceil_div(k, Nq, i32c(k, BQ)), *qlo = tk_attn_bwd_qlo(w, k0, diag, nqt, BQ);
    tk_value *nvis = tk_sub(k, nqt, qlo);
    tk_value *total = tk_mul(k, group, nvis); /* (query head, query tile) pairs */
    total = tk_attn_bwd_live(w, total, tk_block_id(k, 0), nkt);

    /* K and V rows of the warp: in registers for D = 64; for D = 128 (where
     * they would crowd out dK, dV, Sᵀ and dPᵀ) in shared memory, re-read
     * by 16-column slices; fused, in shared memory (dQ reads all of K). */
    tk_value *kr[8], *vr[8], **kreg = NULL, **vreg = NULL, *sK = NULL, *sV = NULL;
    if (w->D == 64 && !fused) {
        load_rows(w, K, hk, kw, kr);
        load_rows(w, V, hk, kw, vr);
        kreg = kr, vreg = vr;
    } else {
        sK = tk_shared(k, dt, BKV, w->D, TK_SMEM_SWIZZLE, 1);
        sV = tk_shared(k, dt, BKV, w->D, TK_SMEM_SWIZZLE, 1);
        tk_value *idx[4] = {w->b, hk, k0, i32c(k, 0)};
        tk_copy_to_shared(k, sK, K, idx, 0.0f, TK_COPY_ASYNC);
        tk_copy_to_shared(k, sV, V, idx, 0.0f, TK_COPY_ASYNC);
    }
    tk_value *sQ = tk_shared(k, dt, BQ, w->D, TK_SMEM_SWIZZLE, 2);
    tk_value *sG = tk_shared(k, dt, BQ, w->D, TK_SMEM_SWIZZLE, 2);
    tk_value *sDS = fused ? tk_shared(k, dt, BKV, BQ, TK_SMEM_SWIZZLE, 1) : NULL; /* dSᵀ */
    tk_if_begin(k, tk_lt(k, i32c(k, 0), total));
    copy_tile(w, sQ, i32c(k, 0), Q, h0, tk_mul(k, qlo, i32c(k, BQ)));
    copy_tile(w, sG, i32c(k, 0), dO, h0, tk_mul(k, qlo, i32c(k, BQ)));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);

    tk_type acc_t = tk_tile_type(TK_F32, WR, 16, TK_WARP, TK_ROW);
    tk_value *init[16], *cur[16], *next[16], *fin[16];
    for (int d = 0; d < 2 * ND; d++) init[d] = tk_zeros(k, acc_t); /* dV[0..ND), dK[ND..) */
    tk_value *t = tk_for_begin(k, i32c(k, 0), total, i32c(k, 1), 2 * ND, init, cur);
    {
        tk_async_wait(k, 0); /* as in the dQ kernel */
        tk_barrier(k);
        tk_value *st = tk_rem(k, t, i32c(k, 2)), *t1 = tk_add(k, t, i32c(k, 1));
        tk_if_begin(k, tk_lt(k, t1, total));
        {
            tk_value *h1 = tk_add(k, h0, tk_div(k, t1, nvis));
            tk_value *r1 = tk_mul(k, tk_add(k, qlo, tk_rem(k, t1, nvis)), i32c(k, BQ));
            copy_tile(w, sQ, tk_sub(k, i32c(k, 1), st), Q, h1, r1);
            copy_tile(w, sG, tk_sub(k, i32c(k, 1), st), dO, h1, r1);
        }
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);

        tk_value *h = tk_add(k, h0, tk_div(k, t, nvis));
        tk_value *q0 = tk_mul(k, tk_add(k, qlo, tk_rem(k, t, nvis)), i32c(k, BQ));
        tk_value *qst = tk_stage(k, sQ, st), *gst = tk_stage(k, sG, st);
        tk_type vcol = tk_vec_type(TK_F32, BQ, TK_PER_COL, TK_WARP, TK_ROW);
        tk_value *il[3] = {w->b, h, q0};
        tk_value *l2 = tk_attn_bwd_l2(w, L, vcol, il, INFINITY); /* P = 0 past Nq */
        tk_value *dv = tk_load(k, vcol, Dw, il, 0.0f);

        tk_value *s = dot_t(w, kreg, sK, wr, qst); /* Sᵀ: keys x queries */
        if (w->causal) {
            /* 0 where key kw+i <= query q0+j + diag, else -inf: masking a
             * -inf tile where q0+diag+1 + j > kw + i, with fill 0. */
            tk_value *edge = tk_gt(k, tk_add(k, kw, i32c(k, WR - 1)), tk_add(k, q0, diag));
            tk_if_begin(k, edge);
            tk_value *ninf = tk_fill(k, tk_tile_type(TK_F32, WR, BQ, TK_WARP, TK_ROW),
                                     tk_const_f32(k, -INFINITY));
            tk_value *bias = tk_mask(k, ninf, TK_MASK_CAUSAL, kw,
                                     tk_add(k, tk_add(k, q0, diag), i32c(k, 1)), 0.0f);
            tk_value *sm = tk_add(k, s, bias);
            tk_else(k, 1, &sm);
            tk_value *unmasked = s;
            tk_if_end(k, 1, &unmasked, &s);
        }
        if (fused) s = tk_attn_bwd_ragged_keys(w, s, kw, WR, Nkv);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, w->scale2), l2));
        mul_acc(w, tk_cvt(k, p, dt), gst, cur, next); /* dV += Pᵀ·dO */
        tk_value *dp = dot_t(w, vreg, sV, wr, gst);   /* dPᵀ = V·dOᵀ */
        tk_value *ds = tk_cvt(k, tk_mul(k, p, tk_sub(k, dp, dv)), dt);
        mul_acc(w, ds, qst, cur + ND, next + ND); /* dK += dSᵀ·Q */
        if (fused) add_dq(w, &io, ds, sDS, sK, h, q0, wr);
    }
    tk_for_end(k, 2 * ND, next, fin);
    tk_async_wait(k, 0);

    for (int d = 0; d < ND; d++) {
        tk_value *idx[4] = {w->b, hk, kw, i32c(k, 16 * d)};
        tk_store(k, dV, idx, tk_cvt(k, fin[d], dt));
        tk_store(k, dK, idx, tk_cvt(k, tk_mul(k, fin[ND + d], w->scale), dt));
    }
}

static void build_dkdv(bwd *w) { dkdv(w, false); }
static void build_fused(bwd *w) { dkdv(w, true); }

/* ---- the non-deterministic mode's first and last kernels -------------------
 * Both serve either kernel set: one block per (64 query rows, query head,
 * batch), 4 warps of 16 rows, on Q's [B, Hq, Nq] grid (Nq: dO's, or dQ's).
 * dQacc's rows run to Nq rounded up to 64 (the fused kernels add whole
 * tiles); its strides are the caller's (the Hopper kernels keep it
 * transposed, [B, Hq, D, Nq']). */
/* The grid over `view`'s rows. varlen: the views v[0..n) (rows on axis 2)
 * are narrowed to the block's sequence, from the prefix sums and longest
 * sequence made here (after the kernel's other parameters), and the grid
 * spans the longest sequence's rows. */
static void rows_grid(bwd *w, tk_value *view, int n, tk_value **v, tk_value **h, tk_value **qw) {
    tk_kernel *k = w->k;
    if (!w->varlen) {
        tk_set_grid(k, tk_ceil_div(k, dim32(k, view, 2), i32c(k, BQ)), dim32(k, view, 1),
                    dim32(k, view, 0));
    } else {
        bwd_io io = {0};
        varlen_params(w, &io, false);
        tk_set_grid(k, tk_ceil_div(k, io.max_q, i32c(k, BQ)), dim32(k, view, 1),
                    tk_sub(k, dim32(k, io.cu_q, 0), i32c(k, 1)));
        tk_attn_sequence(k, io.cu_q, tk_block_id(k, 2), n, v, NULL);
    }
    *h = tk_block_id(k, 1);
    w->b = tk_attn_bwd_batch(w);
    *qw =
        tk_add(k, tk_mul(k, tk_block_id(k, 0), i32c(k, BQ)), tk_mul(k, tk_warp_id(k), i32c(k, WR)));
}

/* prep: D = rowsum(dO∘O) into Dw, and dQacc's rows zeroed. */
static void build_prep(bwd *w) {
    tk_kernel *k = w->k;
    tk_value *v[4] = {tk_param_tensor(k, "O", w->dt, 4), tk_param_tensor(k, "dO", w->dt, 4),
                      tk_param_tensor(k, "Dw", TK_F32, 3), tk_param_tensor(k, "dQacc", TK_F32, 4)};
    tk_spec(k, "head_dim", w->D);
    tk_value *h, *qw;
    rows_grid(w, v[1], 4, v, &h, &qw);
    tk_value *O = v[0], *dO = v[1], *Dw = v[2], *acc = v[3];
    tk_value *g[8], *il[3] = {w->b, h, qw};
    tk_store(k, Dw, il, row_dots(w, dO, O, h, qw, g));
    tk_value *idx[4] = {w->b, h, qw, i32c(k, 0)};
    tk_store(k, acc, idx, tk_zeros(k, tk_tile_type(TK_F32, WR, w->D, TK_WARP, TK_ROW)));
}

/* convert: dQ = scale·dQacc in the dtype. */
static void build_convert(bwd *w) {
    tk_kernel *k = w->k;
    tk_value *acc = tk_param_tensor(k, "dQacc", TK_F32, 4);
    tk_value *dQ = tk_param_tensor(k, "dQ", w->dt, 4);
    w->scale = tk_param_scalar(k, "scale", TK_F32);
    tk_spec(k, "head_dim", w->D);
    tk_value *h, *qw, *v[2] = {dQ, acc};
    rows_grid(w, dQ, 2, v, &h, &qw);
    dQ = v[0], acc = v[1];
    tk_value *idx[4] = {w->b, h, qw, i32c(k, 0)};
    tk_type t = tk_tile_type(TK_F32, WR, w->D, TK_WARP, TK_ROW);
    tk_store(k, dQ, idx, tk_cvt(k, tk_mul(k, tk_load(k, t, acc, idx, 0.0f), w->scale), w->dt));
}

tk_status tk_attn_bwd_check_spec(tk_ctx *ctx, const char *fn, tk_dtype dt, int head_dim,
                                 int causal) {
    if (dt != TK_BF16 && dt != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: dtype is %s; expected bf16 or f16",
                                fn, tk_dtype_name(dt));
    if (head_dim != 64 && head_dim != 128)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: head_dim is %d; expected 64 or 128",
                                fn, head_dim);
    if (causal != 0 && causal != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: causal is %d; expected 0 or 1", fn,
                                causal);
    return TK_OK;
}

tk_status tk_attention_bwd_build(tk_ctx *ctx, const tk_attention_bwd_config *cfg, tk_kernel **out) {
    const char *fn = "tk_attention_bwd_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = tk_attn_bwd_check_spec(ctx, fn, cfg->dtype, cfg->head_dim, cfg->causal);
    if (s) return s;
    if (cfg->part < TK_ATTN_BWD_DQ || cfg->part > TK_ATTN_BWD_CONVERT)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: part is %d; expected a tk_attention_bwd_part (TK_ATTN_BWD_DQ "
                                ".. TK_ATTN_BWD_CONVERT)",
                                fn, cfg->part);
    if (cfg->wgmma != 0 && cfg->wgmma != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: wgmma is %d; expected 0 or 1", fn,
                                cfg->wgmma);
    if (cfg->varlen != 0 && cfg->varlen != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: varlen is %d; expected 0 or 1", fn,
                                cfg->varlen);
    static const char *const parts[] = {"dq", "dkdv", "prep", "fused", "convert"};
    bool any = tk_attn_bwd_any_set(cfg->part);
    int causal = !any && cfg->causal, wgmma = !any && cfg->wgmma;
    char name[64];
    snprintf(name, sizeof name, "tk_attn_bwd_%s_%s_d%d%s%s%s", parts[cfg->part],
             tk_dtype_name(cfg->dtype), cfg->head_dim, causal ? "_causal" : "",
             wgmma ? "_wgmma" : "", cfg->varlen ? "_varlen" : "");
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, wgmma ? 8 : NWARPS, &k))) return s;
    bwd w = {.k = k,
             .dt = cfg->dtype,
             .D = cfg->head_dim,
             .ND = cfg->head_dim / 16,
             .causal = causal,
             .varlen = cfg->varlen};
    void (*body[2][5])(bwd *) = {{build_dq, build_dkdv, build_prep, build_fused, build_convert},
                                 {tk_attn_bwd_hopper_dq, tk_attn_bwd_hopper_dkdv, build_prep,
                                  tk_attn_bwd_hopper_fused, build_convert}};
    body[wgmma][cfg->part](&w);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
