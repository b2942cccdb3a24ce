/* The GEMM on Hopper's warpgroup multiply (tk_gemm_config.wgmma; entry
 * points and the mma.sync kernel: kernels/gemm.c).
 *
 * Persistent: the kernel takes a scalar `blocks` after A, B and C and
 * launches min(tiles, blocks) blocks, blocks taken in 1..TK_GEMM_MAX_GRID (tk_gemm
 * passes what the SMs hold at
 * once); block b visits tiles b, b + grid, ... in the grouped order of the
 * mma.sync kernel. Its k-tiles form one stream across its tiles: the copy
 * of the block's k-tile j+S-1 is issued in the trip of k-tile j, so in a
 * tile's last S-1 trips the next tile's first k-tiles are already on their
 * way; there is no pipeline fill per tile, and on sm_90a (where a producer
 * warpgroup issues the copies, jit/plan.c) one copy site for each of A and
 * B, which keeps the producer within its 48 registers.
 *
 * Per tile:
 *   k-loop    warpgroup g multiplies rows 64g.. of each A stage by the
 *             whole B stage into its 64 x BN f32 accumulator (kloop below);
 *   epilogue  through shared memory when a C tile (or a column piece of
 *             it) fits beside the stages: each warpgroup writes its rows to
 *             a swizzled tile, a barrier, and the block copies it to C,
 *             which on sm_90 is the copy engine's store (jit/plan.c): one
 *             thread issues it, asynchronously, and the store's reads of
 *             the tile are waited for at the next barrier, before any
 *             thread writes the tile again. Otherwise (f32 C too wide for
 *             the room left) each warpgroup stores its registers to C.
 * Measured on the H200 (bench/RESULTS.md, 2026-12-02): 4096³ bf16 628 (A·B)
 * and 673 (A·Bᵀ) TFLOP/s against 558 / 600 before it was persistent
 * (cuBLAS ~700-720); the first, per-tile prologue form spilled the producer
 * (one copy site per prologue stage, their addresses live across the tile
 * loop) and ran at 478.
 * Ragged M, N, K: the copies zero-fill outside A / B, and the stores skip
 * what lies outside C. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_parts.h"

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }

/* Accumulator columns the fused epilogue works on at a time
 * (kernels/gemm_epilogue.c). */
#define EPI_COLS 32

/* Shared memory the kernel may use for its tiles on sm_90 (227 KiB per
 * block), less 2 KiB for what the lowering adds (the aligned base, the
 * mbarrier rings). */
#define SMEM_BUDGET (227 * 1024 - 2048)

static tk_value *next_stage(tk_kernel *k, tk_value *st, int S) {
    tk_value *st1 = tk_add(k, st, i32c(k, 1));
    return tk_select(k, tk_eq(k, st1, i32c(k, S)), i32c(k, 0), st1);
}

/* The block's tiles: b, b + grid, ... below `tiles`, each nk k-tiles
 * deep, in gy x gx tiles of C. Split over K (kernel 1 of split_k): `tiles`
 * counts (range, tile) items, range z = t / ctiles of tile t % ctiles
 * (consecutive items share a range: the blocks running at once read one
 * slab of K), each nk = ceil(k-tiles / S) deep; ctiles NULL otherwise. */
typedef struct sched {
    tk_value *tiles, *grid, *gx, *gy, *nk, *BM, *BN, *ctiles;
    tk_value *rank_m; /* clusters: the block's rows in its pair (rank x block_m), else NULL */
} sched;

/* The copy stream: the producer loads the block's k-tiles back to back,
 * across its tiles, S-1 ahead of the multiplies; `at` is the next one to
 * load: k-tile kt of tile t, whose origin in C is (m0, n0), and when split,
 * whose range starts at k-tile kb. Carried by the loops as nat() scalars
 * (values the consumers never use, and drop). */
enum { NAT = 5 };
typedef struct at {
    tk_value *kt, *t, *m0, *n0, *kb;
} at;

static int nat(const gemm *g) { return g->splits ? 5 : 4; }
static void at_pack(at a, tk_value **v) {
    v[0] = a.kt, v[1] = a.t, v[2] = a.m0, v[3] = a.n0;
    if (a.kb) v[4] = a.kb;
}
static at at_unpack(const gemm *g, tk_value *const *v) {
    return (at){v[0], v[1], v[2], v[3], g->splits ? v[4] : NULL};
}

/* Item t's tile origin (m0, n0); split: its range z and first k-tile kb
 * (each wanted where not NULL). */
static void origin(gemm *g, const sched *sc, tk_value *t, tk_value **m0, tk_value **n0,
                   tk_value **kb, tk_value **z) {
    tk_kernel *k = g->k;
    tk_value *bm, *bn, *r = NULL;
    if (sc->ctiles) {
        r = tk_div(k, t, sc->ctiles);
        t = tk_sub(k, t, tk_mul(k, r, sc->ctiles));
    }
    tk_gemm_block_coords(k, t, sc->gx, sc->gy, &bm, &bn);
    *m0 = tk_mul(k, bm, sc->BM);
    if (sc->rank_m) *m0 = tk_add(k, *m0, sc->rank_m);
    *n0 = tk_mul(k, bn, sc->BN);
    if (kb) *kb = r ? tk_mul(k, r, sc->nk) : NULL;
    if (z) *z = r;
}

/* Copies the k-tile at `a` (when its tile exists) into stage st, commits
 * one group either way, and returns the next position: kt + 1, or k-tile 0
 * of the block's next tile (whose origin is only formed for a tile that
 * exists: past the last, the grouped order would divide by zero). */
static at load_next(gemm *g, const sched *sc, at a, tk_value *st) {
    tk_kernel *k = g->k;
    tk_if_begin(k, tk_lt(k, a.t, sc->tiles));
    tk_gemm_load_tile(g, a.m0, a.n0, a.kb ? tk_add(k, a.kb, a.kt) : a.kt, st);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_value *kt1 = tk_add(k, a.kt, i32c(k, 1)), *res[NAT];
    tk_if_begin(k, tk_eq(k, kt1, sc->nk));
    {
        /* saturated at `tiles`: past the last tile the stream only commits */
        tk_value *t1 = tk_min(k, tk_add(k, a.t, sc->grid), sc->tiles), *m0, *n0, *kb;
        origin(g, sc, tk_min(k, t1, tk_sub(k, sc->tiles, i32c(k, 1))), &m0, &n0, &kb, NULL);
        tk_value *y[NAT] = {i32c(k, 0), t1, m0, n0, kb};
        tk_else(k, nat(g), y);
    }
    tk_value *y[NAT] = {kt1, a.t, a.m0, a.n0, a.kb};
    tk_if_end(k, nat(g), y, res);
    return at_unpack(g, res);
}

/* The k-loop of one tile: warpgroup g multiplies rows `row` = 64g .. of
 * each A stage by the whole B stage into its 64 x BN accumulator,
 * asynchronously, and keeps one multiply in flight: the tensor cores read
 * a stage until the wait that retires its multiply, so the trip of the
 * block's k-tile j (stage *st = j % S) waits for multiply j-1 (wait(1)),
 * and its barrier frees stage (j-1) % S for k-tile j+S-1, which the
 * stream *a names (the next tile's first ones in the last S-1 trips).
 * Groups committed before the wait: S-1+j, one per k-tile; k-tile j+1 is
 * group j+1, so S-3 may stay pending (check_wgmma: S >= 3): the first
 * k-tile of the next tile lands in this tile's last trip. Returns the
 * accumulator, retired. */
static tk_value *kloop(gemm *g, const sched *sc, tk_value *row, tk_value **st, at *a) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    const int S = c->stages;
    tk_value *init[2 + NAT] = {tk_gemm_acc_start(g, 64, c->block_n, TK_WARPGROUP), *st},
                       *cur[2 + NAT], *next[2 + NAT], *fin[2 + NAT];
    at_pack(*a, init + 2);
    tk_for_begin(k, i32c(k, 0), sc->nk, i32c(k, 1), 2 + nat(g), init, cur);
    {
        tk_value *s = cur[1];
        tk_value *acc = tk_wgmma(k, tk_gemm_mma_kind(c), cur[0], tk_stage(k, g->sA, s),
                                 tk_stage(k, g->sB, s), row);
        next[0] = tk_wgmma_wait(k, acc, 1);
        tk_async_wait(k, S - 3);
        tk_barrier(k);
        tk_value *prev = tk_select(k, tk_eq(k, s, i32c(k, 0)), i32c(k, S - 1),
                                   tk_sub(k, s, i32c(k, 1))); /* (j + S - 1) % S */
        at_pack(load_next(g, sc, at_unpack(g, cur + 2), prev), next + 2);
        next[1] = next_stage(k, s, S);
    }
    tk_for_end(k, 2 + nat(g), next, fin);
    *st = fin[1];
    *a = at_unpack(g, fin + 2);
    return tk_wgmma_wait(k, fin[0], 0);
}

/* GELU's Aux also goes through shared memory and the copy engine, as C
 * does: written from registers, its 2 or 4 bytes per thread and row were
 * partial sectors in the fragment layout, 64 store instructions per thread
 * and tile that the tile's next k-loop waited behind (H100: 260 µs for
 * GPT-2's fc against 175 without Aux, bench/RESULTS.md). */
static bool aux_shared(const tk_gemm_config *c) { return c->aux && c->act == TK_GEMM_ACT_GELU; }

/* Column pieces the epilogue's shared C tile (and Aux's, aux_shared) comes
 * in: the fewest (1, 2, 4 or 8) whose block_m x (block_n / pieces) tiles
 * fit beside the stages, with rows the copy engine's swizzle can describe;
 * 0: none fits. */
static int epilogue_pieces(const tk_gemm_config *c) {
    int in = 2, out = (c->out_dtype == TK_F32 ? 4 : 2) * (aux_shared(c) ? 2 : 1);
    long stages = (long)c->stages * (c->block_m + c->block_n) * c->block_k * in;
    for (int p = 1; p <= 8; p *= 2) {
        int w = c->block_n / p, row = w * (c->out_dtype == TK_F32 ? 4 : 2);
        if (c->block_n % p || w < 16) break;
        bool swizzle = row == 32 || row == 64 || row % 128 == 0;
        if (swizzle && stages + (long)c->block_m * w * out <= SMEM_BUDGET) return p;
    }
    return 0;
}

/* epilogue() with tk_gemm_config's fused epilogue: the same pieces, each
 * through kernels/gemm_epilogue.c on its way to sC (or to C). */
static void fused_epilogue(gemm *g, tk_value *C, tk_value *sC, int pieces, tk_value *acc,
                           tk_value *row) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    tk_value *r0 = tk_add(k, g->m0, row);
    if (!pieces) {
        tk_value *ic[2] = {r0, g->n0};
        tk_gemm_epilogue_store(g, acc, 64, c->block_n, TK_WARPGROUP, r0, g->n0, C, ic, 64,
                               EPI_COLS);
        return;
    }
    int w = c->block_n / pieces;
    for (int p = 0; p < pieces; p++) {
        tk_value *part = pieces > 1 ? tk_slice(k, acc, 0, p * w, 64, w) : acc;
        tk_value *c0 = tk_add(k, g->n0, i32c(k, p * w)), *is[2] = {row, i32c(k, 0)};
        if (p) tk_barrier(k); /* the previous piece's copy has read sC */
        tk_gemm_epilogue_store(g, part, 64, w, TK_WARPGROUP, r0, c0, sC, is, 64, EPI_COLS);
        tk_barrier(k);
        tk_value *ic[3];
        tk_copy_to_global_n(k, C, tk_gemm_c_index(g, g->m0, c0, ic), ic, sC);
        tk_value *ix[2] = {g->m0, c0}; /* Aux at C's place */
        if (g->sX) tk_copy_to_global(k, g->aux, ix, g->sX);
    }
}

/* Warpgroup rows `row` of the tile at (m0, n0) from the accumulator to C. */
static void epilogue(gemm *g, tk_value *C, tk_value *sC, int pieces, tk_value *acc, tk_value *row) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    if (tk_gemm_has_epilogue(c)) { /* its own path: a plain GEMM's code stays as it was */
        fused_epilogue(g, C, sC, pieces, acc, row);
        return;
    }
    if (!pieces) {
        tk_value *out = c->out_dtype == TK_F32 ? acc : tk_cvt(k, acc, c->out_dtype);
        tk_value *ic[3];
        tk_store_n(k, C, tk_gemm_c_index(g, tk_add(k, g->m0, row), g->n0, ic), ic, out);
        return;
    }
    int w = c->block_n / pieces;
    for (int p = 0; p < pieces; p++) {
        tk_value *part = pieces > 1 ? tk_slice(k, acc, 0, p * w, 64, w) : acc;
        if (c->out_dtype != TK_F32) part = tk_cvt(k, part, c->out_dtype);
        if (p) tk_barrier(k); /* the previous piece's copy has read sC */
        tk_value *is[2] = {row, i32c(k, 0)};
        tk_store(k, sC, is, part);
        tk_barrier(k);
        tk_value *ic[3];
        int n = tk_gemm_c_index(g, g->m0, tk_add(k, g->n0, i32c(k, p * w)), ic);
        tk_copy_to_global_n(k, C, n, ic, sC);
    }
}

/* TK_GEMM_NO_EPI=1: the epilogue's code stays but never runs (C is not
 * written), for measuring what the epilogue costs a tile: the ceiling of a
 * ping-pong schedule's gain (docs/PERF_NOTES.md, round 29). */
static bool no_epilogue(void) {
    const char *env = getenv("TK_GEMM_NO_EPI");
    return env && strcmp(env, "1") == 0;
}

void tk_gemm_hopper_body(gemm *g, tk_value *C, tk_value *M, tk_value *N, tk_value *K, tk_value *BM,
                         tk_value *BN, tk_value *BK) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    const int S = c->stages;
    tk_value *blocks = tk_param_scalar(k, "blocks", TK_I32);
    g->bias_in_acc = c->bias; /* split's kernel 1 has none: its reduce adds it */
    /* Clusters of two: the schedule's tiles are pairs of vertically adjacent
     * tiles (2 block_m rows), cluster c visiting pairs c, c + clusters, ...
     * and its block of rank r taking rows r x block_m of each; both blocks
     * run every pair (a second tile past M loads zeros and stores nothing),
     * so they commit the same groups and pass the same barriers, which the
     * multicast of B and the cluster-wide release rings rely on. */
    const int cl = c->cluster == 2 ? 2 : 1;
    tk_value *PM = cl > 1 ? tk_mul(k, BM, i32c(k, cl)) : BM;
    tk_value *gx = tk_ceil_div(k, N, BN), *gy = tk_ceil_div(k, M, PM);
    tk_value *tiles = tk_mul(k, gx, gy), *ctiles = NULL;
    if (g->splits) { /* S items per tile */
        ctiles = tiles;
        tiles = tk_mul(k, tiles, g->splits);
    }
    /* blocks <= 0 still runs one; an empty problem (no tiles) none */
    tk_value *nb = tk_min(k, tk_max(k, blocks, i32c(k, 1)), i32c(k, TK_GEMM_MAX_GRID));
    if (cl > 1) nb = tk_max(k, tk_div(k, nb, i32c(k, cl)), i32c(k, 1)); /* clusters */
    tk_value *grid = tk_min(k, tiles, nb);
    tk_set_grid(k, cl > 1 ? tk_mul(k, grid, i32c(k, cl)) : grid, NULL, NULL);

    /* Stages first: the copy engine wants them at 1024-byte offsets. */
    tk_gemm_shared_stages(g);
    int pieces = epilogue_pieces(c);
    tk_value *sC =
        pieces ? tk_shared(k, c->out_dtype, c->block_m, c->block_n / pieces, TK_SMEM_SWIZZLE, 1)
               : NULL;
    if (pieces && aux_shared(c))
        g->sX = tk_shared(k, c->out_dtype, c->block_m, c->block_n / pieces, TK_SMEM_SWIZZLE, 1);
    tk_value *nk = tk_ceil_div(k, K, BK);
    if (g->splits) nk = tk_ceil_div(k, nk, g->splits); /* each range's k-tiles */
    sched sc = {.tiles = tiles,
                .grid = grid,
                .gx = gx,
                .gy = gy,
                .nk = nk,
                .BM = PM,
                .BN = BN,
                .ctiles = ctiles};
    tk_value *row = tk_mul(k, tk_warpgroup_id(k), i32c(k, 64));
    bool skip_epi = no_epilogue();

    /* The stream's first S-1 k-tiles (group j = k-tile j, in stage j). */
    tk_value *b = tk_block_id(k, 0), *m0, *n0, *kb;
    if (cl > 1) {
        sc.rank_m = tk_mul(k, tk_rem(k, b, i32c(k, cl)), BM);
        b = tk_div(k, b, i32c(k, cl));
    }
    origin(g, &sc, b, &m0, &n0, &kb, NULL);
    tk_value *init[NAT] = {i32c(k, 0), b, m0, n0, kb}, *cur[NAT], *next[NAT], *fin[NAT] = {0};
    tk_value *j = tk_for_begin(k, i32c(k, 0), i32c(k, S - 1), i32c(k, 1), nat(g), init, cur);
    at_pack(load_next(g, &sc, at_unpack(g, cur), j), next);
    tk_for_end(k, nat(g), next, fin);
    tk_async_wait(k, S - 2);
    tk_barrier(k);

    /* The tiles; carried: the stage of the next multiply, the stream. */
    tk_value *tinit[1 + NAT] = {i32c(k, 0), fin[0], fin[1], fin[2], fin[3], fin[4]}, *tcur[1 + NAT],
                        *tnext[1 + NAT], *tfin[1 + NAT];
    tk_value *t = tk_for_begin(k, b, tiles, grid, 1 + nat(g), tinit, tcur);
    {
        origin(g, &sc, t, &g->m0, &g->n0, NULL, &g->z);
        tk_value *st = tcur[0];
        at a = at_unpack(g, tcur + 1);
        tk_value *acc = kloop(g, &sc, row, &st, &a);
        if (skip_epi) tk_if_begin(k, tk_lt(k, g->m0, i32c(k, 0))); /* never */
        epilogue(g, C, sC, pieces, acc, row);
        if (skip_epi) tk_if_end(k, 0, NULL, NULL);
        /* the engine's store has read sC before the k-loop's barriers:
         * they stay releases to the producer, not consumer syncs */
        if (pieces) tk_barrier(k);
        tnext[0] = st;
        at_pack(a, tnext + 1);
    }
    tk_for_end(k, 1 + nat(g), tnext, tfin);
}
