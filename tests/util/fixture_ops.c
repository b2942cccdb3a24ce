/* The per-family op kernels of the lowering tests (tests/test_lower.c):
 * each builds a small kernel that exercises one op family on sm_80 and
 * sm_90a paths, plus the arguments a run against the interpreter needs
 * (random inputs, NaN-poisoned outputs). */
#include "util/fixture_ops.h"

#include <math.h>
#include <stdbool.h>

#include "util/fixture_ops_parts.h"

/* ids, constants, dims, scalar ops, scalar conversions, spec constants. */
tk_kernel *tu_ids(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_ids", 8, &k);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2);
    tk_value *np = tk_param_scalar(k, "n", TK_I32), *f = tk_param_scalar(k, "f", TK_F32);
    tk_value *flag = tk_param_scalar(k, "flag", TK_BOOL), *big = tk_param_scalar(k, "big", TK_I64);
    tk_value *sp = tk_spec(k, "sp", 3);
    tk_value *s = tk_add(k, tk_block_id(k, 0), tk_mul(k, tk_block_id(k, 1), c32(k, 2)));
    s = tk_add(k, s, tk_mul(k, tk_block_id(k, 2), c32(k, 3)));
    s = tk_rem(k, tk_add(k, s, tk_warp_id(k)), np);
    tk_value *cd = tk_ceil_div(k, s, c32(k, 4));
    tk_value *c1 = tk_lt(k, s, cd), *c2 = tk_ge(k, f, f32c(k, 0.5f));
    tk_value *c3 = tk_and(k, tk_or(k, c1, c2), tk_or(k, flag, tk_le(k, s, c32(k, 2))));
    tk_value *c4 = tk_and(k, tk_ne(k, i64(k, s), big), tk_eq(k, tk_gt(k, f, f32c(k, 0)), c2));
    tk_value *v = tk_select(k, c3, tk_cvt(k, cd, TK_F32), f);
    v = tk_add(k, v, tk_select(k, c4, f32c(k, 10), f32c(k, -10)));
    v = tk_add(k, v, tk_mul(k, tk_cvt(k, tk_warpgroup_id(k), TK_F32), f32c(k, 100)));
    v = tk_add(k, v, tk_cvt(k, tk_add(k, tk_dim(k, X, 0), sp), TK_F32));
    v = tk_add(k, v, tk_cvt(k, tk_add(k, tk_cvt(k, c3, TK_I32), tk_cvt(k, f, TK_I32)), TK_F32));
    /* ceil_div and rem for every sign: dividends 2, -1, ..., -10; divisors 4, -3, -1. */
    tk_value *neg = tk_sub(k, c32(k, 2), tk_mul(k, s, c32(k, 3)));
    tk_value *q = tk_add(k, tk_ceil_div(k, neg, c32(k, 4)),
                         tk_mul(k, tk_ceil_div(k, neg, c32(k, -3)), c32(k, 16)));
    tk_value *q2 = tk_add(k, tk_ceil_div(k, neg, c32(k, -1)), tk_rem(k, neg, c32(k, -3)));
    q = tk_add(k, q, tk_mul(k, q2, c32(k, 256)));
    v = tk_add(k, v, tk_cvt(k, q, TK_F32));
    /* Truncating div for both signs, and INT_MIN / -1 (wraps to INT_MIN),
     * with run-time operands (n = 5) so LLVM cannot fold them. */
    tk_value *q3 =
        tk_add(k, tk_mul(k, tk_div(k, neg, c32(k, -3)), c32(k, 7)), tk_div(k, neg, c32(k, 4)));
    tk_value *imin = tk_sub(k, c32(k, INT32_MIN + 5), np), *m1 = tk_sub(k, c32(k, 4), np);
    tk_value *wraps = tk_eq(k, tk_div(k, imin, m1), c32(k, INT32_MIN));
    q3 = tk_add(k, q3, tk_mul(k, tk_cvt(k, wraps, TK_I32), c32(k, 1000)));
    v = tk_add(k, v, tk_mul(k, tk_cvt(k, q3, TK_F32), f32c(k, 4096)));
    tk_value *lane = tk_lane_id(k); /* per-thread: used only as a scalar */
    (void)tk_add(k, lane, c32(k, 1));
    tk_value *tile = tk_fill(k, tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW), v);
    tk_value *blk = tk_add(
        k,
        tk_mul(k, tk_add(k, tk_mul(k, tk_block_id(k, 2), c32(k, 2)), tk_block_id(k, 1)), c32(k, 2)),
        tk_block_id(k, 0));
    tk_value *row = tk_add(k, tk_mul(k, i64(k, blk), c64(k, 128)),
                           tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 16)));
    tk_value *idx[2] = {row, c64(k, 0)};
    tk_store(k, X, idx, tile);
    tk_set_grid(k, c64(k, 2), c32(k, 2), c32(k, 2));
    (void)dt;
    int64_t d[2] = {1024, 16};
    ts[0] = tensor(TK_F32, 2, d, 1);
    sc[1] = tk_arg_i32(5), sc[2] = tk_arg_f32(0.75f), sc[3] = tk_arg_i32(1), sc[4] = tk_arg_i64(2);
    sc[3].dtype = TK_BOOL; /* bool travels as an i32 */
    ts[1] = ts[2] = ts[3] = ts[4] = (ref_tensor){0};
    *n = 5;
    return finish(k);
}

/* Elementwise ops: every shape combination, ROW and COL layouts, warp and
 * warpgroup tiles, 16-bit arithmetic and conversions. */
tk_kernel *tu_elementwise(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_ew", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *O2 = tk_param_tensor(k, "O2", dt, 2), *V = tk_param_tensor(k, "V", TK_F32, 1);
    tk_value *P = tk_param_tensor(k, "P", TK_F32, 2), *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *row = band(k, 64, 16), *idx[2] = {row, c64(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), X, idx, 0.5f);
    tk_value *xc = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_COL), X, idx, -0.5f);
    tk_value *a = tk_cvt(k, x, TK_F32);
    a = tk_add(k, tk_mul(k, a, a), tk_sub(k, s, a));
    a = tk_div(k, a, tk_add(k, tk_abs(k, a), s));
    a = tk_max(k, tk_min(k, a, s), tk_neg(k, tk_exp(k, a)));
    a = tk_add(k, a, tk_mul(k, tk_log(k, tk_add(k, tk_abs(k, a), s)), tk_exp2(k, a)));
    a = tk_add(k, a, tk_mul(k, tk_sqrt(k, tk_abs(k, a)), tk_rsqrt(k, tk_add(k, tk_abs(k, a), s))));
    a = tk_add(k, a, tk_log2(k, tk_add(k, tk_abs(k, a), s)));
    a = tk_add(k, a, tk_cvt(k, tk_sin(k, x), TK_F32)); /* 16-bit sin */
    tk_value *rm = tk_row_max(k, a), *cs = tk_col_sum(k, a);
    a = tk_add(k, tk_sub(k, a, rm), cs);
    a = tk_mul(k, cs, tk_sub(k, rm, a)); /* vec∘tile */
    tk_value *vv = tk_max(k, tk_mul(k, tk_add(k, rm, rm), s), tk_cos(k, tk_sub(k, s, rm)));
    tk_value *hb = tk_add(k, tk_mul(k, x, x), s); /* 16-bit tile ∘ f32 scalar */
    hb = tk_cvt(k, tk_cvt(k, hb, dt == TK_BF16 ? TK_F16 : TK_BF16), dt);
    a = tk_add(k, a, tk_cvt(k, hb, TK_F32));
    a = tk_add(k, a, tk_fill(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW), s));
    tk_store(k, O, idx, a);
    tk_value *vi = row;
    tk_store_n(k, V, 1, &vi, vv);
    tk_value *ac = tk_mul(k, tk_cvt(k, xc, TK_F32), s); /* COL layout */
    ac = tk_sub(k, ac, tk_row_sum(k, ac));
    ac = tk_mul(k, ac, tk_col_max(k, ac));
    tk_store(k, O2, idx, tk_cvt(k, ac, dt));
    tk_value *widx[2] = {tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 64)), c64(k, 0)};
    tk_value *w = tk_cvt(
        k, tk_load(k, tk_tile_type(dt, 64, 64, TK_WARPGROUP, TK_ROW), X, widx, 0.0f), TK_F32);
    w = tk_sub(k, w, tk_row_max(k, w));
    tk_store(k, P, widx, tk_exp(k, w));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 64)), NULL, NULL);
    int64_t d[2] = {90, 60}, dv[1] = {90};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(TK_F32, 2, d, 1);
    ts[2] = tensor(dt, 2, d, 1);
    ts[3] = tensor(TK_F32, 1, dv, 1);
    ts[4] = tensor(TK_F32, 2, d, 1);
    ts[5] = (ref_tensor){0};
    sc[5] = tk_arg_f32(1.25f);
    *n = 6;
    return finish(k);
}

/* sin/cos at rotary-embedding angles: X in [-1, 1] times s = 1e5 (f32
 * tiles, both layouts), and of scalars. dt is unused: 16-bit sin/cos are in
 * tu_elementwise. */
tk_kernel *tu_trig(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_trig", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *S = tk_param_tensor(k, "S", TK_F32, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2), *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *row = band(k, 64, 16), *idx[2] = {row, c64(k, 0)};
    tk_value *a =
        tk_mul(k, tk_load(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW), X, idx, 0.0f), s);
    tk_value *ac =
        tk_mul(k, tk_load(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_COL), X, idx, 0.0f), s);
    tk_value *ss = tk_fill(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW), tk_sin(k, s));
    tk_store(k, S, idx, tk_add(k, tk_sin(k, a), tk_mul(k, ss, f32c(k, 0.25f))));
    tk_store(k, C, idx, tk_cos(k, ac));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 64)), NULL, NULL);
    (void)dt;
    int64_t d[2] = {100, 64};
    for (int i = 0; i < 3; i++) ts[i] = tensor(TK_F32, 2, d, i > 0); /* X; S, C poisoned */
    ts[3] = (ref_tensor){0};
    sc[3] = tk_arg_f32(1e5f);
    *n = 4;
    return finish(k);
}

/* Reductions of both layouts (max_all of a tile and a vector), masks, vector loads/stores
 * of both axes. */
tk_kernel *tu_reduce(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_red", 2, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 3), *R = tk_param_tensor(k, "R", TK_F32, 3);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 3), *M = tk_param_tensor(k, "M", TK_F32, 3);
    tk_value *b = i64(k, tk_block_id(k, 1)), *row = band(k, 64, 32);
    tk_value *idx[3] = {b, row, c64(k, 0)};
    tk_value *xr = tk_load(k, tk_tile_type(dt, 32, 48, TK_WARP, TK_ROW), X, idx, 0.0f);
    tk_value *x = tk_cvt(k, xr, TK_F32);
    tk_value *xc =
        tk_cvt(k, tk_load(k, tk_tile_type(dt, 32, 48, TK_WARP, TK_COL), X, idx, 0.0f), TK_F32);
    tk_value *r0[3] = {b, c64(k, 0), row}, *r1[3] = {b, c64(k, 1), row};
    tk_store(k, R, r0, tk_add(k, tk_row_max(k, x), tk_row_sum(k, x)));
    tk_store(k, R, r1, tk_sub(k, tk_row_max(k, xc), tk_row_sum(k, xc)));
    tk_value *crow =
        tk_add(k, tk_mul(k, b, c64(k, 8)), tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 2)));
    crow = tk_add(k, crow, i64(k, tk_warp_id(k)));
    tk_value *c0[3] = {c64(k, 0), crow, c64(k, 0)}, *c1[3] = {c64(k, 1), crow, c64(k, 0)};
    tk_value *cv = tk_add(k, tk_col_max(k, x), tk_col_sum(k, x));
    tk_value *cv2 = tk_load(k, tk_vec_type(TK_F32, 48, TK_PER_COL, TK_WARP, TK_ROW), C, c0, 1.0f);
    tk_store(k, C, c0, tk_sub(k, cv, cv2));
    tk_store(k, C, c1, tk_mul(k, tk_col_max(k, xc), tk_col_sum(k, xc)));
    tk_value *m = tk_mask(k, x, TK_MASK_CAUSAL, row, c64(k, 3), -INFINITY);
    m = tk_mask(k, m, TK_MASK_COLS, c32(k, 5), c32(k, 40), -2.0f);
    m = tk_mask(k, m, TK_MASK_ROWS, row, tk_sub(k, tk_dim(k, X, 1), c64(k, 2)), 7.0f);
    tk_value *mc = tk_mask(k, xc, TK_MASK_CAUSAL, row, c64(k, 0), -3.0f);
    mc = tk_mask(k, mc, TK_MASK_ROWS, c32(k, 1), i64(k, tk_const_i32(k, 60)), 4.0f);
    m = tk_sub(k, m, tk_max_all(k, m));                               /* max_all: f32 tile */
    tk_store(k, M, idx, tk_exp2(k, tk_add(k, m, tk_max_all(k, xr)))); /* 16-bit tile */
    tk_value *mi[3] = {tk_add(k, b, c64(k, 2)), row, c64(k, 0)};
    tk_store(k, M, mi,
             tk_add(k, tk_cvt(k, tk_cvt(k, mc, dt), TK_F32),
                    tk_max_all(k, tk_row_sum(k, xc)))); /* max_all: vector */
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 1), c64(k, 64)), tk_cvt(k, tk_dim(k, X, 0), TK_I32),
                NULL);
    int64_t d[3] = {2, 70, 48}, r3[3] = {2, 2, 70}, c3[3] = {2, 24, 48}, m3[3] = {4, 70, 48};
    ts[0] = tensor(dt, 3, d, 0);
    ts[1] = tensor(TK_F32, 3, r3, 1);
    ts[2] = tensor(TK_F32, 3, c3, 0);
    ts[3] = tensor(TK_F32, 3, m3, 1);
    (void)sc;
    *n = 4;
    return finish(k);
}

/* All four mma kinds, warp and warpgroup A. */
tk_kernel *tu_mma(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_mma", 4, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *B = tk_param_tensor(k, "B", dt, 2);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *W = tk_param_tensor(k, "W", TK_F32, 2);
    tk_value *z[2] = {c64(k, 0), c64(k, 0)};
    tk_value *ar = tk_load(k, tk_tile_type(dt, 32, 48, TK_WARP, TK_ROW), A, z, 0.0f);
    tk_value *ac = tk_load(k, tk_tile_type(dt, 48, 32, TK_WARP, TK_COL), A, z, 0.0f);
    tk_value *br = tk_load(k, tk_tile_type(dt, 64, 48, TK_WARP, TK_ROW), B, z, 0.0f);
    tk_value *bc = tk_load(k, tk_tile_type(dt, 48, 64, TK_WARP, TK_COL), B, z, 0.0f);
    tk_value *c = tk_mma(k, TK_MMA_AB, ar, bc, tk_mma(k, TK_MMA_ABT, ar, br, NULL));
    tk_value *d = tk_mma(k, TK_MMA_ATBT, ac, br, tk_mma(k, TK_MMA_ATB, ac, bc, NULL));
    /* each warp its own 32-row band of O: the race checker rejects warps writing one element */
    tk_value *ow[2] = {tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 32)), c64(k, 0)};
    tk_store(k, O, ow, tk_sub(k, c, tk_mul(k, d, f32c(k, 0.5f))));
    tk_value *aw = tk_load(k, tk_tile_type(dt, 64, 48, TK_WARPGROUP, TK_ROW), A, z, 0.0f);
    tk_store(k, W, z, tk_mma(k, TK_MMA_AB, aw, bc, NULL));
    tk_set_grid(k, NULL, NULL, NULL);
    int64_t da[2] = {48, 48}, db[2] = {64, 64}, dout[2] = {128, 64}, dw[2] = {48, 64};
    ts[0] = tensor(dt, 2, da, 0);
    ts[1] = tensor(dt, 2, db, 0);
    ts[2] = tensor(TK_F32, 2, dout, 1);
    ts[3] = tensor(TK_F32, 2, dw, 1);
    (void)sc;
    *n = 4;
    return finish(k);
}

/* Global -> shared (sync, cp.async, the copy engine; every layout, 16-bit and f32, stages,
 * ragged edges) -> registers (ROW and COL, aligned and not) -> shared ->
 * global, and register stores to global. l2: the tensors' L2 policies set
 * (tk_param_set_cache), which puts a policy on each of those copy paths. */
static tk_kernel *memory(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, int *n, bool l2) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_mem", 4, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *B = tk_param_tensor(k, "B", TK_F32, 2);
    tk_value *O = tk_param_tensor(k, "O", dt, 2), *P = tk_param_tensor(k, "P", TK_F32, 2);
    tk_value *Q = tk_param_tensor(k, "Q", TK_F32, 2);
    if (l2) {
        tk_param_set_cache(k, A, TK_CACHE_STREAM), tk_param_set_cache(k, B, TK_CACHE_KEEP);
        tk_param_set_cache(k, O, TK_CACHE_STREAM), tk_param_set_cache(k, P, TK_CACHE_KEEP);
    }
    tk_value *sw = tk_shared(k, dt, 64, 64, TK_SMEM_SWIZZLE, 2);
    tk_value *pad = tk_shared(k, dt, 64, 64, TK_SMEM_PAD, 1);
    tk_value *pl = tk_shared(k, dt, 64, 64, TK_SMEM_PLAIN, 1);
    tk_value *fs = tk_shared(k, TK_F32, 64, 32, TK_SMEM_SWIZZLE, 1);
    tk_value *fp = tk_shared(k, TK_F32, 64, 32, TK_SMEM_PAD, 1);
    tk_value *row0 = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 64));
    tk_value *wr = tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 16));
    tk_value *g0[2] = {row0, c64(k, 0)}, *g1[2] = {row0, c64(k, 64)};
    tk_value *st0 = tk_stage(k, sw, c32(k, 0)), *st1 = tk_stage(k, sw, c32(k, 1));
    tk_copy_to_shared(k, st0, A, g0, 0.0f, TK_COPY_TMA); /* the copy engine on sm_90 */
    tk_async_commit(k);
    tk_copy_to_shared(k, st1, A, g1, 0.0f, TK_COPY_TMA); /* ... past the right edge */
    tk_async_commit(k);
    tk_copy_to_shared(k, pad, A, g1, -1.0f, 0);
    tk_copy_to_shared(k, pl, A, g0, 2.0f, 0);
    tk_copy_to_shared(k, fs, B, g0, 0.5f, 0);
    tk_copy_to_shared(k, fp, B, g0, 0.0f, 1);
    tk_async_commit(k);
    tk_async_wait(k, 1);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *si[2] = {wr, c64(k, 0)}, *su[2] = {wr, c64(k, 4)};
    tk_type r64 = tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW);
    tk_type c64t = tk_tile_type(dt, 16, 64, TK_WARP, TK_COL);
    tk_value *a = tk_load(k, r64, st0, si, 0), *b = tk_load(k, c64t, pad, si, 0);
    tk_value *c = tk_load(k, r64, pl, si, 0), *d = tk_load(k, c64t, st1, si, 0);
    tk_value *e = tk_load(k, tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_ROW), fs, si, 0);
    tk_value *f = tk_load(k, tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_COL), fp, si, 0);
    tk_value *u = tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_ROW), pl, su, 0);
    tk_value *uc = tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_COL), st1, su, 0);
    tk_barrier(k);
    tk_store(k, pl, si, tk_cvt(k, tk_add(k, tk_cvt(k, a, TK_F32), tk_cvt(k, c, TK_F32)), dt));
    tk_store(k, pad, si, tk_cvt(k, tk_add(k, tk_cvt(k, b, TK_F32), tk_cvt(k, d, TK_F32)), dt));
    tk_store(k, fs, si, tk_mul(k, e, f32c(k, 2)));
    tk_store(k, fp, si, tk_add(k, f, f32c(k, 1)));
    tk_store(k, st0, su, u);
    tk_store(k, st1, su, uc);
    tk_barrier(k);
    tk_copy_to_global(k, O, g0, pl);
    tk_copy_to_global(k, P, g0, fs);
    tk_value *rw = tk_add(k, row0, wr);
    tk_value *q[4][2] = {{rw, c64(k, 0)}, {rw, c64(k, 64)}, {rw, c64(k, 96)}, {rw, c64(k, 160)}};
    tk_store(k, Q, q[0], tk_cvt(k, tk_load(k, c64t, pad, si, 0), TK_F32));
    tk_store(k, Q, q[1], tk_load(k, tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_COL), fp, si, 0));
    tk_store(k, Q, q[2], tk_cvt(k, tk_load(k, r64, st0, si, 0), TK_F32));
    tk_store(k, Q, q[3], tk_cvt(k, tk_load(k, c64t, st1, si, 0), TK_F32));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, A, 0), c64(k, 64)), NULL, NULL);
    int64_t da[2] = {100, 120}, db[2] = {100, 40}, dout[2] = {100, 64}, dp[2] = {100, 30},
            dq[2] = {100, 224};
    ts[0] = tensor(dt, 2, da, 0);
    ts[1] = tensor(TK_F32, 2, db, 0);
    ts[2] = tensor(dt, 2, dout, 1);
    ts[3] = tensor(TK_F32, 2, dp, 1);
    ts[4] = tensor(TK_F32, 2, dq, 1);
    *n = 5;
    return finish(k);
}

tk_kernel *tu_memory(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    (void)sc;
    return memory(ctx, dt, ts, n, false);
}

tk_kernel *tu_memory_l2(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    (void)sc;
    return memory(ctx, dt, ts, n, true);
}

/* Views that defeat every fast path: column-major (non-unit column
 * stride), and rows padded to a misaligned pitch. */
tk_kernel *tu_strided(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_strided", 2, &k);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *P = tk_param_tensor(k, "P", dt, 2), *Q = tk_param_tensor(k, "Q", dt, 2);
    tk_value *sm = tk_shared(k, dt, 32, 32, TK_SMEM_SWIZZLE, 1);
    tk_value *row0 = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 32));
    tk_value *g[2] = {row0, c64(k, 16)};
    /* asks for the copy engine, which cannot read a column-major tensor: the
     * launch encodes no map and the copy takes the cp.async path */
    tk_copy_to_shared(k, sm, A, g, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_copy_to_global(k, O, g, sm);
    tk_value *r[2] = {tk_add(k, row0, tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 16))), c64(k, 8)};
    tk_value *x = tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_ROW), A, r, 3.0f);
    tk_store(k, P, r, x);
    tk_store(k, Q, r, tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_COL), P, r, 0.0f));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, A, 0), c64(k, 32)), NULL, NULL);
    int64_t d[2] = {50, 40};
    int colmajor[2] = {1, 0}, rowmajor[2] = {0, 1};
    ts[0] = ref_tensor_new_layout(dt, 2, d, colmajor, 0);
    ref_tensor_random(&ts[0], -1.0, 1.0);
    ts[1] = ref_tensor_new_layout(dt, 2, d, colmajor, 0);
    ts[2] = ref_tensor_new_layout(dt, 2, d, rowmajor, 3);
    ts[3] = ref_tensor_new_layout(dt, 2, d, colmajor, 1);
    for (int i = 1; i < 4; i++) ref_tensor_fill_all(&ts[i], NAN);
    (void)sc;
    *n = 4;
    return finish(k);
}

/* k-tile kt of A and B into ring stage kt % 3, if kt < nk; one group. */
static void pipe_load(tk_kernel *k, tk_value *const *s, tk_value *const *v, tk_value *row0,
                      tk_value *kt, tk_value *nk) {
    tk_if_begin(k, tk_lt(k, kt, nk));
    tk_value *st = tk_cvt(k, tk_rem(k, kt, c64(k, 3)), TK_I32);
    tk_value *g[2] = {row0, tk_mul(k, kt, c64(k, 64))};
    for (int i = 0; i < 2; i++)
        tk_copy_to_shared(k, tk_stage(k, s[i], st), v[i], g, 0.0f, TK_COPY_TMA);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* A k-loop shaped like the GEMM's: ring stages filled two k-tiles ahead
 * through the copy engine, then a shared store, a barrier and a block copy
 * out. On sm_90a it is warp-specialized (jit/plan.c): the producer's slice is
 * the loop, the stage index and the copies; the consumers' barriers also
 * sync them with each other (they write shared memory). B is column-major,
 * so the launch encodes no map for it and its copies take the producer
 * warp's fallback, element by element; the last k-tile and the second
 * block's rows are ragged. */
tk_kernel *tu_pipe(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_pipe", 8, &k);
    tk_value *v[2] = {tk_param_tensor(k, "A", dt, 2), tk_param_tensor(k, "B", dt, 2)};
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *s[2] = {tk_shared(k, dt, 128, 64, TK_SMEM_SWIZZLE, 3),
                      tk_shared(k, dt, 128, 64, TK_SMEM_SWIZZLE, 3)};
    tk_value *so = tk_shared(k, TK_F32, 128, 64, TK_SMEM_PLAIN, 1);
    tk_value *row0 = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 128));
    tk_value *nk = tk_ceil_div(k, tk_dim(k, v[0], 1), c64(k, 64));
    for (int i = 0; i < 2; i++) pipe_load(k, s, v, row0, c64(k, i), nk);
    tk_type t = tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW);
    tk_type r = tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW);
    tk_value *si[2] = {tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 16)), c64(k, 0)};
    tk_value *init[1] = {tk_zeros(k, t)}, *cur[1], *next[1], *fin[1];
    tk_value *kt = tk_for_begin(k, c64(k, 0), nk, c64(k, 1), 1, init, cur);
    tk_async_wait(k, 1); /* groups: 2 + kt committed, k-tile kt is group kt */
    tk_barrier(k);
    tk_value *st = tk_cvt(k, tk_rem(k, kt, c64(k, 3)), TK_I32);
    tk_value *a = tk_cvt(k, tk_load(k, r, tk_stage(k, s[0], st), si, 0), TK_F32);
    tk_value *b = tk_cvt(k, tk_load(k, r, tk_stage(k, s[1], st), si, 0), TK_F32);
    next[0] = tk_add(k, cur[0], tk_add(k, a, tk_mul(k, b, f32c(k, 2))));
    pipe_load(k, s, v, row0, tk_add(k, kt, c64(k, 2)), nk); /* the stage read a trip ago */
    tk_for_end(k, 1, next, fin);
    tk_store(k, so, si, fin[0]);
    tk_barrier(k);
    tk_value *g0[2] = {row0, c64(k, 0)};
    tk_copy_to_global(k, O, g0, so);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, v[0], 0), c64(k, 128)), NULL, NULL);
    int64_t d[2] = {300, 200}, dout[2] = {300, 64};
    int colmajor[2] = {1, 0};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = ref_tensor_new_layout(dt, 2, d, colmajor, 0);
    ref_tensor_random(&ts[1], -1.0, 1.0);
    ts[2] = tensor(TK_F32, 2, dout, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

/* Loops carrying tiles, vectors and scalars; if/else with yields; an if
 * without else; nesting. */
tk_kernel *tu_control(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_ctl", 2, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *V = tk_param_tensor(k, "V", TK_F32, 1), *E = tk_param_tensor(k, "E", TK_F32, 2);
    tk_value *trips = tk_param_scalar(k, "trips", TK_I32);
    tk_value *row = band(k, 32, 16), *idx[2] = {row, c64(k, 0)};
    tk_type t = tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_ROW);
    tk_value *x =
        tk_cvt(k, tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_ROW), X, idx, 0), TK_F32);
    tk_value *init[3] = {tk_zeros(k, t),
                         tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW)),
                         f32c(k, 0)};
    tk_value *cur[3], *next[3], *fin[3];
    tk_value *i = tk_for_begin(k, c32(k, 0), trips, c32(k, 1), 3, init, cur);
    tk_value *xi = tk_mul(k, x, tk_cvt(k, tk_add(k, i, c32(k, 1)), TK_F32)), *y;
    tk_if_begin(k, tk_lt(k, i, c32(k, 2)));
    tk_value *y1 = tk_add(k, xi, f32c(k, 1));
    tk_else(k, 1, &y1);
    tk_value *y2 = tk_sub(k, xi, tk_row_max(k, xi));
    tk_if_end(k, 1, &y2, &y);
    tk_if_begin(k, tk_eq(k, tk_rem(k, i, c32(k, 2)), c32(k, 0)));
    tk_store(k, E, idx, y);
    tk_if_end(k, 0, NULL, NULL);
    tk_value *s0 = cur[2], *sc_cur, *sc_fin;
    tk_value *j = tk_for_begin(k, c64(k, 0), c64(k, 3), c64(k, 1), 1, &s0, &sc_cur);
    tk_value *sn = tk_add(k, sc_cur, tk_cvt(k, j, TK_F32));
    tk_for_end(k, 1, &sn, &sc_fin);
    next[0] = tk_add(k, cur[0], y);
    next[1] = tk_add(k, cur[1], tk_row_sum(k, y));
    next[2] = sc_fin;
    tk_for_end(k, 3, next, fin);
    tk_store(k, O, idx, tk_add(k, fin[0], fin[2]));
    tk_store_n(k, V, 1, &row, fin[1]);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 32)), NULL, NULL);
    int64_t d[2] = {40, 32}, dv[1] = {40};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(TK_F32, 2, d, 1);
    ts[2] = tensor(TK_F32, 1, dv, 1);
    ts[3] = tensor(TK_F32, 2, d, 1);
    ts[4] = (ref_tensor){0};
    sc[4] = tk_arg_i32(5);
    *n = 5;
    return finish(k);
}

/* Epilogue ops: compares (tile∘scalar, tile∘vec, COL), select (leaky ReLU,
 * where), masks to 0/1, tanh / erf (GELU) / sigmoid (SiLU) on f32 and
 * 16-bit tiles, slices and concats of warp and warpgroup tiles. */
tk_kernel *tu_epilogue(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_epi", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *W = tk_param_tensor(k, "W", TK_F32, 2), *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *row = band(k, 128, 32), *idx[2] = {row, c64(k, 0)};
    tk_value *xh = tk_load(k, tk_tile_type(dt, 32, 64, TK_WARP, TK_ROW), X, idx, 0.25f);
    tk_value *x = tk_mul(k, tk_cvt(k, xh, TK_F32), s), *z = f32c(k, 0);
    tk_value *leaky = tk_select(k, tk_gt(k, x, z), x, tk_mul(k, x, f32c(k, 0.1f)));
    tk_value *gelu = tk_mul(k, tk_mul(k, x, f32c(k, 0.5f)),
                            tk_add(k, tk_erf(k, tk_mul(k, x, f32c(k, 0.70710678f))), f32c(k, 1)));
    tk_value *silu = tk_mul(k, x, tk_sigmoid(k, x));
    tk_value *m = tk_cvt(k, tk_ge(k, x, tk_row_max(k, tk_mul(k, x, f32c(k, 0.5f)))), TK_F32);
    tk_value *w = tk_select(k, tk_le(k, x, f32c(k, -0.5f)), f32c(k, -1), tk_tanh(k, x));
    tk_value *h = tk_cvt(k, tk_add(k, tk_tanh(k, xh), tk_sigmoid(k, xh)), TK_F32); /* 16-bit */
    h = tk_add(k, h, tk_cvt(k, tk_select(k, tk_lt(k, xh, s), xh, f32c(k, 2)), TK_F32));
    tk_value *a = tk_add(k, tk_add(k, leaky, gelu), tk_add(k, silu, m));
    tk_value *xc = tk_load(k, tk_tile_type(TK_F32, 32, 64, TK_WARP, TK_COL), W, idx, 0.0f);
    tk_value *c = tk_select(k, tk_ne(k, xc, tk_col_sum(k, xc)), tk_erf(k, xc), z); /* COL */
    tk_value *top = tk_slice(k, a, 0, 16, 16, 32), *bot = tk_slice(k, w, 16, 0, 16, 32);
    tk_value *j = tk_concat(k, 1, tk_concat(k, 0, top, bot), tk_slice(k, h, 0, 32, 32, 32));
    tk_value *o[3][2] = {{row, c64(k, 0)}, {row, c64(k, 64)}, {row, c64(k, 128)}};
    tk_store(k, O, o[0], j);
    tk_store(k, O, o[1], tk_add(k, tk_add(k, a, w), h));
    tk_value *ch = tk_cvt(k, tk_cvt(k, c, dt), TK_F32); /* rounded: a 16-bit half */
    tk_store(k, O, o[2],
             tk_concat(k, 0, tk_slice(k, c, 16, 0, 16, 64), tk_slice(k, ch, 0, 0, 16, 64)));
    tk_value *wr = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 128)), *wi[2] = {wr, c64(k, 192)};
    tk_value *gi[2] = {wr, c64(k, 0)}; /* warpgroup-uniform */
    tk_value *g = tk_load(k, tk_tile_type(dt, 128, 32, TK_WARPGROUP, TK_ROW), X, gi, 0.0f);
    tk_value *gf = tk_cvt(k, g, TK_F32);
    tk_value *sw = tk_concat(k, 0, tk_slice(k, gf, 64, 0, 64, 32), tk_slice(k, gf, 0, 0, 64, 32));
    sw = tk_concat(k, 1, tk_slice(k, sw, 0, 16, 128, 16), tk_slice(k, gf, 0, 0, 128, 16));
    tk_store(k, O, wi, tk_select(k, tk_gt(k, sw, gf), sw, tk_tanh(k, gf)));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 128)), NULL, NULL);
    int64_t d[2] = {200, 64}, dout[2] = {200, 224};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(TK_F32, 2, dout, 1);
    ts[2] = tensor(TK_F32, 2, d, 0);
    ts[3] = (ref_tensor){0};
    sc[3] = tk_arg_f32(2.5f);
    *n = 4;
    return finish(k);
}

/* Scalar loads (tk_load of a scalar type): a table of i32 row numbers
 * (some before or past X and W: they read the fill) picks, per warp, the
 * rows of X to copy and an f32 weight from W; the loaded values drive
 * indices and a loop's bound. */
tk_kernel *tu_gather(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_gather", 4, &k);
    tk_value *T = tk_param_tensor(k, "T", TK_I32, 2), *X = tk_param_tensor(k, "X", dt, 2);
    tk_value *W = tk_param_tensor(k, "W", TK_F32, 1), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *ti[2] = {tk_block_id(k, 0), tk_warp_id(k)};
    tk_value *row = tk_load(k, tk_scalar_type(TK_I32), T, ti, -7.0f); /* past dim 1: the fill */
    tk_value *wi[1] = {row};
    tk_value *w = tk_load(k, tk_scalar_type(TK_F32), W, wi, 0.25f);
    tk_type t = tk_tile_type(dt, 16, 32, TK_WARP, TK_ROW);
    tk_value *xi[2] = {i64(k, row), c64(k, 0)};
    tk_value *x = tk_mul(k, tk_cvt(k, tk_load(k, t, X, xi, 0.0f), TK_F32), w);
    tk_value *reps = tk_add(k, tk_rem(k, tk_max(k, row, c32(k, 0)), c32(k, 3)), c32(k, 1));
    tk_value *init[1] = {x}, *cur[1], *next[1], *fin[1];
    tk_for_begin(k, c32(k, 0), reps, c32(k, 1), 1, init, cur); /* x * (reps + 1) */
    next[0] = tk_add(k, cur[0], x);
    tk_for_end(k, 1, next, fin);
    tk_value *oi[2] = {
        tk_mul(k, i64(k, tk_add(k, tk_mul(k, tk_block_id(k, 0), c32(k, 4)), tk_warp_id(k))),
               c64(k, 16)),
        c64(k, 0)};
    tk_store(k, O, oi, fin[0]);
    tk_set_grid(k, tk_dim(k, T, 0), NULL, NULL);
    int64_t dtab[2] = {5, 3}, dx[2] = {40, 32}, dw[1] = {30}, dout[2] = {5 * 4 * 16, 32};
    ts[0] = ref_tensor_new(TK_I32, 2, dtab);
    ref_tensor_random(&ts[0], -3.0, 45.0); /* rows -2 .. 44: some before X, some past it */
    ts[1] = tensor(dt, 2, dx, 0);
    ts[2] = tensor(TK_F32, 1, dw, 0);
    ts[3] = tensor(TK_F32, 2, dout, 1);
    (void)sc;
    *n = 4;
    return finish(k);
}

/* tk_narrow on packed sequences: sequence b is X's rows [OFF[b], OFF[b+1])
 * (scalar loads of a table whose last offset runs past X: clamped). Block
 * (b, t, c) narrows X to it, then to the columns [16, 116), copies that
 * view's 128x64 tile (t, c) with TK_COPY_TMA, and each warp stores 16 rows
 * of it through the same narrowing of O (what lies outside: NaN stays) and
 * into the block's own tile of S (what the view does not cover: the fill).
 * The copy engine reads X's map at coordinates moved by the view's origin;
 * a tile crossing the sequence's end or column 116 (every c = 1, each
 * sequence's last) takes cp.async at run time. Eight warps: on sm_90a a
 * producer warpgroup runs the table's loads, the narrows and the copies
 * (jit/plan.c). */
tk_kernel *tu_narrow(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_narrow", 8, &k);
    tk_value *sm = tk_shared(k, dt, 128, 64, TK_SMEM_SWIZZLE, 1); /* first: 1024-byte aligned */
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *OFF = tk_param_tensor(k, "OFF", TK_I32, 1);
    tk_value *O = tk_param_tensor(k, "O", dt, 2), *S = tk_param_tensor(k, "S", dt, 3);
    tk_value *b = tk_block_id(k, 0), *gy = tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 128));
    tk_value *i0[1] = {b}, *i1[1] = {tk_add(k, b, c32(k, 1))};
    tk_value *s = tk_load(k, tk_scalar_type(TK_I32), OFF, i0, 0.0f);
    tk_value *len = tk_sub(k, tk_load(k, tk_scalar_type(TK_I32), OFF, i1, 0.0f), s);
    tk_value *xs = tk_narrow(k, X, 0, s, len), *os = tk_narrow(k, O, 0, s, len);
    tk_value *xc = tk_narrow(k, xs, 1, c64(k, 16), c64(k, 100));
    tk_value *oc = tk_narrow(k, os, 1, c64(k, 16), c64(k, 100));
    tk_value *t = i64(k, tk_block_id(k, 1)), *c = i64(k, tk_block_id(k, 2));
    tk_value *g[2] = {tk_mul(k, t, c64(k, 128)), tk_mul(k, c, c64(k, 64))};
    tk_copy_to_shared(k, sm, xc, g, 0.0f, TK_COPY_TMA);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *wr = tk_mul(k, i64(k, tk_warp_id(k)), c64(k, 16));
    tk_value *si[2] = {wr, c64(k, 0)}, *oi[2] = {tk_add(k, g[0], wr), g[1]};
    tk_value *x = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), sm, si, 0);
    tk_store(k, oc, oi, x);
    tk_value *lin = tk_add(k, tk_mul(k, tk_add(k, tk_mul(k, i64(k, b), gy), t), c64(k, 2)), c);
    tk_value *at[3] = {lin, wr, c64(k, 0)};
    tk_store(k, S, at, x);
    tk_set_grid(k, tk_sub(k, tk_dim(k, OFF, 0), c64(k, 1)), gy, c64(k, 2));
    /* five sequences after a gap: short, empty, long (a whole tile on the
     * engine and a ragged one), short, and one past X's last row */
    int64_t lens[4] = {ref_randint(1, 40), 0, ref_randint(130, 200), ref_randint(1, 60)};
    int64_t doff[1] = {6}, offs[6] = {ref_randint(0, 5)};
    for (int i = 0; i < 4; i++) offs[i + 1] = offs[i] + lens[i];
    int64_t dx[2] = {offs[4] + ref_randint(0, 20), 128}, nblk = 5 * ((dx[0] + 127) / 128) * 2;
    offs[5] = dx[0] + ref_randint(1, 40);
    ts[1] = ref_tensor_new(TK_I32, 1, doff);
    for (int i = 0; i < 6; i++) ref_tensor_set(&ts[1], i, (double)offs[i]);
    int64_t ds[3] = {nblk, 128, 64};
    ts[0] = tensor(dt, 2, dx, 0);
    ts[2] = tensor(dt, 2, dx, 1);
    ts[3] = tensor(dt, 3, ds, 1);
    (void)sc;
    *n = 4;
    return finish(k);
}

/* tk_pair_swap and tk_iota, in one warpgroup. O: each warp's 16 rows of X
 * with columns 2j, 2j+1 swapped (rows 0..63), and a swapped PER_COL vector
 * (the column maxima) broadcast down (rows 64..127). I (f32): 1000·row +
 * col from the iotas of a warpgroup tile (cols 0..31), of a warp tile's
 * PER_ROW and PER_COL vectors (cols 32..63), of COL tiles (rows 64..). */
tk_kernel *tu_pairs(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_pairs", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *I = tk_param_tensor(k, "I", TK_F32, 2);
    tk_value *r0 = band(k, 64, 16), *ix[2] = {r0, c64(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), X, ix, 0.0f);
    tk_store(k, O, ix, tk_pair_swap(k, x));
    tk_type wt = tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW);
    tk_value *v = tk_pair_swap(k, tk_col_max(k, tk_cvt(k, x, TK_F32)));
    tk_value *iv[2] = {tk_add(k, r0, c64(k, 64)), c64(k, 0)};
    tk_store(k, O, iv, tk_cvt(k, tk_add(k, tk_zeros(k, wt), v), dt));
    tk_value *thousand = f32c(k, 1000.0f), *r0k = tk_mul(k, tk_cvt(k, r0, TK_F32), thousand);
    tk_type gt = tk_tile_type(TK_F32, 64, 32, TK_WARPGROUP, TK_ROW);
    tk_value *g =
        tk_add(k, tk_mul(k, tk_iota(k, gt, TK_PER_ROW), thousand), tk_iota(k, gt, TK_PER_COL));
    tk_value *ig[2] = {c64(k, 0), c64(k, 0)};
    tk_store(k, I, ig, g);
    tk_type t32 = tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_ROW);
    tk_value *vr = tk_iota(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW), TK_PER_ROW);
    tk_value *vc = tk_iota(k, tk_vec_type(TK_F32, 32, TK_PER_COL, TK_WARP, TK_ROW), TK_PER_COL);
    tk_value *w = tk_add(k, tk_mul(k, tk_add(k, tk_zeros(k, t32), vr), thousand), vc);
    tk_value *iw[2] = {r0, c64(k, 32)};
    tk_store(k, I, iw, tk_add(k, tk_add(k, w, r0k), f32c(k, 32.0f)));
    tk_type ct = tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_COL);
    tk_value *c =
        tk_add(k, tk_mul(k, tk_iota(k, ct, TK_PER_ROW), thousand), tk_iota(k, ct, TK_PER_COL));
    tk_value *ic[2] = {tk_add(k, r0, c64(k, 64)), c64(k, 0)};
    tk_store(k, I, ic, tk_add(k, c, r0k));
    tk_set_grid(k, NULL, NULL, NULL);
    int64_t d[2] = {64, 64}, dout[2] = {128, 64};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(dt, 2, dout, 1);
    ts[2] = tensor(TK_F32, 2, dout, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

/* tk_col_bcast, 4 warps. O [64, 4·64]: band b (cols 64b..) holds each
 * warp's 16 rows of x (16x64 f32 of X) with every column column {0, 5, 37,
 * 63}[b] of x; W [64, 32]: a warpgroup tile of X's first 32 columns with
 * every column its column 17. */
tk_kernel *tu_col_bcast(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_col_bcast", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *W = tk_param_tensor(k, "W", TK_F32, 2);
    tk_value *r0 = band(k, 64, 16), *ix[2] = {r0, c64(k, 0)};
    tk_value *x =
        tk_cvt(k, tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), X, ix, 0.0f), TK_F32);
    static const int cols[4] = {0, 5, 37, 63};
    for (int b = 0; b < 4; b++)
        tk_store(k, O, ((tk_value *[]){r0, c64(k, 64 * b)}), tk_col_bcast(k, x, cols[b]));
    tk_value *z[2] = {c64(k, 0), c64(k, 0)};
    tk_value *g = tk_load(k, tk_tile_type(dt, 64, 32, TK_WARPGROUP, TK_ROW), X, z, 0.0f);
    tk_store(k, W, z, tk_col_bcast(k, tk_cvt(k, g, TK_F32), 17));
    tk_set_grid(k, NULL, NULL, NULL);
    int64_t d[2] = {64, 64}, dout[2] = {64, 256}, dw[2] = {64, 32};
    ts[0] = tensor(dt, 2, d, 0);
    ts[1] = tensor(TK_F32, 2, dout, 1);
    ts[2] = tensor(TK_F32, 2, dw, 1);
    (void)sc;
    *n = 3;
    return finish(k);
}

const tu_op_fixture tu_op_fixtures[] = {
    {"ids", tu_ids, 1e-6},
    {"elementwise", tu_elementwise, 2e-2},
    {"reduce", tu_reduce, 1e-3},
    {"mma", tu_mma, 1e-3},
    {"memory", tu_memory, 1e-2},
    {"memory_l2", tu_memory_l2, 1e-2},
    {"strided", tu_strided, 1e-6},
    {"control", tu_control, 1e-3},
    {"pipe", tu_pipe, 1e-5},
    {"trig", tu_trig, 1e-6}, /* f32 out; per element |GPU - interp| <= 1.4e-7 (ops/trig.h) */
    /* 16-bit tanh/sigmoid may round one bf16 ulp apart; f32 tanh.approx: 2^-11 relative */
    {"epilogue", tu_epilogue, 2e-2},
    {"store_add", tu_store_add, 1e-5}, /* the adds' order differs: f32 rounding */
    {"copy_add", tu_copy_add, 1e-5},
    {"copy_edge", tu_copy_edge, 1e-6}, /* copies, one add an element: exact */
    {"gather", tu_gather, 1e-6},
    {"narrow", tu_narrow, 1e-6},       /* copies: exact */
    {"pairs", tu_pairs, 1e-6},         /* moves and small integers: exact */
    {"col_bcast", tu_col_bcast, 1e-6}, /* moves: exact */
};
const int tu_nop_fixtures = (int)(sizeof tu_op_fixtures / sizeof tu_op_fixtures[0]);

void tu_free_tensors(ref_tensor *ts, int n) {
    for (int i = 0; i < n; i++)
        if (ts[i].rank) ref_tensor_free(&ts[i]);
}

tk_kernel *tu_op_kernel(tk_ctx *ctx, tu_op_build build, tk_dtype dt) {
    ref_tensor ts[TU_OP_MAX_ARGS] = {0};
    tk_arg sc[TU_OP_MAX_ARGS];
    int n = 0;
    tk_kernel *k = build(ctx, dt, ts, sc, &n);
    tu_free_tensors(ts, n);
    return k;
}
