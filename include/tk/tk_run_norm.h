/* LayerNorm, RMSNorm and rotary embeddings on device pointers.
 * One family of the ready-made kernels; tk/tk_run.h includes them all. */
#ifndef TK_TK_RUN_NORM_H
#define TK_TK_RUN_NORM_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Normalization: LayerNorm and RMSNorm, fused with the residual add ----
 * Forward over rows [rows, cols] (row pitch *_stride in elements, 0: dense;
 * unit column stride), bf16 or f16, statistics in f32:
 *   h = x (+ residual, rounded to the dtype and written to h: the new
 *       residual stream, what the next layer adds to)
 *   LAYER  y = (h - mean(h))·rstd (·weight) (+ bias),
 *          rstd = 1/sqrt(var(h) + eps) (biased variance, as torch's)
 *   RMS    y = h·rstd (·weight), rstd = 1/sqrt(mean(h²) + eps)
 * weight and bias [cols] are optional (NULL: none; RMS has no bias). mean
 * (LAYER) and rstd [rows] f32 are saved for the backward; both NULL: not
 * saved (inference). In place works: y may be x, h may be x or residual.
 * rows 0 launches nothing. Initialize with TK_NORM_PARAMS_INIT (struct_size
 * as in tk_attention_params). */
typedef struct tk_norm_params {
    size_t struct_size;
    tk_dtype dtype; /* TK_BF16 or TK_F16 (x, residual, weight, bias, h, y) */
    int32_t kind;   /* tk_norm_kind: TK_NORM_LAYER or TK_NORM_RMS           */
    float eps;      /* finite, >= 0 (torch's default: 1e-5)                 */
    int64_t rows, cols;
    const void *x, *residual;  /* [rows, cols]; residual NULL: none        */
    const void *weight, *bias; /* [cols], NULL: none                       */
    void *h;                   /* [rows, cols]: with a residual, required  */
    void *y;                   /* [rows, cols]                             */
    float *mean, *rstd;        /* [rows]: NULL (both): not saved           */
    int64_t x_stride, residual_stride, h_stride, y_stride;
    /* The block's shape: only warps and cols are read (tk_kernels.h); NULL:
     * tk_norm_shape_for's choice for cols. */
    const tk_norm_config *config;
} tk_norm_params;

/* The backward from dy: given the forward's h (x without a residual), mean
 * and rstd, dx = ∂loss/∂h, plus dh (the gradient the residual stream brings
 * from later layers, NULL: none), which makes dx the gradient of both x and
 * the residual. dweight and dbias [cols] (NULL: not wanted; dweight needs the
 * weight, dbias LAYER) in grad_dtype, summed over the rows in a fixed order:
 * bit-identical from run to run. The column sums pass through the workspace
 * (tk_norm_backward_workspace; nothing else may use it until the call's
 * kernels have run). dx may be dy or dh. */
typedef struct tk_norm_bwd_params {
    size_t struct_size;
    tk_dtype dtype; /* TK_BF16 or TK_F16 (h, dy, dh, weight, dx)           */
    int32_t kind;   /* tk_norm_kind, as in the forward                      */
    int64_t rows, cols;
    const void *h, *dy, *dh;  /* [rows, cols]; dh NULL: none              */
    const void *weight;       /* [cols], the forward's; NULL: none        */
    const float *mean, *rstd; /* [rows], the forward's (mean: LAYER)      */
    void *dx;                 /* [rows, cols]                             */
    void *dweight, *dbias;    /* [cols] in grad_dtype; NULL: not wanted   */
    tk_dtype grad_dtype;      /* TK_F32 (0 too), TK_BF16 or TK_F16        */
    void *workspace;          /* >= workspace_bytes bytes, 4-byte aligned */
    size_t workspace_bytes;
    int64_t h_stride, dy_stride, dh_stride, dx_stride;
    const tk_norm_config *config; /* as in tk_norm_params */
} tk_norm_bwd_params;

/* designated in C, so that -Wextra (missing field initializers) stays quiet */
#ifdef __cplusplus
#define TK_NORM_PARAMS_INIT                                                                        \
    { sizeof(tk_norm_params) }
#define TK_NORM_BWD_PARAMS_INIT                                                                    \
    { sizeof(tk_norm_bwd_params) }
#else
#define TK_NORM_PARAMS_INIT                                                                        \
    { .struct_size = sizeof(tk_norm_params) }
#define TK_NORM_BWD_PARAMS_INIT                                                                    \
    { .struct_size = sizeof(tk_norm_bwd_params) }
#endif

/* The block shape (warps, cols of a tk_norm_config) the run API takes for
 * rows of `cols` columns, forward (part TK_NORM_FWD) or backward. */
TK_API void tk_norm_shape_for(int part, int64_t cols, int *warps, int *round_cols);

/* Check p and ready its kernel (info may be NULL). */
TK_API tk_status tk_norm_prepare(tk_ctx *ctx, const tk_norm_params *p, tk_prepare_info *info);
/* Check, prepare and launch the forward on `stream`. Asynchronous. */
TK_API tk_status tk_norm_forward(tk_ctx *ctx, const tk_norm_params *p, void *stream);
/* The workspace bytes p's backward needs (rows, cols, weight, dbias; the
 * other pointers may still be NULL): 0 with neither weight nor dbias. */
TK_API tk_status tk_norm_backward_workspace(tk_ctx *ctx, const tk_norm_bwd_params *p,
                                            size_t *bytes);
TK_API tk_status tk_norm_backward_prepare(tk_ctx *ctx, const tk_norm_bwd_params *p,
                                          tk_prepare_info *info);
/* The backward kernel, then one reduction per wanted dweight / dbias. */
TK_API tk_status tk_norm_backward(tk_ctx *ctx, const tk_norm_bwd_params *p, void *stream);

/* ---- Rotary embeddings (RoPE) on Q and K --------------------------------
 * q [batch, heads_q, seq, head_dim] and k [batch, heads_k, seq, head_dim]
 * (k NULL: only q), bf16 or f16, in the layout their strides name in
 * (batch, head, token, dim) order (all 0: dense [B, H, N, D]; a [B, N, H,
 * D] tensor is strides {N·H·D, D, H·D, 1}); a unit dim stride is the fast
 * path, any stride >= 1 works. The first rotary_dim columns are rotated in
 * pairs, NeoX (i, i + rd/2) or GPT-J (2i, 2i + 1), by θ_i = pos ·
 * base^(-2i/rd), in f32, rounded once (tk/tk_kernels.h, "Rotary
 * embeddings"); inverse = 1 rotates by -θ: the backward, dq from dq_out.
 * q_out == q (same strides) rotates in place, leaving columns rd.. alone;
 * otherwise q_out gets them copied and must not overlap q (k likewise).
 * The angles: cos and sin [table_rows, rd/2] f32 tables (NeoX only) read at
 * row n, or at row positions[b, n] (int32 [batch, seq], dense: a serving
 * engine's cos/sin cache), or computed from base (0: 10000) at position n or
 * positions[b, n]. One launch for q, one for k. Checked here: every size,
 * pointer, stride, flag, table_rows >= seq without positions (>= 1 with
 * them; a table row past table_rows is masked in the kernel anyway: cos =
 * sin = 0, never a read outside the tables). Not checked (a device read): the
 * positions' values; any int32 works, positions are exact in f32 to 2^24
 * and sin/cos keep their 1e-7 error to |θ| <= 1e5. Initialize with
 * TK_ROTARY_PARAMS_INIT (struct_size as in tk_attention_params). */
typedef struct tk_rotary_params {
    size_t struct_size;
    tk_dtype dtype;                       /* TK_BF16 or TK_F16 (q, k, q_out, k_out)              */
    int32_t style;                        /* tk_rotary_style: TK_ROTARY_NEOX or TK_ROTARY_GPTJ  */
    int32_t head_dim;                     /* 64, 128 or 256                                      */
    int32_t rotary_dim;                   /* even, 2 .. head_dim; 0: head_dim                    */
    int32_t inverse;                      /* 0: forward, 1: backward (rotation by -θ)            */
    int64_t batch, seq, heads_q, heads_k; /* >= 1 (heads_k: with k)            */
    const void *q, *k;                    /* k NULL: only q                     */
    void *q_out, *k_out;                  /* == q / k: in place                 */
    int64_t q_strides[4], k_strides[4], q_out_strides[4], k_out_strides[4];
    const float *cos, *sin; /* [table_rows, rd/2] f32, dense; NULL: from base  */
    int64_t table_rows;
    const int32_t *positions; /* [batch, seq] on the device; NULL: pos = n    */
    float base;               /* 0: 10000; finite, > 0                        */
} tk_rotary_params;

#ifdef __cplusplus
#define TK_ROTARY_PARAMS_INIT                                                                      \
    { sizeof(tk_rotary_params) }
#else
#define TK_ROTARY_PARAMS_INIT                                                                      \
    { .struct_size = sizeof(tk_rotary_params) }
#endif

/* Check p and ready its kernels (info may be NULL: the slower of the two). */
TK_API tk_status tk_rotary_prepare(tk_ctx *ctx, const tk_rotary_params *p, tk_prepare_info *info);
/* Check, prepare and launch on `stream` (q, then k). Asynchronous. */
TK_API tk_status tk_rotary(tk_ctx *ctx, const tk_rotary_params *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
