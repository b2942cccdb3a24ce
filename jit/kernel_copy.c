/* A deep copy of a finished kernel into an arena of its own, for the
 * interpreter backend (jit/host.c): tk_compile promises that the caller may
 * destroy its kernel afterwards, and the registry does, yet an interpreted
 * program runs the IR itself at every launch.
 *
 * The IR is a tree of regions and ops whose values point back at their
 * defining op, region and kernel (ir/ir.h). The copy walks the tree once,
 * making each op and region and, on first sight, each value (a field copy),
 * then fixes the values' back pointers once every op and region exists.
 * Values are found by id, ops by id, a region through its parent op. The
 * copy's printed form must equal the original's canonical text: a field
 * added to the IR without this file knowing shows there, not as a wrong
 * run. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "jit/host.h"

typedef struct tk_copier {
    const tk_kernel *src;
    tk_kernel *dst;
    tk_value **vnew;       /* by id: the copy of each value met so far */
    const tk_value **vold; /* by id: the original                     */
    tk_op **onew;          /* by op id                                 */
    bool oom;              /* an allocation failed                     */
    bool bad;              /* something points outside the tree        */
} tk_copier;

static void *cp_alloc(tk_copier *c, size_t n) {
    void *p = n ? tk_arena_alloc(c->dst->arena, n) : NULL;
    if (n && !p) c->oom = true;
    return p;
}

static const char *cp_str(tk_copier *c, const char *s) {
    if (!s) return NULL;
    char *d = tk_arena_strdup(c->dst->arena, s);
    if (!d) c->oom = true;
    return d;
}

/* The copy of v, made on first sight; its back pointers still the
 * original's until cp_fix_values. */
static tk_value *cp_value(tk_copier *c, const tk_value *v) {
    if (!v) return NULL;
    if (v->id == 0 || v->id > c->src->nvalues) { /* not a value of this kernel */
        c->bad = true;
        return NULL;
    }
    if (c->vnew[v->id]) return c->vnew[v->id];
    tk_value *n = cp_alloc(c, sizeof *n);
    if (!n) return NULL;
    *n = *v;
    n->k = c->dst;
    n->name = cp_str(c, v->name);
    n->label = cp_str(c, v->label);
    c->vnew[v->id] = n;
    c->vold[v->id] = v;
    return n;
}

static tk_value **cp_values(tk_copier *c, tk_value *const *vs, int n) {
    tk_value **out = cp_alloc(c, sizeof *out * (size_t)(n > 0 ? n : 0));
    for (int i = 0; out && i < n; i++) out[i] = cp_value(c, vs[i]);
    return out;
}

static tk_region *cp_region(tk_copier *c, const tk_region *r, tk_op *parent);

static tk_op *cp_op(tk_copier *c, const tk_op *o, tk_region *parent) {
    tk_op *n = cp_alloc(c, sizeof *n);
    if (!n) return NULL;
    *n = *o;
    if (o->id == 0 || o->id > c->src->nops) {
        c->bad = true;
        return NULL;
    }
    c->onew[o->id] = n;
    n->parent = parent;
    n->next = NULL;
    n->opnds = cp_values(c, o->opnds, o->nopnds);
    n->res = cp_values(c, o->res, o->nres);
    for (int i = 0; i < 2; i++)
        n->regions[i] = o->regions[i] ? cp_region(c, o->regions[i], n) : NULL;
    return n;
}

static tk_region *cp_region(tk_copier *c, const tk_region *r, tk_op *parent) {
    tk_region *n = cp_alloc(c, sizeof *n);
    if (!n) return NULL;
    *n = *r;
    n->parent = parent;
    n->first = n->last = NULL;
    n->args = cp_values(c, r->args, r->nargs);
    for (const tk_op *o = r->first; o && !c->oom; o = o->next) {
        tk_op *m = cp_op(c, o, n);
        if (!m) break;
        if (n->last)
            n->last->next = m;
        else
            n->first = m;
        n->last = m;
    }
    n->yield = cp_values(c, r->yield, r->nyield);
    return n;
}

/* The copy of region r of the original (NULL for NULL; bad set when r is
 * not in the tree). */
static tk_region *cp_find_region(tk_copier *c, const tk_region *r) {
    if (!r) return NULL;
    if (r == c->src->body) return c->dst->body;
    const tk_op *o = r->parent;
    tk_op *n = o && o->id && o->id <= c->src->nops ? c->onew[o->id] : NULL;
    for (int i = 0; n && i < 2; i++)
        if (o->regions[i] == r) return n->regions[i];
    c->bad = true;
    return NULL;
}

/* The back pointers of every copied value, now that all ops and regions
 * exist. */
static void cp_fix_values(tk_copier *c) {
    for (uint32_t id = 1; id <= c->src->nvalues; id++) {
        tk_value *n = c->vnew[id];
        const tk_value *v = c->vold[id];
        if (!n) continue;
        n->def = v->def ? (v->def->id <= c->src->nops ? c->onew[v->def->id] : NULL) : NULL;
        if (v->def && !n->def) c->bad = true;
        n->region_arg = cp_find_region(c, v->region_arg);
        n->home = cp_find_region(c, v->home);
        n->next_label = cp_value(c, v->next_label);
    }
}

/* The kernel's own fields: name, parameters, specializations, grid, labels. */
static void cp_kernel_fields(tk_copier *c) {
    const tk_kernel *k = c->src;
    tk_kernel *d = c->dst;
    d->name = cp_str(c, k->name);
    d->canon = cp_str(c, k->canon);
    for (int i = 0; i < k->nparams; i++) d->params[i] = cp_value(c, k->params[i]);
    for (int i = 0; i < k->nspecs; i++) d->specs[i].name = cp_str(c, k->specs[i].name);
    for (int i = 0; i < 3; i++) d->grid[i] = cp_value(c, k->grid[i]);
    d->labels = cp_value(c, k->labels);
    d->nopen = 0;
    memset(d->open, 0, sizeof d->open);
}

/* Whether the copy prints as the original did. */
static bool cp_same_text(const tk_kernel *copy, const char *canon) {
    char *text = NULL;
    bool same = tk_kernel_print(copy, &text) == TK_OK && canon && !strcmp(text, canon);
    free(text);
    return same;
}

static tk_status cp_run(tk_copier *c) {
    c->dst->body = cp_region(c, c->src->body, NULL);
    cp_kernel_fields(c);
    cp_fix_values(c);
    c->dst->cur = c->dst->body;
    return c->oom ? TK_ERR_NO_MEMORY : c->bad ? TK_ERR_STATE : TK_OK;
}

tk_status tk_kernel_copy(const tk_kernel *k, tk_ctx *ctx, tk_kernel **out, tk_diag *dg) {
    *out = NULL;
    tk_arena *a = tk_arena_new();
    tk_kernel *d = a ? tk_arena_alloc(a, sizeof *d) : NULL;
    tk_copier c = {.src = k, .dst = d};
    c.vnew = calloc((size_t)k->nvalues + 1, sizeof *c.vnew);
    c.vold = calloc((size_t)k->nvalues + 1, sizeof *c.vold);
    c.onew = calloc((size_t)k->nops + 1, sizeof *c.onew);
    tk_status s = TK_ERR_NO_MEMORY;
    if (d && c.vnew && c.vold && c.onew) {
        *d = *k;
        d->arena = a;
        d->ctx = ctx; /* the interpreter reports to, and reads its options from, this one */
        s = cp_run(&c);
    }
    free(c.vnew);
    free(c.vold);
    free(c.onew);
    if (s == TK_OK && !cp_same_text(d, k->canon)) s = TK_ERR_STATE;
    if (s != TK_OK)
        tk_diag_fail(dg, s, "%s copying kernel '%s' for the interpreter",
                     s == TK_ERR_NO_MEMORY ? "out of memory" : "internal error: an inexact copy",
                     k->name);
    if (s != TK_OK) {
        tk_arena_free(a);
        return s;
    }
    *out = d;
    return TK_OK;
}
