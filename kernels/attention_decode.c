/* Attention for decoding: few queries against many keys (flash-decoding).
 * The contract is in tk/tk_kernels.h ("Attention decoding"); the host side
 * (which split count, which packing, the launches) in attention_decode_run.c.
 *
 * Why a kernel of its own. The forward gives each block 128 query rows of
 * one head. With 1-16 queries that leaves most rows empty, runs one block
 * per (batch, head) — a handful of blocks on 132 SMs — and reads each kv
 * head's K and V once per query head of its group. Decoding is bound by
 * the bytes of K and V, so this kernel arranges for them to be read once,
 * by as many blocks as the GPU holds:
 *   - a block owns one kv head and reads its K/V tiles once for every warp;
 *     each warp owns one 16-row tile of the queries that share that head:
 *     PACK_QUERIES: the queries (rows) of one query head of the group, a
 *       tile per head (the layout-independent form; best with many queries);
 *     PACK_HEADS: the query heads of the group (rows) for one query, a tile
 *       per query (grouped-query decoding: 4-8 heads share K/V, so a single
 *       tile holds all of them);
 *   - the keys are split into S ranges of whole tiles, one block each; a
 *     block writes its range's normalized O and log-sum-exp L (the
 *     partials), and a second kernel merges them per row:
 *       L = log Σ_s exp(L_s),  O = Σ_s exp(L_s - L) · O_s,
 *     in a fixed order (deterministic). With S = 1 (the GPU is full
 *     anyway, or no workspace) the DIRECT kernel writes O and L itself.
 * The compute is mma.sync on 16-row warp tiles (tensor-core work is small
 * beside the bytes: 16 rows a warp, whatever the arch); K and V go through
 * an NS-stage ring by the copy engine on sm_90+ (cp.async elsewhere).
 *
 * Per key tile j of the block's range (one barrier a trip):
 *   wait: tile j landed; barrier (every warp left tile j-1's stage)
 *   copy tile j + NS - 1 into that stage
 *   S = Q·K_jᵀ, masks, online softmax (lazy rescale, as attention.c),
 *   O += P·V_j
 * The masks: keys past Nkv; causal (bottom-right: query i attends keys
 * <= i + Nkv - Nq), per row for PACK_QUERIES and per warp (its tile's one
 * query) for PACK_HEADS. Rows without keys end with O = 0, L = -inf, in
 * each partial too; the merge keeps them so. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "attention_parts.h"
#include "tk/tk_kernels.h"

#define ROWS   16 /* rows of a warp's tile */
#define MAX_ND 16 /* 16-column slices of the widest head (D 256) */

typedef struct dec {
    tk_kernel *k;
    tk_dtype dt;
    int D, ND, causal, pack, W, NS, BKV;
    int KW, BR;        /* warps sharing a tile's keys; keys a trip copies: KW·BKV */
    int cache, CH, NC; /* tk_attention_cache; rows per K/V copy, copies a trip    */
    tk_value *kw;      /* KW > 1: this warp's BKV keys of the trip's BR          */
    tk_value *BT;      /* TK_ATTN_CACHE_PAGED: the block table [B, max_pages] */
    /* geometry (i32 scalars): kv heads, group size, queries, tiles per kv
     * head, tiles per query (PACK_HEADS) */
    tk_value *Hkv, *G, *Nq, *T, *U;
    tk_value *b, *hk, *B;
} dec;

/* Where tile t of kv head hk lives. */
typedef struct dtile {
    tk_value *valid; /* t < T                                                 */
    tk_value *x;     /* Q/O index of dim 1 (past the dim when not valid)      */
    tk_value *row0;  /* Q/O index of dim 2: the tile's first row              */
    tk_value *qi;    /* PACK_HEADS: the tile's query; PACK_QUERIES: NULL      */
    tk_value *l[4];  /* L's indices (the row vector's start)                 */
    tk_value *p;     /* partials' dim-0 index (i64; past it when not valid)   */
} dtile;

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }
static tk_value *i64(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_I64); }
static tk_value *dim32(tk_kernel *k, tk_value *view, int d) {
    return tk_cvt(k, tk_dim(k, view, d), TK_I32);
}

/* Geometry from the decode kernel's Q and K views. */
static void geometry_qk(dec *a, tk_value *Q, tk_value *K) {
    tk_kernel *k = a->k;
    a->Hkv = dim32(k, K, 1);
    if (a->pack == TK_ATTN_PACK_QUERIES) {
        a->G = tk_div(k, dim32(k, Q, 1), a->Hkv);
        a->Nq = dim32(k, Q, 2);
        a->U = i32c(k, 1);
        a->T = a->G;
    } else {
        a->Nq = tk_div(k, dim32(k, Q, 1), a->Hkv);
        a->G = dim32(k, Q, 2);
        a->U = tk_ceil_div(k, a->G, i32c(k, ROWS));
        a->T = tk_mul(k, a->Nq, a->U);
    }
}

/* The same from the merge kernel's L view (its layout names them all). */
static void geometry_l(dec *a, tk_value *L) {
    tk_kernel *k = a->k;
    bool q = a->pack == TK_ATTN_PACK_QUERIES;
    a->Hkv = dim32(k, L, q ? 1 : 2);
    a->G = dim32(k, L, q ? 2 : 3);
    a->Nq = dim32(k, L, q ? 3 : 1);
    a->U = q ? i32c(k, 1) : tk_ceil_div(k, a->G, i32c(k, ROWS));
    a->T = q ? a->G : tk_mul(k, a->Nq, a->U);
}

/* Stage i of a shared buffer of n stages (a one-stage buffer has none). */
static tk_value *stage(tk_kernel *k, tk_value *sh, int n, tk_value *i) {
    return n == 1 ? sh : tk_stage(k, sh, i);
}

static dtile tile_at(const dec *a, tk_value *t) {
    tk_kernel *k = a->k;
    dtile d;
    d.valid = tk_lt(k, t, a->T);
    tk_value *x;
    if (a->pack == TK_ATTN_PACK_QUERIES) {
        x = tk_add(k, tk_mul(k, a->hk, a->G), t);
        d.row0 = i32c(k, 0);
        d.qi = NULL;
        d.l[0] = a->b, d.l[1] = a->hk, d.l[2] = t, d.l[3] = i32c(k, 0);
    } else {
        tk_value *u = tk_rem(k, t, a->U);
        d.qi = tk_div(k, t, a->U);
        x = tk_add(k, tk_mul(k, d.qi, a->Hkv), a->hk);
        d.row0 = tk_mul(k, u, i32c(k, ROWS));
        d.l[0] = a->b, d.l[1] = d.qi, d.l[2] = a->hk, d.l[3] = d.row0;
    }
    /* an invalid tile reads fill and writes nothing: its indices point past
     * their dimension (PACK_QUERIES' x would be the next group's head) */
    d.x = tk_select(k, d.valid, x, tk_mul(k, a->Hkv, a->G));
    tk_value *T64 = i64(k, a->T);
    tk_value *pt =
        tk_add(k, tk_mul(k, tk_add(k, tk_mul(k, i64(k, a->b), i64(k, a->Hkv)), i64(k, a->hk)), T64),
               i64(k, t));
    d.p = tk_select(k, d.valid, pt, tk_mul(k, tk_mul(k, i64(k, a->B), i64(k, a->Hkv)), T64));
    return d;
}

/* K and V of trip j (keys from j·BR) into slot st of the rings: one copy
 * each, or from a paged cache NC copies of CH rows (stages st·NC + c),
 * each inside one page: CH divides the page size. A table entry past the
 * table reads -1, and a page outside the pool reads zeros. */
static void copy_kv(dec *a, tk_value *sK, tk_value *sV, tk_value *K, tk_value *V, tk_value *st,
                    tk_value *j) {
    tk_kernel *k = a->k;
    if (a->cache != TK_ATTN_CACHE_PAGED) {
        tk_value *idx[4] = {a->b, a->hk, tk_mul(k, j, i32c(k, a->BR)), i32c(k, 0)};
        tk_copy_to_shared(k, tk_stage(k, sK, st), K, idx, 0.0f, TK_COPY_TMA);
        tk_copy_to_shared(k, tk_stage(k, sV, st), V, idx, 0.0f, TK_COPY_TMA);
        return;
    }
    tk_value *P = dim32(k, K, 2);
    for (int c = 0; c < a->NC; c++) {
        tk_value *tok = tk_add(k, tk_mul(k, j, i32c(k, a->BR)), i32c(k, c * a->CH));
        tk_value *ti[2] = {a->b, tk_div(k, tok, P)};
        tk_value *page = tk_load(k, tk_scalar_type(TK_I32), a->BT, ti, -1.0f);
        tk_value *idx[4] = {page, a->hk, tk_rem(k, tok, P), i32c(k, 0)};
        tk_value *slot = tk_add(k, tk_mul(k, st, i32c(k, a->NC)), i32c(k, c));
        tk_copy_to_shared(k, tk_stage(k, sK, slot), K, idx, 0.0f, TK_COPY_TMA);
        tk_copy_to_shared(k, tk_stage(k, sV, slot), V, idx, 0.0f, TK_COPY_TMA);
    }
}

/* The warp's keys of slot st: chunk c of cw, its stage and first row.
 * A paged ring holds CH-row copies (CH <= BKV: the warp's BKV keys are
 * cw = BKV/CH of them), else one BR-row stage the KW warps split by rows. */
static int warp_chunks(const dec *a) {
    return a->cache == TK_ATTN_CACHE_PAGED ? a->BKV / a->CH : 1;
}

static tk_value *chunk_at(dec *a, tk_value *ring, tk_value *st, int c, tk_value **row0) {
    tk_kernel *k = a->k;
    *row0 = i32c(k, 0);
    if (a->cache != TK_ATTN_CACHE_PAGED) {
        if (a->KW > 1) *row0 = tk_mul(k, a->kw, i32c(k, a->BKV));
        return tk_stage(k, ring, st);
    }
    if (a->NC == 1) return tk_stage(k, ring, st);
    tk_value *c0 = i32c(k, c);
    if (a->KW > 1) c0 = tk_add(k, tk_mul(k, a->kw, i32c(k, warp_chunks(a))), c0);
    return tk_stage(k, ring, tk_add(k, tk_mul(k, st, i32c(k, a->NC)), c0));
}

/* S = Q·K_stᵀ (16 x BKV): the warp's keys, by chunks of CH for a paged ring. */
static tk_value *scores(dec *a, tk_value *const *q, tk_value *sK, tk_value *st) {
    tk_kernel *k = a->k;
    const int cw = warp_chunks(a), rows = a->BKV / cw;
    tk_type kslice = tk_tile_type(a->dt, rows, 16, TK_WARP, TK_ROW);
    tk_value *out = NULL;
    for (int c = 0; c < cw; c++) {
        tk_value *row0, *kst = chunk_at(a, sK, st, c, &row0), *sc = NULL;
        for (int i = 0; i < a->ND; i++) {
            tk_value *idx[2] = {row0, i32c(k, 16 * i)};
            sc = tk_mma(k, TK_MMA_ABT, q[i], tk_load(k, kslice, kst, idx, 0.0f), sc);
        }
        out = out ? tk_concat(k, 1, out, sc) : sc;
    }
    return out;
}

/* next[i] = o[i] + P·V_st for every 16-column slice i of O; with nkv,
 * the V rows of keys >= nkv (kv0: the tile's first key) read as 0. */
static void pv(dec *a, tk_value *pb, tk_value *sV, tk_value *st, tk_value *const *o,
               tk_value **next, tk_value *kv0, tk_value *nkv) {
    tk_kernel *k = a->k;
    const int cw = warp_chunks(a), rows = a->BKV / cw;
    tk_type vslice = tk_tile_type(a->dt, rows, 16, TK_WARP, TK_COL);
    for (int i = 0; i < a->ND; i++) next[i] = o[i];
    for (int c = 0; c < cw; c++) {
        tk_value *row0, *vst = chunk_at(a, sV, st, c, &row0);
        tk_value *pc = cw == 1 ? pb : tk_slice(k, pb, 0, c * rows, ROWS, rows);
        for (int i = 0; i < a->ND; i++) {
            tk_value *idx[2] = {row0, i32c(k, 16 * i)};
            tk_value *v = tk_load(k, vslice, vst, idx, 0.0f);
            if (nkv) v = tk_mask(k, v, TK_MASK_ROWS, tk_add(k, kv0, i32c(k, c * rows)), nkv, 0.0f);
            next[i] = tk_mma(k, TK_MMA_AB, pc, v, next[i]);
        }
    }
}

/* O += P·V_st. The masked scores make P 0 past the sequence's keys, but
 * a cache holds what it holds there (a stale row, NaN: 0·NaN is NaN), so
 * the tile that crosses the end reads those V rows as 0. Without a cache
 * they lie past the view, and the copy already filled 0s. */
static void add_pv(dec *a, tk_value *pb, tk_value *sV, tk_value *st, tk_value *const *o,
                   tk_value **next, tk_value *kv0, tk_value *nkv) {
    tk_kernel *k = a->k;
    if (!a->cache) {
        pv(a, pb, sV, st, o, next, NULL, NULL);
        return;
    }
    tk_value *m[MAX_ND], *u[MAX_ND];
    tk_if_begin(k, tk_gt(k, tk_add(k, kv0, i32c(k, a->BKV)), nkv));
    pv(a, pb, sV, st, o, m, kv0, nkv);
    tk_else(k, a->ND, m);
    pv(a, pb, sV, st, o, u, NULL, NULL);
    tk_if_end(k, a->ND, u, next);
}

/* Scores of the tile at kv0 with the keys the tile's rows may not see at
 * -inf; only tiles that need it pay. */
static tk_value *mask(dec *a, tk_value *s, const dtile *d, tk_value *kv0, tk_value *Nkv,
                      tk_value *diag) {
    tk_kernel *k = a->k;
    if (a->pack == TK_ATTN_PACK_QUERIES) /* rows are queries 0..: the forward's masks */
        return tk_attn_mask(k, s, a->BKV, a->causal, kv0, Nkv, i32c(k, 0), i32c(k, 0), diag);
    tk_value *lim = Nkv; /* one query per tile: one column limit */
    if (a->causal) lim = tk_min(k, Nkv, tk_add(k, tk_add(k, d->qi, diag), i32c(k, 1)));
    tk_if_begin(k, tk_gt(k, tk_add(k, kv0, i32c(k, a->BKV)), lim));
    tk_value *sm = tk_mask(k, s, TK_MASK_COLS, kv0, lim, -INFINITY);
    tk_else(k, 1, &sm);
    tk_value *out;
    tk_if_end(k, 1, &s, &out);
    return out;
}

/* The keys the block's tiles attend end before kend. */
static tk_value *key_end(dec *a, tk_value *grp, tk_value *Nkv, tk_value *diag) {
    tk_kernel *k = a->k;
    if (!a->causal) return Nkv;
    tk_value *imax; /* the block's last query */
    if (a->pack == TK_ATTN_PACK_QUERIES) {
        imax = tk_sub(k, a->Nq, i32c(k, 1));
    } else {
        tk_value *tmax = tk_min(k, tk_sub(k, a->T, i32c(k, 1)),
                                tk_add(k, tk_mul(k, grp, i32c(k, a->W)), i32c(k, a->W - 1)));
        imax = tk_div(k, tmax, a->U);
    }
    tk_value *e = tk_add(k, tk_add(k, imax, diag), i32c(k, 1));
    return tk_max(k, tk_min(k, e, Nkv), i32c(k, 0));
}

/* Q of each of the block's W query tiles (tile grp·W + u) into stage u of
 * sQ: the copy engine reads a tile that crosses the view's rows (a group of
 * 4 heads in a 16-row tile) as one copy, zeros past them, where loads into
 * registers would take the element-by-element masked path (bench/RESULTS.md,
 * 2026-12-04: a quarter of the split kernel's time at 1 x 1024 keys). */
static void copy_q(dec *a, tk_value *sQ, tk_value *Q, tk_value *grp) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->W; u++) {
        dtile du = tile_at(a, tk_add(k, tk_mul(k, grp, i32c(k, a->W)), i32c(k, u)));
        tk_value *idx[4] = {a->b, du.x, du.row0, i32c(k, 0)};
        tk_copy_to_shared(k, stage(k, sQ, a->W, i32c(k, u)), Q, idx, 0.0f, TK_COPY_TMA);
    }
    tk_async_commit(k);
}

/* The warp's O tile (slices o) from registers: partial s of the split
 * kernel's workspace, or the output's rows. */
static void store_o(dec *a, tk_value *O, tk_value *const *o, const dtile *d, tk_value *s,
                    bool split) {
    tk_kernel *k = a->k;
    for (int i = 0; i < a->ND; i++) {
        tk_value *c = i32c(k, 16 * i);
        tk_value *ip[4] = {d->p, s, i32c(k, 0), c}, *io[4] = {a->b, d->x, d->row0, c};
        tk_store_n(k, O, 4, split ? ip : io, o[i]);
    }
}

/* The same through shared memory: every warp's tile into its stage of sO,
 * then one copy a warp's tile (by the copy engine on sm_90: the edges of
 * the view clipped, one instruction). Stores from registers would branch
 * around two masked paths a slice, cold code that cost the split kernel a
 * fetch stall per slice (ncu, 2026-12-04). Warp u = t·KW + kw writes the
 * partial s·KW + kw of tile grp·W + t. */
static void store_o_staged(dec *a, tk_value *O, tk_value *sO, tk_value *const *o, tk_value *grp,
                           tk_value *s, bool split) {
    tk_kernel *k = a->k;
    tk_barrier(k); /* every warp has left sO, which may be Q's */
    for (int i = 0; i < a->ND; i++) {
        tk_value *at[2] = {i32c(k, 0), i32c(k, 16 * i)};
        tk_store(k, stage(k, sO, a->W * a->KW, tk_warp_id(k)), at, o[i]);
    }
    tk_barrier(k);
    for (int u = 0; u < a->W * a->KW; u++) {
        dtile du = tile_at(a, tk_add(k, tk_mul(k, grp, i32c(k, a->W)), i32c(k, u / a->KW)));
        tk_value *su = tk_add(k, tk_mul(k, s, i32c(k, a->KW)), i32c(k, u % a->KW));
        tk_value *ip[4] = {du.p, su, i32c(k, 0), i32c(k, 0)};
        tk_value *io[4] = {a->b, du.x, du.row0, i32c(k, 0)};
        tk_copy_to_global_n(k, O, 4, split ? ip : io, stage(k, sO, a->W * a->KW, i32c(k, u)));
    }
}

static void build_decode(dec *a, bool split) {
    tk_kernel *k = a->k;
    const int ND = a->ND, BKV = a->BKV, NS = a->NS;
    tk_dtype dt = a->dt;
    tk_value *Q = tk_param_tensor(k, "Q", dt, 4), *K = tk_param_tensor(k, "K", dt, 4);
    tk_value *V = tk_param_tensor(k, "V", dt, 4);
    tk_value *O = tk_param_tensor(k, split ? "Op" : "O", split ? TK_F32 : dt, 4);
    tk_value *L = tk_param_tensor(k, split ? "Lp" : "L", TK_F32, split ? 3 : 4);
    tk_value *scale = tk_param_scalar(k, "scale", TK_F32);
    tk_value *SL = NULL, *app = NULL;
    if (a->cache) {
        SL = tk_param_tensor(k, "seqlens", TK_I32, 1);
        app = tk_param_scalar(k, "appended", TK_I32);
    }
    if (a->cache == TK_ATTN_CACHE_PAGED) a->BT = tk_param_tensor(k, "block_table", TK_I32, 2);
    tk_spec(k, "head_dim", a->D);
    tk_spec(k, "causal", a->causal);
    tk_spec(k, "pack", a->pack);
    if (a->cache) tk_spec(k, "cache", a->cache);

    geometry_qk(a, Q, K);
    tk_value *Nkv = dim32(k, K, 2);
    a->B = dim32(k, Q, 0);
    if (a->cache) { /* this sequence's keys, within what the cache holds */
        a->b = tk_block_id(k, 2);
        tk_value *cap = Nkv;
        if (a->BT) cap = tk_mul(k, dim32(k, a->BT, 1), Nkv); /* pages x page size */
        tk_value *li[1] = {a->b};
        tk_value *len = tk_add(k, tk_load(k, tk_scalar_type(TK_I32), SL, li, 0.0f), app);
        Nkv = tk_max(k, tk_min(k, len, cap), i32c(k, 0));
    }
    tk_value *S = split ? dim32(k, O, 1) : i32c(k, 1); /* KW partials a range */
    if (a->KW > 1) S = tk_div(k, S, i32c(k, a->KW));
    tk_value *ngroups = tk_ceil_div(k, a->T, i32c(k, a->W));
    tk_set_grid(k, tk_mul(k, S, ngroups), a->Hkv, a->B);
    tk_value *bx = tk_block_id(k, 0);
    tk_value *s = tk_rem(k, bx, S), *grp = tk_div(k, bx, S);
    a->hk = tk_block_id(k, 1);
    if (!a->b) a->b = tk_block_id(k, 2);
    tk_value *tw = tk_warp_id(k); /* the warp's tile of the group, and its keys */
    if (a->KW > 1) {
        a->kw = tk_rem(k, tw, i32c(k, a->KW));
        tw = tk_div(k, tw, i32c(k, a->KW));
    }
    dtile d = tile_at(a, tk_add(k, tk_mul(k, grp, i32c(k, a->W)), tw));
    tk_value *diag = tk_sub(k, Nkv, a->Nq);

    /* the split's trips [j0, j0 + n): S ranges of c whole trips of BR keys */
    tk_value *nt = tk_ceil_div(k, Nkv, i32c(k, a->BR));
    tk_value *c = tk_ceil_div(k, nt, S), *j0 = tk_mul(k, s, c);
    tk_value *jend = tk_ceil_div(k, key_end(a, grp, Nkv, diag), i32c(k, a->BR));
    tk_value *n = tk_max(k, tk_sub(k, tk_min(k, tk_add(k, j0, c), jend), j0), i32c(k, 0));

    tk_value *sK = tk_shared(k, dt, a->CH, a->D, TK_SMEM_SWIZZLE, NS * a->NC);
    tk_value *sV = tk_shared(k, dt, a->CH, a->D, TK_SMEM_SWIZZLE, NS * a->NC);
    tk_value *sQ = tk_shared(k, dt, ROWS, a->D, TK_SMEM_SWIZZLE, a->W);
    /* O's tiles: the direct kernel's (its dtype, a warp a tile) take Q's
     * place, keeping its shared memory (four blocks an SM at D 128); the
     * partials (f32) get their own where they fit */
    tk_value *sO = sQ;
    long ring = tk_attn_decode_ring_bytes(NS, a->BR, a->D);
    if (split)
        sO = tk_attn_decode_o_staged(ring, a->W, a->KW, a->D)
                 ? tk_shared(k, TK_F32, ROWS, a->D, TK_SMEM_SWIZZLE, a->W * a->KW)
                 : NULL;
    tk_value *scale2 = tk_attn_scale2(k, scale);

    copy_q(a, sQ, Q, grp); /* group 0 */
    for (int p = 0; p < NS - 1; p++) {
        tk_if_begin(k, tk_lt(k, i32c(k, p), n));
        copy_kv(a, sK, sV, K, V, i32c(k, p), tk_add(k, j0, i32c(k, p)));
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);
    }
    if (split) tk_grid_release(k); /* the merge may take free SMs from here */
    tk_async_wait(k, NS - 1);      /* Q landed */
    tk_barrier(k);                 /* every thread's share of it, without the engine */
    tk_value *q[MAX_ND];
    tk_type q_t = tk_tile_type(dt, ROWS, 16, TK_WARP, TK_ROW);
    for (int i = 0; i < ND; i++) {
        tk_value *idx[2] = {i32c(k, 0), i32c(k, 16 * i)};
        q[i] = tk_load(k, q_t, stage(k, sQ, a->W, tw), idx, 0.0f);
    }

    tk_type vrow = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type o_t = tk_tile_type(TK_F32, ROWS, 16, TK_WARP, TK_ROW);
    tk_value *init[2 + MAX_ND], *cur[2 + MAX_ND], *next[2 + MAX_ND], *fin[2 + MAX_ND];
    tk_attn_state_init(k, vrow, o_t, ND, init);
    tk_value *jj = tk_for_begin(k, i32c(k, 0), n, i32c(k, 1), 2 + ND, init, cur);
    {
        tk_async_wait(k, NS - 2); /* tile jj landed */
        tk_barrier(k);            /* and every warp left tile jj - 1's stage */
        tk_value *ahead = tk_add(k, jj, i32c(k, NS - 1));
        tk_if_begin(k, tk_lt(k, ahead, n));
        copy_kv(a, sK, sV, K, V, tk_rem(k, ahead, i32c(k, NS)), tk_add(k, j0, ahead));
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);

        tk_value *st = tk_rem(k, jj, i32c(k, NS));
        tk_value *kv0 = tk_mul(k, tk_add(k, j0, jj), i32c(k, a->BR)); /* the warp's first key */
        if (a->KW > 1) kv0 = tk_add(k, kv0, tk_mul(k, a->kw, i32c(k, BKV)));
        tk_value *sc = mask(a, scores(a, q, sK, st), &d, kv0, Nkv, diag);

        tk_value *ref[2 + MAX_ND]; /* lazy rescale: attention.c says why */
        tk_attn_rescale(k, tk_mul(k, tk_row_max(k, sc), scale2), 2 + ND, cur, ref, true);
        tk_value *p = tk_exp2(k, tk_sub(k, tk_mul(k, sc, scale2), ref[0]));
        next[0] = ref[0];
        next[1] = tk_add(k, ref[1], tk_row_sum(k, p));
        add_pv(a, tk_cvt(k, p, dt), sV, st, ref + 2, next + 2, kv0, Nkv);
    }
    tk_for_end(k, 2 + ND, next, fin);
    tk_async_wait(k, 0); /* the copies a short range committed empty */

    tk_value *inv_l = tk_attn_inv_l(k, fin[1]), *lse = tk_attn_lse(k, fin[0], fin[1]);
    tk_value *o[MAX_ND];
    for (int i = 0; i < ND; i++) {
        o[i] = tk_mul(k, fin[2 + i], inv_l);
        if (!split) o[i] = tk_cvt(k, o[i], dt);
    }
    tk_value *sw = s; /* the warp's partial */
    if (a->KW > 1) sw = tk_add(k, tk_mul(k, s, i32c(k, a->KW)), a->kw);
    if (sO)
        store_o_staged(a, O, sO, o, grp, s, split);
    else
        store_o(a, O, o, &d, sw, split);
    if (split) {
        tk_value *idx[3] = {d.p, sw, i32c(k, 0)};
        tk_store(k, L, idx, lse);
    } else {
        tk_store(k, L, d.l, lse);
    }
}

/* The merge: a block per tile and 16-column slice of O, so a small batch
 * still spreads over many SMs, of W warps that share the splits: warp w
 * takes groups of MERGE_UNROLL splits from 8w, every W-th group, the
 * group's partials loaded before any is combined so their latencies
 * overlap (a split past S reads L = -inf, O = 0: weight 0). One warp
 * walking all S splits cost ~0.17 µs a split (bench/RESULTS.md,
 * 2026-12-04: 13 µs at 64 splits), so more than one group takes
 * MERGE_WARPS warps; one group (tk_attn_decode_merge_warps) one warp,
 * without the warps' combine through shared memory. */
#define MERGE_COLS   16
#define MERGE_UNROLL 8
#define MERGE_WARPS  4

int tk_attn_decode_merge_warps(int partials) { return partials <= MERGE_UNROLL ? 1 : MERGE_WARPS; }

/* (m, l, o) combined with (m2, l2, o2), states of the online log-sum-exp
 * (natural log, as the partials' L): m starts at -FLT_MAX, so an empty
 * partial (m2 = -inf) weighs exp(-inf) = 0 and nothing computes
 * -inf - (-inf). l2 NULL: 1 (a partial, its O normalized). */
static void combine(tk_kernel *k, tk_value **st, tk_value *m2, tk_value *l2, tk_value *o2) {
    tk_value *mn = tk_max(k, st[0], m2);
    tk_value *alpha = tk_exp(k, tk_sub(k, st[0], mn)), *w = tk_exp(k, tk_sub(k, m2, mn));
    st[1] = tk_add(k, tk_mul(k, st[1], alpha), l2 ? tk_mul(k, l2, w) : w);
    st[2] = tk_add(k, tk_mul(k, st[2], alpha), tk_mul(k, o2, w));
    st[0] = mn;
}

/* The block's rows of the S partials: each warp's share in split order,
 * then the warps' states through shared memory in warp order (fixed:
 * bit-identical from run to run); warp 0 writes O and L. */
static void build_merge(dec *a) {
    tk_kernel *k = a->k;
    tk_value *Op = tk_param_tensor(k, "Op", TK_F32, 4), *Lp = tk_param_tensor(k, "Lp", TK_F32, 3);
    tk_value *O = tk_param_tensor(k, "O", a->dt, 4), *L = tk_param_tensor(k, "L", TK_F32, 4);
    tk_spec(k, "head_dim", a->D);
    tk_spec(k, "pack", a->pack);
    geometry_l(a, L);
    a->B = dim32(k, L, 0);
    const int NCOL = a->D / MERGE_COLS;
    tk_set_grid(k, tk_mul(k, a->T, i32c(k, NCOL)), a->Hkv, a->B);
    a->hk = tk_block_id(k, 1);
    a->b = tk_block_id(k, 2);
    tk_value *bx = tk_block_id(k, 0), *slice = tk_rem(k, bx, i32c(k, NCOL));
    tk_value *c0 = tk_mul(k, slice, i32c(k, MERGE_COLS));
    dtile d = tile_at(a, tk_div(k, bx, i32c(k, NCOL)));
    tk_value *S = dim32(k, Op, 1), *wid = tk_warp_id(k);
    /* O's slice leaves through shared memory: its rows cross the view where
     * a group has fewer than 16 heads (store_o_staged says why); first, for
     * the engine's alignment */
    tk_value *sO = tk_shared(k, a->dt, ROWS, MERGE_COLS, TK_SMEM_SWIZZLE, 1);
    tk_grid_wait(k); /* the split kernel wrote the partials */

    tk_type vrow = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type o_t = tk_tile_type(TK_F32, ROWS, MERGE_COLS, TK_WARP, TK_ROW);
    tk_value *init[3], *cur[3], *fin[3];
    tk_attn_state_init(k, vrow, o_t, 1, init);
    tk_value *s0 = tk_for_begin(k, tk_mul(k, wid, i32c(k, MERGE_UNROLL)), S,
                                i32c(k, MERGE_UNROLL * a->W), 3, init, cur);
    {
        tk_value *ls[MERGE_UNROLL], *os[MERGE_UNROLL];
        for (int u = 0; u < MERGE_UNROLL; u++) {
            tk_value *s = tk_add(k, s0, i32c(k, u));
            tk_value *il[3] = {d.p, s, i32c(k, 0)}, *io[4] = {d.p, s, i32c(k, 0), c0};
            ls[u] = tk_load(k, vrow, Lp, il, -INFINITY);
            os[u] = tk_load(k, o_t, Op, io, 0.0f);
        }
        tk_value *st[3] = {cur[0], cur[1], cur[2]};
        for (int u = 0; u < MERGE_UNROLL; u++) combine(k, st, ls[u], NULL, os[u]);
        tk_for_end(k, 3, st, fin);
    }
    tk_value *at[2] = {i32c(k, 0), i32c(k, 0)}, *st[3] = {fin[0], fin[1], fin[2]}, *sh = NULL;
    if (a->W > 1) {
        /* stage 3w + i holds warp w's o, m, l (the vectors broadcast along
         * the tile's rows; a row max reads them back) */
        sh = tk_shared(k, TK_F32, ROWS, MERGE_COLS, TK_SMEM_PLAIN, 3 * a->W);
        tk_value *zero = tk_zeros(k, o_t);
        tk_value *mine[3] = {fin[2], tk_add(k, zero, fin[0]), tk_add(k, zero, fin[1])};
        for (int i = 0; i < 3; i++) {
            tk_value *stage = tk_add(k, tk_mul(k, wid, i32c(k, 3)), i32c(k, i));
            tk_store(k, tk_stage(k, sh, stage), at, mine[i]);
        }
        tk_barrier(k);
    }
    tk_if_begin(k, tk_eq(k, wid, i32c(k, 0))); /* warp 0 combines and writes */
    if (sh) {
        tk_attn_state_init(k, vrow, o_t, 1, st);
        for (int w = 0; w < a->W; w++) {
            tk_value *v[3];
            for (int i = 0; i < 3; i++)
                v[i] = tk_load(k, o_t, tk_stage(k, sh, i32c(k, 3 * w + i)), at, 0.0f);
            combine(k, st, tk_row_max(k, v[1]), tk_row_max(k, v[2]), v[0]);
        }
    }
    tk_store(k, sO, at, tk_cvt(k, tk_mul(k, st[2], tk_attn_inv_l(k, st[1])), a->dt));
    tk_if_begin(k, tk_eq(k, slice, i32c(k, 0)));             /* one slice writes L */
    tk_store(k, L, d.l, tk_add(k, st[0], tk_log(k, st[1]))); /* log 0 = -inf */
    tk_if_end(k, 0, NULL, NULL);
    tk_if_end(k, 0, NULL, NULL);
    tk_barrier(k);
    tk_value *io[4] = {a->b, d.x, d.row0, c0};
    tk_copy_to_global(k, O, io, sO);
}

/* The new rows into the cache: block (i, hk, b), one warp, writes row i
 * of kv head hk of sequence b, of K and of V, at position seqlens[b] + i
 * (a page's row, or the sequence's). A position outside the cache (past
 * the table, a page outside the pool, a negative length) is not written. */
static void build_append(dec *a) {
    tk_kernel *k = a->k;
    tk_value *Kn = tk_param_tensor(k, "K_new", a->dt, 4),
             *Vn = tk_param_tensor(k, "V_new", a->dt, 4);
    tk_value *K = tk_param_tensor(k, "K", a->dt, 4), *V = tk_param_tensor(k, "V", a->dt, 4);
    tk_value *SL = tk_param_tensor(k, "seqlens", TK_I32, 1);
    if (a->cache == TK_ATTN_CACHE_PAGED) a->BT = tk_param_tensor(k, "block_table", TK_I32, 2);
    tk_spec(k, "head_dim", a->D);
    tk_spec(k, "cache", a->cache);
    tk_set_grid(k, tk_dim(k, Kn, 2), tk_dim(k, Kn, 1), tk_dim(k, Kn, 0));
    tk_value *i = tk_block_id(k, 0), *hk = tk_block_id(k, 1), *b = tk_block_id(k, 2);
    tk_value *li[1] = {b};
    tk_value *pos = tk_add(k, tk_load(k, tk_scalar_type(TK_I32), SL, li, -1.0f), i);
    tk_value *at[4] = {b, hk, pos, i32c(k, 0)};
    if (a->BT) {
        tk_value *P = dim32(k, K, 2);
        tk_value *ti[2] = {b, tk_div(k, pos, P)}; /* a negative pos: a negative entry, -1 */
        at[0] = tk_load(k, tk_scalar_type(TK_I32), a->BT, ti, -1.0f);
        at[2] = tk_rem(k, pos, P);
    }
    tk_value *from[4] = {b, hk, i, i32c(k, 0)};
    tk_type row = tk_vec_type(a->dt, a->D, TK_PER_COL, TK_WARP, TK_ROW);
    tk_store(k, K, at, tk_load(k, row, Kn, from, 0.0f));
    tk_store(k, V, at, tk_load(k, row, Vn, from, 0.0f));
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_attention_decode_config *c) {
    tk_status s = tk_attn_check_spec(ctx, fn, c->dtype, c->head_dim, c->causal);
    if (s) return s;
    if (c->pack != TK_ATTN_PACK_QUERIES && c->pack != TK_ATTN_PACK_HEADS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: pack is %d; expected TK_ATTN_PACK_QUERIES or "
                                "TK_ATTN_PACK_HEADS",
                                fn, c->pack);
    if (c->part < TK_ATTN_DECODE_DIRECT || c->part > TK_ATTN_DECODE_APPEND)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: part is %d; expected TK_ATTN_DECODE_DIRECT, _SPLIT, _MERGE "
                                "or _APPEND",
                                fn, c->part);
    if (c->cache < TK_ATTN_CACHE_NONE || c->cache > TK_ATTN_CACHE_PAGED)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: cache is %d; expected TK_ATTN_CACHE_NONE, _LENGTHS or _PAGED",
                                fn, c->cache);
    if (c->part == TK_ATTN_DECODE_APPEND && !c->cache)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: TK_ATTN_DECODE_APPEND writes into a cache: cache is "
                                "TK_ATTN_CACHE_NONE",
                                fn);
    if (c->keys != 0 && c->keys != 32 && c->keys != 64)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: keys is %d; expected 0, 32 or 64", fn,
                                c->keys);
    int bkv = c->keys ? c->keys : tk_attn_decode_keys(c->head_dim);
    bool chunk_ok = c->chunk == 0 || ((c->chunk == 16 || c->chunk == 32 || c->chunk == 64) &&
                                      c->chunk <= bkv && c->cache == TK_ATTN_CACHE_PAGED);
    if (!chunk_ok)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: chunk is %d; expected 0, or 16, 32 or 64 (at most the %d-key "
                                "tile) with TK_ATTN_CACHE_PAGED",
                                fn, c->chunk, bkv);
    if (c->warps != 0 && c->warps != 1 && c->warps != 2 && c->warps != 4 && c->warps != 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0 (1), 1, 2, 4 or 8", fn, c->warps);
    int kw = c->key_warps ? c->key_warps : 1, w = c->warps ? c->warps : 1;
    if ((kw != 1 && kw != 2 && kw != 4) || w * kw > 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: key_warps is %d with %d warps; expected 0 (1), 1, 2 or 4, "
                                "at most 8 warps in all",
                                fn, c->key_warps, w);
    if (kw > 1 && c->part != TK_ATTN_DECODE_SPLIT)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: key_warps is %d: each warp writes a partial, so only "
                                "TK_ATTN_DECODE_SPLIT shares a range's keys among warps",
                                fn, kw);
    if (c->stages != 0 && (c->stages < 2 || c->stages > 8))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: stages is %d; expected 0 (the default) or 2..8", fn,
                                c->stages);
    int stages = c->stages ? c->stages : tk_attn_decode_stages(c->head_dim);
    int copies = c->cache == TK_ATTN_CACHE_PAGED ? bkv * kw / (c->chunk ? c->chunk : bkv) : 1;
    long ring = tk_attn_decode_ring_bytes(stages, bkv * kw, c->head_dim);
    if (c->part != TK_ATTN_DECODE_MERGE && c->part != TK_ATTN_DECODE_APPEND &&
        ring > TK_ATTN_DECODE_RING_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %d stages of %d keys at head_dim %d: a %ld KB K/V ring, "
                                "more than the %d KB of shared memory a block may take",
                                fn, stages, bkv * kw, c->head_dim, ring / 1024,
                                TK_ATTN_DECODE_RING_MAX / 1024);
    long q = tk_attn_decode_q_bytes(w, c->head_dim);
    if (c->part != TK_ATTN_DECODE_MERGE && c->part != TK_ATTN_DECODE_APPEND &&
        ring + q > TK_ATTN_DECODE_SMEM_MAX)
        return tk_ctx_set_error(
            ctx, TK_ERR_INVALID_ARG,
            "%s: a %ld KB K/V ring and %d warps' %ld KB of queries at "
            "head_dim %d: more than the %d KB of shared memory a block may take",
            fn, ring / 1024, w, q / 1024, c->head_dim, TK_ATTN_DECODE_SMEM_MAX / 1024);
    if (stages * copies > 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %d stages of %d page copies each: a ring holds at most 16 "
                                "(fewer key_warps or a larger chunk)",
                                fn, stages, copies);
    return TK_OK;
}

/* Keys per tile: 32 (a small ring: more blocks per SM, each warp's tile
 * sooner done; bench/RESULTS.md, 2026-12-03). */
int tk_attn_decode_keys(int head_dim) {
    (void)head_dim;
    return 32;
}

int tk_attn_decode_stages(int head_dim) { return head_dim == 256 ? 2 : 3; }

tk_status tk_attention_decode_build(tk_ctx *ctx, const tk_attention_decode_config *cfg,
                                    tk_kernel **out) {
    const char *fn = "tk_attention_decode_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    bool merge = cfg->part == TK_ATTN_DECODE_MERGE, append = cfg->part == TK_ATTN_DECODE_APPEND;
    int warps = merge                   ? (cfg->warps ? cfg->warps : MERGE_WARPS)
                : append || !cfg->warps ? 1
                                        : cfg->warps;
    int kw = merge || append || !cfg->key_warps ? 1 : cfg->key_warps;
    int stages = cfg->stages ? cfg->stages : tk_attn_decode_stages(cfg->head_dim);
    int bkv = cfg->keys ? cfg->keys : tk_attn_decode_keys(cfg->head_dim);
    bool paged = cfg->cache == TK_ATTN_CACHE_PAGED;
    int chunk = cfg->chunk ? cfg->chunk : paged ? bkv : bkv * kw; /* rows a copy moves */
    static const char *part[3] = {"direct", "split", "merge"};
    static const char *cache[3] = {"", "_lens", "_paged"};
    char name[128], ch[16] = "", kws[16] = "";
    if (paged && chunk != bkv) snprintf(ch, sizeof ch, "%d", chunk);
    if (kw > 1) snprintf(kws, sizeof kws, "_k%d", kw);
    if (merge)
        snprintf(name, sizeof name, "tk_attn_decode_merge_%s_d%d_%s_w%d", tk_dtype_name(cfg->dtype),
                 cfg->head_dim, cfg->pack ? "heads" : "queries", warps);
    else if (append)
        snprintf(name, sizeof name, "tk_attn_kv_append_%s_d%d%s", tk_dtype_name(cfg->dtype),
                 cfg->head_dim, cache[cfg->cache]);
    else
        snprintf(name, sizeof name, "tk_attn_decode_%s_%s_d%d_%s_w%d%s_s%d%s%s%s", part[cfg->part],
                 tk_dtype_name(cfg->dtype), cfg->head_dim, cfg->pack ? "heads" : "queries", warps,
                 kws, stages, cfg->causal ? "_causal" : "", cache[cfg->cache], ch);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, warps * kw, &k))) return s;
    dec a = {.k = k,
             .dt = cfg->dtype,
             .D = cfg->head_dim,
             .ND = cfg->head_dim / 16,
             .causal = cfg->causal,
             .pack = cfg->pack,
             .W = warps,
             .NS = stages,
             .BKV = bkv,
             .KW = kw,
             .BR = bkv * kw,
             .cache = cfg->cache,
             .CH = chunk,
             .NC = bkv * kw / chunk};
    if (merge)
        build_merge(&a);
    else if (append)
        build_append(&a);
    else
        build_decode(&a, cfg->part == TK_ATTN_DECODE_SPLIT);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
