/* Packed variable-length batches in the tests (test_attention_varlen*.c):
 * moving one sequence's rows between a packed [T, H, D] float64 array and
 * the [1, H, n, D] one the float64 references take; a packed tensor's
 * strides in a call's order. */
#ifndef TK_TEST_VARLEN_H
#define TK_TEST_VARLEN_H

#include <stddef.h>
#include <stdint.h>

#include "tk/tk.h"
#include "util/ref.h"

/* Rows [r0, r0 + n) of a packed [T, H, D] array as a new [1, H, n, D]
 * array (malloc'ed; never NULL: a failed allocation fails the test). */
double *tu_varlen_gather(const double *x, int64_t H, int64_t D, int64_t r0, int64_t n);
/* The inverse: [1, H, n, D] y into rows [r0, r0 + n) of packed x. */
void tu_varlen_scatter(double *x, const double *y, int64_t H, int64_t D, int64_t r0, int64_t n);
/* The longest of the n lengths l, at least 1 (max_seqlen_*). */
int tu_varlen_longest(const int *l, int n);
/* A [T, H, D] ref tensor's strides in a call's (batch, head, token, D)
 * order; the batch stride 0 (a varlen call ignores it). */
void tu_varlen_strides(int64_t st[4], const ref_tensor *t);

#endif
