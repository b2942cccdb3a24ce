/* The TMA plan: see jit/tma.h. */
#include "jit/tma.h"

#include <stdio.h>
#include <string.h>

#include "ir/abi.h"
#include "jit/ws.h"

/* The SHARED op behind a copy's smem operand (direct or through STAGE). */
static const tk_op *shared_of(const tk_value *v) {
    const tk_op *d = v ? v->def : NULL;
    if (d && d->opc == TK_OP_STAGE)
        d = d->opnds[0]->def;
    return d && d->opc == TK_OP_SHARED ? d : NULL;
}

int tk_tma_param_of(const tk_kernel *k, const tk_value *v) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == v)
            return i;
    return -1;
}

/* Marks the tensor parameters the kernel writes: the engine reads global
 * memory through the async proxy, which the kernel's own stores would need a
 * global proxy fence to reach, so such tensors stay on cp.async. */
static void mark_written(const tk_kernel *k, const tk_region *r, uint64_t *mask) {
    if (!r)
        return;
    TK_FOREACH_OP(r, op) {
        int p = op->opc == TK_OP_STORE_R2G || op->opc == TK_OP_COPY_S2G
                    ? tk_tma_param_of(k, op->opnds[0]) : -1;
        if (p >= 0)
            *mask |= (uint64_t)1 << p;
        mark_written(k, op->regions[0], mask);
        mark_written(k, op->regions[1], mask);
    }
}

/* The map copy op would use (not yet deduplicated); false if it cannot. */
static bool eligible(const tk_kernel *k, const tk_tma_plan *plan, const tk_op *op,
                     tk_tma_map *m) {
    if (op->opc != TK_OP_COPY_G2S || op->attr[0] != TK_COPY_TMA) /* fill is 0 (rule) */
        return false;
    const tk_value *sm = op->opnds[0], *view = op->opnds[1];
    const tk_op *sh = shared_of(sm);
    const tk_type *st = &sm->type;
    int p = tk_tma_param_of(k, view);
    if (!sh || p < 0 || view->type.rank > 4 || st->smem != TK_SMEM_SWIZZLE ||
        (plan->written >> p & 1))
        return false;
    size_t esz = tk_dtype_size(st->dtype);
    int rb = st->cols * (int)esz;
    if (st->rows > 256 || tk_smem_offset(sh) % TK_TMA_ALIGN ||
        tk_smem_stage_bytes(st) % TK_TMA_ALIGN)
        return false;
    if (rb != 32 && rb != 64 && rb % 128)
        return false;
    int sw = rb < 128 ? rb : 128;
    *m = (tk_tma_map){.param = p, .rank = view->type.rank, .dtype = st->dtype,
                      .box_rows = st->rows, .box_cols = sw / (int)esz, .swizzle = sw};
    return true;
}

static int find(const tk_tma_plan *plan, const tk_tma_map *m) {
    for (int i = 0; i < plan->nmaps; i++) {
        const tk_tma_map *x = &plan->maps[i];
        if (x->param == m->param && x->box_rows == m->box_rows && x->box_cols == m->box_cols)
            return i; /* same parameter: same rank and dtype; same box: same swizzle */
    }
    return -1;
}

/* Collects the maps; false when an async commit or wait sits under control
 * flow that not every warp takes alike: the ring counts one arrival per warp
 * per group, so every warp must commit every group. */
static bool walk(const tk_kernel *k, const tk_region *r, bool uniform, tk_tma_plan *plan) {
    if (!r)
        return true;
    TK_FOREACH_OP(r, op) {
        tk_tma_map m;
        if ((op->opc == TK_OP_ASYNC_COMMIT || op->opc == TK_OP_ASYNC_WAIT) && !uniform)
            return false;
        if (eligible(k, plan, op, &m) && find(plan, &m) < 0 && plan->nmaps < TK_TMA_MAX_MAPS)
            plan->maps[plan->nmaps++] = m;
        bool u = uniform;
        int nctl = op->opc == TK_OP_IF ? 1 : op->opc == TK_OP_FOR ? 3 : 0;
        for (int i = 0; i < nctl; i++)
            u = u && op->opnds[i]->uni == TK_UNI_BLOCK;
        if (!walk(k, op->regions[0], u, plan) || !walk(k, op->regions[1], u, plan))
            return false;
    }
    return true;
}

void tk_tma_plan_make(const tk_kernel *k, const char *arch, tk_tma_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int sm = 0;
    if (!k || !arch || sscanf(arch, "sm_%d", &sm) != 1 || sm < 90)
        return;
    mark_written(k, k->body, &plan->written);
    if (!walk(k, k->body, true, plan))
        plan->nmaps = 0;
    /* the ring and the alignment slack must fit beside the tiles */
    if (plan->nmaps && k->smem_bytes + tk_tma_smem_extra(plan) > TK_SMEM_LIMIT)
        plan->nmaps = 0;
    /* a producer warpgroup needs setmaxnreg (sm_90a) to leave the
     * consumers their registers; its budget is Hopper's (jit/ws.c) */
    tk_ws_slice slice;
    if (!strcmp(arch, "sm_90a") && tk_ws_slice_make(k, plan, &slice))
        plan->producer_warps = TK_WS_PRODUCER_WARPS;
    if (plan->producer_warps && k->smem_bytes + tk_tma_smem_extra(plan) > TK_SMEM_LIMIT)
        plan->producer_warps = 0; /* no room for its release rings */
}

int tk_tma_block_threads(const tk_kernel *k, const tk_tma_plan *plan) {
    return 32 * (k->warps + plan->producer_warps);
}

int tk_tma_map_for(const tk_tma_plan *plan, const tk_kernel *k, const tk_op *copy) {
    tk_tma_map m;
    return plan->nmaps && eligible(k, plan, copy, &m) ? find(plan, &m) : -1;
}

size_t tk_tma_smem_extra(const tk_tma_plan *plan) {
    /* a whole TK_TMA_ALIGN of slack (tk_smem is TK_SMEM_ALIGN-aligned, so
     * TK_TMA_ALIGN - TK_SMEM_ALIGN would do; the full amount is what ran on
     * the H200), the ring's alignment to 8, the ring, and with a producer
 * warpgroup its two release rings */
    size_t rings = plan->producer_warps ? 3 : 1;
    return plan->nmaps ? TK_TMA_ALIGN + 8 + 8 * TK_TMA_RING * rings : 0;
}

size_t tk_tma_ring_offset(const tk_kernel *k) { return (k->smem_bytes + 7) & ~(size_t)7; }
