/* The plan of a kernel for one target: what the lowering, the program and
 * the launch must agree on beyond the IR. It is made once per (kernel,
 * target) by tk_plan_make (jit/plan.c, where its rules are explained); the
 * program keeps it, the lowering driver hands it to the kit (tk_lower.plan),
 * and the launch encodes its tensor maps. Nobody derives it again. It is a
 * pure function of the IR and the target, so a cubin from the disk cache
 * (keyed by IR text and arch) needs nothing stored beside it.
 *
 * Its parts:
 *   copies on the engine  which COPY_G2S ops Hopper's tensor copy engine
 *                         issues, through which tensor map (sm_90+);
 *   producer slice        with a producer warpgroup (sm_90a), the ops and
 *                         values the producer warp runs;
 *   block                 threads, shared memory beyond the tiles, where
 *                         the mbarrier rings start, setmaxnreg's registers. */
#ifndef TK_OPS_NV_PLAN_H
#define TK_OPS_NV_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ops/nv/target.h"

#define TK_TMA_MAX_MAPS   8
#define TK_TMA_MAX_COPIES 64   /* copy ops on the engine; more take cp.async */
#define TK_TMA_ALIGN      1024 /* shared base of the swizzle patterns     */
#define TK_TMA_RING       8    /* mbarriers tracking async groups (power of 2) */
/* The slice is two fixed bitmaps over op and value ids: a kernel with more
 * ids gets no producer. */
#define TK_WS_MAX_IDS 4096

/* One tensor map: a kernel tensor parameter and the box a copy moves. */
typedef struct tk_tma_map {
    int32_t param; /* kernel parameter index (a tensor)        */
    int32_t rank;
    tk_dtype dtype;
    int32_t box_rows, box_cols; /* elements; box_cols * size == swizzle     */
    int32_t swizzle;            /* 32, 64 or 128 (bytes)                    */
} tk_tma_map;

/* A COPY_G2S (or COPY_S2G: a store) op issued by the engine, and its map. */
typedef struct tk_tma_copy_ref {
    uint32_t op;    /* op id   */
    int32_t map;    /* index in tk_plan.maps */
    bool multicast; /* asked for (TK_COPY_MULTICAST); the map's box is then
                       a 1/cluster share of the tile's rows where
                       tk_plan.multicast says the kernel multicasts    */
} tk_tma_copy_ref;

/* What the producer warp of a warp-specialized kernel runs. */
typedef struct tk_ws_slice {
    uint64_t op[TK_WS_MAX_IDS / 64];  /* ops the producer runs, by op id      */
    uint64_t val[TK_WS_MAX_IDS / 64]; /* values it computes, by value id      */
    /* Barriers (by op id) that must still sync the consumers with each
     * other: since the barrier before, they touched memory the producer
     * does not handle (a shared tile they write, a tensor the kernel both
     * reads and writes) or the copy engine stored a tile they wrote. */
    uint64_t sync_bar[TK_WS_MAX_IDS / 64];
} tk_ws_slice;

typedef struct tk_plan {
    const tk_target *tgt; /* NULL: an unknown target (lockstep, no maps)   */
    /* Copies on the engine (none: nmaps == 0). */
    int32_t nmaps;
    tk_tma_map maps[TK_TMA_MAX_MAPS];
    int32_t ncopies;
    tk_tma_copy_ref copies[TK_TMA_MAX_COPIES];
    uint64_t written;        /* bit p: the kernel writes tensor parameter p   */
    uint64_t read_or_stored; /* bit p: the kernel reads tensor parameter p,
                                or writes it by STORE_R2G: no engine stores */
    bool stores;             /* some COPY_S2G is the engine's (asynchronous)
                         store: barriers and the kernel's end wait for its
                         reads of the shared tile (ops/nv/sync.c)         */
    /* Warp specialization (none: producer_warps == 0). */
    int32_t producer_warps;               /* warps added after the kernel's own           */
    int32_t producer_regs, consumer_regs; /* setmaxnreg.dec / .inc          */
    tk_ws_slice slice;
    /* The block. */
    bool descriptors;          /* the kernel reads shared memory through wgmma's
                           descriptors (the async proxy)                     */
    bool generic_engine_tiles; /* some op reaches a tile the engine's loads
                                  write through the generic proxy: a refill
                                  must be fenced after the consumers' release */
    bool align_base;           /* SHARED offsets start at a TK_TMA_ALIGN-aligned base
                              (copies on the engine, or wgmma descriptors)   */
    int32_t threads;           /* per block: the kernel's warps and the producer's */
    size_t smem_extra;         /* dynamic shared memory beyond the kernel's tiles */
    size_t smem;               /* all of it: tiles + extra                       */
    size_t ring_offset;        /* of the group ring from the aligned base; the
                              release rings of a producer follow it          */
    size_t pin_offset;         /* of a word per thread after them, from the aligned
                                  base, which tk_wgmma_wait_after's stores go to
                                  (ops/wgmma_nv.c); 0: the kernel has none   */
    /* Clusters (tk_kernel_set_cluster). */
    int32_t cluster;   /* blocks per cluster, 0: none                     */
    int32_t multicast; /* the cluster's size when some copy is multicast:
                          each block issues its share of the tile's rows
                          to all of them, and the release rings span the
                          cluster (ops/nv/sync.c); 0: none              */
    /* The launch. */
    bool griddep; /* the kernel waits on the grids before it (GRID_WAIT, on a
                     target with griddepcontrol): tk_launch lets it start
                     before they end (programmatic stream serialization) */
} tk_plan;

/* The map COPY_G2S `copy` is issued through, -1 if it takes cp.async. */
static inline int tk_plan_copy_map(const tk_plan *p, const tk_op *copy) {
    for (int i = 0; i < p->ncopies; i++)
        if (p->copies[i].op == copy->id) return p->copies[i].map;
    return -1;
}

/* Whether COPY_G2S `copy` is issued as multicast shares (tk_plan.multicast). */
static inline bool tk_plan_copy_multicast(const tk_plan *p, const tk_op *copy) {
    for (int i = 0; i < p->ncopies; i++)
        if (p->copies[i].op == copy->id) return p->copies[i].multicast;
    return false;
}

/* Whether the producer runs op / computes v. */
static inline bool tk_plan_has_op(const tk_plan *p, const tk_op *op) {
    return op->id < TK_WS_MAX_IDS && (p->slice.op[op->id / 64] >> (op->id % 64) & 1);
}
static inline bool tk_plan_has_val(const tk_plan *p, const tk_value *v) {
    return v && v->id < TK_WS_MAX_IDS && (p->slice.val[v->id / 64] >> (v->id % 64) & 1);
}
/* Whether the consumers' BARRIER op must also sync them with each other. */
static inline bool tk_plan_sync_barrier(const tk_plan *p, const tk_op *op) {
    return op->id < TK_WS_MAX_IDS && (p->slice.sync_bar[op->id / 64] >> (op->id % 64) & 1);
}

#endif
