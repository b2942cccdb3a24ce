/* The region walker: each op goes to tk_lower_<family> (ops/<family>_nv.c),
 * picked by the family column of ir/ops.def. */
#include "ops/lower_walk.h"

typedef tk_status (*lower_fn)(tk_lower *L, const tk_op *op);
static const lower_fn lower_fns[TK_OP_COUNT] = {
#define X(e, name, mn, mx, nres, scope, fam, ...) tk_lower_##fam,
#include "ir/ops.def"
#undef X
};

tk_status tk_lower_region(tk_lower *L, const tk_region *r) {
    if (!r) return TK_OK;
    TK_FOREACH_OP(r, op) {
        if (!tk_lw_emits_op(L, op)) continue; /* not the producer's work (ops/nv/plan.h) */
        if (op->opc >= TK_OP_COUNT)
            return tk_lw_fail(L, TK_ERR_LLVM, "op %u: bad opcode %d", op->id, (int)op->opc);
        const tk_op *outer = L->cur; /* FOR/IF lower their regions recursively */
        L->cur = op;
        tk_status s = lower_fns[op->opc](L, op);
        L->cur = outer;
        if (s != TK_OK)
            return tk_lw_fail(L, s, "op %u (%s): lowering failed", op->id,
                              tk_op_infos[op->opc].name);
        /* Every result must have a lowered form before later ops use it. */
        for (int i = 0; i < op->nres; i++)
            if (!L->vals[op->res[i]->id].v && tk_lw_emits_val(L, op->res[i]))
                return tk_lw_fail(L, TK_ERR_LLVM, "op %u (%s): result %d not lowered", op->id,
                                  tk_op_infos[op->opc].name, i);
    }
    return TK_OK;
}
