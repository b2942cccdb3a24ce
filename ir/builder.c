/* The builder core: kernels, values, op creation, parameters.
 *
 * Every public builder call funnels through tk_build_op (ops/build.c): it
 * makes the op here (tk_op_new: operand count and operands checked: non-NULL,
 * same kernel, visible from the insertion point), runs the op's type rule,
 * and appends it here (tk_op_append: scope and uniformity). The first error
 * sticks on the kernel; afterwards every call is a no-op returning NULL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/abi.h"
#include "ir/ctx.h"
#include "ir/grid.h"

/* ---- kernel lifetime ---------------------------------------------------- */
/* Kernel, parameter and spec names are C identifiers (they name PTX symbols
 * and appear in the printed form, which must stay unambiguous). */
bool tk_is_ident(const char *name) {
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
              (c != name && *c >= '0' && *c <= '9')))
            return false;
    return *name != '\0';
}

tk_status tk_kernel_create(tk_ctx *ctx, const char *name, int warps, tk_kernel **out) {
    if (!out) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_kernel_create: out is NULL");
    *out = NULL;
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!name || !*name)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_kernel_create: name is NULL or empty");
    if (!tk_is_ident(name))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG,
                           "tk_kernel_create: name '%s' is not a C identifier", name);
    if (warps < 1 || warps > 32)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_kernel_create: warps is %d, expected 1..32",
                           warps);
    tk_arena *a = tk_arena_new();
    tk_kernel *k = a ? tk_arena_alloc(a, sizeof *k) : NULL;
    tk_region *body = k ? tk_arena_alloc(a, sizeof *body) : NULL;
    if (!body) {
        tk_arena_free(a);
        return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_kernel_create: out of memory");
    }
    k->ctx = ctx;
    k->arena = a;
    k->name = tk_arena_strdup(a, name);
    k->warps = warps;
    k->body = k->cur = body;
    *out = k;
    return TK_OK;
}

void tk_kernel_destroy(tk_kernel *k) {
    if (k) tk_arena_free(k->arena);
}

tk_status tk_kernel_status(const tk_kernel *k) { return k ? k->status : TK_ERR_INVALID_ARG; }
const char *tk_kernel_error(const tk_kernel *k) { return k ? k->error : "kernel is NULL"; }
const char *tk_kernel_name(const tk_kernel *k) { return k ? k->name : NULL; }
int tk_kernel_warps(const tk_kernel *k) { return k ? k->warps : 0; }
size_t tk_kernel_smem_bytes(const tk_kernel *k) { return k ? k->smem_bytes : 0; }

tk_status tk_kernel_seal(tk_kernel *k, const tk_rule_fn rules[TK_OP_COUNT]) {
    if (!k) return TK_ERR_INVALID_ARG;
    if (k->status) return k->status;
    if (k->finished) return TK_OK;
    if (k->nopen) {
        const tk_op *o = k->open[k->nopen - 1];
        return tk_kfail(k, TK_ERR_STATE,
                        "tk_kernel_finish: %d unclosed region(s); innermost is "
                        "a '%s' opened as op #%u",
                        k->nopen, tk_op_infos[o->opc].name, o->id);
    }
    tk_status s = tk_verify(k, rules);
    if (s) return s;
    /* A forgotten grid would silently run one block. */
    if (!k->grid_set)
        return tk_kfail(k, TK_ERR_STATE,
                        "tk_kernel_finish: kernel '%s' has no grid; call "
                        "tk_set_grid (tk_set_grid(k, NULL, NULL, NULL) for one block)",
                        k->name);
    char *text = NULL;
    if ((s = tk_kernel_print(k, &text)) != TK_OK)
        return tk_kfail(k, s, "tk_kernel_finish: cannot print the kernel");
    k->canon = tk_arena_strdup(k->arena, text);
    free(text);
    if (!k->canon) return tk_kfail(k, TK_ERR_NO_MEMORY, "tk_kernel_finish: out of memory");
    tk_canon_hash(k->canon, k->canon_hash);
    k->finished = true;
    return TK_OK;
}

/* ---- errors ------------------------------------------------------------- */
static tk_status vfail(tk_kernel *k, tk_status s, const char *prefix, const char *fmt, va_list ap) {
    if (k->status) return s; /* the first error sticks */
    k->status = s;
    int n = snprintf(k->error, sizeof k->error, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof k->error) n = 0;
    vsnprintf(k->error + n, sizeof k->error - (size_t)n, fmt, ap);
    return s;
}

tk_status tk_kfail(tk_kernel *k, tk_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(k, s, "", fmt, ap);
    va_end(ap);
    return s;
}

/* Messages name the call the user made, not the op it became. */
const char *tk_op_call(tk_opcode opc) {
    switch (opc) {
    case TK_OP_LOAD_G2R:
    case TK_OP_LOAD_S2R: return "load";
    case TK_OP_STORE_R2G:
    case TK_OP_STORE_R2S: return "store";
    case TK_OP_COPY_G2S: return "copy_to_shared";
    case TK_OP_COPY_S2G: return "copy_to_global";
    case TK_OP_FOR: return "for_begin";
    case TK_OP_IF: return "if_begin";
    default: return (unsigned)opc < TK_OP_COUNT ? tk_op_infos[opc].name : "?";
    }
}

const char *tk_value_ref(const tk_value *v, char *buf, size_t n) {
    if (v->name && !v->def && !v->region_arg) return v->name;
    if (v->label)
        snprintf(buf, n, "%%%s", v->label);
    else
        snprintf(buf, n, "%%%u", v->id);
    return buf;
}

tk_status tk_opfail(tk_kernel *k, const tk_op *op, tk_status s, const char *fmt, ...) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "tk_%s: ", tk_op_call(op->opc));
    va_list ap;
    va_start(ap, fmt);
    vfail(k, s, prefix, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- values and ops ----------------------------------------------------- */
tk_value *tk_new_value(tk_kernel *k, tk_type type) {
    tk_value *v = tk_arena_alloc(k->arena, sizeof *v);
    if (!v) {
        tk_kfail(k, TK_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    v->k = k;
    v->id = ++k->nvalues;
    v->type = type;
    v->home = k->cur;
    return v;
}

/* A value is usable where its home region encloses the insertion point. */
static bool visible(const tk_kernel *k, const tk_value *v) {
    for (const tk_region *r = k->cur; r; r = r->parent ? r->parent->parent : NULL)
        if (r == v->home) return true;
    return false;
}

/* Checks one operand; `what` names it in the message. */
bool tk_check_operand(tk_kernel *k, const char *opname, int i, const tk_value *v) {
    if (!v) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_%s: operand %d is NULL", opname, i);
        return false;
    }
    char r[72];
    if (v->k != k) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_%s: operand %d (%s) belongs to another kernel", opname,
                 i, tk_value_ref(v, r, sizeof r));
        return false;
    }
    if (!visible(k, v)) {
        tk_kfail(k, TK_ERR_STATE,
                 "tk_%s: operand %d (%s) is defined inside a region that is "
                 "already closed",
                 opname, i, tk_value_ref(v, r, sizeof r));
        return false;
    }
    return true;
}

/* An op runs at the scope of the owner of its tile/vector operands or
 * results; otherwise at the table's scope. */
tk_scope tk_op_scope(const tk_op *op) {
    int16_t s = tk_op_infos[op->opc].scope;
    if (s != TK_SCOPE_OWNER) return (tk_scope)s;
    tk_owner o = TK_OWNER_NONE;
    for (int i = 0; i < op->nres && !o; i++) o = op->res[i]->type.owner;
    for (int i = 0; i < op->nopnds && !o; i++) o = op->opnds[i]->type.owner;
    return o == TK_WARPGROUP ? TK_SCOPE_WARPGROUP : o == TK_WARP ? TK_SCOPE_WARP : TK_SCOPE_THREAD;
}

tk_uniformity tk_op_least_uni(const tk_op *op, int n) {
    int8_t fixed = tk_op_infos[op->opc].uni;
    if (fixed != TK_UNI_OPERANDS) return (tk_uniformity)fixed;
    tk_uniformity u = TK_UNI_BLOCK;
    for (int i = 0; i < n; i++)
        if (op->opnds[i]->uni > u) u = op->opnds[i]->uni;
    /* Tiles and vectors are per-owner: at least warp-varying. */
    if (op->scope == TK_SCOPE_WARP || op->scope == TK_SCOPE_WARPGROUP)
        if (u < TK_UNI_WARP) u = TK_UNI_WARP;
    return u;
}

static void append(tk_kernel *k, tk_op *op) {
    tk_region *r = k->cur;
    op->parent = r;
    if (r->last)
        r->last->next = op;
    else
        r->first = op;
    r->last = op;
}

/* Tile ops run per warp/warpgroup and block ops per block: their scalar
 * operands must not vary inside that group. */
static bool check_uniform_operands(tk_kernel *k, const tk_op *op) {
    tk_uniformity limit = op->scope == TK_SCOPE_BLOCK    ? TK_UNI_BLOCK
                          : op->scope == TK_SCOPE_THREAD ? TK_UNI_THREAD
                                                         : TK_UNI_WARP;
    for (int i = 0; i < op->nopnds; i++)
        if (op->opnds[i]->uni > limit) {
            char r[72];
            tk_opfail(k, op, TK_ERR_SCOPE,
                      "operand %d (%s) varies across %s, but the op runs "
                      "once per %s",
                      i, tk_value_ref(op->opnds[i], r, sizeof r),
                      op->opnds[i]->uni == TK_UNI_THREAD ? "the lanes of a warp" : "warps",
                      op->scope == TK_SCOPE_BLOCK ? "block" : "warp/warpgroup");
            return false;
        }
    return true;
}

tk_op *tk_op_new(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds, tk_type want,
                 int64_t a0, int64_t a1, double f) {
    if (!k || k->status) return NULL;
    const tk_op_info *info = &tk_op_infos[opc];
    if (k->finished) {
        tk_kfail(k, TK_ERR_STATE, "tk_%s: the kernel is finished; it can no longer change",
                 tk_op_call(opc));
        return NULL;
    }
    if (nopnds < info->min_opnds || (info->max_opnds >= 0 && nopnds > info->max_opnds)) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_%s: %d operands; expected %d..%d", tk_op_call(opc),
                 nopnds, info->min_opnds, info->max_opnds);
        return NULL;
    }
    for (int i = 0; i < nopnds; i++)
        if (!tk_check_operand(k, tk_op_call(opc), i, opnds[i])) return NULL;
    tk_op *op = tk_arena_alloc(k->arena, sizeof *op);
    int nres = info->nres < 0 ? 0 : info->nres;
    tk_value **ops = nopnds ? tk_arena_alloc(k->arena, sizeof(tk_value *) * (size_t)nopnds) : NULL;
    tk_value **res = nres ? tk_arena_alloc(k->arena, sizeof(tk_value *) * (size_t)nres) : NULL;
    if (!op || (nopnds && !ops) || (nres && !res)) {
        tk_kfail(k, TK_ERR_NO_MEMORY, "tk_%s: out of memory", tk_op_call(opc));
        return NULL;
    }
    op->opc = opc;
    op->nopnds = nopnds;
    op->opnds = ops;
    if (nopnds) memcpy(ops, opnds, sizeof(tk_value *) * (size_t)nopnds);
    op->nres = nres;
    op->res = res;
    op->attr[0] = a0;
    op->attr[1] = a1;
    op->fattr = f;
    op->want = want;
    for (int i = 0; i < nres; i++) {
        if (!(res[i] = tk_new_value(k, (tk_type){0}))) return NULL;
        res[i]->def = op;
        res[i]->index = i;
    }
    return op;
}

tk_op *tk_op_append(tk_kernel *k, tk_op *op) {
    if (!k || k->status || !op) return NULL;
    op->scope = tk_op_scope(op);
    if (!check_uniform_operands(k, op)) return NULL;
    for (int i = 0; i < op->nres; i++) op->res[i]->uni = tk_op_least_uni(op, op->nopnds);
    op->id = ++k->nops;
    append(k, op);
    return op;
}

tk_value *tk_op_result(tk_op *op, int i) { return op && i < op->nres ? op->res[i] : NULL; }

/* ---- signature ---------------------------------------------------------- */
static tk_value *new_param(tk_kernel *k, const char *fn, const char *name, tk_type t) {
    if (!k || k->status) return NULL;
    if (k->finished) {
        tk_kfail(k, TK_ERR_STATE, "%s: the kernel is finished", fn);
        return NULL;
    }
    if (!name || !*name) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: name is NULL or empty", fn);
        return NULL;
    }
    if (!tk_is_ident(name)) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: name '%s' is not a C identifier", fn, name);
        return NULL;
    }
    if (k->nopen) {
        tk_kfail(k, TK_ERR_STATE,
                 "%s: '%s' declared inside a for/if region; declare parameters "
                 "at the top level",
                 fn, name);
        return NULL;
    }
    for (int i = 0; i < k->nparams; i++)
        if (!strcmp(k->params[i]->name, name)) {
            tk_kfail(k, TK_ERR_INVALID_ARG, "%s: parameter '%s' is declared twice", fn, name);
            return NULL;
        }
    if (k->nparams >= TK_MAX_PARAMS) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "%s: more than %d parameters", fn, TK_MAX_PARAMS);
        return NULL;
    }
    tk_value *v = tk_new_value(k, t);
    if (!v) return NULL;
    v->name = tk_arena_strdup(k->arena, name);
    v->index = k->nparams;
    v->uni = TK_UNI_BLOCK;
    k->params[k->nparams++] = v;
    return v;
}

tk_value *tk_param_tensor(tk_kernel *k, const char *name, tk_dtype dt, int rank) {
    if (!k || k->status) return NULL;
    if (dt != TK_F32 && dt != TK_BF16 && dt != TK_F16 && dt != TK_I32 && dt != TK_I64) {
        tk_kfail(k, TK_ERR_TYPE,
                 "tk_param_tensor: '%s' has dtype %s (%d); tensors hold f32, "
                 "bf16, f16, i32 or i64",
                 name ? name : "?", tk_dtype_name(dt), (int)dt);
        return NULL;
    }
    if (rank < 1 || rank > 4) {
        tk_kfail(k, TK_ERR_INVALID_ARG, "tk_param_tensor: '%s' has rank %d, expected 1..4",
                 name ? name : "?", rank);
        return NULL;
    }
    return new_param(k, "tk_param_tensor", name,
                     (tk_type){.kind = TK_KIND_GVIEW, .dtype = dt, .rank = rank});
}

tk_value *tk_param_scalar(tk_kernel *k, const char *name, tk_dtype dt) {
    if (!k || k->status) return NULL;
    if (dt != TK_F32 && dt != TK_I32 && dt != TK_I64 && dt != TK_BOOL) {
        tk_kfail(k, TK_ERR_TYPE,
                 "tk_param_scalar: '%s' has dtype %s (%d); scalar parameters are "
                 "f32, i32, i64 or bool",
                 name ? name : "?", tk_dtype_name(dt), (int)dt);
        return NULL;
    }
    return new_param(k, "tk_param_scalar", name, tk_scalar_type(dt));
}

void tk_set_grid(tk_kernel *k, tk_value *x, tk_value *y, tk_value *z) {
    if (!k || k->status) return;
    if (k->finished) { /* its printed text, the caches' key, is fixed */
        tk_kfail(k, TK_ERR_STATE, "tk_set_grid: the kernel is finished; it can no longer change");
        return;
    }
    tk_value *g[3] = {x, y, z};
    for (int i = 0; i < 3; i++) {
        if (!g[i]) continue;
        if (!tk_check_operand(k, "set_grid", i, g[i])) return;
        if (g[i]->type.kind != TK_KIND_SCALAR || !tk_dtype_is_int(g[i]->type.dtype)) {
            char b[64];
            tk_type_str(&g[i]->type, b, sizeof b);
            tk_kfail(k, TK_ERR_TYPE,
                     "tk_set_grid: dimension %d is a %s; expected an i32/i64 "
                     "scalar",
                     i, b);
            return;
        }
        if (g[i]->home != k->body) {
            tk_kfail(k, TK_ERR_STATE,
                     "tk_set_grid: dimension %d is computed inside a region; "
                     "the grid must come from top-level values",
                     i);
            return;
        }
        /* Reported here, where the user can still see the call, rather than
         * at tk_kernel_finish (which checks again, for IR edited by hand). */
        tk_diag dg = {0};
        tk_status s = tk_grid_check(g[i], &dg);
        if (s) {
            tk_kfail(k, s, "tk_set_grid: dimension %d: %s", i, dg.msg);
            return;
        }
    }
    memcpy(k->grid, g, sizeof g);
    k->grid_set = true;
}

/* ---- names and options --------------------------------------------------- */
tk_status tk_value_set_name(tk_value *v, const char *name) {
    if (!v) return TK_ERR_INVALID_ARG;
    tk_kernel *k = v->k;
    if (k->status) return k->status;
    char r[72];
    if (k->finished) return tk_kfail(k, TK_ERR_STATE, "tk_value_set_name: the kernel is finished");
    if (!name || !tk_is_ident(name) || strlen(name) > TK_MAX_VALUE_NAME)
        return tk_kfail(k, TK_ERR_INVALID_ARG,
                        "tk_value_set_name: '%s' is not a C identifier of "
                        "at most %d characters",
                        name ? name : "(null)", TK_MAX_VALUE_NAME);
    if (v->label || (v->name && !v->def && !v->region_arg))
        return tk_kfail(k, TK_ERR_STATE, "tk_value_set_name: %s already has a name",
                        tk_value_ref(v, r, sizeof r));
    for (const tk_value *o = k->labels; o; o = o->next_label)
        if (!strcmp(o->label, name))
            return tk_kfail(k, TK_ERR_INVALID_ARG,
                            "tk_value_set_name: %%%s already names %%%u; "
                            "names are unique in a kernel",
                            name, o->id);
    if (!(v->label = tk_arena_strdup(k->arena, name)))
        return tk_kfail(k, TK_ERR_NO_MEMORY, "tk_value_set_name: out of memory");
    v->next_label = k->labels;
    k->labels = v;
    return TK_OK;
}

/* One bounded option: the kernel must be open and n in lo..hi. */
static tk_status set_option(tk_kernel *k, const char *fn, int32_t *field, int n, int lo, int hi) {
    if (!k) return TK_ERR_INVALID_ARG;
    if (k->status) return k->status;
    if (k->finished) return tk_kfail(k, TK_ERR_STATE, "%s: the kernel is finished", fn);
    if (n != 0 && (n < lo || n > hi))
        return tk_kfail(k, TK_ERR_INVALID_ARG, "%s: %d; expected 0 (no constraint) or %d..%d", fn,
                        n, lo, hi);
    *field = n;
    return TK_OK;
}

tk_status tk_kernel_set_maxnreg(tk_kernel *k, int n) {
    return set_option(k, "tk_kernel_set_maxnreg", k ? &k->maxnreg : NULL, n, 16, 255);
}

tk_status tk_kernel_set_min_blocks(tk_kernel *k, int n) {
    return set_option(k, "tk_kernel_set_min_blocks", k ? &k->min_blocks : NULL, n, 1, 32);
}

tk_status tk_kernel_set_cluster(tk_kernel *k, int n) {
    if (k && !k->status && k->nops)
        return tk_kfail(k, TK_ERR_STATE,
                        "tk_kernel_set_cluster: the kernel has ops already; set the cluster first "
                        "(its copies' rules read it)");
    if (k && !k->status && n > 1 && (n & (n - 1)))
        return tk_kfail(k, TK_ERR_INVALID_ARG, "tk_kernel_set_cluster: %d; expected 1, 2, 4 or 8",
                        n);
    tk_status s = set_option(k, "tk_kernel_set_cluster", k ? &k->cluster : NULL, n, 1, 8);
    if (s == TK_OK && n == 1) k->cluster = 0; /* one block: no cluster, printed as none */
    return s;
}

tk_status tk_param_set_cache(tk_kernel *k, tk_value *param, int policy) {
    static const char *fn = "tk_param_set_cache";
    if (!k) return TK_ERR_INVALID_ARG;
    if (k->status) return k->status;
    if (k->finished) return tk_kfail(k, TK_ERR_STATE, "%s: the kernel is finished", fn);
    int i = tk_param_index(k, param);
    if (i < 0 || param->type.kind != TK_KIND_GVIEW)
        return tk_kfail(k, TK_ERR_INVALID_ARG, "%s: the value is not a tensor parameter of '%s'",
                        fn, k->name);
    if (policy < TK_CACHE_NORMAL || policy > TK_CACHE_KEEP)
        return tk_kfail(k, TK_ERR_INVALID_ARG,
                        "%s: policy %d for '%s'; expected TK_CACHE_NORMAL, _STREAM or _KEEP", fn,
                        policy, param->name);
    k->cache[i] = (uint8_t)policy;
    return TK_OK;
}

int tk_abi_param_slots(const tk_value *param) {
    return param->type.kind == TK_KIND_GVIEW ? 1 + 2 * param->type.rank : 1;
}
