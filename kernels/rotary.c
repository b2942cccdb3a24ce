/* Rotary position embeddings (RoPE), forward and backward (rotation by -θ).
 * The contract (parameters in order, grid) is in tk/tk_kernels.h ("Rotary
 * embeddings").
 *
 * A memory-bound kernel: each element is read once and written once. A
 * block owns 64 tokens of one batch entry and 8 heads, a warp 16 of the
 * tokens. The angles depend on the token and the pair, not on the head, so
 * a warp computes (or loads) each chunk's cos and sin once for all 8 heads.
 * A chunk (32 columns; NeoX: of each half) of the 8 heads arrives in shared
 * memory by cp.async, 16 tiles (64 KB at most) in flight per block, is
 * rotated there by each warp's 16 rows (ldmatrix / stmatrix) and leaves in
 * 16-byte copies: no register tile meets global memory, so no per-element
 * edge path holds a register. (The first version loaded 16 x 32 tiles
 * straight from global memory, 8 in flight per warp: 200-255 registers,
 * 780 KB of PTX, 0.71 TB/s at 1 x 4096 x 32/8 x 128 on the H200.)
 *
 * NeoX pairs (i, i + rd/2) are two tiles of the same shape, one from each
 * half (tk_narrow cuts the halves, so a chunk never reaches across rd/2).
 * GPT-J pairs (2i, 2i + 1) are adjacent columns, which the ROW fragment
 * holds in one thread: tk_pair_swap gives each element its partner at no
 * cost, and the per-column signs (-sin on the even member, +sin on the odd)
 * fold into the sin tile. In the kernel's own angles the column index comes
 * from tk_iota: inv_freq = exp2(2i · -log2(base)/rd), 2i = min(j, j ^ 1)
 * for GPT-J column j. Positions are a per-row vector: n0 + the row, or the
 * 16 entries of Pos, read as warp-uniform scalars and put in place by row
 * (register tiles hold floats, so an i32 vector is not loaded as such). */
#include <stdbool.h>
#include <stdio.h>

#include "tk/tk_kernels.h"

#define ROWS  16 /* a warp's tokens */
#define WARPS 4
#define TOK   (ROWS * WARPS) /* a block's tokens */
#define HPW   8              /* heads a block */
#define CW    32             /* columns a chunk: NeoX half-columns, GPT-J columns */

typedef struct rot {
    tk_kernel *k;
    const tk_rotary_config *c;
    tk_value *X, *Out, *Cos, *Sin, *Pos, *base;
    tk_value *b, *h0, *n0; /* the warp's batch entry, first head, first token */
    tk_value *nb0, *r0;    /* the block's first token, the warp's first row     */
    tk_value *sh;          /* shared: a chunk's tiles [TOK, CW], 2·HPW stages  */
    tk_value *pos;         /* PER_ROW f32: the tokens' positions (no tables) */
} rot;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }

static tk_type tile_t(tk_dtype dt) { return tk_tile_type(dt, ROWS, CW, TK_WARP, TK_ROW); }

static void ids(rot *a) {
    tk_kernel *k = a->k;
    tk_value *B = tk_dim(k, a->X, 0), *H = tk_dim(k, a->X, 1), *N = tk_dim(k, a->X, 2);
    tk_set_grid(k, tk_ceil_div(k, N, i64c(k, WARPS * ROWS)), tk_ceil_div(k, H, i64c(k, HPW)), B);
    a->nb0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, TOK));
    a->r0 = tk_mul(k, tk_warp_id_i64(k), i64c(k, ROWS));
    a->n0 = tk_add(k, a->nb0, a->r0);
    a->h0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, HPW));
    a->b = tk_block_id_i64(k, 2);
    tk_value_set_name(a->n0, "n0");
    tk_value_set_name(a->h0, "h0");
}

/* The 16 tokens' positions: n0 + row, or Pos[b, n0 + row] (0 past N). */
static void positions(rot *a) {
    tk_kernel *k = a->k;
    tk_type vt = tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_value *row = tk_iota(k, vt, TK_PER_ROW);
    if (!a->Pos) {
        a->pos = tk_add(k, row, tk_cvt(k, a->n0, TK_F32));
        return;
    }
    tk_value *acc = tk_zeros(k, vt);
    for (int r = 0; r < ROWS; r++) {
        tk_value *idx[2] = {a->b, tk_add(k, a->n0, i64c(k, r))};
        tk_value *p = tk_cvt(k, tk_load(k, tk_scalar_type(TK_I32), a->Pos, idx, 0.0f), TK_F32);
        acc = tk_select(k, tk_eq(k, row, f32c(k, (float)r)), p, acc);
    }
    a->pos = acc;
}

/* The tables' columns c0.. for the warp's 16 tokens: rows n0.., or with
 * positions each token's row Pos[b, n], gathered row by row (a vector load
 * each, put in its row by a select; a position past the table reads 0). */
static void table_rows(rot *a, tk_value *c0, tk_value **cs, tk_value **sn) {
    tk_kernel *k = a->k;
    if (!a->Pos) {
        tk_value *idx[2] = {a->n0, c0};
        *cs = tk_load(k, tile_t(TK_F32), a->Cos, idx, 0.0f);
        *sn = tk_load(k, tile_t(TK_F32), a->Sin, idx, 0.0f);
        return;
    }
    tk_type vt = tk_vec_type(TK_F32, CW, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *zero = tk_zeros(k, tile_t(TK_F32));
    tk_value *row = tk_add(
        k, zero, tk_iota(k, tk_vec_type(TK_F32, ROWS, TK_PER_ROW, TK_WARP, TK_ROW), TK_PER_ROW));
    *cs = *sn = zero;
    for (int r = 0; r < ROWS; r++) {
        tk_value *ip[2] = {a->b, tk_add(k, a->n0, i64c(k, r))};
        tk_value *p = tk_load(k, tk_scalar_type(TK_I32), a->Pos, ip, 0.0f);
        tk_value *it[2] = {p, c0}, *mine = tk_eq(k, row, f32c(k, (float)r));
        *cs = tk_select(k, mine, tk_add(k, zero, tk_load(k, vt, a->Cos, it, 0.0f)), *cs);
        *sn = tk_select(k, mine, tk_add(k, zero, tk_load(k, vt, a->Sin, it, 0.0f)), *sn);
    }
}

/* cos and sin of the chunk at column c0 (i64; NeoX: of the half), as f32
 * tiles; *sn carries the direction (inverse) and, for GPT-J, the pair signs. */
static void angles(rot *a, tk_value *c0, tk_value **cs, tk_value **sn) {
    tk_kernel *k = a->k;
    const tk_rotary_config *c = a->c;
    tk_value *sign = c->inverse ? f32c(k, -1.0f) : NULL;
    if (a->Cos) { /* NeoX only: rows n0.. (or the tokens' positions), columns c0.. */
        table_rows(a, c0, cs, sn);
        if (sign) *sn = tk_neg(k, *sn);
        return;
    }
    tk_type vt = tk_vec_type(TK_F32, CW, TK_PER_COL, TK_WARP, TK_ROW);
    tk_value *j = tk_add(k, tk_iota(k, vt, TK_PER_COL), tk_cvt(k, c0, TK_F32));
    bool gptj = c->style == TK_ROTARY_GPTJ;
    /* NeoX: 2i = 2j; GPT-J: 2i = min(j, j ^ 1) */
    tk_value *two_i = gptj ? tk_min(k, j, tk_pair_swap(k, j)) : tk_mul(k, j, f32c(k, 2.0f));
    tk_value *step = tk_div(k, tk_neg(k, tk_log2(k, a->base)), f32c(k, (float)c->rotary_dim));
    tk_value *inv_freq = tk_exp2(k, tk_mul(k, two_i, step));
    tk_value *theta = tk_mul(k, tk_add(k, tk_zeros(k, tile_t(TK_F32)), a->pos), inv_freq);
    *cs = tk_cos(k, theta);
    *sn = tk_sin(k, theta);
    if (gptj) { /* j - (j ^ 1): -1 on the even member, +1 on the odd */
        tk_value *s = tk_sub(k, j, tk_pair_swap(k, j));
        *sn = tk_mul(k, *sn, sign ? tk_neg(k, s) : s);
    } else if (sign) {
        *sn = tk_neg(k, *sn);
    }
}

/* Stage i (i64) of the chunk's tiles. */
static tk_value *stage(rot *a, tk_value *i) { return tk_stage(a->k, a->sh, i); }

/* The block's tile of head h0 + h at column c0 of V: into stage i, out of
 * it. */
static tk_value **tile_idx(rot *a, tk_value *h, tk_value *c0, tk_value *idx[4]) {
    idx[0] = a->b, idx[1] = tk_add(a->k, a->h0, h), idx[2] = a->nb0, idx[3] = c0;
    return idx;
}

static void copy_in(rot *a, tk_value *i, tk_value *V, tk_value *h, tk_value *c0) {
    tk_value *idx[4];
    tk_copy_to_shared_n(a->k, stage(a, i), V, 4, tile_idx(a, h, c0, idx), 0.0f, TK_COPY_ASYNC);
}

static void copy_out(rot *a, tk_value *i, tk_value *V, tk_value *h, tk_value *c0) {
    tk_value *idx[4];
    tk_copy_to_global_n(a->k, V, 4, tile_idx(a, h, c0, idx), stage(a, i));
}

/* Every copy of the chunk has landed and is visible to every warp. */
static void arrive(rot *a) {
    tk_async_commit(a->k);
    tk_async_wait(a->k, 0);
    tk_barrier(a->k);
}

/* This warp's rows of stage i in f32, and back (rounded to the dtype). */
static tk_value *mine(rot *a, tk_value *i) {
    tk_value *at[2] = {a->r0, i64c(a->k, 0)};
    return tk_cvt(a->k, tk_load(a->k, tile_t(a->c->dtype), stage(a, i), at, 0.0f), TK_F32);
}

static void put(rot *a, tk_value *i, tk_value *v) {
    tk_value *at[2] = {a->r0, i64c(a->k, 0)};
    tk_store(a->k, stage(a, i), at, tk_cvt(a->k, v, a->c->dtype));
}

static tk_value *cols(rot *a, tk_value *V, int64_t start, int64_t len) {
    return tk_narrow(a->k, V, 3, i64c(a->k, start), i64c(a->k, len));
}

/* A run-time loop over the block's heads (rolled: 16 copies unrolled kept
 * their addresses live, 168 registers and spills). */
static tk_value *heads_begin(rot *a) {
    return tk_for_begin(a->k, i64c(a->k, 0), i64c(a->k, HPW), i64c(a->k, 1), 0, NULL, NULL);
}

static void heads_end(rot *a) { tk_for_end(a->k, 0, NULL, NULL); }

/* Stage of head h's half hf (NeoX: two a head). */
static tk_value *two(rot *a, tk_value *h, int hf) {
    return tk_add(a->k, tk_mul(a->k, h, i64c(a->k, 2)), i64c(a->k, hf));
}

/* NeoX: per chunk c0 of the halves, the 8 heads' two tiles (stages 2h, 2h +
 * 1) are copied in while the warp makes the chunk's angles. */
static void neox(rot *a, tk_value *Dst) {
    tk_kernel *k = a->k;
    int half = a->c->rotary_dim / 2;
    tk_value *in[2] = {cols(a, a->X, 0, half), cols(a, a->X, half, half)};
    tk_value *out[2] = {cols(a, Dst, 0, half), cols(a, Dst, half, half)};
    for (int c = 0; c < half; c += CW) {
        tk_value *c0 = i64c(k, c), *cs, *sn, *h;
        h = heads_begin(a);
        for (int hf = 0; hf < 2; hf++) copy_in(a, two(a, h, hf), in[hf], h, c0);
        heads_end(a);
        angles(a, c0, &cs, &sn);
        arrive(a);
        h = heads_begin(a);
        {
            tk_value *x1 = mine(a, two(a, h, 0)), *x2 = mine(a, two(a, h, 1));
            put(a, two(a, h, 0), tk_sub(k, tk_mul(k, x1, cs), tk_mul(k, x2, sn)));
            put(a, two(a, h, 1), tk_add(k, tk_mul(k, x2, cs), tk_mul(k, x1, sn)));
        }
        heads_end(a);
        tk_barrier(k);
        h = heads_begin(a);
        for (int hf = 0; hf < 2; hf++) copy_out(a, two(a, h, hf), out[hf], h, c0);
        heads_end(a);
        tk_barrier(k); /* the stages are read out before the next chunk's copies */
    }
}

/* GPT-J: out = x·cos + swap(x)·(±sin), chunk c0 of the 8 heads. */
static void gptj(rot *a, tk_value *Dst) {
    tk_kernel *k = a->k;
    int rd = a->c->rotary_dim;
    tk_value *in = cols(a, a->X, 0, rd), *out = cols(a, Dst, 0, rd);
    for (int c = 0; c < rd; c += CW) {
        tk_value *c0 = i64c(k, c), *cs, *sn, *h;
        h = heads_begin(a);
        copy_in(a, h, in, h, c0);
        heads_end(a);
        angles(a, c0, &cs, &sn);
        arrive(a);
        h = heads_begin(a);
        {
            tk_value *x = mine(a, h);
            put(a, h, tk_add(k, tk_mul(k, x, cs), tk_mul(k, tk_pair_swap(k, x), sn)));
        }
        heads_end(a);
        tk_barrier(k);
        h = heads_begin(a);
        copy_out(a, h, out, h, c0);
        heads_end(a);
        tk_barrier(k);
    }
}

/* Out of place: columns rd .. D copied unchanged through the stages, two
 * column chunks a trip. */
static void pass_through(rot *a) {
    tk_kernel *k = a->k;
    int rd = a->c->rotary_dim, rest = a->c->head_dim - rd;
    if (rest <= 0) return;
    tk_value *in = cols(a, a->X, rd, rest), *out = cols(a, a->Out, rd, rest), *h;
    for (int c = 0; c < rest; c += 2 * CW) {
        h = heads_begin(a);
        for (int hf = 0; hf < 2; hf++) copy_in(a, two(a, h, hf), in, h, i64c(k, c + CW * hf));
        heads_end(a);
        arrive(a);
        h = heads_begin(a);
        for (int hf = 0; hf < 2; hf++) copy_out(a, two(a, h, hf), out, h, i64c(k, c + CW * hf));
        heads_end(a);
        tk_barrier(k);
    }
}

static void build(rot *a) {
    tk_kernel *k = a->k;
    const tk_rotary_config *c = a->c;
    a->X = tk_param_tensor(k, "X", c->dtype, 4);
    a->Out = c->in_place ? NULL : tk_param_tensor(k, "Out", c->dtype, 4);
    a->Cos = c->tables ? tk_param_tensor(k, "Cos", TK_F32, 2) : NULL;
    a->Sin = c->tables ? tk_param_tensor(k, "Sin", TK_F32, 2) : NULL;
    a->Pos = c->positions ? tk_param_tensor(k, "Pos", TK_I32, 2) : NULL;
    a->base = c->tables ? NULL : tk_param_scalar(k, "base", TK_F32);
    a->sh = tk_shared(k, c->dtype, TOK, CW, TK_SMEM_SWIZZLE, 2 * HPW);
    ids(a);
    if (!c->tables) positions(a);
    tk_value *dst = c->in_place ? a->X : a->Out;
    if (c->style == TK_ROTARY_NEOX)
        neox(a, dst);
    else
        gptj(a, dst);
    if (!c->in_place) pass_through(a);
}

static tk_status bad(tk_ctx *ctx, tk_status s, const char *fn, const char *what, int v,
                     const char *want) {
    return tk_ctx_set_error(ctx, s, "%s: %s is %d; %s", fn, what, v, want);
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_rotary_config *c) {
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(c->dtype));
    if (c->style != TK_ROTARY_NEOX && c->style != TK_ROTARY_GPTJ)
        return bad(ctx, TK_ERR_INVALID_ARG, fn, "style", c->style,
                   "expected TK_ROTARY_NEOX or TK_ROTARY_GPTJ");
    if (c->head_dim != 64 && c->head_dim != 128 && c->head_dim != 256)
        return bad(ctx, TK_ERR_INVALID_ARG, fn, "head_dim", c->head_dim, "expected 64, 128 or 256");
    if (c->rotary_dim < 2 || c->rotary_dim > c->head_dim || c->rotary_dim % 2)
        return bad(ctx, TK_ERR_INVALID_ARG, fn, "rotary_dim", c->rotary_dim,
                   "expected an even number in 2 .. head_dim");
    const int *flags[4] = {&c->tables, &c->positions, &c->inverse, &c->in_place};
    static const char *names[4] = {"tables", "positions", "inverse", "in_place"};
    for (int i = 0; i < 4; i++)
        if (*flags[i] != 0 && *flags[i] != 1)
            return bad(ctx, TK_ERR_INVALID_ARG, fn, names[i], *flags[i], "expected 0 or 1");
    if (c->tables && c->style == TK_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: tables with TK_ROTARY_GPTJ is not supported; use a base", fn);
    return TK_OK;
}

tk_status tk_rotary_build(tk_ctx *ctx, const tk_rotary_config *cfg, tk_kernel **out) {
    const char *fn = "tk_rotary_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    char name[96];
    snprintf(name, sizeof name, "tk_rotary_%s_%s_d%d_r%d%s%s%s%s",
             cfg->style == TK_ROTARY_GPTJ ? "gptj" : "neox", tk_dtype_name(cfg->dtype),
             cfg->head_dim, cfg->rotary_dim, cfg->tables ? "_tables" : "",
             cfg->positions ? "_pos" : "", cfg->inverse ? "_inv" : "",
             cfg->in_place ? "_inplace" : "");
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, WARPS, &k))) return s;
    /* 64 KB of stages: 3 blocks an SM; the registers need not be fewer */
    tk_kernel_set_maxnreg(k, 168);
    rot a = {.k = k, .c = cfg};
    build(&a);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}
