/* Ready-made kernels for a trainer's input layer and linear layers: token
 * and position embeddings (forward, and a deterministic backward through a
 * counting sort of the positions by token) and the bias gradient. Written
 * with the builder API of tk/tk.h like the kernels of tk/tk_kernels.h,
 * which includes this header; the run entry points on device pointers are
 * in tk/tk_run_train.h. */
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

#ifdef __cplusplus
}
#endif
#endif
