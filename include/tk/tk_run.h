/* Ready-made kernels on device pointers: one call builds (once per
 * specialization and context), compiles through the kernel cache and
 * launches. One compiled kernel per specialization serves every size.
 *
 * Specializations: attention — (dtype, head_dim, causal, arch); GEMM —
 * (input dtype, output dtype, transpose_b, block shape, arch). Sizes and
 * strides are run-time values. */
#ifndef TK_TK_RUN_H
#define TK_TK_RUN_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Attention forward: O = softmax(scale · Q Kᵀ [+ causal mask]) V, and the
 * natural-log log-sum-exp of each score row, L (kept for the backward pass).
 *
 * Logical shapes: Q, O [B, Hq, Nq, D]; K, V [B, Hkv, Nkv, D]; L [B, Hq, Nq]
 * (f32). Strides are in elements, in that logical order, so both
 * [B,H,N,D] and [B,N,H,D] memory layouts work without copies; all-zero
 * strides mean dense [B,H,N,D] (and dense [B,H,N] for L). The last dim must
 * be contiguous (stride 1). Grouped-query attention: Hq a multiple of Hkv;
 * query head h reads kv head h / (Hq / Hkv).
 *
 * Causal masking is aligned bottom-right, as in FlashAttention-2: query i
 * attends keys j <= i + Nkv - Nq. With Nq > Nkv the first Nq - Nkv query
 * rows attend nothing: their O is 0 and their L is -inf.
 *
 * struct_size: sizeof(tk_attention_params) as the caller compiled it, so the
 * struct can grow (docs/API.md, "Parameter structs"): start from
 * TK_ATTENTION_PARAMS_INIT, or set .struct_size = sizeof(tk_attention_params)
 * in a designated initializer. 0 or a size smaller than the first layout is
 * TK_ERR_INVALID_ARG. */
/* Which attention kernels run (tk_attention_params.kernel and
 * tk_attention_bwd_params.kernel). */
typedef enum tk_attn_kernel {
    TK_ATTN_AUTO = 0,     /* the library's choice: TK_ATTN_WGMMA on sm_90a,
                             TK_ATTN_MMA_SYNC elsewhere                      */
    TK_ATTN_MMA_SYNC = 1, /* FlashAttention-2 on mma.sync, every target        */
    TK_ATTN_WGMMA = 2,    /* the Hopper kernels (sm_90a): wgmma, a producer
                             warpgroup on the copy engine
                             (kernels/attention_hopper.c, attention_bwd_hopper.c) */
    TK_ATTN_DECODE = 3    /* forward only, seq_q <= 16: the decoding kernels
                             (split-KV; tk_kernels.h, "Attention decoding"),
                             every target. TK_ATTN_AUTO picks them whenever
                             seq_q <= 16                                      */
} tk_attn_kernel;

typedef struct tk_attention_params {
    size_t struct_size;
    tk_dtype dtype;   /* TK_BF16 or TK_F16 (Q, K, V, O)                   */
    int32_t head_dim; /* 64, 128 or 256                                   */
    int32_t causal;   /* 0 or 1                                           */
    float scale;      /* softmax scale; 0 means 1/sqrt(head_dim)          */
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv;
    const void *q, *k, *v; /* device pointers                                */
    void *o;
    float *lse; /* device pointer, required                         */
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4];
    int64_t lse_strides[3];
    int32_t kernel; /* tk_attn_kernel; a struct_size that ends before it reads
                       as TK_ATTN_AUTO                                       */
    /* Decoding (seq_q <= 16): the keys are split into ranges run by blocks
     * of their own when the GPU would otherwise idle, and the ranges'
     * partial results merged (a second kernel; deterministic). The
     * partials live in `workspace`, device memory of workspace_bytes, at
     * least what tk_attention_forward_workspace answers for the largest
     * split count the call may choose; with less (NULL: none) the call
     * splits as far as it fits (not at all: one kernel, as fast as a full
     * GPU allows). Grown fields: a struct_size ending before them reads
     * NULL, 0, 0. */
    void *workspace;
    size_t workspace_bytes;
    int32_t num_splits; /* 0: chosen per call from the sizes and the SM count;
                           n >= 1: n ranges (at most one per key tile; 1: no
                           split); the workspace must hold them         */
    /* A KV cache (decoding only, seq_q <= 16; grown fields: NULL / 0 when a
     * struct_size ends before them). seqlens_kv (device, int32 [batch]):
     * the keys sequence b has in the cache; seq_kv then bounds them (it
     * sizes the split count: the longest length is best). Without a block
     * table, k and v hold each sequence's keys contiguously, [batch,
     * heads_kv, seq_kv, D] as above. With block_table (device, int32
     * [batch, max_pages], row stride max_pages), k and v are pools of
     * num_pages pages of page_size tokens (a multiple of 16): key t of
     * sequence b is row t % page_size of page block_table[b][t / page_size];
     * dense they are [num_pages, page_size, heads_kv, D] (vLLM's and
     * FlashAttention's layout); k_strides / v_strides, in (page, head, token,
     * D) order, name others. With k_new and v_new (seq_q new rows per
     * sequence, [batch, heads_kv, seq_q, D] in k_new_strides order, as q),
     * the call first writes them into the cache at positions seqlens_kv[b]
     * .. + seq_q - 1 (a kernel of its own, on the same stream), then attends
     * seqlens_kv[b] + seq_q keys; seqlens_kv itself is not updated.
     * Checked here: sizes, pointers, strides. Not checked (it would need a
     * device read): the contents of seqlens_kv and block_table. Their
     * bounds hold anyway: a length is clamped to 0 .. max_pages·page_size
     * (seq_kv without a table), a table entry outside 0 .. num_pages - 1
     * reads zeros and receives no appended row. */
    const int32_t *seqlens_kv;
    const int32_t *block_table;
    int64_t max_pages, num_pages, page_size;
    const void *k_new, *v_new;
    int64_t k_new_strides[4], v_new_strides[4];
    /* Packed variable-length batches, as FlashAttention's varlen calls take
     * them (grown fields: NULL / 0 when a struct_size ends before them).
     * With cu_seqlens_q and cu_seqlens_kv (device, int32 [batch + 1],
     * prefix sums from 0), sequence b's queries are rows cu_seqlens_q[b] ..
     * cu_seqlens_q[b+1] - 1 of q and o, its keys the same rows of
     * cu_seqlens_kv in k and v; seq_q and seq_kv are the total rows (the
     * tensors' first dimension). Dense, q and o are [seq_q, heads_q, D], k
     * and v [seq_kv, heads_kv, D] and lse [heads_q, seq_q]; strides in the
     * usual (batch, head, token, D) order (lse: batch, head, token) name
     * other layouts, the batch stride ignored. max_seqlen_q: the longest
     * sequence's queries, 1 .. seq_q (it sizes the grid); max_seqlen_kv:
     * its keys, 0 .. seq_kv (0: unknown). Each sequence is attended on its
     * own, causal aligned at its own bottom right; empty sequences are
     * allowed. Runs on the prefill kernels (TK_ATTN_AUTO, _MMA_SYNC or
     * _WGMMA), not with a KV cache. Checked here: sizes and pointers. Not
     * checked (a device read): the sums themselves. The kernels clamp them
     * to the tensors: a pair that decreases is an empty sequence, rows past
     * seq_q / seq_kv do not exist, nothing outside the tensors is read or
     * written (a sequence longer than max_seqlen_q gets only the blocks of
     * rows max_seqlen_q needs: some of its O and L rows are not written). */
    const int32_t *cu_seqlens_q, *cu_seqlens_kv;
    int64_t max_seqlen_q, max_seqlen_kv;
    /* Rotary embeddings (RoPE) on Q and K, as tk_rotary rotates them
     * (tk_rotary_params below; grown field: NULL, none, when a struct_size
     * ends before it). Of *rotary the call reads struct_size, style,
     * rotary_dim (0: head_dim), inverse (must be 0), cos, sin, table_rows,
     * base (0: 10000) and positions (must be NULL: per-token positions are
     * tk_rotary's); its dtype, head_dim, batch, seq, heads_q, heads_k, q, k,
     * q_out, k_out and strides are ignored (this call's own apply). Query i
     * sits at position i + seq_kv - seq_q (the keys' frame, bottom-right as
     * the causal mask: i when seq_q == seq_kv), key j at j; with tables,
     * table_rows >= seq_kv (a position outside the table, a query's when
     * seq_q > seq_kv, reads cos = sin = 0, as in tk_rotary). Q is rotated
     * inside the attention kernel, where its rows land. K is rotated once by
     * tk_rotary's kernel, out of place, into `workspace` ([batch, heads_kv,
     * seq_kv, head_dim] dense in the dtype at offset 0; at least
     * tk_attention_forward_workspace bytes, 256-byte aligned; k itself is
     * not written), and the attention kernel reads it from there: every
     * query block reads every key tile, so K rotated inside the attention
     * kernel would be rotated ceil(seq_q / 128) times over. Prefill kernels
     * only (TK_ATTN_AUTO, which then never picks the decoding kernels,
     * TK_ATTN_MMA_SYNC, TK_ATTN_WGMMA); not with cu_seqlens_q, a KV cache
     * or TK_ATTN_DECODE. */
    const struct tk_rotary_params *rotary;
} tk_attention_params;

/* designated in C, as TK_GEMM_PARAMS_INIT below */
#ifdef __cplusplus
#define TK_ATTENTION_PARAMS_INIT                                                                   \
    { sizeof(tk_attention_params) }
#else
#define TK_ATTENTION_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_attention_params) }
#endif

/* What preparing a kernel took: where it came from and how long. */
typedef struct tk_prepare_info {
    tk_origin origin;
    double ms;
    char arch[16];
} tk_prepare_info;

/* Checks the parameters and makes sure the kernel for their
 * specialization is compiled and loaded (info may be NULL). */
TK_API tk_status tk_attention_prepare(tk_ctx *ctx, const tk_attention_params *p,
                                      tk_prepare_info *info);
/* Checks, prepares (a memory hit after the first call) and launches on
 * `stream` (a CUstream; NULL = default stream). Asynchronous. */
TK_API tk_status tk_attention_forward(tk_ctx *ctx, const tk_attention_params *p, void *stream);

/* The workspace bytes tk_attention_forward may use for p's sizes (its
 * decoding kernels' partials; 0 when seq_q > 16 or the call would not split):
 * for the split count it chooses on this context's GPU (a 132-SM one where
 * there is none), or for p->num_splits when set. With rotary: the larger of
 * that and the rotated K (batch · heads_kv · seq_kv · head_dim elements of
 * the dtype, rounded up to 256 bytes). */
TK_API tk_status tk_attention_forward_workspace(tk_ctx *ctx, const tk_attention_params *p,
                                                size_t *bytes);

/* Which kernel tk_attention_forward runs for p, after the same checks:
 * TK_ATTN_AUTO resolved for this context's GPU (TK_ATTN_DECODE for seq_q <=
 * 16 without cu_seqlens_q and rotary, else TK_ATTN_WGMMA on sm_90a and
 * TK_ATTN_MMA_SYNC elsewhere and without a GPU) into *out. */
TK_API tk_status tk_attention_kernel_for(tk_ctx *ctx, const tk_attention_params *p,
                                         tk_attn_kernel *out);

/* Attention backward: dQ, dK, dV of the forward above (tk/tk_kernels.h,
 * "Attention backward"), from Q, K, V, O, dO (the gradient of O) and the
 * forward's L. Shapes, strides (all zero: dense [B,H,N,D]), GQA and causal
 * alignment as in tk_attention_params; dq is [B, Hq, Nq, D], dk and dv
 * [B, Hkv, Nkv, D] (summed over each kv head's query heads), all in dtype.
 * `mode` (tk_attn_bwd_mode):
 *   TK_ATTN_BWD_DETERMINISTIC (0, the default): the same inputs give
 *     bit-identical gradients. No atomics; the cost is computing P and dS
 *     twice, in a dQ kernel and a dK/dV kernel (7 matrix products of the
 *     forward's size instead of 5).
 *   TK_ATTN_BWD_FAST: one kernel over key blocks computes P and dS once and
 *     adds each block's share of dQ into an f32 accumulator with atomics, so
 *     dQ's last bits may differ from run to run (dK, dV stay bit-identical);
 *     a first kernel zeroes the accumulator, a last one converts it.
 * `kernel` picks the kernel set as in the forward (TK_ATTN_AUTO: the Hopper
 * kernels on sm_90a, as tk_attention_kernel_for answers for the forward).
 *
 * Scratch: the row dot products D = rowsum(dO∘O), f32 [B, Hq, Nq], and in
 * the fast mode the f32 dQ accumulator (4·B·Hq·D·Nq' bytes, Nq' = Nq
 * rounded up to 64), in `workspace`, a device buffer of at least
 * tk_attention_backward_workspace bytes (workspace_bytes says how large it
 * is); nothing is allocated per call. It must not be used by anything else
 * until the call's kernels have run (stream order).
 * struct_size: as in tk_attention_params (TK_ATTENTION_BWD_PARAMS_INIT). */
typedef enum tk_attn_bwd_mode {
    TK_ATTN_BWD_DETERMINISTIC = 0, /* bit-identical gradients (the default) */
    TK_ATTN_BWD_FAST = 1           /* P and dS once; dQ through f32 atomics */
} tk_attn_bwd_mode;

typedef struct tk_attention_bwd_params {
    size_t struct_size;
    tk_dtype dtype;   /* TK_BF16 or TK_F16 (q, k, v, o, dout, dq, dk, dv) */
    int32_t head_dim; /* 64 or 128                                        */
    int32_t causal;   /* 0 or 1                                           */
    float scale;      /* the forward's; 0 means 1/sqrt(head_dim)          */
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv;
    const void *q, *k, *v, *o; /* device pointers                        */
    const void *dout;          /* dO, the gradient of o ("do" is a C keyword) */
    const float *lse;          /* the forward's L [B, Hq, Nq] (natural log)    */
    void *dq, *dk, *dv;        /* outputs                                      */
    void *workspace;           /* >= workspace_bytes bytes, 4-byte aligned     */
    size_t workspace_bytes;
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4], dout_strides[4];
    int64_t dq_strides[4], dk_strides[4], dv_strides[4];
    int64_t lse_strides[3];
    int32_t kernel; /* tk_attn_kernel: TK_ATTN_AUTO (the Hopper kernels on
                       sm_90a), TK_ATTN_MMA_SYNC or TK_ATTN_WGMMA; a
                       struct_size that ends before it reads as auto     */
    int32_t mode;   /* tk_attn_bwd_mode; a struct_size that ends before it
                       reads as TK_ATTN_BWD_DETERMINISTIC                 */
    /* Packed variable-length batches: as in tk_attention_params (q, o, dout,
     * dq [seq_q, heads_q, D], k, v, dk, dv [seq_kv, heads_kv, D], lse
     * [heads_q, seq_q] dense; strides as there; every sequence's rows of dk
     * and dv written, 0 where no query sees them). max_seqlen_kv sizes the
     * dK/dV grid: 0 means seq_kv. Workspace: as for one sequence of seq_q
     * rows (tk_attention_backward_workspace). Grown fields: NULL / 0 when a
     * struct_size ends before them. */
    const int32_t *cu_seqlens_q, *cu_seqlens_kv;
    int64_t max_seqlen_q, max_seqlen_kv;
} tk_attention_bwd_params;

/* designated in C, as TK_GEMM_PARAMS_INIT below */
#ifdef __cplusplus
#define TK_ATTENTION_BWD_PARAMS_INIT                                                               \
    { sizeof(tk_attention_bwd_params) }
#else
#define TK_ATTENTION_BWD_PARAMS_INIT                                                               \
    { .struct_size = sizeof(tk_attention_bwd_params) }
#endif

/* The workspace bytes tk_attention_backward needs for p's sizes (batch,
 * heads_q, seq_q, and head_dim and mode; pointers may still be NULL). */
TK_API tk_status tk_attention_backward_workspace(tk_ctx *ctx, const tk_attention_bwd_params *p,
                                                 size_t *bytes);
/* Checks the parameters and readies the kernels of their specialization and
 * mode (info: the slowest, may be NULL). */
TK_API tk_status tk_attention_backward_prepare(tk_ctx *ctx, const tk_attention_bwd_params *p,
                                               tk_prepare_info *info);
/* Checks, prepares and launches the mode's kernels on `stream` (the dQ
 * kernel then the dK/dV kernel; fast: prep, fused, convert). Asynchronous. */
TK_API tk_status tk_attention_backward(tk_ctx *ctx, const tk_attention_bwd_params *p, void *stream);

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

/* designated in C, as TK_GEMM_PARAMS_INIT below */
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
/* Check p and ready the backward's kernels (info: the slowest one's). */
TK_API tk_status tk_hedgehog_backward_prepare(tk_ctx *ctx, const tk_hedgehog_bwd_params *p,
                                              tk_prepare_info *info);
/* Check, prepare and launch the backward's kernels on `stream`. */
TK_API tk_status tk_hedgehog_backward(tk_ctx *ctx, const tk_hedgehog_bwd_params *p, void *stream);

/* GEMM: C[M,N] = A[M,K] · B[K,N] (or · B[N,K]ᵀ when transpose_b), bf16/f16
 * in, f32 accumulation, bf16/f16/f32 out; row-major with leading
 * dimensions lda/ldb/ldc in elements (0 = dense). Initialize the struct with
 * TK_GEMM_PARAMS_INIT, or with designated initializers that set
 * .struct_size = sizeof(tk_gemm_params), so that fields left out, `config`
 * among them, are 0 (struct_size: as in tk_attention_params). Without a
 * config the block shape depends on M and N (tk_gemm_config_for):
 * tk_gemm_prepare readies the kernel for the size it is given, so prepare
 * each size class a program will run. */
typedef struct tk_gemm_params {
    size_t struct_size;
    tk_dtype in_dtype, out_dtype;
    int32_t transpose_b;
    int64_t m, n, k;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
    /* The kernel's shape (tk_kernels.h); NULL: tk_gemm_config_for's choice
     * for M, N and this GPU.
     * Its dtypes and transpose_b must match the fields above. Each distinct
     * configuration is one more compiled specialization. */
    const tk_gemm_config *config; /* grown field: a struct_size ending before it means NULL */
} tk_gemm_params;

/* designated in C, so that -Wextra (missing field initializers) stays quiet */
#ifdef __cplusplus
#define TK_GEMM_PARAMS_INIT                                                                        \
    { sizeof(tk_gemm_params) }
#else
#define TK_GEMM_PARAMS_INIT                                                                        \
    { .struct_size = sizeof(tk_gemm_params) }
#endif

TK_API tk_status tk_gemm_prepare(tk_ctx *ctx, const tk_gemm_params *p, tk_prepare_info *info);
/* The configuration tk_gemm uses for p when p->config is NULL, on a GPU of
 * `arch`: tk_gemm_config_for's choice, with the copy engine only for 16-byte
 * aligned A and B and row pitches. A NULL p or a bad struct_size gives a
 * zeroed config. */
TK_API tk_gemm_config tk_gemm_config_for_call(const tk_gemm_params *p, const char *arch);
TK_API tk_status tk_gemm(tk_ctx *ctx, const tk_gemm_params *p, void *stream);

/* ---- The optimizer step: global gradient norm, clipping, AdamW ----------
 * A GPT-2 trainer's step over flat device buffers of n elements (any n >=
 * 1), all on the stream, with no host synchronization:
 *   tk_grad_norm   norm[0] = ‖grad‖₂, through partial sums in `workspace`
 *                  (tk_grad_norm_workspace bytes); deterministic: the same
 *                  grad gives the same bits, run after run (the order of
 *                  the sums depends on n, width and the config alone);
 *   tk_adamw       with c = min(1, max_norm / (norm[0] + 1e-6)) read on the
 *                  device (clip_grad_norm_'s coefficient; grad_norm NULL or
 *                  max_norm 0: c = 1) and g = c·grad, in f32:
 *                    m = β1·m + (1-β1)·g,  v = β2·v + (1-β2)·g²,
 *                    m̂ = m/(1-β1^t),  v̂ = v/(1-β2^t),
 *                    weight -= lr·(m̂/(√v̂ + eps) + weight_decay·weight)
 *                  in place on weight, m, v (f32), and weight_lowp (NULL:
 *                  none) = the new weight rounded to lowp_dtype: what
 *                  torch.optim.AdamW does after clip_grad_norm_. One call per
 *                  contiguous range with its own weight_decay (decayed
 *                  matrices, undecayed biases and norm weights): the norm
 *                  is computed once over the whole gradient, each range's
 *                  call reads it.
 * Pointers are device memory, each aligned to its element (16 bytes is the
 * fast path); grad may be f32, bf16 or f16. The buffers are walked as rows
 * [n / width, width] plus the ragged tail (the partial sums and the step
 * launch once more, one block, where width does not divide n). Checked: every pointer, size, dtype and
 * scalar (finite; β in [0, 1), step >= 1), the workspace's size. Not
 * checked: overlaps between the buffers (weight, m, v, weight_lowp and
 * grad must be distinct). Initialize with TK_GRAD_NORM_PARAMS_INIT /
 * TK_ADAMW_PARAMS_INIT (struct_size as in tk_attention_params). */
typedef struct tk_grad_norm_params {
    size_t struct_size;
    tk_dtype grad_dtype; /* TK_F32, TK_BF16 or TK_F16                      */
    int64_t n;           /* elements, 1 .. 2^40                            */
    const void *grad;    /* [n]                                            */
    float *norm;         /* [1], written: ‖grad‖₂                          */
    /* >= tk_grad_norm_workspace bytes, 4-byte aligned; nothing else may
     * use it until the call's kernels have run */
    void *workspace;
    size_t workspace_bytes;
    /* the rows' width: 0 (TK_ADAMW_WIDTH) or a multiple of 16 in 16 .. 2^20 */
    int64_t width;
    const tk_adamw_config *config; /* SUMSQ's warps and cols; NULL: defaults */
} tk_grad_norm_params;

typedef struct tk_adamw_params {
    size_t struct_size;
    tk_dtype grad_dtype;           /* TK_F32, TK_BF16 or TK_F16                */
    tk_dtype lowp_dtype;           /* weight_lowp's: TK_BF16 or TK_F16; 0: none */
    int64_t n;                     /* elements, 1 .. 2^40                      */
    float *weight, *m, *v;         /* [n] f32, updated in place                */
    const void *grad;              /* [n]                                      */
    void *weight_lowp;             /* [n], written; NULL: none                 */
    const float *grad_norm;        /* [1]: tk_grad_norm's; NULL: no clipping   */
    float max_norm;                /* finite, >= 0; 0: no clipping             */
    float lr, beta1, beta2;        /* lr finite >= 0; betas in [0, 1)          */
    float eps, weight_decay;       /* finite, >= 0                             */
    int64_t step;                  /* t >= 1: the bias corrections' exponent   */
    int64_t width;                 /* as in tk_grad_norm_params                */
    const tk_adamw_config *config; /* STEP's warps and cols; NULL: defaults    */
} tk_adamw_params;

#ifdef __cplusplus
#define TK_GRAD_NORM_PARAMS_INIT                                                                   \
    { sizeof(tk_grad_norm_params) }
#define TK_ADAMW_PARAMS_INIT                                                                       \
    { sizeof(tk_adamw_params) }
#else
#define TK_GRAD_NORM_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_grad_norm_params) }
#define TK_ADAMW_PARAMS_INIT                                                                       \
    { .struct_size = sizeof(tk_adamw_params) }
#endif

/* The workspace tk_grad_norm needs for p's n and width (64 bytes per 16
 * rows, and 64 for the tail; pointers unread). */
TK_API tk_status tk_grad_norm_workspace(tk_ctx *ctx, const tk_grad_norm_params *p, size_t *bytes);
/* Check p and ready its kernels (info may be NULL: the slower one's). */
TK_API tk_status tk_grad_norm_prepare(tk_ctx *ctx, const tk_grad_norm_params *p,
                                      tk_prepare_info *info);
/* The partial sums (one launch, two with a tail), then the norm. */
TK_API tk_status tk_grad_norm(tk_ctx *ctx, const tk_grad_norm_params *p, void *stream);
TK_API tk_status tk_adamw_prepare(tk_ctx *ctx, const tk_adamw_params *p, tk_prepare_info *info);
/* The fused clip and update (one launch, two with a tail). Asynchronous. */
TK_API tk_status tk_adamw(tk_ctx *ctx, const tk_adamw_params *p, void *stream);

/* ---- Softmax cross-entropy: loss and gradient, fused ------------------------
 * For logits [rows, vocab] (row pitch logits_stride in elements, 0: dense;
 * unit column stride) in bf16, f16 or f32 and int32 targets [rows], per
 * row in f32 (any vocab >= 1: GPT-2's 50257, a byte vocabulary's 256):
 *   lse_i     = log Σ_j exp(logits_ij)          (lse [rows] f32; NULL: not saved)
 *   loss_i    = lse_i - logits_i,t_i            (loss [rows] f32, required)
 *   dlogits_i = (softmax(logits_i) - onehot(t_i)) · scale_i, in the dtype
 *               (dlogits NULL: the forward alone, one read of each row)
 * scale_i = dloss[i] (f32 [rows], the loss's upstream gradient) or, with
 * dloss NULL, dloss_scale for every row (1/rows for a mean loss, 1 for a
 * sum). Rows whose target is ignore_index get loss 0 and gradient 0 and are
 * not counted; any other target outside 0 .. vocab-1 gives that row loss
 * NaN and gradient NaN (device data is not checked at launch; torch stops
 * there with an assert, this call leaves NaN to find). loss_mean (f32 [1],
 * NULL: not wanted) receives Σ loss / (rows counted), NaN when none is, from
 * a second kernel that needs workspace (tk_cross_entropy_workspace bytes).
 * Deterministic: no atomics, every sum in a fixed order. In place works:
 * dlogits == logits (with the same stride). rows 0 launches only the mean.
 * Start from TK_XENT_PARAMS_INIT: it sets struct_size (as in
 * tk_attention_params) and ignore_index = -1 (llm.c's; torch's default is
 * -100). A zeroed struct would ignore class 0. */
typedef struct tk_xent_params {
    size_t struct_size;
    int32_t ignore_index;   /* targets equal to it are ignored (second: C++'s INIT) */
    tk_dtype dtype;         /* TK_BF16, TK_F16 or TK_F32 (logits, dlogits)         */
    int64_t rows, vocab;    /* rows 0 .. 2^31-1, vocab 1 .. 2^24                   */
    const void *logits;     /* [rows, vocab]                                       */
    const int32_t *targets; /* [rows]                                              */
    void *dlogits;          /* [rows, vocab] or NULL; may be logits                */
    const float *dloss;     /* [rows] or NULL: dloss_scale                         */
    float dloss_scale;      /* finite; read with dloss NULL                        */
    float *loss, *lse;      /* [rows]; lse NULL: not saved                         */
    float *loss_mean;       /* [1] or NULL                                         */
    void *workspace;        /* with loss_mean: >= workspace_bytes, 4-byte aligned  */
    size_t workspace_bytes;
    int64_t logits_stride, dlogits_stride;
    /* The block's shape: only split, warps and cols are read (tk_kernels.h);
     * NULL: the library's choice for the dtype and vocab. */
    const tk_xent_config *config;
} tk_xent_params;

#ifdef __cplusplus
#define TK_XENT_PARAMS_INIT                                                                        \
    { sizeof(tk_xent_params), -1 }
#else
#define TK_XENT_PARAMS_INIT                                                                        \
    { .struct_size = sizeof(tk_xent_params), .ignore_index = -1 }
#endif

/* The workspace bytes p needs (rows and loss_mean read; the other pointers
 * may still be NULL): 0 without loss_mean. */
TK_API tk_status tk_cross_entropy_workspace(tk_ctx *ctx, const tk_xent_params *p, size_t *bytes);
/* Check p and ready its kernels (info may be NULL). */
TK_API tk_status tk_cross_entropy_prepare(tk_ctx *ctx, const tk_xent_params *p,
                                          tk_prepare_info *info);
/* Check, prepare and launch on `stream`: the row kernel, then the mean's
 * (with loss_mean). Asynchronous. */
TK_API tk_status tk_cross_entropy(tk_ctx *ctx, const tk_xent_params *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
