/* Lowering of SLICE, CONCAT, PAIR_SWAP, IOTA and COL_BCAST (rules: ops/slice.c).
 *
 * A thread holds 8 slots per 16x16 subtile (I, J), slot (I * subcols + J) *
 * 8 + e (ops/nv/frag.c), and which element slot e of a subtile is depends
 * only on the lane and the layout. Slices and joins cut and paste whole
 * subtiles of one layout (a warpgroup tile's row subtiles are 64 rows
 * apart, and its offsets multiples of 64), so each result slot is an
 * operand slot: the ops emit no instructions. */
#include "ops/lower_walk.h"

/* Copies operand subtiles [i0, i0 + ni) x [j0, j0 + nj) of src (type st) to
 * result subtiles starting at (di, dj) of r (type rt). */
static void paste(tk_lv *r, const tk_type *rt, int di, int dj, const tk_lv *src, const tk_type *st,
                  int i0, int j0, int ni, int nj) {
    int rc = tk_frag_subcols(rt), sc = tk_frag_subcols(st);
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++)
            for (int e = 0; e < 8; e++)
                r->v[((di + i) * rc + dj + j) * 8 + e] = src->v[((i0 + i) * sc + j0 + j) * 8 + e];
}

/* IOTA: a slot's index is its compile-time position plus the lane's part;
 * PAIR_SWAP: in the ROW layout (and its PER_COL vectors) slot e ^ 1 holds
 * the other column of e's pair in the same thread. */
static tk_status lower_pairs(tk_lower *L, const tk_op *op) {
    const tk_type *rt = &op->res[0]->type;
    int n = tk_frag_count(rt);
    tk_lv *r = tk_lw_def(L, op->res[0], n);
    if (!r) return L->dg->st;
    if (op->opc == TK_OP_PAIR_SWAP) {
        tk_lv *x = tk_lw_get(L, op->opnds[0]);
        if (!x) return L->dg->st;
        for (int i = 0; i < n; i++) r->v[i] = x->v[i ^ 1];
        return TK_OK;
    }
    bool tile = rt->kind == TK_KIND_TILE, by_row = op->attr[0] == TK_PER_ROW;
    LLVMValueRef lane = !tile    ? tk_vec_lane(L, rt)
                        : by_row ? tk_frag_lane_row(L, rt)
                                 : tk_frag_lane_col(L, rt);
    for (int i = 0; i < n; i++) {
        int row_c, col_c;
        if (tile)
            tk_frag_pos(rt, i, &row_c, &col_c);
        else
            row_c = col_c = tk_vec_pos(rt, i);
        LLVMValueRef idx = LLVMBuildAdd(L->b, lane, tk_lw_i32c(L, by_row ? row_c : col_c), "");
        r->v[i] = LLVMBuildUIToFP(L->b, idx, L->f32, "iota");
    }
    return TK_OK;
}

/* COL_BCAST, ROW layout (ops/nv/frag.c): column c = 16J + 2t + (e&1) +
 * 8(e>>2) of row g + 8h sits in lane 4g + t, so for each row part h the
 * column's value is one shuffle from lane 4g + ((c%8)/2) in the same quad,
 * slot (c%2) | h<<1 | ((c%16)/8)<<2 of subtile (I, c/16); every slot of row
 * part h then holds it. */
static tk_status lower_col_bcast(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->res[0]->type;
    int c = (int)op->attr[0], nj = tk_frag_subcols(t), cc = c % 16;
    tk_lv *x = tk_lw_get(L, op->opnds[0]);
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(t));
    if (!x || !r) return L->dg->st;
    LLVMValueRef quad = LLVMBuildShl(L->b, L->g, tk_lw_i32c(L, 2), "");
    LLVMValueRef src = LLVMBuildAdd(L->b, quad, tk_lw_i32c(L, (cc % 8) / 2), "");
    for (int I = 0; I < tk_frag_subrows(t); I++)
        for (int h = 0; h < 2; h++) {
            int e = (cc % 2) | h << 1 | (cc / 8) << 2;
            LLVMValueRef a[4] = {tk_lw_i32c(L, -1), x->v[(I * nj + c / 16) * 8 + e], src,
                                 tk_lw_i32c(L, 0x1f)};
            LLVMValueRef v = tk_lw_intrin(L, "llvm.nvvm.shfl.sync.idx.f32", NULL, 0, a, 4);
            for (int J = 0; J < nj; J++)
                for (int f = 0; f < 8; f++)
                    if (((f >> 1) & 1) == h) r->v[(I * nj + J) * 8 + f] = v;
        }
    return TK_OK;
}

tk_status tk_lower_slice(tk_lower *L, const tk_op *op) {
    if (op->opc == TK_OP_PAIR_SWAP || op->opc == TK_OP_IOTA) return lower_pairs(L, op);
    if (op->opc == TK_OP_COL_BCAST) return lower_col_bcast(L, op);
    const tk_type *rt = &op->res[0]->type, *a = &op->opnds[0]->type;
    tk_lv *x = tk_lw_get(L, op->opnds[0]);
    if (!x) return L->dg->st;
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(rt));
    if (!r) return L->dg->st;
    int ni = tk_frag_subrows(rt), nj = tk_frag_subcols(rt);
    if (op->opc == TK_OP_SLICE) {
        int rq = rt->owner == TK_WARPGROUP ? 64 : 16;
        paste(r, rt, 0, 0, x, a, (int)op->attr[0] / rq, (int)op->attr[1] / 16, ni, nj);
        return TK_OK;
    }
    const tk_type *b = &op->opnds[1]->type;
    tk_lv *y = tk_lw_get(L, op->opnds[1]);
    if (!y) return L->dg->st;
    int ai = tk_frag_subrows(a), aj = tk_frag_subcols(a);
    paste(r, rt, 0, 0, x, a, 0, 0, ai, aj);
    if (op->attr[0] == 0)
        paste(r, rt, ai, 0, y, b, 0, 0, tk_frag_subrows(b), tk_frag_subcols(b));
    else
        paste(r, rt, 0, aj, y, b, 0, 0, tk_frag_subrows(b), tk_frag_subcols(b));
    return TK_OK;
}
