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

int tu_varlen_longest(const int *l, int n) {
    int m = 1;
    for (int i = 0; i < n; i++) m = l[i] > m ? l[i] : m;
    return m;
}

void tu_varlen_strides(int64_t st[4], const ref_tensor *t) {
    st[0] = 0, st[1] = t->strides[1], st[2] = t->strides[0], st[3] = t->strides[2];
}
