/* The printer: a stable, canonical text form of a kernel.
 *
 * Used by golden tests and as the kernel cache key, so it prints everything
 * that affects generated code and prints it the same way every time:
 *
 *   kernel gemm warps=4 smem=16384
 *     spec BM = 64
 *     param A: bf16 tensor rank 2
 *     param n: i32 scalar
 *     grid (%7, n, 1)
 *     %3 = const i64 64 spec BM
 *     %5 = shared 64x32 bf16 swizzle x2 @0
 *     %6 = add %3, %4 : i64
 *     %8 = for %9 = %2 to %6 step %1 iter(%10 = %7) -> 16x64 f32 row tile (warp) {
 *       %11 = mma %12, %13, %10 kind=ab : 16x64 f32 row tile (warp)
 *       yield %11
 *     }
 *     %14 = if %15 -> i32 {
 *       yield %3
 *     } else {
 *       yield %4
 *     }
 *
 * One op per line, two spaces of indentation per region level. Values are
 * %<id> (ids are dense and in creation order), parameters go by name.
 * Attributes print as name=value after the operands; any attribute field an
 * op does not use is printed too (a0=, a1=, f=) when it is not zero, so the
 * text never hides a difference. Floats print with %.9g when they are exact
 * f32 values, otherwise as hex floats (%a); NaNs with their bits. */
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)w + 1;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void indent(sbuf *b, int depth) { put(b, "%*s", depth * 2, ""); }

static void fmt_float(double d, char *buf, size_t n) {
    if (isnan(d)) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        snprintf(buf, n, "nan(0x%016llx)", (unsigned long long)u);
    } else if ((double)(float)d == d) {
        snprintf(buf, n, "%.9g", d);
    } else {
        snprintf(buf, n, "%a", d);
    }
    /* The text is a cache key: it must not change with the host program's
     * LC_NUMERIC, so whatever decimal separator printf used becomes '.'. */
    const char *dp = localeconv()->decimal_point;
    size_t dl = strlen(dp);
    char *at = dl && strcmp(dp, ".") ? strstr(buf, dp) : NULL;
    if (at) {
        *at = '.';
        memmove(at + 1, at + dl, strlen(at + dl) + 1);
    }
}

static bool fzero(double d) { return d == 0.0 && !signbit(d); }

static void value(sbuf *b, const tk_value *v) {
    if (!v)
        put(b, "<null>");
    else {
        char r[72];
        put(b, "%s", tk_value_ref(v, r, sizeof r));
    }
}

static void value_list(sbuf *b, int n, tk_value *const *v, const char *sep) {
    for (int i = 0; i < n; i++) {
        put(b, "%s", i ? sep : "");
        value(b, v ? v[i] : NULL);
    }
}

static void type(sbuf *b, const tk_type *t) {
    char s[96];
    tk_type_str(t, s, sizeof s);
    put(b, "%s", s);
}

/* ---- attributes --------------------------------------------------------- */
enum { U_A0 = 1, U_A1 = 2, U_F = 4 };

static const char *enum_name(int64_t v, const char *const *names, int n) {
    return v >= 0 && v < n ? names[v] : NULL;
}

/* An enum attribute: its name, or the raw number for an unknown value. */
static void attr_enum(sbuf *b, const char *key, int64_t v, const char *const *names, int n) {
    const char *s = enum_name(v, names, n);
    if (s)
        put(b, " %s=%s", key, s);
    else
        put(b, " %s=%lld", key, (long long)v);
}

static void attr_float(sbuf *b, const char *key, double d) {
    char f[48];
    fmt_float(d, f, sizeof f);
    put(b, " %s=%s", key, f);
}

static unsigned attrs_const(sbuf *b, const tk_op *op) {
    tk_dtype dt = (tk_dtype)op->attr[1];
    char f[48];
    if (dt == TK_F32) {
        fmt_float(op->fattr, f, sizeof f);
        put(b, " f32 %s", f);
        return U_A1 | U_F;
    }
    put(b, " %s %lld", tk_dtype_name(dt), (long long)op->attr[0]);
    /* Integer constants carry their value as a double too (derived). */
    return U_A0 | U_A1 | ((double)op->attr[0] == op->fattr ? U_F : 0);
}

/* Prints the attributes op uses, as its print column says (ir/ops.def);
 * returns the fields it printed. */
static unsigned attrs(sbuf *b, const tk_op *op) {
    static const char *const mma[] = {"ab", "abt", "atb", "atbt"};
    static const char *const mask[] = {"causal", "cols", "rows"};
    switch ((tk_print_form)tk_op_infos[op->opc].print) {
    case TK_PRINT_CONST: return attrs_const(b, op);
    case TK_PRINT_AXIS: put(b, " axis=%lld", (long long)op->attr[0]); return U_A0;
    case TK_PRINT_COL: put(b, " col=%lld", (long long)op->attr[0]); return U_A0;
    case TK_PRINT_TO: put(b, " to=%s", tk_dtype_name((tk_dtype)op->attr[0])); return U_A0;
    case TK_PRINT_PENDING: put(b, " pending=%lld", (long long)op->attr[0]); return U_A0;
    case TK_PRINT_MMA: attr_enum(b, "kind", op->attr[0], mma, 4); return U_A0;
    case TK_PRINT_AT:
        put(b, " at=%lld,%lld", (long long)op->attr[0], (long long)op->attr[1]);
        return U_A0 | U_A1;
    case TK_PRINT_MASK:
        attr_enum(b, "kind", op->attr[0], mask, 3);
        attr_float(b, "fill", op->fattr);
        return U_A0 | U_F;
    case TK_PRINT_FILL:
        if (!fzero(op->fattr)) attr_float(b, "fill", op->fattr);
        return U_F;
    case TK_PRINT_COPY:
        if (op->attr[0] == TK_COPY_ASYNC) put(b, " async");
        if (op->attr[0] == TK_COPY_TMA) put(b, " async tma");
        if (op->opc == TK_OP_COPY_G2S && op->attr[1]) put(b, " multicast");
        if (!fzero(op->fattr)) attr_float(b, "fill", op->fattr);
        return (op->attr[0] == TK_COPY_ASYNC || op->attr[0] == TK_COPY_TMA ? U_A0 : 0) |
               (op->opc == TK_OP_COPY_G2S ? U_A1 : 0) | U_F;
    case TK_PRINT_STORE:
        if (op->attr[0]) put(b, " add");
        return U_A0;
    default: return 0;
    }
}

static void attrs_rest(sbuf *b, const tk_op *op, unsigned used) {
    if (!(used & U_A0) && op->attr[0]) put(b, " a0=%lld", (long long)op->attr[0]);
    if (!(used & U_A1) && op->attr[1]) put(b, " a1=%lld", (long long)op->attr[1]);
    if (!(used & U_F) && !fzero(op->fattr)) attr_float(b, "f", op->fattr);
}

/* ---- ops and regions ---------------------------------------------------- */
static void region(sbuf *b, const tk_region *r, int depth);

static void results(sbuf *b, const tk_op *op) {
    if (op->nres <= 0) return;
    value_list(b, op->nres, op->res, ", ");
    put(b, " = ");
}

static void result_types(sbuf *b, const tk_op *op) {
    for (int i = 0; i < op->nres; i++) {
        put(b, i ? ", " : " -> ");
        if (op->res && op->res[i])
            type(b, &op->res[i]->type);
        else
            put(b, "<null>");
    }
}

static void yields(sbuf *b, const tk_region *r, int depth) {
    if (!r || r->nyield <= 0) return;
    indent(b, depth);
    put(b, "yield ");
    value_list(b, r->nyield, r->yield, ", ");
    put(b, "\n");
}

static void print_for(sbuf *b, const tk_op *op, int depth) {
    const tk_region *r = op->regions[0];
    put(b, "for ");
    value(b, r && r->nargs > 0 && r->args ? r->args[0] : NULL);
    put(b, " = ");
    value(b, op->opnds[0]);
    put(b, " to ");
    value(b, op->opnds[1]);
    put(b, " step ");
    value(b, op->opnds[2]);
    if (op->nopnds > 3) {
        put(b, " iter(");
        for (int i = 3; i < op->nopnds; i++) {
            put(b, "%s", i > 3 ? ", " : "");
            value(b, r && i - 2 < r->nargs && r->args ? r->args[i - 2] : NULL);
            put(b, " = ");
            value(b, op->opnds[i]);
        }
        put(b, ")");
    }
    result_types(b, op);
    put(b, " {\n");
    region(b, r, depth + 1);
    yields(b, r, depth + 1);
    indent(b, depth);
    put(b, "}\n");
}

static void print_if(sbuf *b, const tk_op *op, int depth) {
    const tk_region *t = op->regions[0], *e = op->regions[1];
    put(b, "if ");
    value(b, op->opnds[0]);
    result_types(b, op);
    put(b, " {\n");
    region(b, t, depth + 1);
    yields(b, t, depth + 1);
    if (e && (e->first || e->nyield > 0)) {
        indent(b, depth);
        put(b, "} else {\n");
        region(b, e, depth + 1);
        yields(b, e, depth + 1);
    }
    indent(b, depth);
    put(b, "}\n");
}

/* SHARED prints its type as its argument, with the byte offset. */
static void print_shared(sbuf *b, const tk_op *op) {
    const tk_type *t = op->nres > 0 && op->res[0] ? &op->res[0]->type : &op->want;
    static const char *const lay[] = {"plain", "swizzle", "pad"};
    const char *l = enum_name(t->smem, lay, 3);
    put(b, "shared %dx%d %s ", t->rows, t->cols, tk_dtype_name(t->dtype));
    if (l)
        put(b, "%s", l);
    else
        put(b, "layout%d", (int)t->smem);
    if (t->count != 1) put(b, " x%d", t->count);
    put(b, " @%lld", (long long)op->attr[0]);
    attrs_rest(b, op, U_A0);
    put(b, "\n");
}

static void print_op(sbuf *b, const tk_op *op, int depth) {
    indent(b, depth);
    if ((unsigned)op->opc >= TK_OP_COUNT) {
        put(b, "<opcode %d>\n", (int)op->opc);
        return;
    }
    results(b, op);
    tk_print_form form = (tk_print_form)tk_op_infos[op->opc].print;
    switch (form) {
    case TK_PRINT_FOR: print_for(b, op, depth); return;
    case TK_PRINT_IF: print_if(b, op, depth); return;
    case TK_PRINT_SHARED: print_shared(b, op); return;
    default: break;
    }
    put(b, "%s", tk_op_infos[op->opc].name);
    if (op->nopnds > 0) put(b, " ");
    value_list(b, op->nopnds, op->opnds, ", ");
    attrs_rest(b, op, attrs(b, op));
    bool is_const = form == TK_PRINT_CONST;
    if (is_const && op->nres > 0 && op->res[0] && op->res[0]->name)
        put(b, " spec %s", op->res[0]->name);
    if (!is_const && op->nres > 0 && op->res && op->res[0]) {
        put(b, " : ");
        type(b, &op->res[0]->type);
    }
    put(b, "\n");
}

static void region(sbuf *b, const tk_region *r, int depth) {
    if (!r) return;
    TK_FOREACH_OP(r, op) print_op(b, op, depth);
}

/* ---- the kernel --------------------------------------------------------- */
static void header(sbuf *b, const tk_kernel *k) {
    put(b, "kernel %s warps=%d smem=%zu", k->name, k->warps, k->smem_bytes);
    /* Printed only when set: kernels without them print (and hash) as before. */
    if (k->maxnreg) put(b, " maxnreg=%d", k->maxnreg);
    if (k->min_blocks) put(b, " min_blocks=%d", k->min_blocks);
    if (k->cluster) put(b, " cluster=%d", k->cluster);
    put(b, "\n");
    for (int i = 0; i < k->nspecs; i++)
        put(b, "  spec %s = %lld\n", k->specs[i].name, (long long)k->specs[i].value);
    for (int i = 0; i < k->nparams; i++) {
        const tk_value *p = k->params[i];
        put(b, "  param %s: %s ", p->name, tk_dtype_name(p->type.dtype));
        static const char *const cache[] = {"", " cache=stream", " cache=keep"};
        if (p->type.kind == TK_KIND_GVIEW)
            put(b, "tensor rank %d%s\n", p->type.rank, cache[k->cache[i]]);
        else
            put(b, "scalar\n");
    }
    put(b, "  grid (");
    for (int d = 0; d < 3; d++) {
        put(b, "%s", d ? ", " : "");
        if (k->grid[d])
            value(b, k->grid[d]);
        else
            put(b, "1");
    }
    put(b, ")\n");
}

tk_status tk_kernel_print(const tk_kernel *k, char **out) {
    if (!out) return TK_ERR_INVALID_ARG;
    *out = NULL;
    if (!k) return TK_ERR_INVALID_ARG;
    sbuf b = {.p = malloc(1024), .cap = 1024};
    if (!b.p) return TK_ERR_NO_MEMORY;
    header(&b, k);
    region(&b, k->body, 1);
    if (b.oom) {
        free(b.p);
        return TK_ERR_NO_MEMORY;
    }
    *out = b.p;
    return TK_OK;
}

void tk_canon_hash(const char *text, uint64_t out[2]) {
    XXH128_hash_t h = XXH3_128bits(text, strlen(text));
    out[0] = h.low64;
    out[1] = h.high64;
}
