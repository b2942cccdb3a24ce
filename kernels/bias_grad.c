/* The bias gradient of a linear layer, dB = Σ_m dY[m, :], in two kernels
 * (tk/tk_kernels_train.h, "The bias gradient"): the column sums of chunks
 * of rows, then their sum. The same two-stage shape as tk_grad_norm and
 * the norm backward's dweight (kernels/adamw.c, norm.c): partial rows
 * written once, then added in a fixed order, so the bits depend on M and N
 * alone. The norm's reduction is not reused: its partials come out of its
 * own pass over the rows (there is no dY-to-partials kernel to borrow), and
 * it overwrites where a trainer accumulates.
 *
 * Both kernels stream [16, 32·W] slabs through shared memory with cp.async
 * (tk_slabs_sum), as adamw.c and norm.c do: register tiles loaded straight
 * from global memory keep every element's masked address live in the loop
 * (ptxas: 255 registers and 240 bytes of spill for a [16, 64] tile two
 * loads a trip), where a block copy's addresses are a few registers. */
#include <stdbool.h>
#include <stdio.h>

#include "bias_grad_parts.h"
#include "tk/tk_kernels.h"

#define ROWS   16
#define SC     TK_SLAB_COLS
#define STAGES 4 /* the slab ring */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

/* ---- the stream -------------------------------------------------------------- */
/* Round r's slab into its stage, r mod STAGES (the whole block,
 * asynchronously). */
static void copy_slab(const tk_slabs *s, tk_value *ring, tk_value *r) {
    tk_kernel *k = s->k;
    tk_value *stage = tk_stage(k, ring, tk_rem(k, r, i64c(k, STAGES)));
    tk_value *row = tk_add(k, s->row0, tk_mul(k, r, s->drow));
    if (!s->lead0) {
        tk_value *idx[2] = {row, s->c0};
        tk_copy_to_shared(k, stage, s->X, idx, 0.0f, TK_COPY_ASYNC);
        return;
    }
    tk_value *idx[3] = {tk_add(k, s->lead0, tk_mul(k, r, s->dlead)), row, s->c0};
    tk_copy_to_shared(k, stage, s->X, idx, 0.0f, TK_COPY_ASYNC);
}

/* Round r's copy when r < nr, and a commit either way (every trip commits
 * one group, so a wait's count names a round). */
static void copy_if(const tk_slabs *s, tk_value *ring, tk_value *r) {
    tk_kernel *k = s->k;
    tk_if_begin(k, tk_lt(k, r, s->nr));
    copy_slab(s, ring, r);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* Rounds r+1 .. r+STAGES-1 are on their way while round r is read: with
 * two stages (one slab in flight, 8 KiB a block of 8 warps) the H100 ran
 * GPT-2's 16384 x 768 bias gradient at 23 us, a third of its copy line
 * (bench/RESULTS.md, session 25): each round waited out a whole load. */
tk_value *tk_slabs_sum(const tk_slabs *s) {
    tk_kernel *k = s->k;
    tk_value *ring = tk_shared(k, s->dt, ROWS, SC * s->W, TK_SMEM_SWIZZLE, STAGES);
    for (int j = 0; j < STAGES - 1; j++) copy_if(s, ring, i64c(k, j));
    tk_type f = tk_tile_type(TK_F32, ROWS, SC, TK_WARP, TK_ROW);
    tk_value *init[1] = {tk_zeros(k, f)}, *cur[1], *sum[1];
    tk_value *r = tk_for_begin(k, i64c(k, 0), s->nr, i64c(k, 1), 1, init, cur);
    tk_async_wait(k, STAGES - 2);
    /* round r landed for every warp, and every warp is done with round
     * r - 1, whose stage the copy below refills */
    tk_barrier(k);
    copy_if(s, ring, tk_add(k, r, i64c(k, STAGES - 1)));
    tk_value *at[2] = {i64c(k, 0), tk_mul(k, tk_warp_id_i64(k), i64c(k, SC))};
    tk_value *st = tk_stage(k, ring, tk_rem(k, r, i64c(k, STAGES)));
    tk_value *x = tk_load(k, tk_tile_type(s->dt, ROWS, SC, TK_WARP, TK_ROW), st, at, 0.0f);
    tk_value *next[1] = {tk_add(k, cur[0], s->dt == TK_F32 ? x : tk_cvt(k, x, TK_F32))};
    tk_for_end(k, 1, next, sum);
    return sum[0];
}

/* The block's first column along grid dimension `dim`, and this warp's. */
static tk_value *block_c0(tk_kernel *k, int dim, int W) {
    return tk_mul(k, tk_block_id_i64(k, dim), i64c(k, (int64_t)SC * W));
}

static tk_value *warp_c0(tk_kernel *k, tk_value *c0) {
    return tk_add(k, c0, tk_mul(k, tk_warp_id_i64(k), i64c(k, SC)));
}

/* ---- the kernels --------------------------------------------------------------- */
static void build_partial(tk_kernel *k, tk_dtype dt, int W) {
    tk_value *dY = tk_param_tensor(k, "dY", dt, 2);
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *rb = tk_param_scalar(k, "rb", TK_I64);
    tk_set_grid(k, tk_dim(k, Part, 0), tk_ceil_div(k, tk_dim(k, dY, 1), i64c(k, (int64_t)SC * W)),
                NULL);
    tk_value *p = tk_block_id_i64(k, 0);
    tk_slabs s = {.k = k, .W = W, .dt = dt, .X = dY, .row0 = tk_mul(k, p, rb)};
    s.drow = i64c(k, ROWS), s.c0 = block_c0(k, 1, W), s.nr = tk_ceil_div(k, rb, i64c(k, ROWS));
    tk_value *sum = tk_slabs_sum(&s); /* rows past M: 0 */
    tk_value *at[2] = {p, warp_c0(k, s.c0)};
    tk_store(k, Part, at, tk_col_sum(k, sum));
}

static void build_reduce(tk_kernel *k, int W) {
    tk_value *Part = tk_param_tensor(k, "Part", TK_F32, 2);
    tk_value *dB = tk_param_tensor(k, "dB", TK_F32, 1);
    tk_value *acc = tk_param_scalar(k, "acc", TK_I32);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, dB, 0), i64c(k, (int64_t)SC * W)), NULL, NULL);
    tk_slabs s = {.k = k, .W = W, .dt = TK_F32, .X = Part, .row0 = i64c(k, 0)};
    s.drow = i64c(k, ROWS), s.c0 = block_c0(k, 0, W);
    s.nr = tk_ceil_div(k, tk_dim(k, Part, 0), i64c(k, ROWS));
    tk_value *sum = tk_col_sum(k, tk_slabs_sum(&s));
    tk_value *at[1] = {warp_c0(k, s.c0)};
    tk_type v = tk_vec_type(TK_F32, SC, TK_PER_COL, TK_WARP, TK_ROW);
    tk_if_begin(k, tk_ne(k, acc, tk_const_i32(k, 0)));
    tk_value *then[1] = {tk_add(k, tk_load(k, v, dB, at, 0.0f), sum)}, *res[1], *no[1] = {sum};
    tk_else(k, 1, then);
    tk_if_end(k, 1, no, res);
    tk_store(k, dB, at, res[0]);
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_bias_grad_config *c) {
    if (c->part != TK_BIAS_GRAD_PARTIAL && c->part != TK_BIAS_GRAD_REDUCE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: part is %d; expected TK_BIAS_GRAD_PARTIAL or _REDUCE", fn,
                                c->part);
    tk_dtype dt = c->dtype;
    if (c->part == TK_BIAS_GRAD_PARTIAL && dt != TK_BF16 && dt != TK_F16 && dt != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16, TK_F16 or TK_F32", fn,
                                tk_dtype_name(dt));
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0 (the default), 1, 2, 4, 8 or 16", fn,
                                w);
    return TK_OK;
}

tk_status tk_bias_grad_build(tk_ctx *ctx, const tk_bias_grad_config *cfg, tk_kernel **out) {
    const char *fn = "tk_bias_grad_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    int W = cfg->warps ? cfg->warps : TK_BIAS_GRAD_WARPS;
    bool part = cfg->part == TK_BIAS_GRAD_PARTIAL;
    char name[64];
    if (part)
        snprintf(name, sizeof name, "tk_bias_grad_partial_%s_w%d", tk_dtype_name(cfg->dtype), W);
    else
        snprintf(name, sizeof name, "tk_bias_grad_reduce_w%d", W);
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, W, &k))) return s;
    if (part)
        build_partial(k, cfg->dtype, W);
    else
        build_reduce(k, W);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
