/* Packed variable-length attention (tk_attention_params.cu_seqlens_q/kv,
 * the varlen forward kernels of kernels/attention.c and attention_hopper.c):
 * - both kernels on the CPU interpreter (race checker on), with the
 *   arguments tk_attention_forward passes, at small ragged batches (empty
 *   sequences, sequences without keys, causal bottom-right per sequence,
 *   GQA, both dtypes, D 64/128/256, packed and padded head-major layouts)
 *   against float64 attention run sequence by sequence; outputs NaN-poisoned
 *   with gaps that must stay untouched;
 * - prefix sums that are not monotone or run past the tensors: the kernels'
 *   own bounds (no write outside O and L, the good sequence still right);
 * - bad parameters: a status and a message;
 * - on a GPU (skipped without one): tk_attention_forward on both kernels at
 *   batches mixing 0, 1, 17, 1000 and 1500 rows, and up to 100 000 keys
 *   against few queries, against float64, and bit-identical to the dense
 *   kernel called on each sequence's rows. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_parts.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/attn_check.h"
#include "util/devbuf.h"
#include "util/fixture.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/varlen.h"

#define MAX_SEQS 8

typedef struct vcase {
    int B;
    int lq[MAX_SEQS], lkv[MAX_SEQS]; /* each sequence's queries and keys */
    int Hq, Hkv, D, causal;
    tk_dtype dt;
    int head_major; /* [H, T, D] storage (padded rows) instead of packed [T, H, D] */
} vcase;

/* ---- one problem: packed inputs, poisoned outputs, float64 per sequence ---- */
enum { T_Q, T_K, T_V, T_O, T_L, NT };

typedef struct problem {
    vcase c;
    int64_t Tq, Tkv;
    int32_t cu_q[MAX_SEQS + 1], cu_kv[MAX_SEQS + 1];
    float scale;
    ref_tensor t[NT]; /* Q, O [Tq, Hq, D]; K, V [Tkv, Hkv, D]; L [Hq, Tq] (logical) */
    void *before[NT];
    double *want_o, *want_l;
} problem;

/* The float64 forward of every sequence on its own into want_o / want_l. */
static void reference(problem *p, const double *q, const double *k, const double *v) {
    const vcase *c = &p->c;
    const int64_t D = c->D, Hq = c->Hq, Hkv = c->Hkv;
    for (int b = 0; b < c->B; b++) {
        int64_t nq = c->lq[b], nk = c->lkv[b], q0 = p->cu_q[b], k0 = p->cu_kv[b];
        if (!nq) continue;
        double *qs = tu_varlen_gather(q, Hq, D, q0, nq), *ks = tu_varlen_gather(k, Hkv, D, k0, nk);
        double *vs = tu_varlen_gather(v, Hkv, D, k0, nk);
        double *os = calloc((size_t)(Hq * nq * D), sizeof(double));
        double *ls = malloc(sizeof(double) * (size_t)(Hq * nq));
        ck_assert(os && ls);
        if (nk)
            ref_attention(qs, ks, vs, os, ls, 1, Hq, Hkv, nq, nk, D, p->scale, c->causal);
        else
            for (int64_t i = 0; i < Hq * nq; i++) ls[i] = -INFINITY; /* no keys: O 0, L -inf */
        tu_varlen_scatter(p->want_o, os, Hq, D, q0, nq);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < nq; i++) p->want_l[h * p->Tq + q0 + i] = ls[h * nq + i];
        free(qs), free(ks), free(vs), free(os), free(ls);
    }
}

static ref_tensor tokens(const vcase *c, int64_t T, int64_t H, bool out) {
    int64_t dims[3] = {T, H, c->D};
    static const int hmaj[3] = {1, 0, 2};
    return ref_tensor_new_layout(c->dt, 3, dims, c->head_major ? hmaj : NULL,
                                 out || c->head_major ? 8 : 0);
}

static void problem_init(problem *p, const vcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    for (int b = 0; b < c->B; b++) {
        p->cu_q[b + 1] = p->cu_q[b] + c->lq[b];
        p->cu_kv[b + 1] = p->cu_kv[b] + c->lkv[b];
    }
    p->Tq = p->cu_q[c->B] ? p->cu_q[c->B] : 1, p->Tkv = p->cu_kv[c->B] ? p->cu_kv[c->B] : 1;
    p->t[T_Q] = tokens(c, p->Tq, c->Hq, false);
    p->t[T_K] = tokens(c, p->Tkv, c->Hkv, false);
    p->t[T_V] = tokens(c, p->Tkv, c->Hkv, false);
    p->t[T_O] = tokens(c, p->Tq, c->Hq, true);
    int64_t dl[2] = {c->Hq, p->Tq};
    p->t[T_L] = ref_tensor_new_layout(TK_F32, 2, dl, NULL, 3);
    p->scale = tu_attn_fill(p->t, p->before, c->D);
    double *q = ref_tensor_to_f64(&p->t[T_Q]), *k = ref_tensor_to_f64(&p->t[T_K]);
    double *v = ref_tensor_to_f64(&p->t[T_V]);
    p->want_o = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_O]));
    p->want_l = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_L]));
    ck_assert(p->want_o && p->want_l);
    for (int64_t i = 0; i < ref_tensor_count(&p->t[T_O]); i++) p->want_o[i] = NAN;
    for (int64_t i = 0; i < ref_tensor_count(&p->t[T_L]); i++) p->want_l[i] = NAN;
    reference(p, q, k, v);
    free(q), free(k), free(v);
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    free(p->want_o), free(p->want_l);
}

/* Relative error over the rows of tokens [0, Tq) that some sequence owns
 * (a padding token, when all sequences are empty, is left out). */
static void problem_check(const problem *p, const char *where) {
    const vcase *c = &p->c;
    tu_attn_out r = tu_attn_measure(&p->t[T_O], &p->t[T_L], p->want_o, p->want_l, p->before[T_O],
                                    p->before[T_L]);
    if (p->cu_q[c->B] < p->Tq) /* the one token of an all-empty batch: nobody writes it */
        r.eo = r.el = 0, r.nan = 0;
    printf("varlen %-7s B%d Hq%-2d Hkv%-2d D%-3d %s %s%s Tq %-6lld Tkv %-6lld: rel err O %.2e "
           "L %.2e\n",
           where, c->B, c->Hq, c->Hkv, c->D, tk_dtype_name(c->dt), c->causal ? "causal" : "full  ",
           c->head_major ? " hmaj" : "     ", (long long)p->Tq, (long long)p->Tkv, r.eo, r.el);
    tu_attn_expect(&r);
}

/* The call's parameters on data pointers dev (host ones for the interpreter)
 * and prefix sums cu_q / cu_kv. */
static tk_attention_params params_of(const problem *p, void *const dev[NT], const int32_t *cu_q,
                                     const int32_t *cu_kv) {
    const vcase *c = &p->c;
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = p->Tq, a.seq_kv = p->Tkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.lse = dev[T_L];
    tu_varlen_strides(a.q_strides, &p->t[T_Q]);
    tu_varlen_strides(a.k_strides, &p->t[T_K]);
    tu_varlen_strides(a.v_strides, &p->t[T_V]);
    tu_varlen_strides(a.o_strides, &p->t[T_O]);
    a.lse_strides[1] = p->t[T_L].strides[0], a.lse_strides[2] = p->t[T_L].strides[1];
    a.cu_seqlens_q = cu_q, a.cu_seqlens_kv = cu_kv;
    a.max_seqlen_q = tu_varlen_longest(c->lq, c->B);
    a.max_seqlen_kv = tu_varlen_longest(c->lkv, c->B);
    if (a.max_seqlen_q > a.seq_q) a.max_seqlen_q = a.seq_q;
    if (a.max_seqlen_kv > a.seq_kv) a.max_seqlen_kv = a.seq_kv;
    return a;
}

/* ---- on the interpreter --------------------------------------------------- */
/* The varlen kernel (wgmma: the Hopper one) on the interpreter with the
 * arguments tk_attention_forward would pass for a. */
static void run_interp(const tk_attention_params *a, int wgmma) {
    tk_attn_kernel route;
    ck_assert_msg(tk_attention_kernel_for(ctx, a, &route) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_attention_config cfg = {.dtype = a->dtype,
                               .head_dim = a->head_dim,
                               .causal = a->causal,
                               .wgmma = wgmma,
                               .varlen = 1};
    tk_kernel *k = NULL;
    ck_assert_msg(tk_attention_fwd_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_arg args[TK_ATTN_FWD_MAX_ARGS];
    int n = tk_attn_fwd_args(a, args);
    ck_assert_int_eq(n, 9);
    tk_status s = tk_interp_run(k, n, args);
    ck_assert_msg(s == TK_OK, "interp: %s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

static const vcase cases[] = {
    {3, {5, 0, 70}, {9, 4, 70}, 2, 1, 64, 0, TK_BF16, 0},           /* an empty sequence    */
    {3, {17, 1, 40}, {17, 1, 100}, 2, 2, 64, 1, TK_BF16, 0},        /* causal bottom-right  */
    {2, {30, 8}, {0, 20}, 4, 1, 64, 1, TK_F16, 1},                  /* keyless, head-major  */
    {4, {1, 2, 3, 4}, {3, 2, 1, 130}, 4, 2, 128, 0, TK_BF16, 1},    /* D 128, GQA 2:1       */
    {2, {129, 3}, {70, 200}, 1, 1, 64, 1, TK_BF16, 0},              /* two query tiles      */
    {2, {20, 33}, {20, 65}, 2, 1, 256, 1, TK_F16, 0},               /* D 256                */
    {5, {0, 0, 7, 0, 0}, {0, 5, 9, 0, 3}, 8, 1, 64, 0, TK_BF16, 0}, /* GQA 8:1, mostly empty */
    {1, {100}, {100}, 2, 2, 64, 1, TK_BF16, 1},                     /* one sequence         */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void interp_case(const vcase *c, int wgmma) {
    if (wgmma && c->D == 256) return; /* the Hopper kernel's D 256 takes long on the CPU */
    problem p;
    problem_init(&p, c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attention_params a = params_of(&p, host, p.cu_q, p.cu_kv);
    run_interp(&a, wgmma);
    problem_check(&p, wgmma ? "wgmma" : "mma");
    problem_free(&p);
}

START_TEST(test_varlen_mma) { interp_case(&cases[_i], 0); }
END_TEST

START_TEST(test_varlen_wgmma) { interp_case(&cases[_i], 1); }
END_TEST

START_TEST(test_varlen_random) {
    vcase c = {.B = (int)ref_randint(1, 4),
               .Hkv = (int)ref_randint(1, 2),
               .D = 64,
               .causal = (int)ref_randint(0, 1),
               .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
               .head_major = (int)ref_randint(0, 1)};
    c.Hq = c.Hkv * (int)ref_randint(1, 3);
    for (int b = 0; b < c.B; b++) {
        c.lq[b] = (int)ref_randint(0, 80);
        c.lkv[b] = ref_randint(0, 3) ? (int)ref_randint(0, 150) : c.lq[b];
    }
    interp_case(&c, (int)ref_randint(0, 1));
}
END_TEST

/* Prefix sums the kernels must survive: sequence 0 is well formed, then
 * one decreases (empty), one runs past the tensors (clamped to their end),
 * one starts past them (empty). Only sequence 0's rows before the
 * overlapping ones are checked, and that nothing lands outside O and L. */
START_TEST(test_varlen_bad_sums) {
    vcase c = {4, {6, 0, 0, 0}, {10, 0, 0, 0}, 2, 1, 64, _i, TK_BF16, 0};
    problem p;
    problem_init(&p, &c); /* the reference: sequence 0 alone, rows 0..5 */
    int32_t cu_q[5] = {0, 6, 2, 50, 1 << 30}, cu_kv[5] = {0, 10, 4, 1 << 30, -7};
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attention_params a = params_of(&p, host, cu_q, cu_kv);
    a.max_seqlen_q = a.seq_q;
    run_interp(&a, 0);
    /* sequence 2 (rows 2..5, clamped) rewrote rows 2..5; rows 0, 1 are sequence 0's */
    double *o = ref_tensor_to_f64(&p.t[T_O]);
    int64_t n = 2 * c.Hq * c.D;
    double e = ref_rel_err(o, p.want_o, n);
    int64_t stray = ref_tensor_stray_writes(&p.t[T_O], p.before[T_O]) +
                    ref_tensor_stray_writes(&p.t[T_L], p.before[T_L]);
    printf("varlen bad sums %s: rows 0-1 rel err %.2e, %lld stray writes\n", _i ? "causal" : "full",
           e, (long long)stray);
    ck_assert_msg(e <= 1e-2, "sequence 0's rows: rel err %g", e);
    ck_assert_int_eq(stray, 0);
    free(o);
    problem_free(&p);
}
END_TEST

/* ---- bad parameters: a status naming the field ---------------------------- */
START_TEST(test_varlen_errors) {
    vcase c = {2, {5, 7}, {5, 7}, 2, 1, 64, 0, TK_BF16, 0};
    problem p;
    problem_init(&p, &c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attn_kernel r;
    struct {
        const char *field, *msg;
        tk_status st;
    } bad[] = {
        {"cu_seqlens_kv NULL", "cu_seqlens_kv is NULL", TK_ERR_INVALID_ARG},
        {"max_seqlen_q 0", "max_seqlen_q is 0", TK_ERR_INVALID_ARG},
        {"max_seqlen_q > seq_q", "max_seqlen_q is 13", TK_ERR_INVALID_ARG},
        {"max_seqlen_kv < 0", "max_seqlen_kv is -1", TK_ERR_INVALID_ARG},
        {"decode kernel", "TK_ATTN_DECODE", TK_ERR_UNSUPPORTED},
        {"kv cache", "a KV cache", TK_ERR_UNSUPPORTED},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        tk_attention_params a = params_of(&p, host, p.cu_q, p.cu_kv);
        switch (i) {
        case 0: a.cu_seqlens_kv = NULL; break;
        case 1: a.max_seqlen_q = 0; break;
        case 2: a.max_seqlen_q = 13; break;
        case 3: a.max_seqlen_kv = -1; break;
        case 4: a.kernel = TK_ATTN_DECODE; break;
        default: a.seqlens_kv = p.cu_kv; break;
        }
        ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &r), bad[i].st);
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].msg), "%s: message '%s'", bad[i].field,
                      tk_ctx_error(ctx));
    }
    /* a well-formed call routes to the prefill kernels even at few rows */
    tk_attention_params a = params_of(&p, host, p.cu_q, p.cu_kv);
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &r), TK_OK);
    ck_assert_int_ne(r, TK_ATTN_DECODE);
    size_t ws = 1;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &ws), TK_OK);
    ck_assert_uint_eq(ws, 0);
    tk_attention_config cfg = {.dtype = TK_BF16, .head_dim = 64, .varlen = 2};
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert(strstr(tk_ctx_error(ctx), "varlen is 2"));
    problem_free(&p);
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
/* Shapes whose float64 references stay in seconds on the host (a 70000 x
 * 70000 sequence would take hours): long key ranges meet few queries. */
static const vcase gpu_cases[] = {
    {5, {0, 1, 17, 1000, 1500}, {0, 1, 17, 1000, 1500}, 8, 2, 128, 1, TK_BF16, 0},
    {5, {100, 1, 17, 0, 16}, {3000, 70000, 1, 5, 0}, 8, 8, 128, 0, TK_BF16, 0},
    {4, {512, 512, 512, 512}, {512, 512, 512, 512}, 16, 16, 128, 1, TK_BF16, 0},
    {3, {333, 1, 1025}, {2000, 129, 1025}, 4, 1, 64, 1, TK_F16, 1},
    {6, {63, 64, 65, 127, 128, 129}, {65, 64, 63, 129, 128, 127}, 4, 2, 64, 0, TK_BF16, 0},
    {3, {300, 0, 700}, {500, 300, 700}, 4, 4, 256, 1, TK_BF16, 0},
    {2, {1, 16}, {100000, 16}, 8, 1, 128, 0, TK_F16, 0},
    {8,
     {1, 17, 600, 3, 250, 0, 599, 70},
     {17, 1, 600, 3, 250, 8, 1199, 1},
     8,
     2,
     128,
     1,
     TK_BF16,
     1},
};

static void download(problem *p, void *dev[NT]) {
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = T_O; i <= T_L; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
}

static void repoison(problem *p, void *dev[NT]) {
    for (int i = T_O; i <= T_L; i++) tu_dev_reset(ctx, &p->t[i], dev[i], p->before[i]);
}

/* The dense kernel on each sequence's rows in place (B 1, views into the
 * packed tensors), the same kernel choice. */
static void run_dense_per_sequence(const problem *p, void *dev[NT], int kernel) {
    const vcase *c = &p->c;
    for (int b = 0; b < c->B; b++) {
        if (!c->lq[b] || !c->lkv[b]) continue; /* dense calls need rows and keys */
        tk_attention_params a = params_of(p, dev, NULL, NULL);
        a.cu_seqlens_q = a.cu_seqlens_kv = NULL, a.max_seqlen_q = a.max_seqlen_kv = 0;
        a.batch = 1, a.seq_q = c->lq[b], a.seq_kv = c->lkv[b], a.kernel = kernel;
        size_t esz = tk_dtype_size(c->dt);
        int64_t q0 = p->cu_q[b], k0 = p->cu_kv[b];
        a.q = (const char *)dev[T_Q] + (size_t)(q0 * p->t[T_Q].strides[0]) * esz;
        a.o = (char *)dev[T_O] + (size_t)(q0 * p->t[T_O].strides[0]) * esz;
        a.k = (const char *)dev[T_K] + (size_t)(k0 * p->t[T_K].strides[0]) * esz;
        a.v = (const char *)dev[T_V] + (size_t)(k0 * p->t[T_V].strides[0]) * esz;
        a.lse = (float *)dev[T_L] + q0 * p->t[T_L].strides[1];
        /* batch strides of a size-1 dimension: never used, kept 16-byte multiples */
        a.q_strides[0] = a.o_strides[0] = a.q_strides[2] * p->Tq;
        a.k_strides[0] = a.v_strides[0] = a.k_strides[2] * p->Tkv;
        a.lse_strides[0] = 4 * p->Tq;
        tk_status s = tk_attention_forward(ctx, &a, NULL);
        ck_assert_msg(s == TK_OK, "dense sequence %d: %s", b, tk_ctx_error(ctx));
    }
}

/* Tensor i (O or L) of the varlen run (`varlen`: its data) equals the
 * per-sequence dense run's in every row of a sequence the dense kernel ran. */
static void same_as_dense(const problem *p, int i, const void *varlen) {
    const vcase *c = &p->c;
    ref_tensor v = p->t[i];
    v.data = (void *)varlen;
    int64_t n = ref_tensor_count(&v), per = i == T_O ? c->Hq * c->D : 1;
    int64_t diff = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t tok = i == T_O ? e / per : e % p->Tq;
        int b = 0;
        while (b < c->B && p->cu_q[b + 1] <= tok) b++;
        if (b == c->B || !c->lq[b] || !c->lkv[b]) continue;
        double x = ref_tensor_get(&v, e), y = ref_tensor_get(&p->t[i], e);
        diff += x != y;
    }
    ck_assert_msg(diff == 0,
                  "%lld elements of tensor %d differ from the dense kernel run per "
                  "sequence",
                  (long long)diff, i);
}

static void gpu_run(problem *p, int kernel);

/* Both kernel sets on one problem (its reference computed once). */
static void gpu_case(const vcase *c) {
    problem p;
    problem_init(&p, c);
    gpu_run(&p, TK_ATTN_AUTO);
    gpu_run(&p, TK_ATTN_MMA_SYNC);
    problem_free(&p);
}

static void gpu_run(problem *pp, int kernel) {
    problem p = *pp;
    const vcase *c = &p.c;
    void *dev[NT];
    for (int i = 0; i < NT; i++) dev[i] = tu_dev_in(ctx, &p.t[i]);
    size_t cub = sizeof(int32_t) * (size_t)(c->B + 1);
    int32_t *cu_q = tu_dev_copy(ctx, p.cu_q, cub), *cu_kv = tu_dev_copy(ctx, p.cu_kv, cub);
    tk_attention_params a = params_of(&p, dev, cu_q, cu_kv);
    a.kernel = kernel;
    tk_attn_kernel route;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &route), TK_OK);
    tk_status s = tk_attention_forward(ctx, &a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_forward: %s", tk_ctx_error(ctx));
    download(&p, dev);
    problem_check(&p, route == TK_ATTN_WGMMA ? "gpu wg" : "gpu mma");
    void *first[NT] = {0};
    for (int i = T_O; i <= T_L; i++) first[i] = ref_tensor_snapshot(&p.t[i]);
    /* the dense kernel on each sequence, from poisoned outputs: the same bits */
    repoison(&p, dev);
    run_dense_per_sequence(&p, dev, route);
    download(&p, dev);
    for (int i = T_O; i <= T_L; i++) same_as_dense(&p, i, first[i]);
    for (int i = 0; i < NT; i++) {
        tk_gpu_free(ctx, dev[i]);
        free(first[i]);
    }
    tk_gpu_free(ctx, cu_q), tk_gpu_free(ctx, cu_kv);
    for (int i = T_O; i <= T_L; i++) /* the host outputs poisoned again for the next run */
        memcpy(p.t[i].data, p.before[i], tu_bytes_of(&p.t[i]));
}

START_TEST(test_varlen_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&gpu_cases[_i]);
}
END_TEST

/* The interpreter's shapes on the GPU (small: for compute-sanitizer). */
START_TEST(test_varlen_small_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&cases[_i]);
}
END_TEST

static Suite *varlen_suite(void) {
    Suite *s = suite_create("attention_varlen");
    TCase *tc = ctx_tcase(s, "api", 0);
    tcase_add_test(tc, test_varlen_errors);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_varlen_mma, 0, N_CASES);
    tcase_add_loop_test(tc, test_varlen_wgmma, 0, N_CASES);
    tcase_add_loop_test(tc, test_varlen_random, 0, 4);
    tcase_add_loop_test(tc, test_varlen_bad_sums, 0, 2);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_varlen_on_gpu, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tc = ctx_tcase(s, "gpu_small", 900);
    tcase_add_loop_test(tc, test_varlen_small_on_gpu, 0, N_CASES);
    return s;
}

int main(void) { return run_suite(varlen_suite()); }
