/* Argument checking against a kernel signature (see ir/sig.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ir/sig.h"

void tk_sig_of(const tk_kernel *k, tk_sig *out) {
    memset(out, 0, sizeof *out);
    out->nparams = k->nparams;
    for (int i = 0; i < k->nparams; i++) {
        const tk_value *v = k->params[i];
        tk_sig_param *p = &out->params[i];
        snprintf(p->name, sizeof p->name, "%s", v->name ? v->name : "?");
        p->kind = v->type.kind;
        p->dtype = v->type.dtype;
        p->rank = v->type.kind == TK_KIND_GVIEW ? v->type.rank : 0;
    }
}

static const char *an(tk_dtype dt) { /* "an i32" vs "a f32" reads better */
    return dt == TK_I32 || dt == TK_I64 ? "an" : "a";
}

/* The kind of argument a parameter takes, for messages. */
static void want_str(const tk_sig_param *p, char *buf, size_t n) {
    if (p->kind == TK_KIND_GVIEW)
        snprintf(buf, n, "a rank-%d %s tensor", p->rank, tk_dtype_name(p->dtype));
    else
        snprintf(buf, n, "%s %s scalar", an(p->dtype), tk_dtype_name(p->dtype));
}

/* A scalar argument fits a parameter of the same dtype; bool parameters
 * also take i32 (the public API has no bool constructor). */
static bool scalar_fits(tk_dtype param, tk_dtype arg) {
    return param == arg || (param == TK_BOOL && arg == TK_I32);
}

/* Whether the last element's byte offset, sum of (dims[d]-1)*|strides[d]|
 * times the element size, fits int64 (an empty tensor addresses nothing). */
static bool extent_fits(const tk_arg *a) {
    int64_t off = 0;
    for (int d = 0; d < a->rank; d++) {
        if (a->dims[d] == 0) return true;
        int64_t st = a->strides[d], term;
        if (st == INT64_MIN) return false;
        if (__builtin_mul_overflow(a->dims[d] - 1, st < 0 ? -st : st, &term) ||
            __builtin_add_overflow(off, term, &off))
            return false;
    }
    int64_t esz = (int64_t)tk_dtype_size(a->dtype);
    return !__builtin_mul_overflow(off + 1, esz ? esz : 1, &off);
}

static tk_status check_tensor(const tk_sig_param *p, const tk_arg *a, const char *at, tk_diag *dg) {
    if (a->rank < 1 || a->rank > 4)
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s has rank %d, ranks 1..4 are supported", at,
                            a->rank);
    if (a->dtype != p->dtype)
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s is a %s tensor, the kernel expects %s", at,
                            tk_dtype_name(a->dtype), tk_dtype_name(p->dtype));
    if (a->rank != p->rank)
        return tk_diag_fail(dg, TK_ERR_LAUNCH,
                            "%s is a rank-%d tensor, the kernel expects "
                            "rank %d",
                            at, a->rank, p->rank);
    if (!a->data) return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s has a NULL data pointer", at);
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] < 0)
            return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s has dims[%d] = %lld (must be >= 0)", at, d,
                                (long long)a->dims[d]);
    if (!extent_fits(a))
        return tk_diag_fail(dg, TK_ERR_LAUNCH,
                            "%s spans more than 2^63 bytes "
                            "(its dims times strides overflow 64-bit addresses)",
                            at);
    return TK_OK;
}

/* Whether a fits p: what check_one tests, without a message. Every launch
 * runs this for every argument, and formatting the messages up front cost
 * more than the rest of tk_launch's own work (six arguments: 0.93 us
 * against 0.07 us on the build machine's CPU). */
static bool fits(const tk_sig_param *p, const tk_arg *a) {
    if (a->kind == TK_KIND_SCALAR)
        return p->kind == TK_KIND_SCALAR && scalar_fits(p->dtype, a->dtype);
    if (a->kind != TK_KIND_GVIEW || p->kind != TK_KIND_GVIEW || a->rank < 1 || a->rank > 4 ||
        a->dtype != p->dtype || a->rank != p->rank || !a->data)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] < 0) return false;
    return extent_fits(a);
}

/* Why a does not fit p, as a status and message. */
static tk_status check_one(const tk_sig_param *p, const tk_arg *a, const char *fn, int i,
                           tk_diag *dg) {
    if (fits(p, a)) return TK_OK;
    char at[128], want[64];
    snprintf(at, sizeof at, "%s: argument %d ('%s')", fn, i, p->name);
    want_str(p, want, sizeof want);
    bool is_tensor = a->kind == TK_KIND_GVIEW;
    if (a->kind != TK_KIND_GVIEW && a->kind != TK_KIND_SCALAR)
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s has invalid kind %d, the kernel expects %s", at,
                            (int)a->kind, want);
    if (is_tensor != (p->kind == TK_KIND_GVIEW))
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s is a %s, the kernel expects %s", at,
                            is_tensor ? "tensor" : "scalar", want);
    if (is_tensor) {
        tk_status s = check_tensor(p, a, at, dg);
        if (s) return s;
    } else if (!scalar_fits(p->dtype, a->dtype)) {
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s is %s %s scalar, the kernel expects %s", at,
                            an(a->dtype), tk_dtype_name(a->dtype), want);
    }
    /* fits() refused what no message names: the two disagree */
    return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s: the argument check failed without a reason", at);
}

tk_status tk_sig_check(const tk_sig *sig, const char *kernel, int nargs, const tk_arg *args,
                       const char *fn, tk_diag *dg) {
    int np = sig->nparams;
    if (nargs != np)
        return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s: kernel '%s' takes %d argument%s, got %d", fn,
                            kernel, np, np == 1 ? "" : "s", nargs);
    if (np && !args) return tk_diag_fail(dg, TK_ERR_LAUNCH, "%s: args is NULL", fn);
    for (int i = 0; i < np; i++) {
        tk_status s = check_one(&sig->params[i], &args[i], fn, i, dg);
        if (s) return s;
    }
    return TK_OK;
}

/* ---- argument constructors ---------------------------------------------- */
tk_arg tk_arg_strided(void *data, tk_dtype dt, int rank, const int64_t *dims,
                      const int64_t *strides) {
    tk_arg a = {.kind = TK_KIND_GVIEW, .dtype = dt, .rank = rank, .data = data};
    for (int i = 0; i < rank && i < 4 && dims && strides; i++) {
        a.dims[i] = dims[i];
        a.strides[i] = strides[i];
    }
    return a;
}

tk_arg tk_arg_tensor(void *data, tk_dtype dt, int rank, const int64_t *dims) {
    int64_t st[4] = {0};
    int64_t s = 1;
    for (int i = (rank < 4 ? rank : 4) - 1; i >= 0 && dims; i--) {
        st[i] = s;
        /* Saturates: tk_sig_check then rejects the tensor's extent. */
        if (__builtin_mul_overflow(s, dims[i], &s)) s = INT64_MAX;
    }
    return tk_arg_strided(data, dt, rank, dims, st);
}

tk_arg tk_arg_i32(int32_t v) {
    return (tk_arg){.kind = TK_KIND_SCALAR, .dtype = TK_I32, .scalar.i = v};
}
tk_arg tk_arg_i64(int64_t v) {
    return (tk_arg){.kind = TK_KIND_SCALAR, .dtype = TK_I64, .scalar.i = v};
}
tk_arg tk_arg_f32(float v) {
    return (tk_arg){.kind = TK_KIND_SCALAR, .dtype = TK_F32, .scalar.f = v};
}
