/* Interpreter semantics of reductions and masks (ops/reduce.c).
 *
 * ROW_* fold each row over its columns, COL_* each column over its rows, in
 * ascending index order, accumulating in float; the result is rounded to the
 * tile's dtype once (the lowering must likewise accumulate bf16/f16 tiles in
 * f32). MAX ignores NaN elements like fmaxf / PTX max.f32. MAX_ALL folds
 * what each warp holds (a warp's whole value; of a warpgroup tile or PER_ROW
 * vector the rows r with r % 64 / 16 == warp % 4) and gives every lane of
 * that warp the f32 result.
 * MASK replaces dropped elements by `fill` rounded to the tile's dtype; row
 * and column indices are those of the owner's whole tile (for a warpgroup
 * tile, rows 0..R-1 of the group). */
#include <math.h>

#include "ops/interp.h"

static void reduce_instance(const tk_op *op, const float *t, int rows, int cols, float *out,
                            tk_dtype dt) {
    bool by_row = op->opc == TK_OP_ROW_MAX || op->opc == TK_OP_ROW_SUM;
    bool is_max = op->opc == TK_OP_ROW_MAX || op->opc == TK_OP_COL_MAX;
    int n = by_row ? rows : cols, len = by_row ? cols : rows;
    size_t step = by_row ? 1 : (size_t)cols;
    for (int v = 0; v < n; v++) {
        const float *p = by_row ? t + (size_t)v * (size_t)cols : t + v;
        float acc = p[0];
        for (int e = 1; e < len; e++) acc = is_max ? fmaxf(acc, p[e * step]) : acc + p[e * step];
        out[v] = tk_interp_round(dt, acc);
    }
}

/* a + i without overflow (saturating); i is a small tile index. */
static int64_t sat_add(int64_t a, int64_t i) {
    int64_t r;
    if (!__builtin_add_overflow(a, i, &r)) return r;
    return i > 0 ? INT64_MAX : INT64_MIN;
}

static bool dropped(tk_mask_kind kind, int64_t a, int64_t b, int i, int j) {
    switch (kind) {
    case TK_MASK_CAUSAL: return sat_add(b, j) > sat_add(a, i);
    case TK_MASK_COLS: return sat_add(a, j) >= b;
    default: return sat_add(a, i) >= b;
    }
}

static void mask_instance(tk_interp *I, const tk_op *op, int inst) {
    const tk_type *t = &op->opnds[0]->type;
    int th = tk_interp_inst_thread(I, t->owner, inst);
    int64_t a = tk_interp_sv(I, op->opnds[1])[th].i, b = tk_interp_sv(I, op->opnds[2])[th].i;
    float fill = tk_interp_round(t->dtype, (float)op->fattr);
    const float *src = tk_interp_tile(I, op->opnds[0], inst);
    float *dst = tk_interp_tile(I, op->res[0], inst);
    for (int i = 0; i < t->rows; i++)
        for (int j = 0; j < t->cols; j++) {
            size_t e = (size_t)i * (size_t)t->cols + (size_t)j;
            dst[e] = dropped((tk_mask_kind)op->attr[0], a, b, i, j) ? fill : src[e];
        }
}

/* Each warp's max over the elements it holds: a warp instance's all, a
 * warpgroup's band of rows (tk_interp_banded; its every row otherwise). */
static void max_all_instance(tk_interp *I, const tk_op *op, int inst) {
    const tk_type *t = &op->opnds[0]->type;
    const float *x = tk_interp_tile(I, op->opnds[0], inst);
    size_t n = tk_interp_elems(t), per = n / (size_t)t->rows;
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    uint32_t warps = tk_interp_inst_warps(t->owner, inst);
    for (int w = 0; w < 32; w++) {
        if (!((warps >> w) & 1u)) continue;
        float acc = -INFINITY;
        bool any = false;
        for (size_t e = 0; e < n; e++) {
            if (!tk_interp_row_live(1u << w, t, inst, (int)(e / per))) continue;
            acc = any ? fmaxf(acc, x[e]) : x[e];
            any = true;
        }
        for (int lane = 0; lane < 32; lane++) r[32 * w + lane].f = acc;
    }
}

tk_status tk_interp_reduce(tk_interp *I, const tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    for (int i = 0; i < tk_interp_ninst(I, t->owner); i++) {
        if (!tk_interp_inst_active(I, t->owner, i)) continue;
        if (op->opc == TK_OP_MAX_ALL)
            max_all_instance(I, op, i);
        else if (op->opc == TK_OP_MASK)
            mask_instance(I, op, i);
        else
            reduce_instance(op, tk_interp_tile(I, op->opnds[0], i), t->rows, t->cols,
                            tk_interp_tile(I, op->res[0], i), t->dtype);
    }
    return TK_OK;
}
