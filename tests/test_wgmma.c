/* tk_wgmma / tk_wgmma_wait (ops/wgmma*.c): the type rules, the interpreter
 * against float64, the sm_90a lowering (PTX, ptxas), and the GPU against the
 * interpreter where there is one.
 *
 * The test kernel: C[M,N] (f32) = A[M,K] · B, with B [K,N] (AB) or [N,K]
 * (ABT), bf16 or f16. Blocks of 128 x BN, 8 warps = 2 warpgroups; each
 * k-tile of 64 is copied into swizzled shared tiles, and warpgroup g
 * multiplies rows 64g.. of the A tile (a_row) by the whole B tile, or, with
 * `reg_a`, its own A rows loaded into registers first, or, with `ta`, A
 * stored transposed ([K,M]: ATB / ATBT) with warpgroup g reading columns
 * 64g.. of its [64 x 128] tile. Ragged edges: the copies zero-fill, the
 * store skips. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

static tk_ctx *ctx;

static void setup(void) {
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ref_seed();
}

static void teardown(void) {
    tk_ctx_destroy(ctx);
    ctx = NULL;
}

typedef struct wcfg {
    tk_dtype dt;
    int bn, tb, reg_a, ta;
} wcfg;

/* wg_gemm waits with tk_wgmma_wait_after the k-tile's offset, not tk_wgmma_wait */
static bool g_pin;

static tk_mma_kind kind_of(const wcfg *c) {
    return c->ta ? (c->tb ? TK_MMA_ATBT : TK_MMA_ATB) : c->tb ? TK_MMA_ABT : TK_MMA_AB;
}

static tk_kernel *wg_gemm(const wcfg *c) {
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "wg_gemm", 8, &k), TK_OK);
    tk_value *A = tk_param_tensor(k, "A", c->dt, 2), *B = tk_param_tensor(k, "B", c->dt, 2);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 2);
    tk_value *M = tk_cvt(k, tk_dim(k, A, c->ta), TK_I32),
             *K = tk_cvt(k, tk_dim(k, A, !c->ta), TK_I32);
    tk_value *N = tk_cvt(k, tk_dim(k, C, 1), TK_I32);
    tk_set_grid(k, tk_ceil_div(k, N, tk_const_i32(k, c->bn)),
                tk_ceil_div(k, M, tk_const_i32(k, 128)), NULL);
    tk_value *m0 = tk_mul(k, tk_block_id(k, 1), tk_const_i32(k, 128));
    tk_value *n0 = tk_mul(k, tk_block_id(k, 0), tk_const_i32(k, c->bn));
    tk_value *sA = c->ta ? tk_shared(k, c->dt, 64, 128, TK_SMEM_SWIZZLE, 1)
                         : tk_shared(k, c->dt, 128, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *sB = c->tb ? tk_shared(k, c->dt, c->bn, 64, TK_SMEM_SWIZZLE, 1)
                         : tk_shared(k, c->dt, 64, c->bn, TK_SMEM_SWIZZLE, 1);
    tk_value *row = tk_mul(k, tk_warpgroup_id(k), tk_const_i32(k, 64));
    tk_type acc_t = tk_tile_type(TK_F32, 64, c->bn, TK_WARPGROUP, TK_ROW);
    tk_value *init = tk_zeros(k, acc_t), *cur, *fin;
    tk_value *nk = tk_ceil_div(k, K, tk_const_i32(k, 64));
    tk_value *kt = tk_for_begin(k, tk_const_i32(k, 0), nk, tk_const_i32(k, 1), 1, &init, &cur);
    {
        tk_value *k0 = tk_mul(k, kt, tk_const_i32(k, 64));
        tk_value *ia[2] = {c->ta ? k0 : m0, c->ta ? m0 : k0}, *ib[2] = {k0, n0};
        if (c->tb) {
            ib[0] = n0;
            ib[1] = k0;
        }
        tk_copy_to_shared(k, sA, A, ia, 0.0f, TK_COPY_ASYNC);
        tk_copy_to_shared(k, sB, B, ib, 0.0f, TK_COPY_ASYNC);
        tk_async_commit(k);
        tk_async_wait(k, 0);
        tk_barrier(k);
        tk_value *acc;
        if (c->reg_a) {
            tk_type at = tk_tile_type(c->dt, 64, 64, TK_WARPGROUP, TK_ROW);
            tk_value *is[2] = {row, tk_const_i32(k, 0)};
            tk_value *a = tk_load(k, at, sA, is, 0.0f);
            acc = tk_wgmma(k, kind_of(c), cur, a, sB, NULL);
        } else {
            acc = tk_wgmma(k, kind_of(c), cur, sA, sB, row);
        }
        acc = g_pin ? tk_wgmma_wait_after(k, acc, 0, tk_add(k, k0, tk_const_i32(k, 1)))
                    : tk_wgmma_wait(k, acc, 0);
        tk_barrier(k); /* every warpgroup's multiply read the tiles before the next copy */
        tk_for_end(k, 1, &acc, &fin);
    }
    tk_value *ic[2] = {tk_add(k, m0, row), n0};
    tk_store(k, C, ic, fin);
    if (tk_kernel_finish(k)) ck_abort_msg("%s", tk_kernel_error(k));
    return k;
}

/* ---- type rules -------------------------------------------------------------- */
static tk_status try_wgmma(tk_kernel *k, tk_mma_kind kind, tk_value *acc, tk_value *a, tk_value *b,
                           tk_value *row) {
    tk_wgmma(k, kind, acc, a, b, row);
    return tk_kernel_status(k);
}

START_TEST(test_wgmma_rules) {
    struct {
        const char *what;
        tk_status want;
        const char *msg;
    } cases[] = {
        {"warp acc", TK_ERR_TYPE, "acc is a"},
        {"kind 7", TK_ERR_INVALID_ARG, "kind is 7"},
        {"plain B", TK_ERR_TYPE, "SWIZZLE"},
        {"misaligned B", TK_ERR_SHAPE, "allocate wgmma's tiles first"},
        {"reg A with a_row", TK_ERR_INVALID_ARG, "a_row is given"},
        {"shared A without a_row", TK_ERR_INVALID_ARG, "a_row (its first row) is required"},
        {"B shape", TK_ERR_SHAPE, "needs 64 rows and 128 columns"},
        {"f32 A", TK_ERR_TYPE, "bf16 or f16"},
        {"a_row off the grid", TK_ERR_SHAPE, "a_row is 4"},
        {"reg A transposed", TK_ERR_TYPE, "is read from a shared tile"},
        {"A^T off its column blocks", TK_ERR_SHAPE, "a_row is 32; A's 64 columns"},
        {"A^T with 64-byte rows", TK_ERR_TYPE, "rows of a multiple of 128 bytes"},
        {"A^T past its columns", TK_ERR_SHAPE,
         "A's 128 columns from there must lie inside its 128-column"},
        {"A^T*B^T shape", TK_ERR_SHAPE, "needs 128 rows and 64 columns"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_kernel *k = NULL;
        ck_assert_int_eq(tk_kernel_create(ctx, "r", 4, &k), TK_OK);
        bool misalign = !strcmp(cases[i].what, "misaligned B");
        if (misalign) tk_shared(k, TK_BF16, 16, 16, TK_SMEM_PLAIN, 1); /* 512 bytes first */
        tk_value *sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
        tk_value *sB = tk_shared(k, TK_BF16, 64, 128, TK_SMEM_SWIZZLE, 1);
        tk_value *sP = tk_shared(k, TK_BF16, 64, 128, TK_SMEM_PLAIN, 1);
        tk_value *sW = tk_shared(k, TK_BF16, 32, 128, TK_SMEM_SWIZZLE, 1);
        tk_value *sF = tk_shared(k, TK_F32, 64, 64, TK_SMEM_SWIZZLE, 1);
        tk_value *sT = tk_shared(k, TK_BF16, 64, 32, TK_SMEM_SWIZZLE, 1); /* 64-byte rows */
        tk_value *acc = tk_zeros(k, tk_tile_type(TK_F32, 64, 128, TK_WARPGROUP, TK_ROW));
        tk_value *row = tk_const_i32(k, 0);
        tk_value *ra = tk_zeros(k, tk_tile_type(TK_BF16, 64, 64, TK_WARPGROUP, TK_ROW));
        tk_status s = TK_OK;
        switch (i) {
        case 0:
            s = try_wgmma(k, TK_MMA_AB, tk_zeros(k, tk_tile_type(TK_F32, 64, 128, TK_WARP, TK_ROW)),
                          sA, sB, row);
            break;
        case 1: s = try_wgmma(k, (tk_mma_kind)7, acc, sA, sB, row); break;
        case 2: s = try_wgmma(k, TK_MMA_AB, acc, sA, sP, row); break;
        case 3: s = try_wgmma(k, TK_MMA_AB, acc, sA, sB, row); break;
        case 4: s = try_wgmma(k, TK_MMA_AB, acc, ra, sB, row); break;
        case 5: s = try_wgmma(k, TK_MMA_AB, acc, sA, sB, NULL); break;
        case 6: s = try_wgmma(k, TK_MMA_AB, acc, sA, sW, row); break;
        case 7: s = try_wgmma(k, TK_MMA_AB, acc, sF, sB, row); break;
        case 8: s = try_wgmma(k, TK_MMA_AB, acc, sA, sB, tk_const_i32(k, 4)); break;
        case 9: s = try_wgmma(k, TK_MMA_ATB, acc, ra, sB, NULL); break;
        case 10: s = try_wgmma(k, TK_MMA_ATB, acc, sB, sB, tk_const_i32(k, 32)); break;
        case 11: s = try_wgmma(k, TK_MMA_ATB, acc, sT, sB, row); break;
        case 12:
            s = try_wgmma(k, TK_MMA_ATB,
                          tk_zeros(k, tk_tile_type(TK_F32, 128, 128, TK_WARPGROUP, TK_ROW)), sB,
                          tk_shared(k, TK_BF16, 64, 128, TK_SMEM_SWIZZLE, 1), tk_const_i32(k, 64));
            break;
        case 13: s = try_wgmma(k, TK_MMA_ATBT, acc, sA, sW, row); break;
        }
        ck_assert_msg(s == cases[i].want, "%s: status %s, error %s", cases[i].what,
                      tk_status_name(s), tk_kernel_error(k));
        ck_assert_msg(strstr(tk_kernel_error(k), cases[i].msg), "%s: %s", cases[i].what,
                      tk_kernel_error(k));
        tk_kernel_destroy(k);
    }
    /* a result read before its wait: tk_kernel_finish says which */
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "early", 4, &k), TK_OK);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *sB = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *acc = tk_zeros(k, tk_tile_type(TK_F32, 64, 64, TK_WARPGROUP, TK_ROW));
    acc = tk_wgmma(k, TK_MMA_AB, acc, sA, sB, tk_const_i32(k, 0));
    tk_value *twice = tk_add(k, acc, acc);
    tk_wgmma_wait(k, twice, 0);
    ck_assert_int_eq(tk_kernel_finish(k), TK_ERR_STATE);
    ck_assert_msg(strstr(tk_kernel_error(k), "before a tk_wgmma_wait returned it"), "%s",
                  tk_kernel_error(k));
    tk_kernel_destroy(k);
    /* the wait's pending count */
    ck_assert_int_eq(tk_kernel_create(ctx, "w", 4, &k), TK_OK);
    tk_wgmma_wait(k, tk_zeros(k, tk_tile_type(TK_F32, 64, 64, TK_WARPGROUP, TK_ROW)), 8);
    ck_assert_int_eq(tk_kernel_status(k), TK_ERR_INVALID_ARG);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- the interpreter against float64 ------------------------------------------------ */
static void run_case(const wcfg *c, int64_t M, int64_t N, int64_t K, bool gpu) {
    tk_kernel *k = wg_gemm(c);
    int64_t ad[2] = {c->ta ? K : M, c->ta ? M : K}, bd[2] = {c->tb ? N : K, c->tb ? K : N},
            cd[2] = {M, N};
    ref_tensor ts[3] = {ref_tensor_new(c->dt, 2, ad), ref_tensor_new(c->dt, 2, bd),
                        ref_tensor_new(TK_F32, 2, cd)};
    ref_tensor_random(&ts[0], -1, 1);
    ref_tensor_random(&ts[1], -1, 1);
    ref_tensor_fill_all(&ts[2], NAN);
    if (gpu) {
        double worst = 0;
        tk_status s = th_compare(ctx, k, 3, ts, NULL, &worst);
        ck_assert_msg(s == TK_OK, "%s", tk_ctx_error(ctx));
        static const char *kinds[4] = {"A*B", "A*B^T", "A^T*B", "A^T*B^T"};
        printf("gpu wgmma %s %s %s %lldx%lldx%lld: GPU vs interpreter rel err %.2e\n",
               tk_dtype_name(c->dt), kinds[kind_of(c)], c->reg_a ? "reg A" : "smem A", (long long)M,
               (long long)N, (long long)K, worst);
    } else {
        tk_arg args[3] = {ref_tensor_arg(&ts[0]), ref_tensor_arg(&ts[1]), ref_tensor_arg(&ts[2])};
        ck_assert_msg(tk_interp_run(k, 3, args) == TK_OK, "%s", tk_ctx_error(ctx));
        double *a = ref_tensor_to_f64(&ts[0]), *b = ref_tensor_to_f64(&ts[1]);
        double *out = ref_tensor_to_f64(&ts[2]), *ref = malloc(sizeof(double) * M * N);
        if (c->ta) { /* A [K, M] as [M, K] */
            double *t = malloc(sizeof(double) * M * K);
            for (int64_t i = 0; i < M * K; i++) t[i] = a[(i % K) * M + i / K];
            free(a);
            a = t;
        }
        ref_gemm(a, b, ref, M, N, K, c->tb);
        double e = ref_rel_err(out, ref, M * N);
        ck_assert_msg(e <= 1e-5, "interp wgmma %lldx%lldx%lld: rel err %g", (long long)M,
                      (long long)N, (long long)K, e);
        free(a), free(b), free(out), free(ref);
    }
    for (int i = 0; i < 3; i++) ref_tensor_free(&ts[i]);
    tk_kernel_destroy(k);
}

START_TEST(test_wgmma_interp) {
    const wcfg cs[] = {{TK_BF16, 128, 0, 0, 0}, {TK_BF16, 128, 1, 0, 0}, {TK_F16, 64, 0, 1, 0},
                       {TK_F16, 256, 1, 1, 0},  {TK_BF16, 64, 0, 0, 1},  {TK_F16, 128, 1, 0, 1},
                       {TK_BF16, 256, 0, 0, 1}};
    const int64_t shapes[][3] = {{128, 128, 64}, {200, 136, 100}, {1, 1, 1}, {130, 70, 200}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            run_case(&cs[i], shapes[j][0], shapes[j][1], shapes[j][2], false);
}
END_TEST

/* wgmma in a branch only some of a warpgroup's warps take (max_all of a
 * warpgroup tile is per warp) is a run-time error naming the op. */
START_TEST(test_wgmma_partial_warpgroup) {
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "partial", 4, &k), TK_OK);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *sB = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *z = tk_const_i32(k, 0), *idx[2] = {z, z};
    tk_value *t = tk_load(k, tk_tile_type(TK_F32, 64, 64, TK_WARPGROUP, TK_ROW), A, idx, 0.0f);
    tk_if_begin(k, tk_gt(k, tk_max_all(k, t), tk_const_f32(k, 0.5f)));
    tk_value *acc = tk_wgmma_wait(k, tk_wgmma(k, TK_MMA_AB, t, sA, sB, z), 0), *res;
    tk_else(k, 1, &acc);
    tk_if_end(k, 1, &t, &res);
    tk_store(k, A, idx, res);
    tk_set_grid(k, NULL, NULL, NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    float a[64 * 64] = {0};
    a[20 * 64 + 3] = 1.0f; /* only warp 1's band takes the branch */
    tk_arg arg = {.kind = TK_KIND_GVIEW,
                  .dtype = TK_F32,
                  .rank = 2,
                  .data = a,
                  .dims = {64, 64},
                  .strides = {64, 1}};
    ck_assert_int_eq(tk_interp_run(k, 1, &arg), TK_ERR_RUNTIME);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "only some of its warps"), "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}
END_TEST

/* ---- the sm_90a lowering ------------------------------------------------------------ */
START_TEST(test_wgmma_ptx) {
    const wcfg cs[] = {{TK_BF16, 128, 0, 0, 0}, {TK_F16, 256, 1, 1, 0}, {TK_BF16, 128, 0, 0, 1}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tk_kernel *k = wg_gemm(&cs[i]);
        char *ptx = NULL;
        ck_assert_int_eq(tk_emit_ptx(ctx, k, "sm_90a", &ptx), TK_OK);
        char want[96];
        snprintf(want, sizeof want, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", cs[i].bn,
                 tk_dtype_name(cs[i].dt), tk_dtype_name(cs[i].dt));
        ck_assert_msg(strstr(ptx, want), "no %s in the PTX", want);
        ck_assert(strstr(ptx, "wgmma.fence.sync.aligned"));
        ck_assert(strstr(ptx, "wgmma.commit_group.sync.aligned"));
        ck_assert(strstr(ptx, "wgmma.wait_group.sync.aligned"));
        if (getenv("TK_WGMMA_DUMP")) fputs(ptx, stderr);
        /* ptxas accepts it, without spills */
        if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
            char path[] = "/tmp/tk_wgmma_XXXXXX";
            int fd = mkstemp(path);
            ck_assert_int_ge(fd, 0);
            FILE *f = fdopen(fd, "w");
            fputs(ptx, f);
            fclose(f);
            char cmd[512];
            snprintf(cmd, sizeof cmd,
                     "/usr/local/cuda/bin/ptxas -arch=sm_90a -v %s -o %s.cubin "
                     "2>&1 | grep -E 'error|spill|registers'",
                     path, path);
            FILE *p = popen(cmd, "r");
            char line[512], all[2048] = "";
            while (fgets(line, sizeof line, p)) strncat(all, line, sizeof all - strlen(all) - 1);
            pclose(p);
            printf("ptxas wgmma %s N=%d: %s", tk_dtype_name(cs[i].dt), cs[i].bn, all);
            ck_assert_msg(!strstr(all, "error") && strstr(all, "0 bytes spill stores"), "%s", all);
            unlink(path);
            snprintf(cmd, sizeof cmd, "%s.cubin", path);
            unlink(cmd);
        } else {
            printf("ptxas check skipped: /usr/local/cuda/bin/ptxas not found\n");
        }
        free(ptx);
        /* no wgmma before sm_90a: a status naming the target */
        ck_assert_int_eq(tk_emit_ptx(ctx, k, "sm_90", &ptx), TK_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(tk_ctx_error(ctx), "needs sm_90a"), "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
}
END_TEST

/* tk_wgmma_wait_after: a register `after` only, never a multiply in flight;
 * the same results; on sm_90a a volatile store to the thread's own shared
 * word right before the wait, which is what keeps ptxas from hoisting it. */
START_TEST(test_wgmma_wait_after) {
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "pin_rules", 4, &k), TK_OK);
    tk_value *sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    tk_value *z = tk_const_i32(k, 0);
    tk_type acc_t = tk_tile_type(TK_F32, 64, 64, TK_WARPGROUP, TK_ROW);
    tk_value *acc = tk_wgmma(k, TK_MMA_AB, tk_zeros(k, acc_t), sA, sA, z);
    tk_wgmma_wait_after(k, acc, 0, sA);
    ck_assert_int_eq(tk_kernel_status(k), TK_ERR_TYPE);
    ck_assert_msg(strstr(tk_kernel_error(k), "register value"), "%s", tk_kernel_error(k));
    tk_kernel_destroy(k);
    ck_assert_int_eq(tk_kernel_create(ctx, "pin_in_flight", 4, &k), TK_OK);
    sA = tk_shared(k, TK_BF16, 64, 64, TK_SMEM_SWIZZLE, 1);
    z = tk_const_i32(k, 0);
    tk_value *a1 = tk_wgmma(k, TK_MMA_AB, tk_zeros(k, acc_t), sA, sA, z);
    tk_value *a2 = tk_wgmma(k, TK_MMA_AB, tk_zeros(k, acc_t), sA, sA, z);
    tk_wgmma_wait_after(k, a1, 0, a2); /* a2 is still in flight */
    tk_wgmma_wait(k, a2, 0);
    tk_set_grid(k, NULL, NULL, NULL);
    ck_assert_int_ne(tk_kernel_finish(k), TK_OK);
    ck_assert_msg(strstr(tk_kernel_error(k), "before a tk_wgmma_wait returned it"), "%s",
                  tk_kernel_error(k));
    tk_kernel_destroy(k);

    const wcfg w = {TK_BF16, 128, 0, 0, 0};
    g_pin = true;
    run_case(&w, 200, 136, 100, false); /* the interpreter: the same product */
    tk_kernel *kq = wg_gemm(&w);
    g_pin = false;
    tk_kernel *kp = wg_gemm(&w);
    char *tp = NULL, *tq = NULL;
    ck_assert_int_eq(tk_kernel_print(kp, &tp), TK_OK);
    ck_assert_int_eq(tk_kernel_print(kq, &tq), TK_OK);
    ck_assert_msg(strcmp(tp, tq), "the pin is part of the printed kernel (its cache key)");
    tk_free(tp), tk_free(tq);
    char *ptx = NULL;
    ck_assert_int_eq(tk_emit_ptx(ctx, kq, "sm_90a", &ptx), TK_OK);
    const char *st = strstr(ptx, "st.volatile.shared");
    ck_assert_msg(st, "no pin store in the PTX");
    const char *nl = strchr(st, '\n'),
               *wait = nl ? strstr(nl, "wgmma.wait_group.sync.aligned") : NULL;
    ck_assert_msg(wait, "no wait after the pin store");
    for (const char *c = nl + 1; c < wait; c++) /* nothing but whitespace between them */
        ck_assert_msg(c[0] == ' ' || c[0] == '\t', "the pin store is not right before the wait");
    free(ptx);
    ck_assert_int_eq(tk_emit_ptx(ctx, kp, "sm_90a", &ptx), TK_OK);
    ck_assert_msg(!strstr(ptx, "st.volatile.shared"), "a plain wait has no pin store");
    free(ptx);
    tk_kernel_destroy(kp);
    tk_kernel_destroy(kq);
}
END_TEST

/* ---- the GPU against the interpreter ----------------------------------------------------- */
START_TEST(test_wgmma_gpu) {
    if (th_gpu_or_skip(ctx) != TK_OK) return;
    char arch[16];
    if (tk_gpu_arch(ctx, arch, sizeof arch) || strcmp(arch, "sm_90a")) {
        printf("gpu wgmma skipped: the GPU is %s, wgmma needs sm_90a\n", arch);
        return;
    }
    const wcfg cs[] = {{TK_BF16, 128, 0, 0, 0}, {TK_BF16, 128, 1, 0, 0}, {TK_F16, 64, 0, 1, 0},
                       {TK_BF16, 256, 1, 1, 0}, {TK_F16, 256, 0, 0, 0},  {TK_BF16, 128, 0, 0, 1},
                       {TK_F16, 256, 1, 0, 1},  {TK_BF16, 64, 0, 0, 1}};
    const int64_t shapes[][3] = {{128, 128, 64}, {257, 300, 333}, {1, 1, 1}, {640, 512, 1024}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            run_case(&cs[i], shapes[j][0], shapes[j][1], shapes[j][2], true);
}
END_TEST

int main(void) {
    Suite *s = suite_create("wgmma");
    TCase *tc = tcase_create("wgmma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_wgmma_rules);
    tcase_add_test(tc, test_wgmma_interp);
    tcase_add_test(tc, test_wgmma_partial_warpgroup);
    tcase_add_test(tc, test_wgmma_ptx);
    tcase_add_test(tc, test_wgmma_wait_after);
    tcase_add_test(tc, test_wgmma_gpu);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
