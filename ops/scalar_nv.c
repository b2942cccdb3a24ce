/* Lowering of scalar integer / logic ops (rules: ops/scalar.c). Scalars are
 * plain LLVM values (bool = i1); comparisons are signed (ints) or ordered
 * (floats: false when either side is NaN). */
#include "ops/lower.h"

/* ceil(a / b) for b > 0 as (a + b - 1) / b, rounding toward zero. */
static LLVMValueRef ceil_div(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef one = LLVMConstInt(LLVMTypeOf(a), 1, 0);
    LLVMValueRef n = LLVMBuildSub(L->b, LLVMBuildAdd(L->b, a, b, ""), one, "");
    return LLVMBuildSDiv(L->b, n, b, "");
}

static LLVMValueRef compare(tk_lower *L, tk_opcode opc, tk_dtype dt, LLVMValueRef a,
                            LLVMValueRef b) {
    LLVMIntPredicate ip;
    LLVMRealPredicate fp;
    switch (opc) {
    case TK_OP_LT: ip = LLVMIntSLT, fp = LLVMRealOLT; break;
    case TK_OP_LE: ip = LLVMIntSLE, fp = LLVMRealOLE; break;
    case TK_OP_GT: ip = LLVMIntSGT, fp = LLVMRealOGT; break;
    case TK_OP_GE: ip = LLVMIntSGE, fp = LLVMRealOGE; break;
    case TK_OP_EQ: ip = LLVMIntEQ, fp = LLVMRealOEQ; break;
    default: ip = LLVMIntNE, fp = LLVMRealUNE; break; /* NaN != anything */
    }
    if (tk_dtype_is_float(dt))
        return LLVMBuildFCmp(L->b, fp, a, b, "");
    return LLVMBuildICmp(L->b, ip, a, b, "");
}

tk_status tk_lower_scalar(tk_lower *L, const tk_op *op) {
    LLVMValueRef in[3];
    for (int i = 0; i < op->nopnds && i < 3; i++) {
        tk_lv *lv = tk_lw_get(L, op->opnds[i]);
        if (!lv)
            return L->st;
        in[i] = lv->v[0];
    }
    LLVMValueRef r;
    switch (op->opc) {
    case TK_OP_REM: r = LLVMBuildSRem(L->b, in[0], in[1], ""); break;
    case TK_OP_CEIL_DIV: r = ceil_div(L, in[0], in[1]); break;
    case TK_OP_LT: case TK_OP_LE: case TK_OP_GT: case TK_OP_GE: case TK_OP_EQ: case TK_OP_NE:
        r = compare(L, op->opc, op->opnds[0]->type.dtype, in[0], in[1]);
        break;
    case TK_OP_AND: r = LLVMBuildAnd(L->b, in[0], in[1], ""); break;
    case TK_OP_OR: r = LLVMBuildOr(L->b, in[0], in[1], ""); break;
    case TK_OP_SELECT: r = LLVMBuildSelect(L->b, in[0], in[1], in[2], ""); break;
    default: return tk_lw_fail(L, TK_ERR_LLVM, "not a scalar op");
    }
    tk_lv *lv = tk_lw_def(L, op->res[0], 1);
    if (!lv)
        return L->st;
    lv->v[0] = r;
    return TK_OK;
}
