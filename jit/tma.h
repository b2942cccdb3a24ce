/* Hopper's tensor copy engine (TMA) for COPY_G2S: which copies use it, and
 * the tensor maps a launch passes to the kernel.
 *
 * The plan is a function of the kernel's IR and the target alone, so the
 * lowering (ops/nv/tma.c), the program (jit/program.c) and the launch
 * (jit/launch.c) all derive the same one, and a cubin from the disk cache
 * (keyed by IR text and arch) needs nothing stored beside it.
 *
 * A copy qualifies on sm_90 and newer when it asks for the engine
 * (TK_COPY_TMA: the kernel author's choice) and reads a kernel tensor
 * parameter that the kernel never writes (the engine reads through the async
 * proxy), and its shared tile is SWIZZLE with rows of 32, 64 or 128 bytes or
 * a multiple of 128 bytes (ops/nv/mem.c: those layouts are the engine's
 * 32/64/128-byte swizzles, wide rows cut into 128-byte column blocks), at
 * most 256 rows, at a 1024-byte aligned offset with 1024-byte stages
 * (offsets follow allocation order, 128-byte aligned: allocate such tiles
 * first, or pad). Each (parameter, box) pair is one map, at most
 * TK_TMA_MAX_MAPS (further copies take cp.async): the box is the tile's rows
 * by one swizzle span of columns, and a tile with wider rows is issued as
 * one box per column block. A kernel gets no plan when an async commit or
 * wait is under control flow that differs between warps (the ring counts
 * one arrival per warp and group), or when the ring would not fit beside its
 * tiles in TK_SMEM_LIMIT. */
#ifndef TK_JIT_TMA_H
#define TK_JIT_TMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

#define TK_TMA_MAX_MAPS 8
#define TK_TMA_ALIGN 1024 /* shared base of the swizzle patterns     */
#define TK_TMA_RING 8     /* mbarriers tracking async groups (power of 2) */

typedef struct tk_tma_map {
    int32_t param;              /* kernel parameter index (a tensor)        */
    int32_t rank;
    tk_dtype dtype;
    int32_t box_rows, box_cols; /* elements; box_cols * size == swizzle     */
    int32_t swizzle;            /* 32, 64 or 128 (bytes)                    */
} tk_tma_map;

typedef struct tk_tma_plan {
    int32_t nmaps;
    tk_tma_map maps[TK_TMA_MAX_MAPS];
    uint64_t written; /* bit p: the kernel writes tensor parameter p */
    int32_t producer_warps; /* > 0: warp-specialized (jit/ws.h), the warps
                               added after the kernel's own */
} tk_tma_plan;

/* The plan of a finished kernel for `arch` ("sm_90a", ...): no maps below
 * sm_90 or for a NULL / unknown arch. */
void tk_tma_plan_make(const tk_kernel *k, const char *arch, tk_tma_plan *plan);
/* The kernel parameter a view is, or -1. */
int tk_tma_param_of(const tk_kernel *k, const tk_value *v);
/* The map a COPY_G2S op is issued through, -1 if it takes the cp.async path. */
int tk_tma_map_for(const tk_tma_plan *plan, const tk_kernel *k, const tk_op *copy);
/* Dynamic shared memory a kernel with maps needs beyond its tiles: the
 * slack that aligns the base to TK_TMA_ALIGN, the mbarrier ring, and with a
 * producer warpgroup its two release rings. */
size_t tk_tma_smem_extra(const tk_tma_plan *plan);
/* Byte offset of the ring from the aligned base; the release rings of a
 * warp-specialized kernel follow it. */
size_t tk_tma_ring_offset(const tk_kernel *k);
/* Threads per block: the kernel's warps and the plan's producer warps. */
int tk_tma_block_threads(const tk_kernel *k, const tk_tma_plan *plan);

#endif
