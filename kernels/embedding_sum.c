/* The embedding backward's sums: dO's rows of each token, in the order the
 * sort left them (position order), into dWte (tk/tk_kernels_train.h:
 * TK_EMB_SEGSUM, TK_EMB_FIXUP).
 *
 * A warp walks TK_EMB_RUN (32) consecutive sorted entries, so every warp
 * has the same work whatever the tokens: a byte vocabulary's runs of a few
 * hundred positions and GPT-2's mostly single ones alike. A run wholly in
 * the range is summed and written by the warp; a run crossing ranges is
 * summed piecewise (its head piece into Head[q], each later piece into
 * Cont[q']) and FIXUP adds the pieces in order. Each dWte row has one
 * writer per kernel: no atomics, and the order of the adds is fixed by
 * the sorted entries alone.
 *
 * Latency, not bandwidth, bounds a walk: the range's keys and positions
 * come in as two vectors (one load each) and are picked out as scalars;
 * entries go two a trip, both rows (and, for an entry that starts a run
 * while accumulating, its old dWte row, the run's first term) loaded
 * before either is added. Writes need no branch: a store whose leading
 * index is -1 writes nothing. */
#include <math.h>
#include <stdbool.h>

#include "embedding_parts.h"
#include "tk/tk_kernels.h"

#define RUN TK_EMB_RUN /* entries a warp                          */
#define U   2          /* entries a trip                          */

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_value *f32(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_F32); }
static tk_value *i64(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_I64); }

static tk_type colv(int n) { return tk_vec_type(TK_F32, n, TK_PER_COL, TK_WARP, TK_ROW); }

/* c ? v : -1, as an index (i64): a row that exists, or none. */
static tk_value *row_if(tk_kernel *k, tk_value *c, tk_value *v) {
    return tk_select(k, c, v, i64c(k, -1));
}

/* v, as varying as `like` (a loop's carried value must start as varying
 * as the values its trips carry on). */
static tk_value *varying(tk_kernel *k, tk_value *v, tk_value *like) {
    return tk_select(k, tk_eq(k, like, like), v, v);
}

static tk_value *and3(tk_kernel *k, tk_value *a, tk_value *b, tk_value *c) {
    return tk_and(k, tk_and(k, a, b), c);
}

/* The range's state and views. */
typedef struct walk {
    tk_kernel *k;
    tk_dtype dt;
    int W;                     /* the row tile's columns                 */
    tk_value *dO, *dW, *H, *C; /* views                                  */
    tk_value *V, *q, *r0;      /* f32 vocab; the range; the tile's row   */
    tk_value *ld;              /* bool: old dWte rows are read (acc)     */
    tk_value *acc, *cur, *st;  /* the run's sum, its key, its kind:
                                  -1 none yet, 0 began before the range, 1 began in it */
} walk;

static tk_type ftile(const walk *w) { return tk_tile_type(TK_F32, 16, w->W, TK_WARP, TK_ROW); }

/* Row `row` of view X (a leading index; -1: none) as f32 (0 where none). */
static tk_value *row_of(walk *w, tk_value *X, tk_dtype dt, tk_value *row) {
    tk_kernel *k = w->k;
    tk_value *at[3] = {row, w->r0, i64c(k, 0)};
    tk_value *t = tk_load(k, tk_tile_type(dt, 16, w->W, TK_WARP, TK_ROW), X, at, 0.0f);
    return dt == TK_F32 ? t : f32(k, t);
}

static void put_row(walk *w, tk_value *X, tk_value *row, tk_value *v) {
    tk_value *at[3] = {row, w->r0, i64c(w->k, 0)};
    tk_store(w->k, X, at, v);
}

/* The current run ends here (`end`): its sum goes to its dWte row (began
 * in the range; to Head[q] instead where it goes on past it, `on`) or to
 * Cont[q] (began before). Runs of the out-of-range key V go nowhere. */
static void flush(walk *w, tk_value *end, tk_value *on) {
    tk_kernel *k = w->k;
    tk_value *live = and3(k, end, tk_ge(k, w->st, f32c(k, 0.0f)), tk_lt(k, w->cur, w->V));
    tk_value *own = tk_and(k, live, tk_eq(k, w->st, f32c(k, 1.0f)));
    tk_value *mid = tk_and(k, live, tk_eq(k, w->st, f32c(k, 0.0f)));
    tk_value *done = on ? tk_and(k, own, tk_eq(k, on, tk_const_bool(k, 0))) : own;
    put_row(w, w->dW, row_if(k, done, i64(k, w->cur)), w->acc);
    if (on) put_row(w, w->H, row_if(k, tk_and(k, own, on), w->q), w->acc);
    put_row(w, w->C, row_if(k, mid, w->q), w->acc);
}

/* One entry (key, its dO row x, and old: its dWte row where it starts a
 * run while accumulating, else 0). Past the entries the key reads -1. */
static void step(walk *w, tk_value *key, tk_value *x, tk_value *old) {
    tk_kernel *k = w->k;
    tk_value *valid = tk_ge(k, key, f32c(k, 0.0f)), *fresh = tk_ne(k, key, w->cur);
    tk_value *starts = tk_and(k, valid, fresh);
    flush(w, starts, NULL);
    tk_value *first = tk_select(k, fresh, old, w->acc);
    w->acc = tk_select(k, valid, tk_add(k, first, x), w->acc);
    tk_value *kind = tk_select(k, fresh, f32c(k, 1.0f), tk_max(k, w->st, f32c(k, 0.0f)));
    w->st = tk_select(k, valid, kind, w->st);
    w->cur = tk_select(k, valid, key, w->cur);
}

/* Entry j of a range's vector (j a warp-uniform f32). */
static tk_value *pick(tk_kernel *k, tk_value *v, tk_value *iota, tk_value *j) {
    return tk_max_all(k, tk_select(k, tk_eq(k, iota, j), v, f32c(k, -1.0f)));
}

/* Trip t: entries 2t and 2t + 1, their loads first. */
static void trip(walk *w, tk_value *kv, tk_value *pv, tk_value *iota, tk_value *t) {
    tk_kernel *k = w->k;
    tk_value *key[U], *x[U], *old[U], *prev = w->cur;
    for (int u = 0; u < U; u++) {
        tk_value *j = f32(k, tk_add(k, tk_mul(k, t, i64c(k, U)), i64c(k, u)));
        key[u] = pick(k, kv, iota, j);
        x[u] = row_of(w, w->dO, w->dt, i64(k, pick(k, pv, iota, j)));
        tk_value *starts = and3(k, tk_ne(k, key[u], prev), tk_ge(k, key[u], f32c(k, 0.0f)),
                                tk_and(k, w->ld, tk_lt(k, key[u], w->V)));
        old[u] = row_of(w, w->dW, TK_F32, row_if(k, starts, i64(k, key[u])));
        prev = key[u];
    }
    for (int u = 0; u < U; u++) step(w, key[u], x[u], old[u]);
}

void tk_emb_build_segsum(tk_emb *a) {
    tk_kernel *k = a->k;
    walk w = {.k = k, .dt = a->c->dtype, .W = a->c->cols};
    tk_value *Pos = tk_param_tensor(k, "Pos", TK_F32, 1);
    tk_value *Key = tk_param_tensor(k, "Key", TK_F32, 1);
    w.dO = tk_param_tensor(k, "dO", w.dt, 3);
    w.dW = tk_param_tensor(k, "dWte", TK_F32, 3);
    w.H = tk_param_tensor(k, "Head", TK_F32, 3);
    w.C = tk_param_tensor(k, "Cont", TK_F32, 3);
    tk_value *acc = tk_param_scalar(k, "acc", TK_I32);
    tk_value *Q = tk_ceil_div(k, tk_dim(k, Key, 0), i64c(k, RUN));
    tk_set_grid(k, tk_ceil_div(k, Q, i64c(k, a->W)),
                tk_ceil_div(k, tk_dim(k, w.dO, 1), i64c(k, 16)), NULL);
    w.q = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, a->W)), tk_warp_id_i64(k));
    w.r0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, 16));
    w.V = f32(k, tk_dim(k, w.dW, 0));
    w.ld = tk_ne(k, acc, tk_const_i32(k, 0));
    tk_value *g0 = tk_mul(k, w.q, i64c(k, RUN));
    tk_value *ig[1] = {g0}, *ip[1] = {tk_sub(k, g0, i64c(k, 1))},
             *in[1] = {tk_add(k, g0, i64c(k, RUN))};
    tk_value *kv = tk_load(k, colv(RUN), Key, ig, -1.0f);
    tk_value *pv = tk_load(k, colv(RUN), Pos, ig, -1.0f);
    tk_value *iota = tk_iota(k, colv(RUN), TK_PER_COL);
    /* the key before the range: a run it continues is not this warp's */
    tk_value *kprev = tk_load(k, tk_scalar_type(TK_F32), Key, ip, -1.0f);
    tk_value *knext = tk_load(k, tk_scalar_type(TK_F32), Key, in, -1.0f);
    tk_value *init[3] = {tk_zeros(k, ftile(&w)), kprev, varying(k, f32c(k, -1.0f), kprev)};
    tk_value *cur[3], *fin[3];
    tk_value *t = tk_for_begin(k, i64c(k, 0), i64c(k, RUN / U), i64c(k, 1), 3, init, cur);
    w.acc = cur[0], w.cur = cur[1], w.st = cur[2];
    trip(&w, kv, pv, iota, t);
    tk_value *next[3] = {w.acc, w.cur, w.st};
    tk_for_end(k, 3, next, fin);
    w.acc = fin[0], w.cur = fin[1], w.st = fin[2];
    flush(&w, tk_const_bool(k, 1), tk_eq(k, knext, w.cur));
}

/* ---- FIXUP ------------------------------------------------------------------
 * Range q's last run goes on (the next key is its key) and began in it
 * (the key before the range is not): its later pieces are Cont[q + 1 ..
 * q + m], m the ranges after q whose first key is still the run's (a
 * prefix of them: the keys are sorted), counted 32 ranges a vector. */
static tk_value *pieces(tk_kernel *k, tk_value *KeyS, tk_value *q, tk_value *kl, tk_value *go) {
    tk_value *Q = tk_dim(k, KeyS, 0);
    tk_value *left = tk_sub(k, tk_sub(k, Q, q), i64c(k, 1));
    tk_value *nw = tk_select(k, go, tk_ceil_div(k, left, i64c(k, RUN)), i64c(k, 0));
    tk_value *init[2] = {varying(k, f32c(k, 0.0f), kl), varying(k, tk_const_bool(k, 1), kl)};
    tk_value *cur[2], *fin[2];
    tk_value *i = tk_for_begin(k, i64c(k, 0), nw, i64c(k, 1), 2, init, cur);
    tk_value *at[1] = {tk_add(k, tk_add(k, q, i64c(k, 1)), tk_mul(k, i, i64c(k, RUN)))};
    tk_value *firsts = tk_load(k, colv(RUN), KeyS, at, -1.0f);
    tk_value *hit = tk_cvt(k, tk_eq(k, firsts, kl), TK_F32);
    tk_type t = tk_tile_type(TK_F32, 16, RUN, TK_WARP, TK_ROW);
    tk_value *cnt = tk_max_all(k, tk_row_sum(k, tk_add(k, tk_zeros(k, t), hit)));
    tk_value *next[2] = {tk_select(k, cur[1], tk_add(k, cur[0], cnt), cur[0]),
                         tk_and(k, cur[1], tk_eq(k, cnt, f32c(k, (float)RUN)))};
    tk_for_end(k, 2, next, fin);
    return tk_cvt(k, fin[0], TK_I64);
}

void tk_emb_build_fixup(tk_emb *a) {
    tk_kernel *k = a->k;
    walk w = {.k = k, .W = a->c->cols};
    tk_value *Key = tk_param_tensor(k, "Key", TK_F32, 1);
    tk_value *KeyS = tk_param_tensor(k, "KeyS", TK_F32, 1);
    w.H = tk_param_tensor(k, "Head", TK_F32, 3);
    w.C = tk_param_tensor(k, "Cont", TK_F32, 3);
    w.dW = tk_param_tensor(k, "dWte", TK_F32, 3);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, KeyS, 0), i64c(k, a->W)),
                tk_ceil_div(k, tk_dim(k, w.dW, 1), i64c(k, 16)), NULL);
    w.q = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, a->W)), tk_warp_id_i64(k));
    w.r0 = tk_mul(k, tk_block_id_i64(k, 1), i64c(k, 16));
    tk_value *g0 = tk_mul(k, w.q, i64c(k, RUN));
    tk_value *il[1] = {tk_add(k, g0, i64c(k, RUN - 1))}, *in[1] = {tk_add(k, g0, i64c(k, RUN))},
             *ip[1] = {tk_sub(k, g0, i64c(k, 1))};
    tk_type sf = tk_scalar_type(TK_F32);
    tk_value *kl = tk_load(k, sf, Key, il, -1.0f), *kn = tk_load(k, sf, Key, in, -1.0f);
    tk_value *kp = tk_load(k, sf, Key, ip, -1.0f);
    tk_value *V = f32(k, tk_dim(k, w.dW, 0));
    tk_value *go = and3(k, tk_ge(k, kl, f32c(k, 0.0f)), tk_lt(k, kl, V),
                        tk_and(k, tk_eq(k, kn, kl), tk_ne(k, kp, kl)));
    tk_value *m = pieces(k, KeyS, w.q, kl, go);
    tk_value *init[1] = {row_of(&w, w.H, TK_F32, row_if(k, go, w.q))}, *cur[1], *sum[1];
    tk_value *j = tk_for_begin(k, i64c(k, 1), tk_add(k, m, i64c(k, 1)), i64c(k, U), 1, init, cur);
    tk_value *j1 = tk_add(k, j, i64c(k, 1));
    tk_value *x0 = row_of(&w, w.C, TK_F32, tk_add(k, w.q, j));
    tk_value *x1 = row_of(&w, w.C, TK_F32, row_if(k, tk_le(k, j1, m), tk_add(k, w.q, j1)));
    tk_value *next[1] = {tk_add(k, tk_add(k, cur[0], x0), x1)};
    tk_for_end(k, 1, next, sum);
    put_row(&w, w.dW, row_if(k, go, i64(k, kl)), sum[0]);
}
