/* Float64 rotary embeddings (tk/tk_kernels.h, "Rotary embeddings") for the
 * references of tests that rotate on the way (test_attention_rotary.c). */
#ifndef TK_TEST_REF_ROTARY_H
#define TK_TEST_REF_ROTARY_H

#include <stdint.h>

/* The angles: from base (cos_t NULL), or cos_t / sin_t [table_rows, rd/2]
 * read at row pos (a row outside the tables reads cos = sin = 0). */
typedef struct ref_rope {
    int style;      /* TK_ROTARY_NEOX (0) or TK_ROTARY_GPTJ (1) */
    int rotary_dim; /* rd, even, <= D                            */
    double base;
    const double *cos_t, *sin_t;
    int64_t table_rows;
} ref_rope;

/* x [B, H, N, D] dense, rotated in place: row n of every (b, h) sits at
 * position pos0 + n. θ_i = pos · base^(-2i/rd) in float64 (the kernels'
 * f32 angles differ by their rounding, well inside the tests' tolerance). */
void ref_rotary(const ref_rope *r, double *x, int64_t B, int64_t H, int64_t N, int64_t D,
                int64_t pos0);

#endif
