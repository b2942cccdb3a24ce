/* Ids, constants and tensor dims (rules and builder calls).
 *
 * BLOCK_ID attr[0] = dim (0..2) -> i32      WARP_ID, WARPGROUP_ID, LANE_ID -> i32
 * CONST    attr[1] = dtype; attr[0] = integer value, fattr = float value
 * DIM      operand: a global view; attr[0] = dim -> i64 (run-time size)
 * tk_spec makes a named i64 CONST and records it in the kernel's signature.
 * Interpreter: ops/ids_interp.c; lowering: ops/ids_nv.c. */
#include <string.h>

#include "ops/build.h"

tk_status tk_rule_ids(tk_kernel *k, tk_op *op) {
    tk_type i32 = tk_scalar_type(TK_I32);
    switch (op->opc) {
    case TK_OP_BLOCK_ID:
        if (op->attr[0] < 0 || op->attr[0] > 2)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG, "dim is %lld, expected 0, 1 or 2",
                             (long long)op->attr[0]);
        op->res[0]->type = i32;
        return TK_OK;
    case TK_OP_WARP_ID:
    case TK_OP_WARPGROUP_ID:
    case TK_OP_LANE_ID: op->res[0]->type = i32; return TK_OK;
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
    default: return tk_opfail(k, op, TK_ERR_INVALID_ARG, "not an ids op");
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
/* The i64 forms: the id, widened by a cvt (what callers wrote by hand). */
tk_value *tk_block_id_i64(tk_kernel *k, int dim) { return tk_cvt(k, tk_block_id(k, dim), TK_I64); }
tk_value *tk_warp_id_i64(tk_kernel *k) { return tk_cvt(k, tk_warp_id(k), TK_I64); }
tk_value *tk_lane_id_i64(tk_kernel *k) { return tk_cvt(k, tk_lane_id(k), TK_I64); }
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

tk_value *tk_spec(tk_kernel *k, const char *name, int64_t value) {
    if (!k || k->status) return NULL;
    if (!name || !*name) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_spec: name is NULL or empty");
        return NULL;
    }
    if (!tk_is_ident(name)) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_spec: name '%s' is not a C identifier", name);
        return NULL;
    }
    for (int i = 0; i < k->nspecs; i++)
        if (!strcmp(k->specs[i].name, name)) {
            tk_kfail(k, TK_ERR_INVALID_ARG, "tk_spec: '%s' is declared twice", name);
            return NULL;
        }
    if (k->nspecs >= TK_MAX_SPECS) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_spec: more than %d specialization constants",
                 TK_MAX_SPECS);
        return NULL;
    }
    /* Like parameters, specs are part of the kernel's signature: a value
     * defined inside a region could not be seen by code after it closes. */
    if (k->nopen) {
        tk_kfail(k, TK_ERR_STATE,
                 "tk_spec: '%s' declared inside a for/if region; declare "
                 "specialization constants at the top level",
                 name);
        return NULL;
    }
    /* Built first, recorded after: a failed call leaves the spec list alone. */
    tk_op *op = tk_build_op_attr(k, TK_OP_CONST, 0, NULL, value, TK_I64, (double)value);
    const char *copy = op ? tk_arena_strdup(k->arena, name) : NULL;
    if (!copy) {
        if (op) tk_kfail(k, TK_ERR_NO_MEMORY, "tk_spec: out of memory");
        return NULL;
    }
    k->specs[k->nspecs].name = copy;
    k->specs[k->nspecs++].value = value;
    op->res[0]->name = copy;
    return op->res[0];
}
