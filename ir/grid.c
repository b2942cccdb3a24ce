/* Grid expressions compiled into postfix code (see ir/grid.h); the ops
 * layer evaluates it (ops/grid_eval.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grid.h"

/* ---- building ----------------------------------------------------------- */
static tk_status emit(tk_grid_prog *g, tk_ginst in, tk_diag *dg) {
    if (g->n >= TK_GRID_MAX_CODE)
        return tk_diag_fail(dg, TK_ERR_UNSUPPORTED, "the grid expression has more than %d terms",
                            TK_GRID_MAX_CODE);
    if ((g->n & (g->n - 1)) == 0) { /* capacity doubles at powers of two */
        tk_ginst *c = realloc(g->code, (size_t)(g->n ? g->n * 2 : 8) * sizeof *c);
        if (!c) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
        g->code = c;
    }
    g->code[g->n++] = in;
    return TK_OK;
}

static bool is_param(const tk_value *v) { return !v->def && !v->region_arg; }

static tk_status cannot(const tk_op *op, tk_diag *dg) {
    return tk_diag_fail(dg, TK_ERR_SCOPE,
                        "the grid depends on op #%u (%s), which the host "
                        "cannot evaluate",
                        op->id, tk_op_infos[op->opc].name);
}

/* Postfix code for v: operands first, then the op. The tree is expanded
 * (shared subexpressions repeat), which TK_GRID_MAX_CODE bounds; `depth`
 * bounds the recursion even on corrupt, cyclic IR. */
static tk_status emit_value(tk_grid_prog *g, const tk_value *v, int depth, tk_diag *dg) {
    const tk_op *op = v->def;
    if (depth > TK_GRID_MAX_CODE)
        return tk_diag_fail(dg, TK_ERR_UNSUPPORTED, "the grid expression nests deeper than %d",
                            TK_GRID_MAX_CODE);
    if (!op) {
        if (!is_param(v) || v->type.kind != TK_KIND_SCALAR)
            return tk_diag_fail(dg, TK_ERR_SCOPE, "the grid depends on %%%u, a %s", v->id,
                                v->region_arg ? "loop variable" : "tensor");
        tk_ginst p = {.op = TK_GOP_PARAM, .dt = (uint8_t)v->type.dtype, .param = v->index};
        return emit(g, p, dg);
    }
    if (v->type.kind != TK_KIND_SCALAR || !tk_op_infos[op->opc].grid ||
        (op->opc == TK_OP_DIM && !is_param(op->opnds[0])))
        return cannot(op, dg);
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
            tk_status s = emit_value(g, op->opnds[i], depth + 1, dg);
            if (s) return s;
        }
    }
    return emit(g, in, dg);
}

static tk_status build(tk_grid_prog *g, const tk_value *const dims[3], tk_diag *dg) {
    memset(g, 0, sizeof *g);
    for (int d = 0; d < 3; d++) {
        g->start[d] = g->n;
        tk_status s = dims[d] ? emit_value(g, dims[d], 0, dg) : TK_OK;
        if (s) {
            tk_grid_free(g);
            return s;
        }
        g->len[d] = g->n - g->start[d];
    }
    return TK_OK;
}

tk_status tk_grid_build(const tk_kernel *k, tk_grid_prog *g, tk_diag *dg) {
    const tk_value *dims[3] = {k->grid[0], k->grid[1], k->grid[2]};
    return build(g, dims, dg);
}

tk_status tk_grid_check(const tk_value *v, tk_diag *dg) {
    const tk_value *dims[3] = {v, NULL, NULL};
    tk_grid_prog g;
    tk_status s = build(&g, dims, dg);
    tk_grid_free(&g);
    return s;
}

void tk_grid_free(tk_grid_prog *g) {
    free(g->code);
    memset(g, 0, sizeof *g);
}
