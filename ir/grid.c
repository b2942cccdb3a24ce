/* Grid expressions as postfix code, evaluated with the interpreter's scalar
 * semantics (see ir/grid.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grid.h"
#include "ops/interp.h"

/* The arithmetic a block count needs. Float math beyond + - * / is left
 * out: a grid is a count of blocks, and keeping exp/log/sqrt out keeps the
 * host's libm from deciding how many blocks run. */
bool tk_grid_op_ok(tk_opcode opc) {
    switch (opc) {
    case TK_OP_CONST: case TK_OP_DIM: case TK_OP_ADD: case TK_OP_SUB: case TK_OP_MUL:
    case TK_OP_DIV: case TK_OP_MIN: case TK_OP_MAX: case TK_OP_NEG: case TK_OP_ABS:
    case TK_OP_CVT: case TK_OP_REM: case TK_OP_CEIL_DIV: case TK_OP_LT: case TK_OP_LE:
    case TK_OP_GT: case TK_OP_GE: case TK_OP_EQ: case TK_OP_NE: case TK_OP_AND: case TK_OP_OR:
    case TK_OP_SELECT:
        return true;
    default:
        return false;
    }
}

__attribute__((format(printf, 4, 5)))
static tk_status gfail(char *err, size_t errn, tk_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errn) vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- building ----------------------------------------------------------- */
static tk_status emit(tk_grid_prog *g, tk_ginst in, char *err, size_t errn) {
    if (g->n >= TK_GRID_MAX_CODE)
        return gfail(err, errn, TK_ERR_UNSUPPORTED, "the grid expression has more than %d terms",
                     TK_GRID_MAX_CODE);
    if ((g->n & (g->n - 1)) == 0) { /* capacity doubles at powers of two */
        tk_ginst *c = realloc(g->code, (size_t)(g->n ? g->n * 2 : 8) * sizeof *c);
        if (!c) return gfail(err, errn, TK_ERR_NO_MEMORY, "out of memory");
        g->code = c;
    }
    g->code[g->n++] = in;
    return TK_OK;
}

static bool is_param(const tk_value *v) { return !v->def && !v->region_arg; }

static tk_status cannot(const tk_op *op, char *err, size_t errn) {
    return gfail(err, errn, TK_ERR_SCOPE, "the grid depends on op #%u (%s), which the host "
                 "cannot evaluate", op->id, tk_op_infos[op->opc].name);
}

/* Postfix code for v: operands first, then the op. The tree is expanded
 * (shared subexpressions repeat), which TK_GRID_MAX_CODE bounds; `depth`
 * bounds the recursion even on corrupt, cyclic IR. */
static tk_status emit_value(tk_grid_prog *g, const tk_value *v, int depth, char *err,
                            size_t errn) {
    const tk_op *op = v->def;
    if (depth > TK_GRID_MAX_CODE)
        return gfail(err, errn, TK_ERR_UNSUPPORTED, "the grid expression nests deeper than %d",
                     TK_GRID_MAX_CODE);
    if (!op) {
        if (!is_param(v) || v->type.kind != TK_KIND_SCALAR)
            return gfail(err, errn, TK_ERR_SCOPE, "the grid depends on %%%u, a %s", v->id,
                         v->region_arg ? "loop variable" : "tensor");
        tk_ginst p = {.op = TK_GOP_PARAM, .dt = (uint8_t)v->type.dtype, .param = v->index};
        return emit(g, p, err, errn);
    }
    if (v->type.kind != TK_KIND_SCALAR || !tk_grid_op_ok(op->opc) ||
        (op->opc == TK_OP_DIM && !is_param(op->opnds[0])))
        return cannot(op, err, errn);
    tk_ginst in = {.op = (int16_t)op->opc, .id = op->id, .attr = op->attr[0]};
    if (op->opc == TK_OP_CONST) {
        in.dt = (uint8_t)op->attr[1];
        in.f = op->fattr;
    } else if (op->opc == TK_OP_DIM) {
        in.param = op->opnds[0]->index;
    } else {
        in.dt = (uint8_t)op->opnds[0]->type.dtype;
        in.nopnds = (uint8_t)op->nopnds;
        for (int i = 0; i < op->nopnds; i++) {
            tk_status s = emit_value(g, op->opnds[i], depth + 1, err, errn);
            if (s) return s;
        }
    }
    return emit(g, in, err, errn);
}

static tk_status build(tk_grid_prog *g, const tk_value *const dims[3], char *err, size_t errn) {
    memset(g, 0, sizeof *g);
    for (int d = 0; d < 3; d++) {
        g->start[d] = g->n;
        tk_status s = dims[d] ? emit_value(g, dims[d], 0, err, errn) : TK_OK;
        if (s) {
            tk_grid_free(g);
            return s;
        }
        g->len[d] = g->n - g->start[d];
    }
    return TK_OK;
}

tk_status tk_grid_build(const tk_kernel *k, tk_grid_prog *g, char *err, size_t errn) {
    const tk_value *dims[3] = {k->grid[0], k->grid[1], k->grid[2]};
    return build(g, dims, err, errn);
}

tk_status tk_grid_check(const tk_value *v, char *err, size_t errn) {
    const tk_value *dims[3] = {v, NULL, NULL};
    tk_grid_prog g;
    tk_status s = build(&g, dims, err, errn);
    tk_grid_free(&g);
    return s;
}

void tk_grid_free(tk_grid_prog *g) {
    free(g->code);
    memset(g, 0, sizeof *g);
}

/* ---- evaluation --------------------------------------------------------- */
/* Runs one instruction on the value stack st holding *n values. */
static tk_status run_inst(const tk_ginst *in, const tk_arg *args, tk_sv *st, int *n,
                          const char **why) {
    tk_sv r = {.i = 0};
    tk_status s = TK_OK;
    tk_opcode opc = (tk_opcode)in->op;
    switch (in->op) {
    case TK_GOP_PARAM: r = tk_interp_arg_sv(&args[in->param]); break;
    case TK_OP_CONST: r = tk_interp_const((tk_dtype)in->dt, in->attr, in->f); break;
    case TK_OP_DIM: r.i = args[in->param].dims[in->attr]; break;
    default:
        *n -= in->nopnds;
        if (!strcmp(tk_op_infos[opc].family, "scalar"))
            s = tk_interp_eval_scalar(opc, (tk_dtype)in->dt, st + *n, &r, why);
        else
            s = tk_interp_eval_elementwise(opc, (tk_dtype)in->dt, in->attr, st + *n, &r, why);
    }
    st[(*n)++] = r;
    return s;
}

tk_status tk_grid_eval(const tk_grid_prog *g, const tk_arg *args, int64_t out[3], const char *fn,
                       char *err, size_t errn) {
    tk_sv st[TK_GRID_MAX_CODE];
    for (int d = 0; d < 3; d++) {
        out[d] = 1;
        if (!g->len[d]) continue; /* code may be NULL: no pointer arithmetic on it */
        const tk_ginst *in = g->code + g->start[d], *end = in + g->len[d];
        int n = 0;
        for (; in < end; in++) {
            const char *why = "";
            if (run_inst(in, args, st, &n, &why))
                return gfail(err, errn, TK_ERR_LAUNCH, "%s: grid dimension %d: op #%u (%s): %s",
                             fn, d, in->id, tk_op_infos[in->op].name, why);
        }
        out[d] = st[0].i; /* grid values are integers (verified) */
    }
    return TK_OK;
}
