/* Lowering of row/column reductions and masks (rules: ops/reduce.c).
 *
 * A reduction first combines, in f32, the elements this thread holds for
 * each vector slot (tk_frag_vec_index), then combines across the lanes that
 * hold other parts of the same row/column with butterfly shuffles: when the
 * slot's lane part is g (4 lanes t = 0..3 share it) over lane masks 1, 2;
 * when it is 2t (8 lanes g = 0..7 share it) over 4, 8, 16. Afterwards every
 * lane holding the slot has the full result. Warpgroup tiles only reduce
 * rows (rule), which never cross warps.
 *
 * MAX_ALL combines all of the thread's elements, then all 32 lanes (masks
 * 1..16), so every lane holds the warp's maximum.
 *
 * MASK compares each element's (row, col) - tk_frag_pos plus the lane part -
 * in i64 with the op's a and b. */
#include "ops/lower_walk.h"

static bool is_max(tk_opcode opc) { return opc == TK_OP_ROW_MAX || opc == TK_OP_COL_MAX; }

static LLVMValueRef combine(tk_lower *L, bool max, LLVMValueRef x, LLVMValueRef y) {
    if (!x) return y;
    if (!max) return LLVMBuildFAdd(L->b, x, y, "");
    LLVMValueRef xy[2] = {x, y};
    return tk_lw_intrin(L, "llvm.maxnum", &L->f32, 1, xy, 2);
}

static LLVMValueRef shuffle_xor(tk_lower *L, LLVMValueRef v, int lanemask) {
    LLVMValueRef a[4] = {tk_lw_i32c(L, -1), v, tk_lw_i32c(L, lanemask), tk_lw_i32c(L, 0x1f)};
    return tk_lw_intrin(L, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, a, 4);
}

static tk_status lower_reduction(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->opnds[0]->type, *vt = &op->res[0]->type;
    tk_axis axis = vt->axis;
    bool max = is_max(op->opc);
    tk_lv *x = tk_lw_get(L, op->opnds[0]);
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(vt));
    if (!x || !r) return L->dg->st;
    for (int s = 0; s < r->n; s++) r->v[s] = NULL;
    for (int i = 0; i < x->n; i++) { /* own elements, in tile order */
        int s = tk_frag_vec_index(t, axis, i);
        r->v[s] = combine(L, max, r->v[s], tk_lw_cvt(L, x->v[i], t->dtype, TK_F32));
    }
    int first = tk_vec_per_sub(vt) == 2 ? 1 : 4, last = tk_vec_per_sub(vt) == 2 ? 2 : 16;
    for (int s = 0; s < r->n; s++) {
        for (int m = first; m <= last; m *= 2)
            r->v[s] = combine(L, max, r->v[s], shuffle_xor(L, r->v[s], m));
        r->v[s] = tk_lw_cvt(L, r->v[s], TK_F32, vt->dtype);
    }
    return TK_OK;
}

static tk_status lower_max_all(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    tk_lv *x = tk_lw_get(L, op->opnds[0]);
    tk_lv *r = tk_lw_def(L, op->res[0], 1);
    if (!x || !r) return L->dg->st;
    LLVMValueRef m = NULL;
    for (int i = 0; i < x->n; i++) m = combine(L, true, m, tk_lw_cvt(L, x->v[i], t->dtype, TK_F32));
    for (int lanes = 1; lanes <= 16; lanes *= 2) m = combine(L, true, m, shuffle_xor(L, m, lanes));
    r->v[0] = m;
    return TK_OK;
}

/* Whether element (row, col) is dropped (i1); a, b, row, col are i64. */
static LLVMValueRef dropped(tk_lower *L, int64_t kind, LLVMValueRef a, LLVMValueRef b,
                            LLVMValueRef row, LLVMValueRef col) {
    LLVMBuilderRef B = L->b;
    switch (kind) {
    case TK_MASK_CAUSAL: /* b + j > a + i */
        return LLVMBuildICmp(B, LLVMIntSGT, LLVMBuildAdd(B, b, col, ""),
                             LLVMBuildAdd(B, a, row, ""), "");
    case TK_MASK_COLS: /* a + j >= b */
        return LLVMBuildICmp(B, LLVMIntSGE, LLVMBuildAdd(B, a, col, ""), b, "");
    default: /* ROWS: a + i >= b */
        return LLVMBuildICmp(B, LLVMIntSGE, LLVMBuildAdd(B, a, row, ""), b, "");
    }
}

static tk_status lower_mask(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    tk_lv *x = tk_lw_get(L, op->opnds[0]);
    tk_lv *av = tk_lw_get(L, op->opnds[1]), *bv = tk_lw_get(L, op->opnds[2]);
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(t));
    if (!x || !av || !bv || !r) return L->dg->st;
    LLVMValueRef a = tk_lw_to_i64(L, av->v[0]), b = tk_lw_to_i64(L, bv->v[0]);
    LLVMValueRef lr = tk_lw_to_i64(L, tk_frag_lane_row(L, t));
    LLVMValueRef lc = tk_lw_to_i64(L, tk_frag_lane_col(L, t));
    LLVMValueRef fill = tk_lw_constf(L, t->dtype, op->fattr);
    for (int i = 0; i < r->n; i++) {
        int rc, cc;
        tk_frag_pos(t, i, &rc, &cc);
        LLVMValueRef row = LLVMBuildAdd(L->b, lr, tk_lw_i64c(L, rc), "");
        LLVMValueRef col = LLVMBuildAdd(L->b, lc, tk_lw_i64c(L, cc), "");
        LLVMValueRef d = dropped(L, op->attr[0], a, b, row, col);
        r->v[i] = LLVMBuildSelect(L->b, d, fill, x->v[i], "");
    }
    return TK_OK;
}

tk_status tk_lower_reduce(tk_lower *L, const tk_op *op) {
    if (op->opc == TK_OP_MASK) return lower_mask(L, op);
    if (op->opc == TK_OP_MAX_ALL) return lower_max_all(L, op);
    return lower_reduction(L, op);
}
