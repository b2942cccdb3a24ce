/* libFuzzer target: the input bytes become a sequence of public builder
 * calls (ops, types, shapes, and misuse: NULL values, values of another
 * kernel, calls on a finished kernel, wrong ranks, unbalanced regions),
 * then tk_kernel_finish (the verifier), the printer and, for a finished
 * kernel, the interpreter on small host tensors. Built with ASan + UBSan
 * (scripts/fuzz.sh); tests/fuzz/run_corpus.c replays the corpus as a ctest
 * in every build. Any crash, sanitizer report or leak is a bug; a status
 * with a message is the expected answer to misuse.
 *
 * Operands are drawn from the values made so far; the decoder peeks at a
 * value's type (ir/ir.h) to prefer operands that fit, so that sequences get
 * past the first type error often enough to reach deep code. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tk/tk.h"

enum { MAXV = 96, MAXP = 6, MAXOPS = 160 };

typedef struct fz {
    const uint8_t *p;
    size_t n;
    tk_ctx *ctx;
    tk_kernel *k, *other; /* other: a second kernel, for foreign values */
    tk_value *v[MAXV];
    int nv, depth, ifs; /* open for loops / ifs                          */
    int kinds[8];       /* open regions, innermost last: 1 for, 2 if     */
    tk_value *carried[8][2];
    int ncar[8];
    struct {
        int tensor;
        tk_dtype dt;
        int rank;
    } par[MAXP];
    int np;
} fz;

static unsigned u8(fz *f) {
    if (!f->n) return 0;
    f->n--;
    return *f->p++;
}
static int pick(fz *f, int n) { return n > 0 ? (int)(u8(f) % (unsigned)n) : 0; }

static const tk_dtype dts[] = {TK_F32, TK_BF16, TK_F16,      TK_I32,
                               TK_I64, TK_BOOL, TK_FP8_E4M3, TK_DT_NONE};
static tk_dtype dtype(fz *f) { return dts[pick(f, 8)]; }
static int dimv(fz *f) {
    static const int d[] = {16, 32, 64, 16, 8, 1, 0, 17, -16, 48, 128, 256};
    return d[pick(f, 12)];
}

static void add(fz *f, tk_value *x) {
    if (x && f->nv < MAXV) f->v[f->nv++] = x;
}

/* Any value (sometimes NULL or a foreign one). */
static tk_value *any(fz *f) {
    unsigned c = u8(f);
    if (c == 255) return NULL;
    if (c == 254 && f->other) return tk_const_i32(f->other, 1);
    return f->nv ? f->v[c % (unsigned)f->nv] : NULL;
}

/* A value like `a` (same kind and dtype) when one exists, else any. */
static tk_value *like(fz *f, tk_value *a, tk_kind kind) {
    unsigned start = u8(f);
    if (start >= 240 || !f->nv) return any(f);
    for (int i = 0; i < f->nv; i++) {
        tk_value *x = f->v[(start + (unsigned)i) % (unsigned)f->nv];
        if (a ? x->type.kind == a->type.kind && x->type.dtype == a->type.dtype
              : x->type.kind == kind)
            return x;
    }
    return any(f);
}
static tk_value *scalar_int(fz *f) {
    unsigned start = u8(f);
    for (int i = 0; i < f->nv && start < 240; i++) {
        tk_value *x = f->v[(start + (unsigned)i) % (unsigned)f->nv];
        if (x->type.kind == TK_KIND_SCALAR && x->type.dtype == TK_I32) return x;
    }
    return tk_const_i32(f->k, (int32_t)pick(f, 4) * 16);
}

static tk_type tile_type(fz *f) {
    return tk_tile_type(dtype(f), dimv(f), dimv(f), (tk_owner)pick(f, 3), (tk_layout)pick(f, 3));
}

static void params(fz *f) {
    int n = pick(f, MAXP + 1);
    for (int i = 0; i < n; i++) {
        bool tensor = u8(f) & 1;
        tk_dtype dt = dtype(f);
        int rank = tensor ? 1 + pick(f, 5) : 0; /* 5: a wrong rank */
        tk_value *x =
            tensor ? tk_param_tensor(f->k, "t", dt, rank) : tk_param_scalar(f->k, "s", dt);
        if (!x) continue;
        f->par[f->np].tensor = tensor, f->par[f->np].dt = dt, f->par[f->np].rank = rank;
        f->np++;
        add(f, x);
    }
}

static void binary(fz *f, unsigned which) {
    typedef tk_value *(*bin)(tk_kernel *, tk_value *, tk_value *);
    static const bin b[] = {tk_add, tk_sub, tk_mul, tk_div, tk_max, tk_min, tk_rem, tk_ceil_div,
                            tk_lt,  tk_le,  tk_gt,  tk_ge,  tk_eq,  tk_ne,  tk_and, tk_or};
    tk_value *a = any(f);
    add(f, b[which % 16](f->k, a, like(f, a, TK_KIND_NONE)));
}

static void unary(fz *f, unsigned which) {
    typedef tk_value *(*un)(tk_kernel *, tk_value *);
    static const un u[] = {tk_neg,     tk_abs,     tk_exp,     tk_exp2,    tk_log,
                           tk_log2,    tk_sqrt,    tk_rsqrt,   tk_sin,     tk_cos,
                           tk_row_max, tk_row_sum, tk_col_max, tk_col_sum, tk_max_all};
    add(f, u[which % 15](f->k, any(f)));
}

static void idx(fz *f, tk_value **ix, int n) {
    for (int i = 0; i < n; i++) ix[i] = scalar_int(f);
}

static void memory(fz *f, unsigned which) {
    tk_value *ix[4];
    switch (which % 8) {
    case 0:
        add(f, tk_shared(f->k, dtype(f), dimv(f), dimv(f), (tk_smem_layout)pick(f, 4), pick(f, 4)));
        break;
    case 1: add(f, tk_stage(f->k, like(f, NULL, TK_KIND_SMEM), scalar_int(f))); break;
    case 2: {
        tk_value *src = u8(f) & 1 ? like(f, NULL, TK_KIND_GVIEW) : like(f, NULL, TK_KIND_SMEM);
        int r = src && src->type.kind == TK_KIND_GVIEW ? src->type.rank : 2;
        idx(f, ix, r);
        add(f, tk_load(f->k, tile_type(f), src, ix, 0.0f));
        break;
    }
    case 3: {
        tk_value *dst = u8(f) & 1 ? like(f, NULL, TK_KIND_GVIEW) : like(f, NULL, TK_KIND_SMEM);
        int r = dst && dst->type.kind == TK_KIND_GVIEW ? dst->type.rank : 2;
        idx(f, ix, r);
        tk_store(f->k, dst, ix, like(f, NULL, TK_KIND_TILE));
        break;
    }
    case 4: {
        tk_value *g = like(f, NULL, TK_KIND_GVIEW), *s = like(f, NULL, TK_KIND_SMEM);
        idx(f, ix, g && g->type.kind == TK_KIND_GVIEW ? g->type.rank : 2);
        if (u8(f) & 1)
            tk_copy_to_shared(f->k, s, g, ix, 0.0f, pick(f, 4));
        else
            tk_copy_to_global(f->k, g, ix, s);
        break;
    }
    case 5: tk_async_commit(f->k); break;
    case 6: tk_async_wait(f->k, pick(f, 4) - 1); break;
    default: tk_barrier(f->k); break;
    }
}

static void control(fz *f, unsigned which) {
    int d = f->depth;
    switch (which % 4) {
    case 0: { /* bounded trip counts: the interpreter runs every trip */
        if (d >= 3) break;
        tk_value *init[2] = {any(f), any(f)}, *car[2] = {0, 0};
        int n = pick(f, 3);
        tk_value *hi = tk_min(f->k, scalar_int(f), tk_const_i32(f->k, 3));
        tk_value *iv = tk_for_begin(f->k, tk_const_i32(f->k, 0), hi,
                                    tk_const_i32(f->k, 1 + pick(f, 2)), n, init, car);
        f->kinds[d] = 1, f->ncar[d] = n, f->depth++;
        f->carried[d][0] = car[0], f->carried[d][1] = car[1];
        add(f, iv);
        add(f, car[0]);
        add(f, car[1]);
        break;
    }
    case 1:
        if (d >= 3) break;
        tk_if_begin(f->k, like(f, NULL, TK_KIND_SCALAR));
        f->kinds[d] = 2, f->ncar[d] = 0, f->depth++;
        break;
    case 2: { /* close the innermost region (or one that is not open) */
        tk_value *next[2], *res[2] = {0, 0};
        int kind = d ? f->kinds[d - 1] : 1 + pick(f, 2);
        int n = d ? f->ncar[d - 1] : pick(f, 2);
        for (int i = 0; i < n; i++) next[i] = u8(f) < 200 && d ? f->carried[d - 1][i] : any(f);
        if (d) f->depth--, f->nv = f->nv; /* values inside stay: misuse to try */
        if (kind == 1) {
            tk_for_end(f->k, n, next, res);
        } else {
            tk_value *y[2] = {any(f), any(f)};
            int m = pick(f, 2);
            if (u8(f) & 1) tk_else(f->k, m, y);
            tk_if_end(f->k, m, y, res);
        }
        add(f, res[0]);
        add(f, res[1]);
        break;
    }
    default: tk_set_grid(f->k, u8(f) & 1 ? NULL : scalar_int(f), u8(f) & 1 ? NULL : any(f), NULL);
    }
}

static void leaf(fz *f, unsigned which) {
    switch (which % 10) {
    case 0: add(f, tk_const_i32(f->k, (int32_t)pick(f, 70) - 3)); break;
    case 1: add(f, tk_const_i64(f->k, (int64_t)pick(f, 70) - 3)); break;
    case 2: add(f, tk_const_f32(f->k, (float)pick(f, 16) * 0.25f - 1.0f)); break;
    case 3: add(f, tk_const_bool(f->k, pick(f, 2))); break;
    case 4: add(f, tk_block_id(f->k, pick(f, 4))); break;
    case 5: add(f, u8(f) & 1 ? tk_warp_id(f->k) : tk_lane_id(f->k)); break;
    case 6: add(f, tk_warpgroup_id(f->k)); break;
    case 7: add(f, tk_dim(f->k, like(f, NULL, TK_KIND_GVIEW), pick(f, 5))); break;
    case 8: add(f, tk_spec(f->k, "sp", pick(f, 64))); break;
    default: add(f, tk_cvt(f->k, any(f), dtype(f))); break;
    }
}

static void tiles(fz *f, unsigned which) {
    switch (which % 6) {
    case 0: add(f, tk_zeros(f->k, tile_type(f))); break;
    case 1: add(f, tk_fill(f->k, tile_type(f), like(f, NULL, TK_KIND_SCALAR))); break;
    case 2:
        add(f, tk_zeros(f->k, tk_vec_type(dtype(f), dimv(f), (tk_axis)pick(f, 3),
                                          (tk_owner)pick(f, 3), (tk_layout)pick(f, 3))));
        break;
    case 3: {
        tk_value *a = like(f, NULL, TK_KIND_TILE), *b = like(f, NULL, TK_KIND_TILE);
        add(f, tk_mma(f->k, (tk_mma_kind)pick(f, 5), a, b,
                      u8(f) & 1 ? NULL : like(f, NULL, TK_KIND_TILE)));
        break;
    }
    case 4:
        add(f, tk_mask(f->k, like(f, NULL, TK_KIND_TILE), (tk_mask_kind)pick(f, 4), scalar_int(f),
                       scalar_int(f), -1e30f));
        break;
    default: {
        tk_value *c = like(f, NULL, TK_KIND_SCALAR), *a = any(f);
        add(f, tk_select(f->k, c, a, like(f, a, TK_KIND_NONE)));
    }
    }
}

/* Small host tensors for every parameter; the interpreter's run. */
static void run(fz *f) {
    tk_arg args[MAXP];
    void *bufs[MAXP] = {0};
    for (int i = 0; i < f->np; i++) {
        if (!f->par[i].tensor) {
            int v = pick(f, 8) + 1;
            args[i] = f->par[i].dt == TK_F32   ? tk_arg_f32((float)v)
                      : f->par[i].dt == TK_I64 ? tk_arg_i64(v)
                                               : tk_arg_i32(v);
            args[i].dtype = f->par[i].dt;
            continue;
        }
        int64_t dims[4] = {1, 1, 1, 1}, n = 1;
        for (int d = 0; d < f->par[i].rank && d < 4; d++) n *= dims[d] = pick(f, 40);
        size_t esz = tk_dtype_size(f->par[i].dt);
        bufs[i] = calloc((size_t)n + 1, esz ? esz : 1);
        args[i] = tk_arg_tensor(bufs[i], f->par[i].dt, f->par[i].rank, dims);
    }
    int64_t g[3];
    if (tk_kernel_grid(f->k, f->np, args, g) == TK_OK && g[0] * g[1] * g[2] <= 4)
        tk_interp_run(f->k, f->np, args);
    for (int i = 0; i < f->np; i++) free(bufs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f;
    memset(&f, 0, sizeof f);
    f.p = data, f.n = size;
    if (tk_ctx_create(&f.ctx) != TK_OK) return 0;
    unsigned w = u8(&f);
    if (tk_kernel_create(f.ctx, w == 7 ? NULL : "fz", w == 9 ? 0 : 1 + (int)(w % 8), &f.k) ||
        tk_kernel_create(f.ctx, "other", 1, &f.other)) {
        tk_kernel_destroy(f.k);
        tk_ctx_destroy(f.ctx);
        return 0;
    }
    params(&f);
    for (int i = 0; i < MAXOPS && f.n; i++) {
        unsigned op = u8(&f), which = u8(&f);
        switch (op % 8) {
        case 0:
        case 1: leaf(&f, which); break;
        case 2: binary(&f, which); break;
        case 3: unary(&f, which); break;
        case 4: tiles(&f, which); break;
        case 5: memory(&f, which); break;
        case 6: control(&f, which); break;
        default:
            if (which == 0) {
                tk_kernel_finish(f.k);
            } /* then keep building: misuse */
            else if (which == 1)
                tk_param_scalar(f.k, "late", TK_I32);
            else if (which == 2) { /* any value, any policy (3: a bad one) */
                tk_value *v = like(&f, NULL, TK_KIND_GVIEW);
                tk_param_set_cache(f.k, v, pick(&f, 4));
            } else
                leaf(&f, which);
        }
    }
    while (f.depth > 0 && (u8(&f) & 3)) control(&f, 2);
    tk_kernel_finish(f.k);
    char *text = NULL;
    if (tk_kernel_print(f.k, &text) == TK_OK) tk_free(text);
    (void)tk_kernel_error(f.k);
    (void)tk_kernel_smem_bytes(f.k);
    if (tk_kernel_status(f.k) == TK_OK) run(&f);
    tk_kernel_destroy(f.k);
    tk_kernel_destroy(f.other);
    tk_ctx_destroy(f.ctx);
    return 0;
}
