/* Scalar-only integer and logic ops (rules and builder calls).
 *
 * REM, CEIL_DIV: i32/i64 operands of one dtype -> that dtype
 * AND, OR: bool, bool -> bool
 * (Compares and select take tiles too: they are elementwise ops, ops/elementwise.c.)
 * Interpreter: ops/scalar_interp.c; lowering: ops/scalar_nv.c. */
#include "ops/build.h"

static tk_status want_scalars(tk_kernel *k, tk_op *op) {
    for (int i = 0; i < op->nopnds; i++)
        if (op->opnds[i]->type.kind != TK_KIND_SCALAR) {
            char b[64];
            tk_type_str(&op->opnds[i]->type, b, sizeof b);
            return tk_opfail(k, op, TK_ERR_TYPE, "operand %d is a %s; expected a scalar", i, b);
        }
    return TK_OK;
}

tk_status tk_rule_scalar(tk_kernel *k, tk_op *op) {
    if (want_scalars(k, op)) return k->status;
    tk_dtype a = op->opnds[0]->type.dtype, b = op->opnds[1]->type.dtype;
    switch (op->opc) {
    case TK_OP_REM:
    case TK_OP_CEIL_DIV:
        if (!tk_dtype_is_int(a) || a != b)
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "operands are %s and %s; expected two i32 or two "
                             "i64",
                             tk_dtype_name(a), tk_dtype_name(b));
        op->res[0]->type = tk_scalar_type(a);
        return TK_OK;
    case TK_OP_AND:
    case TK_OP_OR:
        if (a != TK_BOOL || b != TK_BOOL)
            return tk_opfail(k, op, TK_ERR_TYPE, "operands are %s and %s; expected bool and bool",
                             tk_dtype_name(a), tk_dtype_name(b));
        op->res[0]->type = tk_scalar_type(TK_BOOL);
        return TK_OK;
    default: return tk_opfail(k, op, TK_ERR_INVALID_ARG, "not a scalar op");
    }
}

static tk_value *bin(tk_kernel *k, tk_opcode opc, tk_value *a, tk_value *b) {
    tk_value *v[2] = {a, b};
    tk_op *op = tk_build_op(k, opc, 2, v);
    return op ? op->res[0] : NULL;
}

tk_value *tk_rem(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_REM, a, b); }
tk_value *tk_ceil_div(tk_kernel *k, tk_value *a, tk_value *b) {
    return bin(k, TK_OP_CEIL_DIV, a, b);
}
tk_value *tk_and(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_AND, a, b); }
tk_value *tk_or(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_OR, a, b); }
