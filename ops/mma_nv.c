/* Lowering of MMA (rule: ops/mma.c) to mma.sync.aligned.m16n8k16 with f32
 * accumulators. Register contract (docs/LOWERING.md):
 *   A 16x16 subtile, ROW layout: a0..a3 = packed (e0,e1) (e2,e3) (e4,e5) (e6,e7)
 *     - exactly the PTX A fragment (rows g / g+8, cols 2t.. / 2t+8..).
 *     A COL tile of shape KxM holds, per thread, the same registers as the ROW
 *     tile of its transpose, so A^T uses the same packing with the subtile
 *     index transposed: A^T subtile (m, k) = stored subtile (k, m).
 *   B for n-half h (8 columns of the 16x16 output subtile):
 *     h = 0: (e0,e1) (e4,e5);  h = 1: (e2,e3) (e6,e7)
 *     for B given as a COL tile KxN (subtile (k, n)) and for B^T given as a
 *     ROW tile NxK (subtile (n, k)) alike.
 *   C/D 16x16 subtile = two m16n8 accumulators: h = 0 -> e0..e3, h = 1 -> e4..e7.
 * A warpgroup A is each warp's own row band (local subtile rows), B is the
 * warp's own copy, so the per-warp code is the same. */
#include "ops/lower_walk.h"

/* Two 16-bit elements in one 32-bit register, the first in the low half. */
static LLVMValueRef pack(tk_lower *L, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), 2);
    LLVMValueRef v = LLVMGetPoison(vt);
    v = LLVMBuildInsertElement(L->b, v, x, tk_lw_i32c(L, 0), "");
    return LLVMBuildInsertElement(L->b, v, y, tk_lw_i32c(L, 1), "");
}

/* First element index of subtile (I, J) of tile t. */
static int sub_base(const tk_type *t, int I, int J) { return (I * tk_frag_subcols(t) + J) * 8; }

static void a_regs(tk_lower *L, const tk_type *t, const tk_lv *a, int mi, int ki,
                   LLVMValueRef out[4]) {
    int base = t->layout == TK_COL ? sub_base(t, ki, mi) : sub_base(t, mi, ki);
    for (int p = 0; p < 4; p++) out[p] = pack(L, a->v[base + 2 * p], a->v[base + 2 * p + 1]);
}

static void b_regs(tk_lower *L, const tk_type *t, const tk_lv *b, int ki, int ni, int h,
                   LLVMValueRef out[2]) {
    int base = t->layout == TK_COL ? sub_base(t, ki, ni) : sub_base(t, ni, ki);
    out[0] = pack(L, b->v[base + 2 * h], b->v[base + 2 * h + 1]);
    out[1] = pack(L, b->v[base + 4 + 2 * h], b->v[base + 5 + 2 * h]);
}

/* One m16n8k16: acc[0..3] += A * B (acc updated in place). */
static void mma1(tk_lower *L, const char *name, LLVMValueRef a[4], LLVMValueRef b[2],
                 LLVMValueRef acc[4]) {
    LLVMValueRef args[10] = {a[0], a[1], a[2], a[3], b[0], b[1], acc[0], acc[1], acc[2], acc[3]};
    LLVMValueRef r = tk_lw_intrin(L, name, NULL, 0, args, 10);
    for (unsigned i = 0; i < 4; i++) acc[i] = LLVMBuildExtractValue(L->b, r, i, "");
}

tk_status tk_lower_mma(tk_lower *L, const tk_op *op) {
    const tk_type *at = &op->opnds[0]->type, *bt = &op->opnds[1]->type;
    const tk_type *ct = &op->res[0]->type;
    tk_lv *a = tk_lw_get(L, op->opnds[0]), *b = tk_lw_get(L, op->opnds[1]);
    tk_lv *c = op->nopnds > 2 ? tk_lw_get(L, op->opnds[2]) : NULL;
    tk_lv *d = tk_lw_def(L, op->res[0], tk_frag_count(ct));
    if (!a || !b || !d || (op->nopnds > 2 && !c)) return L->dg->st;
    /* bf16 has one spelling; f16 names its D and C types (both f32 here). */
    const char *name = at->dtype == TK_BF16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
                                            : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
    int nk = (at->layout == TK_COL ? at->rows : at->cols) / 16;
    for (int mi = 0; mi < tk_frag_subrows(ct); mi++) {
        for (int ni = 0; ni < tk_frag_subcols(ct); ni++) {
            int base = sub_base(ct, mi, ni);
            LLVMValueRef acc[8];
            for (int e = 0; e < 8; e++) acc[e] = c ? c->v[base + e] : LLVMConstReal(L->f32, 0);
            for (int ki = 0; ki < nk; ki++) {
                LLVMValueRef ar[4], br[2];
                a_regs(L, at, a, mi, ki, ar);
                for (int h = 0; h < 2; h++) {
                    b_regs(L, bt, b, ki, ni, h, br);
                    mma1(L, name, ar, br, acc + 4 * h);
                }
            }
            for (int e = 0; e < 8; e++) d->v[base + e] = acc[e];
        }
    }
    return L->dg->st;
}
