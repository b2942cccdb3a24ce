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
#include "run_checks.h"
#include "tk/tk_run.h"

/* Registry programs per tk_based_config: every field a specialization. */
typedef struct based_key {
    int32_t dtype, part, normalize, stats, v_cols, warps, seg;
} based_key;

static tk_status build_based_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const based_key *a = key;
    tk_based_config cfg = {.dtype = (tk_dtype)a->dtype,
                           .part = a->part,
                           .normalize = a->normalize,
                           .stats = a->stats,
                           .v_cols = a->v_cols,
                           .warps = a->warps,
                           .seg = a->seg};
    return tk_based_build(ctx, &cfg, out);
}

static const tk_kernel_def based_def = {"tk_based", sizeof(based_key), build_based_key};

static based_key key_of(const tk_based_config *c) {
    based_key key;
    memset(&key, 0, sizeof key);
    key.dtype = c->dtype, key.part = c->part, key.normalize = c->normalize;
    key.stats = c->stats, key.v_cols = c->v_cols, key.warps = c->warps, key.seg = c->seg;
    return key;
}

/* The end of the first layout: every field of today's struct is required. */
#define PARAMS_MIN (offsetof(tk_based_params, v_cols) + sizeof(int32_t))
/* Grid y is the heads and z the batch (each at most 65535); tokens are
 * indexed in i64, chunk counts fit easily. */
#define MAX_GRID 65535
#define MAX_SEQ  ((int64_t)INT32_MAX)
#define MAX_DV   256

/* ---- sequence segments ----------------------------------------------------
 * The library splits the sequence when the blocks of the value slices,
 * B·H·NV, fall short of two waves at three blocks an SM (the kernels' 168
 * registers), into segments of at least MIN_SEG_CHUNKS chunks; grid z
 * (B·NS) stays within MAX_GRID. */
#define CHUNK          (16 * TK_BASED_WARPS)
#define MIN_SEG_CHUNKS 4
#define ST_ROWS        320 /* St's rows an entry: 288 state, Z2, z1 (tk_kernels.h) */

typedef struct seg_plan {
    int64_t L, ns; /* chunks a segment, segments (1: no split)       */
    size_t bytes;  /* St [NV·B·NS, H, 320, v_cols] f32 (0: no split) */
} seg_plan;

/* The library's choice splits a grid of fewer than `below` blocks into
 * about 6 blocks an SM: the state passes cost more than the idle SMs of a
 * grid near their count (H100, Dv 64, B·H·NV blocks: at 256 and 512 one
 * segment ran 1.2-1.6x faster than the split, forward and backward; at 128
 * the forward's too, 1.1x, the backward's split 1.24x faster; at 64 the
 * split won both, 1.6x and 2.2x). */
static seg_plan plan_segments(const int64_t sz[4], int64_t vc, int32_t want, int sms,
                              int64_t below) {
    int64_t chunks = (sz[2] + CHUNK - 1) / CHUNK, nv = (sz[3] + vc - 1) / vc, ns = want;
    if (want == 0) {
        int64_t blocks = sz[0] * sz[1] * nv, target = 6 * (int64_t)sms;
        ns = blocks >= below ? 1 : (target + blocks - 1) / blocks;
        if (ns > chunks / MIN_SEG_CHUNKS) ns = chunks / MIN_SEG_CHUNKS;
    }
    if (ns > chunks) ns = chunks;
    if (ns > MAX_GRID / sz[0]) ns = MAX_GRID / sz[0];
    if (ns < 1) ns = 1;
    seg_plan pl = {.L = (chunks + ns - 1) / ns};
    pl.ns = (chunks + pl.L - 1) / pl.L;
    if (pl.ns > 1) pl.bytes = (size_t)(nv * sz[0] * pl.ns * sz[1] * ST_ROWS * vc) * sizeof(float);
    return pl;
}

static tk_status check_segments(tk_ctx *ctx, const char *fn, int32_t segments) {
    if (segments >= 0) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: segments is %d; expected 0 (the library's choice), 1 (none) or "
                            "more",
                            fn, segments);
}

/* The checks both directions share: kind, scalars, sizes. */
static tk_status check_common(tk_ctx *ctx, const char *fn, tk_dtype dt, int normalize, int vc,
                              float scale, float eps, const int64_t sz[4]) {
    if (dt != TK_BF16 && dt != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(dt));
    if (normalize != 0 && normalize != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: normalize is %d; expected 0 or 1", fn,
                                normalize);
    if (vc != 0 && (vc < 16 || vc > 128 || vc % 16))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: v_cols is %d; expected 0 or a multiple of 16 in 16 .. 128", fn,
                                vc);
    tk_status s;
    if ((s = tk_run_check_scalar(ctx, fn, "scale", scale)) ||
        (s = tk_run_check_scalar(ctx, fn, "eps", eps)) ||
        (s = tk_run_check_size(ctx, fn, "batch", sz[0], MAX_GRID)) ||
        (s = tk_run_check_size(ctx, fn, "heads", sz[1], MAX_GRID)) ||
        (s = tk_run_check_size(ctx, fn, "seq", sz[2], MAX_SEQ)) ||
        (s = tk_run_check_size(ctx, fn, "head_dim_v", sz[3], MAX_DV)))
        return s;
    if (sz[3] % 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim_v is %lld; expected a multiple of 8 (16-byte rows)",
                                fn, (long long)sz[3]);
    return TK_OK;
}

/* A list of [B, H, T, 16 or Dv] tensors: pointer and strides each. */
typedef struct tensor_ref {
    const char *name;
    const void *ptr;
    const int64_t *st;
    int qk; /* last dim 16 (q, k and their gradients) */
} tensor_ref;

static tk_status check_tensors(tk_ctx *ctx, const char *fn, const int64_t sz[4],
                               const tensor_ref *t, int n) {
    for (int i = 0; i < n; i++) {
        if (!t[i].ptr)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, t[i].name);
        const int64_t dims[4] = {sz[0], sz[1], sz[2], t[i].qk ? 16 : sz[3]};
        tk_status s = tk_run_check_strides(ctx, fn, t[i].name, 4, t[i].st, dims);
        if (s) return s;
    }
    return TK_OK;
}

/* v_cols: 16 (measured: the most blocks, and 168 registers without spills) */
static int64_t fwd_v_cols(const tk_based_params *p) {
    return p->v_cols ? p->v_cols : TK_BASED_V_COLS;
}

/* The forward's segments given a workspace (what it would need). */
static seg_plan fwd_split(const tk_based_params *p, int sms) {
    const int64_t sz[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    return plan_segments(sz, fwd_v_cols(p), p->segments, sms, sms / 2);
}

/* The forward's segments: none without a workspace. */
static seg_plan fwd_plan(const tk_based_params *p, int sms) {
    return p->workspace ? fwd_split(p, sms) : (seg_plan){.L = 0, .ns = 1};
}

/* Everything but the workspace's size. */
static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_based_params *p) {
    const int64_t sz[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    tk_status s = check_common(ctx, fn, p->dtype, p->normalize, p->v_cols, p->scale, p->eps, sz);
    const tensor_ref t[4] = {{"q", p->q, p->q_strides, 1},
                             {"k", p->k, p->k_strides, 1},
                             {"v", p->v, p->v_strides, 0},
                             {"o", p->o, p->o_strides, 0}};
    if (s || (s = check_tensors(ctx, fn, sz, t, 4)) || (s = check_segments(ctx, fn, p->segments)))
        return s;
    if (p->z && (s = tk_run_check_strides(ctx, fn, "z", 3, p->z_strides, sz))) return s;
    return TK_OK;
}

static tk_status check_workspace(tk_ctx *ctx, const char *fn, const tk_based_params *p, int sms) {
    if (!p->workspace && p->segments > 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: segments is %d with no workspace; the segments' states need "
                                "tk_based_forward_workspace bytes",
                                fn, p->segments);
    seg_plan pl = fwd_plan(p, sms);
    if (p->workspace && p->workspace_bytes < pl.bytes)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; %lld segments need %zu "
                                "(tk_based_forward_workspace)",
                                fn, p->workspace_bytes, (long long)pl.ns, pl.bytes);
    return TK_OK;
}

static tk_based_config config_of(const tk_based_params *p, int seg) {
    return (tk_based_config){.dtype = p->dtype,
                             .part = TK_BASED_FWD,
                             .normalize = p->normalize,
                             .stats = p->z != NULL,
                             .v_cols = (int)fwd_v_cols(p),
                             .warps = TK_BASED_WARPS,
                             .seg = seg};
}

static tk_arg tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                     const int64_t *st) {
    bool dense = true;
    for (int d = 0; d < rank; d++) dense = dense && !st[d];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, st);
}

/* St [NV·B·NS, H, 320, v_cols] f32 at ws. */
static tk_arg st_arg(void *ws, const int64_t sz[4], int64_t vc, const seg_plan *pl) {
    int64_t nv = (sz[3] + vc - 1) / vc;
    const int64_t d[4] = {nv * sz[0] * pl->ns, sz[1], ST_ROWS, vc};
    return tk_arg_tensor(ws, TK_F32, 4, d);
}

int tk_based_fwd_launches(const tk_based_params *p, int sms,
                          tk_based_launch out[TK_BASED_MAX_LAUNCHES]) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, 16};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dz[3] = {p->batch, p->heads, p->seq};
    seg_plan pl = fwd_plan(p, sms);
    tk_arg q = tensor(p->q, p->dtype, 4, dq, p->q_strides);
    tk_arg k = tensor(p->k, p->dtype, 4, dq, p->k_strides);
    tk_arg v = tensor(p->v, p->dtype, 4, dv, p->v_strides);
    tk_arg st = st_arg(p->workspace, dv, fwd_v_cols(p), &pl), L = tk_arg_i64(pl.L);
    int n = 0;
    if (pl.ns > 1) { /* the segments' own states first */
        tk_based_launch *l = &out[n++];
        l->cfg = config_of(p, TK_BASED_SEG_STATE);
        l->n = 0;
        l->args[l->n++] = q, l->args[l->n++] = k, l->args[l->n++] = v;
        l->args[l->n++] = st, l->args[l->n++] = L;
    }
    tk_based_launch *l = &out[n++];
    tk_arg *a = l->args;
    int m = 0;
    l->cfg = config_of(p, pl.ns > 1 ? TK_BASED_SEG_RUN : TK_BASED_SEG_NONE);
    a[m++] = q, a[m++] = k, a[m++] = v;
    a[m++] = tensor(p->o, p->dtype, 4, dv, p->o_strides);
    if (p->z) a[m++] = tensor(p->z, TK_F32, 3, dz, p->z_strides);
    if (pl.ns > 1) a[m++] = st, a[m++] = L;
    a[m++] = tk_arg_f32(p->scale != 0.0f ? p->scale : 0.25f);
    a[m++] = tk_arg_f32(p->eps != 0.0f ? p->eps : 1e-6f);
    l->n = m;
    return n;
}

static tk_status read_params(tk_ctx *ctx, const char *fn, const tk_based_params *user,
                             tk_based_params *p, int sms) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, PARAMS_MIN);
    if (!s) s = check_params(ctx, fn, p);
    return s ? s : check_workspace(ctx, fn, p, sms);
}

/* The programs of launches l, compiled side by side when cold (info: the
 * whole preparation). */
static tk_status programs(tk_ctx *ctx, const tk_based_launch *l, int n,
                          tk_program *prog[TK_BASED_MAX_LAUNCHES], tk_prepare_info *info) {
    based_key key[TK_BASED_MAX_LAUNCHES];
    for (int i = 0; i < n; i++) key[i] = key_of(&l[i].cfg);
    return tk_registry_programs_of(ctx, &based_def, n, key, prog, info);
}

tk_status tk_based_prepare(tk_ctx *ctx, const tk_based_params *user, tk_prepare_info *info) {
    tk_based_params p;
    tk_program *prog[TK_BASED_MAX_LAUNCHES];
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    int sms = tk_run_sm_count(ctx);
    tk_status s = read_params(ctx, "tk_based_prepare", user, &p, sms);
    return s ? s : programs(ctx, l, tk_based_fwd_launches(&p, sms, l), prog, info);
}

tk_status tk_based_forward_workspace(tk_ctx *ctx, const tk_based_params *user, size_t *bytes) {
    const char *fn = "tk_based_forward_workspace";
    tk_based_params p;
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, &p, sizeof p, PARAMS_MIN);
    if (s) return s;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    if ((s = check_params(ctx, fn, &p))) return s; /* p.workspace unread */
    *bytes = fwd_split(&p, tk_run_sm_count(ctx)).bytes;
    return TK_OK;
}

tk_status tk_based_forward(tk_ctx *ctx, const tk_based_params *user, void *stream) {
    tk_based_params p;
    tk_program *prog[TK_BASED_MAX_LAUNCHES];
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    int sms = tk_run_sm_count(ctx);
    tk_status s = read_params(ctx, "tk_based_forward", user, &p, sms);
    if (s) return s;
    int n = tk_based_fwd_launches(&p, sms, l);
    if ((s = programs(ctx, l, n, prog, NULL))) return s;
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}

/* ---- the backward ---------------------------------------------------------- */
#define BWD_MIN (offsetof(tk_based_bwd_params, v_cols) + sizeof(int32_t))
#define ALIGN   256

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int64_t bwd_v_cols(const tk_based_bwd_params *p) {
    return p->v_cols ? p->v_cols : TK_BASED_V_COLS;
}

static seg_plan bwd_plan(const tk_based_bwd_params *p, int sms) {
    const int64_t sz[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    return plan_segments(sz, bwd_v_cols(p), p->segments, sms, sms);
}

/* Workspace: dq's and dk's partial sums [NV·B, H, T, 16] f32, dz, then the
 * segments' states St (DQ's, then in the same place DKV's: stream order). */
static void bwd_layout(const tk_based_bwd_params *p, int sms, size_t off[4], size_t *total) {
    int64_t nv = (p->head_dim_v + bwd_v_cols(p) - 1) / bwd_v_cols(p);
    size_t part = align_up((size_t)(nv * p->batch * p->heads * p->seq) * 16 * sizeof(float));
    off[0] = 0, off[1] = part, off[2] = 2 * part;
    off[3] = off[2] + (p->normalize ? align_up((size_t)(p->batch * p->heads * p->seq) * 4) : 0);
    *total = off[3] + align_up(bwd_plan(p, sms).bytes);
}

static tk_status check_bwd(tk_ctx *ctx, const char *fn, const tk_based_bwd_params *p, int sms,
                           bool need_ws) {
    const int64_t sz[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    tk_status s = check_common(ctx, fn, p->dtype, p->normalize, p->v_cols, p->scale, p->eps, sz);
    const tensor_ref t[8] = {{"q", p->q, p->q_strides, 1},    {"k", p->k, p->k_strides, 1},
                             {"v", p->v, p->v_strides, 0},    {"dout", p->dout, p->dout_strides, 0},
                             {"dq", p->dq, p->dq_strides, 1}, {"dk", p->dk, p->dk_strides, 1},
                             {"dv", p->dv, p->dv_strides, 0}, {"o", p->o, p->o_strides, 0}};
    if (s || (s = check_tensors(ctx, fn, sz, t, p->normalize ? 8 : 7)) ||
        (s = check_segments(ctx, fn, p->segments)))
        return s;
    if (p->normalize) {
        if (!p->z)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: z is NULL (normalize)", fn);
        if ((s = tk_run_check_strides(ctx, fn, "z", 3, p->z_strides, sz))) return s;
    }
    if (!need_ws) return TK_OK;
    size_t off[4], total;
    bwd_layout(p, sms, off, &total);
    if (!p->workspace || p->workspace_bytes < total)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace is %s with %zu bytes; the call needs %zu "
                                "(tk_based_backward_workspace)",
                                fn, p->workspace ? "set" : "NULL", p->workspace_bytes, total);
    return TK_OK;
}

static tk_based_config bwd_config(const tk_based_bwd_params *p, int part, int seg) {
    return (tk_based_config){.dtype = p->dtype,
                             .part = part,
                             .normalize = p->normalize,
                             .v_cols = (int)bwd_v_cols(p),
                             .warps = TK_BASED_WARPS,
                             .seg = seg};
}

int tk_based_bwd_launches(const tk_based_bwd_params *p, int sms,
                          tk_based_launch out[TK_BASED_MAX_LAUNCHES]) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, 16};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dz[3] = {p->batch, p->heads, p->seq};
    int64_t nv = (p->head_dim_v + bwd_v_cols(p) - 1) / bwd_v_cols(p);
    const int64_t dp[4] = {nv * p->batch, p->heads, p->seq, 16};
    size_t off[4], total;
    bwd_layout(p, sms, off, &total);
    seg_plan pl = bwd_plan(p, sms);
    bool split = pl.ns > 1;
    char *ws = p->workspace;
    tk_arg z = tensor(p->z, TK_F32, 3, dz, p->z_strides);
    tk_arg DZ = tk_arg_tensor(ws + off[2], TK_F32, 3, dz);
    tk_arg P[2] = {tk_arg_tensor(ws + off[0], TK_F32, 4, dp),
                   tk_arg_tensor(ws + off[1], TK_F32, 4, dp)};
    tk_arg st = st_arg(ws + off[3], dv, bwd_v_cols(p), &pl), L = tk_arg_i64(pl.L);
    tk_arg sc = tk_arg_f32(p->scale != 0.0f ? p->scale : 0.25f);
    tk_arg eps = tk_arg_f32(p->eps != 0.0f ? p->eps : 1e-6f);
    tk_arg q = tensor(p->q, p->dtype, 4, dq, p->q_strides);
    tk_arg k = tensor(p->k, p->dtype, 4, dq, p->k_strides);
    tk_arg v = tensor(p->v, p->dtype, 4, dv, p->v_strides);
    tk_arg dout = tensor(p->dout, p->dtype, 4, dv, p->dout_strides);
    int n = 0;
    if (p->normalize) {
        tk_based_launch *l = &out[n++];
        l->cfg = bwd_config(p, TK_BASED_BWD_PREP, TK_BASED_SEG_NONE);
        l->n = 0;
        l->args[l->n++] = dout;
        l->args[l->n++] = tensor(p->o, p->dtype, 4, dv, p->o_strides);
        l->args[l->n++] = z, l->args[l->n++] = DZ, l->args[l->n++] = eps;
    }
    for (int part = TK_BASED_BWD_DQ; part <= TK_BASED_BWD_DKV; part++) {
        bool dkv = part == TK_BASED_BWD_DKV;
        for (int pass = split ? 0 : 1; pass < 2; pass++) { /* 0: the segments' states */
            tk_based_launch *l = &out[n++];
            tk_arg *a = l->args;
            int m = 0;
            int seg = !split ? TK_BASED_SEG_NONE : pass ? TK_BASED_SEG_RUN : TK_BASED_SEG_STATE;
            l->cfg = bwd_config(p, part, seg);
            if (!pass && !dkv) { /* DQ's states are the forward's (the FWD state pass) */
                l->cfg.part = TK_BASED_FWD;
                a[m++] = q, a[m++] = k, a[m++] = v, a[m++] = st, a[m++] = L;
                l->n = m;
                continue;
            }
            a[m++] = q, a[m++] = k, a[m++] = v, a[m++] = dout;
            if (p->normalize) a[m++] = z, a[m++] = DZ;
            if (pass) {
                a[m++] = P[dkv];
                if (dkv) a[m++] = tensor(p->dv, p->dtype, 4, dv, p->dv_strides);
            }
            if (split) a[m++] = st, a[m++] = L;
            a[m++] = sc, a[m++] = eps;
            l->n = m;
        }
    }
    for (int i = 0; i < 2; i++) {
        tk_based_launch *l = &out[n++];
        l->cfg = bwd_config(p, TK_BASED_BWD_SUM, TK_BASED_SEG_NONE);
        l->n = 2;
        l->args[0] = P[i];
        l->args[1] = tensor(i ? p->dk : p->dq, p->dtype, 4, dq, i ? p->dk_strides : p->dq_strides);
    }
    return n;
}

static tk_status read_bwd(tk_ctx *ctx, const char *fn, const tk_based_bwd_params *user,
                          tk_based_bwd_params *p, int sms, bool need_ws) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, BWD_MIN);
    return s ? s : check_bwd(ctx, fn, p, sms, need_ws);
}

tk_status tk_based_backward_workspace(tk_ctx *ctx, const tk_based_bwd_params *user, size_t *bytes) {
    tk_based_bwd_params p;
    int sms = tk_run_sm_count(ctx);
    tk_status s = read_bwd(ctx, "tk_based_backward_workspace", user, &p, sms, false);
    if (s) return s;
    if (!bytes)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_based_backward_workspace: bytes is NULL");
    size_t off[4];
    bwd_layout(&p, sms, off, bytes);
    return TK_OK;
}

tk_status tk_based_backward_prepare(tk_ctx *ctx, const tk_based_bwd_params *user,
                                    tk_prepare_info *info) {
    tk_based_bwd_params p;
    int sms = tk_run_sm_count(ctx);
    tk_status s = read_bwd(ctx, "tk_based_backward_prepare", user, &p, sms, false);
    tk_program *prog[TK_BASED_MAX_LAUNCHES];
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    return s ? s : programs(ctx, l, tk_based_bwd_launches(&p, sms, l), prog, info);
}

tk_status tk_based_backward(tk_ctx *ctx, const tk_based_bwd_params *user, void *stream) {
    tk_based_bwd_params p;
    int sms = tk_run_sm_count(ctx);
    tk_status s = read_bwd(ctx, "tk_based_backward", user, &p, sms, true);
    if (s) return s;
    tk_program *prog[TK_BASED_MAX_LAUNCHES];
    tk_based_launch l[TK_BASED_MAX_LAUNCHES];
    int n = tk_based_bwd_launches(&p, sms, l);
    if ((s = programs(ctx, l, n, prog, NULL))) return s;
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}
