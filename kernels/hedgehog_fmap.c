/* Hedgehog linear attention, backward: through the feature map (BWD_FMAP)
 * and the ordered sums of its partials (BWD_REDUCE). The contracts and the
 * notation are in tk/tk_kernels.h ("The backward"); F = 2D.
 *
 * FMAP. A block owns one (batch, head) and a run of chunks of C = 16·warps
 * tokens; each warp owns 16 tokens of a chunk, tokens in rows and features
 * in columns (the forward's feature map has them the other way round). W
 * (and b, in every row of a tile) sit in shared memory for the block's
 * life; u arrives by cp.async into two stages, chunk ch + 1 while ch is
 * worked on. Per chunk, each warp, over its 16 tokens:
 *   stats  a loop over the pieces of 16 features: t = 2·log2(e)·y of the
 *          piece (y = u·Wᵀ + b, an mma against W's rows), e± = exp2(±t -
 *          m) and dΦ's two [16, 16] tiles of the piece (f32, from global
 *          memory), online in the running max m of |t| (the max of [2y,
 *          -2y]): l = Σ(e₊ + e₋) and l·σ = Σ(e₊dΦ₊ + e₋dΦ₋)
 *   dy     a second such loop, y and e± again, dΦ read again (cached):
 *          dy = 2(φ₊(dΦ₊ - σ) - φ₋(dΦ₋ - σ)), φ± = e±/l, into the warp's
 *          rows of sDY (the dtype). Keeping y, or the first loop's
 *          products, in registers instead takes 64 to 128 more at D 128
 *          (ptxas, sm_90a: spills).
 * then, after a barrier (sDY complete):
 *   dU     dy·W, 16 in-features a trip (an mma against W), in the dtype
 *   dW, db each warp owns [16, cw] tiles of dW (a slab of 16 out-features
 *          by cw in-features) and adds dyᵀ·u over the chunk's tokens (ATB
 *          mmas, 16 tokens a trip), and db's slab as dyᵀ·1 (a [16, 16]
 *          tile of equal columns); the sums stay in registers over the
 *          block's run and go to PW and PB at [h, b·NS + s] at its end.
 * Two barriers a chunk. Tokens past T load 0 (u and dΦ), so σ = 0 and dy
 * = 0 there: they add nothing to dW or db, and their dU is not stored.
 *
 * REDUCE. Block (i, j, e) sums the [16, 32] tile at (16i, 32j) of P[h, n]
 * over the terms (h, n), h ≡ e (mod Hw), listed by h then n: warp w of 8
 * adds terms w, w + 8, w + 16, ... in that order, then warp 0 adds the 8
 * warps' sums in warp order. A fixed order (deterministic: the same bits
 * whatever order the warps run in), with 8 warps' loads in flight where
 * one warp would wait on each load in turn. */
#include <math.h>
#include <stdio.h>

#include "hedgehog_parts.h"

#define MAX_SLOTS 2  /* dW tiles a warp                                         */
#define SUM_REGS  64 /* the most registers of dW sums a warp may keep           */
#define RW        8  /* REDUCE: warps a block                                   */
#define RC        32 /* REDUCE: columns a block                                 */

typedef struct fmk {
    tk_kernel *k;
    tk_hedgehog_config c; /* resolved */
    tk_dtype dt;
    int D, W, C;   /* head dim, warps, chunk tokens                       */
    int slots, cw; /* dW tiles a warp, [16, cw] each                      */
    tk_value *U, *Wt, *Bu, *dPhi, *dU, *PW, *PB;
    tk_value *b, *h, *n;       /* batch, head, the partial's index b·NS + s  */
    tk_value *w, *r0;          /* the warp (i64), its first row of a chunk   */
    tk_value *lo, *hi;         /* the block's chunks: [lo, hi)               */
    tk_value *np;              /* D / 16 as a run-time value                 */
    tk_value *slab[MAX_SLOTS]; /* slot s's first out-feature (row of dW)     */
    tk_value *col[MAX_SLOTS];  /* and first in-feature (column of dW)        */
    tk_value *sW, *sU, *sDY;   /* W [D, D]; u [C, D] x 2 stages; dy [C, D]   */
    tk_value *sB;              /* b in every row [16, D] (bias) or NULL      */
} fmk;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_type tile(tk_dtype dt, int rows, int cols, tk_layout l) {
    return tk_tile_type(dt, rows, cols, TK_WARP, l);
}
/* A rows x cols tile of shared tile s at (r, c), in the dtype. */
static tk_value *lds(fmk *g, tk_value *s, int rows, int cols, tk_layout l, tk_value *r,
                     tk_value *c) {
    return tk_load(g->k, tile(g->dt, rows, cols, l), s, ((tk_value *[]){r, c}), 0.0f);
}
/* a + b (a NULL: b), for sums built in a loop. */
static tk_value *acc(tk_kernel *k, tk_value *a, tk_value *b) { return a ? tk_add(k, a, b) : b; }

/* ---- the configuration -------------------------------------------------- */
tk_hedgehog_config tk_hh_fmap_resolve(const tk_hedgehog_config *c) {
    tk_hedgehog_config r = *c;
    /* D 128: the only count whose dW sums fit in 64 registers. D 64: 2, 4
     * and 8 warps take about the same registers (ptxas, sm_90a: 247, 235
     * and 238), 8 warps an SM each; 4 split a head's tokens finer than 8,
     * with half the barriers a token of 2 */
    if (!r.warps) r.warps = r.head_dim == 128 ? 8 : 4;
    return r;
}

size_t tk_hh_fmap_smem_bytes(const tk_hedgehog_config *c) {
    size_t D = (size_t)c->head_dim, C = 16 * (size_t)c->warps;
    size_t n = D * D + 3 * C * D; /* W, u (two stages), dy: elements */
    if (c->bias) n += 16 * D;
    return n * 2; /* bf16 / f16 */
}

/* Registers of dW sums a warp keeps: D² f32 over the warp's 32 lanes. */
static int sum_regs(const tk_hedgehog_config *c) {
    return c->head_dim * c->head_dim / (32 * c->warps);
}

/* ---- FMAP: setup ------------------------------------------------------------ */
static void params(fmk *g) {
    tk_kernel *k = g->k;
    g->U = tk_param_tensor(k, "U", g->dt, 4);
    g->Wt = tk_param_tensor(k, "W", g->dt, 3);
    if (g->c.bias) g->Bu = tk_param_tensor(k, "Bu", g->dt, 2);
    g->dPhi = tk_param_tensor(k, "dPhi", TK_F32, 4);
    g->dU = tk_param_tensor(k, "dU", g->dt, 4);
    g->PW = tk_param_tensor(k, "PW", TK_F32, 4);
    if (g->c.bias) g->PB = tk_param_tensor(k, "PB", TK_F32, 4);
}

/* Grid (NS, H, B) with NS = PW's dim 1 / B; the block's run of chunks:
 * the s-th of NS runs of ceil(chunks / NS) (empty past the last chunk). */
static void geometry(fmk *g) {
    tk_kernel *k = g->k;
    tk_value *B = tk_dim(k, g->U, 0), *H = tk_dim(k, g->U, 1), *T = tk_dim(k, g->U, 2);
    tk_value *ns = tk_div(k, tk_dim(k, g->PW, 1), B);
    tk_set_grid(k, ns, H, B);
    tk_value *s = tk_block_id_i64(k, 0);
    g->h = tk_block_id_i64(k, 1);
    g->b = tk_block_id_i64(k, 2);
    g->n = tk_add(k, tk_mul(k, g->b, ns), s);
    g->w = tk_warp_id_i64(k);
    g->r0 = tk_mul(k, g->w, i64c(k, 16));
    tk_value *chunks = tk_ceil_div(k, T, i64c(k, g->C));
    tk_value *run = tk_ceil_div(k, chunks, ns);
    g->lo = tk_min(k, tk_mul(k, s, run), chunks);
    g->hi = tk_min(k, tk_add(k, g->lo, run), chunks);
    /* D / 16 from W's run-time size (capped at it): with a constant trip
     * count LLVM unrolls the loops over pieces, undoing what they are for
     * (ptxas, sm_90a: 7 more registers at D 64) */
    g->np = tk_min(k, tk_div(k, tk_dim(k, g->Wt, 1), i64c(k, 16)), i64c(k, g->D / 16));
    tk_value_set_name(g->r0, "r0");
    tk_value_set_name(g->lo, "chunk_lo");
    tk_value_set_name(g->hi, "chunk_hi");
}

/* Unit w + W·s of the D²/(16·cw) tiles of dW, for each slot s: its slab
 * and column. */
static void slot_places(fmk *g) {
    tk_kernel *k = g->k;
    tk_value *per = i64c(k, g->D / g->cw); /* tiles a slab */
    for (int s = 0; s < g->slots; s++) {
        tk_value *u = tk_add(k, g->w, i64c(k, (int64_t)s * g->W));
        g->slab[s] = tk_mul(k, tk_div(k, u, per), i64c(k, 16));
        g->col[s] = tk_mul(k, tk_rem(k, u, per), i64c(k, g->cw));
    }
}

static void copy_u(fmk *g, tk_value *st, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *idx[4] = {g->b, g->h, tk_mul(k, ch, i64c(k, g->C)), i64c(k, 0)};
    tk_copy_to_shared(k, tk_stage(k, g->sU, st), g->U, idx, 0.0f, TK_COPY_ASYNC);
}

/* sB's rows = the head's bias, by warp 0: the first chunk's barrier orders
 * it before any use. */
static void bias_rows(fmk *g) {
    tk_kernel *k = g->k;
    tk_type vt = tk_vec_type(g->dt, 32, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *hb = tk_rem(k, g->h, tk_dim(k, g->Bu, 0));
    tk_if_begin(k, tk_eq(k, g->w, i64c(k, 0)));
    for (int c = 0; c < g->D; c += 32) {
        tk_value *v = tk_load(k, vt, g->Bu, ((tk_value *[]){hb, i64c(k, c)}), 0.0f);
        tk_value *t = tk_add(k, tk_zeros(k, tile(TK_F32, 16, 32, TK_ROW)), tk_cvt(k, v, TK_F32));
        tk_store(k, g->sB, ((tk_value *[]){i64c(k, 0), i64c(k, c)}), tk_cvt(k, t, g->dt));
    }
    tk_if_end(k, 0, NULL, NULL);
}

/* Shared tiles; W (entry h mod Hw) and the first chunk's u issued; sB. */
static void setup(fmk *g) {
    tk_kernel *k = g->k;
    params(g);
    geometry(g);
    slot_places(g);
    g->sW = tk_shared(k, g->dt, g->D, g->D, TK_SMEM_SWIZZLE, 1);
    g->sU = tk_shared(k, g->dt, g->C, g->D, TK_SMEM_SWIZZLE, 2);
    g->sDY = tk_shared(k, g->dt, g->C, g->D, TK_SMEM_SWIZZLE, 1);
    g->sB = g->c.bias ? tk_shared(k, g->dt, 16, g->D, TK_SMEM_SWIZZLE, 1) : NULL;
    tk_value *z = i64c(k, 0), *hw = tk_rem(k, g->h, tk_dim(k, g->Wt, 0));
    tk_copy_to_shared(k, g->sW, g->Wt, ((tk_value *[]){hw, z, z}), 0.0f, TK_COPY_ASYNC);
    copy_u(g, z, g->lo);
    tk_async_commit(k);
    if (g->sB) bias_rows(g);
}

/* Top of trip ch: its u has landed and every warp is past trip ch - 1;
 * u of ch + 1 is issued into the other stage. Returns ch's stage. */
static tk_value *arrive(fmk *g, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *st = tk_rem(k, tk_sub(k, ch, g->lo), i64c(k, 2)), *ch1 = tk_add(k, ch, i64c(k, 1));
    tk_async_wait(k, 0);
    tk_barrier(k); /* u of ch landed for all; every warp is done with ch - 1's stage and sDY */
    tk_if_begin(k, tk_lt(k, ch1, g->hi));
    copy_u(g, tk_sub(k, i64c(k, 1), st), ch1);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    return st;
}

/* ---- FMAP: one chunk ------------------------------------------------------- */
/* Every loop over features below runs at run time, one piece a trip:
 * unrolled, each piece's shared-memory addresses are loop-invariant and
 * hoisted out of the chunk loop, where at D 128 they alone spill (as in
 * the forward, kernels/hedgehog_fm.c). So y is recomputed in each pass
 * rather than kept whole, and dy leaves the second pass through sDY. */

/* t = 2·log2(e)·(u·Wᵀ + b) of piece p (16 features at p16) for this
 * warp's tokens u [16, D]: W's rows [16, D] are the B of an ABT mma, the
 * bias tile (b in every row) starts it; exp2(±t - m) is exp(±2y - max). */
static tk_value *logits(fmk *g, tk_value *u, tk_value *p16) {
    tk_kernel *k = g->k;
    tk_value *z = i64c(k, 0);
    tk_value *y = g->sB ? tk_cvt(k, lds(g, g->sB, 16, 16, TK_ROW, z, p16), TK_F32) : NULL;
    y = tk_mma(k, TK_MMA_ABT, u, lds(g, g->sW, 16, g->D, TK_ROW, p16, z), y);
    return tk_mul(k, y, f32c(k, (float)(2.0 * M_LOG2E)));
}

/* dΦ's [16, 16] tiles of piece p16 of this warp's tokens (first token
 * `row`): the 2y half's (*pp) and the -2y half's (*pn). */
static void dphi_pieces(fmk *g, tk_value *row, tk_value *p16, tk_value **pp, tk_value **pn) {
    tk_kernel *k = g->k;
    tk_type pt = tile(TK_F32, 16, 16, TK_ROW);
    tk_value *j = tk_add(k, p16, i64c(k, g->D));
    *pp = tk_load(k, pt, g->dPhi, ((tk_value *[]){g->b, g->h, row, p16}), 0.0f);
    *pn = tk_load(k, pt, g->dPhi, ((tk_value *[]){g->b, g->h, row, j}), 0.0f);
}

/* The softmax's statistics of this warp's tokens, online over the pieces
 * (the running max m of |t|, the max of [2y, -2y]; e± = exp2(±t - m)):
 * st[0] = m, st[1] = l = Σ(e₊ + e₋), st[2] = l·σ = Σ(e₊dΦ₊ + e₋dΦ₋). */
static void stats(fmk *g, tk_value *u, tk_value *row, tk_value **st) {
    tk_kernel *k = g->k;
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *init[3] = {tk_fill(k, vt, f32c(k, -INFINITY)), tk_zeros(k, vt), tk_zeros(k, vt)};
    tk_value *cur[3], *next[3], *pp, *pn;
    tk_value *p = tk_for_begin(k, i64c(k, 0), g->np, i64c(k, 1), 3, init, cur);
    {
        tk_value *p16 = tk_mul(k, p, i64c(k, 16)), *t = logits(g, u, p16);
        tk_value *m = tk_max(k, cur[0], tk_row_max(k, tk_abs(k, t)));
        tk_value *ep = tk_exp2(k, tk_sub(k, t, m)), *en = tk_exp2(k, tk_sub(k, tk_neg(k, t), m));
        tk_value *f = tk_exp2(k, tk_sub(k, cur[0], m)); /* exp2(-inf) = 0 at the first piece */
        dphi_pieces(g, row, p16, &pp, &pn);
        next[0] = m;
        next[1] = tk_add(k, tk_mul(k, cur[1], f), tk_row_sum(k, tk_add(k, ep, en)));
        tk_value *w = tk_add(k, tk_mul(k, ep, pp), tk_mul(k, en, pn));
        next[2] = tk_add(k, tk_mul(k, cur[2], f), tk_row_sum(k, w));
    }
    tk_for_end(k, 3, next, st);
}

/* dy of this warp's tokens into sDY (its rows, the dtype): a second pass
 * over the pieces and dΦ (read again: from cache), dy = 2(φ₊(dΦ₊ - σ) -
 * φ₋(dΦ₋ - σ)) with φ± = e±/l. Tokens past T have dΦ = 0, so σ = 0 and
 * dy = 0: they add nothing to dW or db. */
static void grad_y(fmk *g, tk_value *u, tk_value *row) {
    tk_kernel *k = g->k;
    tk_value *st[3], *pp, *pn;
    stats(g, u, row, st);
    tk_value *sigma = tk_div(k, st[2], st[1]), *f = tk_div(k, f32c(k, 2.0f), st[1]);
    tk_value *p = tk_for_begin(k, i64c(k, 0), g->np, i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *p16 = tk_mul(k, p, i64c(k, 16)), *t = logits(g, u, p16);
        tk_value *ep = tk_exp2(k, tk_sub(k, t, st[0]));
        tk_value *en = tk_exp2(k, tk_sub(k, tk_neg(k, t), st[0]));
        dphi_pieces(g, row, p16, &pp, &pn);
        tk_value *d =
            tk_sub(k, tk_mul(k, ep, tk_sub(k, pp, sigma)), tk_mul(k, en, tk_sub(k, pn, sigma)));
        tk_store(k, g->sDY, ((tk_value *[]){g->r0, p16}), tk_cvt(k, tk_mul(k, d, f), g->dt));
    }
    tk_for_end(k, 0, NULL, NULL);
}

/* dU = dy·W for this warp's tokens (dy from sDY, after the barrier that
 * completes it), 16 in-features a trip (W [out, in] is the B of an AB
 * mma: [D, 16], col layout), stored in the dtype; rows past T are dropped. */
static void write_du(fmk *g, tk_value *row) {
    tk_kernel *k = g->k;
    tk_value *z = i64c(k, 0), *dy = lds(g, g->sDY, 16, g->D, TK_ROW, g->r0, z);
    tk_value *i = tk_for_begin(k, z, g->np, i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *i16 = tk_mul(k, i, i64c(k, 16));
        tk_value *x = tk_mma(k, TK_MMA_AB, dy, lds(g, g->sW, g->D, 16, TK_COL, z, i16), NULL);
        tk_store(k, g->dU, ((tk_value *[]){g->b, g->h, row, i16}), tk_cvt(k, x, g->dt));
    }
    tk_for_end(k, 0, NULL, NULL);
}

/* The warp's dW tiles (cur[s]) += dyᵀ·u over the chunk, and with the bias
 * its db tiles (cur[slots + s]) += dyᵀ·1: 16 tokens a trip (the A of ATB
 * mmas: sDY [16 tokens, 16 out-features], col layout; the B: su [16
 * tokens, cw in-features]). After the barrier that completes sDY. */
static void accumulate(fmk *g, tk_value *su, tk_value *const *cur, tk_value **next) {
    tk_kernel *k = g->k;
    int n = g->c.bias ? 2 * g->slots : g->slots;
    tk_value *ones = tk_fill(k, tile(g->dt, 16, 16, TK_COL), f32c(k, 1.0f));
    tk_value *c[2 * MAX_SLOTS], *nx[2 * MAX_SLOTS];
    tk_value *kt = tk_for_begin(k, i64c(k, 0), i64c(k, g->C), i64c(k, 16), n, cur, c);
    {
        for (int s = 0; s < g->slots; s++) {
            tk_value *a = lds(g, g->sDY, 16, 16, TK_COL, kt, g->slab[s]);
            nx[s] = tk_mma(k, TK_MMA_ATB, a, lds(g, su, 16, g->cw, TK_COL, kt, g->col[s]), c[s]);
            if (g->c.bias) nx[g->slots + s] = tk_mma(k, TK_MMA_ATB, a, ones, c[g->slots + s]);
        }
    }
    tk_for_end(k, n, nx, next);
}

/* The sums to PW [h, n, slab, col] and PB [h, n, 0, slab] (a db tile's
 * columns are equal: its row max is db; of the warps that share a slab,
 * the one at column 0 writes it). */
static void write_partials(fmk *g, tk_value *const *fin) {
    tk_kernel *k = g->k;
    tk_value *z = i64c(k, 0);
    for (int s = 0; s < g->slots; s++) {
        tk_store(k, g->PW, ((tk_value *[]){g->h, g->n, g->slab[s], g->col[s]}), fin[s]);
        if (!g->c.bias) continue;
        tk_value *db = tk_row_max(k, fin[g->slots + s]);
        if (g->cw < g->D) tk_if_begin(k, tk_eq(k, g->col[s], z));
        tk_store(k, g->PB, ((tk_value *[]){g->h, g->n, z, g->slab[s]}), db);
        if (g->cw < g->D) tk_if_end(k, 0, NULL, NULL);
    }
}

static void build_fmap(fmk *g) {
    tk_kernel *k = g->k;
    setup(g);
    int n = g->c.bias ? 2 * g->slots : g->slots;
    tk_value *init[2 * MAX_SLOTS], *cur[2 * MAX_SLOTS], *next[2 * MAX_SLOTS], *fin[2 * MAX_SLOTS];
    for (int s = 0; s < g->slots; s++) {
        init[s] = tk_zeros(k, tile(TK_F32, 16, g->cw, TK_ROW));
        if (g->c.bias) init[g->slots + s] = tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW));
    }
    tk_value *ch = tk_for_begin(k, g->lo, g->hi, i64c(k, 1), n, init, cur);
    {
        tk_value *su = tk_stage(k, g->sU, arrive(g, ch));
        tk_value *row = tk_add(k, tk_mul(k, ch, i64c(k, g->C)), g->r0);
        grad_y(g, lds(g, su, 16, g->D, TK_ROW, g->r0, i64c(k, 0)), row);
        tk_barrier(k); /* sDY complete */
        write_du(g, row);
        accumulate(g, su, cur, next);
    }
    tk_for_end(k, n, next, fin);
    tk_async_wait(k, 0); /* a block without chunks leaves none in flight */
    write_partials(g, fin);
}

/* ---- REDUCE ------------------------------------------------------------------ */
static void build_reduce(tk_kernel *k, tk_dtype out) {
    tk_value *P = tk_param_tensor(k, "P", TK_F32, 4), *Out = tk_param_tensor(k, "Out", out, 3);
    tk_value *H = tk_dim(k, P, 0), *N = tk_dim(k, P, 1), *Hw = tk_dim(k, Out, 0);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, P, 2), i64c(k, 16)),
                tk_ceil_div(k, tk_dim(k, P, 3), i64c(k, RC)), Hw);
    tk_value *r0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, 16));
    tk_value *c0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, RC));
    tk_value *e = tk_block_id_i64(k, 2), *w = tk_warp_id_i64(k);
    /* heads e, e + Hw, ... below H, N terms each; a term past them loads 0 */
    tk_value *terms = tk_mul(k, tk_ceil_div(k, tk_sub(k, H, e), Hw), N);
    tk_type t = tile(TK_F32, 16, RC, TK_ROW);
    tk_value *init = tk_zeros(k, t), *cur, *next, *sum;
    tk_value *i =
        tk_for_begin(k, i64c(k, 0), tk_ceil_div(k, terms, i64c(k, RW)), i64c(k, 1), 1, &init, &cur);
    {
        tk_value *x = tk_add(k, tk_mul(k, i, i64c(k, RW)), w);
        tk_value *h = tk_add(k, e, tk_mul(k, tk_div(k, x, N), Hw));
        tk_value *idx[4] = {h, tk_rem(k, x, N), r0, c0};
        next = tk_add(k, cur, tk_load(k, t, P, idx, 0.0f));
    }
    tk_for_end(k, 1, &next, &sum);
    tk_value *sh = tk_shared(k, TK_F32, 16, RC, TK_SMEM_PLAIN, RW), *z = i64c(k, 0);
    tk_store(k, tk_stage(k, sh, w), ((tk_value *[]){z, z}), sum);
    tk_barrier(k);
    tk_if_begin(k, tk_eq(k, w, z));
    tk_value *o = NULL;
    for (int v = 0; v < RW; v++)
        o = acc(k, o, tk_load(k, t, tk_stage(k, sh, i64c(k, v)), ((tk_value *[]){z, z}), 0.0f));
    tk_store(k, Out, ((tk_value *[]){e, r0, c0}), out == TK_F32 ? o : tk_cvt(k, o, out));
    tk_if_end(k, 0, NULL, NULL);
}

/* ---- the builders ------------------------------------------------------------- */
static tk_status bad(tk_ctx *ctx, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_hedgehog_build: %s is %d; %s", what, v,
                            want);
}

static tk_status check_fmap(tk_ctx *ctx, const tk_hedgehog_config *c) {
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: dtype is %s; expected TK_BF16 or TK_F16",
                                tk_dtype_name(c->dtype));
    if (c->head_dim != 64 && c->head_dim != 128)
        return bad(ctx, "head_dim", c->head_dim, "expected 64 or 128");
    if (c->bias != 0 && c->bias != 1) return bad(ctx, "bias", c->bias, "expected 0 or 1");
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8)
        return bad(ctx, "warps", w, "expected 0, 1, 2, 4 or 8");
    tk_hedgehog_config r = tk_hh_fmap_resolve(c);
    if (sum_regs(&r) > SUM_REGS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: warps is %d; expected 0 or %s at head_dim %d "
                                "(a warp keeps D²/(32·warps) registers of dW sums, at most %d)",
                                w, r.head_dim == 64 ? "2, 4 or 8" : "8", r.head_dim, SUM_REGS);
    size_t smem = tk_hh_fmap_smem_bytes(&r);
    if (smem > TK_HEDGEHOG_SMEM_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: head_dim %d and warps %d need %zu bytes of "
                                "shared memory; a block has at most %d",
                                r.head_dim, r.warps, smem, TK_HEDGEHOG_SMEM_MAX);
    return TK_OK;
}

static tk_status finish(tk_ctx *ctx, tk_kernel *k, tk_kernel **out) {
    tk_status s = tk_kernel_finish(k);
    if (s) {
        tk_ctx_set_error(ctx, s, "tk_hedgehog_build: %s", tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}

tk_status tk_hh_build_fmap(tk_ctx *ctx, const tk_hedgehog_config *cfg, tk_kernel **out) {
    tk_status s = check_fmap(ctx, cfg);
    if (s) return s;
    fmk g = {.c = tk_hh_fmap_resolve(cfg)};
    g.dt = g.c.dtype, g.D = g.c.head_dim, g.W = g.c.warps, g.C = 16 * g.W;
    /* a warp's share of dW, D²/W elements, as [16, D] tiles, or one
     * narrower tile where the warps outnumber the slabs */
    g.slots = g.D / 16 >= g.W ? g.D / 16 / g.W : 1;
    g.cw = g.D / 16 >= g.W ? g.D : g.D * g.D / (16 * g.W);
    char name[64];
    snprintf(name, sizeof name, "tk_hedgehog_fmap_%s_d%d_w%d%s", tk_dtype_name(g.dt), g.D, g.W,
             g.c.bias ? "_bias" : "");
    /* No register cap: ptxas (sm_90a) takes 235 registers at D 64 and 254
     * at D 128 without spills (at D 64 half of them for the masked paths
     * of dΦ's loads). At D 128 shared memory (132 KiB) allows one block an
     * SM anyway; at D 64 a cap of 168 (3 blocks of 4 warps) spills 348
     * bytes. */
    if ((s = tk_kernel_create(ctx, name, g.W, &g.k))) return s;
    build_fmap(&g);
    return finish(ctx, g.k, out);
}

tk_status tk_hh_build_reduce(tk_ctx *ctx, const tk_hedgehog_config *cfg, tk_kernel **out) {
    tk_dtype dt = cfg->dtype;
    if (dt != TK_BF16 && dt != TK_F16 && dt != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: dtype is %s; the reduction writes TK_BF16, "
                                "TK_F16 or TK_F32",
                                tk_dtype_name(dt));
    char name[64];
    snprintf(name, sizeof name, "tk_hedgehog_reduce_%s", tk_dtype_name(dt));
    tk_kernel *k;
    tk_status s = tk_kernel_create(ctx, name, RW, &k);
    if (s) return s;
    build_reduce(k, dt);
    return finish(ctx, k, out);
}
