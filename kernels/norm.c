/* LayerNorm and RMSNorm, fused with the residual add: forward, backward and
 * the backward's reduction of the weight and bias gradients. The contract
 * (parameters in order, grids) is in tk/tk_kernels.h ("Normalization").
 *
 * A block owns 16 rows (one tile's) and its W warps split the columns. The
 * rows arrive in rounds of `cols` columns: U slots of SUB·W columns, each
 * copied by the whole block into a shared stage with cp.async (16-byte
 * copies, zero fill past the edges: no masked per-element loads, whose
 * addresses cost a register each), round r + 1 while round r is read; warp
 * w reads its SUB columns of every slot with ldmatrix, and what it writes
 * (h, y, dx) goes back through its slot and out in 16-byte copies. The
 * rows' sums are combined across the warps through shared memory. A row
 * of one round stays in shared memory between the statistics and the
 * output (read once); longer rows are read again for the output, from L2
 * at the widths measured. (The first version, 16 rows a warp with direct
 * loads, one warp a row, 64 rows a block, reached 6-31% of the copy line:
 * bench/RESULTS.md 2026-12-04.)
 *
 * LayerNorm's variance is accumulated about a pivot K, each row's mean over
 * its first SUB columns: var = avg((h-K)²) - avg(h-K)², which cancels
 * little as K is near the mean (a sample of the row is), and the warps'
 * partial sums then combine by plain addition, in warp order.
 *
 * The weight and bias gradients sum over every row. Each block writes its
 * 16 rows' column sums as one partial row (P = ceil(R / 16) of them) and a
 * second kernel sums the partials in a fixed order: deterministic, no
 * atomics. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "tk/tk_kernels.h"

#define ROWS  16 /* a block's rows                  */
#define SUB   32 /* a warp's columns of a slot      */
#define MAX_U 8  /* slots a round                   */
#define CW    32 /* the reduction's columns a block */
#define RW    8  /* the reduction's warps           */

typedef struct nrm {
    tk_kernel *k;
    const tk_norm_config *c;
    bool layer;
    int W, U;               /* warps, slots a round                          */
    tk_value *R, *C, *row0; /* rows, columns, the block's first row          */
    tk_value *wid, *pw;     /* the warp (i64), the block's partial row       */
    tk_value *nr;           /* rounds: ceil(C / cols)                        */
    tk_value *half;         /* the stage of the current round's slot 0       */
    tk_value *sums[2];      /* shared: the warps' two row sums (W stages)    */
} nrm;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

/* TK_NORM_L2, an A/B switch (docs/PERF_NOTES.md, round 28): 1 streams the
 * tensors each call touches once (evict first), 2 also keeps those read
 * twice (evict last); unset or 0: every tensor normal. */
static int l2_mode(void) {
    const char *env = getenv("TK_NORM_L2");
    return env && (env[0] == '1' || env[0] == '2') && !env[1] ? env[0] - '0' : 0;
}

static void stream(tk_kernel *k, tk_value *t) {
    if (t) tk_param_set_cache(k, t, TK_CACHE_STREAM);
}

static tk_type tile_t(tk_dtype dt) { return tk_tile_type(dt, ROWS, SUB, TK_WARP, TK_ROW); }
static tk_type rowv_t(void) { return tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW); }

/* Two rounds of U stages of a slot's [16, SUB·W] tile of the dtype: one
 * read while the next arrives. */
static tk_value *ring(nrm *a) {
    return tk_shared(a->k, a->c->dtype, ROWS, SUB * a->W, TK_SMEM_SWIZZLE, 2 * a->U);
}

/* The grid (a block per row group) and the block's places, from the first
 * tensor parameter T; the warps' shared sums. */
static void geometry(nrm *a, tk_value *T) {
    tk_kernel *k = a->k;
    a->R = tk_dim(k, T, 0), a->C = tk_dim(k, T, 1);
    tk_set_grid(k, tk_ceil_div(k, a->R, i64c(k, ROWS)), NULL, NULL);
    a->pw = tk_block_id_i64(k, 0);
    a->row0 = tk_mul(k, a->pw, i64c(k, ROWS));
    a->wid = tk_warp_id_i64(k);
    a->nr = tk_ceil_div(k, a->C, i64c(k, (int64_t)SUB * a->W * a->U));
    for (int i = 0; i < 2; i++)
        a->sums[i] = a->W > 1 ? tk_shared(k, TK_F32, ROWS, 16, TK_SMEM_PLAIN, a->W) : NULL;
}

/* Slot u of the current round (a->half) or of round r's half. */
static tk_value *half_of(nrm *a, tk_value *r) {
    tk_kernel *k = a->k;
    return tk_mul(k, tk_rem(k, r, i64c(k, 2)), i64c(k, a->U));
}

static tk_value *stage_in(nrm *a, tk_value *sh, tk_value *half, int u) {
    return tk_stage(a->k, sh, tk_add(a->k, half, i64c(a->k, u)));
}

static tk_value *slot_stage(nrm *a, tk_value *sh, int u) { return stage_in(a, sh, a->half, u); }

/* The first column of slot u of round r. */
static tk_value *slot_c0(nrm *a, tk_value *r, int u) {
    tk_kernel *k = a->k;
    return tk_mul(k, tk_add(k, tk_mul(k, r, i64c(k, a->U)), i64c(k, u)),
                  i64c(k, (int64_t)SUB * a->W));
}

/* This warp's first column in slot u of round r. */
static tk_value *warp_c0(nrm *a, tk_value *r, int u) {
    return tk_add(a->k, slot_c0(a, r, u), tk_mul(a->k, a->wid, i64c(a->k, SUB)));
}

/* Round r of T into its half of sh's stages (the whole block). */
static void copy_round(nrm *a, tk_value *sh, tk_value *T, tk_value *r) {
    tk_value *half = half_of(a, r);
    for (int u = 0; u < a->U; u++) {
        tk_value *idx[2] = {a->row0, slot_c0(a, r, u)};
        tk_copy_to_shared(a->k, stage_in(a, sh, half, u), T, idx, 0.0f, TK_COPY_ASYNC);
    }
}

/* This warp's [16, 64] tile of slot u (of the dtype). */
static tk_value *mine(nrm *a, tk_value *sh, int u) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    return tk_load(a->k, tile_t(a->c->dtype), slot_stage(a, sh, u), at, 0.0f);
}

/* Round r of sh's stages out to T, once every warp has put its columns
 * there (16-byte stores, clipped at T's edges: no masked register path). */
static void store_round(nrm *a, tk_value *sh, tk_value *T, tk_value *r) {
    tk_barrier(a->k);
    for (int u = 0; u < a->U; u++) {
        tk_value *idx[2] = {a->row0, slot_c0(a, r, u)};
        tk_copy_to_global(a->k, T, idx, slot_stage(a, sh, u));
    }
}

/* This warp's columns of slot u := t. */
static void put(nrm *a, tk_value *sh, int u, tk_value *t) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    tk_store(a->k, slot_stage(a, sh, u), at, t);
}

/* Waits for the copies and makes them visible to every warp. */
static void arrive(nrm *a) {
    tk_async_wait(a->k, 0);
    tk_barrier(a->k);
}

/* W or B's SUB columns at c0 in f32, broadcast down the rows (NULL: none). */
static tk_value *load_vec(nrm *a, tk_value *V, tk_value *c0) {
    if (!V) return NULL;
    tk_value *ic[1] = {c0};
    tk_type vt = tk_vec_type(a->c->dtype, SUB, TK_PER_COL, TK_WARP, TK_ROW);
    return f32(a->k, tk_load(a->k, vt, V, ic, 0.0f));
}

/* Sums s[0], s[1] of every warp of the block, added in warp order: each
 * warp's vectors go down the columns of its stage (a row max reads them
 * back exactly). Every warp gets the totals. */
static void block_sums(nrm *a, tk_value *s[2]) {
    if (a->W == 1) return;
    tk_kernel *k = a->k;
    tk_type t = tk_tile_type(TK_F32, ROWS, 16, TK_WARP, TK_ROW);
    tk_value *zero = tk_zeros(k, t), *at[2] = {i64c(k, 0), i64c(k, 0)};
    for (int i = 0; i < 2; i++)
        tk_store(k, tk_stage(k, a->sums[i], a->wid), at, tk_add(k, zero, s[i]));
    tk_barrier(k);
    for (int i = 0; i < 2; i++) {
        s[i] = NULL;
        for (int w = 0; w < a->W; w++) {
            tk_value *st = tk_stage(k, a->sums[i], i64c(k, w));
            tk_value *v = tk_row_max(k, tk_load(k, t, st, at, 0.0f));
            s[i] = s[i] ? tk_add(k, s[i], v) : v;
        }
    }
}

/* xhat = (h - mean)·rstd (RMSNorm: h·rstd). */
static tk_value *normalized(nrm *a, tk_value *h, tk_value *mean, tk_value *rstd) {
    return tk_mul(a->k, a->layer ? tk_sub(a->k, h, mean) : h, rstd);
}

/* The tensors a pass copies in, round by round (NULL ends). */
typedef struct ins {
    tk_value *sh[3], *T[3];
} ins;

static void copy_all(nrm *a, const ins *in, tk_value *r) {
    for (int i = 0; i < 3 && in->sh[i]; i++) copy_round(a, in->sh[i], in->T[i], r);
}

/* Opens the loop over rounds: round r + 1 is copied in while round r,
 * arrived, is read (a group committed each trip, empty past the last
 * round; the prologue copied round 0). */
static tk_value *rounds_begin(nrm *a, int n, tk_value *const *init, tk_value **cur, const ins *in) {
    tk_kernel *k = a->k;
    tk_value *r = tk_for_begin(k, i64c(k, 0), a->nr, i64c(k, 1), n, init, cur);
    tk_value *r1 = tk_add(k, r, i64c(k, 1));
    tk_if_begin(k, tk_lt(k, r1, a->nr));
    copy_all(a, in, r1);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, 1);
    tk_barrier(k);
    a->half = half_of(a, r);
    return r;
}

/* Closes it: every warp is done with round r's half before round r + 2
 * is copied there. */
static void rounds_end(nrm *a, int n, tk_value *const *next, tk_value **results) {
    tk_barrier(a->k);
    tk_for_end(a->k, n, next, results);
    a->half = i64c(a->k, 0);
}

/* ---- the forward ----------------------------------------------------------
 * h = x (+ residual, rounded to the dtype as H stores it, so the statistics
 * are those of what the backward reads), written to H and kept in sA. */
typedef struct fwd {
    tk_value *X, *Res, *W, *B, *H, *Y, *K; /* K: LayerNorm's pivot */
    tk_value *sA, *sB;                     /* x then h; the residual */
} fwd;

static tk_value *fwd_h(nrm *a, const fwd *f, int u) {
    tk_kernel *k = a->k;
    tk_value *x = mine(a, f->sA, u);
    if (!f->Res) return x;
    tk_value *h = tk_cvt(k, tk_add(k, f32(k, x), f32(k, mine(a, f->sB, u))), a->c->dtype);
    put(a, f->sA, u, h); /* H leaves from there (fwd_acc's caller) */
    return h;
}

/* The pivot: each row's mean of h over its first SUB columns (round 0's
 * slot 0, warp 0's columns; every warp reads them). */
static tk_value *pivot(nrm *a, const fwd *f) {
    tk_kernel *k = a->k;
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_value *st = slot_stage(a, f->sA, 0);
    tk_value *h = f32(k, tk_load(k, tile_t(a->c->dtype), st, at, 0.0f));
    if (f->Res) {
        tk_value *rs = tk_load(k, tile_t(a->c->dtype), slot_stage(a, f->sB, 0), at, 0.0f);
        h = f32(k, tk_cvt(k, tk_add(k, h, f32(k, rs)), a->c->dtype));
    }
    return tk_div(k, tk_row_sum(k, h), f32(k, tk_min(k, a->C, i64c(k, SUB))));
}

/* acc[0] += Σ (h-K), acc[1] += Σ (h-K)² over the round (RMSNorm: acc[1] +=
 * Σ h²; past C h is 0). */
static void fwd_acc(nrm *a, const fwd *f, tk_value *r, tk_value *acc[2]) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *h = f32(k, fwd_h(a, f, u));
        if (a->layer) {
            tk_value *d =
                tk_mask(k, tk_sub(k, h, f->K), TK_MASK_COLS, warp_c0(a, r, u), a->C, 0.0f);
            acc[0] = tk_add(k, acc[0], tk_row_sum(k, d));
            acc[1] = tk_add(k, acc[1], tk_row_sum(k, tk_mul(k, d, d)));
        } else {
            acc[1] = tk_add(k, acc[1], tk_row_sum(k, tk_mul(k, h, h)));
        }
    }
}

/* Y of the round from h in sA, written over it, then out. */
static void fwd_out(nrm *a, const fwd *f, tk_value *r, tk_value *mean, tk_value *rstd) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *c0 = warp_c0(a, r, u);
        tk_value *y = normalized(a, f32(k, mine(a, f->sA, u)), mean, rstd);
        if (f->W) y = tk_mul(k, y, load_vec(a, f->W, c0));
        if (f->B) y = tk_add(k, y, load_vec(a, f->B, c0));
        put(a, f->sA, u, tk_cvt(k, y, a->c->dtype));
    }
    store_round(a, f->sA, f->Y, r);
}

static void build_fwd(nrm *a) {
    tk_kernel *k = a->k;
    const tk_norm_config *c = a->c;
    tk_dtype dt = c->dtype;
    fwd f = {0};
    f.X = tk_param_tensor(k, "X", dt, 2);
    f.Res = c->residual ? tk_param_tensor(k, "Res", dt, 2) : NULL;
    f.W = c->weight ? tk_param_tensor(k, "W", dt, 1) : NULL;
    f.B = c->bias ? tk_param_tensor(k, "B", dt, 1) : NULL;
    f.H = c->residual ? tk_param_tensor(k, "H", dt, 2) : NULL;
    f.Y = tk_param_tensor(k, "Y", dt, 2);
    tk_value *Mean = a->layer && c->stats ? tk_param_tensor(k, "Mean", TK_F32, 1) : NULL;
    tk_value *Rstd = c->stats ? tk_param_tensor(k, "Rstd", TK_F32, 1) : NULL;
    tk_value *eps = tk_param_scalar(k, "eps", TK_F32);
    int l2 = l2_mode();
    if (l2) { /* x, the residual and y once; h is read again (round 28). x's and
               * the residual's loads are cp.async, which takes no hint (ops/nv/copy.c) */
        stream(k, f.X), stream(k, f.Res), stream(k, f.Y);
        if (l2 == 2 && f.H) tk_param_set_cache(k, f.H, TK_CACHE_KEEP);
    }
    f.sA = ring(a);
    f.sB = f.Res ? ring(a) : NULL;
    geometry(a, f.X);

    ins in = {{f.sA, f.sB}, {f.X, f.Res}};
    a->half = i64c(k, 0);
    copy_all(a, &in, i64c(k, 0));
    tk_async_commit(k);
    arrive(a);
    f.K = a->layer ? pivot(a, &f) : NULL;
    tk_value *init[2] = {tk_zeros(k, rowv_t()), tk_zeros(k, rowv_t())}, *cur[2], *acc[2];
    tk_value *r = rounds_begin(a, 2, init, cur, &in);
    tk_value *next[2] = {cur[0], cur[1]};
    fwd_acc(a, &f, r, next);
    if (f.H) store_round(a, f.sA, f.H, r);
    rounds_end(a, 2, next, acc);

    block_sums(a, acc);
    tk_value *inv_c = tk_div(k, tk_const_f32(k, 1.0f), f32(k, a->C));
    tk_value *mean = NULL, *var = tk_mul(k, acc[1], inv_c);
    if (a->layer) {
        tk_value *d = tk_mul(k, acc[0], inv_c); /* mean - K */
        mean = tk_add(k, f.K, d);
        var = tk_max(k, tk_sub(k, var, tk_mul(k, d, d)), tk_const_f32(k, 0.0f));
    }
    tk_value *rstd = tk_rsqrt(k, tk_add(k, var, eps));
    if (Rstd) {
        tk_if_begin(k, tk_eq(k, a->wid, i64c(k, 0))); /* rows past R are not written */
        tk_value *ir[1] = {a->row0};
        if (Mean) tk_store(k, Mean, ir, mean);
        tk_store(k, Rstd, ir, rstd);
        tk_if_end(k, 0, NULL, NULL);
    }
    /* pass 2: one round is still in sA (as h); more come again, as stored */
    ins in2 = {{f.sA}, {f.H ? f.H : f.X}};
    tk_if_begin(k, tk_gt(k, a->nr, i64c(k, 1)));
    copy_all(a, &in2, i64c(k, 0));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    r = rounds_begin(a, 0, NULL, NULL, &in2);
    fwd_out(a, &f, r, mean, rstd);
    rounds_end(a, 0, NULL, NULL);
}

/* ---- the backward ---------------------------------------------------------
 * With g = dY·W and xhat as above, per row:
 *   LayerNorm  dx = rstd·(g - mean(g) - xhat·mean(g·xhat))
 *   RMSNorm    dx = rstd·(g - xhat·mean(g·xhat))
 * plus dH (the residual stream's own gradient) when fused; the block's
 * column sums of dY·xhat and dY into its partial rows of dWp and dBp. */
typedef struct bwd {
    tk_value *H, *dY, *dH, *W, *dX, *dWp, *dBp, *mean, *rstd;
    tk_value *sA, *sB, *sC; /* h, dy, dh */
} bwd;

/* acc[0] += Σ g, acc[1] += Σ g·xhat (past C, dY and so g are 0). */
static void bwd_acc(nrm *a, const bwd *b, tk_value *r, tk_value *acc[2]) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *xh = normalized(a, f32(k, mine(a, b->sA, u)), b->mean, b->rstd);
        tk_value *g = f32(k, mine(a, b->sB, u));
        if (b->W) g = tk_mul(k, g, load_vec(a, b->W, warp_c0(a, r, u)));
        acc[0] = tk_add(k, acc[0], tk_row_sum(k, g));
        acc[1] = tk_add(k, acc[1], tk_row_sum(k, tk_mul(k, g, xh)));
    }
}

/* dX and the partials of the round (mg = mean(g), mgx = mean(g·xhat)). */
static void bwd_out(nrm *a, const bwd *b, tk_value *r, tk_value *mg, tk_value *mgx) {
    tk_kernel *k = a->k;
    for (int u = 0; u < a->U; u++) {
        tk_value *c0 = warp_c0(a, r, u);
        tk_value *xh = normalized(a, f32(k, mine(a, b->sA, u)), b->mean, b->rstd);
        tk_value *dy = f32(k, mine(a, b->sB, u)),
                 *g = b->W ? tk_mul(k, dy, load_vec(a, b->W, c0)) : dy;
        tk_value *t = tk_sub(k, g, tk_mul(k, xh, mgx));
        if (a->layer) t = tk_sub(k, t, mg);
        tk_value *dx = tk_mul(k, t, b->rstd);
        if (b->sC) dx = tk_add(k, dx, f32(k, mine(a, b->sC, u)));
        put(a, b->sA, u, tk_cvt(k, dx, a->c->dtype)); /* over this warp's h */
        tk_value *ip[2] = {a->pw, c0};
        /* rows past R read dY = 0: they add nothing */
        if (b->dWp) tk_store(k, b->dWp, ip, tk_col_sum(k, tk_mul(k, dy, xh)));
        if (b->dBp) tk_store(k, b->dBp, ip, tk_col_sum(k, dy));
    }
    store_round(a, b->sA, b->dX, r);
}

static void build_bwd(nrm *a) {
    tk_kernel *k = a->k;
    const tk_norm_config *c = a->c;
    tk_dtype dt = c->dtype;
    bwd b = {0};
    b.H = tk_param_tensor(k, "H", dt, 2);
    b.dY = tk_param_tensor(k, "dY", dt, 2);
    b.dH = c->residual ? tk_param_tensor(k, "dH", dt, 2) : NULL;
    b.W = c->weight ? tk_param_tensor(k, "W", dt, 1) : NULL;
    tk_value *Mean = a->layer ? tk_param_tensor(k, "Mean", TK_F32, 1) : NULL;
    tk_value *Rstd = tk_param_tensor(k, "Rstd", TK_F32, 1);
    b.dX = tk_param_tensor(k, "dX", dt, 2);
    b.dWp = c->weight ? tk_param_tensor(k, "dWp", TK_F32, 2) : NULL;
    b.dBp = c->bias ? tk_param_tensor(k, "dBp", TK_F32, 2) : NULL;
    int l2 = l2_mode();
    if (l2) { /* dh and dx once; h and dy are read again */
        stream(k, b.dH), stream(k, b.dX);
        if (l2 == 2) {
            tk_param_set_cache(k, b.H, TK_CACHE_KEEP);
            tk_param_set_cache(k, b.dY, TK_CACHE_KEEP);
        }
    }
    b.sA = ring(a), b.sB = ring(a);
    b.sC = b.dH ? ring(a) : NULL;
    geometry(a, b.H);

    /* round 0 of h and dY, and of dH, which only pass 2 reads */
    tk_value *zero = i64c(k, 0);
    ins in = {{b.sA, b.sB}, {b.H, b.dY}}, in_dh = {{b.sC}, {b.dH}};
    a->half = zero;
    copy_all(a, &in, zero);
    tk_async_commit(k);
    copy_all(a, &in_dh, zero);
    tk_async_commit(k);
    tk_value *ir[1] = {a->row0};
    b.mean = Mean ? tk_load(k, rowv_t(), Mean, ir, 0.0f) : NULL;
    b.rstd = tk_load(k, rowv_t(), Rstd, ir, 0.0f);
    tk_value *init[2] = {tk_zeros(k, rowv_t()), tk_zeros(k, rowv_t())}, *cur[2], *acc[2];
    tk_value *r = rounds_begin(a, 2, init, cur, &in);
    tk_value *next[2] = {cur[0], cur[1]};
    bwd_acc(a, &b, r, next);
    rounds_end(a, 2, next, acc);

    block_sums(a, acc);
    tk_value *inv_c = tk_div(k, tk_const_f32(k, 1.0f), f32(k, a->C));
    tk_value *mg = tk_mul(k, acc[0], inv_c), *mgx = tk_mul(k, acc[1], inv_c);
    /* pass 2: one round is still in the stages (dH's round 0 came with
     * it); more come again, with dH */
    ins in2 = {{b.sA, b.sB, b.sC}, {b.H, b.dY, b.dH}};
    tk_if_begin(k, tk_gt(k, a->nr, i64c(k, 1)));
    copy_all(a, &in, zero);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    r = rounds_begin(a, 0, NULL, NULL, &in2);
    bwd_out(a, &b, r, mg, mgx);
    rounds_end(a, 0, NULL, NULL);
}

/* Out[c] = Σ_p Part[p, c] for a block's CW columns: warp w sums the tiles
 * of 16 partial rows w, w + RW, w + 2·RW, ... in order, then warp 0 adds
 * the warps' sums in warp order (through shared memory; a column max of a
 * tile whose rows all hold the sum reads it back exactly). The order is
 * fixed by P alone: the same bits every run. One warp walking all P / 16
 * tiles waited out a load's latency per tile (P = 1024 at 16384 rows). */
static void build_reduce(nrm *a, tk_dtype out) {
    tk_kernel *k = a->k;
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *Out = tk_param_tensor(k, "Out", out, 1);
    tk_value *P = tk_dim(k, Part, 0), *C = tk_dim(k, Part, 1);
    tk_value *sh = tk_shared(k, TK_F32, ROWS, CW, TK_SMEM_PLAIN, RW);
    tk_set_grid(k, tk_ceil_div(k, C, i64c(k, CW)), NULL, NULL);
    tk_value *c0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, CW)), *wid = tk_warp_id_i64(k);
    tk_type vt = tk_vec_type(TK_F32, CW, TK_PER_COL, TK_WARP, TK_ROW);
    tk_type t = tk_tile_type(TK_F32, ROWS, CW, TK_WARP, TK_ROW);
    tk_value *trips = tk_ceil_div(k, P, i64c(k, ROWS * RW));
    tk_value *init[1] = {tk_zeros(k, vt)}, *cur[1], *next[1], *fin[1];
    tk_value *j = tk_for_begin(k, i64c(k, 0), trips, i64c(k, 1), 1, init, cur);
    {
        tk_value *tile = tk_add(k, tk_mul(k, j, i64c(k, RW)), wid); /* past P: zeros */
        tk_value *idx[2] = {tk_mul(k, tile, i64c(k, ROWS)), c0};
        next[0] = tk_add(k, cur[0], tk_col_sum(k, tk_load(k, t, Part, idx, 0.0f)));
    }
    tk_for_end(k, 1, next, fin);
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_store(k, tk_stage(k, sh, wid), at, tk_add(k, tk_zeros(k, t), fin[0]));
    tk_barrier(k);
    tk_if_begin(k, tk_eq(k, wid, i64c(k, 0)));
    tk_value *sum = NULL;
    for (int w = 0; w < RW; w++) {
        tk_value *v = tk_col_max(k, tk_load(k, t, tk_stage(k, sh, i64c(k, w)), at, 0.0f));
        sum = sum ? tk_add(k, sum, v) : v;
    }
    tk_value *ic[1] = {c0};
    tk_store(k, Out, ic, out == TK_F32 ? sum : tk_cvt(k, sum, out));
    tk_if_end(k, 0, NULL, NULL);
}

/* Out's dtype of the reduction (0: f32). */
static tk_dtype reduce_dtype(const tk_norm_config *c) { return c->dtype ? c->dtype : TK_F32; }

/* The block's warps and slots a round (0: the defaults). */
static int warps_of(const tk_norm_config *c) { return c->warps ? c->warps : TK_NORM_WARPS; }

static int slots_of(const tk_norm_config *c) {
    return c->cols ? c->cols / (SUB * warps_of(c)) : TK_NORM_SLOTS;
}

static tk_status check_shape(tk_ctx *ctx, const char *fn, const tk_norm_config *c) {
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0 (the default), 1, 2, 4, 8 or 16", fn,
                                w);
    int span = SUB * warps_of(c);
    if (c->cols < 0 || c->cols % span || c->cols / span > MAX_U)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: cols is %d; expected 0 (the default) or a multiple of %d (%d "
                                "columns x %d warps) up to %d",
                                fn, c->cols, span, SUB, warps_of(c), span * MAX_U);
    return TK_OK;
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_norm_config *c) {
    if (c->part == TK_NORM_BWD_REDUCE) {
        tk_dtype o = reduce_dtype(c);
        if (o != TK_F32 && o != TK_BF16 && o != TK_F16)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: dtype is %s; the reduction writes TK_F32, TK_BF16 or "
                                    "TK_F16",
                                    fn, tk_dtype_name(o));
        return TK_OK;
    }
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(c->dtype));
    if (c->kind != TK_NORM_LAYER && c->kind != TK_NORM_RMS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: kind is %d; expected TK_NORM_LAYER or TK_NORM_RMS", fn,
                                c->kind);
    if (c->part < TK_NORM_FWD || c->part > TK_NORM_BWD_REDUCE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: part is %d; expected TK_NORM_FWD, _BWD or _BWD_REDUCE", fn,
                                c->part);
    const int *flags[4] = {&c->residual, &c->weight, &c->bias, &c->stats};
    static const char *names[4] = {"residual", "weight", "bias", "stats"};
    for (int i = 0; i < 4; i++)
        if (*flags[i] != 0 && *flags[i] != 1)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; expected 0 or 1", fn,
                                    names[i], *flags[i]);
    if (c->bias && c->kind == TK_NORM_RMS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: bias is 1 with TK_NORM_RMS, which has no bias", fn);
    return check_shape(ctx, fn, c);
}

static void kernel_name(const tk_norm_config *c, char *name, size_t n) {
    static const char *parts[3] = {"fwd", "bwd", "bwd_reduce"};
    if (c->part == TK_NORM_BWD_REDUCE) {
        snprintf(name, n, "tk_norm_bwd_reduce_%s", tk_dtype_name(reduce_dtype(c)));
        return;
    }
    char shape[32];
    snprintf(shape, sizeof shape, "_w%d_c%d", warps_of(c), SUB * warps_of(c) * slots_of(c));
    snprintf(name, n, "tk_%snorm_%s_%s%s%s%s%s%s", c->kind == TK_NORM_RMS ? "rms" : "layer",
             parts[c->part], tk_dtype_name(c->dtype), c->residual ? "_res" : "",
             c->weight ? "_w" : "", c->bias ? "_b" : "",
             c->part == TK_NORM_FWD && !c->stats ? "_nostats" : "", shape);
}

tk_status tk_norm_build(tk_ctx *ctx, const tk_norm_config *cfg, tk_kernel **out) {
    const char *fn = "tk_norm_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    bool reduce = cfg->part == TK_NORM_BWD_REDUCE;
    char name[96];
    kernel_name(cfg, name, sizeof name);
    nrm a = {.c = cfg, .layer = cfg->kind == TK_NORM_LAYER};
    a.W = reduce ? RW : warps_of(cfg), a.U = reduce ? 1 : slots_of(cfg);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, a.W, &k))) return s;
    a.k = k;
    /* Occupancy is what hides the copies' latency here (ncu, 16384 x 4096
     * forward, 4 warps: 156 registers left 3 blocks an SM, 64% of cycles
     * with no warp eligible). The forward fits 64 (4 bytes of spill at 8
     * warps: 4 blocks an SM); the backward needs 128 not to spill. */
    if (!reduce) tk_kernel_set_maxnreg(k, cfg->part == TK_NORM_FWD ? 64 : 128);
    if (cfg->part == TK_NORM_FWD)
        build_fwd(&a);
    else if (cfg->part == TK_NORM_BWD)
        build_bwd(&a);
    else
        build_reduce(&a, reduce_dtype(cfg));
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
