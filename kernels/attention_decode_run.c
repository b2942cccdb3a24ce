/* The decoding kernels' host side (attention_decode.h): packing, split
 * count, views, launches. The kernels: attention_decode.c. */
#include <math.h>
#include <string.h>

#include "attention_decode.h"
#include "attention_parts.h"
#include "jit/registry.h"
#include "run_checks.h"

bool tk_attn_decode_wanted(const tk_attention_params *p) {
    return p->kernel == TK_ATTN_DECODE ||
           (p->kernel == TK_ATTN_AUTO && p->seq_q <= TK_ATTN_DECODE_MAX_Q);
}

/* Strides as given, or dense over dims when all are zero. */
static void strides_of(const int64_t *st, int rank, const int64_t *dims, int64_t *out) {
    bool dense = true;
    for (int i = 0; i < rank; i++) dense = dense && !st[i];
    int64_t n = 1;
    for (int i = rank - 1; i >= 0; i--) {
        out[i] = dense ? n : st[i];
        n *= dims[i];
    }
}

/* PACK_HEADS views Q (or O) as [B, Nq·Hkv, G, D]: dim 1 steps G heads and
 * reaches query i at i·Hkv, which needs the query stride to be Hq heads'. */
static bool heads_view_ok(const tk_attention_params *p, const int64_t *st) {
    int64_t d[4] = {p->batch, p->heads_q, p->seq_q, p->head_dim}, s[4];
    strides_of(st, 4, d, s);
    return p->seq_q == 1 || s[2] == p->heads_q * s[1];
}

/* Blocks of the split kernel one wave should hold: as many as its K/V
 * rings (`rows` keys a stage) let an SM hold, but at most two an SM.
 * Measured (bench/RESULTS.md, 2026-12-03): four 32-key blocks an SM read
 * no faster than two, and the twice as many splits cost their merge (1 x
 * 131072 keys: 186 µs at 32 splits, 227 at 66). */
static int64_t resident(int sm, int head_dim, int rows) {
    int64_t ring = tk_attn_decode_ring_bytes(tk_attn_decode_stages(head_dim), rows, head_dim);
    int64_t per_sm = (227 * 1024) / (ring + 1024);
    if (per_sm > 2) per_sm = 2;
    return (int64_t)sm * (per_sm < 1 ? 1 : per_sm);
}

/* Workspace for n partials a tile: Op [.., n, 16, D] f32, then 256-aligned
 * Lp [.., n, 16]. A partial holds the whole 16-row tile, not just its Rv
 * rows: the split kernel's stores and the merge's loads then stay whole
 * tiles inside their views, vector accesses without masks (measured,
 * bench/RESULTS.md 2026-12-04: the masked element loads of 4-row partials
 * were most of the merge's 21 µs at 1 x 8192 keys). */
static size_t split_bytes(const tk_attention_params *p, const tk_attn_decode_plan *pl, int64_t n) {
    size_t rows = (size_t)p->batch * (size_t)p->heads_kv * (size_t)pl->T * TK_ATTN_DECODE_PART_ROWS;
    rows *= (size_t)n;
    size_t op = (rows * (size_t)p->head_dim * sizeof(float) + 255) / 256 * 256;
    return op + rows * sizeof(float);
}

#define MAX_SPLITS 4096
/* The fewest keys a chosen split gets (measured: bench/bench_decode.py
 * DECODE_SWEEP=1, bench/RESULTS.md 2026-12-04: with Q and O through shared
 * memory, 1 x 1024 keys ran best at 16 ranges of 64 keys, 1 x 8192 at 32
 * of 256, 8/1 heads at 64 of 128; past the wave more ranges only add
 * blocks' fixed starts and the merge's work). */
#define MIN_SPLIT_KEYS 64

/* Warps that share a tile's keys when the keys are split (up to `want`,
 * 8 warps in all), as far as the ring (200 KB; a paged one's 16 stages)
 * and the tiles there are allow. Not the plan's choice: measured
 * (bench/RESULTS.md, 2026-12-03), blocks of 4 warps sharing a 128-key trip
 * ran a one-query call at 0.5-0.9x the speed of one-warp blocks (1 x 8192
 * keys: 105 against 56 µs), faster only at 1024 keys;
 * tk_attn_decode_plan_kw asks for them (the tests, tuning). */
static int key_warps(const tk_attn_decode_plan *pl, int head_dim, int64_t nt, int bkv, int stages,
                     int want) {
    int kw = want;
    while (kw > 1 && kw * pl->warps > 8) kw /= 2;
    int rows = pl->chunk ? pl->chunk : bkv;
    while (kw > 1 && pl->chunk && stages * (bkv * kw / rows) > 16) kw /= 2;
    while (kw > 1 &&
           tk_attn_decode_ring_bytes(stages, bkv * kw, head_dim) > TK_ATTN_DECODE_RING_MAX)
        kw /= 2;
    while (kw > 1 && kw > nt) kw /= 2; /* no warp without a tile */
    return kw < 1 ? 1 : kw;
}

/* The ranges S for kw warps a tile: enough blocks to fill a wave, each a
 * range of at least MIN_SPLIT_KEYS keys and one trip (kw tiles). */
static int64_t chosen_splits(const tk_attention_params *p, int64_t nt, int64_t base, int sm,
                             int bkv, int kw) {
    int64_t r = resident(sm, p->head_dim, bkv * kw);
    int64_t want = (r + base / 2) / base; /* the nearest whole number of waves */
    int64_t most = nt / (MIN_SPLIT_KEYS / bkv), trips = (nt + kw - 1) / kw;
    if (want > most) want = most;
    if (want > trips) want = trips;
    if (want < 1) return 1;
    int64_t c = (trips + want - 1) / want; /* as many ranges as the trips a range need */
    return (trips + c - 1) / c;
}

tk_status tk_attn_decode_plan_for(tk_ctx *ctx, const char *fn, const tk_attention_params *p, int sm,
                                  bool fit, tk_attn_decode_plan *pl) {
    return tk_attn_decode_plan_kw(ctx, fn, p, sm, fit, 1, pl);
}

tk_status tk_attn_decode_plan_kw(tk_ctx *ctx, const char *fn, const tk_attention_params *p, int sm,
                                 bool fit, int want_kw, tk_attn_decode_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (p->seq_q > TK_ATTN_DECODE_MAX_Q)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: seq_q is %lld; TK_ATTN_DECODE takes at most %d queries", fn,
                                (long long)p->seq_q, TK_ATTN_DECODE_MAX_Q);
    if (p->num_splits < 0 || p->num_splits > MAX_SPLITS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: num_splits is %d; expected 0..%d", fn,
                                p->num_splits, MAX_SPLITS);
    int64_t G = p->heads_q / p->heads_kv, Nq = p->seq_q;
    int64_t t_heads = Nq * ((G + 15) / 16);
    bool heads = heads_view_ok(p, p->q_strides) && heads_view_ok(p, p->o_strides) && t_heads <= G;
    pl->pack = heads ? TK_ATTN_PACK_HEADS : TK_ATTN_PACK_QUERIES;
    pl->T = heads ? t_heads : G;
    pl->Rv = heads ? (G < 16 ? G : 16) : Nq;
    pl->warps = pl->T >= 4 ? 4 : pl->T >= 2 ? 2 : 1;
    int bkv = tk_attn_decode_keys(p->head_dim), stages = tk_attn_decode_stages(p->head_dim);
    /* a paged tile: copies of the most rows (up to the tile: 0) a page divides */
    int rows = bkv;
    while (p->block_table && rows > 16 && p->page_size % rows) rows /= 2;
    pl->chunk = rows == bkv ? 0 : rows;

    int64_t nt = (p->seq_kv + bkv - 1) / bkv;
    int64_t base = p->batch * p->heads_kv * ((pl->T + pl->warps - 1) / pl->warps);
    int kw = key_warps(pl, (int)p->head_dim, nt, bkv, stages, want_kw);
    int64_t S = p->num_splits;
    if (!S) { /* a full GPU without splits: the direct kernel, a warp a tile */
        bool full = chosen_splits(p, nt, base, sm, bkv, 1) == 1 &&
                    2 * base >= resident(sm, p->head_dim, bkv);
        if (full) kw = 1;
        S = full ? 1 : chosen_splits(p, nt, base, sm, bkv, kw);
    } else if (S == 1) {
        kw = 1; /* asked for no split */
    }
    int64_t trips = (nt + kw - 1) / kw;
    if (S > trips) S = trips > 0 ? trips : 1;
    double n = (double)p->batch * (double)p->heads_kv * (double)pl->T * TK_ATTN_DECODE_PART_ROWS *
               (double)S * kw;
    if (n * (p->head_dim + 1) * 4.0 >= 0x1p62)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: the partials of %lld splits would need 2^62 bytes or more", fn,
                                (long long)S);
    if (fit && S * kw > 1 && split_bytes(p, pl, S * kw) > p->workspace_bytes) {
        if (p->num_splits)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: num_splits %d needs %zu bytes of workspace; "
                                    "workspace_bytes is %zu",
                                    fn, p->num_splits, split_bytes(p, pl, S * kw),
                                    p->workspace_bytes);
        while (S > 1 && split_bytes(p, pl, S * kw) > p->workspace_bytes) S--;
        if (split_bytes(p, pl, S * kw) > p->workspace_bytes) kw = 1; /* S is 1: direct */
    }
    if (fit && !p->workspace) S = 1, kw = 1;
    pl->splits = (int)S;
    pl->kw = kw;
    pl->partials = (int)S * kw;
    pl->bytes = pl->partials > 1 ? split_bytes(p, pl, pl->partials) : 0;
    return TK_OK;
}

int tk_attn_decode_cache(const tk_attention_params *p) {
    return p->block_table  ? TK_ATTN_CACHE_PAGED
           : p->seqlens_kv ? TK_ATTN_CACHE_LENGTHS
                           : TK_ATTN_CACHE_NONE;
}

/* K or V as the kernels view it, strides st (all zero: dense): [B, Hkv,
 * Nkv, D], or a paged pool [num_pages, Hkv, page_size, D] whose dense form
 * is [num_pages, page_size, Hkv, D]. */
static tk_arg kv_view(const tk_attention_params *p, const void *data, const int64_t *st) {
    int64_t d[4] = {p->batch, p->heads_kv, p->seq_kv, p->head_dim}, s[4];
    if (p->block_table) {
        d[0] = p->num_pages, d[2] = p->page_size;
        bool dense = !st[0] && !st[1] && !st[2] && !st[3];
        int64_t ds[4] = {p->page_size * p->heads_kv * p->head_dim, p->head_dim,
                         p->heads_kv * p->head_dim, 1};
        for (int i = 0; i < 4; i++) s[i] = dense ? ds[i] : st[i];
    } else {
        strides_of(st, 4, d, s);
    }
    return tk_arg_strided((void *)data, p->dtype, 4, d, s);
}

/* The cache's own parameters (seqlens, appended, block table) after n. */
static int cache_args(const tk_attention_params *p, bool appended, tk_arg *args, int n) {
    int64_t ld[1] = {p->batch}, td[2] = {p->batch, p->max_pages};
    args[n++] = tk_arg_tensor((void *)p->seqlens_kv, TK_I32, 1, ld);
    if (appended) args[n++] = tk_arg_i32(p->k_new ? (int32_t)p->seq_q : 0);
    if (p->block_table) args[n++] = tk_arg_tensor((void *)p->block_table, TK_I32, 2, td);
    return n;
}

int tk_attn_decode_args(const tk_attention_params *p, const tk_attn_decode_plan *pl, int part,
                        tk_arg *args) {
    const int64_t B = p->batch, Hq = p->heads_q, Hkv = p->heads_kv, Nq = p->seq_q;
    const int64_t D = p->head_dim, G = Hq / Hkv;
    if (part == TK_ATTN_DECODE_APPEND) {
        int64_t nd[4] = {B, Hkv, Nq, D}, ks[4], vs[4];
        strides_of(p->k_new_strides, 4, nd, ks);
        strides_of(p->v_new_strides, 4, nd, vs);
        args[0] = tk_arg_strided((void *)p->k_new, p->dtype, 4, nd, ks);
        args[1] = tk_arg_strided((void *)p->v_new, p->dtype, 4, nd, vs);
        args[2] = kv_view(p, p->k, p->k_strides);
        args[3] = kv_view(p, p->v, p->v_strides);
        return cache_args(p, false, args, 4);
    }
    int64_t qd[4] = {B, Hq, Nq, D}, ld[3] = {B, Hq, Nq};
    int64_t qs[4], os[4], ls[3];
    strides_of(p->q_strides, 4, qd, qs);
    strides_of(p->o_strides, 4, qd, os);
    strides_of(p->lse_strides, 3, ld, ls);
    bool heads = pl->pack == TK_ATTN_PACK_HEADS;
    /* Q and O: [B, Hq, Nq, D], or [B, Nq·Hkv, G, D] (attention_decode.h) */
    int64_t xd[4] = {B, Hq, Nq, D};
    int64_t qx[4] = {qs[0], qs[1], qs[2], 1}, ox[4] = {os[0], os[1], os[2], 1};
    if (heads) {
        xd[1] = Nq * Hkv, xd[2] = G;
        qx[1] = G * qs[1], qx[2] = qs[1];
        ox[1] = G * os[1], ox[2] = os[1];
    }
    /* L: [B, Hkv, G, Nq] or [B, Nq, Hkv, G] */
    int64_t lq[4] = {B, Hkv, G, Nq}, lqs[4] = {ls[0], G * ls[1], ls[1], ls[2]};
    int64_t lh[4] = {B, Nq, Hkv, G}, lhs[4] = {ls[0], ls[2], G * ls[1], ls[1]};
    tk_arg O = tk_arg_strided(p->o, p->dtype, 4, xd, ox);
    tk_arg L = tk_arg_strided(p->lse, TK_F32, 4, heads ? lh : lq, heads ? lhs : lqs);
    /* the partials: Op [B·Hkv·T, S·kw, 16, D], Lp [B·Hkv·T, S·kw, 16] */
    int64_t n = B * Hkv * pl->T, S = pl->partials;
    const int64_t R = TK_ATTN_DECODE_PART_ROWS;
    int64_t opd[4] = {n, S, R, D}, lpd[3] = {n, S, R};
    size_t op_bytes = ((size_t)(n * S * R * D) * sizeof(float) + 255) / 256 * 256;
    tk_arg Op = tk_arg_tensor(p->workspace, TK_F32, 4, opd);
    tk_arg Lp =
        tk_arg_tensor(p->workspace ? (char *)p->workspace + op_bytes : NULL, TK_F32, 3, lpd);
    if (part == TK_ATTN_DECODE_MERGE) {
        args[0] = Op, args[1] = Lp, args[2] = O, args[3] = L;
        return 4;
    }
    float scale = p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)D);
    args[0] = tk_arg_strided((void *)p->q, p->dtype, 4, xd, qx);
    args[1] = kv_view(p, p->k, p->k_strides);
    args[2] = kv_view(p, p->v, p->v_strides);
    args[3] = part == TK_ATTN_DECODE_SPLIT ? Op : O;
    args[4] = part == TK_ATTN_DECODE_SPLIT ? Lp : L;
    args[5] = tk_arg_f32(scale);
    return p->seqlens_kv ? cache_args(p, true, args, 6) : 6;
}

/* ---- which kernels a call runs ----------------------------------------------- */
tk_attention_decode_config tk_attn_decode_config(const tk_attention_params *p,
                                                 const tk_attn_decode_plan *pl, int part) {
    tk_attention_decode_config c;
    memset(&c, 0, sizeof c); /* a registry key: compared byte by byte */
    bool merge = part == TK_ATTN_DECODE_MERGE, append = part == TK_ATTN_DECODE_APPEND;
    c.dtype = p->dtype, c.head_dim = (int)p->head_dim, c.part = part;
    c.pack = append ? 0 : pl->pack;
    c.causal = merge || append ? 0 : p->causal;
    c.warps = merge ? tk_attn_decode_merge_warps(pl->partials) : append ? 1 : pl->warps;
    c.cache = merge ? 0 : tk_attn_decode_cache(p);
    c.chunk = merge || append ? 0 : pl->chunk;
    c.key_warps = part == TK_ATTN_DECODE_SPLIT ? pl->kw : 1;
    return c;
}

int tk_attn_decode_parts(const tk_attention_params *p, const tk_attn_decode_plan *pl,
                         int parts[3]) {
    int n = 0;
    if (p->k_new) parts[n++] = TK_ATTN_DECODE_APPEND;
    parts[n++] = pl->partials > 1 ? TK_ATTN_DECODE_SPLIT : TK_ATTN_DECODE_DIRECT;
    if (pl->partials > 1) parts[n++] = TK_ATTN_DECODE_MERGE;
    return n;
}

/* ---- the registry's decoding kernels: the key is the kernel's config ------ */
static tk_status build_decode_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    return tk_attention_decode_build(ctx, key, out);
}

static const tk_kernel_def decode_def = {"tk_attention_forward (decoding)",
                                         sizeof(tk_attention_decode_config), build_decode_key};

/* The programs of parts[0..n-1], compiled side by side on a cold prepare
 * (info: the whole preparation). */
static tk_status programs(tk_ctx *ctx, const tk_attention_params *p, const tk_attn_decode_plan *pl,
                          const int *parts, int n, tk_program **prog, tk_prepare_info *info) {
    tk_attention_decode_config key[3];
    for (int i = 0; i < n; i++) key[i] = tk_attn_decode_config(p, pl, parts[i]);
    return tk_registry_programs_of(ctx, &decode_def, n, key, prog, info);
}

tk_status tk_attn_decode_workspace(tk_ctx *ctx, const tk_attention_params *p, size_t *bytes) {
    tk_attn_decode_plan pl;
    tk_status s = tk_attn_decode_plan_for(ctx, "tk_attention_forward_workspace", p,
                                          tk_run_sm_count(ctx), false, &pl);
    if (!s) *bytes = pl.bytes;
    return s;
}

tk_status tk_attn_decode_run(tk_ctx *ctx, const tk_attention_params *p, void *stream,
                             tk_prepare_info *info) {
    const char *fn = info ? "tk_attention_prepare" : "tk_attention_forward";
    if (p->workspace && (uintptr_t)p->workspace % 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: workspace is not 256-byte aligned",
                                fn);
    tk_attn_decode_plan pl;
    tk_status s = tk_attn_decode_plan_for(ctx, fn, p, tk_run_sm_count(ctx), true, &pl);
    if (s) return s;
    int parts[3], np = tk_attn_decode_parts(p, &pl, parts);
    tk_program *prog[3];
    if ((s = programs(ctx, p, &pl, parts, np, prog, info)) || info) return s;
    for (int i = 0; i < np && !s; i++) {
        tk_arg args[TK_ATTN_DECODE_MAX_ARGS];
        int n = tk_attn_decode_args(p, &pl, parts[i], args);
        s = tk_launch(prog[i], n, args, stream);
    }
    return s;
}
