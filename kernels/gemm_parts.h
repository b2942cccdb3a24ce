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
    tk_value *m0, *n0;         /* the block's origin in C (i32) */
    int wm_rows, wn_cols;      /* the warp tile, WM x WN (mma.sync) */
    tk_value *wr0, *wc0;       /* this warp's corner inside the block tile */
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

/* ---- The epilogue and A's layout (kernels/gemm_epilogue.c) ---------------- */
/* The tk_mma_kind of c's transpositions. */
tk_mma_kind tk_gemm_mma_kind(const tk_gemm_config *c);
/* Whether c has an epilogue beyond the conversion to out_dtype. */
bool tk_gemm_has_epilogue(const tk_gemm_config *c);
/* Declares bias and Aux (as c asks) after C. */
void tk_gemm_epilogue_params(gemm *g);
/* The f32 tile acc (rows x cols of C from (r0, c0), owned by `owner`)
 * through the epilogue into dst at didx (C itself, or a shared tile that
 * goes to C at (r0, c0)), h x w at a time: a slice's temporaries (C's old
 * values, GELU's, their addresses) are live beside the accumulator, not the
 * whole tile's. */
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
/* The caller's config names the call's epilogue and transpose_a. */
tk_status tk_gemm_match_epilogue(tk_ctx *ctx, const tk_gemm_config *want, const tk_gemm_config *g);

/* The wgmma kernel's body (kernels/gemm_hopper.c) into g->k, whose A and B
 * parameters exist; C is the output, M x N x K the problem (i32), BM/BN/BK
 * the block (i32 specs). */
void tk_gemm_hopper_body(gemm *g, tk_value *C, tk_value *M, tk_value *N, tk_value *K, tk_value *BM,
                         tk_value *BN, tk_value *BK);

#endif
