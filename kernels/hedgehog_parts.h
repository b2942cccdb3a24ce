/* What the Hedgehog kernel (kernels/hedgehog.c) shares with its entry
 * points (kernels/hedgehog_run.c): the defaults of a configuration and the
 * shared memory it takes, which decide what a GPU can run. */
#ifndef TK_KERNELS_HEDGEHOG_PARTS_H
#define TK_KERNELS_HEDGEHOG_PARTS_H

#include <stddef.h>

#include "tk/tk_kernels.h"

/* Shared memory a block may take (Hopper's opt-in maximum, the builder's
 * limit); an A100 has 163 KiB, sm_86 / sm_89 99 KiB. */
#define TK_HEDGEHOG_SMEM_MAX (227 * 1024)

/* c with v_cols and warps filled in where 0 (the defaults for its
 * head_dim); the other fields as given. */
tk_hedgehog_config tk_hedgehog_resolve(const tk_hedgehog_config *c);
/* Bytes of shared memory the kernel of a resolved c allocates (what
 * tk_kernel_smem_bytes reports for it). */
size_t tk_hedgehog_smem_bytes(const tk_hedgehog_config *c);

/* ---- the feature map (kernels/hedgehog_fm.c) ----------------------------
 * What its builders read of the kernel that calls them. */
typedef struct tk_hh_fm {
    tk_kernel *k;
    tk_dtype dt;
    int D;            /* head dim                                    */
    tk_value *w, *r0; /* the warp (i64), its first row of the chunk  */
    tk_value *np;     /* D / 16 as a run-time value (the pieces)     */
    tk_value *h;      /* the head: weights entry h mod Hw            */
} tk_hh_fm;

/* A rows x cols tile of shared tile s at (r, c), in the dtype. */
tk_value *tk_hh_lds(const tk_hh_fm *g, tk_value *s, int rows, int cols, tk_layout l, tk_value *r,
                    tk_value *c);
/* x to shared tile s at (r, c), converted to the dtype. */
void tk_hh_sts(const tk_hh_fm *g, tk_value *s, tk_value *r, tk_value *c, tk_value *x);
/* sb [D, 16] = the head's bias (from B [Hw, D]) in every column, by warp
 * wi (inside an if: the caller's barrier orders it before use). */
void tk_hh_bias_cols(const tk_hh_fm *g, tk_value *B, tk_value *sb, int wi);
/* An f32 [16, 16] tile whose element (i, j) is i. */
tk_value *tk_hh_row_index(const tk_hh_fm *g);
/* The exps of this warp's tokens of sx (rows r0..r0+15) into sp [2D, C]
 * (features in rows, the warp's 16 columns), unnormalized; returns the
 * factors tk_hh_rescale applies (row p: piece p's, per token). sw: W [D,
 * D] in shared memory; sbt: the bias tile (tk_hh_bias_cols) or NULL. */
tk_value *tk_hh_feature_map(const tk_hh_fm *g, tk_value *sx, tk_value *sw, tk_value *sbt,
                            tk_value *sp);
/* This warp's columns of sp times their factors, in place: φᵀ final.
 * After a barrier (the lanes read back other lanes' stores). */
void tk_hh_rescale(const tk_hh_fm *g, tk_value *sp, tk_value *facs);

/* ---- the backward's builders (tk/tk_kernels.h has their contracts) ------
 * tk_hedgehog_build checks ctx, cfg and out, then calls the one for
 * cfg->part; each checks the fields its part reads (messages start with
 * "tk_hedgehog_build: ") and sets *out only on success. */
tk_status tk_hh_build_part(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
tk_status tk_hh_build_prep(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
tk_status tk_hh_build_dphi(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
tk_status tk_hh_build_fmap(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
tk_status tk_hh_build_reduce(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
tk_status tk_hh_build_map(tk_ctx *ctx, const tk_hedgehog_config *c, tk_kernel **out);
/* TK_HEDGEHOG_MAP's shared memory (bytes). */
size_t tk_hh_map_smem_bytes(const tk_hedgehog_config *c);
/* BWD_DPHI and BWD_FMAP: c with f_cols and warps filled in where 0, and
 * the shared memory their kernel takes (bytes). */
tk_hedgehog_config tk_hh_dphi_resolve(const tk_hedgehog_config *c);
size_t tk_hh_dphi_smem_bytes(const tk_hedgehog_config *c);
tk_hedgehog_config tk_hh_fmap_resolve(const tk_hedgehog_config *c);
size_t tk_hh_fmap_smem_bytes(const tk_hedgehog_config *c);

#endif
