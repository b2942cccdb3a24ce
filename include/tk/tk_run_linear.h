/* Linear attention on device pointers: Based and Hedgehog, forward and
 * backward.
 * One family of the ready-made kernels; tk/tk_run.h includes them all. */
#ifndef TK_TK_RUN_LINEAR_H
#define TK_TK_RUN_LINEAR_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Based linear attention (tk/tk_kernels.h, "Based linear attention") --
 * Causal: o_i = Σ_{j<=i} a_ij v_j / (z_i + eps) with a_ij = 1 + s + s²/2,
 * s = scale·q_i·k_j, z_i = Σ_{j<=i} a_ij (normalize = 1; 0: no division),
 * flash-linear-attention's parallel_based / fused_chunk_based. q, k [batch,
 * heads, seq, 16] (feature dim 16), v, o [batch, heads, seq, head_dim_v],
 * bf16 or f16, in the layout their strides name in (batch, head, token, dim)
 * order (all 0: dense [B, H, T, D]; fla's [B, T, H, D] is {T·H·D, D, H·D,
 * 1}); the dim stride must be 1. z (optional, f32 [batch, heads, seq],
 * z_strides likewise) receives z_i, which the backward of a normalized
 * forward takes. scale 0: 1/4 (16^-1/2); eps 0: 1e-6. v_cols: the value
 * columns a block (a multiple of 16, at most 128; 0: the library's choice).
 * Checked here: sizes, pointers, strides, flags. Initialize with
 * TK_BASED_PARAMS_INIT (struct_size as in tk_attention_params).
 * Sequence segments: a block walks a head's chunks in order, so with few
 * batch entries and heads the GPU would idle; the sequence then splits into
 * segments that run side by side, each starting from the earlier segments'
 * states (a state pass first, into `workspace`). segments 0: the library's
 * choice (from batch, heads, head_dim_v and the GPU's SM count), 1: never,
 * n > 1: at most n. The forward splits only with a workspace of at least
 * tk_based_forward_workspace bytes (NULL: never); the backward's workspace
 * always covers its split. Results are deterministic for given segments. */
typedef struct tk_based_params {
    size_t struct_size;
    tk_dtype dtype;                        /* TK_BF16 or TK_F16                                  */
    int32_t normalize;                     /* 0 or 1                                              */
    float scale, eps;                      /* 0: 0.25 and 1e-6; else finite, > 0                  */
    int64_t batch, heads, seq, head_dim_v; /* >= 1; head_dim_v a multiple of 8 up to 256 */
    const void *q, *k, *v;
    void *o;
    float *z; /* NULL: not written                                            */
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4], z_strides[3];
    int32_t v_cols; /* 0: the library's choice                                 */
    /* grown fields: a struct_size ending before them reads them as 0 / NULL */
    void *workspace; /* device memory, 4-byte aligned; NULL: no segments        */
    size_t workspace_bytes;
    int32_t segments; /* 0: the library's choice; 1: none; n > 1: at most n    */
} tk_based_params;

#ifdef __cplusplus
#define TK_BASED_PARAMS_INIT                                                                       \
    { sizeof(tk_based_params) }
#else
#define TK_BASED_PARAMS_INIT                                                                       \
    { .struct_size = sizeof(tk_based_params) }
#endif

/* The backward: dq, dk, dv (dtype, each [batch, heads, seq, 16 or
 * head_dim_v] in its strides) from dout (the gradient of o), q, k, v and,
 * for a normalized forward, its o and z. The kernels need device memory of
 * tk_based_backward_workspace bytes in `workspace` (the partial sums of dq
 * and dk over value slices, and dz); nothing else may use it until the
 * call's kernels end. Deterministic. Other fields as in tk_based_params. */
typedef struct tk_based_bwd_params {
    size_t struct_size;
    tk_dtype dtype;
    int32_t normalize;
    float scale, eps;
    int64_t batch, heads, seq, head_dim_v;
    const void *q, *k, *v, *dout;
    const void *o;  /* normalize: the forward's o                  */
    const float *z; /* normalize: the forward's z                  */
    void *dq, *dk, *dv;
    int64_t q_strides[4], k_strides[4], v_strides[4], dout_strides[4], o_strides[4];
    int64_t dq_strides[4], dk_strides[4], dv_strides[4], z_strides[3];
    void *workspace;
    size_t workspace_bytes;
    int32_t v_cols;   /* 0: the library's choice                      */
    int32_t segments; /* as in tk_based_params (grown field)          */
} tk_based_bwd_params;

#ifdef __cplusplus
#define TK_BASED_BWD_PARAMS_INIT                                                                   \
    { sizeof(tk_based_bwd_params) }
#else
#define TK_BASED_BWD_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_based_bwd_params) }
#endif

/* Check p and ready its kernel (info may be NULL). */
TK_API tk_status tk_based_prepare(tk_ctx *ctx, const tk_based_params *p, tk_prepare_info *info);
/* Check, prepare and launch on `stream`. Asynchronous. */
TK_API tk_status tk_based_forward(tk_ctx *ctx, const tk_based_params *p, void *stream);
/* The workspace the forward's segments need for p's sizes and segments (0:
 * the sequence is not split; p->workspace unread). */
TK_API tk_status tk_based_forward_workspace(tk_ctx *ctx, const tk_based_params *p, size_t *bytes);
/* The workspace the backward needs for p's sizes (p->workspace unread). */
TK_API tk_status tk_based_backward_workspace(tk_ctx *ctx, const tk_based_bwd_params *p,
                                             size_t *bytes);
TK_API tk_status tk_based_backward_prepare(tk_ctx *ctx, const tk_based_bwd_params *p,
                                           tk_prepare_info *info);
/* Check, prepare and launch the backward's kernels on `stream`. */
TK_API tk_status tk_based_backward(tk_ctx *ctx, const tk_based_bwd_params *p, void *stream);

/* ---- Hedgehog linear attention (tk/tk_kernels.h, "Hedgehog linear
 * attention") -----------------------------------------------------------------
 * Causal: o_i = Σ_{j<=i} a_ij v_j / (Σ_{j<=i} a_ij + eps) with a_ij = scale ·
 * φ(q_i)·φ(k_j) and φ(x) = softmax([2y, -2y]), y = x·Wᵀ + b (normalize = 1;
 * 0: no division): flash-linear-attention's HedgehogFeatureMap (its
 * Linear's weight and bias: wq, bq for q; wk, bk for k) followed by
 * chunk_linear_attn. q, k [batch, heads, seq, head_dim], v, o [batch,
 * heads, seq, head_dim_v], bf16 or f16, in the layout their strides name in
 * (batch, head, token, dim) order (all 0: dense [B, H, T, D]; fla's [B, T,
 * H, D] is {T·H·D, D, H·D, 1}); the dim stride must be 1. The weights are
 * dense, in the dtype: wq, wk [D, D] (row-major [out, in], as nn.Linear's
 * weight) and bq, bk [D] shared by all heads (fla's layer), or [heads, D,
 * D] and [heads, D] with per_head; bq and bk NULL: no bias (both or
 * neither). z (optional, f32 [batch, heads, seq], z_strides likewise)
 * receives z_i = Σ_{j<=i} a_ij (for a backward). scale 0: 1 (fla's
 * chunk_linear_attn multiplies the scores by its scale, (2D)^-1/2 by
 * default: with normalize it cancels but for eps, without it pass it here);
 * eps 0: 1e-6, added to the scaled sum (fla: 1e-10). v_cols and warps: the
 * kernel's shape (tk_hedgehog_config; 0: the library's choice, shrunk to
 * the GPU's shared memory: an A100 runs D 128 at 16 columns and 2 warps;
 * sm_86 / sm_89 cannot run D 128, TK_ERR_UNSUPPORTED). Initialize with
 * TK_HEDGEHOG_PARAMS_INIT (struct_size as in tk_attention_params).
 * Sequence segments, as tk_based_params': a block walks a head's chunks in
 * order, so with few batch entries and heads the GPU would idle; the
 * sequence then splits into segments that run side by side, each starting
 * from the earlier segments' states (a state pass first, into
 * `workspace`). segments 0: the library's choice (from batch, heads,
 * head_dim_v and the GPU's SM count), 1: never, n > 1: at most n. The
 * forward splits only with a workspace of at least
 * tk_hedgehog_forward_workspace bytes (NULL: never). Results are
 * deterministic for given segments.
 * The feature maps apart: with a workspace (and fused_maps 0), φ(q) and
 * φ(k) are computed once, by two launches of their own, into it, and the
 * forward reads them rather than mapping each chunk again for each of its
 * value slices (tk/tk_kernels.h, `phi`; the same results, bit for bit).
 * The workspace then also holds them: 2·B·H·2D·ceil(T/128)·128 elements of
 * the dtype. fused_maps 1 keeps the maps inside the forward kernel (the
 * workspace holds the segments' states alone). The workspace: device
 * memory, 256-byte aligned. */
typedef struct tk_hedgehog_params {
    size_t struct_size;
    tk_dtype dtype;                        /* TK_BF16 or TK_F16                       */
    int32_t head_dim;                      /* D: 64 or 128                            */
    int32_t normalize;                     /* 0 or 1                                  */
    float scale, eps;                      /* 0: 1 and 1e-6; else finite, > 0        */
    int64_t batch, heads, seq, head_dim_v; /* >= 1; head_dim_v a multiple of 8 up to 256 */
    const void *q, *k, *v;
    void *o;
    float *z;            /* NULL: not written                              */
    const void *wq, *wk; /* [D, D], or [heads, D, D] with per_head          */
    const void *bq, *bk; /* [D], or [heads, D]; both NULL: no bias          */
    int32_t per_head;    /* 0: one W and b for all heads; 1: one per head    */
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4], z_strides[3];
    int32_t v_cols, warps; /* 0: the library's choice                         */
    /* grown fields: a struct_size ending before them reads them as 0 / NULL */
    void *workspace; /* device memory, 256-byte aligned; NULL: none           */
    size_t workspace_bytes;
    int32_t segments;   /* 0: the library's choice; 1: none; n > 1: at most n  */
    int32_t fused_maps; /* 0: maps apart with a workspace; 1: always fused    */
} tk_hedgehog_params;

#ifdef __cplusplus
#define TK_HEDGEHOG_PARAMS_INIT                                                                    \
    { sizeof(tk_hedgehog_params) }
#else
#define TK_HEDGEHOG_PARAMS_INIT                                                                    \
    { .struct_size = sizeof(tk_hedgehog_params) }
#endif

/* Check p and ready its kernel (info may be NULL). */
TK_API tk_status tk_hedgehog_prepare(tk_ctx *ctx, const tk_hedgehog_params *p,
                                     tk_prepare_info *info);
/* Check, prepare and launch on `stream`. Asynchronous. */
TK_API tk_status tk_hedgehog_forward(tk_ctx *ctx, const tk_hedgehog_params *p, void *stream);
/* The workspace the forward needs for p's sizes, segments and fused_maps
 * (0: the sequence is not split and the maps are fused; p->workspace
 * unread). */
TK_API tk_status tk_hedgehog_forward_workspace(tk_ctx *ctx, const tk_hedgehog_params *p,
                                               size_t *bytes);

/* The backward: given dout (the gradient of o), the gradients of q, k, v
 * and of the feature maps' weights and biases. Sizes, dtype, head_dim,
 * normalize, scale, eps, per_head and the weights as in the forward's
 * call; o and z are the forward's outputs (z required with normalize; o
 * too). dq, dk [B, H, T, D], dv [B, H, T, Dv] are written in the dtype,
 * as are dwq, dwk (the weights' shape) and, with a bias, dbq, dbk (the
 * gradients are written, not added to). Strides as in the forward (all 0:
 * dense). Deterministic: the sums over tokens run in a fixed order.
 * workspace: at least tk_hedgehog_backward_workspace bytes of device
 * memory (256-byte aligned), unused between calls.
 * The feature maps apart: with fused_maps 0, φ(k), φ of q reversed and φ
 * of k reversed are computed once, by three launches of their own, into
 * the workspace, and the dφ kernels and dv's forward read them rather
 * than mapping each chunk again for each feature or value slice
 * (tk/tk_kernels.h, `phi`; the same results, bit for bit). The workspace
 * then also holds them: 3·B·H·2D·ceil(T/128)·128 elements of the dtype.
 * fused_maps 1 keeps the maps inside those kernels. */
typedef struct tk_hedgehog_bwd_params {
    size_t struct_size;
    tk_dtype dtype;
    int32_t head_dim, normalize, per_head;
    float scale, eps;
    int64_t batch, heads, seq, head_dim_v;
    const void *q, *k, *v, *dout;
    const void *o;  /* normalize: the forward's o                  */
    const float *z; /* normalize: the forward's z                  */
    const void *wq, *wk, *bq, *bk;
    void *dq, *dk, *dv;
    void *dwq, *dwk, *dbq, *dbk; /* dbq, dbk: with a bias (else unread) */
    int64_t q_strides[4], k_strides[4], v_strides[4], dout_strides[4], o_strides[4];
    int64_t dq_strides[4], dk_strides[4], dv_strides[4], z_strides[3];
    void *workspace;
    size_t workspace_bytes;
    /* grown fields: a struct_size ending before them reads them as 0 */
    int32_t fused_maps; /* 0: maps apart (in the workspace); 1: fused     */
} tk_hedgehog_bwd_params;

#ifdef __cplusplus
#define TK_HEDGEHOG_BWD_PARAMS_INIT                                                                \
    { sizeof(tk_hedgehog_bwd_params) }
#else
#define TK_HEDGEHOG_BWD_PARAMS_INIT                                                                \
    { .struct_size = sizeof(tk_hedgehog_bwd_params) }
#endif

/* The workspace the backward needs for p's sizes and fused_maps
 * (p->workspace unread). */
TK_API tk_status tk_hedgehog_backward_workspace(tk_ctx *ctx, const tk_hedgehog_bwd_params *p,
                                                size_t *bytes);
/* Check p and ready the backward's kernels, compiled side by side (info: the
 * least cached one's origin, the whole call's milliseconds). */
TK_API tk_status tk_hedgehog_backward_prepare(tk_ctx *ctx, const tk_hedgehog_bwd_params *p,
                                              tk_prepare_info *info);
/* Check, prepare and launch the backward's kernels on `stream`. */
TK_API tk_status tk_hedgehog_backward(tk_ctx *ctx, const tk_hedgehog_bwd_params *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
