/* tk_bias_grad and its companions (tk/tk_run_train.h): the parameters
 * checked, the two kernels (bias_grad.c) from the registry, the launches.
 * The chunk is fixed (256 rows), not sized to the GPU, so that the order
 * of the sums, and the bits, are the same on every GPU. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jit/registry.h"
#include "run_checks.h"
#include "tk/tk_run.h"

#define CHUNK    256 /* rows a partial row sums (a multiple of 32)     */
#define MAX_ROWS ((int64_t)INT32_MAX)
#define MAX_COLS ((int64_t)1 << 24)
#define MIN_SIZE sizeof(tk_bias_grad_params)

typedef struct bias_key {
    int32_t part, dtype, warps;
} bias_key;

static tk_status build_bias_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const bias_key *a = key;
    tk_bias_grad_config c = {.part = a->part, .dtype = (tk_dtype)a->dtype, .warps = a->warps};
    return tk_bias_grad_build(ctx, &c, out);
}

static const tk_kernel_def bias_def = {"tk_bias_grad", sizeof(bias_key), build_bias_key};

/* The partial sums' program and the reduction's for dtype dt, compiled side
 * by side when cold (info: the whole preparation). */
static tk_status programs(tk_ctx *ctx, tk_dtype dt, tk_program *prog[2], tk_prepare_info *info) {
    bias_key key[2];
    memset(key, 0, sizeof key);
    key[0].part = TK_BIAS_GRAD_PARTIAL, key[0].dtype = dt;
    key[1].part = TK_BIAS_GRAD_REDUCE, key[1].dtype = TK_DT_NONE;
    return tk_registry_programs_of(ctx, &bias_def, 2, key, prog, info);
}

static int64_t chunks(const tk_bias_grad_params *p) { return (p->rows + CHUNK - 1) / CHUNK; }

static size_t workspace_bytes(const tk_bias_grad_params *p) {
    return (size_t)chunks(p) * (size_t)p->cols * sizeof(float);
}

static tk_status check_ptr(tk_ctx *ctx, const char *fn, const char *name, const void *ptr,
                           size_t align) {
    if (!ptr) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    if ((uintptr_t)ptr % align)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is not %zu-byte aligned", fn, name,
                                align);
    return TK_OK;
}

static tk_status check_sizes(tk_ctx *ctx, const char *fn, const tk_bias_grad_params *p) {
    tk_dtype dt = p->dtype;
    tk_status s;
    if (dt != TK_BF16 && dt != TK_F16 && dt != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16, TK_F16 or TK_F32", fn,
                                tk_dtype_name(dt));
    if ((s = tk_run_check_size(ctx, fn, "rows", p->rows, MAX_ROWS)) ||
        (s = tk_run_check_size(ctx, fn, "cols", p->cols, MAX_COLS)))
        return s;
    int64_t ld = p->dy_stride ? p->dy_stride : p->cols;
    if (p->dy_stride < 0 || (p->dy_stride && p->dy_stride < p->cols) ||
        (p->rows > 1 && ld > (TK_RUN_MAX_OFFSET - p->cols) / (p->rows - 1)))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dy_stride is %lld; expected 0 (dense) or cols (%lld) and "
                                "more, with (rows - 1) x dy_stride + cols below 2^60",
                                fn, (long long)p->dy_stride, (long long)p->cols);
    return TK_OK;
}

static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_bias_grad_params *p) {
    tk_status s = check_sizes(ctx, fn, p);
    if (s) return s;
    if (p->accumulate != 0 && p->accumulate != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: accumulate is %d; expected 0 or 1",
                                fn, p->accumulate);
    if ((s = check_ptr(ctx, fn, "dy", p->dy, tk_dtype_size(p->dtype))) ||
        (s = check_ptr(ctx, fn, "dbias", p->dbias, sizeof(float))) ||
        (s = check_ptr(ctx, fn, "workspace", p->workspace, sizeof(float))))
        return s;
    size_t need = workspace_bytes(p);
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; %lld rows x %lld cols need %zu "
                                "(tk_bias_grad_workspace)",
                                fn, p->workspace_bytes, (long long)p->rows, (long long)p->cols,
                                need);
    return TK_OK;
}

/* p read and checked (full: every field; else the sizes); prog[0] the
 * partial sums', prog[1] the reduction's. */
static tk_status bias_read(tk_ctx *ctx, const char *fn, const tk_bias_grad_params *user,
                           tk_bias_grad_params *p, bool full, tk_program *prog[2],
                           tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, MIN_SIZE);
    if (!s) s = full ? check_params(ctx, fn, p) : check_sizes(ctx, fn, p);
    if (s || !prog) return s;
    return programs(ctx, p->dtype, prog, info);
}

tk_status tk_bias_grad_workspace(tk_ctx *ctx, const tk_bias_grad_params *user, size_t *bytes) {
    const char *fn = "tk_bias_grad_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_bias_grad_params p;
    tk_status s = bias_read(ctx, fn, user, &p, false, NULL, NULL);
    if (!s) *bytes = workspace_bytes(&p);
    return s;
}

tk_status tk_bias_grad_prepare(tk_ctx *ctx, const tk_bias_grad_params *user,
                               tk_prepare_info *info) {
    tk_bias_grad_params p;
    tk_program *prog[2];
    return bias_read(ctx, "tk_bias_grad_prepare", user, &p, true, prog, info);
}

tk_status tk_bias_grad(tk_ctx *ctx, const tk_bias_grad_params *user, void *stream) {
    tk_bias_grad_params p;
    tk_program *prog[2];
    tk_status s = bias_read(ctx, "tk_bias_grad", user, &p, true, prog, NULL);
    if (s) return s;
    int64_t P = chunks(&p), ld = p.dy_stride ? p.dy_stride : p.cols;
    int64_t dy[2] = {p.rows, p.cols}, st[2] = {ld, 1}, part[2] = {P, p.cols};
    tk_arg a[3] = {tk_arg_strided((void *)p.dy, p.dtype, 2, dy, st),
                   tk_arg_tensor(p.workspace, TK_F32, 2, part), tk_arg_i64(CHUNK)};
    if ((s = tk_launch(prog[0], 3, a, stream))) return s;
    tk_arg r[3] = {tk_arg_tensor(p.workspace, TK_F32, 2, part),
                   tk_arg_tensor(p.dbias, TK_F32, 1, &p.cols), tk_arg_i32(p.accumulate)};
    return tk_launch(prog[1], 3, r, stream);
}
