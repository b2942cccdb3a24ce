/* Row softmax, the first kernel of docs/WRITING_KERNELS.md:
 *
 *   Y[r, :] = softmax(X[r, :])   for X, Y of shape [R, C] in bf16, any R and C
 *
 * Each warp owns 16 rows and walks their columns in chunks of CW. Pass 1
 * keeps a running max m and sum l of exp2(x·log2 e − m) per row (the online
 * softmax: a new max rescales the sum); pass 2 reads the chunks again and
 * writes exp2(x·log2 e − m) / l. The math is f32; only X and Y are bf16.
 * So the registers hold one 16 x CW chunk at a time, whatever C is.
 *
 * Checked against a float64 reference at ragged sizes, on the GPU when there
 * is one (tk_compile + tk_launch) and always on the CPU interpreter.
 *   softmax [--ptx FILE] [--arch sm_90a] [--interp] */
#include "example_util.h"

enum { WARPS = 4, ROWS = 16, CW = 128 }; /* 4 warps x 16 rows per block; chunks of 128 */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

/* One 16 x CW chunk of X at columns c0.., in f32 and scaled by log2 e;
 * columns past C read -inf, which exp2 turns into 0. */
static tk_value *load_chunk(tk_kernel *k, tk_value *X, tk_value *row0, tk_value *c0) {
    tk_value *idx[2] = {row0, c0};
    tk_type t = tk_tile_type(TK_BF16, ROWS, CW, TK_WARP, TK_ROW);
    tk_value *x = tk_cvt(k, tk_load(k, t, X, idx, -INFINITY), TK_F32);
    return tk_mul(k, x, tk_const_f32(k, 1.44269504f)); /* log2 e */
}

static tk_kernel *build_softmax(tk_ctx *ctx) {
    tk_kernel *k;
    if (tk_kernel_create(ctx, "row_softmax", WARPS, &k)) return NULL;
    tk_value *X = tk_param_tensor(k, "X", TK_BF16, 2);
    tk_value *Y = tk_param_tensor(k, "Y", TK_BF16, 2);
    tk_value *R = tk_dim(k, X, 0), *C = tk_dim(k, X, 1);
    tk_set_grid(k, tk_ceil_div(k, R, i64c(k, WARPS * ROWS)), NULL, NULL);
    /* This warp's first row: ids in i64 meet the i64 dims without a tk_cvt. */
    tk_value *row0 =
        tk_mul(k, tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, WARPS)), tk_warp_id_i64(k)),
               i64c(k, ROWS));
    tk_value_set_name(row0, "row0");
    tk_value *chunks = tk_ceil_div(k, C, i64c(k, CW));

    /* Pass 1: m = running row max, l = running sum of exp2(x - m). */
    tk_type vt = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *init[2] = {tk_fill(k, vt, tk_const_f32(k, -INFINITY)), tk_zeros(k, vt)};
    tk_value *cur[2], *next[2], *fin[2];
    tk_value *c = tk_for_begin(k, i64c(k, 0), chunks, i64c(k, 1), 2, init, cur);
    {
        tk_value *x = load_chunk(k, X, row0, tk_mul(k, c, i64c(k, CW)));
        next[0] = tk_max(k, cur[0], tk_row_max(k, x));
        tk_value *scale = tk_exp2(k, tk_sub(k, cur[0], next[0])); /* exp2(-inf) = 0 at c = 0 */
        next[1] =
            tk_add(k, tk_mul(k, cur[1], scale), tk_row_sum(k, tk_exp2(k, tk_sub(k, x, next[0]))));
    }
    tk_for_end(k, 2, next, fin);
    tk_value *m = fin[0], *inv_l = tk_div(k, tk_const_f32(k, 1.0f), fin[1]);
    tk_value_set_name(m, "row_max");

    /* Pass 2: Y = exp2(x - m) / l, chunk by chunk; the store skips rows and
     * columns past the edge. */
    c = tk_for_begin(k, i64c(k, 0), chunks, i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *c0 = tk_mul(k, c, i64c(k, CW));
        tk_value *y = tk_mul(k, tk_exp2(k, tk_sub(k, load_chunk(k, X, row0, c0), m)), inv_l);
        tk_value *idx[2] = {row0, c0};
        tk_store(k, Y, idx, tk_cvt(k, y, TK_BF16));
    }
    tk_for_end(k, 0, NULL, NULL);
    return ex_finish(k);
}

/* Runs the kernel on fresh random [R, C] input; returns 1 when
 * ‖Y − ref‖/‖ref‖ is within what bf16 output rounding allows. */
static int check(tk_ctx *ctx, const tk_kernel *k, int gpu, int64_t R, int64_t C) {
    size_t n = (size_t)(R * C);
    uint16_t *x = ex_alloc(n * 2), *y = ex_poisoned(n * 2);
    ex_fill_bf16(x, n, -8.0f, 8.0f);
    int64_t dims[2] = {R, C};
    tk_arg args[2] = {tk_arg_tensor(x, TK_BF16, 2, dims), tk_arg_tensor(y, TK_BF16, 2, dims)};
    tk_status s = ex_run(ctx, k, gpu, 2, args);
    ex_err e = {0};
    for (int64_t r = 0; r < R && !s; r++) {
        const uint16_t *xr = x + r * C;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, tk_bf16_to_f32(xr[j]));
        for (int64_t j = 0; j < C; j++) sum += exp(tk_bf16_to_f32(xr[j]) - mx);
        for (int64_t j = 0; j < C; j++)
            ex_err_add(&e, tk_bf16_to_f32(y[r * C + j]), exp(tk_bf16_to_f32(xr[j]) - mx) / sum);
    }
    double err = s ? NAN : ex_err_rel(e);
    int ok = !s && err <= 1e-2; /* bf16 output: ~2^-9 per element */
    if (s) fprintf(stderr, "run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
    printf("  %s R=%lld C=%lld: rel err %.2e  %s\n", gpu ? "GPU" : "interpreter", (long long)R,
           (long long)C, err, ok ? "PASS" : "FAIL");
    free(x), free(y);
    return ok;
}

int main(int argc, char **argv) {
    ex_opts o;
    if (!ex_parse(argc, argv, &o)) {
        fprintf(stderr, "usage: softmax [--ptx FILE] [--arch ARCH] [--interp]\n");
        return 2;
    }
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    srand(20);
    tk_kernel *k = build_softmax(ctx);
    int ok = k && ex_emit_ptx(ctx, k, &o), gpu = ok && ex_use_gpu(ctx, &o);
    /* Ragged everywhere: rows not a multiple of 64, columns not of 128. */
    static const int64_t small[][2] = {{77, 300}, {5, 1}, {64, 1024}, {130, 129}};
    static const int64_t big[][2] = {{4096, 1000}, {1000, 1024}, {333, 77}};
    ok = ok && ex_check_shapes(ctx, k, gpu, check, small, 4, big, 3);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
