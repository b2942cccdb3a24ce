/* GEMM on device pointers.
 * One family of the ready-made kernels; tk/tk_run.h includes them all. */
#ifndef TK_TK_RUN_GEMM_H
#define TK_TK_RUN_GEMM_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GEMM: C[M,N] = A[M,K] · B[K,N] (or · B[N,K]ᵀ when transpose_b; A[K,M]ᵀ
 * when transpose_a), bf16/f16 in, f32 accumulation, bf16/f16/f32 out, and
 * an optional epilogue (+ C, + bias, GELU, DGELU: the fields after config,
 * tk_kernels.h's tk_gemm_config says what each does); row-major with leading
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
    /* Grown fields (tk_kernels.h, tk_gemm_config, says what each does; a
     * config given above must name the same): 0 / NULL is a plain GEMM. */
    int32_t transpose_a; /* 1: A is [K, M], lda its row pitch (>= m; 0 = m)          */
    int32_t accumulate;  /* 1: C += A·B [+ bias]; C must not overlap A, B or bias    */
    const void *bias;    /* [N] out_dtype, aligned to its element size; NULL: none   */
    void *aux;           /* [M, N] out_dtype, row pitch ldaux: GELU's input x, written
                            when set (optional); DGELU's saved x, read (required).
                            No overlap with A, B, bias or C, except DGELU in place
                            (aux == c, ldaux == ldc)                               */
    int64_t ldaux;       /* 0 = n                                                    */
    int32_t act;         /* tk_gemm_act; not with accumulate; DGELU takes no bias    */
    /* A split over K (grown fields; NULL / 0 is a call as before: one
     * kernel). With a workspace, a long-K product with few tiles of C runs
     * as S ranges of K whose f32 partial products go to the workspace, then
     * a second kernel sums them in a fixed order and applies the epilogue
     * (tk_kernels.h, tk_gemm_config.split_k): the same bits on every run.
     * The workspace is device memory, 16-byte aligned, of at least
     * tk_gemm_workspace bytes (less is TK_ERR_INVALID_ARG), overlapping
     * nothing the call reads or writes. A given config decides S by its own
     * split_k (split_k here must then be 0 or the same).                  */
    void *workspace; /* NULL: no split                                        */
    size_t workspace_bytes;
    int32_t split_k; /* 0: chosen from M, N, K and the SM count (1 where a split
                               would not pay); 1: none; 2..TK_GEMM_MAX_SPLIT: that many
                               ranges (fewer where K has fewer k-tiles); >= 2 needs a
                               workspace                                              */
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
 * aligned A and B and row pitches. With p->workspace set, the split too
 * (split_k; p->split_k 0 chooses it as for a GPU of 132 SMs, where tk_gemm
 * asks the context's GPU). A NULL p or a bad struct_size gives a zeroed
 * config. */
TK_API tk_gemm_config tk_gemm_config_for_call(const tk_gemm_params *p, const char *arch);
TK_API tk_status tk_gemm(tk_ctx *ctx, const tk_gemm_params *p, void *stream);
/* The workspace bytes tk_gemm needs for p on this context's GPU (its SM
 * count): S · M · N · 4 for the split it would run were p->workspace set
 * (the split it chooses when p->split_k is 0, else p->split_k's or the
 * config's), 0 when it would not split. After the checks tk_gemm makes,
 * except those of the workspace itself. */
TK_API tk_status tk_gemm_workspace(tk_ctx *ctx, const tk_gemm_params *p, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
