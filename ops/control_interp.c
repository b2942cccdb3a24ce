/* Interpreter semantics of structured control flow (ops/control.c).
 *
 * Conditions and bounds are uniform over a warp (the rules check it), so
 * each warp reads them from its lane 0 and control flow just narrows the
 * warp mask:
 *  IF  runs the then-region for the active warps whose cond holds and the
 *      else-region for the others; each warp's results come from the branch
 *      it took.
 *  FOR runs trips while any warp is still inside its own bounds; a trip runs
 *      only the warps still iterating, and a warp that is done keeps its
 *      carried values. A loop whose step is <= 0 while lo < hi would never
 *      end: TK_ERR_RUNTIME. An induction variable that would overflow its
 *      dtype ends that warp's loop (it can no longer be < hi). */
#include <stdlib.h>

#include "ops/interp.h"

/* ---- if ----------------------------------------------------------------- */
static tk_status run_branch(tk_interp *I, const tk_op *op, int which, uint32_t mask) {
    const tk_region *r = op->regions[which];
    if (!mask || !r) return TK_OK;
    I->mask = mask;
    tk_status s = tk_interp_region(I, r);
    for (int i = 0; !s && i < r->nyield && i < op->nres; i++) {
        s = tk_interp_ensure(I, op, r->yield[i]);
        if (!s) tk_interp_copy(I, op->res[i], r->yield[i], mask);
    }
    return s;
}

static tk_status run_if(tk_interp *I, const tk_op *op) {
    const tk_sv *cond = tk_interp_sv(I, op->opnds[0]);
    uint32_t entry = I->mask, taken = 0;
    for (int w = 0; w < I->warps; w++)
        if (cond[32 * w].i) taken |= 1u << w;
    tk_status s = run_branch(I, op, 0, entry & taken);
    if (!s) s = run_branch(I, op, 1, entry & ~taken);
    I->mask = entry;
    return s;
}

/* ---- for ---------------------------------------------------------------- */
typedef struct loop {
    const tk_op *op;
    const tk_region *body;
    int n;           /* carried values                                 */
    bool alias;      /* some yield is a carried value of this loop     */
    tk_slot tmp[64]; /* scratch for the yields when they alias         */
} loop;

/* Moves the yields into the carried values for the warps of `mask`. With
 * aliasing (e.g. a swap) all yields are read before any is written. */
static tk_status carry(tk_interp *I, loop *L, uint32_t mask) {
    const tk_value *const *y = (const tk_value *const *)L->body->yield;
    const tk_value *const *c = (const tk_value *const *)L->body->args + 1;
    for (int i = 0; i < L->n; i++) {
        tk_status s = tk_interp_ensure(I, L->op, y[i]);
        if (s) return s;
        if (L->alias && (s = tk_interp_slot_alloc(I, L->op, y[i], &L->tmp[i]))) return s;
        if (L->alias)
            tk_interp_copy_slot(I, &y[i]->type, &L->tmp[i], &I->slots[y[i]->id], mask);
        else
            tk_interp_copy(I, c[i], y[i], mask);
    }
    for (int i = 0; L->alias && i < L->n; i++)
        tk_interp_copy_slot(I, &c[i]->type, &I->slots[c[i]->id], &L->tmp[i], mask);
    return TK_OK;
}

/* Warps of `running` whose induction variable is still below hi. */
static tk_status still_running(tk_interp *I, const loop *L, uint32_t *running) {
    const tk_sv *iv = tk_interp_sv(I, L->body->args[0]);
    const tk_sv *hi = tk_interp_sv(I, L->op->opnds[1]), *st = tk_interp_sv(I, L->op->opnds[2]);
    for (int w = 0; w < I->warps; w++) {
        if (!((*running >> w) & 1u)) continue;
        if (iv[32 * w].i >= hi[32 * w].i)
            *running &= ~(1u << w);
        else if (st[32 * w].i <= 0)
            return tk_interp_fail(I, L->op, w, TK_ERR_RUNTIME,
                                  "step is %lld while %lld < %lld: "
                                  "the loop would never end",
                                  (long long)st[32 * w].i, (long long)iv[32 * w].i,
                                  (long long)hi[32 * w].i);
    }
    return TK_OK;
}

static void advance(tk_interp *I, const loop *L, uint32_t *running) {
    tk_sv *iv = tk_interp_sv(I, L->body->args[0]);
    const tk_sv *st = tk_interp_sv(I, L->op->opnds[2]);
    for (int w = 0; w < I->warps; w++) {
        if (!((*running >> w) & 1u)) continue;
        for (int t = 32 * w; t < 32 * w + 32; t++)
            if (__builtin_add_overflow(iv[t].i, st[t].i, &iv[t].i)) *running &= ~(1u << w);
    }
}

static tk_status run_trips(tk_interp *I, loop *L) {
    uint32_t running = I->mask;
    tk_status s = TK_OK;
    while (!s && !(s = still_running(I, L, &running)) && running) {
        I->mask = running;
        s = tk_interp_region(I, L->body);
        if (!s) s = carry(I, L, running);
        advance(I, L, &running);
    }
    return s;
}

static tk_status run_for(tk_interp *I, const tk_op *op) {
    loop L = {.op = op, .body = op->regions[0], .n = op->nres};
    uint32_t entry = I->mask;
    tk_status s = TK_OK;
    for (int i = 0; i < L.body->nargs && !s; i++) s = tk_interp_ensure(I, op, L.body->args[i]);
    if (s) return s;
    for (int i = 0; i < L.n; i++) {
        L.alias |= L.body->yield[i]->region_arg == L.body;
        tk_interp_copy(I, L.body->args[1 + i], op->opnds[3 + i], entry);
    }
    tk_interp_copy(I, L.body->args[0], op->opnds[0], entry);
    s = run_trips(I, &L);
    I->mask = entry;
    for (int i = 0; i < L.n; i++) {
        if (!s) tk_interp_copy(I, op->res[i], L.body->args[1 + i], entry);
        free(L.tmp[i].s);
        free(L.tmp[i].t);
    }
    return s;
}

tk_status tk_interp_control(tk_interp *I, const tk_op *op) {
    return op->opc == TK_OP_IF ? run_if(I, op) : run_for(I, op);
}
