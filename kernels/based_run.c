/* tk_based_forward and tk_based_prepare (tk/tk_run.h): the parameters
 * checked, the kernel of the specialization from the registry, one launch.
 * The kernels: based.c, based_common.c. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "based_run_parts.h"
#include "jit/registry.h"
#include "tk/tk_run.h"

/* Registry programs per tk_based_config: every field a specialization. */
typedef struct based_key {
    int32_t dtype, part, normalize, stats, v_cols, warps;
} based_key;

static tk_status build_based_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const based_key *a = key;
    tk_based_config cfg = {.dtype = (tk_dtype)a->dtype,
                           .part = a->part,
                           .normalize = a->normalize,
                           .stats = a->stats,
                           .v_cols = a->v_cols,
                           .warps = a->warps};
    return tk_based_build(ctx, &cfg, out);
}

static const tk_kernel_def based_def = {"tk_based", sizeof(based_key), build_based_key};

static tk_status program(tk_ctx *ctx, const tk_based_config *c, tk_program **prog,
                         tk_prepare_info *info) {
    based_key key;
    memset(&key, 0, sizeof key);
    key.dtype = c->dtype, key.part = c->part, key.normalize = c->normalize;
    key.stats = c->stats, key.v_cols = c->v_cols, key.warps = c->warps;
    return tk_registry_program(ctx, &based_def, &key, prog, info);
}

/* The end of the first layout: every field of today's struct is required. */
#define PARAMS_MIN (offsetof(tk_based_params, v_cols) + sizeof(int32_t))
/* Grid y is the heads and z the batch (each at most 65535); tokens are
 * indexed in i64, chunk counts fit easily. */
#define MAX_GRID   65535
#define MAX_SEQ    ((int64_t)INT32_MAX)
#define MAX_DV     256
#define MAX_OFFSET ((int64_t)1 << 60)

static tk_status check_size(tk_ctx *ctx, const char *fn, const char *name, int64_t v, int64_t max) {
    if (v >= 1 && v <= max) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %lld; expected 1 .. %lld", fn, name,
                            (long long)v, (long long)max);
}

/* Strides all 0 (dense), or >= 0 with the last one 1 and every element's
 * offset below 2^60 (the kernel's i64 address math never wraps). */
static tk_status check_strides(tk_ctx *ctx, const char *fn, const char *name, int rank,
                               const int64_t *st, const int64_t *dims) {
    bool dense = true;
    for (int d = 0; d < rank; d++) dense = dense && !st[d];
    if (dense) return TK_OK;
    int64_t end = 0;
    for (int d = 0; d < rank; d++) {
        bool last = d == rank - 1;
        if (st[d] < 0 || st[d] > MAX_OFFSET || (last && rank == 4 && st[d] != 1))
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is %lld; expected %s",
                                    fn, name, d, (long long)st[d],
                                    last && rank == 4 ? "1 (the dim stride)" : "0 .. 2^60");
        if (st[d] && dims[d] - 1 > (MAX_OFFSET - end) / st[d])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s_strides reach past 2^60 elements", fn, name);
        end += (dims[d] - 1) * st[d];
    }
    return TK_OK;
}

static tk_status check_scalar(tk_ctx *ctx, const char *fn, const char *name, float v) {
    if (v >= 0.0f && !isinf(v)) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: %s is %g; expected 0 (the default) or a finite value > 0", fn,
                            name, (double)v);
}

static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_based_params *p) {
    if (p->dtype != TK_BF16 && p->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(p->dtype));
    if (p->normalize != 0 && p->normalize != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: normalize is %d; expected 0 or 1",
                                fn, p->normalize);
    int vc = p->v_cols;
    if (vc != 0 && (vc < 16 || vc > 128 || vc % 16))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: v_cols is %d; expected 0 or a multiple of 16 in 16 .. 128",
                                fn, vc);
    tk_status s;
    if ((s = check_scalar(ctx, fn, "scale", p->scale)) || (s = check_scalar(ctx, fn, "eps", p->eps)) ||
        (s = check_size(ctx, fn, "batch", p->batch, MAX_GRID)) ||
        (s = check_size(ctx, fn, "heads", p->heads, MAX_GRID)) ||
        (s = check_size(ctx, fn, "seq", p->seq, MAX_SEQ)) ||
        (s = check_size(ctx, fn, "head_dim_v", p->head_dim_v, MAX_DV)))
        return s;
    if (p->head_dim_v % 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim_v is %lld; expected a multiple of 8 (16-byte rows)",
                                fn, (long long)p->head_dim_v);
    const void *ptr[4] = {p->q, p->k, p->v, p->o};
    static const char *names[4] = {"q", "k", "v", "o"};
    const int64_t *st[4] = {p->q_strides, p->k_strides, p->v_strides, p->o_strides};
    for (int i = 0; i < 4; i++) {
        if (!ptr[i]) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, names[i]);
        const int64_t dims[4] = {p->batch, p->heads, p->seq, i < 2 ? 16 : p->head_dim_v};
        if ((s = check_strides(ctx, fn, names[i], 4, st[i], dims))) return s;
    }
    const int64_t zd[3] = {p->batch, p->heads, p->seq};
    return p->z ? check_strides(ctx, fn, "z", 3, p->z_strides, zd) : TK_OK;
}

/* v_cols: 16 (measured: the most blocks, and 168 registers without spills) */
static tk_based_config config_of(const tk_based_params *p) {
    return (tk_based_config){.dtype = p->dtype,
                             .part = TK_BASED_FWD,
                             .normalize = p->normalize,
                             .stats = p->z != NULL,
                             .v_cols = p->v_cols ? p->v_cols : TK_BASED_V_COLS,
                             .warps = TK_BASED_WARPS};
}

static tk_arg tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                     const int64_t *st) {
    bool dense = true;
    for (int d = 0; d < rank; d++) dense = dense && !st[d];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, st);
}

void tk_based_fwd_launch(const tk_based_params *p, tk_based_launch *l) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, 16};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dz[3] = {p->batch, p->heads, p->seq};
    tk_arg *a = l->args;
    int n = 0;
    l->cfg = config_of(p);
    a[n++] = tensor(p->q, p->dtype, 4, dq, p->q_strides);
    a[n++] = tensor(p->k, p->dtype, 4, dq, p->k_strides);
    a[n++] = tensor(p->v, p->dtype, 4, dv, p->v_strides);
    a[n++] = tensor(p->o, p->dtype, 4, dv, p->o_strides);
    if (p->z) a[n++] = tensor(p->z, TK_F32, 3, dz, p->z_strides);
    a[n++] = tk_arg_f32(p->scale != 0.0f ? p->scale : 0.25f);
    a[n++] = tk_arg_f32(p->eps != 0.0f ? p->eps : 1e-6f);
    l->n = n;
}

static tk_status read_params(tk_ctx *ctx, const char *fn, const tk_based_params *user,
                             tk_based_params *p, tk_program **prog, tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, PARAMS_MIN);
    if (!s) s = check_params(ctx, fn, p);
    if (s) return s;
    tk_based_config c = config_of(p);
    return program(ctx, &c, prog, info);
}

tk_status tk_based_prepare(tk_ctx *ctx, const tk_based_params *user, tk_prepare_info *info) {
    tk_based_params p;
    tk_program *prog;
    return read_params(ctx, "tk_based_prepare", user, &p, &prog, info);
}

tk_status tk_based_forward(tk_ctx *ctx, const tk_based_params *user, void *stream) {
    tk_based_params p;
    tk_program *prog;
    tk_status s = read_params(ctx, "tk_based_forward", user, &p, &prog, NULL);
    if (s) return s;
    tk_based_launch l;
    tk_based_fwd_launch(&p, &l);
    return tk_launch(prog, l.n, l.args, stream);
}
