/* tk_attention_backward and its companions (tk/tk_run.h): the parameters
 * checked, the two programs of the specialization from the registry, the
 * launches. The kernels: attention_bwd.c (mma.sync) and attention_bwd_hopper.c
 * (wgmma). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attention_bwd_parts.h"
#include "attention_parts.h"
#include "jit/registry.h"
#include "tk/tk_run.h"

/* ---- tk_attention_backward (tk_run.h) -------------------------------------
 * Registry programs per (dtype, head_dim, causal, kernel set): the dQ and
 * dK/dV kernels (deterministic), the fused kernel (fast), and the fast
 * mode's prep and convert kernels, one per (dtype, head_dim). */
typedef struct bwd_key {
    int32_t dtype, head_dim, causal, part, wgmma, varlen;
} bwd_key;

static tk_status build_bwd_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const bwd_key *a = key;
    tk_attention_bwd_config cfg = {.dtype = (tk_dtype)a->dtype,
                                   .head_dim = a->head_dim,
                                   .causal = a->causal,
                                   .part = a->part,
                                   .wgmma = a->wgmma,
                                   .varlen = a->varlen};
    return tk_attention_bwd_build(ctx, &cfg, out);
}

static const tk_kernel_def bwd_def = {"tk_attention_backward", sizeof(bwd_key), build_bwd_key};

#define BWD_MAX_SEQ ((int64_t)INT32_MAX - 65535)
#define BWD_TENSORS 8

/* The end of the first layout of tk_attention_bwd_params. */
#define BWD_PARAMS_MIN (offsetof(tk_attention_bwd_params, lse_strides) + 3 * sizeof(int64_t))

static tk_status check_sizes(tk_ctx *ctx, const char *fn, const tk_attention_bwd_params *p) {
    const int64_t sz[5] = {p->batch, p->heads_q, p->heads_kv, p->seq_q, p->seq_kv};
    static const char *names[5] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_kv"};
    /* i32 indexing of rows, heads and batches in the kernels; y, z grids */
    const int64_t lim[5] = {65535, 65535, 65535, BWD_MAX_SEQ, BWD_MAX_SEQ};
    for (int i = 0; i < 5; i++) {
        if (sz[i] <= 0)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %lld; sizes must be >= 1",
                                    fn, names[i], (long long)sz[i]);
        if (sz[i] > lim[i])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s is %lld; the kernels allow at most %lld", fn, names[i],
                                    (long long)sz[i], (long long)lim[i]);
    }
    if (p->heads_q % p->heads_kv)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: heads_q (%lld) is not a multiple of heads_kv (%lld)", fn,
                                (long long)p->heads_q, (long long)p->heads_kv);
    if (p->mode != TK_ATTN_BWD_DETERMINISTIC && p->mode != TK_ATTN_BWD_FAST)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: mode is %d; expected TK_ATTN_BWD_DETERMINISTIC or "
                                "TK_ATTN_BWD_FAST",
                                fn, p->mode);
    if (p->cu_seqlens_q || p->cu_seqlens_kv) {
        if (!p->cu_seqlens_q || !p->cu_seqlens_kv)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s is set but %s is NULL; packed sequences need both "
                                    "prefix sums",
                                    fn, p->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_kv",
                                    p->cu_seqlens_q ? "cu_seqlens_kv" : "cu_seqlens_q");
        if (p->max_seqlen_q < 1 || p->max_seqlen_q > p->seq_q)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: max_seqlen_q is %lld; expected 1 to seq_q (%lld)", fn,
                                    (long long)p->max_seqlen_q, (long long)p->seq_q);
        if (p->max_seqlen_kv < 0 || p->max_seqlen_kv > p->seq_kv)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: max_seqlen_kv is %lld; expected 0 (seq_kv) to seq_kv "
                                    "(%lld)",
                                    fn, (long long)p->max_seqlen_kv, (long long)p->seq_kv);
    }
    /* the workspace (the accumulator at head_dim <= 256) in 62 bits */
    double ws = (double)p->batch * (double)p->heads_q * (double)(p->seq_q + 63) * 256.0 * 4.0;
    if (ws >= 0x1p62)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: batch x heads_q x seq_q is %.3g; its workspace would need "
                                "2^62 bytes or more",
                                fn, (double)p->batch * (double)p->heads_q * (double)p->seq_q);
    return TK_OK;
}

/* The batch dimension of the kernels' views: packed sequences are one. */
static int64_t views_batch(const tk_attention_bwd_params *p) {
    return p->cu_seqlens_q ? 1 : p->batch;
}

/* Rows of the fast mode's dQ accumulator: whole 64-row tiles. */
static int64_t acc_rows(const tk_attention_bwd_params *p) { return (p->seq_q + 63) / 64 * 64; }

/* Where the accumulator starts: after D, 256-byte aligned. */
static size_t acc_offset(const tk_attention_bwd_params *p) {
    size_t d = (size_t)views_batch(p) * (size_t)p->heads_q * (size_t)p->seq_q * sizeof(float);
    return (d + 255) / 256 * 256;
}

/* Bytes of D (f32 [B, Hq, Nq]) and, fast, the accumulator (f32 [B, Hq, Nq',
 * D]); sizes checked (check_sizes: each < 2^31, the total < 2^62). */
static size_t workspace_bytes(const tk_attention_bwd_params *p) {
    size_t b = (size_t)views_batch(p);
    if (p->mode != TK_ATTN_BWD_FAST)
        return b * (size_t)p->heads_q * (size_t)p->seq_q * sizeof(float);
    return acc_offset(p) +
           b * (size_t)p->heads_q * (size_t)acc_rows(p) * (size_t)p->head_dim * sizeof(float);
}

static const char *const tensor_names[BWD_TENSORS] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};

static const int64_t *tensor_strides(const tk_attention_bwd_params *p, int i) {
    const int64_t *st[BWD_TENSORS] = {p->q_strides,    p->k_strides,  p->v_strides,  p->o_strides,
                                      p->dout_strides, p->dq_strides, p->dk_strides, p->dv_strides};
    return st[i];
}

static tk_status check_pointers(tk_ctx *ctx, const char *fn, const tk_attention_bwd_params *p) {
    const void *ptr[BWD_TENSORS + 2] = {p->q,  p->k,  p->v,  p->o,   p->dout,
                                        p->dq, p->dk, p->dv, p->lse, p->workspace};
    for (int i = 0; i < BWD_TENSORS + 2; i++)
        if (!ptr[i])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                                    i < BWD_TENSORS    ? tensor_names[i]
                                    : i == BWD_TENSORS ? "lse"
                                                       : "workspace");
    if ((uintptr_t)p->workspace % sizeof(float))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: workspace is not 4-byte aligned", fn);
    size_t need = workspace_bytes(p);
    if (p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace_bytes is %zu; these sizes need %zu "
                                "(tk_attention_backward_workspace)",
                                fn, p->workspace_bytes, need);
    for (int i = 0; i < BWD_TENSORS; i++) {
        const int64_t *st = tensor_strides(p, i);
        bool dense = !st[0] && !st[1] && !st[2] && !st[3];
        if (!dense && st[3] != 1)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s_strides[3] is %lld; the head dimension must be "
                                    "contiguous (stride 1)",
                                    fn, tensor_names[i], (long long)st[3]);
        for (int d = 0; d < 3 && !dense; d++)
            if (st[d] < 0)
                return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is negative",
                                        fn, tensor_names[i], d);
    }
    for (int d = 0; d < 3; d++)
        if (p->lse_strides[d] < 0)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: lse_strides[%d] is negative", fn,
                                    d);
    return TK_OK;
}

/* The caller's struct (any struct_size) read into *p; with `full`, every
 * field checked (else the sizes only, for the workspace query, and in the
 * fast mode the specialization, whose head_dim sizes the accumulator) and
 * p->kernel resolved (TK_ATTN_WGMMA or TK_ATTN_MMA_SYNC). */
static tk_status read_params(tk_ctx *ctx, const char *fn, const tk_attention_bwd_params *user,
                             tk_attention_bwd_params *p, bool full) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, BWD_PARAMS_MIN);
    if (!s) s = check_sizes(ctx, fn, p);
    if (s || (!full && p->mode != TK_ATTN_BWD_FAST)) return s;
    if ((s = tk_attn_bwd_check_spec(ctx, fn, p->dtype, p->head_dim, p->causal)) || !full) return s;
    if (!(p->scale >= 0.0f) || isinf(p->scale))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: scale %g is not a finite value >= 0",
                                fn, (double)p->scale);
    if ((s = check_pointers(ctx, fn, p))) return s;
    bool wgmma;
    if ((s = tk_attn_pick_kernel(ctx, fn, p->kernel, &wgmma))) return s;
    p->kernel = wgmma ? TK_ATTN_WGMMA : TK_ATTN_MMA_SYNC;
    return TK_OK;
}

/* The parts p's mode runs, in launch order. */
static int mode_parts(const tk_attention_bwd_params *p, int part[3]) {
    if (p->mode != TK_ATTN_BWD_FAST) {
        part[0] = TK_ATTN_BWD_DQ, part[1] = TK_ATTN_BWD_DKDV;
        return 2;
    }
    part[0] = TK_ATTN_BWD_PREP, part[1] = TK_ATTN_BWD_FUSED, part[2] = TK_ATTN_BWD_CONVERT;
    return 3;
}

/* The programs of p's specialization and mode, in launch order, compiled
 * side by side on a cold prepare; info: the whole preparation. */
static tk_status bwd_programs(tk_ctx *ctx, const tk_attention_bwd_params *p, tk_program *prog[3],
                              tk_prepare_info *info) {
    int part[3], n = mode_parts(p, part);
    bwd_key key[3];
    for (int i = 0; i < n; i++) {
        bool any = tk_attn_bwd_any_set(part[i]); /* one program for both sets */
        memset(&key[i], 0, sizeof key[i]);
        key[i].dtype = p->dtype, key[i].head_dim = p->head_dim, key[i].part = part[i];
        key[i].causal = !any && p->causal, key[i].wgmma = !any && p->kernel == TK_ATTN_WGMMA;
        key[i].varlen = p->cu_seqlens_q != NULL;
    }
    return tk_registry_programs_of(ctx, &bwd_def, n, key, prog, info);
}

tk_status tk_attention_backward_workspace(tk_ctx *ctx, const tk_attention_bwd_params *user,
                                          size_t *bytes) {
    const char *fn = "tk_attention_backward_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_attention_bwd_params p;
    tk_status s = read_params(ctx, fn, user, &p, false);
    if (!s) *bytes = workspace_bytes(&p);
    return s;
}

tk_status tk_attention_backward_prepare(tk_ctx *ctx, const tk_attention_bwd_params *user,
                                        tk_prepare_info *info) {
    tk_attention_bwd_params p;
    tk_program *prog[3];
    tk_status s = read_params(ctx, "tk_attention_backward_prepare", user, &p, true);
    return s ? s : bwd_programs(ctx, &p, prog, info);
}

static tk_arg bwd_tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                         const int64_t *strides) {
    bool dense = true;
    for (int i = 0; i < rank; i++) dense = dense && !strides[i];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, strides);
}

/* A tensor of the query rows (kv: of the keys) as the kernels see it:
 * [B, H, N, D] through its strides, or packed sequences' [1, H, T, D]. */
static tk_arg rows_tensor(const tk_attention_bwd_params *p, const void *data, const int64_t *st,
                          bool kv) {
    int64_t h = kv ? p->heads_kv : p->heads_q, n = kv ? p->seq_kv : p->seq_q;
    if (p->cu_seqlens_q) return tk_attn_packed_arg(data, p->dtype, h, n, p->head_dim, st);
    int64_t dims[4] = {p->batch, h, n, p->head_dim};
    return bwd_tensor(data, p->dtype, 4, dims, st);
}

/* The tensors every kernel of a call reads: Q, K, V, dO, L, D; and varlen's
 * trailing arguments (the prefix sums, the longest sequence's rows). */
typedef struct bwd_args {
    tk_arg q, k, v, g, l, dw;
    float scale;
    tk_arg cu_q, cu_kv, max_q, max_kv;
} bwd_args;

/* Call c: kernel `part` on args[0..n) and, for packed sequences, its
 * varlen arguments (the kernels over K and V take all four, prep and
 * convert the queries' two). */
static void call(const tk_attention_bwd_params *p, const bwd_args *a, tk_attn_bwd_call *c, int part,
                 int n, const tk_arg *args) {
    c->part = part;
    memcpy(c->args, args, sizeof *args * (size_t)n);
    if (p->cu_seqlens_q) {
        bool kv = part != TK_ATTN_BWD_PREP && part != TK_ATTN_BWD_CONVERT;
        c->args[n++] = a->cu_q;
        if (kv) c->args[n++] = a->cu_kv;
        c->args[n++] = a->max_q;
        if (kv) c->args[n++] = a->max_kv;
    }
    c->nargs = n;
}

/* Fast: prep (D, the accumulator zeroed), fused, convert. The accumulator
 * is [B, Hq, Nq', D] for the mma.sync kernel and [B, Hq, D, Nq'] for the
 * wgmma one (the layout its tiles are added in); prep and convert see
 * either as [B, Hq, Nq', D] through strides. */
static int fast_calls(const tk_attention_bwd_params *p, const bwd_args *a, tk_attn_bwd_call *c) {
    int64_t nq = acc_rows(p), D = p->head_dim, H = p->heads_q, B = views_batch(p);
    void *base = (char *)p->workspace + acc_offset(p);
    int64_t nat[4] = {B, H, nq, D}, tr[4] = {B, H, D, nq};
    int64_t tr_st[4] = {H * D * nq, D * nq, 1, nq};
    bool t = p->kernel == TK_ATTN_WGMMA;
    tk_arg acc =
        t ? tk_arg_strided(base, TK_F32, 4, nat, tr_st) : tk_arg_tensor(base, TK_F32, 4, nat);
    tk_arg acc_fused = t ? tk_arg_tensor(base, TK_F32, 4, tr) : acc;
    tk_arg prep[4] = {rows_tensor(p, p->o, p->o_strides, false), a->g, a->dw, acc};
    tk_arg fused[10] = {a->q,
                        a->k,
                        a->v,
                        a->g,
                        a->l,
                        a->dw,
                        rows_tensor(p, p->dk, p->dk_strides, true),
                        rows_tensor(p, p->dv, p->dv_strides, true),
                        acc_fused,
                        tk_arg_f32(a->scale)};
    tk_arg conv[3] = {acc, rows_tensor(p, p->dq, p->dq_strides, false), tk_arg_f32(a->scale)};
    call(p, a, &c[0], TK_ATTN_BWD_PREP, 4, prep);
    call(p, a, &c[1], TK_ATTN_BWD_FUSED, 10, fused);
    call(p, a, &c[2], TK_ATTN_BWD_CONVERT, 3, conv);
    return 3;
}

int tk_attn_bwd_calls(const tk_attention_bwd_params *p, tk_attn_bwd_call *calls) {
    int64_t ld[3] = {views_batch(p), p->heads_q, p->seq_q}, nseq = p->batch + 1;
    bool packed = p->cu_seqlens_q != NULL;
    bwd_args a = {
        .q = rows_tensor(p, p->q, p->q_strides, false),
        .k = rows_tensor(p, p->k, p->k_strides, true),
        .v = rows_tensor(p, p->v, p->v_strides, true),
        .g = rows_tensor(p, p->dout, p->dout_strides, false),
        .l = packed ? tk_attn_packed_lse((float *)p->lse, p->heads_q, p->seq_q, p->lse_strides)
                    : bwd_tensor(p->lse, TK_F32, 3, ld, p->lse_strides),
        .dw = tk_arg_tensor(p->workspace, TK_F32, 3, ld),
        .scale = p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim),
        .cu_q = tk_arg_tensor((void *)p->cu_seqlens_q, TK_I32, 1, &nseq),
        .cu_kv = tk_arg_tensor((void *)p->cu_seqlens_kv, TK_I32, 1, &nseq),
        .max_q = tk_arg_i32((int32_t)p->max_seqlen_q),
        .max_kv = tk_arg_i32((int32_t)(p->max_seqlen_kv ? p->max_seqlen_kv : p->seq_kv))};
    if (p->mode == TK_ATTN_BWD_FAST) return fast_calls(p, &a, calls);
    tk_arg dq_args[9] = {a.q,
                         a.k,
                         a.v,
                         rows_tensor(p, p->o, p->o_strides, false),
                         a.g,
                         a.l,
                         a.dw,
                         rows_tensor(p, p->dq, p->dq_strides, false),
                         tk_arg_f32(a.scale)};
    tk_arg kv_args[9] = {a.q,
                         a.k,
                         a.v,
                         a.g,
                         a.l,
                         a.dw,
                         rows_tensor(p, p->dk, p->dk_strides, true),
                         rows_tensor(p, p->dv, p->dv_strides, true),
                         tk_arg_f32(a.scale)};
    call(p, &a, &calls[0], TK_ATTN_BWD_DQ, 9, dq_args);
    call(p, &a, &calls[1], TK_ATTN_BWD_DKDV, 9, kv_args);
    return 2;
}

tk_status tk_attention_backward(tk_ctx *ctx, const tk_attention_bwd_params *user, void *stream) {
    tk_attention_bwd_params p;
    tk_program *prog[3];
    tk_status s = read_params(ctx, "tk_attention_backward", user, &p, true);
    if (!s) s = bwd_programs(ctx, &p, prog, NULL);
    tk_attn_bwd_call calls[3];
    int n = s ? 0 : tk_attn_bwd_calls(&p, calls);
    for (int i = 0; i < n && !s; i++) s = tk_launch(prog[i], calls[i].nargs, calls[i].args, stream);
    return s;
}
