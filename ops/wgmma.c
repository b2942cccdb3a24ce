/* Hopper's warpgroup matrix multiply (rule and builder calls; include/tk/tk.h
 * says what the calls mean).
 *
 * WGMMA      attr[0] = tk_mma_kind; operands acc, a, b[, a_row].
 *            The result has acc's type: an f32 ROW tile of a warpgroup,
 *            64q x N. a is a 64q x K register tile of the warpgroup (no
 *            a_row) or a shared tile with K columns (a_row picks its rows);
 *            with ATB/ATBT, a shared tile K x M' stored M-major (the
 *            descriptor's transpose bit for A), whose columns a_row ..
 *            a_row + 64q - 1 are A's rows: 128-byte swizzle rows, a_row a
 *            multiple of 64 (a whole column block). b is a shared tile,
 *            K x N (AB, ATB: N-major, the transpose bit for B) or N x K
 *            (ABT, ATBT: K-major).
 * WGMMA_WAIT attr[0] = groups that may stay in flight; acc in, acc out;
 *            an optional second operand `after` (tk_wgmma_wait_after), a
 *            register value the wait is issued after: an order for the
 *            machine code only (the lowering pins the wait behind a store
 *            of it), no change to what the wait returns.
 * What a shared operand must be is what a 64-bit matrix descriptor can
 * describe (ops/wgmma_nv.c): a SWIZZLE tile (tk_smem_swizzle_bytes names
 * the hardware swizzle), at an offset aligned to its 8-row swizzle atom so
 * the pattern starts where the hardware's does. Every such violation is a
 * build-time error here, never a bad descriptor at run time; so is a
 * constant a_row off the 8-row grid (a run-time a_row is the caller's to
 * keep there; the interpreter checks it). Reading a WGMMA result other
 * than through its tk_wgmma_wait is the verifier's error (ir/verify.c,
 * check_in_flight).
 * Interpreter: ops/wgmma_interp.c; lowering: ops/wgmma_nv.c (sm_90a). */
#include "ir/abi.h"
#include "ops/build.h"

static tk_status fail_type(tk_kernel *k, tk_op *op, const char *what, const tk_type *t,
                           const char *need) {
    char s[64];
    tk_type_str(t, s, sizeof s);
    return tk_opfail(k, op, TK_ERR_TYPE, "%s is a %s; %s", what, s, need);
}

/* A shared operand: dtype, rows x cols, and a layout a descriptor names. */
static tk_status check_shared(tk_kernel *k, tk_op *op, const char *what, const tk_value *v,
                              tk_dtype dt, int rows, int cols) {
    const tk_type *t = &v->type;
    if (t->kind != TK_KIND_SMEM) return fail_type(k, op, what, t, "expected a shared tile");
    if (t->dtype != dt) return fail_type(k, op, what, t, "its dtype must match A's");
    if ((rows && t->rows < rows) || (cols && t->cols != cols)) {
        char s[64];
        tk_type_str(t, s, sizeof s);
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "%s is a %s; this multiply needs %s%d rows and "
                         "%d columns",
                         what, s, cols ? "" : "at least ", rows, cols ? cols : t->cols);
    }
    int sw = tk_smem_swizzle_bytes(t);
    if (!sw)
        return fail_type(k, op, what, t,
                         "wgmma reads SWIZZLE shared tiles with rows of 32, 64 "
                         "or a multiple of 128 bytes");
    const tk_op *sh = tk_smem_alloc_of(v);
    if (!sh)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "%s must be a tk_shared tile or a tk_stage "
                         "of one (its offset must be known)",
                         what);
    size_t atom = 8 * (size_t)sw;
    if (tk_smem_offset(sh) % atom || tk_smem_stage_bytes(t) % atom)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "%s lies at shared offset %zu with %zu-byte "
                         "stages; its %d-byte swizzle needs both to be multiples of %zu "
                         "(allocate wgmma's tiles first)",
                         what, tk_smem_offset(sh), tk_smem_stage_bytes(t), sw, atom);
    return TK_OK;
}

/* A's first row (a_row) of a non-transposed shared A, or first column of
 * a transposed one: a constant is checked here, a run-time one by the
 * interpreter. Rows: a multiple of 8 (the descriptor's core matrices
 * start there); columns: of 64 (a 128-byte column block). */
static tk_status check_a_off(tk_kernel *k, tk_op *op, const tk_type *a, int m, bool at) {
    const tk_type *r = &op->opnds[3]->type;
    if (r->kind != TK_KIND_SCALAR || !tk_dtype_is_int(r->dtype))
        return fail_type(k, op, "a_row", r, "expected an i32 or i64 scalar");
    const tk_op *d = op->opnds[3]->def;
    int64_t r0 = d && d->opc == TK_OP_CONST ? d->attr[0] : 0;
    int grid = at ? 64 : 8, extent = at ? a->cols : a->rows;
    if (r0 % grid || r0 < 0 || r0 > extent - m)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "a_row is %lld; A's %d %s from there must lie inside its %d-%s "
                         "shared tile, starting at a multiple of %d",
                         (long long)r0, m, at ? "columns" : "rows", extent, at ? "column" : "row",
                         grid);
    return TK_OK;
}

static tk_status rule_a(tk_kernel *k, tk_op *op, const tk_type *acc, bool at) {
    const tk_type *a = &op->opnds[1]->type;
    bool reg = a->kind == TK_KIND_TILE, has_row = op->nopnds > 3;
    if (reg) {
        if (at)
            return fail_type(k, op, "A", a,
                             "a transposed A (TK_MMA_ATB, TK_MMA_ATBT) is read from a "
                             "shared tile");
        if (a->owner != TK_WARPGROUP || a->layout != TK_ROW || a->rows != acc->rows)
            return fail_type(k, op, "A", a,
                             "a register A must be a row tile of the "
                             "warpgroup with acc's rows");
        if (has_row)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                             "a_row is given, but A is a register "
                             "tile (a_row picks rows of a shared A)");
        return TK_OK;
    }
    if (!has_row)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "A is a shared tile: a_row (its first %s) is required",
                         at ? "column" : "row");
    tk_status s = check_shared(k, op, "A", op->opnds[1], a->dtype, at ? 0 : acc->rows, 0);
    if (s) return s;
    if (at && tk_smem_swizzle_bytes(a) != 128)
        return fail_type(k, op, "A", a,
                         "a transposed A needs rows of a multiple of 128 bytes (each "
                         "64-row block of acc reads one 128-byte column block)");
    return check_a_off(k, op, a, acc->rows, at);
}

static tk_status rule_wgmma(tk_kernel *k, tk_op *op) {
    const tk_type *acc = &op->opnds[0]->type, *a = &op->opnds[1]->type;
    int64_t kd = op->attr[0];
    if (kd < TK_MMA_AB || kd > TK_MMA_ATBT)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "kind is %lld; expected a tk_mma_kind (TK_MMA_AB .. TK_MMA_ATBT)",
                         (long long)kd);
    if (acc->kind != TK_KIND_TILE || acc->dtype != TK_F32 || acc->owner != TK_WARPGROUP ||
        acc->layout != TK_ROW || acc->rows % 64 || acc->cols > 256)
        return fail_type(k, op, "acc", acc,
                         "expected an f32 row tile owned by a warpgroup, "
                         "64q x N with N <= 256");
    tk_dtype dt = a->dtype;
    if (dt != TK_BF16 && dt != TK_F16)
        return fail_type(k, op, "A", a, "wgmma multiplies bf16 or f16");
    bool at = kd == TK_MMA_ATB || kd == TK_MMA_ATBT, bt = kd == TK_MMA_ABT || kd == TK_MMA_ATBT;
    tk_status s = rule_a(k, op, acc, at);
    if (s) return s;
    int K = at ? a->rows : a->cols;
    if (K % 16)
        return fail_type(k, op, "A", a,
                         at ? "K (its rows) must be a multiple of 16"
                            : "K (its columns) must be a multiple of 16");
    s = check_shared(k, op, "B", op->opnds[2], dt, bt ? acc->cols : K, bt ? K : acc->cols);
    if (s) return s;
    if (bt && op->opnds[2]->type.rows != acc->cols)
        return fail_type(k, op, "B", &op->opnds[2]->type,
                         "A*B^T needs B's rows to be acc's "
                         "columns");
    op->res[0]->type = *acc;
    return TK_OK;
}

static tk_status rule_wait(tk_kernel *k, tk_op *op) {
    const tk_type *acc = &op->opnds[0]->type;
    if (acc->kind != TK_KIND_TILE || acc->dtype != TK_F32 || acc->owner != TK_WARPGROUP)
        return fail_type(k, op, "acc", acc, "expected the f32 warpgroup tile of a tk_wgmma");
    if (op->attr[0] < 0 || op->attr[0] > 7)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "pending is %lld; expected 0..7",
                         (long long)op->attr[0]);
    const tk_type *after = op->nopnds > 1 ? &op->opnds[1]->type : NULL;
    if (after && after->kind != TK_KIND_TILE && after->kind != TK_KIND_VEC &&
        after->kind != TK_KIND_SCALAR)
        return fail_type(k, op, "after", after,
                         "expected a register value (a tile, vector or scalar) to order the "
                         "wait behind");
    op->res[0]->type = *acc;
    return TK_OK;
}

tk_status tk_rule_wgmma(tk_kernel *k, tk_op *op) {
    return op->opc == TK_OP_WGMMA ? rule_wgmma(k, op) : rule_wait(k, op);
}

tk_value *tk_wgmma(tk_kernel *k, tk_mma_kind kind, tk_value *acc, tk_value *a, tk_value *b,
                   tk_value *a_row) {
    tk_value *v[4] = {acc, a, b, a_row};
    tk_op *op = tk_build_op_attr(k, TK_OP_WGMMA, a_row ? 4 : 3, v, kind, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_wgmma_wait(tk_kernel *k, tk_value *acc, int pending) {
    tk_op *op = tk_build_op_attr(k, TK_OP_WGMMA_WAIT, 1, &acc, pending, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_wgmma_wait_after(tk_kernel *k, tk_value *acc, int pending, tk_value *after) {
    tk_value *v[2] = {acc, after};
    tk_op *op = tk_build_op_attr(k, TK_OP_WGMMA_WAIT, 2, v, pending, 0, 0.0);
    return op ? op->res[0] : NULL;
}
