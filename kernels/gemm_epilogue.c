/* The GEMM's epilogue and A's layout (tk_gemm_config's fields after
 * `wgmma`): what a trainer's linear layers need around the product, fused so
 * that C is written once (kernels/gemm.c and gemm_hopper.c call these).
 *
 *   x = A·B [+ C (accumulate)] [+ bias]          in f32, in registers
 *   C = x | gelu(x) (Aux = x, rounded) | x·gelu'(Aux)
 *
 * Each piece works on the accumulator in slices of a few columns: C's old
 * values and GELU's temporaries then sit beside the 128 accumulator
 * registers a thread holds, never a second accumulator's worth.
 * Every option off leaves the kernels exactly as they were: nothing here is
 * called, no parameter or spec is added (tests/test_golden_ptx.c). */
#include <stdint.h>

#include "gemm_parts.h"
#include "tk/tk_run.h"

/* GELU's constants: √(2/π) and √(2/π)·0.044715 */
#define GELU_C0 0.7978845608028654f
#define GELU_C1 0.0356774081363001f

tk_mma_kind tk_gemm_mma_kind(const tk_gemm_config *c) {
    if (c->transpose_a) return c->transpose_b ? TK_MMA_ATBT : TK_MMA_ATB;
    return c->transpose_b ? TK_MMA_ABT : TK_MMA_AB;
}

bool tk_gemm_has_epilogue(const tk_gemm_config *c) {
    return c->bias || c->act || c->aux || c->accumulate;
}

void tk_gemm_epilogue_params(gemm *g) {
    const tk_gemm_config *c = g->c;
    g->bias = c->bias ? tk_param_tensor(g->k, "bias", c->out_dtype, 1) : NULL;
    g->aux = c->aux ? tk_param_tensor(g->k, "Aux", c->out_dtype, 2) : NULL;
}

static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }

/* gelu(x) = h + h·tanh(u), h = x/2, u = √(2/π)·(x + 0.044715·x³) as
 * x·(c0 + c1·x²). On the GPU tanh is tanh.approx, one instruction, within
 * 2^-11 relative: below the rounding of a 16-bit C. */
static tk_value *gelu(tk_kernel *k, tk_value *x) {
    tk_value *x2 = tk_mul(k, x, x), *h = tk_mul(k, x, f32c(k, 0.5f));
    tk_value *u = tk_mul(k, x, tk_add(k, tk_mul(k, x2, f32c(k, GELU_C1)), f32c(k, GELU_C0)));
    return tk_add(k, h, tk_mul(k, h, tk_tanh(k, u)));
}

/* gelu'(x) = s + 2x·s·(1 − s)·(c0 + 3·c1·x²), s = σ(2u) = 1/(1 + e),
 * e = exp(−2u). Through tanh, gelu' would need 1 − tanh², which
 * tanh.approx's error swamps where tanh nears ±1 (about 2.6e-3 of gelu'(3)).
 * s = rsqrt(1 + e)² (rsqrt.approx: a few ulp), and σ(1 − σ) = e·s·s without
 * the cancellation of 1 − s where s nears 1: an IEEE division (rcp.rn, a
 * slow-path branch per element) was a third of DGELU's epilogue. −2u is
 * capped at 80 so that e stays finite (e·s = 1 there, s ≈ 2e-35). */
static tk_value *gelu_grad(tk_kernel *k, tk_value *x) {
    tk_value *x2 = tk_mul(k, x, x);
    tk_value *u2 =
        tk_mul(k, x, tk_add(k, tk_mul(k, x2, f32c(k, 2 * GELU_C1)), f32c(k, 2 * GELU_C0)));
    tk_value *e = tk_exp(k, tk_min(k, tk_neg(k, u2), f32c(k, 80.0f)));
    tk_value *r = tk_rsqrt(k, tk_add(k, e, f32c(k, 1.0f))), *s = tk_mul(k, r, r);
    tk_value *du2 = tk_add(k, tk_mul(k, x2, f32c(k, 6 * GELU_C1)), f32c(k, 2 * GELU_C0));
    tk_value *ds = tk_mul(k, tk_mul(k, e, s), s);
    return tk_add(k, s, tk_mul(k, tk_mul(k, x, ds), du2));
}

static tk_value *as_f32(tk_kernel *k, tk_value *v, tk_dtype dt) {
    return dt == TK_F32 ? v : tk_cvt(k, v, TK_F32);
}

static tk_value *as_out(tk_kernel *k, tk_value *v, tk_dtype dt) {
    return dt == TK_F32 ? v : tk_cvt(k, v, dt);
}

/* One slice: x (f32, rows x cols at (r0, c0) of C) -> the value C gets, in
 * out_dtype. Loads are masked like the stores: outside C they read 0 and
 * nothing is written there. xin: DGELU's Aux slice, loaded already (a
 * group of slices at a time: aux_group); sx: where GELU's Aux slice goes in
 * g->sX (NULL: to Aux itself). */
static tk_value *epilogue(gemm *g, tk_value *x, int rows, int cols, tk_owner owner, tk_value *r0,
                          tk_value *c0, tk_value *xin, tk_value *const *sx) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    tk_dtype dt = c->out_dtype;
    tk_type tile = tk_tile_type(dt, rows, cols, owner, TK_ROW);
    tk_value *ic[2] = {r0, c0};
    if (c->accumulate) x = tk_add(k, x, as_f32(k, tk_load(k, tile, g->C, ic, 0.0f), dt));
    if (c->bias && !g->bias_in_acc) {
        tk_value *ib[1] = {c0};
        tk_type vec = tk_vec_type(dt, cols, TK_PER_COL, owner, TK_ROW);
        x = tk_add(k, x, as_f32(k, tk_load(k, vec, g->bias, ib, 0.0f), dt));
    }
    if (c->act == TK_GEMM_ACT_GELU) {
        if (c->aux && sx) tk_store_n(k, g->sX, 2, sx, as_out(k, x, dt));
        if (c->aux && !sx) tk_store(k, g->aux, ic, as_out(k, x, dt));
        x = gelu(k, x);
    } else if (c->act == TK_GEMM_ACT_DGELU) {
        x = tk_mul(k, x, gelu_grad(k, as_f32(k, xin, dt)));
    }
    return as_out(k, x, dt);
}

/* The bias loaded before the k-loop instead of in the epilogue: its
 * per-element loads then wait once a tile, not between the epilogue's
 * slices (H100, GPT-2's qkv 16384x2304x768: 126 µs with the bias added in
 * the epilogue against 108 without a bias, bench/RESULTS.md session 26).
 * The same f32 sum in another order: the bias first, so the bits differ
 * from the mma.sync kernel's and split-K's, which add it last. */
tk_value *tk_gemm_acc_start(gemm *g, int rows, int cols, tk_owner owner) {
    tk_kernel *k = g->k;
    tk_value *z = tk_zeros(k, tk_tile_type(TK_F32, rows, cols, owner, TK_ROW));
    if (!g->bias_in_acc) return z;
    tk_dtype dt = g->c->out_dtype;
    tk_value *ib[1] = {g->n0};
    tk_type vec = tk_vec_type(dt, cols, TK_PER_COL, owner, TK_ROW);
    return tk_add(k, z, as_f32(k, tk_load(k, vec, g->bias, ib, 0.0f), dt));
}

/* Columns of DGELU's Aux loaded at once (a multiple of the slice width w
 * dividing cols): AUX_BYTES of registers per thread, so that one tile load
 * puts a group of slices' loads in flight together instead of one latency
 * per slice. ptxas -v, sm_90a: 128 bytes made the wgmma kernel's 64 x 256
 * epilogue spill 242 bytes (168 registers); 64 leave every default shape
 * (both kernels, sm_80 and sm_90a) without spills. */
#define AUX_BYTES 64
static int aux_group(const gemm *g, int h, int w, int cols, tk_owner owner) {
    int threads = owner == TK_WARPGROUP ? 128 : 32;
    int gw = AUX_BYTES * threads / (h * (int)tk_dtype_size(g->c->out_dtype));
    gw -= gw % w;
    while (gw > w && cols % gw) gw -= w;
    return gw < w ? w : gw;
}

void tk_gemm_epilogue_store(gemm *g, tk_value *acc, int rows, int cols, tk_owner owner,
                            tk_value *r0, tk_value *c0, tk_value *dst, tk_value *const *didx, int h,
                            int w) {
    tk_kernel *k = g->k;
    if (w > cols || cols % w) w = cols;
    if (h > rows || rows % h) h = rows;
    bool dgelu = g->c->act == TK_GEMM_ACT_DGELU;
    int gw = dgelu ? aux_group(g, h, w, cols, owner) : w;
    for (int r = 0; r < rows / h; r++) {
        tk_value *group = NULL; /* DGELU's Aux, gw columns at a time */
        for (int q = 0; q < cols / w; q++) {
            tk_value *part = cols > w || rows > h ? tk_slice(k, acc, r * h, q * w, h, w) : acc;
            tk_value *off = tk_const_i32(k, q * w), *roff = tk_const_i32(k, r * h);
            if (dgelu && q * w % gw == 0) {
                tk_type t = tk_tile_type(g->c->out_dtype, h, gw, owner, TK_ROW);
                tk_value *ig[2] = {tk_add(k, r0, roff), tk_add(k, c0, off)};
                group = tk_load(k, t, g->aux, ig, 0.0f);
            }
            tk_value *xin = dgelu ? tk_slice(k, group, 0, q * w % gw, h, w) : NULL, *sx[2];
            if (g->sX) sx[0] = tk_add(k, didx[0], roff), sx[1] = tk_add(k, didx[1], off);
            tk_value *out = epilogue(g, part, h, w, owner, tk_add(k, r0, roff), tk_add(k, c0, off),
                                     xin, g->sX ? sx : NULL);
            tk_value *id[2] = {tk_add(k, didx[0], roff), tk_add(k, didx[1], off)};
            tk_store(k, dst, id, out);
        }
    }
}

/* ---- Checks ------------------------------------------------------------------ */
static tk_status bad_flag(tk_ctx *ctx, const char *fn, const char *name, int v) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; expected 0 or 1", fn, name, v);
}

tk_status tk_gemm_check_epilogue(tk_ctx *ctx, const char *fn, const tk_gemm_config *c) {
    const char *names[4] = {"transpose_a", "bias", "aux", "accumulate"};
    const int vals[4] = {c->transpose_a, c->bias, c->aux, c->accumulate};
    for (int i = 0; i < 4; i++)
        if (vals[i] != 0 && vals[i] != 1) return bad_flag(ctx, fn, names[i], vals[i]);
    if (c->act < TK_GEMM_ACT_NONE || c->act > TK_GEMM_ACT_DGELU)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: act is %d; expected a tk_gemm_act (0 none, 1 GELU, 2 DGELU)",
                                fn, c->act);
    if (c->aux && c->act == TK_GEMM_ACT_NONE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: aux without an activation: aux is GELU's input (written) or "
                                "DGELU's (read); set act, or leave aux unset",
                                fn);
    if (c->act == TK_GEMM_ACT_DGELU && !c->aux)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: act DGELU multiplies by gelu'(aux), the forward's saved "
                                "input; aux is not set",
                                fn);
    if (c->act == TK_GEMM_ACT_DGELU && c->bias)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: act DGELU takes no bias", fn);
    if (c->accumulate && c->act)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: accumulate with act %s: C += A·B [+ bias] only, no "
                                "activation",
                                fn, c->act == TK_GEMM_ACT_GELU ? "GELU" : "DGELU");
    return TK_OK;
}

/* Bytes from p that a rows x cols matrix of pitch ld covers (saturated). */
typedef struct span {
    uintptr_t lo, hi;
    const char *name;
} span;

static span span_of(const void *p, int64_t rows, int64_t cols, int64_t ld, size_t esz,
                    const char *name) {
    uint64_t n = (uint64_t)cols, lim = UINT64_MAX / 16, r = rows > 1 ? (uint64_t)(rows - 1) : 0;
    if (r) n = (uint64_t)ld > (lim - n) / r ? lim : n + r * (uint64_t)ld; /* elements */
    uintptr_t lo = (uintptr_t)p, bytes = (uintptr_t)(n * esz);
    return (span){lo, bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes, name};
}

static bool overlap(span a, span b) { return a.lo && b.lo && a.lo < b.hi && b.lo < a.hi; }

/* What `what` writes (w) must not overlap what the call reads, n of them. */
static tk_status no_overlap(tk_ctx *ctx, const char *what, span w, const span *r, int n) {
    for (int i = 0; i < n; i++)
        if (overlap(w, r[i]))
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "tk_gemm: %s: %s [%p, %p) overlaps %s [%p, %p); blocks would "
                                    "read what others have written",
                                    what, w.name, (void *)w.lo, (void *)w.hi, r[i].name,
                                    (void *)r[i].lo, (void *)r[i].hi);
    return TK_OK;
}

static tk_status check_overlaps(tk_ctx *ctx, const tk_gemm_params *p, int64_t lda, int64_t ldb) {
    size_t ei = tk_dtype_size(p->in_dtype), eo = tk_dtype_size(p->out_dtype);
    int64_t ldc = p->ldc ? p->ldc : p->n, ldx = p->ldaux ? p->ldaux : p->n;
    span a = p->transpose_a ? span_of(p->a, p->k, p->m, lda, ei, "a")
                            : span_of(p->a, p->m, p->k, lda, ei, "a");
    span b = p->transpose_b ? span_of(p->b, p->n, p->k, ldb, ei, "b")
                            : span_of(p->b, p->k, p->n, ldb, ei, "b");
    span bias = span_of(p->bias, 1, p->n, p->n, eo, "bias");
    span c = span_of(p->c, p->m, p->n, ldc, eo, "c"),
         x = span_of(p->aux, p->m, p->n, ldx, eo, "aux");
    span reads[3] = {a, b, bias};
    tk_status s = TK_OK;
    if (p->accumulate) s = no_overlap(ctx, "accumulate reads and writes c", c, reads, 3);
    if (!s && p->bias) s = no_overlap(ctx, "bias is read by every block", c, &bias, 1);
    if (!s && p->act == TK_GEMM_ACT_GELU) s = no_overlap(ctx, "GELU writes aux", x, reads, 3);
    if (!s && p->act == TK_GEMM_ACT_GELU) s = no_overlap(ctx, "GELU writes aux and c", x, &c, 1);
    bool in_place = p->aux == p->c && ldx == ldc;
    if (!s && p->act == TK_GEMM_ACT_DGELU && !in_place)
        s = no_overlap(ctx, "DGELU reads aux (in place only as aux == c, ldaux == ldc)", c, &x, 1);
    return s;
}

tk_status tk_gemm_check_workspace(tk_ctx *ctx, const tk_gemm_params *p, size_t bytes) {
    size_t ei = tk_dtype_size(p->in_dtype), eo = tk_dtype_size(p->out_dtype);
    int64_t lda = p->lda ? p->lda : p->transpose_a ? p->m : p->k;
    int64_t ldb = p->ldb ? p->ldb : p->transpose_b ? p->k : p->n;
    int64_t ldc = p->ldc ? p->ldc : p->n, ldx = p->ldaux ? p->ldaux : p->n;
    span all[5] = {p->transpose_a ? span_of(p->a, p->k, p->m, lda, ei, "a")
                                  : span_of(p->a, p->m, p->k, lda, ei, "a"),
                   p->transpose_b ? span_of(p->b, p->n, p->k, ldb, ei, "b")
                                  : span_of(p->b, p->k, p->n, ldb, ei, "b"),
                   span_of(p->c, p->m, p->n, ldc, eo, "c"),
                   span_of(p->bias, 1, p->n, p->n, eo, "bias"),
                   span_of(p->aux, p->m, p->n, ldx, eo, "aux")};
    span w = span_of(p->workspace, 1, (int64_t)bytes, (int64_t)bytes, 1, "workspace");
    return no_overlap(ctx, "the split writes its partials to the workspace", w, all, 5);
}

tk_status tk_gemm_check_call_epilogue(tk_ctx *ctx, const tk_gemm_params *p, tk_gemm_config *c) {
    c->transpose_a = p->transpose_a;
    c->bias = p->bias != NULL;
    c->act = p->act;
    c->aux = p->aux != NULL;
    c->accumulate = p->accumulate;
    tk_status s = tk_gemm_check_epilogue(ctx, "tk_gemm", c);
    if (s) return s;
    size_t eo = tk_dtype_size(p->out_dtype);
    const char *mis = (uintptr_t)p->bias % eo ? "bias" : (uintptr_t)p->aux % eo ? "aux" : NULL;
    if (mis)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: %s %p is not aligned to its %zu-byte elements (%s)", mis,
                                mis[0] == 'b' ? p->bias : p->aux, eo, tk_dtype_name(p->out_dtype));
    if (p->ldaux && p->ldaux < p->n)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_gemm: ldaux %lld < n %lld",
                                (long long)p->ldaux, (long long)p->n);
    int64_t lda = p->lda ? p->lda : p->transpose_a ? p->m : p->k;
    int64_t ldb = p->ldb ? p->ldb : p->transpose_b ? p->k : p->n;
    return check_overlaps(ctx, p, lda, ldb);
}

tk_status tk_gemm_match_epilogue(tk_ctx *ctx, const tk_gemm_config *want, const tk_gemm_config *g) {
    if (g->transpose_a == want->transpose_a && g->bias == want->bias && g->act == want->act &&
        g->aux == want->aux && g->accumulate == want->accumulate)
        return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "tk_gemm: config has transpose_a %d, bias %d, act %d, aux %d, "
                            "accumulate %d; the params ask for %d, %d, %d, %d, %d (bias and aux: "
                            "whether their pointers are set)",
                            g->transpose_a, g->bias, g->act, g->aux, g->accumulate,
                            want->transpose_a, want->bias, want->act, want->aux, want->accumulate);
}
