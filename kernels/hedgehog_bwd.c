/* Hedgehog linear attention, backward: the dispatch on the config's part
 * and the PREP kernel. The notation and the kernels' contracts are in
 * tk/tk_kernels.h ("The backward"); the plan of launches in
 * kernels/hedgehog_run.c. The other kernels: hedgehog_dphi.c (dφ),
 * hedgehog_fmap.c (through the feature map, the partial sums of dW and
 * db); the forward (hedgehog.c) serves for dv. */
#include <stdbool.h>
#include <stdio.h>

#include "hedgehog_parts.h"

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

#define PREP_WARPS 4 /* 16 rows a warp */

/* G_i = s·dO_i / (Z_i + eps) and C_i = -s·(dO_i·O_i) / (Z_i + eps)
 * (normalize), or G_i = s·dO_i, over Dv in 16-column tiles: two passes
 * over dO when normalized (the dot product first, then G), one otherwise.
 * Grid (ceil(T/64), H, B). */
static void build_prep(tk_kernel *k, tk_dtype dt, bool normalize) {
    tk_value *DO = tk_param_tensor(k, "dO", dt, 4), *O = NULL, *Z = NULL, *C = NULL;
    if (normalize) {
        O = tk_param_tensor(k, "O", dt, 4);
        Z = tk_param_tensor(k, "Z", TK_F32, 3);
    }
    tk_value *G = tk_param_tensor(k, "G", dt, 4);
    if (normalize) C = tk_param_tensor(k, "C", TK_F32, 3);
    tk_value *scale = tk_param_scalar(k, "scale", TK_F32);
    tk_value *eps = tk_param_scalar(k, "eps", TK_F32);
    tk_value *T = tk_dim(k, DO, 2), *Dv = tk_dim(k, DO, 3);
    tk_set_grid(k, tk_ceil_div(k, T, i64c(k, 16 * PREP_WARPS)), tk_dim(k, DO, 1), tk_dim(k, DO, 0));
    tk_value *h = tk_block_id_i64(k, 1), *b = tk_block_id_i64(k, 2);
    tk_value *r = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, 16 * PREP_WARPS)),
                         tk_mul(k, tk_warp_id_i64(k), i64c(k, 16)));
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type tt = tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW);
    tk_value *iz[3] = {b, h, r}, *factor = scale; /* G = factor·dO */
    if (normalize) {
        tk_value *init = tk_zeros(k, vt), *cur, *dot;
        tk_value *c0 = tk_for_begin(k, i64c(k, 0), Dv, i64c(k, 16), 1, &init, &cur);
        {
            tk_value *idx[4] = {b, h, r, c0};
            tk_value *d = tk_cvt(k, tk_load(k, tt, DO, idx, 0.0f), TK_F32);
            tk_value *o = tk_cvt(k, tk_load(k, tt, O, idx, 0.0f), TK_F32);
            tk_value *next = tk_add(k, cur, tk_row_sum(k, tk_mul(k, d, o)));
            tk_for_end(k, 1, &next, &dot);
        }
        factor = tk_div(k, scale, tk_add(k, tk_load(k, vt, Z, iz, 0.0f), eps)); /* s / (Z + eps) */
        tk_store(k, C, iz, tk_neg(k, tk_mul(k, dot, factor)));
    }
    tk_value *c0 = tk_for_begin(k, i64c(k, 0), Dv, i64c(k, 16), 0, NULL, NULL);
    {
        tk_value *idx[4] = {b, h, r, c0};
        tk_value *d = tk_cvt(k, tk_load(k, tt, DO, idx, 0.0f), TK_F32);
        tk_store(k, G, idx, tk_cvt(k, tk_mul(k, d, factor), dt));
    }
    tk_for_end(k, 0, NULL, NULL);
}

static tk_status bad(tk_ctx *ctx, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_hedgehog_build: %s is %d; %s", what, v,
                            want);
}

tk_status tk_hh_build_prep(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out) {
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: dtype is %s; expected TK_BF16 or TK_F16",
                                tk_dtype_name(c->dtype));
    if (c->normalize != 0 && c->normalize != 1)
        return bad(ctx, "normalize", c->normalize, "expected 0 or 1");
    char name[64];
    snprintf(name, sizeof name, "tk_hedgehog_bwd_prep_%s%s", tk_dtype_name(c->dtype),
             c->normalize ? "_norm" : "");
    tk_kernel *k;
    tk_status s = tk_kernel_create(ctx, name, PREP_WARPS, &k);
    if (s) return s;
    build_prep(k, c->dtype, c->normalize);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "tk_hedgehog_build: %s", tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}

/* tk_hedgehog_build for the parts other than the forward (ctx, cfg and out
 * checked). */
tk_status tk_hh_build_part(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out) {
    switch (c->part) {
    case TK_HEDGEHOG_BWD_PREP: return tk_hh_build_prep(ctx, c, out);
    case TK_HEDGEHOG_BWD_DPHI: return tk_hh_build_dphi(ctx, c, out);
    case TK_HEDGEHOG_BWD_FMAP: return tk_hh_build_fmap(ctx, c, out);
    case TK_HEDGEHOG_BWD_REDUCE: return tk_hh_build_reduce(ctx, c, out);
    case TK_HEDGEHOG_MAP: return tk_hh_build_map(ctx, c, out);
    default: return bad(ctx, "part", c->part, "expected a tk_hedgehog_part");
    }
}
