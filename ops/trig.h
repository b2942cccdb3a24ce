/* sin and cos in f32 as the NVPTX lowering computes them (TK_OP_SIN/COS in
 * ops/elementwise_nv.c): the constants, and the same arithmetic in C
 * (tk_trig_f32), so that tests/test_lower.c measures the GPU's error on the
 * host, operation for operation.
 *
 * k = rint(x * 2/pi); r = x - k*pi/2 by a 3-part Cody-Waite reduction with
 * FMAs (pi/2 = HI + MID + LO; HI has 21 significant bits, so the first FMA's
 * x - k*HI is exact); then polynomials for sin and cos on |r| <= pi/4 + a
 * little (Cephes sinf/cosf, degree 7 and 8), picked by the quadrant k mod 4
 * and its sign. SFU sin.approx is not used: its error grows with |x|, and
 * rotary angles (position x frequency) are large.
 * Measured against double sin/cos: max abs error 7.2e-8 for |x| <= 1e5
 * (every float); 3e-7 up to 2e6; past that x * 2/pi in f32 misplaces k, |r|
 * outgrows the polynomials (3e-6 at 4e6) and past ~1e7 the result is
 * meaningless. sin(-0) is +0. */
#ifndef TK_OPS_TRIG_H
#define TK_OPS_TRIG_H

#include <math.h>

#define TK_TRIG_2_OVER_PI 0.636619772f
#define TK_TRIG_PIO2_HI   1.57079601e+00f
#define TK_TRIG_PIO2_MID  3.13916473e-07f
#define TK_TRIG_PIO2_LO   5.39030253e-15f
/* sin r = r + r^3 (S1 + r^2 (S2 + r^2 S3)) */
#define TK_TRIG_S1 -1.66666546e-1f
#define TK_TRIG_S2 8.33216087e-3f
#define TK_TRIG_S3 -1.95152959e-4f
/* cos r = 1 + r^2 (-1/2 + r^2 (C1 + r^2 (C2 + r^2 C3))) */
#define TK_TRIG_C1 4.16666457e-2f
#define TK_TRIG_C2 -1.38873163e-3f
#define TK_TRIG_C3 2.44331571e-5f

/* The lowering's arithmetic on the host: sin x (is_cos 0) or cos x (1).
 * Every product feeds a multiplicand or rintf, so FP contraction cannot
 * fuse it: each * stays a rounded multiply, as on the GPU. */
static inline float tk_trig_f32(float x, int is_cos) {
    float k = rintf(x * TK_TRIG_2_OVER_PI);
    float r = fmaf(k, -TK_TRIG_PIO2_HI, x);
    r = fmaf(k, -TK_TRIG_PIO2_MID, r);
    r = fmaf(k, -TK_TRIG_PIO2_LO, r);
    float r2 = r * r;
    float s = fmaf(fmaf(TK_TRIG_S3, r2, TK_TRIG_S2), r2, TK_TRIG_S1);
    s = fmaf(s * r2, r, r);
    float c = fmaf(fmaf(TK_TRIG_C3, r2, TK_TRIG_C2), r2, TK_TRIG_C1);
    c = fmaf(fmaf(c, r2, -0.5f), r2, 1.0f);
    /* cos x = sin(x + pi/2): one quadrant on. Out-of-range k (|x| > 1e9,
     * inf, NaN) picks an arbitrary quadrant on the GPU; r is then NaN or
     * meaningless anyway. */
    unsigned q = (fabsf(k) < 2147483648.0f ? (unsigned)(int)k : 0u) + (unsigned)is_cos;
    float v = q & 1 ? c : s;
    return q & 2 ? -v : v;
}

#endif
