/* erf in f32 as the NVPTX lowering computes it (TK_OP_ERF in
 * ops/elementwise_nv.c): the constants, and the same arithmetic in C
 * (tk_erf_f32), so that tests/test_lower.c measures the GPU's error on the
 * host, operation for operation. LLVM has no erf the NVPTX backend can
 * select (llvm.erf does not exist; a libm call cannot link), hence this.
 *
 * |x| < 1: erf x = x + x P(x^2), P of degree 6 (the residual erf(x)/x - 1
 * keeps the last FMA's rounding small). Otherwise erf x = sign(x) (1 -
 * 2^Q(u)), u = min(|x|, 4) - 2.5, Q of degree 9 fitted to log2 erfc on
 * [1, 4] (weighted by erfc, so the absolute error is even); past 3.92 the
 * result rounds to +-1. Both are computed and one selected (no branch);
 * a NaN takes the first (NaN out). Coefficients: least squares on
 * Chebyshev nodes in long double, rounded to float (not minimax).
 * Measured against double erf over every float in [-6, 6]: max abs error
 * 1.03e-7, near |x| = 1 (about 2 ulp of erf there); +-inf give +-1.
 * On the GPU 2^Q is ex2.approx.ftz (relative error < 2^-22), which adds
 * at most 0.16 * 2.4e-7 = 4e-8 there. */
#ifndef TK_OPS_ERF_H
#define TK_OPS_ERF_H

#include <math.h>

/* erf(x)/x - 1 in s = x^2, constant term first */
#define TK_ERF_NS 7
static const float tk_erf_s[TK_ERF_NS] = {1.283791661e-01f,  -3.761262596e-01f, 1.128359735e-01f,
                                          -2.685432881e-02f, 5.189312156e-03f,  -8.018855006e-04f,
                                          7.882497448e-05f};
/* log2 erfc(u + 2.5), constant term first */
#define TK_ERF_NB 10
static const float tk_erf_b[TK_ERF_NB] = {
    -1.126285362e+01f, -7.722285748e+00f, -1.361750364e+00f, -1.566544734e-02f, 3.120294772e-03f,
    -6.121101324e-04f, 1.114500701e-04f,  -1.299429914e-05f, 7.029089829e-06f,  1.057621148e-06f};

/* The lowering's arithmetic on the host (every step an fmaf or a rounded
 * operation, as on the GPU; exp2f stands for ex2.approx). */
static inline float tk_erf_f32(float x) {
    float t = fabsf(x), s = x * x;
    float p = tk_erf_s[TK_ERF_NS - 1];
    for (int i = TK_ERF_NS - 2; i >= 0; i--) p = fmaf(p, s, tk_erf_s[i]);
    float small = fmaf(p, x, x);
    float u = fminf(t, 4.0f) - 2.5f, q = tk_erf_b[TK_ERF_NB - 1];
    for (int i = TK_ERF_NB - 2; i >= 0; i--) q = fmaf(q, u, tk_erf_b[i]);
    float big = copysignf(1.0f - exp2f(q), x);
    return t >= 1.0f ? big : small; /* NaN: small, which is NaN */
}

#endif
