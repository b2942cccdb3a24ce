/* Rotary embeddings (tk_rotary_build, kernels/rotary.c; tk_rotary,
 * kernels/rotary_run.c): the config and parameter checks with their
 * messages; on the interpreter, the launches tk_rotary makes against a
 * float64 reference at ragged shapes (both styles, tables and base,
 * positions, partial rotary_dim, in place, a [B, N, H, D] layout, f16 and
 * bf16, forward and inverse), and each result rotated back to its input;
 * on the GPU, each launch against the interpreter on the same inputs
 * (skipped, with a line, without one). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rotary_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

static const double BASE = 10000.0;

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_rotary_config ok = {.dtype = TK_BF16, .head_dim = 128, .rotary_dim = 128};
    static const struct {
        tk_rotary_config c;
        tk_status s;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_F32, .head_dim = 64, .rotary_dim = 64}, TK_ERR_INVALID_ARG, "dtype is f32"},
        {{.dtype = TK_BF16, .style = 2, .head_dim = 64, .rotary_dim = 64},
         TK_ERR_INVALID_ARG,
         "style is 2"},
        {{.dtype = TK_BF16, .head_dim = 96, .rotary_dim = 64},
         TK_ERR_INVALID_ARG,
         "head_dim is 96"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary_dim = 33},
         TK_ERR_INVALID_ARG,
         "rotary_dim is 33"},
        {{.dtype = TK_BF16, .head_dim = 64, .rotary_dim = 128},
         TK_ERR_INVALID_ARG,
         "rotary_dim is 128"},
        {{.dtype = TK_F16, .head_dim = 64, .rotary_dim = 64, .inverse = 3},
         TK_ERR_INVALID_ARG,
         "inverse is 3"},
        {{.dtype = TK_F16, .style = 1, .head_dim = 64, .rotary_dim = 64, .tables = 1},
         TK_ERR_UNSUPPORTED,
         "TK_ROTARY_GPTJ"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_rotary_build, ctx, &bad[i].c, bad[i].s, bad[i].msg);
    TU_EXPECT_BUILD_ARGS(tk_rotary_build, ctx, &ok);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- the run API's checks (no launch: they fail before any) ---------- */
START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    char q[64], kk[64], o[64]; /* never read: every call fails its checks first */
    float tab[8];
    int32_t pos[4];
    tk_rotary_params ok = TK_ROTARY_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.head_dim = 64, ok.batch = 2, ok.seq = 3, ok.heads_q = 4;
    ok.heads_k = 2, ok.q = q, ok.q_out = q, ok.k = kk, ok.k_out = o;
    static const char *const msg[] = {
        "dtype is f32",      "style is 7",
        "head_dim is 80",    "rotary_dim is 65",
        "rotary_dim is 66",  "inverse is 2",
        "batch is 0",        "batch is 65536",
        "seq is -1",         "heads_q is 0",
        "heads_k is 70000",  "q is NULL",
        "k_out is NULL",     "q_out is q (in place) with other strides",
        "q_strides[3] is 0", "k_out_strides[1] is -4",
        "reach past 2^60",   "k_out is set and k is NULL",
        "cos is set",        "base is nan",
        "base is -2",        "table_rows is 2",
        "struct_size"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_rotary_params p = ok;
        tk_status want = TK_ERR_INVALID_ARG;
        switch (i) {
        case 0: p.dtype = TK_F32; break;
        case 1: p.style = 7; break;
        case 2: p.head_dim = 80; break;
        case 3: p.rotary_dim = 65; break;
        case 4: p.rotary_dim = 66; break;
        case 5: p.inverse = 2; break;
        case 6: p.batch = 0; break;
        case 7: p.batch = 65536; break;
        case 8: p.seq = -1; break;
        case 9: p.heads_q = 0; break;
        case 10: p.heads_k = 70000; break;
        case 11: p.q = NULL; break;
        case 12: p.k_out = NULL; break;
        case 13: p.q_out_strides[3] = 1, p.q_out_strides[2] = 64; break;
        case 14: p.q_strides[0] = 1; break;
        case 15: p.k_out_strides[1] = -4, p.k_out_strides[3] = 1; break;
        case 16: p.q_out = o, p.q_strides[0] = (int64_t)1 << 60, p.q_strides[3] = 1; break;
        case 17: p.k = NULL; break;
        case 18: p.cos = tab; break;
        case 19: p.base = NAN; break;
        case 20: p.base = -2; break;
        case 21: p.cos = tab, p.sin = tab, p.table_rows = 2; break;
        default: p.struct_size = 3; break;
        }
        tu_expect_status(ctx, tk_rotary(ctx, &p, NULL), want, msg[i]);
    }
    tk_rotary_params p = ok;
    p.cos = p.sin = tab, p.table_rows = 0, p.positions = pos;
    ck_assert_int_eq(tk_rotary(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "rows are positions"));
    p.positions = NULL, p.table_rows = 3, p.style = TK_ROTARY_GPTJ;
    ck_assert_int_eq(tk_rotary(ctx, &p, NULL), TK_ERR_UNSUPPORTED);
    ck_assert_int_eq(tk_rotary(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_rotary(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    p = ok, p.seq = 0;
    ck_assert_int_eq(tk_rotary_prepare(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- cases -------------------------------------------------------------- */
typedef struct rcase {
    tk_dtype dt;
    int style, D, rd, tables, positions, inverse, in_place, bnhd;
    int64_t B, N, Hq, Hk; /* Hk 0: q only */
} rcase;

static const rcase cases[] = {
    {TK_BF16, TK_ROTARY_NEOX, 128, 128, 0, 0, 0, 0, 0, 2, 17, 3, 1},
    {TK_BF16, TK_ROTARY_NEOX, 64, 64, 0, 1, 0, 1, 0, 1, 1, 8, 2},
    {TK_F16, TK_ROTARY_GPTJ, 128, 128, 0, 1, 0, 0, 1, 2, 100, 9, 3},
    {TK_BF16, TK_ROTARY_GPTJ, 256, 128, 0, 0, 0, 1, 0, 1, 33, 2, 0},
    {TK_F16, TK_ROTARY_NEOX, 128, 64, 1, 0, 1, 0, 1, 3, 50, 4, 4},
    {TK_BF16, TK_ROTARY_NEOX, 256, 256, 0, 1, 1, 0, 0, 1, 70, 5, 2},
    {TK_BF16, TK_ROTARY_GPTJ, 64, 32, 0, 0, 1, 0, 0, 1, 16, 16, 8},
    {TK_F16, TK_ROTARY_NEOX, 128, 96, 0, 1, 0, 1, 0, 2, 129, 1, 1},
    {TK_BF16, TK_ROTARY_GPTJ, 128, 100, 0, 0, 0, 0, 0, 1, 7, 3, 0},
    {TK_BF16, TK_ROTARY_NEOX, 64, 20, 1, 0, 1, 1, 1, 2, 40, 2, 1},
    {TK_BF16, TK_ROTARY_NEOX, 128, 128, 1, 1, 0, 0, 0, 2, 33, 4, 2},
    {TK_F16, TK_ROTARY_NEOX, 64, 48, 1, 1, 1, 1, 1, 1, 70, 3, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void label(const rcase *c, char *buf, size_t n) {
    snprintf(buf, n, "%s %s D%d rd%d B%lld N%lld H%lld/%lld%s%s%s%s%s", c->style ? "gptj" : "neox",
             tk_dtype_name(c->dt), c->D, c->rd, (long long)c->B, (long long)c->N, (long long)c->Hq,
             (long long)c->Hk, c->tables ? " tables" : "", c->positions ? " pos" : "",
             c->inverse ? " inv" : "", c->in_place ? " inplace" : "", c->bnhd ? " bnhd" : "");
}

/* Host buffers: inputs (x: q then k), outputs, tables, positions. */
typedef struct rbufs {
    ref_tensor x[2], out[2], cos, sin, pos;
} rbufs;

static ref_tensor qk_tensor(const rcase *c, int64_t H) {
    const int64_t d[4] = {c->B, H, c->N, c->D};
    static const int perm[4] = {0, 2, 1, 3};
    return c->bnhd ? ref_tensor_new_layout(c->dt, 4, d, perm, 8) : ref_tensor_new(c->dt, 4, d);
}

static void bufs_make(rbufs *b, const rcase *c) {
    memset(b, 0, sizeof *b);
    int64_t H[2] = {c->Hq, c->Hk};
    for (int i = 0; i < 2 && H[i]; i++) {
        b->x[i] = qk_tensor(c, H[i]);
        ref_tensor_fill_all(&b->x[i], 7.0); /* the gaps */
        ref_tensor_random(&b->x[i], -2.0, 2.0);
        if (c->in_place) continue;
        b->out[i] = qk_tensor(c, H[i]);
        ref_tensor_fill_all(&b->out[i], NAN);
    }
    if (c->tables) {
        int64_t rows = c->N + ref_randint(0, 5), d[2] = {rows, c->rd / 2};
        b->cos = ref_tensor_new(TK_F32, 2, d), b->sin = ref_tensor_new(TK_F32, 2, d);
        for (int64_t r = 0; r < rows; r++)
            for (int i = 0; i < c->rd / 2; i++) { /* a scaled base: not what base mode gives */
                double th = 0.5 * (double)r * pow(500.0, -2.0 * i / c->rd);
                ref_tensor_set(&b->cos, r * (c->rd / 2) + i, cos(th));
                ref_tensor_set(&b->sin, r * (c->rd / 2) + i, sin(th));
            }
    }
    if (c->positions) {
        int64_t d[2] = {c->B, c->N};
        b->pos = ref_tensor_new(TK_I32, 2, d);
        /* with tables, rows of the table (a few past its end: they read 0) */
        int64_t top = c->tables ? b->cos.dims[0] + 1 : 5000;
        for (int64_t i = 0; i < c->B * c->N; i++) ref_tensor_set(&b->pos, i, ref_randint(0, top));
    }
}

static void bufs_free(rbufs *b) {
    ref_tensor *all[] = {&b->x[0], &b->x[1], &b->out[0], &b->out[1], &b->cos, &b->sin, &b->pos};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) ref_tensor_free(all[i]);
}

static void strides_of(const ref_tensor *t, bool bnhd, int64_t st[4]) {
    for (int d = 0; d < 4; d++) st[d] = bnhd ? t->strides[d] : 0;
}

/* tk_rotary_params over host buffers: from src into dst (either may be
 * the other's x or out), direction `inverse`. */
static tk_rotary_params params(const rcase *c, rbufs *b, ref_tensor src[2], ref_tensor dst[2],
                               int inverse) {
    tk_rotary_params p = TK_ROTARY_PARAMS_INIT;
    p.dtype = c->dt, p.style = c->style, p.head_dim = c->D, p.rotary_dim = c->rd;
    p.inverse = inverse, p.batch = c->B, p.seq = c->N, p.heads_q = c->Hq, p.heads_k = c->Hk;
    p.q = src[0].data, p.q_out = dst[0].data;
    strides_of(&src[0], c->bnhd, p.q_strides), strides_of(&dst[0], c->bnhd, p.q_out_strides);
    if (c->Hk) {
        p.k = src[1].data, p.k_out = dst[1].data;
        strides_of(&src[1], c->bnhd, p.k_strides), strides_of(&dst[1], c->bnhd, p.k_out_strides);
    }
    if (c->tables) p.cos = b->cos.data, p.sin = b->sin.data, p.table_rows = b->cos.dims[0];
    if (c->positions) p.positions = b->pos.data;
    return p;
}

/* Float64: ref = the rotation of x (dense [B, H, N, D]). */
static double *reference(const rcase *c, const rbufs *b, const ref_tensor *x, int inverse) {
    double *in = ref_tensor_to_f64(x), *o = malloc(sizeof(double) * (size_t)ref_tensor_count(x));
    memcpy(o, in, sizeof(double) * (size_t)ref_tensor_count(x));
    int64_t H = x->dims[1], half = c->rd / 2;
    for (int64_t bb = 0; bb < c->B; bb++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t n = 0; n < c->N; n++) {
                double *row = o + ((bb * H + h) * c->N + n) * c->D;
                const double *xr = in + ((bb * H + h) * c->N + n) * c->D;
                double pos = c->positions ? ref_tensor_get(&b->pos, bb * c->N + n) : (double)n;
                for (int64_t i = 0; i < half; i++) {
                    double cs, sn;
                    if (c->tables) { /* row pos; past the table: 0 */
                        int64_t t = (int64_t)pos;
                        bool row_in = t < b->cos.dims[0];
                        cs = row_in ? ref_tensor_get(&b->cos, t * half + i) : 0.0;
                        sn = row_in ? ref_tensor_get(&b->sin, t * half + i) : 0.0;
                    } else {
                        double th = pos * pow(BASE, -2.0 * (double)i / c->rd);
                        cs = cos(th), sn = sin(th);
                    }
                    if (inverse) sn = -sn;
                    int64_t ia = c->style ? 2 * i : i, ib = c->style ? 2 * i + 1 : i + half;
                    row[ia] = xr[ia] * cs - xr[ib] * sn;
                    row[ib] = xr[ib] * cs + xr[ia] * sn;
                }
            }
    free(in);
    return o;
}

static tk_kernel *build(tk_ctx *ctx, const tk_rotary_config *cfg) {
    tk_kernel *k = NULL;
    ck_assert_msg(tk_rotary_build(ctx, cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

/* Runs every launch of p on the interpreter. */
static void interp(tk_ctx *ctx, const tk_rotary_params *p, int expect) {
    tk_rotary_launch l[2];
    ck_assert_int_eq(tk_rotary_launches(p, l), expect);
    for (int i = 0; i < expect; i++) {
        tk_kernel *k = build(ctx, &l[i].cfg);
        ck_assert_msg(tk_interp_run(k, l[i].n, l[i].args) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
}

static ref_tensor copy_of(const ref_tensor *t) {
    ref_tensor c = *t;
    c.data = ref_tensor_snapshot(t);
    return c;
}

/* What a round trip gives back: the input, except where a token's
 * position is past the tables, whose rotated columns read cos = sin = 0
 * both ways (x: [B, H, N, D] as ref_tensor_to_f64 lays it out). */
static void past_the_table(const rcase *c, const rbufs *b, const ref_tensor *t, double *x) {
    if (!c->tables || !c->positions) return;
    int64_t H = t->dims[1];
    for (int64_t bb = 0; bb < c->B; bb++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t n = 0; n < c->N; n++)
                if (ref_tensor_get(&b->pos, bb * c->N + n) >= (double)b->cos.dims[0])
                    for (int64_t d = 0; d < c->rd; d++) x[((bb * H + h) * c->N + n) * c->D + d] = 0;
}

/* The case's direction against float64, then the other direction applied
 * to that result, which must give the input back. */
START_TEST(interp_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    const rcase *c = &cases[_i];
    rbufs b;
    bufs_make(&b, c);
    int nt = c->Hk ? 2 : 1;
    ref_tensor orig[2] = {{0}}, *dst = c->in_place ? b.x : b.out;
    void *gaps[2] = {NULL};
    for (int i = 0; i < nt; i++) orig[i] = copy_of(&b.x[i]), gaps[i] = ref_tensor_snapshot(&dst[i]);
    tk_rotary_params p = params(c, &b, b.x, dst, c->inverse);
    interp(ctx, &p, nt);
    char name[128];
    label(c, name, sizeof name);
    double tol = c->dt == TK_BF16 ? 1e-2 : 2e-3, e[2] = {0}, back[2] = {0};
    for (int i = 0; i < nt; i++) {
        double *ref = reference(c, &b, &orig[i], c->inverse);
        e[i] = ref_tensor_rel_err(&dst[i], ref);
        ck_assert_msg(ref_tensor_stray_writes(&dst[i], gaps[i]) == 0, "%s: stray writes", name);
        free(ref);
    }
    /* back: dst rotated the other way, in place (into dst itself) */
    tk_rotary_params r = params(c, &b, dst, dst, !c->inverse);
    interp(ctx, &r, nt);
    for (int i = 0; i < nt; i++) {
        double *x0 = ref_tensor_to_f64(&orig[i]);
        past_the_table(c, &b, &orig[i], x0);
        back[i] = ref_tensor_rel_err(&dst[i], x0);
        free(x0), free(gaps[i]);
        free(orig[i].data);
    }
    printf("rotary interp %s: rel err q %.2e k %.2e, rotated back q %.2e k %.2e\n", name, e[0],
           e[1], back[0], back[1]);
    ck_assert_msg(e[0] <= tol && e[1] <= tol, "%s: q %g k %g", name, e[0], e[1]);
    ck_assert_msg(back[0] <= 2 * tol && back[1] <= 2 * tol, "%s: back %g %g", name, back[0],
                  back[1]);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

/* A launch's arguments as host tensors (matched by data pointer). */
static void launch_refs(const tk_rotary_launch *l, rbufs *b, ref_tensor *t, tk_arg *s) {
    ref_tensor *all[] = {&b->x[0], &b->x[1], &b->out[0], &b->out[1], &b->cos, &b->sin, &b->pos};
    for (int i = 0; i < l->n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        s[i] = l->args[i];
        if (l->args[i].kind != TK_KIND_GVIEW) continue;
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            if (all[j]->data && all[j]->data == l->args[i].data) t[i] = *all[j];
    }
}

/* Each launch on the GPU against the interpreter, same inputs. */
START_TEST(gpu_against_interp) {
    tk_ctx *ctx = th_gpu_ctx();
    if (!ctx) return;
    const rcase *c = &cases[_i];
    rbufs b;
    bufs_make(&b, c);
    tk_rotary_params p = params(c, &b, b.x, c->in_place ? b.x : b.out, c->inverse);
    tk_rotary_launch l[2];
    int n = tk_rotary_launches(&p, l);
    double err[2] = {0};
    for (int i = 0; i < n; i++) {
        ref_tensor t[TK_ROTARY_MAX_ARGS];
        tk_arg s[TK_ROTARY_MAX_ARGS];
        launch_refs(&l[i], &b, t, s);
        tk_kernel *k = build(ctx, &l[i].cfg);
        ck_assert_msg(th_compare(ctx, k, l[i].n, t, s, &err[i]) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    char name[128];
    label(c, name, sizeof name);
    printf("rotary gpu %s: rel err against the interpreter q %.2e k %.2e\n", name, err[0], err[1]);
    ck_assert_msg(err[0] <= 1e-2 && err[1] <= 1e-2, "%s", name);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rotary");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_params);
    tc = tu_tcase(s, "interp", 300);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tc = tu_tcase(s, "gpu", 300);
    tcase_add_loop_test(tc, gpu_against_interp, 0, NCASES);
    return run_suite(s);
}
