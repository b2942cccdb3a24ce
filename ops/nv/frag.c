/* Fragment layouts: which tile / vector elements a thread holds, and where.
 *
 * Warp tile R x C, lane l, g = l/4, t = l%4, 16x16 subtiles (I, J), 8
 * elements e per subtile:
 *   ROW: row = 16I + g + 8*((e>>1)&1), col = 16J + 2t + (e&1) + 8*(e>>2)
 *   COL: row = 16I + 2t + (e&1) + 8*(e>>2), col = 16J + g + 8*((e>>1)&1)
 * (the mma.m16n8k16 A / accumulator layout and its transpose). A warpgroup
 * tile (ROW) gives warp w = warp%4 the local subtile rows I = 0..R/64-1 at
 * global rows 64I + 16w + ..., i.e. the lane part of the row gains 16w.
 *
 * A tile element's row splits into a "row part" index and its column into a
 * "col part" index: ROW layout: row part h = (e>>1)&1 (2 values per subtile,
 * rows g, g+8), col part k = (e&1)|((e>>2)<<1) (4 values, cols 2t+{0,1,8,9});
 * COL layout swaps the two. A PER_ROW vector holds, per row subtile, one slot
 * per row part; a PER_COL vector one per col part. */
#include "ops/nv/lower.h"

static bool wg(const tk_type *t) { return t->owner == TK_WARPGROUP; }

int tk_frag_subrows(const tk_type *t) { return wg(t) ? t->rows / 64 : t->rows / 16; }
int tk_frag_subcols(const tk_type *t) { return t->cols / 16; }

/* Slots per subtile of a vector: 2 when its lane part is g, 4 when 2t. */
int tk_vec_per_sub(const tk_type *vt) {
    bool rows = vt->axis == TK_PER_ROW, rowl = vt->layout == TK_ROW;
    return rows == rowl ? 2 : 4;
}

static int vec_subs(const tk_type *vt) {
    return vt->axis == TK_PER_ROW && wg(vt) ? vt->rows / 64 : vt->rows / 16;
}

int tk_frag_count(const tk_type *t) {
    switch (t->kind) {
    case TK_KIND_TILE: return tk_frag_subrows(t) * tk_frag_subcols(t) * 8;
    case TK_KIND_VEC: return vec_subs(t) * tk_vec_per_sub(t);
    default: return 1;
    }
}

static int part2(int e) { return (e >> 1) & 1; }              /* g, g+8        */
static int part4(int e) { return (e & 1) | ((e >> 2) << 1); } /* 2t+{0,1,8,9}  */
static int off2(int k) { return 8 * k; }
static int off4(int k) { return (k & 1) + 8 * (k >> 1); }

void tk_frag_pos(const tk_type *t, int idx, int *row_c, int *col_c) {
    int e = idx % 8, s = idx / 8, nj = tk_frag_subcols(t);
    int I = s / nj, J = s % nj;
    int r0 = wg(t) ? 64 * I : 16 * I, c0 = 16 * J;
    if (t->layout == TK_COL) {
        *row_c = r0 + off4(part4(e));
        *col_c = c0 + off2(part2(e));
    } else {
        *row_c = r0 + off2(part2(e));
        *col_c = c0 + off4(part4(e));
    }
}

static LLVMValueRef two_t(tk_lower *L) { return LLVMBuildShl(L->b, L->t, tk_lw_i32c(L, 1), ""); }

/* 16 * (warp % 4): a warpgroup warp's row band. */
static LLVMValueRef wg_rows(tk_lower *L) {
    return LLVMBuildShl(L->b, L->wg_warp, tk_lw_i32c(L, 4), "");
}

LLVMValueRef tk_frag_lane_row(tk_lower *L, const tk_type *t) {
    LLVMValueRef r = t->layout == TK_COL ? two_t(L) : L->g;
    return wg(t) ? LLVMBuildAdd(L->b, r, wg_rows(L), "") : r;
}

LLVMValueRef tk_frag_lane_col(tk_lower *L, const tk_type *t) {
    return t->layout == TK_COL ? L->g : two_t(L);
}

int tk_vec_pos(const tk_type *vt, int idx) {
    int per = tk_vec_per_sub(vt), sub = idx / per, k = idx % per;
    int base = vt->axis == TK_PER_ROW && wg(vt) ? 64 * sub : 16 * sub;
    return base + (per == 2 ? off2(k) : off4(k));
}

LLVMValueRef tk_vec_lane(tk_lower *L, const tk_type *vt) {
    LLVMValueRef r = tk_vec_per_sub(vt) == 2 ? L->g : two_t(L);
    if (vt->axis == TK_PER_ROW && wg(vt)) r = LLVMBuildAdd(L->b, r, wg_rows(L), "");
    return r;
}

int tk_frag_vec_index(const tk_type *t, tk_axis axis, int idx) {
    int e = idx % 8, s = idx / 8, nj = tk_frag_subcols(t);
    int I = s / nj, J = s % nj;
    bool row = t->layout != TK_COL;
    if (axis == TK_PER_ROW) return row ? I * 2 + part2(e) : I * 4 + part4(e);
    return row ? J * 4 + part4(e) : J * 2 + part2(e);
}

/* Copies of a vector slot: with lane part g the 4 lanes t = 0..3 agree (t == 0
 * writes); with lane part 2t the 8 lanes g = 0..7 agree (g == 0 writes). A
 * warpgroup PER_COL vector is the same in all 4 warps (warp%4 == 0 writes). */
LLVMValueRef tk_vec_writer(tk_lower *L, const tk_type *vt) {
    LLVMValueRef zero = tk_lw_i32c(L, 0);
    LLVMValueRef who = tk_vec_per_sub(vt) == 2 ? L->t : L->g;
    LLVMValueRef ok = LLVMBuildICmp(L->b, LLVMIntEQ, who, zero, "");
    if (vt->axis == TK_PER_COL && wg(vt))
        ok = LLVMBuildAnd(L->b, ok, LLVMBuildICmp(L->b, LLVMIntEQ, L->wg_warp, zero, ""), "");
    return ok;
}
