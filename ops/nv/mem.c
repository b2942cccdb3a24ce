/* Addressing for the memory lowering: shared-tile layouts and global views.
 *
 * Shared layouts (one stage; offsets in bytes, i32):
 *   PLAIN    (row * cols + col) * size
 *   PAD      (row * (cols + 16/size) + col) * size: rows padded by 16 bytes
 *   SWIZZLE  rows of n = cols*size/16 chunks of 16 bytes; chunk c of row r is
 *            stored at chunk c ^ ((r >> q) & (m - 1)), where m = min(8, the
 *            largest power of two dividing n) and q = log2(8 / n) when n < 8
 *            (several rows share one 128-byte bank line), else 0. Any 8
 *            consecutive rows then put a given logical chunk in 8 different
 *            16-byte bank groups, so ldmatrix (8 row addresses per phase, .trans
 *            too), cp.async 16-byte writes (8 consecutive chunks per phase) and
 *            16-bit register pair stores (rows g = 0..7) are free of bank conflicts
 *            whenever n is a power of two; a 16-byte chunk never straddles
 *            rows or gets split, so vector accesses stay contiguous.
 *            Rows wider than 128 bytes (a multiple of 128) are cut into
 *            128-byte column blocks stored one after the other, each
 *            rows x 128 bytes: byte b of row r sits in block b / 128 at
 *            r * 128 + (b % 128 ^ swizzle). That is the layout Hopper's copy
 *            engine writes with its 128-byte swizzle, one box per block
 *            (jit/plan.c); the accesses above stay conflict-free (each block
 *            row is a whole bank line).
 * Global views: a window (row0, col0) over the last two dims (or the last
 * one), leading indices fixed; all arithmetic is i64. */
#include "ops/nv/lower.h"

int32_t tk_smem_row_bytes(const tk_type *st) {
    return tk_smem_pitch(st) * (int32_t)tk_dtype_size(st->dtype);
}

/* Swizzle parameters (see above); *m == 1 means no swizzle. */
static void swizzle_params(const tk_type *st, int *qshift, int *m) {
    int rb = tk_smem_row_bytes(st), n = rb / 16;
    *qshift = 0;
    *m = 1;
    if (st->smem != TK_SMEM_SWIZZLE || rb % 16 || n == 0) return;
    while (*m < 8 && n % (*m * 2) == 0) (*m) *= 2;
    if (n < 8 && (n & (n - 1)) == 0)
        for (int q = 8 / n; q > 1; q /= 2) (*qshift)++;
}

/* Rows cut into 128-byte column blocks (see above). */
static bool blocked(const tk_type *st) {
    int rb = tk_smem_row_bytes(st);
    return st->smem == TK_SMEM_SWIZZLE && rb > 128 && rb % 128 == 0;
}

int32_t tk_smem_row_step(const tk_type *st) { return blocked(st) ? 128 : tk_smem_row_bytes(st); }

bool tk_smem_row_shift_ok(const tk_type *st, int drows) {
    int qshift, m;
    swizzle_params(st, &qshift, &m);
    return drows % (m << qshift) == 0;
}

LLVMValueRef tk_smem_off(tk_lower *L, const tk_type *st, LLVMValueRef row, LLVMValueRef col) {
    LLVMBuilderRef b = L->b;
    int32_t s = (int32_t)tk_dtype_size(st->dtype);
    int qshift, m;
    swizzle_params(st, &qshift, &m);
    row = tk_lw_to_i32(L, row);
    col = tk_lw_to_i32(L, col);
    if (m == 1) {
        LLVMValueRef e =
            LLVMBuildAdd(b, LLVMBuildMul(b, row, tk_lw_i32c(L, tk_smem_pitch(st)), ""), col, "");
        return LLVMBuildMul(b, e, tk_lw_i32c(L, s), "");
    }
    LLVMValueRef byte = LLVMBuildMul(b, col, tk_lw_i32c(L, s), "");
    LLVMValueRef x =
        LLVMBuildAnd(b, LLVMBuildLShr(b, row, tk_lw_i32c(L, qshift), ""), tk_lw_i32c(L, m - 1), "");
    /* chunk ^ x, kept at byte granularity: byte ^ (x << 4) */
    LLVMValueRef inrow = LLVMBuildXor(b, byte, LLVMBuildShl(b, x, tk_lw_i32c(L, 4), ""), "");
    LLVMValueRef roff = LLVMBuildMul(b, row, tk_lw_i32c(L, tk_smem_row_step(st)), "");
    if (blocked(st)) { /* block inrow / 128 starts rows * 128 bytes further on */
        LLVMValueRef blk = LLVMBuildLShr(b, inrow, tk_lw_i32c(L, 7), "");
        roff = LLVMBuildAdd(b, roff, LLVMBuildMul(b, blk, tk_lw_i32c(L, 128 * st->rows), ""), "");
        inrow = LLVMBuildAnd(b, inrow, tk_lw_i32c(L, 127), "");
    }
    return LLVMBuildAdd(b, roff, inrow, "");
}

LLVMValueRef tk_smem_addr(tk_lower *L, const tk_type *st, LLVMValueRef base, LLVMValueRef row,
                          LLVMValueRef col) {
    return tk_lw_gep(L, base, tk_smem_off(L, st, row, col));
}

/* (row + row_c, col + col_c) the plain way: the swizzle of the sums. */
static LLVMValueRef plain_addr(tk_lower *L, const tk_type *st, LLVMValueRef base, LLVMValueRef row,
                               int64_t row_c, LLVMValueRef col, int64_t col_c) {
    return tk_smem_addr(L, st, base, LLVMBuildAdd(L->b, row, tk_lw_i32c(L, row_c), ""),
                        LLVMBuildAdd(L->b, col, tk_lw_i32c(L, col_c), ""));
}

/* Address of (row + row_c, col + col_c), row_c / col_c compile-time, in a
 * form whose run-time part does not depend on them: with G = 16 * m (the
 * bytes the swizzle permutes within), the column bytes K = col_c * size
 * split into Kh = K - K % G and Kl = K % G, and when
 *   row_c % (m << q) == 0   the swizzle term of row + row_c is that of row,
 *   (col * size) & Kl == 0  adding Kl to the column bytes carries nothing,
 * the offset is off(row, col) ^ Kl + row_c * row_bytes + Kh (row_bytes is a
 * multiple of G, so the xor only touches the in-row chunk bits). For
 * ldmatrix in a k-loop, row and col are the lane's part plus the warp's
 * corner (loop-invariant) and row_c / col_c the k-step and subtile: each
 * (lane, k-step) address is one loop-invariant value plus the stage base
 * and an immediate, instead of the swizzle recomputed per k-tile. The
 * carry test is per lane; LLVM folds it from known bits when the corner is
 * aligned (a select against the plain form otherwise). */
LLVMValueRef tk_smem_addr_c(tk_lower *L, const tk_type *st, LLVMValueRef base, LLVMValueRef row,
                            int64_t row_c, LLVMValueRef col, int64_t col_c) {
    LLVMBuilderRef b = L->b;
    int qshift, m;
    swizzle_params(st, &qshift, &m);
    int64_t s = (int64_t)tk_dtype_size(st->dtype), g = 16 * (int64_t)m;
    row = tk_lw_to_i32(L, row);
    col = tk_lw_to_i32(L, col);
    if (m == 1 || col_c < 0 || row_c % ((int64_t)m << qshift)) /* col_c < 0: Kl < 0 */
        return plain_addr(L, st, base, row, row_c, col, col_c);
    int64_t kl = (col_c * s) % g, kh = col_c * s - kl;
    if (blocked(st)) /* g == 128: kh is whole column blocks */
        kh = kh / 128 * 128 * st->rows;
    LLVMValueRef off = LLVMBuildXor(b, tk_smem_off(L, st, row, col), tk_lw_i32c(L, kl), "");
    off = LLVMBuildAdd(b, off, tk_lw_i32c(L, row_c * tk_smem_row_step(st) + kh), "");
    LLVMValueRef split = tk_lw_gep(L, base, off);
    if (!kl) return split;
    LLVMValueRef cb = LLVMBuildMul(b, col, tk_lw_i32c(L, s), "");
    LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, cb, tk_lw_i32c(L, kl), ""),
                                    tk_lw_i32c(L, 0), "");
    return LLVMBuildSelect(b, ok, split, plain_addr(L, st, base, row, row_c, col, col_c), "");
}

/* ---- Global windows ------------------------------------------------------- */
/* 0 <= v < n as one unsigned compare. */
static LLVMValueRef in_range(tk_lower *L, LLVMValueRef v, LLVMValueRef n) {
    return LLVMBuildICmp(L->b, LLVMIntULT, v, n, "");
}

void tk_gwin_open(tk_lower *L, tk_gwin *w, const tk_value *view, tk_value *const *idx, int wdims) {
    tk_lv *lv = tk_lw_get(L, view);
    int r = view->type.rank;
    LLVMValueRef ix[4];
    for (int d = 0; d < r; d++) {
        tk_lv *iv = tk_lw_get(L, idx[d]);
        ix[d] = iv ? tk_lw_to_i64(L, iv->v[0]) : tk_lw_i64c(L, 0);
    }
    *w = (tk_gwin){.dt = view->type.dtype, .rank = r};
    if (!lv) return;
    LLVMValueRef *dims = lv->v + 1, *strides = lv->v + 1 + r;
    w->ptr = lv->v[0];
    w->base_off = tk_lw_i64c(L, 0);
    w->lead_ok = LLVMConstInt(L->i1, 1, 0);
    int nlead = r - wdims;
    for (int d = 0; d < nlead; d++) {
        w->base_off =
            LLVMBuildAdd(L->b, w->base_off, LLVMBuildMul(L->b, ix[d], strides[d], ""), "");
        w->lead_ok = LLVMBuildAnd(L->b, w->lead_ok, in_range(L, ix[d], dims[d]), "");
    }
    w->col0 = ix[r - 1];
    w->cols = dims[r - 1];
    w->scol = strides[r - 1];
    if (wdims == 2) {
        w->row0 = ix[r - 2];
        w->rows = dims[r - 2];
        w->srow = strides[r - 2];
    } else { /* one row */
        w->row0 = tk_lw_i64c(L, 0);
        w->rows = tk_lw_i64c(L, 1);
        w->srow = tk_lw_i64c(L, 0);
    }
}

LLVMValueRef tk_gwin_addr(tk_lower *L, const tk_gwin *w, LLVMValueRef r, LLVMValueRef c) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef row = LLVMBuildAdd(b, w->row0, tk_lw_to_i64(L, r), "");
    LLVMValueRef col = LLVMBuildAdd(b, w->col0, tk_lw_to_i64(L, c), "");
    LLVMValueRef off = LLVMBuildAdd(b, w->base_off, LLVMBuildMul(b, row, w->srow, ""), "");
    off = LLVMBuildAdd(b, off, LLVMBuildMul(b, col, w->scol, ""), "");
    off = LLVMBuildMul(b, off, tk_lw_i64c(L, (int64_t)tk_dtype_size(w->dt)), "");
    return tk_lw_gep(L, w->ptr, off);
}

LLVMValueRef tk_gwin_inb(tk_lower *L, const tk_gwin *w, LLVMValueRef r, LLVMValueRef c) {
    LLVMValueRef row = LLVMBuildAdd(L->b, w->row0, tk_lw_to_i64(L, r), "");
    LLVMValueRef col = LLVMBuildAdd(L->b, w->col0, tk_lw_to_i64(L, c), "");
    LLVMValueRef ok = LLVMBuildAnd(L->b, in_range(L, row, w->rows), in_range(L, col, w->cols), "");
    return LLVMBuildAnd(L->b, ok, w->lead_ok, "");
}

/* 0 <= v0 && v0 + n <= dim */
static LLVMValueRef span_ok(tk_lower *L, LLVMValueRef v0, int n, LLVMValueRef dim) {
    LLVMValueRef lo = LLVMBuildICmp(L->b, LLVMIntSGE, v0, tk_lw_i64c(L, 0), "");
    LLVMValueRef end = LLVMBuildAdd(L->b, v0, tk_lw_i64c(L, n), "");
    return LLVMBuildAnd(L->b, lo, LLVMBuildICmp(L->b, LLVMIntSLE, end, dim, ""), "");
}

LLVMValueRef tk_gwin_all_inb(tk_lower *L, const tk_gwin *w, int rows, int cols) {
    LLVMValueRef ok = LLVMBuildAnd(L->b, span_ok(L, w->row0, rows, w->rows),
                                   span_ok(L, w->col0, cols, w->cols), "");
    return LLVMBuildAnd(L->b, ok, w->lead_ok, "");
}

/* Rows start on `bytes` boundaries: unit column stride and every term of
 * the start address ptr + (base_off + row0*srow + col0)*size a multiple of
 * `bytes` (a power of two), the row pitch included. Testing the terms one by
 * one is (slightly) stricter than testing their sum, but all terms except
 * col0 depend only on the view and the leading indices, so LICM hoists their
 * test out of a k-loop and a copy per trip costs one and + compare. */
LLVMValueRef tk_gwin_aligned(tk_lower *L, const tk_gwin *w, int bytes) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef s = tk_lw_i64c(L, (int64_t)tk_dtype_size(w->dt));
    LLVMValueRef unit = LLVMBuildICmp(b, LLVMIntEQ, w->scol, tk_lw_i64c(L, 1), "");
    LLVMValueRef inv = LLVMBuildOr(b, LLVMBuildPtrToInt(b, w->ptr, L->i64, ""),
                                   LLVMBuildMul(b, w->srow, s, ""), "");
    inv = LLVMBuildOr(b, inv, LLVMBuildMul(b, w->base_off, s, ""), "");
    LLVMValueRef mask = tk_lw_i64c(L, bytes - 1), zero = tk_lw_i64c(L, 0);
    LLVMValueRef inv_ok = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, inv, mask, ""), zero, "");
    LLVMValueRef col = LLVMBuildAnd(b, LLVMBuildMul(b, w->col0, s, ""), mask, "");
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildAnd(b, inv_ok, unit, ""),
                                   LLVMBuildICmp(b, LLVMIntEQ, col, zero, ""), "");
    return ok;
}
