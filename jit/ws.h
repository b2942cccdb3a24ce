/* Warp specialization of copy-engine kernels (sm_90a): a producer warp
 * issues the copies while the kernel's own warps only compute.
 *
 * The IR stays lockstep: every warp runs the same program, and the
 * interpreter is its meaning. On sm_90a a kernel with a TMA plan
 * (jit/tma.h) whose copies can be split off gets a producer, and
 * the lowering (ops/nv/ws.c) emits the program twice:
 *   consumers  the kernel's warps: everything except the planned copies;
 *              a barrier becomes a release (an mbarrier arrival per warp),
 *              an async wait a wait on the copy's mbarrier.
 *   producer   one more warp after them (in a warpgroup of its own, see
 *              TK_WS_PRODUCER_WARPS): the "slice", i.e. the
 *              planned copies, the commits and barriers, and the scalar ops
 *              and control flow they depend on; a barrier becomes "wait
 *              until every consumer warp has released it".
 * The lockstep program's barriers are exactly the write-after-read edges
 * between the consumers' reads of a stage and the next copy into it, so the
 * producer stays as far ahead as the program allows and no further.
 *
 * A kernel is split when every async COPY_G2S has a map, and everything the
 * slice needs is block-uniform scalar work (ids, constants, dims, scalar
 * arithmetic, shared tiles and stages, FOR / IF): the producer has no
 * tiles; and the kernel has whole warpgroups, at least TK_WS_MIN_WARPS.
 * Op and value ids must be below TK_WS_MAX_IDS (the slice is two fixed
 * bitmaps, so the plan is the same wherever it is derived). These rules
 * decide a kernel's block size and shared memory: bump the cache key
 * (jit/cache.c) when they change. */
#ifndef TK_JIT_WS_H
#define TK_JIT_WS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "jit/tma.h"

#define TK_WS_MAX_IDS 4096
/* A producer warpgroup, of which one warp works: setmaxnreg, which hands
 * the producer's registers to the consumers, acts on whole warpgroups. It
 * is needed: an SM sub-partition's 16 K registers are shared by its warps,
 * so with one extra warp (9 of them) every warp gets at most 168 registers
 * and the 8-warp GEMM's consumers spill. */
#define TK_WS_PRODUCER_WARPS 4
/* Fewer consumer warps stay in lockstep: with a producer warpgroup their
 * block needs the register file of a whole SM (240 x 256), where two
 * blocks ran before (H200, 128x128x64 with 4 warps: 358 TFLOP/s split,
 * 456 in lockstep, 444 by cp.async). */
#define TK_WS_MIN_WARPS 8

typedef struct tk_ws_slice {
    uint64_t op[TK_WS_MAX_IDS / 64];  /* ops the producer runs, by op id      */
    uint64_t val[TK_WS_MAX_IDS / 64]; /* values it computes, by value id      */
    bool consumer_sync; /* the consumers share memory the producer does not
                           handle (they write shared memory, or a tensor the
                           kernel also reads): their barriers must still sync
                           them with each other */
} tk_ws_slice;

/* Whether kernel k with TMA plan `plan` splits; fills *s when it does. */
bool tk_ws_slice_make(const tk_kernel *k, const tk_tma_plan *plan, tk_ws_slice *s);

static inline bool tk_ws_has_op(const tk_ws_slice *s, const tk_op *op) {
    return op->id < TK_WS_MAX_IDS && (s->op[op->id / 64] >> (op->id % 64) & 1);
}
static inline bool tk_ws_has_val(const tk_ws_slice *s, const tk_value *v) {
    return v && v->id < TK_WS_MAX_IDS && (s->val[v->id / 64] >> (v->id % 64) & 1);
}

/* Registers per thread after setmaxnreg: the producer's, and the
 * consumers' for `warps` of them. 48 / 224 for 8 consumer warps is the pair
 * with no spills in any GEMM block shape tried (ptxas, CUDA 13): 40 spills
 * the producer's loop-invariant fallback addresses, 56 / 216 and 40 / 232
 * spill some shapes' consumers. */
#define TK_WS_PRODUCER_REGS 48
int tk_ws_consumer_regs(int warps);


#endif
