/* Ids, constants and tensor dims (rules and builder calls).
 *
 * BLOCK_ID attr[0] = dim (0..2) -> i32      WARP_ID, WARPGROUP_ID, LANE_ID -> i32
 * CONST    attr[1] = dtype; attr[0] = integer value, fattr = float value
 * DIM      operand: a global view; attr[0] = dim -> i64 (run-time size)
 * Interpreter: ops/ids_interp.c; lowering: ops/ids_nv.c. */
#include "ir/ir.h"

tk_status tk_rule_ids(tk_kernel *k, tk_op *op) {
    tk_type i32 = tk_scalar_type(TK_I32);
    switch (op->opc) {
    case TK_OP_BLOCK_ID:
        if (op->attr[0] < 0 || op->attr[0] > 2)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG, "dim is %lld, expected 0, 1 or 2",
                             (long long)op->attr[0]);
        op->res[0]->type = i32;
        return TK_OK;
    case TK_OP_WARP_ID: case TK_OP_WARPGROUP_ID: case TK_OP_LANE_ID:
        op->res[0]->type = i32;
        return TK_OK;
    case TK_OP_CONST: {
        tk_dtype dt = (tk_dtype)op->attr[1];
        if (dt != TK_F32 && dt != TK_I32 && dt != TK_I64 && dt != TK_BOOL)
            return tk_opfail(k, op, TK_ERR_TYPE, "constants are f32, i32, i64 or bool, not %s",
                             tk_dtype_name(dt));
        op->res[0]->type = tk_scalar_type(dt);
        return TK_OK;
    }
    case TK_OP_DIM: {
        const tk_type *t = &op->opnds[0]->type;
        if (t->kind != TK_KIND_GVIEW) {
            char b[64];
            tk_type_str(t, b, sizeof b);
            return tk_opfail(k, op, TK_ERR_TYPE, "operand is a %s; expected a tensor parameter", b);
        }
        if (op->attr[0] < 0 || op->attr[0] >= t->rank)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG, "dim %lld of a rank-%d tensor",
                             (long long)op->attr[0], t->rank);
        op->res[0]->type = tk_scalar_type(TK_I64);
        return TK_OK;
    }
    default:
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "not an ids op");
    }
}

static tk_value *res0(tk_op *op) { return op ? op->res[0] : NULL; }

tk_value *tk_block_id(tk_kernel *k, int dim) {
    return res0(tk_build_op_attr(k, TK_OP_BLOCK_ID, 0, NULL, dim, 0, 0.0));
}
tk_value *tk_warp_id(tk_kernel *k) { return res0(tk_build_op(k, TK_OP_WARP_ID, 0, NULL)); }
tk_value *tk_warpgroup_id(tk_kernel *k) {
    return res0(tk_build_op(k, TK_OP_WARPGROUP_ID, 0, NULL));
}
tk_value *tk_lane_id(tk_kernel *k) { return res0(tk_build_op(k, TK_OP_LANE_ID, 0, NULL)); }
tk_value *tk_const_i32(tk_kernel *k, int32_t v) {
    return res0(tk_build_op_attr(k, TK_OP_CONST, 0, NULL, v, TK_I32, v));
}
tk_value *tk_const_i64(tk_kernel *k, int64_t v) {
    return res0(tk_build_op_attr(k, TK_OP_CONST, 0, NULL, v, TK_I64, (double)v));
}
tk_value *tk_const_f32(tk_kernel *k, float v) {
    return res0(tk_build_op_attr(k, TK_OP_CONST, 0, NULL, 0, TK_F32, v));
}
tk_value *tk_const_bool(tk_kernel *k, int v) {
    return res0(tk_build_op_attr(k, TK_OP_CONST, 0, NULL, v != 0, TK_BOOL, v != 0));
}
tk_value *tk_dim(tk_kernel *k, tk_value *view, int dim) {
    return res0(tk_build_op_attr(k, TK_OP_DIM, 1, &view, dim, 0, 0.0));
}
