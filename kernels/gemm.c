/* GEMM: C = A·B or A·Bᵀ with a multi-stage cp.async (or copy-engine) pipeline.
 *
 * Shape of the kernel (defaults in brackets):
 *   block   block_m x block_n tile of C [128x128], `warps` warps [4]
 *   warps   a warps_m x warps_n grid [2x2]; each warp owns a WM x WN f32
 *           accumulator [64x64: 128 floats per thread]. Per k-step of 16 a
 *           warp loads WM/16 + WN/16 ldmatrix.x4 [4 + 4] and issues
 *           (WM/16)·(WN/8) mma.m16n8k16 [32]: 4 mma per shared-memory load
 *           (a 64x32 warp tile gets 2.7 and measured 20% slower). Even so,
 *           shared memory (ldmatrix reads + cp.async writes) is nearly as
 *           busy as the tensor cores: docs/PERF_NOTES.md, round 3.
 *   k-loop  A [block_m x block_k] and B [block_k x block_n] tiles (Bᵀ:
 *           [block_n x block_k]) stream through `stages` [3] swizzled shared
 *           stages of block_k [64] columns; cp.async keeps stages-1 tiles in
 *           flight while the warps multiply the oldest one. One barrier per
 *           k-tile, so a deeper block_k means fewer barriers per mma.
 *           Fragments are software-pipelined one k-step ahead (see build).
 *   order   blocks are visited in groups of GROUP_M block rows (pid swizzle)
 *           so that concurrently running blocks share A and B panels in L2.
 * Registers per thread (default): 128 accumulator + 2 x (16 A + 16 B)
 * fragment registers (this k-step's and the next) + addresses; ptxas: 244,
 * no spills (sm_90a; 128x256: 242).
 * Measured on an H200 at 4096³ (bench/RESULTS.md, docs/PERF_NOTES.md round
 * 4). Sustained GEMMs run at the GPU's power limit (~692 W), so what counts
 * is work per joule, and the SM clock shows it (randn inputs, sustained):
 *   128x128x64, 4 warps, 3 stages   380-392 TFLOP/s at 1.65-1.72 GHz
 *   128x256x64, 8 warps, 3 stages   402-414 TFLOP/s at 1.75-1.80 GHz
 *   256x128x64, 8 warps, 3 stages   396-401;  128x256x32, 6 stages: 374-383
 *   cuBLAS (wgmma, TMA)             653-680 TFLOP/s at 1.48-1.58 GHz
 * (bench_gemm_configs' uniform inputs, A = B, put them within 2% instead.)
 * 128x256 shares each A tile among twice the warps: a quarter fewer bytes
 * copied per mma; it is tk_gemm_config_for's choice on sm_90 once a problem
 * has 264 such blocks (two waves), and 128x128 (2 blocks per SM) below that,
 * where it wastes less on ragged edges and fills more SMs; problems with
 * fewer 128x128 blocks than SMs get 128x64 blocks (1024³: 152-158 TFLOP/s
 * against 117-122; 64x64 w4 149-156, 128x64 w2 and 64x128 w2 no faster).
 * What is left: the cp.async copies themselves (per-thread LDGSTS beside the
 * ldmatrix traffic) cost ~19% (round 4's ablations). `tma` = 1 moves A and
 * B through the Hopper copy engine (TK_COPY_TMA). On sm_90a the kernel is
 * then warp-specialized (jit/plan.c): a producer warp issues the tiles and the
 * 8 warps only compute, which is tk_gemm_config_for's choice there for the
 * 128x256 sizes, with 128-deep k-tiles and 2 stages (4096³, randn: 461-462
 * TFLOP/s against 426 for cp.async, 0.63 x cuBLAS; round 6). In lockstep
 * (sm_90, or kernels that cannot be split) the engine's ring and fences
 * cost what it saves (round 5).
 * Ragged M, N, K: the copies zero-fill what lies outside A / B (zeros add
 * nothing to the dot products) and the final store skips rows/cols outside C. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gemm_parts.h"
#include "jit/registry.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define GROUP_M 8 /* block rows per L2 group (4, 16 and 32 measured the same) */
/* tk_gemm_config_for's wgmma kernel on sm_90a (bench/RESULTS.md, the wgmma
 * sweep of 2026-12-01): 128x256 blocks from this many of them on (2048³,
 * 128 blocks: 466 TFLOP/s, 128x128: 340), else 128x128 blocks with 6
 * stages from this many of those on (512x4096x4096: 361, 128x256: 304);
 * below that mma.sync's 128x64 (1024³: 150, the best wgmma 129). */
#define WGMMA_MIN_BLOCKS 128
/* The slice of a warp's accumulator the fused epilogue works on at a time
 * (kernels/gemm_epilogue.c). ptxas -v, sm_80 and sm_90a: 32x16 leaves
 * every default block shape without spills; whole 64-row columns spilled
 * 8-80 bytes in the epilogue of 128x64 blocks (C read, f32). */
#define EPI_ROWS 32
#define EPI_COLS 16

tk_gemm_config tk_gemm_default_config(tk_dtype in_dtype, tk_dtype out_dtype, int transpose_b) {
    return (tk_gemm_config){.in_dtype = in_dtype,
                            .out_dtype = out_dtype,
                            .transpose_b = transpose_b != 0,
                            .block_m = 128,
                            .block_n = 128,
                            .block_k = 64,
                            .warps = 4,
                            .stages = 3};
}

void tk_gemm_shape_skinny(tk_gemm_config *c) {
    c->block_m = 64, c->block_n = 128, c->block_k = 64;
    c->warps = 4, c->stages = 6, c->tma = 1, c->wgmma = 1;
}

/* The choice of tk_gemm_config_for on a target with capabilities t (NULL:
 * unknown); `producer`: a producer warpgroup may feed the copy engine. The
 * shapes were tuned on an H200 (sm 90): other GPUs get the default. */
static tk_gemm_config choose(tk_dtype in_dtype, tk_dtype out_dtype, int transpose_b, int64_t m,
                             int64_t n, const tk_target_caps *t, bool producer) {
    tk_gemm_config c = tk_gemm_default_config(in_dtype, out_dtype, transpose_b);
    if (!t || t->sm != 90 || m <= 0 || n <= 0) return c;
    /* ceil(m/128) * ceil(n/256) >= 264 without overflow: the product is only
     * formed when both factors are below 264. */
    int64_t bm = (m - 1) / 128 + 1, bn = (n - 1) / 256 + 1, bn128 = (n - 1) / 128 + 1;
    bool big = bm >= 264 || bn >= 264 || bm * bn >= 264;
    bool wg = producer && t->wgmma && t->tma && t->setmaxnreg;
    bool wide = big || bm * bn >= WGMMA_MIN_BLOCKS; /* a wave of 128x256 blocks */
    if (wg && (wide || bm * bn128 >= WGMMA_MIN_BLOCKS)) {
        /* Hopper's warpgroup multiply fed by the engine, in 128x256 blocks
         * from a wave of them on, else 128x128 with more stages */
        c.block_n = wide ? 256 : 128;
        c.warps = 8;
        c.stages = wide ? 4 : 6;
        c.tma = 1;
        c.wgmma = 1;
    } else if (big) {
        c.block_n = 256;
        c.warps = 8;
        if (producer && t->tma && t->setmaxnreg) { /* a producer warpgroup feeds the engine */
            c.block_k = 128;
            c.stages = 2;
            c.tma = 1;
        }
    } else if (bm < 132 && bn128 < 132 && bm * bn128 < 132) {
        if (wg && m <= TK_GEMM_SKINNY_M)
            tk_gemm_shape_skinny(&c);
        else
            c.block_n = 64; /* fewer 128x128 blocks than SMs: twice the blocks */
    }
    return c;
}

tk_gemm_config tk_gemm_config_for(tk_dtype in_dtype, tk_dtype out_dtype, int transpose_b, int64_t m,
                                  int64_t n, const char *arch) {
    tk_target_caps t;
    bool known = arch && tk_target_caps_get(NULL, arch, &t) == TK_OK;
    return choose(in_dtype, out_dtype, transpose_b, m, n, known ? &t : NULL, true);
}

/* The warps_m x warps_n split of the block with the squarest warp tile
 * (square tiles need the fewest fragment loads per mma); 0 if none fits the
 * 16-element granularity of register tiles. */
static int warp_grid(const tk_gemm_config *c, int *wm, int *wn) {
    int best = -1;
    for (int m = 1; m <= c->warps; m++) {
        if (c->warps % m) continue;
        int n = c->warps / m;
        if (c->block_m % (16 * m) || c->block_n % (16 * n)) continue;
        int d = c->block_m / m - c->block_n / n;
        d = d < 0 ? -d : d;
        if (best < 0 || d < best) {
            best = d;
            *wm = m;
            *wn = n;
        }
    }
    return best >= 0;
}

/* The dtypes and transposition, checked alike by every entry point (`fn`
 * names it in the message). */
static tk_status check_types(tk_ctx *ctx, const char *fn, tk_dtype in, tk_dtype out, int tb) {
    if (in != TK_BF16 && in != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: in_dtype is %s; expected bf16 or "
                                "f16",
                                fn, tk_dtype_name(in));
    if (out != TK_BF16 && out != TK_F16 && out != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: out_dtype is %s; expected bf16, "
                                "f16 or f32",
                                fn, tk_dtype_name(out));
    if (tb != 0 && tb != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: transpose_b is %d; expected 0 or 1",
                                fn, tb);
    return TK_OK;
}

/* Rows of 32, 64 or a multiple of 128 bytes: the swizzles a wgmma
 * descriptor names (tk_smem_swizzle_bytes). */
static bool wgmma_row(int elems) {
    int b = 2 * elems;
    return b == 32 || b == 64 || b % 128 == 0;
}

static tk_status check_wgmma(tk_ctx *ctx, const tk_gemm_config *c) {
    /* a transposed A's rows are block_m (a multiple of 64) elements long:
     * block_k is then a row only of a transposed B */
    bool k_rows = !c->transpose_a || c->transpose_b;
    if (c->warps % 4 || c->block_m != 16 * c->warps)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: wgmma: %d warps and "
                                "block_m %d; each warpgroup of 4 warps owns 64 rows (block_m = "
                                "16 * warps)",
                                c->warps, c->block_m);
    if ((k_rows && !wgmma_row(c->block_k)) || (!c->transpose_b && !wgmma_row(c->block_n)))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: wgmma: block_k %d, "
                                "block_n %d; shared rows must be 32, 64 or a multiple of 128 "
                                "bytes",
                                c->block_k, c->block_n);
    if (c->stages < 3)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: wgmma: stages is %d; one multiply stays in "
                                "flight while the next stage refills, which needs 3..8",
                                c->stages);
    /* Each thread holds block_n / 2 accumulators plus ~40 registers of
     * addresses and indices, within what its warp gets: 224 with a producer
     * warpgroup beside 8 warps (jit/plan.c), 152 beside 12, 104 beside 16
     * (ptxas fails outright otherwise: C7602). */
    int budget = c->warps <= 8 ? 224 : c->warps <= 12 ? 152 : 104;
    if (c->block_n / 2 + 40 > budget)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: wgmma: block_n %d with %d warps needs %d "
                                "accumulator registers per thread; %d warps leave room for %d",
                                c->block_n, c->warps, c->block_n / 2, c->warps, budget - 40);
    return TK_OK;
}

static tk_status check_config(tk_ctx *ctx, const tk_gemm_config *c, int *wm, int *wn) {
    tk_status s = check_types(ctx, "tk_gemm_build", c->in_dtype, c->out_dtype, c->transpose_b);
    if (!s) s = tk_gemm_check_epilogue(ctx, "tk_gemm_build", c);
    if (s) return s;
    if (c->block_m < 16 || c->block_n < 16 || c->block_k < 16 || c->block_m % 16 ||
        c->block_n % 16 || c->block_k % 16 || c->block_m > 256 || c->block_n > 256 ||
        c->block_k > 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: block %dx%dx%d; each "
                                "side must be a multiple of 16 in 16..256",
                                c->block_m, c->block_n, c->block_k);
    if (c->warps < 1 || c->warps > 16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: warps is %d; expected "
                                "1..16",
                                c->warps);
    if (c->tma != 0 && c->tma != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: tma is %d; expected 0 "
                                "or 1",
                                c->tma);
    if (c->stages < 2 || c->stages > 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: stages is %d; expected "
                                "2..8",
                                c->stages);
    if (c->wgmma != 0 && c->wgmma != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: wgmma is %d; expected "
                                "0 or 1",
                                c->wgmma);
    if (c->cluster < 0 || c->cluster > 2 ||
        (c->cluster == 2 && (!c->wgmma || !c->tma || c->split_k >= 2)))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: cluster is %d; expected 0 or 1 (none), or 2 with "
                                "wgmma and tma and no split_k (this config: wgmma %d, tma %d, "
                                "split_k %d)",
                                c->cluster, c->wgmma, c->tma, c->split_k);
    if (c->wgmma) return check_wgmma(ctx, c);
    if (!warp_grid(c, wm, wn))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm_build: %d warps cannot split "
                                "a %dx%d block into warp tiles of multiples of 16",
                                c->warps, c->block_m, c->block_n);
    return TK_OK;
}

static tk_value *i32c(tk_kernel *k, int v) { return tk_const_i32(k, v); }
static tk_value *dim32(tk_kernel *k, tk_value *view, int d) {
    return tk_cvt(k, tk_dim(k, view, d), TK_I32);
}

/* Issues the cp.async copies of k-tile `kt` into ring stage `st`. */
void tk_gemm_load_tile(gemm *g, tk_value *m0, tk_value *n0, tk_value *kt, tk_value *st) {
    tk_kernel *k = g->k;
    tk_value *k0 = tk_mul(k, kt, i32c(k, g->c->block_k));
    tk_value *ia[2] = {m0, k0};
    if (g->c->transpose_a) {
        ia[0] = k0;
        ia[1] = m0;
    }
    int mode = g->c->tma ? TK_COPY_TMA : TK_COPY_ASYNC;
    tk_copy_to_shared(k, tk_stage(k, g->sA, st), g->A, ia, 0.0f, mode);
    tk_value *ib[2] = {k0, n0};
    if (g->c->transpose_b) {
        ib[0] = n0;
        ib[1] = k0;
    }
    /* a cluster's pair shares n0 and the k-tile: one B tile for both */
    int mc = g->c->cluster == 2 ? TK_COPY_MULTICAST : 0;
    tk_copy_to_shared(k, tk_stage(k, g->sB, st), g->B, ib, 0.0f, mode | mc);
}

void tk_gemm_load_tile_if(gemm *g, tk_value *kt, tk_value *st, tk_value *nk) {
    tk_kernel *k = g->k;
    tk_if_begin(k, tk_lt(k, kt, nk));
    tk_value *at = g->kbase ? tk_add(k, g->kbase, kt) : kt; /* a split's range starts at kbase */
    tk_gemm_load_tile(g, g->m0, g->n0, at, st ? st : tk_rem(k, kt, i32c(k, g->c->stages)));
    tk_if_end(k, 0, NULL, NULL);
}

int tk_gemm_c_index(const gemm *g, tk_value *r, tk_value *c, tk_value **idx) {
    int n = 0;
    if (g->splits) idx[n++] = g->z;
    idx[n++] = r;
    idx[n++] = c;
    return n;
}

/* Triton-style grouped order: pid runs down GROUP_M block rows before
 * moving one block column right. */
void tk_gemm_block_coords(tk_kernel *k, tk_value *pid, tk_value *gx, tk_value *gy, tk_value **bm,
                          tk_value **bn) {
    tk_value *per_group = tk_mul(k, gx, i32c(k, GROUP_M));
    tk_value *first = tk_mul(k, tk_div(k, pid, per_group), i32c(k, GROUP_M));
    tk_value *rows = tk_min(k, tk_sub(k, gy, first), i32c(k, GROUP_M));
    tk_value *in_group = tk_rem(k, pid, per_group);
    *bm = tk_add(k, first, tk_rem(k, in_group, rows));
    *bn = tk_div(k, in_group, rows);
}

/* One k-step's register fragments: A [WM x 16] (with transpose_a the
 * [16 x WM] col tile of the [K, M] stage, ldmatrix.trans) and B ([16 x WN]
 * col tile, or with transpose_b the [WN x 16] row tile of the [N, K] stage). */
typedef struct frags {
    tk_value *a, *b;
} frags;

static frags load_frags(gemm *g, tk_value *a, tk_value *b, tk_value *kk) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    tk_type a_t = c->transpose_a ? tk_tile_type(c->in_dtype, 16, g->wm_rows, TK_WARP, TK_COL)
                                 : tk_tile_type(c->in_dtype, g->wm_rows, 16, TK_WARP, TK_ROW);
    tk_type b_t = c->transpose_b ? tk_tile_type(c->in_dtype, g->wn_cols, 16, TK_WARP, TK_ROW)
                                 : tk_tile_type(c->in_dtype, 16, g->wn_cols, TK_WARP, TK_COL);
    tk_value *ia[2] = {g->wr0, kk}, *ib[2] = {kk, g->wc0};
    if (c->transpose_a) {
        ia[0] = kk;
        ia[1] = g->wr0;
    }
    if (c->transpose_b) {
        ib[0] = g->wc0;
        ib[1] = kk;
    }
    return (frags){tk_load(k, a_t, a, ia, 0.0f), tk_load(k, b_t, b, ib, 0.0f)};
}

void tk_gemm_shared_stages(gemm *g) {
    const tk_gemm_config *c = g->c;
    tk_kernel *k = g->k;
    int S = c->stages;
    g->sA = c->transpose_a ? tk_shared(k, c->in_dtype, c->block_k, c->block_m, TK_SMEM_SWIZZLE, S)
                           : tk_shared(k, c->in_dtype, c->block_m, c->block_k, TK_SMEM_SWIZZLE, S);
    g->sB = c->transpose_b ? tk_shared(k, c->in_dtype, c->block_n, c->block_k, TK_SMEM_SWIZZLE, S)
                           : tk_shared(k, c->in_dtype, c->block_k, c->block_n, TK_SMEM_SWIZZLE, S);
}

/* The options past `wgmma`, as specs (only those set: a plain GEMM prints,
 * hashes and lowers as it did before they existed). */
static void spec_epilogue(tk_kernel *k, const tk_gemm_config *c) {
    if (c->transpose_a) tk_spec(k, "transpose_a", 1);
    if (c->bias) tk_spec(k, "bias", 1);
    if (c->act) tk_spec(k, "act", c->act);
    if (c->aux) tk_spec(k, "aux", 1);
    if (c->accumulate) tk_spec(k, "accumulate", 1);
    if (c->split_k >= 2) tk_spec(k, "split_k", 1);
}

/* A split's k-tiles for this block: range z = block z of S (P's first dim)
 * covers ceil(nk / S) k-tiles from kbase; the last range may hold fewer. */
static tk_value *split_range(gemm *g, tk_value *K, tk_value *BK) {
    tk_kernel *k = g->k;
    tk_value *nk = tk_ceil_div(k, K, BK), *per = tk_ceil_div(k, nk, g->splits);
    g->z = tk_block_id(k, 2);
    g->kbase = tk_mul(k, g->z, per);
    return tk_min(k, per, tk_sub(k, nk, g->kbase));
}

static void build(gemm *g, int wm, int wn) {
    tk_kernel *k = g->k;
    const tk_gemm_config *c = g->c;
    const int WM = c->block_m / wm, WN = c->block_n / wn, S = c->stages;
    tk_value *A = g->A = tk_param_tensor(k, "A", c->in_dtype, 2);
    g->B = tk_param_tensor(k, "B", c->in_dtype, 2);
    bool split = c->split_k >= 2; /* C is then P [S, M, N] */
    tk_value *C = g->C = tk_param_tensor(k, split ? "P" : "C", c->out_dtype, split ? 3 : 2);
    tk_gemm_epilogue_params(g);
    /* The configuration shows up in the printed kernel and its cache key. */
    tk_value *BM = tk_cvt(k, tk_spec(k, "block_m", c->block_m), TK_I32);
    tk_value *BN = tk_cvt(k, tk_spec(k, "block_n", c->block_n), TK_I32);
    tk_value *BK = tk_cvt(k, tk_spec(k, "block_k", c->block_k), TK_I32);
    tk_spec(k, "stages", S);
    tk_spec(k, "transpose_b", c->transpose_b);
    if (c->wgmma) tk_spec(k, "wgmma", 1);
    spec_epilogue(k, c);

    int ta = c->transpose_a;
    tk_value *M = dim32(k, A, ta ? 1 : 0), *K = dim32(k, A, ta ? 0 : 1);
    tk_value *N = dim32(k, C, split ? 2 : 1);
    if (split) g->splits = dim32(k, C, 0);
    if (c->wgmma) {
        tk_gemm_hopper_body(g, C, M, N, K, BM, BN, BK);
        return;
    }
    tk_value *gx = tk_ceil_div(k, N, BN), *gy = tk_ceil_div(k, M, BM);
    tk_set_grid(k, gx, gy, g->splits);

    tk_value *bm, *bn;
    tk_gemm_block_coords(k, tk_add(k, tk_mul(k, tk_block_id(k, 1), gx), tk_block_id(k, 0)), gx, gy,
                         &bm, &bn);
    g->m0 = tk_mul(k, bm, BM);
    g->n0 = tk_mul(k, bn, BN);
    /* This warp's corner inside the block tile. */
    tk_value *warp = tk_warp_id(k);
    tk_value *wr0 = g->wr0 = tk_mul(k, tk_div(k, warp, i32c(k, wn)), i32c(k, WM));
    tk_value *wc0 = g->wc0 = tk_mul(k, tk_rem(k, warp, i32c(k, wn)), i32c(k, WN));
    g->wm_rows = WM;
    g->wn_cols = WN;

    /* Swizzled stages: ldmatrix reads 8 rows of one 16-byte column chunk,
     * which the XOR swizzle spreads over all banks. */
    tk_gemm_shared_stages(g);

    /* Prologue: k-tiles 0..S-2 in flight, one commit group each (empty
     * groups past the end keep the group count the waits rely on); then
     * k-tile 0 landed; then k-tile S-1 (group S-1) and k-step 0's
     * fragments. */
    tk_value *nk = split ? split_range(g, K, BK) : tk_ceil_div(k, K, BK);
    for (int s = 0; s < S - 1; s++) {
        tk_gemm_load_tile_if(g, i32c(k, s), NULL, nk);
        tk_async_commit(k);
    }
    tk_async_wait(k, S - 2);
    tk_barrier(k);
    tk_gemm_load_tile_if(g, i32c(k, S - 1), NULL, nk);
    tk_async_commit(k);
    frags f0 =
        load_frags(g, tk_stage(k, g->sA, i32c(k, 0)), tk_stage(k, g->sB, i32c(k, 0)), i32c(k, 0));
    tk_type acc_t = tk_tile_type(TK_F32, WM, WN, TK_WARP, TK_ROW);
    /* Carried: accumulator, k-step 0's fragments, and kt % S (stepped with
     * a compare instead of a division per trip). */
    tk_value *init[4] = {tk_zeros(k, acc_t), f0.a, f0.b, i32c(k, 0)}, *cur[4], *next[4], *fin[4];
    tk_value *kt = tk_for_begin(k, i32c(k, 0), nk, i32c(k, 1), 4, init, cur);
    {
        /* Software pipeline over k-steps: each step loads the next step's
         * fragments before its own mmas, so ldmatrix latency hides behind
         * tensor-core work. The last step's "next" is step 0 of k-tile
         * kt+1, from the next stage: before reading it, wait for that tile
         * and pass a barrier, which also ends every warp's reads of stage
         * kt % S (its last fragments are already in registers), the stage
         * k-tile kt+S refills. Groups committed before the wait: S + kt;
         * k-tile kt+1 is group kt+1, so S-2 may stay pending. */
        tk_value *acc = cur[0];
        frags f = {cur[1], cur[2]};
        tk_value *st = cur[3], *st1 = tk_add(k, st, i32c(k, 1));
        st1 = tk_select(k, tk_eq(k, st1, i32c(k, S)), i32c(k, 0), st1); /* (kt + 1) % S */
        tk_value *a = tk_stage(k, g->sA, st), *b = tk_stage(k, g->sB, st);
        const int steps = c->block_k / 16;
        for (int kk = 0; kk < steps; kk++) {
            frags nf;
            if (kk + 1 < steps) {
                nf = load_frags(g, a, b, i32c(k, 16 * (kk + 1)));
            } else {
                tk_async_wait(k, S - 2);
                tk_barrier(k);
                tk_gemm_load_tile_if(g, tk_add(k, kt, i32c(k, S)), st, nk); /* (kt + S) % S */
                tk_async_commit(k);
                nf = load_frags(g, tk_stage(k, g->sA, st1), tk_stage(k, g->sB, st1), i32c(k, 0));
            }
            acc = tk_mma(k, tk_gemm_mma_kind(c), f.a, f.b, acc);
            f = nf;
        }
        next[0] = acc;
        next[1] = f.a;
        next[2] = f.b;
        next[3] = st1;
    }
    tk_for_end(k, 4, next, fin);
    tk_value *acc_end = fin[0];

    /* Epilogue: convert and store this warp's tile; rows/cols past M/N are
     * skipped by the store. */
    if (tk_gemm_has_epilogue(c)) {
        tk_value *ic[2] = {tk_add(k, g->m0, wr0), tk_add(k, g->n0, wc0)};
        tk_gemm_epilogue_store(g, acc_end, WM, WN, TK_WARP, ic[0], ic[1], C, ic, EPI_ROWS,
                               EPI_COLS);
        return;
    }
    tk_value *out = c->out_dtype == TK_F32 ? acc_end : tk_cvt(k, acc_end, c->out_dtype);
    tk_value *r = tk_add(k, g->m0, wr0), *col = tk_add(k, g->n0, wc0), *ic[3];
    tk_store_n(k, C, tk_gemm_c_index(g, r, col, ic), ic, out);
}

tk_status tk_gemm_build(tk_ctx *ctx, const tk_gemm_config *cfg, tk_kernel **out) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_gemm_build: %s is NULL",
                                out ? "cfg" : "out");
    *out = NULL;
    int wm = 1, wn = 1;
    tk_status s = check_config(ctx, cfg, &wm, &wn);
    if (!s) s = tk_gemm_check_split(ctx, "tk_gemm_build", cfg);
    if (s) return s;
    if (cfg->split_k >= 2 && cfg->split_reduce) return tk_gemm_reduce_build(ctx, cfg, out);
    tk_gemm_config part;
    if (cfg->split_k >= 2) cfg = tk_gemm_split_part(cfg, &part);
    char name[96];
    static const char *const acts[3] = {"", "_gelu", "_dgelu"};
    snprintf(name, sizeof name, "tk_gemm_%s_%s_%s%s_%dx%dx%d_w%d_s%d%s%s%s%s%s%s%s%s",
             tk_dtype_name(cfg->in_dtype), tk_dtype_name(cfg->out_dtype),
             cfg->transpose_a ? "at" : "a", cfg->transpose_b ? "bt" : "b", cfg->block_m,
             cfg->block_n, cfg->block_k, cfg->warps, cfg->stages, cfg->tma ? "_tma" : "",
             cfg->wgmma ? "_wgmma" : "", cfg->bias ? "_bias" : "", acts[cfg->act],
             cfg->aux ? "_aux" : "", cfg->accumulate ? "_acc" : "",
             cfg->split_k >= 2 ? "_splitk" : "", cfg->cluster == 2 ? "_c2" : "");
    tk_kernel *k;
    if ((s = tk_kernel_create(ctx, name, cfg->warps, &k))) return s;
    if (cfg->cluster == 2) tk_kernel_set_cluster(k, 2); /* before any op; sticky on error */
    gemm g = {.k = k, .c = cfg};
    build(&g, wm, wn);
    if ((s = tk_kernel_finish(k))) {
        tk_ctx_set_error(ctx, s, "tk_gemm_build: %s", tk_kernel_error(k));
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}

/* ---- tk_gemm (tk_run.h) ----------------------------------------------------
 * The registry's GEMM: one compiled kernel per configuration. */
typedef struct gemm_key {
    int32_t in_dtype, out_dtype, transpose_b, block_m, block_n, block_k, warps, stages, tma;
    int32_t wgmma, transpose_a, bias, act, aux, accumulate, split, split_reduce, cluster;
} gemm_key;

static tk_status build_gemm_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const gemm_key *g = key;
    tk_gemm_config c = {.in_dtype = (tk_dtype)g->in_dtype,
                        .out_dtype = (tk_dtype)g->out_dtype,
                        .transpose_b = g->transpose_b,
                        .block_m = g->block_m,
                        .block_n = g->block_n,
                        .block_k = g->block_k,
                        .warps = g->warps,
                        .stages = g->stages,
                        .tma = g->tma,
                        .wgmma = g->wgmma,
                        .transpose_a = g->transpose_a,
                        .bias = g->bias,
                        .act = g->act,
                        .aux = g->aux,
                        .accumulate = g->accumulate,
                        .split_k = g->split ? 2 : 0, /* the kernel reads S from P */
                        .split_reduce = g->split_reduce,
                        .cluster = g->cluster};
    return tk_gemm_build(ctx, &c, out);
}

static const tk_kernel_def gemm_def = {"tk_gemm", sizeof(gemm_key), build_gemm_key};

tk_status tk_gemm_program(tk_ctx *ctx, const tk_gemm_config *c, tk_program **prog,
                          tk_prepare_info *info) {
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.in_dtype = c->in_dtype, key.out_dtype = c->out_dtype, key.transpose_b = c->transpose_b;
    key.block_m = c->block_m, key.block_n = c->block_n, key.block_k = c->block_k;
    key.warps = c->warps, key.stages = c->stages, key.tma = c->tma, key.wgmma = c->wgmma;
    key.transpose_a = c->transpose_a, key.bias = c->bias, key.act = c->act, key.aux = c->aux;
    key.accumulate = c->accumulate, key.split = c->split_k >= 2;
    key.split_reduce = c->split_reduce;
    key.cluster = c->cluster == 2 ? 2 : 0;
    return tk_registry_program(ctx, &gemm_def, &key, prog, info);
}

/* The end of tk_gemm_params' first layout, the smallest struct_size: `config`
 * was added after it, and reads as NULL from a struct that ends before it. */
#define GEMM_PARAMS_MIN (offsetof(tk_gemm_params, ldc) + sizeof(int64_t))

static tk_status check_gemm(tk_ctx *ctx, const tk_gemm_params *p) {
    const char *fn = "tk_gemm";
    if (!p) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: params is NULL", fn);
    tk_status s = check_types(ctx, fn, p->in_dtype, p->out_dtype, p->transpose_b);
    if (s) return s;
    if (p->m <= 0 || p->n <= 0 || p->k <= 0)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: m, n, k are %lld, %lld, %lld; "
                                "each must be >= 1",
                                fn, (long long)p->m, (long long)p->n, (long long)p->k);
    if (!p->a || !p->b || !p->c)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                                !p->a   ? "a"
                                : !p->b ? "b"
                                        : "c");
    /* the epilogue's flags first: transpose_a decides what lda is checked against */
    tk_gemm_config ep = {.transpose_a = p->transpose_a,
                         .bias = p->bias != NULL,
                         .act = p->act,
                         .aux = p->aux != NULL,
                         .accumulate = p->accumulate};
    if ((s = tk_gemm_check_epilogue(ctx, fn, &ep))) return s;
    if (p->split_k < 0 || p->split_k > TK_GEMM_MAX_SPLIT)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: split_k is %d; expected 0..%d", fn,
                                p->split_k, TK_GEMM_MAX_SPLIT);
    int64_t bcols = p->transpose_b ? p->k : p->n, acols = p->transpose_a ? p->m : p->k;
    if ((p->lda && p->lda < acols) || (p->ldb && p->ldb < bcols) || (p->ldc && p->ldc < p->n))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: a leading dimension is smaller "
                                "than its row (lda %lld < %s %lld, ldb %lld < %lld or ldc %lld "
                                "< n %lld)",
                                fn, (long long)p->lda, p->transpose_a ? "m" : "k", (long long)acols,
                                (long long)p->ldb, (long long)bcols, (long long)p->ldc,
                                (long long)p->n);
    return tk_gemm_check_call_epilogue(ctx, p, &ep);
}

/* The copy engine reads 16-byte aligned tensors with 16-byte row pitches
 * (else the launch encodes no map, and the producer warp's own copies are
 * slow): other calls get the cp.async kernel that sm_90 without its
 * arch-specific features would. */
static tk_gemm_config call_choice(const tk_gemm_params *p, const char *arch, int sms, bool split) {
    int64_t esz = (int64_t)tk_dtype_size(p->in_dtype);
    int64_t lda = p->lda ? p->lda : p->transpose_a ? p->m : p->k;
    int64_t ldb = p->ldb ? p->ldb : (p->transpose_b ? p->k : p->n);
    bool engine =
        ((uintptr_t)p->a | (uintptr_t)p->b) % 16 == 0 && lda * esz % 16 == 0 && ldb * esz % 16 == 0;
    tk_target_caps t;
    bool known = arch && tk_target_caps_get(NULL, arch, &t) == TK_OK;
    tk_gemm_config c =
        choose(p->in_dtype, p->out_dtype, p->transpose_b, p->m, p->n, known ? &t : NULL, engine);
    c.transpose_a = p->transpose_a; /* the call's own epilogue and A */
    c.bias = p->bias != NULL;
    c.act = p->act;
    c.aux = p->aux != NULL;
    c.accumulate = p->accumulate;
    if (!split || p->split_k == 1) return c;
    tk_gemm_target tt = {known ? &t : NULL, sms, engine};
    return tk_gemm_split_choose(&c, p->m, p->n, p->k, p->split_k, &tt);
}

/* The SMs tk_gemm_config_for_call plans a split for (an H100's). */
#define CALL_SMS 132

tk_gemm_config tk_gemm_config_for_call(const tk_gemm_params *user, const char *arch) {
    tk_gemm_params p;
    if (tk_params_read(NULL, "tk_gemm_config_for_call", user, &p, sizeof p, GEMM_PARAMS_MIN))
        return (tk_gemm_config){0};
    return call_choice(&p, arch, CALL_SMS, p.workspace != NULL);
}

/* The configuration of a call: the caller's, if it names one for the same
 * dtypes and transposition, else the library's choice for the size and GPU;
 * a split only where `split` allows it (a workspace, or the query for one). */
static tk_status gemm_choose(tk_ctx *ctx, const tk_gemm_params *p, tk_gemm_config *c, bool split) {
    const tk_gemm_config *g = p->config;
    if (!g) {
        char arch[16];
        int sms = 0;
        tk_registry_arch(ctx, arch, sizeof arch);
        if (split && p->split_k != 1 && (sms = tk_registry_sm_count(ctx)) < 1) sms = CALL_SMS;
        *c = call_choice(p, arch[0] ? arch : NULL, sms, split);
        return TK_OK;
    }
    if (g->in_dtype != p->in_dtype || g->out_dtype != p->out_dtype ||
        g->transpose_b != p->transpose_b)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: config is for %s -> %s, "
                                "transpose_b %d; the params for %s -> %s, transpose_b %d",
                                tk_dtype_name(g->in_dtype), tk_dtype_name(g->out_dtype),
                                g->transpose_b, tk_dtype_name(p->in_dtype),
                                tk_dtype_name(p->out_dtype), p->transpose_b);
    tk_gemm_config want = {0};
    tk_status s = tk_gemm_check_call_epilogue(ctx, p, &want);
    if (!s) s = tk_gemm_match_epilogue(ctx, &want, g);
    if (!s) s = tk_gemm_match_split(ctx, p, g);
    if (s) return s;
    *c = *g;
    if (g->split_k >= 2) c->split_k = tk_gemm_split_ranges(p->k, g->block_k, g->split_k);
    return TK_OK;
}

/* The kernel indexes in i32 (dims converted, block origins, the grouped
 * block order's pid = by * gx + bx): sizes past that must fail here, not
 * wrap into a small or wrong grid. The margin keeps origin + block in range. */
#define GEMM_MAX_SIZE ((int64_t)INT32_MAX - 65535)
static tk_status check_gemm_sizes(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c) {
    if (p->m > GEMM_MAX_SIZE || p->n > GEMM_MAX_SIZE || p->k > GEMM_MAX_SIZE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: m, n, k are %lld, %lld, "
                                "%lld; the kernel's 32-bit indexing allows each up to %lld",
                                (long long)p->m, (long long)p->n, (long long)p->k,
                                (long long)GEMM_MAX_SIZE);
    int64_t gx = (p->n + c->block_n - 1) / c->block_n, gy = (p->m + c->block_m - 1) / c->block_m;
    /* the wgmma kernel's grid is one row of at most TK_GEMM_MAX_GRID blocks;
     * its tile index steps past the last tile by at most a grid */
    int64_t rows = c->wgmma ? 1 : gy, tiles = c->wgmma ? INT32_MAX - TK_GEMM_MAX_GRID : INT32_MAX;
    int64_t items = c->wgmma && c->split_k >= 2 ? c->split_k : 1; /* a split's (range, tile) */
    if (rows > 65535 || gx * gy * items > tiles || gx * GROUP_M > INT32_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: %lld x %lld tiles of %dx%d exceed the kernel's limits "
                                "(at most 65535 tile rows%s, %lld tiles)",
                                (long long)gy, (long long)gx, c->block_m, c->block_n,
                                c->wgmma ? " for mma.sync; none for wgmma" : "", (long long)tiles);
    return TK_OK;
}

/* The caller's parameters (`user`, any struct_size) read into *p and
 * checked, and the configuration of the call; `query`: as if a workspace
 * were given (tk_gemm_workspace). */
static tk_status gemm_resolve(tk_ctx *ctx, const tk_gemm_params *user, tk_gemm_params *p,
                              tk_gemm_config *c, bool query) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    *c = (tk_gemm_config){0};
    tk_status s = tk_params_read(ctx, "tk_gemm", user, p, sizeof *p, GEMM_PARAMS_MIN);
    if (!s) s = check_gemm(ctx, p);
    if (!s) s = gemm_choose(ctx, p, c, query || p->workspace);
    if (!s) s = check_gemm_sizes(ctx, p, c);
    int asked = c->split_k >= 2 ? c->split_k : p->split_k; /* the config's, or the params' */
    if (!s && asked >= 2 && !query && !p->workspace)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_gemm: split_k %d needs a workspace (tk_gemm_workspace says "
                                "how large); workspace is NULL",
                                asked);
    return s;
}

/* *p and *cfg as gemm_resolve makes them, and the program of an unsplit
 * call (built and compiled on first use; a split's: tk_gemm_split_prepare). */
static tk_status gemm_program(tk_ctx *ctx, const tk_gemm_params *user, tk_gemm_params *p,
                              tk_gemm_config *cfg, tk_program **prog, tk_prepare_info *info) {
    tk_status s = gemm_resolve(ctx, user, p, cfg, false);
    if (s || cfg->split_k >= 2) return s;
    return tk_gemm_program(ctx, cfg, prog, info);
}

tk_status tk_gemm_prepare(tk_ctx *ctx, const tk_gemm_params *user, tk_prepare_info *info) {
    tk_program *prog = NULL, *red = NULL;
    tk_gemm_params p;
    tk_gemm_config c;
    tk_status s = gemm_program(ctx, user, &p, &c, &prog, info);
    if (!s && c.split_k >= 2) s = tk_gemm_split_prepare(ctx, &p, &c, &prog, &red, info);
    return s;
}

tk_status tk_gemm_workspace(tk_ctx *ctx, const tk_gemm_params *user, size_t *bytes) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_gemm_workspace: bytes is NULL");
    *bytes = 0;
    tk_gemm_params p;
    tk_gemm_config c;
    tk_status s = gemm_resolve(ctx, user, &p, &c, true);
    if (!s && c.split_k >= 2) s = tk_gemm_split_bytes(ctx, &p, &c, bytes);
    return s;
}

int tk_gemm_ab_args(const tk_gemm_params *p, tk_arg *args) {
    int64_t bcols = p->transpose_b ? p->k : p->n, brows = p->transpose_b ? p->n : p->k;
    int64_t acols = p->transpose_a ? p->m : p->k, arows = p->transpose_a ? p->k : p->m;
    int64_t ad[2] = {arows, acols}, bd[2] = {brows, bcols};
    int64_t as[2] = {p->lda ? p->lda : acols, 1}, bs[2] = {p->ldb ? p->ldb : bcols, 1};
    args[0] = tk_arg_strided((void *)p->a, p->in_dtype, 2, ad, as);
    args[1] = tk_arg_strided((void *)p->b, p->in_dtype, 2, bd, bs);
    return 2;
}

int tk_gemm_out_args(const tk_gemm_params *p, const tk_gemm_config *c, tk_arg *args) {
    int64_t cd[2] = {p->m, p->n}, cs[2] = {p->ldc ? p->ldc : p->n, 1};
    int64_t xs[2] = {p->ldaux ? p->ldaux : p->n, 1}, one = 1;
    int n = 0;
    args[n++] = tk_arg_strided(p->c, p->out_dtype, 2, cd, cs);
    if (c->bias) args[n++] = tk_arg_strided((void *)p->bias, p->out_dtype, 1, &p->n, &one);
    if (c->aux) args[n++] = tk_arg_strided(p->aux, p->out_dtype, 2, cd, xs);
    return n;
}

/* The wgmma kernel's grid: the blocks the GPU holds at once (where unknown,
 * the kernel's most: one per tile up to TK_GEMM_MAX_GRID). */
tk_arg tk_gemm_blocks_arg(const tk_program *prog) {
    int resident = tk_program_resident_blocks(prog);
    return tk_arg_i32(resident > 0 ? resident : TK_GEMM_MAX_GRID);
}

tk_status tk_gemm(tk_ctx *ctx, const tk_gemm_params *user, void *stream) {
    tk_program *prog = NULL;
    tk_gemm_params p;
    tk_gemm_config c;
    tk_status s = gemm_program(ctx, user, &p, &c, &prog, NULL);
    if (s) return s;
    if (c.split_k >= 2) return tk_gemm_split_run(ctx, &p, &c, stream);
    tk_arg args[6];
    int n = tk_gemm_ab_args(&p, args);
    n += tk_gemm_out_args(&p, &c, args + n);
    if (c.wgmma) args[n++] = tk_gemm_blocks_arg(prog);
    return tk_launch(prog, n, args, stream);
}
