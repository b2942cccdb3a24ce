/* What a forward attention call left in O and L, measured against float64
 * the one way the forward tests (test_kernels.c, test_attention_decode.c,
 * _varlen.c, _paged.c, _rotary.c) all do, and the bounds most of them hold
 * it to. */
#ifndef TK_TEST_ATTN_CHECK_H
#define TK_TEST_ATTN_CHECK_H

#include <stdint.h>

#include "util/ref.h"

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

#endif
