/* Softmax cross-entropy, the loss and its gradient in one kernel, and the
 * mean of the losses. The contract (parameters in order, grids, the two
 * layouts) is in tk/tk_kernels_train.h ("Softmax cross-entropy").
 *
 * Built as the norm kernels are (kernels/norm.c, docs/PERF_NOTES.md round
 * 18): the rows arrive in rounds of `cols` columns, U slots of SUB·W, each
 * copied by the whole block into a shared stage with cp.async (16-byte
 * copies, zero fill past the view's edges: no masked per-element loads,
 * whose addresses cost registers), round r + 1 while round r is read; warp
 * w reads its SUB columns of every slot, and the gradient leaves through
 * its slot in 16-byte copies. What worked there is kept: narrow rounds read
 * twice rather than a whole row held (L2 serves the second read), the
 * registers capped for occupancy.
 *
 * Why two passes: dX_ij = exp(x_ij - lse_i) - [j = t_i] needs lse_i, a sum
 * over the whole row, before the row's first gradient element exists. The
 * first pass keeps per tile row a running max m and sum s of exp(x - m)
 * (online: s·exp(m - m') when the max grows), and picks x_t out of the
 * tiles as they pass (the element whose column is the target: one compare
 * and select per element, no scalar load of a 16-bit value); the second
 * re-reads the row and writes the gradient. A row of one round stays in
 * shared memory between them. One pass holding a whole row in shared
 * memory instead would cap V (65536 f32 is 256 KiB, past an SM's 228),
 * allow one or two blocks an SM at GPT-2's 50257 (98 KiB in bf16) and
 * leave each idle while its row fills; the norm kernels measured that shape
 * slower than narrow rounds read twice (round 18). The second read is from
 * L2 only if the rows in flight fit there: hence the split layout for long
 * rows (tk_kernels_train.h).
 *
 * The warps' statistics meet in shared memory (each warp's three per-row
 * vectors as columns of its stage, read back exactly) and combine in warp
 * order: M = max m_w, S = Σ s_w·exp(m_w - M), x_t = max (one warp holds
 * it, the others -inf). Split rows (one row a block, 16 segments as tile
 * rows) then combine the 16 tile rows the same way, in registers.
 * Deterministic: no atomics, every sum in a fixed order.
 *
 * Targets become codes in i32 before they meet the f32 tiles (vectors and
 * tiles hold floats): t in 0..V-1 stays, ignore_index becomes -1 (so do a
 * 16-row block's rows past N), anything else -2; the f32 compares are then
 * exact (V <= 2^24) whatever ignore_index is. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "tk/tk_kernels.h"

#define ROWS  16  /* a tile's rows                                  */
#define SUB   32  /* a warp's columns of a slot                     */
#define MAX_U 8   /* slots a round                                  */
#define TAIL  128 /* split: a round reaches the whole tail (V % 128) */

typedef struct xent {
    tk_kernel *k;
    const tk_xent_config *c;
    bool split;
    int W, U;
    tk_value *X, *Xt, *dX, *dXt; /* split: the segments' and the tail's views  */
    tk_value *R, *row0, *wid;    /* rows; the block's first row (split: its row) */
    tk_value *lim;               /* split 0: V; split 1: Ls, the segment length */
    tk_value *tn, *nm, *nr;      /* split: the tail's length, segment rounds; rounds */
    tk_value *half, *ring, *xch; /* the current round's stages; shared           */
    tk_value *icol, *irow;       /* f32: each tile element's column; each row's  */
    tk_value *tgt, *sc;          /* target codes, the gradient's scale (per row)  */
    /* the round being read (round_at): the tail's?, its column limit, the
     * column of tile element (i, 0) as i·rmul + base (f32) */
    tk_value *r, *tail, *clim, *rmul, *base;
} xent;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

static tk_type tile_t(tk_dtype dt) { return tk_tile_type(dt, ROWS, SUB, TK_WARP, TK_ROW); }
static tk_type rowv_t(void) { return tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW); }
static tk_type xch_t(void) { return tk_tile_type(TK_F32, ROWS, 16, TK_WARP, TK_ROW); }

/* ---- rounds ---------------------------------------------------------------- */
static tk_value *half_of(xent *a, tk_value *r) {
    return tk_mul(a->k, tk_rem(a->k, r, i64c(a->k, 2)), i64c(a->k, a->U));
}

static tk_value *stage_in(xent *a, tk_value *half, int u) {
    return tk_stage(a->k, a->ring, tk_add(a->k, half, i64c(a->k, u)));
}

/* Round r's column round: r, but 0 for the tail (its own view's start). */
static tk_value *col_round(xent *a, tk_value *r) {
    if (!a->split) return r;
    return tk_select(a->k, tk_eq(a->k, r, a->nm), i64c(a->k, 0), r);
}

/* The first column of slot u of column round rc. */
static tk_value *slot_c0(xent *a, tk_value *rc, int u) {
    tk_kernel *k = a->k;
    return tk_mul(k, tk_add(k, tk_mul(k, rc, i64c(k, a->U)), i64c(k, u)),
                  i64c(k, (int64_t)SUB * a->W));
}

static tk_value *warp_c0(xent *a, tk_value *rc, int u) {
    return tk_add(a->k, slot_c0(a, rc, u), tk_mul(a->k, a->wid, i64c(a->k, SUB)));
}

/* Slot u of column round rc of view T: [row0, c] or, split, [row, 0, c]. */
static void copy_slot(xent *a, tk_value *sh, tk_value *T, tk_value *rc, int u, bool in) {
    tk_value *zero = i64c(a->k, 0), *c0 = slot_c0(a, rc, u);
    tk_value *i2[2] = {a->row0, c0}, *i3[3] = {a->row0, zero, c0};
    tk_value **idx = a->split ? i3 : i2;
    int n = a->split ? 3 : 2;
    if (in)
        tk_copy_to_shared_n(a->k, sh, T, n, idx, 0.0f, TK_COPY_ASYNC);
    else
        tk_copy_to_global_n(a->k, T, n, idx, sh);
}

/* Round r between the stages of `half` and the views (in: X to shared;
 * out: shared to dX). Split rows take the tail's view in their last round;
 * the others' round r is their column round. */
static void move_round(xent *a, tk_value *half, tk_value *r, bool in) {
    tk_kernel *k = a->k;
    tk_value *T = in ? a->X : a->dX, *Tt = in ? a->Xt : a->dXt;
    if (a->split) tk_if_begin(k, tk_lt(k, r, a->nm));
    for (int u = 0; u < a->U; u++) copy_slot(a, stage_in(a, half, u), T, r, u, in);
    if (!a->split) return;
    tk_else(k, 0, NULL);
    for (int u = 0; u < a->U; u++) copy_slot(a, stage_in(a, half, u), Tt, i64c(k, 0), u, in);
    tk_if_end(k, 0, NULL, NULL);
}

/* The scalars of the round being read: split rows' tail round has the
 * tail's length for a limit, one tile row, and columns from 16·Ls. */
static void round_at(xent *a, tk_value *r) {
    tk_kernel *k = a->k;
    a->half = half_of(a, r);
    if (!a->split) {
        a->tail = NULL, a->clim = a->lim, a->rmul = NULL, a->base = i64c(k, 0);
        return;
    }
    a->tail = tk_eq(k, r, a->nm);
    a->clim = tk_select(k, a->tail, a->tn, a->lim);
    a->rmul = tk_select(k, a->tail, f32c(k, 0.0f), f32(k, a->lim));
    a->base = tk_select(k, a->tail, tk_mul(k, a->lim, i64c(k, ROWS)), i64c(k, 0));
}

/* Opens the loop over rounds: round r + 1 is copied in while round r,
 * arrived, is read (a group committed each trip, empty past the last
 * round; the prologue copied round 0). Returns the column round. */
static tk_value *rounds_begin(xent *a, int n, tk_value *const *init, tk_value **cur) {
    tk_kernel *k = a->k;
    tk_value *r = tk_for_begin(k, i64c(k, 0), a->nr, i64c(k, 1), n, init, cur);
    tk_value *r1 = tk_add(k, r, i64c(k, 1));
    tk_if_begin(k, tk_lt(k, r1, a->nr));
    move_round(a, half_of(a, r1), r1, true);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, 1);
    tk_barrier(k);
    a->r = r;
    round_at(a, r);
    return col_round(a, r);
}

/* Closes it: every warp is done with round r's half before round r + 2
 * is copied there. */
static void rounds_end(xent *a, int n, tk_value *const *next, tk_value **results) {
    tk_barrier(a->k);
    tk_for_end(a->k, n, next, results);
}

/* This warp's [16, SUB] of slot u, in f32. */
static tk_value *mine(xent *a, int u) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    return f32(a->k, tk_load(a->k, tile_t(a->c->dtype), stage_in(a, a->half, u), at, 0.0f));
}

static void put(xent *a, int u, tk_value *t) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    tk_store(a->k, stage_in(a, a->half, u), at, tk_cvt(a->k, t, a->c->dtype));
}

/* Where the target is among this warp's elements of slot u (a bool tile):
 * element (i, j) is column i·rmul + base + c0 + j of the row, so j against
 * the target less i·rmul + base + c0, a per-row vector (per element one
 * compare). Past a segment's end a column can name the next segment's
 * target: the statistics take x_t from the masked tile with a max, where
 * such a match is -inf; the gradient's there is never stored. */
static tk_value *is_target(xent *a, tk_value *rc, int u) {
    tk_kernel *k = a->k;
    tk_value *rel = tk_sub(k, a->tgt, f32(k, tk_add(k, a->base, warp_c0(a, rc, u))));
    if (a->split)
        rel = tk_sub(k, tk_add(k, tk_zeros(k, rowv_t()), rel), tk_mul(k, a->irow, a->rmul));
    return tk_eq(k, a->icol, rel);
}

/* ---- the statistics ---------------------------------------------------------
 * st[0] the running max m, st[1] the sum of exp(x - m), st[2] x_t (a max
 * over -inf and the target's one value, so x dies with the mask); per tile
 * row (PER_ROW vectors). Masked elements are -inf; m starts at -FLT_MAX, so
 * exp(m - m') is 1, not NaN, while a row has seen nothing. */
static void stats_round(xent *a, tk_value *rc, tk_value *st[3]) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *x = mine(a, u);
        tk_value *xm = tk_mask(k, x, TK_MASK_COLS, warp_c0(a, rc, u), a->clim, -INFINITY);
        if (a->split) /* the tail's round: tile row 0 only */
            xm = tk_mask(k, xm, TK_MASK_ROWS, i64c(k, 0),
                         tk_select(k, a->tail, i64c(k, 1), i64c(k, ROWS)), -INFINITY);
        tk_value *m = tk_max(k, st[0], tk_row_max(k, xm));
        tk_value *e = tk_row_sum(k, tk_exp(k, tk_sub(k, xm, m)));
        st[1] = tk_add(k, tk_mul(k, st[1], tk_exp(k, tk_sub(k, st[0], m))), e);
        st[0] = m;
        tk_value *xt = tk_select(k, is_target(a, rc, u), xm, f32c(k, -INFINITY));
        st[2] = tk_max(k, st[2], tk_row_max(k, xt));
    }
}

/* Σ over the 16 tile rows of v, in every lane: v down the columns of a
 * tile, summed down them, one column's total read back. */
static tk_value *rows_total(tk_kernel *k, tk_value *v) {
    return tk_max_all(k, tk_col_sum(k, tk_add(k, tk_zeros(k, xch_t()), v)));
}

/* Warp j's vector i of the exchange: column i of its stage, down the rows
 * (a column broadcast, then a row max of equal values: exact). */
static tk_value *xch_get(xent *a, int j, int i) {
    tk_kernel *k = a->k;
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_value *t = tk_load(k, xch_t(), tk_stage(k, a->xch, i64c(k, j)), at, 0.0f);
    return tk_row_max(k, tk_col_bcast(k, t, i));
}

/* This warp's (m, s, x_t) into its stage, for the others (then a
 * barrier). The three vectors share one [16, 16] stage (columns 0, 1, 2
 * and on): a third of the shared traffic and of the addresses that
 * separate stages cost (ptxas spilled those at 64 registers). */
static void xch_put(xent *a, tk_value *const st[3]) {
    if (a->W == 1) return;
    tk_kernel *k = a->k;
    tk_value *col = tk_iota(k, xch_t(), TK_PER_COL), *zero = tk_zeros(k, xch_t());
    tk_value *t = tk_add(k, zero, st[2]);
    t = tk_select(k, tk_eq(k, col, f32c(k, 1.0f)), tk_add(k, zero, st[1]), t);
    t = tk_select(k, tk_eq(k, col, f32c(k, 0.0f)), tk_add(k, zero, st[0]), t);
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_store(k, tk_stage(k, a->xch, a->wid), at, t);
    tk_barrier(k);
}

/* (M, S, x_t) of the block's warps from the stages, combined in warp
 * order. */
static void block_stats(xent *a, tk_value *st[3]) {
    if (a->W == 1) return;
    tk_kernel *k = a->k;
    tk_value *M = xch_get(a, 0, 0), *xt = xch_get(a, 0, 2), *S = NULL;
    for (int j = 1; j < a->W; j++) {
        M = tk_max(k, M, xch_get(a, j, 0));
        xt = tk_max(k, xt, xch_get(a, j, 2));
    }
    for (int j = 0; j < a->W; j++) {
        tk_value *s = tk_mul(k, xch_get(a, j, 1), tk_exp(k, tk_sub(k, xch_get(a, j, 0), M)));
        S = S ? tk_add(k, S, s) : s;
    }
    st[0] = M, st[1] = S, st[2] = xt;
}

/* Split rows: the 16 tile rows (segments) are one row: scalars. */
static void split_stats(xent *a, tk_value *st[3]) {
    tk_kernel *k = a->k;
    tk_value *M = tk_max_all(k, st[0]);
    st[1] = rows_total(k, tk_mul(k, st[1], tk_exp(k, tk_sub(k, st[0], M))));
    st[2] = tk_max_all(k, st[2]);
    st[0] = M;
}

/* ---- the targets and the scale ------------------------------------------- */
/* The code of target T[i] (i32 in, f32 out): t in 0..V-1, -1 ignored, -2
 * out of range. */
static tk_value *target_code(xent *a, tk_value *T, tk_value *i, tk_value *V, tk_value *ign) {
    tk_kernel *k = a->k;
    tk_value *ii[1] = {i};
    tk_value *t = tk_load(k, tk_scalar_type(TK_I32), T, ii, 0.0f);
    tk_value *v32 = tk_cvt(k, V, TK_I32), *zero = tk_const_i32(k, 0);
    tk_value *bad = tk_or(k, tk_lt(k, t, zero), tk_ge(k, t, v32));
    tk_value *code = tk_select(k, bad, tk_const_i32(k, -2), t);
    tk_value *skip = tk_or(k, tk_eq(k, t, ign), tk_ge(k, i, a->R)); /* rows past R too */
    return f32(k, tk_select(k, skip, tk_const_i32(k, -1), code));
}

/* Split 0: the 16 rows' codes as a per-row vector (tiles take vectors,
 * and a vector is loaded only from floats). */
static tk_value *target_codes(xent *a, tk_value *T, tk_value *V, tk_value *ign) {
    tk_kernel *k = a->k;
    if (a->split) return target_code(a, T, a->row0, V, ign);
    tk_value *iv = tk_iota(k, rowv_t(), TK_PER_ROW), *v = tk_zeros(k, rowv_t());
    for (int i = 0; i < ROWS; i++) {
        tk_value *c = target_code(a, T, tk_add(k, a->row0, i64c(k, i)), V, ign);
        v = tk_select(k, tk_eq(k, iv, f32c(k, (float)i)), c, v);
    }
    return v;
}

/* scale_i: 0 for ignored rows, NaN for out-of-range targets. */
static tk_value *grad_scale(xent *a, tk_value *S, tk_value *scale) {
    tk_kernel *k = a->k;
    tk_value *s = scale;
    if (S) {
        tk_value *ir[1] = {a->row0};
        s = tk_load(k, a->split ? tk_scalar_type(TK_F32) : rowv_t(), S, ir, 0.0f);
    }
    if (!a->split) s = tk_add(k, tk_zeros(k, rowv_t()), s);
    s = tk_select(k, tk_eq(k, a->tgt, f32c(k, -2.0f)), f32c(k, NAN), s);
    return tk_select(k, tk_eq(k, a->tgt, f32c(k, -1.0f)), f32c(k, 0.0f), s);
}

/* ---- the outputs ----------------------------------------------------------- */
/* The outputs are warp 0's to write. With a backward every warp has the
 * statistics and stores them, the others into an empty view: under an if
 * on the warp, LLVM sinks the arithmetic into it and keeps the shuffles'
 * results live across it (ptxas spilled 250 bytes at 64 registers). */
static tk_value *own(xent *a, int64_t n) {
    tk_kernel *k = a->k;
    return tk_select(k, tk_eq(k, a->wid, i64c(k, 0)), i64c(k, n), i64c(k, 0));
}

/* Scalar v into O[i]: a vector stored into the one-element view. */
static void store_one(xent *a, tk_value *O, tk_value *i, tk_value *v) {
    tk_kernel *k = a->k;
    tk_value *at[1] = {i64c(k, 0)};
    tk_store(k, tk_narrow(k, O, 0, i, own(a, 1)), at, tk_fill(k, rowv_t(), v));
}

/* v (per row; split: a scalar) into O at the block's rows. The store is
 * per element under a test of its row; v goes through a row max of its
 * own broadcast first (exact, a few shuffles a block), which LLVM cannot
 * sink into those tests: else it sinks the warps' combination there and
 * keeps every shuffle's result live to the store (ptxas spilled 184
 * bytes at 64 registers when the loss was the only output). */
static void store_rows(xent *a, tk_value *O, tk_value *v) {
    tk_kernel *k = a->k;
    tk_value *at[1] = {i64c(k, 0)};
    if (a->split) {
        store_one(a, O, a->row0, v);
        return;
    }
    v = tk_row_max(k, tk_add(k, tk_zeros(k, xch_t()), v));
    tk_store(k, tk_narrow(k, O, 0, a->row0, own(a, ROWS)), at, v);
}

/* The block's partial sums of the loss and of the rows counted, at its
 * index (split 0: its 16 rows', those past R ignored; split 1: its row's). */
static void write_partials(xent *a, tk_value *const part[2], tk_value *loss) {
    tk_kernel *k = a->k;
    tk_value *cnt = tk_select(k, tk_eq(k, a->tgt, f32c(k, -1.0f)), f32c(k, 0.0f), f32c(k, 1.0f));
    if (!a->split) loss = rows_total(k, loss), cnt = rows_total(k, cnt);
    tk_value *b = tk_block_id_i64(k, 0);
    store_one(a, part[0], b, loss);
    store_one(a, part[1], b, cnt);
}

/* loss = (m - x_t) + log s rather than lse - x_t: m - x_t is exact where
 * x_t is near the max (Sterbenz), so the loss keeps f32's precision at
 * logits of 1e4, where lse alone is rounded to 1e-3. */
static void write_stats(xent *a, tk_value *const st[3], tk_value *const out[4]) {
    tk_kernel *k = a->k;
    tk_value *ls = tk_log(k, st[1]), *lse = tk_add(k, st[0], ls);
    tk_value *loss = tk_add(k, tk_sub(k, st[0], st[2]), ls);
    loss = tk_select(k, tk_eq(k, a->tgt, f32c(k, -2.0f)), f32c(k, NAN), loss);
    loss = tk_select(k, tk_eq(k, a->tgt, f32c(k, -1.0f)), f32c(k, 0.0f), loss);
    store_rows(a, out[0], loss); /* rows past R are not written */
    if (out[1]) store_rows(a, out[1], lse);
    if (out[2]) write_partials(a, out + 2, loss);
}

/* dX of the round, over x in the stages, then out: with q = scale / s,
 * e·q - [j = t]·scale, e = exp(x - m). Not exp(x - lse): x - m is exact
 * near the max (Sterbenz), x - lse carries lse's rounding (5e-4 relative
 * at logits of 1e4). */
static void grad_round(xent *a, tk_value *rc, tk_value *m, tk_value *q) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *g = tk_mul(k, tk_exp(k, tk_sub(k, mine(a, u), m)), q);
        put(a, u, tk_select(k, is_target(a, rc, u), tk_sub(k, g, a->sc), g));
    }
    tk_barrier(k);
    move_round(a, a->half, a->r, false);
}

/* ---- the row kernel ------------------------------------------------------------ */
/* The grid and the block's places; rounds: ceil(V / cols), split: the
 * segments' rounds and one for the tail when there is one. */
static void geometry(xent *a) {
    tk_kernel *k = a->k;
    tk_value *cw = i64c(k, (int64_t)SUB * a->W * a->U);
    a->R = tk_dim(k, a->X, 0);
    a->row0 = tk_block_id_i64(k, 0);
    if (a->split) {
        tk_set_grid(k, a->R, NULL, NULL);
        a->lim = tk_dim(k, a->X, 2), a->tn = tk_dim(k, a->Xt, 2);
        a->nm = tk_ceil_div(k, a->lim, cw);
        a->nr = tk_add(k, a->nm, tk_select(k, tk_gt(k, a->tn, i64c(k, 0)), i64c(k, 1), i64c(k, 0)));
    } else {
        tk_set_grid(k, tk_ceil_div(k, a->R, i64c(k, ROWS)), NULL, NULL);
        a->row0 = tk_mul(k, a->row0, i64c(k, ROWS));
        a->lim = tk_dim(k, a->X, 1);
        a->nr = tk_ceil_div(k, a->lim, cw);
    }
    a->wid = tk_warp_id_i64(k);
}

/* V: split 16·Ls + Tn. */
static tk_value *vocab(xent *a) {
    if (!a->split) return a->lim;
    return tk_add(a->k, tk_mul(a->k, a->lim, i64c(a->k, ROWS)), a->tn);
}

static void build_rows(xent *a) {
    tk_kernel *k = a->k;
    const tk_xent_config *c = a->c;
    tk_dtype dt = c->dtype;
    int rank = a->split ? 3 : 2;
    a->X = tk_param_tensor(k, a->split ? "Xs" : "X", dt, rank);
    a->Xt = a->split ? tk_param_tensor(k, "Xt", dt, 3) : NULL;
    tk_value *T = tk_param_tensor(k, "T", TK_I32, 1);
    tk_value *S = c->per_row_scale ? tk_param_tensor(k, "S", TK_F32, 1) : NULL;
    if (c->backward) {
        a->dX = tk_param_tensor(k, a->split ? "dXs" : "dX", dt, rank);
        a->dXt = a->split ? tk_param_tensor(k, "dXt", dt, 3) : NULL;
    }
    tk_value *out[4] = {tk_param_tensor(k, "Loss", TK_F32, 1), NULL, NULL, NULL};
    out[1] = c->lse ? tk_param_tensor(k, "Lse", TK_F32, 1) : NULL;
    out[2] = c->mean ? tk_param_tensor(k, "PL", TK_F32, 1) : NULL;
    out[3] = c->mean ? tk_param_tensor(k, "PC", TK_F32, 1) : NULL;
    tk_value *ign = tk_param_scalar(k, "ignore_index", TK_I32);
    tk_value *scale = c->backward && !c->per_row_scale ? tk_param_scalar(k, "scale", TK_F32) : NULL;
    a->ring = tk_shared(k, dt, ROWS, SUB * a->W, TK_SMEM_SWIZZLE, 2 * a->U);
    a->xch = a->W > 1 ? tk_shared(k, TK_F32, ROWS, 16, TK_SMEM_PLAIN, a->W) : NULL;
    geometry(a);
    a->icol = tk_iota(k, tk_tile_type(TK_F32, ROWS, SUB, TK_WARP, TK_ROW), TK_PER_COL);
    a->irow = a->split ? tk_iota(k, rowv_t(), TK_PER_ROW) : NULL;
    tk_value *zero = i64c(k, 0);
    move_round(a, zero, zero, true); /* round 0, before the targets' loads */
    tk_async_commit(k);
    a->tgt = target_codes(a, T, vocab(a), ign);

    tk_value *init[3] = {tk_fill(k, rowv_t(), f32c(k, -FLT_MAX)), tk_zeros(k, rowv_t()),
                         tk_fill(k, rowv_t(), f32c(k, -INFINITY))};
    tk_value *cur[3], *st[3];
    tk_value *rc = rounds_begin(a, 3, init, cur);
    tk_value *next[3] = {cur[0], cur[1], cur[2]};
    stats_round(a, rc, next);
    rounds_end(a, 3, next, st);
    xch_put(a, st);
    /* the forward alone: warp 0 combines and writes, the others are done */
    if (!c->backward) tk_if_begin(k, tk_eq(k, a->wid, i64c(k, 0)));
    block_stats(a, st);
    if (a->split) split_stats(a, st);
    write_stats(a, st, out);
    if (!c->backward) {
        tk_if_end(k, 0, NULL, NULL);
        return;
    }

    /* pass 2: one round is still in the stages; more come again */
    a->sc = grad_scale(a, S, scale);
    tk_value *q = tk_div(k, a->sc, st[1]);
    tk_if_begin(k, tk_gt(k, a->nr, i64c(k, 1)));
    move_round(a, zero, zero, true);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    rc = rounds_begin(a, 0, NULL, NULL);
    grad_round(a, rc, st[0], q);
    rounds_end(a, 0, NULL, NULL);
}

/* ---- the mean ---------------------------------------------------------------
 * Out = Σ PL / Σ PC over the row kernel's P partials (one a block: N/16
 * for 16-row blocks, N for split rows): each warp adds chunks of MCH into
 * per-lane vectors, two chunks a trip so that their loads are in flight
 * together (a trip costs one memory latency), then the lanes' and the
 * warps' totals are added in a fixed order. One block: P is at most a
 * batch's tokens (16 K at GPT-2's 16 x 1024: 32 trips of 8 warps). */
#define MCH 32

static void build_mean(xent *a) {
    tk_kernel *k = a->k;
    tk_value *O[2] = {tk_param_tensor(k, "PL", TK_F32, 1), tk_param_tensor(k, "PC", TK_F32, 1)};
    tk_value *Out = tk_param_tensor(k, "Out", TK_F32, 1);
    tk_value *xch = a->W > 1 ? tk_shared(k, TK_F32, ROWS, 32, TK_SMEM_PLAIN, a->W) : NULL;
    tk_set_grid(k, NULL, NULL, NULL);
    tk_value *wid = tk_warp_id_i64(k), *N = tk_dim(k, O[0], 0);
    tk_type vt = tk_vec_type(TK_F32, MCH, TK_PER_COL, TK_WARP, TK_ROW);
    int64_t trip = 2 * (int64_t)a->W * MCH;
    tk_value *init[2] = {tk_zeros(k, vt), tk_zeros(k, vt)}, *cur[2], *next[2], *tot[2];
    tk_value *t =
        tk_for_begin(k, i64c(k, 0), tk_ceil_div(k, N, i64c(k, trip)), i64c(k, 1), 2, init, cur);
    tk_value *q0 = tk_add(k, tk_mul(k, t, i64c(k, trip)), tk_mul(k, wid, i64c(k, MCH)));
    tk_value *q[2] = {q0, tk_add(k, q0, i64c(k, (int64_t)a->W * MCH))};
    for (int i = 0; i < 2; i++) {
        tk_value *i0[1] = {q[0]}, *i1[1] = {q[1]};
        tk_value *v0 = tk_load(k, vt, O[i], i0, 0.0f), *v1 = tk_load(k, vt, O[i], i1, 0.0f);
        next[i] = tk_add(k, cur[i], tk_add(k, v0, v1));
    }
    tk_for_end(k, 2, next, tot);
    tk_type tt = tk_tile_type(TK_F32, ROWS, MCH, TK_WARP, TK_ROW);
    for (int i = 0; i < 2; i++) tot[i] = tk_row_sum(k, tk_add(k, tk_zeros(k, tt), tot[i]));
    if (xch) { /* the warps' totals, added in warp order */
        tk_value *zero = tk_zeros(k, xch_t());
        for (int i = 0; i < 2; i++) {
            tk_value *at[2] = {i64c(k, 0), i64c(k, 16 * i)};
            tk_store(k, tk_stage(k, xch, wid), at, tk_add(k, zero, tot[i]));
        }
        tk_barrier(k);
        for (int i = 0; i < 2; i++) {
            tk_value *at[2] = {i64c(k, 0), i64c(k, 16 * i)};
            for (int j = 0; j < a->W; j++) {
                tk_value *v =
                    tk_row_max(k, tk_load(k, xch_t(), tk_stage(k, xch, i64c(k, j)), at, 0.0f));
                tot[i] = j ? tk_add(k, tot[i], v) : v;
            }
        }
    }
    tk_if_begin(k, tk_eq(k, wid, i64c(k, 0)));
    tk_value *at[1] = {i64c(k, 0)};
    tk_store(k, Out, at, tk_div(k, tot[0], tot[1])); /* one element: the rest is past Out */
    tk_if_end(k, 0, NULL, NULL);
}

/* ---- configs ----------------------------------------------------------------- */
static int warps_of(const tk_xent_config *c) {
    if (c->warps) return c->warps;
    return c->part == TK_XENT_MEAN ? TK_XENT_MEAN_WARPS : TK_XENT_WARPS;
}

static int slots_of(const tk_xent_config *c) {
    return c->cols ? c->cols / (SUB * warps_of(c)) : TK_XENT_SLOTS;
}

static tk_status bad(tk_ctx *ctx, const char *fn, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; expected %s", fn, what, v,
                            want);
}

static tk_status check_shape(tk_ctx *ctx, const char *fn, const tk_xent_config *c) {
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        return bad(ctx, fn, "warps", w, "0 (the default), 1, 2, 4, 8 or 16");
    if (c->part == TK_XENT_MEAN) return TK_OK;
    int span = SUB * warps_of(c), cols = span * slots_of(c);
    if (c->cols < 0 || c->cols % span || c->cols / span > MAX_U)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: cols is %d; expected 0 (the default) or a multiple of %d (%d "
                                "columns x %d warps) up to %d",
                                fn, c->cols, span, SUB, warps_of(c), span * MAX_U);
    if (c->split && cols < TAIL)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: cols is %d (with warps %d); split rows need rounds of at "
                                "least %d columns (the tail's round)",
                                fn, cols, warps_of(c), TAIL);
    return TK_OK;
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_xent_config *c) {
    if (c->part != TK_XENT_ROWS && c->part != TK_XENT_MEAN)
        return bad(ctx, fn, "part", c->part, "TK_XENT_ROWS or TK_XENT_MEAN");
    if (c->part == TK_XENT_MEAN) return check_shape(ctx, fn, c);
    if (c->dtype != TK_BF16 && c->dtype != TK_F16 && c->dtype != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16, TK_F16 or TK_F32", fn,
                                tk_dtype_name(c->dtype));
    const int *flags[5] = {&c->backward, &c->per_row_scale, &c->lse, &c->mean, &c->split};
    static const char *names[5] = {"backward", "per_row_scale", "lse", "mean", "split"};
    for (int i = 0; i < 5; i++)
        if (*flags[i] != 0 && *flags[i] != 1) return bad(ctx, fn, names[i], *flags[i], "0 or 1");
    if (c->per_row_scale && !c->backward)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: per_row_scale is 1 with backward 0; the scale is the "
                                "gradient's",
                                fn);
    return check_shape(ctx, fn, c);
}

static void kernel_name(const tk_xent_config *c, char *name, size_t n) {
    if (c->part == TK_XENT_MEAN) {
        snprintf(name, n, "tk_xent_mean_w%d", warps_of(c));
        return;
    }
    snprintf(name, n, "tk_xent_%s%s%s%s%s%s_w%d_c%d", tk_dtype_name(c->dtype),
             c->backward ? "_bwd" : "", c->per_row_scale ? "_rowscale" : "", c->lse ? "_lse" : "",
             c->mean ? "_cnt" : "", c->split ? "_split" : "", warps_of(c),
             SUB * warps_of(c) * slots_of(c));
}

tk_status tk_xent_build(tk_ctx *ctx, const tk_xent_config *cfg, tk_kernel **out) {
    const char *fn = "tk_xent_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    char name[96];
    kernel_name(cfg, name, sizeof name);
    bool mean = cfg->part == TK_XENT_MEAN;
    xent a = {.c = cfg, .split = cfg->split && !mean, .W = warps_of(cfg)};
    a.U = mean ? 1 : slots_of(cfg);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, a.W, &k))) return s;
    a.k = k;
    /* Occupancy hides the copies' latency, as in the norm kernels (round
     * 18: the forward's 64 registers gave 4 blocks of 8 warps an SM); f32
     * tiles spilled 16-28 bytes at 64, none at 72 (3 blocks). Split rows
     * hold both views' copy addresses and the tail's round: 64 spilled
     * 36-100 bytes; at 96, 2 blocks of 8 warps an SM, whose rows in flight
     * (2 x 132 x 98 KiB at 50257 bf16) stay within L2. Not measured. */
    if (!mean) tk_kernel_set_maxnreg(k, a.split ? 96 : cfg->dtype == TK_F32 ? 72 : 64);
    if (mean)
        build_mean(&a);
    else
        build_rows(&a);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
