/* Elementwise ops on scalars, tiles and vectors (rules and builder calls).
 *
 * binary (ADD SUB MUL DIV MAX MIN), operand shapes -> result:
 *   scalar∘scalar (one numeric dtype)      -> scalar
 *   tile∘tile, vec∘vec (identical types)   -> that type
 *   tile∘scalar, vec∘scalar (and reversed) -> the tile/vec; the scalar is f32
 *                                             or the tile's dtype
 *   tile∘vec (and reversed)                -> the tile; a PER_ROW vector
 *      broadcasts along rows (v[i] meets row i), PER_COL along columns
 * unary (NEG ABS EXP EXP2 LOG LOG2 SQRT RSQRT SIN COS): same type; all but
 *   NEG and ABS need a float dtype. CVT: attr[0] = target dtype.
 * FILL: operand = scalar, result = the requested tile/vec type.
 * Interpreter: ops/elementwise_interp.c; lowering: ops/elementwise_nv.c. */
#include "ops/build.h"

static bool is_reg(const tk_type *t) { return t->kind == TK_KIND_TILE || t->kind == TK_KIND_VEC; }

static bool numeric(tk_dtype dt) { return tk_dtype_is_float(dt) || tk_dtype_is_int(dt); }

static tk_status mismatch(tk_kernel *k, tk_op *op, const char *why) {
    char a[64], b[64];
    tk_type_str(&op->opnds[0]->type, a, sizeof a);
    tk_type_str(&op->opnds[1]->type, b, sizeof b);
    return tk_opfail(k, op, TK_ERR_TYPE, "operands are a %s and a %s: %s", a, b, why);
}

/* tile∘vec: the vector must pair with the tile along its axis. */
static tk_status rule_broadcast(tk_kernel *k, tk_op *op, const tk_type *t, const tk_type *v) {
    int want = v->axis == TK_PER_ROW ? t->rows : t->cols;
    if (v->owner != t->owner || v->layout != t->layout || v->dtype != t->dtype)
        return mismatch(k, op, "a broadcast vector needs the tile's dtype, owner and layout");
    if (v->rows != want)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "a %s vector of length %d does not fit a %dx%d tile "
                         "(needs %d)",
                         v->axis == TK_PER_ROW ? "per-row" : "per-col", v->rows, t->rows, t->cols,
                         want);
    op->res[0]->type = *t;
    return TK_OK;
}

static tk_status rule_binary(tk_kernel *k, tk_op *op) {
    const tk_type *a = &op->opnds[0]->type, *b = &op->opnds[1]->type;
    if (!(a->kind == TK_KIND_SCALAR || is_reg(a)) || !(b->kind == TK_KIND_SCALAR || is_reg(b)))
        return mismatch(k, op, "elementwise ops take scalars, tiles and vectors");
    if (a->kind == TK_KIND_SCALAR && b->kind == TK_KIND_SCALAR) {
        if (a->dtype != b->dtype || !numeric(a->dtype))
            return mismatch(k, op, "scalars need one numeric dtype");
        op->res[0]->type = *a;
        return TK_OK;
    }
    if (a->kind == b->kind) {
        if (!tk_type_eq(a, b)) return mismatch(k, op, "the two types must be identical");
        op->res[0]->type = *a;
        return TK_OK;
    }
    const tk_type *r = is_reg(a) && b->kind == TK_KIND_SCALAR   ? a
                       : is_reg(b) && a->kind == TK_KIND_SCALAR ? b
                                                                : NULL;
    if (r) {
        const tk_type *s = r == a ? b : a;
        if (s->dtype != TK_F32 && s->dtype != r->dtype)
            return mismatch(k, op, "the scalar must be f32 or of the tile's dtype");
        op->res[0]->type = *r;
        return TK_OK;
    }
    /* one tile, one vector */
    return a->kind == TK_KIND_TILE ? rule_broadcast(k, op, a, b) : rule_broadcast(k, op, b, a);
}

static tk_status rule_cvt(tk_kernel *k, tk_op *op) {
    const tk_type *a = &op->opnds[0]->type;
    tk_dtype to = (tk_dtype)op->attr[0];
    char b[64];
    tk_type_str(a, b, sizeof b);
    if (a->kind == TK_KIND_SCALAR) {
        bool ok_from = numeric(a->dtype) || a->dtype == TK_BOOL;
        bool ok_to = to == TK_F32 || to == TK_I32 || to == TK_I64 || to == TK_BOOL;
        if (!ok_from || !ok_to)
            return tk_opfail(k, op, TK_ERR_TYPE, "cannot convert a %s scalar to %s", b,
                             tk_dtype_name(to));
    } else if (is_reg(a)) {
        if (!tk_dtype_is_float(a->dtype) || !tk_dtype_is_float(to))
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "cannot convert a %s to %s; tiles and vectors "
                             "convert among f32, bf16 and f16",
                             b, tk_dtype_name(to));
    } else {
        return tk_opfail(k, op, TK_ERR_TYPE, "cannot convert a %s", b);
    }
    op->res[0]->type = *a;
    op->res[0]->type.dtype = to;
    return TK_OK;
}

/* A register tile/vector type a builder call asks for. */
tk_status tk_check_reg_type(tk_kernel *k, tk_op *op, const tk_type *t) {
    char b[64];
    tk_type_str(t, b, sizeof b);
    if (t->kind != TK_KIND_TILE && t->kind != TK_KIND_VEC)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "the requested type (%s) is not a register tile or "
                         "vector",
                         b);
    if (!tk_dtype_is_float(t->dtype))
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "register tiles and vectors hold f32, bf16 or f16, "
                         "not %s",
                         tk_dtype_name(t->dtype));
    if (t->owner != TK_WARP && t->owner != TK_WARPGROUP)
        return tk_opfail(k, op, TK_ERR_TYPE, "owner must be TK_WARP or TK_WARPGROUP (got %d)",
                         (int)t->owner);
    if (t->layout != TK_ROW && t->layout != TK_COL)
        return tk_opfail(k, op, TK_ERR_TYPE, "layout must be TK_ROW or TK_COL (got %d)",
                         (int)t->layout);
    if (t->owner == TK_WARPGROUP && t->layout != TK_ROW)
        return tk_opfail(k, op, TK_ERR_TYPE, "warpgroup tiles use the row layout");
    int quantum = t->owner == TK_WARPGROUP ? 64 : 16;
    if (t->kind == TK_KIND_VEC) {
        if (t->axis != TK_PER_ROW && t->axis != TK_PER_COL)
            return tk_opfail(k, op, TK_ERR_TYPE, "vector axis must be TK_PER_ROW or TK_PER_COL");
        int q = t->axis == TK_PER_ROW ? quantum : 16;
        if (t->rows <= 0 || t->rows % q || t->rows > 256)
            return tk_opfail(k, op, TK_ERR_SHAPE,
                             "vector length %d is not a positive multiple of "
                             "%d up to 256",
                             t->rows, q);
        return TK_OK;
    }
    if (t->rows <= 0 || t->cols <= 0 || t->rows % quantum || t->cols % 16 || t->rows > 256 ||
        t->cols > 256)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "%s: a %s tile's rows must be a multiple of %d "
                         "and its cols of 16 (each 16..256)",
                         b, t->owner == TK_WARPGROUP ? "warpgroup" : "warp", quantum);
    return TK_OK;
}

static tk_status rule_fill(tk_kernel *k, tk_op *op) {
    const tk_type *s = &op->opnds[0]->type;
    if (tk_check_reg_type(k, op, &op->want)) return k->status;
    if (s->kind != TK_KIND_SCALAR || !numeric(s->dtype))
        return tk_opfail(k, op, TK_ERR_TYPE, "the fill value must be a numeric scalar");
    op->res[0]->type = op->want;
    return TK_OK;
}

static tk_status rule_unary(tk_kernel *k, tk_op *op) {
    if (op->opc == TK_OP_CVT) return rule_cvt(k, op);
    if (op->opc == TK_OP_FILL) return rule_fill(k, op);
    const tk_type *a = &op->opnds[0]->type;
    char b[64];
    tk_type_str(a, b, sizeof b);
    if (!(a->kind == TK_KIND_SCALAR || is_reg(a)) || !numeric(a->dtype))
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "operand is a %s; expected a numeric scalar, tile or "
                         "vector",
                         b);
    if (op->opc != TK_OP_NEG && op->opc != TK_OP_ABS && !tk_dtype_is_float(a->dtype))
        return tk_opfail(k, op, TK_ERR_TYPE, "operand is a %s; expected a float dtype", b);
    op->res[0]->type = *a;
    return TK_OK;
}

tk_status tk_rule_elementwise(tk_kernel *k, tk_op *op) {
    return op->nopnds == 2 ? rule_binary(k, op) : rule_unary(k, op);
}

/* ---- builder calls ------------------------------------------------------ */
static tk_value *bin(tk_kernel *k, tk_opcode opc, tk_value *a, tk_value *b) {
    tk_value *v[2] = {a, b};
    tk_op *op = tk_build_op(k, opc, 2, v);
    return op ? op->res[0] : NULL;
}

static tk_value *un(tk_kernel *k, tk_opcode opc, tk_value *a) {
    tk_op *op = tk_build_op(k, opc, 1, &a);
    return op ? op->res[0] : NULL;
}

tk_value *tk_add(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_ADD, a, b); }
tk_value *tk_sub(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_SUB, a, b); }
tk_value *tk_mul(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_MUL, a, b); }
tk_value *tk_div(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_DIV, a, b); }
tk_value *tk_max(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_MAX, a, b); }
tk_value *tk_min(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_MIN, a, b); }
tk_value *tk_neg(tk_kernel *k, tk_value *a) { return un(k, TK_OP_NEG, a); }
tk_value *tk_abs(tk_kernel *k, tk_value *a) { return un(k, TK_OP_ABS, a); }
tk_value *tk_exp(tk_kernel *k, tk_value *a) { return un(k, TK_OP_EXP, a); }
tk_value *tk_exp2(tk_kernel *k, tk_value *a) { return un(k, TK_OP_EXP2, a); }
tk_value *tk_log(tk_kernel *k, tk_value *a) { return un(k, TK_OP_LOG, a); }
tk_value *tk_log2(tk_kernel *k, tk_value *a) { return un(k, TK_OP_LOG2, a); }
tk_value *tk_sqrt(tk_kernel *k, tk_value *a) { return un(k, TK_OP_SQRT, a); }
tk_value *tk_rsqrt(tk_kernel *k, tk_value *a) { return un(k, TK_OP_RSQRT, a); }
tk_value *tk_sin(tk_kernel *k, tk_value *a) { return un(k, TK_OP_SIN, a); }
tk_value *tk_cos(tk_kernel *k, tk_value *a) { return un(k, TK_OP_COS, a); }

tk_value *tk_cvt(tk_kernel *k, tk_value *a, tk_dtype to) {
    tk_op *op = tk_build_op_attr(k, TK_OP_CVT, 1, &a, to, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_fill(tk_kernel *k, tk_type type, tk_value *v) {
    tk_op *op = tk_build_op_typed(k, TK_OP_FILL, 1, &v, type, 0, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_zeros(tk_kernel *k, tk_type type) { return tk_fill(k, type, tk_const_f32(k, 0.0f)); }
