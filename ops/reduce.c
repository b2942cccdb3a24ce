/* Row/column reductions into vectors, and masks (rules and builder calls).
 *
 * ROW_MAX, ROW_SUM: tile R×C -> PER_ROW vector of length R (tile dtype)
 * COL_MAX, COL_SUM: tile R×C -> PER_COL vector of length C
 * MAX_ALL: tile or vector -> f32 scalar, the max of the elements the
 *   executing warp holds (all of a warp's value; of a warpgroup tile or
 *   PER_ROW vector the warp's rows, 16 in every 64), the same in every lane: a
 *   warp-uniform value that can steer an if, e.g. skip work no row of the
 *   warp needs; no cross-warp traffic
 * MASK attr[0] = tk_mask_kind, fattr = fill; operands tile, a, b (i32/i64):
 *   CAUSAL drops (i,j) with b + j > a + i; COLS drops a + j >= b;
 *   ROWS drops a + i >= b. Result: the tile's type.
 * Interpreter: ops/reduce_interp.c; lowering: ops/reduce_nv.c. */
#include "ops/build.h"

static tk_status need_tile(tk_kernel *k, tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    if (t->kind == TK_KIND_TILE && tk_dtype_is_float(t->dtype)) return TK_OK;
    if (op->opc == TK_OP_MAX_ALL && t->kind == TK_KIND_VEC && tk_dtype_is_float(t->dtype))
        return TK_OK;
    char b[64];
    tk_type_str(t, b, sizeof b);
    return tk_opfail(k, op, TK_ERR_TYPE, "operand is a %s; expected a register tile%s", b,
                     op->opc == TK_OP_MAX_ALL ? " or vector" : "");
}

tk_status tk_rule_reduce(tk_kernel *k, tk_op *op) {
    if (need_tile(k, op)) return k->status;
    const tk_type *t = &op->opnds[0]->type;
    switch (op->opc) {
    case TK_OP_ROW_MAX:
    case TK_OP_ROW_SUM:
        op->res[0]->type = tk_vec_type(t->dtype, t->rows, TK_PER_ROW, t->owner, t->layout);
        return TK_OK;
    case TK_OP_COL_MAX:
    case TK_OP_COL_SUM:
        if (t->owner == TK_WARPGROUP)
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "column reductions of warpgroup tiles would "
                             "cross warps; reduce warp tiles");
        op->res[0]->type = tk_vec_type(t->dtype, t->cols, TK_PER_COL, t->owner, t->layout);
        return TK_OK;
    case TK_OP_MAX_ALL: op->res[0]->type = tk_scalar_type(TK_F32); return TK_OK;
    case TK_OP_MASK:
        if (op->attr[0] < TK_MASK_CAUSAL || op->attr[0] > TK_MASK_ROWS)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG, "kind is %lld; expected a tk_mask_kind",
                             (long long)op->attr[0]);
        for (int i = 1; i < 3; i++) {
            const tk_type *s = &op->opnds[i]->type;
            if (s->kind != TK_KIND_SCALAR || !tk_dtype_is_int(s->dtype)) {
                char b[64];
                tk_type_str(s, b, sizeof b);
                return tk_opfail(k, op, TK_ERR_TYPE, "%s is a %s; expected an i32/i64 scalar",
                                 i == 1 ? "a" : "b", b);
            }
        }
        op->res[0]->type = *t;
        return TK_OK;
    default: return tk_opfail(k, op, TK_ERR_INVALID_ARG, "not a reduce op");
    }
}

static tk_value *red(tk_kernel *k, tk_opcode opc, tk_value *t) {
    tk_op *op = tk_build_op(k, opc, 1, &t);
    return op ? op->res[0] : NULL;
}

tk_value *tk_row_max(tk_kernel *k, tk_value *t) { return red(k, TK_OP_ROW_MAX, t); }
tk_value *tk_row_sum(tk_kernel *k, tk_value *t) { return red(k, TK_OP_ROW_SUM, t); }
tk_value *tk_col_max(tk_kernel *k, tk_value *t) { return red(k, TK_OP_COL_MAX, t); }
tk_value *tk_col_sum(tk_kernel *k, tk_value *t) { return red(k, TK_OP_COL_SUM, t); }
tk_value *tk_max_all(tk_kernel *k, tk_value *x) { return red(k, TK_OP_MAX_ALL, x); }

tk_value *tk_mask(tk_kernel *k, tk_value *tile, tk_mask_kind kind, tk_value *a, tk_value *b,
                  float fill) {
    tk_value *v[3] = {tile, a, b};
    tk_op *op = tk_build_op_attr(k, TK_OP_MASK, 3, v, kind, 0, fill);
    return op ? op->res[0] : NULL;
}
