/* Ready-made kernels a trainer needs beside its GEMMs, attention and norms:
 * token and position embeddings (forward, and a deterministic backward
 * through a counting sort of the positions by token), the bias gradient,
 * the fused softmax cross-entropy and the optimizer step (global gradient
 * norm, clipping, AdamW). Written with the builder API of tk/tk.h like the
 * kernels of tk/tk_kernels.h, which includes this header; the run entry
 * points on device pointers are in tk/tk_run_train.h. */
#ifndef TK_TK_KERNELS_TRAIN_H
#define TK_TK_KERNELS_TRAIN_H

#include "tk/tk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Token and position embeddings ----------------------------------------
 * Tokens Tok [B, T] (i32), positions p = b·T + t (N = B·T of them), rows of
 * C elements. A row is seen as a tile: R = floor(C / W) rows of W columns
 * (a view [rows, R, W] of the matrix, W a multiple of 16 up to 64: the
 * config's `cols`), so that one position's whole row is one or a few
 * [16, W] register tiles whatever the token; the run API launches each row
 * kernel again on the tail, [rows, 1, C mod W] from column R·W, when W
 * does not divide C (kernels/embedding.c). A kernel with grid y = S covers
 * rows 16·y .. 16·y + 15 of the view in block row y.
 *
 * The backward sums dO's rows by token without float atomics: the
 * positions are sorted by token (stable: a least-significant-digit radix
 * sort, one pass per 8 bits of the largest key V), then every run of one
 * token is summed in order. Entries are (position, key) pairs of f32
 * (exact: N and V below 2^24); key = Tok[p] for 0 <= Tok[p] < V, else V,
 * which sorts last and is never written. Fixed sizes make the order of
 * every sum depend on N alone: TK_EMB_CHUNK entries a sort block,
 * TK_EMB_RUN entries a summing warp.
 * Parameters in order (bracketed: present with the flag):
 *   TK_EMB_FWD, grid (ceil(N / (2·warps)), S): Tok [B, T] i32, Wte [V, R, W]
 *     weight_dtype, [Wpe [P, R, W] weight_dtype (pos)], Out [N, R, W] dtype
 *     written: Out[p] = Wte[Tok[p]] + Wpe[p mod T] in f32, rounded once; a
 *     token outside 0 .. V-1 (or a position past P) reads NaN: its row is
 *     NaN, never a read outside the tables. Each warp two positions.
 *   TK_EMB_ZERO, grid (ceil(rows/16), ceil(cols / (64·warps))): X [rows,
 *     cols] f32 written: 0.
 *   TK_EMB_DWPE, grid (ceil(Tr/16), ceil(C / (32·warps))): dO [B, T, C]
 *     dtype, dWpe [Tr, C] f32 (read with acc), acc i32: dWpe[t] = (acc ?
 *     dWpe[t] : 0) + Σ_b dO[b, t] (f32, b in order); rows t >= T add 0.
 *     dO's [16, 32·warps] slabs come through shared memory (cp.async).
 *   TK_EMB_KEYS, grid (ceil(N / (16·warps))): Tok [N] i32, Pairs [N, 2] f32
 *     written: (p, key_p mod 256), V i64.
 *   TK_EMB_HIST, grid (K = ceil(N / TK_EMB_CHUNK)): Pairs [N, 2] f32, Cnt
 *     [K, 256] f32 written: Cnt[k, h] = how many entries of chunk k have
 *     the digit Pairs[i, 1] = h.
 *   TK_EMB_SCAN, grid (1), 16 warps: Cnt [K, 256] f32, Off [K, 256] f32
 *     written: Off[k, h] = Σ_{h' < h} Σ_k' Cnt[k', h'] + Σ_{k' < k} Cnt[k', h],
 *     where chunk k's first entry of digit h goes.
 *   TK_EMB_SCATTER, grid (K): In [N, 2] f32, Off [K, 256] f32, Tok [N] i32,
 *     Out [N, 2] f32 written, V i64, div i64: entry i of chunk k, digit h,
 *     goes to Off[k, h] + (entries of chunk k before i with digit h) as
 *     (In[i, 0], key / div mod 256), or (In[i, 0], key) with div 0 (the
 *     last pass), key that of Tok[In[i, 0]]. A stable scatter.
 *   TK_EMB_SEGSUM, grid (ceil(Q / warps), S), Q = ceil(N / TK_EMB_RUN):
 *     Pairs [N, 2] f32 (sorted by key), dO [N, R, W] dtype, dWte [V, R, W]
 *     f32 (read and written), Head, Cont [Q, 16·S, W] f32 written. Warp q
 *     walks entries [32q, 32q + 32) in order, summing dO's rows of each
 *     run of one key in f32: a run wholly inside is added to its dWte row;
 *     the piece of a run that goes on past the range (its head) goes to
 *     Head[q], the piece of one that began before (a continuation) to
 *     Cont[q].
 *   TK_EMB_FIXUP, the same grid: Pairs, Head, Cont, dWte: for each range q
 *     whose last run goes on, Head[q] + Cont[q + 1] + ... (in order, up to
 *     the run's end, found by a binary search of the sorted keys) is added
 *     to that run's dWte row.
 * Deterministic: no atomics; each dWte row has one writer per kernel and
 * its terms are added in an order fixed by N and the tokens.
 * Registers (ptxas 13.0, sm_90a / sm_80; 4 warps, the sort's 16; W 48):
 * FWD 118 / 120, ZERO 32, DWPE 67 / 72, KEYS 55 / 56, HIST 40 / 52, SCAN
 * 92, SCATTER 107, SEGSUM 168 (12 / 4 bytes of spill), FIXUP 193 / 192;
 * no other spills. The row kernels' loads and stores are register tiles
 * at run-time rows, whose masked paths keep per-element addresses live
 * (LLVM hoists them out of the loops): hence FWD's, SEGSUM's and FIXUP's
 * counts; not measured on a GPU yet. Shared memory: SCAN 16 KiB, DWPE
 * 2·16·32·warps elements of dO, the others none. */
typedef enum tk_embedding_part {
    TK_EMB_FWD = 0,     /* Out = Wte[Tok] + Wpe                           */
    TK_EMB_ZERO = 1,    /* a f32 matrix := 0 (dWte before an overwrite)   */
    TK_EMB_DWPE = 2,    /* dWpe (+)= Σ_b dO[b]                            */
    TK_EMB_KEYS = 3,    /* the sort's first entries                       */
    TK_EMB_HIST = 4,    /* a pass's digit counts per chunk                */
    TK_EMB_SCAN = 5,    /* their offsets                                  */
    TK_EMB_SCATTER = 6, /* the pass's stable scatter                      */
    TK_EMB_SEGSUM = 7,  /* the runs' sums into dWte, Head, Cont           */
    TK_EMB_FIXUP = 8    /* the runs that cross ranges                     */
} tk_embedding_part;

#define TK_EMB_CHUNK 256 /* entries a HIST / SCATTER block                  */
#define TK_EMB_RUN   32  /* entries a SEGSUM / FIXUP warp                    */
#define TK_EMB_WARPS 4   /* a block's warps when a config says 0 (the sort's: 16) */

typedef struct tk_embedding_config {
    int part;              /* a tk_embedding_part                             */
    tk_dtype dtype;        /* FWD: Out's; DWPE, SEGSUM: dO's; TK_BF16, TK_F16
                              or TK_F32; the other parts: ignored            */
    tk_dtype weight_dtype; /* FWD: Wte's and Wpe's, TK_BF16, TK_F16, TK_F32  */
    int pos;               /* FWD: 0 or 1 (Wpe)                               */
    int cols;              /* FWD, SEGSUM, FIXUP: W, a multiple of 16 in
                              16 .. 128 (required)                          */
    int warps;             /* 1, 2, 4, 8 or 16; 0: TK_EMB_WARPS; HIST, SCAN,
                              SCATTER: 0 or 16 (a warp per 16 entries)     */
} tk_embedding_config;

TK_API tk_status tk_embedding_build(tk_ctx *ctx, const tk_embedding_config *cfg, tk_kernel **out);

/* ---- The bias gradient of a linear layer -----------------------------------
 * dB[n] (+)= Σ_m dY[m, n] over the rows of dY [M, N] (kernels/bias_grad.c),
 * in two kernels with a fixed order (no atomics):
 *   TK_BIAS_GRAD_PARTIAL, grid (P, ceil(N / (32·warps))): dY [M, N] dtype,
 *     Part [P, N] f32 written, rb i64 (a multiple of 16): Part[p] = the
 *     column sums of rows [p·rb, p·rb + rb) (each thread adds its rows'
 *     elements in order into an f32 tile, whose 16 rows are then added).
 *   TK_BIAS_GRAD_REDUCE, grid (ceil(N / (32·warps))): Part [P, N] f32, dB
 *     [N] f32 (read with acc), acc i32: dB = (acc ? dB : 0) + Σ_p Part[p]
 *     (16 rows at a time, in order).
 * Both stream [16, 32·warps] slabs through shared memory with cp.async,
 * 16 KiB (bf16, 8 warps) or 32 KiB (f32) of it. Registers (ptxas 13.0,
 * sm_90a / sm_80, 8 warps): PARTIAL 40 / 46, REDUCE 56 / 76; no spills. */
typedef enum tk_bias_grad_part {
    TK_BIAS_GRAD_PARTIAL = 0, /* the column sums of row chunks                */
    TK_BIAS_GRAD_REDUCE = 1   /* their sum                                    */
} tk_bias_grad_part;

#define TK_BIAS_GRAD_WARPS 8 /* a block's warps when a config says 0 */

typedef struct tk_bias_grad_config {
    int part;       /* a tk_bias_grad_part                                  */
    tk_dtype dtype; /* PARTIAL: dY's, TK_BF16, TK_F16 or TK_F32              */
    int warps;      /* 1, 2, 4, 8 or 16; 0: TK_BIAS_GRAD_WARPS                */
} tk_bias_grad_config;

TK_API tk_status tk_bias_grad_build(tk_ctx *ctx, const tk_bias_grad_config *cfg, tk_kernel **out);

/* ---- Softmax cross-entropy: loss and gradient, fused --------------------
 * For logits X [N, V] (rows of any length V >= 1, row pitch >= V) and i32
 * targets T [N], per row i in f32 (kernels/xent.c):
 *   lse_i  = m_i + log Σ_j exp(X_ij - m_i),  m_i = max_j X_ij (online)
 *   Loss_i = (m_i - X_i,T_i) + log Σ_j exp(X_ij - m_i)
 *   dX_ij  = (exp(X_ij - m_i) / Σ_j exp(X_ij - m_i) - [j = T_i]) · scale_i
 *            (backward = 1)
 * with scale_i = S_i (per_row_scale) or the scalar `scale`. A target equal
 * to ignore_index gives Loss 0 and dX 0 and is not counted; any other
 * target outside 0 .. V-1 gives Loss NaN and dX NaN (a visible error: the
 * kernel cannot raise one).
 * Two passes over a row: the statistics, then the gradient, which needs
 * the whole row's sum before its first element can be written. A row
 * within one round stays in shared memory between them (read once);
 * longer rows are read again, from L2 where the blocks' rows in flight fit
 * there, which is what the two layouts are for:
 *   split 0: a block owns 16 rows (one tile's) and its W warps split the
 *     columns, as the norm kernels do: rounds of `cols` columns, U slots
 *     of 32·W, through shared memory with cp.async, the warps' (max, sum,
 *     x_t) meeting in shared memory. For short rows (a byte vocabulary):
 *     16 rows x 256 columns is one round, read once.
 *   split 1: a block owns ONE row, seen as 16 segments of Ls = 8·floor(V /
 *     128) columns (Xs, a [N, 16, Ls] view of X) and a tail of the last
 *     Tn = V mod 128 columns (Xt, [N, 1, Tn] from column 16·Ls), the tail
 *     read as one more round whose tile rows 1..15 are empty (cols >= 128).
 *     The 16 tile rows' statistics then meet in registers. A block's
 *     second read is V elements back, not 16·V: with 2 blocks an SM the
 *     rows in flight (2 x 132 x 98 KiB at GPT-2's 50257 in bf16) fit in L2.
 *   The run API takes split 1 from 8 KiB rows on (V·size >= 8192).
 * Parameters in order (bracketed: present with the flag):
 *   TK_XENT_ROWS, grid (ceil(N/16)) [split 0] or (N) [split 1], `warps`:
 *     split 0: X [N, V] dtype; split 1: Xs [N, 16, Ls] dtype, Xt [N, 1, Tn]
 *     dtype; then T [N] i32, [S [N] f32 (per_row_scale)], [dX: [N, V]
 *     (split 0) or dXs [N, 16, Ls], dXt [N, 1, Tn] (split 1), dtype,
 *     written (backward); in place: the same memory as X], Loss [N] f32
 *     written, [Lse [N] f32 written (lse)], [PL [P] f32, PC [P] f32, both
 *     written (mean): block b's sums of Loss and of the rows counted, at
 *     b; P the grid], ignore_index i32, [scale f32 (backward,
 *     per_row_scale 0)].
 *   TK_XENT_MEAN, grid (1), `warps` warps: PL [P] f32, PC [P] f32, Out [1]
 *     f32 written: Σ PL / Σ PC, each sum in a fixed order (deterministic,
 *     no atomics; NaN when no row counts, as torch's mean).
 * Registers (ptxas 13.0, the default shapes, each set of options): split
 * 0 capped at 64 (4 blocks of 8 warps an SM; f32 at 72, 3 blocks):
 * sm_90a 62-64 (f32 69-72), no spills; sm_80 the same but for 24-32 bytes
 * of spill in the 16-bit backward without lse and mean. Split 1 capped at
 * 96 (2 blocks an SM): 77-96, no spills on either. MEAN (8 warps): 127
 * (sm_90a), 128 (sm_80), no spills. Shared memory: 2·U stages of [16,
 * 32·W] in the dtype (16 KiB at bf16, 8 warps, U 1) and W KiB for the
 * warps' statistics. */
typedef enum tk_xent_part {
    TK_XENT_ROWS = 0, /* the row kernel: loss, lse, gradient, partials   */
    TK_XENT_MEAN = 1  /* the mean of the losses from the partials        */
} tk_xent_part;

#define TK_XENT_WARPS      8 /* a row block's warps when a config says 0     */
#define TK_XENT_SLOTS      1 /* cols 0: rounds of TK_XENT_SLOTS·32·warps     */
#define TK_XENT_MEAN_WARPS 8 /* the mean's warps when a config says 0        */

typedef struct tk_xent_config {
    tk_dtype dtype;    /* TK_BF16, TK_F16 or TK_F32 (X, dX); MEAN: ignored    */
    int part;          /* a tk_xent_part                                      */
    int backward;      /* 0 or 1: writes dX                                   */
    int per_row_scale; /* 0 or 1 (backward): scale_i from S, else `scale`     */
    int lse;           /* 0 or 1: writes Lse                                  */
    int mean;          /* 0 or 1: writes the partials PL, PC                  */
    int split;         /* 0: 16 rows a block; 1: a row a block, in segments   */
    int warps;         /* 1, 2, 4, 8 or 16; 0: TK_XENT_WARPS (MEAN:
                          TK_XENT_MEAN_WARPS)                                 */
    int cols;          /* a round's columns: a multiple of 32·warps up to 8 of
                          them, at least 128 with split; 0: TK_XENT_SLOTS    */
} tk_xent_config;

TK_API tk_status tk_xent_build(tk_ctx *ctx, const tk_xent_config *cfg, tk_kernel **out);

/* ---- The optimizer step: global gradient norm, clipping, AdamW -------------
 * Flat buffers of n elements (a trainer's parameters, gradients and Adam
 * moments end to end) viewed as rows [R, C]: the run API (tk/tk_run.h)
 * launches each kernel on [n / C, C] and again on the ragged tail [1, n mod
 * C], so every element is touched once (kernels/adamw.c). A block of
 * `warps` warps owns 16 rows; their columns arrive in rounds of `cols`
 * columns (16 a warp a slot) through shared memory by cp.async, the next
 * round while this one is read, and what is written leaves the same way,
 * clipped at the view's edges (nothing outside [R, C] is read or written).
 *   TK_ADAMW_SUMSQ, grid (ceil(R/16)), `warps` warps: G [R, C] grad_dtype,
 *     Part [ceil(R/16), 16] f32 (written): Part[b, i] = the sum of G² over
 *     row 16b + i (f32; each thread adds its squares in round order, the
 *     warps' tiles are added in warp order).
 *   TK_ADAMW_NORM, grid (1), 8 warps: Part [B, 16] f32 (any B: the run API
 *     puts the SUMSQ launches' rows end to end), Norm [1] f32 (written):
 *     sqrt of the sum of Part, in a fixed order (warp w adds the
 *     16-row tiles w, w + 8, ... into four accumulators by turns; then the
 *     accumulators, the warps in warp order, the rows).
 *   TK_ADAMW_STEP, grid (ceil(R/16)), `warps` warps: W, M, V [R, C] f32
 *     (read, and written in place), G [R, C] grad_dtype, [L [R, C]
 *     lowp_dtype, written (lowp_dtype != 0)], [Norm [1] f32 (clip)], lr,
 *     beta1, beta2, eps, wd, bc1, bc2, [max_norm (clip)] f32; in f32:
 *       c = min(1, max_norm / (Norm + 1e-6)) (clip; else 1),  g = c·G,
 *       M = β1·M + (1-β1)·g,  V = β2·V + (1-β2)·g²,
 *       W = W - lr·((M/bc1) / (sqrt(V/bc2) + eps) + wd·W),  L = W rounded
 *     (torch.optim.AdamW after clip_grad_norm_; bc1 = 1-β1^t, bc2 = 1-β2^t
 *     from the caller; M/bc1 and V/bc2 as products with 1/bc1, 1/bc2).
 * Deterministic: no atomics, and the sums' order depends only on R, C,
 * warps and cols, never on timing or on how many SMs run it: the same
 * inputs give the same bits, run after run.
 * Shared memory, bytes: SUMSQ 2·16·cols·size(G) + 1 KiB a warp (warps >
 * 1), NORM 8 KiB, STEP 16·cols·(24 + 2·size(G) + size(L)); the defaults
 * (8 warps; SUMSQ 256 columns, STEP 128): SUMSQ 40 KiB (f32 G), 24 KiB
 * (bf16); STEP 68 KiB (f32 G, bf16 L), 60 KiB (bf16 G). The step is capped
 * at 128 registers (two blocks an SM). ptxas (CUDA 13.0, the defaults):
 *   SUMSQ  f32 G: sm_90a 64 registers, sm_80 58; bf16 G: 40, 40; no spills
 *   NORM   167, 168; no spills
 *   STEP   f32 G, bf16 L, clip: sm_90a 128, no spills; sm_80 128, 72 bytes
 *          of spill stores; bf16 G, bf16 L, clip: 128 and 96 bytes (sm_90a),
 *          128 and 80 (sm_80); f32 G, no L: 124 and 128, no spills. */
typedef enum tk_adamw_part {
    TK_ADAMW_SUMSQ = 0, /* the partial sums of squares            */
    TK_ADAMW_NORM = 1,  /* their sum's square root (reads part only) */
    TK_ADAMW_STEP = 2   /* the clip and the AdamW update, fused   */
} tk_adamw_part;

#define TK_ADAMW_WARPS       8    /* a block's warps when a config says 0         */
#define TK_ADAMW_SUMSQ_SLOTS 2    /* cols 0: rounds of this many 16·warps slots   */
#define TK_ADAMW_STEP_SLOTS  1    /* (SUMSQ, STEP)                               */
#define TK_ADAMW_WIDTH       4096 /* C of the run API's view when a call says 0   */

typedef struct tk_adamw_config {
    int part;            /* a tk_adamw_part: which kernel                   */
    tk_dtype grad_dtype; /* SUMSQ, STEP: G's, TK_F32, TK_BF16 or TK_F16     */
    tk_dtype lowp_dtype; /* STEP: L's, TK_BF16 or TK_F16; 0: no L           */
    int clip;            /* STEP: 0 or 1 (Norm and max_norm)                */
    int warps;           /* SUMSQ, STEP: 1, 2, 4, 8, 16; 0: TK_ADAMW_WARPS  */
    int cols;            /* SUMSQ, STEP: a round's columns, a multiple of
                            16·warps up to 8 of them; 0: the default slots */
} tk_adamw_config;

TK_API tk_status tk_adamw_build(tk_ctx *ctx, const tk_adamw_config *cfg, tk_kernel **out);

#ifdef __cplusplus
}
#endif
#endif
