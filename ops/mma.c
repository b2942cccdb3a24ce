/* Tensor-core matrix multiply-accumulate (rule and builder call).
 *
 * MMA attr[0] = tk_mma_kind; operands a, b[, c]. bf16·bf16 or f16·f16 in,
 * f32 row-layout accumulator out, owned like `a`.
 *   AB  : a M×K row, b K×N col  -> M×N      ABT : a M×K row, b N×K row
 *   ATB : a K×M col, b K×N col  -> M×N      ATBT: a K×M col, b N×K row
 * A warpgroup `a` (64·q rows) pairs with a warp-owned `b`: each warp of the
 * group multiplies its own row band by its own copy of b.
 * Interpreter: ops/mma_interp.c; lowering: ops/mma_nv.c (mma.sync m16n8k16). */
#include "ops/build.h"

static const char *kind_name(int64_t kd) {
    static const char *n[] = {"A*B", "A*B^T", "A^T*B", "A^T*B^T"};
    return kd >= 0 && kd <= 3 ? n[kd] : "?";
}

tk_status tk_rule_mma(tk_kernel *k, tk_op *op) {
    const tk_type *a = &op->opnds[0]->type, *b = &op->opnds[1]->type;
    int64_t kd = op->attr[0];
    char sa[64], sb[64];
    tk_type_str(a, sa, sizeof sa);
    tk_type_str(b, sb, sizeof sb);
    if (kd < TK_MMA_AB || kd > TK_MMA_ATBT)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "kind is %lld; expected a tk_mma_kind",
                         (long long)kd);
    if (a->kind != TK_KIND_TILE || b->kind != TK_KIND_TILE)
        return tk_opfail(k, op, TK_ERR_TYPE, "A is a %s, B is a %s: both must be register tiles",
                         sa, sb);
    if (a->dtype != b->dtype || (a->dtype != TK_BF16 && a->dtype != TK_F16))
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "A is a %s, B is a %s: inputs must both be bf16 or "
                         "both f16",
                         sa, sb);
    if (b->owner != TK_WARP)
        return tk_opfail(k, op, TK_ERR_TYPE, "B is a %s: B must be owned by a warp", sb);
    bool at = kd == TK_MMA_ATB || kd == TK_MMA_ATBT, bt = kd == TK_MMA_ABT || kd == TK_MMA_ATBT;
    tk_layout la = at ? TK_COL : TK_ROW, lb = bt ? TK_ROW : TK_COL;
    if (a->layout != la || b->layout != lb)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "%s needs A in %s layout and B in %s layout; A is a "
                         "%s, B is a %s",
                         kind_name(kd), la == TK_ROW ? "row" : "col", lb == TK_ROW ? "row" : "col",
                         sa, sb);
    int m = at ? a->cols : a->rows, ka = at ? a->rows : a->cols;
    int kb = bt ? b->cols : b->rows, n = bt ? b->rows : b->cols;
    if (ka != kb)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "%s: A is a %s, B is a %s: inner dimensions %d and "
                         "%d differ",
                         kind_name(kd), sa, sb, ka, kb);
    if (a->owner == TK_WARPGROUP && at)
        return tk_opfail(k, op, TK_ERR_TYPE, "a warpgroup A must not be transposed");
    tk_type r = tk_tile_type(TK_F32, m, n, a->owner, TK_ROW);
    if (tk_check_reg_type(k, op, &r)) return k->status;
    if (op->nopnds == 3) {
        const tk_type *c = &op->opnds[2]->type;
        if (!tk_type_eq(c, &r)) {
            char sc[64], sr[64];
            tk_type_str(c, sc, sizeof sc);
            tk_type_str(&r, sr, sizeof sr);
            return tk_opfail(k, op, TK_ERR_SHAPE, "C is a %s; %s of these operands makes a %s", sc,
                             kind_name(kd), sr);
        }
    }
    op->res[0]->type = r;
    return TK_OK;
}

tk_value *tk_mma(tk_kernel *k, tk_mma_kind kind, tk_value *a, tk_value *b, tk_value *c) {
    tk_value *v[3] = {a, b, c};
    tk_op *op = tk_build_op_attr(k, TK_OP_MMA, c ? 3 : 2, v, kind, 0, 0.0);
    return op ? op->res[0] : NULL;
}
