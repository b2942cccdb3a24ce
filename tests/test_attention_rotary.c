/* Rotary embeddings fused into the attention forward
 * (tk_attention_params.rotary; tk_attention_config.rotary, kernels/
 * attention.c, attention_hopper.c, rotary_tile.c; K's rotation through
 * tk_rotary's kernel, attention_run.c):
 * - on the CPU interpreter (race checker on), the launches tk_attention_forward
 *   makes (tk_attn_fwd_plan: K rotated into the workspace, then the forward
 *   with Q's rotation fused), on both forward kernels, against float64 (Q and
 *   K rotated in float64, then attention) at small ragged shapes: NeoX
 *   (tables and base) and GPT-J, full and partial rotary_dim (NeoX pairs
 *   within and across 16-column blocks), D 64/128/256, causal and not,
 *   Nq < Nkv and Nq > Nkv (query positions i + Nkv - Nq), GQA, [B, N, H, D]
 *   strides, both dtypes, one and several key tiles; outputs NaN-poisoned,
 *   K itself left as it was;
 * - bad parameters and configs: a status and a message each; the Hopper
 *   kernel's PTX (S reads the rotated Q from shared memory);
 * - on a GPU (skipped without one): tk_attention_forward with rotary on
 *   both kernel sets against float64 at larger ragged and GQA shapes (both
 *   report before a case fails). */
#include <check.h>
#include <math.h>
#include <stdint.h>
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
#include "util/params.h"
#include "util/ref.h"
#include "util/ref_rotary.h"
#include "util/run.h"
#include "util/runapi.h"

typedef struct rcase {
    int B, Hq, Hkv, Nq, Nkv, D;
    int style, rd, tables; /* rd 0: head_dim */
    int causal;
    tk_dtype dt;
    int bnhd; /* [B, N, H, D] storage */
} rcase;

/* ---- one problem: inputs, poisoned outputs, tables, float64 ---------------- */
enum { T_Q, T_K, T_V, T_O, T_L, NT };

typedef struct problem {
    rcase c;
    float scale, base;
    ref_tensor t[NT];
    void *before[NT];
    float *cos_f, *sin_f; /* tables [rows, rd/2] (tables) */
    int64_t rows;
    double *want_o, *want_l;
} problem;

static int rd_of(const rcase *c) { return c->rd ? c->rd : c->D; }

static ref_tensor qkv(const rcase *c, int64_t H, int64_t N, int64_t pad) {
    int64_t d[4] = {c->B, H, N, c->D};
    static const int bnhd[4] = {0, 2, 1, 3};
    return ref_tensor_new_layout(c->dt, 4, d, c->bnhd ? bnhd : NULL, pad);
}

/* Tables of a scaled base (not what base mode computes), a few rows past
 * seq_kv. */
static void make_tables(problem *p) {
    int half = rd_of(&p->c) / 2;
    p->rows = p->c.Nkv + ref_randint(0, 5);
    p->cos_f = malloc(sizeof(float) * (size_t)(p->rows * half));
    p->sin_f = malloc(sizeof(float) * (size_t)(p->rows * half));
    ck_assert(p->cos_f && p->sin_f);
    for (int64_t r = 0; r < p->rows; r++)
        for (int i = 0; i < half; i++) {
            double th = 0.5 * (double)r * pow(500.0, -2.0 * i / rd_of(&p->c));
            p->cos_f[r * half + i] = (float)cos(th), p->sin_f[r * half + i] = (float)sin(th);
        }
}

static double *to_f64(const float *x, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)n);
    ck_assert(d);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Q and K rotated in float64 (query i at i + Nkv - Nq, key j at j), then
 * attention. */
static void reference(problem *p) {
    const rcase *c = &p->c;
    double *q = ref_tensor_to_f64(&p->t[T_Q]), *k = ref_tensor_to_f64(&p->t[T_K]);
    double *v = ref_tensor_to_f64(&p->t[T_V]), *ct = NULL, *st = NULL;
    int64_t nt = p->rows * (rd_of(c) / 2);
    if (c->tables) ct = to_f64(p->cos_f, nt), st = to_f64(p->sin_f, nt);
    ref_rope r = {c->style, rd_of(c), p->base ? p->base : 10000.0, ct, st, p->rows};
    ref_rotary(&r, q, c->B, c->Hq, c->Nq, c->D, (int64_t)c->Nkv - c->Nq);
    ref_rotary(&r, k, c->B, c->Hkv, c->Nkv, c->D, 0);
    p->want_o = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_O]));
    p->want_l = malloc(sizeof(double) * (size_t)ref_tensor_count(&p->t[T_L]));
    ck_assert(p->want_o && p->want_l);
    ref_attention(q, k, v, p->want_o, p->want_l, c->B, c->Hq, c->Hkv, c->Nq, c->Nkv, c->D, p->scale,
                  c->causal);
    free(q), free(k), free(v), free(ct), free(st);
}

static void problem_init(problem *p, const rcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->t[T_Q] = qkv(c, c->Hq, c->Nq, 0);
    p->t[T_K] = qkv(c, c->Hkv, c->Nkv, 0);
    p->t[T_V] = qkv(c, c->Hkv, c->Nkv, 0);
    p->t[T_O] = qkv(c, c->Hq, c->Nq, 8);
    int64_t dl[3] = {c->B, c->Hq, c->Nq};
    p->t[T_L] = ref_tensor_new_layout(TK_F32, 3, dl, NULL, 3);
    p->scale = tu_attn_fill(p->t, p->before, c->D);
    for (int i = T_Q; i <= T_V; i++) /* the inputs too: they must stay as they were */
        p->before[i] = ref_tensor_snapshot(&p->t[i]);
    p->base = ref_randint(0, 1) ? 0.0f : 500.0f; /* 0: tk_rotary's 10000 */
    if (c->tables) make_tables(p);
    reference(p);
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    free(p->cos_f), free(p->sin_f), free(p->want_o), free(p->want_l);
}

static void label(const rcase *c, char *buf, size_t n) {
    snprintf(buf, n, "B%d Hq%d/%d Nq%d Nkv%d D%d %s rd%d%s %s %s%s", c->B, c->Hq, c->Hkv, c->Nq,
             c->Nkv, c->D, c->style ? "gptj" : "neox", rd_of(c), c->tables ? " tables" : "",
             c->causal ? "causal" : "full", tk_dtype_name(c->dt), c->bnhd ? " bnhd" : "");
}

/* One run's result against float64: its errors and, where it fails, why
 * (the first of: NaN or unwritten outputs, stray writes, O's error, L's
 * error, an input written). */
typedef struct verdict {
    double eo, el;
    char why[200]; /* "" when it passes */
} verdict;

static verdict problem_eval(const problem *p, const char *where) {
    const rcase *c = &p->c;
    tu_attn_out r = tu_attn_measure(&p->t[T_O], &p->t[T_L], p->want_o, p->want_l, p->before[T_O],
                                    p->before[T_L]);
    verdict v = {.eo = r.eo, .el = r.el};
    char name[128];
    label(c, name, sizeof name);
    printf("rotary attention %-7s %s: rel err O %.2e L %.2e\n", where, name, v.eo, v.el);
    double tol = c->dt == TK_BF16 ? 1e-2 : 3e-3;
    int written = -1;
    for (int i = T_Q; i <= T_V && written < 0; i++) /* the inputs, K above all, stay as they were */
        if (memcmp(p->t[i].data, p->before[i], tu_bytes_of(&p->t[i]))) written = i;
    if (r.nan)
        snprintf(v.why, sizeof v.why, "%s %s: %lld elements of O and L not written (or NaN)", where,
                 name, (long long)r.nan);
    else if (r.stray)
        snprintf(v.why, sizeof v.why, "%s %s: %lld writes outside O / L", where, name,
                 (long long)r.stray);
    else if (!(v.eo <= tol))
        snprintf(v.why, sizeof v.why, "%s %s: O rel err %g > %g", where, name, v.eo, tol);
    else if (!(v.el <= tol))
        snprintf(v.why, sizeof v.why, "%s %s: L rel err %g > %g", where, name, v.el, tol);
    else if (written >= 0)
        snprintf(v.why, sizeof v.why, "%s %s: input %d was written", where, name, written);
    return v;
}

static void problem_check(const problem *p, const char *where) {
    verdict v = problem_eval(p, where);
    ck_assert_msg(!v.why[0], "%s", v.why);
}

/* The call's rotary parameters on table pointers cs, sn. */
static tk_rotary_params rope_of(const problem *p, const float *cs, const float *sn) {
    tk_rotary_params r = TK_ROTARY_PARAMS_INIT;
    r.style = p->c.style, r.rotary_dim = p->c.rd, r.base = p->base;
    if (p->c.tables) r.cos = cs, r.sin = sn, r.table_rows = p->rows;
    return r;
}

/* The call's parameters on data pointers dev (host ones for the
 * interpreter) with rotary r. */
static tk_attention_params params_of(const problem *p, void *const dev[NT],
                                     const tk_rotary_params *r) {
    const rcase *c = &p->c;
    tk_attention_params a = TK_ATTENTION_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = c->Nq, a.seq_kv = c->Nkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.lse = dev[T_L];
    tu_strides(a.q_strides, &p->t[T_Q], c->bnhd);
    tu_strides(a.k_strides, &p->t[T_K], c->bnhd);
    tu_strides(a.v_strides, &p->t[T_V], c->bnhd);
    tu_strides(a.o_strides, &p->t[T_O], 1); /* padded rows: always strided */
    for (int d = 0; d < 3; d++) a.lse_strides[d] = p->t[T_L].strides[d];
    a.rotary = r;
    return a;
}

static size_t rotated_k_bytes(const rcase *c) {
    size_t n = (size_t)c->B * (size_t)c->Hkv * (size_t)c->Nkv * (size_t)c->D * 2;
    return (n + 255) / 256 * 256;
}

/* ---- on the interpreter ------------------------------------------------------ */
static void interp_launch(const tk_rotary_config *rc, const tk_attention_config *ac, int n,
                          const tk_arg *args) {
    tk_kernel *k = NULL;
    tk_status s = rc ? tk_rotary_build(ctx, rc, &k) : tk_attention_fwd_build(ctx, ac, &k);
    ck_assert_msg(s == TK_OK, "build: %s", tk_ctx_error(ctx));
    s = tk_interp_run(k, n, args);
    ck_assert_msg(s == TK_OK, "interp: %s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* The launches tk_attention_forward makes for p, on the interpreter; the
 * forward on the Hopper kernel when wgmma (the plan picks mma.sync here:
 * no GPU), whose arguments are the same. */
static void run_interp(problem *p, int wgmma) {
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p->t[i].data;
    tk_rotary_params r = rope_of(p, p->cos_f, p->sin_f);
    tk_attention_params a = params_of(p, host, &r);
    size_t ws = 0;
    ck_assert_msg(tk_attention_forward_workspace(ctx, &a, &ws) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_uint_eq(ws, rotated_k_bytes(&p->c));
    a.workspace = aligned_alloc(256, ws), a.workspace_bytes = ws;
    ck_assert_ptr_nonnull(a.workspace);
    tk_attn_fwd_launches l;
    ck_assert_msg(tk_attn_fwd_plan(ctx, &a, &l) == TK_OK, "plan: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(l.rotate_k, 1);
    ck_assert_int_eq(l.n, p->c.tables ? 9 : 8);
    interp_launch(&l.rot.cfg, NULL, l.rot.n, l.rot.args);
    l.cfg.wgmma = wgmma;
    interp_launch(NULL, &l.cfg, l.n, l.args);
    free(a.workspace);
}

static const rcase cases[] = {
    {1, 4, 2, 77, 77, 64, TK_ROTARY_NEOX, 0, 1, 1, TK_BF16, 0},    /* tables, GQA, ragged */
    {1, 2, 2, 40, 130, 128, TK_ROTARY_GPTJ, 0, 0, 0, TK_F16, 1},   /* q_pos0 90, bnhd    */
    {2, 4, 2, 130, 130, 64, TK_ROTARY_NEOX, 32, 0, 1, TK_BF16, 1}, /* partial rd, bnhd   */
    {1, 2, 1, 77, 100, 128, TK_ROTARY_NEOX, 64, 1, 0, TK_BF16, 0}, /* partial, tables    */
    {1, 2, 2, 50, 77, 64, TK_ROTARY_NEOX, 40, 0, 1, TK_F16, 0},    /* pairs across blocks */
    {1, 2, 1, 70, 70, 128, TK_ROTARY_NEOX, 72, 1, 1, TK_BF16, 0},  /* ... with tables     */
    {1, 2, 2, 100, 60, 64, TK_ROTARY_GPTJ, 50, 0, 0, TK_BF16, 0},  /* Nq > Nkv, rd in a block */
    {1, 2, 1, 20, 33, 256, TK_ROTARY_NEOX, 0, 0, 1, TK_F16, 0},    /* D 256              */
    {1, 2, 2, 24, 40, 256, TK_ROTARY_NEOX, 200, 1, 0, TK_BF16, 1}, /* D 256 tables, partial */
    /* several key tiles (wgmma: 128 keys a tile, 64 at D 256; mma.sync 64):
     * the GPU's first version multiplied tiles 1.. by the wrong A at D 128 */
    {1, 2, 1, 40, 300, 128, TK_ROTARY_NEOX, 0, 0, 1, TK_BF16, 0},   /* 3 tiles, causal    */
    {1, 2, 2, 70, 260, 128, TK_ROTARY_GPTJ, 96, 0, 0, TK_F16, 0},   /* 3 tiles, full      */
    {1, 2, 1, 150, 270, 128, TK_ROTARY_NEOX, 64, 1, 1, TK_BF16, 1}, /* tables, 2 q-blocks */
    {1, 2, 1, 200, 300, 64, TK_ROTARY_GPTJ, 0, 0, 1, TK_F16, 0},    /* D 64, 3 tiles      */
    {1, 2, 2, 30, 140, 256, TK_ROTARY_NEOX, 0, 1, 0, TK_BF16, 0},   /* D 256, 3 tiles     */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void interp_case(const rcase *c, int wgmma) {
    problem p;
    problem_init(&p, c);
    run_interp(&p, wgmma);
    problem_check(&p, wgmma ? "wgmma" : "mma");
    problem_free(&p);
}

START_TEST(test_rotary_mma) { interp_case(&cases[_i], 0); }
END_TEST

START_TEST(test_rotary_wgmma) { interp_case(&cases[_i], 1); }
END_TEST

START_TEST(test_rotary_random) {
    static const int dims[2] = {64, 128};
    rcase c = {.B = (int)ref_randint(1, 2),
               .Hkv = (int)ref_randint(1, 2),
               .Nq = (int)ref_randint(1, 90),
               .Nkv = (int)ref_randint(1, 90),
               .D = dims[ref_randint(0, 1)],
               .style = (int)ref_randint(0, 1),
               .causal = (int)ref_randint(0, 1),
               .dt = ref_randint(0, 1) ? TK_BF16 : TK_F16,
               .bnhd = (int)ref_randint(0, 1)};
    c.Hq = c.Hkv * (int)ref_randint(1, 2);
    c.rd = ref_randint(0, 2) ? 2 * (int)ref_randint(1, c.D / 2) : 0;
    c.tables = c.style == TK_ROTARY_NEOX && ref_randint(0, 1);
    interp_case(&c, (int)ref_randint(0, 1));
}
END_TEST

/* ---- bad parameters: a status and a message naming the field ---------------- */
/* The call refuses p with `want` and a message holding frag: the forward,
 * the plan and tk_attention_kernel_for alike (the workspace's errors only
 * where a workspace is used: the forward and its plan). */
static void expect_error(tk_attention_params p, tk_status want, const char *frag, int ws_only) {
    for (int which = 0; which < 3; which++) {
        if (ws_only && which == 2) continue;
        tk_attn_kernel r;
        tk_attn_fwd_launches l;
        tk_status s = which == 0   ? tk_attention_forward(ctx, &p, NULL)
                      : which == 1 ? tk_attn_fwd_plan(ctx, &p, &l)
                                   : tk_attention_kernel_for(ctx, &p, &r);
        ck_assert_msg(s == want, "%s: got %s (%s)", frag, tk_status_name(s), tk_ctx_error(ctx));
        ck_assert_msg(strstr(tk_ctx_error(ctx), frag), "'%s' lacks '%s'", tk_ctx_error(ctx), frag);
    }
}

START_TEST(test_rotary_bad_params) {
    static _Alignas(256) char buf[1 << 16]; /* never read: the checks fail first */
    static float tab[64];
    int32_t cu[2] = {0, 64};
    tk_rotary_params ok = TK_ROTARY_PARAMS_INIT, r;
    tk_attention_params g = tu_attention_params(TK_BF16, 64, 4, 2, 64, buf), p;
    g.q = buf + 256, g.workspace = buf + 1024, g.workspace_bytes = 2 * 64 * 64 * 2;
    g.rotary = &r;
    static const struct {
        const char *frag;
        tk_status st;
    } bad[] = {
        {"rotary->style is 5", TK_ERR_INVALID_ARG},
        {"rotary->rotary_dim is 65", TK_ERR_INVALID_ARG},
        {"rotary->rotary_dim is 66", TK_ERR_INVALID_ARG},
        {"rotary->rotary_dim is -2", TK_ERR_INVALID_ARG},
        {"rotary->inverse is 1", TK_ERR_INVALID_ARG},
        {"rotary->positions is set", TK_ERR_UNSUPPORTED},
        {"rotary->cos is set and sin is NULL", TK_ERR_INVALID_ARG},
        {"rotary->sin is set and cos is NULL", TK_ERR_INVALID_ARG},
        {"rotary->base is nan", TK_ERR_INVALID_ARG},
        {"rotary->base is -1", TK_ERR_INVALID_ARG},
        {"rotary->base is inf", TK_ERR_INVALID_ARG},
        {"rotary->table_rows is 63", TK_ERR_INVALID_ARG},
        {"tables with TK_ROTARY_GPTJ", TK_ERR_UNSUPPORTED},
        {"rotary: params.struct_size is 0", TK_ERR_INVALID_ARG},
        {"not with packed sequences (cu_seqlens_q)", TK_ERR_UNSUPPORTED},
        {"not with a KV cache (seqlens_kv)", TK_ERR_UNSUPPORTED},
        {"not with TK_ATTN_DECODE", TK_ERR_UNSUPPORTED},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        p = g, r = ok;
        switch (i) {
        case 0: r.style = 5; break;
        case 1: r.rotary_dim = 65; break;
        case 2: r.rotary_dim = 66; break;
        case 3: r.rotary_dim = -2; break;
        case 4: r.inverse = 1; break;
        case 5: r.positions = cu; break;
        case 6: r.cos = tab; break;
        case 7: r.sin = tab; break;
        case 8: r.base = NAN; break;
        case 9: r.base = -1; break;
        case 10: r.base = INFINITY; break;
        case 11: r.cos = r.sin = tab, r.table_rows = 63; break;
        case 12: r.cos = r.sin = tab, r.table_rows = 64, r.style = TK_ROTARY_GPTJ; break;
        case 13: r.struct_size = 0; break;
        case 14: p.cu_seqlens_q = p.cu_seqlens_kv = cu, p.max_seqlen_q = 64, p.batch = 1; break;
        case 15: p.seqlens_kv = cu, p.seq_q = 1; break;
        default: p.kernel = TK_ATTN_DECODE, p.seq_q = 1; break;
        }
        expect_error(p, bad[i].st, bad[i].frag, 0);
    }
    /* the workspace holds the rotated K: 2 x 64 x 64 bf16 here */
    p = g, r = ok, p.workspace_bytes -= 2;
    expect_error(p, TK_ERR_INVALID_ARG, "a workspace of 16384 bytes for the rotated K", 1);
    p = g, p.workspace = NULL;
    expect_error(p, TK_ERR_INVALID_ARG, "(workspace is NULL)", 1);
    p = g, p.workspace = buf + 16;
    expect_error(p, TK_ERR_INVALID_ARG, "not 256-byte aligned", 1);
    p = g, p.workspace = (void *)p.k;
    expect_error(p, TK_ERR_INVALID_ARG, "workspace is k", 1);
    /* what is well formed: its kernel, its workspace, no decoding at few queries */
    tk_attn_kernel kern;
    size_t ws = 0;
    p = g, r = ok, r.cos = r.sin = tab, r.table_rows = 64, p.seq_q = 16;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &p, &kern), TK_OK);
    ck_assert_int_eq(kern, TK_ATTN_MMA_SYNC); /* no GPU here: not TK_ATTN_DECODE */
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &p, &ws), TK_OK);
    ck_assert_uint_eq(ws, 2 * 64 * 64 * 2);
    p.batch = 3, p.seq_kv = 65, r.table_rows = 65;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &p, &ws), TK_OK);
    ck_assert_uint_eq(ws, (3 * 2 * 65 * 64 * 2 + 255) / 256 * 256);
    p.rotary = NULL, p.seq_q = 64;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &p, &ws), TK_OK);
    ck_assert_uint_eq(ws, 0);
}
END_TEST

START_TEST(test_rotary_config_errors) {
    static const struct {
        tk_attention_config c;
        tk_status st;
        const char *frag;
    } bad[] = {
        {{.dtype = TK_BF16, .head_dim = 64, .rotary = 3}, TK_ERR_INVALID_ARG, "rotary is 3"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary = 1, .rotary_dim = 65},
         TK_ERR_INVALID_ARG,
         "rotary_dim is 65"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary = 2, .rotary_dim = 128},
         TK_ERR_INVALID_ARG,
         "rotary_dim is 128"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary_dim = 64},
         TK_ERR_INVALID_ARG,
         "without rotary"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary = 1, .rotary_tables = 2},
         TK_ERR_INVALID_ARG,
         "rotary_tables is 2"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary = 2, .rotary_tables = 1},
         TK_ERR_UNSUPPORTED,
         "TK_ATTN_ROTARY_GPTJ"},
        {{.dtype = TK_BF16, .head_dim = 64, .varlen = 1, .rotary = 1},
         TK_ERR_UNSUPPORTED,
         "rotary with varlen"},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        tk_kernel *k = (tk_kernel *)1;
        ck_assert_int_eq(tk_attention_fwd_build(ctx, &bad[i].c, &k), bad[i].st);
        ck_assert_ptr_null(k);
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].frag), "%d: %s", i, tk_ctx_error(ctx));
    }
    /* the kernel's name says its rotation; its parameters follow the forward's */
    tk_attention_config c = {.dtype = TK_BF16,
                             .head_dim = 128,
                             .wgmma = 1,
                             .rotary = TK_ATTN_ROTARY_NEOX,
                             .rotary_dim = 64,
                             .rotary_tables = 1};
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
    ck_assert_str_eq(tk_kernel_name(k), "tk_attn_fwd_bf16_d128_wgmma_rope_neox_r64_tables");
    tk_kernel_destroy(k);
}
END_TEST

/* ---- the Hopper kernel's warp-specialized form (sm_90a PTX) ---------------- */
/* At every D the rows are rotated in place in the shared Q tile: the
 * consumers fence them over to the async proxy (fence.proxy.async) and meet
 * (bar.sync 1) after the last store and before the first multiply, and
 * S = Q·Kᵀ reads Q from there. Not from registers: a loop-invariant A
 * operand of the register form of wgmma is not kept by ptxas across the key
 * loop (kernels/attention_hopper.c; at D 128 the first version's tiles
 * j >= 1 multiplied P_{j-1} instead of Q on the GPU). So the only wgmma
 * with a register A (`}, {%r`) is P·V, whose B (V) is N-major: imm-trans-b
 * 1 ends the line; S's (K-major) would end `1, 1, 0;`. */
START_TEST(test_rotary_hopper_ptx) {
    static const int dims[3] = {64, 128, 256};
    for (int i = 0; i < 6; i++) {
        int d = dims[i % 3];
        tk_attention_config c = {.dtype = TK_BF16,
                                 .head_dim = d,
                                 .causal = i < 3,
                                 .wgmma = 1,
                                 .rotary = i % 2 ? TK_ATTN_ROTARY_GPTJ : TK_ATTN_ROTARY_NEOX,
                                 .rotary_tables = i % 2 == 0 && d != 128};
        tk_kernel *k = NULL;
        char *ptx = NULL;
        ck_assert_int_eq(tk_attention_fwd_build(ctx, &c, &k), TK_OK);
        ck_assert_msg(tk_emit_ptx(ctx, k, "sm_90a", &ptx) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.inc")); /* producer and consumers */
        const char *mma = strstr(ptx, "wgmma.mma_async");
        ck_assert_ptr_nonnull(mma);
        const char *st = NULL, *at = ptx;
        while ((at = strstr(at, "stmatrix")) && at < mma) st = at++;
        ck_assert_msg(st, "D %d: no store of the rotated rows before the first wgmma", d);
        const char *fence = strstr(st, "fence.proxy.async"), *bar = strstr(st, "bar.sync \t1,");
        ck_assert_msg(fence && bar && fence < bar && bar < mma,
                      "D %d: the stores are not fenced and met before the first wgmma", d);
        int reg_a = 0;
        for (at = ptx; (at = strstr(at, "wgmma.mma_async")); at++) {
            const char *end = strchr(at, '\n');
            ck_assert_ptr_nonnull(end);
            const char *a = strstr(at, "}, {%r");
            if (!a || a > end) continue; /* A from shared memory */
            reg_a++;
            static const char pv[] = "p, 1, 1, 1;";
            size_t n = sizeof pv - 1;
            ck_assert_msg((size_t)(end - at) > n && !strncmp(end - n, pv, n),
                          "D %d: a register-A wgmma other than P·V: %.*s", d, (int)(end - at), at);
        }
        ck_assert_msg(reg_a > 0, "D %d: no register-A wgmma (P·V) found", d);
        tk_free(ptx);
        tk_kernel_destroy(k);
    }
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
/* Larger ragged and GQA shapes whose float64 references stay in seconds. */
static const rcase gpu_cases[] = {
    {2, 8, 2, 1000, 1000, 128, TK_ROTARY_NEOX, 0, 0, 1, TK_BF16, 0},
    {1, 4, 4, 77, 1500, 64, TK_ROTARY_GPTJ, 0, 0, 0, TK_F16, 1},
    {3, 4, 1, 513, 513, 128, TK_ROTARY_NEOX, 64, 1, 1, TK_BF16, 0},
    {1, 8, 4, 2049, 2049, 64, TK_ROTARY_NEOX, 40, 0, 1, TK_BF16, 1},
    {2, 4, 2, 300, 700, 256, TK_ROTARY_NEOX, 0, 1, 0, TK_BF16, 0},
    {1, 8, 1, 16, 4000, 128, TK_ROTARY_GPTJ, 96, 0, 1, TK_BF16, 0},
    {2, 2, 2, 129, 65, 128, TK_ROTARY_NEOX, 0, 0, 1, TK_F16, 0},
    {1, 4, 2, 333, 333, 256, TK_ROTARY_NEOX, 72, 1, 1, TK_F16, 1},
};

/* tk_attention_forward on the device with kernel set `kernel`: its verdict. */
static verdict gpu_run(problem *p, int kernel) {
    void *dev[NT], *cs = NULL, *sn = NULL, *ws = NULL;
    for (int i = 0; i < NT; i++) dev[i] = tu_dev_in(ctx, &p->t[i]);
    size_t nt = sizeof(float) * (size_t)(p->rows * (rd_of(&p->c) / 2));
    if (p->c.tables) cs = tu_dev_copy(ctx, p->cos_f, nt), sn = tu_dev_copy(ctx, p->sin_f, nt);
    tk_rotary_params r = rope_of(p, cs, sn);
    tk_attention_params a = params_of(p, dev, &r);
    a.kernel = kernel;
    size_t wb = 0;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &a, &wb), TK_OK);
    ck_assert_int_eq(tk_gpu_alloc(ctx, wb, &ws), TK_OK);
    a.workspace = ws, a.workspace_bytes = wb;
    tk_attn_kernel route;
    ck_assert_int_eq(tk_attention_kernel_for(ctx, &a, &route), TK_OK);
    tk_status s = tk_attention_forward(ctx, &a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_forward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = 0; i < NT; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
    verdict v = problem_eval(p, route == TK_ATTN_WGMMA ? "gpu wg" : "gpu mma");
    for (int i = 0; i < NT; i++) tk_gpu_free(ctx, dev[i]);
    tk_gpu_free(ctx, ws), tk_gpu_free(ctx, cs), tk_gpu_free(ctx, sn);
    for (int i = T_O; i <= T_L; i++) /* poisoned again for the next run */
        memcpy(p->t[i].data, p->before[i], tu_bytes_of(&p->t[i]));
    return v;
}

/* Both kernel sets run and report before either fails the case, so one
 * run says which kernel is wrong. */
static void gpu_case(const rcase *c) {
    problem p;
    problem_init(&p, c);
    verdict wg = gpu_run(&p, TK_ATTN_AUTO), mma = gpu_run(&p, TK_ATTN_MMA_SYNC);
    problem_free(&p);
    ck_assert_msg(!wg.why[0] && !mma.why[0], "%s%s%s", wg.why, wg.why[0] && mma.why[0] ? "; " : "",
                  mma.why);
}

START_TEST(test_rotary_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&gpu_cases[_i]);
}
END_TEST

/* The interpreter's shapes on the GPU (small: for compute-sanitizer). */
START_TEST(test_rotary_small_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&cases[_i]);
}
END_TEST

static Suite *rotary_suite(void) {
    Suite *s = suite_create("attention_rotary");
    /* 120 s: six Hopper kernels lowered to PTX, ~2 s, more on a busy host */
    TCase *tc = ctx_tcase(s, "api", 120);
    tcase_add_test(tc, test_rotary_bad_params);
    tcase_add_test(tc, test_rotary_config_errors);
    tcase_add_test(tc, test_rotary_hopper_ptx);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_rotary_mma, 0, N_CASES);
    tcase_add_loop_test(tc, test_rotary_wgmma, 0, N_CASES);
    tcase_add_loop_test(tc, test_rotary_random, 0, 3);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_rotary_on_gpu, 0, (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tc = ctx_tcase(s, "gpu_small", 900);
    tcase_add_loop_test(tc, test_rotary_small_on_gpu, 0, N_CASES);
    return s;
}

int main(void) { return run_suite(rotary_suite()); }
