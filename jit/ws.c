/* The producer's slice of a copy-engine kernel: see jit/ws.h. */
#include "jit/ws.h"

#include <string.h>

static bool has(const uint64_t *set, uint32_t id) { return set[id / 64] >> (id % 64) & 1; }

/* Adds id to set; whether it was new. */
static bool add(uint64_t *set, uint32_t id) {
    if (has(set, id))
        return false;
    set[id / 64] |= (uint64_t)1 << (id % 64);
    return true;
}

static bool need_val(tk_ws_slice *s, const tk_value *v) { return v && add(s->val, v->id); }

static bool is_async_copy(const tk_op *op) {
    return op->opc == TK_OP_COPY_G2S && op->attr[0] != TK_COPY_SYNC;
}

/* The ops the producer must run no matter what they compute. */
static bool is_root(const tk_kernel *k, const tk_tma_plan *plan, const tk_op *op) {
    return op->opc == TK_OP_ASYNC_COMMIT || op->opc == TK_OP_BARRIER ||
           (is_async_copy(op) && tk_tma_map_for(plan, k, op) >= 0);
}

/* A FOR's carried slot i (or an IF's result i) is needed as a whole: its
 * region argument, result, yields and initial value. */
static bool need_slot(tk_ws_slice *s, const tk_op *op, int i) {
    bool ch = need_val(s, op->res[i]);
    for (int r = 0; r < 2; r++) {
        const tk_region *g = op->regions[r];
        if (!g)
            continue;
        if (op->opc == TK_OP_FOR)
            ch |= need_val(s, g->args[1 + i]);
        if (i < g->nyield)
            ch |= need_val(s, g->yield[i]);
    }
    if (op->opc == TK_OP_FOR)
        ch |= need_val(s, op->opnds[3 + i]);
    return ch;
}

static bool slot_needed(const tk_ws_slice *s, const tk_op *op, int i) {
    if (has(s->val, op->res[i]->id))
        return true;
    return op->opc == TK_OP_FOR && has(s->val, op->regions[0]->args[1 + i]->id);
}

/* One pass over region r: marks the ops whose work the producer needs and
 * the values they read. Returns whether r holds a needed op; *ch is set
 * when anything new was marked (the caller repeats to a fixed point, since
 * a loop's later ops can need its earlier ones' results). */
static bool mark(const tk_kernel *k, const tk_tma_plan *plan, const tk_region *r,
                 tk_ws_slice *s, bool *ch) {
    bool any = false;
    TK_FOREACH_OP(r, op) {
        bool need = is_root(k, plan, op);
        for (int i = 0; i < 2; i++)
            if (op->regions[i] && mark(k, plan, op->regions[i], s, ch))
                need = true;
        bool ctl = op->opc == TK_OP_FOR || op->opc == TK_OP_IF;
        for (int i = 0; i < op->nres; i++) {
            if (!slot_needed(s, op, i))
                continue;
            need = true;
            if (ctl)
                *ch |= need_slot(s, op, i);
        }
        if (!need)
            continue;
        any = true;
        *ch |= add(s->op, op->id);
        int nread = op->opc == TK_OP_FOR ? 3 : op->opc == TK_OP_IF ? 1 : op->nopnds;
        for (int i = 0; i < nread; i++)
            *ch |= need_val(s, op->opnds[i]);
    }
    return any;
}

static bool uniform_scalar(const tk_value *v) {
    return v->type.kind == TK_KIND_SCALAR && v->uni == TK_UNI_BLOCK;
}

/* Whether the producer can run op: block-uniform scalar work, shared tiles,
 * control flow (carrying scalars only), and the roots. */
static bool runnable(const tk_kernel *k, const tk_tma_plan *plan, const tk_ws_slice *s,
                     const tk_op *op) {
    switch (op->opc) {
    case TK_OP_WARP_ID: case TK_OP_WARPGROUP_ID: case TK_OP_LANE_ID:
        return false;
    case TK_OP_SHARED: case TK_OP_STAGE: case TK_OP_DIM: case TK_OP_ASYNC_COMMIT:
    case TK_OP_BARRIER:
        return true;
    case TK_OP_COPY_G2S:
        return is_root(k, plan, op);
    default:
        break;
    }
    const char *fam = tk_op_infos[op->opc].family;
    bool ctl = !strcmp(fam, "control");
    if (!ctl && strcmp(fam, "ids") && strcmp(fam, "scalar") && strcmp(fam, "elementwise"))
        return false;
    /* control flow: its bounds or condition, and the slots the slice keeps */
    int nread = op->opc == TK_OP_FOR ? 3 : op->opc == TK_OP_IF ? 1 : op->nopnds;
    for (int i = 0; i < nread; i++)
        if (!uniform_scalar(op->opnds[i]))
            return false;
    for (int i = 0; i < op->nres; i++)
        if ((!ctl || slot_needed(s, op, i)) && op->res[i]->type.kind != TK_KIND_SCALAR)
            return false;
    return true;
}

/* Every needed op is runnable; no async copy is left to the consumers
 * (their groups would mix cp.async and mbarriers); notes whether the
 * consumers write shared memory, and (bit p of *read) which tensors they
 * read themselves. */
static bool check(const tk_kernel *k, const tk_tma_plan *plan, const tk_region *r,
                  tk_ws_slice *s, uint64_t *read) {
    TK_FOREACH_OP(r, op) {
        if (is_async_copy(op) && tk_tma_map_for(plan, k, op) < 0)
            return false;
        bool sync_copy = op->opc == TK_OP_COPY_G2S && !is_async_copy(op);
        if (op->opc == TK_OP_STORE_R2S || sync_copy)
            s->consumer_sync = true;
        int p = op->opc == TK_OP_LOAD_G2R ? tk_tma_param_of(k, op->opnds[0])
                : sync_copy ? tk_tma_param_of(k, op->opnds[1]) : -1;
        if (p >= 0)
            *read |= (uint64_t)1 << p;
        if (has(s->op, op->id) && !runnable(k, plan, s, op))
            return false;
        for (int i = 0; i < 2; i++)
            if (op->regions[i] && !check(k, plan, op->regions[i], s, read))
                return false;
    }
    return true;
}

bool tk_ws_slice_make(const tk_kernel *k, const tk_tma_plan *plan, tk_ws_slice *s) {
    memset(s, 0, sizeof *s);
    if (!plan->nmaps || k->warps % 4 || k->warps < TK_WS_MIN_WARPS ||
        k->warps + TK_WS_PRODUCER_WARPS > 32 || k->nops >= TK_WS_MAX_IDS ||
        k->nvalues >= TK_WS_MAX_IDS)
        return false;
    bool ch = true;
    while (ch) {
        ch = false;
        mark(k, plan, k->body, s, &ch);
    }
    uint64_t read = 0;
    if (!check(k, plan, k->body, s, &read))
        return false;
    /* a barrier between a store and another warp's load of the same tensor */
    s->consumer_sync |= (read & plan->written) != 0;
    return true;
}

/* setmaxnreg moves registers within the block's pool, which holds what the
 * launch gave every thread: the cap for one block per SM (the kernel has
 * .reqntid and .minnctapersm 1; each SM sub-partition's 16 K registers
 * split among its warps), when a role needs more than that, else that
 * role's count. So what the producer gives back must pay for the
 * consumers' increase: 32 W C + 128 P <= threads x cap, which also holds
 * when the pool is threads x C. 240 is the most the GEMM's consumers use. */
int tk_ws_consumer_regs(int warps) {
    int threads = 32 * (warps + TK_WS_PRODUCER_WARPS);
    int cap = 65536 / threads / 8 * 8;
    int r = (threads * cap - 32 * TK_WS_PRODUCER_WARPS * TK_WS_PRODUCER_REGS) / (32 * warps);
    r = r / 8 * 8;
    return r > 240 ? 240 : r;
}
