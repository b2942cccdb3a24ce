/* Lowering of scalar integer / logic ops (rules: ops/scalar.c). Scalars are
 * plain LLVM values (bool = i1). */
#include "ops/lower_walk.h"

/* C remainder; x % -1 is 0, as x % 1 already gives (divisor: see
 * tk_lw_safe_divisor). */
static LLVMValueRef rem(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef m1;
    return LLVMBuildSRem(L->b, a, tk_lw_safe_divisor(L, b, &m1), "");
}

/* The true ceiling, as the interpreter and the host grid compute it
 * (ops/scalar_interp.c): q = a / b rounded toward zero, plus one when the
 * division is inexact and the exact quotient is positive. (a + b - 1) / b is
 * only right for a >= 0, b > 0. a / -1 is -a, wrapping for MIN. */
static LLVMValueRef ceil_div(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = L->b;
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef m1, zero = LLVMConstNull(t), d = tk_lw_safe_divisor(L, b, &m1);
    LLVMValueRef q = LLVMBuildSDiv(B, a, d, ""), r = LLVMBuildSRem(B, a, d, "");
    LLVMValueRef same = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildICmp(B, LLVMIntSLT, a, zero, ""),
                                      LLVMBuildICmp(B, LLVMIntSLT, b, zero, ""), "");
    LLVMValueRef up = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntNE, r, zero, ""), same, "");
    q = LLVMBuildAdd(B, q, LLVMBuildZExt(B, up, t, ""), "");
    return LLVMBuildSelect(B, m1, LLVMBuildNeg(B, a, ""), q, "");
}

tk_status tk_lower_scalar(tk_lower *L, const tk_op *op) {
    LLVMValueRef in[2];
    for (int i = 0; i < op->nopnds && i < 2; i++) {
        tk_lv *lv = tk_lw_get(L, op->opnds[i]);
        if (!lv) return L->dg->st;
        in[i] = lv->v[0];
    }
    LLVMValueRef r;
    switch (op->opc) {
    case TK_OP_REM: r = rem(L, in[0], in[1]); break;
    case TK_OP_CEIL_DIV: r = ceil_div(L, in[0], in[1]); break;
    case TK_OP_AND: r = LLVMBuildAnd(L->b, in[0], in[1], ""); break;
    case TK_OP_OR: r = LLVMBuildOr(L->b, in[0], in[1], ""); break;
    default: return tk_lw_fail(L, TK_ERR_LLVM, "not a scalar op");
    }
    tk_lv *lv = tk_lw_def(L, op->res[0], 1);
    if (!lv) return L->dg->st;
    lv->v[0] = r;
    return TK_OK;
}
