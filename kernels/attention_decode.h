/* The host side of the decoding kernels (attention_decode_run.c), for
 * tk_attention_forward (attention_run.c) and the tests: how a call is
 * packed and split, the arguments of each part, the launches. */
#ifndef TK_KERNELS_ATTENTION_DECODE_H
#define TK_KERNELS_ATTENTION_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

/* The most queries the decoding kernels take (a tile's rows). */
#define TK_ATTN_DECODE_MAX_Q 16

/* Rows of each partial in the split kernels' workspace (a whole tile). */
#define TK_ATTN_DECODE_PART_ROWS 16

/* The most arguments a decoding kernel takes. */
#define TK_ATTN_DECODE_MAX_ARGS 9

/* How one call runs. */
typedef struct tk_attn_decode_plan {
    int pack;      /* tk_attention_pack                                     */
    int chunk;     /* paged K/V: rows per copy (0: the key tile)            */
    int warps;     /* of the direct / split kernel                          */
    int splits;    /* S key ranges                                          */
    int kw;        /* warps sharing each tile's keys (key_warps)            */
    int partials;  /* S·kw per tile; 1 runs the direct kernel alone        */
    int64_t T, Rv; /* tiles per kv head, rows of a tile that are queries  */
    size_t bytes;  /* workspace the splits take (0 when S is 1)             */
} tk_attn_decode_plan;

/* The tk_attention_cache of p: paged, lengths only, or none. */
int tk_attn_decode_cache(const tk_attention_params *p);

/* Whether checked parameters p go to the decoding kernels. */
bool tk_attn_decode_wanted(const tk_attention_params *p);

/* The plan for checked parameters p on a GPU of `sm` SMs: the packing, the
 * warps, and the split count (p->num_splits, or the choice for the sizes),
 * limited to what p's workspace holds when `fit` (else: what the sizes
 * want, for tk_attention_forward_workspace). A forced count the workspace
 * cannot hold is an error naming fn. */
tk_status tk_attn_decode_plan_for(tk_ctx *ctx, const char *fn, const tk_attention_params *p, int sm,
                                  bool fit, tk_attn_decode_plan *out);

/* The same with up to want_kw warps sharing each tile's keys where the
 * keys are split (key_warps; the plan's own choice is 1). */
tk_status tk_attn_decode_plan_kw(tk_ctx *ctx, const char *fn, const tk_attention_params *p, int sm,
                                 bool fit, int want_kw, tk_attn_decode_plan *out);

/* The parts a call of p under plan pl runs, in launch order: [APPEND,]
 * DIRECT or SPLIT [, MERGE]; returns their count. */
int tk_attn_decode_parts(const tk_attention_params *p, const tk_attn_decode_plan *pl, int parts[3]);

/* The kernel config of `part` for p and pl (also its registry key). */
tk_attention_decode_config tk_attn_decode_config(const tk_attention_params *p,
                                                 const tk_attn_decode_plan *pl, int part);

/* The arguments of `part` (a tk_attention_decode_part) for p and plan, on
 * p's pointers (device or, for the interpreter, host); returns their count. */
int tk_attn_decode_args(const tk_attention_params *p, const tk_attn_decode_plan *plan, int part,
                        tk_arg *args);

/* tk_attention_forward (stream) or, with `info`, tk_attention_prepare for
 * checked parameters p that tk_attn_decode_wanted. */
tk_status tk_attn_decode_run(tk_ctx *ctx, const tk_attention_params *p, void *stream,
                             tk_prepare_info *info);

/* tk_attention_forward_workspace's answer for checked p. */
tk_status tk_attn_decode_workspace(tk_ctx *ctx, const tk_attention_params *p, size_t *bytes);

#endif
