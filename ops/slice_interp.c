/* Interpreter semantics of SLICE, CONCAT, PAIR_SWAP, IOTA and COL_BCAST (ops/slice.c):
 * copies of logical elements, per owner instance (a tile is rows x cols,
 * row-major; cols is even, so element e's pair partner is e ^ 1). */
#include <string.h>

#include "ops/interp.h"

/* Copies the rows x cols block of src (pitch sp) at (r0, c0) to dst
 * (pitch dp) at (d0, e0). */
static void block(float *dst, int dp, int d0, int e0, const float *src, int sp, int r0, int c0,
                  int rows, int cols) {
    for (int i = 0; i < rows; i++)
        memcpy(dst + (size_t)(d0 + i) * dp + e0, src + (size_t)(r0 + i) * sp + c0,
               sizeof(float) * (size_t)cols);
}

/* PAIR_SWAP, IOTA and COL_BCAST of one instance; rows x cols (a vector: 1 x
 * len). */
static void run_pairs(tk_interp *I, const tk_op *op, int inst) {
    const tk_type *rt = &op->res[0]->type;
    bool tile = rt->kind == TK_KIND_TILE;
    int rows = tile ? rt->rows : 1, cols = tile ? rt->cols : rt->rows;
    float *d = tk_interp_tile(I, op->res[0], inst);
    if (op->opc == TK_OP_IOTA) {
        bool by_row = op->attr[0] == TK_PER_ROW && tile;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) d[(size_t)i * cols + j] = (float)(by_row ? i : j);
        return;
    }
    const float *x = tk_interp_tile(I, op->opnds[0], inst);
    if (op->opc == TK_OP_COL_BCAST) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                d[(size_t)i * cols + j] = x[(size_t)i * cols + (size_t)op->attr[0]];
        return;
    }
    for (size_t e = 0; e < (size_t)rows * (size_t)cols; e++) d[e] = x[e ^ 1u];
}

static void run_instance(tk_interp *I, const tk_op *op, int inst) {
    if (op->opc == TK_OP_PAIR_SWAP || op->opc == TK_OP_IOTA || op->opc == TK_OP_COL_BCAST) {
        run_pairs(I, op, inst);
        return;
    }
    const tk_type *rt = &op->res[0]->type, *a = &op->opnds[0]->type;
    float *d = tk_interp_tile(I, op->res[0], inst);
    const float *x = tk_interp_tile(I, op->opnds[0], inst);
    if (op->opc == TK_OP_SLICE) {
        block(d, rt->cols, 0, 0, x, a->cols, (int)op->attr[0], (int)op->attr[1], rt->rows,
              rt->cols);
        return;
    }
    const tk_type *b = &op->opnds[1]->type;
    const float *y = tk_interp_tile(I, op->opnds[1], inst);
    bool below = op->attr[0] == 0;
    block(d, rt->cols, 0, 0, x, a->cols, 0, 0, a->rows, a->cols);
    block(d, rt->cols, below ? a->rows : 0, below ? 0 : a->cols, y, b->cols, 0, 0, b->rows,
          b->cols);
}

tk_status tk_interp_slice(tk_interp *I, const tk_op *op) {
    const tk_type *rt = &op->res[0]->type;
    for (int i = 0; i < tk_interp_ninst(I, rt->owner); i++)
        if (tk_interp_inst_active(I, rt->owner, i)) run_instance(I, op, i);
    return TK_OK;
}
