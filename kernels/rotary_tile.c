/* A rotary embedding applied to a register tile inside another kernel (the
 * attention forward rotates its query rows this way: kernels/attention.c,
 * attention_hopper.c). The conventions of kernels/rotary.c, which rotates
 * whole tensors: θ_i = pos · base^(-2i/rd) in f32, inv_freq = exp2(2i ·
 * -log2(base)/rd), or cos and sin read from [T, rd/2] f32 tables at row pos
 * (rows outside the table read 0); NeoX pairs (i, i + rd/2), GPT-J pairs
 * (2i, 2i + 1); each result rounded once to the dtype; columns rd..
 * untouched.
 *
 * The rows are rotated by 16-column blocks, each in f32 on its own, taken
 * from and given back to the caller one by one (tk_rope_io: slices of a
 * register tile, or a shared tile's block loaded and stored in place), so
 * at most a pair of blocks, their cos and sin are live (a [16, 256] row
 * band's f32 angles alone would be 256 registers a thread). A GPT-J block's
 * partners are its own columns swapped (tk_pair_swap renames registers). A
 * NeoX block's partners lie rd/2 columns away: when rd/2 is a multiple of
 * 16 the blocks at c and c + rd/2 are each other's partners and share their
 * angles, computed once for both as rotary.c does; otherwise a block can
 * straddle rd/2 and its partners straddle blocks, and they are loaded again
 * from the tensor the rows came from, at columns c ± rd/2 (masked loads: a
 * negative column reads 0), and picked per column. So are the tables'
 * columns of a straddling block. */
#include "rotary_parts.h"

#define BW 16 /* a block's columns */

typedef struct rt {
    tk_kernel *k;
    const tk_rope *r;
    tk_dtype dt;
    tk_owner owner;
    int R, half, rd;
    const tk_rope_io *io;
    tk_value *pos0;
    tk_value *pos; /* PER_ROW f32 positions (angles from base) */
    int nat;
    tk_value *const *at;
} rt;

static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }

static tk_type blk_t(const rt *a, tk_dtype dt) {
    return tk_tile_type(dt, a->R, BW, a->owner, TK_ROW);
}

/* The block's column indices c0 .. c0 + 15 (f32, one per column). */
static tk_value *cols_of(const rt *a, int c0) {
    tk_type vt = tk_vec_type(TK_F32, BW, TK_PER_COL, a->owner, TK_ROW);
    return tk_add(a->k, tk_iota(a->k, vt, TK_PER_COL), f32c(a->k, (float)c0));
}

/* An f32 tile of the block's shape from the vector v (per row or column). */
static tk_value *spread(const rt *a, tk_value *v) {
    return tk_add(a->k, tk_zeros(a->k, blk_t(a, TK_F32)), v);
}

/* Whether every column of the block at c0 lies in NeoX's first half (1),
 * its second (0), or the block straddles rd/2 (-1). */
static int side(const rt *a, int c0) { return c0 + BW <= a->half ? 1 : c0 >= a->half ? 0 : -1; }

/* The straddling block's columns in the first half, as a tile mask. */
static tk_value *first_half(const rt *a, tk_value *j) {
    return tk_lt(a->k, spread(a, j), f32c(a->k, (float)a->half));
}

/* A [R, 16] tile of the tensor the tile came from at its rows, from
 * column col (i64; outside the tensor reads 0). */
static tk_value *src_load(const rt *a, tk_value *col) {
    tk_value *idx[4];
    for (int i = 0; i < a->nat - 1; i++) idx[i] = a->at[i];
    idx[a->nat - 1] = col;
    return tk_load_n(a->k, blk_t(a, a->dt), a->r->src, a->nat, idx, 0.0f);
}

/* A [R, 16] tile of the table t at rows pos0.., from column col. */
static tk_value *table_load(const rt *a, tk_value *t, tk_value *col) {
    tk_value *idx[2] = {a->pos0, col};
    return tk_load(a->k, blk_t(a, TK_F32), t, idx, 0.0f);
}

/* NeoX: a block's first-half columns c read column c + lo of the table t
 * (NULL: of the source tensor), its second-half ones column c + hi; a
 * straddling block reads both and picks per column. */
static tk_value *neox_read(const rt *a, int c0, tk_value *j, tk_value *t, int lo, int hi) {
    tk_kernel *k = a->k;
    int s = side(a, c0);
    tk_value *v[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        if (s >= 0 && i == s) continue; /* the block has no columns of that half */
        tk_value *col = i64c(k, c0 + (i ? hi : lo));
        v[i] = t ? table_load(a, t, col) : src_load(a, col);
    }
    return s >= 0 ? v[!s] : tk_select(k, first_half(a, j), v[0], v[1]);
}

/* The partners of the block at c0 (f32), x's columns c ± rd/2, read again
 * from the source tensor. */
static tk_value *neox_partner(const rt *a, int c0, tk_value *j) {
    return tk_cvt(a->k, neox_read(a, c0, j, NULL, a->half, -a->half), TK_F32);
}

/* The tables' cos and sin for the block at c0: row pos0 + r, column c
 * (first half) or c - rd/2 (second). */
static void table_angles(const rt *a, int c0, tk_value *j, tk_value **cs, tk_value **sn) {
    *cs = neox_read(a, c0, j, a->r->cos, 0, -a->half);
    *sn = neox_read(a, c0, j, a->r->sin, 0, -a->half);
}

/* cos and sin from base, as rotary.c's angles: 2i = 2j (NeoX, j the column
 * in its half) or min(j, j ^ 1) (GPT-J). */
static void base_angles(const rt *a, int c0, tk_value *j, tk_value **cs, tk_value **sn) {
    tk_kernel *k = a->k;
    tk_value *two_i;
    if (a->r->style == TK_ROTARY_GPTJ) {
        two_i = tk_min(k, j, tk_pair_swap(k, j));
    } else {
        int s = side(a, c0);
        tk_value *h = s == 1 ? j : tk_sub(k, j, f32c(k, (float)a->half));
        if (s < 0) h = tk_select(k, tk_lt(k, j, f32c(k, (float)a->half)), j, h);
        two_i = tk_mul(k, h, f32c(k, 2.0f));
    }
    tk_value *step = tk_div(k, tk_neg(k, tk_log2(k, a->r->base)), f32c(k, (float)a->rd));
    tk_value *inv_freq = tk_exp2(k, tk_mul(k, two_i, step));
    tk_value *theta = tk_mul(k, spread(a, a->pos), inv_freq);
    *cs = tk_cos(k, theta);
    *sn = tk_sin(k, theta);
}

/* sin with the pair's sign: out = x·cos + partner·(±sin). NeoX: - on the
 * first half; GPT-J: j - (j ^ 1), -1 on the even member, +1 on the odd. */
static tk_value *signed_sin(const rt *a, int c0, tk_value *j, tk_value *sn) {
    tk_kernel *k = a->k;
    if (a->r->style == TK_ROTARY_GPTJ) return tk_mul(k, sn, tk_sub(k, j, tk_pair_swap(k, j)));
    int s = side(a, c0);
    if (s >= 0) return s ? tk_neg(k, sn) : sn;
    return tk_select(k, first_half(a, j), tk_neg(k, sn), sn);
}

/* The rows' block at column c in f32, and the rotated one back. */
static tk_value *block(const rt *a, int c) {
    return tk_cvt(a->k, a->io->get(a->io->user, c), TK_F32);
}

static void put(const rt *a, int c, tk_value *y) {
    a->io->put(a->io->user, c, tk_cvt(a->k, y, a->dt));
}

static void angles(const rt *a, int c0, tk_value *j, tk_value **cs, tk_value **sn) {
    if (a->r->cos)
        table_angles(a, c0, j, cs, sn);
    else
        base_angles(a, c0, j, cs, sn);
}

/* NeoX with rd/2 a multiple of 16: the blocks at c0 (first half) and c0 +
 * rd/2 are each other's partners and share their angles, computed (or
 * read) once for both; both are taken before either is given back. */
static void rotate_pair(const rt *a, int c0) {
    tk_kernel *k = a->k;
    tk_value *cs, *sn, *x1 = block(a, c0), *x2 = block(a, c0 + a->half);
    angles(a, c0, cols_of(a, c0), &cs, &sn);
    put(a, c0, tk_sub(k, tk_mul(k, x1, cs), tk_mul(k, x2, sn)));
    put(a, c0 + a->half, tk_add(k, tk_mul(k, x2, cs), tk_mul(k, x1, sn)));
}

/* The block at c0 (c0 < rd) on its own (GPT-J; NeoX when rd/2 is not a
 * multiple of 16). */
static void rotate_block(const rt *a, int c0) {
    tk_kernel *k = a->k;
    tk_value *j = cols_of(a, c0), *cs, *sn, *xb = block(a, c0);
    angles(a, c0, j, &cs, &sn);
    bool gptj = a->r->style == TK_ROTARY_GPTJ;
    tk_value *pb = gptj ? tk_pair_swap(k, xb) : neox_partner(a, c0, j);
    tk_value *y = tk_add(k, tk_mul(k, xb, cs), tk_mul(k, pb, signed_sin(a, c0, j, sn)));
    if (c0 + BW > a->rd) /* the block ends past rd: its columns there stay x */
        y = tk_select(k, tk_lt(k, spread(a, j), f32c(k, (float)a->rd)), y, xb);
    put(a, c0, y);
}

/* Positions of the rows (angles from base): pos0 + r in f32, as rotary.c. */
static tk_value *row_positions(const rt *a) {
    tk_type vt = tk_vec_type(TK_F32, a->R, TK_PER_ROW, a->owner, TK_ROW);
    return tk_add(a->k, tk_iota(a->k, vt, TK_PER_ROW), tk_cvt(a->k, a->pos0, TK_F32));
}

void tk_rope_rows(tk_kernel *k, const tk_rope *r, tk_type bt, const tk_rope_io *io, tk_value *pos0,
                  int nat, tk_value *const *at) {
    rt a = {.k = k,
            .r = r,
            .dt = bt.dtype,
            .owner = bt.owner,
            .R = bt.rows,
            .half = r->rotary_dim / 2,
            .rd = r->rotary_dim,
            .io = io,
            .pos0 = pos0,
            .nat = nat,
            .at = at};
    if (!r->cos) a.pos = row_positions(&a);
    if (r->style == TK_ROTARY_NEOX && a.half % BW == 0)
        for (int c0 = 0; c0 < a.half; c0 += BW) rotate_pair(&a, c0);
    else
        for (int c0 = 0; c0 < a.rd; c0 += BW) rotate_block(&a, c0);
}

/* ---- a register tile's blocks ---------------------------------------------- */
typedef struct tile_io {
    tk_kernel *k;
    tk_value *x;
    int rows;
    tk_value *blk[256 / BW]; /* the rotated blocks */
} tile_io;

static tk_value *tile_get(void *u, int c0) {
    tile_io *t = u;
    return tk_slice(t->k, t->x, 0, c0, t->rows, BW);
}

static void tile_put(void *u, int c0, tk_value *b) { ((tile_io *)u)->blk[c0 / BW] = b; }

tk_value *tk_rope_tile(tk_kernel *k, const tk_rope *r, tk_value *x, tk_type xt, tk_value *pos0,
                       int nat, tk_value *const *at) {
    tile_io t = {.k = k, .x = x, .rows = xt.rows};
    tk_rope_io io = {tile_get, tile_put, &t};
    tk_rope_rows(k, r, tk_tile_type(xt.dtype, xt.rows, BW, xt.owner, TK_ROW), &io, pos0, nat, at);
    tk_value *out = NULL;
    for (int c0 = 0; c0 < xt.cols; c0 += BW) { /* blocks past rd were never taken */
        tk_value *b = t.blk[c0 / BW] ? t.blk[c0 / BW] : tile_get(&t, c0);
        out = out ? tk_concat(k, 1, out, b) : b;
    }
    return out;
}

/* ---- a shared tile's rows, in place ------------------------------------------ */
typedef struct smem_io {
    tk_kernel *k;
    tk_value *sh, *row0;
    tk_type bt;
} smem_io;

static tk_value *smem_get(void *u, int c0) {
    smem_io *m = u;
    tk_value *at[2] = {m->row0, tk_const_i32(m->k, c0)};
    return tk_load(m->k, m->bt, m->sh, at, 0.0f);
}

static void smem_put(void *u, int c0, tk_value *b) {
    smem_io *m = u;
    tk_value *at[2] = {m->row0, tk_const_i32(m->k, c0)};
    tk_store(m->k, m->sh, at, b);
}

/* A warp's rows go 16 at a time: half the live registers of 32 rows, which
 * the mma.sync kernel's loop-invariant addresses would otherwise pay for in
 * spills (ptxas, sm_80: 368 bytes of reloads with 32-row blocks of tables). */
void tk_rope_shared(tk_kernel *k, const tk_rope *r, tk_value *sh, tk_value *row0, tk_type bt,
                    tk_value *pos0, int nat, tk_value *const *at) {
    int band = bt.owner == TK_WARP ? 16 : bt.rows;
    tk_type b16 = tk_tile_type(bt.dtype, band, BW, bt.owner, TK_ROW);
    for (int r0 = 0; r0 < bt.rows; r0 += band) {
        tk_value *at2[4], *d = tk_const_i32(k, r0);
        for (int i = 0; i < nat; i++) at2[i] = at[i];
        at2[nat - 2] = r0 ? tk_add(k, at[nat - 2], d) : at[nat - 2];
        smem_io m = {.k = k, .sh = sh, .row0 = r0 ? tk_add(k, row0, d) : row0, .bt = b16};
        tk_rope_io io = {smem_get, smem_put, &m};
        tk_value *p0 = r0 ? tk_add(k, pos0, tk_const_i64(k, r0)) : pos0;
        tk_rope_rows(k, r, b16, &io, p0, nat, at2);
    }
}
