/* tk_hedgehog_forward, tk_hedgehog_prepare and
 * tk_hedgehog_forward_workspace (tk/tk_run.h): the parameters checked, the
 * kernels of the specialization from the registry, one launch, or up to
 * four with a workspace (the feature maps of q and k apart, the sequence
 * segments' states, then the run). The kernels: hedgehog.c, and
 * hedgehog_fm.c for the maps. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hedgehog_parts.h"
#include "hedgehog_run_parts.h"
#include "jit/registry.h"
#include "run_checks.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"

/* Registry programs per resolved tk_hedgehog_config: every field a
 * specialization. */
typedef struct hedgehog_key {
    int32_t dtype, head_dim, normalize, stats, bias, v_cols, warps, part, f_cols, c_side, seg, phi;
} hedgehog_key;

static tk_status build_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const hedgehog_key *a = key;
    tk_hedgehog_config cfg = {.dtype = (tk_dtype)a->dtype,
                              .head_dim = a->head_dim,
                              .normalize = a->normalize,
                              .stats = a->stats,
                              .bias = a->bias,
                              .v_cols = a->v_cols,
                              .warps = a->warps,
                              .part = a->part,
                              .f_cols = a->f_cols,
                              .c_side = a->c_side,
                              .seg = a->seg,
                              .phi = a->phi};
    return tk_hedgehog_build(ctx, &cfg, out);
}

static const tk_kernel_def hedgehog_def = {"tk_hedgehog", sizeof(hedgehog_key), build_key};

static hedgehog_key key_of(const tk_hedgehog_config *c) {
    hedgehog_key key;
    memset(&key, 0, sizeof key);
    key.dtype = c->dtype, key.head_dim = c->head_dim, key.normalize = c->normalize;
    key.stats = c->stats, key.bias = c->bias, key.v_cols = c->v_cols, key.warps = c->warps;
    key.part = c->part, key.f_cols = c->f_cols, key.c_side = c->c_side, key.seg = c->seg;
    key.phi = c->phi;
    return key;
}

/* The end of the first layout: every field of today's struct is required. */
#define PARAMS_MIN (offsetof(tk_hedgehog_params, warps) + sizeof(int32_t))
/* Grid y is the heads and z the batch (each at most 65535); tokens are
 * indexed in i64. */
#define MAX_GRID 65535
#define MAX_SEQ  ((int64_t)INT32_MAX)
#define MAX_DV   256

/* ---- sequence segments -----------------------------------------------------
 * As the Based forward's (kernels/based_run.c, measured there): the library
 * splits the sequence when the blocks of the value slices, B·H·NV, are
 * fewer than half the SMs, into about 6 blocks an SM with at least
 * MIN_SEG_CHUNKS chunks a segment; grid z (B·NS) stays within MAX_GRID. */
#define MIN_SEG_CHUNKS 4

typedef struct seg_plan {
    int64_t L, ns;   /* chunks a segment, segments (1: no split)          */
    size_t st_bytes; /* St [NV·B·NS, H, F + 16, v_cols] f32 (0: no split) */
    bool maps;       /* φ(q), φ(k) apart: PQ, PK after St                 */
    size_t map_off;  /* PQ's offset in the workspace (PK follows it)     */
    size_t bytes;    /* the whole workspace (0: none needed)             */
} seg_plan;

static int64_t st_rows(const tk_hedgehog_config *c) { return 2 * (int64_t)c->head_dim + 16; }
static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/* ---- the maps apart ----------------------------------------------------------
 * MAP's blocks of MAP_WARPS warps; P's columns Tp a multiple of every
 * forward chunk (16·warps <= 128) and of MAP's. */
#define MAP_WARPS 4
static int64_t map_cols(int64_t T) { return (T + 127) / 128 * 128; }
static size_t map_bytes(const tk_hedgehog_params *p) { /* PQ or PK */
    return (size_t)(p->batch * p->heads * 2 * p->head_dim * map_cols(p->seq)) * 2;
}
/* With a workspace (or asking its size) the maps go apart unless fused_maps. */
static bool maps_apart(const tk_hedgehog_params *p, bool workspace) {
    return workspace && !p->fused_maps;
}
static int64_t slices(const tk_hedgehog_params *p, const tk_hedgehog_config *c) {
    return (p->head_dim_v + c->v_cols - 1) / c->v_cols;
}

/* The segments of checked p given a workspace (what it would need), for
 * config c on a GPU of `sms` SMs. */
static seg_plan fwd_split(const tk_hedgehog_params *p, const tk_hedgehog_config *c, int sms) {
    int64_t C = 16 * (int64_t)c->warps, chunks = (p->seq + C - 1) / C, nv = slices(p, c);
    int64_t ns = p->segments;
    if (ns == 0) {
        int64_t blocks = p->batch * p->heads * nv, target = 6 * (int64_t)sms;
        ns = blocks >= sms / 2 ? 1 : (target + blocks - 1) / blocks;
        if (ns > chunks / MIN_SEG_CHUNKS) ns = chunks / MIN_SEG_CHUNKS;
    }
    if (ns > chunks) ns = chunks;
    if (ns > MAX_GRID / p->batch) ns = MAX_GRID / p->batch;
    if (ns < 1) ns = 1;
    seg_plan pl = {.L = (chunks + ns - 1) / ns};
    pl.ns = (chunks + pl.L - 1) / pl.L;
    if (pl.ns > 1)
        pl.st_bytes = (size_t)(nv * p->batch * pl.ns * p->heads * st_rows(c) * c->v_cols) * 4;
    pl.bytes = pl.st_bytes;
    if ((pl.maps = c->phi)) {
        pl.map_off = align256(pl.st_bytes);
        pl.bytes = pl.map_off + 2 * map_bytes(p);
    }
    return pl;
}

/* The segments and maps: neither without a workspace. */
static seg_plan fwd_plan(const tk_hedgehog_params *p, const tk_hedgehog_config *c, int sms) {
    return p->workspace ? fwd_split(p, c, sms) : (seg_plan){.L = 0, .ns = 1};
}

static tk_status check_flag(tk_ctx *ctx, const char *fn, const char *name, int32_t v) {
    if (v == 0 || v == 1) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; expected 0 or 1", fn, name, v);
}

/* Kind, flags, scalars and sizes. */
tk_status tk_hh_check_common(tk_ctx *ctx, const char *fn, const tk_hh_common *p) {
    if (p->dtype != TK_BF16 && p->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(p->dtype));
    if (p->head_dim != 64 && p->head_dim != 128)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: head_dim is %d; expected 64 or 128",
                                fn, p->head_dim);
    tk_status s;
    if ((s = check_flag(ctx, fn, "normalize", p->normalize)) ||
        (s = check_flag(ctx, fn, "per_head", p->per_head)) ||
        (s = tk_run_check_scalar(ctx, fn, "scale", p->scale)) ||
        (s = tk_run_check_scalar(ctx, fn, "eps", p->eps)) ||
        (s = tk_run_check_size(ctx, fn, "batch", p->batch, MAX_GRID)) ||
        (s = tk_run_check_size(ctx, fn, "heads", p->heads, MAX_GRID)) ||
        (s = tk_run_check_size(ctx, fn, "seq", p->seq, MAX_SEQ)) ||
        (s = tk_run_check_size(ctx, fn, "head_dim_v", p->head_dim_v, MAX_DV)))
        return s;
    if (p->head_dim_v % 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim_v is %lld; expected a multiple of 8 (16-byte rows)",
                                fn, (long long)p->head_dim_v);
    return TK_OK;
}

/* The common fields, then the kernel's shape. */
static tk_status check_kind(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *p) {
    const tk_hh_common c = {p->dtype, p->head_dim, p->normalize, p->per_head, p->scale,
                            p->eps,   p->batch,    p->heads,     p->seq,      p->head_dim_v};
    tk_status s = tk_hh_check_common(ctx, fn, &c);
    if (s) return s;
    int vc = p->v_cols, w = p->warps;
    if (vc != 0 && (vc < 16 || vc > 128 || vc % 16))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: v_cols is %d; expected 0 or a multiple of 16 in 16 .. 128", fn,
                                vc);
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: warps is %d; expected 0, 1, 2, 4 or 8", fn, w);
    return check_flag(ctx, fn, "fused_maps", p->fused_maps);
}

static tk_status check_pointers(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *p) {
    const struct {
        const char *name;
        const void *ptr;
    } need[] = {{"q", p->q}, {"k", p->k}, {"v", p->v}, {"o", p->o}, {"wq", p->wq}, {"wk", p->wk}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].ptr)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, need[i].name);
    return tk_run_check_bias_pair(ctx, fn, p->bq, p->bk);
}

static tk_status check_layouts(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *p) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, p->head_dim};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    tk_status s;
    if ((s = tk_run_check_strides(ctx, fn, "q", 4, p->q_strides, dq)) ||
        (s = tk_run_check_strides(ctx, fn, "k", 4, p->k_strides, dq)) ||
        (s = tk_run_check_strides(ctx, fn, "v", 4, p->v_strides, dv)) ||
        (s = tk_run_check_strides(ctx, fn, "o", 4, p->o_strides, dv)))
        return s;
    if (p->z && (s = tk_run_check_strides(ctx, fn, "z", 3, p->z_strides, dv))) return s;
    return TK_OK;
}

/* ---- the configuration ------------------------------------------------------ */
/* Shared memory a block may have on this context's GPU (Hopper's without
 * one, as the tests' launches assume). */
size_t tk_hh_smem_of_gpu(tk_ctx *ctx) {
    char arch[16];
    tk_target_caps caps;
    tk_registry_arch(ctx, arch, sizeof arch);
    if (!arch[0] || tk_target_caps_get(NULL, arch, &caps) != TK_OK) return TK_HEDGEHOG_SMEM_MAX;
    return caps.smem_per_block < TK_HEDGEHOG_SMEM_MAX ? caps.smem_per_block : TK_HEDGEHOG_SMEM_MAX;
}

static tk_hedgehog_config config_of(const tk_hedgehog_params *p, size_t smem_max, bool workspace) {
    bool phi = maps_apart(p, workspace);
    tk_hedgehog_config c = {.dtype = p->dtype,
                            .head_dim = p->head_dim,
                            .normalize = p->normalize,
                            .stats = p->z != NULL,
                            .bias = p->bq != NULL && !phi, /* phi: MAP's */
                            .v_cols = p->v_cols,
                            .warps = p->warps,
                            .phi = phi};
    tk_hedgehog_config r = tk_hedgehog_resolve(&c);
    /* the library's choices shrink until the block fits: v_cols first (down
     * to 16), then warps, whose slabs of the state then grow (8 a warp at 2
     * warps and D 128: 32 bytes of spills on sm_80, 600 with 32 columns) */
    while (tk_hedgehog_smem_bytes(&r) > smem_max) {
        if (!p->v_cols && r.v_cols > 16)
            r.v_cols /= 2;
        else if (!p->warps && r.warps > 1)
            r.warps /= 2;
        else
            break;
    }
    return r;
}

tk_hedgehog_config tk_hedgehog_config_of(const tk_hedgehog_params *p, size_t smem_max) {
    return config_of(p, smem_max, p->workspace != NULL);
}

static tk_status check_params(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *p,
                              size_t smem_max) {
    tk_status s;
    if ((s = check_kind(ctx, fn, p)) || (s = check_pointers(ctx, fn, p)) ||
        (s = check_layouts(ctx, fn, p)))
        return s;
    tk_hedgehog_config c = tk_hedgehog_config_of(p, smem_max);
    size_t need = tk_hedgehog_smem_bytes(&c);
    if (need > TK_HEDGEHOG_SMEM_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim %d, v_cols %d and warps %d need %zu bytes of shared "
                                "memory; a block has at most %d: fewer v_cols or warps",
                                fn, c.head_dim, c.v_cols, c.warps, need, TK_HEDGEHOG_SMEM_MAX);
    if (need > smem_max)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: head_dim %d, v_cols %d and warps %d need %zu bytes of shared "
                                "memory; this GPU's blocks have %zu",
                                fn, c.head_dim, c.v_cols, c.warps, need, smem_max);
    return TK_OK;
}

/* ---- the launch -------------------------------------------------------------- */
tk_arg tk_hh_tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                    const int64_t *st) {
    bool dense = true;
    for (int d = 0; d < rank; d++) dense = dense && !st[d];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, st);
}

static tk_status check_count(tk_ctx *ctx, const char *fn, int32_t segments) {
    if (segments >= 0) return TK_OK;
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                            "%s: segments is %d; expected 0 (the library's choice), 1 (none) or "
                            "more",
                            fn, segments);
}

static tk_status check_segments(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *p,
                                size_t smem_max, int sms) {
    tk_status s = check_count(ctx, fn, p->segments);
    if (s) return s;
    if (!p->workspace && p->segments > 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: segments is %d with no workspace; the segments' states need "
                                "tk_hedgehog_forward_workspace bytes",
                                fn, p->segments);
    tk_hedgehog_config c = tk_hedgehog_config_of(p, smem_max);
    seg_plan pl = fwd_plan(p, &c, sms);
    if (p->workspace && p->workspace_bytes < pl.bytes) {
        char what[96] = "";
        if (pl.ns > 1)
            snprintf(what, sizeof what, "the states of %lld segments%s", (long long)pl.ns,
                     pl.maps ? " and " : "");
        if (pl.maps) strcat(what, "the feature maps");
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; %s need %zu "
                                "(tk_hedgehog_forward_workspace)",
                                fn, p->workspace_bytes, what, pl.bytes);
    }
    if ((uintptr_t)p->workspace % 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: workspace is not 256-byte aligned",
                                fn);
    return TK_OK;
}

/* PQ (k: PK) in the workspace, [B, H, F, Tp]. */
static tk_arg map_arg(const tk_hedgehog_params *p, const seg_plan *pl, bool k) {
    const int64_t dp[4] = {p->batch, p->heads, 2 * (int64_t)p->head_dim, map_cols(p->seq)};
    char *at = (char *)p->workspace + pl->map_off + (k ? map_bytes(p) : 0);
    return tk_arg_tensor(at, p->dtype, 4, dp);
}

/* MAP's launch for q (k: for k) into the workspace. */
static void map_launch(const tk_hedgehog_params *p, const seg_plan *pl, bool k,
                       tk_hedgehog_launch *l) {
    const int64_t D = p->head_dim, hw = p->per_head ? p->heads : 1;
    const int64_t dq[4] = {p->batch, p->heads, p->seq, D}, dw[3] = {hw, D, D}, db[2] = {hw, D};
    l->cfg = (tk_hedgehog_config){.dtype = p->dtype,
                                  .head_dim = p->head_dim,
                                  .bias = p->bq != NULL,
                                  .warps = MAP_WARPS,
                                  .part = TK_HEDGEHOG_MAP};
    int m = 0;
    l->args[m++] = tk_hh_tensor(k ? p->k : p->q, p->dtype, 4, dq, k ? p->k_strides : p->q_strides);
    l->args[m++] = tk_arg_tensor((void *)(k ? p->wk : p->wq), p->dtype, 3, dw);
    if (p->bq) l->args[m++] = tk_arg_tensor((void *)(k ? p->bk : p->bq), p->dtype, 2, db);
    l->args[m++] = map_arg(p, pl, k);
    l->n = m;
}

/* The arguments both passes start with: Q, K, V, Wq, Wk, [Bq, Bk]; with
 * the maps apart PQ, PK, V. */
static int inputs(const tk_hedgehog_params *p, const seg_plan *pl, tk_arg *a) {
    const int64_t D = p->head_dim, hw = p->per_head ? p->heads : 1;
    const int64_t dq[4] = {p->batch, p->heads, p->seq, D};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dw[3] = {hw, D, D}, db[2] = {hw, D};
    int m = 0;
    if (pl->maps) {
        a[m++] = map_arg(p, pl, false);
        a[m++] = map_arg(p, pl, true);
        a[m++] = tk_hh_tensor(p->v, p->dtype, 4, dv, p->v_strides);
        return m;
    }
    a[m++] = tk_hh_tensor(p->q, p->dtype, 4, dq, p->q_strides);
    a[m++] = tk_hh_tensor(p->k, p->dtype, 4, dq, p->k_strides);
    a[m++] = tk_hh_tensor(p->v, p->dtype, 4, dv, p->v_strides);
    a[m++] = tk_arg_tensor((void *)p->wq, p->dtype, 3, dw);
    a[m++] = tk_arg_tensor((void *)p->wk, p->dtype, 3, dw);
    if (p->bq) {
        a[m++] = tk_arg_tensor((void *)p->bq, p->dtype, 2, db);
        a[m++] = tk_arg_tensor((void *)p->bk, p->dtype, 2, db);
    }
    return m;
}

int tk_hedgehog_fwd_launches(const tk_hedgehog_params *p, size_t smem_max, int sms,
                             tk_hedgehog_launch out[TK_HEDGEHOG_MAX_LAUNCHES]) {
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dz[3] = {p->batch, p->heads, p->seq};
    tk_hedgehog_config c = tk_hedgehog_config_of(p, smem_max);
    seg_plan pl = fwd_plan(p, &c, sms);
    bool split = pl.ns > 1;
    const int64_t ds[4] = {slices(p, &c) * p->batch * pl.ns, p->heads, st_rows(&c), c.v_cols};
    tk_arg st = tk_arg_tensor(p->workspace, TK_F32, 4, ds), L = tk_arg_i64(pl.L);
    int n = 0;
    if (pl.maps) { /* φ(q), φ(k) into the workspace */
        map_launch(p, &pl, false, &out[n++]);
        map_launch(p, &pl, true, &out[n++]);
    }
    if (split) { /* the segments' own states */
        tk_hedgehog_launch *l = &out[n++];
        l->cfg = c, l->cfg.seg = TK_HEDGEHOG_SEG_STATE;
        l->n = inputs(p, &pl, l->args);
        l->args[l->n++] = st, l->args[l->n++] = L;
    }
    tk_hedgehog_launch *l = &out[n++];
    tk_arg *a = l->args;
    l->cfg = c, l->cfg.seg = split ? TK_HEDGEHOG_SEG_RUN : TK_HEDGEHOG_SEG_NONE;
    int m = inputs(p, &pl, a);
    a[m++] = tk_hh_tensor(p->o, p->dtype, 4, dv, p->o_strides);
    if (p->z) a[m++] = tk_hh_tensor(p->z, TK_F32, 3, dz, p->z_strides);
    if (split) a[m++] = st, a[m++] = L;
    a[m++] = tk_arg_f32(p->scale != 0.0f ? p->scale : 1.0f);
    a[m++] = tk_arg_f32(p->eps != 0.0f ? p->eps : 1e-6f);
    l->n = m;
    return n;
}

static tk_status read_params(tk_ctx *ctx, const char *fn, const tk_hedgehog_params *user,
                             tk_hedgehog_params *p, size_t *smem_max, int *sms) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, PARAMS_MIN);
    if (s) return s;
    *smem_max = tk_hh_smem_of_gpu(ctx);
    *sms = tk_run_sm_count(ctx);
    s = check_params(ctx, fn, p, *smem_max);
    return s ? s : check_segments(ctx, fn, p, *smem_max, *sms);
}

/* The programs of launches l, compiled side by side on a cold prepare
 * (info: the whole preparation). */
tk_status tk_hh_programs(tk_ctx *ctx, const tk_hedgehog_launch *l, int n,
                         tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES], tk_prepare_info *info) {
    hedgehog_key key[TK_HEDGEHOG_MAX_LAUNCHES];
    for (int i = 0; i < n; i++) key[i] = key_of(&l[i].cfg);
    return tk_registry_programs_of(ctx, &hedgehog_def, n, key, prog, info);
}

tk_status tk_hedgehog_prepare(tk_ctx *ctx, const tk_hedgehog_params *user, tk_prepare_info *info) {
    tk_hedgehog_params p;
    size_t smem;
    int sms;
    tk_status s = read_params(ctx, "tk_hedgehog_prepare", user, &p, &smem, &sms);
    if (s) return s;
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES];
    return tk_hh_programs(ctx, l, tk_hedgehog_fwd_launches(&p, smem, sms, l), prog, info);
}

tk_status tk_hedgehog_forward_workspace(tk_ctx *ctx, const tk_hedgehog_params *user,
                                        size_t *bytes) {
    const char *fn = "tk_hedgehog_forward_workspace";
    tk_hedgehog_params p;
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, &p, sizeof p, PARAMS_MIN);
    if (s) return s;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    size_t smem = tk_hh_smem_of_gpu(ctx);
    /* p.workspace unread */
    if ((s = check_params(ctx, fn, &p, smem)) || (s = check_count(ctx, fn, p.segments))) return s;
    tk_hedgehog_config c = config_of(&p, smem, true);
    *bytes = fwd_split(&p, &c, tk_run_sm_count(ctx)).bytes;
    return TK_OK;
}

tk_status tk_hedgehog_forward(tk_ctx *ctx, const tk_hedgehog_params *user, void *stream) {
    tk_hedgehog_params p;
    size_t smem;
    int sms;
    tk_status s = read_params(ctx, "tk_hedgehog_forward", user, &p, &smem, &sms);
    if (s) return s;
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES];
    int n = tk_hedgehog_fwd_launches(&p, smem, sms, l);
    if ((s = tk_hh_programs(ctx, l, n, prog, NULL))) return s;
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}
