/* Lowering of ids, constants and dims (rules: ops/ids.c).
 * Per-thread ids come from the entry block (jit/lower.c): warp = tid.x / 32,
 * lane = tid.x % 32, warpgroup = warp / 4; block ids read %ctaid. */
#include "ops/lower_walk.h"

static LLVMValueRef block_id(tk_lower *L, int64_t dim) {
    static const char *names[3] = {"llvm.nvvm.read.ptx.sreg.ctaid.x",
                                   "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                   "llvm.nvvm.read.ptx.sreg.ctaid.z"};
    return tk_lw_intrin(L, names[dim >= 0 && dim < 3 ? dim : 0], NULL, 0, NULL, 0);
}

/* CONST: attr[1] = dtype; integer value in attr[0], float value in fattr. */
static LLVMValueRef constant(tk_lower *L, const tk_op *op) {
    tk_dtype dt = (tk_dtype)op->attr[1];
    if (tk_dtype_is_float(dt)) return tk_lw_constf(L, dt, op->fattr);
    if (dt == TK_BOOL) return LLVMConstInt(L->i1, op->attr[0] != 0, 0);
    return LLVMConstInt(tk_lw_type(L, dt), (unsigned long long)op->attr[0], 1);
}

/* DIM: the view's dims follow its pointer in the lowered form. */
static LLVMValueRef dim(tk_lower *L, const tk_op *op) {
    tk_lv *v = tk_lw_get(L, op->opnds[0]);
    if (!v) return NULL;
    return v->v[1 + op->attr[0]];
}

tk_status tk_lower_ids(tk_lower *L, const tk_op *op) {
    LLVMValueRef r = NULL;
    switch (op->opc) {
    case TK_OP_BLOCK_ID: r = block_id(L, op->attr[0]); break;
    case TK_OP_WARP_ID: r = L->warp; break;
    case TK_OP_WARPGROUP_ID: r = LLVMBuildLShr(L->b, L->tid, tk_lw_i32c(L, 7), "wg"); break;
    case TK_OP_LANE_ID: r = L->lane; break;
    case TK_OP_CONST: r = constant(L, op); break;
    case TK_OP_DIM: r = dim(L, op); break;
    default: return tk_lw_fail(L, TK_ERR_LLVM, "not an ids op");
    }
    if (!r) return L->dg->st ? L->dg->st : tk_lw_fail(L, TK_ERR_LLVM, "cannot lower");
    tk_lv *lv = tk_lw_def(L, op->res[0], 1);
    if (!lv) return L->dg->st;
    lv->v[0] = r;
    return TK_OK;
}
