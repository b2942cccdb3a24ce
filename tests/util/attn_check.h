/* The attention tests' problems: the forward's (test_kernels.c,
 * test_attention_decode.c, _varlen.c, _paged.c, _rotary.c) random inputs
 * and poisoned outputs, drawn in one order, and what a call left in O and
 * L, measured against float64 the one way they all do and held to the
 * bounds most of them use; the backward's (test_attention_bwd.c,
 * _varlen_bwd.c) gradients, measured alike. */
#ifndef TK_TEST_ATTN_CHECK_H
#define TK_TEST_ATTN_CHECK_H

#include <stdint.h>

#include "util/ref.h"

/* t: Q, K, V, O, L. Q and K uniform in [-2, 2) (scores of a few units: a
 * softmax neither flat nor one-hot), V in [-1, 1), then O and L NaN (an
 * unwritten element shows) with their snapshots in before[3], before[4];
 * returns the scale then drawn, 1/sqrt(D) times 0.75 to 1. */
float tu_attn_fill(ref_tensor t[5], void *before[5], int D);

typedef struct tu_attn_out {
    double eo, el; /* ‖err‖/‖ref‖ of O and L (ref_rel_err)                     */
    int64_t nan;   /* NaN elements of O and L: never written (they start poisoned) */
    int64_t stray; /* writes outside their logical elements                       */
} tu_attn_out;

/* o and l against want_o and want_l (dense [B, H, N, D] and [B, H, N]);
 * stray writes against before_o and before_l, the snapshots of the
 * poisoned outputs (NULL: not counted). */
tu_attn_out tu_attn_measure(const ref_tensor *o, const ref_tensor *l, const double *want_o,
                            const double *want_l, const void *before_o, const void *before_l);

/* Every element of O and L written, nothing outside them, O within 1e-2
 * of float64 and L (f32 statistics) within 1e-3. */
void tu_attn_expect(const tu_attn_out *r);

/* The backward's gradients g[0..2] (dQ, dK, dV) against want[0..2]:
 * every element written and none outside them (before: the snapshots of
 * the poisoned outputs), else the test fails naming `where`; err[i] gets
 * their rel errors, which each test holds to its bound. */
void tu_attn_grads(const ref_tensor g[3], double *const want[3], void *const before[3],
                   const char *where, double err[3]);

#endif
