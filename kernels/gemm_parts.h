/* What the two GEMM kernels share: kernels/gemm.c (mma.sync, and the entry
 * points) defines these; kernels/gemm_hopper.c (wgmma) is the other user. */
#ifndef TK_KERNELS_GEMM_PARTS_H
#define TK_KERNELS_GEMM_PARTS_H

#include <stdbool.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run_gemm.h"

/* The most blocks the wgmma kernel launches: a persistent grid needs no
 * more than the SMs hold, and with it a tile index (below the tiles, which
 * tk_gemm keeps under 2^31 - 1 - TK_GEMM_MAX_GRID) plus the grid stays in
 * i32. */
#define TK_GEMM_MAX_GRID 65536

/* Everything the pieces of a GEMM kernel share. */
typedef struct gemm {
    tk_kernel *k;
    const tk_gemm_config *c;
    tk_value *A, *B, *sA, *sB; /* views and shared rings */
    tk_value *C, *bias, *aux;  /* the output; the epilogue's views (NULL: none) */
    tk_value *sX;              /* GELU's Aux on its way to the copy engine (NULL: direct) */
    tk_value *m0, *n0;         /* the block's origin in C (i32) */
    int wm_rows, wn_cols;      /* the warp tile, WM x WN (mma.sync) */
    tk_value *wr0, *wc0;       /* this warp's corner inside the block tile */
    /* split_k (kernel 1): C is P [S, M, N] f32; NULL when not split */
    tk_value *splits; /* S, read from P (i32)                               */
    tk_value *z;      /* the range of K this tile's partial covers (i32)    */
    tk_value *kbase;  /* its first k-tile (mma.sync; the wgmma stream carries its own) */
    bool bias_in_acc; /* the k-loop starts from the bias (tk_gemm_acc_start): none added after */
} gemm;

/* Copies k-tile kt of the tile at (m0, n0): A's and B's, into ring stage st. */
void tk_gemm_load_tile(gemm *g, tk_value *m0, tk_value *n0, tk_value *kt, tk_value *st);
/* The rings of A and B k-tiles (A's transposed: [block_k, block_m]). */
void tk_gemm_shared_stages(gemm *g);
/* if (kt < nk) copy k-tile kt of the block's tile (g->m0, g->n0) into ring
 * stage st (NULL: kt % stages); no copies past the last k-tile. */
void tk_gemm_load_tile_if(gemm *g, tk_value *kt, tk_value *st, tk_value *nk);
/* Tile pid's (row, col) among gy x gx block tiles, in grouped order. */
void tk_gemm_block_coords(tk_kernel *k, tk_value *pid, tk_value *gx, tk_value *gy, tk_value **bm,
                          tk_value **bn);

/* C's index of the element (r, c) of the output: {r, c}, or {z, r, c} into
 * P when split; returns the count. */
int tk_gemm_c_index(const gemm *g, tk_value *r, tk_value *c, tk_value **idx);

/* The registry's program of configuration c (its fields, split_k as a flag). */
tk_status tk_gemm_program(tk_ctx *ctx, const tk_gemm_config *c, tk_program **prog,
                          tk_prepare_info *info);
/* A call's launch arguments: A and B (2), then C, [bias], [Aux] (returns
 * the count); the wgmma kernel's `blocks` for prog. */
int tk_gemm_ab_args(const tk_gemm_params *p, tk_arg *args);
int tk_gemm_out_args(const tk_gemm_params *p, const tk_gemm_config *c, tk_arg *args);
tk_arg tk_gemm_blocks_arg(const tk_program *prog);

/* ---- The split over K (kernels/gemm_split.c) ------------------------------- */
/* Skinny M, up to TK_GEMM_SKINNY_M rows: c's block becomes one warpgroup's
 * 64x128x64 on wgmma, 6 stages, through the engine (its other fields stay).
 * Where tiles are few, it beat mma.sync's 128x64 at every M measured (H100,
 * N = K = 4096, bench/RESULTS.md 2026-12-07, `splits`: M 16 / 64 / 128 / 256
 * unsplit 17 / 66 / 131 / 262 TFLOP/s against 11 / 44 / 110 / 220), and its
 * split beat the other candidates' (tk_gemm_config_for and the split's
 * candidates take it there). */
#define TK_GEMM_SKINNY_M 256
void tk_gemm_shape_skinny(tk_gemm_config *c);

/* What a call's split needs to know of the GPU: its caps (NULL: unknown),
 * its SMs, and whether A and B may go through the copy engine. */
typedef struct tk_gemm_target {
    const tk_target_caps *caps;
    int sms;
    bool engine;
} tk_gemm_target;
/* The configuration of an M x N x K call whose unsplit choice is *c: `want`
 * 0 chooses the split (none where it would not pay), >= 2 splits in want
 * ranges; the block shape may change with it. split_k of the result: the
 * ranges that hold k-tiles (0 or 1: no split). A pure function. */
tk_gemm_config tk_gemm_split_choose(const tk_gemm_config *c, int64_t m, int64_t n, int64_t k,
                                    int want, const tk_gemm_target *t);
/* Ranges with k-tiles when K's ceil(k / block_k) k-tiles go in `want`
 * ranges of equal length (at most want). */
int tk_gemm_split_ranges(int64_t k, int block_k, int want);
/* c's split fields (split_k, split_reduce); `fn` names the entry point. */
tk_status tk_gemm_check_split(tk_ctx *ctx, const char *fn, const tk_gemm_config *c);
/* A caller's config and the params agree on the split. */
tk_status tk_gemm_match_split(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *g);
/* Kernel 1's configuration of a split c: f32 partials, no epilogue (in *buf). */
const tk_gemm_config *tk_gemm_split_part(const tk_gemm_config *c, tk_gemm_config *buf);
/* Kernel 2 of a split (c->split_reduce). */
tk_status tk_gemm_reduce_build(tk_ctx *ctx, const tk_gemm_config *c, tk_kernel **out);
/* The workspace a split call p with configuration c needs. */
tk_status tk_gemm_split_bytes(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                              size_t *bytes);
/* A split call's checks of its workspace and its two programs. */
tk_status tk_gemm_split_prepare(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                                tk_program **part, tk_program **reduce, tk_prepare_info *info);
/* tk_gemm's split: tk_gemm_split_prepare, then both kernels on `stream`. */
tk_status tk_gemm_split_run(tk_ctx *ctx, const tk_gemm_params *p, const tk_gemm_config *c,
                            void *stream);

/* ---- The epilogue and A's layout (kernels/gemm_epilogue.c) ---------------- */
/* The tk_mma_kind of c's transpositions. */
tk_mma_kind tk_gemm_mma_kind(const tk_gemm_config *c);
/* Whether c has an epilogue beyond the conversion to out_dtype. */
bool tk_gemm_has_epilogue(const tk_gemm_config *c);
/* Declares bias and Aux (as c asks) after C. */
void tk_gemm_epilogue_params(gemm *g);
/* The f32 rows x cols accumulator a tile's k-loop starts from: zeros, or
 * where g->bias_in_acc the bias at columns g->n0.. broadcast over the rows. */
tk_value *tk_gemm_acc_start(gemm *g, int rows, int cols, tk_owner owner);
/* The f32 tile acc (rows x cols of C from (r0, c0), owned by `owner`)
 * through the epilogue into dst at didx (C itself, or a shared tile that
 * goes to C at (r0, c0)), h x w at a time: a slice's temporaries (C's old
 * values, GELU's, their addresses) are live beside the accumulator, not the
 * whole tile's. GELU's Aux goes to g->sX at didx when set (a shared tile
 * the caller copies to Aux), else to Aux from registers. */
void tk_gemm_epilogue_store(gemm *g, tk_value *acc, int rows, int cols, tk_owner owner,
                            tk_value *r0, tk_value *c0, tk_value *dst, tk_value *const *didx, int h,
                            int w);
/* c's epilogue fields, each 0 or 1 or a tk_gemm_act, and their
 * combinations; `fn` names the entry point in the message. */
tk_status tk_gemm_check_epilogue(tk_ctx *ctx, const char *fn, const tk_gemm_config *c);
/* The call's epilogue: fields, pointers (alignment, overlaps) and leading
 * dimensions; *c gets its config fields (for the key, or to compare with
 * the caller's config). */
tk_status tk_gemm_check_call_epilogue(tk_ctx *ctx, const tk_gemm_params *p, tk_gemm_config *c);
/* The workspace's `bytes` overlap nothing the call reads or writes. */
tk_status tk_gemm_check_workspace(tk_ctx *ctx, const tk_gemm_params *p, size_t bytes);
/* The caller's config names the call's epilogue and transpose_a. */
tk_status tk_gemm_match_epilogue(tk_ctx *ctx, const tk_gemm_config *want, const tk_gemm_config *g);

/* The wgmma kernel's body (kernels/gemm_hopper.c) into g->k, whose A and B
 * parameters exist; C is the output, M x N x K the problem (i32), BM/BN/BK
 * the block (i32 specs). */
void tk_gemm_hopper_body(gemm *g, tk_value *C, tk_value *M, tk_value *N, tk_value *K, tk_value *BM,
                         tk_value *BN, tk_value *BK);

#endif
