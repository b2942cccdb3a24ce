/* The Hedgehog backward's dΦ kernel (TK_HEDGEHOG_BWD_DPHI,
 * kernels/hedgehog_dphi.c, built through tk_hh_build_dphi): the config
 * checks with their messages, the library's choices (f_cols, warps) and its
 * shared memory formula; on the interpreter, against a float64 reference
 * (φ in double from the same rounded inputs and weights) at ragged token
 * counts over several chunks, both head dims and dtypes, each C side, bias
 * or not, shared and per-head weights, value dims not a multiple of 16 and
 * up to 250, other f_cols and warps, and time-reversed views (negative
 * token strides, as the run code passes for dφk); the race checker on,
 * twice with the warps shuffled, and no writes between dPhi's rows. Each
 * case also runs with the maps apart (phi = 1: φᵀ from TK_HEDGEHOG_MAP of
 * the same U, reversed where the case is): the same bits. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hedgehog_parts.h"
#include "tk/tk.h"
#include "tk/tk_kernels.h"
#include "util/ref.h"
#include "util/ref_hedgehog.h"
#include "util/run.h"

static tk_hedgehog_config dphi_config(tk_dtype dt, int D, int v_cols) {
    return (tk_hedgehog_config){
        .dtype = dt, .head_dim = D, .v_cols = v_cols, .part = TK_HEDGEHOG_BWD_DPHI};
}

/* ---- the config checks -------------------------------------------------- */
START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        int field, v; /* which field gets v (0: dtype f32) */
        const char *msg;
    } bad[] = {
        {0, 0, "dtype is f32; expected TK_BF16 or TK_F16"},
        {1, 96, "head_dim is 96; expected 64 or 128"},
        {2, 2, "bias is 2; expected 0 or 1"},
        {3, 0, "v_cols is 0; expected a multiple of 16 in 16 .. 256"},
        {3, 24, "v_cols is 24"},
        {3, 272, "v_cols is 272"},
        {4, 24, "f_cols is 24; expected 0 or a multiple of 16 dividing 2·head_dim"},
        {4, 256, "f_cols is 256"}, /* head_dim 64: F = 128 */
        {4, -16, "f_cols is -16"},
        {5, 3, "c_side is 3; expected 0, 1 or 2"},
        {5, -1, "c_side is -1"},
        {6, 3, "warps is 3; expected 0, 1, 2, 4 or 8"},
        {7, 2, "phi is 2; expected 0 or 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tk_hedgehog_config c = dphi_config(TK_BF16, 64, 64);
        int v = bad[i].v;
        switch (bad[i].field) {
        case 0: c.dtype = TK_F32; break;
        case 1: c.head_dim = v; break;
        case 2: c.bias = v; break;
        case 3: c.v_cols = v; break;
        case 4: c.f_cols = v; break;
        case 5: c.c_side = v; break;
        case 6: c.warps = v; break;
        default: c.phi = v; break;
        }
        tk_kernel *k = (tk_kernel *)1;
        ck_assert_int_eq(tk_hh_build_dphi(ctx, &c, &k), TK_ERR_INVALID_ARG);
        ck_assert_ptr_eq(k, (tk_kernel *)1); /* untouched on failure */
        ck_assert_msg(strstr(tk_ctx_error(ctx), "tk_hedgehog_build: ") == tk_ctx_error(ctx) &&
                          strstr(tk_ctx_error(ctx), bad[i].msg),
                      "%zu: %s", i, tk_ctx_error(ctx));
    }
    /* too big for a block: 8 warps of 256 values at D 128 at any f_cols; a
     * state of 256 features x 256 values in one warp */
    tk_hedgehog_config big = dphi_config(TK_BF16, 128, 256), wide = big;
    big.warps = 8;
    wide.warps = 1, wide.f_cols = 256;
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_hh_build_dphi(ctx, &big, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "bytes of shared memory; a block has at most"), "%s",
                  tk_ctx_error(ctx));
    ck_assert_int_eq(tk_hh_build_dphi(ctx, &wide, &k), TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), "registers of state a thread; at most 128"), "%s",
                  tk_ctx_error(ctx));
    ck_assert_ptr_null(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The library's f_cols (the most whose state fits 64 registers a thread)
 * and warps; the kernel's name; tk_hh_dphi_smem_bytes is what it takes,
 * with phi too (no W, U or b tiles; the block's rows of φᵀ alone). */
START_TEST(resolve_and_smem) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    static const struct {
        int D, v_cols, warps, f_cols, c_side, bias, want_f, want_w;
    } cs[] = {
        {64, 64, 0, 0, 1, 1, 128, 4},  {128, 128, 0, 0, 2, 1, 64, 4}, {128, 256, 0, 0, 0, 0, 32, 4},
        {128, 16, 0, 0, 1, 0, 256, 4}, {64, 48, 2, 0, 2, 0, 64, 2},   {128, 32, 8, 16, 0, 1, 16, 8},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tk_hedgehog_config c = dphi_config(TK_F16, cs[i].D, cs[i].v_cols);
        c.warps = cs[i].warps, c.f_cols = cs[i].f_cols, c.c_side = cs[i].c_side;
        c.bias = cs[i].bias;
        for (int phi = 0; phi < 2; phi++) {
            c.phi = phi;
            tk_hedgehog_config r = tk_hh_dphi_resolve(&c);
            ck_assert_msg(r.f_cols == cs[i].want_f && r.warps == cs[i].want_w,
                          "%zu phi %d: f_cols %d warps %d", i, phi, r.f_cols, r.warps);
            tk_kernel *k = NULL;
            ck_assert_msg(tk_hh_build_dphi(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
            ck_assert_uint_eq(tk_kernel_smem_bytes(k), tk_hh_dphi_smem_bytes(&r));
            ck_assert_uint_le(tk_kernel_smem_bytes(k), TK_HEDGEHOG_SMEM_MAX);
            tk_kernel_destroy(k);
        }
        /* phi drops W, U, φᵀ [F, C] and b, and keeps the block's rows of φᵀ */
        tk_hedgehog_config r = tk_hh_dphi_resolve(&c), r0 = r, r1 = r;
        r0.phi = 0, r1.phi = 1;
        size_t D = (size_t)r.head_dim, C = 16 * (size_t)r.warps, FC = (size_t)r.f_cols;
        size_t dropped = D * D + C * D + 2 * D * C + (r.bias ? 16 * D : 0) - FC * C;
        ck_assert_uint_eq(tk_hh_dphi_smem_bytes(&r0) - tk_hh_dphi_smem_bytes(&r1), 2 * dropped);
    }
    tk_hedgehog_config c = dphi_config(TK_BF16, 128, 128);
    c.c_side = 1, c.bias = 1;
    tk_kernel *k = NULL;
    ck_assert_msg(tk_hh_build_dphi(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_str_eq(tk_kernel_name(k), "tk_hedgehog_dphi_bf16_d128_v128_f64_w4_cx_bias");
    tk_kernel_destroy(k);
    c.phi = 1; /* the bias is MAP's then */
    ck_assert_msg(tk_hh_build_dphi(ctx, &c, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_str_eq(tk_kernel_name(k), "tk_hedgehog_dphi_bf16_d128_v128_f64_w4_cx_phi");
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- cases -------------------------------------------------------------- */
typedef struct dcase {
    tk_dtype dt;
    int D, c_side, bias, per_head, v_cols, f_cols, warps;
    int64_t B, H, T, Dv;
    int reversed; /* every token-indexed tensor passed time-reversed */
} dcase;

/* dt, D, c_side, bias, per-head W, v_cols, f_cols, warps, B, H, T, Dv,
 * reversed. Chunks of 16·warps tokens (default 4 warps: 64); f_cols 0:
 * the library's (D 64, v_cols 64: 128; D 128, v_cols 128: 64). */
static const dcase cases[] = {
    {TK_BF16, 64, 1, 1, 0, 64, 0, 0, 1, 2, 150, 64, 0},
    {TK_F16, 128, 2, 1, 1, 128, 0, 0, 1, 2, 100, 128, 0},
    {TK_BF16, 128, 0, 0, 0, 48, 32, 2, 2, 1, 37, 40, 0},
    {TK_BF16, 64, 2, 0, 1, 256, 0, 4, 1, 1, 70, 248, 0},
    {TK_F16, 64, 1, 0, 0, 16, 0, 1, 1, 1, 1, 16, 0},
    {TK_BF16, 128, 1, 1, 0, 32, 0, 8, 1, 1, 300, 24, 0},
    {TK_F16, 64, 0, 1, 0, 80, 16, 4, 1, 2, 130, 80, 0}, /* one slab in 5 pieces of 16 values */
    {TK_BF16, 64, 2, 1, 0, 16, 32, 4, 1, 1, 90, 16, 0}, /* fewer pieces and slabs than warps */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* Every token-indexed tensor time-reversed (the interpreter addresses them
 * at negative offsets from the views' data pointers). */
static const dcase rev_cases[] = {
    {TK_BF16, 64, 2, 1, 0, 64, 0, 0, 1, 2, 150, 64, 1},
    {TK_F16, 128, 1, 0, 1, 48, 64, 4, 1, 2, 90, 48, 1},
    {TK_BF16, 128, 0, 1, 1, 112, 32, 2, 1, 2, 77, 104, 1}, /* 7 pieces a slab */
};
#define NREV (int)(sizeof rev_cases / sizeof rev_cases[0])

typedef struct dbufs {
    ref_tensor x, y, c, u, w, bias, out; /* c: CX or CY [B, H, T] f32 */
} dbufs;

static void bufs_make(dbufs *b, const dcase *c) {
    int64_t dx[4] = {c->B, c->H, c->T, c->Dv}, du[4] = {c->B, c->H, c->T, c->D};
    int64_t dc[3] = {c->B, c->H, c->T}, dout[4] = {c->B, c->H, c->T, 2 * c->D};
    int64_t hw = c->per_head ? c->H : 1, dw[3] = {hw, c->D, c->D}, db[2] = {hw, c->D};
    b->x = ref_tensor_new(c->dt, 4, dx), b->y = ref_tensor_new(c->dt, 4, dx);
    b->c = ref_tensor_new(TK_F32, 3, dc), b->u = ref_tensor_new(c->dt, 4, du);
    b->w = ref_tensor_new(c->dt, 3, dw), b->bias = ref_tensor_new(c->dt, 2, db);
    b->out = ref_tensor_new_layout(TK_F32, 4, dout, NULL, 8); /* gaps: stray writes show */
    ref_tensor_random(&b->x, -1.0, 1.0), ref_tensor_random(&b->y, -1.0, 1.0);
    ref_tensor_random(&b->c, -2.0, 2.0), ref_tensor_random(&b->u, -1.0, 1.0);
    /* y's spread about 1: softmaxes neither flat nor one-hot */
    double ws = 2.0 / sqrt((double)c->D);
    ref_tensor_random(&b->w, -ws, ws), ref_tensor_random(&b->bias, -0.5, 0.5);
    ref_tensor_fill_all(&b->out, NAN);
}

static void bufs_free(dbufs *b) {
    ref_tensor *all[] = {&b->x, &b->y, &b->c, &b->u, &b->w, &b->bias, &b->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ref_tensor_free(all[i]);
}

/* The logical tokens of t (memory order) reversed per (b, h), in place:
 * what a time-reversed view of it reads. n rows of `inner` values. */
static void flip_tokens(double *a, int64_t bh, int64_t T, int64_t inner) {
    for (int64_t s = 0; s < bh; s++)
        for (int64_t i = 0, j = T - 1; i < j; i++, j--)
            for (int64_t d = 0; d < inner; d++) {
                double *p = a + (s * T + i) * inner + d, *q = a + (s * T + j) * inner + d, t = *p;
                *p = *q, *q = t;
            }
}

/* t's elements as the kernel sees them: reversed in time or not. */
static double *logical(const dcase *c, const ref_tensor *t) {
    double *a = ref_tensor_to_f64(t);
    if (c->reversed) flip_tokens(a, c->B * c->H, c->T, t->rank == 4 ? t->dims[3] : 1);
    return a;
}

/* The view the kernel gets: t itself, or t time-reversed (data at row
 * T - 1, a negative token stride). */
static tk_arg arg_of(const dcase *c, const ref_tensor *t) {
    tk_arg a = ref_tensor_arg(t);
    if (!c->reversed || t->rank < 3) return a;
    a.data = (char *)t->data + (t->dims[2] - 1) * t->strides[2] * (int64_t)tk_dtype_size(t->dt);
    a.strides[2] = -t->strides[2];
    return a;
}

/* Float64, token by token: S += φ_i y_iᵀ, z1 += φ_i, zc += cy_i φ_i, then
 * dPhi_i = S x_i + cx_i z1 + zc (j <= i). ref [B, H, T, F], logical order. */
static void reference(const dcase *c, const dbufs *b, double *ref) {
    double *x = logical(c, &b->x), *y = logical(c, &b->y), *cc = logical(c, &b->c);
    double *u = logical(c, &b->u), *w = ref_tensor_to_f64(&b->w), *bb = ref_tensor_to_f64(&b->bias);
    int D = c->D, F = 2 * D;
    int64_t Dv = c->Dv, T = c->T;
    double *S = malloc(sizeof(double) * (size_t)(F * Dv)), *z1 = malloc(sizeof(double) * F);
    double *zc = malloc(sizeof(double) * F), *phi = malloc(sizeof(double) * F);
    for (int64_t bh = 0; bh < c->B * c->H; bh++) {
        int64_t hw = c->per_head ? bh % c->H : 0;
        memset(S, 0, sizeof(double) * (size_t)(F * Dv));
        memset(z1, 0, sizeof(double) * F), memset(zc, 0, sizeof(double) * F);
        for (int64_t i = 0; i < T; i++) {
            const double *xi = x + (bh * T + i) * Dv, *yi = y + (bh * T + i) * Dv;
            double ci = cc[bh * T + i];
            ref_hedgehog_phi(u + (bh * T + i) * D, w + hw * D * D, c->bias ? bb + hw * D : NULL, D,
                             phi);
            for (int f = 0; f < F; f++) {
                z1[f] += phi[f];
                zc[f] += c->c_side == 2 ? ci * phi[f] : 0;
                double o = c->c_side == 1 ? ci * z1[f] : zc[f];
                for (int64_t d = 0; d < Dv; d++) {
                    S[f * Dv + d] += phi[f] * yi[d];
                    o += xi[d] * S[f * Dv + d];
                }
                ref[(bh * T + i) * F + f] = o;
            }
        }
    }
    free(S), free(z1), free(zc), free(phi);
    free(x), free(y), free(cc), free(u), free(w), free(bb);
}

static tk_hedgehog_config config_of(const dcase *c) {
    tk_hedgehog_config cfg = dphi_config(c->dt, c->D, c->v_cols);
    cfg.bias = c->bias, cfg.f_cols = c->f_cols, cfg.warps = c->warps, cfg.c_side = c->c_side;
    return cfg;
}

/* X, Y, [CX | CY], U, Wu, [Bu], dPhi */
static int args_of(const dcase *c, const dbufs *b, tk_arg *args) {
    int n = 0;
    args[n++] = arg_of(c, &b->x), args[n++] = arg_of(c, &b->y);
    if (c->c_side) args[n++] = arg_of(c, &b->c);
    args[n++] = arg_of(c, &b->u), args[n++] = ref_tensor_arg(&b->w);
    if (c->bias) args[n++] = ref_tensor_arg(&b->bias);
    args[n++] = arg_of(c, &b->out);
    return n;
}

/* cfg's kernel, built and run on args on the interpreter. */
static void run_kernel(tk_ctx *ctx, const tk_hedgehog_config *cfg, int n, const tk_arg *args) {
    tk_kernel *k = NULL;
    ck_assert_msg(tk_hedgehog_build(ctx, cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_interp_run(k, n, args) == TK_OK, "%s: %s", tk_kernel_name(k),
                  tk_ctx_error(ctx));
    tk_kernel_destroy(k);
}

/* The maps apart: MAP (4 warps, as the run code's) of the case's U view
 * into PU [B, H, F, Tp] (poisoned first), then DPHI with phi reading it
 * into a second dPhi: every byte as b's out, the gaps included (both
 * poisoned alike). */
static void phi_same_bits(tk_ctx *ctx, const dcase *c, const dbufs *b) {
    int64_t tp = (c->T + 127) / 128 * 128, dp[4] = {c->B, c->H, 2 * c->D, tp};
    ref_tensor pu = ref_tensor_new(c->dt, 4, dp);
    ref_tensor out = ref_tensor_new_layout(TK_F32, 4, b->out.dims, NULL, 8);
    ref_tensor_fill_all(&pu, NAN), ref_tensor_fill_all(&out, NAN);
    tk_hedgehog_config map = {
        .dtype = c->dt, .head_dim = c->D, .bias = c->bias, .warps = 4, .part = TK_HEDGEHOG_MAP};
    tk_arg args[8];
    int n = 0;
    args[n++] = arg_of(c, &b->u), args[n++] = ref_tensor_arg(&b->w);
    if (c->bias) args[n++] = ref_tensor_arg(&b->bias);
    args[n++] = ref_tensor_arg(&pu);
    run_kernel(ctx, &map, n, args);
    tk_hedgehog_config cfg = config_of(c);
    cfg.phi = 1;
    n = 0;
    args[n++] = arg_of(c, &b->x), args[n++] = arg_of(c, &b->y);
    if (c->c_side) args[n++] = arg_of(c, &b->c);
    args[n++] = ref_tensor_arg(&pu), args[n++] = arg_of(c, &out);
    run_kernel(ctx, &cfg, n, args);
    ck_assert_int_eq(out.elems, b->out.elems);
    ck_assert_msg(!memcmp(out.data, b->out.data, (size_t)out.elems * 4),
                  "phi: dPhi differs from the fused map's");
    ref_tensor_free(&pu), ref_tensor_free(&out);
}

static void run_case(const dcase *c, uint64_t shuffle) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_interp_options opts;
    ck_assert_int_eq(tk_interp_get_options(ctx, &opts), TK_OK);
    opts.race_check = 1, opts.shuffle_seed = shuffle;
    ck_assert_int_eq(tk_interp_set_options(ctx, &opts), TK_OK);
    dbufs b;
    bufs_make(&b, c);
    tk_hedgehog_config cfg = config_of(c);
    tk_kernel *k = NULL;
    ck_assert_msg(tk_hh_build_dphi(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
    void *gaps = ref_tensor_snapshot(&b.out);
    tk_arg args[8];
    int n = args_of(c, &b, args);
    ck_assert_msg(tk_interp_run(k, n, args) == TK_OK, "%s", tk_ctx_error(ctx));
    int64_t count = ref_tensor_count(&b.out);
    double *ref = malloc(sizeof(double) * (size_t)count), *out = logical(c, &b.out);
    reference(c, &b, ref);
    double e = ref_rel_err(out, ref, count);
    printf("hedgehog dphi %s: err %.2e\n", tk_kernel_name(k), e);
    printf("  B%lld H%lld T%lld Dv%lld Hw%s%s%s\n", (long long)c->B, (long long)c->H,
           (long long)c->T, (long long)c->Dv, c->per_head ? "=H" : "=1",
           c->reversed ? " reversed" : "", shuffle ? " shuffled warps" : "");
    ck_assert_msg(e <= (c->dt == TK_BF16 ? 1e-2 : 3e-3), "rel err %.3e", e); /* NaN fails */
    ck_assert_int_eq(ref_tensor_stray_writes(&b.out, gaps), 0);
    phi_same_bits(ctx, c, &b);
    printf("  phi: the same bits\n");
    free(ref), free(out), free(gaps);
    tk_kernel_destroy(k);
    bufs_free(&b);
    tk_ctx_destroy(ctx);
}

START_TEST(dphi_interp_against_f64) { run_case(&cases[_i], 0); }
END_TEST

START_TEST(dphi_interp_reversed) { run_case(&rev_cases[_i], 0); }
END_TEST

/* The warps one after another in a drawn order between block-wide ops:
 * the result must not depend on it (4 and 8 warps). */
START_TEST(dphi_interp_shuffled) { run_case(&cases[_i ? 5 : 0], 0x9e3779b97f4a7c15ULL + _i); }
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("hedgehog_dphi");
    TCase *t = tu_tcase(s, "checks", 0);
    tcase_add_test(t, bad_configs);
    tcase_add_test(t, resolve_and_smem);
    t = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(t, dphi_interp_against_f64, 0, NCASES);
    tcase_add_loop_test(t, dphi_interp_shuffled, 0, 2);
    t = tu_tcase(s, "reversed", 600);
    tcase_add_loop_test(t, dphi_interp_reversed, 0, NREV);
    return s;
}

int main(void) { return run_suite(suite()); }
