/* Argument checking against a kernel signature (see ir/sig.h). */
#include <stdio.h>
#include <string.h>

#include "ir/sig.h"

void tk_sig_of(const tk_kernel *k, tk_sig_param *out) {
    for (int i = 0; i < k->nparams; i++) {
        const tk_value *p = k->params[i];
        memset(&out[i], 0, sizeof out[i]);
        snprintf(out[i].name, sizeof out[i].name, "%s", p->name);
        out[i].kind = p->type.kind;
        out[i].dtype = p->type.dtype;
        out[i].rank = p->type.rank;
    }
}

static tk_status check_one(const tk_sig_param *p, const tk_arg *a, const char *fn, int i,
                           char *err, size_t n) {
    char at[96];
    snprintf(at, sizeof at, "%s: argument %d ('%s')", fn, i, p->name);
    const char *want = p->kind == TK_KIND_GVIEW ? "tensor" : "scalar";
    if (a->kind != p->kind) {
        snprintf(err, n, "%s is a %s, the kernel expects a %s", at,
                 a->kind == TK_KIND_GVIEW ? "tensor" : a->kind == TK_KIND_SCALAR ? "scalar"
                 : "value of no argument kind", want);
        return TK_ERR_LAUNCH;
    }
    if (a->dtype != p->dtype) {
        snprintf(err, n, "%s has dtype %s, the kernel expects %s", at, tk_dtype_name(a->dtype),
                 tk_dtype_name(p->dtype));
        return TK_ERR_LAUNCH;
    }
    if (p->kind != TK_KIND_GVIEW) return TK_OK;
    if (a->rank != p->rank) {
        snprintf(err, n, "%s is a rank-%d tensor, the kernel expects rank %d", at, a->rank,
                 p->rank);
        return TK_ERR_LAUNCH;
    }
    if (!a->data) {
        snprintf(err, n, "%s has a NULL data pointer", at);
        return TK_ERR_LAUNCH;
    }
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] < 0) {
            snprintf(err, n, "%s has dims[%d] = %lld < 0", at, d, (long long)a->dims[d]);
            return TK_ERR_LAUNCH;
        }
    return TK_OK;
}

tk_status tk_sig_check(const tk_sig_param *sig, int np, int nargs, const tk_arg *args,
                       const char *fn, char *err, size_t errn) {
    if (nargs != np) {
        snprintf(err, errn, "%s: %d arguments given, the kernel takes %d", fn, nargs, np);
        return TK_ERR_LAUNCH;
    }
    if (np && !args) {
        snprintf(err, errn, "%s: args is NULL", fn);
        return TK_ERR_LAUNCH;
    }
    for (int i = 0; i < np; i++) {
        tk_status s = check_one(&sig[i], &args[i], fn, i, err, errn);
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
        s *= dims[i];
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
