/* Token and position embeddings (tk_embedding_build, kernels/embedding*.c;
 * tk_embedding_forward / _backward, kernels/embedding_run.c): the config
 * and parameter checks, each by its message, and the launches' shapes; on
 * the interpreter backend, the public entry points against float64 at
 * ragged shapes (B·T, C off the tiles; vocabularies of 1, 7, 256, 50257
 * and 70000, i.e. one, two and three sort passes; repeated tokens in runs
 * longer than a summing warp's range and than 32 of them; tokens out of
 * range; accumulate on and off; bf16, f16 and f32; row pitches; outputs
 * NaN-poisoned, gaps that must stay), the backward bit-identical run after
 * run and under shuffled warp orders; on the GPU (skipped, with a line,
 * without one), the same at GPT-2's sizes. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/embedding_parts.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

/* ---- the config checks --------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = (tk_kernel *)1;
    static const struct {
        tk_embedding_config c;
        const char *msg;
    } bad[] = {
        {{.part = 9}, "part is 9"},
        {{.part = -1}, "part is -1"},
        {{.part = TK_EMB_FWD, .dtype = TK_I32, .weight_dtype = TK_BF16, .cols = 48},
         "dtype is i32"},
        {{.part = TK_EMB_FWD, .dtype = TK_BF16, .cols = 48}, "weight_dtype is ?"},
        {{.part = TK_EMB_FWD, .dtype = TK_BF16, .weight_dtype = TK_BF16, .pos = 2, .cols = 48},
         "pos is 2"},
        {{.part = TK_EMB_FWD, .dtype = TK_BF16, .weight_dtype = TK_BF16}, "cols is 0"},
        {{.part = TK_EMB_SEGSUM, .dtype = TK_BF16, .cols = 80}, "cols is 80"},
        {{.part = TK_EMB_FIXUP, .cols = 24}, "cols is 24"},
        {{.part = TK_EMB_DWPE, .dtype = TK_I64}, "dtype is i64"},
        {{.part = TK_EMB_ZERO, .warps = 3}, "warps is 3"},
        {{.part = TK_EMB_SCAN, .warps = 8}, "the sort's kernels take 0 or 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_embedding_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    tk_embedding_config ok = {.part = TK_EMB_KEYS};
    ck_assert_int_eq(tk_embedding_build(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_embedding_build(ctx, NULL, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_embedding_build(NULL, &ok, &k), TK_ERR_INVALID_ARG);
    for (int part = TK_EMB_FWD; part <= TK_EMB_FIXUP; part++) { /* every part builds */
        tk_embedding_config c = {
            .part = part, .dtype = TK_BF16, .weight_dtype = TK_F32, .pos = 1, .cols = 48};
        ck_assert_msg(tk_embedding_build(ctx, &c, &k) == TK_OK, "%d: %s", part, tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the entry points' checks (each call fails before any launch) -------- */
static tk_embedding_params fwd_ok(void *buf) {
    tk_embedding_params p = TK_EMBEDDING_PARAMS_INIT;
    p.dtype = TK_BF16, p.batch = 2, p.seq = 3, p.channels = 8, p.vocab = 5, p.max_seq = 4;
    p.tokens = buf, p.wte = buf, p.wpe = buf, p.out = buf;
    return p;
}

START_TEST(bad_fwd_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    _Alignas(16) static float buf[64]; /* never read: every call fails its checks */
    char *b = (char *)buf;
    static const char *msg[] = {"dtype is i32",
                                "weight_dtype is i64",
                                "batch is 0",
                                "seq is -3",
                                "batch x seq is 16777216",
                                "channels is 0",
                                "channels is 1048577",
                                "vocab is 0",
                                "vocab is 16777216",
                                "max_seq is 2; expected seq (3)",
                                "tokens is NULL",
                                "tokens is not 4-byte aligned",
                                "wte is NULL",
                                "wte is not 4-byte aligned",
                                "wpe is not 2-byte aligned",
                                "out is NULL",
                                "out is not 2-byte aligned",
                                "wte_stride is 7",
                                "wpe_stride is -1",
                                "out_stride is 4611686018427387904",
                                "struct_size is 0",
                                "params is NULL"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_embedding_params p = fwd_ok(buf);
        switch (i) {
        case 0: p.dtype = TK_I32; break;
        case 1: p.weight_dtype = TK_I64; break;
        case 2: p.batch = 0; break;
        case 3: p.seq = -3; break;
        case 4: p.batch = 4096, p.seq = 4096; break;
        case 5: p.channels = 0; break;
        case 6: p.channels = (1 << 20) + 1; break;
        case 7: p.vocab = 0; break;
        case 8: p.vocab = 1 << 24; break;
        case 9: p.max_seq = 2; break;
        case 10: p.tokens = NULL; break;
        case 11: p.tokens = (const int32_t *)(b + 2); break;
        case 12: p.wte = NULL; break;
        case 13: p.weight_dtype = TK_F32, p.wte = b + 2; break;
        case 14: p.wpe = b + 1; break;
        case 15: p.out = NULL; break;
        case 16: p.out = b + 1; break;
        case 17: p.wte_stride = 7; break;
        case 18: p.wpe_stride = -1; break;
        case 19: p.out_stride = (int64_t)1 << 62; break;
        case 20: p.struct_size = 0; break;
        }
        ck_assert_int_eq(tk_embedding_forward(ctx, i == 21 ? NULL : &p, NULL), TK_ERR_INVALID_ARG);
        ck_assert_msg(strstr(tk_ctx_error(ctx), msg[i]), "%d: %s", i, tk_ctx_error(ctx));
    }
    tk_embedding_params p = fwd_ok(buf);
    p.wpe = NULL, p.max_seq = 0; /* no positions: max_seq unread */
    ck_assert_int_eq(tk_embedding_forward_prepare(NULL, &p, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

static tk_embedding_bwd_params bwd_ok(void *buf, size_t bytes) {
    tk_embedding_bwd_params p = TK_EMBEDDING_BWD_PARAMS_INIT;
    p.dtype = TK_BF16, p.accumulate = 1, p.batch = 2, p.seq = 3, p.channels = 8;
    p.vocab = 5, p.max_seq = 4, p.tokens = buf, p.dout = buf, p.dwte = buf, p.dwpe = buf;
    p.workspace = buf, p.workspace_bytes = bytes;
    return p;
}

START_TEST(bad_bwd_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    _Alignas(16) static float buf[64];
    char *b = (char *)buf;
    size_t need = 0;
    tk_embedding_bwd_params ok = bwd_ok(buf, 0);
    ck_assert_int_eq(tk_embedding_backward_workspace(ctx, &ok, &need), TK_OK);
    /* 4 entry arrays (256 bytes each), counts and offsets (1 KiB each), the
     * tail's Head and Cont (C = 8: W 16, no full rows; 1 KiB each) */
    ck_assert_uint_eq(need, 5 * 1024);
    static const char *msg[] = {"dtype is i64",
                                "accumulate is 2",
                                "vocab is -1",
                                "max_seq is 2147483648",
                                "tokens is NULL",
                                "dout is not 2-byte aligned",
                                "dwte is NULL",
                                "dwpe is not 4-byte aligned",
                                "workspace is NULL",
                                "workspace is not 16-byte aligned",
                                "workspace_bytes is 5119; batch x seq 6, channels 8 need 5120",
                                "dout_stride is 5",
                                "dwte_stride is -8",
                                "dwpe_stride is 3"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_embedding_bwd_params p = bwd_ok(buf, need);
        switch (i) {
        case 0: p.dtype = TK_I64; break;
        case 1: p.accumulate = 2; break;
        case 2: p.vocab = -1; break;
        case 3: p.max_seq = (int64_t)1 << 31; break;
        case 4: p.tokens = NULL; break;
        case 5: p.dout = b + 1; break;
        case 6: p.dwte = NULL; break;
        case 7: p.dwpe = (float *)(b + 2); break;
        case 8: p.workspace = NULL; break;
        case 9: p.workspace = b + 4; break;
        case 10: p.workspace_bytes = need - 1; break;
        case 11: p.dout_stride = 5; break;
        case 12: p.dwte_stride = -8; break;
        case 13: p.dwpe_stride = 3; break;
        }
        tu_expect_status(ctx, tk_embedding_backward(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_embedding_backward_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_embedding_backward(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    ok.channels = 0; /* the workspace query checks the sizes */
    ck_assert_int_eq(tk_embedding_backward_workspace(ctx, &ok, &need), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The row tile, the passes and the launches the entry points make. */
START_TEST(launch_shapes) {
    static const int64_t C[] = {768, 1024, 1280, 1600, 100, 200, 8, 64};
    static const int W[] = {48, 64, 64, 64, 16, 16, 16, 16};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(tk_emb_cols_for(C[i]) == W[i], "C %lld: W %d", (long long)C[i],
                      tk_emb_cols_for(C[i]));
    ck_assert_int_eq(tk_emb_passes(1), 1);
    ck_assert_int_eq(tk_emb_passes(255), 1);
    ck_assert_int_eq(tk_emb_passes(256), 2); /* the key V itself needs 9 bits */
    ck_assert_int_eq(tk_emb_passes(50257), 2);
    ck_assert_int_eq(tk_emb_passes(65536), 3);
    static float buf[4];
    tk_embedding_bwd_params p = bwd_ok(buf, 0);
    tk_emb_launch l[TK_EMB_MAX_LAUNCHES];
    p.vocab = 50257, p.channels = 768, p.accumulate = 0;
    /* zero, dwpe, keys, 2 x (hist, scan, scatter), segsum, fixup */
    ck_assert_int_eq(tk_emb_bwd_launches(&p, l), 11);
    ck_assert_int_eq(l[0].cfg.part, TK_EMB_ZERO);
    ck_assert_int_eq(l[10].cfg.part, TK_EMB_FIXUP);
    p.accumulate = 1, p.dwpe = NULL, p.channels = 100; /* a tail: its own sums */
    ck_assert_int_eq(tk_emb_bwd_launches(&p, l), 1 + 6 + 4);
    p.vocab = 70000;
    ck_assert_int_eq(tk_emb_bwd_launches(&p, l), 1 + 9 + 4);
    ck_assert_int_eq((int)l[9].args[7].scalar.i, 0); /* the last scatter writes keys */
    ck_assert_int_eq((int)l[6].args[7].scalar.i, 65536);
    tk_embedding_params f = fwd_ok(buf);
    f.channels = 100;
    ck_assert_int_eq(tk_emb_fwd_launches(&f, l), 2);
    f.channels = 8; /* the tail alone */
    ck_assert_int_eq(tk_emb_fwd_launches(&f, l), 1);
    ck_assert_int_eq((int)l[0].args[1].dims[1], 1);
}
END_TEST

/* ---- one problem: tensors and the float64 reference ------------------------ */
typedef struct ecase {
    tk_dtype dt, wdt;      /* out's and dout's; wte's and wpe's              */
    int64_t B, T, C, V, P; /* P: max_seq, 0: no positions                   */
    int acc, bad, hot;     /* accumulate; tokens out of range; hot: 1 most
                              tokens of three values, 2 nearly all of one   */
    int64_t pad;           /* every matrix's row pitch: C + pad             */
} ecase;

typedef struct eprob {
    ecase c;
    int64_t N;
    int32_t *tok;
    ref_tensor wte, wpe, out, dout, dwte, dwpe;
    void *out0, *dwte0, *dwpe0; /* as before the calls */
} eprob;

static ref_tensor emat(tk_dtype dt, int64_t rows, const ecase *c) {
    int64_t d[2] = {rows, c->C};
    return ref_tensor_new_layout(dt, 2, d, NULL, c->pad);
}

static int32_t token(const ecase *c, int64_t i) {
    static const int32_t bad[4] = {-1, 0, INT32_MIN, INT32_MAX};
    if (c->bad && i % 13 == 5) return i % 4 == 1 ? (int32_t)c->V : bad[i % 4];
    double u = ref_uniform();
    if (c->hot == 2 && u < 0.94) return (int32_t)(c->V - 1);
    if (c->hot == 1 && u < 0.7) return (int32_t)((u < 0.2 ? 0 : u < 0.45 ? c->V / 2 : c->V - 1));
    return (int32_t)ref_randint(0, c->V - 1);
}

/* Inputs random, outputs NaN (dwte, dwpe: random with accumulate), every
 * row pitch's gap 7 (it must stay). */
static void prob_make(eprob *p, const ecase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c, p->N = c->B * c->T;
    p->tok = malloc((size_t)p->N * sizeof(int32_t));
    for (int64_t i = 0; i < p->N; i++) p->tok[i] = token(c, i);
    int64_t P = c->P ? c->P : 1;
    p->wte = emat(c->wdt, c->V, c), p->wpe = emat(c->wdt, P, c);
    p->out = emat(c->dt, p->N, c), p->dout = emat(c->dt, p->N, c);
    p->dwte = emat(TK_F32, c->V, c), p->dwpe = emat(TK_F32, P, c);
    ref_tensor *all[6] = {&p->wte, &p->wpe, &p->out, &p->dout, &p->dwte, &p->dwpe};
    for (int i = 0; i < 6; i++) {
        bool poison = i == 2 || (i >= 4 && !c->acc);
        ref_tensor_fill_all(all[i], 7.0);
        if (poison) ref_tensor_fill_all(all[i], NAN);
        if (!poison) ref_tensor_random(all[i], -1.0, 1.0);
    }
    p->out0 = ref_tensor_snapshot(&p->out);
    p->dwte0 = ref_tensor_snapshot(&p->dwte), p->dwpe0 = ref_tensor_snapshot(&p->dwpe);
}

static void prob_free(eprob *p) {
    ref_tensor *all[6] = {&p->wte, &p->wpe, &p->out, &p->dout, &p->dwte, &p->dwpe};
    for (int i = 0; i < 6; i++) ref_tensor_free(all[i]);
    free(p->tok), free(p->out0), free(p->dwte0), free(p->dwpe0);
}

static bool valid(const eprob *p, int64_t i) { return p->tok[i] >= 0 && p->tok[i] < p->c.V; }

/* Logical element (r, j) of t, and of t as it was (`was`: its snapshot). */
static double at(const ref_tensor *t, int64_t r, int64_t j) {
    return ref_tensor_get(t, r * t->dims[1] + j);
}

static double was(const ref_tensor *t, const void *snap, int64_t r, int64_t j) {
    ref_tensor s = *t;
    s.data = (void *)snap;
    return at(&s, r, j);
}

/* ‖out - ref‖ / ‖ref‖ with any non-finite output counted apart. */
typedef struct acc {
    double num, den;
    int64_t bad;
} acc;

static void acc_add(acc *a, double out, double ref) {
    if (!isfinite(out)) a->bad++;
    if (isfinite(out)) a->num += (out - ref) * (out - ref), a->den += ref * ref;
}

static double acc_err(const acc *a) {
    return a->bad ? INFINITY : a->den > 0 ? sqrt(a->num / a->den) : sqrt(a->num);
}

static void label(const eprob *p, char *buf, size_t n) {
    const ecase *c = &p->c;
    snprintf(buf, n, "%s<-%s B%lld T%lld C%lld (W %d) V%lld P%lld%s%s%s pad%lld",
             tk_dtype_name(c->dt), tk_dtype_name(c->wdt), (long long)c->B, (long long)c->T,
             (long long)c->C, tk_emb_cols_for(c->C), (long long)c->V, (long long)c->P,
             c->acc ? " acc" : "", c->bad ? " bad" : "", c->hot ? " hot" : "", (long long)c->pad);
}

/* out against wte[tok] + wpe[t]: a bad token's row all NaN. */
static void check_fwd(const eprob *p, const char *where) {
    const ecase *c = &p->c;
    acc a;
    memset(&a, 0, sizeof a);
    int64_t nan_rows = 0;
    for (int64_t i = 0; i < p->N; i++) {
        bool ok = valid(p, i), all_nan = true;
        for (int64_t j = 0; j < c->C; j++) {
            double o = at(&p->out, i, j);
            all_nan = all_nan && isnan(o);
            if (!ok) continue;
            acc_add(&a, o, at(&p->wte, p->tok[i], j) + (c->P ? at(&p->wpe, i % c->T, j) : 0.0));
        }
        if (!ok) ck_assert_msg(all_nan, "row %lld (token %d) not NaN", (long long)i, p->tok[i]);
        nan_rows += !ok;
    }
    char name[160];
    label(p, name, sizeof name);
    double e = acc_err(&a);
    printf("emb %s fwd %s: rel err %.2e, %lld NaN rows\n", where, name, e, (long long)nan_rows);
    ck_assert_msg(e <= tu_tol_of(c->dt) / 2, "%s: out rel err %g", name, e);
    ck_assert_msg(ref_tensor_stray_writes(&p->out, p->out0) == 0, "%s: out's gaps written", name);
}

/* dwte, dwpe against float64; rows no valid token (position) reaches
 * exactly as they were (accumulate) or 0. */
static void check_bwd(const eprob *p, const char *where) {
    const ecase *c = &p->c;
    int64_t P = c->P ? c->P : 0;
    double *wt = tu_f64_new(c->V * c->C), *wp = tu_f64_new((P ? P : 1) * c->C);
    char *hit = calloc((size_t)c->V, 1);
    for (int64_t i = 0; i < p->N; i++)
        for (int64_t j = 0; j < c->C; j++) {
            double g = at(&p->dout, i, j);
            if (valid(p, i)) wt[p->tok[i] * c->C + j] += g, hit[p->tok[i]] = 1;
            if (P) wp[(i % c->T) * c->C + j] += g;
        }
    acc a[2];
    memset(a, 0, sizeof a);
    for (int64_t v = 0; v < c->V; v++)
        for (int64_t j = 0; j < c->C; j++) {
            double old = c->acc ? was(&p->dwte, p->dwte0, v, j) : 0.0, got = at(&p->dwte, v, j);
            acc_add(&a[0], got, old + wt[v * c->C + j]);
            if (!hit[v])
                ck_assert_msg(got == old && !signbit(got) == !signbit(old),
                              "dwte[%lld, %lld] is %g, untouched %g", (long long)v, (long long)j,
                              got, old);
        }
    for (int64_t t = 0; t < P; t++)
        for (int64_t j = 0; j < c->C; j++) {
            double old = c->acc ? was(&p->dwpe, p->dwpe0, t, j) : 0.0, got = at(&p->dwpe, t, j);
            acc_add(&a[1], got, old + wp[t * c->C + j]);
            if (t >= c->T) ck_assert_msg(got == old, "dwpe[%lld] past T", (long long)t);
        }
    char name[160];
    label(p, name, sizeof name);
    printf("emb %s bwd %s: rel err dwte %.2e dwpe %.2e\n", where, name, acc_err(&a[0]),
           acc_err(&a[1]));
    ck_assert_msg(acc_err(&a[0]) <= 1e-5 && acc_err(&a[1]) <= 1e-5, "%s: dwte %g dwpe %g", name,
                  acc_err(&a[0]), acc_err(&a[1]));
    ck_assert_msg(ref_tensor_stray_writes(&p->dwte, p->dwte0) == 0, "%s: dwte's gaps", name);
    ck_assert_msg(!P || ref_tensor_stray_writes(&p->dwpe, p->dwpe0) == 0, "%s: dwpe's gaps", name);
    free(wt), free(wp), free(hit);
}

/* ---- the calls on device buffers (either backend) ---------------------------- */
typedef struct edev {
    void *tok, *wte, *wpe, *out, *dout, *dwte, *dwpe, *ws;
    size_t ws_bytes;
} edev;

static tk_embedding_bwd_params bwd_params(const eprob *p, const edev *d) {
    const ecase *c = &p->c;
    tk_embedding_bwd_params q = TK_EMBEDDING_BWD_PARAMS_INIT;
    q.dtype = c->dt, q.accumulate = c->acc, q.batch = c->B, q.seq = c->T, q.channels = c->C;
    q.vocab = c->V, q.max_seq = c->P, q.tokens = d->tok, q.dout = d->dout, q.dwte = d->dwte;
    q.dwpe = c->P ? d->dwpe : NULL, q.workspace = d->ws, q.workspace_bytes = d->ws_bytes;
    q.dout_stride = q.dwte_stride = q.dwpe_stride = c->C + c->pad;
    return q;
}

static void dev_make(tk_ctx *ctx, const eprob *p, edev *d) {
    d->tok = tu_dev_bytes(ctx, (size_t)p->N * 4);
    ck_assert_int_eq(tk_gpu_upload(ctx, d->tok, p->tok, (size_t)p->N * 4), TK_OK);
    d->wte = tu_dev_in(ctx, &p->wte), d->wpe = tu_dev_in(ctx, &p->wpe);
    d->out = tu_dev_in(ctx, &p->out), d->dout = tu_dev_in(ctx, &p->dout);
    d->dwte = tu_dev_in(ctx, &p->dwte), d->dwpe = tu_dev_in(ctx, &p->dwpe);
    d->ws_bytes = 0;
    tk_embedding_bwd_params q = bwd_params(p, d);
    ck_assert_msg(tk_embedding_backward_workspace(ctx, &q, &d->ws_bytes) == TK_OK, "%s",
                  tk_ctx_error(ctx));
    d->ws = tu_dev_bytes(ctx, d->ws_bytes);
}

static void dev_free(tk_ctx *ctx, edev *d) {
    void *all[8] = {d->tok, d->wte, d->wpe, d->out, d->dout, d->dwte, d->dwpe, d->ws};
    for (int i = 0; i < 8; i++)
        if (all[i]) ck_assert_int_eq(tk_gpu_free(ctx, all[i]), TK_OK);
}

static void download(tk_ctx *ctx, ref_tensor *t, const void *d) {
    ck_assert_msg(tk_gpu_sync(ctx) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_download(ctx, t->data, d, tu_bytes_of(t)), TK_OK);
}

static void run_fwd(tk_ctx *ctx, eprob *p, const edev *d) {
    const ecase *c = &p->c;
    tk_embedding_params q = TK_EMBEDDING_PARAMS_INIT;
    q.dtype = c->dt, q.weight_dtype = c->wdt, q.batch = c->B, q.seq = c->T, q.channels = c->C;
    q.vocab = c->V, q.max_seq = c->P, q.tokens = d->tok, q.wte = d->wte;
    q.wpe = c->P ? d->wpe : NULL, q.out = d->out;
    q.wte_stride = q.wpe_stride = q.out_stride = c->C + c->pad;
    ck_assert_msg(tk_embedding_forward(ctx, &q, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    download(ctx, &p->out, d->out);
}

/* From the gradients' first state (poisoned, or the accumulated-into). */
static void run_bwd(tk_ctx *ctx, eprob *p, const edev *d) {
    ck_assert_int_eq(tk_gpu_upload(ctx, d->dwte, p->dwte0, tu_bytes_of(&p->dwte)), TK_OK);
    ck_assert_int_eq(tk_gpu_upload(ctx, d->dwpe, p->dwpe0, tu_bytes_of(&p->dwpe)), TK_OK);
    ck_assert_int_eq(tk_gpu_memset(ctx, d->ws, 0xff, d->ws_bytes), TK_OK);
    tk_embedding_bwd_params q = bwd_params(p, d);
    ck_assert_msg(tk_embedding_backward(ctx, &q, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    download(ctx, &p->dwte, d->dwte);
    download(ctx, &p->dwpe, d->dwpe);
}

/* The backward again, its bits against the last run's. */
static void same_again(tk_ctx *ctx, eprob *p, const edev *d, const char *what) {
    void *w = ref_tensor_snapshot(&p->dwte), *q = ref_tensor_snapshot(&p->dwpe);
    run_bwd(ctx, p, d);
    ck_assert_msg(!memcmp(w, p->dwte.data, tu_bytes_of(&p->dwte)), "%s: dwte's bits moved", what);
    ck_assert_msg(!memcmp(q, p->dwpe.data, tu_bytes_of(&p->dwpe)), "%s: dwpe's bits moved", what);
    free(w), free(q);
}

static void run_case(tk_ctx *ctx, const ecase *c, const char *where) {
    eprob p;
    prob_make(&p, c);
    edev d;
    dev_make(ctx, &p, &d);
    run_fwd(ctx, &p, &d);
    check_fwd(&p, where);
    run_bwd(ctx, &p, &d);
    check_bwd(&p, where);
    same_again(ctx, &p, &d, where);
    dev_free(ctx, &d);
    prob_free(&p);
}

/* ---- on the interpreter ------------------------------------------------------ */
static tk_ctx *interp_ctx(uint64_t seed) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    tk_interp_options o = {.race_check = 1, .shuffle_seed = seed};
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
    return ctx;
}

/* dt, wdt, B, T, C, V, P, acc, bad, hot, pad */
static const ecase cases[] = {
    {TK_BF16, TK_BF16, 3, 37, 100, 7, 40, 1, 1, 0, 0},        /* 1 pass, a tail of 4       */
    {TK_F16, TK_F16, 2, 50, 200, 256, 64, 0, 0, 1, 3},        /* 2 passes, runs across warps */
    {TK_BF16, TK_BF16, 4, 64, 64, 50257, 64, 1, 1, 0, 0},     /* GPT-2's vocabulary         */
    {TK_F32, TK_F32, 1, 1, 16, 1, 1, 0, 0, 0, 0},             /* one position, one token    */
    {TK_BF16, TK_BF16, 5, 200, 768, 300, 256, 1, 0, 1, 0},    /* GPT-2's width: one tile    */
    {TK_BF16, TK_F32, 2, 300, 48, 70000, 300, 0, 1, 0, 16},   /* 3 passes, f32 weights      */
    {TK_F32, TK_BF16, 3, 1000, 16, 2, 0, 1, 0, 2, 0},         /* runs past 32 warps' ranges */
    {TK_BF16, TK_BF16, 2, 33, 1600, 1000, 0, 0, 1, 1, 0},     /* two tiles a row, no wpe    */
    {TK_BF16, TK_BF16, 2, 160, 768, 50257, 1024, 1, 1, 1, 0}, /* GPT-2's tables         */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

START_TEST(interp_against_f64) {
    tk_ctx *ctx = interp_ctx(0);
    run_case(ctx, &cases[_i], "interp");
    tk_ctx_destroy(ctx);
}
END_TEST

/* The backward's bits under warp orders drawn from several seeds (where a
 * sum's order would show), against the lockstep run's. */
START_TEST(deterministic) {
    const ecase c = {TK_BF16, TK_BF16, 4, 100, 200, 256, 128, 1, 1, 1, 0};
    eprob p;
    prob_make(&p, &c);
    void *first[2] = {NULL, NULL};
    for (uint64_t seed = 0; seed < 4; seed++) {
        tk_ctx *ctx = interp_ctx(seed);
        edev d;
        dev_make(ctx, &p, &d);
        run_bwd(ctx, &p, &d);
        if (!seed) {
            check_bwd(&p, "interp");
            first[0] = ref_tensor_snapshot(&p.dwte), first[1] = ref_tensor_snapshot(&p.dwpe);
        }
        ck_assert_msg(!memcmp(first[0], p.dwte.data, tu_bytes_of(&p.dwte)) &&
                          !memcmp(first[1], p.dwpe.data, tu_bytes_of(&p.dwpe)),
                      "seed %llu: other bits", (unsigned long long)seed);
        dev_free(ctx, &d);
        tk_ctx_destroy(ctx);
    }
    printf("emb interp deterministic: 4 warp orders, the same bits\n");
    free(first[0]), free(first[1]);
    prob_free(&p);
}
END_TEST

/* ---- on the GPU: GPT-2's sizes ------------------------------------------------- */
static const ecase gpu_cases[] = {
    {TK_BF16, TK_BF16, 16, 1024, 768, 50257, 1024, 1, 0, 0, 0},
    {TK_BF16, TK_BF16, 16, 1024, 768, 256, 1024, 0, 0, 1, 0},
    {TK_BF16, TK_F32, 3, 1000, 1600, 50304, 1024, 1, 1, 0, 8},
    {TK_F16, TK_F16, 8, 1024, 1024, 50257, 1024, 0, 0, 1, 0},
    {TK_F32, TK_F32, 2, 777, 100, 7, 800, 1, 1, 0, 0},
    {TK_BF16, TK_BF16, 64, 1024, 768, 50257, 1024, 1, 0, 1, 0},
    {TK_BF16, TK_BF16, 4, 1024, 768, 70000, 0, 0, 1, 2, 0},
};
#define NGPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

START_TEST(gpu_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (th_gpu_or_skip(ctx) == TK_OK) run_case(ctx, &gpu_cases[_i], "gpu");
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("embedding");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_fwd_params);
    tcase_add_test(tc, bad_bwd_params);
    tcase_add_test(tc, launch_shapes);
    tc = tu_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tcase_add_test(tc, deterministic);
    tc = tu_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, gpu_against_f64, 0, NGPU);
    return run_suite(s);
}
