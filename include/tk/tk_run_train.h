/* A trainer's kernels on device pointers: the optimizer step (gradient
 * norm, clipping, AdamW), softmax cross-entropy, token and position
 * embeddings and the bias gradient.
 * One family of the ready-made kernels; tk/tk_run.h includes them all. */
#ifndef TK_TK_RUN_TRAIN_H
#define TK_TK_RUN_TRAIN_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* Check p and ready its kernels, compiled side by side (info may be NULL:
 * the least cached one's origin, the whole call's milliseconds). */
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
    /* The block's shape: only split, warps and cols are read (tk_kernels_train.h);
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

/* ---- Token and position embeddings (GPT-2's wte and wpe) --------------------
 * For tokens [B, T] (i32) and rows of C elements (kernels/embedding.c):
 *   tk_embedding_forward   out[b, t] = wte[tokens[b, t]] + wpe[t]
 *     wte [vocab, C] and wpe [max_seq, C] in weight_dtype (the bf16 copies
 *     tk_adamw writes, or f32 master weights), out [B, T, C] in dtype,
 *     added in f32 and rounded once; wpe NULL: out = wte[tokens] alone.
 *     A token outside 0 .. vocab-1 makes its row of out NaN (device data
 *     is not checked at launch; torch stops with an assert, this call
 *     leaves NaN to find), never a read outside wte.
 *   tk_embedding_backward  dwte[v] (+)= Σ_{(b,t): tokens[b,t] = v} dout[b, t]
 *                          dwpe[t] (+)= Σ_b dout[b, t]          (f32 both)
 *     accumulate 1 adds to the gradients (gradient accumulation), 0
 *     overwrites them: dwte's rows of absent tokens become 0, and dwpe's
 *     rows past T too. dwpe NULL: no position gradient. Out-of-range
 *     tokens add to no row of dwte (their dout still reaches dwpe).
 *     Deterministic: the same tokens and dout give the same bits, run
 *     after run and on any GPU. No float atomics: the positions are sorted
 *     by token on the device (a stable radix sort, 8 bits a pass: one for
 *     vocab < 256, two below 65536, three up to 2^24) and each token's rows
 *     are summed in position order (a run crossing a 32-entry boundary of
 *     the sorted order in pieces, added in order); the sort's buffers and
 *     the runs' partial sums are in
 *     `workspace` (tk_embedding_backward_workspace bytes: about 16·B·T +
 *     B·T·C/4, 3.4 MiB at 16 x 1024 x 768).
 * Pointers are device memory aligned to their element; row pitches
 * (*_stride, elements between rows; 0: C) at least C. Sizes: B·T and vocab
 * 1 .. 2^24 - 1 (exact in the sort's f32 entries), C 1 .. 2^20, T <=
 * max_seq (with wpe / dwpe). Checked: every pointer, size, dtype, pitch
 * and the workspace's size; not checked: overlaps between the buffers.
 * Initialize with TK_EMBEDDING_PARAMS_INIT / TK_EMBEDDING_BWD_PARAMS_INIT
 * (struct_size as in tk_attention_params). */
typedef struct tk_embedding_params {
    size_t struct_size;
    tk_dtype dtype;                 /* out's: TK_BF16, TK_F16 or TK_F32            */
    tk_dtype weight_dtype;          /* wte's, wpe's: the same three; 0: dtype      */
    int64_t batch, seq, channels;   /* B, T, C                                     */
    int64_t vocab, max_seq;         /* wte's rows, wpe's (read with wpe)           */
    const int32_t *tokens;          /* [B, T]                                      */
    const void *wte;                /* [vocab, C]                                  */
    const void *wpe;                /* [max_seq, C], or NULL                       */
    void *out;                      /* [B, T, C], written                          */
    int64_t wte_stride, wpe_stride; /* row pitches (elements); 0: C                */
    int64_t out_stride;             /* the pitch between positions; 0: C           */
} tk_embedding_params;

typedef struct tk_embedding_bwd_params {
    size_t struct_size;
    tk_dtype dtype;               /* dout's: TK_BF16, TK_F16 or TK_F32           */
    int accumulate;               /* 1: dwte, dwpe += ...; 0: overwritten        */
    int64_t batch, seq, channels; /* B, T, C                                     */
    int64_t vocab, max_seq;       /* dwte's rows, dwpe's (read with dwpe)        */
    const int32_t *tokens;        /* [B, T]                                      */
    const void *dout;             /* [B, T, C]                                   */
    float *dwte;                  /* [vocab, C] f32                              */
    float *dwpe;                  /* [max_seq, C] f32, or NULL                   */
    /* >= workspace_bytes, 16-byte aligned; nothing else may use it until
     * the call's kernels have run */
    void *workspace;
    size_t workspace_bytes;
    int64_t dout_stride;              /* the pitch between positions; 0: C           */
    int64_t dwte_stride, dwpe_stride; /* row pitches; 0: C                          */
} tk_embedding_bwd_params;

#ifdef __cplusplus
#define TK_EMBEDDING_PARAMS_INIT                                                                   \
    { sizeof(tk_embedding_params) }
#define TK_EMBEDDING_BWD_PARAMS_INIT                                                               \
    { sizeof(tk_embedding_bwd_params) }
#else
#define TK_EMBEDDING_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_embedding_params) }
#define TK_EMBEDDING_BWD_PARAMS_INIT                                                               \
    { .struct_size = sizeof(tk_embedding_bwd_params) }
#endif

/* Check p and ready its kernel (info may be NULL). */
TK_API tk_status tk_embedding_forward_prepare(tk_ctx *ctx, const tk_embedding_params *p,
                                              tk_prepare_info *info);
/* One launch (two where the row tile's width does not divide C).
 * Asynchronous on `stream`. */
TK_API tk_status tk_embedding_forward(tk_ctx *ctx, const tk_embedding_params *p, void *stream);
/* The workspace bytes p needs (sizes read; the pointers may be NULL). */
TK_API tk_status tk_embedding_backward_workspace(tk_ctx *ctx, const tk_embedding_bwd_params *p,
                                                 size_t *bytes);
TK_API tk_status tk_embedding_backward_prepare(tk_ctx *ctx, const tk_embedding_bwd_params *p,
                                               tk_prepare_info *info);
/* The launches (10 for GPT-2's vocabulary, in order on `stream`: dwte
 * zeroed (accumulate 0), dwpe, the sort, the runs' sums). Asynchronous. */
TK_API tk_status tk_embedding_backward(tk_ctx *ctx, const tk_embedding_bwd_params *p, void *stream);

/* ---- The bias gradient of a linear layer -----------------------------------
 * dbias[n] (+)= Σ_m dy[m, n] for dy [rows, cols] in bf16, f16 or f32 (row
 * pitch dy_stride, 0: cols) into dbias [cols] f32 (kernels/bias_grad.c):
 * the column sums of chunks of 256 rows into `workspace`
 * (tk_bias_grad_workspace bytes: 4·cols per chunk), then their sum in
 * chunk order. Deterministic: the order depends on rows alone. accumulate
 * 1 adds to dbias, 0 overwrites it. rows 1 .. 2^31 - 1, cols 1 .. 2^24.
 * (LayerNorm's dweight and dbias come from tk_norm_backward itself, whose
 * partial rows are a product of its own pass over the rows.) */
typedef struct tk_bias_grad_params {
    size_t struct_size;
    tk_dtype dtype;     /* dy's: TK_BF16, TK_F16 or TK_F32                     */
    int accumulate;     /* 1: dbias += ...; 0: dbias = ...                      */
    int64_t rows, cols; /* M, N                                                 */
    const void *dy;     /* [rows, cols]                                         */
    int64_t dy_stride;  /* row pitch (elements); 0: cols                        */
    float *dbias;       /* [cols] f32                                           */
    void *workspace;    /* >= workspace_bytes, 4-byte aligned                   */
    size_t workspace_bytes;
} tk_bias_grad_params;

#ifdef __cplusplus
#define TK_BIAS_GRAD_PARAMS_INIT                                                                   \
    { sizeof(tk_bias_grad_params) }
#else
#define TK_BIAS_GRAD_PARAMS_INIT                                                                   \
    { .struct_size = sizeof(tk_bias_grad_params) }
#endif

TK_API tk_status tk_bias_grad_workspace(tk_ctx *ctx, const tk_bias_grad_params *p, size_t *bytes);
TK_API tk_status tk_bias_grad_prepare(tk_ctx *ctx, const tk_bias_grad_params *p,
                                      tk_prepare_info *info);
/* The partial sums, then their sum: two launches. Asynchronous. */
TK_API tk_status tk_bias_grad(tk_ctx *ctx, const tk_bias_grad_params *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
