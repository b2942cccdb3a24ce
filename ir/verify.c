/* The verifier, run by tk_kernel_finish. One walk over the region tree, in
 * program order, checks
 *  - structure: operand/result counts against the op table; FOR/IF regions
 *    (arguments, yields, results agree in number and type); nothing open;
 *  - SSA: operands and yields are defined before use and visible (live in
 *    an enclosing region); nothing is defined twice;
 *  - types: each op's rule (from the table the ops layer passes in) re-run
 *    on a scratch copy of the op must give the recorded result type (and,
 *    for SHARED, the recorded offset);
 *  - tk_wgmma results read only through tk_wgmma_wait (check_in_flight);
 *  - scopes: recorded scopes and uniformity claims; scalar operands of tile
 *    and block ops; block ops only under block-uniform ifs/loops; warpgroup
 *    tiles need a multiple of 4 warps;
 *  - the grid: expressions of constants, dims and parameters that ir/grid.c
 *    can compile into host code (compiled only: nothing is evaluated here).
 * The first problem becomes the kernel's error, naming "tk_<op> (op #id)". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grid.h"
#include "ir/ir.h"

enum { V_UNSEEN = 0, V_LIVE = 1, V_DEAD = 2, V_LIFE = 3 };

typedef struct vctx {
    tk_kernel *k;
    const tk_rule_fn *rules;           /* type rules by opcode (ops layer) */
    uint8_t *state;                    /* per value id: V_* bits          */
    const tk_op *ctl[TK_MAX_NEST + 1]; /* enclosing FOR/IF, innermost last */
    int nctl;
    uint32_t nseen; /* ops visited (cycle guard)       */
    size_t smem;    /* shared bytes allocated so far   */
} vctx;

/* ---- messages ----------------------------------------------------------- */
static const char *opname(const tk_op *op) { return tk_op_call(op->opc); }

/* "%5", "%name", or a parameter's name. */
static const char *vname(const tk_value *v, char *buf, size_t n) { return tk_value_ref(v, buf, n); }

/* Indexed by tk_uniformity / tk_scope. */
static const char *const uni_text[] = {"nothing", "warps", "the lanes of a warp"};
static const char *const uni_name[] = {"block-uniform", "warp-uniform", "per-thread"};
static const char *const scope_name[] = {"none", "thread", "warp", "warpgroup", "block"};

/* Reports "tk_<name> (op #<id>) <message>". */
__attribute__((format(printf, 4, 5))) static tk_status fail(vctx *c, tk_status s, const tk_op *op,
                                                            const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!op) return tk_kfail(c->k, s, "tk_kernel_finish: %s", msg);
    return tk_kfail(c->k, s, "tk_%s (op #%u) %s", opname(op), op->id, msg);
}

static tk_status type_mismatch(vctx *c, const tk_op *op, const char *what, const tk_type *have,
                               const tk_type *want) {
    char a[64], b[64];
    tk_type_str(have, a, sizeof a);
    tk_type_str(want, b, sizeof b);
    return fail(c, TK_ERR_TYPE, op, "has %s of type %s, expected %s", what, a, b);
}

/* ---- SSA: definitions and uses ------------------------------------------ */
static bool id_ok(const vctx *c, const tk_value *v) {
    return v->k == c->k && v->id >= 1 && v->id <= c->k->nvalues;
}

/* Checks that v (described by `what`) may be used by op here. */
static tk_status use(vctx *c, const tk_op *op, const char *what, const tk_value *v) {
    char b[32];
    if (!v) return fail(c, TK_ERR_INVALID_ARG, op, "has %s NULL", what);
    if (v->k != c->k)
        return fail(c, TK_ERR_INVALID_ARG, op, "has %s (%s) from another kernel", what,
                    vname(v, b, sizeof b));
    if (!id_ok(c, v))
        return fail(c, TK_ERR_STATE, op, "has %s with id %u out of range 1..%u", what, v->id,
                    c->k->nvalues);
    switch (c->state[v->id] & V_LIFE) {
    case V_LIVE: return TK_OK;
    case V_DEAD:
        return fail(c, TK_ERR_STATE, op,
                    "uses %s (%s), which is defined inside a region that "
                    "is closed here",
                    vname(v, b, sizeof b), what);
    default:
        return fail(c, TK_ERR_STATE, op, "uses %s (%s) before it is defined", vname(v, b, sizeof b),
                    what);
    }
}

/* Marks v defined by op (or by a region of op); `what` describes it. */
static tk_status define(vctx *c, const tk_op *op, const char *what, tk_value *v) {
    if (!v || !id_ok(c, v) || (unsigned)v->uni > TK_UNI_THREAD)
        return fail(c, TK_ERR_STATE, op, "has %s NULL or with a bad id, kernel or uniformity",
                    what);
    if (c->state[v->id] & V_LIFE)
        return fail(c, TK_ERR_STATE, op, "defines %%%u (%s) a second time", v->id, what);
    c->state[v->id] |= V_LIVE;
    return TK_OK;
}

static void kill(vctx *c, tk_value *v) {
    if (v && id_ok(c, v)) c->state[v->id] = (uint8_t)((c->state[v->id] & ~V_LIFE) | V_DEAD);
}

/* ---- structure ---------------------------------------------------------- */
static tk_status check_counts(vctx *c, const tk_op *op) {
    const tk_op_info *in = &tk_op_infos[op->opc];
    if (op->nopnds < in->min_opnds || (in->max_opnds >= 0 && op->nopnds > in->max_opnds) ||
        (op->nopnds && !op->opnds))
        return fail(c, TK_ERR_STATE, op, "has %d operands, expected %d..%d", op->nopnds,
                    in->min_opnds, in->max_opnds);
    int want = in->nres >= 0 ? in->nres : op->opc == TK_OP_FOR ? op->nopnds - 3 : op->nres;
    if (op->nres != want || op->nres < 0 || (op->nres && !op->res))
        return fail(c, TK_ERR_STATE, op, "has %d results, expected %d", op->nres, want);
    bool ctl = op->opc == TK_OP_FOR || op->opc == TK_OP_IF;
    if (!ctl && (op->regions[0] || op->regions[1]))
        return fail(c, TK_ERR_STATE, op, "owns a region, but only for and if do");
    for (int i = 0; i < op->nres; i++)
        if (!op->res[i] || op->res[i]->def != op || op->res[i]->index != i)
            return fail(c, TK_ERR_STATE, op, "has result %d NULL or not pointing back at it", i);
    return TK_OK;
}

/* A tk_wgmma result is in flight until a tk_wgmma_wait returns it: only the
 * acc of a further tk_wgmma, a wait, a loop's initial value or a yield may
 * take it. (A value carried into a loop's next trip is not followed; the
 * interpreter computes at issue, so without this a read before the wait
 * would pass there and fail on the GPU.) */
static tk_status check_in_flight(vctx *c, const tk_op *op, int i) {
    const tk_op *d = op->opnds[i]->def;
    if (!d || d->opc != TK_OP_WGMMA || (op->opc == TK_OP_WGMMA_WAIT && i == 0) ||
        op->opc == TK_OP_FOR || (op->opc == TK_OP_WGMMA && i == 0))
        return TK_OK;
    return fail(c, TK_ERR_STATE, op,
                "reads the result of tk_wgmma (op #%u) as operand %d before a tk_wgmma_wait "
                "returned it: the multiply runs until then",
                d->id, i);
}

static tk_status check_operands(vctx *c, const tk_op *op) {
    char what[32];
    for (int i = 0; i < op->nopnds; i++) {
        snprintf(what, sizeof what, "operand %d", i);
        if (use(c, op, what, op->opnds[i]) || check_in_flight(c, op, i)) return c->k->status;
    }
    return TK_OK;
}

/* `n` yields of region r (owned by op) against the types of want[0..n). */
static tk_status check_yield_types(vctx *c, const tk_op *op, const tk_region *r, const char *rname,
                                   int n, tk_value *const *want) {
    if (r->nyield != n || (n && !r->yield))
        return fail(c, TK_ERR_STATE, op, "has a %s region yielding %d values, expected %d", rname,
                    r->nyield, n);
    char what[48];
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s yield %d", rname, i);
        if (!r->yield[i]) return fail(c, TK_ERR_STATE, op, "has %s NULL", what);
        if (want[i] && !tk_type_eq(&r->yield[i]->type, &want[i]->type))
            return type_mismatch(c, op, what, &r->yield[i]->type, &want[i]->type);
    }
    return TK_OK;
}

static tk_status check_region_link(vctx *c, const tk_op *op, const tk_region *r, int nargs) {
    if (!r)
        return fail(c, TK_ERR_STATE, op, "lacks a region; was it closed with tk_%s_end?",
                    tk_op_infos[op->opc].name);
    if (r->parent != op || r->nargs != nargs || (nargs && !r->args))
        return fail(c, TK_ERR_STATE, op,
                    "owns a region with %d arguments that does not point "
                    "back at it (expected %d arguments)",
                    r->nargs, nargs);
    for (int i = 0; i < nargs; i++)
        if (!r->args[i] || r->args[i]->region_arg != r || r->args[i]->index != i)
            return fail(c, TK_ERR_STATE, op,
                        "has region argument %d that does not point back "
                        "at its region",
                        i);
    return TK_OK;
}

static tk_status check_for(vctx *c, const tk_op *op) {
    int n = op->nopnds - 3;
    const tk_region *r = op->regions[0];
    if (check_region_link(c, op, r, 1 + n)) return c->k->status;
    if (op->regions[1]) return fail(c, TK_ERR_STATE, op, "has a second region");
    if (!tk_type_eq(&r->args[0]->type, &op->opnds[0]->type))
        return type_mismatch(c, op, "the induction variable", &r->args[0]->type,
                             &op->opnds[0]->type);
    char what[48];
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "carried value %d", i);
        if (!tk_type_eq(&r->args[1 + i]->type, &op->opnds[3 + i]->type))
            return type_mismatch(c, op, what, &r->args[1 + i]->type, &op->opnds[3 + i]->type);
        snprintf(what, sizeof what, "result %d", i);
        if (!tk_type_eq(&op->res[i]->type, &op->opnds[3 + i]->type))
            return type_mismatch(c, op, what, &op->res[i]->type, &op->opnds[3 + i]->type);
    }
    return check_yield_types(c, op, r, "body", n, r->args + 1);
}

static tk_status check_if(vctx *c, const tk_op *op) {
    for (int j = 0; j < 2; j++)
        if (check_region_link(c, op, op->regions[j], 0)) return c->k->status;
    for (int i = 0; i < op->nres; i++) {
        tk_kind kd = op->res[i]->type.kind;
        if (kd != TK_KIND_SCALAR && kd != TK_KIND_TILE && kd != TK_KIND_VEC)
            return fail(c, TK_ERR_TYPE, op,
                        "yields a memory handle or untyped value as result "
                        "%d; only scalars, tiles and vectors can be yielded",
                        i);
    }
    if (check_yield_types(c, op, op->regions[0], "then", op->nres, op->res)) return c->k->status;
    return check_yield_types(c, op, op->regions[1], "else", op->nres, op->res);
}

/* ---- types: re-running the rule ----------------------------------------- */
/* Turns the rule's "tk_<name>: why" error into a verifier message. */
static tk_status rule_failed(vctx *c, const tk_op *op) {
    char why[sizeof c->k->error];
    const char *m = c->k->error, *colon = strstr(m, ": ");
    snprintf(why, sizeof why, "%s", colon ? colon + 2 : m);
    tk_status s = c->k->status;
    c->k->status = TK_OK;
    return fail(c, s, op, "fails its type rule: %s", why);
}

static tk_status rerun_rule(vctx *c, tk_op *op) {
    tk_kernel *k = c->k;
    tk_op s = *op;
    tk_value rv[1], *rp = rv;
    /* Results the family makes when regions close (FOR, IF) are not the
     * rule's: check_for / check_if have checked them. */
    s.nres = tk_op_infos[op->opc].nres < 0 ? 0 : op->nres;
    if (s.nres > 1) return fail(c, TK_ERR_STATE, op, "has %d results; rules make one", s.nres);
    if (s.nres) {
        rv[0] = *op->res[0];
        rv[0].type = (tk_type){0};
        s.res = &rp;
    }
    tk_region *cur = k->cur;
    size_t total = k->smem_bytes;
    k->cur = op->parent;
    k->smem_bytes = c->smem;
    tk_status st = c->rules[op->opc](k, &s);
    c->smem = k->smem_bytes;
    k->smem_bytes = total;
    k->cur = cur;
    if (st) return rule_failed(c, op);
    if (s.nres && !tk_type_eq(&rv[0].type, &op->res[0]->type)) {
        char a[64], b[64];
        tk_type_str(&op->res[0]->type, a, sizeof a);
        tk_type_str(&rv[0].type, b, sizeof b);
        return fail(c, TK_ERR_TYPE, op,
                    "records its result as a %s, but its type rule gives a "
                    "%s",
                    a, b);
    }
    if (op->opc == TK_OP_SHARED && s.attr[0] != op->attr[0])
        return fail(c, TK_ERR_STATE, op,
                    "records shared offset %lld, but allocation order "
                    "gives %lld",
                    (long long)op->attr[0], (long long)s.attr[0]);
    return TK_OK;
}

/* ---- scopes and uniformity ---------------------------------------------- */
static tk_status check_scope(vctx *c, const tk_op *op) {
    tk_scope want = tk_op_scope(op);
    if (op->scope != want)
        return fail(c, TK_ERR_SCOPE, op,
                    "records scope %s, but its table row and operands give "
                    "%s",
                    (unsigned)op->scope <= TK_SCOPE_BLOCK ? scope_name[op->scope] : "?",
                    scope_name[want]);
    tk_uniformity limit = want == TK_SCOPE_BLOCK    ? TK_UNI_BLOCK
                          : want == TK_SCOPE_THREAD ? TK_UNI_THREAD
                                                    : TK_UNI_WARP;
    char b[32];
    for (int i = 0; i < op->nopnds; i++)
        if (op->opnds[i]->uni > limit)
            return fail(c, TK_ERR_SCOPE, op,
                        "has operand %d (%s), which varies across %s, but "
                        "the op runs once per %s",
                        i, vname(op->opnds[i], b, sizeof b), uni_text[op->opnds[i]->uni],
                        want == TK_SCOPE_BLOCK ? "block" : "warp/warpgroup");
    return TK_OK;
}

/* A block-wide op under an if/for that not every warp takes alike. */
static tk_status check_block_reach(vctx *c, const tk_op *op) {
    static const char *bound[3] = {"lo", "hi", "step"};
    char b[32];
    if (op->scope != TK_SCOPE_BLOCK) return TK_OK;
    for (int i = c->nctl - 1; i >= 0; i--) {
        const tk_op *o = c->ctl[i];
        for (int j = 0; j < (o->opc == TK_OP_IF ? 1 : 3); j++) {
            const tk_value *v = o->opnds[j];
            if (v->uni == TK_UNI_BLOCK) continue;
            if (o->opc == TK_OP_IF)
                return fail(c, TK_ERR_SCOPE, op,
                            "is inside an if on %s, which differs between "
                            "%s: every thread of the block must reach a %s",
                            vname(v, b, sizeof b), uni_text[v->uni], opname(op));
            return fail(c, TK_ERR_SCOPE, op,
                        "is inside a for (op #%u) whose %s %s differs "
                        "between %s: every thread of the block must reach a %s equally often",
                        o->id, bound[j], vname(v, b, sizeof b), uni_text[v->uni], opname(op));
        }
    }
    return TK_OK;
}

static tk_status claim(vctx *c, const tk_op *op, const tk_value *v, tk_uniformity least) {
    if (v->uni >= least) return TK_OK;
    char b[32];
    return fail(c, TK_ERR_SCOPE, op, "marks %s as %s, but its inputs make it %s",
                vname(v, b, sizeof b), uni_name[v->uni], uni_name[least]);
}

static tk_status check_result_uni(vctx *c, const tk_op *op) {
    /* The least-varying uniformity a result may claim; for FOR, from its
     * bounds (each carried value adds its init and yield below). */
    tk_uniformity least = tk_op_least_uni(op, op->opc == TK_OP_FOR ? 3 : op->nopnds);
    const tk_region *r = op->regions[0];
    for (int i = 0; i < op->nres; i++) {
        tk_uniformity u = least;
        if (op->opc == TK_OP_FOR && op->opnds[3 + i]->uni > u) u = op->opnds[3 + i]->uni;
        for (int j = 0; j < 2 && op->opc == TK_OP_IF; j++) {
            const tk_value *y = op->regions[j]->yield[i];
            if (y->uni > u) u = y->uni;
        }
        if (claim(c, op, op->res[i], u)) return c->k->status;
    }
    if (op->opc != TK_OP_FOR) return TK_OK;
    if (claim(c, op, r->args[0], least)) return c->k->status;
    for (int i = 0; i < op->nopnds - 3; i++)
        if (claim(c, op, r->args[1 + i], op->opnds[3 + i]->uni) ||
            claim(c, op, r->args[1 + i], r->yield[i]->uni))
            return c->k->status;
    return TK_OK;
}

static tk_status check_warpgroup(vctx *c, const tk_op *op) {
    if (c->k->warps % 4 == 0) return TK_OK;
    for (int i = 0; i < op->nres; i++)
        if (op->res[i]->type.owner == TK_WARPGROUP) {
            char t[64];
            tk_type_str(&op->res[i]->type, t, sizeof t);
            return fail(c, TK_ERR_SCOPE, op,
                        "makes a %s, but the kernel has %d warps: warpgroup "
                        "tiles need a multiple of 4 warps",
                        t, c->k->warps);
        }
    return TK_OK;
}

/* ---- the walk ----------------------------------------------------------- */
static tk_status walk_region(vctx *c, tk_region *r, const tk_op *owner, const char *rname);

static tk_status walk_children(vctx *c, tk_op *op) {
    if (c->nctl >= TK_MAX_NEST)
        return fail(c, TK_ERR_STATE, op, "nests regions deeper than %d", TK_MAX_NEST);
    c->ctl[c->nctl++] = op;
    bool is_if = op->opc == TK_OP_IF;
    for (int j = 0; j < (is_if ? 2 : 1); j++)
        if (walk_region(c, op->regions[j], op, is_if ? (j ? "else" : "then") : "body"))
            return c->k->status;
    c->nctl--;
    return TK_OK;
}

static tk_status check_op(vctx *c, tk_region *r, tk_op *op) {
    if ((unsigned)op->opc >= TK_OP_COUNT)
        return fail(c, TK_ERR_STATE, NULL, "op #%u has opcode %d, not in the op table", op->id,
                    (int)op->opc);
    if (op->parent != r) return fail(c, TK_ERR_STATE, op, "does not point back at its region");
    if (check_counts(c, op) || check_operands(c, op)) return c->k->status;
    if (op->opc == TK_OP_FOR && check_for(c, op)) return c->k->status;
    if (op->opc == TK_OP_IF && check_if(c, op)) return c->k->status;
    if (rerun_rule(c, op) || check_scope(c, op) || check_block_reach(c, op) ||
        check_warpgroup(c, op))
        return c->k->status;
    if ((op->opc == TK_OP_FOR || op->opc == TK_OP_IF) && walk_children(c, op)) return c->k->status;
    if (check_result_uni(c, op)) return c->k->status;
    char what[32];
    for (int i = 0; i < op->nres; i++) {
        snprintf(what, sizeof what, "result %d", i);
        if (define(c, op, what, op->res[i])) return c->k->status;
    }
    return TK_OK;
}

static tk_status walk_region(vctx *c, tk_region *r, const tk_op *owner, const char *rname) {
    char what[48];
    for (int i = 0; i < r->nargs; i++) {
        snprintf(what, sizeof what, "%s argument %d", rname, i);
        if (define(c, owner, what, r->args[i])) return c->k->status;
    }
    TK_FOREACH_OP(r, op) {
        if (++c->nseen > c->k->nops)
            return fail(c, TK_ERR_STATE, NULL,
                        "the region tree holds more ops than the kernel "
                        "made (%u): an op list is cyclic or shared",
                        c->k->nops);
        if (check_op(c, r, op)) return c->k->status;
    }
    for (int i = 0; i < r->nyield; i++) {
        snprintf(what, sizeof what, "%s yield %d", rname, i);
        if (use(c, owner, what, r->yield[i])) return c->k->status;
    }
    if (r == c->k->body) return TK_OK; /* top-level values stay live for the grid */
    for (int i = 0; i < r->nargs; i++) kill(c, r->args[i]);
    TK_FOREACH_OP(r, op)
    for (int i = 0; i < op->nres; i++) kill(c, op->res[i]);
    return TK_OK;
}

/* ---- kernel-level checks ------------------------------------------------ */
static tk_status check_params(vctx *c) {
    tk_kernel *k = c->k;
    for (int i = 0; i < k->nparams; i++) {
        tk_value *p = k->params[i];
        if (!p || !id_ok(c, p) || p->def || p->region_arg || p->index != i || !p->name ||
            (p->type.kind != TK_KIND_GVIEW && p->type.kind != TK_KIND_SCALAR) ||
            p->uni != TK_UNI_BLOCK || (c->state[p->id] & V_LIFE))
            return fail(c, TK_ERR_STATE, NULL, "parameter %d is malformed or repeated", i);
        c->state[p->id] = V_LIVE;
    }
    return TK_OK;
}

/* Each grid dimension: a top-level integer scalar that ir/grid.c can turn
 * into host code (the same check tk_set_grid makes; this is the backstop for
 * IR changed behind the builder's back). */
static tk_status check_grid(vctx *c) {
    tk_kernel *k = c->k;
    for (int d = 0; d < 3; d++) {
        const tk_value *g = k->grid[d];
        char b[32];
        if (!g) continue;
        if (!id_ok(c, g) || (c->state[g->id] & V_LIFE) != V_LIVE)
            return fail(c, TK_ERR_STATE, NULL,
                        "grid dimension %d is not a top-level value of "
                        "this kernel",
                        d);
        if (g->type.kind != TK_KIND_SCALAR || !tk_dtype_is_int(g->type.dtype))
            return fail(c, TK_ERR_TYPE, NULL, "grid dimension %d (%s) is not an i32/i64 scalar", d,
                        vname(g, b, sizeof b));
        tk_diag dg = {0};
        tk_status s = tk_grid_check(g, &dg);
        if (s) return fail(c, s, NULL, "%s", dg.msg);
    }
    return TK_OK;
}

static tk_status verify_kernel(vctx *c) {
    tk_kernel *k = c->k;
    if (k->nopen) {
        const tk_op *o = k->open[k->nopen - 1];
        return fail(c, TK_ERR_STATE, o, "opened a region that is still open (%d unclosed)",
                    k->nopen);
    }
    if (k->warps < 1 || k->warps > 32 || !k->body || k->cur != k->body)
        return fail(c, TK_ERR_STATE, NULL, "the kernel header is malformed (warps %d)", k->warps);
    if (check_params(c) || walk_region(c, k->body, NULL, "kernel")) return k->status;
    if (c->smem != k->smem_bytes)
        return fail(c, TK_ERR_STATE, NULL,
                    "the kernel records %zu bytes of shared memory, its "
                    "shared tiles take %zu",
                    k->smem_bytes, c->smem);
    return check_grid(c);
}

tk_status tk_verify(tk_kernel *k, const tk_rule_fn rules[TK_OP_COUNT]) {
    if (!k) return TK_ERR_INVALID_ARG;
    if (k->status) return k->status;
    if (!rules) return tk_kfail(k, TK_ERR_INVALID_ARG, "tk_kernel_finish: no type rules given");
    vctx c = {.k = k, .rules = rules};
    c.state = calloc((size_t)k->nvalues + 1, 1);
    if (!c.state) return tk_kfail(k, TK_ERR_NO_MEMORY, "tk_kernel_finish: out of memory");
    tk_status s = verify_kernel(&c);
    free(c.state);
    return s;
}
