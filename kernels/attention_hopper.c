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
#include <stdlib.h>
#include <string.h>

typedef struct hattn {
    tk_kernel *k;
    tk_dtype dt;
    int D, BKV, BQ, causal; /* BQ: query rows per block, 64 per warpgroup */
    int varlen;             /* packed sequences (attention_parts.h)         */
    int overlap;            /* overlapped_trips, else serial_trips          */
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

/* What the key loop reads besides hattn: the types, the shared tiles, the
 * views and the block's scalars. */
typedef struct hsoft {
    tk_type s_t, o_t, vrow;
    tk_value *sQ, *sK, *sV, *K, *V; /* tiles (rings) and their views  */
    tk_value *row;                  /* the warpgroup's first row in sQ */
    tk_value *scale2, *Nkv, *qw, *q0, *diag, *ntiles;
} hsoft;

/* S_j's scores masked where needed, scaled, against the carried max m:
 * ref[0] = m' = max(m, c·rowmax S), ref[1] = l·α, ref[2] = O·α (or, with
 * n = 2, no O: the overlapped trip scales O once its multiply is waited
 * for, and gets α in *alpha), and returns P = exp2(c·S - m'). */
static tk_value *softmax(hattn *a, const hsoft *m, tk_value *s, tk_value *j, int n,
                         tk_value *const *cur, tk_value **ref, tk_value **alpha) {
    tk_kernel *k = a->k;
    tk_value *kv0 = tk_mul(k, j, i32c(k, a->BKV));
    s = tk_attn_mask(k, s, a->BKV, a->causal, kv0, m->Nkv, m->qw, m->q0, m->diag);
    tk_value *mx = tk_mul(k, tk_row_max(k, s), m->scale2);
    if (alpha) { /* eager, O apart */
        ref[0] = tk_max(k, cur[0], mx);
        *alpha = tk_exp2(k, tk_sub(k, cur[0], ref[0]));
        ref[1] = tk_mul(k, cur[1], *alpha);
    } else {
        tk_attn_rescale(k, mx, n, cur, ref, a->D == 256);
    }
    return tk_exp2(k, tk_sub(k, tk_mul(k, s, m->scale2), ref[0]));
}

/* One key tile a trip, each multiply waited for before its result is read
 * (the header's pipeline). fin: m, l, O after the last tile. */
static void serial_trips(hattn *a, const hsoft *m, tk_value **fin) {
    tk_kernel *k = a->k;
    tk_value *init[3], *cur[3], *next[3];
    tk_attn_state_init(k, m->vrow, m->o_t, 1, init);
    tk_value *j = tk_for_begin(k, i32c(k, 0), m->ntiles, i32c(k, 1), 3, init, cur);
    {
        tk_value *st = tk_rem(k, j, i32c(k, 2)), *kv0 = tk_mul(k, j, i32c(k, a->BKV));
        copy_kv(a, tk_stage(k, m->sV, st), m->V, kv0);
        tk_async_commit(k);
        tk_async_wait(k, 1); /* K_j landed (V_j may be in flight) */
        tk_barrier(k);
        tk_value *s =
            tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, m->s_t), m->sQ, tk_stage(k, m->sK, st), m->row);
        s = tk_wgmma_wait(k, s, 0);
        copy_kv_if(a, m->sK, m->K, tk_add(k, j, i32c(k, 1)), m->ntiles);
        tk_value *ref[3]; /* m, l, O on the tile's reference; lazy: see the header */
        tk_value *p = softmax(a, m, s, j, 3, cur, ref, NULL);
        next[0] = ref[0];
        next[1] = tk_add(k, ref[1], tk_row_sum(k, p));
        tk_async_wait(k, 1); /* V_j landed (K_{j+1} may be in flight) */
        tk_barrier(k);
        tk_value *o =
            tk_wgmma(k, TK_MMA_AB, ref[2], tk_cvt(k, p, a->dt), tk_stage(k, m->sV, st), NULL);
        next[2] = tk_wgmma_wait(k, o, 0);
    }
    tk_for_end(k, 3, next, fin);
}

/* FlashAttention-3's intra-warpgroup overlap: trip j issues S_j = Q·K_jᵀ
 * and O += P_{j-1}·V_{j-1}, waits for S_j alone, runs S_j's softmax while
 * the P·V multiply runs, then waits for it (pinned behind the row sum:
 * ptxas would hoist the wait above the softmax, round 9) and scales O by
 * α. Tile 0's S and softmax come before the loop, the last P·V after it;
 * a block without keys still runs tile 0, which its masks empty (P = 0).
 * Copies (commit groups Q K_0 | V_0 | K_1 | V_1 K_2 | V_2 K_3 | ...): trip
 * j waits for everything in flight (K_j and V_{j-1}), then refills the
 * stages that S_{j-1} and P_{j-2}·V_{j-2} read, both waited for in trip
 * j - 1: V_j and K_{j+1}. */
static void overlapped_trips(hattn *a, const hsoft *m, tk_value **fin) {
    tk_kernel *k = a->k;
    tk_value *one = i32c(k, 1), *two = i32c(k, 2), *nt = m->ntiles; /* >= 1 */
    copy_kv(a, tk_stage(k, m->sV, i32c(k, 0)), m->V, i32c(k, 0));
    tk_async_commit(k);
    tk_async_wait(k, 1); /* Q and K_0 landed */
    tk_barrier(k);
    copy_kv_if(a, m->sK, m->K, one, nt);
    tk_value *s =
        tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, m->s_t), m->sQ, tk_stage(k, m->sK, i32c(k, 0)), m->row);
    s = tk_wgmma_wait(k, s, 0);
    tk_value *init[4], *cur[4], *next[4], *ref[2], *alpha;
    tk_attn_state_init(k, m->vrow, m->o_t, 1, init);
    tk_value *p = softmax(a, m, s, i32c(k, 0), 2, init, ref, &alpha);
    init[0] = ref[0];
    init[1] = tk_row_sum(k, p); /* l·α = 0 */
    init[3] = tk_cvt(k, p, a->dt);
    tk_value *j = tk_for_begin(k, one, nt, one, 4, init, cur);
    {
        tk_value *st = tk_rem(k, j, two), *prev = tk_rem(k, tk_sub(k, j, one), two);
        tk_async_wait(k, 0); /* K_j and V_{j-1} landed */
        tk_barrier(k);
        copy_kv(a, tk_stage(k, m->sV, st), m->V, tk_mul(k, j, i32c(k, a->BKV)));
        tk_async_commit(k);
        copy_kv_if(a, m->sK, m->K, tk_add(k, j, one), nt);
        s = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, m->s_t), m->sQ, tk_stage(k, m->sK, st), m->row);
        tk_value *o = tk_wgmma(k, TK_MMA_AB, cur[2], cur[3], tk_stage(k, m->sV, prev), NULL);
        s = tk_wgmma_wait(k, s, 1);
        p = softmax(a, m, s, j, 2, cur, ref, &alpha);
        next[0] = ref[0];
        next[1] = tk_add(k, ref[1], tk_row_sum(k, p));
        o = tk_wgmma_wait_after(k, o, 0, next[1]);
        next[2] = tk_mul(k, o, alpha);
        next[3] = tk_cvt(k, p, a->dt);
    }
    tk_value *last[4];
    tk_for_end(k, 4, next, last);
    tk_async_wait(k, 0); /* V_{nt-1} landed */
    tk_barrier(k);
    tk_value *st = tk_rem(k, tk_sub(k, nt, one), two);
    tk_value *o = tk_wgmma(k, TK_MMA_AB, last[2], last[3], tk_stage(k, m->sV, st), NULL);
    fin[0] = last[0], fin[1] = last[1], fin[2] = tk_wgmma_wait(k, o, 0);
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
    /* the overlapped trip runs tile 0 in every block (its masks empty it) */
    if (a->overlap) ntiles = tk_max(k, ntiles, i32c(k, 1));
    copy_kv_if(a, sK, K, i32c(k, 0), ntiles); /* group 0: Q and K_0 */

    /* S's A: the shared Q tile, rotated in place with rotary */
    if (a->q_pos0) rope_q(a, sQ, q0);

    hsoft sm = {.s_t = tk_tile_type(TK_F32, 64, a->BKV, TK_WARPGROUP, TK_ROW),
                .o_t = tk_tile_type(TK_F32, 64, D, TK_WARPGROUP, TK_ROW),
                .vrow = tk_vec_type(TK_F32, 64, TK_PER_ROW, TK_WARPGROUP, TK_ROW),
                .sQ = sQ,
                .sK = sK,
                .sV = sV,
                .K = K,
                .V = V,
                .row = row,
                .scale2 = scale2,
                .Nkv = Nkv,
                .qw = qw,
                .q0 = q0,
                .diag = diag,
                .ntiles = ntiles};
    tk_value *fin[3];
    if (a->overlap)
        overlapped_trips(a, &sm, fin);
    else
        serial_trips(a, &sm, fin);
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
               .varlen = cfg->varlen,
               .overlap = tk_attn_hopper_overlap(cfg->head_dim, tk_kernel_warps(k))};
    build(&a, cfg);
}

/* Measured on the H200 (bench/RESULTS.md, session 10): at D 64 three
 * warpgroups run 5-20% faster than two (B4 H32 N4096: 407 vs 348 TFLOP/s;
 * N 16384: 436 vs 364): the softmax is as long as the multiplies there, and
 * a third warpgroup keeps the tensor cores busy through two others' softmax.
 * The exception measured: B16 N1024 causal, 182 against 191-204 (a head has
 * 6 blocks of 192 rows; more of the causal triangle idles). */
int tk_attn_hopper_warps(int head_dim) {
    return head_dim == 64 && !tk_attn_hopper_overlap(64, 8) ? 12 : 8;
}

/* The overlapped trip holds two tiles in flight: at D 128 and at D 64 on
 * two warpgroups, 168 registers and no spill (ptxas 13.0); D 64 on three
 * (128 registers) spills and D 256 does not fit. TK_ATTN_OVERLAP=0/1 sets
 * it where it fits, for A/B runs (it changes the kernel's IR, so the
 * cache keys differ). */
bool tk_attn_hopper_overlap(int head_dim, int warps) {
    bool fits = head_dim == 128 || (head_dim == 64 && warps == 8);
    const char *env = getenv("TK_ATTN_OVERLAP");
    return fits && env && strcmp(env, "1") == 0;
}
