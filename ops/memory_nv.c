/* Lowering of memory ops (rules: ops/memory.c); block-wide copies are in
 * ops/nv/copy.c, addressing in ops/nv/mem.c, the contract in
 * docs/LOWERING.md.
 *
 * Register <-> global (each thread moves the elements it holds), three
 * paths picked by tests that are uniform over the owner (no divergence):
 *   1. whole tile inside the view and, for ROW tiles, unit column stride and
 *      pair alignment: (e, e+1) pairs as one 2-element access (ROW), single
 *      elements (COL), no checks;
 *   2. unit column stride: every element masked (loads read `fill`, stores
 *      are skipped), column offsets are immediates;
 *   3. any stride: the same, stores in a rolled loop over columns.
 *   Vectors always take the masked path; one lane (tk_vec_writer) stores.
 * Register <-> shared, 16-bit dtypes: ldmatrix.x4 per 16x16 subtile (.trans
 *   for COL tiles); stores: stmatrix.x4 on sm_90+, else pair stores. f32:
 *   pair (ROW) or single (COL) ld/st.shared. All need col0 % 8 == 0 (16-byte
 *   row segments); a run-time check falls back to per-element accesses. */
#include "ops/lower_walk.h"

/* ---- shared, stage, async groups, barrier -------------------------------- */
static tk_status def1(tk_lower *L, const tk_op *op, LLVMValueRef v) {
    tk_lv *lv = tk_lw_def(L, op->res[0], 1);
    if (!lv) return L->dg->st;
    lv->v[0] = v;
    return TK_OK;
}

static tk_status lower_shared(tk_lower *L, const tk_op *op) {
    return def1(L, op, tk_lw_gep(L, L->sbase, tk_lw_i32c(L, op->attr[0])));
}

/* Stage i of a ring lives at base + i * tk_smem_stage_bytes. */
static tk_status lower_stage(tk_lower *L, const tk_op *op) {
    tk_lv *s = tk_lw_get(L, op->opnds[0]), *i = tk_lw_get(L, op->opnds[1]);
    if (!s || !i) return L->dg->st;
    LLVMValueRef bytes = tk_lw_i32c(L, (int64_t)tk_smem_stage_bytes(&op->opnds[0]->type));
    LLVMValueRef off = LLVMBuildMul(L->b, tk_lw_to_i32(L, i->v[0]), bytes, "");
    return def1(L, op, tk_lw_gep(L, s->v[0], off));
}

/* NARROW: the parent's lowered view (ops/nv/lower.h) with the pointer on
 * element s of the axis, s = start clamped to [0, size], the axis' size
 * len clamped to [0, size - s], and its origin in the root tensor moved by
 * s (the copy engine addresses the root's map, ops/nv/tma.c). */
static LLVMValueRef clamp(tk_lower *L, LLVMValueRef x, LLVMValueRef hi) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef zero = tk_lw_i64c(L, 0);
    x = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), zero, x, "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, hi, ""), hi, x, "");
}

static tk_status lower_narrow(tk_lower *L, const tk_op *op) {
    tk_lv *p = tk_lw_get(L, op->opnds[0]), *start = tk_lw_get(L, op->opnds[1]),
          *len = tk_lw_get(L, op->opnds[2]);
    int r = op->opnds[0]->type.rank, ax = (int)op->attr[0];
    tk_lv *v = p && start && len ? tk_lw_def(L, op->res[0], 1 + 3 * r) : NULL;
    if (!v) return L->dg->st;
    for (int i = 0; i < 1 + 3 * r; i++) v->v[i] = p->v[i];
    LLVMBuilderRef b = L->b;
    LLVMValueRef size = p->v[1 + ax];
    LLVMValueRef s0 = clamp(L, tk_lw_to_i64(L, start->v[0]), size);
    v->v[1 + ax] = clamp(L, tk_lw_to_i64(L, len->v[0]), LLVMBuildSub(b, size, s0, ""));
    LLVMValueRef step = LLVMBuildMul(b, s0, p->v[1 + r + ax], "");
    int64_t esz = (int64_t)tk_dtype_size(op->opnds[0]->type.dtype);
    v->v[0] = tk_lw_gep(L, p->v[0], LLVMBuildMul(b, step, tk_lw_i64c(L, esz), ""));
    v->v[1 + 2 * r + ax] = LLVMBuildAdd(b, p->v[1 + 2 * r + ax], s0, "");
    return TK_OK;
}

/* What the sync ops mean depends on the code being emitted (lockstep, the
 * copy engine's ring, or one side of a warp-specialized kernel): the sync
 * strategy the driver picked (ops/nv/sync.c). */
static tk_status lower_sync(tk_lower *L, const tk_op *op) {
    switch (op->opc) {
    case TK_OP_ASYNC_COMMIT: L->sync->commit(L); break;
    case TK_OP_ASYNC_WAIT: L->sync->wait(L, (int)op->attr[0]); break;
    default: L->sync->barrier(L, op);
    }
    return L->dg->st;
}

/* ---- register <-> global ---------------------------------------------------- */
typedef struct gio {
    const tk_type *t; /* register tile / vector                         */
    tk_gwin w;
    LLVMValueRef lrow, lcol; /* lane parts (i32)                              */
    LLVMValueRef fill;       /* loads                                          */
    tk_lv *val;              /* stores                                         */
    bool add;                /* tk_store_add: each element added atomically    */
    LLVMTypeRef ety;
    unsigned esz;
} gio;

/* Window position of slot i: tiles (row, col); vectors (0, pos). */
static void gio_pos(tk_lower *L, const gio *g, int i, LLVMValueRef *r, LLVMValueRef *c) {
    if (g->t->kind == TK_KIND_VEC) {
        *r = tk_lw_i32c(L, 0);
        *c = LLVMBuildAdd(L->b, g->lcol, tk_lw_i32c(L, tk_vec_pos(g->t, i)), "");
        return;
    }
    int rc, cc;
    tk_frag_pos(g->t, i, &rc, &cc);
    *r = LLVMBuildAdd(L->b, g->lrow, tk_lw_i32c(L, rc), "");
    *c = LLVMBuildAdd(L->b, g->lcol, tk_lw_i32c(L, cc), "");
}

static bool pairs(const tk_type *t) { return t->kind == TK_KIND_TILE && t->layout == TK_ROW; }

static void g2r_fast(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio *g = ctx;
    int n = tk_frag_count(g->t), step = pairs(g->t) ? 2 : 1;
    LLVMTypeRef vt = LLVMVectorType(g->ety, 2);
    for (int i = 0; i < n; i += step) {
        LLVMValueRef r, c;
        gio_pos(L, g, i, &r, &c);
        LLVMValueRef p = tk_gwin_addr(L, &g->w, r, c);
        if (step == 1) {
            out[i] = tk_lw_load(L, g->ety, p, g->esz);
            continue;
        }
        LLVMValueRef v = tk_lw_load(L, vt, p, 2 * g->esz);
        out[i] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 0), "");
        out[i + 1] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 1), "");
    }
}

/* Slow paths visit elements column by column: each column's offset
 * (col * stride) is computed once and dies before the next, while the few
 * row offsets stay live; by rows, all column offsets would (a strided view
 * has no immediate offsets), which costs the registers that a 64x64
 * accumulator tile cannot spare. Returns the fragment indices in that order
 * (NULL after an allocation failure, recorded in L) and their count. */
static int *slow_order(tk_lower *L, const tk_type *t, int *count) {
    int n = *count = tk_frag_count(t), *order = tk_lw_alloc(L, sizeof *order * (size_t)n);
    if (!order) return NULL;
    for (int i = 0; i < n; i++) order[i] = i;
    if (t->kind != TK_KIND_TILE) return order;
    for (int i = 1; i < n; i++) { /* insertion sort by (col, row) */
        int x = order[i], xr, xc, j = i;
        tk_frag_pos(t, x, &xr, &xc);
        for (; j > 0; j--) {
            int yr, yc;
            tk_frag_pos(t, order[j - 1], &yr, &yc);
            if (yc < xc || (yc == xc && yr <= xr)) break;
            order[j] = order[j - 1];
        }
        order[j] = x;
    }
    return order;
}

static void g2r_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio *g = ctx;
    int n, *order = slow_order(L, g->t, &n);
    for (int k = 0; order && k < n; k++) {
        int i = order[k];
        LLVMValueRef r, c;
        gio_pos(L, g, i, &r, &c);
        LLVMValueRef ok = tk_gwin_inb(L, &g->w, r, c);
        out[i] = tk_lw_load_masked(L, g->ety, tk_gwin_addr(L, &g->w, r, c), ok, g->fill, g->esz);
    }
}

static void r2g_fast(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio *g = ctx;
    int n = tk_frag_count(g->t), step = pairs(g->t) ? 2 : 1;
    (void)out;
    for (int i = 0; i < n; i += step) {
        LLVMValueRef r, c;
        gio_pos(L, g, i, &r, &c);
        LLVMValueRef p = tk_gwin_addr(L, &g->w, r, c), v = g->val->v[i];
        if (step == 2) {
            LLVMValueRef v2 = LLVMGetPoison(LLVMVectorType(g->ety, 2));
            v2 = LLVMBuildInsertElement(L->b, v2, v, tk_lw_i32c(L, 0), "");
            v = LLVMBuildInsertElement(L->b, v2, g->val->v[i + 1], tk_lw_i32c(L, 1), "");
        }
        tk_lw_store(L, v, p, g->esz * (unsigned)step);
    }
}

static void r2g_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio *g = ctx;
    (void)out;
    LLVMValueRef writer = g->t->kind == TK_KIND_VEC ? tk_vec_writer(L, g->t) : NULL;
    int n, *order = slow_order(L, g->t, &n);
    for (int k = 0; order && k < n; k++) {
        int i = order[k];
        LLVMValueRef r, c;
        gio_pos(L, g, i, &r, &c);
        LLVMValueRef ok = tk_lw_and(L, writer, tk_gwin_inb(L, &g->w, r, c));
        if (g->add)
            tk_lw_add_masked(L, g->val->v[i], tk_gwin_addr(L, &g->w, r, c), ok);
        else
            tk_lw_store_masked(L, g->val->v[i], tk_gwin_addr(L, &g->w, r, c), ok, g->esz);
    }
}

/* Opens the window of a G2R / R2G op: view = operand 0, idx = 1..rank. */
static void gio_open(tk_lower *L, gio *g, const tk_op *op, const tk_type *t) {
    const tk_value *view = op->opnds[0];
    g->t = t;
    g->ety = tk_lw_type(L, t->dtype);
    g->esz = (unsigned)tk_dtype_size(t->dtype);
    tk_gwin_open(L, &g->w, view, op->opnds + 1, t->kind == TK_KIND_TILE ? 2 : 1);
    if (t->kind == TK_KIND_VEC) {
        g->lrow = tk_lw_i32c(L, 0);
        g->lcol = tk_vec_lane(L, t);
    } else {
        g->lrow = tk_frag_lane_row(L, t);
        g->lcol = tk_frag_lane_col(L, t);
    }
}

/* Fast-path test: tile inside the view; pairs also need alignment. */
/* The masked paths come twice: for a unit column stride (the common case:
 * column offsets are immediates) and for any stride. */
static void g2r_unit(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio g = *(gio *)ctx;
    g.w.scol = tk_lw_i64c(L, 1);
    g2r_slow(L, &g, out);
}

static void r2g_unit(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio g = *(gio *)ctx;
    g.w.scol = tk_lw_i64c(L, 1);
    r2g_slow(L, &g, out);
}

static LLVMValueRef unit_stride(tk_lower *L, const gio *g) {
    return LLVMBuildICmp(L->b, LLVMIntEQ, g->w.scol, tk_lw_i64c(L, 1), "");
}

static void g2r_masked(tk_lower *L, void *ctx, LLVMValueRef *out) {
    tk_lw_branch2(L, unit_stride(L, ctx), g2r_unit, g2r_slow, ctx, tk_frag_count(((gio *)ctx)->t),
                  out);
}

/* Any column stride: a rolled loop over the tile's distinct columns; each
 * trip picks the column's values with selects and stores one per distinct
 * row. Unrolled, ptxas would precompute every element's 64-bit address at
 * once (if-converted predicated stores) and spill next to a live 64x64
 * accumulator; rolled, one column's offset is live at a time. */
static LLVMValueRef pick(tk_lower *L, LLVMValueRef ci, const LLVMValueRef *v, int n) {
    LLVMValueRef r = v[n - 1];
    for (int k = n - 2; k >= 0; k--)
        r = LLVMBuildSelect(L->b, LLVMBuildICmp(L->b, LLVMIntEQ, ci, tk_lw_i32c(L, k), ""), v[k], r,
                            "");
    return r;
}

/* Distinct values of `x` (first-seen order) and the index of x[i] in them. */
static int distinct(const int *x, int n, int *vals, int *idx) {
    int nv = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nv && vals[k] != x[i]) k++;
        if (k == nv) vals[nv++] = x[i];
        idx[i] = k;
    }
    return nv;
}

static void r2g_strided(tk_lower *L, void *ctx, LLVMValueRef *out) {
    gio *g = ctx;
    int n = tk_frag_count(g->t), *m = tk_lw_alloc(L, sizeof(int) * 6 * (size_t)n);
    LLVMValueRef *grid = tk_lw_alloc(L, sizeof *grid * (size_t)n);
    LLVMValueRef *cv = tk_lw_alloc(L, sizeof *cv * (size_t)n);
    (void)out;
    if (!m || !grid || !cv) return;
    int *rc = m, *cc = m + n, *rows = m + 2 * n, *cols = m + 3 * n, *ri = m + 4 * n,
        *ci = m + 5 * n;
    for (int i = 0; i < n; i++) tk_frag_pos(g->t, i, &rc[i], &cc[i]);
    int nr = distinct(rc, n, rows, ri), nc = distinct(cc, n, cols, ci);
    for (int i = 0; i < n; i++) /* a tile's elements form a full rows x cols grid */
        grid[ri[i] * nc + ci[i]] = g->val->v[i];
    for (int b = 0; b < nc; b++) cv[b] = tk_lw_i32c(L, cols[b]);
    tk_lw_loop lp = {.rolled = true};
    LLVMValueRef k =
        tk_lw_loop_begin(L, &lp, tk_lw_i32c(L, 0), tk_lw_i32c(L, nc), tk_lw_i32c(L, 1));
    LLVMValueRef c = LLVMBuildAdd(L->b, g->lcol, pick(L, k, cv, nc), "");
    for (int a = 0; a < nr; a++) {
        LLVMValueRef r = LLVMBuildAdd(L->b, g->lrow, tk_lw_i32c(L, rows[a]), "");
        LLVMValueRef v = pick(L, k, grid + a * nc, nc);
        tk_lw_store_masked(L, v, tk_gwin_addr(L, &g->w, r, c), tk_gwin_inb(L, &g->w, r, c), g->esz);
    }
    tk_lw_loop_end(L, &lp);
}

static void r2g_masked(tk_lower *L, void *ctx, LLVMValueRef *out) {
    tk_lw_branch2(L, unit_stride(L, ctx), r2g_unit, r2g_strided, ctx, 0, out);
}

static LLVMValueRef gio_fast(tk_lower *L, gio *g) {
    LLVMValueRef ok = tk_gwin_all_inb(L, &g->w, g->t->rows, g->t->cols);
    return pairs(g->t) ? LLVMBuildAnd(L->b, ok, tk_gwin_aligned(L, &g->w, 2 * (int)g->esz), "")
                       : ok;
}

/* A scalar: every thread loads the element (masked: out of range reads
 * the fill); uniform indices make it one cached address for the warp. */
static tk_status lower_load_scalar(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->res[0]->type;
    tk_gwin w;
    tk_gwin_open(L, &w, op->opnds[0], op->opnds + 1, 1);
    tk_lv *r = tk_lw_def(L, op->res[0], 1);
    if (!r || L->dg->st) return L->dg->st;
    LLVMValueRef zero = tk_lw_i32c(L, 0);
    r->v[0] = tk_lw_load_masked(
        L, tk_lw_type(L, t->dtype), tk_gwin_addr(L, &w, zero, zero), tk_gwin_inb(L, &w, zero, zero),
        tk_lw_constf(L, t->dtype, op->fattr), (unsigned)tk_dtype_size(t->dtype));
    return L->dg->st;
}

static tk_status lower_g2r(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->res[0]->type;
    if (t->kind == TK_KIND_SCALAR) return lower_load_scalar(L, op);
    gio g = {0};
    gio_open(L, &g, op, t);
    g.fill = tk_lw_constf(L, t->dtype, op->fattr);
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(t));
    if (!r || L->dg->st) return L->dg->st;
    if (t->kind == TK_KIND_VEC)
        g2r_slow(L, &g, r->v);
    else
        tk_lw_branch2(L, gio_fast(L, &g), g2r_fast, g2r_masked, &g, r->n, r->v);
    return L->dg->st;
}

static tk_status lower_r2g(tk_lower *L, const tk_op *op) {
    const tk_value *val = op->opnds[op->nopnds - 1];
    gio g = {0};
    gio_open(L, &g, op, &val->type);
    g.val = tk_lw_get(L, val);
    g.add = op->attr[0] != 0;
    if (!g.val || L->dg->st) return L->dg->st;
    if (val->type.kind == TK_KIND_VEC || g.add) /* adds: element by element */
        r2g_slow(L, &g, NULL);
    else
        tk_lw_branch2(L, gio_fast(L, &g), r2g_fast, r2g_masked, &g, 0, NULL);
    return L->dg->st;
}

/* ---- register <-> shared ------------------------------------------------- */
typedef struct sio {
    const tk_type *t, *st;
    LLVMValueRef base, row0, col0, lrow, lcol; /* i32 */
    tk_lv *val;
    LLVMTypeRef ety;
    unsigned esz;
    bool border; /* ldmatrix in mma-B register order (see matrix_addr0) */
} sio;

static LLVMValueRef sio_addr(tk_lower *L, const sio *s, int i) {
    int rc, cc;
    tk_frag_pos(s->t, i, &rc, &cc);
    LLVMBuilderRef b = L->b;
    LLVMValueRef r = LLVMBuildAdd(b, s->row0, LLVMBuildAdd(b, s->lrow, tk_lw_i32c(L, rc), ""), "");
    LLVMValueRef c = LLVMBuildAdd(b, s->col0, LLVMBuildAdd(b, s->lcol, tk_lw_i32c(L, cc), ""), "");
    return tk_smem_addr(L, s->st, s->base, r, c);
}

/* ldmatrix / stmatrix address of this lane for subtile (I, J): lane 8m + rr
 * names row rr of 8x8 matrix m, which is register m of every lane. ROW tiles
 * (no .trans) order the matrices (rows 0-7, cols 0-7), (8-15, 0-7),
 * (0-7, 8-15), (8-15, 8-15); COL tiles (.trans) (0-7, 0-7), (0-7, 8-15),
 * (8-15, 0-7), (8-15, 8-15) - i.e. registers (e0,e1) .. (e6,e7).
 * B order (s->border, tiles that only feed mma as B): register k holds pair
 * (0, 2, 1, 3)[k] instead, i.e. (e0,e1) (e4,e5) (e2,e3) (e6,e7), so the
 * two registers of each mma n-half are adjacent in ldmatrix's 4-register
 * result; in the A order ptxas must copy them into a fresh pair before
 * every mma (4 moves per 2 mma). The matrix of pair p sits at rows
 * 8*(p&1), cols 8*(p>>1) of the subtile (ROW) or the transpose (COL), so
 * the B order just swaps which bit of m selects rows and which cols.
 * Subtile rows below the first are a constant offset away whenever the
 * layout allows (tk_smem_row_shift_ok): one address per column subtile
 * stays live instead of one per subtile. */
static LLVMValueRef matrix_addr0(tk_lower *L, const sio *s, int J) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef m = LLVMBuildLShr(b, L->lane, tk_lw_i32c(L, 3), "");
    LLVMValueRef rr = LLVMBuildAnd(b, L->lane, tk_lw_i32c(L, 7), "");
    LLVMValueRef one = tk_lw_i32c(L, 1), three = tk_lw_i32c(L, 3);
    LLVMValueRef lo = LLVMBuildAnd(b, m, one, ""), hi = LLVMBuildLShr(b, m, one, "");
    bool col = (s->t->layout == TK_COL) != s->border;
    LLVMValueRef r = LLVMBuildAdd(b, rr, LLVMBuildShl(b, col ? hi : lo, three, ""), "");
    LLVMValueRef c = LLVMBuildShl(b, col ? lo : hi, three, "");
    if (s->t->owner == TK_WARPGROUP) /* the warp's 16-row band */
        r = LLVMBuildAdd(b, r, LLVMBuildShl(b, L->wg_warp, tk_lw_i32c(L, 4), ""), "");
    /* Compile-time parts of the origin (a k-step, a subtile) are kept apart
     * from the lane's run-time part (tk_smem_addr_c): the latter is then
     * loop-invariant in a k-loop. */
    int64_t rc = 0, cc = 16 * (int64_t)J;
    if (LLVMIsAConstantInt(s->row0))
        rc = LLVMConstIntGetSExtValue(s->row0);
    else
        r = LLVMBuildAdd(b, s->row0, r, "");
    if (LLVMIsAConstantInt(s->col0))
        cc += LLVMConstIntGetSExtValue(s->col0);
    else
        c = LLVMBuildAdd(b, s->col0, c, "");
    return tk_smem_addr_c(L, s->st, s->base, r, rc, c, cc);
}

static LLVMValueRef matrix_addr(tk_lower *L, const sio *s, LLVMValueRef a0, int I, int J) {
    int step = s->t->owner == TK_WARPGROUP ? 64 : 16; /* rows between subtiles */
    if (tk_smem_row_shift_ok(s->st, step))
        return tk_lw_gep(L, a0, tk_lw_i32c(L, (int64_t)I * step * tk_smem_row_step(s->st)));
    LLVMValueRef row0 = s->row0;
    sio t = *s;
    t.row0 = LLVMBuildAdd(L->b, row0, tk_lw_i32c(L, I * step), "");
    return matrix_addr0(L, &t, J);
}

static void unpack2(tk_lower *L, LLVMValueRef reg, LLVMTypeRef ety, LLVMValueRef *out) {
    LLVMValueRef v = LLVMBuildBitCast(L->b, reg, LLVMVectorType(ety, 2), "");
    out[0] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 0), "");
    out[1] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 1), "");
}

static LLVMValueRef pack2(tk_lower *L, LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef v = LLVMGetPoison(LLVMVectorType(LLVMTypeOf(x), 2));
    v = LLVMBuildInsertElement(L->b, v, x, tk_lw_i32c(L, 0), "");
    return LLVMBuildInsertElement(L->b, v, y, tk_lw_i32c(L, 1), "");
}

static void s2r_ldmatrix(tk_lower *L, sio *s, LLVMValueRef *out) {
    const char *name = s->t->layout == TK_COL ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"
                                              : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16";
    for (int J = 0; J < tk_frag_subcols(s->t); J++) {
        LLVMValueRef a0 = matrix_addr0(L, s, J);
        for (int I = 0; I < tk_frag_subrows(s->t); I++) {
            LLVMValueRef p = matrix_addr(L, s, a0, I, J);
            LLVMValueRef r = tk_lw_intrin(L, name, &L->ps, 1, &p, 1);
            int base = (I * tk_frag_subcols(s->t) + J) * 8;
            for (unsigned k = 0; k < 4; k++) {
                unsigned pr = s->border ? (k >> 1) | ((k & 1) << 1) : k; /* pair in reg k */
                unpack2(L, LLVMBuildExtractValue(L->b, r, k, ""), s->ety, out + base + 2 * pr);
            }
        }
    }
}

static void r2s_stmatrix(tk_lower *L, sio *s) {
    const char *name = s->t->layout == TK_COL ? "llvm.nvvm.stmatrix.sync.aligned.m8n8.x4.trans.b16"
                                              : "llvm.nvvm.stmatrix.sync.aligned.m8n8.x4.b16";
    for (int J = 0; J < tk_frag_subcols(s->t); J++) {
        LLVMValueRef a0 = matrix_addr0(L, s, J);
        for (int I = 0; I < tk_frag_subrows(s->t); I++) {
            int base = (I * tk_frag_subcols(s->t) + J) * 8;
            LLVMValueRef a[5] = {matrix_addr(L, s, a0, I, J)};
            for (int k = 0; k < 4; k++)
                a[1 + k] = pack2(L, s->val->v[base + 2 * k], s->val->v[base + 2 * k + 1]);
            tk_lw_intrin(L, name, &L->ps, 1, a, 5);
        }
    }
}

static void s2r_fast(tk_lower *L, void *ctx, LLVMValueRef *out) {
    sio *s = ctx;
    if (s->esz == 2) {
        s2r_ldmatrix(L, s, out);
        return;
    }
    int step = s->t->layout == TK_ROW ? 2 : 1;
    LLVMTypeRef vt = LLVMVectorType(s->ety, 2);
    for (int i = 0; i < tk_frag_count(s->t); i += step) {
        if (step == 1) {
            out[i] = tk_lw_load(L, s->ety, sio_addr(L, s, i), s->esz);
            continue;
        }
        LLVMValueRef v = tk_lw_load(L, vt, sio_addr(L, s, i), 2 * s->esz);
        out[i] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 0), "");
        out[i + 1] = LLVMBuildExtractElement(L->b, v, tk_lw_i32c(L, 1), "");
    }
}

static void s2r_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    sio *s = ctx;
    for (int i = 0; i < tk_frag_count(s->t); i++)
        out[i] = tk_lw_load(L, s->ety, sio_addr(L, s, i), s->esz);
}

static void r2s_fast(tk_lower *L, void *ctx, LLVMValueRef *out) {
    sio *s = ctx;
    (void)out;
    if (s->esz == 2 && L->tgt->stmatrix) {
        r2s_stmatrix(L, s);
        return;
    }
    int step = s->t->layout == TK_ROW ? 2 : 1;
    for (int i = 0; i < tk_frag_count(s->t); i += step) {
        LLVMValueRef v = step == 2 ? pack2(L, s->val->v[i], s->val->v[i + 1]) : s->val->v[i];
        tk_lw_store(L, v, sio_addr(L, s, i), s->esz * (unsigned)step);
    }
}

static void r2s_slow(tk_lower *L, void *ctx, LLVMValueRef *out) {
    sio *s = ctx;
    (void)out;
    for (int i = 0; i < tk_frag_count(s->t); i++)
        tk_lw_store(L, s->val->v[i], sio_addr(L, s, i), s->esz);
}

/* smem, row0, col0 at operands 0..2. */
static bool sio_open(tk_lower *L, sio *s, const tk_op *op, const tk_type *t) {
    tk_lv *sm = tk_lw_get(L, op->opnds[0]);
    tk_lv *r0 = tk_lw_get(L, op->opnds[1]), *c0 = tk_lw_get(L, op->opnds[2]);
    if (!sm || !r0 || !c0) return false;
    *s = (sio){.t = t,
               .st = &op->opnds[0]->type,
               .base = sm->v[0],
               .row0 = tk_lw_to_i32(L, r0->v[0]),
               .col0 = tk_lw_to_i32(L, c0->v[0]),
               .lrow = tk_frag_lane_row(L, t),
               .lcol = tk_frag_lane_col(L, t),
               .ety = tk_lw_type(L, t->dtype),
               .esz = (unsigned)tk_dtype_size(t->dtype)};
    return true;
}

/* col0 % 8 == 0: every 8-element row segment is a whole 16-byte chunk. */
static LLVMValueRef sio_fast(tk_lower *L, const sio *s) {
    LLVMValueRef low = LLVMBuildAnd(L->b, s->col0, tk_lw_i32c(L, 7), "");
    return LLVMBuildICmp(L->b, LLVMIntEQ, low, tk_lw_i32c(L, 0), "");
}

static tk_status lower_s2r(tk_lower *L, const tk_op *op) {
    const tk_type *t = &op->res[0]->type;
    sio s;
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(t));
    if (!r || !sio_open(L, &s, op, t)) return L->dg->st;
    s.border = tk_lw_mma_b_only(L, op->res[0]);
    tk_lw_branch2(L, sio_fast(L, &s), s2r_fast, s2r_slow, &s, r->n, r->v);
    return L->dg->st;
}

static tk_status lower_r2s(tk_lower *L, const tk_op *op) {
    const tk_value *val = op->opnds[3];
    sio s;
    if (!sio_open(L, &s, op, &val->type) || !(s.val = tk_lw_get(L, val))) return L->dg->st;
    tk_lw_branch2(L, sio_fast(L, &s), r2s_fast, r2s_slow, &s, 0, NULL);
    return L->dg->st;
}

/* griddepcontrol (sm_90+). Elsewhere a kernel starts after the one before
 * it has ended (tk_launch launches it so), and both are no-ops. */
static tk_status lower_grid(tk_lower *L, const tk_op *op) {
    if (L->tgt->griddep)
        tk_lw_intrin(L,
                     op->opc == TK_OP_GRID_WAIT ? "llvm.nvvm.griddepcontrol.wait"
                                                : "llvm.nvvm.griddepcontrol.launch.dependents",
                     NULL, 0, NULL, 0);
    return L->dg->st;
}

tk_status tk_lower_memory(tk_lower *L, const tk_op *op) {
    switch (op->opc) {
    case TK_OP_SHARED: return lower_shared(L, op);
    case TK_OP_STAGE: return lower_stage(L, op);
    case TK_OP_NARROW: return lower_narrow(L, op);
    case TK_OP_LOAD_G2R: return lower_g2r(L, op);
    case TK_OP_STORE_R2G: return lower_r2g(L, op);
    case TK_OP_LOAD_S2R: return lower_s2r(L, op);
    case TK_OP_STORE_R2S: return lower_r2s(L, op);
    case TK_OP_COPY_G2S: return tk_lower_copy_g2s(L, op);
    case TK_OP_COPY_S2G: return tk_lower_copy_s2g(L, op);
    case TK_OP_ASYNC_COMMIT:
    case TK_OP_ASYNC_WAIT:
    case TK_OP_BARRIER: return lower_sync(L, op);
    case TK_OP_GRID_WAIT:
    case TK_OP_GRID_RELEASE: return lower_grid(L, op);
    default: return tk_lw_fail(L, TK_ERR_LLVM, "not a memory op");
    }
}
