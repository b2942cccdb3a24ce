/* See fixture_ir.h. */
#include "util/fixture_ir.h"

void tu_build_gemm(tk_kernel *k, int bm) {
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *B = tk_param_tensor(k, "B", TK_BF16, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2);
    tk_value *BM = tk_spec(k, "BM", bm), *BN = tk_spec(k, "BN", 64), *BK = tk_spec(k, "BK", 32);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 32, TK_SMEM_SWIZZLE, 2);
    tk_value *sB = tk_shared(k, TK_BF16, 32, 64, TK_SMEM_SWIZZLE, 2);
    tk_value *gx = tk_ceil_div(k, tk_dim(k, C, 1), BN);
    tk_value *gy = tk_ceil_div(k, tk_dim(k, C, 0), BM);
    tk_set_grid(k, gx, gy, NULL);
    tk_value *row = tk_mul(k, tk_cvt(k, tk_block_id(k, 1), TK_I64), BM);
    tk_value *col = tk_mul(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), BN);
    tk_value *w = tk_cvt(k, tk_warp_id(k), TK_I64);
    tk_value *wr = tk_mul(k, w, tk_const_i64(k, 16));
    tk_value *z = tk_const_i64(k, 0), *one = tk_const_i64(k, 1), *two = tk_const_i64(k, 2);
    tk_value *acc0 = tk_zeros(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW)), *acc, *res;
    tk_value *nk = tk_ceil_div(k, tk_dim(k, A, 1), BK);
    tk_value *kt = tk_for_begin(k, z, nk, one, 1, &acc0, &acc);
    tk_value *st = tk_rem(k, kt, two), *k0 = tk_mul(k, kt, BK);
    tk_value *a = tk_stage(k, sA, st), *b = tk_stage(k, sB, st);
    tk_copy_to_shared(k, a, A, ((tk_value *[]){row, k0}), 0, 1);
    tk_copy_to_shared(k, b, B, ((tk_value *[]){k0, col}), 0, 1);
    tk_async_commit(k);
    tk_async_wait(k, 0);
    tk_barrier(k);
    tk_value *ia[2] = {wr, z}, *ib[2] = {z, z};
    tk_value *ta = tk_load(k, tk_tile_type(TK_BF16, 16, 32, TK_WARP, TK_ROW), a, ia, 0);
    tk_value *tb = tk_load(k, tk_tile_type(TK_BF16, 32, 64, TK_WARP, TK_COL), b, ib, 0);
    tk_value *next = tk_mma(k, TK_MMA_AB, ta, tb, acc);
    tk_barrier(k);
    tk_for_end(k, 1, &next, &res);
    tk_value *r = tk_add(k, row, wr);
    tk_store(k, C, ((tk_value *[]){r, col}), res);
}

void tu_build_softmax(tk_kernel *k, float fill) {
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 3), *n = tk_param_scalar(k, "n", TK_I64);
    tk_value *scale = tk_param_scalar(k, "scale", TK_F32);
    tk_value *h = tk_cvt(k, tk_block_id(k, 1), TK_I64), *z = tk_const_i64(k, 0);
    tk_value *w = tk_cvt(k, tk_warp_id(k), TK_I64);
    tk_value *r0 = tk_mul(k, w, tk_const_i64(k, 16));
    tk_type xt = tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW);
    tk_value *x = tk_load(k, xt, X, ((tk_value *[]){h, r0, z}), fill);
    x = tk_mul(k, x, scale);
    x = tk_mask(k, x, TK_MASK_CAUSAL, r0, z, fill);
    x = tk_mask(k, x, TK_MASK_COLS, z, n, fill);
    tk_value *m = tk_row_max(k, x);
    tk_value *e = tk_exp2(k, tk_sub(k, x, m));
    tk_value *y = tk_div(k, e, tk_row_sum(k, e)), *res;
    tk_if_begin(k, tk_gt(k, n, tk_const_i64(k, 32)));
    tk_value *t = tk_cvt(k, tk_cvt(k, y, TK_BF16), TK_F32);
    tk_else(k, 1, &t);
    tk_value *u = tk_add(k, y, tk_col_sum(k, y));
    tk_if_end(k, 1, &u, &res);
    tk_store(k, X, ((tk_value *[]){h, r0, z}), res);
    tk_set_grid(k, NULL, tk_dim(k, X, 0), NULL);
}
