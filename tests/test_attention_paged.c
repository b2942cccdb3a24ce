/* Decoding from a KV cache (tk_attention_params' seqlens_kv, block_table,
 * k_new / v_new; kernels/attention_decode.c):
 * - on the CPU interpreter (race checker on), through the plan and the
 *   arguments tk_attention_forward uses: per-sequence lengths (0 and ragged
 *   tails included), a contiguous cache and a paged pool whose pages come
 *   in a random order, pages of 16 to 80 tokens (copies of 16, 32 or 64
 *   rows), the new rows appended in the same call; every slot of the cache
 *   the call must not read is NaN, so a stale row that leaked in shows;
 * - the cache afterwards: the appended rows where they belong, nothing
 *   else written;
 * - bad parameters: a status and a message, no launch;
 * - on a GPU (skipped without one): the same cases and long ones (up to
 *   70000 keys, batches mixing 0, 1, 17, 1000 and 70000), against float64
 *   and against the dense forward kernel run on each sequence alone. */
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

#define MAX_B 8

typedef struct pcase {
    int64_t B, Hq, Hkv, Nq;
    int D, causal;
    tk_dtype dt;
    int64_t page;        /* tokens per page; 0: a contiguous cache           */
    int append;          /* the last Nq keys of each sequence via k_new/v_new */
    int splits;          /* num_splits (0: the plan's choice)                */
    int64_t lens[MAX_B]; /* keys sequence b attends (after the append)       */
} pcase;

/* ---- one problem ------------------------------------------------------------ */
enum { T_Q, T_K, T_V, T_O, T_L, T_KN, T_VN, T_SL, T_BT, NT };

typedef struct problem {
    pcase c;
    float scale;
    int64_t lmax, cap, max_pages, num_pages;
    ref_tensor t[NT];
    void *before[NT]; /* O, L: the poison; K, V: the cache as it must end */
    double *kd, *vd;  /* each sequence's keys, [B, Hkv, lmax, D]           */
    double *want_o, *want_l;
} problem;

static int64_t cached(const problem *p, int64_t b) {
    return p->c.lens[b] - (p->c.append ? p->c.Nq : 0);
}

/* Element offset of key t of kv head h of sequence b in the cache. */
static int64_t cache_off(const problem *p, int64_t b, int64_t h, int64_t t) {
    const pcase *c = &p->c;
    if (!c->page) return ((b * c->Hkv + h) * p->cap + t) * c->D;
    int32_t page = ((const int32_t *)p->t[T_BT].data)[b * p->max_pages + t / c->page];
    return (((int64_t)page * c->page + t % c->page) * c->Hkv + h) * c->D;
}

static void put(ref_tensor *t, int64_t off, const double *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) ref_tensor_set(t, off + i, src[i]);
}

/* A random permutation of 0..n-1 (Fisher-Yates). */
static void shuffle(int32_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = ref_randint(0, i);
        int32_t s = x[i];
        x[i] = x[j], x[j] = s;
    }
}

static void reference(problem *p) {
    const pcase *c = &p->c;
    double *q = ref_tensor_to_f64(&p->t[T_Q]);
    int64_t qn = c->Hq * c->Nq * c->D, kn = c->Hkv * p->lmax * c->D;
    double *kb = malloc(sizeof(double) * (size_t)kn), *vb = malloc(sizeof(double) * (size_t)kn);
    p->want_o = malloc(sizeof(double) * (size_t)(c->B * qn));
    p->want_l = malloc(sizeof(double) * (size_t)(c->B * c->Hq * c->Nq));
    ck_assert(q && kb && vb && p->want_o && p->want_l);
    for (int64_t b = 0; b < c->B; b++) {
        int64_t n = c->lens[b];
        for (int64_t h = 0; h < c->Hkv; h++) /* the first n keys, packed */
            for (int64_t t = 0; t < n; t++) {
                memcpy(kb + (h * n + t) * c->D, p->kd + ((b * c->Hkv + h) * p->lmax + t) * c->D,
                       sizeof(double) * (size_t)c->D);
                memcpy(vb + (h * n + t) * c->D, p->vd + ((b * c->Hkv + h) * p->lmax + t) * c->D,
                       sizeof(double) * (size_t)c->D);
            }
        ref_attention(q + b * qn, kb, vb, p->want_o + b * qn, p->want_l + b * c->Hq * c->Nq, 1,
                      c->Hq, c->Hkv, c->Nq, n, c->D, p->scale, c->causal);
    }
    free(q), free(kb), free(vb);
}

static void problem_init(problem *p, const pcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    for (int64_t b = 0; b < c->B; b++) p->lmax = c->lens[b] > p->lmax ? c->lens[b] : p->lmax;
    p->cap = p->lmax + 3; /* room past the longest: slots a call must not read */
    int64_t D = c->D, dq[4] = {c->B, c->Hq, c->Nq, D}, dl[3] = {c->B, c->Hq, c->Nq};
    int64_t dn[4] = {c->B, c->Hkv, c->Nq, D}, dsl[1] = {c->B};
    p->t[T_Q] = ref_tensor_new(c->dt, 4, dq);
    p->t[T_O] = ref_tensor_new(c->dt, 4, dq);
    p->t[T_L] = ref_tensor_new(TK_F32, 3, dl);
    p->t[T_KN] = ref_tensor_new(c->dt, 4, dn);
    p->t[T_VN] = ref_tensor_new(c->dt, 4, dn);
    p->t[T_SL] = ref_tensor_new(TK_I32, 1, dsl);
    if (c->page) {
        p->max_pages = (p->cap + c->page - 1) / c->page;
        p->num_pages = c->B * p->max_pages + 2; /* two pages nobody owns */
        int64_t dk[4] = {p->num_pages, c->page, c->Hkv, D}, dt[2] = {c->B, p->max_pages};
        p->t[T_K] = ref_tensor_new(c->dt, 4, dk);
        p->t[T_V] = ref_tensor_new(c->dt, 4, dk);
        p->t[T_BT] = ref_tensor_new(TK_I32, 2, dt);
        shuffle(p->t[T_BT].data, c->B * p->max_pages);
    } else {
        int64_t dk[4] = {c->B, c->Hkv, p->cap, D};
        p->t[T_K] = ref_tensor_new(c->dt, 4, dk);
        p->t[T_V] = ref_tensor_new(c->dt, 4, dk);
    }
    for (int64_t b = 0; b < c->B; b++) /* the new rows are part of every sequence */
        ck_assert_msg(cached(p, b) >= 0, "case: sequence %lld is shorter than its new rows",
                      (long long)b);
    ref_tensor_random(&p->t[T_Q], -2, 2);
    ref_tensor_fill_all(&p->t[T_K], NAN);
    ref_tensor_fill_all(&p->t[T_V], NAN);
    ref_tensor_fill_all(&p->t[T_KN], NAN);
    ref_tensor_fill_all(&p->t[T_VN], NAN);
    /* the keys, rounded to the dtype, into the cache or the new rows */
    int64_t kn = c->B * c->Hkv * p->lmax * D;
    p->kd = calloc((size_t)kn, sizeof(double)), p->vd = calloc((size_t)kn, sizeof(double));
    ck_assert(p->kd && p->vd);
    ref_tensor tmp = ref_tensor_new(c->dt, 1, &kn);
    ref_tensor_random(&tmp, -2, 2);
    for (int64_t i = 0; i < kn; i++) p->kd[i] = ref_tensor_get(&tmp, i);
    ref_tensor_random(&tmp, -1, 1);
    for (int64_t i = 0; i < kn; i++) p->vd[i] = ref_tensor_get(&tmp, i);
    ref_tensor_free(&tmp);
    for (int64_t b = 0; b < c->B; b++) {
        ref_tensor_set(&p->t[T_SL], b, (double)cached(p, b));
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t t = 0; t < c->lens[b]; t++) {
                const double *k = p->kd + ((b * c->Hkv + h) * p->lmax + t) * D;
                const double *v = p->vd + ((b * c->Hkv + h) * p->lmax + t) * D;
                int64_t i = t - cached(p, b); /* >= 0: a new row */
                if (i < 0) {
                    put(&p->t[T_K], cache_off(p, b, h, t), k, D);
                    put(&p->t[T_V], cache_off(p, b, h, t), v, D);
                } else {
                    put(&p->t[T_KN], ((b * c->Hkv + h) * c->Nq + i) * D, k, D);
                    put(&p->t[T_VN], ((b * c->Hkv + h) * c->Nq + i) * D, v, D);
                }
            }
    }
    /* what K and V must hold afterwards: the new rows in place too */
    ref_tensor endk = ref_tensor_new(c->dt, 4, p->t[T_K].dims);
    ref_tensor endv = ref_tensor_new(c->dt, 4, p->t[T_V].dims);
    memcpy(endk.data, p->t[T_K].data, (size_t)endk.elems * tk_dtype_size(c->dt));
    memcpy(endv.data, p->t[T_V].data, (size_t)endv.elems * tk_dtype_size(c->dt));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t t = cached(p, b); t < c->lens[b]; t++) {
                put(&endk, cache_off(p, b, h, t), p->kd + ((b * c->Hkv + h) * p->lmax + t) * D, D);
                put(&endv, cache_off(p, b, h, t), p->vd + ((b * c->Hkv + h) * p->lmax + t) * D, D);
            }
    p->before[T_K] = endk.data, p->before[T_V] = endv.data;
    ref_tensor_fill_all(&p->t[T_O], NAN);
    ref_tensor_fill_all(&p->t[T_L], NAN);
    p->before[T_O] = ref_tensor_snapshot(&p->t[T_O]);
    p->before[T_L] = ref_tensor_snapshot(&p->t[T_L]);
    p->scale = (float)((0.75 + 0.25 * ref_uniform()) / sqrt((double)D));
    reference(p);
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        if (p->t[i].rank) ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    free(p->kd), free(p->vd), free(p->want_o), free(p->want_l);
}

/* Bitwise equality, NaN payloads included (the untouched slots). */
static int64_t differing(const ref_tensor *t, const void *want) {
    size_t es = tk_dtype_size(t->dt);
    int64_t n = 0;
    for (int64_t i = 0; i < t->elems; i++)
        n += memcmp((const char *)t->data + (size_t)i * es, (const char *)want + (size_t)i * es,
                    es) != 0;
    return n;
}

/* O and L against float64; K and V exactly as they must end. */
static void problem_check(const problem *p, const char *where, const tk_attn_decode_plan *pl) {
    const pcase *c = &p->c;
    tu_attn_out r = tu_attn_measure(&p->t[T_O], &p->t[T_L], p->want_o, p->want_l, p->before[T_O],
                                    p->before[T_L]);
    int64_t kv = differing(&p->t[T_K], p->before[T_K]) + differing(&p->t[T_V], p->before[T_V]);
    printf("cache %-6s B%lld Hq%-2lld Hkv%-2lld Nq%-2lld lmax %-6lld D%-3d %s %s page %-3lld%s: "
           "%s S%-3d w%d k%d: rel err O %.2e L %.2e\n",
           where, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Nq,
           (long long)p->lmax, c->D, tk_dtype_name(c->dt), c->causal ? "causal" : "full  ",
           (long long)c->page, c->append ? " +new" : "     ", pl->pack ? "heads  " : "queries",
           pl->splits, pl->warps, pl->kw, r.eo, r.el);
    ck_assert_msg(kv == 0, "%lld elements of the K/V cache differ from what it must hold",
                  (long long)kv);
    tu_attn_expect(&r);
}

static tk_attention_params params_of(const problem *p, void *const dev[NT]) {
    const pcase *c = &p->c;
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = c->Nq;
    a.seq_kv = p->lmax ? p->lmax : 1;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.lse = dev[T_L];
    a.seqlens_kv = dev[T_SL];
    if (c->page) {
        a.block_table = dev[T_BT];
        a.page_size = c->page, a.max_pages = p->max_pages, a.num_pages = p->num_pages;
    } else {
        a.seq_kv = p->cap; /* the cache's capacity: its view's rows */
    }
    if (c->append) a.k_new = dev[T_KN], a.v_new = dev[T_VN];
    a.num_splits = c->splits;
    return a;
}

/* ---- on the interpreter --------------------------------------------------- */
static const pcase cases[] = {
    /* B Hq Hkv Nq  D causal dt   page app S  lens */
    {2, 4, 1, 1, 64, 0, TK_BF16, 0, 0, 3, {70, 0}},         /* contiguous, an empty one */
    {3, 8, 2, 1, 64, 0, TK_BF16, 16, 0, 0, {1, 17, 100}},   /* pages of 16 */
    {2, 8, 2, 1, 128, 1, TK_F16, 32, 1, 2, {33, 90}},       /* pages of 32, append */
    {2, 4, 4, 3, 64, 1, TK_BF16, 48, 1, 3, {3, 130}},       /* 48: copies of 16; queries */
    {1, 16, 2, 2, 64, 0, TK_BF16, 64, 0, 0, {200}},         /* whole-tile pages */
    {2, 2, 1, 5, 64, 1, TK_F16, 80, 1, 2, {5, 161}},        /* 80: copies of 16 */
    {2, 4, 2, 1, 256, 0, TK_BF16, 16, 1, 2, {40, 9}},       /* D 256, 32-key tiles */
    {2, 6, 3, 2, 128, 1, TK_BF16, 0, 1, 0, {2, 50}},        /* contiguous + append */
    {4, 4, 1, 1, 64, 0, TK_BF16, 96, 0, 4, {0, 1, 95, 97}}, /* 96: copies of 32 */
    {1, 8, 1, 16, 64, 1, TK_BF16, 16, 1, 0, {40}},          /* 16 new rows, causal */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* want_kw: as in test_attention_decode.c. */
static void interp_case(const pcase *c, int want_kw) {
    problem p;
    problem_init(&p, c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attention_params a = params_of(&p, host);
    tk_attn_decode_plan pl;
    tu_decode_plan_ws(ctx, &a, 132, want_kw, &pl);
    tu_decode_on_interp(ctx, &a, &pl);
    problem_check(&p, "interp", &pl);
    free(a.workspace);
    problem_free(&p);
}

START_TEST(test_cache) { interp_case(&cases[_i], 1 << (_i % 3)); }
END_TEST

START_TEST(test_cache_random) {
    static const int64_t pages[5] = {0, 16, 32, 48, 64};
    pcase c = {.B = ref_randint(1, 4),
               .Hkv = ref_randint(1, 2),
               .Nq = ref_randint(0, 1) ? 1 : ref_randint(1, 16),
               .D = ref_randint(0, 1) ? 128 : 64,
               .causal = (int)ref_randint(0, 1),
               .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
               .page = pages[ref_randint(0, 4)],
               .append = (int)ref_randint(0, 1),
               .splits = (int)ref_randint(0, 4)};
    c.Hq = c.Hkv * ref_randint(1, 8);
    for (int64_t b = 0; b < c.B; b++) c.lens[b] = ref_randint(c.append ? c.Nq : 0, 300);
    interp_case(&c, 1 << ref_randint(0, 2));
}
END_TEST

/* ---- bad input -------------------------------------------------------------- */
static void expect(tk_attention_params a, tk_status want, const char *frag) {
    tk_status s = tk_attention_forward(ctx, &a, NULL);
    ck_assert_msg(s == want, "got %s (%s), want %s", tk_status_name(s), tk_ctx_error(ctx),
                  tk_status_name(want));
    ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
}

START_TEST(test_cache_errors) {
    static char dummy[256] __attribute__((aligned(256)));
    static int32_t lens[4], table[16];
    tk_attention_params g = TK_ATTENTION_PARAMS_INIT, a;
    g.dtype = TK_BF16, g.head_dim = 64, g.batch = 2, g.heads_q = 8, g.heads_kv = 2;
    g.seq_q = 1, g.seq_kv = 100;
    g.q = g.k = g.v = g.o = dummy, g.lse = (float *)dummy;
    g.seqlens_kv = lens, g.block_table = table;
    g.page_size = 16, g.max_pages = 8, g.num_pages = 16;
    a = g, a.seqlens_kv = NULL;
    expect(a, TK_ERR_INVALID_ARG, "block_table is set but seqlens_kv is NULL");
    a = g, a.page_size = 40;
    expect(a, TK_ERR_INVALID_ARG, "page_size is 40; expected a multiple of 16");
    a = g, a.page_size = 0;
    expect(a, TK_ERR_INVALID_ARG, "page_size is 0");
    a = g, a.num_pages = 0;
    expect(a, TK_ERR_INVALID_ARG, "num_pages is 0");
    a = g, a.max_pages = -1;
    expect(a, TK_ERR_INVALID_ARG, "max_pages is -1");
    a = g, a.max_pages = (int64_t)1 << 40;
    expect(a, TK_ERR_INVALID_ARG, "max_pages x page_size");
    a = g, a.k_new = dummy;
    expect(a, TK_ERR_INVALID_ARG, "k_new is set but v_new is NULL");
    a = g, a.k_new = a.v_new = dummy, a.k_new_strides[3] = 2;
    expect(a, TK_ERR_INVALID_ARG, "k_new_strides[3] is 2");
    a = g, a.k_new = a.v_new = dummy, a.v_new_strides[0] = -64, a.v_new_strides[3] = 1;
    expect(a, TK_ERR_INVALID_ARG, "v_new_strides[0] is negative");
    a = g, a.seq_q = 17;
    expect(a, TK_ERR_UNSUPPORTED, "runs on the decoding kernels: seq_q must be at most 16");
    a = g, a.kernel = TK_ATTN_MMA_SYNC;
    expect(a, TK_ERR_UNSUPPORTED, "kernel TK_ATTN_AUTO or TK_ATTN_DECODE (it is 1)");
    a = g, a.block_table = NULL, a.v_new = dummy;
    expect(a, TK_ERR_INVALID_ARG, "v_new is set but k_new is NULL");

    tk_kernel *k = NULL;
    tk_attention_decode_config cfg = {.dtype = TK_BF16, .head_dim = 64, .cache = 3};
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "cache is 3"));
    cfg.cache = TK_ATTN_CACHE_LENGTHS, cfg.chunk = 16; /* chunks are for pages */
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "chunk is 16"));
    cfg.cache = TK_ATTN_CACHE_PAGED, cfg.chunk = 48;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    cfg.head_dim = 256, cfg.chunk = 64; /* more than D 256's 32-key tile */
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    cfg.head_dim = 64, cfg.chunk = 16, cfg.key_warps = 4; /* 3 stages x 8 copies of 16 rows */
    cfg.part = TK_ATTN_DECODE_SPLIT;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "a ring holds at most 16"));
    cfg.chunk = 0, cfg.cache = TK_ATTN_CACHE_NONE, cfg.part = TK_ATTN_DECODE_DIRECT;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "only TK_ATTN_DECODE_SPLIT shares"));
    cfg.part = TK_ATTN_DECODE_SPLIT, cfg.key_warps = 3;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    cfg.key_warps = 4, cfg.warps = 4; /* 16 warps */
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "at most 8 warps"));
    cfg.key_warps = 0, cfg.warps = 0;
    cfg.chunk = 0, cfg.cache = TK_ATTN_CACHE_NONE, cfg.part = TK_ATTN_DECODE_APPEND;
    ck_assert_int_eq(tk_attention_decode_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "writes into a cache"));
    ck_assert_ptr_null(k);

    /* the plan's copies: the most rows, up to the key tile, a page divides */
    static const int64_t page[6] = {16, 32, 48, 64, 96, 128};
    static const int want[6] = {16, 0, 16, 0, 0, 0}; /* 32-key tiles */
    for (int i = 0; i < 6; i++) {
        tk_attn_decode_plan pl;
        a = g, a.page_size = page[i];
        ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, 132, false, &pl), TK_OK);
        ck_assert_int_eq(pl.chunk, want[i]);
    }
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
static const pcase gpu_cases[] = {
    {5, 32, 8, 1, 128, 0, TK_BF16, 16, 0, 0, {0, 1, 17, 1000, 70000}},
    {5, 8, 1, 1, 128, 1, TK_F16, 64, 1, 0, {70000, 1000, 17, 1, 1}},
    {4, 32, 8, 4, 128, 1, TK_BF16, 256, 1, 0, {4, 17, 1000, 70000}},
    {3, 16, 16, 1, 64, 0, TK_BF16, 32, 0, 0, {65536, 12345, 0}},
    {2, 16, 2, 16, 64, 1, TK_F16, 48, 1, 0, {16, 5000}},
    {3, 8, 4, 2, 256, 0, TK_BF16, 16, 1, 0, {2, 777, 30000}},
    {8, 32, 8, 1, 128, 0, TK_BF16, 0, 1, 0, {1, 2, 3, 100, 4096, 8191, 8192, 8193}},
    {2, 4, 1, 1, 128, 0, TK_BF16, 0, 0, 0, {100000, 99999}},
};

static void download(problem *p, void *dev[NT], int from, int to) {
    for (int i = from; i <= to; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
}

/* Sequence b alone through the dense forward kernel (mma.sync: the
 * existing kernel, not the decoding one), against the cache's O. */
static double dense_diff(problem *p, int64_t b) {
    const pcase *c = &p->c;
    int64_t n = c->lens[b], D = c->D;
    int64_t dk[4] = {1, c->Hkv, n, D}, dq[4] = {1, c->Hq, c->Nq, D}, dl[3] = {1, c->Hq, c->Nq};
    ref_tensor k = ref_tensor_new(c->dt, 4, dk), v = ref_tensor_new(c->dt, 4, dk);
    ref_tensor q = ref_tensor_new(c->dt, 4, dq), o = ref_tensor_new(c->dt, 4, dq);
    ref_tensor l = ref_tensor_new(TK_F32, 3, dl);
    for (int64_t h = 0; h < c->Hkv; h++)
        for (int64_t t = 0; t < n; t++) {
            put(&k, (h * n + t) * D, p->kd + ((b * c->Hkv + h) * p->lmax + t) * D, D);
            put(&v, (h * n + t) * D, p->vd + ((b * c->Hkv + h) * p->lmax + t) * D, D);
        }
    int64_t qn = c->Hq * c->Nq * D;
    size_t es = tk_dtype_size(c->dt);
    memcpy(q.data, (char *)p->t[T_Q].data + (size_t)(b * qn) * es, (size_t)qn * es);
    void *dk_ = tu_dev_in(ctx, &k), *dv = tu_dev_in(ctx, &v), *dq_ = tu_dev_in(ctx, &q);
    void *do_ = tu_dev_in(ctx, &o), *dl_ = tu_dev_in(ctx, &l);
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = 1, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = c->Nq, a.seq_kv = n;
    a.q = dq_, a.k = dk_, a.v = dv, a.o = do_, a.lse = dl_, a.kernel = TK_ATTN_MMA_SYNC;
    ck_assert_msg(tk_attention_forward(ctx, &a, NULL) == TK_OK, "dense: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, o.data, do_, (size_t)qn * es), TK_OK);
    double *mine = ref_tensor_to_f64(&p->t[T_O]), *ref = ref_tensor_to_f64(&o);
    double e = ref_rel_err(mine + b * qn, ref, qn);
    free(mine), free(ref);
    void *ds[5] = {dk_, dv, dq_, do_, dl_};
    for (int i = 0; i < 5; i++) tk_gpu_free(ctx, ds[i]);
    ref_tensor *ts[5] = {&k, &v, &q, &o, &l};
    for (int i = 0; i < 5; i++) ref_tensor_free(ts[i]);
    return e;
}

static void gpu_run(const pcase *c, bool forced) {
    problem p;
    problem_init(&p, c);
    void *dev[NT] = {0};
    for (int i = 0; i < NT; i++)
        if (p.t[i].rank) dev[i] = tu_dev_in(ctx, &p.t[i]);
    tk_attention_params a = params_of(&p, dev);
    if (!forced) a.num_splits = 0;
    size_t bytes = 0;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &bytes), TK_OK);
    void *ws = tu_dev_bytes(ctx, bytes); /* NaN */
    a.workspace = ws, a.workspace_bytes = bytes;
    int sm = 0;
    ck_assert_int_eq(tk_gpu_sm_count(ctx, &sm), TK_OK);
    tk_attn_decode_plan pl;
    ck_assert_int_eq(tk_attn_decode_plan_for(ctx, "t", &a, sm, true, &pl), TK_OK);
    tk_status s = tk_attention_forward(ctx, &a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_forward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    download(&p, dev, T_K, T_L);
    problem_check(&p, "gpu", &pl);
    /* a second call appends the same rows again and gives the same bits */
    void *first[2] = {ref_tensor_snapshot(&p.t[T_O]), ref_tensor_snapshot(&p.t[T_L])};
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_OK);
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    download(&p, dev, T_K, T_L);
    ck_assert_msg(!differing(&p.t[T_O], first[0]) && !differing(&p.t[T_L], first[1]),
                  "run 2 differs");
    for (int64_t b = 0; b < c->B && !forced; b++) {
        if (!c->lens[b]) continue;
        double e = dense_diff(&p, b);
        printf("    sequence %lld (%lld keys) against the dense kernel: rel diff %.2e\n",
               (long long)b, (long long)c->lens[b], e);
        ck_assert_msg(e <= 1e-2, "sequence %lld: rel diff %g from the dense kernel", (long long)b,
                      e);
    }
    for (int i = 0; i < NT; i++)
        if (dev[i]) tk_gpu_free(ctx, dev[i]);
    free(first[0]), free(first[1]);
    if (ws) tk_gpu_free(ctx, ws);
    problem_free(&p);
}

START_TEST(test_cache_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_run(&gpu_cases[_i], false);
}
END_TEST

START_TEST(test_cache_small_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_run(&cases[_i], true);
}
END_TEST

static Suite *paged_suite(void) {
    Suite *s = suite_create("attention_paged");
    TCase *tc = ctx_tcase(s, "api", 0);
    tcase_add_test(tc, test_cache_errors);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_cache, 0, N_CASES);
    tcase_add_loop_test(tc, test_cache_random, 0, 6);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_cache_on_gpu, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tc = ctx_tcase(s, "gpu_small", 900); /* quick enough for compute-sanitizer */
    tcase_add_loop_test(tc, test_cache_small_on_gpu, 0, N_CASES);
    return s;
}

int main(void) { return run_suite(paged_suite()); }
