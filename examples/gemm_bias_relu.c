/* GEMM with a fused epilogue, the third kernel of docs/WRITING_KERNELS.md:
 *
 *   C = relu(A·B + bias)   A [M, K], B [K, N], C [M, N] in bf16, bias [N] in f32
 *
 * any M, N, K. A block computes a 64 x 64 tile of C with 4 warps, each
 * owning a 32 x 32 f32 accumulator (32 registers per thread). The K
 * dimension streams through two shared stages (double buffering): while the
 * warps multiply k-tile kt from one stage, cp.async fills the other with
 * k-tile kt+1. One barrier per k-tile orders both hazards (see the loop).
 * The bias and the ReLU are applied to the accumulator in registers, so C
 * is written once. kernels/gemm.c is the tuned version of the same loop
 * (more stages, fragments pipelined one k-step ahead, grouped block order).
 *   gemm_bias_relu [--ptx FILE] [--arch sm_90a] [--interp] */
#include "example_util.h"

enum { BM = 64, BN = 64, BK = 32, WARPS = 4, WM = 32, WN = 32 }; /* warps: 2 x 2 */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

typedef struct gemm {
    tk_kernel *k;
    tk_value *A, *B, *sA, *sB, *m0, *n0;
} gemm;

/* Starts the copies of k-tile kt into stage st: A[m0.., kt·BK..] and
 * B[kt·BK.., n0..]. Parts outside A or B are zero-filled (zeros add nothing
 * to the dot products), so ragged M, N, K need nothing else. */
static void load_stage(gemm *g, tk_value *kt, tk_value *st) {
    tk_kernel *k = g->k;
    tk_value *k0 = tk_mul(k, kt, i64c(k, BK));
    tk_value *ia[2] = {g->m0, k0}, *ib[2] = {k0, g->n0};
    tk_copy_to_shared(k, tk_stage(k, g->sA, st), g->A, ia, 0.0f, TK_COPY_ASYNC);
    tk_copy_to_shared(k, tk_stage(k, g->sB, st), g->B, ib, 0.0f, TK_COPY_ASYNC);
}

/* acc += this warp's 32 x BK slice of A times B's BK x 32 slice, from the
 * stage: ldmatrix fragments, one mma.sync per 16-deep step. */
static tk_value *multiply_stage(gemm *g, tk_value *st, tk_value *wr, tk_value *wc, tk_value *acc) {
    tk_kernel *k = g->k;
    tk_value *a = tk_stage(k, g->sA, st), *b = tk_stage(k, g->sB, st);
    tk_type at = tk_tile_type(TK_BF16, WM, 16, TK_WARP, TK_ROW);
    tk_type bt = tk_tile_type(TK_BF16, 16, WN, TK_WARP, TK_COL); /* B of A·B: COL */
    for (int kk = 0; kk < BK; kk += 16) {                        /* unrolled in C */
        tk_value *ia[2] = {wr, i64c(k, kk)}, *ib[2] = {i64c(k, kk), wc};
        acc = tk_mma(k, TK_MMA_AB, tk_load(k, at, a, ia, 0.0f), tk_load(k, bt, b, ib, 0.0f), acc);
    }
    return acc;
}

static tk_kernel *build_gemm_bias_relu(tk_ctx *ctx) {
    tk_kernel *k;
    if (tk_kernel_create(ctx, "gemm_bias_relu", WARPS, &k)) return NULL;
    gemm g = {.k = k};
    tk_value *A = g.A = tk_param_tensor(k, "A", TK_BF16, 2);
    g.B = tk_param_tensor(k, "B", TK_BF16, 2);
    tk_value *bias = tk_param_tensor(k, "bias", TK_F32, 1);
    tk_value *C = tk_param_tensor(k, "C", TK_BF16, 2);
    tk_value *M = tk_dim(k, A, 0), *K = tk_dim(k, A, 1), *N = tk_dim(k, C, 1);
    tk_set_grid(k, tk_ceil_div(k, N, i64c(k, BN)), tk_ceil_div(k, M, i64c(k, BM)), NULL);
    g.m0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, BM));
    g.n0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, BN));
    tk_value *warp = tk_warp_id_i64(k); /* this warp's corner in the block tile */
    tk_value *wr = tk_mul(k, tk_div(k, warp, i64c(k, 2)), i64c(k, WM));
    tk_value *wc = tk_mul(k, tk_rem(k, warp, i64c(k, 2)), i64c(k, WN));
    /* Swizzled stages: ldmatrix reads 8 rows of a 16-byte column, which
     * the swizzle spreads over all banks. */
    g.sA = tk_shared(k, TK_BF16, BM, BK, TK_SMEM_SWIZZLE, 2);
    g.sB = tk_shared(k, TK_BF16, BK, BN, TK_SMEM_SWIZZLE, 2);

    tk_value *nk = tk_ceil_div(k, K, i64c(k, BK));
    load_stage(&g, i64c(k, 0), i64c(k, 0)); /* prologue: k-tile 0 into stage 0 */
    tk_async_commit(k);
    tk_type acc_t = tk_tile_type(TK_F32, WM, WN, TK_WARP, TK_ROW);
    tk_value *init[1] = {tk_zeros(k, acc_t)}, *acc[1], *next[1], *fin[1];
    tk_value *kt = tk_for_begin(k, i64c(k, 0), nk, i64c(k, 1), 1, init, acc);
    {
        /* k-tile kt has landed (the only group in flight), and after the
         * barrier every warp sees it and has finished iteration kt-1, so
         * its stage, (kt+1) % 2, may be refilled with k-tile kt+1. Without
         * this barrier the interpreter's race checker fails the run. */
        tk_async_wait(k, 0);
        tk_barrier(k);
        tk_value *st = tk_rem(k, kt, i64c(k, 2)), *kt1 = tk_add(k, kt, i64c(k, 1));
        tk_if_begin(k, tk_lt(k, kt1, nk));
        load_stage(&g, kt1, tk_sub(k, i64c(k, 1), st));
        tk_if_end(k, 0, NULL, NULL);
        tk_async_commit(k);
        next[0] = multiply_stage(&g, st, wr, wc, acc[0]); /* overlaps the copies */
    }
    tk_for_end(k, 1, next, fin);

    /* Epilogue in registers: + bias (one value per column, broadcast down
     * the rows; columns past N read 0), ReLU, bf16; the store skips rows and
     * columns past the edge of C. */
    tk_value *ib[1] = {tk_add(k, g.n0, wc)}, *ic[2] = {tk_add(k, g.m0, wr), ib[0]};
    tk_type bias_t = tk_vec_type(TK_F32, WN, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *y = tk_add(k, fin[0], tk_load(k, bias_t, bias, ib, 0.0f));
    y = tk_max(k, y, tk_const_f32(k, 0.0f));
    tk_store(k, C, ic, tk_cvt(k, y, TK_BF16));
    return ex_finish(k);
}

/* Runs the kernel on fresh random A, B, bias and checks C against
 * relu(A·B + bias) in float64. */
static int check(tk_ctx *ctx, const tk_kernel *k, int gpu, int64_t M, int64_t N, int64_t K) {
    uint16_t *a = ex_alloc((size_t)(M * K) * 2), *b = ex_alloc((size_t)(K * N) * 2);
    uint16_t *c = ex_poisoned((size_t)(M * N) * 2);
    float *bias = ex_alloc((size_t)N * 4);
    ex_fill_bf16(a, (size_t)(M * K), -1.0f, 1.0f);
    ex_fill_bf16(b, (size_t)(K * N), -1.0f, 1.0f);
    for (int64_t j = 0; j < N; j++) bias[j] = (float)rand() / (float)RAND_MAX - 0.5f;
    int64_t da[2] = {M, K}, db[2] = {K, N}, dn[1] = {N}, dc[2] = {M, N};
    tk_arg args[4] = {tk_arg_tensor(a, TK_BF16, 2, da), tk_arg_tensor(b, TK_BF16, 2, db),
                      tk_arg_tensor(bias, TK_F32, 1, dn), tk_arg_tensor(c, TK_BF16, 2, dc)};
    tk_status s = ex_run(ctx, k, gpu, 4, args);
    if (s) fprintf(stderr, "run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
    ex_err e = {0};
    double *row = ex_alloc((size_t)N * sizeof(double));
    for (int64_t i = 0; i < M && !s; i++) {
        for (int64_t j = 0; j < N; j++) row[j] = bias[j];
        for (int64_t p = 0; p < K; p++) {
            double aip = tk_bf16_to_f32(a[i * K + p]);
            for (int64_t j = 0; j < N; j++) row[j] += aip * tk_bf16_to_f32(b[p * N + j]);
        }
        for (int64_t j = 0; j < N; j++)
            ex_err_add(&e, tk_bf16_to_f32(c[i * N + j]), fmax(row[j], 0));
    }
    double err = s ? NAN : ex_err_rel(e);
    int ok = !s && err <= 1e-2; /* bf16 output */
    printf("  %s M=%lld N=%lld K=%lld: rel err %.2e  %s\n", gpu ? "GPU" : "interpreter",
           (long long)M, (long long)N, (long long)K, err, ok ? "PASS" : "FAIL");
    free(a), free(b), free(c), free(bias), free(row);
    return ok;
}

int main(int argc, char **argv) {
    ex_opts o;
    if (!ex_parse(argc, argv, &o)) {
        fprintf(stderr, "usage: gemm_bias_relu [--ptx FILE] [--arch ARCH] [--interp]\n");
        return 2;
    }
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    srand(22);
    tk_kernel *k = build_gemm_bias_relu(ctx);
    int ok = k && ex_emit_ptx(ctx, k, &o), gpu = ok && ex_use_gpu(ctx, &o);
    /* Ragged: K = 100 and 37 make rows that are not 16-byte aligned. */
    static const int64_t small[][3] = {{100, 90, 72}, {64, 64, 32}, {33, 130, 100}, {5, 17, 37}};
    for (int i = 0; ok && i < 4; i++) ok = check(ctx, k, 0, small[i][0], small[i][1], small[i][2]);
    if (ok && gpu) {
        static const int64_t big[][3] = {{1024, 1024, 1024}, {1000, 777, 520}, {129, 65, 250}};
        for (int i = 0; ok && i < 3; i++) ok = check(ctx, k, 1, big[i][0], big[i][1], big[i][2]);
    }
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
