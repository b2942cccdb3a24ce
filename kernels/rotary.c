/* Rotary position embeddings (RoPE), forward and backward (rotation by -θ).
 * The contract (parameters in order, grid) is in tk/tk_kernels.h ("Rotary
 * embeddings").
 *
 * A memory-bound kernel: each element is read once and written once, so the
 * shape of the work is about bytes in flight and the direct load path. A
 * warp owns 16 tokens of one batch entry and 8 heads. The angles depend on
 * the token and the pair, not on the head, so the warp computes (or loads)
 * each chunk's cos and sin once and applies them to all 8 heads. Tiles are
 * 16 x 32 ROW tiles loaded straight from global memory: with a unit column
 * stride and whole tiles, one 32-bit access per bf16/f16 pair, no checks.
 * Each group of 8 tiles (NeoX: both halves of 4 heads; GPT-J: 8 heads) is
 * loaded before any of it is computed, so 8 KiB per warp are in flight.
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
#define HPW   8  /* heads a warp */
#define GROUP 8  /* tiles loaded before they are computed */
#define CW    32 /* columns a tile: NeoX half-columns, GPT-J columns */

typedef struct rot {
    tk_kernel *k;
    const tk_rotary_config *c;
    tk_value *X, *Out, *Cos, *Sin, *Pos, *base;
    tk_value *b, *h0, *n0; /* the warp's batch entry, first head, first token */
    tk_value *pos;         /* PER_ROW f32: the tokens' positions (no tables) */
} rot;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }

static tk_type tile_t(tk_dtype dt) { return tk_tile_type(dt, ROWS, CW, TK_WARP, TK_ROW); }

static void ids(rot *a) {
    tk_kernel *k = a->k;
    tk_value *B = tk_dim(k, a->X, 0), *H = tk_dim(k, a->X, 1), *N = tk_dim(k, a->X, 2);
    tk_set_grid(k, tk_ceil_div(k, N, i64c(k, WARPS * ROWS)), tk_ceil_div(k, H, i64c(k, HPW)), B);
    tk_value *tile = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, WARPS)), tk_warp_id_i64(k));
    a->n0 = tk_mul(k, tile, i64c(k, ROWS));
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

/* cos and sin of the chunk at column c0 (i64; NeoX: of the half), as f32
 * tiles; *sn carries the direction (inverse) and, for GPT-J, the pair signs. */
static void angles(rot *a, tk_value *c0, tk_value **cs, tk_value **sn) {
    tk_kernel *k = a->k;
    const tk_rotary_config *c = a->c;
    tk_value *sign = c->inverse ? f32c(k, -1.0f) : NULL;
    if (a->Cos) { /* NeoX only: rows n0.., columns c0.. of the tables */
        tk_value *idx[2] = {a->n0, c0};
        *cs = tk_load(k, tile_t(TK_F32), a->Cos, idx, 0.0f);
        *sn = tk_load(k, tile_t(TK_F32), a->Sin, idx, 0.0f);
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

/* Head h0 + h (h: i64) at column c0 (i64) of V. */
static tk_value *load_x(rot *a, tk_value *V, tk_value *h, tk_value *c0) {
    tk_kernel *k = a->k;
    tk_value *idx[4] = {a->b, tk_add(k, a->h0, h), a->n0, c0};
    return tk_load(k, tile_t(a->c->dtype), V, idx, 0.0f);
}

static void store_x(rot *a, tk_value *V, tk_value *h, tk_value *c0, tk_value *v) {
    tk_kernel *k = a->k;
    tk_value *idx[4] = {a->b, tk_add(k, a->h0, h), a->n0, c0};
    tk_store(k, V, idx, tk_cvt(k, v, a->c->dtype));
}

static tk_value *cols(rot *a, tk_value *V, int64_t start, int64_t len) {
    return tk_narrow(a->k, V, 3, i64c(a->k, start), i64c(a->k, len));
}

/* The chunk and head loops are unrolled here, in C. As run-time loops
 * (tk_for) the code is 4x smaller, but LLVM then hoists the per-element
 * addresses of the edge path out of the loops and ptxas spills (up to 2 KB
 * with positions). */
static tk_value *head(rot *a, int g, int i) { return i64c(a->k, g + i); }

/* NeoX: per chunk c0 of the halves its angles (made before the loads, so
 * that the trigonometry's temporaries are dead while the tiles are in
 * flight: fewer registers), then groups of GROUP/2 heads, both halves. */
static void neox(rot *a, tk_value *Dst) {
    tk_kernel *k = a->k;
    int half = a->c->rotary_dim / 2;
    tk_value *in[2] = {cols(a, a->X, 0, half), cols(a, a->X, half, half)};
    tk_value *out[2] = {cols(a, Dst, 0, half), cols(a, Dst, half, half)};
    for (int c = 0; c < half; c += CW) {
        tk_value *c0 = i64c(k, c), *cs, *sn, *x[GROUP];
        angles(a, c0, &cs, &sn);
        for (int g = 0; g < HPW; g += GROUP / 2) {
            for (int i = 0; i < GROUP; i++) x[i] = load_x(a, in[i & 1], head(a, g, i / 2), c0);
            for (int i = 0; i < GROUP; i += 2) {
                tk_value *x1 = tk_cvt(k, x[i], TK_F32), *x2 = tk_cvt(k, x[i + 1], TK_F32);
                tk_value *o1 = tk_sub(k, tk_mul(k, x1, cs), tk_mul(k, x2, sn));
                tk_value *o2 = tk_add(k, tk_mul(k, x2, cs), tk_mul(k, x1, sn));
                store_x(a, out[0], head(a, g, i / 2), c0, o1);
                store_x(a, out[1], head(a, g, i / 2), c0, o2);
            }
        }
    }
}

/* GPT-J: out = x·cos + swap(x)·(±sin), chunk c0 of GROUP heads. */
static void gptj(rot *a, tk_value *Dst) {
    tk_kernel *k = a->k;
    int rd = a->c->rotary_dim;
    tk_value *in = cols(a, a->X, 0, rd), *out = cols(a, Dst, 0, rd);
    for (int c = 0; c < rd; c += CW) {
        tk_value *c0 = i64c(k, c), *cs, *sn, *x[GROUP];
        angles(a, c0, &cs, &sn);
        for (int g = 0; g < HPW; g += GROUP) {
            for (int i = 0; i < GROUP; i++) x[i] = load_x(a, in, head(a, g, i), c0);
            for (int i = 0; i < GROUP; i++) {
                tk_value *xf = tk_cvt(k, x[i], TK_F32);
                tk_value *o = tk_add(k, tk_mul(k, xf, cs), tk_mul(k, tk_pair_swap(k, xf), sn));
                store_x(a, out, head(a, g, i), c0, o);
            }
        }
    }
}

/* Out of place: columns rd .. D copied unchanged, GROUP tiles at a time. */
static void pass_through(rot *a) {
    int rd = a->c->rotary_dim, rest = a->c->head_dim - rd;
    if (rest <= 0) return;
    tk_value *in = cols(a, a->X, rd, rest), *out = cols(a, a->Out, rd, rest), *x[GROUP];
    for (int c = 0; c < rest; c += CW)
        for (int g = 0; g < HPW; g += GROUP) {
            tk_value *c0 = i64c(a->k, c);
            for (int i = 0; i < GROUP; i++) x[i] = load_x(a, in, head(a, g, i), c0);
            for (int i = 0; i < GROUP; i++) store_x(a, out, head(a, g, i), c0, x[i]);
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
    if (c->tables && c->positions)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: tables with positions is not supported: tables are read "
                                "at row n; give positions with a base",
                                fn);
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
    /* Without a bound ptxas sometimes settles at 168 registers and spills;
     * 8 tiles in flight want more, and 2 blocks of 128 threads fit anyway. */
    tk_kernel_set_maxnreg(k, 255);
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
