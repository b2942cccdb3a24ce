/* LayerNorm and RMSNorm, fused with the residual add: forward, backward and
 * the backward's reduction of the weight and bias gradients. The contract
 * (parameters in order, grids) is in tk/tk_kernels.h ("Normalization").
 *
 * Rows are independent, so a warp owns 16 rows (a tile's) and a block four
 * warps; a row of any length is walked in chunks of CW columns, which keeps
 * the kernel in registers at every length (examples/layernorm.c says why a
 * whole-row tile spills) and reads each input twice: once for the row's
 * statistics, once for the output. Statistics are f32, merged chunk by
 * chunk (Chan et al.: no E[x²] - E[x]² cancellation for LayerNorm).
 *
 * The weight and bias gradients sum over every row. Each warp writes its 16
 * rows' column sums as one partial row (P = ceil(R / 16) of them) and a
 * second kernel sums the partials in a fixed order: deterministic, no
 * atomics. */
#include <stdbool.h>
#include <stdio.h>

#include "tk/tk_kernels.h"

#define ROWS  16 /* a warp's rows */
#define WARPS 4
#define CW    32 /* columns a chunk */

typedef struct nrm {
    tk_kernel *k;
    const tk_norm_config *c;
    bool layer;
    tk_value *R, *C, *row0, *pw; /* rows, columns, the warp's first row, its partial */
} nrm;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

/* Rows of the first tensor param T: the grid, the warp's rows. */
static void rows_of(nrm *a, tk_value *T) {
    tk_kernel *k = a->k;
    a->R = tk_dim(k, T, 0), a->C = tk_dim(k, T, 1);
    tk_set_grid(k, tk_ceil_div(k, a->R, i64c(k, WARPS * ROWS)), NULL, NULL);
    a->pw = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, WARPS)), tk_warp_id_i64(k));
    a->row0 = tk_mul(k, a->pw, i64c(k, ROWS));
}

static tk_type chunk_t(const nrm *a, tk_dtype dt) {
    return tk_tile_type(dt, ROWS, CW, TK_WARP, TK_ROW);
}

/* The chunk at column c0 of T in f32 (0 past the view). */
static tk_value *load_f32(nrm *a, tk_value *T, tk_value *c0) {
    tk_value *idx[2] = {a->row0, c0};
    return f32(a->k, tk_load(a->k, chunk_t(a, a->c->dtype), T, idx, 0.0f));
}

/* W or B's chunk at c0 in f32, broadcast down the rows (NULL: none). */
static tk_value *load_vec(nrm *a, tk_value *V, tk_value *c0) {
    if (!V) return NULL;
    tk_value *ic[1] = {c0};
    tk_type vt = tk_vec_type(a->c->dtype, CW, TK_PER_COL, TK_WARP, TK_ROW);
    return f32(a->k, tk_load(a->k, vt, V, ic, 0.0f));
}

static tk_value *chunks(nrm *a) { return tk_ceil_div(a->k, a->C, i64c(a->k, CW)); }

/* xhat = (h - mean)·rstd (RMSNorm: h·rstd). */
static tk_value *normalized(nrm *a, tk_value *h, tk_value *mean, tk_value *rstd) {
    return tk_mul(a->k, a->layer ? tk_sub(a->k, h, mean) : h, rstd);
}

/* Pass 1 of the forward: h = x (+ residual, rounded to the dtype as H
 * stores it, so the statistics are those of what the backward reads),
 * written to H; the rows' mean and M2 (LayerNorm: Chan's merge of each
 * chunk's mean and squared deviations) or sum of squares (RMSNorm). */
static void fwd_stats(nrm *a, tk_value *X, tk_value *Res, tk_value *H, tk_value **mean,
                      tk_value **m2) {
    tk_kernel *k = a->k;
    tk_type vt = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *init[2] = {tk_zeros(k, vt), tk_zeros(k, vt)}, *cur[2], *next[2], *fin[2];
    tk_value *c = tk_for_begin(k, i64c(k, 0), chunks(a), i64c(k, 1), 2, init, cur);
    {
        tk_value *c0 = tk_mul(k, c, i64c(k, CW)), *idx[2] = {a->row0, c0};
        tk_value *h = load_f32(a, X, c0);
        if (Res) {
            tk_value *h16 = tk_cvt(k, tk_add(k, h, load_f32(a, Res, c0)), a->c->dtype);
            tk_store(k, H, idx, h16);
            h = f32(k, h16);
        }
        if (a->layer) {
            /* n columns merged so far (every earlier chunk is whole), nc in this one */
            tk_value *n = f32(k, c0), *nc = f32(k, tk_min(k, i64c(k, CW), tk_sub(k, a->C, c0)));
            tk_value *mc = tk_div(k, tk_row_sum(k, h), nc);
            tk_value *d = tk_mask(k, tk_sub(k, h, mc), TK_MASK_COLS, c0, a->C, 0.0f);
            tk_value *delta = tk_sub(k, mc, cur[0]), *w = tk_div(k, nc, tk_add(k, n, nc));
            next[0] = tk_add(k, cur[0], tk_mul(k, delta, w));
            next[1] = tk_add(k, tk_add(k, cur[1], tk_row_sum(k, tk_mul(k, d, d))),
                             tk_mul(k, tk_mul(k, delta, delta), tk_mul(k, n, w)));
        } else { /* past C h is 0 */
            next[0] = cur[0];
            next[1] = tk_add(k, cur[1], tk_row_sum(k, tk_mul(k, h, h)));
        }
    }
    tk_for_end(k, 2, next, fin);
    *mean = fin[0], *m2 = fin[1];
}

static void build_fwd(nrm *a) {
    tk_kernel *k = a->k;
    const tk_norm_config *c = a->c;
    tk_dtype dt = c->dtype;
    tk_value *X = tk_param_tensor(k, "X", dt, 2);
    tk_value *Res = c->residual ? tk_param_tensor(k, "Res", dt, 2) : NULL;
    tk_value *W = c->weight ? tk_param_tensor(k, "W", dt, 1) : NULL;
    tk_value *B = c->bias ? tk_param_tensor(k, "B", dt, 1) : NULL;
    tk_value *H = c->residual ? tk_param_tensor(k, "H", dt, 2) : NULL;
    tk_value *Y = tk_param_tensor(k, "Y", dt, 2);
    tk_value *Mean = a->layer && c->stats ? tk_param_tensor(k, "Mean", TK_F32, 1) : NULL;
    tk_value *Rstd = c->stats ? tk_param_tensor(k, "Rstd", TK_F32, 1) : NULL;
    tk_value *eps = tk_param_scalar(k, "eps", TK_F32);
    rows_of(a, X);

    tk_value *mean, *m2;
    fwd_stats(a, X, Res, H, &mean, &m2);
    tk_value *rstd = tk_rsqrt(k, tk_add(k, tk_div(k, m2, f32(k, a->C)), eps));
    tk_value *ir[1] = {a->row0};
    if (Mean) tk_store(k, Mean, ir, mean); /* rows past R are not written */
    if (Rstd) tk_store(k, Rstd, ir, rstd);

    tk_value *src = H ? H : X; /* pass 2 reads h once, as stored */
    tk_value *ch = tk_for_begin(k, i64c(k, 0), chunks(a), i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *c0 = tk_mul(k, ch, i64c(k, CW)), *idx[2] = {a->row0, c0};
        tk_value *y = normalized(a, load_f32(a, src, c0), mean, rstd);
        if (W) y = tk_mul(k, y, load_vec(a, W, c0));
        if (B) y = tk_add(k, y, load_vec(a, B, c0));
        tk_store(k, Y, idx, tk_cvt(k, y, dt));
    }
    tk_for_end(k, 0, NULL, NULL);
}

/* The backward, with g = dY·W and xhat as above, per row:
 *   LayerNorm  dx = rstd·(g - mean(g) - xhat·mean(g·xhat))
 *   RMSNorm    dx = rstd·(g - xhat·mean(g·xhat))
 * plus dH (the residual stream's own gradient) when fused; each warp's
 * column sums of dY·xhat and dY into its partial rows of dWp and dBp. */
static void build_bwd(nrm *a) {
    tk_kernel *k = a->k;
    const tk_norm_config *c = a->c;
    tk_dtype dt = c->dtype;
    tk_value *H = tk_param_tensor(k, "H", dt, 2);
    tk_value *dY = tk_param_tensor(k, "dY", dt, 2);
    tk_value *dH = c->residual ? tk_param_tensor(k, "dH", dt, 2) : NULL;
    tk_value *W = c->weight ? tk_param_tensor(k, "W", dt, 1) : NULL;
    tk_value *Mean = a->layer ? tk_param_tensor(k, "Mean", TK_F32, 1) : NULL;
    tk_value *Rstd = tk_param_tensor(k, "Rstd", TK_F32, 1);
    tk_value *dX = tk_param_tensor(k, "dX", dt, 2);
    tk_value *dWp = c->weight ? tk_param_tensor(k, "dWp", TK_F32, 2) : NULL;
    tk_value *dBp = c->bias ? tk_param_tensor(k, "dBp", TK_F32, 2) : NULL;
    rows_of(a, H);

    tk_type vt = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *ir[1] = {a->row0};
    tk_value *mean = Mean ? tk_load(k, vt, Mean, ir, 0.0f) : NULL;
    tk_value *rstd = tk_load(k, vt, Rstd, ir, 0.0f);

    /* pass 1: the rows' sums of g and g·xhat (past C, dY and so g are 0) */
    tk_value *init[2] = {tk_zeros(k, vt), tk_zeros(k, vt)}, *cur[2], *next[2], *fin[2];
    tk_value *ch = tk_for_begin(k, i64c(k, 0), chunks(a), i64c(k, 1), 2, init, cur);
    {
        tk_value *c0 = tk_mul(k, ch, i64c(k, CW));
        tk_value *xh = normalized(a, load_f32(a, H, c0), mean, rstd);
        tk_value *g = load_f32(a, dY, c0);
        if (W) g = tk_mul(k, g, load_vec(a, W, c0));
        next[0] = tk_add(k, cur[0], tk_row_sum(k, g));
        next[1] = tk_add(k, cur[1], tk_row_sum(k, tk_mul(k, g, xh)));
    }
    tk_for_end(k, 2, next, fin);
    tk_value *inv_c = tk_div(k, tk_const_f32(k, 1.0f), f32(k, a->C));
    tk_value *mg = tk_mul(k, fin[0], inv_c), *mgx = tk_mul(k, fin[1], inv_c);

    /* pass 2: dX, and the partials */
    ch = tk_for_begin(k, i64c(k, 0), chunks(a), i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *c0 = tk_mul(k, ch, i64c(k, CW)), *idx[2] = {a->row0, c0};
        tk_value *xh = normalized(a, load_f32(a, H, c0), mean, rstd);
        tk_value *dy = load_f32(a, dY, c0), *g = W ? tk_mul(k, dy, load_vec(a, W, c0)) : dy;
        tk_value *t = tk_sub(k, g, tk_mul(k, xh, mgx));
        if (a->layer) t = tk_sub(k, t, mg);
        tk_value *dx = tk_mul(k, t, rstd);
        if (dH) dx = tk_add(k, dx, load_f32(a, dH, c0));
        tk_store(k, dX, idx, tk_cvt(k, dx, dt));
        tk_value *ip[2] = {a->pw, c0}; /* rows past R read dY = 0: they add nothing */
        if (dWp) tk_store(k, dWp, ip, tk_col_sum(k, tk_mul(k, dy, xh)));
        if (dBp) tk_store(k, dBp, ip, tk_col_sum(k, dy));
    }
    tk_for_end(k, 0, NULL, NULL);
}

/* Out[c] = Σ_p Part[p, c] in order of p, a warp a chunk of CW columns. */
static void build_reduce(nrm *a, tk_dtype out) {
    tk_kernel *k = a->k;
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *Out = tk_param_tensor(k, "Out", out, 1);
    tk_value *P = tk_dim(k, Part, 0), *C = tk_dim(k, Part, 1);
    tk_set_grid(k, tk_ceil_div(k, C, i64c(k, CW)), NULL, NULL);
    tk_value *c0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, CW));
    tk_type vt = tk_vec_type(TK_F32, CW, TK_PER_COL, TK_WARP, TK_ROW);
    tk_type t = tk_tile_type(TK_F32, ROWS, CW, TK_WARP, TK_ROW);
    tk_value *init[1] = {tk_zeros(k, vt)}, *cur[1], *next[1], *fin[1];
    tk_value *i =
        tk_for_begin(k, i64c(k, 0), tk_ceil_div(k, P, i64c(k, ROWS)), i64c(k, 1), 1, init, cur);
    {
        tk_value *idx[2] = {tk_mul(k, i, i64c(k, ROWS)), c0};
        next[0] = tk_add(k, cur[0], tk_col_sum(k, tk_load(k, t, Part, idx, 0.0f)));
    }
    tk_for_end(k, 1, next, fin);
    tk_value *ic[1] = {c0};
    tk_store(k, Out, ic, out == TK_F32 ? fin[0] : tk_cvt(k, fin[0], out));
}

/* Out's dtype of the reduction (0: f32). */
static tk_dtype reduce_dtype(const tk_norm_config *c) { return c->dtype ? c->dtype : TK_F32; }

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
    return TK_OK;
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
    static const char *parts[3] = {"fwd", "bwd", "bwd_reduce"};
    char name[96];
    if (reduce)
        snprintf(name, sizeof name, "tk_norm_bwd_reduce_%s", tk_dtype_name(reduce_dtype(cfg)));
    else
        snprintf(name, sizeof name, "tk_%snorm_%s_%s%s%s%s%s",
                 cfg->kind == TK_NORM_RMS ? "rms" : "layer", parts[cfg->part],
                 tk_dtype_name(cfg->dtype), cfg->residual ? "_res" : "", cfg->weight ? "_w" : "",
                 cfg->bias ? "_b" : "", cfg->part == TK_NORM_FWD && !cfg->stats ? "_nostats" : "");
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, reduce ? 1 : WARPS, &k))) return s;
    nrm a = {.k = k, .c = cfg, .layer = cfg->kind == TK_NORM_LAYER};
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
