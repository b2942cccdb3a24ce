/* The embedding backward's sort: the positions ordered by token, stable, so
 * that each token's rows can be summed in position order without atomics
 * (tk/tk_kernels_train.h: TK_EMB_KEYS, HIST, SCAN, SCATTER).
 *
 * A least-significant-digit radix sort, 8 bits a pass, of entries kept as
 * two f32 arrays (a position; the current pass's digit, or after the last
 * pass the whole key): f32 because tiles and vectors hold floats, and
 * exact because positions and keys stay below 2^24. Why not one counting
 * sort by token: its chunk x token count matrix is 64 x 50257 at GPT-2's
 * sizes, where a digit's is 64 x 256; and the IR has no integer tiles,
 * scalar stores or atomic fetch-add, with which one would histogram and
 * scatter per thread. So every per-entry step here is a tile computation
 * over a chunk of 256 entries (counts, offsets, ranks: compares and row
 * sums of 0/1 tiles, exact in f32), and only the final scatter is per
 * entry: a warp moves its 16 entries one at a time, at indices it reads
 * back from its tile as warp-uniform scalars. */
#include <math.h>
#include <stdbool.h>

#include "embedding_parts.h"
#include "tk/tk_kernels.h"

#define CH   TK_EMB_CHUNK /* entries a chunk                            */
#define DIG  256          /* values of a digit                          */
#define PIEC 64           /* a vector's entries (a chunk is 4 of them)   */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }

static tk_type ftile(int rows, int cols, tk_layout l) {
    return tk_tile_type(TK_F32, rows, cols, TK_WARP, l);
}
static tk_type rowv(void) { return tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW); }
static tk_type colv(int n) { return tk_vec_type(TK_F32, n, TK_PER_COL, TK_WARP, TK_ROW); }

/* v as every row (a PER_COL vector) or every column (PER_ROW) of a tile. */
static tk_value *spread(tk_kernel *k, tk_value *v, int cols) {
    return tk_add(k, tk_zeros(k, ftile(16, cols, TK_ROW)), v);
}

/* A vector of `len` entries of the rank-1 view X from entry e (past X: -1). */
static tk_value *entries(tk_kernel *k, tk_type t, tk_value *X, tk_value *e) {
    tk_value *i[1] = {e};
    return tk_load(k, t, X, i, -1.0f);
}

/* Element r of a per-row vector as a warp-uniform scalar (its only match
 * survives a max). */
static tk_value *pick(tk_kernel *k, tk_value *v, tk_value *iota, int r) {
    return tk_max_all(k, tk_select(k, tk_eq(k, iota, f32c(k, (float)r)), v, f32c(k, -1.0f)));
}

/* The sort key of token t (i32): t in 0 .. V-1, else V (sorts last). */
static tk_value *key_of(tk_kernel *k, tk_value *t, tk_value *V) {
    tk_value *t64 = tk_cvt(k, t, TK_I64);
    tk_value *bad = tk_or(k, tk_lt(k, t64, i64c(k, 0)), tk_ge(k, t64, V));
    return tk_select(k, bad, V, t64);
}

/* ---- KEYS: Pos[p] = p, Dig[p] = key_p mod 256, 16 positions a warp ------- */
void tk_emb_build_keys(tk_emb *a) {
    tk_kernel *k = a->k;
    tk_value *Tok = tk_param_tensor(k, "Tok", TK_I32, 1);
    tk_value *Pos = tk_param_tensor(k, "Pos", TK_F32, 1);
    tk_value *Dig = tk_param_tensor(k, "Dig", TK_F32, 1);
    tk_value *V = tk_param_scalar(k, "V", TK_I64);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, Tok, 0), i64c(k, 16 * (int64_t)a->W)), NULL, NULL);
    tk_value *p0 =
        tk_mul(k, tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, a->W)), tk_warp_id_i64(k)),
               i64c(k, 16));
    tk_value *iota = tk_iota(k, colv(16), TK_PER_COL), *dig = tk_zeros(k, colv(16));
    for (int r = 0; r < 16; r++) {
        tk_value *i[1] = {tk_add(k, p0, i64c(k, r))};
        tk_value *key = key_of(k, tk_load(k, tk_scalar_type(TK_I32), Tok, i, 0.0f), V);
        tk_value *d = f32(k, tk_rem(k, key, i64c(k, DIG)));
        dig = tk_select(k, tk_eq(k, iota, f32c(k, (float)r)), d, dig);
    }
    tk_value *at[1] = {p0}; /* past N: not stored */
    tk_store(k, Pos, at, tk_add(k, iota, f32(k, p0)));
    tk_store(k, Dig, at, dig);
}

/* ---- HIST: Cnt[k, h], warp g counting digits 16g .. 16g + 15 ------------- */
void tk_emb_build_hist(tk_emb *a) {
    tk_kernel *k = a->k;
    tk_value *Dig = tk_param_tensor(k, "Dig", TK_F32, 1);
    tk_value *Cnt = tk_param_tensor(k, "Cnt", TK_F32, 2);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, Dig, 0), i64c(k, CH)), NULL, NULL);
    tk_value *kb = tk_block_id_i64(k, 0), *g = tk_warp_id_i64(k);
    tk_value *e0 = tk_mul(k, kb, i64c(k, CH));
    /* this warp's digit on each row (a column of the 0/1 tiles below) */
    tk_value *mine = tk_add(k, tk_iota(k, rowv(), TK_PER_ROW), f32(k, tk_mul(k, g, i64c(k, 16))));
    tk_value *cnt = tk_zeros(k, rowv());
    for (int c = 0; c < CH / PIEC; c++) {
        tk_value *d = entries(k, colv(PIEC), Dig, tk_add(k, e0, i64c(k, c * PIEC)));
        tk_value *hit = tk_cvt(k, tk_eq(k, spread(k, d, PIEC), mine), TK_F32);
        cnt = tk_add(k, cnt, tk_row_sum(k, hit));
    }
    tk_value *at[2] = {kb, tk_mul(k, g, i64c(k, 16))};
    tk_store(k, Cnt, at, cnt);
}

/* ---- SCAN: Off from Cnt, warp w owning digits 16w .. 16w + 15 -----------
 * Off[k, h] = base[h] + Σ_{k' < k} Cnt[k', h], base[h] = Σ_{h' < h} tot[h'].
 * The totals go through shared memory (each warp needs the lower digits'
 * ones). Down the chunks, a tile's exclusive running sums are one mma with
 * the strictly lower triangle of ones: counts are at most 256, exact in
 * bf16, and their sums of at most 16 exact in f32. */
static tk_value *digit_totals(tk_kernel *k, tk_value *Cnt, tk_value *nt, tk_value *c0) {
    tk_value *init[1] = {tk_zeros(k, colv(16))}, *cur[1], *tot[1];
    tk_value *i = tk_for_begin(k, i64c(k, 0), nt, i64c(k, 1), 1, init, cur);
    tk_value *at[2] = {tk_mul(k, i, i64c(k, 16)), c0};
    tk_value *next[1] = {
        tk_add(k, cur[0], tk_col_sum(k, tk_load(k, ftile(16, 16, TK_ROW), Cnt, at, 0.0f)))};
    tk_for_end(k, 1, next, tot);
    return tot[0];
}

/* Σ_{h' < 16w + i} tot[h'] for each row i, from the totals in S (every row
 * of S holds all 256), as a per-column vector (a diagonal's column sums). */
static tk_value *digit_bases(tk_kernel *k, tk_value *S, tk_value *w16) {
    tk_value *mine = tk_add(k, tk_iota(k, rowv(), TK_PER_ROW), f32(k, w16));
    tk_value *base = tk_zeros(k, rowv());
    for (int c = 0; c < DIG / PIEC; c++) {
        tk_value *at[2] = {i64c(k, 0), i64c(k, c * PIEC)};
        tk_value *t = tk_load(k, ftile(16, PIEC, TK_ROW), S, at, 0.0f);
        tk_value *h =
            tk_add(k, tk_iota(k, ftile(16, PIEC, TK_ROW), TK_PER_COL), f32c(k, (float)(c * PIEC)));
        base = tk_add(k, base, tk_row_sum(k, tk_select(k, tk_lt(k, h, mine), t, f32c(k, 0.0f))));
    }
    tk_value *ri = tk_iota(k, ftile(16, 16, TK_ROW), TK_PER_ROW);
    tk_value *ci = tk_iota(k, ftile(16, 16, TK_ROW), TK_PER_COL);
    return tk_col_sum(k, tk_select(k, tk_eq(k, ri, ci), spread(k, base, 16), f32c(k, 0.0f)));
}

void tk_emb_build_scan(tk_emb *a) {
    tk_kernel *k = a->k;
    tk_value *Cnt = tk_param_tensor(k, "Cnt", TK_F32, 2);
    tk_value *Off = tk_param_tensor(k, "Off", TK_F32, 2);
    tk_value *S = tk_shared(k, TK_F32, 16, DIG, TK_SMEM_PLAIN, 1);
    tk_set_grid(k, NULL, NULL, NULL);
    tk_value *w16 = tk_mul(k, tk_warp_id_i64(k), i64c(k, 16));
    tk_value *nt = tk_ceil_div(k, tk_dim(k, Cnt, 0), i64c(k, 16));
    tk_value *tot = digit_totals(k, Cnt, nt, w16);
    tk_value *sa[2] = {i64c(k, 0), w16};
    tk_store(k, S, sa, spread(k, tot, 16));
    tk_barrier(k); /* every warp reads the lower digits' totals */
    tk_value *base = digit_bases(k, S, w16);
    tk_value *ri = tk_iota(k, ftile(16, 16, TK_ROW), TK_PER_ROW);
    tk_value *ci = tk_iota(k, ftile(16, 16, TK_ROW), TK_PER_COL);
    tk_value *low =
        tk_cvt(k, tk_select(k, tk_lt(k, ci, ri), f32c(k, 1.0f), f32c(k, 0.0f)), TK_BF16);
    tk_value *init[1] = {base}, *cur[1], *fin[1];
    tk_value *i = tk_for_begin(k, i64c(k, 0), nt, i64c(k, 1), 1, init, cur);
    tk_value *at[2] = {tk_mul(k, i, i64c(k, 16)), w16};
    tk_value *xc = tk_load(k, ftile(16, 16, TK_COL), Cnt, at, 0.0f);
    tk_value *x = tk_load(k, ftile(16, 16, TK_ROW), Cnt, at, 0.0f);
    tk_value *before = tk_mma(k, TK_MMA_AB, low, tk_cvt(k, xc, TK_BF16), NULL);
    tk_store(k, Off, at, tk_add(k, before, cur[0]));
    tk_value *next[1] = {tk_add(k, cur[0], tk_col_sum(k, x))};
    tk_for_end(k, 1, next, fin);
}

/* ---- SCATTER: the pass's stable scatter, warp g moving entries 16g .. ----
 * Entry i of the chunk (digit h) goes to Off[k, h] + (entries j < i of
 * the chunk with digit h): the first term picked out of the chunk's
 * offsets by a 0/1 tile, the second a row sum of one; both exact. */
typedef struct sct {
    tk_value *Pos, *Dig, *Off, *Tok, *PosO, *AuxO, *V, *div;
    tk_value *e0, *g16; /* the chunk's first entry, this warp's first in it */
} sct;

/* Where each of the warp's 16 entries goes (a per-row vector). */
static tk_value *destinations(tk_kernel *k, const sct *s) {
    tk_value *drow = entries(k, rowv(), s->Dig, tk_add(k, s->e0, s->g16));
    tk_value *me = tk_add(k, tk_iota(k, rowv(), TK_PER_ROW), f32(k, s->g16));
    tk_value *col = tk_iota(k, ftile(16, PIEC, TK_ROW), TK_PER_COL);
    tk_value *dest = tk_zeros(k, rowv());
    for (int c = 0; c < CH / PIEC; c++) {
        tk_value *h = tk_add(k, col, f32c(k, (float)(c * PIEC))); /* a digit; an entry */
        tk_value *oi[2] = {tk_block_id_i64(k, 0), i64c(k, c * PIEC)};
        tk_value *off = tk_load(k, colv(PIEC), s->Off, oi, 0.0f);
        tk_value *first = tk_select(k, tk_eq(k, h, drow), spread(k, off, PIEC), f32c(k, 0.0f));
        tk_value *d = entries(k, colv(PIEC), s->Dig, tk_add(k, s->e0, i64c(k, c * PIEC)));
        tk_value *same = tk_cvt(k, tk_eq(k, spread(k, d, PIEC), drow), TK_F32);
        tk_value *rank = tk_select(k, tk_lt(k, h, me), same, f32c(k, 0.0f));
        dest = tk_add(k, dest, tk_row_sum(k, tk_add(k, first, rank)));
    }
    return dest;
}

/* Scalar v into the one-element view O[d] (nothing where `keep` is 0). */
static void put_one(tk_kernel *k, tk_value *O, tk_value *d, tk_value *keep, tk_value *v) {
    tk_value *at[1] = {i64c(k, 0)};
    tk_value *n = tk_select(k, keep, i64c(k, 1), i64c(k, 0));
    tk_store(k, tk_narrow(k, O, 0, d, n), at, tk_fill(k, colv(16), v));
}

/* Entries r0 .. r0 + 7 of the warp's 16: their positions read first,
 * then their tokens (a read that waits for the first), then the stores:
 * two memory latencies for eight entries rather than two an entry (eight,
 * not 16: the 16 entries' scalars spilled on sm_80, where a block of 16
 * warps has 128 registers a thread). */
static void scatter_eight(tk_kernel *k, const sct *s, tk_value *dest, int r0) {
    tk_value *N = tk_dim(k, s->Pos, 0), *iota = tk_iota(k, rowv(), TK_PER_ROW);
    tk_value *e[8], *pos[8], *tok[8];
    for (int r = 0; r < 8; r++) {
        e[r] = tk_add(k, tk_add(k, s->e0, s->g16), i64c(k, r0 + r));
        tk_value *i[1] = {e[r]};
        pos[r] = tk_load(k, tk_scalar_type(TK_F32), s->Pos, i, -1.0f);
    }
    for (int r = 0; r < 8; r++) {
        tk_value *i[1] = {tk_cvt(k, pos[r], TK_I64)};
        tok[r] = tk_load(k, tk_scalar_type(TK_I32), s->Tok, i, 0.0f);
    }
    tk_value *dv = tk_max(k, s->div, i64c(k, 1)), *last = tk_eq(k, s->div, i64c(k, 0));
    for (int r = 0; r < 8; r++) {
        tk_value *key = key_of(k, tok[r], s->V);
        tk_value *aux = tk_select(k, last, key, tk_rem(k, tk_div(k, key, dv), i64c(k, DIG)));
        tk_value *d = tk_cvt(k, pick(k, dest, iota, r0 + r), TK_I64), *keep = tk_lt(k, e[r], N);
        put_one(k, s->PosO, d, keep, pos[r]);
        put_one(k, s->AuxO, d, keep, f32(k, aux));
    }
}

void tk_emb_build_scatter(tk_emb *a) {
    tk_kernel *k = a->k;
    sct s;
    s.Pos = tk_param_tensor(k, "Pos", TK_F32, 1);
    s.Dig = tk_param_tensor(k, "Dig", TK_F32, 1);
    s.Off = tk_param_tensor(k, "Off", TK_F32, 2);
    s.Tok = tk_param_tensor(k, "Tok", TK_I32, 1);
    s.PosO = tk_param_tensor(k, "PosO", TK_F32, 1);
    s.AuxO = tk_param_tensor(k, "AuxO", TK_F32, 1);
    s.V = tk_param_scalar(k, "V", TK_I64);
    s.div = tk_param_scalar(k, "div", TK_I64);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, s.Pos, 0), i64c(k, CH)), NULL, NULL);
    s.e0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, CH));
    s.g16 = tk_mul(k, tk_warp_id_i64(k), i64c(k, 16));
    tk_value *dest = destinations(k, &s);
    scatter_eight(k, &s, dest, 0);
    scatter_eight(k, &s, dest, 8);
}
