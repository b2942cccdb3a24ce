/* Float64 rotary embeddings (see ref_rotary.h). */
#include "util/ref_rotary.h"

#include <math.h>

/* cos and sin of pair i at position pos. */
static void angle(const ref_rope *r, int64_t pos, int64_t i, double *cs, double *sn) {
    int64_t half = r->rotary_dim / 2;
    if (!r->cos_t) {
        double th = (double)pos * pow(r->base, -2.0 * (double)i / r->rotary_dim);
        *cs = cos(th), *sn = sin(th);
        return;
    }
    int in = pos >= 0 && pos < r->table_rows;
    *cs = in ? r->cos_t[pos * half + i] : 0.0;
    *sn = in ? r->sin_t[pos * half + i] : 0.0;
}

void ref_rotary(const ref_rope *r, double *x, int64_t B, int64_t H, int64_t N, int64_t D,
                int64_t pos0) {
    int64_t half = r->rotary_dim / 2;
    for (int64_t row = 0; row < B * H * N; row++) {
        double *v = x + row * D;
        int64_t pos = pos0 + row % N;
        for (int64_t i = 0; i < half; i++) {
            double cs, sn;
            angle(r, pos, i, &cs, &sn);
            int64_t a = r->style ? 2 * i : i, b = r->style ? 2 * i + 1 : i + half;
            double xa = v[a], xb = v[b];
            v[a] = xa * cs - xb * sn;
            v[b] = xb * cs + xa * sn;
        }
    }
}
