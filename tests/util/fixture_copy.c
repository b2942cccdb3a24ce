/* The op fixtures of the adding and clipped stores (tk_store_add,
 * tk_copy_to_global_add, the copy engine's edges): tests/test_lower.c runs
 * them with the others of tests/util/fixture_ops.c. */
#include <math.h>

#include "util/fixture_ops.h"
#include "util/fixture_ops_parts.h"

/* tk_store_add: in every block, warps w and w+2 add into the same rows of
 * tensors that start random (the adds land on what they hold), and every
 * block adds into them too; O's window is ragged (rows past 20 and columns
 * past 30 are skipped), V takes a per-row vector (one add per row, not one
 * per lane holding it). f32 whatever dt is. */
tk_kernel *tu_store_add(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    (void)dt, (void)sc;
    tk_kernel_create(ctx, "t_store_add", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *V = tk_param_tensor(k, "V", TK_F32, 1);
    tk_value *half = tk_mul(k, tk_rem(k, i64(k, tk_warp_id(k)), c64(k, 2)), c64(k, 16));
    tk_value *xr[2] = {band(k, 64, 16), c64(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_ROW), X, xr, 0.0f);
    tk_value *o[2] = {half, c64(k, 4)};
    tk_store_add(k, O, o, x);
    tk_store_add_n(k, V, 1, &half, tk_row_sum(k, x));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 64)), NULL, NULL);
    int64_t dx[2] = {150, 32}, dout[2] = {20, 30}, dv[1] = {20};
    ts[0] = tensor(TK_F32, 2, dx, 0);
    ts[1] = tensor(TK_F32, 2, dout, 0);
    ts[2] = tensor(TK_F32, 1, dv, 0);
    *n = 3;
    return finish(k);
}

/* tk_copy_to_global_add: every block's warps put their 16 rows of X (f32)
 * into a [64 x 32] swizzled tile (128-byte rows: on sm_90 the engine's
 * reduction adds it, elsewhere each thread its chunks), and every block
 * adds its tile into the same window of O, which starts random and is
 * ragged (rows past 50 and columns past 20 are skipped; the engine clips
 * them). f32 whatever dt is. */
tk_kernel *tu_copy_add(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    (void)dt, (void)sc;
    tk_kernel_create(ctx, "t_copy_add", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *sm = tk_shared(k, TK_F32, 64, 32, TK_SMEM_SWIZZLE, 1);
    tk_value *xr[2] = {band(k, 64, 16), c64(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(TK_F32, 16, 32, TK_WARP, TK_ROW), X, xr, 0.0f);
    tk_value *at[2] = {tk_mul(k, tk_warp_id(k), c32(k, 16)), c32(k, 0)};
    tk_store(k, sm, at, x);
    tk_barrier(k);
    tk_value *o[2] = {c64(k, 0), c64(k, 0)};
    tk_copy_to_global_add(k, O, o, sm);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 64)), NULL, NULL);
    int64_t dx[2] = {150, 32}, dout[2] = {50, 20};
    ts[0] = tensor(TK_F32, 2, dx, 0);
    ts[1] = tensor(TK_F32, 2, dout, 0);
    *n = 2;
    return finish(k);
}

/* Block copies out to padded pitches of whole 16-byte chunks (maps the
 * engine can address), rows ending inside a chunk or not: a block has a
 * 64x64 tile of dt and a 64x32 one of f32 (128-byte rows), the first
 * stored to O [100, 123] (pitch 128) and Q [100, 120] (pitch 128), the
 * second added to A [100, 61] (pitch 64) and B [100, 60] (pitch 64). The
 * engine clips a store in whole chunks of a row, so O and A get no map
 * (jit/launch.c) and the threads copy, masked at the last column; Q and B
 * end on a chunk and keep the engine, which clips their last tiles there,
 * and the second band's ragged rows. The gaps are NaN (O, Q) and random (A,
 * B): a write there differs from the interpreter. */
tk_kernel *tu_copy_edge(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n) {
    tk_kernel *k;
    tk_kernel_create(ctx, "t_copy_edge", 4, &k);
    tk_value *X = tk_param_tensor(k, "X", dt, 2), *O = tk_param_tensor(k, "O", dt, 2);
    tk_value *Q = tk_param_tensor(k, "Q", dt, 2), *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *B = tk_param_tensor(k, "B", TK_F32, 2);
    tk_value *so = tk_shared(k, dt, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *sa = tk_shared(k, TK_F32, 64, 32, TK_SMEM_SWIZZLE, 1);
    tk_value *row0 = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, 64)), *r = band(k, 64, 16);
    tk_value *bc = i64(k, tk_block_id(k, 1));
    tk_value *go[2] = {row0, tk_mul(k, bc, c64(k, 64))}, *ga[2] = {row0, tk_mul(k, bc, c64(k, 32))};
    tk_value *at[2] = {tk_mul(k, tk_warp_id(k), c32(k, 16)), c32(k, 0)};
    tk_value *xo[2] = {r, go[1]}, *xa[2] = {r, ga[1]};
    tk_store(k, so, at, tk_load(k, tk_tile_type(dt, 16, 64, TK_WARP, TK_ROW), X, xo, 0.0f));
    tk_value *x = tk_load(k, tk_tile_type(dt, 16, 32, TK_WARP, TK_ROW), X, xa, 0.0f);
    tk_store(k, sa, at, tk_cvt(k, x, TK_F32));
    tk_barrier(k);
    tk_copy_to_global(k, O, go, so);
    tk_copy_to_global(k, Q, go, so);
    tk_copy_to_global_add(k, A, ga, sa);
    tk_copy_to_global_add(k, B, ga, sa);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), c64(k, 64)), c64(k, 2), NULL);
    int64_t dx[2] = {100, 123}, dq[2] = {100, 120}, da[2] = {100, 61}, db[2] = {100, 60};
    ts[0] = tensor(dt, 2, dx, 0);
    ts[1] = ref_tensor_new_layout(dt, 2, dx, NULL, 5);
    ts[2] = ref_tensor_new_layout(dt, 2, dq, NULL, 8);
    ts[3] = ref_tensor_new_layout(TK_F32, 2, da, NULL, 3);
    ts[4] = ref_tensor_new_layout(TK_F32, 2, db, NULL, 4);
    for (int i = 1; i < 3; i++) ref_tensor_fill_all(&ts[i], NAN);
    for (int i = 3; i < 5; i++) ref_tensor_random(&ts[i], -1.0, 1.0);
    (void)sc;
    *n = 5;
    return finish(k);
}
