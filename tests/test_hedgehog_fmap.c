/* Hedgehog backward through the feature map (kernels/hedgehog_fmap.c,
 * called directly: tk_hh_build_fmap and tk_hh_build_reduce): on the
 * interpreter, BWD_FMAP then BWD_REDUCE (dW, and db with the bias) against
 * a float64 reference from the same rounded inputs (dU, dW, db), at ragged
 * token counts, with several chunks a block and several blocks a head (the
 * partial sums), blocks without chunks (their partials are zeros), both
 * head dims and dtypes, bias or not, shared (Hw = 1) or per-head weights,
 * and time reversed (a negative token stride for U, dΦ and dU); REDUCE
 * alone against a plain float64 sum, in its documented order bit for bit
 * (f32 out), and the same bits whatever order the warps run in; the config
 * checks and their messages. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hedgehog_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/ref.h"
#include "util/ref_hedgehog.h"
#include "util/run.h"

#define TOL 1e-2

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        tk_hedgehog_config c;
        const char *msg;
    } bad[] = {
        {{.dtype = TK_F32, .head_dim = 64}, "tk_hedgehog_build: dtype is f32; expected"},
        {{.dtype = TK_BF16, .head_dim = 96}, "tk_hedgehog_build: head_dim is 96; expected"},
        {{.dtype = TK_BF16, .head_dim = 64, .bias = 2}, "tk_hedgehog_build: bias is 2; expected"},
        {{.dtype = TK_F16, .head_dim = 64, .warps = 3}, "tk_hedgehog_build: warps is 3; expected"},
        {{.dtype = TK_BF16, .head_dim = 64, .warps = 1}, "warps is 1; expected 0 or 2, 4 or 8"},
        {{.dtype = TK_BF16, .head_dim = 128, .warps = 4}, "warps is 4; expected 0 or 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_kernel *k = (tk_kernel *)1;
        tk_hedgehog_config c = bad[i].c;
        c.part = TK_HEDGEHOG_BWD_FMAP;
        ck_assert_int_eq(tk_hh_build_fmap(ctx, &c, &k), TK_ERR_INVALID_ARG);
        ck_assert_ptr_eq(k, (tk_kernel *)1); /* *out only on success */
        ck_assert_msg(strstr(tk_ctx_error(ctx), bad[i].msg), "%s", tk_ctx_error(ctx));
    }
    tk_hedgehog_config r = {.dtype = TK_I32, .part = TK_HEDGEHOG_BWD_REDUCE};
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_hh_build_reduce(ctx, &r, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "tk_hedgehog_build: dtype is i32; the reduction"), "%s",
                  tk_ctx_error(ctx));
    ck_assert_ptr_null(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The defaults, the names, and tk_hh_fmap_smem_bytes (which the run code
 * sizes configurations by) is what the kernel allocates. */
START_TEST(resolve_and_smem) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        tk_hedgehog_config c;
        int warps;
        const char *name;
    } cs[] = {
        {{.dtype = TK_BF16, .head_dim = 64, .bias = 1}, 4, "tk_hedgehog_fmap_bf16_d64_w4_bias"},
        {{.dtype = TK_F16, .head_dim = 128}, 8, "tk_hedgehog_fmap_f16_d128_w8"},
        {{.dtype = TK_BF16, .head_dim = 64, .warps = 2}, 2, "tk_hedgehog_fmap_bf16_d64_w2"},
        {{.dtype = TK_BF16, .head_dim = 64, .bias = 1, .warps = 8},
         8,
         "tk_hedgehog_fmap_bf16_d64_w8_bias"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tk_hedgehog_config c = cs[i].c;
        c.part = TK_HEDGEHOG_BWD_FMAP;
        tk_kernel *k = NULL;
        ck_assert_msg(tk_hh_build_fmap(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_hedgehog_config r = tk_hh_fmap_resolve(&c);
        ck_assert_int_eq(r.warps, cs[i].warps);
        ck_assert_int_eq(tk_kernel_warps(k), cs[i].warps);
        ck_assert_str_eq(tk_kernel_name(k), cs[i].name);
        ck_assert_uint_eq(tk_kernel_smem_bytes(k), tk_hh_fmap_smem_bytes(&r));
        ck_assert_uint_le(tk_hh_fmap_smem_bytes(&r), TK_HEDGEHOG_SMEM_MAX);
        tk_kernel_destroy(k);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- FMAP then REDUCE ----------------------------------------------------- */
typedef struct fcase {
    tk_dtype dt;
    int D, bias, per_head, warps; /* warps 0: the default (D 64: 4, D 128: 8) */
    int64_t B, H, T, NS;
    int reversed;  /* U, dΦ and dU through views of negative token stride */
    double offset; /* dΦ = offset + uniform [-1, 1): a common part σ removes */
} fcase;

/* Chunks of 16·warps tokens; a block takes ceil(chunks / NS) of them. The
 * time-reversed cases last (a test case of their own). */
static const fcase cases[] = {
    {TK_BF16, 64, 1, 0, 0, 1, 2, 150, 2, 0, 0.0},  /* 3 chunks: runs of 2 and 1        */
    {TK_F16, 64, 0, 1, 2, 2, 2, 37, 1, 0, 0.0},    /* 2 chunks of 32, one block         */
    {TK_F16, 128, 0, 0, 8, 2, 1, 1, 1, 0, 0.0},    /* one token                         */
    {TK_BF16, 64, 1, 1, 8, 1, 3, 150, 4, 0, 0.0},  /* dW tiles [16, 32]; empty blocks   */
    {TK_BF16, 128, 0, 1, 8, 1, 2, 300, 2, 0, 0.0}, /* 3 chunks: runs of 2 and 1         */
    {TK_F16, 128, 1, 0, 0, 1, 2, 100, 3, 0, 2.0},  /* one chunk: two blocks without any */
    {TK_BF16, 64, 1, 1, 2, 1, 2, 700, 3, 0, 0.0},  /* 22 chunks: runs of 8, 8 and 6     */
    {TK_F16, 128, 1, 1, 0, 1, 2, 600, 2, 0, 0.0},  /* 5 chunks: runs of 3 and 2         */
    {TK_BF16, 64, 0, 1, 2, 1, 2, 37, 1, 1, 0.0},   /* reversed: 2 chunks of 32          */
    {TK_F16, 64, 1, 0, 4, 1, 1, 100, 1, 1, 3.0},   /* reversed, dΦ far from 0           */
    {TK_BF16, 128, 1, 1, 0, 1, 2, 100, 3, 1, 0.5}, /* reversed, blocks without chunks   */
    {TK_F16, 128, 1, 0, 0, 2, 1, 150, 1, 1, -1.0}, /* reversed, 2 chunks in one block   */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])
#define NFWD   8 /* the cases in forward time */

typedef struct fbufs {
    ref_tensor u, w, bu, dphi; /* inputs  */
    ref_tensor du, pw, pb;     /* FMAP's outputs */
    ref_tensor dw, db;         /* REDUCE's outputs: [Hw, D, D], [Hw, 1, D] */
} fbufs;

static int64_t hw_of(const fcase *c) { return c->per_head ? c->H : 1; }
static int warps_of(const fcase *c) {
    tk_hedgehog_config q = {.head_dim = c->D, .warps = c->warps};
    return tk_hh_fmap_resolve(&q).warps;
}

static void bufs_make(fbufs *f, const fcase *c) {
    int64_t D = c->D, hw = hw_of(c), n = c->B * c->NS;
    int64_t du[4] = {c->B, c->H, c->T, D}, dp[4] = {c->B, c->H, c->T, 2 * D};
    int64_t dw[3] = {hw, D, D}, db[2] = {hw, D}, pw[4] = {c->H, n, D, D}, pb[4] = {c->H, n, 1, D};
    int64_t ow[3] = {hw, D, D}, ob[3] = {hw, 1, D};
    f->u = ref_tensor_new(c->dt, 4, du);
    f->w = ref_tensor_new(c->dt, 3, dw);
    f->bu = ref_tensor_new(c->dt, 2, db);
    f->dphi = ref_tensor_new(TK_F32, 4, dp);
    f->du = ref_tensor_new_layout(c->dt, 4, du, NULL, 8); /* gaps between rows */
    f->pw = ref_tensor_new(TK_F32, 4, pw);
    f->pb = ref_tensor_new(TK_F32, 4, pb);
    f->dw = ref_tensor_new(c->dt, 3, ow);
    f->db = ref_tensor_new(c->dt, 3, ob);
    ref_tensor_random(&f->u, -1.0, 1.0);
    double ws = 2.0 / sqrt((double)D); /* y's spread about 1 */
    ref_tensor_random(&f->w, -ws, ws);
    ref_tensor_random(&f->bu, -0.5, 0.5);
    ref_tensor_random(&f->dphi, c->offset - 1.0, c->offset + 1.0);
    ref_tensor *out[] = {&f->du, &f->pw, &f->pb, &f->dw, &f->db};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) ref_tensor_fill_all(out[i], NAN);
}

static void bufs_free(fbufs *f) {
    ref_tensor *all[] = {&f->u, &f->w, &f->bu, &f->dphi, &f->du, &f->pw, &f->pb, &f->dw, &f->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* t as a kernel argument; reversed: token i is t's row T-1-i (the data
 * pointer at row T-1, a negative token stride). */
static tk_arg view_of(const ref_tensor *t, int reversed) {
    tk_arg a = ref_tensor_arg(t);
    if (reversed) {
        a.data = (char *)a.data + (t->dims[2] - 1) * t->strides[2] * (int64_t)tk_dtype_size(t->dt);
        a.strides[2] = -t->strides[2];
    }
    return a;
}

/* Float64 through ref_hedgehog_phi_bwd, token by token (rows in memory
 * order: reversal renames the tokens, the sums do not see it): du [B, H,
 * T, D], dw [Hw, D, D], db [Hw, D] (summed over the heads of each entry). */
static void reference(const fcase *c, const fbufs *f, double *du, double *dw, double *db) {
    int D = c->D;
    double *u = ref_tensor_to_f64(&f->u), *w = ref_tensor_to_f64(&f->w);
    double *bu = ref_tensor_to_f64(&f->bu), *dphi = ref_tensor_to_f64(&f->dphi);
    double *phi = malloc(sizeof(double) * 2 * (size_t)D);
    memset(dw, 0, sizeof(double) * (size_t)(hw_of(c) * D * D));
    memset(db, 0, sizeof(double) * (size_t)(hw_of(c) * D));
    for (int64_t bh = 0; bh < c->B * c->H; bh++) {
        int64_t e = (bh % c->H) % hw_of(c);
        const double *we = w + e * D * D, *be = c->bias ? bu + e * D : NULL;
        for (int64_t i = 0; i < c->T; i++) {
            int64_t r = bh * c->T + i;
            ref_hedgehog_phi(u + r * D, we, be, D, phi);
            ref_hedgehog_phi_bwd(u + r * D, we, phi, dphi + r * 2 * D, D, du + r * D,
                                 dw + e * D * D, db + e * D);
        }
    }
    free(u), free(w), free(bu), free(dphi), free(phi);
}

static tk_kernel *build_part(tk_ctx *ctx, tk_hedgehog_config cfg) {
    tk_kernel *k = NULL;
    tk_status s = cfg.part == TK_HEDGEHOG_BWD_FMAP ? tk_hh_build_fmap(ctx, &cfg, &k)
                                                   : tk_hh_build_reduce(ctx, &cfg, &k);
    ck_assert_msg(s == TK_OK, "%s", tk_ctx_error(ctx));
    return k;
}

static void run_fmap(tk_ctx *ctx, const fcase *c, fbufs *f) {
    tk_hedgehog_config cfg = {.dtype = c->dt,
                              .head_dim = c->D,
                              .bias = c->bias,
                              .warps = c->warps,
                              .part = TK_HEDGEHOG_BWD_FMAP};
    tk_kernel *k = build_part(ctx, cfg);
    tk_arg a[7];
    int n = 0;
    a[n++] = view_of(&f->u, c->reversed), a[n++] = ref_tensor_arg(&f->w);
    if (c->bias) a[n++] = ref_tensor_arg(&f->bu);
    a[n++] = view_of(&f->dphi, c->reversed), a[n++] = view_of(&f->du, c->reversed);
    a[n++] = ref_tensor_arg(&f->pw);
    if (c->bias) a[n++] = ref_tensor_arg(&f->pb);
    int64_t grid[3];
    ck_assert_int_eq(tk_kernel_grid(k, n, a, grid), TK_OK);
    ck_assert(grid[0] == c->NS && grid[1] == c->H && grid[2] == c->B);
    ck_assert_msg(tk_interp_run(k, n, a) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* Out = the ordered sums of P (REDUCE, Out's dtype). */
static void run_reduce(tk_ctx *ctx, const ref_tensor *p, ref_tensor *out) {
    tk_hedgehog_config cfg = {.dtype = out->dt, .part = TK_HEDGEHOG_BWD_REDUCE};
    tk_kernel *k = build_part(ctx, cfg);
    tk_arg a[2] = {ref_tensor_arg(p), ref_tensor_arg(out)};
    ck_assert_msg(tk_interp_run(k, 2, a) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* The partials of blocks past the last chunk are zeros (the others are
 * checked through REDUCE, which NaN would reach). */
static void check_empty_blocks(const fcase *c, const fbufs *f) {
    int64_t C = 16 * warps_of(c), chunks = (c->T + C - 1) / C;
    int64_t run = (chunks + c->NS - 1) / c->NS;
    int64_t per = (int64_t)c->D * c->D, n = c->B * c->NS;
    for (int64_t h = 0; h < c->H; h++)
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t s = 0; s < c->NS; s++) {
                if (s * run < chunks) continue;
                const float *pw = (const float *)f->pw.data + (h * n + b * c->NS + s) * per;
                for (int64_t i = 0; i < per; i++) ck_assert_float_eq(pw[i], 0.0f);
            }
}

START_TEST(fmap_interp_against_f64) {
    const fcase *c = &cases[_i];
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    fbufs f;
    bufs_make(&f, c);
    void *gaps = ref_tensor_snapshot(&f.du);
    run_fmap(ctx, c, &f);
    check_empty_blocks(c, &f);
    run_reduce(ctx, &f.pw, &f.dw);
    if (c->bias) run_reduce(ctx, &f.pb, &f.db);

    int64_t hw = hw_of(c), D = c->D;
    double *du = malloc(sizeof(double) * (size_t)ref_tensor_count(&f.du));
    double *dw = malloc(sizeof(double) * (size_t)(hw * D * D));
    double *db = malloc(sizeof(double) * (size_t)(hw * D));
    reference(c, &f, du, dw, db);
    double *got[3] = {ref_tensor_to_f64(&f.du), ref_tensor_to_f64(&f.dw), ref_tensor_to_f64(&f.db)};
    double e[3] = {ref_rel_err(got[0], du, ref_tensor_count(&f.du)),
                   ref_rel_err(got[1], dw, hw * D * D),
                   c->bias ? ref_rel_err(got[2], db, hw * D) : 0.0};
    printf("hedgehog fmap %s D%d w%d%s%s%s B%lld H%lld T%lld NS%lld: dU %.2e dW %.2e db %.2e\n",
           tk_dtype_name(c->dt), c->D, warps_of(c), c->bias ? " bias" : "",
           c->per_head ? " per-head" : "", c->reversed ? " reversed" : "", (long long)c->B,
           (long long)c->H, (long long)c->T, (long long)c->NS, e[0], e[1], e[2]);
    ck_assert_msg(e[0] <= TOL && e[1] <= TOL && e[2] <= TOL, "dU %.3e dW %.3e db %.3e", e[0], e[1],
                  e[2]); /* NaN fails */
    ck_assert_int_eq(ref_tensor_stray_writes(&f.du, gaps), 0);
    for (int i = 0; i < 3; i++) free(got[i]);
    free(du), free(dw), free(db), free(gaps);
    bufs_free(&f);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- REDUCE alone ------------------------------------------------------------- */
typedef struct rcase {
    tk_dtype dt; /* Out's */
    int64_t H, N, R, Cc, Hw;
} rcase;

static const rcase rcases[] = {
    {TK_BF16, 3, 5, 1, 64, 1},    /* db's shape, shared weights  */
    {TK_F16, 4, 3, 64, 64, 4},    /* dW's, per-head weights      */
    {TK_F32, 2, 19, 128, 128, 1}, /* more terms than warps       */
    {TK_BF16, 6, 2, 20, 40, 3},   /* ragged rows and columns     */
    {TK_F32, 5, 9, 1, 72, 2},     /* heads 0, 2, 4 and 1, 3      */
};
#define NRCASES (int)(sizeof rcases / sizeof rcases[0])

/* Out[e] in float64: Σ over heads h ≡ e (mod Hw), over n, of P[h, n]. */
static double *reduce_ref(const rcase *c, const ref_tensor *p) {
    int64_t per = c->R * c->Cc;
    double *pd = ref_tensor_to_f64(p), *o = calloc((size_t)(c->Hw * per), sizeof(double));
    for (int64_t h = 0; h < c->H; h++)
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t i = 0; i < per; i++)
                o[(h % c->Hw) * per + i] += pd[(h * c->N + n) * per + i];
    free(pd);
    return o;
}

/* Out[e] in f32 in the kernel's order: 8 warps, warp w adding terms w, w +
 * 8, ... (term x: head e + Hw·(x / N), n = x mod N) from 0, then the warps'
 * sums in warp order. */
static float reduce_ordered(const rcase *c, const float *p, int64_t e, int64_t i) {
    int64_t per = c->R * c->Cc, terms = ((c->H - e + c->Hw - 1) / c->Hw) * c->N;
    float o = 0.0f;
    for (int w = 0; w < 8; w++) {
        float s = 0.0f;
        for (int64_t x = w; x < terms; x += 8)
            s += p[((e + c->Hw * (x / c->N)) * c->N + x % c->N) * per + i];
        o = w ? o + s : s;
    }
    return o;
}

static void reduce_with_shuffle(tk_ctx *ctx, uint64_t seed, const ref_tensor *p, ref_tensor *out) {
    tk_interp_options o;
    ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
    o.shuffle_seed = seed;
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
    ref_tensor_fill_all(out, NAN);
    run_reduce(ctx, p, out);
}

START_TEST(reduce_interp) {
    const rcase *c = &rcases[_i];
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    int64_t dp[4] = {c->H, c->N, c->R, c->Cc}, dout[3] = {c->Hw, c->R, c->Cc};
    ref_tensor p = ref_tensor_new(TK_F32, 4, dp), out = ref_tensor_new(c->dt, 3, dout);
    ref_tensor_random(&p, -1.0, 1.0);
    reduce_with_shuffle(ctx, 0, &p, &out);
    double *want = reduce_ref(c, &p), *got = ref_tensor_to_f64(&out);
    double e = ref_rel_err(got, want, ref_tensor_count(&out));
    printf("hedgehog reduce %s H%lld N%lld R%lld Cc%lld Hw%lld: %.2e\n", tk_dtype_name(c->dt),
           (long long)c->H, (long long)c->N, (long long)c->R, (long long)c->Cc, (long long)c->Hw,
           e);
    ck_assert_msg(e <= TOL, "rel err %.3e", e);
    if (c->dt == TK_F32) { /* the documented order, bit for bit */
        const float *o = out.data;
        for (int64_t i = 0; i < ref_tensor_count(&out); i++) {
            float r = reduce_ordered(c, p.data, i / (c->R * c->Cc), i % (c->R * c->Cc));
            ck_assert_msg(o[i] == r, "element %lld: %a, expected %a", (long long)i, o[i], r);
        }
    }
    /* warps run one after another in two other orders: the same bits */
    void *first = ref_tensor_snapshot(&out);
    size_t bytes = (size_t)out.elems * tk_dtype_size(out.dt);
    for (uint64_t seed = 1; seed <= 2; seed++) {
        reduce_with_shuffle(ctx, seed, &p, &out);
        ck_assert_int_eq(memcmp(first, out.data, bytes), 0);
    }
    free(first), free(want), free(got);
    ref_tensor_free(&p), ref_tensor_free(&out);
    tk_ctx_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("hedgehog_fmap");
    TCase *t = tu_tcase(s, "checks", 0);
    tcase_add_test(t, bad_configs);
    tcase_add_test(t, resolve_and_smem);
    t = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(t, fmap_interp_against_f64, 0, NFWD);
    tcase_add_loop_test(t, reduce_interp, 0, NRCASES);
    t = tu_tcase(s, "reversed", 600);
    tcase_add_loop_test(t, fmap_interp_against_f64, NFWD, NCASES);
    return s;
}

int main(void) { return run_suite(suite()); }
