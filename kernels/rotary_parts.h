/* The rotary kernels' launches as tk_rotary makes them (kernels/rotary_run.c):
 * each launch's config and arguments from checked parameters, so the
 * interpreter tests run exactly the calls the GPU gets (tests/test_rotary.c);
 * and a rotation fused into another kernel (kernels/rotary_tile.c). */
#ifndef TK_KERNELS_ROTARY_PARTS_H
#define TK_KERNELS_ROTARY_PARTS_H

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

#define TK_ROTARY_MAX_ARGS 6

/* One kernel launch: which kernel (its config) and its arguments. */
typedef struct tk_rotary_launch {
    tk_rotary_config cfg;
    int n;
    tk_arg args[TK_ROTARY_MAX_ARGS];
} tk_rotary_launch;

/* q's launch, then k's when p->k is set. Returns the count. */
int tk_rotary_launches(const tk_rotary_params *p, tk_rotary_launch out[2]);
/* The program of a launch's config (the registry's, as tk_rotary's). */
tk_status tk_rotary_program(tk_ctx *ctx, const tk_rotary_config *c, tk_program **prog,
                            tk_prepare_info *info);

/* ---- A rotation inside another kernel (kernels/rotary_tile.c) -------------
 * rotary.c's angles, pairs and rounding applied to a register tile: the
 * attention forward rotates its query rows where they land. */
typedef struct tk_rope {
    int style;           /* TK_ROTARY_NEOX or TK_ROTARY_GPTJ                   */
    int rotary_dim;      /* rd: even, 2 .. the tile's columns                   */
    tk_value *cos, *sin; /* Cos, Sin [T, rd/2] f32 tensors (NeoX), or NULL      */
    tk_value *base;      /* the f32 scalar the angles come from (no tables)    */
    tk_value *src;       /* the tensor the tile was read from (NeoX partners
                            when rd/2 is not a multiple of 16 are read again)  */
} tk_rope;

/* Where rows' 16-column blocks come from and go: get(user, c) gives the
 * block at column c (a bf16/f16 ROW tile [R, 16]), put(user, c, b) takes
 * its rotated value. Blocks at columns >= rd are neither taken nor given. */
typedef struct tk_rope_io {
    tk_value *(*get)(void *user, int c);
    void (*put)(void *user, int c, tk_value *b);
    void *user;
} tk_rope_io;

/* R rows rotated block by block (bt: a block's type, [R, 16], warp or
 * warpgroup): row r is the token at position pos0 + r (pos0: an i64 scalar
 * uniform over the owner), which is also its tables' row (rows outside a
 * table read cos = sin = 0). at: the nat indices of the rows' element (0,
 * 0) in r->src, read only when a NeoX pair reaches across a block. */
void tk_rope_rows(tk_kernel *k, const tk_rope *r, tk_type bt, const tk_rope_io *io, tk_value *pos0,
                  int nat, tk_value *const *at);
/* The same for a register tile x of type xt ([R, D]): the rotated tile. */
tk_value *tk_rope_tile(tk_kernel *k, const tk_rope *r, tk_value *x, tk_type xt, tk_value *pos0,
                       int nat, tk_value *const *at);
/* The same for rows row0.. of the shared tile sh, rotated in place (each
 * block loaded, then stored back: the rows' owner alone touches them). */
void tk_rope_shared(tk_kernel *k, const tk_rope *r, tk_value *sh, tk_value *row0, tk_type bt,
                    tk_value *pos0, int nat, tk_value *const *at);

#endif
