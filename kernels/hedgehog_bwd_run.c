/* tk_hedgehog_backward, its workspace and prepare (tk/tk_run.h): the
 * parameters checked, then up to thirteen launches on one stream (the
 * kernels and their notation: tk/tk_kernels.h, "The backward"):
 *   PREP        G, C from dO, O, Z
 *   MAP x3      the maps apart (fused_maps 0): φᵀ of k, of q reversed and
 *               of k reversed into the workspace, PK, PQr, PKr
 *   DPHI, FMAP  dφq (from G, V, C and φ(k): PK), then dq and the partial
 *               sums of dWq, dbq; REDUCE twice: dWq, dbq
 *   DPHI, FMAP  dφk, the same kernel on time-reversed views (negative
 *               token strides: X = V, Y = G, CY = C, U = Q: PQr), then dk,
 *               dWk, dbk
 *   FWD         dv: the forward with q and k (and their weights) swapped,
 *               G for v, unnormalized, scale 1, all reversed (apart: PQ =
 *               PKr, PK = PQr)
 * Apart, each φ is made once where the fused kernels map every chunk again
 * in each DPHI feature slice and each forward value slice; the same ops
 * make the same bits (the fused plan's chunks and slices are kept), so
 * fused_maps changes no result. FMAP maps U itself either way (tokens in
 * rows, e± in f32 as it goes, not the dtype's φ). dφq and dφk share the
 * workspace's dΦ, and the two FMAPs its partial sums: stream order keeps
 * them apart. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hedgehog_parts.h"
#include "hedgehog_run_parts.h"
#include "jit/registry.h"
#include "run_checks.h"

#define ALIGN 256

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

/* ---- the plan ---------------------------------------------------------------- */
typedef struct bwd_plan {
    tk_hedgehog_config prep, dphi_q, dphi_k, fmap, reduce, fwd, map;
    bool apart;           /* the maps apart: MAP launches, phi in DPHI and FWD */
    int64_t ns;           /* FMAP's runs of chunks per (batch, head)          */
    int64_t tp;           /* the maps' columns: T rounded up to 128           */
    size_t off[8], total; /* workspace: G, C, dΦ, PW, PB, PK, PQr, PKr; size */
} bwd_plan;

enum { WS_G, WS_C, WS_PHI, WS_PW, WS_PB, WS_PK, WS_PQR, WS_PKR, WS_N };

/* MAP's blocks of 4 warps; P's columns a multiple of every chunk (16·warps
 * <= 128) of DPHI, of the forward and of MAP. */
#define MAP_WARPS 4
static int64_t map_cols(int64_t T) { return (T + 127) / 128 * 128; }

/* c halved (warps where the library chose them) until it fits smem_max
 * bytes, as far as it can. */
static tk_hedgehog_config shrink(tk_hedgehog_config c, size_t smem_max,
                                 size_t (*bytes)(const tk_hedgehog_config *)) {
    while (bytes(&c) > smem_max && c.warps > 1) c.warps /= 2;
    return c;
}

/* DPHI's features a block: the library's choice, halved (down to 16) while
 * the grid has fewer blocks than the GPU has SMs (each block recomputes
 * the chunk's φ and scores: fewer features a block cost more work in all). */
static tk_hedgehog_config dphi_config(const tk_hedgehog_bwd_params *p, int c_side, size_t smem_max,
                                      int sms) {
    tk_hedgehog_config c = {.dtype = p->dtype,
                            .head_dim = p->head_dim,
                            .bias = p->bq != NULL,
                            .v_cols = (int)((p->head_dim_v + 15) / 16 * 16),
                            .part = TK_HEDGEHOG_BWD_DPHI,
                            .c_side = c_side};
    c = tk_hh_dphi_resolve(&c);
    int64_t heads = p->batch * p->heads;
    while (c.f_cols > 16 && heads * (2 * p->head_dim / c.f_cols) < sms) c.f_cols /= 2;
    return shrink(c, smem_max, tk_hh_dphi_smem_bytes);
}

/* The maps apart: MAP's config, and DPHI and the forward reading its
 * output. They keep the fused plan's f_cols, warps and v_cols (the same
 * chunks and slices: the same bits), which fit wherever the fused ones do
 * (phi's kernels drop the weights', U's and q's, k's tiles). */
static void maps_apart(bwd_plan *pl, const tk_hedgehog_bwd_params *p) {
    pl->apart = true;
    pl->map = (tk_hedgehog_config){.dtype = p->dtype,
                                   .head_dim = p->head_dim,
                                   .bias = p->bq != NULL,
                                   .warps = MAP_WARPS,
                                   .part = TK_HEDGEHOG_MAP};
    tk_hedgehog_config *phi[3] = {&pl->dphi_q, &pl->dphi_k, &pl->fwd};
    for (int i = 0; i < 3; i++) phi[i]->phi = 1, phi[i]->bias = 0; /* the bias: MAP's */
}

static bwd_plan plan_of(const tk_hedgehog_bwd_params *p, size_t smem_max, int sms) {
    bwd_plan pl = {0};
    bool norm = p->normalize, bias = p->bq != NULL;
    pl.prep =
        (tk_hedgehog_config){.dtype = p->dtype, .normalize = norm, .part = TK_HEDGEHOG_BWD_PREP};
    pl.dphi_q = dphi_config(p, norm ? 1 : 0, smem_max, sms);
    pl.dphi_k = dphi_config(p, norm ? 2 : 0, smem_max, sms);
    tk_hedgehog_config f = {
        .dtype = p->dtype, .head_dim = p->head_dim, .bias = bias, .part = TK_HEDGEHOG_BWD_FMAP};
    pl.fmap = shrink(tk_hh_fmap_resolve(&f), smem_max, tk_hh_fmap_smem_bytes);
    pl.reduce = (tk_hedgehog_config){.dtype = p->dtype, .part = TK_HEDGEHOG_BWD_REDUCE};
    tk_hedgehog_params fp = {.dtype = p->dtype, .head_dim = p->head_dim, .bq = p->bq};
    pl.fwd = tk_hedgehog_config_of(&fp, smem_max);
    if (!p->fused_maps) maps_apart(&pl, p);
    /* FMAP: about two blocks an SM, each at least one chunk */
    int64_t heads = p->batch * p->heads,
            chunks = (p->seq + 16 * pl.fmap.warps - 1) / (16 * pl.fmap.warps);
    pl.ns = (2 * (int64_t)sms + heads - 1) / heads;
    if (pl.ns > chunks) pl.ns = chunks;
    if (pl.ns < 1) pl.ns = 1;
    pl.tp = map_cols(p->seq);
    size_t tokens = (size_t)(heads * p->seq), D = (size_t)p->head_dim;
    size_t parts = (size_t)(heads * pl.ns),
           map = pl.apart ? (size_t)(heads * pl.tp) * 2 * D * 2 : 0;
    size_t sz[WS_N] = {tokens * (size_t)p->head_dim_v * 2,
                       norm ? tokens * 4 : 0,
                       tokens * 2 * D * 4,
                       parts * D * D * 4,
                       bias ? parts * D * 4 : 0,
                       map,
                       map,
                       map};
    for (int i = 0; i < WS_N; i++) {
        pl.off[i] = pl.total;
        pl.total += align_up(sz[i]);
    }
    return pl;
}

size_t tk_hedgehog_bwd_workspace_bytes(const tk_hedgehog_bwd_params *p, size_t smem_max, int sms) {
    return plan_of(p, smem_max, sms).total;
}

/* ---- the launches -------------------------------------------------------------- */
/* a with its tokens (dim 2) in reverse order: row T-1 first. */
static tk_arg reversed(tk_arg a) {
    if (a.dims[2] > 0)
        a.data = (char *)a.data + (a.dims[2] - 1) * a.strides[2] * (int64_t)tk_dtype_size(a.dtype);
    a.strides[2] = -a.strides[2];
    return a;
}

typedef struct bwd_args {
    tk_arg q, k, v, g, c, phi, pw, pb, wq, wk, bq, bk;
    tk_arg pk, pqr, pkr; /* the maps apart: φᵀ of k, of q and k reversed */
} bwd_args;

/* What a feature map reads, U, W, [b], and MAP's φᵀ of U (the maps apart). */
typedef struct map_src {
    tk_arg u, w, b, p;
} map_src;

static tk_hedgehog_launch *next(tk_hedgehog_launch *out, int *n, tk_hedgehog_config cfg) {
    tk_hedgehog_launch *l = &out[(*n)++];
    l->cfg = cfg;
    l->n = 0;
    return l;
}

static void add(tk_hedgehog_launch *l, tk_arg a) { l->args[l->n++] = a; }

/* MAP: U, W, [b], P. */
static void map(tk_hedgehog_launch *l, const map_src *u) {
    add(l, u->u), add(l, u->w);
    if (l->cfg.bias) add(l, u->b);
    add(l, u->p);
}

/* DPHI: X, Y, [C], U, W, [b] (phi: PU), dΦ. */
static void dphi(tk_hedgehog_launch *l, tk_arg x, tk_arg y, tk_arg c, const map_src *u,
                 tk_arg phi) {
    add(l, x), add(l, y);
    if (l->cfg.c_side) add(l, c);
    if (l->cfg.phi) {
        add(l, u->p);
    } else {
        add(l, u->u), add(l, u->w);
        if (l->cfg.bias) add(l, u->b);
    }
    add(l, phi);
}

/* FMAP of u (its gradient to du), then the REDUCEs of its partial sums
 * into dw and db. */
static void fmap(tk_hedgehog_launch *out, int *n, const bwd_plan *pl, const bwd_args *a,
                 const tk_hedgehog_bwd_params *p, bool keys, tk_arg du) {
    tk_hedgehog_launch *l = next(out, n, pl->fmap);
    add(l, keys ? a->k : a->q), add(l, keys ? a->wk : a->wq);
    if (pl->fmap.bias) add(l, keys ? a->bk : a->bq);
    add(l, a->phi), add(l, du), add(l, a->pw);
    if (pl->fmap.bias) add(l, a->pb);
    int64_t hw = p->per_head ? p->heads : 1, D = p->head_dim;
    const int64_t dw[3] = {hw, D, D}, db[3] = {hw, 1, D};
    l = next(out, n, pl->reduce);
    add(l, a->pw), add(l, tk_arg_tensor(keys ? p->dwk : p->dwq, p->dtype, 3, dw));
    if (!pl->fmap.bias) return;
    l = next(out, n, pl->reduce);
    add(l, a->pb), add(l, tk_arg_tensor(keys ? p->dbk : p->dbq, p->dtype, 3, db));
}

static bwd_args args_of(const tk_hedgehog_bwd_params *p, const bwd_plan *pl) {
    const int64_t B = p->batch, H = p->heads, T = p->seq, D = p->head_dim, hw = p->per_head ? H : 1;
    const int64_t dq[4] = {B, H, T, D}, dv[4] = {B, H, T, p->head_dim_v}, dz[3] = {B, H, T};
    const int64_t dphi[4] = {B, H, T, 2 * D}, dw[3] = {hw, D, D}, db[2] = {hw, D};
    const int64_t dpw[4] = {H, B * pl->ns, D, D}, dpb[4] = {H, B * pl->ns, 1, D};
    const int64_t dmap[4] = {B, H, 2 * D, pl->tp};
    char *ws = p->workspace;
    bwd_args a = {
        .q = tk_hh_tensor(p->q, p->dtype, 4, dq, p->q_strides),
        .k = tk_hh_tensor(p->k, p->dtype, 4, dq, p->k_strides),
        .v = tk_hh_tensor(p->v, p->dtype, 4, dv, p->v_strides),
        .g = tk_arg_tensor(ws + pl->off[WS_G], p->dtype, 4, dv),
        .c = tk_arg_tensor(ws + pl->off[WS_C], TK_F32, 3, dz),
        .phi = tk_arg_tensor(ws + pl->off[WS_PHI], TK_F32, 4, dphi),
        .pw = tk_arg_tensor(ws + pl->off[WS_PW], TK_F32, 4, dpw),
        .pb = tk_arg_tensor(ws + pl->off[WS_PB], TK_F32, 4, dpb),
        .wq = tk_arg_tensor((void *)p->wq, p->dtype, 3, dw),
        .wk = tk_arg_tensor((void *)p->wk, p->dtype, 3, dw),
        .pk = tk_arg_tensor(ws + pl->off[WS_PK], p->dtype, 4, dmap),
        .pqr = tk_arg_tensor(ws + pl->off[WS_PQR], p->dtype, 4, dmap),
        .pkr = tk_arg_tensor(ws + pl->off[WS_PKR], p->dtype, 4, dmap),
    };
    if (p->bq) {
        a.bq = tk_arg_tensor((void *)p->bq, p->dtype, 2, db);
        a.bk = tk_arg_tensor((void *)p->bk, p->dtype, 2, db);
    }
    return a;
}

/* PREP: dO, [O, Z], G, [C], scale, eps. */
static void prep(tk_hedgehog_launch *l, const tk_hedgehog_bwd_params *p, const bwd_args *a,
                 tk_arg eps) {
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const int64_t dz[3] = {p->batch, p->heads, p->seq};
    add(l, tk_hh_tensor(p->dout, p->dtype, 4, dv, p->dout_strides));
    if (p->normalize) {
        add(l, tk_hh_tensor(p->o, p->dtype, 4, dv, p->o_strides));
        add(l, tk_hh_tensor(p->z, TK_F32, 3, dz, p->z_strides));
    }
    add(l, a->g);
    if (p->normalize) add(l, a->c);
    add(l, tk_arg_f32(p->scale != 0.0f ? p->scale : 1.0f)), add(l, eps);
}

/* dv: the forward, queries k (their weights Wk, bk; apart: PKr), keys q
 * (PQr), values G, all reversed. */
static void dv_fwd(tk_hedgehog_launch *l, const tk_hedgehog_bwd_params *p, const bwd_args *a,
                   tk_arg eps) {
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    if (l->cfg.phi) {
        add(l, a->pkr), add(l, a->pqr), add(l, reversed(a->g));
    } else {
        add(l, reversed(a->k)), add(l, reversed(a->q)), add(l, reversed(a->g));
        add(l, a->wk), add(l, a->wq);
        if (p->bq) add(l, a->bk), add(l, a->bq);
    }
    add(l, reversed(tk_hh_tensor(p->dv, p->dtype, 4, dv, p->dv_strides)));
    add(l, tk_arg_f32(1.0f)), add(l, eps);
}

int tk_hedgehog_bwd_launches(const tk_hedgehog_bwd_params *p, size_t smem_max, int sms,
                             tk_hedgehog_launch out[TK_HEDGEHOG_MAX_LAUNCHES]) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, p->head_dim};
    bwd_plan pl = plan_of(p, smem_max, sms);
    bwd_args a = args_of(p, &pl);
    tk_arg eps = tk_arg_f32(p->eps != 0.0f ? p->eps : 1e-6f);
    /* DPHI of the queries maps k, that of the keys q reversed; dv's
     * forward maps k reversed (queries) and q reversed (keys) */
    const map_src k = {a.k, a.wk, a.bk, a.pk}, qr = {reversed(a.q), a.wq, a.bq, a.pqr},
                  kr = {reversed(a.k), a.wk, a.bk, a.pkr}, *maps[3] = {&k, &qr, &kr};
    int n = 0;
    prep(next(out, &n, pl.prep), p, &a, eps);
    for (int i = 0; pl.apart && i < 3; i++) map(next(out, &n, pl.map), maps[i]);
    dphi(next(out, &n, pl.dphi_q), a.g, a.v, a.c, &k, a.phi);
    fmap(out, &n, &pl, &a, p, false, tk_hh_tensor(p->dq, p->dtype, 4, dq, p->dq_strides));
    dphi(next(out, &n, pl.dphi_k), reversed(a.v), reversed(a.g), reversed(a.c), &qr,
         reversed(a.phi));
    fmap(out, &n, &pl, &a, p, true, tk_hh_tensor(p->dk, p->dtype, 4, dq, p->dk_strides));
    dv_fwd(next(out, &n, pl.fwd), p, &a, eps);
    return n;
}

/* ---- the checks ----------------------------------------------------------------- */
/* The end of the first layout: every field of today's struct is required. */
#define BWD_MIN (offsetof(tk_hedgehog_bwd_params, workspace_bytes) + sizeof(size_t))

static tk_status check_pointers(tk_ctx *ctx, const char *fn, const tk_hedgehog_bwd_params *p) {
    const char *norm = p->normalize ? " (normalize)" : NULL, *bias = p->bq ? " (bias)" : NULL;
    const struct {
        const char *name;
        const void *ptr;
        const char *why; /* NULL: not needed by this call */
    } t[] = {{"q", p->q, ""},   {"k", p->k, ""},       {"v", p->v, ""},      {"dout", p->dout, ""},
             {"wq", p->wq, ""}, {"wk", p->wk, ""},     {"dq", p->dq, ""},    {"dk", p->dk, ""},
             {"dv", p->dv, ""}, {"dwq", p->dwq, ""},   {"dwk", p->dwk, ""},  {"o", p->o, norm},
             {"z", p->z, norm}, {"dbq", p->dbq, bias}, {"dbk", p->dbk, bias}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].why && !t[i].ptr)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL%s", fn, t[i].name,
                                    t[i].why);
    return tk_run_check_bias_pair(ctx, fn, p->bq, p->bk);
}

static tk_status check_layouts(tk_ctx *ctx, const char *fn, const tk_hedgehog_bwd_params *p) {
    const int64_t dq[4] = {p->batch, p->heads, p->seq, p->head_dim};
    const int64_t dv[4] = {p->batch, p->heads, p->seq, p->head_dim_v};
    const struct {
        const char *name;
        const int64_t *st, *dims;
    } t[] = {{"q", p->q_strides, dq},       {"k", p->k_strides, dq},   {"v", p->v_strides, dv},
             {"dout", p->dout_strides, dv}, {"dq", p->dq_strides, dq}, {"dk", p->dk_strides, dq},
             {"dv", p->dv_strides, dv},     {"o", p->o_strides, dv}};
    tk_status s;
    for (size_t i = 0; i < sizeof t / sizeof t[0] - !p->normalize; i++)
        if ((s = tk_run_check_strides(ctx, fn, t[i].name, 4, t[i].st, t[i].dims))) return s;
    if (p->normalize && (s = tk_run_check_strides(ctx, fn, "z", 3, p->z_strides, dv))) return s;
    return TK_OK;
}

/* Every config of the plan fits this GPU's blocks. */
static tk_status check_fits(tk_ctx *ctx, const char *fn, const bwd_plan *pl, size_t smem_max) {
    const struct {
        const char *what;
        size_t bytes;
    } t[] = {{"dphi", tk_hh_dphi_smem_bytes(&pl->dphi_q)},
             {"fmap", tk_hh_fmap_smem_bytes(&pl->fmap)},
             {"forward", tk_hedgehog_smem_bytes(&pl->fwd)},
             {"map", pl->apart ? tk_hh_map_smem_bytes(&pl->map) : 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].bytes > smem_max)
            return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                    "%s: the %s kernel needs %zu bytes of shared memory at "
                                    "head_dim %d; this GPU's blocks have %zu",
                                    fn, t[i].what, t[i].bytes, pl->fmap.head_dim, smem_max);
    return TK_OK;
}

typedef struct bwd_call {
    tk_hedgehog_bwd_params p;
    size_t smem_max;
    int sms;
} bwd_call;

static tk_status read_bwd(tk_ctx *ctx, const char *fn, const tk_hedgehog_bwd_params *user,
                          bwd_call *c, bool need_ws) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, &c->p, sizeof c->p, BWD_MIN);
    if (s) return s;
    const tk_hedgehog_bwd_params *p = &c->p;
    const tk_hh_common cm = {p->dtype, p->head_dim, p->normalize, p->per_head, p->scale,
                             p->eps,   p->batch,    p->heads,     p->seq,      p->head_dim_v};
    if ((s = tk_hh_check_common(ctx, fn, &cm)) || (s = check_pointers(ctx, fn, p)) ||
        (s = check_layouts(ctx, fn, p)))
        return s;
    if (p->fused_maps != 0 && p->fused_maps != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: fused_maps is %d; expected 0 or 1",
                                fn, p->fused_maps);
    c->smem_max = tk_hh_smem_of_gpu(ctx);
    c->sms = tk_run_sm_count(ctx);
    bwd_plan pl = plan_of(p, c->smem_max, c->sms);
    if ((s = check_fits(ctx, fn, &pl, c->smem_max))) return s;
    if (!need_ws) return TK_OK;
    if (!p->workspace || p->workspace_bytes < pl.total)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace is %s with %zu bytes; the call needs %zu "
                                "(tk_hedgehog_backward_workspace)",
                                fn, p->workspace ? "set" : "NULL", p->workspace_bytes, pl.total);
    if ((uintptr_t)p->workspace % ALIGN) /* its parts' offsets are multiples of ALIGN */
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: workspace is not %d-byte aligned", fn,
                                ALIGN);
    return TK_OK;
}

/* ---- the entry points -------------------------------------------------------------- */
tk_status tk_hedgehog_backward_workspace(tk_ctx *ctx, const tk_hedgehog_bwd_params *user,
                                         size_t *bytes) {
    bwd_call c;
    tk_status s = read_bwd(ctx, "tk_hedgehog_backward_workspace", user, &c, false);
    if (s) return s;
    if (!bytes)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_backward_workspace: bytes is NULL");
    *bytes = tk_hedgehog_bwd_workspace_bytes(&c.p, c.smem_max, c.sms);
    return TK_OK;
}

tk_status tk_hedgehog_backward_prepare(tk_ctx *ctx, const tk_hedgehog_bwd_params *user,
                                       tk_prepare_info *info) {
    bwd_call c;
    tk_status s = read_bwd(ctx, "tk_hedgehog_backward_prepare", user, &c, false);
    if (s) return s;
    tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES];
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    return tk_hh_programs(ctx, l, tk_hedgehog_bwd_launches(&c.p, c.smem_max, c.sms, l), prog, info);
}

tk_status tk_hedgehog_backward(tk_ctx *ctx, const tk_hedgehog_bwd_params *user, void *stream) {
    bwd_call c;
    tk_status s = read_bwd(ctx, "tk_hedgehog_backward", user, &c, true);
    if (s) return s;
    tk_program *prog[TK_HEDGEHOG_MAX_LAUNCHES];
    tk_hedgehog_launch l[TK_HEDGEHOG_MAX_LAUNCHES];
    int n = tk_hedgehog_bwd_launches(&c.p, c.smem_max, c.sms, l);
    if ((s = tk_hh_programs(ctx, l, n, prog, NULL))) return s;
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], l[i].n, l[i].args, stream);
    return s;
}
