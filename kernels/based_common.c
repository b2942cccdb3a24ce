

/* What the Based kernels share (kernels/based_parts.h), and tk_based_build.
 *
 * The feature map without data movement: slab j < 16 of φ(x) is the column
 * broadcast x[:, j] times x, over √2. The broadcast is x · sel_jᵀ, an mma
 * with a 16x16 selector whose column j is 1 (each output element is one
 * product x·1 summed with zeros: exact), so no shuffle and no shared-memory
 * round trip; the constant feature (slab 17, column 0) is sel_0 itself.
 *
 * The state's slabs are spread over the warps (slab j: warp j mod W, slot
 * j / W): each warp multiplies only its slabs' φ columns, so the state
 * update costs every warp 1/W of it, and the registers hold 1/W of S. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "based_parts.h"

tk_value *tk_based_i64(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *zero2(tk_kernel *k, tk_value *out[2]) {
    out[0] = out[1] = i64c(k, 0);
    return out[0];
}

void tk_based_init(tk_based_kernel *g, tk_kernel *k, const tk_based_config *c) {
    *g = (tk_based_kernel){.k = k, .c = c, .dt = c->dtype, .W = c->warps, .DVB = c->v_cols};
    g->C = 16 * g->W;
    g->slots = (TK_BASED_SLABS + g->W - 1) / g->W;
}

void tk_based_params(tk_based_kernel *g) {
    tk_kernel *k = g->k;
    g->Q = tk_param_tensor(k, "Q", g->dt, 4);
    g->K = tk_param_tensor(k, "K", g->dt, 4);
    g->V = tk_param_tensor(k, "V", g->dt, 4);
}

static void copy_chunk(tk_based_kernel *g, tk_value *st, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *t0 = tk_mul(k, ch, i64c(k, g->C));
    tk_value *iq[4] = {g->b, g->h, t0, i64c(k, 0)}, *iv[4] = {g->b, g->h, t0, g->v0};
    tk_copy_to_shared(k, tk_stage(k, g->sQ, st), g->Q, iq, 0.0f, TK_COPY_ASYNC);
    tk_copy_to_shared(k, tk_stage(k, g->sK, st), g->K, iq, 0.0f, TK_COPY_ASYNC);
    tk_copy_to_shared(k, tk_stage(k, g->sV, st), g->V, iv, 0.0f, TK_COPY_ASYNC);
    if (g->DO) tk_copy_to_shared(k, tk_stage(k, g->sDO, st), g->DO, iv, 0.0f, TK_COPY_ASYNC);
}

tk_value *tk_based_chunk(tk_based_kernel *g, tk_value *ch) {
    tk_kernel *k = g->k;
    if (!g->c_lo) return g->reverse ? tk_sub(k, tk_sub(k, g->nchunks, i64c(k, 1)), ch) : ch;
    if (!g->reverse) return tk_add(k, g->c_lo, ch);
    return tk_sub(k, tk_add(k, g->c_lo, tk_sub(k, g->trips, i64c(k, 1))), ch);
}

void tk_based_seg_params(tk_based_kernel *g) {
    if (!g->c->seg) return;
    g->St = tk_param_tensor(g->k, "St", TK_F32, 4);
    g->L = tk_param_scalar(g->k, "seg_chunks", TK_I64);
}

/* The state pass's segments whose state another segment reads. */
static tk_value *seg_used(tk_based_kernel *g) {
    tk_kernel *k = g->k;
    if (g->reverse) return tk_gt(k, g->seg, i64c(k, 0));
    return tk_lt(k, g->seg, tk_sub(k, g->nseg, i64c(k, 1)));
}

/* Batch entry, segment and chunk range from block z (= b·NS + s). */
static void seg_ids(tk_based_kernel *g, tk_value *z) {
    tk_kernel *k = g->k;
    g->b = tk_div(k, z, g->nseg);
    g->seg = tk_rem(k, z, g->nseg);
    g->c_lo = tk_mul(k, g->seg, g->L);
    g->trips = tk_min(k, g->L, tk_sub(k, g->nchunks, g->c_lo));
    if (g->c->seg == TK_BASED_SEG_STATE) /* no work where no one reads it */
        g->trips = tk_select(k, seg_used(g), g->trips, i64c(k, 0));
}

static void selectors_to_shared(tk_based_kernel *g);

void tk_based_setup(tk_based_kernel *g) {
    tk_kernel *k = g->k;
    tk_value *B = tk_dim(k, g->Q, 0), *H = tk_dim(k, g->Q, 1), *Dv = tk_dim(k, g->V, 3);
    g->T = tk_dim(k, g->Q, 2);
    if (g->c->seg) {
        g->nchunks = tk_ceil_div(k, g->T, i64c(k, g->C));
        g->nseg = tk_ceil_div(k, g->nchunks, g->L);
        tk_set_grid(k, tk_ceil_div(k, Dv, i64c(k, g->DVB)), H, tk_mul(k, B, g->nseg));
    } else {
        tk_set_grid(k, tk_ceil_div(k, Dv, i64c(k, g->DVB)), H, B);
    }
    g->v0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, g->DVB));
    g->h = tk_block_id_i64(k, 1);
    if (g->c->seg) {
        seg_ids(g, tk_block_id_i64(k, 2));
    } else {
        g->b = tk_block_id_i64(k, 2);
    }
    g->w = tk_warp_id_i64(k);
    g->r0 = tk_mul(k, g->w, i64c(k, 16));
    if (!g->c->seg) g->nchunks = g->trips = tk_ceil_div(k, g->T, i64c(k, g->C));
    tk_value_set_name(g->v0, "v0");
    tk_value_set_name(g->r0, "r0");
    /* the wide tiles first (they want the larger alignment) */
    g->sPhi = tk_shared(k, g->dt, g->C, TK_BASED_PHI, TK_SMEM_SWIZZLE, 1);
    g->sS = tk_shared(k, g->dt, TK_BASED_PHI, g->DVB, TK_SMEM_SWIZZLE, 1);
    g->sV = tk_shared(k, g->dt, g->C, g->DVB, TK_SMEM_SWIZZLE, 2);
    g->sQ = tk_shared(k, g->dt, g->C, TK_BASED_F, TK_SMEM_SWIZZLE, 2);
    g->sK = tk_shared(k, g->dt, g->C, TK_BASED_F, TK_SMEM_SWIZZLE, 2);
    if (g->DO) g->sDO = tk_shared(k, g->dt, g->C, g->DVB, TK_SMEM_SWIZZLE, 2);
    g->sSel = tk_shared(k, g->dt, 16, 16 * 16, TK_SMEM_SWIZZLE, 1);
    if (g->c->seg == TK_BASED_SEG_STATE) tk_if_begin(k, tk_gt(k, g->trips, i64c(k, 0)));
    copy_chunk(g, i64c(k, 0), tk_based_chunk(g, i64c(k, 0)));
    if (g->c->seg == TK_BASED_SEG_STATE) tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    selectors_to_shared(g);
}

tk_value *tk_based_arrive(tk_based_kernel *g, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *st = tk_rem(k, ch, i64c(k, 2)), *ch1 = tk_add(k, ch, i64c(k, 1));
    tk_async_wait(k, 0);
    tk_barrier(k); /* chunk ch landed for all; every warp left chunk ch - 1 */
    tk_if_begin(k, tk_lt(k, ch1, g->trips));
    copy_chunk(g, tk_sub(k, i64c(k, 1), st), tk_based_chunk(g, ch1));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    return st;
}

void tk_based_band(tk_based_kernel *g, tk_value *xst, tk_value *scale, tk_value **xb,
                   tk_value **xf) {
    tk_kernel *k = g->k;
    tk_value *idx[2] = {g->r0, i64c(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(g->dt, 16, 16, TK_WARP, TK_ROW), xst, idx, 0.0f);
    if (scale) x = tk_cvt(k, tk_mul(k, tk_cvt(k, x, TK_F32), scale), g->dt);
    *xb = x;
    *xf = tk_cvt(k, x, TK_F32);
}

tk_value *tk_based_scores(tk_based_kernel *g, tk_value *qb, tk_value *kst, tk_value **s_out) {
    tk_kernel *k = g->k;
    tk_value *z[2];
    zero2(k, z);
    tk_value *kt = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_ROW), kst, z, 0.0f);
    tk_value *s = tk_mma(k, TK_MMA_ABT, qb, kt, NULL);
    if (s_out) *s_out = s;
    /* 1 + s·(1 + s/2) */
    tk_value *a = tk_add(
        k, tk_mul(k, s, tk_add(k, tk_mul(k, s, tk_const_f32(k, 0.5f)), tk_const_f32(k, 1.0f))),
        tk_const_f32(k, 1.0f));
    return tk_mask(k, a, TK_MASK_CAUSAL, g->r0, i64c(k, 0), 0.0f);
}

/* Selector j: a bf16 16x16 tile whose column j is 1, the rest 0, read from
 * shared memory where it is used. (Made in registers, the compiler hoists
 * the 16 of them out of the chunk loop: 64 registers held for good.) */
tk_value *tk_based_selector(tk_based_kernel *g, int j) {
    tk_kernel *k = g->k;
    tk_value *idx[2] = {i64c(k, 0), i64c(k, 16 * j)};
    return tk_load(k, tk_tile_type(g->dt, 16, 16, TK_WARP, TK_ROW), g->sSel, idx, 0.0f);
}

/* Warp j mod W writes selector j (ordered before use by the first chunk's
 * barrier). */
static void selectors_to_shared(tk_based_kernel *g) {
    tk_kernel *k = g->k;
    tk_type ft = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
    tk_value *col = tk_iota(k, ft, TK_PER_COL);
    for (int j = 0; j < 16; j++) {
        tk_if_begin(k, tk_eq(k, g->w, i64c(k, j % g->W)));
        tk_value *hit = tk_eq(k, col, tk_const_f32(k, (float)j));
        tk_value *sel = tk_select(k, hit, tk_fill(k, ft, tk_const_f32(k, 1.0f)), tk_zeros(k, ft));
        tk_store(k, g->sSel, ((tk_value *[]){i64c(k, 0), i64c(k, 16 * j)}), tk_cvt(k, sel, g->dt));
        tk_if_end(k, 0, NULL, NULL);
    }
}

tk_value *tk_based_colcast(tk_based_kernel *g, tk_value *xb, int j) {
    return tk_col_bcast(g->k, tk_cvt(g->k, xb, TK_F32), j); /* [i, c] = x[i, j] */
}

tk_value *tk_based_phi(tk_based_kernel *g, tk_value *xb, tk_value *xf, int j) {
    tk_kernel *k = g->k;
    if (j == 16) return xb;
    if (j == 17) return tk_based_selector(g, 0);
    tk_value *xj = tk_based_colcast(g, xb, j);
    return tk_cvt(k, tk_mul(k, tk_mul(k, xj, xf), tk_const_f32(k, (float)M_SQRT1_2)), g->dt);
}

tk_value *tk_based_state_apply(tk_based_kernel *g, tk_value *xb, tk_value *xf, tk_value *acc) {
    tk_kernel *k = g->k;
    tk_type st_t = tk_tile_type(g->dt, 16, g->DVB, TK_WARP, TK_COL);
    for (int j = 0; j < TK_BASED_SLABS; j++) {
        tk_value *idx[2] = {i64c(k, 16 * j), i64c(k, 0)};
        acc = tk_mma(k, TK_MMA_AB, tk_based_phi(g, xb, xf, j), tk_load(k, st_t, g->sS, idx, 0.0f),
                     acc);
    }
    return acc;
}

tk_value *tk_based_state_grad(tk_based_kernel *g, tk_value *yb, tk_value *xb) {
    tk_kernel *k = g->k;
    tk_type st_t = tk_tile_type(g->dt, 16, g->DVB, TK_WARP, TK_ROW);
    tk_value *quad = NULL;
    for (int j = 0; j < 16; j++) { /* d(x_a x_b / √2): √2 Σ_a M[a, :] x_a */
        tk_value *idx[2] = {i64c(k, 16 * j), i64c(k, 0)};
        tk_value *m = tk_mma(k, TK_MMA_ABT, yb, tk_load(k, st_t, g->sS, idx, 0.0f), NULL);
        tk_value *t = tk_mul(k, m, tk_based_colcast(g, xb, j));
        quad = quad ? tk_add(k, quad, t) : t;
    }
    tk_value *idx[2] = {i64c(k, 16 * 16), i64c(k, 0)};
    tk_value *lin = tk_mma(k, TK_MMA_ABT, yb, tk_load(k, st_t, g->sS, idx, 0.0f), NULL);
    return tk_add(k, lin, tk_mul(k, quad, tk_const_f32(k, (float)M_SQRT2)));
}

void tk_based_sums(tk_based_kernel *g, tk_value *xst, tk_value *z1, tk_value *Z2, tk_value **nz1,
                   tk_value **nZ2) {
    tk_kernel *k = g->k;
    tk_value *z[2];
    zero2(k, z);
    tk_value *xr = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_ROW), xst, z, 0.0f);
    *nz1 = tk_add(k, z1, tk_col_sum(k, tk_cvt(k, xr, TK_F32)));
    tk_value *xc = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL), xst, z, 0.0f);
    *nZ2 = tk_mma(k, TK_MMA_ATB, xc, xc, Z2);
}

void tk_based_phi_to_shared(tk_based_kernel *g, tk_value *xst, tk_value *scale) {
    tk_kernel *k = g->k;
    tk_value *xb, *xf;
    tk_based_band(g, xst, scale, &xb, &xf);
    for (int j = 0; j < TK_BASED_SLABS; j++) {
        tk_value *idx[2] = {g->r0, i64c(k, 16 * j)};
        tk_store(k, g->sPhi, idx, tk_based_phi(g, xb, xf, j));
    }
}

/* Slot s holds slab s·W + w; the last slot may have none for some warps. */
static tk_value *slab_of(tk_based_kernel *g, int s) {
    tk_kernel *k = g->k;
    return tk_add(k, i64c(k, (int64_t)s * g->W), g->w);
}
static int slot_partial(const tk_based_kernel *g, int s) { return (s + 1) * g->W > TK_BASED_SLABS; }

/* Whether the carried 16-vector and 16x16 tile (z1 and Z2, or rz1 and
 * RZ2) are used. */
static bool uses_sums(const tk_based_kernel *g) {
    return g->c->normalize || (g->c->part == TK_BASED_FWD && g->c->stats);
}

/* Segment s's entry of St (its first index). */
static tk_value *st_entry(tk_based_kernel *g, tk_value *s) {
    tk_kernel *k = g->k;
    tk_value *xb = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), tk_dim(k, g->Q, 0)), g->b);
    return tk_add(k, tk_mul(k, xb, g->nseg), s);
}

/* init[t] plus, in order, the St entries of segments lo .. hi - 1 at
 * (row, 0): one slot a loop, so that only one sum is in flight. The
 * 16-vector (t == slots) is row 0 of a 16x16 tile (tk_based_state_write). */
static void add_segments(tk_based_kernel *g, tk_value *lo, tk_value *hi, tk_type ty, tk_value *row,
                         tk_value **init, int t) {
    tk_kernel *k = g->k;
    tk_value *cur, *next;
    tk_value *s = tk_for_begin(k, lo, hi, i64c(k, 1), 1, &init[t], &cur);
    {
        tk_value *idx[4] = {st_entry(g, s), g->h, row, i64c(k, 0)};
        tk_value *x = tk_load(k, ty, g->St, idx, 0.0f);
        next = tk_add(k, cur, t == g->slots ? tk_col_sum(k, x) : x);
    }
    tk_for_end(k, 1, &next, &init[t]);
}

/* init (zeros) plus the other segments' states: the earlier ones' (the
 * later ones' when reverse). */
static void add_other_segments(tk_based_kernel *g, tk_value **init) {
    tk_kernel *k = g->k;
    tk_value *lo = g->reverse ? tk_add(k, g->seg, i64c(k, 1)) : i64c(k, 0);
    tk_value *hi = g->reverse ? g->nseg : g->seg;
    tk_type acc = tk_tile_type(TK_F32, 16, g->DVB, TK_WARP, TK_ROW);
    for (int t = 0; t < g->slots; t++) {
        tk_value *j = slab_of(g, t);
        bool partial = slot_partial(g, t);
        if (partial) tk_if_begin(k, tk_lt(k, j, i64c(k, TK_BASED_SLABS)));
        tk_value *z = init[t];
        add_segments(g, lo, hi, acc, tk_mul(k, j, i64c(k, 16)), init, t);
        if (partial) { /* the sum, or the zeros of a slot without a slab */
            tk_else(k, 1, &init[t]);
            tk_if_end(k, 1, &z, &init[t]);
        }
    }
    if (!uses_sums(g)) return;
    tk_type ft = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
    add_segments(g, lo, hi, ft, i64c(k, 304), init, g->slots);
    add_segments(g, lo, hi, ft, i64c(k, 288), init, g->slots + 1);
}

void tk_based_state_init(tk_based_kernel *g, tk_value **init) {
    tk_kernel *k = g->k;
    tk_type acc = tk_tile_type(TK_F32, 16, g->DVB, TK_WARP, TK_ROW);
    for (int s = 0; s < g->slots; s++) init[s] = tk_zeros(k, acc);
    init[g->slots] = tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_COL, TK_WARP, TK_ROW));
    init[g->slots + 1] = tk_zeros(k, tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW));
    tk_value *zb = tk_zeros(k, tk_tile_type(g->dt, 16, g->DVB, TK_WARP, TK_ROW));
    if (g->c->seg == TK_BASED_SEG_RUN) add_other_segments(g, init);
    for (int s = 0; s < g->slots; s++) {
        tk_value *j = slab_of(g, s);
        if (slot_partial(g, s)) tk_if_begin(k, tk_lt(k, j, i64c(k, TK_BASED_SLABS)));
        tk_value *idx[2] = {tk_mul(k, j, i64c(k, 16)), i64c(k, 0)};
        tk_store(k, g->sS, idx, g->c->seg == TK_BASED_SEG_RUN ? tk_cvt(k, init[s], g->dt) : zb);
        if (slot_partial(g, s)) tk_if_end(k, 0, NULL, NULL);
    }
}

void tk_based_state_write(tk_based_kernel *g, tk_value *const *fin) {
    tk_kernel *k = g->k;
    tk_if_begin(k, seg_used(g));
    tk_value *e = st_entry(g, g->seg);
    for (int s = 0; s < g->slots; s++) {
        tk_value *j = slab_of(g, s);
        if (slot_partial(g, s)) tk_if_begin(k, tk_lt(k, j, i64c(k, TK_BASED_SLABS)));
        tk_store(k, g->St, ((tk_value *[]){e, g->h, tk_mul(k, j, i64c(k, 16)), i64c(k, 0)}),
                 fin[s]);
        if (slot_partial(g, s)) tk_if_end(k, 0, NULL, NULL);
    }
    if (uses_sums(g)) { /* every warp holds them whole: warp 0 writes */
        tk_type ft = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
        tk_value *row0 = tk_eq(k, tk_iota(k, ft, TK_PER_ROW), tk_const_f32(k, 0.0f));
        tk_value *z1 =
            tk_select(k, row0, tk_add(k, tk_zeros(k, ft), fin[g->slots]), tk_zeros(k, ft));
        tk_if_begin(k, tk_eq(k, g->w, i64c(k, 0)));
        tk_store(k, g->St, ((tk_value *[]){e, g->h, i64c(k, 288), i64c(k, 0)}), fin[g->slots + 1]);
        tk_store(k, g->St, ((tk_value *[]){e, g->h, i64c(k, 304), i64c(k, 0)}), z1);
        tk_if_end(k, 0, NULL, NULL);
    }
    tk_if_end(k, 0, NULL, NULL);
}

void tk_based_state_update(tk_based_kernel *g, tk_value *yst, tk_value *const *S, tk_value **next) {
    tk_kernel *k = g->k;
    tk_value *z[2];
    zero2(k, z);
    tk_value *y = tk_load(k, tk_tile_type(g->dt, g->C, g->DVB, TK_WARP, TK_COL), yst, z, 0.0f);
    tk_type pt = tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL);
    for (int s = 0; s < g->slots; s++) {
        tk_value *j = slab_of(g, s);
        bool partial = slot_partial(g, s);
        if (partial) tk_if_begin(k, tk_lt(k, j, i64c(k, TK_BASED_SLABS)));
        tk_value *j16 = tk_mul(k, j, i64c(k, 16));
        tk_value *ip[2] = {i64c(k, 0), j16}, *is[2] = {j16, i64c(k, 0)};
        tk_value *n = tk_mma(k, TK_MMA_ATB, tk_load(k, pt, g->sPhi, ip, 0.0f), y, S[s]);
        tk_store(k, g->sS, is, tk_cvt(k, n, g->dt));
        if (partial) {
            tk_else(k, 1, &n);
            tk_if_end(k, 1, &S[s], &next[s]);
        } else {
            next[s] = n;
        }
    }
}

/* ---- tk_based_build ------------------------------------------------------ */
static tk_status bad(tk_ctx *ctx, const char *fn, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; %s", fn, what, v, want);
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_based_config *c) {
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(c->dtype));
    if (c->part < TK_BASED_FWD || c->part > TK_BASED_BWD_SUM)
        return bad(ctx, fn, "part", c->part, "expected a tk_based_part");
    if (c->normalize != 0 && c->normalize != 1)
        return bad(ctx, fn, "normalize", c->normalize, "expected 0 or 1");
    if (c->stats != 0 && c->stats != 1) return bad(ctx, fn, "stats", c->stats, "expected 0 or 1");
    int vc = c->v_cols;
    if (vc != 0 && (vc < 16 || vc > 128 || vc % 16))
        return bad(ctx, fn, "v_cols", vc, "expected 0 or a multiple of 16 in 16 .. 128");
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8)
        return bad(ctx, fn, "warps", w, "expected 0, 1, 2, 4 or 8");
    if (c->seg < TK_BASED_SEG_NONE || c->seg > TK_BASED_SEG_STATE)
        return bad(ctx, fn, "seg", c->seg, "expected a tk_based_seg");
    if (c->seg && (c->part == TK_BASED_BWD_PREP || c->part == TK_BASED_BWD_SUM))
        return bad(ctx, fn, "seg", c->seg,
                   "expected TK_BASED_SEG_NONE for the row kernels (PREP, SUM)");
    if (c->seg == TK_BASED_SEG_STATE && c->part == TK_BASED_BWD_DQ)
        return bad(ctx, fn, "seg", c->seg,
                   "DQ has no state pass of its own (it reads the FWD state pass's St)");
    return TK_OK;
}

tk_status tk_based_build(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel **out) {
    const char *fn = "tk_based_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    tk_based_config c = *cfg;
    if (!c.v_cols) c.v_cols = TK_BASED_V_COLS;
    if (!c.warps) c.warps = TK_BASED_WARPS;
    if (c.part == TK_BASED_BWD_PREP || c.part == TK_BASED_BWD_SUM) /* row kernels */
        c.warps = TK_BASED_ROW_WARPS, c.v_cols = 16;
    static const char *parts[] = {"fwd", "bwd_dq", "bwd_dkv", "bwd_prep", "bwd_sum"};
    char name[96];
    static const char *segs[] = {"", "_seg", "_segstate"};
    snprintf(name, sizeof name, "tk_based_%s_%s_v%d_w%d%s%s%s", parts[c.part],
             tk_dtype_name(c.dtype), c.v_cols, c.warps, c.normalize ? "_norm" : "",
             c.stats ? "_stats" : "", segs[c.seg]);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, c.warps, &k))) return s;
    /* 168: 3 blocks an SM, no spills at v_cols 16 (sm_90a, sm_80) */
    tk_kernel_set_maxnreg(k, 168);
    s = c.part == TK_BASED_FWD ? tk_based_build_fwd(ctx, &c, k) : tk_based_build_bwd(ctx, &c, k);
    if (s) {
        tk_kernel_destroy(k);
        return s;
    }
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
