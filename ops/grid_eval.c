/* Grid programs evaluated on the host with the interpreter's scalar
 * semantics (see ops/grid_eval.h; ir/grid.c compiles them). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ops/grid_eval.h"
#include "ops/interp.h"

/* One grid-evaluable op (the table's grid column) by its family's scalar
 * semantics; CONST and DIM are leaves, handled by the caller. */
static tk_status eval_op(const tk_ginst *in, const tk_sv *x, tk_sv *r, const char **why) {
    tk_opcode opc = (tk_opcode)in->op;
    const char *fam = tk_op_infos[opc].family;
    if (!strcmp(fam, "scalar")) return tk_interp_eval_scalar(opc, (tk_dtype)in->dt, x, r, why);
    if (!strcmp(fam, "elementwise"))
        return tk_interp_eval_elementwise(opc, (tk_dtype)in->dt, in->attr, x, r, why);
    *why = "its family has no host semantics";
    return TK_ERR_UNSUPPORTED;
}

/* Whether an i32 result wrapped: the kernel computes the grid with the same
 * 32-bit arithmetic, so a size past it would launch a wrong grid (often a
 * tiny one: a silent success). Recomputed in i64, the exact value differs;
 * a conversion to i32 differs from its operand. */
static bool wrapped(const tk_ginst *in, const tk_sv *x, tk_sv r) {
    if (in->op == TK_OP_CVT)
        return in->attr == TK_I32 && (in->dt == TK_I64 || in->dt == TK_I32) && x[0].i != r.i;
    if (in->dt != TK_I32) return false;
    tk_ginst wide = *in;
    wide.dt = TK_I64;
    tk_sv w = {.i = 0};
    const char *why = "";
    return eval_op(&wide, x, &w, &why) == TK_OK && w.i != r.i;
}

/* Runs one instruction on the value stack st holding *n values. */
static tk_status run_inst(const tk_ginst *in, const tk_arg *args, tk_sv *st, int *n,
                          const char **why) {
    tk_sv r = {.i = 0};
    tk_status s = TK_OK;
    switch (in->op) {
    case TK_GOP_PARAM: r = tk_interp_arg_sv((tk_dtype)in->dt, &args[in->param]); break;
    case TK_OP_CONST: r = tk_interp_const((tk_dtype)in->dt, in->attr, in->f); break;
    case TK_OP_DIM: r.i = args[in->param].dims[in->attr]; break;
    default:
        *n -= in->nopnds;
        s = eval_op(in, st + *n, &r, why);
        if (s == TK_OK && wrapped(in, st + *n, r)) {
            *why = "a size overflows the kernel's 32-bit (i32) arithmetic";
            s = TK_ERR_LAUNCH;
        }
    }
    st[(*n)++] = r;
    return s;
}

tk_status tk_grid_eval(const tk_grid_prog *g, const tk_arg *args, int64_t out[3], const char *fn,
                       tk_diag *dg) {
    tk_sv st[TK_GRID_MAX_CODE];
    for (int d = 0; d < 3; d++) {
        out[d] = 1;
        if (!g->len[d]) continue; /* code may be NULL: no pointer arithmetic on it */
        const tk_ginst *in = g->code + g->start[d], *end = in + g->len[d];
        int n = 0;
        for (; in < end; in++) {
            const char *why = "";
            if (run_inst(in, args, st, &n, &why)) {
                return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s: grid dimension %d: op #%u (%s): %s", fn,
                                    d, in->id, tk_op_infos[in->op].name, why);
            }
        }
        out[d] = st[0].i; /* grid values are integers (verified) */
    }
    return TK_OK;
}
