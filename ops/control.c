/* Structured control flow: FOR and IF (type rules and builder calls).
 *
 * FOR  operands: lo, hi, step, init[n]   region 0: args = (iv, carried[n]),
 *      yield = next[n]; results = carried values after the last trip.
 *      Bounds are i32/i64 scalars of one dtype, uniform over a warp.
 * IF   operand: cond (bool, uniform over a warp); region 0 = then,
 *      region 1 = else (may be empty); both yield the results' types.
 * Interpreter: ops/control_interp.c; lowering: ops/control_nv.c. */
#include <string.h>

#include "ops/build.h"

static bool warp_uniform_scalar(tk_kernel *k, tk_op *op, const tk_value *v, const char *what,
                                bool want_bool) {
    char b[64];
    tk_type_str(&v->type, b, sizeof b);
    if (v->type.kind != TK_KIND_SCALAR ||
        (want_bool ? v->type.dtype != TK_BOOL : !tk_dtype_is_int(v->type.dtype))) {
        tk_opfail(k, op, TK_ERR_TYPE, "%s is a %s; expected %s", what, b,
                  want_bool ? "a bool scalar" : "an i32/i64 scalar");
        return false;
    }
    if (v->uni == TK_UNI_THREAD) {
        tk_opfail(k, op, TK_ERR_SCOPE,
                  "%s (%%%u) varies across the lanes of a warp; control "
                  "flow must be uniform over a warp",
                  what, v->id);
        return false;
    }
    return true;
}

tk_status tk_rule_control(tk_kernel *k, tk_op *op) {
    if (op->opc == TK_OP_IF)
        return warp_uniform_scalar(k, op, op->opnds[0], "cond", true) ? TK_OK : k->status;
    static const char *names[3] = {"lo", "hi", "step"};
    for (int i = 0; i < 3; i++)
        if (!warp_uniform_scalar(k, op, op->opnds[i], names[i], false)) return k->status;
    if (op->opnds[0]->type.dtype != op->opnds[1]->type.dtype ||
        op->opnds[0]->type.dtype != op->opnds[2]->type.dtype)
        return tk_opfail(k, op, TK_ERR_TYPE,
                         "lo, hi and step have dtypes %s, %s, %s; they must "
                         "match",
                         tk_dtype_name(op->opnds[0]->type.dtype),
                         tk_dtype_name(op->opnds[1]->type.dtype),
                         tk_dtype_name(op->opnds[2]->type.dtype));
    for (int i = 3; i < op->nopnds; i++) {
        tk_kind kd = op->opnds[i]->type.kind;
        if (kd == TK_KIND_SMEM || kd == TK_KIND_GVIEW)
            return tk_opfail(k, op, TK_ERR_TYPE,
                             "loop-carried value %d is a memory handle; only "
                             "scalars, tiles and vectors can be carried",
                             i - 3);
    }
    return TK_OK;
}

/* ---- builder ------------------------------------------------------------ */
static tk_region *new_region(tk_kernel *k, tk_op *parent, int nargs) {
    tk_region *r = tk_arena_alloc(k->arena, sizeof *r);
    if (r && nargs) r->args = tk_arena_alloc(k->arena, sizeof(tk_value *) * (size_t)nargs);
    if (!r || (nargs && !r->args)) {
        tk_kfail(k, TK_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    r->parent = parent;
    r->nargs = nargs;
    return r;
}

static bool push(tk_kernel *k, tk_op *op, tk_region *r) {
    if (k->nopen >= TK_MAX_NEST) {
        tk_opfail(k, op, TK_ERR_STATE, "regions nested deeper than %d", TK_MAX_NEST);
        return false;
    }
    k->open[k->nopen++] = op;
    k->cur = r;
    return true;
}

/* The innermost open op if it is `opc`, else records an error. */
static tk_op *innermost(tk_kernel *k, tk_opcode opc, const char *fn) {
    if (!k || k->status) return NULL;
    tk_op *o = k->nopen ? k->open[k->nopen - 1] : NULL;
    if (!o || o->opc != opc) {
        tk_kfail(k, TK_ERR_STATE, "%s: the innermost open region is %s, not a '%s'", fn,
                 o ? tk_op_infos[o->opc].name : "the kernel body", tk_op_infos[opc].name);
        return NULL;
    }
    return o;
}

static bool alloc_vals(tk_kernel *k, int n, tk_value ***out) {
    *out = NULL;
    if (!n) return true;
    *out = tk_arena_alloc(k->arena, sizeof(tk_value *) * (size_t)n);
    if (!*out) tk_kfail(k, TK_ERR_NO_MEMORY, "out of memory");
    return *out != NULL;
}

/* Checks that `n` yielded values match `want` types (when want != NULL). */
static bool check_yield(tk_kernel *k, tk_op *op, const char *fn, int n, tk_value *const *vals,
                        int nwant, tk_value *const *want) {
    if (n < 0 || (n > 0 && !vals)) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: %d values but the array is NULL", fn, n);
        return false;
    }
    if (want && n != nwant) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: %d values given, the %s carries %d", fn, n,
                 tk_op_infos[op->opc].name, nwant);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!tk_check_operand(k, tk_op_infos[op->opc].name, i, vals[i])) return false;
        tk_kind kd = vals[i]->type.kind;
        /* The rule loop-carried values follow (tk_rule_control) and the
         * verifier enforces at finish; checked here so the error names the
         * call that made it. */
        if (kd == TK_KIND_SMEM || kd == TK_KIND_GVIEW) {
            tk_kfail(k, TK_ERR_TYPE,
                     "%s: value %d (%%%u) is a memory handle; only scalars, "
                     "tiles and vectors can be yielded",
                     fn, i, vals[i]->id);
            return false;
        }
        if (want && !tk_type_eq(&vals[i]->type, &want[i]->type)) {
            char a[64], b[64];
            tk_type_str(&vals[i]->type, a, sizeof a);
            tk_type_str(&want[i]->type, b, sizeof b);
            tk_kfail(k, TK_ERR_TYPE, "%s: value %d is a %s, expected a %s", fn, i, a, b);
            return false;
        }
    }
    return true;
}

tk_value *tk_for_begin(tk_kernel *k, tk_value *lo, tk_value *hi, tk_value *step, int n,
                       tk_value *const *init, tk_value **carried) {
    if (!k || k->status) return NULL;
    if (n < 0 || n > 64 || (n && (!init || !carried))) {
        tk_kfail(k, TK_ERR_INVALID_ARG,
                 "tk_for_begin: n is %d with init %s and carried %s; "
                 "expected 0..64 with both arrays given",
                 n, init ? "set" : "NULL", carried ? "set" : "NULL");
        return NULL;
    }
    tk_value *ops[3 + 64] = {lo, hi, step};
    for (int i = 0; i < n; i++) ops[3 + i] = init[i];
    tk_op *op = tk_build_op(k, TK_OP_FOR, 3 + n, ops);
    tk_region *body = op ? new_region(k, op, 1 + n) : NULL;
    if (!body || !alloc_vals(k, n, &op->res)) return NULL;
    op->nres = n;
    /* Results depend on the trip count too: varying bounds make them vary. */
    tk_uniformity ub = lo->uni > hi->uni ? lo->uni : hi->uni;
    if (step->uni > ub) ub = step->uni;
    for (int i = 0; i < n; i++) {
        if (!(op->res[i] = tk_new_value(k, init[i]->type))) return NULL;
        op->res[i]->def = op;
        op->res[i]->index = i;
        op->res[i]->uni = init[i]->uni > ub ? init[i]->uni : ub;
    }
    op->regions[0] = body;
    if (!push(k, op, body)) return NULL;
    for (int i = 0; i < 1 + n; i++) {
        tk_value *a = tk_new_value(k, i ? init[i - 1]->type : lo->type);
        if (!a) return NULL;
        a->region_arg = body;
        a->index = i;
        /* The iv is as uniform as the bounds; a carried value as its init
         * (tk_for_end checks that `next` is no less uniform). */
        tk_uniformity u = lo->uni > hi->uni ? lo->uni : hi->uni;
        a->uni = i ? init[i - 1]->uni : u > step->uni ? u : step->uni;
        body->args[i] = a;
        if (i) carried[i - 1] = a;
    }
    return body->args[0];
}

void tk_for_end(tk_kernel *k, int n, tk_value *const *next, tk_value **results) {
    tk_op *op = innermost(k, TK_OP_FOR, "tk_for_end");
    if (!op) return;
    tk_region *body = op->regions[0];
    if (!check_yield(k, op, "tk_for_end", n, next, body->nargs - 1, body->args + 1)) return;
    if (n && !results) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_for_end: results is NULL");
        return;
    }
    for (int i = 0; i < n; i++)
        if (next[i]->uni > body->args[1 + i]->uni) {
            tk_kfail(k, TK_ERR_SCOPE,
                     "tk_for_end: next value %d (%%%u) is less uniform than "
                     "the value it carries (%%%u); start it from an equally varying value",
                     i, next[i]->id, body->args[1 + i]->id);
            return;
        }
    if (!alloc_vals(k, n, &body->yield)) return;
    for (int i = 0; i < n; i++) body->yield[i] = next[i];
    body->nyield = n;
    k->nopen--;
    k->cur = op->parent;
    for (int i = 0; i < n; i++) results[i] = op->res[i];
}

void tk_if_begin(tk_kernel *k, tk_value *cond) {
    tk_op *op = tk_build_op(k, TK_OP_IF, 1, &cond);
    tk_region *then_r = op ? new_region(k, op, 0) : NULL;
    if (!then_r) return;
    op->regions[0] = then_r;
    push(k, op, then_r);
}

void tk_else(tk_kernel *k, int n, tk_value *const *then_yield) {
    tk_op *op = innermost(k, TK_OP_IF, "tk_else");
    if (!op) return;
    if (op->regions[1]) {
        tk_kfail(k, TK_ERR_STATE, "tk_else: this if (op #%u) already has an else", op->id);
        return;
    }
    if (!check_yield(k, op, "tk_else", n, then_yield, 0, NULL)) return;
    tk_region *then_r = op->regions[0], *else_r = new_region(k, op, 0);
    if (!else_r || !alloc_vals(k, n, &then_r->yield)) return;
    for (int i = 0; i < n; i++) then_r->yield[i] = then_yield[i];
    then_r->nyield = n;
    op->regions[1] = else_r;
    k->cur = else_r;
}

void tk_if_end(tk_kernel *k, int n, tk_value *const *yield, tk_value **results) {
    tk_op *op = innermost(k, TK_OP_IF, "tk_if_end");
    if (!op) return;
    tk_region *then_r = op->regions[0], *else_r = op->regions[1];
    if (!else_r && n) {
        tk_kfail(k, TK_ERR_STATE, "tk_if_end: an if without else cannot yield values (%d given)",
                 n);
        return;
    }
    if (else_r && !check_yield(k, op, "tk_if_end", n, yield, then_r->nyield, then_r->yield)) return;
    if (n && !results) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_if_end: results is NULL");
        return;
    }
    if (!else_r && !(else_r = op->regions[1] = new_region(k, op, 0))) return;
    if (!alloc_vals(k, n, &else_r->yield)) return;
    for (int i = 0; i < n; i++) else_r->yield[i] = yield[i];
    else_r->nyield = n;
    k->nopen--;
    k->cur = op->parent;
    if (!alloc_vals(k, n, &op->res)) return;
    op->nres = n;
    for (int i = 0; i < n; i++) {
        tk_value *r = tk_new_value(k, yield[i]->type);
        if (!r) return;
        r->def = op;
        r->index = i;
        tk_uniformity u =
            yield[i]->uni > then_r->yield[i]->uni ? yield[i]->uni : then_r->yield[i]->uni;
        r->uni = u > op->opnds[0]->uni ? u : op->opnds[0]->uni;
        op->res[i] = results[i] = r;
    }
}
