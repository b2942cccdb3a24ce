/* Packed variable-length batches in the tests (util/varlen.h). */
#include "util/varlen.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

double *tu_varlen_gather(const double *x, int64_t H, int64_t D, int64_t r0, int64_t n) {
    double *y = malloc(sizeof(double) * (size_t)(H * (n ? n : 1) * D));
    ck_assert_ptr_nonnull(y);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < n; i++)
            memcpy(y + (h * n + i) * D, x + ((r0 + i) * H + h) * D, sizeof(double) * (size_t)D);
    return y;
}

void tu_varlen_scatter(double *x, const double *y, int64_t H, int64_t D, int64_t r0, int64_t n) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < n; i++)
            memcpy(x + ((r0 + i) * H + h) * D, y + (h * n + i) * D, sizeof(double) * (size_t)D);
}
