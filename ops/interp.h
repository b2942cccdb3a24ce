/* The CPU interpreter: state shared by the driver (ops/interp.c) and the
 * per-family semantics (ops/<family>_interp.c).
 *
 * Execution model (one block at a time, blocks in x-fastest order):
 *  - a block has warps*32 threads run in warp lockstep; `mask` has one bit
 *    per warp that is active in the region being run (control flow is
 *    uniform over a warp, so a warp is all-on or all-off);
 *  - scalar-like values (scalars, shared-tile handles, tensor handles) keep
 *    one tk_sv per thread: lane ids really do differ per lane;
 *  - register tiles/vectors keep one copy per owner instance: one per warp,
 *    or one per warpgroup of 4 warps for TK_WARPGROUP values. A warpgroup's
 *    rows belong to its warps (row r to warp r % 64 / 16, as in the
 *    registers), so a warpgroup may run partly, after a branch on a
 *    warp-varying value (e.g. max_all): its ops compute every row, merges
 *    and stores keep only the active warps' rows (tk_interp_row_live), and
 *    what needs the whole warpgroup (wgmma) fails;
 *  - shared memory is one float array per block holding logical elements
 *    (layout/swizzle only changes addresses on the GPU, not values);
 *  - asynchronous global->shared copies wait in `pend` until a commit/wait
 *    (or the end of the block) applies them, so a kernel that reads before
 *    waiting sees stale data exactly as it could on the GPU.
 * Values are SSA: storage is per value id, allocated on first use and reused
 * by later loop trips and blocks; everything is freed when the run ends. */
#ifndef TK_OPS_INTERP_H
#define TK_OPS_INTERP_H

#include "ir/diag.h"
#include "ir/ir.h"

/* One thread's copy of a scalar-like value. Integers (and bool, 0/1) are
 * kept sign-extended in `i` (i32 already wrapped to 32 bits); f32 in `f`;
 * a shared handle is the float offset of its stage 0 in the block's shared
 * array; a view handle indexes tk_interp.views (a parameter's is its index). */
typedef union tk_sv {
    int64_t i;
    float f;
} tk_sv;

/* A global view as the interpreter addresses it: for a parameter, its
 * argument; for a NARROW result, a copy of its parent's with the data
 * pointer on its first element and the axis cut. `param` is the tensor it
 * lies in and `shift` the element offset of its first element there (what
 * the race checker, which tracks tensor elements, adds). */
typedef struct tk_iview {
    tk_arg a;
    int param;
    int64_t shift;
} tk_iview;

typedef struct tk_slot {
    tk_sv *s; /* SCALAR, SMEM, GVIEW: warps*32 entries                  */
    float *t; /* TILE, VEC: ninst * tk_interp_elems() entries           */
} tk_slot;

/* An issued asynchronous copy: the source as it was at issue time. */
typedef struct tk_pending {
    const tk_op *op; /* the COPY_G2S that issued it                       */
    int64_t group;   /* commit group (1, 2, ...) or 0 while uncommitted     */
    size_t dst;      /* float offset in the block's shared array            */
    size_t n;        /* rows*cols                                           */
    float *data;
} tk_pending;

typedef struct tk_interp {
    const tk_kernel *k;
    const tk_arg *args;
    int warps, nthreads;
    int64_t grid[3], block[3];
    uint32_t mask;           /* active warps of the region being run      */
    tk_slot *slots;          /* by value id, 1..k->nvalues                */
    float *smem;             /* the block's shared memory                 */
    size_t smem_n, smem_top; /* size; next free offset (SHARED bumps it)  */
    tk_pending *pend;        /* issue order == group order                */
    size_t npend, cappend;
    int64_t groups_committed; /* groups closed by ASYNC_COMMIT so far      */
    int64_t groups_applied;   /* groups applied by ASYNC_WAIT so far       */
    struct tk_race *race;     /* the race checker (ops/race.h), NULL: off   */
    uint64_t shuffle;         /* xorshift state of the warp shuffle, 0: off */
    tk_iview *views;          /* the parameters', then each NARROW result's
                                 (nthreads apiece, reused by later trips)  */
    int64_t *view_base;       /* by value id: a NARROW result's first view */
    uint8_t *blockwide;       /* by op id: the op runs for the whole block  */
    /* TK_COPY_MULTICAST's promise (ops/memory_interp.c): the cluster's first
     * block records each such copy (TK_MC_FIELDS values apiece), the others
     * check theirs against it in order; mc_next is the next to check. */
    int64_t *mc;
    size_t nmc, capmc, mc_next;
    tk_diag diag; /* the run's failure; tk_interp_run reports it */
} tk_interp;

typedef tk_status (*tk_interp_fn)(tk_interp *I, const tk_op *op);

#define X(e, name, mn, mx, nres, scope, fam, ...)                                                  \
    tk_status tk_interp_##fam(tk_interp *I, const tk_op *op);
#include "ir/ops.def"
#undef X

/* ---- driver services (ops/interp.c) --------------------------------------- */
#define TK_MC_FIELDS 6 /* op, tensor, its offset, leading base, row, column */
/* At the end of a block of a cluster: fails the block if it made fewer
 * multicast copies than its cluster's first block (ops/memory_interp.c). */
tk_status tk_interp_multicast_end(tk_interp *I);
/* Records a run-time error in I->diag naming the op, block and `warp` (-1: the
 * block as a whole); returns s. */
tk_status tk_interp_fail(tk_interp *I, const tk_op *op, int warp, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Makes sure v has storage (zeroed when new). Reads and writes below assume it. */
tk_status tk_interp_ensure(tk_interp *I, const tk_op *op, const tk_value *v);
/* The same for a scratch slot shaped like v (free its s and t when done). */
tk_status tk_interp_slot_alloc(tk_interp *I, const tk_op *op, const tk_value *v, tk_slot *sl);
/* Runs the ops of a region under I->mask. */
tk_status tk_interp_region(tk_interp *I, const tk_region *r);
/* Copies src into dst for the warps in `mask` (same types; dst ensured). */
void tk_interp_copy(tk_interp *I, const tk_value *dst, const tk_value *src, uint32_t mask);
/* The same between slots holding values of type t. */
void tk_interp_copy_slot(tk_interp *I, const tk_type *t, tk_slot *dst, const tk_slot *src,
                         uint32_t mask);

/* The view a handle names (handles are made by parameters and NARROW). */
static inline const tk_iview *tk_interp_view(const tk_interp *I, int64_t h) { return &I->views[h]; }

/* ---- owner instances ---------------------------------------------------- */
static inline int tk_interp_ninst(const tk_interp *I, tk_owner o) {
    return o == TK_WARPGROUP ? I->warps / 4 : I->warps;
}
/* Warps of instance `inst` as a mask. */
static inline uint32_t tk_interp_inst_warps(tk_owner o, int inst) {
    return o == TK_WARPGROUP ? 0xfu << (4 * inst) : 1u << inst;
}
static inline bool tk_interp_inst_active(const tk_interp *I, tk_owner o, int inst) {
    return (I->mask & tk_interp_inst_warps(o, inst)) != 0;
}
/* Whether all of instance `inst`'s warps are active. */
static inline bool tk_interp_inst_whole(const tk_interp *I, tk_owner o, int inst) {
    uint32_t w = tk_interp_inst_warps(o, inst);
    return (I->mask & w) == w;
}
/* Whether a t value's rows are split over its warpgroup's warps: tiles and
 * PER_ROW vectors of warpgroups (a PER_COL vector is whole in each warp). */
static inline bool tk_interp_banded(const tk_type *t) {
    return t->owner == TK_WARPGROUP && (t->kind == TK_KIND_TILE || t->axis == TK_PER_ROW);
}
/* Whether row r of instance `inst` of a t value is held by a warp in mask;
 * for values that are not banded, whether the instance's first warp (the
 * one that stores a warpgroup's PER_COL vector, ops/nv/frag.c) is. */
static inline bool tk_interp_row_live(uint32_t mask, const tk_type *t, int inst, int r) {
    if (!tk_interp_banded(t)) return (mask >> (t->owner == TK_WARPGROUP ? 4 * inst : inst)) & 1u;
    return (mask >> (4 * inst + r % 64 / 16)) & 1u;
}
/* The thread whose copy of a (warp-uniform) scalar operand an instance
 * uses: lane 0 of its first active warp. */
static inline int tk_interp_inst_thread(const tk_interp *I, tk_owner o, int inst) {
    uint32_t m = I->mask & tk_interp_inst_warps(o, inst);
    int w = 0;
    while (w < 31 && !(m & (1u << w))) w++;
    return 32 * w;
}
/* Lane 0 of the first active warp: the thread block-scope ops read. */
static inline int tk_interp_block_thread(const tk_interp *I) {
    int w = 0;
    while (w < 31 && !(I->mask & (1u << w))) w++;
    return 32 * w;
}
static inline bool tk_interp_warp_active(const tk_interp *I, int w) { return (I->mask >> w) & 1u; }

/* ---- storage access ----------------------------------------------------- */
static inline size_t tk_interp_elems(const tk_type *t) {
    return t->kind == TK_KIND_TILE ? (size_t)t->rows * (size_t)t->cols : (size_t)t->rows;
}
static inline tk_sv *tk_interp_sv(tk_interp *I, const tk_value *v) { return I->slots[v->id].s; }
static inline float *tk_interp_tile(tk_interp *I, const tk_value *v, int inst) {
    return I->slots[v->id].t + (size_t)inst * tk_interp_elems(&v->type);
}

/* ---- numerics shared by the families ------------------------------------ */
/* Rounds a float to what a value of dtype dt can hold (RNE). */
static inline float tk_interp_round(tk_dtype dt, float x) {
    if (dt == TK_BF16) return tk_bf16_to_f32(tk_f32_to_bf16(x));
    if (dt == TK_F16) return tk_f16_to_f32(tk_f32_to_f16(x));
    return x;
}
/* Wraps an integer result to its dtype (i32 two's complement, bool 0/1). */
static inline int64_t tk_interp_wrap(tk_dtype dt, int64_t x) {
    if (dt == TK_I32) return (int32_t)(uint32_t)(uint64_t)x;
    if (dt == TK_BOOL) return x != 0;
    return x;
}
/* A scalar as float (tile∘scalar, fill values). */
static inline float tk_interp_sv_float(tk_dtype dt, tk_sv v) {
    return tk_dtype_is_float(dt) ? v.f : (float)v.i;
}

/* Pure scalar evaluation, shared by the per-thread interpreter and the
 * host grid evaluation (ops/grid_eval.c), so both compute exactly the same
 * values. They take no tk_op because the grid program outlives the kernel:
 * opc, the dtype of operand 0 (what the op computes in) and, for CVT,
 * attr = the target dtype. x[] = operand values; on failure returns a
 * status and sets *why to a short reason. */
tk_status tk_interp_eval_elementwise(tk_opcode opc, tk_dtype dt, int64_t attr, const tk_sv *x,
                                     tk_sv *r, const char **why);
tk_status tk_interp_eval_scalar(tk_opcode opc, tk_dtype dt, const tk_sv *x, tk_sv *r,
                                const char **why);
/* A CONST op's value (dtype attr[1], integer attr[0], float fattr). */
tk_sv tk_interp_const(tk_dtype dt, int64_t i, double f);
/* A scalar kernel argument as a parameter of dtype `param` sees it (a bool
 * parameter given an i32 argument sees nonzero as 1, as tk_launch packs it). */
tk_sv tk_interp_arg_sv(tk_dtype param, const tk_arg *a);

/* Applies pending async copies up to group `upto` (INT64_MAX: all, even
 * uncommitted ones) in issue order (ops/memory_interp.c). */
void tk_interp_async_apply(tk_interp *I, int64_t upto);

#endif
