/* Timing helpers shared by the C benchmarks in bench/: a monotonic clock
 * and the median of a sample. Header-only: each benchmark is one program. */
#ifndef TK_BENCH_UTIL_H
#define TK_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline double bench_now_us(void) { return 1e3 * bench_now_ms(); }

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median (the upper one for even n). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    return v[n / 2];
}

#endif
