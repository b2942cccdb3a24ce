/* Sub-tiles and joins of register tiles (rules and builder calls).
 *
 * SLICE tile -> the rows x cols tile at (row0, col0) (attr[0], attr[1]);
 *   the result keeps the tile's dtype, owner and layout. CONCAT a, b ->
 *   b below a (attr[0] = 0: same cols) or right of a (1: same rows); a and
 *   b share dtype, owner and layout. Offsets and sizes are whole 16x16
 *   subtiles (rows of a warpgroup tile: 64, its row subtiles), so in
 *   registers either op only renames fragment slots: no data moves (ops/slice_nv.c).
 * Tiles of any dtype, masks (bool) included.
 *
 * PAIR_SWAP x -> x with columns 2j and 2j+1 swapped: a ROW tile (warp or
 *   warpgroup) or a PER_COL vector paired with ROW tiles, where both
 *   columns of a pair are one thread's adjacent slots. IOTA -> the
 *   requested f32 tile/vector of element indices along attr[0] (a tk_axis;
 *   a vector's must be its own axis). Neither moves data between lanes.
 * COL_BCAST x -> an f32 ROW tile of x's type, every column column attr[0]
 *   of x: the one op of the family that moves data across lanes (a shuffle
 *   within each lane quad).
 * Interpreter: ops/slice_interp.c; lowering: ops/slice_nv.c. */
#include "ops/build.h"

static tk_status want_tile(tk_kernel *k, tk_op *op, int i) {
    const tk_type *t = &op->opnds[i]->type;
    if (t->kind == TK_KIND_TILE) return TK_OK;
    char b[64];
    tk_type_str(t, b, sizeof b);
    return tk_opfail(k, op, TK_ERR_TYPE, "operand %d is a %s; expected a register tile", i, b);
}

/* A tile type of the op's shape rules (dtype may be bool: no float check). */
static tk_status check_shape(tk_kernel *k, tk_op *op, const tk_type *t) {
    tk_type f = *t;
    f.dtype = TK_F32;
    return tk_check_reg_type(k, op, &f);
}

static tk_status rule_slice(tk_kernel *k, tk_op *op) {
    if (want_tile(k, op, 0)) return k->status;
    const tk_type *t = &op->opnds[0]->type;
    int64_t r0 = op->attr[0], c0 = op->attr[1];
    int rq = t->owner == TK_WARPGROUP ? 64 : 16;
    tk_type r = *t;
    r.rows = op->want.rows;
    r.cols = op->want.cols;
    if (check_shape(k, op, &r)) return k->status;
    if (r0 < 0 || c0 < 0 || r0 % rq || c0 % 16)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "offset (%lld, %lld): rows must be a multiple of %d and cols of 16, "
                         "both >= 0",
                         (long long)r0, (long long)c0, rq);
    if (r0 + r.rows > t->rows || c0 + r.cols > t->cols) {
        char b[64];
        tk_type_str(t, b, sizeof b);
        return tk_opfail(k, op, TK_ERR_SHAPE, "a %dx%d slice at (%lld, %lld) overruns a %s", r.rows,
                         r.cols, (long long)r0, (long long)c0, b);
    }
    op->res[0]->type = r;
    return TK_OK;
}

static tk_status rule_concat(tk_kernel *k, tk_op *op) {
    if (want_tile(k, op, 0) || want_tile(k, op, 1)) return k->status;
    const tk_type *a = &op->opnds[0]->type, *b = &op->opnds[1]->type;
    int64_t axis = op->attr[0];
    char sa[64], sb[64];
    tk_type_str(a, sa, sizeof sa);
    tk_type_str(b, sb, sizeof sb);
    if (axis != 0 && axis != 1)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "axis is %lld; expected 0 (rows: b below a) or 1 (cols)", (long long)axis);
    if (a->dtype != b->dtype || a->owner != b->owner || a->layout != b->layout)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "a %s and a %s: concatenated tiles share dtype, owner and layout", sa, sb);
    if (axis == 0 ? a->cols != b->cols : a->rows != b->rows)
        return tk_opfail(k, op, TK_ERR_SHAPE, "a %s and a %s: their %s differ", sa, sb,
                         axis == 0 ? "cols" : "rows");
    tk_type r = *a;
    if (axis == 0)
        r.rows += b->rows;
    else
        r.cols += b->cols;
    if (check_shape(k, op, &r)) return k->status;
    op->res[0]->type = r;
    return TK_OK;
}

static tk_status rule_pair_swap(tk_kernel *k, tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    bool tile = t->kind == TK_KIND_TILE, vec = t->kind == TK_KIND_VEC;
    if ((tile || (vec && t->axis == TK_PER_COL)) && t->layout == TK_ROW) {
        op->res[0]->type = *t;
        return TK_OK;
    }
    char b[64];
    tk_type_str(t, b, sizeof b);
    return tk_opfail(k, op, TK_ERR_TYPE,
                     "operand 0 is a %s; expected a row-layout tile or a per-column vector of "
                     "row tiles (where a pair's columns share a thread)",
                     b);
}

static tk_status rule_col_bcast(tk_kernel *k, tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    if (t->kind != TK_KIND_TILE || t->layout != TK_ROW || t->dtype != TK_F32) {
        char b[64];
        tk_type_str(t, b, sizeof b);
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "operand 0 is a %s; expected an f32 row-layout tile (its columns' "
                         "lanes are known: a shuffle reaches them)",
                         b);
    }
    if (op->attr[0] < 0 || op->attr[0] >= t->cols)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "col is %lld; expected 0 .. %d",
                         (long long)op->attr[0], t->cols - 1);
    op->res[0]->type = *t;
    return TK_OK;
}

static tk_status rule_iota(tk_kernel *k, tk_op *op) {
    const tk_type *t = &op->want;
    if (tk_check_reg_type(k, op, t)) return k->status;
    if (t->dtype != TK_F32)
        return tk_opfail(k, op, TK_ERR_TYPE, "the type's dtype is %s; iota gives TK_F32",
                         tk_dtype_name(t->dtype));
    int64_t axis = op->attr[0];
    if (axis != TK_PER_ROW && axis != TK_PER_COL)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "axis is %lld; expected TK_PER_ROW or TK_PER_COL", (long long)axis);
    if (t->kind == TK_KIND_VEC && axis != t->axis)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "axis is %lld; a vector counts along its own axis (%d)", (long long)axis,
                         (int)t->axis);
    op->res[0]->type = *t;
    return TK_OK;
}

tk_status tk_rule_slice(tk_kernel *k, tk_op *op) {
    switch (op->opc) {
    case TK_OP_SLICE: return rule_slice(k, op);
    case TK_OP_CONCAT: return rule_concat(k, op);
    case TK_OP_PAIR_SWAP: return rule_pair_swap(k, op);
    case TK_OP_COL_BCAST: return rule_col_bcast(k, op);
    default: return rule_iota(k, op);
    }
}

tk_value *tk_slice(tk_kernel *k, tk_value *tile, int row0, int col0, int rows, int cols) {
    tk_type want = {.kind = TK_KIND_TILE, .rows = rows, .cols = cols};
    tk_op *op = tk_build_op_typed(k, TK_OP_SLICE, 1, &tile, want, row0, col0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_concat(tk_kernel *k, int axis, tk_value *a, tk_value *b) {
    tk_value *v[2] = {a, b};
    tk_op *op = tk_build_op_attr(k, TK_OP_CONCAT, 2, v, axis, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_pair_swap(tk_kernel *k, tk_value *x) {
    tk_op *op = tk_build_op(k, TK_OP_PAIR_SWAP, 1, &x);
    return op ? op->res[0] : NULL;
}

tk_value *tk_iota(tk_kernel *k, tk_type type, tk_axis axis) {
    tk_op *op = tk_build_op_typed(k, TK_OP_IOTA, 0, NULL, type, axis, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_col_bcast(tk_kernel *k, tk_value *x, int col) {
    tk_op *op = tk_build_op_attr(k, TK_OP_COL_BCAST, 1, &x, col, 0, 0.0);
    return op ? op->res[0] : NULL;
}
