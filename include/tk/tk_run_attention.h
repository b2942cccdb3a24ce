/* Attention forward and backward on device pointers: prefill, decoding,
 * packed variable-length batches, a KV cache, rotary embeddings fused.
 * One family of the ready-made kernels; tk/tk_run.h includes them all. */
#ifndef TK_TK_RUN_ATTENTION_H
#define TK_TK_RUN_ATTENTION_H

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

/* designated in C, so that -Wextra (missing field initializers) stays quiet */
#ifdef __cplusplus
#define TK_ATTENTION_PARAMS_INIT                                                                   \
    { sizeof(tk_attention_params) }
#else
#define TK_ATTENTION_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_attention_params) }
#endif

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

/* designated in C, so that -Wextra (missing field initializers) stays quiet */
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
 * mode, compiling those not cached side by side (a thread each, up to the
 * cores); info, may be NULL: the least cached kernel's origin and the whole
 * call's milliseconds. */
TK_API tk_status tk_attention_backward_prepare(tk_ctx *ctx, const tk_attention_bwd_params *p,
                                               tk_prepare_info *info);
/* Checks, prepares and launches the mode's kernels on `stream` (the dQ
 * kernel then the dK/dV kernel; fast: prep, fused, convert). Asynchronous. */
TK_API tk_status tk_attention_backward(tk_ctx *ctx, const tk_attention_bwd_params *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
