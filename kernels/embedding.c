/* Token and position embeddings: the forward, the position gradient, the
 * zeroing of an overwritten token gradient, and tk_embedding_build, which
 * also dispatches to the backward's sort (embedding_sort.c) and the sums
 * of its runs (embedding_sum.c). The contract (parameters in order, grids)
 * is in tk/tk_kernels_train.h.
 *
 * Why a row is a tile: an embedding row is gathered by a token the block
 * reads at run time, and a tile's rows are consecutive rows of a view. So
 * the run API views each [rows, C] matrix as [rows, R, W] (R = floor(C /
 * W)): one position's whole row is a [16, W] tile (GPT-2's 768 is 16 x 48
 * exactly), loaded at the leading index the token names, every lane busy.
 * A token outside the table is a leading index out of range: the tile
 * reads its fill, NaN, and never leaves the view. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "bias_grad_parts.h"
#include "embedding_parts.h"
#include "tk/tk_kernels.h"

#define ROWS 16 /* a tile's rows                          */
#define CW   64 /* ZERO: a warp's columns                 */
#define PPW  2  /* FWD: positions a warp                  */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

static tk_value *to_f32(tk_kernel *k, tk_value *v, tk_dtype dt) {
    return dt == TK_F32 ? v : tk_cvt(k, v, TK_F32);
}

static tk_type tile_t(tk_dtype dt, int cols) {
    return tk_tile_type(dt, ROWS, cols, TK_WARP, TK_ROW);
}

/* The warp's index among all warps of the grid's x: bx·warps + warp. */
static tk_value *warp_x(tk_emb *a) {
    tk_kernel *k = a->k;
    return tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, a->W)), tk_warp_id_i64(k));
}

/* ---- the forward ---------------------------------------------------------
 * Each warp two positions, both rows' loads issued before either store
 * (a store may alias a later load as far as the compiler knows, so loads
 * written after it would wait for it). */
static void build_fwd(tk_emb *a) {
    tk_kernel *k = a->k;
    const tk_embedding_config *c = a->c;
    tk_value *Tok = tk_param_tensor(k, "Tok", TK_I32, 2);
    tk_value *Wte = tk_param_tensor(k, "Wte", c->weight_dtype, 3);
    tk_value *Wpe = c->pos ? tk_param_tensor(k, "Wpe", c->weight_dtype, 3) : NULL;
    tk_value *Out = tk_param_tensor(k, "Out", c->dtype, 3);
    tk_value *T = tk_dim(k, Tok, 1), *N = tk_mul(k, tk_dim(k, Tok, 0), T);
    tk_set_grid(k, tk_ceil_div(k, N, i64c(k, (int64_t)PPW * a->W)),
                tk_ceil_div(k, tk_dim(k, Out, 1), i64c(k, ROWS)), NULL);
    tk_value *r0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, ROWS));
    tk_value *p0 = tk_mul(k, warp_x(a), i64c(k, PPW)), *zero = i64c(k, 0);
    tk_type wt = tile_t(c->weight_dtype, c->cols);
    tk_value *x[PPW], *p[PPW];
    for (int i = 0; i < PPW; i++) {
        p[i] = tk_add(k, p0, i64c(k, i));
        tk_value *b = tk_div(k, p[i], T), *t = tk_sub(k, p[i], tk_mul(k, b, T));
        tk_value *ti[2] = {b, t}; /* past N: b >= B reads -1, a row never stored */
        tk_value *tok = tk_cvt(k, tk_load(k, tk_scalar_type(TK_I32), Tok, ti, -1.0f), TK_I64);
        tk_value *ie[3] = {tok, r0, zero}, *ip[3] = {t, r0, zero};
        x[i] = to_f32(k, tk_load(k, wt, Wte, ie, NAN), c->weight_dtype);
        if (Wpe) x[i] = tk_add(k, x[i], to_f32(k, tk_load(k, wt, Wpe, ip, NAN), c->weight_dtype));
    }
    for (int i = 0; i < PPW; i++) {
        tk_value *io[3] = {p[i], r0, zero};
        tk_store(k, Out, io, c->dtype == TK_F32 ? x[i] : tk_cvt(k, x[i], c->dtype));
    }
}

/* ---- zeroing: X := 0, a [16, 64] tile a warp ----------------------------- */
static void build_zero(tk_emb *a) {
    tk_kernel *k = a->k;
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), i64c(k, ROWS)),
                tk_ceil_div(k, tk_dim(k, X, 1), i64c(k, (int64_t)CW * a->W)), NULL);
    tk_value *c0 =
        tk_mul(k, tk_add(k, tk_mul(k, tk_block_id_i64(k, 1), i64c(k, a->W)), tk_warp_id_i64(k)),
               i64c(k, CW));
    tk_value *idx[2] = {tk_mul(k, tk_block_id_i64(k, 0), i64c(k, ROWS)), c0};
    tk_store(k, X, idx, tk_zeros(k, tile_t(TK_F32, CW)));
}

/* ---- the position gradient: dWpe[t] (+)= Σ_b dO[b, t] ---------------------
 * A block owns 16 rows of dWpe and 32 columns a warp; dO's [16, 32·W]
 * slab of every batch entry streams through shared memory in b's order
 * (tk_slabs_sum, kernels/bias_grad.c: a column sum down the batch). */
static void build_dwpe(tk_emb *a) {
    tk_kernel *k = a->k;
    tk_dtype dt = a->c->dtype;
    tk_value *dO = tk_param_tensor(k, "dO", dt, 3);
    tk_value *dW = tk_param_tensor(k, "dWpe", TK_F32, 2);
    tk_value *acc = tk_param_scalar(k, "acc", TK_I32);
    int64_t span = (int64_t)TK_SLAB_COLS * a->W;
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, dW, 0), i64c(k, ROWS)),
                tk_ceil_div(k, tk_dim(k, dW, 1), i64c(k, span)), NULL);
    tk_slabs sl = {.k = k, .W = a->W, .dt = dt, .X = dO, .lead0 = i64c(k, 0), .dlead = i64c(k, 1)};
    sl.row0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, ROWS)), sl.drow = i64c(k, 0);
    sl.c0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, span)), sl.nr = tk_dim(k, dO, 0);
    tk_value *sum[1] = {tk_slabs_sum(&sl)}, *res[1]; /* rows past T: 0 */
    tk_value *io[2] = {sl.row0,
                       tk_add(k, sl.c0, tk_mul(k, tk_warp_id_i64(k), i64c(k, TK_SLAB_COLS)))};
    tk_if_begin(k, tk_ne(k, acc, tk_const_i32(k, 0)));
    tk_value *then[1] = {tk_add(k, tk_load(k, tile_t(TK_F32, TK_SLAB_COLS), dW, io, 0.0f), sum[0])};
    tk_else(k, 1, then);
    tk_if_end(k, 1, sum, res);
    tk_store(k, dW, io, res[0]);
}

/* ---- configs -------------------------------------------------------------- */
static bool sort_part(int part) {
    return part == TK_EMB_HIST || part == TK_EMB_SCAN || part == TK_EMB_SCATTER;
}

static int warps_of(const tk_embedding_config *c) {
    if (sort_part(c->part)) return TK_EMB_SORT_WARPS;
    return c->warps ? c->warps : TK_EMB_WARPS;
}

static bool float_dtype(tk_dtype dt) { return dt == TK_BF16 || dt == TK_F16 || dt == TK_F32; }

static tk_status bad_dtype(tk_ctx *ctx, const char *fn, const char *what, tk_dtype dt) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: %s is %s; expected TK_BF16, TK_F16 or TK_F32", fn, what,
                            tk_dtype_name(dt));
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_embedding_config *c) {
    int p = c->part, w = c->warps;
    if (p < TK_EMB_FWD || p > TK_EMB_FIXUP)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: part is %d; expected a tk_embedding_part (0 .. 8)", fn, p);
    if ((p == TK_EMB_FWD || p == TK_EMB_DWPE || p == TK_EMB_SEGSUM) && !float_dtype(c->dtype))
        return bad_dtype(ctx, fn, "dtype", c->dtype);
    if (p == TK_EMB_FWD && !float_dtype(c->weight_dtype))
        return bad_dtype(ctx, fn, "weight_dtype", c->weight_dtype);
    if (p == TK_EMB_FWD && c->pos != 0 && c->pos != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: pos is %d; expected 0 or 1", fn,
                                c->pos);
    bool rows = p == TK_EMB_FWD || p == TK_EMB_SEGSUM || p == TK_EMB_FIXUP;
    if (rows && (c->cols < 16 || c->cols > 64 || c->cols % 16))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: cols is %d; expected the row tile's width, a multiple of "
                                "16 in 16 .. 64",
                                fn, c->cols);
    if (sort_part(p) && w != 0 && w != TK_EMB_SORT_WARPS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; the sort's kernels take 0 or %d (a warp per "
                                "16 entries or digits)",
                                fn, w, TK_EMB_SORT_WARPS);
    if (!sort_part(p) && w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0 (the default), 1, 2, 4, 8 or 16", fn,
                                w);
    return TK_OK;
}

static void kernel_name(const tk_embedding_config *c, int W, char *name, size_t n) {
    static const char *parts[] = {"fwd",  "zero",    "dwpe",   "keys", "hist",
                                  "scan", "scatter", "segsum", "fixup"};
    switch (c->part) {
    case TK_EMB_FWD:
        snprintf(name, n, "tk_emb_fwd_%s_%s%s_c%d_w%d", tk_dtype_name(c->weight_dtype),
                 tk_dtype_name(c->dtype), c->pos ? "_pos" : "", c->cols, W);
        break;
    case TK_EMB_DWPE:
    case TK_EMB_SEGSUM:
        snprintf(name, n, "tk_emb_%s_%s_c%d_w%d", parts[c->part], tk_dtype_name(c->dtype),
                 c->part == TK_EMB_SEGSUM ? c->cols : TK_SLAB_COLS, W);
        break;
    case TK_EMB_FIXUP: snprintf(name, n, "tk_emb_fixup_c%d_w%d", c->cols, W); break;
    default: snprintf(name, n, "tk_emb_%s_w%d", parts[c->part], W); break;
    }
}

static void build_part(tk_emb *a) {
    switch (a->c->part) {
    case TK_EMB_FWD: build_fwd(a); break;
    case TK_EMB_ZERO: build_zero(a); break;
    case TK_EMB_DWPE: build_dwpe(a); break;
    case TK_EMB_KEYS: tk_emb_build_keys(a); break;
    case TK_EMB_HIST: tk_emb_build_hist(a); break;
    case TK_EMB_SCAN: tk_emb_build_scan(a); break;
    case TK_EMB_SCATTER: tk_emb_build_scatter(a); break;
    case TK_EMB_SEGSUM: tk_emb_build_segsum(a); break;
    default: tk_emb_build_fixup(a); break;
    }
}

tk_status tk_embedding_build(tk_ctx *ctx, const tk_embedding_config *cfg, tk_kernel **out) {
    const char *fn = "tk_embedding_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    tk_emb a = {.c = cfg, .W = warps_of(cfg)};
    char name[96];
    kernel_name(cfg, a.W, name, sizeof name);
    if ((s = tk_kernel_create(ctx, name, a.W, &a.k))) return s;
    build_part(&a);
    if ((s = tk_kernel_finish(a.k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(a.k));
        tk_kernel_destroy(a.k);
        return s;
    }
    *out = a.k;
    return TK_OK;
}
