/* Attention decoding (kernels/attention_decode.c, attention_decode_run.c):
 * - the kernels on the CPU interpreter (race checker on), through the same
 *   plan and arguments tk_attention_forward uses, at small ragged shapes
 *   against the float64 forward: both packings, split and direct, GQA,
 *   causal with rows that see no key, [B,N,H,D] and padded layouts; outputs
 *   NaN-poisoned, with gaps that must stay untouched;
 * - the plan: which packing, how many splits, how much workspace;
 * - bad configurations and parameters: a status and a message, no launch;
 * - on a GPU (skipped without one): tk_attention_forward at decode shapes
 *   up to 100k keys against float64, split and not, two runs bit-identical. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_decode.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/attn_check.h"
#include "util/decode.h"
#include "util/devbuf.h"
#include "util/fixture.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/runapi.h"

typedef struct dcase {
    int64_t B, Hq, Hkv, Nq, Nkv;
    int D, causal;
    tk_dtype dt;
    int bnhd;   /* Q, K, V, O stored as [B, N, H, D] */
    int splits; /* num_splits (0: the plan's choice on `sm` SMs)    */
    int sm;     /* SMs the interpreter's plan assumes (0: 132)      */
} dcase;

/* ---- one problem: inputs, poisoned outputs, the float64 forward ------------ */
enum { T_Q, T_K, T_V, T_O, T_L, NT };

typedef struct problem {
    dcase c;
    float scale;
    ref_tensor t[NT];
    void *before[NT];
    double *want_o, *want_l;
} problem;

static void problem_init(problem *p, const dcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    static const int bnhd[4] = {0, 2, 1, 3};
    const int *perm = c->bnhd ? bnhd : NULL;
    int64_t dq[4] = {c->B, c->Hq, c->Nq, c->D}, dk[4] = {c->B, c->Hkv, c->Nkv, c->D};
    int64_t dl[3] = {c->B, c->Hq, c->Nq};
    p->t[T_Q] = ref_tensor_new_layout(c->dt, 4, dq, perm, 0);
    p->t[T_K] = ref_tensor_new_layout(c->dt, 4, dk, perm, 0);
    p->t[T_V] = ref_tensor_new_layout(c->dt, 4, dk, perm, 0);
    p->t[T_O] = ref_tensor_new_layout(c->dt, 4, dq, perm, c->bnhd ? 0 : 8);
    p->t[T_L] = ref_tensor_new_layout(TK_F32, 3, dl, NULL, 2);
    p->scale = tu_attn_fill(p->t, p->before, c->D);
    double *q = ref_tensor_to_f64(&p->t[T_Q]), *k = ref_tensor_to_f64(&p->t[T_K]);
    double *v = ref_tensor_to_f64(&p->t[T_V]);
    p->want_o = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_O]));
    p->want_l = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_L]));
    ck_assert(p->want_o && p->want_l);
    ref_attention(q, k, v, p->want_o, p->want_l, c->B, c->Hq, c->Hkv, c->Nq, c->Nkv, c->D, p->scale,
                  c->causal);
    free(q), free(k), free(v);
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    free(p->want_o), free(p->want_l);
}

/* O, L against float64 (‖err‖/‖ref‖: 1e-2, 1e-3), every element written, no
 * stray write. */
static void problem_check(const problem *p, const char *where, const tk_attn_decode_plan *pl) {
    const dcase *c = &p->c;
    tu_attn_out r = tu_attn_measure(&p->t[T_O], &p->t[T_L], p->want_o, p->want_l, p->before[T_O],
                                    p->before[T_L]);
    printf("decode %-6s B%lld Hq%-2lld Hkv%-2lld Nq%-2lld Nkv%-6lld D%-3d %s %s%s: %s S%-3d "
           "w%d k%d: rel err O %.2e L %.2e\n",
           where, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Nq,
           (long long)c->Nkv, c->D, tk_dtype_name(c->dt), c->causal ? "causal" : "full  ",
           c->bnhd ? " bnhd" : "     ", pl ? (pl->pack ? "heads  " : "queries") : "?",
           pl ? pl->splits : 0, pl ? pl->warps : 0, pl ? pl->kw : 0, r.eo, r.el);
    tu_attn_expect(&r);
}

/* The call's parameters on data pointers dev (host ones for the interpreter). */
static tk_attention_params params_of(const problem *p, void *const dev[NT]) {
    const dcase *c = &p->c;
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = c->Nq, a.seq_kv = c->Nkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.lse = dev[T_L];
    tu_strides(a.q_strides, &p->t[T_Q], true);
    tu_strides(a.k_strides, &p->t[T_K], true);
    tu_strides(a.v_strides, &p->t[T_V], true);
    tu_strides(a.o_strides, &p->t[T_O], true);
    tu_strides(a.lse_strides, &p->t[T_L], true);
    a.num_splits = c->splits;
    return a;
}

/* ---- on the interpreter --------------------------------------------------- */
static const dcase cases[] = {
    {1, 1, 1, 1, 1, 64, 0, TK_BF16, 0, 0, 0},     /* one key, direct */
    {1, 4, 1, 1, 300, 64, 0, TK_BF16, 0, 3, 0},   /* GQA 4:1, heads packed, 3 splits */
    {2, 8, 2, 1, 130, 128, 1, TK_F16, 1, 0, 2},   /* causal (no mask at Nq 1), splits chosen */
    {1, 2, 2, 5, 200, 64, 1, TK_BF16, 0, 2, 0},   /* Nq 5, queries packed, causal */
    {1, 8, 2, 3, 150, 64, 1, TK_BF16, 1, 4, 0},   /* bnhd: heads packed, per-tile causal */
    {1, 4, 1, 16, 70, 64, 0, TK_F16, 0, 2, 0},    /* 16 queries, 4 heads: 4 tiles, 4 warps */
    {1, 2, 1, 9, 5, 128, 1, TK_BF16, 0, 0, 0},    /* Nq > Nkv causal: rows without keys */
    {1, 3, 1, 7, 3, 64, 1, TK_BF16, 1, 2, 0},     /* bnhd, rows without keys, 2 splits */
    {1, 20, 1, 1, 100, 64, 0, TK_BF16, 0, 2, 0},  /* G 20: two tiles of heads (16 + 4) */
    {1, 2, 2, 2, 90, 256, 1, TK_F16, 0, 3, 0},    /* D 256 */
    {2, 6, 3, 1, 65, 256, 0, TK_BF16, 1, 0, 0},   /* D 256, direct */
    {1, 16, 2, 2, 260, 128, 1, TK_BF16, 1, 5, 0}, /* bnhd G 8, Nq 2: heads */
    {1, 2, 1, 4, 129, 128, 0, TK_F16, 0, 100, 0}, /* more splits than tiles: one a tile */
    {1, 4, 1, 1, 1300, 64, 0, TK_BF16, 0, 37, 0}, /* 37 partials (16 empty): 4 merge warps */
    {1, 32, 4, 1, 200, 64, 0, TK_BF16, 0, 0, 1},  /* 1 SM: still a split or two */
    {1, 1, 1, 16, 16, 64, 1, TK_BF16, 0, 0, 0},   /* square causal */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* The plan tk_attention_forward would make, its kernels built and run on
 * the interpreter (a NaN-poisoned host workspace). */
/* want_kw: warps sharing each tile's keys where the plan splits them (the
 * library's plan asks for 1; the kernels take 2 and 4 too). */
static void interp_case(const dcase *c, int want_kw) {
    problem p;
    problem_init(&p, c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attention_params a = params_of(&p, host);
    tk_attn_decode_plan pl, fit;
    int sm = c->sm ? c->sm : 132;
    tu_decode_plan_ws(ctx, &a, sm, want_kw, &pl);
    ck_assert_int_eq(tk_attn_decode_plan_kw(ctx, "test", &a, sm, true, want_kw, &fit), TK_OK);
    ck_assert_int_eq(fit.splits, pl.splits); /* the workspace holds what it asked for */
    tu_decode_on_interp(ctx, &a, &pl);
    problem_check(&p, "interp", &pl);
    free(a.workspace);
    problem_free(&p);
}

START_TEST(test_decode) { interp_case(&cases[_i], 1 << (_i % 3)); }
END_TEST

START_TEST(test_decode_random) {
    dcase c = {.B = ref_randint(1, 2),
               .Hkv = ref_randint(1, 2),
               .Nq = ref_randint(1, 16),
               .Nkv = ref_randint(1, 400),
               .D = ref_randint(0, 1) ? 128 : 64,
               .causal = (int)ref_randint(0, 1),
               .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
               .bnhd = (int)ref_randint(0, 1),
               .splits = (int)ref_randint(0, 4)};
    c.Hq = c.Hkv * ref_randint(1, 8);
    if (ref_randint(0, 1)) c.Nq = 1;
    interp_case(&c, 1 << ref_randint(0, 2));
}
END_TEST

/* ---- the plan -------------------------------------------------------------- */
static tk_attention_params shape(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv,
                                 int D) {
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = TK_BF16, a.head_dim = D, a.batch = B, a.heads_q = Hq, a.heads_kv = Hkv;
    a.seq_q = Nq, a.seq_kv = Nkv;
    static char dummy[256] __attribute__((aligned(256)));
    a.q = a.k = a.v = a.o = dummy, a.lse = (float *)dummy;
    return a;
}

START_TEST(test_decode_plan) {
    tk_attn_decode_plan pl;
    /* one query, GQA 32/8: the group's 4 heads in one tile, one warp */
    tk_attention_params a = shape(1, 32, 8, 1, 8192, 128);
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
    ck_assert_int_eq(pl.pack, TK_ATTN_PACK_HEADS);
    ck_assert_int_eq(pl.T, 1);
    ck_assert_int_eq(pl.Rv, 4);
    ck_assert_int_eq(pl.warps, 1);
    /* 8 blocks without a split; the GPU holds 33 times as many (two an SM):
     * 33 ranges would need 8 tiles each, which 32 ranges take */
    ck_assert_int_eq(pl.splits, 32);
    ck_assert_uint_gt(pl.bytes, 0);
    /* no workspace: the call does not split */
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, true, &pl), TK_OK);
    ck_assert_int_eq(pl.splits, 1);
    ck_assert_uint_eq(pl.bytes, 0);
    /* a workspace for some splits: as many as fit */
    tk_attn_decode_plan full;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &full), TK_OK);
    static char ws[1 << 16] __attribute__((aligned(256)));
    a.workspace = ws, a.workspace_bytes = full.bytes / 2;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, true, &pl), TK_OK);
    ck_assert_int_gt(pl.splits, 1);
    ck_assert_int_lt(pl.splits, full.splits);
    ck_assert_uint_le(pl.bytes, a.workspace_bytes);
    /* a forced count the workspace cannot hold */
    a.num_splits = full.splits;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, true, &pl), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "num_splits"));
    /* a full GPU: no split */
    a = shape(64, 32, 8, 1, 4096, 128);
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
    ck_assert_int_eq(pl.splits, 1);
    /* dense [B,H,N,D] with 8 queries: rows are queries (the heads view needs
     * [B,N,H,D]); G 4 tiles on 4 warps */
    a = shape(1, 8, 2, 8, 1000, 64);
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
    ck_assert_int_eq(pl.pack, TK_ATTN_PACK_QUERIES);
    ck_assert_int_eq(pl.T, 4);
    ck_assert_int_eq(pl.Rv, 8);
    ck_assert_int_eq(pl.warps, 4);
    /* the same in [B,N,H,D]: 8 query tiles of 4 heads would be more tiles */
    int64_t st[4] = {8 * 8 * 64, 64, 8 * 64, 1};
    memcpy(a.q_strides, st, sizeof st), memcpy(a.o_strides, st, sizeof st);
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
    ck_assert_int_eq(pl.pack, TK_ATTN_PACK_QUERIES);
    /* [B,N,H,D], 2 queries, G 8: two tiles of heads */
    a = shape(1, 16, 2, 2, 1000, 64);
    int64_t st2[4] = {2 * 16 * 64, 64, 16 * 64, 1};
    memcpy(a.q_strides, st2, sizeof st2), memcpy(a.o_strides, st2, sizeof st2);
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
    ck_assert_int_eq(pl.pack, TK_ATTN_PACK_HEADS);
    ck_assert_int_eq(pl.T, 2);
    ck_assert_int_eq(pl.Rv, 8);
    /* a GPU-sized answer from the public query; 0 past 16 queries */
    size_t bytes = 1;
    a = shape(1, 32, 8, 1, 8192, 128);
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &bytes), TK_OK);
    ck_assert_uint_gt(bytes, 0);
    a.seq_q = 17;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, 0);
}
END_TEST

/* ---- bad input -------------------------------------------------------------- */
START_TEST(test_decode_errors) {
    tk_kernel *k = NULL;
    tk_attention_decode_config c = {.dtype = TK_BF16, .head_dim = 128, .pack = 2};
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "pack is 2"));
    c.pack = 0, c.part = 3;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c.part = 0, c.warps = 3;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c.warps = 0, c.stages = 9;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    c.stages = 8, c.head_dim = 256; /* a 256 KB ring */
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "200 KB"));
    c.head_dim = 128;
    c.stages = 0, c.head_dim = 96;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &c, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_decode_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(k);

    tk_attention_params a = shape(1, 8, 2, 17, 100, 64);
    a.kernel = TK_ATTN_DECODE; /* more than 16 queries */
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "at most 16 queries"));
    a = shape(1, 8, 2, 1, 100, 64);
    a.num_splits = -1;
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "num_splits is -1"));
    a.num_splits = 0;
    static char ws[4096] __attribute__((aligned(256)));
    a.workspace = ws + 4, a.workspace_bytes = 1000;
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "256-byte aligned"));
    a.workspace = ws, a.num_splits = 50; /* 1000 bytes hold fewer */
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "workspace_bytes is 1000"));
    tk_attn_kernel which;
    a.num_splits = 0;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &which), TK_OK);
    ck_assert_int_eq(which, TK_ATTN_DECODE);
    a.kernel = TK_ATTN_MMA_SYNC; /* asked for: the forward kernel */
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &which), TK_OK);
    ck_assert_int_eq(which, TK_ATTN_MMA_SYNC);
    a.kernel = 4;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &which), TK_ERR_INVALID_ARG);
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
static const dcase gpu_cases[] = {
    {1, 32, 8, 1, 8192, 128, 0, TK_BF16, 0, 0, 0},  {8, 32, 8, 1, 8192, 128, 0, TK_BF16, 1, 0, 0},
    {32, 32, 8, 1, 4096, 128, 0, TK_BF16, 1, 0, 0}, {1, 8, 1, 1, 100000, 128, 0, TK_F16, 0, 0, 0},
    {1, 32, 8, 16, 8192, 128, 1, TK_BF16, 1, 0, 0}, {1, 32, 8, 16, 8191, 128, 1, TK_BF16, 0, 0, 0},
    {4, 8, 8, 1, 777, 64, 0, TK_BF16, 0, 0, 0},     {2, 16, 2, 3, 70001, 64, 1, TK_F16, 1, 0, 0},
    {3, 4, 4, 16, 17, 64, 1, TK_BF16, 0, 0, 0},     {1, 8, 2, 5, 1000, 256, 1, TK_BF16, 1, 0, 0},
    {2, 4, 1, 1, 12345, 256, 0, TK_F16, 0, 0, 0},   {5, 8, 1, 2, 1, 128, 0, TK_BF16, 0, 0, 0},
    {1, 6, 3, 12, 5, 128, 1, TK_BF16, 1, 0, 0},     {64, 32, 8, 1, 1024, 128, 0, TK_BF16, 1, 0, 0},
    {1, 40, 5, 1, 33000, 128, 0, TK_BF16, 0, 0, 0}, {2, 64, 8, 7, 2000, 64, 1, TK_F16, 1, 0, 0},
};

/* tk_attention_forward on the device copies (outputs back into p), with a
 * workspace of ws bytes (NULL: none). */
static void run_gpu(problem *p, void *dev[NT], void *ws, size_t ws_bytes, int splits) {
    tk_attention_params a = params_of(p, dev);
    a.workspace = ws, a.workspace_bytes = ws_bytes, a.num_splits = splits;
    tk_status s = tk_attention_forward(ctx, &a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_forward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = T_O; i <= T_L; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
}

static void repoison(problem *p, void *dev[NT]) {
    for (int i = T_O; i <= T_L; i++) tu_dev_reset(ctx, &p->t[i], dev[i], p->before[i]);
}

/* The library's choice of splits (workspace from the query, poisoned), a
 * second run bit-identical; then no workspace (one kernel) within rounding. */
static void gpu_case(const dcase *c) {
    problem p;
    problem_init(&p, c);
    void *dev[NT];
    for (int i = 0; i < NT; i++) dev[i] = tu_dev_in(ctx, &p.t[i]);
    tk_attention_params a = params_of(&p, dev);
    size_t bytes = 0;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &bytes), TK_OK);
    void *ws = tu_dev_bytes(ctx, bytes); /* NaN */
    int sm = 0;
    ck_assert_int_eq(tk_gpu_sm_count(ctx, &sm), TK_OK);
    a.workspace = ws, a.workspace_bytes = bytes;
    tk_attn_decode_plan pl;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, sm, true, &pl), TK_OK);
    run_gpu(&p, dev, ws, bytes, 0);
    problem_check(&p, "gpu", &pl);
    void *first[NT] = {0};
    for (int i = T_O; i <= T_L; i++) first[i] = ref_tensor_snapshot(&p.t[i]);
    repoison(&p, dev);
    run_gpu(&p, dev, ws, bytes, 0);
    for (int i = T_O; i <= T_L; i++)
        ck_assert_msg(!memcmp(first[i], p.t[i].data, tu_bytes_of(&p.t[i])),
                      "run 2: tensor %d differs", i);
    repoison(&p, dev);
    run_gpu(&p, dev, NULL, 0, 0);
    a.workspace = NULL, a.workspace_bytes = 0;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, sm, true, &pl), TK_OK);
    problem_check(&p, "gpu S1", &pl);
    for (int i = 0; i < NT; i++) {
        tk_gpu_free(ctx, dev[i]);
        free(first[i]);
    }
    if (ws) tk_gpu_free(ctx, ws);
    problem_free(&p);
}

START_TEST(test_decode_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&gpu_cases[_i]);
}
END_TEST

/* The interpreter's shapes on the GPU too (their forced split counts). */
START_TEST(test_decode_small_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    problem p;
    const dcase *c = &cases[_i];
    problem_init(&p, c);
    void *dev[NT];
    for (int i = 0; i < NT; i++) dev[i] = tu_dev_in(ctx, &p.t[i]);
    tk_attention_params a = params_of(&p, dev);
    tk_attn_decode_plan pl;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, c->sm ? c->sm : 132, false, &pl), TK_OK);
    void *ws = tu_dev_bytes(ctx, pl.bytes);
    run_gpu(&p, dev, ws, pl.bytes, pl.splits);
    problem_check(&p, "gpu", &pl);
    for (int i = 0; i < NT; i++) tk_gpu_free(ctx, dev[i]);
    if (ws) tk_gpu_free(ctx, ws);
    problem_free(&p);
}
END_TEST

static Suite *decode_suite(void) {
    Suite *s = suite_create("attention_decode");
    TCase *tc = ctx_tcase(s, "api", 0);
    tcase_add_test(tc, test_decode_plan);
    tcase_add_test(tc, test_decode_errors);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_decode, 0, N_CASES);
    tcase_add_loop_test(tc, test_decode_random, 0, 6);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_decode_on_gpu, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tcase_add_loop_test(tc, test_decode_small_on_gpu, 0, N_CASES);
    return s;
}

int main(void) { return run_suite(decode_suite()); }
