/* TileKittens ready-made kernels: GEMM, attention (forward, decoding,
 * backward), normalization, rotary, Based and Hedgehog (a trainer's other
 * kernels: tk/tk_kernels_train.h, included at the end), written with the
 * builder API of tk/tk.h. Each *_build call returns a finished kernel (run it
 * with tk_interp_run, or compile it with tk_compile and tk_launch); destroy
 * it with tk_kernel_destroy. Invalid configurations return
 * TK_ERR_INVALID_ARG with a message in tk_ctx_error(ctx). */
#ifndef TK_TK_KERNELS_H
#define TK_TK_KERNELS_H

#include "tk/tk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GEMM ----------------------------------------------------------------
 * C = A·B (transpose_b = 0) or C = A·Bᵀ (transpose_b = 1), f32 accumulation;
 * with transpose_a, Aᵀ·B or Aᵀ·Bᵀ. An optional epilogue (the fields after
 * `wgmma`) works on the f32 product before C is rounded and stored:
 *   x = A·B [+ C (accumulate)] [+ bias]  then  C = x, gelu(x) or x·gelu'(Aux).
 * Parameters, in order:
 *   0 A    [M, K]  in_dtype, or [K, M]   (any strides; unit column stride and
 *          with transpose_a                16-byte aligned rows are the fast path)
 *   1 B    [K, N]  in_dtype, or [N, K]
 *          with transpose_b
 *   2 C    [M, N]  out_dtype (read too with accumulate)
 *   - bias [N]     out_dtype               when bias
 *   - Aux  [M, N]  out_dtype               when aux
 *   - blocks i32                           when wgmma (the last one)
 * M, N, K are read from the tensors at run time (from A; N from C); any
 * sizes work, ragged edges are masked. Grid: (ceil(N/block_n), ceil(M/block_m)).
 *
 * Each block computes a block_m x block_n tile of C; its warps form a
 * warps_m x warps_n grid (chosen by the builder: the squarest warp tile),
 * each warp owning a (block_m/warps_m) x (block_n/warps_n) f32 accumulator.
 * A and B tiles of block_k columns stream through a `stages`-deep ring of
 * swizzled shared tiles filled by cp.async. */
typedef struct tk_gemm_config {
    tk_dtype in_dtype;             /* A, B: TK_BF16 or TK_F16                            */
    tk_dtype out_dtype;            /* C: TK_BF16, TK_F16 or TK_F32                        */
    int transpose_b;               /* 0: B is [K, N]; 1: B is [N, K] (C = A·Bᵀ); 0 or 1   */
    int block_m, block_n, block_k; /* multiples of 16                          */
    int warps;                     /* warps per block, 1..16                               */
    int stages;                    /* depth of the copy pipeline, 2..8                     */
    int tma;                       /* 1: A and B tiles through the copy engine on sm_90+
                           (TK_COPY_TMA), issued by a producer warpgroup on
                           sm_90a when warps is 8, 12 or 16 (whose warps
                           then get 224, 152 or 104 registers); 0: cp.async */
    int wgmma;                     /* 1: Hopper's warpgroup multiply (sm_90a only): each
                           warpgroup of 4 warps owns 64 rows of the block
                           (block_m = 16 * warps) and multiplies its rows of
                           the A stage by the whole B stage from shared
                           memory; block_n <= 256, and A's and B's rows
                           (block_k, or block_n for B of A·B, times 2 bytes)
                           32, 64 or a multiple of 128 bytes. The kernel is
                           persistent: after A, B and C it takes an i32
                           `blocks` (taken in 1..65536), launches
                           min(tiles, blocks) blocks and
                           loops each over its tiles (tk_gemm passes
                           tk_program_resident_blocks).
                           0: mma.sync */
    /* The epilogue and A's layout (grown within 0.2; each 0 is the kernel as
     * before, parameters and code unchanged). GPT-2's training GEMMs:
     * fc = gelu(x·W + b) keeping x·W + b for the backward (bias, GELU, aux),
     * dh = (dy·Wᵀ)·gelu'(h) (DGELU), dW += xᵀ·dy (transpose_a, accumulate). */
    int transpose_a; /* 0: A is [M, K]; 1: A is [K, M] (C = Aᵀ·B), read as
                        stored (ldmatrix.trans; wgmma's transposed A)         */
    int bias;        /* 1: + bias[N] (out_dtype), broadcast over the rows
                        (wgmma: the accumulator starts from it)              */
    int act;         /* tk_gemm_act: none, GELU (tanh form) or its derivative */
    int aux;         /* 1: a parameter Aux [M, N] (out_dtype): GELU writes its
                        input x there (the backward's pre-activation); DGELU
                        reads it and needs it. 0 with TK_GEMM_ACT_NONE.        */
    int accumulate;  /* 1: C += A·B [+ bias]: C is read and written (f32 sum,
                        one rounding); only with TK_GEMM_ACT_NONE             */
    /* A deterministic split over K (grown within 0.2; 0 is the kernel as
     * before). A long-K product with few tiles of C (GPT-2's weight
     * gradients: K = tokens) leaves most SMs idle; split_k = S >= 2 runs it
     * as two kernels instead:
     *   1 (split_reduce 0): the product over S ranges of K, each of
     *     ceil(ceil(K / block_k) / S) k-tiles: parameters A, B, then P
     *     [S, M, N] f32 (S is read from P's first dim), [blocks]; the range
     *     s of tile (m, n) goes to P[s] (a third grid dim on mma.sync; the
     *     wgmma kernel loops over tiles x ranges). No epilogue (out_dtype,
     *     bias, act, aux and accumulate are kernel 2's);
     *   2 (split_reduce 1): C = the epilogue of P[0] + P[1] + ... + P[S-1],
     *     summed in that order in f32: parameters P, C, [bias], [Aux]. The
     *     block shape fields are not used.
     * The same sizes and S give the same bits on every run (no atomics).
     * tk_gemm picks S for a call with a workspace (tk_run_gemm.h). */
    int split_k;      /* 0 or 1: one kernel; 2..TK_GEMM_MAX_SPLIT: S ranges   */
    int split_reduce; /* with split_k >= 2: 0 builds kernel 1, 1 kernel 2     */
    /* Pairs of blocks sharing B (grown within 0.2; 0 is the kernel as before).
     * cluster = 2 (wgmma with tma, no split): the blocks run in clusters of
     * two on vertically adjacent tiles (rows m0 and m0 + block_m, the same
     * columns), and each fetches half of every B tile from L2 for both
     * (TK_COPY_MULTICAST), which halves B's traffic from L2. The grid is
     * whole clusters: `blocks` counts blocks, used in pairs. Measured on an
     * H100 level with one block alone (-1% to +2%; docs/PERF_NOTES.md, round
     * 27), so tk_gemm_config_for never picks it. 0 or 1: none.             */
    int cluster;
} tk_gemm_config;

/* The most ranges of K a split GEMM takes (tk_gemm_config.split_k). */
#define TK_GEMM_MAX_SPLIT 64

/* tk_gemm_config.act: what the epilogue applies to x = A·B [+ bias].
 * GELU is GPT-2's tanh approximation, gelu(x) = 0.5·x·(1 + tanh(u)),
 * u = √(2/π)·(x + 0.044715·x³); DGELU multiplies x by gelu'(Aux) (the
 * MLP backward: dh = dy·gelu'(h)) and takes no bias. */
typedef enum tk_gemm_act {
    TK_GEMM_ACT_NONE = 0,
    TK_GEMM_ACT_GELU = 1,
    TK_GEMM_ACT_DGELU = 2
} tk_gemm_act;

/* The default configuration: 128x128x64 blocks, 4 warps of 64x64 each, 3
 * stages (96 KiB of shared memory, 2 blocks per SM); on an H200 the best
 * shape until a problem has enough 128x256 blocks (tk_gemm_config_for). */
TK_API tk_gemm_config tk_gemm_default_config(tk_dtype in_dtype, tk_dtype out_dtype,
                                             int transpose_b);
/* The configuration tk_gemm uses for an M x N problem when the caller names
 * none, on the GPU `arch` ("sm_90a"; NULL: unknown). On sm_90 / sm_90a
 * (tuned on an H200, 132 SMs):
 *   - 128x256 blocks of 8 warps (64x64 each, one block per SM) once there
 *     are at least 264 of them (two full waves): under the H200's power
 *     limit the larger block, which copies a quarter fewer bytes into shared
 *     memory per mma, runs at a higher clock (docs/PERF_NOTES.md, round 4).
 *     On sm_90a through the copy engine with a producer warpgroup, 128-deep
 *     k-tiles and 2 stages (192 KiB; round 6); on sm_90 by cp.async, 64-deep
 *     k-tiles and 3 stages (144 KiB);
 *   - 128x64x64 blocks of 4 warps (64x32 each) when there would be fewer
 *     than 132 blocks of 128x128, so that more SMs work (1024³: +30%);
 *   - tk_gemm_default_config in between.
 * Every other GPU gets tk_gemm_default_config. tk_gemm itself asks
 * tk_gemm_config_for_call (tk_run.h), which also looks at the alignment the
 * copy engine needs. */
TK_API tk_gemm_config tk_gemm_config_for(tk_dtype in_dtype, tk_dtype out_dtype, int transpose_b,
                                         int64_t m, int64_t n, const char *arch);
TK_API tk_status tk_gemm_build(tk_ctx *ctx, const tk_gemm_config *cfg, tk_kernel **out);

/* ---- Attention forward (FlashAttention-2) -----------------------------------
 * For every batch b, query head h and query row i:
 *   s_j   = scale · <Q[b,h,i,:], K[b,hk,j,:]>     for the keys j it attends
 *   O[b,h,i,:] = Σ_j softmax(s)_j · V[b,hk,j,:]
 *   L[b,h,i]   = ln Σ_j exp(s_j)                  (natural log)
 * with hk = h / (Hq / Hkv) (grouped-query attention; Hq a multiple of Hkv).
 * causal: row i attends keys j <= i + Nkv - Nq (aligned at the bottom right
 * as in FlashAttention-2; Nq == Nkv gives the usual j <= i). A row that
 * attends no key (causal with Nq > Nkv, or Nkv == 0) gets O = 0 and
 * L = -inf, the log of an empty sum.
 * Parameters, in order:
 *   0 Q [B, Hq,  Nq,  D]  dtype      3 O [B, Hq, Nq, D]  dtype
 *   1 K [B, Hkv, Nkv, D]  dtype      4 L [B, Hq, Nq]     f32
 *   2 V [B, Hkv, Nkv, D]  dtype      5 scale             f32 scalar (e.g. 1/sqrt(D))
 * scale must be > 0 (the kernel folds it into exp2 after the row max); a
 * value <= 0 acts as the smallest positive scale, i.e. uniform weights.
 * tk_attention_forward (tk/tk_run.h) rejects negative scales.
 * Any strides (a [B, N, H, D] buffer is passed with permuted strides); the
 * last dim of Q, K, V, O must equal head_dim. B, H, N are run-time sizes.
 * Grid: (ceil(Nq/R), Hq, B): each block owns R = 128 query rows (`warps`
 * warps of 128/warps rows; the default, 4 warps of 32 rows, measured
 * fastest on an H200 for D 64 and 128); at D 256 the mma.sync kernel's
 * warps own 16 rows each (R = 16·warps: 64 by default). The wgmma kernel
 * has R = 16·warps: 128, or 192 with 12 warps (D 64 only). tk_kernel_grid
 * gives the grid of a call.
 * varlen: B sequences of their own lengths packed back to back. Q, O
 * [1, Hq, Tq, D], K, V [1, Hkv, Tkv, D], L [1, Hq, Tq] hold every
 * sequence's rows (Tq, Tkv: the totals; a packed [T, H, D] buffer is
 * passed with strides {any, D, H·D, 1}), and three more parameters say
 * where each one lies:
 *   6 cu_seqlens_q  [B + 1] i32   sequence b's queries are rows
 *                                 cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1
 *   7 cu_seqlens_kv [B + 1] i32   ... its keys, of K and V
 *   8 max_seqlen_q  i32 scalar    the longest sequence's queries (the grid)
 * Each sequence is attended on its own, causal aligned at its own bottom
 * right; an empty one does nothing. The sums are read in the kernel and
 * clamped to the tensors: a pair that decreases is an empty sequence, rows
 * past Tq / Tkv do not exist, and no access leaves the tensors. Grid:
 * (ceil(max_seqlen_q/R), Hq, B); a block past its sequence's rows exits.
 * rotary: Q's rotary embedding fused into the kernel (not with varlen), with
 * the conventions of "Rotary embeddings" below (θ_i = pos · base^(-2i/rd) in
 * f32, NEOX or GPTJ pairs, columns rd.. untouched, each result rounded once
 * to the dtype): each warp rotates its own query rows once per block, right
 * after they land and before the first Q·Kᵀ, in registers where the kernel
 * keeps Q there, else in place in shared memory (the mma.sync kernel at D
 * 128 with 4 warps and at D 256, the wgmma kernel at every D: its multiply
 * reads Q from shared memory, kernels/attention_hopper.c says why not from
 * registers). Query row i sits at position i +
 * q_pos0, which is also its row of the tables (rows outside them read cos =
 * sin = 0). K is read as given: rotate it first (tk_rotary). Every query
 * block reads every key tile, so K rotated here would be rotated ceil(Nq/R)
 * times over, and each key tile would need a rendezvous of the consumer
 * warpgroups; tk_attention_forward rotates it once, into its workspace.
 * Parameters after the six above:
 *   6 q_pos0  i64 scalar  (tk_attention_forward: Nkv - Nq, the keys' frame,
 *                         bottom-right as the causal mask)
 *   7 Cos [T, rd/2] f32, 8 Sin [T, rd/2] f32   (rotary_tables = 1, NEOX)
 *   7 base    f32 scalar  (rotary_tables = 0; finite, > 0)
 * Kernel names gain _rope_neox / _rope_gptj, _r<rd> and _tables. */
typedef enum tk_attn_rotary {
    TK_ATTN_ROTARY_NONE = 0,
    TK_ATTN_ROTARY_NEOX = 1, /* TK_ROTARY_NEOX + 1: pairs (i, i + rd/2)   */
    TK_ATTN_ROTARY_GPTJ = 2  /* TK_ROTARY_GPTJ + 1: pairs (2i, 2i + 1)    */
} tk_attn_rotary;

typedef struct tk_attention_config {
    tk_dtype dtype; /* Q, K, V, O: TK_BF16 or TK_F16                           */
    int head_dim;   /* D: 64, 128 or 256 (a specialization constant)           */
    int causal;     /* 0 or 1 (a specialization constant)                      */
    int warps;      /* mma.sync: 4 or 8 warps per block (128/warps query rows
                       each); wgmma: see below; 0: the measured default       */
    int wgmma;      /* 1: the Hopper kernel (sm_90a only; kernels/attention_hopper.c):
                       warpgroups of 64 rows on wgmma, a producer warpgroup
                       feeding the copy engine; warps 8 (two warpgroups) or,
                       at D 64, 12 (three; D 128 does not fit their registers);
                       0: 12 at D 64 (measured fastest), else 8               */
    int varlen;     /* 1: packed variable-length sequences (below)            */
    int rotary;     /* a tk_attn_rotary: Q rotated in the kernel (above); 0: none */
    int rotary_dim; /* rd: even, 2 .. head_dim; 0: head_dim (with rotary)     */
    /* 1: Cos and Sin table parameters (NEOX only); 0: the angles from base */
    int rotary_tables;
} tk_attention_config;

TK_API tk_status tk_attention_fwd_build(tk_ctx *ctx, const tk_attention_config *cfg,
                                        tk_kernel **out);

/* ---- Attention decoding (split-KV) -----------------------------------------
 * The forward above for few queries (1-16) against many keys, as serving
 * engines call it every step: same results and conventions (bottom-right
 * causal, GQA, L the natural-log log-sum-exp, rows without keys O = 0,
 * L = -inf). A block owns one kv head and reads each of its K/V tiles once
 * for all its warps; each warp owns one tile of 16 rows of the queries that
 * share the head, packed one of two ways (pack):
 *   TK_ATTN_PACK_QUERIES: a tile is the queries (Nq <= 16 rows) of one query
 *     head; T = G tiles per kv head (G = Hq / Hkv). Views:
 *       Q, O [B, Hq, Nq, D] (the forward's), L [B, Hkv, G, Nq] (the
 *       forward's [B, Hq, Nq] with strides (lB, G·lH, lH, lN));
 *   TK_ATTN_PACK_HEADS: a tile is 16 query heads of the group for one query;
 *     T = Nq·ceil(G/16) tiles. Views (query i of head hk·G + g is row g at
 *     index i·Hkv + hk of dim 1):
 *       Q, O [B, Nq·Hkv, G, D]: with strides (sB, G·sH, sH, 1), which needs
 *       sN = Hq·sH (a [B, N, H, D] buffer) unless Nq = 1;
 *       L [B, Nq, Hkv, G]: strides (lB, lN, G·lH, lH).
 * K, V [B, Hkv, Nkv, D] as in the forward. Parts (part), each its own
 * kernel of `warps` warps (1, 2, 4 or 8; 0: 1), a tile per warp:
 *   TK_ATTN_DECODE_DIRECT: parameters 0 Q, 1 K, 2 V, 3 O (written), 4 L
 *     (written), 5 scale; grid (ceil(T/warps), Hkv, B);
 *   TK_ATTN_DECODE_SPLIT: the keys in S ranges of whole key tiles, one block
 *     each, writing partials: 0 Q, 1 K, 2 V, 3 Op [B·Hkv·T, S, 16, D] f32
 *     (written: each range's normalized O, the whole tile: rows past the
 *     queries hold values the merge never writes out), 4 Lp [B·Hkv·T, S, 16] f32
 *     (written: its log-sum-exp), 5 scale; S = Op's dim 1; grid
 *     (S·ceil(T/warps), Hkv, B). Tile t of kv head hk of batch b is index
 *     (b·Hkv + hk)·T + t of the partials' dim 0;
 *   TK_ATTN_DECODE_MERGE (after SPLIT; four warps): 0 Op, 1 Lp (read), 2 O,
 *     3 L (written); grid (T·D/16, Hkv, B): a block per tile and 16-column
 *     slice, its warps sharing the splits. Summed in a fixed order:
 *     bit-identical from run to run.
 * Key tiles of `keys` keys (32 or 64; 0: 32) through a `stages`-deep ring
 * (2..8, at most a 200 KB ring; 0: 3, and 2 at D 256), by the copy engine
 * on sm_90+ (cp.async elsewhere); the multiplies are mma.sync on every
 * target. */
typedef enum tk_attention_decode_part {
    TK_ATTN_DECODE_DIRECT = 0, /* O and L from all the keys                     */
    TK_ATTN_DECODE_SPLIT = 1,  /* partials per key range                        */
    TK_ATTN_DECODE_MERGE = 2,  /* the partials merged into O and L              */
    TK_ATTN_DECODE_APPEND = 3  /* new K/V rows written into a cache             */
} tk_attention_decode_part;

/* Where DIRECT and SPLIT find the keys (cache; tk_attention_params says
 * what the caller passes, tk_run.h):
 *   TK_ATTN_CACHE_NONE: K, V [B, Hkv, Nkv, D], every sequence Nkv keys;
 *   TK_ATTN_CACHE_LENGTHS: the same buffers, sequence b's keys the first
 *     min(seqlens[b] + appended, Nkv); extra parameters 6 seqlens (i32
 *     [B]), 7 appended (i32 scalar);
 *   TK_ATTN_CACHE_PAGED: K, V [num_pages, Hkv, page_size, D] pools, key t
 *     of sequence b at row t % page_size of page block_table[b][t /
 *     page_size]; length min(seqlens[b] + appended, max_pages·page_size);
 *     parameters 6 and 7 as above, 8 block_table (i32 [B, max_pages]).
 *     Each K/V tile arrives in copies of `chunk` rows (16, 32 or 64, at
 *     most the key tile, dividing the page size; 0: the key tile).
 * TK_ATTN_DECODE_APPEND (one warp; LENGTHS or PAGED): 0 K_new, 1 V_new
 *   [B, Hkv, Nnew, D] (read), 2 K, 3 V (written), 4 seqlens, 5
 *   block_table (PAGED); grid (Nnew, Hkv, B): row i of sequence b goes to
 *   position seqlens[b] + i, where the cache has one (else nowhere). */
typedef enum tk_attention_cache {
    TK_ATTN_CACHE_NONE = 0,
    TK_ATTN_CACHE_LENGTHS = 1,
    TK_ATTN_CACHE_PAGED = 2
} tk_attention_cache;

typedef enum tk_attention_pack {
    TK_ATTN_PACK_QUERIES = 0, /* a warp's rows: queries of one query head       */
    TK_ATTN_PACK_HEADS = 1    /* a warp's rows: query heads of a group, one query */
} tk_attention_pack;

typedef struct tk_attention_decode_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16                                       */
    int head_dim;   /* 64, 128 or 256                                          */
    int causal;     /* 0 or 1 (MERGE ignores it)                               */
    int pack;       /* a tk_attention_pack                                     */
    int part;       /* a tk_attention_decode_part                              */
    int warps;      /* 1, 2, 4, 8 (0: 1); MERGE: the warps sharing a tile's
                       partials (0: 4; tk_attention_forward takes 1 where
                       they are one group of 8)                               */
    int stages;     /* 2..8 (the ring within 200 KB); 0: the default           */
    int cache;      /* a tk_attention_cache (MERGE ignores it)                 */
    int chunk;      /* TK_ATTN_CACHE_PAGED: rows per K/V copy; 0: the tile     */
    int keys;       /* keys per tile: 32 or 64; 0: the default (32)            */
    int key_warps;  /* SPLIT: warps that share each tile's rows, each taking
                       its own `keys` keys of a trip of key_warps·keys (and
                       writing its own partial: Op's dim 1 is S·key_warps,
                       warp kw of range s at index s·key_warps + kw); 1, 2
                       or 4 (0: 1), warps·key_warps <= 8                   */
} tk_attention_decode_config;

TK_API tk_status tk_attention_decode_build(tk_ctx *ctx, const tk_attention_decode_config *cfg,
                                           tk_kernel **out);

/* ---- Attention backward (FlashAttention-2) ----------------------------------
 * The gradients of the forward above, given its O and L and the gradient dO
 * of O (with P = softmax(s), the forward's weights, and D = rowsum(dO∘O)):
 *   dV = Pᵀ·dO     dS = P∘(dO·Vᵀ - D)     dQ = scale·dS·K     dK = scale·dSᵀ·Q
 * summed over the query heads of each kv head's group (GQA). Same masks and
 * conventions as the forward (bottom-right causal; rows without keys get
 * dQ = 0). Two modes (tk_attention_backward in tk/tk_run.h launches either).
 * Deterministic: two kernels, run in this order; each output element has one
 * writer and a fixed summation order, so results are bit-identical from run
 * to run:
 *   TK_ATTN_BWD_DQ, grid (ceil(Nq/64), Hq, B), parameters in order:
 *     0 Q  [B, Hq,  Nq,  D] dtype     4 dO [B, Hq, Nq, D] dtype
 *     1 K  [B, Hkv, Nkv, D] dtype     5 L  [B, Hq, Nq]    f32 (the forward's)
 *     2 V  [B, Hkv, Nkv, D] dtype     6 Dw [B, Hq, Nq]    f32, written: D
 *     3 O  [B, Hq,  Nq,  D] dtype     7 dQ [B, Hq, Nq, D] dtype, written
 *                                     8 scale             f32 scalar
 *   TK_ATTN_BWD_DKDV, grid (ceil(Nkv/64), Hkv, B), run after it:
 *     0 Q, 1 K, 2 V, 3 dO, 4 L, 5 Dw (read: the D the dQ kernel wrote),
 *     6 dK [B, Hkv, Nkv, D] dtype, 7 dV [B, Hkv, Nkv, D] dtype, 8 scale.
 * scale as in the forward (> 0). Any strides, unit stride in the last dim
 * for the 16-bit tensors. Each kernel has 4 warps; with `wgmma` (the Hopper
 * kernels, sm_90a only: kernels/attention_bwd_hopper.c) 8 consumer warps and
 * 128 rows a block, so the grids' x are ceil(Nq/128) and ceil(Nkv/128).
 * Fast (non-deterministic): P and dS are computed once, in a kernel over key
 * blocks that adds each block's share of dQ into an f32 accumulator dQacc
 * with atomics (so dQ's rounding may differ from run to run); three kernels:
 *   TK_ATTN_BWD_PREP, grid (ceil(Nq/64), Hq, B), 4 warps (either set):
 *     0 O, 1 dO, 2 Dw (written: D), 3 dQacc [B, Hq, Nq', D] f32 (written:
 *     zeros), with Nq' = Nq rounded up to 64 (rows of whole tiles);
 *   TK_ATTN_BWD_FUSED, the DKDV kernel's grid and parameters 0-7, then
 *     8 dQacc (f32; added into), 9 scale. dQacc is [B, Hq, Nq', D] for the
 *     mma.sync kernel and [B, Hq, D, Nq'] (transposed) for the wgmma one:
 *     the layout each adds whole tiles of, unmasked (its strides are any);
 *   TK_ATTN_BWD_CONVERT, grid (ceil(Nq/64), Hq, B), 4 warps (either set):
 *     0 dQacc (read as [B, Hq, Nq', D]: a transposed one through its
 *     strides), 1 dQ [B, Hq, Nq, D] dtype (written), 2 scale.
 * PREP and CONVERT do not depend on causal or wgmma (the names say so). */
typedef enum tk_attention_bwd_part {
    TK_ATTN_BWD_DQ = 0,     /* deterministic: dQ (and D)                     */
    TK_ATTN_BWD_DKDV = 1,   /* deterministic: dK, dV                         */
    TK_ATTN_BWD_PREP = 2,   /* fast: D, and the dQ accumulator zeroed        */
    TK_ATTN_BWD_FUSED = 3,  /* fast: dK, dV, dQ's share added into the acc.  */
    TK_ATTN_BWD_CONVERT = 4 /* fast: dQ = scale * accumulator, in the dtype  */
} tk_attention_bwd_part;

typedef struct tk_attention_bwd_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16                                       */
    int head_dim;   /* 64 or 128                                               */
    int causal;     /* 0 or 1                                                  */
    int part;       /* a tk_attention_bwd_part: which kernel                  */
    int wgmma;      /* 1: the Hopper kernels (above), 0: mma.sync             */
    int varlen;     /* 1: packed variable-length sequences, as the forward's
                       varlen (its views and prefix sums; below)          */
} tk_attention_bwd_config;

TK_API tk_status tk_attention_bwd_build(tk_ctx *ctx, const tk_attention_bwd_config *cfg,
                                        tk_kernel **out);

/* ---- Normalization: LayerNorm and RMSNorm, fused with the residual add ---
 * Rows of X [R, C] (any R and C, row-major in the strides given) are
 * normalized one by one, statistics in f32 (kernels/norm.c):
 *   h    = X (+ Res, rounded to the dtype: the new residual stream)
 *   LAYER  mean = avg(h), rstd = 1/sqrt(avg((h - mean)²) + eps)
 *          Y = (h - mean)·rstd (·W) (+ B)
 *   RMS    rstd = 1/sqrt(avg(h²) + eps),  Y = h·rstd (·W)
 * The optional parts are specializations (residual, weight, bias); a
 * parameter that is off is absent from the list. A block of `warps` warps
 * owns 16 rows and splits their columns; they arrive in rounds of `cols`
 * columns through shared memory. Rows of at most `cols` columns are read
 * once; longer ones twice (statistics, then output). Parameters in order:
 *   TK_NORM_FWD, grid (ceil(R/16)), `warps` warps:
 *     X [R, C] dtype, [Res [R, C] dtype], [W [C] dtype], [B [C] dtype],
 *     [H [R, C] dtype, written: h], Y [R, C] dtype (written),
 *     [Mean [R] f32 (LAYER, stats), written], [Rstd [R] f32 (stats),
 *     written], eps f32.
 *   TK_NORM_BWD, grid (ceil(R/16)), `warps` warps: the gradients from dY, given
 *     h (H; X without a residual) and the forward's Mean and Rstd:
 *     H [R, C], dY [R, C], [dH [R, C] (residual: the residual stream's own
 *     gradient, added to dX)], [W [C]], [Mean [R] f32 (LAYER)], Rstd [R]
 *     f32, dX [R, C] (written: also the residual's gradient), [dWp [P, C]
 *     f32 (weight), written], [dBp [P, C] f32 (bias), written], where
 *     P = ceil(R/16): block p's column sums of dY·xhat and dY over its 16
 *     rows (xhat = (h - mean)·rstd, RMS h·rstd).
 *   TK_NORM_BWD_REDUCE, grid (ceil(C/32)), 8 warps: Part [P, C] f32, Out [C]
 *     dtype (written): Out[c] = the sum over p of Part[p, c] in f32, in a
 *     fixed order (warp w adds the 16-row tiles w, w + 8, ... of Part, then
 *     warp 0 the 8 warps' sums in warp order): dW from dWp, dB from dBp,
 *     deterministic, no atomics. */
typedef enum tk_norm_kind { TK_NORM_LAYER = 0, TK_NORM_RMS = 1 } tk_norm_kind;

typedef enum tk_norm_part {
    TK_NORM_FWD = 0,
    TK_NORM_BWD = 1,
    TK_NORM_BWD_REDUCE = 2 /* reads dtype (Out's) and part only             */
} tk_norm_part;

#define TK_NORM_WARPS 8 /* a block's warps when a config says 0 (the run API's) */
#define TK_NORM_SLOTS 1 /* cols 0: rounds of TK_NORM_SLOTS·32·warps columns    */

typedef struct tk_norm_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16 (X, Res, W, B, H, Y, dY, dH, dX);
                       BWD_REDUCE: Out's, TK_F32 (or 0), TK_BF16, TK_F16  */
    int kind;       /* a tk_norm_kind                                        */
    int part;       /* a tk_norm_part: which kernel                          */
    int residual;   /* 0 or 1: h = X + Res (FWD), dH added to dX (BWD)       */
    int weight;     /* 0 or 1: the W scale (FWD, BWD: dWp)                    */
    int bias;       /* 0 or 1: the B shift (LAYER only; BWD: dBp)            */
    int stats;      /* FWD: 1 writes Mean (LAYER) and Rstd, 0 neither         */
    int warps;      /* a block's warps: 1, 2, 4, 8, 16; 0: TK_NORM_WARPS      */
    int cols;       /* a round's columns: a multiple of 32·warps up to 8 of
                       them (256·warps); 0: TK_NORM_SLOTS of them        */
} tk_norm_config;

TK_API tk_status tk_norm_build(tk_ctx *ctx, const tk_norm_config *cfg, tk_kernel **out);

/* ---- Rotary embeddings (RoPE): forward and backward --------------------
 * X [B, H, N, D] (any strides; unit stride in D is the fast path), D =
 * head_dim, the first rd = rotary_dim columns rotated in pairs (a, b) by
 * θ_i = pos · base^(-2i/rd), i = 0 .. rd/2 - 1, computed in f32 and rounded
 * once to the dtype (kernels/rotary.c):
 *   out_a = x_a·cos θ_i - x_b·sin θ_i,  out_b = x_b·cos θ_i + x_a·sin θ_i
 *   NEOX pairs (i, i + rd/2); GPTJ pairs (2i, 2i + 1).
 * inverse = 1 rotates by -θ (sin negated): the backward, dX from dOut.
 * pos is the token index n, or positions[b, n] (positions = 1). With
 * tables = 1, cos θ_i and sin θ_i are read from Cos and Sin [T, rd/2] f32
 * at row pos (T = table rows); rows pos >= T (or < 0) are masked: they read
 * cos = sin = 0 (never outside the tables), so such a token's rotated
 * columns become 0.
 * Parameters in order, grid (ceil(N/64), ceil(H/8), B), 4 warps (a warp: 16
 * tokens of one b, 8 heads):
 *   X [B, H, N, D] dtype (in_place: also written), [Out [B, H, N, D] dtype,
 *   written (in_place = 0): columns rd.. copied from X], [Cos [T, rd/2] f32,
 *   Sin [T, rd/2] f32 (tables)], [Pos [B, N] i32 (positions)], [base f32
 *   (tables = 0)].
 * In place, columns rd.. are not touched; Out must not overlap X. */
typedef enum tk_rotary_style { TK_ROTARY_NEOX = 0, TK_ROTARY_GPTJ = 1 } tk_rotary_style;

typedef struct tk_rotary_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16 (X, Out)                             */
    int style;      /* a tk_rotary_style                                      */
    int head_dim;   /* D: 64, 128 or 256                                      */
    int rotary_dim; /* rd: even, 2 .. head_dim                                */
    int tables;     /* 1: Cos/Sin tables (NEOX); 0: angles from base          */
    int positions;  /* 1: Pos gives each token's position (and table row)     */
    int inverse;    /* 1: rotate by -θ (the backward)                         */
    int in_place;   /* 1: X is rotated in place (no Out parameter)            */
} tk_rotary_config;

TK_API tk_status tk_rotary_build(tk_ctx *ctx, const tk_rotary_config *cfg, tk_kernel **out);

/* ---- Based linear attention (Arora et al. 2024): forward and backward ----
 * Causal linear attention whose score is exp's 2nd-order Taylor expansion
 * over feature dim 16 (kernels/based.c):
 *   a_ij = 1 + s_ij + s_ij²/2,  s_ij = scale · q_i·k_j,  j <= i
 *   num_i = Σ_j a_ij v_j,  z_i = Σ_j a_ij,  o_i = num_i / (z_i + eps)
 * (normalize = 1) or o_i = num_i (normalize = 0): flash-linear-attention's
 * parallel_based / fused_chunk_based with use_norm. Computed in chunks of
 * 16·warps rows: exact products inside a chunk and a linear state (288
 * features x value columns, f32, applied in the dtype) across chunks, so
 * the cost is linear in T.
 *   TK_BASED_FWD, grid (ceil(Dv / v_cols), H, B), `warps` warps:
 *     Q [B, H, T, 16], K [B, H, T, 16], V [B, H, T, Dv] dtype (any strides,
 *     unit last), O [B, H, T, Dv] dtype, written, [Z [B, H, T] f32, written
 *     (stats): z_i], scale f32, eps f32.
 * The backward (kernels/based_bwd.c), NV = ceil(Dv / v_cols) value slices;
 * [Z, DZ] only with normalize; partial sums P [NV·B, H, T, 16] f32, slice x
 * of batch entry b at x·B + b:
 *   TK_BASED_BWD_PREP, grid (ceil(T/64), H, B), 4 warps: dO, O [B, H, T, Dv]
 *     dtype, Z [B, H, T] f32, DZ [B, H, T] f32 written: -(dO_i·O_i)/(Z_i + eps),
 *     eps f32.
 *   TK_BASED_BWD_DQ, grid as the forward: Q, K, V, dO, [Z, DZ], dQp (P,
 *     written), scale, eps.
 *   TK_BASED_BWD_DKV, grid as the forward: Q, K, V, dO, [Z, DZ], dKp (P,
 *     written), dV [B, H, T, Dv] dtype written, scale, eps.
 *   TK_BASED_BWD_SUM, grid (ceil(T/64), H, B), 4 warps: P, Out [B, H, T, 16]
 *     dtype written: Σ_x P[x·B + b] in order of x.
 * Sequence segments (`seg`): a block walks its head's chunks in order, so
 * the grid above has few blocks when B·H is small. With seg set, the
 * chunks split into NS = ceil(chunks / L) segments of L chunks (L: the i64
 * scalar seg_chunks), grid z = B·NS (entry b, segment s at b·NS + s), and
 * the linear states cross segments through St [NV·B·NS, H, 320, v_cols] f32
 * (slice x, entry b, segment s at (x·B + b)·NS + s; rows 0..287 the state,
 * 288..303 Z2, 304 z1):
 *   TK_BASED_SEG_STATE  FWD: Q, K, V, St written, seg_chunks: each
 *     segment's own S, z1, Z2 (the last segment writes nothing). DKV: Q, K,
 *     V, dO, [Z, DZ], St written, seg_chunks, scale, eps: its own R, rz1,
 *     RZ2 (the first segment writes nothing).
 *   TK_BASED_SEG_RUN  FWD, DQ, DKV: the parameters above with St and
 *     seg_chunks before scale: the segment starts from the sum, in order,
 *     of the earlier segments' states (DKV: the later ones'). DQ reads the
 *     FWD state pass's St (normalize as DQ's, stats 0). */
typedef enum tk_based_part {
    TK_BASED_FWD = 0,
    TK_BASED_BWD_DQ = 1,   /* dq's partial sums, one per value slice            */
    TK_BASED_BWD_DKV = 2,  /* dk's partial sums, dv                             */
    TK_BASED_BWD_PREP = 3, /* dz from dO, O and Z (normalize)                   */
    TK_BASED_BWD_SUM = 4   /* the partial sums added, in the dtype              */
} tk_based_part;

typedef enum tk_based_seg {
    TK_BASED_SEG_NONE = 0, /* the whole sequence, one block a value slice */
    TK_BASED_SEG_RUN = 1,  /* a segment, from the other segments' states   */
    TK_BASED_SEG_STATE = 2 /* a segment's own state, written to St          */
} tk_based_seg;

#define TK_BASED_V_COLS 16 /* value columns a block (forward)  */
#define TK_BASED_WARPS  4  /* warps a block; a chunk is 16 rows a warp */

typedef struct tk_based_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16                                       */
    int part;       /* a tk_based_part                                         */
    int normalize;  /* 0 or 1: o = num / (z + eps)                             */
    int stats;      /* FWD: 1 writes Z                                         */
    int v_cols;     /* value columns a block: a multiple of 16 in 16 .. 128;
                       0: TK_BASED_V_COLS                                     */
    int warps;      /* 1, 2, 4 or 8; 0: TK_BASED_WARPS                         */
    int seg;        /* a tk_based_seg (FWD, DQ, DKV)                           */
} tk_based_config;

TK_API tk_status tk_based_build(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel **out);

/* ---- Hedgehog linear attention (Zhang et al. 2024): forward ---------------
 * Causal linear attention with a learned feature map (kernels/hedgehog.c),
 * flash-linear-attention's HedgehogFeatureMap + chunk_linear_attn:
 *   y = x·Wᵀ + b (a Linear(D, D): W [D_out, D_in] row-major),
 *   φ(x) = softmax([2y, -2y]) over its F = 2D features,
 *   a_ij = scale · φ(q_i)·φ(k_j),  j <= i,
 *   num_i = Σ_j a_ij v_j,  z_i = Σ_j a_ij,  o_i = num_i / (z_i + eps)
 * (normalize = 1) or o_i = num_i (normalize = 0). q and k have their own W
 * and b (Wq, bq, Wk, bk), in the dtype, f32 accumulation. Computed in chunks
 * of C = 16·warps rows: φ of the chunk's q and k (mma against W in shared
 * memory), exact products inside the chunk and a linear state (F x value
 * columns, f32) across chunks.
 *   grid (ceil(Dv / v_cols), H, B), `warps` warps; parameters in order:
 *     Q [B, H, T, D], K [B, H, T, D], V [B, H, T, Dv] dtype (any strides,
 *     unit last; Dv a multiple of 8), Wq [Hw, D, D], Wk [Hw, D, D] dtype
 *     (dense rows; head h uses entry h mod Hw: Hw = 1 shares one W by all
 *     heads, fla's layer), [Bq [Hw, D], Bk [Hw, D] dtype (bias)], O [B, H,
 *     T, Dv] dtype, written, [Z [B, H, T] f32, written (stats): z_i], scale
 *     f32, eps f32.
 * Shared memory, bytes: 2·(2·D² + 2·C·D + 2·C·Dvb + 4·C·D + 2·D·Dvb [+ 32·D
 * with bias] [+ 32·D with normalize or stats]), Dvb = v_cols
 * (tk_kernel_smem_bytes; the build refuses more than 227 KiB): the
 * defaults take 104 KiB at D 64 (2 blocks an SM) and 200 KiB at D 128 (1).
 * ptxas (CUDA 13, the defaults, bf16, bias, normalize): sm_90a 232 (D 64)
 * and 242 (D 128) registers, no spills; sm_80 28 and 16 bytes of spills.
 * Sequence segments (`seg`, the forward only), as Based's: a block walks
 * its head's chunks in order, so the grid above has few blocks when B·H is
 * small. With seg set, the chunks split into NS = ceil(chunks / L)
 * segments of L chunks (L: the i64 scalar seg_chunks), grid z = B·NS
 * (entry b, segment s at b·NS + s), and the states cross segments through
 * St [NV·B·NS, H, F + 16, v_cols] f32, NV = ceil(Dv / v_cols) (slice x,
 * entry b, segment s at (x·B + b)·NS + s; rows 0..F-1 the state S, row
 * F + j columns 0..15 z1 of features 16j..16j+15, written with normalize
 * or stats only; the rest unused):
 *   TK_HEDGEHOG_SEG_STATE  Q, K, V, Wq, Wk, [Bq, Bk], St written,
 *     seg_chunks: each segment's own S (and z1) over its chunks (the last
 *     segment writes nothing: no one reads it; Q, Wq, Bq unread).
 *   TK_HEDGEHOG_SEG_RUN  the parameters above with St and seg_chunks
 *     before scale: the segment starts from the sum, in segment order, of
 *     the earlier segments' St entries, then runs its chunks as the whole-
 *     sequence kernel does (the same result within rounding).
 * Shared memory is the whole-sequence kernel's for either. ptxas sm_90a
 * (the defaults as above): RUN 255 registers at both dims, D 64 with 36
 * bytes of spill stores; STATE 213 (D 64) and 243 (D 128), no spills.
 * The feature maps apart (`phi` = 1): each value slice of the kernel above
 * maps the chunk's q and k again (two D x D mmas a token each), and W
 * takes 2·D² of its shared memory. TK_HEDGEHOG_MAP maps a tensor once:
 *   TK_HEDGEHOG_MAP, grid (Tp / C, H, B), `warps` warps (C = 16·warps;
 *     v_cols, normalize, stats unread): X [B, H, T, D] dtype (any strides,
 *     unit last; a negative token stride reads it reversed), Wx [Hw, D, D],
 *     [Bx [Hw, D] (bias)] dtype, P [B, H, F, Tp] dtype written: column t
 *     is φ(x_t) (features in rows), rows of X past T mapped as zero rows
 *     (φ(b)); Tp a multiple of C.
 * and the forward with phi = 1 takes PQ, PK [B, H, F, Tp] dtype (MAP's P of
 * q and of k, Tp a multiple of its C: at least ceil(T / C)·C) in place of
 * Q, K, Wq, Wk, Bq, Bk (bias unread), B, H, T from V; everything else as
 * above, segments included, and its result the same bits as phi = 0's. Its
 * shared memory drops the weights', q's and k's tiles: 2·(2·C·Dvb + 4·C·D
 * + 2·D·Dvb [+ 32·D with normalize or stats]) bytes, 68 KiB at D 64 and 96
 * KiB at D 128 with the defaults: three and two blocks an SM. ptxas sm_90a
 * (bf16, normalize): 168 registers with 192 bytes of spills (D 64; the cap
 * that three blocks allow) and 231, none (D 128). */
#define TK_HEDGEHOG_WARPS 4 /* warps a block; a chunk is 16 rows a warp */

/* The backward (kernels/hedgehog_bwd.c, hedgehog_dphi.c, hedgehog_fmap.c).
 * With s the scale, Z the forward's saved z (already times s) and
 * G_i = s·dO_i / (Z_i + eps), C_i = -s·(dO_i·O_i) / (Z_i + eps) (normalize;
 * else G = s·dO, C = 0), the gradients of φ(q), φ(k) and v are
 *   dφq_i = Σ_{j<=i} (G_i·v_j + C_i) φk_j,   dφk_j = Σ_{i>=j} (G_i·v_j + C_i) φq_i,
 *   dv_j  = Σ_{i>=j} (φq_i·φk_j) G_i,
 * then through the feature map: σ = Σ_f dφ_f φ_f, du = φ⊙(dφ - σ), dy =
 * 2(du[:D] - du[D:]), dx = dy·W, dW = Σ_tokens dyᵀx, db = Σ_tokens dy.
 * dφk and dv are dφq's and the forward's sums with time reversed: the run
 * code passes views whose token stride is negative (row T-1 first), so
 * every kernel takes any token stride. F = 2D; Hw entries of W (1 or H).
 *   TK_HEDGEHOG_BWD_PREP, grid (ceil(T/64), H, B), 4 warps: dO [B, H, T,
 *     Dv] dtype, [O [B, H, T, Dv] dtype, Z [B, H, T] f32 (normalize)], G
 *     [B, H, T, Dv] dtype written, [C [B, H, T] f32 written (normalize)],
 *     scale f32, eps f32.
 *   TK_HEDGEHOG_BWD_DPHI, grid (F / f_cols, H, B), `warps` warps: X, Y [B,
 *     H, T, Dv] dtype (Dv <= v_cols, the whole value dim a block), [CX [B,
 *     H, T] f32 (c_side 1) | CY [B, H, T] f32 (c_side 2)], U [B, H, T, D]
 *     dtype, Wu [Hw, D, D] dtype, [Bu [Hw, D] dtype (bias)], dPhi [B, H, T,
 *     F] f32, written: dPhi_i[f] = Σ_{j<=i} (X_i·Y_j + CX_i + CY_j) φ(U_j)[f]
 *     for the block's f_cols features (dφq: X = G, Y = V, CX = C, U = K;
 *     dφk: the reversed views X = V, Y = G, CY = C, U = Q).
 *     With phi = 1 (the maps apart), PU [B, H, F, Tp] dtype, MAP's P of U
 *     in the token order of the other views (of the reversed view for dφk;
 *     Tp a multiple of C, at least ceil(T / C)·C), takes the place of U,
 *     Wu and Bu (bias unread): each chunk copies the block's f_cols rows of
 *     φᵀ where every block would map the chunk's whole U. The same bits as
 *     phi = 0's. Shared memory, bytes: 2·(2·C·Dvb + fc·Dvb + [D² + C·D +
 *     2·D·C + 16·D with bias] (phi 0) | fc·C (phi 1) [+ 16·fc + 32·C with a
 *     C side]), Dvb = v_cols, fc = f_cols: with a C side, D 64, Dvb 64, fc
 *     128, 74 KiB (phi 0, bias) and 56 KiB (phi 1); D 128, Dvb 128, fc 64,
 *     138 and 62 KiB. ptxas sm_90a (CUDA 13, bf16, a C side, fc from 16 to
 *     the default): phi 0 216 .. 229 registers, phi 1 214 .. 225, no
 *     spills.
 *   TK_HEDGEHOG_BWD_FMAP, grid (NS, H, B), `warps` warps: U [B, H, T, D]
 *     dtype, W [Hw, D, D] dtype, [Bu [Hw, D] dtype (bias)], dPhi [B, H, T,
 *     F] f32, dU [B, H, T, D] dtype written, PW [H, B·NS, D, D] f32 written,
 *     [PB [H, B·NS, 1, D] f32 written (bias)]: block (s, h, b) takes the
 *     s-th of NS equal runs of chunks of C = 16·warps tokens and writes its
 *     partial sums of dW and db at [h, b·NS + s].
 *   TK_HEDGEHOG_BWD_REDUCE, grid (ceil(R/16), ceil(Cc/32), Hw), 8 warps:
 *     P [H, N, R, Cc] f32, Out [Hw, R, Cc] written in the dtype (BF16, F16
 *     or F32): Out[e] = Σ of P[h, n] over h ≡ e (mod Hw), then n; term t of
 *     that list goes to warp t mod 8, and warp 0 adds the warps' sums in
 *     warp order (a fixed order: deterministic).
 * The forward itself (normalize 0, scale 1, Q and K swapped with their
 * weights, V = G, all reversed) gives dv. */
typedef enum tk_hedgehog_part {
    TK_HEDGEHOG_FWD = 0,
    TK_HEDGEHOG_BWD_PREP = 1,   /* G and C from dO, O and Z                  */
    TK_HEDGEHOG_BWD_DPHI = 2,   /* dφ of the queries or (reversed) keys      */
    TK_HEDGEHOG_BWD_FMAP = 3,   /* through the feature map: dx, dW, db parts */
    TK_HEDGEHOG_BWD_REDUCE = 4, /* the partial sums of dW, db, in order     */
    TK_HEDGEHOG_MAP = 5         /* φ alone, transposed, for the phi forward */
} tk_hedgehog_part;

typedef enum tk_hedgehog_seg {
    TK_HEDGEHOG_SEG_NONE = 0, /* the whole sequence, one block a value slice */
    TK_HEDGEHOG_SEG_RUN = 1,  /* a segment, from the earlier segments' states */
    TK_HEDGEHOG_SEG_STATE = 2 /* a segment's own state, written to St         */
} tk_hedgehog_seg;

typedef struct tk_hedgehog_config {
    tk_dtype dtype; /* TK_BF16 or TK_F16                                       */
    int head_dim;   /* D: 64 or 128                                            */
    int normalize;  /* 0 or 1: o = num / (z + eps)                             */
    int stats;      /* 1 writes Z                                              */
    int bias;       /* 1: Bq and Bk parameters (y = x·Wᵀ + b)                  */
    int v_cols;     /* value columns a block: a multiple of 16 in 16 .. 128;
                       0: 64 at D 64, 32 at D 128 (BWD_DPHI: the whole value
                       dim rounded up to 16, 16 .. 256; required)             */
    int warps;      /* 1, 2, 4 or 8; 0: TK_HEDGEHOG_WARPS                      */
    int part;       /* a tk_hedgehog_part (0: the forward)                     */
    int f_cols;     /* BWD_DPHI: features a block, a multiple of 16 dividing
                       2·head_dim; 0: the library's choice                     */
    int c_side;     /* BWD_DPHI: 0 no C term, 1 CX, 2 CY                        */
    int seg;        /* FWD: a tk_hedgehog_seg (the other parts take 0)         */
    int phi;        /* FWD: 1 reads φ(q)ᵀ, φ(k)ᵀ from TK_HEDGEHOG_MAP's output;
                       BWD_DPHI: 1 reads φ(U)ᵀ from it                      */
} tk_hedgehog_config;

TK_API tk_status tk_hedgehog_build(tk_ctx *ctx, const tk_hedgehog_config *cfg, tk_kernel **out);

#ifdef __cplusplus
}
#endif

/* A trainer's other kernels: embeddings, the bias gradient, cross-entropy, AdamW. */
#include "tk/tk_kernels_train.h"
#endif
