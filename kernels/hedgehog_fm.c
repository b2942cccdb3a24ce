/* The Hedgehog feature map, φ(x) = softmax([2y, -2y]) with y = x·Wᵀ + b,
 * as the forward (kernels/hedgehog.c) and the backward's dΦ kernel
 * (kernels/hedgehog_dphi.c) compute it: a warp's 16 tokens at a time,
 * transposed (features in rows), W and b in shared memory. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "hedgehog_parts.h"

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
#define KC 64 /* W's columns an mma of the feature map takes */

static tk_type tile(tk_dtype dt, int rows, int cols, tk_layout l) {
    return tk_tile_type(dt, rows, cols, TK_WARP, l);
}

tk_value *tk_hh_lds(const tk_hh_fm *g, tk_value *s, int rows, int cols, tk_layout l, tk_value *r,
                    tk_value *c) {
    return tk_load(g->k, tile(g->dt, rows, cols, l), s, ((tk_value *[]){r, c}), 0.0f);
}

void tk_hh_sts(const tk_hh_fm *g, tk_value *s, tk_value *r, tk_value *c, tk_value *x) {
    tk_store(g->k, s, ((tk_value *[]){r, c}), tk_cvt(g->k, x, g->dt));
}

/* sb [D, 16] = b (from B) in every column, by warp `wi`: the feature map
 * works on yᵀ, whose rows are features, and adds a tile of it. (Once, at
 * the start: the first chunk's barrier orders it before every use.) */
void tk_hh_bias_cols(const tk_hh_fm *g, tk_value *B, tk_value *sb, int wi) {
    tk_kernel *k = g->k;
    tk_type vt = tk_vec_type(g->dt, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *hb = tk_rem(k, g->h, tk_dim(k, B, 0));
    tk_if_begin(k, tk_eq(k, g->w, i64c(k, wi)));
    for (int f = 0; f < g->D; f += 16) {
        tk_value *b = tk_cvt(k, tk_load(k, vt, B, ((tk_value *[]){hb, i64c(k, f)}), 0.0f), TK_F32);
        tk_hh_sts(g, sb, i64c(k, f), i64c(k, 0),
                  tk_add(k, tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW)), b));
    }
    tk_if_end(k, 0, NULL, NULL);
}

/* ---- the feature map ---------------------------------------------------------- */
/* The pieces (16 output features) go through runtime loops, not unrolled
 * ones: unrolled, each piece's shared-memory accesses get addresses of
 * their own that the compiler hoists out of the chunk loop, and at D 128
 * those alone spill (ptxas, sm_90a: 248 against 163 registers for the
 * feature map of k). */

/* An f32 [16, 16] tile whose element (i, j) is i. */
tk_value *tk_hh_row_index(const tk_hh_fm *g) {
    return tk_iota(g->k, tile(TK_F32, 16, 16, TK_ROW), TK_PER_ROW);
}

/* y·2·log2(e) of the piece at feature row p16 for this warp's 16 tokens
 * x, transposed: [16 features, 16 tokens] (W's rows are the mma's A), so
 * that exp2 of it less the max is exp(2y - max). */
static tk_value *piece_logits(const tk_hh_fm *g, tk_value *x, tk_value *sw, tk_value *sbt,
                              tk_value *p16) {
    tk_kernel *k = g->k;
    int P = g->D < KC ? g->D : KC;
    tk_value *y = NULL;
    for (int c = 0; c < g->D; c += P)
        y = tk_mma(k, TK_MMA_ABT, tk_hh_lds(g, sw, 16, P, TK_ROW, p16, i64c(k, c)),
                   tk_slice(k, x, 0, c, 16, P), y);
    if (sbt)
        y = tk_add(k, y, tk_cvt(k, tk_hh_lds(g, sbt, 16, 16, TK_ROW, p16, i64c(k, 0)), TK_F32));
    return tk_mul(k, y, f32c(k, (float)(2.0 * M_LOG2E)));
}

/* This warp's tokens of sx through the feature map, unnormalized: piece
 * p's exps relative to the running max after it, into sp's rows 16p (2y)
 * and D + 16p (-2y), the warp's 16 columns. Per token (PER_COL vectors):
 * the running max m and sum l; row p of the tile M keeps m after piece p
 * (8 registers, where a vector a piece takes 4). Returns the factors the
 * rescale applies: row p is piece p's, per token. */
tk_value *tk_hh_feature_map(const tk_hh_fm *g, tk_value *sx, tk_value *sw, tk_value *sbt,
                            tk_value *sp) {
    tk_kernel *k = g->k;
    tk_type ft = tile(TK_F32, 16, 16, TK_ROW),
            vt = tk_vec_type(TK_F32, 16, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *x = tk_hh_lds(g, sx, 16, g->D, TK_ROW, g->r0, i64c(k, 0));
    tk_value *init[3] = {tk_fill(k, vt, f32c(k, -INFINITY)), tk_zeros(k, vt), tk_zeros(k, ft)};
    tk_value *cur[3], *next[3], *fin[3];
    tk_value *p = tk_for_begin(k, i64c(k, 0), g->np, i64c(k, 1), 3, init, cur);
    {
        tk_value *p16 = tk_mul(k, p, i64c(k, 16));
        tk_value *t = piece_logits(g, x, sw, sbt, p16);
        tk_value *m = tk_max(k, cur[0], tk_col_max(k, tk_abs(k, t))); /* max(2y, -2y) */
        tk_value *ep = tk_exp2(k, tk_sub(k, t, m)), *en = tk_exp2(k, tk_sub(k, tk_neg(k, t), m));
        tk_value *s = tk_add(k, tk_col_sum(k, ep), tk_col_sum(k, en));
        next[0] = m; /* exp2(-inf) = 0 at the first piece */
        next[1] = tk_add(k, tk_mul(k, cur[1], tk_exp2(k, tk_sub(k, cur[0], m))), s);
        tk_value *hit = tk_eq(k, tk_hh_row_index(g), tk_cvt(k, p, TK_F32));
        next[2] = tk_select(k, hit, tk_add(k, tk_zeros(k, ft), m), cur[2]);
        tk_hh_sts(g, sp, p16, g->r0, ep);
        tk_hh_sts(g, sp, tk_add(k, p16, i64c(k, g->D)), g->r0, en);
    }
    tk_for_end(k, 3, next, fin);
    /* piece p's factor, row p: exp(its max - the token's) / the token's sum */
    return tk_mul(k, tk_exp2(k, tk_sub(k, fin[2], fin[0])), tk_div(k, f32c(k, 1.0f), fin[1]));
}

/* This warp's columns of sp times their pieces' factors, in place: φ
 * final. The same warp stored them before the barrier before this. */
void tk_hh_rescale(const tk_hh_fm *g, tk_value *sp, tk_value *facs) {
    tk_kernel *k = g->k;
    tk_value *p = tk_for_begin(k, i64c(k, 0), g->np, i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *hit = tk_eq(k, tk_hh_row_index(g), tk_cvt(k, p, TK_F32));
        tk_value *fac = tk_col_max(k, tk_select(k, hit, facs, f32c(k, 0.0f))); /* row p */
        tk_value *p16 = tk_mul(k, p, i64c(k, 16));
        for (int half = 0; half < 2; half++) {
            tk_value *r = half ? tk_add(k, p16, i64c(k, g->D)) : p16;
            tk_value *e = tk_cvt(k, tk_hh_lds(g, sp, 16, 16, TK_ROW, r, g->r0), TK_F32);
            tk_hh_sts(g, sp, r, g->r0, tk_mul(k, e, fac));
        }
    }
    tk_for_end(k, 0, NULL, NULL);
}

/* ---- TK_HEDGEHOG_MAP: the feature map alone, φᵀ to global memory ---------
 * The forward's maps of one chunk, in the same ops (so the same bits in the
 * same dtype), written out for the forward's phi mode to read instead of
 * mapping each chunk again in every value slice. Grid (Tp / C, H, B); rows
 * of X past T read as zeros, so the padding columns are φ(b), as the fused
 * forward's. */
static void build_map(tk_kernel *k, tk_dtype dt, int D, int W, bool bias) {
    const int C = 16 * W, F = 2 * D;
    tk_value *X = tk_param_tensor(k, "X", dt, 4), *Wx = tk_param_tensor(k, "Wx", dt, 3);
    tk_value *Bx = bias ? tk_param_tensor(k, "Bx", dt, 2) : NULL;
    tk_value *P = tk_param_tensor(k, "P", dt, 4);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, P, 3), i64c(k, C)), tk_dim(k, X, 1), tk_dim(k, X, 0));
    tk_value *c0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, C));
    tk_value *h = tk_block_id_i64(k, 1), *b = tk_block_id_i64(k, 2), *w = tk_warp_id_i64(k);
    /* D / 16 at run time, as the forward's (a rolled piece loop) */
    tk_value *np = tk_min(k, tk_div(k, tk_dim(k, Wx, 1), i64c(k, 16)), i64c(k, D / 16));
    tk_hh_fm g = {k, dt, D, w, tk_mul(k, w, i64c(k, 16)), np, h};
    tk_value *sw = tk_shared(k, dt, D, D, TK_SMEM_SWIZZLE, 1);
    tk_value *sp = tk_shared(k, dt, F, C, TK_SMEM_SWIZZLE, 1);
    tk_value *sx = tk_shared(k, dt, C, D, TK_SMEM_SWIZZLE, 1);
    tk_value *sb = bias ? tk_shared(k, dt, D, 16, TK_SMEM_SWIZZLE, 1) : NULL;
    tk_value *z = i64c(k, 0);
    tk_copy_to_shared(k, sw, Wx, ((tk_value *[]){tk_rem(k, h, tk_dim(k, Wx, 0)), z, z}), 0.0f,
                      TK_COPY_ASYNC);
    tk_copy_to_shared(k, sx, X, ((tk_value *[]){b, h, c0, z}), 0.0f, TK_COPY_ASYNC);
    tk_async_commit(k);
    if (bias) tk_hh_bias_cols(&g, Bx, sb, 0);
    tk_async_wait(k, 0);
    tk_barrier(k); /* W, x and the bias tile in place */
    tk_value *facs = tk_hh_feature_map(&g, sx, sw, sb, sp);
    tk_barrier(k); /* lanes: the rescale reads back the exps */
    tk_hh_rescale(&g, sp, facs);
    tk_barrier(k); /* φᵀ final in every warp's columns */
    tk_copy_to_global(k, P, ((tk_value *[]){b, h, z, c0}), sp);
}

size_t tk_hh_map_smem_bytes(const tk_hedgehog_config *c) {
    size_t D = (size_t)c->head_dim, C = 16 * (size_t)(c->warps ? c->warps : TK_HEDGEHOG_WARPS);
    return 2 * (D * D + 3 * C * D + (c->bias ? 16 * D : 0)); /* W, x, φᵀ [2D, C], b */
}

tk_status tk_hh_build_map(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out) {
    const char *fn = "tk_hedgehog_build";
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(c->dtype));
    if (c->head_dim != 64 && c->head_dim != 128)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: head_dim is %d; expected 64 or 128",
                                fn, c->head_dim);
    if (c->bias != 0 && c->bias != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bias is %d; expected 0 or 1", fn,
                                c->bias);
    int W = c->warps ? c->warps : TK_HEDGEHOG_WARPS;
    if (W != 1 && W != 2 && W != 4 && W != 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0, 1, 2, 4 or 8", fn, c->warps);
    char name[64];
    snprintf(name, sizeof name, "tk_hedgehog_map_%s_d%d_w%d%s", tk_dtype_name(c->dtype),
             c->head_dim, W, c->bias ? "_bias" : "");
    tk_kernel *k;
    tk_status s = tk_kernel_create(ctx, name, W, &k);
    if (s) return s;
    build_map(k, c->dtype, c->head_dim, W, c->bias);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
