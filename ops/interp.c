/* The CPU interpreter driver: argument checks, grid evaluation, per-run
 * storage, the block loop and op dispatch. Op semantics live in
 * ops/<family>_interp.c; the execution model is described in ops/interp.h.
 *
 * Barriers are no-ops here: warps run in lockstep, op by op, so every
 * write of one op is visible to every later op of any warp. That is only
 * equivalent to the GPU because the verifier keeps barriers (and other
 * block-scope ops) in block-uniform control flow, and for kernels that
 * order their warps with barriers: the race checker (ops/race.h) fails the
 * ones that do not, and the shuffle (tk_interp_options) runs the warps one
 * by one between block-wide ops. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ctx.h"
#include "ir/sig.h"
#include "ops/grid_eval.h"
#include "ops/interp.h"
#include "ops/race.h"

/* ---- dispatch, generated from the op table ------------------------------- */
static const tk_interp_fn dispatch[] = {
#define X(e, name, mn, mx, nres, scope, fam, ...) [TK_OP_##e] = tk_interp_##fam,
#include "ir/ops.def"
#undef X
};

#define X(...) +1
_Static_assert(0
#include "ir/ops.def"
                       == TK_OP_COUNT &&
                   sizeof dispatch / sizeof dispatch[0] == TK_OP_COUNT,
               "ops.def and the interpreter dispatch table disagree");
#undef X

#define GRID_MAX_BLOCKS (INT64_C(1) << 31)

/* ---- errors ------------------------------------------------------------- */
tk_status tk_interp_fail(tk_interp *I, const tk_op *op, int warp, tk_status s, const char *fmt,
                         ...) {
    char where[160], what[1024];
    int n = snprintf(where, sizeof where, "tk_interp_run: block (%lld,%lld,%lld)",
                     (long long)I->block[0], (long long)I->block[1], (long long)I->block[2]);
    if (warp >= 0 && n > 0 && (size_t)n < sizeof where)
        snprintf(where + n, sizeof where - (size_t)n, ", warp %d", warp);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (op)
        return tk_diag_fail(&I->diag, s, "%s: op #%u (%s): %s", where, op->id,
                            tk_op_infos[op->opc].name, what);
    return tk_diag_fail(&I->diag, s, "%s: %s", where, what);
}

/* ---- storage ------------------------------------------------------------ */
tk_status tk_interp_slot_alloc(tk_interp *I, const tk_op *op, const tk_value *v, tk_slot *sl) {
    const tk_type *t = &v->type;
    if (t->kind == TK_KIND_TILE || t->kind == TK_KIND_VEC) {
        if (sl->t) return TK_OK;
        /* A warpgroup is 4 whole warps; the verifier should have said so. */
        if (t->owner == TK_WARPGROUP && I->warps % 4)
            return tk_interp_fail(I, op, -1, TK_ERR_RUNTIME,
                                  "value %%%u is owned by a warpgroup "
                                  "but the kernel has %d warps (not a multiple of 4)",
                                  v->id, I->warps);
        size_t n = (size_t)tk_interp_ninst(I, t->owner) * tk_interp_elems(t);
        sl->t = calloc(n ? n : 1, sizeof(float));
        if (!sl->t)
            return tk_interp_fail(I, op, -1, TK_ERR_NO_MEMORY, "out of memory for value %%%u",
                                  v->id);
        return TK_OK;
    }
    if (t->kind == TK_KIND_NONE)
        return tk_interp_fail(I, op, -1, TK_ERR_RUNTIME, "value %%%u has no type", v->id);
    if (sl->s) return TK_OK;
    sl->s = calloc((size_t)I->nthreads, sizeof(tk_sv));
    if (!sl->s)
        return tk_interp_fail(I, op, -1, TK_ERR_NO_MEMORY, "out of memory for value %%%u", v->id);
    return TK_OK;
}

tk_status tk_interp_ensure(tk_interp *I, const tk_op *op, const tk_value *v) {
    return tk_interp_slot_alloc(I, op, v, &I->slots[v->id]);
}

void tk_interp_copy_slot(tk_interp *I, const tk_type *t, tk_slot *dst, const tk_slot *src,
                         uint32_t mask) {
    if (dst == src) return;
    if (t->kind == TK_KIND_TILE || t->kind == TK_KIND_VEC) {
        size_t n = tk_interp_elems(t), rows = (size_t)t->rows, per = n / rows;
        for (int i = 0; i < tk_interp_ninst(I, t->owner); i++) {
            uint32_t w = tk_interp_inst_warps(t->owner, i);
            float *d = dst->t + (size_t)i * n;
            const float *s = src->t + (size_t)i * n;
            if (!(mask & w)) continue;
            if ((mask & w) == w || !tk_interp_banded(t))
                memcpy(d, s, n * sizeof(float));
            else /* part of a warpgroup: its warps' rows */
                for (size_t r = 0; r < rows; r++)
                    if (tk_interp_row_live(mask, t, i, (int)r))
                        memcpy(d + r * per, s + r * per, per * sizeof(float));
        }
        return;
    }
    for (int w = 0; w < I->warps; w++)
        if ((mask >> w) & 1u) memcpy(dst->s + 32 * w, src->s + 32 * w, 32 * sizeof(tk_sv));
}

void tk_interp_copy(tk_interp *I, const tk_value *dst, const tk_value *src, uint32_t mask) {
    tk_interp_copy_slot(I, &dst->type, &I->slots[dst->id], &I->slots[src->id], mask);
}

static void free_slots(tk_interp *I) {
    if (!I->slots) return;
    for (uint32_t i = 0; i <= I->k->nvalues; i++) {
        free(I->slots[i].s);
        free(I->slots[i].t);
    }
    free(I->slots);
    I->slots = NULL;
}

/* ---- running ops -------------------------------------------------------- */
static tk_status run_op(tk_interp *I, const tk_op *op) {
    for (int i = 0; i < op->nopnds; i++) {
        tk_status s = tk_interp_ensure(I, op, op->opnds[i]);
        if (s) return s;
    }
    for (int i = 0; i < op->nres; i++) {
        tk_status s = tk_interp_ensure(I, op, op->res[i]);
        if (s) return s;
    }
    return dispatch[op->opc](I, op);
}

/* Runs ops [from, to) under I->mask. */
static tk_status run_ops(tk_interp *I, const tk_op *from, const tk_op *to) {
    for (const tk_op *op = from; op != to; op = op->next) {
        if (!I->mask) break; /* nobody left to run the rest */
        tk_status s = run_op(I, op);
        if (s) return s;
    }
    return TK_OK;
}

static uint64_t next_rand(tk_interp *I) {
    I->shuffle ^= I->shuffle >> 12;
    I->shuffle ^= I->shuffle << 25;
    I->shuffle ^= I->shuffle >> 27;
    return I->shuffle * 0x2545f4914f6cdd1dull;
}

/* Runs the warp-level ops [from, to) warp by warp, in a shuffled order. */
static tk_status run_shuffled(tk_interp *I, const tk_op *from, const tk_op *to) {
    uint32_t entry = I->mask;
    int order[32], n = 0;
    for (int w = 0; w < I->warps; w++)
        if (tk_interp_warp_active(I, w)) order[n++] = w;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(next_rand(I) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    tk_status s = TK_OK;
    for (int i = 0; i < n && !s; i++) {
        I->mask = 1u << order[i];
        s = run_ops(I, from, to);
    }
    I->mask = entry;
    return s;
}

tk_status tk_interp_region(tk_interp *I, const tk_region *r) {
    if (!r) return TK_OK;
    if (!I->shuffle) return run_ops(I, r->first, NULL);
    /* Block-wide ops run for all warps at once; each run of warp-level ops
     * between them runs warp by warp. */
    const tk_op *op = r->first;
    while (op) {
        const tk_op *end = op;
        while (end && !I->blockwide[end->id]) end = end->next;
        tk_status s = end == op ? run_ops(I, op, op->next) : run_shuffled(I, op, end);
        if (s) return s;
        op = end == op ? op->next : end;
    }
    return TK_OK;
}

static uint32_t all_warps(int warps) { return warps >= 32 ? 0xffffffffu : (1u << warps) - 1u; }

static tk_status run_block(tk_interp *I) {
    I->mask = all_warps(I->warps);
    if (I->race) tk_race_block(I);
    I->smem_top = 0;
    I->groups_committed = I->groups_applied = 0;
    /* Shared memory starts undefined on the GPU: NaN makes reads of it show. */
    for (size_t i = 0; i < I->smem_n; i++) I->smem[i] = NAN;
    I->mc_next = 0;
    if (I->k->cluster > 1 && I->block[0] % I->k->cluster == 0) I->nmc = 0; /* a new cluster */
    tk_status s = tk_interp_region(I, I->k->body);
    tk_interp_async_apply(I, INT64_MAX); /* whatever is in flight lands (and is freed) */
    return s ? s : tk_interp_multicast_end(I);
}

/* NARROW ops anywhere in region r. */
static size_t count_narrows(const tk_region *r) {
    size_t n = 0;
    for (const tk_op *op = r ? r->first : NULL; op; op = op->next)
        n += (op->opc == TK_OP_NARROW) + count_narrows(op->regions[0]) +
             count_narrows(op->regions[1]);
    return n;
}

/* Gives each NARROW result nthreads views after the parameters'. */
static void place_narrows(tk_interp *I, const tk_region *r, int64_t *next) {
    for (const tk_op *op = r ? r->first : NULL; op; op = op->next) {
        if (op->opc == TK_OP_NARROW) {
            I->view_base[op->res[0]->id] = *next;
            *next += I->nthreads;
        }
        place_narrows(I, op->regions[0], next);
        place_narrows(I, op->regions[1], next);
    }
}

/* The views table: every parameter's (a scalar's entry is unused), then
 * the narrowed ones'. */
static tk_status make_views(tk_interp *I) {
    const tk_kernel *k = I->k;
    size_t n = (size_t)k->nparams + count_narrows(k->body) * (size_t)I->nthreads;
    I->views = calloc(n ? n : 1, sizeof *I->views);
    I->view_base = calloc((size_t)k->nvalues + 1, sizeof *I->view_base);
    if (!I->views || !I->view_base) return TK_ERR_NO_MEMORY;
    for (int p = 0; p < k->nparams; p++) I->views[p] = (tk_iview){.a = I->args[p], .param = p};
    int64_t next = k->nparams;
    place_narrows(I, k->body, &next);
    return TK_OK;
}

/* Parameters never change during a run: their per-thread copies are set once. */
static tk_status bind_params(tk_interp *I) {
    for (int p = 0; p < I->k->nparams; p++) {
        const tk_value *v = I->k->params[p];
        tk_status s = tk_interp_ensure(I, NULL, v);
        if (s) return s;
        tk_sv x = {.i = p};
        if (v->type.kind == TK_KIND_SCALAR) x = tk_interp_arg_sv(v->type.dtype, &I->args[p]);
        tk_sv *d = tk_interp_sv(I, v);
        for (int t = 0; t < I->nthreads; t++) d[t] = x;
    }
    return TK_OK;
}

/* Shared floats per block: the SHARED ops sit at the top level (their rule
 * says so), each `count` consecutive tiles. */
static size_t smem_floats(const tk_kernel *k) {
    size_t n = 0;
    TK_FOREACH_OP(k->body, op)
    if (op->opc == TK_OP_SHARED) {
        const tk_type *t = &op->res[0]->type;
        n += (size_t)t->rows * (size_t)t->cols * (size_t)t->count;
    }
    return n;
}

static tk_status run_grid(tk_interp *I) {
    int cl = I->k->cluster;
    if (cl > 1 && I->grid[0] % cl)
        return tk_diag_fail(&I->diag, TK_ERR_INVALID_ARG,
                            "tk_interp_run: the grid's x is %lld blocks, not a multiple of the "
                            "kernel's cluster of %d",
                            (long long)I->grid[0], cl);
    tk_status s = bind_params(I);
    for (int64_t z = 0; !s && z < I->grid[2]; z++)
        for (int64_t y = 0; !s && y < I->grid[1]; y++)
            for (int64_t x = 0; !s && x < I->grid[0]; x++) {
                I->block[0] = x;
                I->block[1] = y;
                I->block[2] = z;
                s = run_block(I);
            }
    return s;
}

/* ---- options ------------------------------------------------------------- */
static tk_interp_options env_options(void) {
    const char *rc = getenv("TK_RACE_CHECK"), *sh = getenv("TK_INTERP_SHUFFLE");
    tk_interp_options o = {.race_check = !(rc && strcmp(rc, "0") == 0)};
    if (sh) o.shuffle_seed = strtoull(sh, NULL, 10);
    return o;
}

static void *options_make(tk_ctx *ctx) {
    (void)ctx;
    tk_interp_options *o = malloc(sizeof *o);
    if (o) *o = env_options();
    return o;
}

static const tk_ctx_slot_def options_slot = {"interpreter options", options_make, free};

tk_status tk_interp_set_options(tk_ctx *ctx, const tk_interp_options *opts) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!opts) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_interp_set_options: opts is NULL");
    tk_interp_options *o = tk_ctx_slot(ctx, &options_slot);
    if (!o) return TK_ERR_NO_MEMORY; /* tk_ctx_slot said why */
    *o = *opts;
    return TK_OK;
}

tk_status tk_interp_get_options(tk_ctx *ctx, tk_interp_options *opts) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!opts) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_interp_get_options: opts is NULL");
    const tk_interp_options *o = tk_ctx_slot_find(ctx, &options_slot);
    *opts = o ? *o : env_options();
    return TK_OK;
}

/* Ops that run for the whole block at once under the shuffle: block-scope
 * ops, the async group ops, and control flow holding any of them. */
static bool mark_blockwide(uint8_t *bw, const tk_region *r) {
    bool any = false;
    for (const tk_op *op = r ? r->first : NULL; op; op = op->next) {
        bool b = op->scope == TK_SCOPE_BLOCK || op->opc == TK_OP_ASYNC_COMMIT ||
                 op->opc == TK_OP_ASYNC_WAIT;
        for (int i = 0; i < 2; i++) b |= mark_blockwide(bw, op->regions[i]);
        bw[op->id] = b;
        any |= b;
    }
    return any;
}

static tk_status apply_options(tk_interp *I) {
    tk_interp_options o = {0};
    tk_interp_get_options(I->k->ctx, &o);
    if (o.shuffle_seed) {
        I->shuffle = o.shuffle_seed ^ 0x9e3779b97f4a7c15ull;
        if (!I->shuffle) I->shuffle = 1;
        I->blockwide = calloc((size_t)I->k->nops + 1, 1);
        if (!I->blockwide)
            return tk_diag_fail(&I->diag, TK_ERR_NO_MEMORY, "tk_interp_run: out of memory");
        mark_blockwide(I->blockwide, I->k->body);
    }
    return o.race_check ? tk_race_init(I) : TK_OK;
}

/* ---- arguments and grid ------------------------------------------------- */
/* Every in-range element offset must fit an int64 so element addressing
 * never overflows: sum (dims[d]-1)*|strides[d]| < 2^63. */
static tk_status check_extents(const tk_kernel *k, const tk_arg *args, const char *fn,
                               tk_diag *dg) {
    for (int p = 0; p < k->nparams; p++) {
        const tk_arg *a = &args[p];
        if (a->kind != TK_KIND_GVIEW) continue;
        int64_t sum = 0;
        bool empty = false, bad = false;
        for (int d = 0; d < a->rank; d++) empty |= a->dims[d] == 0;
        for (int d = 0; d < a->rank && !empty && !bad; d++) {
            int64_t m;
            bad = __builtin_mul_overflow(a->dims[d] - 1, a->strides[d], &m) || m == INT64_MIN ||
                  __builtin_add_overflow(sum, m < 0 ? -m : m, &sum);
        }
        if (bad)
            return tk_diag_fail(dg, TK_ERR_LAUNCH,
                                "%s: argument %d ('%s'): its dims and "
                                "strides reach elements more than 2^63 apart",
                                fn, p, k->params[p]->name);
    }
    return TK_OK;
}

/* The grid through ir/grid.c and ops/grid_eval.c (as tk_launch), then the
 * interpreter's own limits: every dimension >= 1, at most 2^31 blocks. */
static tk_status eval_grid(const tk_kernel *k, const tk_arg *args, int64_t grid[3], const char *fn,
                           tk_diag *dg) {
    tk_grid_prog g;
    tk_status s = tk_grid_build(k, &g, dg);
    if (!s) s = tk_grid_eval(&g, args, grid, fn, dg);
    tk_grid_free(&g);
    if (s) return s;
    int64_t total = 1;
    for (int d = 0; d < 3; d++) {
        if (grid[d] < 1)
            return tk_diag_fail(dg, TK_ERR_LAUNCH,
                                "%s: grid dimension %d is %lld; every grid "
                                "dimension must be >= 1",
                                fn, d, (long long)grid[d]);
        if (grid[d] > GRID_MAX_BLOCKS / total) /* i.e. total * grid[d] > 2^31, unoverflowed */
            return tk_diag_fail(dg, TK_ERR_LAUNCH,
                                "%s: the grid (%lld x %lld x %lld) has "
                                "more than 2^31 blocks",
                                fn, (long long)grid[0], (long long)(d > 0 ? grid[1] : 1),
                                (long long)(d > 1 ? grid[2] : 1));
        total *= grid[d];
    }
    return TK_OK;
}

/* Checks the kernel and args (the same check as tk_launch: ir/sig.c), then
 * evaluates the grid. */
static tk_status prepare(const tk_kernel *k, int nargs, const tk_arg *args, int64_t grid[3],
                         const char *fn, tk_diag *dg) {
    if (!k->finished)
        return tk_diag_fail(dg, TK_ERR_STATE,
                            "%s: kernel '%s' is not finished; call "
                            "tk_kernel_finish first",
                            fn, k->name);
    tk_sig sig;
    tk_sig_of(k, &sig);
    tk_status s = tk_sig_check(&sig, k->name, nargs, args, fn, dg);
    if (s) return s;
    if ((s = check_extents(k, args, fn, dg))) return s;
    return eval_grid(k, args, grid, fn, dg);
}

tk_status tk_kernel_grid(const tk_kernel *k, int nargs, const tk_arg *args, int64_t grid[3]) {
    if (!k) return TK_ERR_INVALID_ARG;
    tk_diag dg = {0};
    if (!grid)
        tk_diag_fail(&dg, TK_ERR_INVALID_ARG, "tk_kernel_grid: grid is NULL");
    else
        prepare(k, nargs, args, grid, "tk_kernel_grid", &dg);
    return tk_ctx_report(k->ctx, "", &dg);
}

tk_status tk_interp_run(const tk_kernel *k, int nargs, const tk_arg *args) {
    if (!k) return TK_ERR_INVALID_ARG;
    tk_interp I = {.k = k, .args = args};
    tk_status s = prepare(k, nargs, args, I.grid, "tk_interp_run", &I.diag);
    if (s) return tk_ctx_report(k->ctx, "", &I.diag);
    I.warps = k->warps;
    I.nthreads = 32 * k->warps;
    I.smem_n = smem_floats(k);
    I.slots = calloc((size_t)k->nvalues + 1, sizeof *I.slots);
    I.smem = calloc(I.smem_n ? I.smem_n : 1, sizeof(float));
    if (!I.slots || !I.smem || make_views(&I))
        tk_diag_fail(&I.diag, TK_ERR_NO_MEMORY, "tk_interp_run: out of memory");
    else if ((s = apply_options(&I)) || (s = run_grid(&I)))
        tk_diag_fail(&I.diag, s, "tk_interp_run: failed"); /* kept: a failure recorded */
    free_slots(&I);
    tk_race_free(&I);
    free(I.blockwide);
    free(I.views);
    free(I.view_base);
    free(I.smem);
    free(I.pend);
    free(I.mc);
    return tk_ctx_report(k->ctx, "", &I.diag); /* the run's one report */
}
