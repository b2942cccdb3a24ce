/* Attention forward on Hopper's warpgroup multiply (sm_90a): the algorithm
 * of kernels/attention.c (FlashAttention-2's online softmax, same contract,
 * grid and results), with both multiplies on wgmma and every tile through
 * the copy engine.
 *
 * Block = 64 query rows per warpgroup of one (batch, head): two warpgroups
 * (128 rows), or three at D 64 (192; 12 warps; D 128 spills at the 152
 * registers a consumer gets beside three); warpgroup g owns rows 64g...
 * The plan (jit/plan.c) splits the kernel: a producer warpgroup issues the
 * engine's copies, the consumer warpgroups only compute, and as the
 * barriers below are releases to the producer, not rendezvous, each
 * warpgroup runs on its own: one's softmax overlaps another's multiplies. Per key tile j of BKV keys:
 *   S  = Q·K_jᵀ        wgmma: Q (this warpgroup's 64 rows of the block's
 *                       shared Q tile) and K_j from shared memory, K-major
 *   masks              only on the ragged last tile and, causal, on tiles
 *                       crossing the block's diagonal
 *   m' = max(m, c·rowmax S); α = exp2(m - m'); l, O *= α; m = m'
 *                       D 256: lazily, only when a row of the warp outgrew m
 *                       by more than the slack (tk_attn_rescale; a branch
 *                       per warp, whose 16 rows are its own). Measured on
 *                       the H200: +6-9% at D 256 (O is 128 f32 a thread),
 *                       -4% at D 128 and -9% at D 64, where the warp's vote
 *                       (5 shuffles before the branch) costs more on the
 *                       softmax's critical path than the multiplies it saves
 *   P  = exp2(c·S - m)  (c = scale·log2 e), l += rowsum P
 *   O += P·V_j          wgmma: P converted to 16 bits in registers (the
 *                       accumulator's fragment layout is the register A
 *                       layout), V_j from shared memory, N-major
 * and at the end O /= l, L = (m + log2 l)·ln 2. Each multiply is waited for
 * before its result is read (wgmma_wait 0).
 * Registers per consumer thread: O 64xD/128 = D/2 f32, S BKV/2, P BKV/4,
 * plus m, l and addresses: D 128, BKV 128: ~170 of the 224 the plan gives
 * two consumer warpgroups beside a producer warpgroup (three get 152: D 64
 * only). D 256 takes BKV 64.
 * Shared memory: Q BQ x D, K and V two stages of BKV x D each (D 128: 160
 * KiB; D 256: 192 KiB).
 *
 * Pipeline (commit groups: Q K_0 | V_0 | K_1 | V_1 | ...):
 *   copy V_j; commit; wait(1): K_j landed; barrier
 *   S = Q·K_jᵀ
 *   copy K_{j+1} into the other stage (its last reader, S_{j-1}, was
 *   waited for before this trip's barrier); commit
 *   softmax; wait(1): V_j landed; barrier; O += P·V_j
 * V_{j+1} refills the stage P·V_{j-1} read, waited for before the barriers
 * of trip j. No NaN, as in attention.c: m starts at -FLT_MAX, a row
 * without keys ends with l = O = 0 and L = -inf.
 *
 * Rotary (cfg->rotary): once Q's group has landed, each warp rotates its
 * 16 rows of the shared Q tile in place (kernels/rotary_tile.c) and the
 * consumers meet before the first multiply, so S's A operand is sQ at every
 * head dim. Not Q in registers as the register-A form of wgmma: the first
 * version kept the rotated rows there up to D 128, as a loop-invariant A
 * operand, and ptxas (13.0 here; the H100 runs agree) lets such registers
 * die at the multiply that reads them when nothing after the key loop
 * reads them: at D 128 the softmax and P of key tile j reused Q's 32
 * registers, so every tile j >= 1 multiplied P_{j-1}·K_jᵀ (GPU O errors
 * 0.08-0.9 wherever Nkv > 128, i.e. more than one key tile; SASS: the S
 * HGMMAs read R152-R183, written again by the P·V operands before the back
 * edge). At D 64 the same code happened to keep them (fewer registers
 * wanted); the CPU interpreter, which models the IR, never sees it. The
 * price of sQ: the consumers write a tile wgmma reads, so the plan makes
 * both barriers of each key tile a rendezvous of the consumer warpgroups
 * (jit/plan.c, `touches`; a named bar.sync), where otherwise each
 * warpgroup's softmax overlaps another's multiplies (not measured on a GPU
 * yet). K comes rotated (tk/tk_kernels.h says why). */
#include "attention_parts.h"

#include <float.h>

typedef struct hattn {
    tk_kernel *k;
    tk_dtype dt;
    int D, BKV, BQ, causal; /* BQ: query rows per block, 64 per warpgroup */
    int varlen;             /* packed sequences (attention_parts.h)         */
    tk_value *b, *h, *hk;
    tk_rope rope;     /* Q's rotation (cfg->rotary)                          */
    tk_value *q_pos0; /* its i64 parameter: row i's position is i + q_pos0 */
} hattn;

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }

/* The engine's copy of the key tile at kv0 of K or V into `stage`; keys
 * past Nkv read as zeros. */
static void copy_kv(hattn *a, tk_value *stage, tk_value *view, tk_value *kv0) {
    tk_value *idx[4] = {a->b, a->hk, kv0, i32c(a->k, 0)};
    tk_copy_to_shared(a->k, stage, view, idx, 0.0f, TK_COPY_TMA);
}

/* The copy of key tile j into stage j % 2 of ring, when j < ntiles. */
static void copy_kv_if(hattn *a, tk_value *ring, tk_value *view, tk_value *j, tk_value *ntiles) {
    tk_kernel *k = a->k;
    tk_if_begin(k, tk_lt(k, j, ntiles));
    copy_kv(a, tk_stage(k, ring, tk_rem(k, j, i32c(k, 2))), view, tk_mul(k, j, i32c(k, a->BKV)));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* Rows `row`.. of the block (query rows q0 + row..): their first position
 * (i64) and where they lie in Q (at[4]). */
static tk_value *rope_at(hattn *a, tk_value *q0, tk_value *row, tk_value **at) {
    tk_kernel *k = a->k;
    tk_value *qr = tk_add(k, q0, row);
    at[0] = a->b, at[1] = a->h, at[2] = qr, at[3] = i32c(k, 0);
    return tk_add(k, tk_cvt(k, qr, TK_I64), a->q_pos0);
}

/* Q rotated for S's A operand once Q's group 0 has landed: each warp's 16
 * rows of sQ in place (the header says why not in registers). */
static void rope_q(hattn *a, tk_value *sQ, tk_value *q0) {
    tk_kernel *k = a->k;
    tk_async_wait(k, 0);
    tk_barrier(k); /* every thread's part of Q (the lockstep copy) */
    tk_value *at[4];
    tk_value *wrow = tk_mul(k, tk_warp_id(k), i32c(k, 16)), *pos0 = rope_at(a, q0, wrow, at);
    tk_type bt = tk_tile_type(a->dt, 16, 16, TK_WARP, TK_ROW);
    tk_rope_shared(k, &a->rope, sQ, wrow, bt, pos0, 4, at);
    tk_barrier(k); /* the stores, fenced over to wgmma's async proxy */
}

static void build(hattn *a, const tk_attention_config *cfg) {
    tk_kernel *k = a->k;
    const int D = a->D, BKV = a->BKV, BQ = a->BQ;
    tk_dtype dt = a->dt;
    tk_attn_io v; /* the longest causal blocks first, as in attention.c */
    tk_attn_fwd_params(k, dt, a->varlen, &v);
    tk_attn_fwd_rope(k, cfg, &v, &a->rope, &a->q_pos0);
    tk_spec(k, "head_dim", D);
    tk_spec(k, "causal", a->causal);
    tk_spec(k, "wgmma", 1);
    if (a->varlen) tk_spec(k, "varlen", 1);
    tk_attn_fwd_grid(k, &v, BQ);
    tk_value *Q = v.Q, *K = v.K, *V = v.V, *O = v.O, *L = v.L, *scale = v.scale;
    tk_value *Hq = v.Hq, *Hkv = v.Hkv, *Nq = v.Nq, *Nkv = v.Nkv, *qt = v.qt;
    a->h = v.h;
    a->b = v.b;
    a->hk = tk_div(k, a->h, tk_max(k, tk_div(k, Hq, Hkv), i32c(k, 1)));
    tk_value *q0 = tk_mul(k, qt, i32c(k, BQ));
    tk_value *row = tk_mul(k, tk_warpgroup_id(k), i32c(k, 64)); /* in the block */
    tk_value *qw = tk_add(k, q0, row);
    tk_value *diag = tk_sub(k, Nkv, Nq); /* row i attends keys j <= i + diag */

    /* Q first: the swizzled tiles wgmma reads are allocated first, aligned */
    tk_value *sQ = tk_shared(k, dt, BQ, D, TK_SMEM_SWIZZLE, 1);
    tk_value *sK = tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, 2);
    tk_value *sV = tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, 2);

    tk_value *ntiles = tk_attn_key_tiles(k, Nq, Nkv, q0, BQ, BKV, diag, a->causal);
    ntiles = tk_attn_live_tiles(k, &v, ntiles);
    tk_value *scale2 = tk_attn_scale2(k, scale);

    tk_value *iq[4] = {a->b, a->h, q0, i32c(k, 0)};
    tk_copy_to_shared(k, sQ, Q, iq, 0.0f, TK_COPY_TMA);
    copy_kv_if(a, sK, K, i32c(k, 0), ntiles); /* group 0: Q and K_0 */

    /* S's A: the shared Q tile, rotated in place with rotary */
    if (a->q_pos0) rope_q(a, sQ, q0);

    tk_type vrow = tk_vec_type(TK_F32, 64, TK_PER_ROW, TK_WARPGROUP, TK_ROW);
    tk_type s_t = tk_tile_type(TK_F32, 64, BKV, TK_WARPGROUP, TK_ROW);
    tk_type o_t = tk_tile_type(TK_F32, 64, D, TK_WARPGROUP, TK_ROW);
    tk_value *init[3], *cur[3], *next[3], *fin[3];
    tk_attn_state_init(k, vrow, o_t, 1, init);
    tk_value *j = tk_for_begin(k, i32c(k, 0), ntiles, i32c(k, 1), 3, init, cur);
    {
        tk_value *st = tk_rem(k, j, i32c(k, 2)), *kv0 = tk_mul(k, j, i32c(k, BKV));
        copy_kv(a, tk_stage(k, sV, st), V, kv0);
        tk_async_commit(k);
        tk_async_wait(k, 1); /* K_j landed (V_j may be in flight) */
        tk_barrier(k);
        tk_value *s = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, s_t), sQ, tk_stage(k, sK, st), row);
        s = tk_wgmma_wait(k, s, 0);
        copy_kv_if(a, sK, K, tk_add(k, j, i32c(k, 1)), ntiles);
        s = tk_attn_mask(k, s, BKV, a->causal, kv0, Nkv, qw, q0, diag);

        tk_value *ref[3]; /* m, l, O on the tile's reference; lazy: see the header */
        tk_attn_rescale(k, tk_mul(k, tk_row_max(k, s), scale2), 3, cur, ref, D == 256);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, scale2), ref[0]));
        next[0] = ref[0];
        next[1] = tk_add(k, ref[1], tk_row_sum(k, p));
        tk_value *o = ref[2];

        tk_async_wait(k, 1); /* V_j landed (K_{j+1} may be in flight) */
        tk_barrier(k);
        o = tk_wgmma(k, TK_MMA_AB, o, tk_cvt(k, p, dt), tk_stage(k, sV, st), NULL);
        next[2] = tk_wgmma_wait(k, o, 0);
    }
    tk_for_end(k, 3, next, fin);
    tk_async_wait(k, 0); /* a block without keys still has Q's copy in flight */

    /* O / l; L from m and l (attention_parts.h) */
    tk_value *inv_l = tk_attn_inv_l(k, fin[1]);
    tk_value *io[4] = {a->b, a->h, qw, i32c(k, 0)};
    tk_store(k, O, io, tk_cvt(k, tk_mul(k, fin[2], inv_l), dt));
    tk_value *il[3] = {a->b, a->h, qw};
    tk_store(k, L, il, tk_attn_lse(k, fin[0], fin[1]));
}

void tk_attn_hopper_body(tk_kernel *k, const tk_attention_config *cfg) {
    hattn a = {.k = k,
               .dt = cfg->dtype,
               .D = cfg->head_dim,
               .BKV = cfg->head_dim <= 128 ? 128 : 64,
               .BQ = 16 * tk_kernel_warps(k),
               .causal = cfg->causal,
               .varlen = cfg->varlen};
    build(&a, cfg);
}

/* Measured on the H200 (bench/RESULTS.md, session 10): at D 64 three
 * warpgroups run 5-20% faster than two (B4 H32 N4096: 407 vs 348 TFLOP/s;
 * N 16384: 436 vs 364): the softmax is as long as the multiplies there, and
 * a third warpgroup keeps the tensor cores busy through two others' softmax.
 * The exception measured: B16 N1024 causal, 182 against 191-204 (a head has
 * 6 blocks of 192 rows; more of the causal triangle idles). */
int tk_attn_hopper_warps(int head_dim) { return head_dim == 64 ? 12 : 8; }
