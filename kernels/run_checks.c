/* Parameter checks the run entry points share (kernels/run_checks.h). */
#include "run_checks.h"

#include <math.h>
#include <stdbool.h>

#include "jit/registry.h"
#include "tk/tk_jit.h"

tk_status tk_run_check_size(tk_ctx *ctx, const char *fn, const char *name, int64_t v, int64_t max) {
    if (v >= 1 && v <= max) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %lld; expected 1 .. %lld", fn, name,
                            (long long)v, (long long)max);
}

tk_status tk_run_check_scalar(tk_ctx *ctx, const char *fn, const char *name, float v) {
    if (v >= 0.0f && !isinf(v)) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: %s is %g; expected 0 (the default) or a finite value > 0", fn,
                            name, (double)v);
}

tk_status tk_run_check_strides(tk_ctx *ctx, const char *fn, const char *name, int rank,
                               const int64_t *st, const int64_t *dims) {
    bool dense = true;
    for (int d = 0; d < rank; d++) dense = dense && !st[d];
    if (dense) return TK_OK;
    int64_t end = 0;
    for (int d = 0; d < rank; d++) {
        bool last = d == rank - 1;
        if (st[d] < 0 || st[d] > TK_RUN_MAX_OFFSET || (last && rank == 4 && st[d] != 1))
            return tk_ctx_set_error(
                ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is %lld; expected %s", fn, name, d,
                (long long)st[d], last && rank == 4 ? "1 (the dim stride)" : "0 .. 2^60");
        if (st[d] && dims[d] - 1 > (TK_RUN_MAX_OFFSET - end) / st[d])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s_strides reach past 2^60 elements", fn, name);
        end += (dims[d] - 1) * st[d];
    }
    return TK_OK;
}

int tk_run_sm_count(tk_ctx *ctx) {
    int sm = ctx ? tk_registry_sm_count(ctx) : 0;
    return sm > 0 ? sm : 132;
}

tk_status tk_run_check_bias_pair(tk_ctx *ctx, const char *fn, const void *bq, const void *bk) {
    if (!bq == !bk) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: %s is NULL and %s is not; give both biases or neither", fn,
                            bq ? "bk" : "bq", bq ? "bq" : "bk");
}
