/* Elementwise ops on scalars, tiles and vectors (rules and builder calls).
 *
 * binary (ADD SUB MUL DIV MAX MIN), operand shapes -> result:
 *   scalar∘scalar (one numeric dtype)      -> scalar
 *   tile∘tile, vec∘vec (identical types)   -> that type
 *   tile∘scalar, vec∘scalar (and reversed) -> the tile/vec; the scalar is f32
 *                                             or the tile's dtype
 *   tile∘vec (and reversed)                -> the tile; a PER_ROW vector
 *      broadcasts along rows (v[i] meets row i), PER_COL along columns
 * compare (LT LE GT GE EQ NE): the shapes of binary; numeric operands (bool
 *   scalars: EQ/NE only) -> the shape with dtype bool. A bool tile/vector
 *   is a mask: it feeds tk_select, tk_cvt (to a float dtype), slices,
 *   concats, loops and ifs; no arithmetic, no loads or stores.
 * SELECT cond, a, b: a and b as a binary op's operands (same dtype, or a
 *   tile/vec with an f32 scalar); cond a bool scalar, or a bool tile/vec of
 *   the result's shape; the result is the shape of the tile/vec operand
 *   (all tile/vec operands alike; no vec broadcast), with the a/b dtype.
 * unary (NEG ABS EXP EXP2 LOG LOG2 SQRT RSQRT SIN COS TANH ERF SIGMOID):
 *   same type; all but NEG and ABS need a float dtype. CVT: attr[0] =
 *   target dtype. FILL: operand = scalar, result = the requested tile/vec
 *   type.
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

static bool is_cmp(tk_opcode opc) {
    return opc == TK_OP_LT || opc == TK_OP_LE || opc == TK_OP_GT || opc == TK_OP_GE ||
           opc == TK_OP_EQ || opc == TK_OP_NE;
}

/* Bool scalars compare for (in)equality; bool tiles/vectors take no arithmetic. */
static tk_status rule_bool(tk_kernel *k, tk_op *op, const tk_type *a, const tk_type *b) {
    bool scal = a->kind == TK_KIND_SCALAR && b->kind == TK_KIND_SCALAR;
    if (scal && is_cmp(op->opc)) {
        if (a->dtype != b->dtype || (op->opc != TK_OP_EQ && op->opc != TK_OP_NE))
            return tk_opfail(k, op, TK_ERR_TYPE, "cannot compare %s with %s",
                             tk_dtype_name(a->dtype), tk_dtype_name(b->dtype));
        return TK_OK;
    }
    if (scal) return mismatch(k, op, "scalars need one numeric dtype");
    return mismatch(k, op,
                    "a bool tile or vector is a mask: use it in tk_select, or tk_cvt it to "
                    "a float dtype");
}

static tk_status rule_binary(tk_kernel *k, tk_op *op) {
    const tk_type *a = &op->opnds[0]->type, *b = &op->opnds[1]->type;
    if (!(a->kind == TK_KIND_SCALAR || is_reg(a)) || !(b->kind == TK_KIND_SCALAR || is_reg(b)))
        return mismatch(k, op, "elementwise ops take scalars, tiles and vectors");
    if (a->dtype == TK_BOOL || b->dtype == TK_BOOL) {
        if (rule_bool(k, op, a, b)) return k->status;
        op->res[0]->type = *a; /* two bool scalars */
        return TK_OK;
    }
    if (a->kind == TK_KIND_SCALAR && b->kind == TK_KIND_SCALAR) {
        if (a->dtype != b->dtype || !numeric(a->dtype)) {
            if (is_cmp(op->opc))
                return tk_opfail(k, op, TK_ERR_TYPE, "cannot compare %s with %s",
                                 tk_dtype_name(a->dtype), tk_dtype_name(b->dtype));
            return mismatch(k, op, "scalars need one numeric dtype");
        }
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
        bool ok_from = tk_dtype_is_float(a->dtype) || a->dtype == TK_BOOL; /* mask -> 0/1 */
        if (!ok_from || !tk_dtype_is_float(to))
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "cannot convert a %s to %s; tiles and vectors "
                             "convert among f32, bf16 and f16 (and from bool)",
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

/* SELECT: a and b follow the binary rule (as if added), cond fits its result. */
static tk_status rule_select(tk_kernel *k, tk_op *op) {
    const tk_type *c = &op->opnds[0]->type;
    char b[64];
    tk_type_str(c, b, sizeof b);
    if (c->dtype != TK_BOOL || !(c->kind == TK_KIND_SCALAR || is_reg(c)))
        return tk_opfail(k, op, TK_ERR_TYPE, "condition is %s; expected bool", b);
    tk_value *ab[2] = {op->opnds[1], op->opnds[2]};
    tk_op pair = *op; /* the branches as a binary op's operands, same messages */
    pair.nopnds = 2;
    pair.opnds = ab;
    const tk_type *x = &ab[0]->type, *y = &ab[1]->type;
    if (x->kind == TK_KIND_SCALAR && y->kind == TK_KIND_SCALAR && x->dtype != y->dtype)
        return tk_opfail(k, op, TK_ERR_TYPE, "branches are %s and %s; they must match",
                         tk_dtype_name(x->dtype), tk_dtype_name(y->dtype));
    if (x->kind != TK_KIND_SCALAR && y->kind != TK_KIND_SCALAR && x->kind != y->kind)
        return mismatch(k, &pair, "select broadcasts scalars only, not vectors");
    if (x->dtype == TK_BOOL && y->dtype == TK_BOOL && tk_type_eq(x, y))
        op->res[0]->type = *x; /* bool branches: a choice between masks */
    else if (rule_binary(k, &pair))
        return k->status;
    else
        op->res[0]->type = pair.res[0]->type;
    tk_type r = op->res[0]->type;
    if (c->kind == TK_KIND_SCALAR) return TK_OK;
    tk_type want = r.kind == TK_KIND_SCALAR ? *c : r;
    want.dtype = TK_BOOL;
    if (!tk_type_eq(c, &want)) {
        char w[64];
        tk_type_str(&want, w, sizeof w);
        return tk_opfail(k, op, TK_ERR_TYPE, "condition is a %s; expected a %s", b, w);
    }
    if (r.kind == TK_KIND_SCALAR) { /* a mask picks between two scalars: a float tile */
        if (!tk_dtype_is_float(r.dtype))
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "a bool tile picks between floats, not %s (tiles hold floats)",
                             tk_dtype_name(r.dtype));
        want.dtype = r.dtype;
        op->res[0]->type = want;
    }
    return TK_OK;
}

tk_status tk_rule_elementwise(tk_kernel *k, tk_op *op) {
    if (op->opc == TK_OP_SELECT) return rule_select(k, op);
    if (op->nopnds == 1) return rule_unary(k, op);
    if (rule_binary(k, op)) return k->status;
    if (is_cmp(op->opc)) op->res[0]->type.dtype = TK_BOOL;
    return TK_OK;
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
tk_value *tk_tanh(tk_kernel *k, tk_value *a) { return un(k, TK_OP_TANH, a); }
tk_value *tk_erf(tk_kernel *k, tk_value *a) { return un(k, TK_OP_ERF, a); }
tk_value *tk_sigmoid(tk_kernel *k, tk_value *a) { return un(k, TK_OP_SIGMOID, a); }
tk_value *tk_lt(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_LT, a, b); }
tk_value *tk_le(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_LE, a, b); }
tk_value *tk_gt(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_GT, a, b); }
tk_value *tk_ge(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_GE, a, b); }
tk_value *tk_eq(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_EQ, a, b); }
tk_value *tk_ne(tk_kernel *k, tk_value *a, tk_value *b) { return bin(k, TK_OP_NE, a, b); }

tk_value *tk_select(tk_kernel *k, tk_value *cond, tk_value *a, tk_value *b) {
    tk_value *v[3] = {cond, a, b};
    tk_op *op = tk_build_op(k, TK_OP_SELECT, 3, v);
    return op ? op->res[0] : NULL;
}

tk_value *tk_cvt(tk_kernel *k, tk_value *a, tk_dtype to) {
    tk_op *op = tk_build_op_attr(k, TK_OP_CVT, 1, &a, to, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_fill(tk_kernel *k, tk_type type, tk_value *v) {
    tk_op *op = tk_build_op_typed(k, TK_OP_FILL, 1, &v, type, 0, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_zeros(tk_kernel *k, tk_type type) { return tk_fill(k, type, tk_const_f32(k, 0.0f)); }
