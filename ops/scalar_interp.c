/* Interpreter semantics of the scalar-only ops (ops/scalar.c), per thread.
 *
 * REM: C remainder (sign of the dividend). CEIL_DIV: the quotient rounded
 * toward +infinity for every sign (for non-negative operands that is
 * (a + b - 1) / b, without its overflow). A zero divisor is TK_ERR_RUNTIME;
 * the one overflowing quotient (MIN / -1) wraps. ops/scalar_nv.c lowers the
 * same values, and the host evaluates grid expressions with these very
 * functions (ir/grid.c). */
#include "ops/interp.h"

/* Integer quotient/remainder; false on a zero divisor. */
static bool int_div(tk_opcode opc, int64_t a, int64_t b, int64_t *r) {
    if (b == 0) return false;
    if (b == -1) { /* a / -1 is -a, which wraps for INT64_MIN; the remainder is 0 */
        *r = opc == TK_OP_REM ? 0 : (int64_t)(0 - (uint64_t)a);
        return true;
    }
    int64_t q = a / b, m = a % b;
    if (opc == TK_OP_REM)
        *r = m;
    else
        *r = m != 0 && (m > 0) == (b > 0) ? q + 1 : q;
    return true;
}

tk_status tk_interp_eval_scalar(tk_opcode opc, tk_dtype dt, const tk_sv *x, tk_sv *r,
                                const char **why) {
    switch (opc) {
    case TK_OP_REM:
    case TK_OP_CEIL_DIV:
        if (!int_div(opc, x[0].i, x[1].i, &r->i)) {
            *why = "division by zero";
            return TK_ERR_RUNTIME;
        }
        r->i = tk_interp_wrap(dt, r->i);
        return TK_OK;
    case TK_OP_AND: r->i = x[0].i && x[1].i; return TK_OK;
    case TK_OP_OR: r->i = x[0].i || x[1].i; return TK_OK;
    default: *why = "the scalar family has no semantics for this op"; return TK_ERR_UNSUPPORTED;
    }
}

tk_status tk_interp_scalar(tk_interp *I, const tk_op *op) {
    const tk_sv *in[3] = {NULL, NULL, NULL};
    tk_dtype dt = op->opnds[0]->type.dtype;
    for (int i = 0; i < op->nopnds && i < 3; i++) in[i] = tk_interp_sv(I, op->opnds[i]);
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int w = 0; w < I->warps; w++) {
        if (!tk_interp_warp_active(I, w)) continue;
        for (int t = 32 * w; t < 32 * w + 32; t++) {
            tk_sv x[3] = {{0}};
            const char *why = "";
            for (int i = 0; i < op->nopnds && i < 3; i++) x[i] = in[i][t];
            tk_status s = tk_interp_eval_scalar(op->opc, dt, x, &r[t], &why);
            if (s) return tk_interp_fail(I, op, w, s, "%s (lane %d)", why, t % 32);
        }
    }
    return TK_OK;
}
