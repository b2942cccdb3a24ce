/* The attention backward (kernels/attention_bwd.c):
 * - both kernels on the CPU interpreter (race checker on) at small ragged
 *   shapes against float64 gradients (tests/util/ref.c, ref_attention_bwd):
 *   ‖err‖/‖ref‖ <= 1e-2 for each of dQ, dK, dV; outputs NaN-poisoned, with
 *   gaps that must stay untouched; the workspace's D checked too;
 * - determinism: runs whose warps execute in different orders
 *   (tk_interp_options.shuffle_seed) give bit-identical gradients;
 * - bad configurations and parameters: a status and a message, no launch;
 * - on a GPU (skipped without one): tk_attention_forward then
 *   tk_attention_backward against float64 at ragged shapes, and three runs
 *   bit-identical.
 * O and L come from the float64 forward (O rounded to the dtype, L to f32),
 * so each gradient is compared with the exact gradient of the same inputs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/attn_check.h"
#include "util/devbuf.h"
#include "util/fixture.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/runapi.h"

typedef struct bcase {
    int64_t B, Hq, Hkv, Nq, Nkv;
    int D, causal;
    tk_dtype dt;
    int bnhd; /* Q, K, V, O, dO and the gradients stored as [B, N, H, D] */
} bcase;

/* ---- one problem: inputs, poisoned outputs, float64 gradients ------------- */
enum { T_Q, T_K, T_V, T_O, T_DO, T_L, T_DW, T_DQ, T_DK, T_DV, NT };

typedef struct problem {
    bcase c;
    float scale;
    ref_tensor t[NT];
    void *before[NT]; /* snapshots of the poisoned outputs */
    double *want[3];  /* dQ, dK, dV                        */
    double *want_d;   /* D = rowsum(dO∘O) of the stored O  */
    double *mag_d;    /* rowsum(|dO∘O|): the scale of D's rounding error */
} problem;

static void problem_init(problem *p, const bcase *c, float scale) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->scale = scale > 0 ? scale : (float)(1.0 / sqrt((double)c->D));
    static const int bnhd[4] = {0, 2, 1, 3};
    const int *perm = c->bnhd ? bnhd : NULL;
    int64_t dq[4] = {c->B, c->Hq, c->Nq, c->D}, dk[4] = {c->B, c->Hkv, c->Nkv, c->D};
    int64_t dl[3] = {c->B, c->Hq, c->Nq};
    for (int i = 0; i < NT; i++) {
        bool kv = i == T_K || i == T_V || i == T_DK || i == T_DV;
        if (i == T_L || i == T_DW)
            p->t[i] = ref_tensor_new_layout(TK_F32, 3, dl, NULL, i == T_L ? 2 : 0);
        else /* outputs padded: their gaps must stay untouched */
            p->t[i] = ref_tensor_new_layout(c->dt, 4, kv ? dk : dq, perm, i >= T_DQ ? 8 : 0);
    }
    ref_tensor_random(&p->t[T_Q], -2, 2);
    ref_tensor_random(&p->t[T_K], -2, 2);
    ref_tensor_random(&p->t[T_V], -1, 1);
    ref_tensor_random(&p->t[T_DO], -1, 1);
    double *q = ref_tensor_to_f64(&p->t[T_Q]), *k = ref_tensor_to_f64(&p->t[T_K]);
    double *v = ref_tensor_to_f64(&p->t[T_V]), *g = ref_tensor_to_f64(&p->t[T_DO]);
    int64_t nq = ref_tensor_count(&p->t[T_Q]), nk = ref_tensor_count(&p->t[T_K]);
    int64_t nl = ref_tensor_count(&p->t[T_L]);
    double *o = malloc(sizeof(double) * (size_t)nq), *l = malloc(sizeof(double) * (size_t)nl);
    for (int i = 0; i < 3; i++) p->want[i] = malloc(sizeof(double) * (size_t)(i ? nk : nq));
    p->want_d = malloc(sizeof(double) * (size_t)nl);
    p->mag_d = malloc(sizeof(double) * (size_t)nl);
    ck_assert(o && l && p->want[0] && p->want[1] && p->want[2] && p->want_d && p->mag_d);
    ref_attention(q, k, v, o, l, c->B, c->Hq, c->Hkv, c->Nq, c->Nkv, c->D, p->scale, c->causal);
    for (int64_t i = 0; i < nq; i++) ref_tensor_set(&p->t[T_O], i, o[i]);
    for (int64_t i = 0; i < nl; i++) ref_tensor_set(&p->t[T_L], i, l[i]);
    double *os = ref_tensor_to_f64(&p->t[T_O]); /* O as the kernel reads it */
    for (int64_t r = 0; r < nl; r++) {
        double s = 0, m = 0;
        for (int64_t d = 0; d < c->D; d++) {
            double t = g[r * c->D + d] * os[r * c->D + d];
            s += t, m += fabs(t);
        }
        p->want_d[r] = s, p->mag_d[r] = m;
    }
    ref_attention_bwd(q, k, v, g, p->want_d, p->want[0], p->want[1], p->want[2], c->B, c->Hq,
                      c->Hkv, c->Nq, c->Nkv, c->D, p->scale, c->causal);
    for (int i = T_DW; i < NT; i++) {
        ref_tensor_fill_all(&p->t[i], NAN);
        p->before[i] = ref_tensor_snapshot(&p->t[i]);
    }
    free(q), free(k), free(v), free(g), free(o), free(l), free(os);
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    for (int i = 0; i < 3; i++) free(p->want[i]);
    free(p->want_d);
    free(p->mag_d);
}

/* D's error relative to the sums of |dO∘O|, not to D itself: D is a sum of
 * D products of either sign, so where they cancel (one row, say), plain
 * relative error measures the cancellation, not the kernel. Summed in f32,
 * each row is within D·2^-24 ≈ 7.6e-6 (D = 128) of this scale, so 1e-5
 * passes every correct kernel and fails a wrong row or an unwritten one. */
static double d_err(const double *got, const double *want, const double *mag, int64_t n) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double t = got[i] - want[i];
        e += t * t, m += mag[i] * mag[i];
    }
    return m > 0 ? sqrt(e / m) : sqrt(e);
}

/* Compares the outputs with the float64 gradients (and D). */
static void problem_check(const problem *p, const char *where) {
    const bcase *c = &p->c;
    double err[3];
    tu_attn_grads(&p->t[T_DQ], p->want, &p->before[T_DQ], where, err);
    double *d = ref_tensor_to_f64(&p->t[T_DW]);
    double ed = d_err(d, p->want_d, p->mag_d, ref_tensor_count(&p->t[T_DW]));
    free(d);
    printf("%s B%lld Hq%lld Hkv%lld Nq%3lld Nkv%3lld D%3d %s %s%s: dQ %.2e dK %.2e dV %.2e "
           "D %.1e\n",
           where, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Nq,
           (long long)c->Nkv, c->D, tk_dtype_name(c->dt), c->causal ? "causal" : "full  ",
           c->bnhd ? " bnhd" : "", err[0], err[1], err[2], ed);
    ck_assert_msg(err[0] <= 1e-2 && err[1] <= 1e-2 && err[2] <= 1e-2,
                  "rel err dQ %g dK %g dV %g > 1e-2", err[0], err[1], err[2]);
    ck_assert_msg(ed <= 1e-5, "D err %g (relative to the rows' sums of |dO∘O|)", ed);
}

/* ---- the interpreter -------------------------------------------------------- */
static tk_kernel *build(const bcase *c, int part, int wgmma) {
    tk_attention_bwd_config cfg = {
        .dtype = c->dt, .head_dim = c->D, .causal = c->causal, .part = part, .wgmma = wgmma};
    tk_kernel *k = NULL;
    tk_status s = tk_attention_bwd_build(ctx, &cfg, &k);
    ck_assert_msg(s == TK_OK, "build: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    return k;
}

/* wgmma: the Hopper kernels (128 rows a block) instead of mma.sync (64). */
static void run_interp(problem *p, int wgmma) {
    const bcase *c = &p->c;
    tk_arg a[NT];
    for (int i = 0; i < NT; i++) a[i] = ref_tensor_arg(&p->t[i]);
    tk_arg dq_args[9] = {
        a[T_Q], a[T_K], a[T_V], a[T_O], a[T_DO], a[T_L], a[T_DW], a[T_DQ], tk_arg_f32(p->scale)};
    tk_arg kv_args[9] = {
        a[T_Q], a[T_K], a[T_V], a[T_DO], a[T_L], a[T_DW], a[T_DK], a[T_DV], tk_arg_f32(p->scale)};
    tk_kernel *kq = build(c, TK_ATTN_BWD_DQ, wgmma), *kk = build(c, TK_ATTN_BWD_DKDV, wgmma);
    int64_t grid[3], rows = wgmma ? 128 : 64;
    ck_assert_int_eq(tk_kernel_grid(kq, 9, dq_args, grid), TK_OK);
    ck_assert_int_eq(grid[0], (c->Nq + rows - 1) / rows);
    ck_assert_int_eq(grid[1], c->Hq);
    ck_assert_int_eq(grid[2], c->B);
    ck_assert_int_eq(tk_kernel_grid(kk, 9, kv_args, grid), TK_OK);
    ck_assert_int_eq(grid[0], (c->Nkv + rows - 1) / rows);
    ck_assert_int_eq(grid[1], c->Hkv);
    tk_status s = tk_interp_run(kq, 9, dq_args);
    ck_assert_msg(s == TK_OK, "dQ kernel: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    s = tk_interp_run(kk, 9, kv_args);
    ck_assert_msg(s == TK_OK, "dK/dV kernel: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
    tk_kernel_destroy(kq);
    tk_kernel_destroy(kk);
}

/* The fast mode: prep, fused, convert, with the f32 accumulator NaN-poisoned
 * (prep must zero it); the wgmma set keeps it transposed, [B, Hq, D, Nq']. */
static void run_interp_fast(problem *p, int wgmma) {
    const bcase *c = &p->c;
    tk_arg a[NT];
    for (int i = 0; i < NT; i++) a[i] = ref_tensor_arg(&p->t[i]);
    int64_t nqp = (c->Nq + 63) / 64 * 64, n = c->B * c->Hq * nqp * c->D;
    float *acc = malloc(sizeof(float) * (size_t)n);
    ck_assert_ptr_nonnull(acc);
    for (int64_t i = 0; i < n; i++) acc[i] = NAN;
    int64_t nat[4] = {c->B, c->Hq, nqp, c->D}, tr[4] = {c->B, c->Hq, c->D, nqp};
    int64_t tr_st[4] = {c->Hq * c->D * nqp, c->D * nqp, 1, nqp}; /* natural view of tr */
    tk_arg acc_nat =
        wgmma ? tk_arg_strided(acc, TK_F32, 4, nat, tr_st) : tk_arg_tensor(acc, TK_F32, 4, nat);
    tk_arg acc_fused = wgmma ? tk_arg_tensor(acc, TK_F32, 4, tr) : acc_nat;
    tk_arg prep_args[4] = {a[T_O], a[T_DO], a[T_DW], acc_nat};
    tk_arg fused_args[10] = {a[T_Q],  a[T_K],  a[T_V],  a[T_DO],   a[T_L],
                             a[T_DW], a[T_DK], a[T_DV], acc_fused, tk_arg_f32(p->scale)};
    tk_arg conv_args[3] = {acc_nat, a[T_DQ], tk_arg_f32(p->scale)};
    struct {
        int part, n;
        tk_arg *args;
        int64_t gx;
    } runs[3] = {
        {TK_ATTN_BWD_PREP, 4, prep_args, (c->Nq + 63) / 64},
        {TK_ATTN_BWD_FUSED, 10, fused_args, (c->Nkv + (wgmma ? 127 : 63)) / (wgmma ? 128 : 64)},
        {TK_ATTN_BWD_CONVERT, 3, conv_args, (c->Nq + 63) / 64}};
    for (int r = 0; r < 3; r++) {
        tk_kernel *k = build(c, runs[r].part, wgmma);
        int64_t grid[3];
        ck_assert_int_eq(tk_kernel_grid(k, runs[r].n, runs[r].args, grid), TK_OK);
        ck_assert_int_eq(grid[0], runs[r].gx);
        ck_assert_int_eq(grid[2], c->B);
        tk_status s = tk_interp_run(k, runs[r].n, runs[r].args);
        ck_assert_msg(s == TK_OK, "part %d: %s: %s", runs[r].part, tk_status_name(s),
                      tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    free(acc);
}

static const bcase cases[] = {
    {1, 1, 1, 1, 1, 64, 0, TK_BF16, 0},
    {1, 2, 2, 17, 17, 64, 1, TK_BF16, 0},
    {2, 2, 1, 70, 70, 64, 0, TK_F16, 0},   /* GQA 2:1, ragged */
    {1, 2, 2, 65, 65, 128, 1, TK_BF16, 0}, /* causal diagonal tiles, D 128 */
    {1, 4, 2, 17, 100, 64, 0, TK_BF16, 0}, /* Nq < Nkv, GQA */
    {1, 2, 1, 100, 17, 64, 1, TK_BF16, 0}, /* Nq > Nkv causal: rows without keys */
    {1, 1, 1, 65, 130, 128, 1, TK_F16, 1}, /* Nq < Nkv causal */
    {1, 3, 1, 130, 70, 128, 0, TK_BF16, 1},
    {1, 2, 2, 130, 130, 64, 1, TK_F16, 1},
    {1, 4, 1, 1, 130, 64, 1, TK_F16, 0}, /* one query, GQA 4:1 */
    {1, 2, 1, 150, 140, 128, 1, TK_BF16, 0},
    {1, 2, 2, 64, 1, 64, 1, TK_BF16, 0}, /* one key: only the last row sees it */
    /* enough key tiles that the Hopper dQ kernel's 3-stage ring wraps (its
     * tiles are 128 keys at D 64): a stage refilled while read is a race */
    {1, 2, 1, 70, 600, 64, 1, TK_BF16, 0},
    {1, 2, 2, 70, 600, 64, 0, TK_F16, 1},
    {1, 1, 1, 130, 333, 128, 1, TK_BF16, 0},
    {1, 2, 1, 200, 300, 128, 0, TK_BF16, 0},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void check_case(const bcase *c, int wgmma, int fast) {
    static const char *where[2][2] = {{"interp", "interp wgmma"},
                                      {"interp fast", "interp fast wgmma"}};
    problem p;
    problem_init(&p, c, (float)((0.75 + 0.25 * ref_uniform()) / sqrt((double)c->D)));
    (fast ? run_interp_fast : run_interp)(&p, wgmma);
    problem_check(&p, where[fast][wgmma]);
    problem_free(&p);
}

START_TEST(test_bwd) { check_case(&cases[_i], 0, 0); }
END_TEST

/* The Hopper kernels (on the interpreter: wgmma and the warpgroup tiles). */
START_TEST(test_bwd_wgmma) { check_case(&cases[_i], 1, 0); }
END_TEST

/* The fast mode on both kernel sets. */
START_TEST(test_bwd_fast) { check_case(&cases[_i], 0, 1); }
END_TEST

START_TEST(test_bwd_fast_wgmma) { check_case(&cases[_i], 1, 1); }
END_TEST

START_TEST(test_bwd_random) {
    bcase c = {.B = ref_randint(1, 2),
               .Hkv = ref_randint(1, 2),
               .Nq = ref_randint(1, 150),
               .Nkv = ref_randint(1, 600),
               .D = ref_randint(0, 1) ? 128 : 64,
               .causal = (int)ref_randint(0, 1),
               .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
               .bnhd = (int)ref_randint(0, 1)};
    c.Hq = c.Hkv * ref_randint(1, 3);
    if (ref_randint(0, 2) == 0) c.Nkv = c.Nq;
    check_case(&c, (int)ref_randint(0, 1), (int)ref_randint(0, 1));
}
END_TEST

/* Warps run in different orders between block-wide ops: the gradients stay
 * bit-identical (every element has one writer and a fixed summation order). */
START_TEST(test_bwd_deterministic) {
    static const bcase c = {1, 4, 2, 100, 90, 64, 1, TK_BF16, 0};
    problem p[2];
    for (int r = 0; r < 2; r++) {
        problem_init(&p[r], &c, 0.125f);
        if (r) /* the same inputs */
            for (int i = 0; i < T_DW; i++)
                memcpy(p[1].t[i].data, p[0].t[i].data, tu_bytes_of(&p[0].t[i]));
        tk_interp_options o;
        ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
        o.shuffle_seed = 11 + 22 * (uint64_t)r;
        ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
        run_interp(&p[r], 0);
    }
    problem_check(&p[0], "interp");
    for (int i = T_DW; i < NT; i++)
        ck_assert_msg(!memcmp(p[0].t[i].data, p[1].t[i].data, tu_bytes_of(&p[0].t[i])),
                      "tensor %d differs between warp orders", i);
    problem_free(&p[0]);
    problem_free(&p[1]);
}
END_TEST

/* ---- bad configurations and parameters -------------------------------------- */
START_TEST(test_bwd_config_errors) {
    tk_kernel *k = (tk_kernel *)&k;
    tk_attention_bwd_config c = {.dtype = TK_F32, .head_dim = 64};
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "dtype is f32"));
    c.dtype = TK_BF16, c.head_dim = 256;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "head_dim is 256"));
    c.head_dim = 64, c.causal = -1;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "causal is -1"));
    c.causal = 0, c.part = 5;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "part is 5"));
    c.part = -1;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "part is -1"));
    ck_assert_int_eq(tk_attention_bwd_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_bwd_build(NULL, &c, &k), TK_ERR_INVALID_ARG);
    /* names and shared memory: D 128 keeps the block's K and V in shared */
    c.part = TK_ATTN_BWD_DKDV, c.head_dim = 128, c.causal = 1;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_dkdv_bf16_d128_causal");
    ck_assert_int_eq(tk_kernel_warps(k), 4);
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 6 * 64 * 128 * 2);
    tk_kernel_destroy(k);
    c.part = TK_ATTN_BWD_DQ, c.head_dim = 64, c.causal = 0, c.dtype = TK_F16;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_dq_f16_d64");
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), 4 * 64 * 64 * 2);
    tk_kernel_destroy(k);
    /* the Hopper kernels: 8 warps, K and V (dK/dV) or Q and dO (dQ) of 128
     * rows and three stages of 64 rows of the others */
    c.wgmma = 2;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "wgmma is 2"));
    c.wgmma = 1, c.part = TK_ATTN_BWD_DKDV, c.head_dim = 128, c.dtype = TK_BF16;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_dkdv_bf16_d128_wgmma");
    ck_assert_int_eq(tk_kernel_warps(k), 8);
    ck_assert_uint_eq(tk_kernel_smem_bytes(k), (2 * 128 + 6 * 64) * 128 * 2);
    tk_kernel_destroy(k);
    /* the fast mode: prep and convert are one kernel for both sets, causal
     * or not (4 warps); the fused Hopper kernel adds dSᵀ (128 keys x its
     * query tile: 32 at D 128) and the f32 dQᵀ tile (D x 32) to the dK/dV
     * kernel's tiles */
    c.part = TK_ATTN_BWD_PREP, c.causal = 1;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_prep_bf16_d128");
    ck_assert_int_eq(tk_kernel_warps(k), 4);
    tk_kernel_destroy(k);
    c.part = TK_ATTN_BWD_CONVERT, c.dtype = TK_F16, c.head_dim = 64;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_convert_f16_d64");
    tk_kernel_destroy(k);
    c.part = TK_ATTN_BWD_FUSED, c.dtype = TK_BF16, c.head_dim = 128, c.causal = 0;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_bwd_fused_bf16_d128_wgmma");
    ck_assert_int_eq(tk_kernel_warps(k), 8);
    ck_assert_uint_eq(tk_kernel_smem_bytes(k),
                      (2 * 128 * 128 + 2 * 3 * 32 * 128 + 128 * 32) * 2 + 128 * 32 * 4);
    tk_kernel_destroy(k);
}
END_TEST

static char dummy[256] __attribute__((aligned(16)));

static tk_attention_bwd_params good_params(void) {
    tk_attention_bwd_params p = TK_ATTENTION_BWD_PARAMS_INIT; /* quiet under -Wextra */
    p.dtype = TK_BF16, p.head_dim = 64;
    p.batch = 1, p.heads_q = 4, p.heads_kv = 2, p.seq_q = 8, p.seq_kv = 8;
    p.q = p.k = p.v = p.o = p.dout = dummy;
    p.dq = p.dk = p.dv = p.workspace = dummy;
    p.lse = (const float *)dummy;
    p.workspace_bytes = 4 * 8 * sizeof(float);
    return p;
}

static void expect_error(tk_attention_bwd_params p, const char *frag) {
    tk_status s = tk_attention_backward(ctx, &p, NULL);
    ck_assert_msg(s == TK_ERR_INVALID_ARG, "got %s (%s)", tk_status_name(s), tk_ctx_error(ctx));
    ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    s = tk_attention_backward_prepare(ctx, &p, NULL); /* the same checks */
    ck_assert_int_eq(s, TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
}

START_TEST(test_bwd_rejects_bad_params) {
    tk_attention_bwd_params p = good_params();
    ck_assert_int_eq(tk_attention_backward(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_backward(NULL, &p, NULL), TK_ERR_INVALID_ARG);
    p.struct_size = 0;
    expect_error(p, "struct_size");
    static const char *ptrs[] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv", "lse", "workspace"};
    for (int i = 0; i < 10; i++) {
        p = good_params();
        const void **f[10] = {&p.q,
                              &p.k,
                              &p.v,
                              &p.o,
                              &p.dout,
                              (const void **)&p.dq,
                              (const void **)&p.dk,
                              (const void **)&p.dv,
                              (const void **)&p.lse,
                              (const void **)&p.workspace};
        *f[i] = NULL;
        char want[32];
        snprintf(want, sizeof want, ": %s is NULL", ptrs[i]);
        expect_error(p, want);
    }
    p = good_params(), p.heads_q = 3;
    expect_error(p, "not a multiple of heads_kv");
    p = good_params(), p.head_dim = 96;
    expect_error(p, "head_dim is 96");
    p = good_params(), p.seq_kv = 0;
    expect_error(p, "seq_kv is 0");
    p = good_params(), p.batch = 70000;
    expect_error(p, "batch is 70000");
    p = good_params(), p.dtype = TK_F32;
    expect_error(p, "dtype is f32");
    p = good_params(), p.causal = 2;
    expect_error(p, "causal is 2");
    p = good_params(), p.scale = -1.0f;
    expect_error(p, "scale");
    p = good_params(), p.scale = INFINITY;
    expect_error(p, "scale");
    p = good_params(), p.dv_strides[0] = 64, p.dv_strides[3] = 2;
    expect_error(p, "dv_strides[3] is 2");
    p = good_params(), p.dout_strides[1] = -5, p.dout_strides[3] = 1;
    expect_error(p, "dout_strides[1] is negative");
    p = good_params(), p.lse_strides[2] = -1;
    expect_error(p, "lse_strides[2] is negative");
    p = good_params(), p.workspace_bytes = 4 * 8 * sizeof(float) - 1;
    expect_error(p, "workspace_bytes is 127; these sizes need 128");
    p = good_params(), p.workspace = dummy + 2;
    expect_error(p, "workspace is not 4-byte aligned");
    p = good_params(), p.kernel = 3;
    expect_error(p, "kernel is 3");
    p = good_params(), p.mode = 2;
    expect_error(p, "mode is 2");
    p = good_params(),
    p.mode = TK_ATTN_BWD_FAST; /* D (to 256 bytes), the accumulator 4x64x64 f32 */
    expect_error(p, "workspace_bytes is 128; these sizes need 65792");
    /* the Hopper kernels where there is no sm_90a GPU (here: none at all) */
    char arch[16] = "";
    tk_gpu_arch(ctx, arch, sizeof arch);
    if (strcmp(arch, "sm_90a")) {
        p = good_params(), p.kernel = TK_ATTN_WGMMA;
        ck_assert_int_eq(tk_attention_backward(ctx, &p, NULL), TK_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "TK_ATTN_WGMMA needs an sm_90a GPU"));
    }
}
END_TEST

START_TEST(test_bwd_workspace) {
    tk_attention_bwd_params p = {.struct_size =
                                     sizeof(tk_attention_bwd_params)}; /* pointers not needed */
    p.batch = 3, p.heads_q = 8, p.heads_kv = 2, p.seq_q = 1000, p.seq_kv = 7;
    size_t bytes = 1;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, (size_t)3 * 8 * 1000 * 4);
    p.seq_q = 0;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_uint_eq(bytes, 0);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "seq_q is 0"));
    /* fast: D, then at 256 bytes the accumulator of 1000 rows rounded up to 1024 */
    p.seq_q = 1000, p.mode = TK_ATTN_BWD_FAST;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "dtype is")); /* its head_dim is needed */
    p.dtype = TK_BF16, p.head_dim = 128;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, (size_t)3 * 8 * 1000 * 4 + (size_t)3 * 8 * 1024 * 128 * 4);
    p.seq_q = (int64_t)1 << 30, p.heads_q = p.batch = 65535, p.heads_kv = 1;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "2^62 bytes"));
    p.mode = 2;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "mode is 2"));
    p.seq_q = 1;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, NULL, &bytes), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_backward_workspace(NULL, &p, &bytes), TK_ERR_INVALID_ARG);
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
static const bcase gpu_cases[] = {
    {1, 1, 1, 1, 1, 64, 0, TK_BF16, 0},       {1, 2, 2, 17, 17, 64, 1, TK_BF16, 0},
    {2, 2, 1, 63, 63, 128, 0, TK_F16, 0},     {1, 4, 4, 64, 64, 128, 1, TK_BF16, 1},
    {2, 3, 3, 65, 65, 64, 0, TK_F16, 1},      {1, 2, 2, 1000, 1000, 128, 1, TK_BF16, 0},
    {1, 2, 2, 100, 300, 64, 1, TK_BF16, 0},   {1, 2, 2, 300, 100, 128, 1, TK_F16, 0},
    {2, 8, 2, 129, 129, 64, 1, TK_BF16, 0},   {1, 8, 1, 77, 200, 128, 0, TK_F16, 1},
    {1, 4, 2, 1, 33, 128, 1, TK_BF16, 0},     {1, 6, 3, 250, 250, 64, 1, TK_F16, 1},
    {1, 1, 1, 2048, 31, 64, 1, TK_BF16, 0},   {1, 1, 1, 31, 2048, 64, 1, TK_F16, 0},
    {1, 2, 2, 1024, 1024, 64, 0, TK_BF16, 1}, {1, 2, 1, 333, 333, 128, 1, TK_BF16, 0},
};

/* tk_attention_backward on the device copies of p's tensors; the outputs
 * come back into p. */
static void run_gpu(problem *p, void *dev[NT], int kernel, int mode, size_t ws) {
    const bcase *c = &p->c;
    tk_attention_bwd_params a = {
        .struct_size = sizeof(tk_attention_bwd_params), .kernel = kernel, .mode = mode};
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = c->Nq, a.seq_kv = c->Nkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.dout = dev[T_DO];
    a.lse = dev[T_L], a.dq = dev[T_DQ], a.dk = dev[T_DK], a.dv = dev[T_DV];
    a.workspace = dev[T_DW];
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &a.workspace_bytes), TK_OK);
    ck_assert_uint_le(a.workspace_bytes, ws);
    int64_t *st[NT] = {a.q_strides,   a.k_strides, a.v_strides,  a.o_strides,  a.dout_strides,
                       a.lse_strides, NULL,        a.dq_strides, a.dk_strides, a.dv_strides};
    for (int i = 0; i < NT; i++)
        if (st[i]) tu_strides(st[i], &p->t[i], true);
    tk_status s = tk_attention_backward(ctx, &a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_backward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = T_DW; i < NT; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
}

/* The workspace of the fast mode (the larger), NaN-poisoned, with the
 * problem's poisoned D at its start. */
static void *upload_workspace(const problem *p, size_t *bytes) {
    const bcase *c = &p->c;
    tk_attention_bwd_params a = {.struct_size = sizeof a, .mode = TK_ATTN_BWD_FAST};
    a.dtype = c->dt, a.head_dim = c->D, a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv;
    a.seq_q = c->Nq, a.seq_kv = c->Nkv;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, bytes), TK_OK);
    float *host = malloc(*bytes);
    ck_assert_ptr_nonnull(host);
    for (size_t i = 0; i < *bytes / sizeof(float); i++) host[i] = NAN;
    void *d = tu_dev_copy(ctx, host, *bytes);
    free(host);
    return d;
}

/* gpu_cases[i] through `kernel` (a tk_attn_kernel) in `mode`. Then two more
 * runs (outputs poisoned again): bit-identical, but for the fast mode's dQ,
 * which must stay within rounding of the first. */
static void gpu_case(int ci, int kernel, int mode) {
    problem p;
    problem_init(&p, &gpu_cases[ci], 0.0f); /* 0: 1/sqrt(D), the run API's default */
    void *dev[NT];
    size_t ws;
    for (int i = 0; i < NT; i++)
        dev[i] = i == T_DW ? upload_workspace(&p, &ws) : tu_dev_in(ctx, &p.t[i]);
    run_gpu(&p, dev, kernel, mode, ws);
    static const char *where[2][2] = {{"gpu", "gpu mma.sync"}, {"gpu fast", "gpu fast mma.sync"}};
    problem_check(&p, where[mode][kernel == TK_ATTN_MMA_SYNC]);
    void *first[NT] = {0};
    for (int i = T_DW; i < NT; i++) first[i] = ref_tensor_snapshot(&p.t[i]);
    for (int r = 0; r < 2; r++) {
        for (int i = T_DW; i < NT; i++) tu_dev_reset(ctx, &p.t[i], dev[i], p.before[i]);
        run_gpu(&p, dev, kernel, mode, ws);
        for (int i = T_DW; i < NT; i++) {
            if (mode == TK_ATTN_BWD_FAST && i == T_DQ) {
                ref_tensor keep = p.t[i];
                keep.data = first[i];
                double *y = ref_tensor_to_f64(&keep);
                double e = ref_tensor_rel_err(&p.t[i], y);
                ck_assert_msg(e <= 1e-2, "run %d: dQ moved by %g from the first run", r + 2, e);
                free(y);
                continue;
            }
            ck_assert_msg(!memcmp(first[i], p.t[i].data, tu_bytes_of(&p.t[i])),
                          "run %d: tensor %d differs from the first run", r + 2, i);
        }
    }
    for (int i = 0; i < NT; i++) {
        tk_gpu_free(ctx, dev[i]);
        free(first[i]);
    }
    problem_free(&p);
}

/* The library's choice (the Hopper kernels on sm_90a), then mma.sync, each
 * in both modes. */
START_TEST(test_bwd_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(_i, TK_ATTN_AUTO, TK_ATTN_BWD_DETERMINISTIC);
}
END_TEST

START_TEST(test_bwd_on_gpu_mma_sync) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(_i, TK_ATTN_MMA_SYNC, TK_ATTN_BWD_DETERMINISTIC);
}
END_TEST

START_TEST(test_bwd_on_gpu_fast) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(_i, TK_ATTN_AUTO, TK_ATTN_BWD_FAST);
}
END_TEST

START_TEST(test_bwd_on_gpu_fast_mma_sync) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(_i, TK_ATTN_MMA_SYNC, TK_ATTN_BWD_FAST);
}
END_TEST

static Suite *bwd_suite(void) {
    Suite *s = suite_create("attention_bwd");
    TCase *tc = ctx_tcase(s, "api", 0);
    tcase_add_test(tc, test_bwd_config_errors);
    tcase_add_test(tc, test_bwd_rejects_bad_params);
    tcase_add_test(tc, test_bwd_workspace);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_bwd, 0, N_CASES);
    tcase_add_loop_test(tc, test_bwd_wgmma, 0, N_CASES);
    tcase_add_loop_test(tc, test_bwd_fast, 0, N_CASES);
    tcase_add_loop_test(tc, test_bwd_fast_wgmma, 0, N_CASES);
    tcase_add_loop_test(tc, test_bwd_random, 0, 6);
    tcase_add_test(tc, test_bwd_deterministic);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_bwd_on_gpu, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tcase_add_loop_test(tc, test_bwd_on_gpu_mma_sync, 0,
                        (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tcase_add_loop_test(tc, test_bwd_on_gpu_fast, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tcase_add_loop_test(tc, test_bwd_on_gpu_fast_mma_sync, 0,
                        (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    return s;
}

int main(void) { return run_suite(bwd_suite()); }
