/* Interpreter semantics of the memory ops (ops/memory.c).
 *
 * Global views are host buffers addressed by the argument's dims/strides
 * (checked at run start so no in-range offset overflows); an element is in
 * range when every coordinate is, else loads read `fill` (rounded to the
 * dtype) and stores skip it. Shared memory holds logical elements as floats;
 * a shared handle is the float offset of its stage 0, and STAGE i adds
 * i*rows*cols after checking i at run time.
 * Async copies (COPY_G2S attr[0]=1) snapshot the source when issued and land
 * in shared memory only when ASYNC_WAIT retires their group (or the block
 * ends). Groups count like cp.async groups: every ASYNC_COMMIT closes one,
 * even an empty one; ASYNC_WAIT n retires the oldest until at most n are
 * pending; copies not yet committed wait for a later commit + wait. The
 * model is per block: the verifier keeps these ops block-uniform. */
#include <stdlib.h>
#include <string.h>

#include "ops/interp.h"
#include "ops/race.h"

/* ---- global views ------------------------------------------------------- */
/* A rows×cols window of a view (a vector is one row of the last dim). */
typedef struct window {
    const tk_arg *a;
    int param;     /* the tensor it lies in (the race checker's)  */
    int64_t shift; /* a's first element's offset in that tensor   */
    bool none;     /* a leading index is out of range             */
    int64_t base;  /* offset of the leading indices              */
    int64_t r0, c0, rdim, cdim, rs, cs;
    int rows, cols;
} window;

static bool in_range(int64_t start, int i, int64_t dim) {
    return start >= -(int64_t)i && start < dim - i; /* 0 <= start+i < dim */
}

/* View operand `vi`, its indices following it, as seen by thread th. */
static window window_at(tk_interp *I, const tk_op *op, int vi, int th, bool tile, int rows,
                        int cols) {
    const tk_iview *v = tk_interp_view(I, tk_interp_sv(I, op->opnds[vi])[th].i);
    const tk_arg *a = &v->a;
    int rank = a->rank, lead = tile ? rank - 2 : rank - 1;
    window w = {.a = a,
                .param = v->param,
                .shift = v->shift,
                .rows = tile ? rows : 1,
                .cols = cols,
                .rdim = 1};
    for (int d = 0; d < rank; d++) {
        int64_t x = tk_interp_sv(I, op->opnds[vi + 1 + d])[th].i;
        if (d < lead) {
            w.none |= x < 0 || x >= a->dims[d];
            if (!w.none) w.base += x * a->strides[d];
        } else if (d == rank - 1) {
            w.c0 = x;
            w.cdim = a->dims[d];
            w.cs = a->strides[d];
        } else {
            w.r0 = x;
            w.rdim = a->dims[d];
            w.rs = a->strides[d];
        }
    }
    return w;
}

static float mem_read(const tk_arg *a, int64_t off) {
    switch (a->dtype) {
    case TK_F32: return ((const float *)a->data)[off];
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)a->data)[off]);
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)a->data)[off]);
    case TK_I32: return (float)((const int32_t *)a->data)[off];
    case TK_I64: return (float)((const int64_t *)a->data)[off];
    default: return 0.0f; /* no rule lets other dtypes meet a float tile */
    }
}

static void mem_write(const tk_arg *a, int64_t off, float v) {
    switch (a->dtype) {
    case TK_F32: ((float *)a->data)[off] = v; break;
    case TK_BF16: ((uint16_t *)a->data)[off] = tk_f32_to_bf16(v); break;
    case TK_F16: ((uint16_t *)a->data)[off] = tk_f32_to_f16(v); break;
    default: break; /* the rules only pair float tiles with float views */
    }
}

/* Offset of window element (i, j), or OUTSIDE when it is out of range.
 * An offset may be negative: a view with a negative stride (time reversed)
 * has its data pointer at an element above others. */
#define OUTSIDE INT64_MIN
static int64_t window_off(const window *w, int i, int j) {
    if (w->none || !in_range(w->r0, i, w->rdim) || !in_range(w->c0, j, w->cdim)) return OUTSIDE;
    return w->base + (w->r0 + i) * w->rs + (w->c0 + j) * w->cs;
}

static void gather(const window *w, float fill, float *dst) {
    for (int i = 0; i < w->rows; i++)
        for (int j = 0; j < w->cols; j++) {
            int64_t off = window_off(w, i, j);
            dst[(size_t)i * (size_t)w->cols + (size_t)j] =
                off == OUTSIDE ? fill : mem_read(w->a, off);
        }
}

/* Writes src through w. For a register value (t: its type, inst its
 * instance; NULL: shared memory, every element) only the rows of the warps
 * in `mask`: all of them, unless a warpgroup runs partly. */
/* add: each element is added to what the tensor holds (tk_store_add; the
 * interpreter runs one thing at a time, so this is the atomic add). */
static void scatter(const window *w, const float *src, uint32_t mask, const tk_type *t, int inst,
                    bool add) {
    for (int i = 0; i < w->rows; i++)
        for (int j = 0; j < w->cols; j++) {
            int64_t off = window_off(w, i, j);
            bool live = !t || tk_interp_row_live(mask, t, inst, t->kind == TK_KIND_TILE ? i : j);
            float x = src[(size_t)i * (size_t)w->cols + (size_t)j];
            if (off != OUTSIDE && live) mem_write(w->a, off, add ? mem_read(w->a, off) + x : x);
        }
}

/* The race checker's view of a window's in-range elements (ops/race.h). */
static tk_status race_window(tk_interp *I, const tk_op *op, int agent, const window *w,
                             bool write) {
    for (int i = 0; i < w->rows; i++)
        for (int j = 0; j < w->cols; j++) {
            int64_t off = window_off(w, i, j);
            tk_status s = off == OUTSIDE
                              ? TK_OK
                              : tk_race_global(I, op, agent, w->param, w->shift + off, write);
            if (s) return s;
        }
    return TK_OK;
}

/* ---- register <-> global ------------------------------------------------ */
/* A scalar load: each active thread reads the element at its indices (or
 * the fill), exactly for integers. */
static tk_status load_scalar(tk_interp *I, const tk_op *op) {
    tk_dtype dt = op->res[0]->type.dtype;
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int w = 0; w < I->warps; w++) {
        if (!tk_interp_warp_active(I, w)) continue;
        for (int th = 32 * w; th < 32 * w + 32; th++) {
            const tk_iview *v = tk_interp_view(I, tk_interp_sv(I, op->opnds[0])[th].i);
            const tk_arg *a = &v->a;
            int64_t off = 0;
            bool in = true;
            for (int d = 0; d < a->rank; d++) {
                int64_t x = tk_interp_sv(I, op->opnds[1 + d])[th].i;
                in = in && x >= 0 && x < a->dims[d];
                if (in) off += x * a->strides[d];
            }
            if (in && I->race) {
                tk_status s = tk_race_global(I, op, w, v->param, v->shift + off, false);
                if (s) return s;
            }
            if (dt == TK_F32)
                r[th].f = in ? ((const float *)a->data)[off] : (float)op->fattr;
            else if (dt == TK_I32)
                r[th].i = in ? ((const int32_t *)a->data)[off] : (int32_t)op->fattr;
            else
                r[th].i = in ? ((const int64_t *)a->data)[off] : (int64_t)op->fattr;
        }
    }
    return TK_OK;
}

static tk_status global_reg(tk_interp *I, const tk_op *op) {
    bool load = op->opc == TK_OP_LOAD_G2R;
    if (load && op->res[0]->type.kind == TK_KIND_SCALAR) return load_scalar(I, op);
    const tk_value *reg = load ? op->res[0] : op->opnds[op->nopnds - 1];
    const tk_type *t = &reg->type;
    bool tile = t->kind == TK_KIND_TILE;
    float fill = tk_interp_round(t->dtype, (float)op->fattr);
    for (int i = 0; i < tk_interp_ninst(I, t->owner); i++) {
        if (!tk_interp_inst_active(I, t->owner, i)) continue;
        int th = tk_interp_inst_thread(I, t->owner, i);
        window w = window_at(I, op, 0, th, tile, t->rows, tile ? t->cols : t->rows);
        tk_status s = I->race ? race_window(I, op, tk_race_agent(t->owner, i), &w, !load) : TK_OK;
        if (s) return s;
        if (load)
            gather(&w, fill, tk_interp_tile(I, reg, i));
        else
            scatter(&w, tk_interp_tile(I, reg, i), I->mask, t, i, op->attr[0] != 0);
    }
    return TK_OK;
}

/* ---- shared memory ------------------------------------------------------ */
/* The shared tile a handle names; handles are made by SHARED/STAGE, so a
 * bad one means a broken kernel, reported rather than trusted. */
static tk_status smem_at(tk_interp *I, const tk_op *op, int warp, int64_t off, const tk_type *t,
                         float **out) {
    size_t n = (size_t)t->rows * (size_t)t->cols;
    if (off < 0 || (size_t)off > I->smem_n || I->smem_n - (size_t)off < n)
        return tk_interp_fail(I, op, warp, TK_ERR_RUNTIME,
                              "shared handle at float offset %lld "
                              "lies outside the block's shared memory",
                              (long long)off);
    *out = I->smem + off;
    return TK_OK;
}

static tk_status shared_reg(tk_interp *I, const tk_op *op) {
    bool load = op->opc == TK_OP_LOAD_S2R;
    const tk_value *reg = load ? op->res[0] : op->opnds[3];
    const tk_type *t = &reg->type, *st = &op->opnds[0]->type;
    for (int i = 0; i < tk_interp_ninst(I, t->owner); i++) {
        if (!tk_interp_inst_active(I, t->owner, i)) continue;
        int th = tk_interp_inst_thread(I, t->owner, i);
        int64_t r0 = tk_interp_sv(I, op->opnds[1])[th].i, c0 = tk_interp_sv(I, op->opnds[2])[th].i;
        float *sm = NULL;
        tk_status s = smem_at(I, op, th / 32, tk_interp_sv(I, op->opnds[0])[th].i, st, &sm);
        if (s) return s;
        if (r0 < 0 || c0 < 0 || r0 > st->rows - t->rows || c0 > st->cols - t->cols)
            return tk_interp_fail(I, op, th / 32, TK_ERR_RUNTIME,
                                  "a %dx%d tile at (%lld, %lld) "
                                  "does not lie inside the %dx%d shared tile",
                                  t->rows, t->cols, (long long)r0, (long long)c0, st->rows,
                                  st->cols);
        float *reg_p = tk_interp_tile(I, reg, i);
        for (int r = 0; r < t->rows; r++) {
            if (!load && !tk_interp_row_live(I->mask, t, i, r)) continue; /* see scatter */
            float *row = sm + (size_t)(r0 + r) * (size_t)st->cols + (size_t)c0;
            if (I->race &&
                (s = tk_race_smem(I, op, tk_race_agent(t->owner, i), (size_t)(row - I->smem),
                                  (size_t)t->cols, load ? TK_RACE_READ : TK_RACE_WRITE)))
                return s;
            float *rr = reg_p + (size_t)r * (size_t)t->cols;
            memcpy(load ? rr : row, load ? row : rr, (size_t)t->cols * sizeof(float));
        }
    }
    return TK_OK;
}

static tk_status stage(tk_interp *I, const tk_op *op) {
    const tk_type *t = &op->opnds[0]->type;
    const tk_sv *base = tk_interp_sv(I, op->opnds[0]), *idx = tk_interp_sv(I, op->opnds[1]);
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int th = 0; th < I->nthreads; th++) {
        if (!tk_interp_warp_active(I, th / 32)) continue;
        if (idx[th].i < 0 || idx[th].i >= t->count)
            return tk_interp_fail(I, op, th / 32, TK_ERR_RUNTIME,
                                  "stage index %lld is out of "
                                  "range for a %d-stage shared tile (lane %d)",
                                  (long long)idx[th].i, t->count, th % 32);
        r[th].i = base[th].i + idx[th].i * t->rows * t->cols;
    }
    return TK_OK;
}

/* NARROW: each active thread's view, cut from its parent's (clamped: the
 * result never reaches outside it), into the thread's entry of the table. */
static tk_status narrow(tk_interp *I, const tk_op *op) {
    const tk_sv *parent = tk_interp_sv(I, op->opnds[0]);
    const tk_sv *start = tk_interp_sv(I, op->opnds[1]), *len = tk_interp_sv(I, op->opnds[2]);
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    int ax = (int)op->attr[0];
    int64_t base = I->view_base[op->res[0]->id];
    for (int th = 0; th < I->nthreads; th++) {
        if (!tk_interp_warp_active(I, th / 32)) continue;
        tk_iview v = *tk_interp_view(I, parent[th].i);
        int64_t size = v.a.dims[ax];
        int64_t s0 = start[th].i < 0 ? 0 : start[th].i > size ? size : start[th].i;
        int64_t n = len[th].i < 0 ? 0 : len[th].i > size - s0 ? size - s0 : len[th].i;
        int64_t step = s0 * v.a.strides[ax];
        v.a.data = (char *)v.a.data + step * (int64_t)tk_dtype_size(v.a.dtype);
        v.a.dims[ax] = n;
        v.shift += step;
        I->views[base + th] = v;
        r[th].i = base + th;
    }
    return TK_OK;
}

static tk_status shared_alloc(tk_interp *I, const tk_op *op) {
    const tk_type *t = &op->res[0]->type;
    size_t n = (size_t)t->rows * (size_t)t->cols * (size_t)t->count;
    if (I->smem_n - I->smem_top < n)
        return tk_interp_fail(I, op, -1, TK_ERR_RUNTIME,
                              "shared memory exhausted (a SHARED op "
                              "outside the kernel's top level?)");
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int th = 0; th < I->nthreads; th++) r[th].i = (int64_t)I->smem_top;
    I->smem_top += n;
    return TK_OK;
}

/* ---- block copies ------------------------------------------------------- */
static tk_status push_pending(tk_interp *I, const tk_op *op, size_t dst, float *data, size_t n) {
    if (I->npend == I->cappend) {
        size_t cap = I->cappend ? 2 * I->cappend : 16;
        tk_pending *p = realloc(I->pend, cap * sizeof *p);
        if (!p) {
            free(data);
            return tk_interp_fail(I, op, -1, TK_ERR_NO_MEMORY, "out of memory");
        }
        I->pend = p;
        I->cappend = cap;
    }
    I->pend[I->npend++] = (tk_pending){.op = op, .group = 0, .dst = dst, .n = n, .data = data};
    return TK_OK;
}

/* TK_COPY_MULTICAST: the cluster's first block records the copy; every
 * other block must make the same one (op, tensor, place) in the same order,
 * the GPU's multicast writing each block's tile from its peers' shares. */
static tk_status multicast(tk_interp *I, const tk_op *op, const window *w) {
    int64_t rec[TK_MC_FIELDS] = {op->id, w->param, w->shift, w->base, w->r0, w->c0};
    int64_t rank = I->block[0] % I->k->cluster;
    if (rank == 0) {
        if (I->nmc == I->capmc) {
            size_t cap = I->capmc ? 2 * I->capmc : 16;
            int64_t *m = realloc(I->mc, cap * TK_MC_FIELDS * sizeof *m);
            if (!m) return tk_interp_fail(I, op, -1, TK_ERR_NO_MEMORY, "out of memory");
            I->mc = m;
            I->capmc = cap;
        }
        memcpy(I->mc + I->nmc++ * TK_MC_FIELDS, rec, sizeof rec);
        I->mc_next = I->nmc;
        return TK_OK;
    }
    size_t i = I->mc_next++;
    if (i >= I->nmc)
        return tk_interp_fail(I, op, -1, TK_ERR_RUNTIME,
                              "TK_COPY_MULTICAST broken: this block of its cluster makes multicast "
                              "copy %zu, its cluster's first block made %zu",
                              i + 1, I->nmc);
    const int64_t *ref = I->mc + i * TK_MC_FIELDS;
    if (memcmp(ref, rec, sizeof rec))
        return tk_interp_fail(
            I, op, -1, TK_ERR_RUNTIME,
            "TK_COPY_MULTICAST broken: multicast copy %zu of this block (op %%%lld, "
            "tensor %lld at row %lld, col %lld) is not its cluster's first "
            "block's (op %%%lld, tensor %lld at row %lld, col %lld)",
            i + 1, (long long)rec[0], (long long)rec[1], (long long)rec[4], (long long)rec[5],
            (long long)ref[0], (long long)ref[1], (long long)ref[4], (long long)ref[5]);
    return TK_OK;
}

tk_status tk_interp_multicast_end(tk_interp *I) {
    if (I->k->cluster < 2 || I->block[0] % I->k->cluster == 0 || I->mc_next == I->nmc) return TK_OK;
    return tk_diag_fail(&I->diag, TK_ERR_RUNTIME,
                        "tk_interp_run: block (%lld,%lld,%lld): TK_COPY_MULTICAST broken: the "
                        "block made %zu multicast copies, its cluster's first block %zu",
                        (long long)I->block[0], (long long)I->block[1], (long long)I->block[2],
                        I->mc_next, I->nmc);
}

static tk_status copy(tk_interp *I, const tk_op *op) {
    bool g2s = op->opc == TK_OP_COPY_G2S;
    int th = tk_interp_block_thread(I), sm_i = g2s ? 0 : op->nopnds - 1, vi = g2s ? 1 : 0;
    const tk_type *st = &op->opnds[sm_i]->type;
    float *sm = NULL;
    tk_status s = smem_at(I, op, -1, tk_interp_sv(I, op->opnds[sm_i])[th].i, st, &sm);
    if (s) return s;
    window w = window_at(I, op, vi, th, true, st->rows, st->cols);
    if (g2s && op->attr[1] && (s = multicast(I, op, &w))) return s;
    size_t n = (size_t)st->rows * (size_t)st->cols, at = (size_t)(sm - I->smem);
    if (I->race) {
        /* A block copy's elements are spread over every thread (ops/race.h). */
        tk_race_kind kind = !g2s ? TK_RACE_READ : op->attr[0] ? TK_RACE_ISSUE : TK_RACE_WRITE;
        if ((s = race_window(I, op, TK_RACE_BLOCK, &w, !g2s)) ||
            (s = tk_race_smem(I, op, TK_RACE_BLOCK, at, n, kind)))
            return s;
    }
    if (!g2s) {
        scatter(&w, sm, 0, NULL, 0, op->attr[0] != 0);
        return TK_OK;
    }
    float fill = tk_interp_round(st->dtype, (float)op->fattr);
    if (!op->attr[0]) {
        gather(&w, fill, sm);
        return TK_OK;
    }
    float *snap = malloc(n * sizeof(float));
    if (!snap) return tk_interp_fail(I, op, -1, TK_ERR_NO_MEMORY, "out of memory");
    gather(&w, fill, snap);
    return push_pending(I, op, at, snap, n);
}

void tk_interp_async_apply(tk_interp *I, int64_t upto) {
    size_t done = 0;
    for (; done < I->npend; done++) {
        tk_pending *p = &I->pend[done];
        if (upto != INT64_MAX && (p->group == 0 || p->group > upto)) break;
        memcpy(I->smem + p->dst, p->data, p->n * sizeof(float));
        if (I->race) tk_race_landed(I, p->op, p->dst, p->n);
        free(p->data);
    }
    if (!done) return;
    memmove(I->pend, I->pend + done, (I->npend - done) * sizeof *I->pend);
    I->npend -= done;
}

static void async_commit(tk_interp *I) {
    I->groups_committed++;
    for (size_t i = 0; i < I->npend; i++)
        if (!I->pend[i].group) I->pend[i].group = I->groups_committed;
}

static void async_wait(tk_interp *I, int64_t pending) {
    int64_t target = I->groups_committed - pending;
    if (target <= I->groups_applied) return;
    tk_interp_async_apply(I, target);
    I->groups_applied = target;
}

tk_status tk_interp_memory(tk_interp *I, const tk_op *op) {
    switch (op->opc) {
    case TK_OP_SHARED: return shared_alloc(I, op);
    case TK_OP_STAGE: return stage(I, op);
    case TK_OP_NARROW: return narrow(I, op);
    case TK_OP_LOAD_G2R:
    case TK_OP_STORE_R2G: return global_reg(I, op);
    case TK_OP_LOAD_S2R:
    case TK_OP_STORE_R2S: return shared_reg(I, op);
    case TK_OP_COPY_G2S:
    case TK_OP_COPY_S2G: return copy(I, op);
    case TK_OP_ASYNC_COMMIT: async_commit(I); return TK_OK;
    case TK_OP_ASYNC_WAIT: async_wait(I, op->attr[0]); return TK_OK;
    case TK_OP_BARRIER: /* lockstep execution (ops/interp.c): only the race checker cares */
        if (I->race) tk_race_barrier(I);
        return TK_OK;
    case TK_OP_GRID_WAIT: /* one kernel at a time: the ones before have ended */
    case TK_OP_GRID_RELEASE: return TK_OK;
    default: return tk_interp_fail(I, op, -1, TK_ERR_RUNTIME, "not a memory op");
    }
}
