/* tk_norm_forward, tk_norm_backward and their companions (tk/tk_run.h): the
 * parameters checked, the kernels of the specialization from the registry,
 * the launches. The kernels: norm.c. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jit/registry.h"
#include "norm_parts.h"
#include "tk/tk_run.h"

/* Registry programs per tk_norm_config: every field a specialization. */
typedef struct norm_key {
    int32_t dtype, kind, part, residual, weight, bias, stats, warps, cols;
} norm_key;

static tk_status build_norm_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const norm_key *a = key;
    tk_norm_config cfg = {.dtype = (tk_dtype)a->dtype,
                          .kind = a->kind,
                          .part = a->part,
                          .residual = a->residual,
                          .weight = a->weight,
                          .bias = a->bias,
                          .stats = a->stats,
                          .warps = a->warps,
                          .cols = a->cols};
    return tk_norm_build(ctx, &cfg, out);
}

static const tk_kernel_def norm_def = {"tk_norm", sizeof(norm_key), build_norm_key};

/* The programs of configs c[0..n-1] (n <= 2), compiled side by side when
 * cold (info: the whole preparation). */
static tk_status programs(tk_ctx *ctx, const tk_norm_config *c, int n, tk_program **prog,
                          tk_prepare_info *info) {
    norm_key key[2];
    memset(key, 0, sizeof key);
    for (int i = 0; i < n; i++) {
        key[i].dtype = c[i].dtype, key[i].kind = c[i].kind, key[i].part = c[i].part;
        key[i].residual = c[i].residual, key[i].weight = c[i].weight, key[i].bias = c[i].bias;
        key[i].stats = c[i].stats, key[i].warps = c[i].warps, key[i].cols = c[i].cols;
    }
    return tk_registry_programs_of(ctx, &norm_def, n, key, prog, info);
}

/* The ends of the first layouts. */
#define FWD_MIN (offsetof(tk_norm_params, y_stride) + sizeof(int64_t))
#define BWD_MIN (offsetof(tk_norm_bwd_params, dx_stride) + sizeof(int64_t))
/* The kernels index in i64; a grid of ceil(rows / 64) blocks in x. */
#define MAX_SIZE ((int64_t)1 << 40)

static tk_status check_common(tk_ctx *ctx, const char *fn, tk_dtype dt, int kind, int64_t rows,
                              int64_t cols) {
    if (dt != TK_BF16 && dt != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(dt));
    if (kind != TK_NORM_LAYER && kind != TK_NORM_RMS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: kind is %d; expected TK_NORM_LAYER or TK_NORM_RMS", fn, kind);
    if (rows < 0 || rows > MAX_SIZE || cols < 1 || cols > MAX_SIZE || rows * cols / cols != rows)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rows x cols is %lld x %lld; expected rows in 0..2^40 and "
                                "cols in 1..2^40",
                                fn, (long long)rows, (long long)cols);
    return TK_OK;
}

/* A [rows, cols] operand: present where required, its row pitch (0: cols)
 * at least cols, within the sizes' range. */
static tk_status check_mat(tk_ctx *ctx, const char *fn, const char *name, const void *ptr,
                           bool required, int64_t stride, int64_t cols) {
    if (required && !ptr)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    if (stride != 0 && (stride < cols || stride > MAX_SIZE))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s_stride is %lld; expected 0 (dense) or cols (%lld) .. 2^40",
                                fn, name, (long long)stride, (long long)cols);
    return TK_OK;
}

static tk_arg mat(const void *data, tk_dtype dt, int64_t rows, int64_t cols, int64_t stride) {
    int64_t d[2] = {rows, cols}, s[2] = {stride ? stride : cols, 1};
    return tk_arg_strided((void *)data, dt, 2, d, s);
}

static tk_arg vec(const void *data, tk_dtype dt, int64_t n) {
    return tk_arg_tensor((void *)data, dt, 1, &n);
}

/* ---- the forward --------------------------------------------------------- */
static tk_status check_fwd(tk_ctx *ctx, const char *fn, const tk_norm_params *p) {
    tk_status s = check_common(ctx, fn, p->dtype, p->kind, p->rows, p->cols);
    if (s) return s;
    if (!(p->eps >= 0.0f) || isinf(p->eps))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: eps %g is not a finite value >= 0",
                                fn, (double)p->eps);
    if (p->bias && p->kind == TK_NORM_RMS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: bias is set with TK_NORM_RMS, which has no bias", fn);
    if (p->kind == TK_NORM_LAYER && !p->mean != !p->rstd)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is NULL and %s is not; LayerNorm saves both or neither", fn,
                                p->mean ? "rstd" : "mean", p->mean ? "mean" : "rstd");
    bool res = p->residual != NULL;
    if ((s = check_mat(ctx, fn, "x", p->x, true, p->x_stride, p->cols)) ||
        (s = check_mat(ctx, fn, "residual", p->residual, false, p->residual_stride, p->cols)) ||
        (s = check_mat(ctx, fn, "y", p->y, true, p->y_stride, p->cols)))
        return s;
    if (res && !p->h)
        return tk_ctx_set_error(
            ctx, TK_ERR_INVALID_ARG,
            "%s: h is NULL; with a residual the forward writes h = x + residual", fn);
    return check_mat(ctx, fn, "h", p->h, false, p->h_stride, p->cols);
}

/* From the sweeps on the H200 (bench_norm.py NORM_SWEEP, bench/RESULTS.md
 * 2026-12-04): rounds of 256 columns in blocks of 8 warps were best or
 * within 5% at every width, forward and backward (16384 x 4096 forward:
 * 2272 GB/s; 1024 columns at once 1458). A round is latency the block
 * waits out between barriers, and L2 holds the rows between the passes.
 * Up to 768 columns, 4 warps with rounds of 128 (H100, 16384 x 768,
 * GPT-2's width: forward 69 µs against 76, backward 92 against 102;
 * session 26): smaller blocks, more of them resident per SM. */
void tk_norm_shape_for(int part, int64_t cols, int *warps, int *round_cols) {
    (void)part;
    int w = cols <= 768 ? 4 : TK_NORM_WARPS;
    *warps = w, *round_cols = 32 * w * TK_NORM_SLOTS;
}

/* The caller's shape, or ours. */
static void shape(tk_norm_config *c, const tk_norm_config *user, int64_t cols) {
    if (user)
        c->warps = user->warps, c->cols = user->cols;
    else
        tk_norm_shape_for(c->part, cols, &c->warps, &c->cols);
}

static tk_norm_config fwd_config(const tk_norm_params *p) {
    tk_norm_config c = {.dtype = p->dtype,
                        .kind = p->kind,
                        .part = TK_NORM_FWD,
                        .residual = p->residual != NULL,
                        .weight = p->weight != NULL,
                        .bias = p->bias != NULL,
                        .stats = p->rstd != NULL};
    shape(&c, p->config, p->cols);
    return c;
}

int tk_norm_fwd_launches(const tk_norm_params *p, tk_norm_launch out[1]) {
    if (p->rows == 0) return 0;
    int64_t R = p->rows, C = p->cols;
    tk_dtype dt = p->dtype;
    tk_arg *a = out->args;
    int n = 0;
    out->cfg = fwd_config(p);
    a[n++] = mat(p->x, dt, R, C, p->x_stride);
    if (p->residual) a[n++] = mat(p->residual, dt, R, C, p->residual_stride);
    if (p->weight) a[n++] = vec(p->weight, dt, C);
    if (p->bias) a[n++] = vec(p->bias, dt, C);
    if (p->residual) a[n++] = mat(p->h, dt, R, C, p->h_stride);
    a[n++] = mat(p->y, dt, R, C, p->y_stride);
    if (p->rstd && p->kind == TK_NORM_LAYER) a[n++] = vec(p->mean, TK_F32, R);
    if (p->rstd) a[n++] = vec(p->rstd, TK_F32, R);
    a[n++] = tk_arg_f32(p->eps);
    out->n = n;
    return 1;
}

static tk_status fwd_read(tk_ctx *ctx, const char *fn, const tk_norm_params *user,
                          tk_norm_params *p, tk_program **prog, tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, FWD_MIN);
    if (!s) s = check_fwd(ctx, fn, p);
    if (s) return s;
    tk_norm_config c = fwd_config(p);
    return programs(ctx, &c, 1, prog, info);
}

tk_status tk_norm_prepare(tk_ctx *ctx, const tk_norm_params *user, tk_prepare_info *info) {
    tk_norm_params p;
    tk_program *prog;
    return fwd_read(ctx, "tk_norm_prepare", user, &p, &prog, info);
}

tk_status tk_norm_forward(tk_ctx *ctx, const tk_norm_params *user, void *stream) {
    tk_norm_params p;
    tk_program *prog;
    tk_status s = fwd_read(ctx, "tk_norm_forward", user, &p, &prog, NULL);
    tk_norm_launch l;
    if (s || !tk_norm_fwd_launches(&p, &l)) return s;
    return tk_launch(prog, l.n, l.args, stream);
}

/* ---- the backward -------------------------------------------------------- */
/* Partial rows of the column sums: one per 16 rows (norm.c's warp). */
static int64_t partial_rows(int64_t rows) { return (rows + 15) / 16; }

static size_t part_bytes(const tk_norm_bwd_params *p) {
    size_t b = (size_t)partial_rows(p->rows) * (size_t)p->cols * sizeof(float);
    return (b + 255) / 256 * 256;
}

/* dWp (with a weight) then dBp (with dbias), each 256-aligned. */
static size_t workspace_bytes(const tk_norm_bwd_params *p) {
    return ((p->weight != NULL) + (p->dbias != NULL)) * part_bytes(p);
}

static tk_dtype grad_dtype(const tk_norm_bwd_params *p) {
    return p->grad_dtype ? p->grad_dtype : TK_F32;
}

static tk_status check_bwd(tk_ctx *ctx, const char *fn, const tk_norm_bwd_params *p, bool full) {
    tk_status s = check_common(ctx, fn, p->dtype, p->kind, p->rows, p->cols);
    if (s) return s;
    if (p->dbias && p->kind == TK_NORM_RMS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dbias is set with TK_NORM_RMS, which has no bias", fn);
    if (p->dweight && !p->weight)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dweight is set and weight is NULL: without a weight there "
                                "is no weight gradient",
                                fn);
    tk_dtype g = grad_dtype(p);
    if (g != TK_F32 && g != TK_BF16 && g != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: grad_dtype is %s; expected TK_F32, TK_BF16 or TK_F16", fn,
                                tk_dtype_name(g));
    if (!full) return TK_OK;
    if ((s = check_mat(ctx, fn, "h", p->h, true, p->h_stride, p->cols)) ||
        (s = check_mat(ctx, fn, "dy", p->dy, true, p->dy_stride, p->cols)) ||
        (s = check_mat(ctx, fn, "dh", p->dh, false, p->dh_stride, p->cols)) ||
        (s = check_mat(ctx, fn, "dx", p->dx, true, p->dx_stride, p->cols)))
        return s;
    const char *missing = !p->rstd ? "rstd" : p->kind == TK_NORM_LAYER && !p->mean ? "mean" : NULL;
    if (missing)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is NULL; the backward reads the forward's statistics", fn,
                                missing);
    size_t need = workspace_bytes(p);
    if (need && ((uintptr_t)p->workspace % sizeof(float) || !p->workspace))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: workspace is %s", fn,
                                p->workspace ? "not 4-byte aligned" : "NULL");
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; these sizes need %zu "
                                "(tk_norm_backward_workspace)",
                                fn, p->workspace_bytes, need);
    return TK_OK;
}

static tk_norm_config bwd_config(const tk_norm_bwd_params *p) {
    tk_norm_config c = {.dtype = p->dtype,
                        .kind = p->kind,
                        .part = TK_NORM_BWD,
                        .residual = p->dh != NULL,
                        .weight = p->weight != NULL,
                        .bias = p->dbias != NULL};
    shape(&c, p->config, p->cols);
    return c;
}

static tk_norm_config reduce_config(const tk_norm_bwd_params *p) {
    return (tk_norm_config){.dtype = grad_dtype(p), .part = TK_NORM_BWD_REDUCE};
}

/* The backward kernel (prog[0]) and, where p wants a column sum, the
 * reduction (prog[1]). */
static tk_status bwd_read(tk_ctx *ctx, const char *fn, const tk_norm_bwd_params *user,
                          tk_norm_bwd_params *p, bool full, tk_program *prog[2],
                          tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, BWD_MIN);
    if (!s) s = check_bwd(ctx, fn, p, full);
    if (s || !prog) return s;
    tk_norm_config c[2] = {bwd_config(p), reduce_config(p)};
    prog[1] = NULL;
    return programs(ctx, c, p->dweight || p->dbias ? 2 : 1, prog, info);
}

tk_status tk_norm_backward_workspace(tk_ctx *ctx, const tk_norm_bwd_params *user, size_t *bytes) {
    const char *fn = "tk_norm_backward_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_norm_bwd_params p;
    tk_status s = bwd_read(ctx, fn, user, &p, false, NULL, NULL);
    if (!s) *bytes = workspace_bytes(&p);
    return s;
}

tk_status tk_norm_backward_prepare(tk_ctx *ctx, const tk_norm_bwd_params *user,
                                   tk_prepare_info *info) {
    tk_norm_bwd_params p;
    tk_program *prog[2];
    return bwd_read(ctx, "tk_norm_backward_prepare", user, &p, true, prog, info);
}

int tk_norm_bwd_launches(const tk_norm_bwd_params *p, tk_norm_launch out[3]) {
    int64_t R = p->rows, C = p->cols, P = partial_rows(R);
    tk_dtype dt = p->dtype;
    char *ws = p->workspace;
    /* the kernel writes the weight's partials whenever it reads a weight */
    void *dwp = p->weight ? ws : NULL;
    void *dbp = p->dbias ? ws + (p->weight ? part_bytes(p) : 0) : NULL;
    int m = 0;
    if (R > 0) { /* no rows: only the reductions, of no partials, run (zero gradients) */
        tk_arg *a = out[m].args;
        int n = 0;
        a[n++] = mat(p->h, dt, R, C, p->h_stride);
        a[n++] = mat(p->dy, dt, R, C, p->dy_stride);
        if (p->dh) a[n++] = mat(p->dh, dt, R, C, p->dh_stride);
        if (p->weight) a[n++] = vec(p->weight, dt, C);
        if (p->kind == TK_NORM_LAYER) a[n++] = vec(p->mean, TK_F32, R);
        a[n++] = vec(p->rstd, TK_F32, R);
        a[n++] = mat(p->dx, dt, R, C, p->dx_stride);
        if (dwp) a[n++] = mat(dwp, TK_F32, P, C, 0);
        if (dbp) a[n++] = mat(dbp, TK_F32, P, C, 0);
        out[m].cfg = bwd_config(p);
        out[m++].n = n;
    }
    void *parts[2] = {dwp, dbp}, *grads[2] = {p->dweight, p->dbias};
    for (int i = 0; i < 2; i++) {
        if (!grads[i]) continue;
        out[m].cfg = reduce_config(p);
        /* no rows: an empty [0, C] view, never read (the workspace may be NULL) */
        out[m].args[0] = mat(R > 0 ? parts[i] : grads[i], TK_F32, P, C, 0);
        out[m].args[1] = vec(grads[i], grad_dtype(p), C);
        out[m++].n = 2;
    }
    return m;
}

tk_status tk_norm_backward(tk_ctx *ctx, const tk_norm_bwd_params *user, void *stream) {
    tk_norm_bwd_params p;
    tk_program *prog[2];
    tk_status s = bwd_read(ctx, "tk_norm_backward", user, &p, true, prog, NULL);
    if (s) return s;
    tk_norm_launch l[3];
    int n = tk_norm_bwd_launches(&p, l);
    for (int i = 0; i < n && !s; i++)
        s = tk_launch(prog[l[i].cfg.part == TK_NORM_BWD ? 0 : 1], l[i].n, l[i].args, stream);
    return s;
}
