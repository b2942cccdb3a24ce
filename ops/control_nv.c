/* Lowering of structured control flow (rules: ops/control.c).
 *
 * FOR  pre -> head: iv = phi(lo, iv + step), one phi per slot of every
 *      carried value; if (iv < hi) body else exit. The body's yields feed
 *      the phis from the latch (the block the body ends in); the results are
 *      the head's phis as seen from the exit.
 * IF   cond ? then : else, both branches fall into a merge block holding one
 *      phi per slot of every result.
 * Loop bounds are warp-uniform (rule), so these branches never diverge
 * inside a warp. The producer of a warp-specialized kernel (jit/lower_ws.c)
 * carries only the values its slice needs: `live` skips the others. */
#include "ops/lower_walk.h"

static tk_lv *operand(tk_lower *L, const tk_op *op, int i) { return tk_lw_get(L, op->opnds[i]); }

static bool live(const tk_lower *L, const tk_value *v) { return tk_lw_emits_val(L, v); }

/* Phis for the live ones of `n` values, slot for slot like `like[i]`. */
static tk_status make_phis(tk_lower *L, tk_value *const *vals, int n, tk_lv *const *like) {
    for (int i = 0; i < n; i++) {
        if (!live(L, vals[i])) continue;
        tk_lv *lv = tk_lw_def(L, vals[i], like[i]->n);
        if (!lv) return L->dg->st;
        for (int s = 0; s < lv->n; s++)
            lv->v[s] = LLVMBuildPhi(L->b, LLVMTypeOf(like[i]->v[s]), "");
    }
    return TK_OK;
}

static void add_incoming(tk_lv *phis, tk_lv *from, LLVMBasicBlockRef bb) {
    for (int s = 0; s < phis->n && s < from->n; s++)
        LLVMAddIncoming(phis->v[s], &from->v[s], &bb, 1);
}

/* The lowered values a region yields (NULL where `of[i]`, the value each
 * becomes, is not live), or NULL after a failure. */
static tk_lv **yields(tk_lower *L, const tk_region *r, int n, tk_value *const *of) {
    tk_lv **y = tk_lw_alloc(L, sizeof *y * (size_t)(n ? n : 1));
    if (!y) return NULL;
    if (n && (!r || r->nyield != n)) {
        tk_lw_fail(L, TK_ERR_LLVM, "region yields %d values, expected %d", r ? r->nyield : 0, n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (live(L, of[i]) && !(y[i] = tk_lw_get(L, r->yield[i]))) return NULL;
    return y;
}

static tk_status lower_for(tk_lower *L, const tk_op *op) {
    const tk_region *body = op->regions[0];
    int n = op->nopnds - 3;
    tk_lv *lo = operand(L, op, 0), *hi = operand(L, op, 1), *step = operand(L, op, 2);
    tk_lv **init = tk_lw_alloc(L, sizeof *init * (size_t)(n + 1));
    if (!lo || !hi || !step || !init || !body || body->nargs != n + 1)
        return L->dg->st ? L->dg->st : tk_lw_fail(L, TK_ERR_LLVM, "malformed for");
    for (int i = 0; i < n; i++)
        if (live(L, body->args[1 + i]) && !(init[i] = operand(L, op, 3 + i))) return L->dg->st;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b);
    LLVMBasicBlockRef head = tk_lw_block(L, "for.head"), bodyb = tk_lw_block(L, "for.body"),
                      exit = tk_lw_block(L, "for.exit");
    LLVMBuildBr(L->b, head);
    LLVMPositionBuilderAtEnd(L->b, head);
    tk_lv *iv = tk_lw_def(L, body->args[0], 1);
    if (!iv || make_phis(L, body->args + 1, n, init)) return L->dg->st;
    iv->v[0] = LLVMBuildPhi(L->b, LLVMTypeOf(lo->v[0]), "iv");
    LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, iv->v[0], hi->v[0], ""), bodyb, exit);

    LLVMPositionBuilderAtEnd(L->b, bodyb);
    if (tk_lower_region(L, body) != TK_OK) return L->dg->st;
    tk_lv **next = yields(L, body, n, body->args + 1);
    if (!next) return L->dg->st;
    tk_lv ivn = {1, (LLVMValueRef[1]){LLVMBuildAdd(L->b, iv->v[0], step->v[0], "iv.next")}};
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(L->b);
    LLVMBuildBr(L->b, head);

    add_incoming(iv, lo, pre);
    add_incoming(iv, &ivn, latch);
    for (int i = 0; i < n; i++) {
        if (!live(L, body->args[1 + i])) continue;
        tk_lv *phis = tk_lw_get(L, body->args[1 + i]);
        if (!phis || phis->n != next[i]->n)
            return L->dg->st ? L->dg->st
                             : tk_lw_fail(L, TK_ERR_LLVM, "carried value %d changes shape", i);
        add_incoming(phis, init[i], pre);
        add_incoming(phis, next[i], latch);
        tk_lv *res = tk_lw_def(L, op->res[i], phis->n);
        if (!res) return L->dg->st;
        for (int s = 0; s < phis->n; s++) res->v[s] = phis->v[s];
    }
    LLVMPositionBuilderAtEnd(L->b, exit);
    return TK_OK;
}

/* Lowers one branch of an IF; returns its yields and the block it ends in. */
static tk_lv **lower_branch(tk_lower *L, const tk_op *op, int which, LLVMBasicBlockRef bb,
                            LLVMBasicBlockRef merge, LLVMBasicBlockRef *end) {
    const tk_region *r = op->regions[which];
    LLVMPositionBuilderAtEnd(L->b, bb);
    if (tk_lower_region(L, r) != TK_OK) return NULL;
    tk_lv **y = yields(L, r, op->nres, op->res);
    *end = LLVMGetInsertBlock(L->b);
    LLVMBuildBr(L->b, merge);
    return y;
}

static tk_status lower_if(tk_lower *L, const tk_op *op) {
    tk_lv *cond = operand(L, op, 0);
    if (!cond) return L->dg->st;
    int n = op->nres;
    LLVMBasicBlockRef thenb = tk_lw_block(L, "if.then"), elseb = tk_lw_block(L, "if.else"),
                      merge = tk_lw_block(L, "if.end"), then_end, else_end;
    LLVMBuildCondBr(L->b, cond->v[0], thenb, elseb);
    tk_lv **ty = lower_branch(L, op, 0, thenb, merge, &then_end);
    tk_lv **ey = ty ? lower_branch(L, op, 1, elseb, merge, &else_end) : NULL;
    if (!ty || !ey) return L->dg->st;
    LLVMPositionBuilderAtEnd(L->b, merge);
    if (make_phis(L, op->res, n, ty)) return L->dg->st;
    for (int i = 0; i < n; i++) {
        if (!live(L, op->res[i])) continue;
        tk_lv *phis = tk_lw_get(L, op->res[i]);
        if (!phis || ey[i]->n != phis->n)
            return L->dg->st ? L->dg->st
                             : tk_lw_fail(L, TK_ERR_LLVM, "if result %d: shapes differ", i);
        add_incoming(phis, ty[i], then_end);
        add_incoming(phis, ey[i], else_end);
    }
    return TK_OK;
}

tk_status tk_lower_control(tk_lower *L, const tk_op *op) {
    switch (op->opc) {
    case TK_OP_FOR: return lower_for(L, op);
    case TK_OP_IF: return lower_if(L, op);
    default: return tk_lw_fail(L, TK_ERR_LLVM, "not a control op");
    }
}
