/* tk_grad_norm, tk_adamw and their companions (tk/tk_run.h): the parameters
 * checked, the kernels of the specialization from the registry, the
 * launches. The kernels: adamw.c.
 *
 * A flat buffer of n elements is two views: [n / width, width] rows and
 * the ragged tail [1, n mod width] at element (n / width)·width. Each
 * kernel runs once on each (the tail's launch one block), so every element
 * is read and written exactly once, and the 16-byte fast path holds on the
 * rows (width·4 bytes a row). The norm's partial rows follow the same
 * split: one per 16 full rows, then the tail's. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "adamw_parts.h"
#include "jit/registry.h"
#include "tk/tk_run.h"

/* Registry programs per tk_adamw_config: every field a specialization. */
typedef struct adamw_key {
    int32_t part, grad_dtype, lowp_dtype, clip, warps, cols;
} adamw_key;

static tk_status build_adamw_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const adamw_key *a = key;
    tk_adamw_config cfg = {.part = a->part,
                           .grad_dtype = (tk_dtype)a->grad_dtype,
                           .lowp_dtype = (tk_dtype)a->lowp_dtype,
                           .clip = a->clip,
                           .warps = a->warps,
                           .cols = a->cols};
    return tk_adamw_build(ctx, &cfg, out);
}

static const tk_kernel_def adamw_def = {"tk_adamw", sizeof(adamw_key), build_adamw_key};

/* The programs of configs c[0..n-1] (n <= 2), compiled side by side when
 * cold (info: the whole preparation). */
static tk_status programs(tk_ctx *ctx, const tk_adamw_config *c, int n, tk_program **prog,
                          tk_prepare_info *info) {
    adamw_key key[2];
    memset(key, 0, sizeof key);
    for (int i = 0; i < n; i++) {
        key[i].part = c[i].part, key[i].grad_dtype = c[i].grad_dtype;
        key[i].lowp_dtype = c[i].lowp_dtype, key[i].clip = c[i].clip;
        key[i].warps = c[i].warps, key[i].cols = c[i].cols;
    }
    return tk_registry_programs_of(ctx, &adamw_def, n, key, prog, info);
}

/* The kernels index in i64; rows of width columns, grid ceil(rows / 16). */
#define MAX_N     ((int64_t)1 << 40)
#define MAX_WIDTH ((int64_t)1 << 20)

/* ---- the checks ------------------------------------------------------------ */
static tk_status check_grad_dtype(tk_ctx *ctx, const char *fn, tk_dtype g) {
    if (g == TK_F32 || g == TK_BF16 || g == TK_F16) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: grad_dtype is %s; expected TK_F32, TK_BF16 or TK_F16", fn,
                            tk_dtype_name(g));
}

static tk_status check_sizes(tk_ctx *ctx, const char *fn, int64_t n, int64_t width) {
    if (n < 1 || n > MAX_N)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: n is %lld; expected 1 .. 2^40", fn,
                                (long long)n);
    if (width != 0 && (width < 16 || width > MAX_WIDTH || width % 16))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: width is %lld; expected 0 (TK_ADAMW_WIDTH) or a multiple "
                                "of 16 in 16 .. 2^20",
                                fn, (long long)width);
    return TK_OK;
}

/* A device pointer: present where required, aligned to its element. */
static tk_status check_ptr(tk_ctx *ctx, const char *fn, const char *name, const void *p,
                           bool required, size_t align) {
    if (!p && required)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    if ((uintptr_t)p % align)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is not %zu-byte aligned (its element's size)", fn, name,
                                align);
    return TK_OK;
}

/* A finite scalar >= 0 (below 1 where `below_one`). */
static tk_status check_scalar(tk_ctx *ctx, const char *fn, const char *name, float v,
                              bool below_one) {
    if (!(v >= 0.0f) || isinf(v))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s %g is not a finite value >= 0", fn,
                                name, (double)v);
    if (below_one && v >= 1.0f)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s %g is outside [0, 1)", fn, name,
                                (double)v);
    return TK_OK;
}

/* ---- the rows ------------------------------------------------------------- */
tk_adamw_rows tk_adamw_rows_of(int64_t n, int64_t width) {
    int64_t w = width ? width : TK_ADAMW_WIDTH;
    return (tk_adamw_rows){.width = w, .rows = n / w, .tail = n % w};
}

int64_t tk_grad_norm_partials(tk_adamw_rows r) { return (r.rows + 15) / 16 + (r.tail > 0); }

static size_t norm_workspace(const tk_grad_norm_params *p) {
    return (size_t)tk_grad_norm_partials(tk_adamw_rows_of(p->n, p->width)) * 16 * sizeof(float);
}

static tk_arg mat(const void *data, tk_dtype dt, int64_t rows, int64_t cols) {
    int64_t d[2] = {rows, cols};
    return tk_arg_tensor((void *)data, dt, 2, d);
}

static tk_arg one(const void *data) {
    int64_t n = 1;
    return tk_arg_tensor((void *)data, TK_F32, 1, &n);
}

/* Buffer b's part: the full rows (tail 0) or the tail (1), as a view. */
static tk_arg part_of(const void *b, tk_dtype dt, tk_adamw_rows r, int tail) {
    if (!tail) return mat(b, dt, r.rows, r.width);
    return mat((const char *)b + (size_t)(r.rows * r.width) * tk_dtype_size(dt), dt, 1, r.tail);
}

/* The caller's block shape (warps, cols), or ours. */
static tk_adamw_config config(int part, tk_dtype gd, const tk_adamw_config *user) {
    tk_adamw_config c = {.part = part, .grad_dtype = gd};
    if (user) c.warps = user->warps, c.cols = user->cols;
    return c;
}

/* ---- the norm --------------------------------------------------------------- */
#define NORM_MIN sizeof(tk_grad_norm_params)

static tk_status check_norm(tk_ctx *ctx, const char *fn, const tk_grad_norm_params *p, bool full) {
    tk_status s = check_grad_dtype(ctx, fn, p->grad_dtype);
    if (!s) s = check_sizes(ctx, fn, p->n, p->width);
    if (s || !full) return s;
    if ((s = check_ptr(ctx, fn, "grad", p->grad, true, tk_dtype_size(p->grad_dtype))) ||
        (s = check_ptr(ctx, fn, "norm", p->norm, true, sizeof(float))) ||
        (s = check_ptr(ctx, fn, "workspace", p->workspace, true, sizeof(float))))
        return s;
    size_t need = norm_workspace(p);
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; n = %lld needs %zu "
                                "(tk_grad_norm_workspace)",
                                fn, p->workspace_bytes, (long long)p->n, need);
    return TK_OK;
}

/* SUMSQ (prog[0]) and NORM (prog[1]); info: both's preparation. */
static tk_status norm_read(tk_ctx *ctx, const char *fn, const tk_grad_norm_params *user,
                           tk_grad_norm_params *p, bool full, tk_program *prog[2],
                           tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, NORM_MIN);
    if (!s) s = check_norm(ctx, fn, p, full);
    if (s || !prog) return s;
    tk_adamw_config c[2] = {config(TK_ADAMW_SUMSQ, p->grad_dtype, p->config),
                            {.part = TK_ADAMW_NORM}};
    return programs(ctx, c, 2, prog, info);
}

int tk_grad_norm_launches(const tk_grad_norm_params *p, tk_adamw_launch out[3]) {
    tk_adamw_rows r = tk_adamw_rows_of(p->n, p->width);
    int64_t full = (r.rows + 15) / 16;
    int m = 0;
    for (int tail = 0; tail < 2; tail++) {
        if (tail ? !r.tail : !r.rows) continue;
        out[m].cfg = config(TK_ADAMW_SUMSQ, p->grad_dtype, p->config);
        out[m].args[0] = part_of(p->grad, p->grad_dtype, r, tail);
        /* the tail's partial row follows the full rows' */
        out[m].args[1] =
            mat((float *)p->workspace + (tail ? full * 16 : 0), TK_F32, tail ? 1 : full, 16);
        out[m++].n = 2;
    }
    out[m].cfg = (tk_adamw_config){.part = TK_ADAMW_NORM};
    out[m].args[0] = mat(p->workspace, TK_F32, tk_grad_norm_partials(r), 16);
    out[m].args[1] = one(p->norm);
    out[m++].n = 2;
    return m;
}

tk_status tk_grad_norm_workspace(tk_ctx *ctx, const tk_grad_norm_params *user, size_t *bytes) {
    const char *fn = "tk_grad_norm_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_grad_norm_params p;
    tk_status s = norm_read(ctx, fn, user, &p, false, NULL, NULL);
    if (!s) *bytes = norm_workspace(&p);
    return s;
}

tk_status tk_grad_norm_prepare(tk_ctx *ctx, const tk_grad_norm_params *user,
                               tk_prepare_info *info) {
    tk_grad_norm_params p;
    tk_program *prog[2];
    return norm_read(ctx, "tk_grad_norm_prepare", user, &p, true, prog, info);
}

tk_status tk_grad_norm(tk_ctx *ctx, const tk_grad_norm_params *user, void *stream) {
    tk_grad_norm_params p;
    tk_program *prog[2];
    tk_status s = norm_read(ctx, "tk_grad_norm", user, &p, true, prog, NULL);
    if (s) return s;
    tk_adamw_launch l[3];
    int n = tk_grad_norm_launches(&p, l);
    for (int i = 0; i < n && !s; i++)
        s = tk_launch(prog[l[i].cfg.part == TK_ADAMW_NORM], l[i].n, l[i].args, stream);
    return s;
}

/* ---- the step --------------------------------------------------------------- */
#define STEP_MIN sizeof(tk_adamw_params)

static tk_status check_hyper(tk_ctx *ctx, const char *fn, const tk_adamw_params *p) {
    tk_status s;
    if ((s = check_scalar(ctx, fn, "max_norm", p->max_norm, false)) ||
        (s = check_scalar(ctx, fn, "lr", p->lr, false)) ||
        (s = check_scalar(ctx, fn, "beta1", p->beta1, true)) ||
        (s = check_scalar(ctx, fn, "beta2", p->beta2, true)) ||
        (s = check_scalar(ctx, fn, "eps", p->eps, false)) ||
        (s = check_scalar(ctx, fn, "weight_decay", p->weight_decay, false)))
        return s;
    if (p->step < 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: step is %lld; expected t >= 1 (the first step is 1)", fn,
                                (long long)p->step);
    return TK_OK;
}

static tk_status check_step(tk_ctx *ctx, const char *fn, const tk_adamw_params *p) {
    tk_status s = check_grad_dtype(ctx, fn, p->grad_dtype);
    if (!s) s = check_sizes(ctx, fn, p->n, p->width);
    if (!s) s = check_hyper(ctx, fn, p);
    if (s) return s;
    tk_dtype l = p->lowp_dtype;
    if (p->weight_lowp && l != TK_BF16 && l != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: lowp_dtype is %s; expected TK_BF16 or TK_F16 (weight_lowp's)",
                                fn, tk_dtype_name(l));
    if (!p->weight_lowp && l != TK_DT_NONE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: weight_lowp is NULL and lowp_dtype is %s; pass the copy, "
                                "or lowp_dtype 0 for none",
                                fn, tk_dtype_name(l));
    const void *ptrs[6] = {p->weight, p->m, p->v, p->grad, p->weight_lowp, p->grad_norm};
    static const char *names[6] = {"weight", "m", "v", "grad", "weight_lowp", "grad_norm"};
    size_t align[6] = {4, 4, 4, tk_dtype_size(p->grad_dtype), 2, 4};
    for (int i = 0; i < 6; i++)
        if ((s = check_ptr(ctx, fn, names[i], ptrs[i], i < 4, align[i]))) return s;
    return TK_OK;
}

static tk_adamw_config step_config(const tk_adamw_params *p) {
    tk_adamw_config c = config(TK_ADAMW_STEP, p->grad_dtype, p->config);
    c.lowp_dtype = p->weight_lowp ? p->lowp_dtype : TK_DT_NONE;
    c.clip = p->grad_norm && p->max_norm > 0.0f;
    return c;
}

static tk_status step_read(tk_ctx *ctx, const char *fn, const tk_adamw_params *user,
                           tk_adamw_params *p, tk_program **prog, tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, STEP_MIN);
    if (!s) s = check_step(ctx, fn, p);
    if (s) return s;
    tk_adamw_config c = step_config(p);
    return programs(ctx, &c, 1, prog, info);
}

/* The scalars: the bias corrections 1 - β^t in double, rounded once. */
static int step_scalars(const tk_adamw_params *p, bool clip, tk_arg *a) {
    double t = (double)p->step;
    float bc1 = (float)(1.0 - pow((double)p->beta1, t));
    float bc2 = (float)(1.0 - pow((double)p->beta2, t));
    float v[8] = {p->lr, p->beta1, p->beta2, p->eps, p->weight_decay, bc1, bc2, p->max_norm};
    int n = clip ? 8 : 7;
    for (int i = 0; i < n; i++) a[i] = tk_arg_f32(v[i]);
    return n;
}

int tk_adamw_launches(const tk_adamw_params *p, tk_adamw_launch out[2]) {
    tk_adamw_rows r = tk_adamw_rows_of(p->n, p->width);
    tk_adamw_config c = step_config(p);
    int m = 0;
    for (int tail = 0; tail < 2; tail++) {
        if (tail ? !r.tail : !r.rows) continue;
        tk_arg *a = out[m].args;
        int n = 0;
        a[n++] = part_of(p->weight, TK_F32, r, tail);
        a[n++] = part_of(p->m, TK_F32, r, tail);
        a[n++] = part_of(p->v, TK_F32, r, tail);
        a[n++] = part_of(p->grad, p->grad_dtype, r, tail);
        if (c.lowp_dtype) a[n++] = part_of(p->weight_lowp, c.lowp_dtype, r, tail);
        if (c.clip) a[n++] = one(p->grad_norm);
        n += step_scalars(p, c.clip, a + n);
        out[m].cfg = c;
        out[m++].n = n;
    }
    return m;
}

tk_status tk_adamw_prepare(tk_ctx *ctx, const tk_adamw_params *user, tk_prepare_info *info) {
    tk_adamw_params p;
    tk_program *prog;
    return step_read(ctx, "tk_adamw_prepare", user, &p, &prog, info);
}

tk_status tk_adamw(tk_ctx *ctx, const tk_adamw_params *user, void *stream) {
    tk_adamw_params p;
    tk_program *prog;
    tk_status s = step_read(ctx, "tk_adamw", user, &p, &prog, NULL);
    if (s) return s;
    tk_adamw_launch l[2];
    int n = tk_adamw_launches(&p, l);
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog, l[i].n, l[i].args, stream);
    return s;
}
