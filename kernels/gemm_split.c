/* The GEMM split over K (tk_gemm_config.split_k; entry points: kernels/gemm.c).
 *
 * A weight gradient dW = xᵀ·dy has K = the tokens (16384 for GPT-2 at
 * T = 16k) and only 18-144 tiles of C: one kernel leaves most of the 132
 * SMs idle, or runs a short second wave. The split runs S ranges of K as
 * S x tiles independent items of kernel 1 (the GEMM kernels themselves over
 * one range each, writing f32 partials P [S, M, N] to the caller's
 * workspace), then kernel 2 sums P[0] + ... + P[S-1] in that order per
 * element and applies the call's epilogue. No atomics: the same sizes and
 * S give the same bits on every run.
 *
 * S is chosen by a cost model in seconds (tk_gemm_split_choose): the
 * busiest SM's items times each one's k-tiles (plus a fill and the
 * partial's store), against the partials' DRAM traffic (written once, read
 * once) and kernel 2's launch. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gemm_parts.h"
#include "tk/tk_run.h"

/* ---- The choice ---------------------------------------------------------------- */
/* Per-SM multiply rates (flop/s) and DRAM bandwidth (bytes/s) of an H100
 * (measured: bench/RESULTS.md, ~610 TFLOP/s for 128x256 wgmma blocks,
 * ~450 for 128x128, ~400 for mma.sync) and an A100 (~230 TFLOP/s). */
typedef struct rates {
    double wide, mid, mma, bw;
} rates;

static const rates HOPPER = {4.6e12, 3.4e12, 3.0e12, 3.0e12};
static const rates AMPERE = {0, 0, 2.1e12, 1.5e12};

/* k-tile steps per item beyond its own: the pipeline's fill and the store
 * of its partial tile */
#define ITEM_STEPS 2
/* kernel 2's launch and tail, seconds */
#define REDUCE_LAUNCH 3e-6
/* a split must save this share of the unsplit time (the model is rough) */
#define SPLIT_GAIN 0.9

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int tk_gemm_split_ranges(int64_t k, int block_k, int want) {
    int64_t nk = cdiv(k, block_k);
    if (want < 2 || nk < 2) return 1;
    return (int)cdiv(nk, cdiv(nk, want)); /* no empty range */
}

static double rate_of(const tk_gemm_config *c, const rates *r) {
    if (!c->wgmma) return r->mma;
    return c->block_n >= 256 ? r->wide : r->mid;
}

/* Seconds for the product in S ranges on config c. */
static double cost(const tk_gemm_config *c, int64_t m, int64_t n, int64_t k, int S, int sms,
                   const rates *r) {
    int64_t tiles = cdiv(m, c->block_m) * cdiv(n, c->block_n), nk = cdiv(k, c->block_k);
    int64_t rounds = cdiv(tiles * S, sms), per = cdiv(nk, S);
    double step = 2.0 * c->block_m * c->block_n * c->block_k / rate_of(c, r);
    double t = (double)rounds * (double)(per + ITEM_STEPS) * step;
    if (S > 1) t += REDUCE_LAUNCH + 2.0 * S * (double)m * (double)n * 4 / r->bw;
    return t;
}

/* The block shapes a split may take: the unsplit choice, and on sm_90a with
 * the copy engine the wgmma kernel's two (tk_gemm_config_for's), and up to
 * TK_GEMM_SKINNY_M rows one warpgroup's 64x128 (measured there only:
 * S 2-4 of it ran 18 / 79 / 147 TFLOP/s at M 16 / 64 / 128, N = K = 4096,
 * against 12 / 60 / 131 for the split picked before it was a candidate). */
static int candidates(const tk_gemm_config *c, int64_t m, const tk_gemm_target *t,
                      tk_gemm_config *out) {
    int n = 0;
    out[n++] = *c;
    const tk_target_caps *cp = t->caps;
    if (!cp || !t->engine || !cp->wgmma || !cp->tma || !cp->setmaxnreg) return n;
    for (int i = 0; i < (m <= TK_GEMM_SKINNY_M ? 3 : 2); i++) {
        tk_gemm_config w = *c;
        w.block_m = 128, w.block_n = i ? 128 : 256, w.block_k = 64;
        w.warps = 8, w.stages = i ? 6 : 4, w.tma = 1, w.wgmma = 1;
        if (i == 2) tk_gemm_shape_skinny(&w);
        if (memcmp(&w, c, sizeof w)) out[n++] = w;
    }
    return n;
}

/* The best split found so far. */
typedef struct pick {
    tk_gemm_config c;
    int s;
    double t;
} pick;

static void consider(pick *b, const tk_gemm_config *c, int s, int64_t m, int64_t n, int64_t k,
                     int sms, const rates *r) {
    if (s < 2) return;
    double t = cost(c, m, n, k, s, sms, r);
    if (b->s < 2 || t < b->t) *b = (pick){*c, s, t};
}

tk_gemm_config tk_gemm_split_choose(const tk_gemm_config *c, int64_t m, int64_t n, int64_t k,
                                    int want, const tk_gemm_target *t) {
    tk_gemm_config base = *c, cand[4];
    base.split_k = 0, base.split_reduce = 0;
    if (want == 1 || m <= 0 || n <= 0 || k <= 0) return base;
    const rates *r = t->caps && t->caps->sm >= 90 ? &HOPPER : &AMPERE;
    int sms = t->sms > 0 ? t->sms : 1, nc = candidates(&base, m, t, cand);
    pick b = {base, 1, 0};
    for (int i = 0; i < nc; i++) {
        if (want) { /* fewer where K has fewer k-tiles */
            consider(&b, &cand[i], tk_gemm_split_ranges(k, cand[i].block_k, want), m, n, k, sms, r);
            continue;
        }
        for (int s = 2; s <= TK_GEMM_MAX_SPLIT; s++) /* each count once, as its ranges */
            if (tk_gemm_split_ranges(k, cand[i].block_k, s) == s)
                consider(&b, &cand[i], s, m, n, k, sms, r);
    }
    if (b.s < 2 || (!want && b.t > SPLIT_GAIN * cost(&base, m, n, k, 1, sms, r))) return base;
    b.c.split_k = b.s;
    return b.c;
}

/* ---- Checks ------------------------------------------------------------------- */
tk_status tk_gemm_check_split(tk_ctx *ctx, const char *fn, const tk_gemm_config *c) {
    if (c->split_k < 0 || c->split_k > TK_GEMM_MAX_SPLIT)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: split_k is %d; expected 0..%d", fn,
                                c->split_k, TK_GEMM_MAX_SPLIT);
    if (c->split_reduce != 0 && c->split_reduce != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: split_reduce is %d; expected 0 or 1",
                                fn, c->split_reduce);
    if (c->split_reduce && c->split_k < 2)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: split_reduce with split_k %d: kernel 2 sums a split's "
                                "partials (split_k >= 2)",
                                fn, c->split_k);
    return TK_OK;
}

tk_status tk_gemm_match_split(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *g) {
    tk_status s = tk_gemm_check_split(ctx, "tk_gemm", g);
    if (s) return s;
    if (g->split_reduce)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: config has split_reduce 1; a call's config is kernel "
                                "1's (split_reduce 0)");
    int cs = g->split_k >= 2 ? g->split_k : 1;
    if (p->split_k && p->split_k != cs)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: config has split_k %d; the params ask for %d (0 takes "
                                "the config's)",
                                g->split_k, p->split_k);
    return TK_OK;
}

const tk_gemm_config *tk_gemm_split_part(const tk_gemm_config *c, tk_gemm_config *buf) {
    *buf = *c;
    buf->out_dtype = TK_F32;
    buf->bias = buf->act = buf->aux = buf->accumulate = 0;
    buf->split_reduce = 0;
    return buf;
}

/* ---- Kernel 2 ------------------------------------------------------------------- */
/* Each warp sums a RED_WM x RED_WN tile over the ranges; 4 warps, 2 x 2. */
#define RED_WM 32
#define RED_WN 32

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }

/* P[0] + ... + P[S-1] of this warp's tile, in that order. */
static tk_value *sum_ranges(tk_kernel *k, tk_value *P, tk_value *r0, tk_value *c0) {
    tk_type t = tk_tile_type(TK_F32, RED_WM, RED_WN, TK_WARP, TK_ROW);
    tk_value *S = tk_cvt(k, tk_dim(k, P, 0), TK_I32), *i0[3] = {i32c(k, 0), r0, c0};
    tk_value *init[1] = {tk_load(k, t, P, i0, 0.0f)}, *cur[1], *next[1], *fin[1];
    tk_value *z = tk_for_begin(k, i32c(k, 1), S, i32c(k, 1), 1, init, cur);
    tk_value *iz[3] = {z, r0, c0};
    next[0] = tk_add(k, cur[0], tk_load(k, t, P, iz, 0.0f));
    tk_for_end(k, 1, next, fin);
    return fin[0];
}

static void reduce_body(gemm *g) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    tk_value *P = tk_param_tensor(k, "P", TK_F32, 3);
    tk_value *C = g->C = tk_param_tensor(k, "C", c->out_dtype, 2);
    tk_gemm_epilogue_params(g);
    tk_value *M = tk_cvt(k, tk_dim(k, C, 0), TK_I32), *N = tk_cvt(k, tk_dim(k, C, 1), TK_I32);
    tk_set_grid(k, tk_ceil_div(k, N, i32c(k, 2 * RED_WN)), tk_ceil_div(k, M, i32c(k, 2 * RED_WM)),
                NULL);
    /* warp w takes warp tile (2 by + w / 2, 2 bx + w % 2) */
    tk_value *warp = tk_warp_id(k), *two = i32c(k, 2);
    tk_value *wr = tk_add(k, tk_mul(k, tk_block_id(k, 1), two), tk_div(k, warp, two));
    tk_value *wc = tk_add(k, tk_mul(k, tk_block_id(k, 0), two), tk_rem(k, warp, two));
    tk_value *r0 = tk_mul(k, wr, i32c(k, RED_WM)), *c0 = tk_mul(k, wc, i32c(k, RED_WN));
    tk_value *x = sum_ranges(k, P, r0, c0), *ic[2] = {r0, c0};
    if (tk_gemm_has_epilogue(c)) {
        tk_gemm_epilogue_store(g, x, RED_WM, RED_WN, TK_WARP, r0, c0, C, ic, 32, 16);
        return;
    }
    tk_store(k, C, ic, c->out_dtype == TK_F32 ? x : tk_cvt(k, x, c->out_dtype));
}

tk_status tk_gemm_reduce_build(tk_ctx *ctx, const tk_gemm_config *c, tk_kernel **out) {
    static const char *const acts[3] = {"", "_gelu", "_dgelu"};
    char name[80];
    snprintf(name, sizeof name, "tk_gemm_splitk_reduce_%s%s%s%s%s", tk_dtype_name(c->out_dtype),
             c->bias ? "_bias" : "", acts[c->act], c->aux ? "_aux" : "",
             c->accumulate ? "_acc" : "");
    tk_kernel *k;
    tk_status s = tk_kernel_create(ctx, name, 4, &k);
    if (s) return s;
    gemm g = {.k = k, .c = c};
    reduce_body(&g);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "tk_gemm_build: %s", tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}

/* ---- The call ------------------------------------------------------------------- */
tk_status tk_gemm_split_bytes(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                              size_t *bytes) {
    uint64_t mn = (uint64_t)p->m * (uint64_t)p->n; /* each below 2^31 (check_gemm_sizes) */
    if (mn > SIZE_MAX / 4 / (uint64_t)c->split_k)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: split_k %d of %lld x %lld f32 partials exceed the "
                                "address space",
                                c->split_k, (long long)p->m, (long long)p->n);
    *bytes = (size_t)(mn * 4 * (uint64_t)c->split_k);
    return TK_OK;
}

/* Kernel 2's configuration: only out_dtype and the epilogue matter, so every
 * block shape shares one program per epilogue. */
static tk_gemm_config reduce_config(const tk_gemm_config *c) {
    tk_gemm_config r = tk_gemm_default_config(TK_BF16, c->out_dtype, 0);
    r.bias = c->bias, r.act = c->act, r.aux = c->aux, r.accumulate = c->accumulate;
    r.split_k = 2, r.split_reduce = 1;
    return r;
}

tk_status tk_gemm_split_prepare(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                                tk_program **part, tk_program **reduce, tk_prepare_info *info) {
    size_t need = 0;
    tk_status s = tk_gemm_split_bytes(ctx, p, c, &need);
    if (s) return s;
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: split_k %d needs a workspace of %zu bytes (%d x %lld x "
                                "%lld f32 partials; tk_gemm_workspace); workspace_bytes is %zu",
                                c->split_k, need, c->split_k, (long long)p->m, (long long)p->n,
                                p->workspace_bytes);
    if ((uintptr_t)p->workspace % 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: workspace %p is not 16-byte aligned", p->workspace);
    if ((s = tk_gemm_check_workspace(ctx, p, need))) return s;
    tk_gemm_config buf, red = reduce_config(c);
    if ((s = tk_gemm_program(ctx, tk_gemm_split_part(c, &buf), part, info))) return s;
    return tk_gemm_program(ctx, &red, reduce, info);
}

tk_status tk_gemm_split_run(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                            void *stream) {
    tk_program *part = NULL, *red = NULL;
    tk_status s = tk_gemm_split_prepare(ctx, p, c, &part, &red, NULL);
    if (s) return s;
    int64_t pd[3] = {c->split_k, p->m, p->n}, ps[3] = {p->m * p->n, p->n, 1};
    tk_arg P = tk_arg_strided(p->workspace, TK_F32, 3, pd, ps), a1[4], a2[4];
    int n1 = tk_gemm_ab_args(p, a1), n2 = 0;
    a1[n1++] = P;
    if (c->wgmma) a1[n1++] = tk_gemm_blocks_arg(part);
    a2[n2++] = P;
    n2 += tk_gemm_out_args(p, c, a2 + n2);
    if ((s = tk_launch(part, n1, a1, stream))) return s;
    return tk_launch(red, n2, a2, stream);
}
