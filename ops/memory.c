/* Memory ops (rules and builder calls).
 *
 * SHARED    want = the shared type; attr[0] = byte offset in the block's
 *           shared memory (assigned here, 128-byte aligned). Top level only.
 * STAGE     smem (count > 1), idx -> one stage (count 1)
 * NARROW    view, start, len; attr[0] = axis -> a view of the same type,
 *           [start, start + len) of the axis, both clamped to the view
 * LOAD_G2R  view, idx[rank]; want = tile (rank >= 2), vec, or scalar (one
 *           element: i32, i64 or f32, every thread); fattr = fill.
 *           Tiles span the last two dims: idx[rank-2] / idx[rank-1] are the
 *           element row / col of the top-left corner; leading idx pick the
 *           batch/head. A vector spans the last dim from idx[rank-1].
 *           Out-of-range elements read `fill`.
 * LOAD_S2R  smem, row0, col0; want = tile of the smem's dtype
 * STORE_R2G view, idx[rank], val   (out-of-range elements are skipped);
 *           attr[0] = 1: the store adds (tk_store_add: f32, atomically)
 * STORE_R2S smem, row0, col0, val
 * COPY_G2S  smem, view, idx[rank]; attr[0] = TK_COPY_SYNC / _ASYNC (cp.async) /
 *           _TMA (the copy engine where the plan allows, jit/plan.c), fattr = fill;
 *           attr[1] = 1: TK_COPY_MULTICAST (every block of the cluster makes this
 *           copy: the interpreter checks it, the engine multicasts shares, ops/nv/tma.c)
 * COPY_S2G  view, idx[rank], smem
 * ASYNC_WAIT attr[0] = groups allowed to stay pending
 * Views of any layout work: the tile walks the view's strides.
 * Interpreter: ops/memory_interp.c; lowering: ops/memory_nv.c. */
#include "ir/abi.h"

#include <stdio.h>
#include "ops/build.h"

#include <stdio.h>

static tk_status expect_kind(tk_kernel *k, tk_op *op, int i, tk_kind kind, const char *what) {
    const tk_type *t = &op->opnds[i]->type;
    if (t->kind == kind) return TK_OK;
    char b[64];
    tk_type_str(t, b, sizeof b);
    return tk_opfail(k, op, TK_ERR_TYPE, "%s is a %s; expected %s", what,
                     t->kind ? b : "value without a type",
                     kind == TK_KIND_GVIEW  ? "a tensor parameter"
                     : kind == TK_KIND_SMEM ? "a single-stage shared tile"
                                            : "a register tile");
}

static tk_status expect_index(tk_kernel *k, tk_op *op, int from, int n) {
    for (int i = from; i < from + n; i++) {
        const tk_type *t = &op->opnds[i]->type;
        if (t->kind != TK_KIND_SCALAR || !tk_dtype_is_int(t->dtype)) {
            char b[64];
            tk_type_str(t, b, sizeof b);
            return tk_opfail(k, op, TK_ERR_TYPE, "index %d is a %s; expected an i32/i64 scalar",
                             i - from, b);
        }
    }
    return TK_OK;
}

static tk_status expect_smem(tk_kernel *k, tk_op *op, int i) {
    if (expect_kind(k, op, i, TK_KIND_SMEM, "the shared operand")) return k->status;
    if (op->opnds[i]->type.count != 1)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "the shared operand has %d stages; pick one with "
                         "tk_stage",
                         op->opnds[i]->type.count);
    return TK_OK;
}

/* view + idx[rank] starting at operand `at`; nidx = operands provided. */
static tk_status expect_view(tk_kernel *k, tk_op *op, int at, int nidx, bool tile) {
    if (expect_kind(k, op, at, TK_KIND_GVIEW, "the global operand")) return k->status;
    int rank = op->opnds[at]->type.rank;
    if (nidx != rank)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "%d indices for a rank-%d tensor", nidx, rank);
    if (tile && rank < 2)
        return tk_opfail(k, op, TK_ERR_SHAPE, "a tile needs a tensor of rank >= 2, got rank %d",
                         rank);
    return expect_index(k, op, at + 1, nidx);
}

static tk_status same_dtype(tk_kernel *k, tk_op *op, tk_dtype mem, tk_dtype reg) {
    if (mem == reg) return TK_OK;
    return tk_opfail(k, op, TK_ERR_TYPE,
                     "memory holds %s but the register value is %s; convert "
                     "with tk_cvt",
                     tk_dtype_name(mem), tk_dtype_name(reg));
}

static tk_status fits(tk_kernel *k, tk_op *op, const tk_type *reg, const tk_type *sm) {
    if (reg->kind != TK_KIND_TILE)
        return tk_opfail(k, op, TK_ERR_TYPE, "shared memory moves whole tiles, not vectors");
    if (reg->rows > sm->rows || reg->cols > sm->cols)
        return tk_opfail(k, op, TK_ERR_SHAPE, "a %dx%d tile does not fit a %dx%d shared tile",
                         reg->rows, reg->cols, sm->rows, sm->cols);
    return same_dtype(k, op, sm->dtype, reg->dtype);
}

static tk_status rule_shared(tk_kernel *k, tk_op *op) {
    tk_type t = op->want;
    if (k->cur != k->body)
        return tk_opfail(k, op, TK_ERR_STATE,
                         "shared memory is allocated at the top level of the "
                         "kernel, not inside a for/if");
    if (!tk_dtype_is_float(t.dtype))
        return tk_opfail(k, op, TK_ERR_TYPE, "shared tiles hold f32, bf16 or f16, not %s",
                         tk_dtype_name(t.dtype));
    if (t.rows <= 0 || t.cols <= 0 || t.rows % 16 || t.cols % 16 || t.rows > 1024 || t.cols > 1024)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "a %dx%d shared tile: rows and cols must be "
                         "multiples of 16 up to 1024",
                         t.rows, t.cols);
    if (t.smem != TK_SMEM_PLAIN && t.smem != TK_SMEM_SWIZZLE && t.smem != TK_SMEM_PAD)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "layout %d is not a tk_smem_layout",
                         (int)t.smem);
    if (t.count < 1 || t.count > 16)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "count is %d; expected 1..16", t.count);
    size_t off = (k->smem_bytes + 127) & ~(size_t)127;
    size_t end = off + tk_smem_stage_bytes(&t) * (size_t)t.count;
    if (end > TK_SMEM_LIMIT)
        return tk_opfail(k, op, TK_ERR_SHAPE,
                         "the kernel would use %zu bytes of shared memory; "
                         "the limit is %d",
                         end, TK_SMEM_LIMIT);
    k->smem_bytes = end;
    op->attr[0] = (int64_t)off;
    op->res[0]->type = t;
    return TK_OK;
}

static tk_status rule_stage(tk_kernel *k, tk_op *op) {
    if (expect_kind(k, op, 0, TK_KIND_SMEM, "the shared operand")) return k->status;
    if (op->opnds[0]->type.count < 2)
        return tk_opfail(k, op, TK_ERR_TYPE, "the shared operand has a single stage");
    if (expect_index(k, op, 1, 1)) return k->status;
    op->res[0]->type = op->opnds[0]->type;
    op->res[0]->type.count = 1;
    return TK_OK;
}

static tk_status rule_narrow(tk_kernel *k, tk_op *op) {
    if (expect_kind(k, op, 0, TK_KIND_GVIEW, "the narrowed operand")) return k->status;
    int rank = op->opnds[0]->type.rank;
    if (op->attr[0] < 0 || op->attr[0] >= rank)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG, "axis is %lld; a rank-%d view has axes 0..%d",
                         (long long)op->attr[0], rank, rank - 1);
    for (int i = 1; i < 3; i++) {
        const tk_type *t = &op->opnds[i]->type;
        if (t->kind != TK_KIND_SCALAR || !tk_dtype_is_int(t->dtype)) {
            char b[64];
            tk_type_str(t, b, sizeof b);
            return tk_opfail(k, op, TK_ERR_TYPE, "%s is a %s; expected an i32/i64 scalar",
                             i == 1 ? "start" : "len", b);
        }
    }
    op->res[0]->type = op->opnds[0]->type;
    return TK_OK;
}

/* One element of a tensor into a scalar of its dtype (every thread reads
 * it; as uniform as the indices): sizes, offsets, page tables. */
static tk_status rule_load_scalar(tk_kernel *k, tk_op *op) {
    const tk_type *w = &op->want;
    if (w->dtype != TK_I32 && w->dtype != TK_I64 && w->dtype != TK_F32)
        return tk_opfail(k, op, TK_ERR_TYPE, "a scalar load reads i32, i64 or f32, not %s",
                         tk_dtype_name(w->dtype));
    if (expect_view(k, op, 0, op->nopnds - 1, false)) return k->status;
    if (same_dtype(k, op, op->opnds[0]->type.dtype, w->dtype)) return k->status;
    op->res[0]->type = tk_scalar_type(w->dtype);
    return TK_OK;
}

static tk_status rule_load(tk_kernel *k, tk_op *op) {
    const tk_type *w = &op->want;
    if (op->opc == TK_OP_LOAD_G2R && w->kind == TK_KIND_SCALAR) return rule_load_scalar(k, op);
    if (tk_check_reg_type(k, op, w)) return k->status;
    if (op->opc == TK_OP_LOAD_S2R) {
        if (expect_smem(k, op, 0) || expect_index(k, op, 1, 2)) return k->status;
        if (fits(k, op, w, &op->opnds[0]->type)) return k->status;
    } else {
        if (expect_view(k, op, 0, op->nopnds - 1, w->kind == TK_KIND_TILE)) return k->status;
        if (same_dtype(k, op, op->opnds[0]->type.dtype, w->dtype)) return k->status;
    }
    op->res[0]->type = *w;
    return TK_OK;
}

static tk_status rule_store(tk_kernel *k, tk_op *op) {
    int last = op->nopnds - 1;
    const tk_type *v = &op->opnds[last]->type;
    if (v->kind != TK_KIND_TILE && v->kind != TK_KIND_VEC)
        return expect_kind(k, op, last, TK_KIND_TILE, "the stored value");
    if (v->dtype == TK_BOOL)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "a bool tile or vector is a mask, not stored: tk_cvt it to a float "
                         "dtype first");
    if (op->opc == TK_OP_STORE_R2S) {
        if (expect_smem(k, op, 0) || expect_index(k, op, 1, 2)) return k->status;
        return fits(k, op, v, &op->opnds[0]->type);
    }
    if (expect_view(k, op, 0, last - 1, v->kind == TK_KIND_TILE)) return k->status;
    if (same_dtype(k, op, op->opnds[0]->type.dtype, v->dtype)) return k->status;
    if (op->attr[0] && v->dtype != TK_F32)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "tk_store_add adds f32 values into an f32 tensor, not %s: accumulate "
                         "in f32 and convert afterwards",
                         tk_dtype_name(v->dtype));
    return TK_OK;
}

static tk_status rule_copy(tk_kernel *k, tk_op *op) {
    bool g2s = op->opc == TK_OP_COPY_G2S;
    int sm = g2s ? 0 : op->nopnds - 1, view = g2s ? 1 : 0;
    if (expect_smem(k, op, sm)) return k->status;
    if (expect_view(k, op, view, op->nopnds - 2, true)) return k->status;
    const tk_type *s = &op->opnds[sm]->type;
    if (same_dtype(k, op, op->opnds[view]->type.dtype, s->dtype)) return k->status;
    if (g2s && op->attr[0] && op->fattr != 0.0)
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "an asynchronous copy fills out-of-range "
                         "elements with 0, not %g",
                         op->fattr);
    if (g2s && op->attr[1] && (op->attr[0] != TK_COPY_TMA || k->cluster < 2))
        return tk_opfail(k, op, TK_ERR_INVALID_ARG,
                         "TK_COPY_MULTICAST is a promise among the blocks of a cluster: it "
                         "needs TK_COPY_TMA and a kernel of clusters (tk_kernel_set_cluster with "
                         "2 or more, before the first op); this one has %s",
                         op->attr[0] != TK_COPY_TMA ? "no TK_COPY_TMA" : "no cluster");
    if (!g2s && op->attr[0] && s->dtype != TK_F32)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "tk_copy_to_global_add adds an f32 shared tile into an f32 tensor, not "
                         "%s: accumulate in f32 and convert afterwards",
                         tk_dtype_name(s->dtype));
    return TK_OK;
}

tk_status tk_rule_memory(tk_kernel *k, tk_op *op) {
    switch (op->opc) {
    case TK_OP_SHARED: return rule_shared(k, op);
    case TK_OP_STAGE: return rule_stage(k, op);
    case TK_OP_NARROW: return rule_narrow(k, op);
    case TK_OP_LOAD_G2R:
    case TK_OP_LOAD_S2R: return rule_load(k, op);
    case TK_OP_STORE_R2G:
    case TK_OP_STORE_R2S: return rule_store(k, op);
    case TK_OP_COPY_G2S:
    case TK_OP_COPY_S2G: return rule_copy(k, op);
    case TK_OP_ASYNC_WAIT:
        if (op->attr[0] < 0 || op->attr[0] > 8)
            return tk_opfail(k, op, TK_ERR_INVALID_ARG, "pending is %lld; expected 0..8",
                             (long long)op->attr[0]);
        return TK_OK;
    case TK_OP_ASYNC_COMMIT:
    case TK_OP_BARRIER:
    case TK_OP_GRID_WAIT:
    case TK_OP_GRID_RELEASE: return TK_OK;
    default: return tk_opfail(k, op, TK_ERR_INVALID_ARG, "not a memory op");
    }
}

/* ---- builder calls ------------------------------------------------------ */
tk_value *tk_shared(tk_kernel *k, tk_dtype dt, int rows, int cols, tk_smem_layout layout,
                    int count) {
    tk_type t = {.kind = TK_KIND_SMEM,
                 .dtype = dt,
                 .rows = rows,
                 .cols = cols,
                 .smem = layout,
                 .count = count};
    tk_op *op = tk_build_op_typed(k, TK_OP_SHARED, 0, NULL, t, 0, 0, 0.0);
    return op ? op->res[0] : NULL;
}

tk_value *tk_stage(tk_kernel *k, tk_value *smem, tk_value *idx) {
    tk_value *v[2] = {smem, idx};
    tk_op *op = tk_build_op(k, TK_OP_STAGE, 2, v);
    return op ? op->res[0] : NULL;
}

tk_value *tk_narrow(tk_kernel *k, tk_value *view, int axis, tk_value *start, tk_value *len) {
    tk_value *v[3] = {view, start, len};
    tk_op *op = tk_build_op_attr(k, TK_OP_NARROW, 3, v, axis, 0, 0.0);
    return op ? op->res[0] : NULL;
}

/* Checks the `nidx` indices given for the memory operand `m` (a tensor of
 * rank r takes r, a shared tile 2); returns that count, or -1 after
 * reporting why the call cannot be made. `fn` is the public call's name. */
static int index_count(tk_kernel *k, const char *fn, tk_value *m, int nidx, tk_value *const *idx) {
    if (!k || k->status) return -1;
    if (!m) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: the memory operand is NULL", fn);
        return -1;
    }
    if (!tk_check_operand(k, fn + 3, 0, m)) return -1;
    int n = m->type.kind == TK_KIND_GVIEW ? m->type.rank : m->type.kind == TK_KIND_SMEM ? 2 : -1;
    char b[64];
    if (n < 0) {
        tk_type_str(&m->type, b, sizeof b);
        tk_kfail(k, TK_ERR_TYPE,
                 "%s: the memory operand is a %s; expected a tensor parameter or "
                 "a shared tile",
                 fn, b);
        return -1;
    }
    if (m->type.kind == TK_KIND_GVIEW) {
        const tk_value *root = tk_view_root(m);
        snprintf(b, sizeof b, "the rank-%d tensor '%s'%s", n, root->name ? root->name : "?",
                 root != m ? " (narrowed)" : "");
    } else
        snprintf(b, sizeof b, "a shared tile (row, col)");
    if (nidx == TK_IDX_NOT_ARRAY)
        tk_kfail(k, TK_ERR_INVALID_ARG,
                 "%s: idx is not an array of 1..4 indices; pass an array "
                 "of indices or call %s_n with the count (%s takes %d)",
                 fn, fn, b, n);
    else if (!idx)
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: idx is NULL; expected %d indices for %s", fn, n, b);
    else if (nidx != n)
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: %d ind%s given; %s takes %d", fn, nidx,
                 nidx == 1 ? "ex" : "ices", b, n);
    else
        return n;
    return -1;
}

tk_value *tk_load_n(tk_kernel *k, tk_type type, tk_value *src, int nidx, tk_value *const *idx,
                    float fill) {
    int n = index_count(k, "tk_load", src, nidx, idx);
    if (n < 0) return NULL;
    tk_value *v[5] = {src};
    for (int i = 0; i < n; i++) v[1 + i] = idx[i];
    bool g = src->type.kind == TK_KIND_GVIEW;
    tk_op *op =
        tk_build_op_typed(k, g ? TK_OP_LOAD_G2R : TK_OP_LOAD_S2R, 1 + n, v, type, 0, 0, fill);
    return op ? op->res[0] : NULL;
}

/* tk_store and tk_store_add (`add`: STORE_R2G's attr[0]). */
static void store(tk_kernel *k, const char *fn, tk_value *dst, int nidx, tk_value *const *idx,
                  tk_value *val, bool add) {
    int n = index_count(k, fn, dst, nidx, idx);
    if (n < 0) return;
    bool g = dst->type.kind == TK_KIND_GVIEW;
    if (add && !g) {
        tk_kfail(k, TK_ERR_TYPE,
                 "tk_store_add: the destination is a shared tile; it adds into a tensor "
                 "parameter only");
        return;
    }
    tk_value *v[6] = {dst};
    for (int i = 0; i < n; i++) v[1 + i] = idx[i];
    v[1 + n] = val;
    tk_build_op_attr(k, g ? TK_OP_STORE_R2G : TK_OP_STORE_R2S, 2 + n, v, add, 0, 0.0);
}

void tk_store_n(tk_kernel *k, tk_value *dst, int nidx, tk_value *const *idx, tk_value *val) {
    store(k, "tk_store", dst, nidx, idx, val, false);
}

void tk_store_add_n(tk_kernel *k, tk_value *dst, int nidx, tk_value *const *idx, tk_value *val) {
    store(k, "tk_store_add", dst, nidx, idx, val, true);
}

void tk_copy_to_shared_n(tk_kernel *k, tk_value *smem, tk_value *view, int nidx,
                         tk_value *const *idx, float fill, int async) {
    int n = index_count(k, "tk_copy_to_shared", view, nidx, idx);
    if (n < 0) return;
    tk_value *v[6] = {smem, view};
    for (int i = 0; i < n; i++) v[2 + i] = idx[i];
    int base = async & ~TK_COPY_MULTICAST;
    int mode = base == TK_COPY_TMA ? TK_COPY_TMA : base != 0 ? TK_COPY_ASYNC : TK_COPY_SYNC;
    tk_build_op_attr(k, TK_OP_COPY_G2S, 2 + n, v, mode, (async & TK_COPY_MULTICAST) != 0, fill);
}

/* tk_copy_to_global and its add: one builder path, the add an attribute. */
static void copy_s2g(tk_kernel *k, const char *fn, tk_value *view, int nidx, tk_value *const *idx,
                     tk_value *smem, bool add) {
    int n = index_count(k, fn, view, nidx, idx);
    if (n < 0) return;
    tk_value *v[6] = {view};
    for (int i = 0; i < n; i++) v[1 + i] = idx[i];
    v[1 + n] = smem;
    tk_build_op_attr(k, TK_OP_COPY_S2G, 2 + n, v, add, 0, 0.0);
}

void tk_copy_to_global_n(tk_kernel *k, tk_value *view, int nidx, tk_value *const *idx,
                         tk_value *smem) {
    copy_s2g(k, "tk_copy_to_global", view, nidx, idx, smem, false);
}

void tk_copy_to_global_add_n(tk_kernel *k, tk_value *view, int nidx, tk_value *const *idx,
                             tk_value *smem) {
    copy_s2g(k, "tk_copy_to_global_add", view, nidx, idx, smem, true);
}

void tk_async_commit(tk_kernel *k) { tk_build_op(k, TK_OP_ASYNC_COMMIT, 0, NULL); }
void tk_async_wait(tk_kernel *k, int pending) {
    tk_build_op_attr(k, TK_OP_ASYNC_WAIT, 0, NULL, pending, 0, 0.0);
}
void tk_barrier(tk_kernel *k) { tk_build_op(k, TK_OP_BARRIER, 0, NULL); }
void tk_grid_wait(tk_kernel *k) { tk_build_op(k, TK_OP_GRID_WAIT, 0, NULL); }
void tk_grid_release(tk_kernel *k) { tk_build_op(k, TK_OP_GRID_RELEASE, 0, NULL); }
