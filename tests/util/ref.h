/* Test helpers: host tensors with any strides, random fills exact in their
 * dtype, NaN poisoning, float64 reference kernels and error measures.
 * Linked into every test (CMake builds every C file of tests/util into tk_testutil). */
#ifndef TK_TEST_REF_H
#define TK_TEST_REF_H

#include <stdint.h>

#include "tk/tk.h"

/* ---- Random numbers --------------------------------------------------------
 * One xorshift stream per process, seeded from $TK_TEST_SEED or else from the
 * clock; the seed is printed on first use ("ref: seed N (TK_TEST_SEED=N
 * repeats this run)"). */
uint64_t ref_seed(void);
double ref_uniform(void);                    /* [-1, 1) */
int64_t ref_randint(int64_t lo, int64_t hi); /* [lo, hi] */

/* ---- Host tensors -------------------------------------------------------- */
typedef struct ref_tensor {
    tk_dtype dt; /* f32, bf16 or f16 */
    int rank;
    int64_t dims[4];    /* logical dims                                       */
    int64_t strides[4]; /* elements                                           */
    int64_t elems;      /* allocation, in elements (max offset + 1)           */
    void *data;
} ref_tensor;

/* Dense row-major tensor, zero-filled. */
ref_tensor ref_tensor_new(tk_dtype dt, int rank, const int64_t *dims);
/* Storage order `perm`: perm[0] is the outermost logical dim in memory,
 * perm[rank-1] the innermost (e.g. {0,2,1,3}: a [B,H,N,D] view of a
 * [B,N,H,D] buffer). pad: extra elements after each innermost row (the
 * allocation then has gaps that no logical element covers). */
ref_tensor ref_tensor_new_layout(tk_dtype dt, int rank, const int64_t *dims, const int *perm,
                                 int64_t pad);
void ref_tensor_free(ref_tensor *t);
int64_t ref_tensor_count(const ref_tensor *t); /* logical elements */
/* Offset (elements) of logical element number i (row-major over dims). */
int64_t ref_tensor_offset(const ref_tensor *t, int64_t i);
double ref_tensor_get(const ref_tensor *t, int64_t i);   /* logical element i */
void ref_tensor_set(ref_tensor *t, int64_t i, double v); /* rounds to dt */
/* Every logical element uniform in [lo, hi), rounded to dt. */
void ref_tensor_random(ref_tensor *t, double lo, double hi);
/* The whole allocation: NaN (outputs not yet written), or a value (gaps). */
void ref_tensor_fill_all(ref_tensor *t, double v);
/* Logical elements as a dense row-major float64 array (malloc'ed). */
double *ref_tensor_to_f64(const ref_tensor *t);
/* Allocation elements outside the logical set whose bits differ from `before`
 * (a copy of t->data taken earlier): writes the kernel must not make. */
int64_t ref_tensor_stray_writes(const ref_tensor *t, const void *before);
void *ref_tensor_snapshot(const ref_tensor *t); /* malloc'ed copy of data */
tk_arg ref_tensor_arg(const ref_tensor *t);

/* ---- Float64 references -------------------------------------------------- */
/* C[M,N] = A[M,K]·B[K,N], or A·Bᵀ with B[N,K] (transpose_b). Dense inputs. */
void ref_gemm(const double *A, const double *B, double *C, int64_t M, int64_t N, int64_t K,
              int transpose_b);
/* Attention forward, dense row-major [B,H,N,D] arrays; see tk/tk_kernels.h
 * for the definition (GQA, bottom-right causal, L natural log, rows without
 * keys: O = 0, L = -inf). */
void ref_attention(const double *Q, const double *K, const double *V, double *O, double *L,
                   int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D,
                   double scale, int causal);
/* Attention backward in float64 (dense [B,H,N,D] arrays): the gradients
 * dQ, dK, dV of O = softmax(scale·Q Kᵀ [masked]) V for the upstream
 * gradient dO, recomputing P and O from Q, K, V (see tk/tk_kernels.h,
 * "Attention backward"; dK, dV summed over each kv head's query heads;
 * rows without keys contribute nothing). Drows: the row dot products
 * D = rowsum(dO∘O) [B, Hq, Nq] of the O the kernels read (the backward's
 * input, rounded to its dtype), or NULL for those of the exact O; where P
 * is 1, dS = P∘(dP - D) is all cancellation, and only the same D makes the
 * reference the exact gradient of the kernels' inputs. */
void ref_attention_bwd(const double *Q, const double *K, const double *V, const double *dO,
                       const double *Drows, double *dQ, double *dK, double *dV, int64_t B,
                       int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D, double scale,
                       int causal);

/* ---- Comparison ------------------------------------------------------------
 * ‖out − ref‖₂ / ‖ref‖₂ over n values (‖out − ref‖₂ alone when ‖ref‖ = 0).
 * NaN in `out` gives NaN (so no comparison with it passes). Infinite
 * reference values must be matched exactly by `out` and are left out of the
 * norms; a mismatch gives +inf. */
double ref_rel_err(const double *out, const double *ref, int64_t n);
/* ref_rel_err of t's logical elements (dense row-major, as
 * ref_tensor_to_f64 lays them out) against ref. */
double ref_tensor_rel_err(const ref_tensor *t, const double *ref);
int64_t ref_count_nan(const double *x, int64_t n);

#endif
