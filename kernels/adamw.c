/* The optimizer step: the global gradient norm (partial sums of squares,
 * then their sum) and the fused clip + AdamW update. The contract
 * (parameters in order, grids) is in tk/tk_kernels_train.h ("The optimizer
 * step").
 *
 * Both big kernels stream flat buffers viewed as rows [R, C] (the run code
 * cuts the ragged tail off as a view of its own: kernels/adamw_run.c). A
 * block owns 16 rows and its W warps split the columns, as the norms do
 * (kernels/norm.c, docs/PERF_NOTES.md round 18): the rows arrive in rounds
 * of U slots of 16·W columns, each copied by the whole block into a shared
 * stage with cp.async (16-byte copies, zero fill past the view's edges),
 * round r + 1 while round r is read; warp w reads its 16 columns of every
 * slot, and what the step writes (W, m, v and W's low-precision copy) goes
 * back through the slot and out in 16-byte copies clipped at the edges. So
 * no register tile meets global memory: no masked per-element path holds
 * registers, and an element outside [R, C] is never read or written.
 *
 * Deterministic without atomics: each thread adds its squares in round
 * order into an f32 tile, the block's warps' tiles are added in warp order
 * and its 16 row sums written as one partial row; one block then adds the
 * partial rows in a fixed order. The order depends on R, C and the block
 * shape only, never on timing or on the GPU's size. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tk/tk_kernels.h"

#define ROWS    16 /* a block's rows                          */
#define SUB     16 /* a warp's columns of a slot              */
#define MAX_U   8  /* slots a round                           */
#define N_WARPS 8  /* the norm kernel's warps                 */
#define N_TILES 4  /* the norm kernel's tiles a warp a trip   */

typedef struct adw {
    tk_kernel *k;
    const tk_adamw_config *c;
    int W, U;       /* warps, slots a round                         */
    tk_value *row0; /* the block's first row                        */
    tk_value *wid;  /* the warp (i64)                               */
    tk_value *nr;   /* rounds: ceil(C / cols)                       */
    tk_value *half; /* the first stage of the current round's half  */
    tk_value *sums; /* shared: the warps' f32 tiles (W stages)      */
} adw;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

static tk_type tile_t(tk_dtype dt) { return tk_tile_type(dt, ROWS, SUB, TK_WARP, TK_ROW); }

/* Two rounds of U stages of a slot's [16, 16·W] tile: one read while the
 * next arrives. */
static tk_value *ring(adw *a, tk_dtype dt, int rounds) {
    return tk_shared(a->k, dt, ROWS, SUB * a->W, TK_SMEM_SWIZZLE, rounds * a->U);
}

/* The grid (a block per 16 rows of T) and the block's places. */
static void geometry(adw *a, tk_value *T) {
    tk_kernel *k = a->k;
    tk_value *R = tk_dim(k, T, 0), *C = tk_dim(k, T, 1);
    tk_set_grid(k, tk_ceil_div(k, R, i64c(k, ROWS)), NULL, NULL);
    a->row0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, ROWS));
    a->wid = tk_warp_id_i64(k);
    a->nr = tk_ceil_div(k, C, i64c(k, (int64_t)SUB * a->W * a->U));
}

/* The first stage of round r's half. */
static tk_value *half_of(adw *a, tk_value *r) {
    tk_kernel *k = a->k;
    return tk_mul(k, tk_rem(k, r, i64c(k, 2)), i64c(k, a->U));
}

/* Stage `half` + u of sh; half NULL: sh has one round's U stages (L's),
 * a single tile when U is 1. */
static tk_value *stage_in(adw *a, tk_value *sh, tk_value *half, int u) {
    if (!half) return a->U == 1 ? sh : tk_stage(a->k, sh, i64c(a->k, u));
    return tk_stage(a->k, sh, tk_add(a->k, half, i64c(a->k, u)));
}

/* The first column of slot u of round r. */
static tk_value *slot_c0(adw *a, tk_value *r, int u) {
    tk_kernel *k = a->k;
    return tk_mul(k, tk_add(k, tk_mul(k, r, i64c(k, a->U)), i64c(k, u)),
                  i64c(k, (int64_t)SUB * a->W));
}

/* The tensors a kernel streams in, round by round (n of them). */
typedef struct ins {
    int n;
    tk_value *sh[4], *T[4];
} ins;

/* Round r of the tensors into their half of the stages (the whole block). */
static void copy_round(adw *a, const ins *in, tk_value *r) {
    tk_value *half = half_of(a, r);
    for (int i = 0; i < in->n; i++)
        for (int u = 0; u < a->U; u++) {
            tk_value *idx[2] = {a->row0, slot_c0(a, r, u)};
            tk_copy_to_shared(a->k, stage_in(a, in->sh[i], half, u), in->T[i], idx, 0.0f,
                              TK_COPY_ASYNC);
        }
}

/* This warp's [16, 16] tile of slot u of the current round. */
static tk_value *mine(adw *a, tk_value *sh, tk_dtype dt, int u) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    return tk_load(a->k, tile_t(dt), stage_in(a, sh, a->half, u), at, 0.0f);
}

/* This warp's columns of slot u of sh (stage `half` + u) := t. */
static void put(adw *a, tk_value *sh, tk_value *half, int u, tk_value *t) {
    tk_value *at[2] = {i64c(a->k, 0), tk_mul(a->k, a->wid, i64c(a->k, SUB))};
    tk_store(a->k, stage_in(a, sh, half, u), at, t);
}

/* Slot u of sh's stages (from `half`) out to T at round r's columns. */
static void store_slots(adw *a, tk_value *sh, tk_value *half, tk_value *T, tk_value *r) {
    for (int u = 0; u < a->U; u++) {
        tk_value *idx[2] = {a->row0, slot_c0(a, r, u)};
        tk_copy_to_global(a->k, T, idx, stage_in(a, sh, half, u));
    }
}

/* Opens the loop over rounds: round r + 1 is copied in while round r,
 * arrived, is read (a group committed each trip, empty past the last
 * round; the prologue copied round 0). */
static tk_value *rounds_begin(adw *a, int n, tk_value *const *init, tk_value **cur, const ins *in) {
    tk_kernel *k = a->k;
    tk_value *r = tk_for_begin(k, i64c(k, 0), a->nr, i64c(k, 1), n, init, cur);
    tk_value *r1 = tk_add(k, r, i64c(k, 1));
    tk_if_begin(k, tk_lt(k, r1, a->nr));
    copy_round(a, in, r1);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_async_wait(k, 1);
    tk_barrier(k);
    a->half = half_of(a, r);
    return r;
}

/* Closes it: every warp is done with round r's half before round r + 2
 * is copied there. */
static void rounds_end(adw *a, int n, tk_value *const *next, tk_value **results) {
    tk_barrier(a->k);
    tk_for_end(a->k, n, next, results);
}

/* The prologue: round 0 of the tensors in flight. */
static void first_round(adw *a, const ins *in) {
    copy_round(a, in, i64c(a->k, 0));
    tk_async_commit(a->k);
}

/* The block's f32 tiles t added in warp order, in warp 0 (the caller's
 * tk_if), after every warp has put its own in a->sums. Returns the sum. */
static tk_value *warp_order_sum(adw *a, tk_value *t) {
    if (a->W == 1) return t;
    tk_kernel *k = a->k;
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_value *s = NULL;
    for (int w = 0; w < a->W; w++) {
        tk_value *x = tk_load(k, tile_t(TK_F32), tk_stage(k, a->sums, i64c(k, w)), at, 0.0f);
        s = s ? tk_add(k, s, x) : x;
    }
    return s;
}

/* Every warp's tile t into its stage of a->sums, then a barrier. */
static void share_tiles(adw *a, tk_value *t) {
    if (a->W == 1) return;
    tk_kernel *k = a->k;
    tk_value *at[2] = {i64c(k, 0), i64c(k, 0)};
    tk_store(k, tk_stage(k, a->sums, a->wid), at, t);
    tk_barrier(k);
}

/* ---- the partial sums of squares ------------------------------------------
 * Part[b, i] = Σ G² over row 16b + i (past the view's edges the stages hold
 * zeros, which add nothing). */
static void build_sumsq(adw *a) {
    tk_kernel *k = a->k;
    tk_dtype gd = a->c->grad_dtype;
    tk_value *G = tk_param_tensor(k, "G", gd, 2);
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *sG = ring(a, gd, 2);
    a->sums = a->W > 1 ? tk_shared(k, TK_F32, ROWS, SUB, TK_SMEM_PLAIN, a->W) : NULL;
    geometry(a, G);
    ins in = {1, {sG}, {G}};
    first_round(a, &in);
    tk_value *init[1] = {tk_zeros(k, tile_t(TK_F32))}, *cur[1], *acc[1];
    rounds_begin(a, 1, init, cur, &in);
    tk_value *next[1] = {cur[0]};
    for (int u = 0; u < a->U; u++) {
        tk_value *g = f32(k, mine(a, sG, gd, u));
        next[0] = tk_add(k, next[0], tk_mul(k, g, g));
    }
    rounds_end(a, 1, next, acc);
    share_tiles(a, acc[0]);
    tk_if_begin(k, tk_eq(k, a->wid, i64c(k, 0)));
    tk_value *ip[2] = {tk_block_id_i64(k, 0), i64c(k, 0)};
    tk_store(k, Part, ip, tk_row_sum(k, warp_order_sum(a, acc[0])));
    tk_if_end(k, 0, NULL, NULL);
}

/* ---- the norm -------------------------------------------------------------
 * One block: warp w adds the 16-row tiles of Part numbered w, w + 8, ...
 * (N_TILES a trip, each into its own accumulator), then the accumulators
 * in order, the warps' tiles in warp order, the rows, and the square root
 * goes to Norm[0]. */
static void build_norm(adw *a) {
    tk_kernel *k = a->k;
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *Norm = tk_param_tensor(k, "Norm", TK_F32, 1);
    a->sums = tk_shared(k, TK_F32, ROWS, SUB, TK_SMEM_PLAIN, a->W);
    tk_set_grid(k, NULL, NULL, NULL);
    a->wid = tk_warp_id_i64(k);
    tk_value *P = tk_dim(k, Part, 0);
    int64_t span = (int64_t)ROWS * a->W * N_TILES; /* rows a trip */
    tk_value *init[N_TILES], *cur[N_TILES], *next[N_TILES], *acc[N_TILES];
    for (int j = 0; j < N_TILES; j++) init[j] = tk_zeros(k, tile_t(TK_F32));
    tk_value *i = tk_for_begin(k, i64c(k, 0), tk_ceil_div(k, P, i64c(k, span)), i64c(k, 1), N_TILES,
                               init, cur);
    for (int j = 0; j < N_TILES; j++) {
        tk_value *t = tk_add(k, tk_mul(k, i, i64c(k, N_TILES * a->W)), i64c(k, j * a->W));
        tk_value *idx[2] = {tk_mul(k, tk_add(k, t, a->wid), i64c(k, ROWS)), i64c(k, 0)};
        next[j] = tk_add(k, cur[j], tk_load(k, tile_t(TK_F32), Part, idx, 0.0f));
    }
    tk_for_end(k, N_TILES, next, acc);
    tk_value *s = acc[0];
    for (int j = 1; j < N_TILES; j++) s = tk_add(k, s, acc[j]);
    share_tiles(a, s);
    tk_if_begin(k, tk_eq(k, a->wid, i64c(k, 0)));
    /* the 16 row sums broadcast along the rows, then down the columns: each
     * column then holds the total */
    tk_value *rows = tk_row_sum(k, warp_order_sum(a, s));
    tk_value *tot = tk_col_sum(k, tk_add(k, tk_zeros(k, tile_t(TK_F32)), rows));
    tk_value *i0[1] = {i64c(k, 0)}; /* Norm has one element: one of the 16 lands */
    tk_store(k, Norm, i0, tk_sqrt(k, tot));
    tk_if_end(k, 0, NULL, NULL);
}

/* ---- the step ---------------------------------------------------------------- */
typedef struct step {
    tk_value *W, *M, *V, *G, *L;      /* the tensors                          */
    tk_value *sW, *sM, *sV, *sG, *sL; /* their stages                         */
    tk_value *clip;                   /* c (NULL: no clipping)                */
    tk_value *b1, *b2, *ob1, *ob2;    /* β1, β2, 1 - β1, 1 - β2               */
    tk_value *ib1, *ib2;              /* 1/bc1, 1/bc2                         */
    tk_value *eps, *wd, *lr;
} step;

/* The scalars, once: c = min(1, max_norm / (‖G‖ + 1e-6)) as
 * torch.nn.utils.clip_grad_norm_ computes it, the reciprocals of the bias
 * corrections (one rounding each instead of a division an element). */
static void step_scalars(tk_kernel *k, step *s, tk_value *Norm, tk_value *const sc[8]) {
    tk_value *one = f32c(k, 1.0f);
    s->lr = sc[0], s->b1 = sc[1], s->b2 = sc[2], s->eps = sc[3], s->wd = sc[4];
    s->ob1 = tk_sub(k, one, s->b1), s->ob2 = tk_sub(k, one, s->b2);
    s->ib1 = tk_div(k, one, sc[5]), s->ib2 = tk_div(k, one, sc[6]);
    s->clip = NULL;
    if (!Norm) return;
    tk_value *i0[1] = {i64c(k, 0)};
    tk_value *norm = tk_load(k, tk_scalar_type(TK_F32), Norm, i0, 0.0f);
    s->clip = tk_min(k, one, tk_div(k, sc[7], tk_add(k, norm, f32c(k, 1e-6f))));
}

/* Slot u of the current round: the update of this warp's 16 columns, put
 * back over its W, m, v and into L's stage. */
static void step_slot(adw *a, const step *s, int u) {
    tk_kernel *k = a->k;
    tk_value *w = mine(a, s->sW, TK_F32, u), *m = mine(a, s->sM, TK_F32, u);
    tk_value *v = mine(a, s->sV, TK_F32, u);
    tk_value *g = f32(k, mine(a, s->sG, a->c->grad_dtype, u));
    if (s->clip) g = tk_mul(k, g, s->clip);
    m = tk_add(k, tk_mul(k, m, s->b1), tk_mul(k, g, s->ob1));
    v = tk_add(k, tk_mul(k, v, s->b2), tk_mul(k, tk_mul(k, g, g), s->ob2));
    tk_value *den = tk_add(k, tk_sqrt(k, tk_mul(k, v, s->ib2)), s->eps);
    tk_value *upd = tk_add(k, tk_div(k, tk_mul(k, m, s->ib1), den), tk_mul(k, w, s->wd));
    w = tk_sub(k, w, tk_mul(k, upd, s->lr));
    put(a, s->sW, a->half, u, w);
    put(a, s->sM, a->half, u, m);
    put(a, s->sV, a->half, u, v);
    if (s->sL) put(a, s->sL, NULL, u, tk_cvt(k, w, a->c->lowp_dtype));
}

static void build_step(adw *a) {
    tk_kernel *k = a->k;
    const tk_adamw_config *c = a->c;
    step s = {0};
    s.W = tk_param_tensor(k, "W", TK_F32, 2);
    s.M = tk_param_tensor(k, "M", TK_F32, 2);
    s.V = tk_param_tensor(k, "V", TK_F32, 2);
    s.G = tk_param_tensor(k, "G", c->grad_dtype, 2);
    s.L = c->lowp_dtype ? tk_param_tensor(k, "L", c->lowp_dtype, 2) : NULL;
    tk_value *Norm = c->clip ? tk_param_tensor(k, "Norm", TK_F32, 1) : NULL;
    static const char *names[8] = {"lr", "beta1", "beta2", "eps", "wd", "bc1", "bc2", "max_norm"};
    tk_value *sc[8] = {0};
    for (int i = 0; i < (c->clip ? 8 : 7); i++) sc[i] = tk_param_scalar(k, names[i], TK_F32);
    s.sW = ring(a, TK_F32, 2), s.sM = ring(a, TK_F32, 2), s.sV = ring(a, TK_F32, 2);
    s.sG = ring(a, c->grad_dtype, 2);
    /* L's round leaves before the next is put there (a barrier between) */
    s.sL = s.L ? ring(a, c->lowp_dtype, 1) : NULL;
    geometry(a, s.W);
    step_scalars(k, &s, Norm, sc);
    ins in = {4, {s.sW, s.sM, s.sV, s.sG}, {s.W, s.M, s.V, s.G}};
    first_round(a, &in);
    tk_value *r = rounds_begin(a, 0, NULL, NULL, &in);
    for (int u = 0; u < a->U; u++) step_slot(a, &s, u);
    tk_barrier(k);
    store_slots(a, s.sW, a->half, s.W, r);
    store_slots(a, s.sM, a->half, s.M, r);
    store_slots(a, s.sV, a->half, s.V, r);
    if (s.L) store_slots(a, s.sL, NULL, s.L, r);
    rounds_end(a, 0, NULL, NULL);
}

/* ---- the config ------------------------------------------------------------ */
static int warps_of(const tk_adamw_config *c) {
    if (c->part == TK_ADAMW_NORM) return N_WARPS;
    return c->warps ? c->warps : TK_ADAMW_WARPS;
}

static int slots_of(const tk_adamw_config *c) {
    if (c->part == TK_ADAMW_NORM) return 1;
    if (c->cols) return c->cols / (SUB * warps_of(c));
    return c->part == TK_ADAMW_SUMSQ ? TK_ADAMW_SUMSQ_SLOTS : TK_ADAMW_STEP_SLOTS;
}

static tk_status bad(tk_ctx *ctx, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_adamw_build: %s is %d; expected %s", what,
                            v, want);
}

static bool float_dtype(tk_dtype d) { return d == TK_F32 || d == TK_BF16 || d == TK_F16; }

static tk_status check_shape(tk_ctx *ctx, const tk_adamw_config *c) {
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        return bad(ctx, "warps", w, "0 (the default), 1, 2, 4, 8 or 16");
    int span = SUB * warps_of(c);
    if (c->cols < 0 || c->cols % span || c->cols / span > MAX_U)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_adamw_build: cols is %d; expected 0 (the default) or a "
                                "multiple of %d (%d columns x %d warps) up to %d",
                                c->cols, span, SUB, warps_of(c), span * MAX_U);
    return TK_OK;
}

static tk_status check_config(tk_ctx *ctx, const tk_adamw_config *c) {
    if (c->part < TK_ADAMW_SUMSQ || c->part > TK_ADAMW_STEP)
        return bad(ctx, "part", c->part, "TK_ADAMW_SUMSQ, TK_ADAMW_NORM or TK_ADAMW_STEP");
    if (c->part == TK_ADAMW_NORM) return TK_OK; /* nothing else is read */
    if (!float_dtype(c->grad_dtype))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_adamw_build: grad_dtype is %s; expected TK_F32, TK_BF16 or "
                                "TK_F16",
                                tk_dtype_name(c->grad_dtype));
    if (c->part == TK_ADAMW_STEP) {
        tk_dtype l = c->lowp_dtype;
        if (l != TK_DT_NONE && l != TK_BF16 && l != TK_F16)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "tk_adamw_build: lowp_dtype is %s; expected 0 (no copy), "
                                    "TK_BF16 or TK_F16",
                                    tk_dtype_name(l));
        if (c->clip != 0 && c->clip != 1) return bad(ctx, "clip", c->clip, "0 or 1");
    }
    return check_shape(ctx, c);
}

static void kernel_name(const tk_adamw_config *c, char *name, size_t n) {
    if (c->part == TK_ADAMW_NORM) {
        snprintf(name, n, "tk_adamw_norm");
        return;
    }
    char shape[32];
    snprintf(shape, sizeof shape, "_w%d_c%d", warps_of(c), SUB * warps_of(c) * slots_of(c));
    if (c->part == TK_ADAMW_SUMSQ)
        snprintf(name, n, "tk_adamw_sumsq_%s%s", tk_dtype_name(c->grad_dtype), shape);
    else
        snprintf(name, n, "tk_adamw_step_%s%s%s%s", tk_dtype_name(c->grad_dtype),
                 c->lowp_dtype ? "_" : "", c->lowp_dtype ? tk_dtype_name(c->lowp_dtype) : "",
                 c->clip ? "_clip" : "");
    size_t len = strlen(name);
    snprintf(name + len, n - len, "%s", shape);
}

tk_status tk_adamw_build(tk_ctx *ctx, const tk_adamw_config *cfg, tk_kernel **out) {
    const char *fn = "tk_adamw_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, cfg);
    if (s) return s;
    char name[96];
    kernel_name(cfg, name, sizeof name);
    adw a = {.c = cfg, .W = warps_of(cfg), .U = slots_of(cfg)};
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, a.W, &k))) return s;
    a.k = k;
    /* Two blocks of 8 warps an SM (64 KiB of shared memory each would let
     * three): uncapped, ptxas gives the step 128 registers with f32
     * gradients (12 bytes of spill) and 177 with 16-bit ones (one block an
     * SM, 28 KiB in flight). The cap costs 0 and 96 bytes of spill on
     * sm_90a: addresses of the copies' edge paths that LICM hoisted. */
    if (cfg->part == TK_ADAMW_STEP) tk_kernel_set_maxnreg(k, 128);
    if (cfg->part == TK_ADAMW_SUMSQ)
        build_sumsq(&a);
    else if (cfg->part == TK_ADAMW_NORM)
        build_norm(&a);
    else
        build_step(&a);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
