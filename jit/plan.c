/* The plan of a kernel for a target (ops/nv/plan.h): computed here, once per
 * (kernel, target), and read by the program, the lowering and the launch.
 *
 * Copies on the engine (targets with the copy engine, tk_target.tma). A
 * COPY_G2S qualifies when it asks for the engine (TK_COPY_TMA: the kernel
 * author's choice) and reads a kernel tensor parameter, or a narrowing of
 * one (tk_narrow: the parameter's map, the tiles inside the view; others
 * take cp.async at run time, ops/nv/tma.c), that the kernel
 * never writes (the engine reads through the async proxy); a COPY_S2G
 * (always synchronous in the IR) when it writes a kernel tensor parameter
 * that the kernel never reads and writes only with such copies: the
 * engine's store completes asynchronously, and only its reads of the
 * shared tile are waited for (at the next barrier, ops/nv/sync.c); its
 * writes land by the kernel's end, in no order among themselves, so a
 * kernel must not write one element of such a tensor twice (the library's
 * kernels write each element once; tk_copy_to_global says so), unless every
 * write is an add (tk_copy_to_global_add: the engine's reduction in L2,
 * whose adds commute). In both, the shared
 * tile is SWIZZLE with rows of 32, 64 or 128 bytes or a multiple of 128
 * bytes (ops/nv/mem.c: those layouts are the engine's 32/64/128-byte
 * swizzles, wide rows cut into 128-byte column blocks), at most 256 rows, at
 * a 1024-byte aligned offset and, in a ring, with 1024-byte stages (offsets
 * follow allocation order, 128-byte aligned: allocate such tiles first, or
 * pad).
 * Each (parameter, box) pair is one map, at most TK_TMA_MAX_MAPS, used by
 * at most TK_TMA_MAX_COPIES copy ops (further copies take cp.async; the
 * plan lists the copies so that nobody applies these rules again): the box
 * is the tile's rows by one swizzle span of columns, and a tile with wider
 * rows is issued as one box per column block. A kernel gets no maps when
 * an async commit or wait is under control flow that differs between warps
 * (the ring counts one arrival per warp and group), or when the ring would
 * not fit beside its tiles in the target's shared memory.
 *
 * Warp specialization (targets with setmaxnreg, tk_target.setmaxnreg): a
 * producer warp issues the copies while the kernel's own warps only
 * compute. The IR stays lockstep: every warp runs the same program, and the
 * interpreter is its meaning; the lowering emits it twice (jit/lower_ws.c):
 *   consumers  the kernel's warps: everything except the planned copies;
 *              a barrier becomes a release (an mbarrier arrival per warp),
 *              an async wait a wait on the copy's mbarrier.
 *   producer   one more warp after them (in a warpgroup of its own, see
 *              PRODUCER_WARPS): the "slice", i.e. the planned copies, the
 *              commits and barriers, and the scalar ops and control flow
 *              they depend on; a barrier becomes "wait until every
 *              consumer warp has released it".
 * The lockstep program's barriers are exactly the write-after-read edges
 * between the consumers' reads of a stage and the next copy into it, so the
 * producer stays as far ahead as the program allows and no further.
 * A kernel is split when every async COPY_G2S has a map, everything the
 * slice needs is block-uniform scalar work (ids, constants, dims, scalar
 * arithmetic, scalar loads from tensors the kernel does not write, views
 * narrowed, shared tiles and stages, FOR / IF): the producer has no
 * tiles; the kernel has whole warpgroups, at least MIN_WARPS; its op and
 * value ids are below TK_WS_MAX_IDS; and the release rings fit. */
#include "jit/plan.h"

#include <string.h>

#include "ir/abi.h"
#include "ir/ctx.h"
#include "jit/link.h"
#include "tk/tk_jit.h"

/* A producer warpgroup, of which one warp works: setmaxnreg, which hands
 * the producer's registers to the consumers, acts on whole warpgroups. It
 * is needed: an SM sub-partition's 16 K registers are shared by its warps,
 * so with one extra warp (9 of them) every warp gets at most 168 registers
 * and the 8-warp GEMM's consumers spill. */
#define PRODUCER_WARPS 4
/* Fewer consumer warps stay in lockstep: with a producer warpgroup their
 * block needs the register file of a whole SM (240 x 256), where two
 * blocks ran before (H200, 128x128x64 with 4 warps: 358 TFLOP/s split,
 * 456 in lockstep, 444 by cp.async). */
#define MIN_WARPS 8
/* Registers per thread after setmaxnreg.dec in the producer. 48 / 224 for
 * 8 consumer warps is the pair with no spills in any GEMM block shape tried
 * (ptxas, CUDA 13): 40 spills the producer's loop-invariant fallback
 * addresses, 56 / 216 and 40 / 232 spill some shapes' consumers. */
#define PRODUCER_REGS 48

/* ---- Copies on the engine -------------------------------------------------- */
/* Marks the tensor parameters the kernel writes and those it reads: the
 * engine reads global memory through the async proxy, which the kernel's
 * own stores would need a global proxy fence to reach, so written tensors
 * stay on cp.async; and its stores land asynchronously, so only tensors
 * the kernel neither reads nor stores to from registers may take them. */
static void mark_access(const tk_kernel *k, const tk_region *r, tk_plan *plan) {
    if (!r) return;
    TK_FOREACH_OP(r, op) {
        int w = op->opc == TK_OP_STORE_R2G || op->opc == TK_OP_COPY_S2G
                    ? tk_view_param(k, op->opnds[0])
                    : -1;
        if (op->opc == TK_OP_STORE_R2G && w >= 0) plan->read_or_stored |= (uint64_t)1 << w;
        int rd = op->opc == TK_OP_LOAD_G2R   ? tk_view_param(k, op->opnds[0])
                 : op->opc == TK_OP_COPY_G2S ? tk_view_param(k, op->opnds[1])
                                             : -1;
        if (w >= 0) plan->written |= (uint64_t)1 << w;
        if (rd >= 0) plan->read_or_stored |= (uint64_t)1 << rd;
        mark_access(k, op->regions[0], plan);
        mark_access(k, op->regions[1], plan);
    }
}

/* The map copy op would use (not yet deduplicated); false if it cannot. */
static bool eligible(const tk_kernel *k, const tk_plan *plan, const tk_op *op, tk_tma_map *m) {
    bool load = op->opc == TK_OP_COPY_G2S && op->attr[0] == TK_COPY_TMA; /* fill is 0 (rule) */
    if (!load && op->opc != TK_OP_COPY_S2G) return false;
    const tk_value *sm = op->opnds[load ? 0 : op->nopnds - 1], *view = op->opnds[load ? 1 : 0];
    const tk_op *sh = tk_smem_alloc_of(sm);
    const tk_type *st = &sm->type;
    int p = tk_view_param(k, view);
    if (!sh || p < 0 || view->type.rank > 4 || st->smem != TK_SMEM_SWIZZLE ||
        ((load ? plan->written : plan->read_or_stored) >> p & 1))
        return false;
    size_t esz = tk_dtype_size(st->dtype);
    if (st->rows > 256 || tk_smem_offset(sh) % TK_TMA_ALIGN ||
        (sh->res[0]->type.count > 1 && tk_smem_stage_bytes(st) % TK_TMA_ALIGN))
        return false;
    int sw = tk_smem_swizzle_bytes(st);
    if (!sw) return false;
    *m = (tk_tma_map){.param = p,
                      .rank = view->type.rank,
                      .dtype = st->dtype,
                      .box_rows = st->rows,
                      .box_cols = sw / (int)esz,
                      .swizzle = sw};
    return true;
}

static int find(const tk_plan *plan, const tk_tma_map *m) {
    for (int i = 0; i < plan->nmaps; i++) {
        const tk_tma_map *x = &plan->maps[i];
        if (x->param == m->param && x->box_rows == m->box_rows && x->box_cols == m->box_cols)
            return i; /* same parameter: same rank and dtype; same box: same swizzle */
    }
    return -1;
}

/* A qualifying copy: its map (new or shared), and the copy's entry. */
static void add_copy(tk_plan *plan, const tk_op *op, const tk_tma_map *m) {
    int i = find(plan, m);
    if (i < 0 && plan->nmaps < TK_TMA_MAX_MAPS) {
        i = plan->nmaps++;
        plan->maps[i] = *m;
    }
    if (i >= 0 && plan->ncopies < TK_TMA_MAX_COPIES) {
        bool mc = op->opc == TK_OP_COPY_G2S && op->attr[1];
        plan->copies[plan->ncopies++] = (tk_tma_copy_ref){.op = op->id, .map = i, .multicast = mc};
        plan->stores |= op->opc == TK_OP_COPY_S2G;
    }
}

/* Collects the maps and copies; false when an async commit or wait sits
 * under control flow that not every warp takes alike: the ring counts one
 * arrival per warp per group, so every warp must commit every group. */
static bool walk(const tk_kernel *k, const tk_region *r, bool uniform, tk_plan *plan) {
    if (!r) return true;
    TK_FOREACH_OP(r, op) {
        tk_tma_map m;
        if ((op->opc == TK_OP_ASYNC_COMMIT || op->opc == TK_OP_ASYNC_WAIT) && !uniform)
            return false;
        if (eligible(k, plan, op, &m)) add_copy(plan, op, &m);
        bool u = uniform;
        int nctl = op->opc == TK_OP_IF ? 1 : op->opc == TK_OP_FOR ? 3 : 0;
        for (int i = 0; i < nctl; i++) u = u && op->opnds[i]->uni == TK_UNI_BLOCK;
        if (!walk(k, op->regions[0], u, plan) || !walk(k, op->regions[1], u, plan)) return false;
    }
    return true;
}

/* Dynamic shared memory a kernel with maps needs beyond its tiles: a whole
 * TK_TMA_ALIGN of slack for the aligned base (tk_smem is TK_SMEM_ALIGN-
 * aligned, so TK_TMA_ALIGN - TK_SMEM_ALIGN would do; the full amount is
 * what ran on the H200), the ring's alignment to 8, the ring, and with a
 * producer warpgroup its two release rings. */
static size_t ring_bytes(const tk_plan *plan) {
    return plan->nmaps ? 8 * TK_TMA_RING * (plan->producer_warps ? 3u : 1u) : 0;
}

static size_t smem_extra(const tk_plan *plan) {
    if (!plan->nmaps) /* wgmma's descriptors alone: the slack for the aligned base */
        return plan->align_base ? TK_TMA_ALIGN : 0;
    return TK_TMA_ALIGN + 8 + ring_bytes(plan);
}

/* Whether region r (or one nested in it) holds an op `opc`. */
static bool has_op(const tk_region *r, tk_opcode opc) {
    if (!r) return false;
    TK_FOREACH_OP(r, op) {
        if (op->opc == opc || has_op(op->regions[0], opc) || has_op(op->regions[1], opc))
            return true;
    }
    return false;
}

static bool fits(const tk_kernel *k, const tk_plan *plan) {
    return k->smem_bytes + smem_extra(plan) <= (size_t)plan->tgt->smem_max;
}

static void drop_maps(tk_plan *plan) {
    plan->nmaps = 0;
    plan->ncopies = 0;
    plan->stores = false;
}

/* ---- Sets of op ids ------------------------------------------------------------ */
static bool has(const uint64_t *set, uint32_t id) { return set[id / 64] >> (id % 64) & 1; }

/* Adds id to set; whether it was new. */
static bool add(uint64_t *set, uint32_t id) {
    if (has(set, id)) return false;
    set[id / 64] |= (uint64_t)1 << (id % 64);
    return true;
}

/* The shared tiles (SHARED ops by id, in `set`) the engine's loads write. */
static void engine_tiles(const tk_plan *plan, const tk_region *r, uint64_t *set) {
    if (!r) return;
    TK_FOREACH_OP(r, op) {
        const tk_op *sh = op->opc == TK_OP_COPY_G2S && tk_plan_copy_map(plan, op) >= 0
                              ? tk_smem_alloc_of(op->opnds[0])
                              : NULL;
        if (sh && sh->id < TK_WS_MAX_IDS) add(set, sh->id);
        engine_tiles(plan, op->regions[0], set);
        engine_tiles(plan, op->regions[1], set);
    }
}

/* Whether some op reads or writes a tile of `set` through the generic proxy
 * (ld/st.shared, ldmatrix, stmatrix, cp.async, the threads' copies); the
 * engine's own copies, wgmma's descriptors and the engine's stores go
 * through the async proxy. */
static bool generic_access(const tk_plan *plan, const tk_region *r, const uint64_t *set) {
    if (!r) return false;
    TK_FOREACH_OP(r, op) {
        const tk_value *sm = NULL;
        switch (op->opc) {
        case TK_OP_LOAD_S2R:
        case TK_OP_STORE_R2S: sm = op->opnds[0]; break;
        case TK_OP_COPY_G2S:
            if (tk_plan_copy_map(plan, op) < 0) sm = op->opnds[0];
            break;
        case TK_OP_COPY_S2G:
            if (tk_plan_copy_map(plan, op) < 0) sm = op->opnds[op->nopnds - 1];
            break;
        default: break;
        }
        const tk_op *sh = sm ? tk_smem_alloc_of(sm) : NULL;
        if (sm && (!sh || sh->id >= TK_WS_MAX_IDS || has(set, sh->id))) return true;
        if (generic_access(plan, op->regions[0], set) || generic_access(plan, op->regions[1], set))
            return true;
    }
    return false;
}

/* ---- The producer's slice ---------------------------------------------------- */
static bool need_val(tk_ws_slice *s, const tk_value *v) { return v && add(s->val, v->id); }

static bool is_async_copy(const tk_op *op) {
    return op->opc == TK_OP_COPY_G2S && op->attr[0] != TK_COPY_SYNC;
}

/* The ops the producer must run no matter what they compute. */
static bool is_root(const tk_plan *plan, const tk_op *op) {
    return op->opc == TK_OP_ASYNC_COMMIT || op->opc == TK_OP_BARRIER ||
           op->opc == TK_OP_GRID_WAIT || op->opc == TK_OP_GRID_RELEASE ||
           (is_async_copy(op) && tk_plan_copy_map(plan, op) >= 0);
}

/* A FOR's carried slot i (or an IF's result i) is needed as a whole: its
 * region argument, result, yields and initial value. */
static bool need_slot(tk_ws_slice *s, const tk_op *op, int i) {
    bool ch = need_val(s, op->res[i]);
    for (int r = 0; r < 2; r++) {
        const tk_region *g = op->regions[r];
        if (!g) continue;
        if (op->opc == TK_OP_FOR) ch |= need_val(s, g->args[1 + i]);
        if (i < g->nyield) ch |= need_val(s, g->yield[i]);
    }
    if (op->opc == TK_OP_FOR) ch |= need_val(s, op->opnds[3 + i]);
    return ch;
}

static bool slot_needed(const tk_ws_slice *s, const tk_op *op, int i) {
    if (has(s->val, op->res[i]->id)) return true;
    return op->opc == TK_OP_FOR && has(s->val, op->regions[0]->args[1 + i]->id);
}

/* One pass over region r: marks the ops whose work the producer needs and
 * the values they read. Returns whether r holds a needed op; *ch is set
 * when anything new was marked (the caller repeats to a fixed point, since
 * a loop's later ops can need its earlier ones' results). */
static bool mark(const tk_plan *plan, const tk_region *r, tk_ws_slice *s, bool *ch) {
    bool any = false;
    TK_FOREACH_OP(r, op) {
        bool need = is_root(plan, op);
        for (int i = 0; i < 2; i++)
            if (op->regions[i] && mark(plan, op->regions[i], s, ch)) need = true;
        bool ctl = op->opc == TK_OP_FOR || op->opc == TK_OP_IF;
        for (int i = 0; i < op->nres; i++) {
            if (!slot_needed(s, op, i)) continue;
            need = true;
            if (ctl) *ch |= need_slot(s, op, i);
        }
        if (!need) continue;
        any = true;
        *ch |= add(s->op, op->id);
        int nread = op->opc == TK_OP_FOR ? 3 : op->opc == TK_OP_IF ? 1 : op->nopnds;
        for (int i = 0; i < nread; i++) *ch |= need_val(s, op->opnds[i]);
    }
    return any;
}

static bool uniform_scalar(const tk_value *v) {
    return v->type.kind == TK_KIND_SCALAR && v->uni == TK_UNI_BLOCK;
}

/* Whether the producer can run op: block-uniform scalar work, shared tiles,
 * control flow (carrying scalars only), and the roots. */
static bool runnable(const tk_kernel *k, const tk_plan *plan, const tk_ws_slice *s,
                     const tk_op *op) {
    switch (op->opc) {
    case TK_OP_WARP_ID:
    case TK_OP_WARPGROUP_ID:
    case TK_OP_LANE_ID: return false;
    case TK_OP_SHARED:
    case TK_OP_STAGE:
    case TK_OP_DIM:
    case TK_OP_ASYNC_COMMIT:
    case TK_OP_BARRIER:
    case TK_OP_GRID_WAIT:
    case TK_OP_GRID_RELEASE: return true;
    case TK_OP_COPY_G2S: return is_root(plan, op);
    case TK_OP_NARROW: return uniform_scalar(op->opnds[1]) && uniform_scalar(op->opnds[2]);
    case TK_OP_LOAD_G2R: { /* one element (a sequence's offset) of a tensor nobody writes */
        int p = tk_view_param(k, op->opnds[0]);
        if (op->res[0]->type.kind != TK_KIND_SCALAR || p < 0 || (plan->written >> p & 1))
            return false;
        for (int i = 1; i < op->nopnds; i++)
            if (!uniform_scalar(op->opnds[i])) return false;
        return true;
    }
    default: break;
    }
    const char *fam = tk_op_infos[op->opc].family;
    bool ctl = !strcmp(fam, "control");
    if (!ctl && strcmp(fam, "ids") && strcmp(fam, "scalar") && strcmp(fam, "elementwise"))
        return false;
    /* control flow: its bounds or condition, and the slots the slice keeps */
    int nread = op->opc == TK_OP_FOR ? 3 : op->opc == TK_OP_IF ? 1 : op->nopnds;
    for (int i = 0; i < nread; i++)
        if (!uniform_scalar(op->opnds[i])) return false;
    for (int i = 0; i < op->nres; i++)
        if ((!ctl || slot_needed(s, op, i)) && op->res[i]->type.kind != TK_KIND_SCALAR)
            return false;
    return true;
}

/* Memory the consumers share among themselves, which the release rings
 * (producer-consumer edges only) do not order. */
typedef struct consumer_mem {
    uint64_t tiles[TK_WS_MAX_IDS / 64]; /* SHARED ops (by id) the consumers write */
    uint64_t read;                      /* bit p: tensors the consumers read      */
    bool wgmma_reads;                   /* a WGMMA reads one of `tiles`           */
} consumer_mem;

/* Every needed op is runnable; no async copy is left to the consumers
 * (their groups would mix cp.async and mbarriers); notes the shared tiles
 * the consumers write and the tensors they read themselves. */
static bool check(const tk_kernel *k, const tk_plan *plan, const tk_region *r, tk_ws_slice *s,
                  consumer_mem *cm) {
    TK_FOREACH_OP(r, op) {
        if (is_async_copy(op) && tk_plan_copy_map(plan, op) < 0) return false;
        bool sync_copy = op->opc == TK_OP_COPY_G2S && !is_async_copy(op);
        const tk_op *sh =
            op->opc == TK_OP_STORE_R2S || sync_copy ? tk_smem_alloc_of(op->opnds[0]) : NULL;
        if (sh) add(cm->tiles, sh->id);
        int p = op->opc == TK_OP_LOAD_G2R ? tk_view_param(k, op->opnds[0])
                : sync_copy               ? tk_view_param(k, op->opnds[1])
                                          : -1;
        if (p >= 0) cm->read |= (uint64_t)1 << p;
        if (has(s->op, op->id) && !runnable(k, plan, s, op)) return false;
        for (int i = 0; i < 2; i++)
            if (op->regions[i] && !check(k, plan, op->regions[i], s, cm)) return false;
    }
    return true;
}

/* Whether op reads or writes memory of cm: a shared tile the consumers
 * write, or a tensor they read that the kernel also writes (rw); or is a
 * COPY_S2G, whose tile the engine may still read when the consumers
 * release it (the producer may refill a tile it filled); or is a
 * WGMMA_WAIT where some WGMMA reads a consumer tile: a multiply reads its
 * shared operands until the wait that retires it, so a barrier after the
 * wait orders those reads before another warp's next write. */
static bool touches(const tk_kernel *k, const consumer_mem *cm, uint64_t rw, const tk_op *op) {
    switch (op->opc) {
    case TK_OP_COPY_S2G: return true;
    case TK_OP_WGMMA_WAIT: return cm->wgmma_reads;
    case TK_OP_LOAD_G2R:
    case TK_OP_LOAD_S2R:
    case TK_OP_STORE_R2G:
    case TK_OP_STORE_R2S:
    case TK_OP_COPY_G2S:
    case TK_OP_WGMMA: break;
    default: return false;
    }
    for (int i = 0; i < op->nopnds; i++) {
        const tk_value *v = op->opnds[i];
        const tk_op *sh = v->type.kind == TK_KIND_SMEM ? tk_smem_alloc_of(v) : NULL;
        int p = v->type.kind == TK_KIND_GVIEW ? tk_view_param(k, v) : -1;
        if ((sh && has(cm->tiles, sh->id)) || (p >= 0 && (rw >> p & 1))) return true;
    }
    return false;
}

/* Whether a WGMMA of region r reads a shared tile the consumers write. */
static bool wgmma_reads(const consumer_mem *cm, const tk_region *r) {
    if (!r) return false;
    TK_FOREACH_OP(r, op) {
        for (int i = 1; op->opc == TK_OP_WGMMA && i < 3; i++) {
            const tk_value *v = op->opnds[i];
            const tk_op *sh = v->type.kind == TK_KIND_SMEM ? tk_smem_alloc_of(v) : NULL;
            if (sh && has(cm->tiles, sh->id)) return true;
        }
        if (wgmma_reads(cm, op->regions[0]) || wgmma_reads(cm, op->regions[1])) return true;
    }
    return false;
}

/* Flags in s->sync_bar each barrier of region r before which, since the
 * barrier before it, the consumers touched their shared memory (`dirty`:
 * whether they did on entry); returns whether they did by r's end. A loop
 * body runs twice, the second time entered as its back edge leaves it. */
static bool flag_barriers(const tk_kernel *k, const consumer_mem *cm, uint64_t rw,
                          const tk_region *r, bool dirty, tk_ws_slice *s) {
    if (!r) return dirty;
    TK_FOREACH_OP(r, op) {
        if (op->opc == TK_OP_BARRIER) {
            if (dirty) add(s->sync_bar, op->id);
            dirty = false;
        } else if (op->opc == TK_OP_FOR) {
            bool once = flag_barriers(k, cm, rw, op->regions[0], dirty, s);
            dirty |= flag_barriers(k, cm, rw, op->regions[0], dirty || once, s);
        } else if (op->opc == TK_OP_IF) {
            bool a = flag_barriers(k, cm, rw, op->regions[0], dirty, s);
            dirty = flag_barriers(k, cm, rw, op->regions[1], dirty, s) || a;
        } else {
            dirty = dirty || touches(k, cm, rw, op);
        }
    }
    return dirty;
}

/* Whether kernel k with the maps of `plan` splits; fills *s when it does. */
static bool slice_make(const tk_kernel *k, const tk_plan *plan, tk_ws_slice *s) {
    memset(s, 0, sizeof *s);
    if (!plan->nmaps || k->warps % 4 || k->warps < MIN_WARPS || k->warps + PRODUCER_WARPS > 32 ||
        k->nops >= TK_WS_MAX_IDS || k->nvalues >= TK_WS_MAX_IDS)
        return false;
    bool ch = true;
    while (ch) {
        ch = false;
        mark(plan, k->body, s, &ch);
    }
    consumer_mem cm;
    memset(&cm, 0, sizeof cm);
    if (!check(k, plan, k->body, s, &cm)) return false;
    cm.wgmma_reads = wgmma_reads(&cm, k->body);
    /* rw: a barrier between a store and another warp's load of the same tensor */
    flag_barriers(k, &cm, cm.read & plan->written, k->body, false, s);
    return true;
}

/* setmaxnreg moves registers within the block's pool, which holds what the
 * launch gave every thread: the cap for one block per SM (the kernel has
 * .reqntid and .minnctapersm 1; each SM sub-partition's 16 K registers
 * split among its warps), when a role needs more than that, else that
 * role's count. So what the producer gives back must pay for the
 * consumers' increase: 32 W C + 128 P <= threads x cap, which also holds
 * when the pool is threads x C. 240 is the most the GEMM's consumers use. */
static int consumer_regs(int warps) {
    int threads = 32 * (warps + PRODUCER_WARPS);
    int cap = 65536 / threads / 8 * 8;
    int r = (threads * cap - 32 * PRODUCER_WARPS * PRODUCER_REGS) / (32 * warps);
    r = r / 8 * 8;
    return r > 240 ? 240 : r;
}

/* A producer warpgroup, when the slice can be split off and its release
 * rings fit. */
static void plan_producer(const tk_kernel *k, tk_plan *plan) {
    if (!plan->tgt->setmaxnreg || !slice_make(k, plan, &plan->slice)) return;
    plan->producer_warps = PRODUCER_WARPS;
    if (!fits(k, plan)) { /* no room for its release rings */
        plan->producer_warps = 0;
        memset(&plan->slice, 0, sizeof plan->slice);
        return;
    }
    plan->producer_regs = PRODUCER_REGS;
    plan->consumer_regs = consumer_regs(k->warps);
}

/* Multicast (TK_COPY_MULTICAST) in a warp-specialized kernel of clusters:
 * each such copy whose rows split into cluster shares of whole swizzle
 * patterns (8 rows) moves to a map of the share's box; the maps left
 * unused go. Elsewhere (no producer: the lockstep ring would need cluster
 * barriers) the flag only promises, and each block copies its own tile. */
static void plan_multicast(tk_plan *plan, int cluster) {
    for (int i = 0; i < plan->ncopies; i++) {
        tk_tma_copy_ref *c = &plan->copies[i];
        tk_tma_map m = plan->maps[c->map];
        if (cluster < 2 || !c->multicast || m.box_rows % (8 * cluster)) {
            c->multicast = false;
            continue;
        }
        m.box_rows /= cluster;
        int j = find(plan, &m);
        if (j < 0 && plan->nmaps < TK_TMA_MAX_MAPS) plan->maps[j = plan->nmaps++] = m;
        c->multicast = j >= 0;
        if (j >= 0) c->map = j, plan->multicast = cluster;
    }
    if (!plan->multicast) return;   /* the maps as they were */
    int to[TK_TMA_MAX_MAPS], n = 0; /* compact: the maps some copy uses, in order */
    for (int j = 0; j < plan->nmaps; j++) {
        to[j] = -1;
        for (int i = 0; i < plan->ncopies && to[j] < 0; i++)
            if (plan->copies[i].map == j) to[j] = n++;
        if (to[j] >= 0) plan->maps[to[j]] = plan->maps[j];
    }
    plan->nmaps = n;
    for (int i = 0; i < plan->ncopies; i++) plan->copies[i].map = to[plan->copies[i].map];
}

/* Whether region r (or one nested in it) holds a tk_wgmma_wait_after: a
 * WGMMA_WAIT with its `after` operand. */
static bool has_pinned_wait(const tk_region *r) {
    if (!r) return false;
    TK_FOREACH_OP(r, op) {
        if (op->opc == TK_OP_WGMMA_WAIT && op->nopnds > 1) return true;
        if (has_pinned_wait(op->regions[0]) || has_pinned_wait(op->regions[1])) return true;
    }
    return false;
}

/* ---- The plan ------------------------------------------------------------------ */
void tk_plan_make(const tk_kernel *k, const tk_target *tgt, tk_plan *plan) {
    memset(plan, 0, sizeof *plan);
    plan->tgt = tgt;
    if (!k) return;
    if (tgt && tgt->tma) {
        mark_access(k, k->body, plan);
        if (!walk(k, k->body, true, plan) || !fits(k, plan))
            drop_maps(plan); /* the ring and the alignment slack must fit beside the tiles */
        plan_producer(k, plan);
        plan_multicast(plan, plan->producer_warps ? k->cluster : 0);
    }
    plan->cluster = k->cluster;
    /* wgmma reads shared memory through matrix descriptors, whose swizzle
     * patterns start at TK_TMA_ALIGN boundaries like the copy engine's: the
     * shared base must then be aligned as for maps */
    plan->descriptors = has_op(k->body, TK_OP_WGMMA);
    uint64_t set[TK_WS_MAX_IDS / 64] = {0};
    engine_tiles(plan, k->body, set);
    plan->generic_engine_tiles = generic_access(plan, k->body, set);
    plan->align_base = plan->nmaps > 0 || plan->descriptors;
    plan->threads = 32 * (k->warps + plan->producer_warps);
    plan->smem_extra = smem_extra(plan);
    plan->ring_offset = (k->smem_bytes + 7) & ~(size_t)7;
    if (has_pinned_wait(k->body)) {
        /* after the rings, 16-aligned: one word per thread, and 16 for the
         * pad (the 16-alignment of the rings' 8-aligned end; without maps,
         * also ring_offset's own rounding, at most 15 in all) */
        plan->pin_offset = (plan->ring_offset + ring_bytes(plan) + 15) & ~(size_t)15;
        plan->smem_extra += 16 + 4 * (size_t)plan->threads;
    }
    plan->smem = k->smem_bytes + plan->smem_extra;
    plan->griddep = tgt && tgt->griddep && has_op(k->body, TK_OP_GRID_WAIT);
}

/* ---- The public query ------------------------------------------------------------ */
tk_status tk_target_caps_get(tk_ctx *ctx, const char *arch, tk_target_caps *out) {
    if (!arch || !out)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_target_caps_get: %s is NULL",
                           arch ? "out" : "arch");
    if (!tk_arch_valid(arch)) /* as tk_emit_ptx: not an arch name at all */
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_target_caps_get: invalid target \"%s\"",
                           arch);
    const tk_target *t = tk_target_find(arch);
    if (!t) {
        char known[128];
        tk_target_names(known, sizeof known);
        return tk_ctx_fail(ctx, TK_ERR_UNSUPPORTED,
                           "tk_target_caps_get: unsupported arch '%s' "
                           "(known: %s)",
                           arch, known);
    }
    *out = (tk_target_caps){.arch = t->arch,
                            .llvm_cpu = t->cpu,
                            .llvm_features = t->features,
                            .sm = t->sm,
                            .mma_sync = t->mma_sync,
                            .ldmatrix = t->ldmatrix,
                            .cp_async = t->cp_async,
                            .stmatrix = t->stmatrix,
                            .tma = t->tma,
                            .wgmma = t->wgmma,
                            .setmaxnreg = t->setmaxnreg,
                            .smem_per_block = (size_t)t->smem_max};
    return TK_OK;
}
