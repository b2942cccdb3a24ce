/* LayerNorm forward, the second kernel of docs/WRITING_KERNELS.md:
 *
 *   mean[r] = avg(X[r, :]),  rstd[r] = 1 / sqrt(var(X[r, :]) + eps)
 *   Y[r, c] = (X[r, c] - mean[r]) · rstd[r] · W[c] + B[c]
 *
 * X, Y [R, C] and W, B [C] in bf16, mean and rstd [R] in f32, any R and C.
 * Each warp owns 16 rows and walks their columns in chunks of `chunk` (32):
 * pass 1 merges each chunk's mean and sum of squared deviations into the
 * running ones (Chan et al.: one read, no E[x²] − E[x]² cancellation);
 * pass 2 reads the chunks again and writes Y. Statistics are f32.
 *
 * The chunk is what keeps this kernel in registers: a 16 x 256 f32 tile is
 * 128 registers per thread on its own, and the obvious LayerNorm that holds
 * whole rows of 256 spills (`--chunk 256` builds it, to compare with
 * `ptxas -v`; the guide lists both).
 *   layernorm [--chunk 16|32|64|128|256] [--ptx FILE] [--arch sm_90a] [--interp] */
#include "example_util.h"

enum { WARPS = 4, ROWS = 16 };

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

/* The statistics (pass 1): returns mean and the sum of squared deviations
 * M2 of each of the warp's 16 rows. */
static void stats(tk_kernel *k, tk_value *X, tk_value *row0, int cw, tk_value **mean,
                  tk_value **m2) {
    tk_value *C = tk_dim(k, X, 1), *chunks = tk_ceil_div(k, C, i64c(k, cw));
    tk_type vt = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type t = tk_tile_type(TK_BF16, ROWS, cw, TK_WARP, TK_ROW);
    tk_value *init[2] = {tk_zeros(k, vt), tk_zeros(k, vt)}, *cur[2], *next[2], *fin[2];
    tk_value *c = tk_for_begin(k, i64c(k, 0), chunks, i64c(k, 1), 2, init, cur);
    {
        tk_value *c0 = tk_mul(k, c, i64c(k, cw)), *idx[2] = {row0, c0};
        /* n columns merged so far (every earlier chunk is whole), nc in this one */
        tk_value *n = f32(k, c0), *nc = f32(k, tk_min(k, i64c(k, cw), tk_sub(k, C, c0)));
        tk_value *x = f32(k, tk_load(k, t, X, idx, 0.0f)); /* past C: 0 */
        tk_value *mc = tk_div(k, tk_row_sum(k, x), nc);
        /* deviations from the chunk's mean; the columns past C are not data */
        tk_value *d = tk_mask(k, tk_sub(k, x, mc), TK_MASK_COLS, c0, C, 0.0f);
        tk_value *delta = tk_sub(k, mc, cur[0]);
        tk_value *w = tk_div(k, nc, tk_add(k, n, nc)); /* the chunk's share */
        next[0] = tk_add(k, cur[0], tk_mul(k, delta, w));
        next[1] = tk_add(k, tk_add(k, cur[1], tk_row_sum(k, tk_mul(k, d, d))),
                         tk_mul(k, tk_mul(k, delta, delta), tk_mul(k, n, w)));
    }
    tk_for_end(k, 2, next, fin);
    *mean = fin[0], *m2 = fin[1];
}

static tk_kernel *build_layernorm(tk_ctx *ctx, int cw) {
    tk_kernel *k;
    if (tk_kernel_create(ctx, "layernorm_fwd", WARPS, &k)) return NULL;
    tk_spec(k, "chunk", cw); /* printed, so part of the cache key */
    tk_value *X = tk_param_tensor(k, "X", TK_BF16, 2);
    tk_value *W = tk_param_tensor(k, "W", TK_BF16, 1);
    tk_value *B = tk_param_tensor(k, "B", TK_BF16, 1);
    tk_value *Y = tk_param_tensor(k, "Y", TK_BF16, 2);
    tk_value *Mean = tk_param_tensor(k, "Mean", TK_F32, 1);
    tk_value *Rstd = tk_param_tensor(k, "Rstd", TK_F32, 1);
    tk_value *eps = tk_param_scalar(k, "eps", TK_F32);
    tk_value *R = tk_dim(k, X, 0), *C = tk_dim(k, X, 1);
    tk_set_grid(k, tk_ceil_div(k, R, i64c(k, WARPS * ROWS)), NULL, NULL);
    tk_value *row0 =
        tk_mul(k, tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, WARPS)), tk_warp_id_i64(k)),
               i64c(k, ROWS));
    tk_value_set_name(row0, "row0");

    tk_value *mean, *m2;
    stats(k, X, row0, cw, &mean, &m2);
    tk_value *rstd = tk_rsqrt(k, tk_add(k, tk_div(k, m2, f32(k, C)), eps));
    tk_value_set_name(mean, "mean");
    tk_value_set_name(rstd, "rstd");
    tk_value *ir[1] = {row0};
    tk_store(k, Mean, ir, mean); /* rows past R are not written */
    tk_store(k, Rstd, ir, rstd);

    /* Pass 2: Y = (x - mean) * rstd * W + B, chunk by chunk. W and B are
     * vectors with one value per column, broadcast down the rows. */
    tk_type t = tk_tile_type(TK_BF16, ROWS, cw, TK_WARP, TK_ROW);
    tk_type vt = tk_vec_type(TK_BF16, cw, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *c =
        tk_for_begin(k, i64c(k, 0), tk_ceil_div(k, C, i64c(k, cw)), i64c(k, 1), 0, NULL, NULL);
    {
        tk_value *c0 = tk_mul(k, c, i64c(k, cw)), *idx[2] = {row0, c0}, *ic[1] = {c0};
        tk_value *x = f32(k, tk_load(k, t, X, idx, 0.0f));
        tk_value *w = f32(k, tk_load(k, vt, W, ic, 0.0f)), *b = f32(k, tk_load(k, vt, B, ic, 0.0f));
        tk_value *y = tk_add(k, tk_mul(k, tk_mul(k, tk_sub(k, x, mean), rstd), w), b);
        tk_store(k, Y, idx, tk_cvt(k, y, TK_BF16));
    }
    tk_for_end(k, 0, NULL, NULL);
    return ex_finish(k);
}

typedef struct ln_bufs {
    uint16_t *x, *w, *b, *y;
    float *mean, *rstd;
} ln_bufs;

/* The float64 reference of row r: relative errors of Y, mean and rstd
 * accumulate into e[0..2]. */
static void check_row(const ln_bufs *p, int64_t r, int64_t C, double eps, ex_err e[3]) {
    const uint16_t *xr = p->x + r * C;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < C; j++) mean += tk_bf16_to_f32(xr[j]);
    mean /= (double)C;
    for (int64_t j = 0; j < C; j++) var += pow(tk_bf16_to_f32(xr[j]) - mean, 2);
    double rstd = 1.0 / sqrt(var / (double)C + eps);
    for (int64_t j = 0; j < C; j++) {
        double ref = (tk_bf16_to_f32(xr[j]) - mean) * rstd * tk_bf16_to_f32(p->w[j]) +
                     tk_bf16_to_f32(p->b[j]);
        ex_err_add(&e[0], tk_bf16_to_f32(p->y[r * C + j]), ref);
    }
    ex_err_add(&e[1], p->mean[r], mean);
    ex_err_add(&e[2], p->rstd[r], rstd);
}

/* Runs the kernel on fresh random input: rows with an offset of 3 and a
 * spread of 2, so that a variance formula that cancels would show. */
static int check(tk_ctx *ctx, const tk_kernel *k, int gpu, int64_t R, int64_t C) {
    size_t n = (size_t)(R * C);
    ln_bufs p = {ex_alloc(n * 2),    ex_alloc((size_t)C * 2),    ex_alloc((size_t)C * 2),
                 ex_poisoned(n * 2), ex_poisoned((size_t)R * 4), ex_poisoned((size_t)R * 4)};
    ex_fill_bf16(p.x, n, 1.0f, 5.0f);
    ex_fill_bf16(p.w, (size_t)C, 0.5f, 1.5f);
    ex_fill_bf16(p.b, (size_t)C, -1.0f, 1.0f);
    int64_t d2[2] = {R, C}, dc[1] = {C}, dr[1] = {R};
    const float eps = 1e-5f;
    tk_arg args[7] = {tk_arg_tensor(p.x, TK_BF16, 2, d2),
                      tk_arg_tensor(p.w, TK_BF16, 1, dc),
                      tk_arg_tensor(p.b, TK_BF16, 1, dc),
                      tk_arg_tensor(p.y, TK_BF16, 2, d2),
                      tk_arg_tensor(p.mean, TK_F32, 1, dr),
                      tk_arg_tensor(p.rstd, TK_F32, 1, dr),
                      tk_arg_f32(eps)};
    tk_status s = ex_run(ctx, k, gpu, 7, args);
    if (s) fprintf(stderr, "run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
    ex_err e[3] = {{0}};
    for (int64_t r = 0; r < R && !s; r++) check_row(&p, r, C, eps, e);
    double ey = s ? NAN : ex_err_rel(e[0]), em = ex_err_rel(e[1]), er = ex_err_rel(e[2]);
    int ok = !s && ey <= 1e-2 && em <= 1e-5 && er <= 1e-4; /* Y is bf16; statistics f32 */
    printf("  %s R=%lld C=%lld: rel err Y %.2e, mean %.2e, rstd %.2e  %s\n",
           gpu ? "GPU" : "interpreter", (long long)R, (long long)C, ey, em, er,
           ok ? "PASS" : "FAIL");
    free(p.x), free(p.w), free(p.b), free(p.y), free(p.mean), free(p.rstd);
    return ok;
}

int main(int argc, char **argv) {
    int cw = 32;
    if (argc > 2 && !strcmp(argv[1], "--chunk")) {
        cw = atoi(argv[2]);
        argc -= 2, argv += 2;
    }
    ex_opts o;
    if (!ex_parse(argc, argv, &o) || (cw != 16 && cw != 32 && cw != 64 && cw != 128 && cw != 256)) {
        fprintf(stderr, "usage: layernorm [--chunk 16|32|64|128|256] [--ptx FILE] [--arch ARCH] "
                        "[--interp]\n");
        return 2;
    }
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    srand(21);
    tk_kernel *k = build_layernorm(ctx, cw);
    int ok = k && ex_emit_ptx(ctx, k, &o), gpu = ok && ex_use_gpu(ctx, &o);
    static const int64_t small[][2] = {{37, 200}, {70, 4096}, {3, 1}, {65, 63}};
    static const int64_t big[][2] = {{8192, 4096}, {1000, 1000}, {4097, 768}};
    ok = ok && ex_check_shapes(ctx, k, gpu, check, small, 4, big, 3);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
