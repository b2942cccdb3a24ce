/* tk_attention_forward and its companions (tk/tk_run.h): the parameters
 * checked, the kernel chosen (the forward of attention.c / attention_hopper.c,
 * or for few queries the decoding kernels, attention_decode_run.c), the
 * program from the registry, the launch; with rotary, K's rotation first
 * (tk_rotary's kernel, rotary_run.c), into the workspace. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attention_decode.h"
#include "attention_parts.h"
#include "jit/registry.h"
#include "tk/tk_run.h"

/* ---- tk_attention_forward (tk_run.h) ----------------------------------------
 * The registry's attention: one compiled kernel per (dtype, head_dim,
 * causal, kernel), with the default warps. */
typedef struct attn_key {
    int32_t dtype, head_dim, causal, wgmma, varlen, rotary, rotary_dim, rotary_tables;
} attn_key;

static tk_status build_attn_key(tk_ctx *ctx, const void *key, tk_kernel **out) {
    const attn_key *a = key;
    tk_attention_config cfg = {.dtype = (tk_dtype)a->dtype,
                               .head_dim = a->head_dim,
                               .causal = a->causal,
                               .wgmma = a->wgmma,
                               .varlen = a->varlen,
                               .rotary = a->rotary,
                               .rotary_dim = a->rotary_dim,
                               .rotary_tables = a->rotary_tables};
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

/* Rotary (tk_run.h): the prefill kernels on dense batches only. */
static tk_status check_rope_route(tk_ctx *ctx, const char *fn, const tk_attention_params *p) {
    if (!p->rotary) return TK_OK;
    bool cache = p->seqlens_kv || p->block_table || p->k_new || p->v_new;
    const char *why = p->kernel == TK_ATTN_DECODE ? "TK_ATTN_DECODE"
                      : p->cu_seqlens_q           ? "packed sequences (cu_seqlens_q)"
                      : cache                     ? "a KV cache (seqlens_kv)"
                                                  : NULL;
    if (why)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: rotary runs on the prefill kernels over dense batches: not "
                                "with %s",
                                fn, why);
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
    if ((s = check_layout(ctx, fn, p)) || (s = check_rope_route(ctx, fn, p)) ||
        (s = check_varlen(ctx, fn, p)) || (s = check_cache(ctx, fn, p)))
        return s;
    if (p->kernel == TK_ATTN_DECODE && p->seq_q > TK_ATTN_DECODE_MAX_Q)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: seq_q is %lld; TK_ATTN_DECODE takes at most %d queries", fn,
                                (long long)p->seq_q, TK_ATTN_DECODE_MAX_Q);
    if (p->num_splits < 0)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: num_splits is %d; expected >= 0", fn,
                                p->num_splits);
    bool decode = !p->cu_seqlens_q && !p->rotary && tk_attn_decode_wanted(p);
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
/* ... and of tk_rotary_params' (rotary_run.c's): every field of today's. */
#define ROPE_PARAMS_MIN (offsetof(tk_rotary_params, base) + sizeof(float))
/* The rotated K's bytes the call takes at most (the kernels' offsets are
 * i64; no size_t product may wrap). */
#define ROPE_MAX_BYTES ((double)((int64_t)1 << 60))

/* A checked call: its parameters, the kernels that run them and, with
 * rotary, K's rotation: tk_rotary's parameters for K alone, out of place
 * into the workspace (rope false: none). */
typedef struct attn_call {
    tk_attention_params p;
    tk_attn_kernel route;
    bool rope;
    tk_rotary_params kr;
} attn_call;

/* The fields of *r the call reads (tk_run.h), for p's shapes. */
static tk_status check_rope(tk_ctx *ctx, const char *fn, const tk_attention_params *p,
                            const tk_rotary_params *r) {
    int rd = r->rotary_dim;
    if (r->style != TK_ROTARY_NEOX && r->style != TK_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary->style is %d; expected TK_ROTARY_NEOX or "
                                "TK_ROTARY_GPTJ",
                                fn, r->style);
    if (rd && (rd < 2 || rd > p->head_dim || rd % 2))
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary->rotary_dim is %d; expected 0 (head_dim) or an even "
                                "number in 2 .. head_dim (%d)",
                                fn, rd, p->head_dim);
    if (r->inverse)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary->inverse is %d; the forward rotates by +theta (0)", fn,
                                r->inverse);
    if (r->positions)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: rotary->positions is set; the fused rotation puts query i at "
                                "i + seq_kv - seq_q and key j at j (per-token positions: tk_rotary "
                                "first, then a call without rotary)",
                                fn);
    if (!r->cos != !r->sin)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: rotary->%s is set and %s is NULL", fn,
                                r->cos ? "cos" : "sin", r->cos ? "sin" : "cos");
    if (!r->cos)
        return !(r->base >= 0.0f) || isinf(r->base)
                   ? tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                      "%s: rotary->base is %g; expected 0 (10000) or a finite "
                                      "value > 0",
                                      fn, (double)r->base)
                   : TK_OK;
    if (r->style == TK_ROTARY_GPTJ)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "%s: rotary cos/sin tables with TK_ROTARY_GPTJ are not supported "
                                "(as in tk_rotary); give a base",
                                fn);
    if (r->table_rows < p->seq_kv || r->table_rows > INT32_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary->table_rows is %lld; expected seq_kv (%lld: key j "
                                "reads row j) .. %d",
                                fn, (long long)r->table_rows, (long long)p->seq_kv, INT32_MAX);
    return TK_OK;
}

/* p->rotary, read (its own struct_size) and checked, as K's rotation. */
static tk_status read_rope(tk_ctx *ctx, const char *fn, attn_call *c) {
    const tk_attention_params *p = &c->p;
    c->rope = p->rotary != NULL;
    memset(&c->kr, 0, sizeof c->kr);
    if (!c->rope) return TK_OK;
    char where[96];
    snprintf(where, sizeof where, "%s: rotary", fn);
    tk_rotary_params r;
    tk_status s = tk_params_read(ctx, where, p->rotary, &r, sizeof r, ROPE_PARAMS_MIN);
    if (s || (s = check_rope(ctx, fn, p, &r))) return s;
    double bytes = (double)p->batch * (double)p->heads_kv * (double)p->seq_kv *
                   (double)p->head_dim * (double)tk_dtype_size(p->dtype);
    if (bytes > ROPE_MAX_BYTES)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: the rotated K would take %g bytes; at most 2^60", fn, bytes);
    tk_rotary_params *k = &c->kr;
    *k = (tk_rotary_params){.struct_size = sizeof *k,
                            .dtype = p->dtype,
                            .style = r.style,
                            .head_dim = p->head_dim,
                            .rotary_dim = r.rotary_dim ? r.rotary_dim : p->head_dim,
                            .batch = p->batch,
                            .seq = p->seq_kv,
                            .heads_q = p->heads_kv,
                            .q = p->k,
                            .q_out = p->workspace,
                            .cos = r.cos,
                            .sin = r.sin,
                            .table_rows = r.cos ? r.table_rows : 0,
                            .base = r.base != 0.0f ? r.base : 10000.0f};
    memcpy(k->q_strides, p->k_strides, sizeof k->q_strides);
    return TK_OK;
}

/* The caller's parameters (any struct_size) read into c and checked, for
 * entry point fn: the kernels that run them (check_attention), and K's
 * rotation. */
static tk_status read_attention(tk_ctx *ctx, const char *fn, const tk_attention_params *user,
                                attn_call *c) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = tk_params_read(ctx, fn, user, &c->p, sizeof c->p, ATTN_PARAMS_MIN);
    if (!s) s = check_attention(ctx, fn, &c->p, &c->route);
    return s ? s : read_rope(ctx, fn, c);
}

/* The rotated K's bytes (rounded up to 256), 0 without rotary. */
static size_t rope_bytes(const attn_call *c) {
    if (!c->rope) return 0;
    const tk_attention_params *p = &c->p;
    size_t n = (size_t)p->batch * (size_t)p->heads_kv * (size_t)p->seq_kv * (size_t)p->head_dim;
    return (n * tk_dtype_size(p->dtype) + 255) / 256 * 256;
}

/* The prefill forward's specialization for a checked call. */
static tk_attention_config fwd_config(const attn_call *c) {
    const tk_attention_params *p = &c->p;
    tk_attention_config cfg = {.dtype = p->dtype,
                               .head_dim = p->head_dim,
                               .causal = p->causal,
                               .wgmma = c->route == TK_ATTN_WGMMA,
                               .varlen = p->cu_seqlens_q != NULL};
    if (!c->rope) return cfg;
    cfg.rotary = c->kr.style == TK_ROTARY_GPTJ ? TK_ATTN_ROTARY_GPTJ : TK_ATTN_ROTARY_NEOX;
    cfg.rotary_dim = c->kr.rotary_dim;
    cfg.rotary_tables = c->kr.cos != NULL;
    return cfg;
}

/* The forward kernel's program for cfg (built and compiled on first use). */
static tk_status attention_program(tk_ctx *ctx, const tk_attention_config *cfg, tk_program **prog,
                                   tk_prepare_info *info) {
    attn_key key;
    memset(&key, 0, sizeof key);
    key.dtype = cfg->dtype, key.head_dim = cfg->head_dim, key.causal = cfg->causal;
    key.wgmma = cfg->wgmma, key.varlen = cfg->varlen;
    key.rotary = cfg->rotary, key.rotary_dim = cfg->rotary_dim;
    key.rotary_tables = cfg->rotary_tables;
    return tk_registry_program(ctx, &attn_def, &key, prog, info);
}

/* K's rotation's config (for its program). */
static tk_rotary_config rope_config(const attn_call *c) {
    tk_rotary_launch l[2];
    tk_rotary_launches(&c->kr, l);
    return l[0].cfg;
}

tk_status tk_attention_kernel_for(tk_ctx *ctx, const tk_attention_params *user,
                                  tk_attn_kernel *out) {
    const char *fn = "tk_attention_kernel_for";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: out is NULL", fn);
    attn_call c;
    tk_status s = read_attention(ctx, fn, user, &c);
    if (!s) *out = c.route;
    return s;
}

tk_status tk_attention_forward_workspace(tk_ctx *ctx, const tk_attention_params *user,
                                         size_t *bytes) {
    const char *fn = "tk_attention_forward_workspace";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!bytes) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: bytes is NULL", fn);
    *bytes = 0;
    attn_call c;
    tk_status s = read_attention(ctx, fn, user, &c);
    if (!s && c.route == TK_ATTN_DECODE) s = tk_attn_decode_workspace(ctx, &c.p, bytes);
    if (!s && rope_bytes(&c) > *bytes) /* the decoding kernels never run with rotary */
        *bytes = rope_bytes(&c);
    return s;
}

tk_status tk_attention_prepare(tk_ctx *ctx, const tk_attention_params *user,
                               tk_prepare_info *info) {
    tk_program *prog = NULL;
    attn_call c;
    tk_status s = read_attention(ctx, "tk_attention_forward", user, &c);
    if (s) return s;
    if (c.route == TK_ATTN_DECODE) {
        tk_prepare_info mine;
        return tk_attn_decode_run(ctx, &c.p, NULL, info ? info : &mine);
    }
    tk_attention_config cfg = fwd_config(&c);
    if ((s = attention_program(ctx, &cfg, &prog, info)) || !c.rope) return s;
    tk_prepare_info rot; /* info: the slower of the two */
    tk_rotary_config rc = rope_config(&c);
    if ((s = tk_rotary_program(ctx, &rc, &prog, info ? &rot : NULL))) return s;
    if (info && rot.ms > info->ms) *info = rot;
    return TK_OK;
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

/* Q's rotation's arguments after the forward's n (tk/tk_kernels.h): q_pos0,
 * then Cos and Sin or base. */
static int rope_args(const attn_call *c, tk_arg *args, int n) {
    const tk_rotary_params *r = &c->kr;
    args[n++] = tk_arg_i64(c->p.seq_kv - c->p.seq_q);
    if (!r->cos) {
        args[n++] = tk_arg_f32(r->base);
        return n;
    }
    int64_t td[2] = {r->table_rows, r->rotary_dim / 2};
    args[n++] = tk_arg_tensor((void *)r->cos, TK_F32, 2, td);
    args[n++] = tk_arg_tensor((void *)r->sin, TK_F32, 2, td);
    return n;
}

/* The workspace holds the rotated K: large enough, 256-byte aligned, not k. */
static tk_status check_rope_workspace(tk_ctx *ctx, const char *fn, const attn_call *c) {
    const tk_attention_params *p = &c->p;
    size_t need = rope_bytes(c);
    if (!p->workspace || p->workspace_bytes < need)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: rotary needs a workspace of %zu bytes for the rotated K "
                                "(tk_attention_forward_workspace); it has %zu%s",
                                fn, need, p->workspace ? p->workspace_bytes : 0,
                                p->workspace ? "" : " (workspace is NULL)");
    if ((uintptr_t)p->workspace % 256)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace %p is not 256-byte aligned (rotary keeps the "
                                "rotated K there)",
                                fn, p->workspace);
    if (p->workspace == p->k)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: workspace is k; rotary rotates K out of place, into the "
                                "workspace",
                                fn);
    return TK_OK;
}

/* The prefill launches of a checked call (tk_attn_fwd_launches). */
static tk_status make_launches(tk_ctx *ctx, const char *fn, const attn_call *c,
                               tk_attn_fwd_launches *l) {
    memset(l, 0, sizeof *l);
    l->cfg = fwd_config(c);
    tk_attention_params p = c->p;
    if (c->rope) {
        tk_status s = check_rope_workspace(ctx, fn, c);
        if (s) return s;
        tk_rotary_launch rot[2];
        tk_rotary_launches(&c->kr, rot); /* one: K alone */
        l->rotate_k = 1, l->rot = rot[0];
        p.k = p.workspace; /* the forward reads the rotated K, dense */
        memset(p.k_strides, 0, sizeof p.k_strides);
    }
    l->n = tk_attn_fwd_args(&p, l->args);
    if (c->rope) l->n = rope_args(c, l->args, l->n);
    return TK_OK;
}

tk_status tk_attn_fwd_plan(tk_ctx *ctx, const tk_attention_params *user,
                           tk_attn_fwd_launches *out) {
    const char *fn = "tk_attention_forward";
    attn_call c;
    tk_status s = read_attention(ctx, fn, user, &c);
    if (s) return s;
    if (c.route == TK_ATTN_DECODE)
        return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                "tk_attn_fwd_plan: the call runs the decoding kernels");
    return make_launches(ctx, fn, &c, out);
}

tk_status tk_attention_forward(tk_ctx *ctx, const tk_attention_params *user, void *stream) {
    const char *fn = "tk_attention_forward";
    attn_call c;
    tk_status s = read_attention(ctx, fn, user, &c);
    if (s) return s;
    if (c.route == TK_ATTN_DECODE) return tk_attn_decode_run(ctx, &c.p, stream, NULL);
    tk_attn_fwd_launches l;
    tk_program *prog = NULL, *rot = NULL;
    /* both programs before any launch: a failed compile launches nothing */
    if ((s = make_launches(ctx, fn, &c, &l)) || (s = attention_program(ctx, &l.cfg, &prog, NULL)) ||
        (l.rotate_k && (s = tk_rotary_program(ctx, &l.rot.cfg, &rot, NULL))))
        return s;
    if (l.rotate_k && (s = tk_launch(rot, l.rot.n, l.rot.args, stream))) return s;
    return tk_launch(prog, l.n, l.args, stream);
}
