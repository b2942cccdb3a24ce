/* Interpreter semantics of ids, constants and tensor dims (ops/ids.c).
 * All are per-thread values; only LANE_ID actually differs inside a warp. */
#include "ops/interp.h"

tk_sv tk_interp_const(tk_dtype dt, int64_t i, double f) {
    tk_sv v = {.i = 0};
    if (dt == TK_F32)
        v.f = (float)f;
    else
        v.i = tk_interp_wrap(dt, i);
    return v;
}

tk_sv tk_interp_arg_sv(tk_dtype param, const tk_arg *a) {
    tk_sv v = {.i = 0};
    if (param == TK_F32)
        v.f = (float)a->scalar.f;
    else
        v.i = tk_interp_wrap(param, a->scalar.i);
    return v;
}

/* The value thread t of the current block sees. */
static tk_sv id_value(const tk_interp *I, const tk_op *op, const tk_sv *opnd, int t) {
    tk_sv v = {.i = 0};
    switch (op->opc) {
    case TK_OP_BLOCK_ID: v.i = I->block[op->attr[0]]; break;
    case TK_OP_WARP_ID: v.i = t / 32; break;
    case TK_OP_WARPGROUP_ID: v.i = t / 128; break;
    case TK_OP_LANE_ID: v.i = t % 32; break;
    case TK_OP_CONST: v = tk_interp_const((tk_dtype)op->attr[1], op->attr[0], op->fattr); break;
    case TK_OP_DIM: v.i = tk_interp_view(I, opnd[t].i)->a.dims[op->attr[0]]; break;
    default: break;
    }
    return v;
}

tk_status tk_interp_ids(tk_interp *I, const tk_op *op) {
    const tk_sv *opnd = op->nopnds ? tk_interp_sv(I, op->opnds[0]) : NULL;
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int w = 0; w < I->warps; w++) {
        if (!tk_interp_warp_active(I, w)) continue;
        for (int t = 32 * w; t < 32 * w + 32; t++) r[t] = id_value(I, op, opnd, t);
    }
    return TK_OK;
}
