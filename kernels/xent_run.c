/* tk_cross_entropy and its companions (tk/tk_run.h): the parameters
 * checked, the kernels of the specialization from the registry, the
 * launches. The kernels: xent.c. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jit/registry.h"
#include "tk/tk_run.h"
#include "xent_parts.h"

/* Registry programs per tk_xent_config: every field a specialization. */
typedef struct xent_key {
    int32_t dtype, part, backward, per_row_scale, lse, mean, split, warps, cols;
} xent_key;

static tk_status build_xent_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const xent_key *a = key;
    tk_xent_config cfg = {.dtype = (tk_dtype)a->dtype,
                          .part = a->part,
                          .backward = a->backward,
                          .per_row_scale = a->per_row_scale,
                          .lse = a->lse,
                          .mean = a->mean,
                          .split = a->split,
                          .warps = a->warps,
                          .cols = a->cols};
    return tk_xent_build(ctx, &cfg, out);
}

static const tk_kernel_def xent_def = {"tk_cross_entropy", sizeof(xent_key), build_xent_key};

/* The programs of configs c[0..n-1] (n <= 2), compiled side by side when
 * cold (info: the whole preparation). */
static tk_status programs(tk_ctx *ctx, const tk_xent_config *c, int n, tk_program **prog,
                          tk_prepare_info *info) {
    xent_key key[2];
    memset(key, 0, sizeof key);
    for (int i = 0; i < n; i++) {
        key[i].dtype = c[i].dtype, key[i].part = c[i].part, key[i].backward = c[i].backward;
        key[i].per_row_scale = c[i].per_row_scale, key[i].lse = c[i].lse;
        key[i].mean = c[i].mean, key[i].split = c[i].split, key[i].warps = c[i].warps;
        key[i].cols = c[i].cols;
    }
    return tk_registry_programs_of(ctx, &xent_def, n, key, prog, info);
}

/* The end of the first layout (config may be absent: NULL). */
#define MIN_SIZE offsetof(tk_xent_params, config)
/* Split rows are a block each: the grid's x limit. */
#define MAX_ROWS ((int64_t)INT32_MAX)
/* Column indices meet the targets in f32: exact up to 2^24. */
#define MAX_VOCAB ((int64_t)1 << 24)
/* The largest element offset the kernels' i64 address math may reach. */
#define MAX_OFFSET ((int64_t)1 << 60)

static tk_status fail(tk_ctx *ctx, const char *fn, const char *name, const char *why) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s %s", fn, name, why);
}

/* A pointer present where required and aligned to its elements. */
static tk_status check_ptr(tk_ctx *ctx, const char *fn, const char *name, const void *ptr,
                           bool required, size_t align) {
    if (!ptr) return required ? fail(ctx, fn, name, "is NULL") : TK_OK;
    if ((uintptr_t)ptr % align)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is not %zu-byte aligned", fn, name,
                                align);
    return TK_OK;
}

/* A [rows, vocab] matrix's row pitch: 0 (dense) or vocab .. the offsets'
 * limit. */
static tk_status check_stride(tk_ctx *ctx, const char *fn, const char *name, int64_t stride,
                              const tk_xent_params *p) {
    int64_t s = stride ? stride : p->vocab;
    if (stride < 0 || (stride && stride < p->vocab) ||
        (p->rows > 1 && s > (MAX_OFFSET - p->vocab) / (p->rows - 1)))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is %lld; expected 0 (dense) or vocab (%lld) and more, "
                                "with (rows - 1) x %s + vocab below 2^60",
                                fn, name, (long long)stride, (long long)p->vocab, name);
    return TK_OK;
}

/* The row kernel's partial sums for the mean: PL then PC, P floats each
 * (P <= rows: a block's), each 256-byte aligned. */
static size_t part_bytes(const tk_xent_params *p) {
    return ((size_t)p->rows * sizeof(float) + 255) / 256 * 256;
}

static size_t workspace_bytes(const tk_xent_params *p) {
    return p->loss_mean ? 2 * part_bytes(p) : 0;
}

static tk_status check_sizes(tk_ctx *ctx, const char *fn, const tk_xent_params *p) {
    tk_dtype dt = p->dtype;
    if (dt != TK_BF16 && dt != TK_F16 && dt != TK_F32)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16, TK_F16 or TK_F32", fn,
                                tk_dtype_name(dt));
    if (p->rows < 0 || p->rows > MAX_ROWS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rows is %lld; expected 0 .. %lld (split rows are a block "
                                "each: the grid's limit)",
                                fn, (long long)p->rows, (long long)MAX_ROWS);
    if (p->vocab < 1 || p->vocab > MAX_VOCAB)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: vocab is %lld; expected 1 .. %lld (columns meet the targets "
                                "in f32, exact to 2^24)",
                                fn, (long long)p->vocab, (long long)MAX_VOCAB);
    return TK_OK;
}

/* The gradient's operands: dlogits (in place: logits itself, same pitch),
 * its scale. */
static tk_status check_grad(tk_ctx *ctx, const char *fn, const tk_xent_params *p) {
    tk_status s;
    if (!p->dlogits) {
        if (p->dloss)
            return fail(ctx, fn, "dloss",
                        "is set and dlogits is NULL: the scale is the gradient's (forward "
                        "only: dloss NULL)");
        return TK_OK;
    }
    if ((s = check_ptr(ctx, fn, "dlogits", p->dlogits, true, tk_dtype_size(p->dtype))) ||
        (s = check_stride(ctx, fn, "dlogits_stride", p->dlogits_stride, p)) ||
        (s = check_ptr(ctx, fn, "dloss", p->dloss, false, sizeof(float))))
        return s;
    int64_t xs = p->logits_stride ? p->logits_stride : p->vocab;
    int64_t ds = p->dlogits_stride ? p->dlogits_stride : p->vocab;
    if (p->dlogits == p->logits && xs != ds)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dlogits is logits (in place) with dlogits_stride %lld and "
                                "logits_stride %lld; in place they must match",
                                fn, (long long)ds, (long long)xs);
    if (!p->dloss && !isfinite(p->dloss_scale))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dloss_scale %g is not finite (dloss NULL: it scales every "
                                "row's gradient)",
                                fn, (double)p->dloss_scale);
    return TK_OK;
}

static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_xent_params *p) {
    tk_status s = check_sizes(ctx, fn, p);
    if (s) return s;
    size_t f = sizeof(float);
    if ((s = check_ptr(ctx, fn, "logits", p->logits, true, tk_dtype_size(p->dtype))) ||
        (s = check_stride(ctx, fn, "logits_stride", p->logits_stride, p)) ||
        (s = check_ptr(ctx, fn, "targets", p->targets, true, sizeof(int32_t))) ||
        (s = check_ptr(ctx, fn, "loss", p->loss, true, f)) ||
        (s = check_ptr(ctx, fn, "lse", p->lse, false, f)) ||
        (s = check_ptr(ctx, fn, "loss_mean", p->loss_mean, false, f)) ||
        (s = check_grad(ctx, fn, p)))
        return s;
    size_t need = workspace_bytes(p);
    if (need && (s = check_ptr(ctx, fn, "workspace", p->workspace, true, f))) return s;
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; loss_mean over %lld rows needs %zu "
                                "(tk_cross_entropy_workspace)",
                                fn, p->workspace_bytes, (long long)p->rows, need);
    return TK_OK;
}

/* ---- the configs ------------------------------------------------------------
 * Split rows (a block a row) once 16 rows of a block would put too much in
 * flight for L2 to serve the second read: 16·V·size at 8 KiB a row is 128
 * KiB a block, 64 MiB over four blocks on each of 132 SMs. Not measured
 * yet (no GPU in the session that wrote this); bench_xent.py sweeps it. */
#define SPLIT_ROW_BYTES 8192

tk_xent_config tk_xent_rows_config(const tk_xent_params *p) {
    tk_xent_config c = {.dtype = p->dtype,
                        .part = TK_XENT_ROWS,
                        .backward = p->dlogits != NULL,
                        .per_row_scale = p->dlogits && p->dloss,
                        .lse = p->lse != NULL,
                        .mean = p->loss_mean != NULL};
    if (p->config) {
        c.split = p->config->split, c.warps = p->config->warps, c.cols = p->config->cols;
        return c;
    }
    c.split = p->vocab * (int64_t)tk_dtype_size(p->dtype) >= SPLIT_ROW_BYTES;
    c.warps = TK_XENT_WARPS, c.cols = 32 * TK_XENT_WARPS * TK_XENT_SLOTS;
    return c;
}

static tk_xent_config mean_config(void) {
    return (tk_xent_config){.part = TK_XENT_MEAN, .warps = TK_XENT_MEAN_WARPS};
}

/* ---- the launches ----------------------------------------------------------- */
static tk_arg vec(const void *data, tk_dtype dt, int64_t n) {
    return tk_arg_tensor((void *)data, dt, 1, &n);
}

/* X's views: [N, V], or split [N, 16, Ls] and the tail [N, 1, Tn] from
 * column 16·Ls (Ls = 8·floor(V / 128): 16-byte aligned segments). */
static int views(tk_arg *a, const void *x, int64_t stride, const tk_xent_params *p, bool split) {
    int64_t N = p->rows, V = p->vocab, ld = stride ? stride : V;
    if (!split) {
        int64_t d[2] = {N, V}, s[2] = {ld, 1};
        a[0] = tk_arg_strided((void *)x, p->dtype, 2, d, s);
        return 1;
    }
    int64_t ls = V / 128 * 8, tn = V - 16 * ls;
    int64_t ds[3] = {N, 16, ls}, ss[3] = {ld, ls, 1}, dt[3] = {N, 1, tn}, st[3] = {ld, tn, 1};
    a[0] = tk_arg_strided((void *)x, p->dtype, 3, ds, ss);
    a[1] =
        tk_arg_strided((char *)x + 16 * ls * (int64_t)tk_dtype_size(p->dtype), p->dtype, 3, dt, st);
    return 2;
}

/* The row kernel's partial sums PL and PC in the workspace: one a block
 * (rows 0: empty views, never read, where the workspace may be NULL). */
static int partials(tk_arg *a, const tk_xent_params *p, bool split) {
    int64_t P = split ? p->rows : (p->rows + 15) / 16;
    char *ws = P ? p->workspace : (char *)p->loss_mean;
    a[0] = vec(ws, TK_F32, P);
    a[1] = vec(P ? ws + part_bytes(p) : ws, TK_F32, P);
    return 2;
}

static int rows_launch(const tk_xent_params *p, tk_xent_launch *l) {
    tk_arg *a = l->args;
    l->cfg = tk_xent_rows_config(p);
    bool split = l->cfg.split;
    int n = views(a, p->logits, p->logits_stride, p, split);
    a[n++] = vec(p->targets, TK_I32, p->rows);
    if (l->cfg.per_row_scale) a[n++] = vec(p->dloss, TK_F32, p->rows);
    if (p->dlogits) n += views(a + n, p->dlogits, p->dlogits_stride, p, split);
    a[n++] = vec(p->loss, TK_F32, p->rows);
    if (p->lse) a[n++] = vec(p->lse, TK_F32, p->rows);
    if (p->loss_mean) n += partials(a + n, p, split);
    a[n++] = tk_arg_i32(p->ignore_index);
    if (p->dlogits && !p->dloss) a[n++] = tk_arg_f32(p->dloss_scale);
    return l->n = n;
}

int tk_xent_launches(const tk_xent_params *p, tk_xent_launch out[2]) {
    int m = 0;
    if (p->rows > 0) rows_launch(p, &out[m++]);
    if (!p->loss_mean) return m;
    out[m].cfg = mean_config();
    partials(out[m].args, p, tk_xent_rows_config(p).split);
    out[m].args[2] = vec(p->loss_mean, TK_F32, 1);
    out[m++].n = 3;
    return m;
}

/* ---- the entry points -------------------------------------------------------- */
/* p read and checked; prog[0] the row kernel, prog[1] the mean's (NULL
 * without loss_mean). */
static tk_status xent_read(tk_ctx *ctx, const char *fn, const tk_xent_params *user,
                           tk_xent_params *p, bool full, tk_program *prog[2],
                           tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, MIN_SIZE);
    if (!s) s = full ? check_params(ctx, fn, p) : check_sizes(ctx, fn, p);
    if (s || !prog) return s;
    tk_xent_config c[2] = {tk_xent_rows_config(p), mean_config()};
    prog[1] = NULL;
    return programs(ctx, c, p->loss_mean ? 2 : 1, prog, info);
}

tk_status tk_cross_entropy_workspace(tk_ctx *ctx, const tk_xent_params *user, size_t *bytes) {
    const char *fn = "tk_cross_entropy_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return fail(ctx, fn, "bytes", "is NULL");
    *bytes = 0;
    tk_xent_params p;
    tk_status s = xent_read(ctx, fn, user, &p, false, NULL, NULL);
    if (!s) *bytes = workspace_bytes(&p);
    return s;
}

tk_status tk_cross_entropy_prepare(tk_ctx *ctx, const tk_xent_params *user, tk_prepare_info *info) {
    tk_xent_params p;
    tk_program *prog[2];
    return xent_read(ctx, "tk_cross_entropy_prepare", user, &p, true, prog, info);
}

tk_status tk_cross_entropy(tk_ctx *ctx, const tk_xent_params *user, void *stream) {
    tk_xent_params p;
    tk_program *prog[2];
    tk_status s = xent_read(ctx, "tk_cross_entropy", user, &p, true, prog, NULL);
    if (s) return s;
    tk_xent_launch l[2];
    int n = tk_xent_launches(&p, l);
    for (int i = 0; i < n && !s; i++)
        s = tk_launch(prog[l[i].cfg.part == TK_XENT_MEAN], l[i].n, l[i].args, stream);
    return s;
}
