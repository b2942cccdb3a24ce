/* tk_attention_forward and its companions (tk/tk_run.h): the parameters
 * checked, the kernel chosen (the forward of attention.c / attention_hopper.c,
 * or for few queries the decoding kernels, attention_decode_run.c), the
 * program from the registry, the launch. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attention_decode.h"
#include "attention_parts.h"
#include "jit/registry.h"
#include "tk/tk_run.h"

/* ---- tk_attention_forward (tk_run.h) ----------------------------------------
 * The registry's attention: one compiled kernel per (dtype, head_dim,
 * causal, kernel), with the default warps. */
typedef struct attn_key {
    int32_t dtype, head_dim, causal, wgmma, varlen;
} attn_key;

static tk_status build_attn_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const attn_key *a = key;
    tk_attention_config cfg = {.dtype = (tk_dtype)a->dtype,
                               .head_dim = a->head_dim,
                               .causal = a->causal,
                               .wgmma = a->wgmma,
                               .varlen = a->varlen};
    return tk_attention_fwd_build(ctx, &cfg, out);
}

static const tk_kernel_def attn_def = {"tk_attention_forward", sizeof(attn_key), build_attn_key};

#define ATTN_MAX_SEQ ((int64_t)INT32_MAX - 65535)

/* A 4-D tensor's strides (name_strides): all zero (dense), or the head
 * dimension contiguous and the others >= 0. */
static tk_status check_strides(tk_ctx *ctx, const char *fn, const char *name, const int64_t *st) {
    if (!st[0] && !st[1] && !st[2] && !st[3]) return TK_OK;
    if (st[3] != 1)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s_strides[3] is %lld; the head dimension must be contiguous "
                                "(stride 1)",
                                fn, name, (long long)st[3]);
    for (int d = 0; d < 3; d++)
        if (st[d] < 0)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is negative", fn,
                                    name, d);
    return TK_OK;
}

/* Sizes, pointers and strides (after the specialization). */
static tk_status check_layout(tk_ctx *ctx, const char *fn, const tk_attention_params *p) {
    const int64_t sz[5] = {p->batch, p->heads_q, p->heads_kv, p->seq_q, p->seq_kv};
    static const char *names[5] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_kv"};
    for (int i = 0; i < 5; i++)
        if (sz[i] <= 0)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s is %lld; sizes must be "
                                    ">= 1",
                                    fn, names[i], (long long)sz[i]);
    /* The kernel indexes rows, heads and batches in i32 (and grids heads
     * and batches in y, z): larger sizes must fail here, not wrap. */
    const int64_t lim[5] = {65535, 65535, 65535, ATTN_MAX_SEQ, ATTN_MAX_SEQ};
    for (int i = 0; i < 5; i++)
        if (sz[i] > lim[i])
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                    "%s: %s is %lld; the kernel "
                                    "allows at most %lld",
                                    fn, names[i], (long long)sz[i], (long long)lim[i]);
    if (p->heads_q % p->heads_kv)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: heads_q (%lld) is not a multiple "
                                "of heads_kv (%lld)",
                                fn, (long long)p->heads_q, (long long)p->heads_kv);
    const void *ptr[5] = {p->q, p->k, p->v, p->o, p->lse};
    static const char *pn[5] = {"q", "k", "v", "o", "lse"};
    for (int i = 0; i < 5; i++)
        if (!ptr[i]) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, pn[i]);
    const int64_t *st[4] = {p->q_strides, p->k_strides, p->v_strides, p->o_strides};
    for (int i = 0; i < 4; i++) {
        tk_status s = check_strides(ctx, fn, pn[i], st[i]);
        if (s) return s;
    }
    for (int d = 0; d < 3; d++)
        if (p->lse_strides[d] < 0)
            return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: lse_strides[%d] is negative", fn,
                                    d);
    return TK_OK;
}

/* The KV-cache fields (tk_run.h): decoding only, sizes in the kernels'
 * i32 range, pages of whole 16-row copies, appended rows in pairs. */
static tk_status check_cache(tk_ctx *ctx, const char *fn, const tk_attention_params *p) {
    bool any = p->seqlens_kv || p->block_table || p->k_new || p->v_new;
    if (!any) return TK_OK;
    if (!p->seqlens_kv)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is set but seqlens_kv is NULL; a cache needs the "
                                "length of each sequence",
                                fn,
                                p->block_table ? "block_table"
                                : p->k_new     ? "k_new"
                                               : "v_new");
    if (p->seq_q > TK_ATTN_DECODE_MAX_Q ||
        (p->kernel != TK_ATTN_AUTO && p->kernel != TK_ATTN_DECODE))
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: a KV cache (seqlens_kv) runs on the decoding kernels: "
                                "seq_q must be at most %d (it is %lld) and kernel TK_ATTN_AUTO "
                                "or TK_ATTN_DECODE (it is %d)",
                                fn, TK_ATTN_DECODE_MAX_Q, (long long)p->seq_q, p->kernel);
    if (!p->k_new != !p->v_new)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is set but %s is NULL", fn,
                                p->k_new ? "k_new" : "v_new", p->k_new ? "v_new" : "k_new");
    tk_status s = check_strides(ctx, fn, "k_new", p->k_new_strides);
    if (s || (s = check_strides(ctx, fn, "v_new", p->v_new_strides))) return s;
    if (!p->block_table) return TK_OK;
    if (p->page_size < 16 || p->page_size % 16 || p->page_size > ATTN_MAX_SEQ)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: page_size is %lld; expected a multiple of 16 from 16 to %lld",
                                fn, (long long)p->page_size, (long long)ATTN_MAX_SEQ);
    if (p->num_pages < 1 || p->num_pages > INT32_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: num_pages is %lld; expected 1 to %d",
                                fn, (long long)p->num_pages, INT32_MAX);
    if (p->max_pages < 1 || p->max_pages > ATTN_MAX_SEQ / p->page_size)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: max_pages is %lld; expected 1 to %lld (max_pages x "
                                "page_size at most %lld keys)",
                                fn, (long long)p->max_pages,
                                (long long)(ATTN_MAX_SEQ / p->page_size), (long long)ATTN_MAX_SEQ);
    return TK_OK;
}

/* Packed variable-length batches (tk_run.h): both prefix sums, maximum
 * lengths inside the totals, the prefill kernels, no cache. */
static tk_status check_varlen(tk_ctx *ctx, const char *fn, const tk_attention_params *p) {
    if (!p->cu_seqlens_q && !p->cu_seqlens_kv) return TK_OK;
    if (!p->cu_seqlens_q || !p->cu_seqlens_kv)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: %s is set but %s is NULL; packed sequences need both "
                                "prefix sums",
                                fn, p->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_kv",
                                p->cu_seqlens_q ? "cu_seqlens_kv" : "cu_seqlens_q");
    if (p->max_seqlen_q < 1 || p->max_seqlen_q > p->seq_q)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: max_seqlen_q is %lld; expected 1 to seq_q (%lld), the "
                                "longest sequence's queries",
                                fn, (long long)p->max_seqlen_q, (long long)p->seq_q);
    if (p->max_seqlen_kv < 0 || p->max_seqlen_kv > p->seq_kv)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: max_seqlen_kv is %lld; expected 0 (unknown) to seq_kv (%lld)",
                                fn, (long long)p->max_seqlen_kv, (long long)p->seq_kv);
    if (p->kernel == TK_ATTN_DECODE || p->seqlens_kv || p->block_table || p->k_new || p->v_new)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: packed sequences (cu_seqlens_q) run on the prefill kernels: "
                                "not with %s",
                                fn, p->kernel == TK_ATTN_DECODE ? "TK_ATTN_DECODE" : "a KV cache");
    return TK_OK;
}

tk_status tk_attn_pick_kernel(tk_ctx *ctx, const char *fn, int kernel, bool *wgmma) {
    *wgmma = false;
    if (kernel < TK_ATTN_AUTO || kernel > TK_ATTN_WGMMA)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: kernel is %d; expected TK_ATTN_AUTO, TK_ATTN_MMA_SYNC or "
                                "TK_ATTN_WGMMA",
                                fn, kernel);
    if (kernel == TK_ATTN_MMA_SYNC) return TK_OK;
    char arch[16];
    tk_registry_arch(ctx, arch, sizeof arch);
    bool hopper = !strcmp(arch, "sm_90a");
    if (kernel == TK_ATTN_WGMMA && !hopper)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: TK_ATTN_WGMMA needs an sm_90a GPU; this one is %s", fn,
                                arch[0] ? arch : "unknown (no GPU)");
    *wgmma = hopper; /* TK_ATTN_AUTO: the Hopper kernel wherever it runs */
    return TK_OK;
}

/* The checks, and the kernels that run p: *route is TK_ATTN_DECODE,
 * TK_ATTN_WGMMA or TK_ATTN_MMA_SYNC. */
static tk_status check_attention(tk_ctx *ctx, const char *fn, const tk_attention_params *p,
                                 tk_attn_kernel *route) {
    if (!p) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: params is NULL", fn);
    bool wgmma = false;
    if (p->kernel < TK_ATTN_AUTO || p->kernel > TK_ATTN_DECODE)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: kernel is %d; expected TK_ATTN_AUTO, TK_ATTN_MMA_SYNC, "
                                "TK_ATTN_WGMMA or TK_ATTN_DECODE",
                                fn, p->kernel);
    tk_status s =
        p->kernel == TK_ATTN_DECODE ? TK_OK : tk_attn_pick_kernel(ctx, fn, p->kernel, &wgmma);
    if (s) return s;
    s = tk_attn_check_spec(ctx, fn, p->dtype, p->head_dim, p->causal);
    if (s) return s;
    if (!(p->scale >= 0.0f) || isinf(p->scale))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: scale %g is not a finite value "
                                ">= 0",
                                fn, (double)p->scale);
    if ((s = check_layout(ctx, fn, p)) || (s = check_varlen(ctx, fn, p)) ||
        (s = check_cache(ctx, fn, p)))
        return s;
    if (p->kernel == TK_ATTN_DECODE && p->seq_q > TK_ATTN_DECODE_MAX_Q)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: seq_q is %lld; TK_ATTN_DECODE takes at most %d queries", fn,
                                (long long)p->seq_q, TK_ATTN_DECODE_MAX_Q);
    if (p->num_splits < 0)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: num_splits is %d; expected >= 0", fn,
                                p->num_splits);
    bool decode = !p->cu_seqlens_q && tk_attn_decode_wanted(p);
    *route = decode ? TK_ATTN_DECODE : wgmma ? TK_ATTN_WGMMA : TK_ATTN_MMA_SYNC;
    return TK_OK;
}

static tk_arg attn_tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                          const int64_t *strides) {
    bool dense = true;
    for (int i = 0; i < rank; i++) dense = dense && !strides[i];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, strides);
}

/* The end of tk_attention_params' first layout: the smallest struct_size. */
#define ATTN_PARAMS_MIN (offsetof(tk_attention_params, lse_strides) + 3 * sizeof(int64_t))

/* The caller's parameters (any struct_size) read into *p and checked, for
 * entry point fn; *route: the kernels that run them (check_attention). */
static tk_status read_attention(tk_ctx *ctx, const char *fn, const tk_attention_params *user,
                                tk_attention_params *p, tk_attn_kernel *route) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, p, sizeof *p, ATTN_PARAMS_MIN);
    return s ? s : check_attention(ctx, fn, p, route);
}

/* The forward kernel's program for checked p (built and compiled on first
 * use). */
static tk_status attention_program(tk_ctx *ctx, const tk_attention_params *p, bool wgmma,
                                   tk_program **prog, tk_prepare_info *info) {
    attn_key key;
    memset(&key, 0, sizeof key);
    key.dtype = p->dtype, key.head_dim = p->head_dim, key.causal = p->causal;
    key.wgmma = wgmma;
    key.varlen = p->cu_seqlens_q != NULL;
    return tk_registry_program(ctx, &attn_def, &key, prog, info);
}

tk_status tk_attention_kernel_for(tk_ctx *ctx, const tk_attention_params *user,
                                  tk_attn_kernel *out) {
    const char *fn = "tk_attention_kernel_for";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: out is NULL", fn);
    tk_attention_params p;
    return read_attention(ctx, fn, user, &p, out);
}

tk_status tk_attention_forward_workspace(tk_ctx *ctx, const tk_attention_params *user,
                                         size_t *bytes) {
    const char *fn = "tk_attention_forward_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    tk_attention_params p;
    tk_attn_kernel route;
    tk_status s = read_attention(ctx, fn, user, &p, &route);
    if (s || route != TK_ATTN_DECODE) return s;
    return tk_attn_decode_workspace(ctx, &p, bytes);
}

tk_status tk_attention_prepare(tk_ctx *ctx, const tk_attention_params *user,
                               tk_prepare_info *info) {
    tk_program *prog = NULL;
    tk_attention_params p;
    tk_attn_kernel route;
    tk_status s = read_attention(ctx, "tk_attention_forward", user, &p, &route);
    if (s) return s;
    if (route == TK_ATTN_DECODE) {
        tk_prepare_info mine;
        return tk_attn_decode_run(ctx, &p, NULL, info ? info : &mine);
    }
    return attention_program(ctx, &p, route == TK_ATTN_WGMMA, &prog, info);
}

/* The softmax scale the kernels take: 0 means 1/sqrt(D). */
static float scale_of(const tk_attention_params *p) {
    return p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)p->head_dim);
}

tk_arg tk_attn_packed_arg(const void *data, tk_dtype dt, int64_t heads, int64_t rows, int64_t D,
                          const int64_t *st) {
    bool dense = !st[0] && !st[1] && !st[2] && !st[3];
    int64_t dims[4] = {1, heads, rows, D};
    /* the batch stride, of a dimension of size 1, is never used: a dense
     * tensor's extent, as the copy engine's maps take no zero stride */
    int64_t s[4] = {rows * heads * D, dense ? D : st[1], dense ? heads * D : st[2], 1};
    return tk_arg_strided((void *)data, dt, 4, dims, s);
}

tk_arg tk_attn_packed_lse(float *lse, int64_t heads, int64_t rows, const int64_t *st) {
    bool dense = !st[0] && !st[1] && !st[2];
    int64_t dims[3] = {1, heads, rows};
    int64_t s[3] = {heads * rows, dense ? rows : st[1], dense ? 1 : st[2]};
    return tk_arg_strided(lse, TK_F32, 3, dims, s);
}

int tk_attn_fwd_args(const tk_attention_params *p, tk_arg *args) {
    int64_t D = p->head_dim, Tq = p->seq_q;
    args[5] = tk_arg_f32(scale_of(p));
    if (!p->cu_seqlens_q) {
        int64_t qd[4] = {p->batch, p->heads_q, p->seq_q, D};
        int64_t kd[4] = {p->batch, p->heads_kv, p->seq_kv, D};
        int64_t ld[3] = {p->batch, p->heads_q, p->seq_q};
        args[0] = attn_tensor(p->q, p->dtype, 4, qd, p->q_strides);
        args[1] = attn_tensor(p->k, p->dtype, 4, kd, p->k_strides);
        args[2] = attn_tensor(p->v, p->dtype, 4, kd, p->v_strides);
        args[3] = attn_tensor(p->o, p->dtype, 4, qd, p->o_strides);
        args[4] = attn_tensor(p->lse, TK_F32, 3, ld, p->lse_strides);
        return 6;
    }
    int64_t n = p->batch + 1;
    args[0] = tk_attn_packed_arg(p->q, p->dtype, p->heads_q, Tq, D, p->q_strides);
    args[1] = tk_attn_packed_arg(p->k, p->dtype, p->heads_kv, p->seq_kv, D, p->k_strides);
    args[2] = tk_attn_packed_arg(p->v, p->dtype, p->heads_kv, p->seq_kv, D, p->v_strides);
    args[3] = tk_attn_packed_arg(p->o, p->dtype, p->heads_q, Tq, D, p->o_strides);
    args[4] = tk_attn_packed_lse(p->lse, p->heads_q, Tq, p->lse_strides);
    args[6] = tk_arg_tensor((void *)p->cu_seqlens_q, TK_I32, 1, &n);
    args[7] = tk_arg_tensor((void *)p->cu_seqlens_kv, TK_I32, 1, &n);
    args[8] = tk_arg_i32((int32_t)p->max_seqlen_q);
    return 9;
}

tk_status tk_attention_forward(tk_ctx *ctx, const tk_attention_params *user, void *stream) {
    tk_program *prog = NULL;
    tk_attention_params params;
    const tk_attention_params *p = &params;
    tk_attn_kernel route;
    tk_status s = read_attention(ctx, "tk_attention_forward", user, &params, &route);
    if (s) return s;
    if (route == TK_ATTN_DECODE) return tk_attn_decode_run(ctx, p, stream, NULL);
    if ((s = attention_program(ctx, p, route == TK_ATTN_WGMMA, &prog, NULL))) return s;
    tk_arg args[TK_ATTN_FWD_MAX_ARGS];
    int n = tk_attn_fwd_args(p, args);
    return tk_launch(prog, n, args, stream);
}
