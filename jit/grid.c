/* Grid expressions as postfix code (see jit/grid.h). Integers compute in
 * int64 with the kernel's wrap-around (narrowed to i32 where typed so),
 * floats in double rounded to float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jit/grid.h"
#include "jit/jit.h"

static int tk_dt_float(int dt) { return dt == TK_F32 || dt == TK_BF16 || dt == TK_F16; }

static tk_status tk_grid_emit(tk_grid_prog *g, tk_ginst in, char *err, size_t errn)
{
    if (g->n >= TK_GRID_MAX_CODE)
        return tk_errf(err, errn, TK_ERR_UNSUPPORTED, "grid expression too large");
    if ((g->n & (g->n - 1)) == 0) { /* capacity doubles at powers of two */
        tk_ginst *c = realloc(g->code, (size_t)(g->n ? g->n * 2 : 8) * sizeof *c);
        if (!c)
            return tk_errf(err, errn, TK_ERR_NO_MEMORY, "out of memory");
        g->code = c;
    }
    g->code[g->n++] = in;
    return TK_OK;
}

/* Postfix code for v: operands first, then the op. */
static tk_status tk_grid_value(tk_grid_prog *g, const tk_value *v, char *err, size_t errn)
{
    tk_ginst in = { .op = TK_GOP_PARAM, .dt = (uint8_t)v->type.dtype, .param = v->index };
    const tk_op *op = v->def;
    if (!op && (v->region_arg || v->type.kind != TK_KIND_SCALAR))
        return tk_errf(err, errn, TK_ERR_UNSUPPORTED, "grid uses a value that is no parameter");
    if (op) {
        in.op = (int16_t)op->opc;
        switch (op->opc) {
        case TK_OP_CONST: in.i = op->attr[0]; in.f = op->fattr; break;
        case TK_OP_DIM: in.param = op->opnds[0]->index; in.dim = (int32_t)op->attr[0]; break;
        case TK_OP_ADD: case TK_OP_SUB: case TK_OP_MUL: case TK_OP_DIV: case TK_OP_MIN:
        case TK_OP_MAX: case TK_OP_REM: case TK_OP_CEIL_DIV: case TK_OP_LT: case TK_OP_LE:
        case TK_OP_GT: case TK_OP_GE: case TK_OP_EQ: case TK_OP_NE: case TK_OP_AND:
        case TK_OP_OR: case TK_OP_SELECT: case TK_OP_NEG: case TK_OP_ABS: case TK_OP_CVT:
            for (int i = 0; i < op->nopnds; i++) {
                tk_status s = tk_grid_value(g, op->opnds[i], err, errn);
                if (s != TK_OK)
                    return s;
            }
            in.opdt = (uint8_t)op->opnds[op->opc == TK_OP_SELECT]->type.dtype;
            break;
        default:
            return tk_errf(err, errn, TK_ERR_UNSUPPORTED, "op '%s' cannot appear in a grid",
                           tk_op_infos[op->opc].name);
        }
    }
    return tk_grid_emit(g, in, err, errn);
}

tk_status tk_grid_build(const tk_kernel *k, tk_grid_prog *g, char *err, size_t errn)
{
    memset(g, 0, sizeof *g);
    for (int d = 0; d < 3; d++) {
        g->start[d] = g->n;
        tk_status s = k->grid[d] ? tk_grid_value(g, k->grid[d], err, errn) : TK_OK;
        if (s != TK_OK) {
            tk_grid_free(g);
            return s;
        }
        g->len[d] = g->n - g->start[d];
    }
    return TK_OK;
}

void tk_grid_free(tk_grid_prog *g)
{
    free(g->code);
    memset(g, 0, sizeof *g);
}

typedef union { int64_t i; double f; } tk_gval;

/* Converts between the integer and float domains (float->int truncates). */
static tk_gval tk_convert(int from, int to, tk_gval v)
{
    if (tk_dt_float(from) && !tk_dt_float(to))
        v.i = isnan(v.f) ? 0 : fabs(v.f) >= 9.2e18 ? (v.f > 0 ? INT64_MAX : INT64_MIN)
                                                    : (int64_t)v.f;
    else if (!tk_dt_float(from) && tk_dt_float(to))
        v.f = (double)v.i;
    if (to == TK_I32)
        v.i = (int32_t)(uint32_t)(uint64_t)v.i; /* the kernel's registers wrap */
    else if (to == TK_BOOL)
        v.i = v.i != 0;
    else if (tk_dt_float(to))
        v.f = (float)v.f;
    return v;
}

/* A binary op; -1 on integer division by zero. */
static int tk_binary(int op, int fl, tk_gval a, tk_gval b, tk_gval *r)
{
    uint64_t ua = (uint64_t)a.i, ub = (uint64_t)b.i; /* wrap, no signed-overflow UB */
    int lt = fl ? a.f < b.f : a.i < b.i, gt = fl ? a.f > b.f : a.i > b.i, eq = !lt && !gt;
    switch (op) {
    case TK_OP_ADD: if (fl) r->f = a.f + b.f; else r->i = (int64_t)(ua + ub); return 0;
    case TK_OP_SUB: if (fl) r->f = a.f - b.f; else r->i = (int64_t)(ua - ub); return 0;
    case TK_OP_MUL: if (fl) r->f = a.f * b.f; else r->i = (int64_t)(ua * ub); return 0;
    case TK_OP_MIN: *r = lt ? a : b; return 0;
    case TK_OP_MAX: *r = gt ? a : b; return 0;
    case TK_OP_LT: r->i = lt; return 0;
    case TK_OP_LE: r->i = lt || eq; return 0;
    case TK_OP_GT: r->i = gt; return 0;
    case TK_OP_GE: r->i = gt || eq; return 0;
    case TK_OP_EQ: r->i = eq; return 0;
    case TK_OP_NE: r->i = !eq; return 0;
    case TK_OP_AND: r->i = a.i && b.i; return 0;
    case TK_OP_OR: r->i = a.i || b.i; return 0;
    }
    if (fl) { /* only DIV is defined on floats */
        r->f = a.f / b.f;
        return 0;
    }
    if (b.i == 0)
        return -1;
    if (a.i == INT64_MIN && b.i == -1) { /* the one overflowing quotient wraps */
        r->i = op == TK_OP_REM ? 0 : INT64_MIN;
        return 0;
    }
    int64_t q = a.i / b.i, m = a.i % b.i;
    if (op == TK_OP_CEIL_DIV && m != 0 && (m > 0) == (b.i > 0))
        q++; /* round toward +infinity */
    r->i = op == TK_OP_REM ? m : q;
    return 0;
}

tk_status tk_grid_eval(const tk_grid_prog *g, const tk_arg *args, int64_t out[3], char *err,
                       size_t errn)
{
    tk_gval st[TK_GRID_MAX_CODE];
    for (int d = 0; d < 3; d++) {
        int n = 0, dt = TK_I64;
        for (const tk_ginst *in = g->code + g->start[d]; in < g->code + g->start[d] + g->len[d];
             in++) {
            tk_gval r = { 0 };
            int fl = tk_dt_float(in->opdt);
            dt = in->dt;
            switch (in->op) {
            case TK_GOP_PARAM:
                if (tk_dt_float(dt)) r.f = args[in->param].scalar.f;
                else r.i = args[in->param].scalar.i;
                break;
            case TK_OP_CONST: if (tk_dt_float(dt)) r.f = in->f; else r.i = in->i; break;
            case TK_OP_DIM: r.i = args[in->param].dims[in->dim]; break;
            case TK_OP_NEG: r = st[--n]; if (fl) r.f = -r.f; else r.i = (int64_t)(0 - (uint64_t)r.i); break;
            case TK_OP_ABS: r = st[--n]; if (fl) r.f = fabs(r.f); else if (r.i < 0) r.i = (int64_t)(0 - (uint64_t)r.i); break;
            case TK_OP_CVT: r = tk_convert(in->opdt, dt, st[--n]); break;
            case TK_OP_SELECT: n -= 3; r = st[n].i ? st[n + 1] : st[n + 2]; break;
            default:
                n -= 2;
                if (tk_binary(in->op, fl, st[n], st[n + 1], &r) != 0)
                    return tk_errf(err, errn, TK_ERR_LAUNCH,
                                   "tk_launch: grid[%d] divides by zero", d);
            }
            st[n++] = tk_convert(dt, dt, r);
        }
        out[d] = g->len[d] ? tk_convert(dt, TK_I64, st[0]).i : 1;
    }
    return TK_OK;
}
