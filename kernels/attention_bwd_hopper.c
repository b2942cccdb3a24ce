/* Attention backward on Hopper's warpgroup multiply (sm_90a): the two
 * kernels of attention_bwd.c (same algorithm, contract, parameters and
 * results; deterministic, no atomics) with every product on wgmma and
 * every tile through the copy engine. The plan (jit/plan.c) gives each a
 * producer warpgroup that issues the copies, so the barriers below are
 * releases to it, not rendezvous of the consumers.
 *
 * Each kernel has two consumer warpgroups; warpgroup g owns rows 64g.. of
 * the block's rows (query rows in the dQ kernel, key rows in the dK/dV
 * kernel), so every product's rows stay its own:
 *
 *   dQ kernel: 128 query rows of one (batch, head) a block; Q and dO in
 *     shared memory for the whole block, D = rowsum(dO∘O) from registers
 *     (written to Dw for the second kernel), then per key tile j of BKV
 *     keys:
 *       S = Q·K_jᵀ, dP = dO·V_jᵀ   two wgmma, issued together
 *       P = exp2(c·S - L₂)           masks as the forward's (attention_parts.h)
 *       dS = P∘(dP - D)
 *       dQ += dS·K_j                 dS from registers, K_j N-major
 *   dK/dV kernel: 128 keys of one (batch, kv head) a block; K and V in
 *     shared memory, then per (query head of the group, query tile), on
 *     transposed scores:
 *       Sᵀ = K·Q_iᵀ, dPᵀ = V·dO_iᵀ  two wgmma, issued together
 *       Pᵀ = exp2(c·Sᵀ - L₂)         L₂, D per column; causal: a 0 / -inf
 *                                    bias on tiles crossing the diagonal
 *       dSᵀ = Pᵀ∘(dPᵀ - D)
 *       dV += Pᵀ·dO_i, dK += dSᵀ·Q_i  from registers, dO_i and Q_i N-major
 * The loop's tiles stream through 3-stage rings (K_j, V_j or Q_i, dO_i):
 * each trip waits for its tile and issues its first two multiplies; the
 * last multiplies of the trip before (dQ, or dV and dK), which ran on
 * beside that issue, are retired then, and a second barrier frees their
 * tile's stage, which the producer refills with the tile two ahead.
 * Tiles: 64 rows, but 128 keys in the dQ kernel at D 64 and 32 queries
 * in the dK/dV kernel when causal at D 128. Measured on the
 * H200 against two stages and other tiles: bench/RESULTS.md, session 11.
 * The masking and the conventions at the edges are attention_bwd.c's. */
#include <math.h>

#include "attention_bwd_parts.h"
#include "attention_parts.h"

#define ROWS   128 /* rows a block: two warpgroups of 64 */
#define STAGES 3   /* ring depth: tile j+2 is copied during trip j */

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }

/* The engine's copy of the `rows` x D tile at `row` of (b, head) of view
 * into smem (rows past N read 0). */
static void copy_rows(bwd *w, tk_value *smem, tk_value *view, tk_value *head, tk_value *row) {
    tk_value *idx[4] = {w->b, head, row, i32c(w->k, 0)};
    tk_copy_to_shared(w->k, smem, view, idx, 0.0f, TK_COPY_TMA);
}

static tk_type acc_type(int cols) { return tk_tile_type(TK_F32, 64, cols, TK_WARPGROUP, TK_ROW); }

/* A kernel's stream of tiles through rings of STAGES stages: tile j goes
 * to stage j % STAGES, STAGES - 1 tiles ahead of the one computed; `copy`
 * issues tile j's copies into stage st (j < n). */
typedef struct stream {
    bwd *w;
    tk_value *n;
    void (*copy)(const struct stream *, tk_value *j, tk_value *st);
    /* what copy needs: the rings and their tensors; the dQ kernel's kv head
     * and keys per tile (head, per); the dK/dV kernel's first query head,
     * first query tile and query tiles per head (head, lo, per), and where
     * its walk starts (rot: NULL, or trip t takes pair (t + rot) % n) */
    tk_value *ring[2], *view[2], *head, *lo, *per, *rot;
} stream;

/* Tile j's copies when j < n; one group either way. */
static void stream_copy(const stream *s, tk_value *j) {
    tk_kernel *k = s->w->k;
    tk_if_begin(k, tk_lt(k, j, s->n));
    s->copy(s, j, tk_rem(k, j, i32c(k, STAGES)));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* The first STAGES - 1 tiles (the first group also carries the copies
 * issued before). */
static void stream_start(const stream *s) {
    for (int i = 0; i < STAGES - 1; i++) stream_copy(s, i32c(s->w->k, i));
}

/* At the top of trip j: tile j landed, and a barrier makes it every
 * thread's (the copies are the producer's). Returns its stage. */
static tk_value *stream_wait(tk_kernel *k, tk_value *j) {
    tk_async_wait(k, STAGES - 2);
    tk_barrier(k);
    return tk_rem(k, j, i32c(k, STAGES));
}

/* Once every consumer is done with tile j - 1 (its multiplies retired), a
 * second barrier frees its stage, and tile j + STAGES - 1 refills it. */
static void stream_refill(const stream *s, tk_value *j) {
    tk_kernel *k = s->w->k;
    tk_barrier(k);
    stream_copy(s, tk_add(k, j, i32c(k, STAGES - 1)));
}

/* ---- dQ (and D) ---------------------------------------------------------- */
/* Key tile j (s->per keys) of K and V into stage st. */
static void copy_kv(const stream *s, tk_value *j, tk_value *st) {
    tk_kernel *k = s->w->k;
    tk_value *kv0 = tk_mul(k, j, s->per);
    for (int i = 0; i < 2; i++)
        copy_rows(s->w, tk_stage(k, s->ring[i], st), s->view[i], s->head, kv0);
}

void tk_attn_bwd_hopper_dq(bwd *w) {
    tk_kernel *k = w->k;
    /* D 64: key tiles of 128 (+1-3% over 64, measured on the H200); at D
     * 128, 128 would spill */
    w->tile = w->D == 64 ? 128 : 64;
    const int D = w->D, BKV = w->tile;
    tk_dtype dt = w->dt;
    bwd_io io = tk_attn_bwd_io(w, 1, (const char *const[]){"dQ"}, 1, 0);
    tk_value *nqt = tk_attn_bwd_grid(w, &io, ROWS, false);
    tk_value *Nq = io.Nq, *Nkv = io.Nkv;
    /* causal: the blocks that see the most keys first */
    tk_value *q0 =
        tk_mul(k, tk_sub(k, tk_sub(k, nqt, i32c(k, 1)), tk_block_id(k, 0)), i32c(k, ROWS));
    tk_value *h = tk_block_id(k, 1);
    w->b = tk_attn_bwd_batch(w);
    tk_value *hk = tk_div(k, h, tk_max(k, tk_div(k, io.Hq, io.Hkv), i32c(k, 1)));
    tk_value *row = tk_mul(k, tk_warpgroup_id(k), i32c(k, 64));
    tk_value *qw = tk_add(k, q0, row);
    tk_value *diag = tk_sub(k, Nkv, Nq);

    /* the swizzled tiles wgmma reads first: the engine wants them aligned */
    tk_value *sQ = tk_shared(k, dt, ROWS, D, TK_SMEM_SWIZZLE, 1);
    tk_value *sG = tk_shared(k, dt, ROWS, D, TK_SMEM_SWIZZLE, 1);
    stream kv = {
        .w = w,
        .n = tk_attn_bwd_live(w, tk_attn_key_tiles(k, Nq, Nkv, q0, ROWS, BKV, diag, w->causal),
                              tk_block_id(k, 0), nqt),
        .copy = copy_kv,
        .ring = {tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, STAGES),
                 tk_shared(k, dt, BKV, D, TK_SMEM_SWIZZLE, STAGES)},
        .view = {io.K, io.V},
        .head = hk,
        .per = i32c(k, BKV)};
    copy_rows(w, sQ, io.Q, h, q0);
    copy_rows(w, sG, io.dO, h, q0);
    stream_start(&kv);

    /* D = rowsum(dO∘O) of the warpgroup's rows, in f32, from registers */
    tk_type rows_t = tk_tile_type(dt, 64, D, TK_WARPGROUP, TK_ROW);
    tk_value *io4[4] = {w->b, h, qw, i32c(k, 0)};
    tk_value *g = tk_cvt(k, tk_load(k, rows_t, io.dO, io4, 0.0f), TK_F32);
    tk_value *dv =
        tk_row_sum(k, tk_mul(k, g, tk_cvt(k, tk_load(k, rows_t, io.O, io4, 0.0f), TK_F32)));
    tk_value *il[3] = {w->b, h, qw};
    tk_store(k, io.Dw, il, dv);
    tk_type vrow = tk_vec_type(TK_F32, 64, TK_PER_ROW, TK_WARPGROUP, TK_ROW);
    tk_value *l2 = tk_attn_bwd_l2(w, io.L, vrow, il, 0.0f);

    tk_value *init = tk_zeros(k, acc_type(D)), *cur, *next, *fin;
    tk_value *j = tk_for_begin(k, i32c(k, 0), kv.n, i32c(k, 1), 1, &init, &cur);
    {
        tk_value *st = stream_wait(k, j), *kv0 = tk_mul(k, j, i32c(k, BKV));
        tk_value *kst = tk_stage(k, kv.ring[0], st), *vst = tk_stage(k, kv.ring[1], st);
        tk_value *s = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, acc_type(BKV)), sQ, kst, row);
        tk_value *dp = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, acc_type(BKV)), sG, vst, row);
        /* the last trip's dQ multiply (issued before these two) has run on
         * until here, beside their issue; retired, its K tile is free */
        tk_value *dq = tk_wgmma_wait(k, cur, 2);
        stream_refill(&kv, j);
        s = tk_wgmma_wait(k, s, 1);
        s = tk_attn_mask(k, s, BKV, w->causal, kv0, Nkv, qw, q0, diag);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, w->scale2), l2));
        dp = tk_wgmma_wait(k, dp, 0);
        tk_value *ds = tk_cvt(k, tk_mul(k, p, tk_sub(k, dp, dv)), dt);
        next = tk_wgmma(k, TK_MMA_AB, dq, ds, kst, NULL); /* retired next trip */
    }
    tk_for_end(k, 1, &next, &fin);
    fin = tk_wgmma_wait(k, fin, 0);
    tk_async_wait(k, 0); /* a block without keys still has Q's copy in flight */
    tk_store(k, io.out[0], io4, tk_cvt(k, tk_mul(k, fin, w->scale), dt));
}

/* ---- dK, dV ---------------------------------------------------------------- */
/* Sᵀ plus, on tiles crossing the diagonal of the warpgroup's keys from kw,
 * 0 where key kw+i <= query q0+j + diag and -inf elsewhere: a -inf tile
 * masked with fill 0 where q0+diag+1 + j > kw + i (TK_MASK_CAUSAL keeps the
 * other triangle, attention_bwd.c says why). */
static tk_value *causal_t(bwd *w, tk_value *s, tk_value *kw, tk_value *q0, tk_value *diag) {
    tk_kernel *k = w->k;
    tk_value *edge = tk_gt(k, tk_add(k, kw, i32c(k, 63)), tk_add(k, q0, diag));
    tk_if_begin(k, edge);
    tk_value *ninf = tk_fill(k, acc_type(w->tile), tk_const_f32(k, -INFINITY));
    tk_value *from = tk_add(k, tk_add(k, q0, diag), i32c(k, 1));
    tk_value *sm = tk_add(k, s, tk_mask(k, ninf, TK_MASK_CAUSAL, kw, from, 0.0f));
    tk_else(k, 1, &sm);
    tk_value *res;
    tk_if_end(k, 1, &s, &res);
    return res;
}

/* The dK/dV kernels' trip t (t < n): its query head h and first query row
 * q0, of the (query head, query tile) pairs, s->per query tiles a head from
 * tile s->lo, taken from pair s->rot on. */
static void qg_pair(const stream *s, tk_value *t, tk_value **h, tk_value **q0) {
    tk_kernel *k = s->w->k;
    if (s->rot) t = tk_rem(k, tk_add(k, t, s->rot), s->n);
    *h = tk_add(k, s->head, tk_div(k, t, s->per));
    *q0 = tk_mul(k, tk_add(k, s->lo, tk_rem(k, t, s->per)), i32c(k, s->w->tile));
}

/* Trip t's Q and dO tiles into stage st. */
static void copy_qg(const stream *s, tk_value *t, tk_value *st) {
    tk_value *h, *r;
    qg_pair(s, t, &h, &r);
    for (int i = 0; i < 2; i++)
        copy_rows(s->w, tk_stage(s->w->k, s->ring[i], st), s->view[i], h, r);
}

/* Trip t's share of dQ (t >= 0), dQᵀ: the f32 shared tile sq (D x the
 * query tile; each warpgroup stores its piece, see dkdv) added into the
 * accumulator dQacc, [B, Hq, D, Nq rounded up to 64], by the copy engine's
 * reduction in L2 (tk_copy_to_global_add): one bulk operation instead of an
 * atomic per element. Issued after the barrier that follows the stores (the
 * next trip's first), it needs no barrier of its own; the one after it
 * waits for its reads of sq, long before the next store. */
static void add_dq(bwd *w, const bwd_io *io, const stream *s, tk_value *sq, tk_value *t) {
    tk_kernel *k = w->k;
    tk_if_begin(k, tk_ge(k, t, i32c(k, 0)));
    tk_value *h, *q0;
    qg_pair(s, t, &h, &q0);
    tk_value *idx[4] = {w->b, h, i32c(k, 0), q0};
    tk_copy_to_global_add(k, io->acc, idx, sq);
    tk_if_end(k, 0, NULL, NULL);
}

/* A trip's L₂ (past Nq: +inf, so P = 0) and D, per query column. */
typedef struct vecs {
    tk_value *l2, *d;
} vecs;

/* Those of query head h's tile at q0. */
static vecs vecs_at(bwd *w, const bwd_io *io, tk_value *h, tk_value *q0) {
    tk_type vcol = tk_vec_type(TK_F32, w->tile, TK_PER_COL, TK_WARPGROUP, TK_ROW);
    tk_value *il[3] = {w->b, h, q0};
    return (vecs){tk_attn_bwd_l2(w, io->L, vcol, il, INFINITY),
                  tk_load(w->k, vcol, io->Dw, il, 0.0f)};
}

/* Trip t's. Loaded in the trip that uses them, every trip waits out their
 * latency between the two multiplies' issue and the exponentials (H100,
 * GPT-2's B16 H12 N1024 D64 causal: 401 µs for this kernel against 157 for
 * the dQ kernel's 3/4 of its products, ncu, session 27), so at D 64 each
 * trip loads the next one's: +9% (full) and +11% (causal) for the backward
 * at B16 H12 N1024 on the H100 (session 31). At D 128 the carried vectors
 * cost registers (4-212 bytes of spill) and measured 0% (full) and -4%
 * (causal): there the trip loads its own. The last trip's t + 1 is never
 * used: another head's tile, or one past Hq (masked), or trip 0's again
 * when rotated. */
static vecs load_vecs(bwd *w, const bwd_io *io, const stream *s, tk_value *t) {
    tk_value *h, *q0;
    qg_pair(s, t, &h, &q0);
    return vecs_at(w, io, h, q0);
}

/* The dK/dV kernel, or (fused) the non-deterministic mode's one kernel,
 * which also adds each trip's share of dQ = dS·K into dQacc: dSᵀ goes to
 * shared memory, and after a barrier warpgroup g computes
 *   dQᵀ = Kᵀ·dSᵀ   A: K's column block g, M-major (TK_MMA_ATB); B: dSᵀ
 * (at D 64 there is one column block, and warpgroup g takes query columns
 * 32g.. of dSᵀ, a stage of its own), issued before dK and added while dK
 * runs on. Key rows past Nkv are masked there: their dSᵀ would meet K's
 * zero rows, and an inf in P would make 0·inf. */
static void dkdv(bwd *w, bool fused) {
    tk_kernel *k = w->k;
    /* query tiles of 64, or 32 when causal at D 128: measured on the H200
     * (bench/RESULTS.md, session 11), 32 ran 20% faster there (the
     * diagonal's masked work and the tiles before the first query that sees
     * the block shrink with the tile) but 5-12% slower without the mask,
     * and 12-17% slower causal at D 64, where a trip's fixed cost weighs more;
     * fused, 32 at D 128 always: 64 spills ~700 bytes (dQᵀ's registers too)
     * and measured only 5% faster (session 12) */
    w->tile = (w->causal || fused) && w->D == 128 ? 32 : 64;
    const int D = w->D, BQ = w->tile, NP = D == 64 ? 2 : 1, BN = BQ / NP;
    tk_dtype dt = w->dt;
    bwd_io io = tk_attn_bwd_io(w, 0, (const char *const[]){"dK", "dV"}, 2, fused);
    tk_value *nkt = tk_attn_bwd_grid(w, &io, ROWS, true);
    tk_value *Nq = io.Nq, *Nkv = io.Nkv;
    /* causal: the first key blocks are seen by the most queries, run first */
    tk_value *k0 = tk_mul(k, tk_block_id(k, 0), i32c(k, ROWS));
    tk_value *hk = tk_block_id(k, 1);
    w->b = tk_attn_bwd_batch(w);
    tk_value *group = tk_max(k, tk_div(k, io.Hq, io.Hkv), i32c(k, 1));
    tk_value *wg = tk_warpgroup_id(k), *row = tk_mul(k, wg, i32c(k, 64));
    tk_value *kw = tk_add(k, k0, row);
    tk_value *diag = tk_sub(k, Nkv, Nq);

    tk_value *nqt = tk_ceil_div(k, Nq, i32c(k, BQ)), *qlo = tk_attn_bwd_qlo(w, k0, diag, nqt, BQ);
    tk_value *nvis = tk_sub(k, nqt, qlo);

    tk_value *sK = tk_shared(k, dt, ROWS, D, TK_SMEM_SWIZZLE, 1);
    tk_value *sV = tk_shared(k, dt, ROWS, D, TK_SMEM_SWIZZLE, 1);
    stream qg = {.w = w,
                 /* (query head, query tile) pairs */
                 .n = tk_attn_bwd_live(w, tk_mul(k, group, nvis), tk_block_id(k, 0), nkt),
                 .copy = copy_qg,
                 .ring = {tk_shared(k, dt, BQ, D, TK_SMEM_SWIZZLE, STAGES),
                          tk_shared(k, dt, BQ, D, TK_SMEM_SWIZZLE, STAGES)},
                 .view = {io.Q, io.dO},
                 .head = tk_mul(k, hk, group),
                 .lo = qlo,
                 .per = nvis,
                 /* fused, not causal: the blocks of a head (running at
                  * once) start at different query tiles, so their adds into
                  * dQacc do not meet on one tile (+10-16% at N 16384 on the
                  * H200); causal blocks start at their diagonals already, and
                  * rotated ran 17-20% slower at D 64 */
                 .rot = fused && !w->causal ? tk_block_id(k, 0) : NULL};
    /* fused: dSᵀ in NP column pieces; warpgroup g's dQᵀ rows (head dims
     * d0..) and piece */
    tk_value *sDS = fused ? tk_shared(k, dt, ROWS, BN, TK_SMEM_SWIZZLE, NP) : NULL;
    tk_value *sQ = fused ? tk_shared(k, TK_F32, D, BQ, TK_SMEM_SWIZZLE, 1) : NULL; /* dQᵀ */
    tk_value *d0 = NULL, *qoff = NULL, *piece = NULL;
    if (fused) {
        d0 = NP == 1 ? row : i32c(k, 0);
        qoff = NP == 1 ? i32c(k, 0) : tk_mul(k, wg, i32c(k, BN));
        piece = NP == 1 ? sDS : tk_stage(k, sDS, wg);
    }
    copy_rows(w, sK, io.K, hk, k0);
    copy_rows(w, sV, io.V, hk, k0);
    stream_start(&qg);

    /* dV, dK, and (ahead) trip 0's L₂ and D, which blocks without trips
     * (n = per = 0) load too: they divide by at least 1 (inside the loop
     * both are) */
    const bool ahead = D == 64;
    const int NC = ahead ? 4 : 2;
    tk_value *init[4] = {tk_zeros(k, acc_type(D)), tk_zeros(k, acc_type(D))};
    vecs lv;
    if (ahead) {
        stream s0 = qg;
        s0.n = tk_max(k, qg.n, i32c(k, 1)), s0.per = tk_max(k, qg.per, i32c(k, 1));
        lv = load_vecs(w, &io, &s0, i32c(k, 0));
        init[2] = lv.l2, init[3] = lv.d;
    }
    tk_value *cur[4], *next[4], *fin[4];
    tk_value *t = tk_for_begin(k, i32c(k, 0), qg.n, i32c(k, 1), NC, init, cur);
    {
        tk_value *st = stream_wait(k, t), *h, *q0;
        qg_pair(&qg, t, &h, &q0);
        if (fused) add_dq(w, &io, &qg, sQ, tk_sub(k, t, i32c(k, 1))); /* the last trip's */
        tk_value *qst = tk_stage(k, qg.ring[0], st), *gst = tk_stage(k, qg.ring[1], st);
        tk_value *s = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, acc_type(BQ)), sK, qst, row);
        tk_value *dp = tk_wgmma(k, TK_MMA_ABT, tk_zeros(k, acc_type(BQ)), sV, gst, row);
        /* the last trip's multiplies still in flight (dV and dK; fused: dK)
         * ran on beside this issue; retired, the last tile's stage can be
         * freed */
        tk_value *dvp = tk_wgmma_wait(k, cur[0], 2), *dkp = tk_wgmma_wait(k, cur[1], 2);
        stream_refill(&qg, t);
        if (!ahead) lv = vecs_at(w, &io, h, q0);
        tk_value *l2 = ahead ? cur[2] : lv.l2, *dv = ahead ? cur[3] : lv.d;
        s = tk_wgmma_wait(k, s, 1);
        if (w->causal) s = causal_t(w, s, kw, q0, diag);
        if (fused) s = tk_attn_bwd_ragged_keys(w, s, kw, 64, Nkv);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, s, w->scale2), l2));
        next[0] = tk_wgmma(k, TK_MMA_AB, dvp, tk_cvt(k, p, dt), gst, NULL);
        dp = tk_wgmma_wait(k, dp, 1); /* dV += Pᵀ·dO may run on */
        tk_value *ds = tk_cvt(k, tk_mul(k, p, tk_sub(k, dp, dv)), dt);
        if (!fused) { /* dV and dK retired next trip */
            next[1] = tk_wgmma(k, TK_MMA_AB, dkp, ds, qst, NULL);
        } else {
            for (int i = 0; i < NP; i++) {
                tk_value *at[2] = {row, i32c(k, 0)};
                tk_value *dst = NP == 1 ? sDS : tk_stage(k, sDS, i32c(k, i));
                tk_store(k, dst, at, NP == 1 ? ds : tk_slice(k, ds, 0, i * BN, 64, BN));
            }
            tk_barrier(k); /* dSᵀ whole: both warpgroups' rows */
            tk_value *dq = tk_wgmma(k, TK_MMA_ATB, tk_zeros(k, acc_type(BN)), sK, piece, d0);
            next[1] = tk_wgmma(k, TK_MMA_AB, dkp, ds, qst, NULL); /* retired next trip */
            /* dV and dQᵀ retired here, dK runs on: ptxas serializes every
             * wgmma (C7514) if a register of one still in flight at the loop's
             * back edge is read by other instructions, as the adds would */
            next[0] = tk_wgmma_wait(k, next[0], 1);
            tk_value *at[2] = {d0, qoff};
            tk_store(k, sQ, at, tk_wgmma_wait(k, dq, 1));
        }
        if (ahead) {
            lv = load_vecs(w, &io, &qg, tk_add(k, t, i32c(k, 1)));
            next[2] = lv.l2, next[3] = lv.d;
        }
    }
    tk_for_end(k, NC, next, fin);
    fin[0] = tk_wgmma_wait(k, fin[0], 1);
    fin[1] = tk_wgmma_wait(k, fin[1], 0);
    if (fused) { /* the last trip's dQ share */
        tk_barrier(k);
        add_dq(w, &io, &qg, sQ, tk_sub(k, qg.n, i32c(k, 1)));
    }
    tk_async_wait(k, 0);

    tk_value *idx[4] = {w->b, hk, kw, i32c(k, 0)};
    tk_store(k, io.out[1], idx, tk_cvt(k, fin[0], dt));
    tk_store(k, io.out[0], idx, tk_cvt(k, tk_mul(k, fin[1], w->scale), dt));
}

void tk_attn_bwd_hopper_dkdv(bwd *w) { dkdv(w, false); }
void tk_attn_bwd_hopper_fused(bwd *w) { dkdv(w, true); }
