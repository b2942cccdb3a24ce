/* The README's taste of the builder, as a program: softmax-like scaling of
 * the rows of a [rows, 64] bf16 tensor, one warp per 16 rows, ragged rows
 * masked. Runs on the CPU interpreter and checks one row by hand. */
#include <math.h>
#include <stdio.h>

#include "tk/tk.h"

int main(void) {
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    enum { ROWS = 37 };
    static uint16_t buf[ROWS * 64];
    for (int i = 0; i < ROWS * 64; i++) buf[i] = tk_f32_to_bf16((float)(i % 64) / 64.0f);
    int64_t dims[2] = {ROWS, 64};
    /* --- README taste begins --- */
    tk_kernel *k;
    tk_kernel_create(ctx, "scale_rows", 1, &k);        /* one warp per block      */
    tk_value *X = tk_param_tensor(k, "X", TK_BF16, 2); /* [rows, 64], any rows    */
    tk_value *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *row0 = tk_mul(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), tk_const_i64(k, 16));
    tk_value *idx[2] = {row0, tk_const_i64(k, 0)};
    tk_type t = tk_tile_type(TK_BF16, 16, 64, TK_WARP, TK_ROW);
    tk_value *x = tk_cvt(k, tk_load(k, t, X, idx, 0.0f), TK_F32); /* ragged rows read 0    */
    tk_value *m = tk_row_max(k, x);                               /* per-row vector          */
    x = tk_mul(k, tk_exp2(k, tk_sub(k, x, m)), s);                /* broadcast, then scalar  */
    tk_store(k, X, idx, tk_cvt(k, x, TK_BF16));                   /* ragged rows not written */
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), tk_const_i64(k, 16)), NULL, NULL);
    if (tk_kernel_finish(k)) fprintf(stderr, "%s\n", tk_kernel_error(k));
    tk_interp_run(k, 2, (tk_arg[]){tk_arg_tensor(buf, TK_BF16, 2, dims), tk_arg_f32(0.5f)});
    /* --- README taste ends --- */
    /* Row 36, column 0: exp2(0 - 63/64) * 0.5, rounded to bf16. */
    float got = tk_bf16_to_f32(buf[36 * 64]), want = exp2f(-63.0f / 64.0f) * 0.5f;
    int ok = tk_kernel_status(k) == TK_OK && fabsf(got - want) <= 4e-3f * want;
    printf("scale_rows on the interpreter: X[36][0] = %g (expected %g): %s\n", got, want,
           ok ? "PASS" : "FAIL");
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
