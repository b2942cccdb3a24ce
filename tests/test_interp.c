/* The CPU interpreter against naive C references, op family by family:
 * elementwise and scalar ops, reductions and masks, mma. (Memory, the async
 * pipeline, control flow, ids/grid and run-time errors: test_interp_memory.c.)
 * Inputs are random and fresh on every run: the seed comes from the time
 * (or TK_TEST_SEED) and is printed so a failure can be replayed. Kernels are
 * built through the public builder API only (helpers: util/interp.h). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tk/tk.h"
#include "util/interp.h"

/* ---- elementwise --------------------------------------------------------- */
typedef tk_value *(*bin_builder)(tk_kernel *, tk_value *, tk_value *);
static float r_add(float a, float b) { return a + b; }
static float r_sub(float a, float b) { return a - b; }
static float r_mul(float a, float b) { return a * b; }
static float r_div(float a, float b) { return a / b; }
static float r_max(float a, float b) { return a > b ? a : b; }
static float r_min(float a, float b) { return a < b ? a : b; }
static const struct {
    bin_builder b;
    float (*f)(float, float);
} BIN[] = {{tk_add, r_add}, {tk_sub, r_sub}, {tk_mul, r_mul},
           {tk_div, r_div}, {tk_max, r_max}, {tk_min, r_min}};

/* Operand shapes: tile, scalar, per-row vec, per-col vec. */
typedef enum { M_TT, M_TS, M_ST, M_TR, M_RT, M_TC, M_CT, M_VV, M_VS, M_SV, M_COUNT } bmode;

/* Reference for output element (row R, col c) of mode m; vec modes use c < 16. */
static float bin_ref(int op, bmode m, const hbuf *A, const hbuf *B, const hbuf *VR, const hbuf *VC,
                     float s, int R, int c) {
    int w = R / 16, i = R % 16;
    float a = hget(A, (size_t)R * 32 + c), vr = hget(VR, (size_t)w * 16 + i);
    float vc = hget(VC, (size_t)w * 32 + c);
    float (*f)(float, float) = BIN[op].f;
    switch (m) {
    case M_TT: return f(a, hget(B, (size_t)R * 32 + c));
    case M_TS: return f(a, s);
    case M_ST: return f(s, a);
    case M_TR: return f(a, vr);
    case M_RT: return f(vr, a);
    case M_TC: return f(a, vc);
    case M_CT: return f(vc, a);
    case M_VV: return f(hget(VR, (size_t)w * 16 + c), hget(VC, (size_t)w * 32 + c));
    case M_VS: return f(hget(VR, (size_t)w * 16 + c), s);
    default: return f(s, hget(VR, (size_t)w * 16 + c));
    }
}

static void check_binary(int op, bmode m, tk_dtype dt, rng *r) {
    tk_kernel *k = kern("ew_binary", 2);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *B = tk_param_tensor(k, "B", dt, 2);
    tk_value *VR = tk_param_tensor(k, "VR", dt, 2), *VC = tk_param_tensor(k, "VC", dt, 2);
    tk_value *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 2), *OV = tk_param_tensor(k, "OV", TK_F32, 2);
    tk_value *w = tk_warp_id(k), *r0 = tk_mul(k, w, c32(k, 16)), *z = c32(k, 0);
    tk_value *ta = ld2(k, wtile(dt, 16, 32), A, r0, z, 0),
             *tb = ld2(k, wtile(dt, 16, 32), B, r0, z, 0);
    tk_value *vr = ld2(k, rvec(dt, 16), VR, w, z, 0), *vc = ld2(k, cvec(dt, 32), VC, w, z, 0);
    tk_value *vr2 = ld2(k, rvec(dt, 16), VC, w, z, 0);
    tk_value *x[M_COUNT] = {ta, ta, s, ta, vr, ta, vc, vr, vr, s};
    tk_value *y[M_COUNT] = {tb, s, ta, vr, ta, vc, ta, vr2, s, vr};
    /* stored as f32 (an exact cvt), so the op's own rounding shows */
    tk_value *res = tk_cvt(k, BIN[op].b(k, x[m], y[m]), TK_F32);
    bool vec = m >= M_VV;
    if (vec)
        st2(k, OV, w, z, res);
    else
        st2(k, O, r0, z, res);
    finish(k);
    hbuf hA = hb(dt, 1024), hB = hb(dt, 1024), hVR = hb(dt, 32), hVC = hb(dt, 64);
    hbuf hO = hb(TK_F32, 1024), hOV = hb(TK_F32, 32);
    hrand(&hA, r, -4, 4), hrand(&hB, r, -4, 4), hrand(&hVR, r, -4, 4), hrand(&hVC, r, -4, 4);
    float sv = frand(r, -4, 4);
    tk_arg args[7] = {targ(&hA, 2, 32, 32, 0, 0),
                      targ(&hB, 2, 32, 32, 0, 0),
                      targ(&hVR, 2, 2, 16, 0, 0),
                      targ(&hVC, 2, 2, 32, 0, 0),
                      tk_arg_f32(sv),
                      targ(&hO, 2, 32, 32, 0, 0),
                      targ(&hOV, 2, 2, 16, 0, 0)};
    run_ok(k, 7, args);
    for (int R = 0; R < (vec ? 2 : 32); R++)
        for (int c = 0; c < (vec ? 16 : 32); c++) {
            float want = rnd(dt, bin_ref(op, m, &hA, &hB, &hVR, &hVC, sv, vec ? 16 * R : R, c));
            float got = vec ? hget(&hOV, (size_t)R * 16 + c) : hget(&hO, (size_t)R * 32 + c);
            ck_assert_msg(same(got, want),
                          "binary op %d mode %d %s [%d][%d]: got %.9g want "
                          "%.9g (seed %llu)",
                          op, m, tk_dtype_name(dt), R, c, got, want, (unsigned long long)seed);
        }
    hfree(&hA), hfree(&hB), hfree(&hVR), hfree(&hVC), hfree(&hO), hfree(&hOV);
    tk_kernel_destroy(k);
}

START_TEST(elementwise_binary) {
    rng r = rng_for(__func__);
    tk_dtype dts[3] = {TK_F32, TK_BF16, TK_F16};
    for (int d = 0; d < 3; d++)
        for (int op = 0; op < 6; op++)
            for (int m = 0; m < M_COUNT; m++) check_binary(op, (bmode)m, dts[d], &r);
}
END_TEST

typedef tk_value *(*un_builder)(tk_kernel *, tk_value *);
static float u_neg(float a) { return -a; }
static float u_abs(float a) { return fabsf(a); }
static float u_rsqrt(float a) { return 1.0f / sqrtf(a); }
static const struct {
    un_builder b;
    float (*f)(float);
    bool positive; /* needs positive inputs */
} UN[] = {{tk_neg, u_neg, false},  {tk_abs, u_abs, false},    {tk_exp, expf, false},
          {tk_exp2, exp2f, false}, {tk_log, logf, true},      {tk_log2, log2f, true},
          {tk_sqrt, sqrtf, true},  {tk_rsqrt, u_rsqrt, true}, {tk_sin, sinf, false},
          {tk_cos, cosf, false}};
enum { N_UN = sizeof UN / sizeof UN[0] }; /* op N_UN: CVT */

/* Unary op `op` (or, op == N_UN, CVT to `to`) on a 32x16 tile and a vec. */
static void check_unary(int op, tk_dtype dt, tk_dtype to, rng *r) {
    tk_kernel *k = kern("ew_unary", 1);
    tk_dtype od = op == N_UN ? to : dt; /* the result's dtype; stored as f32 */
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *OV = tk_param_tensor(k, "OV", TK_F32, 1), *z = c32(k, 0);
    tk_value *t = ld2(k, wtile(dt, 32, 16), A, z, z, 0);
    tk_value *idx1[1] = {z}, *vi[2] = {z, z};
    tk_value *vec = tk_load(k, cvec(dt, 16), A, vi, 0);
    bool cvt = op == N_UN;
    tk_value *rt = tk_cvt(k, cvt ? tk_cvt(k, t, to) : UN[op].b(k, t), TK_F32);
    tk_value *rv = tk_cvt(k, cvt ? tk_cvt(k, vec, to) : UN[op].b(k, vec), TK_F32);
    st2(k, O, z, z, rt);
    tk_store(k, OV, idx1, rv);
    finish(k);
    hbuf hA = hb(dt, 512), hO = hb(TK_F32, 512), hOV = hb(TK_F32, 16);
    bool pos = !cvt && UN[op].positive;
    hrand(&hA, r, pos ? 0.01f : -6.0f, pos ? 50.0f : 6.0f);
    tk_arg args[3] = {targ(&hA, 2, 32, 16, 0, 0), targ(&hO, 2, 32, 16, 0, 0),
                      targ(&hOV, 1, 16, 0, 0, 0)};
    run_ok(k, 3, args);
    for (size_t i = 0; i < 512; i++) {
        float a = hget(&hA, i), want = rnd(od, cvt ? a : UN[op].f(a));
        EXPECT_F("unary tile", i, hget(&hO, i), want);
        if (i < 16) EXPECT_F("unary vec", i, hget(&hOV, i), want);
    }
    hfree(&hA), hfree(&hO), hfree(&hOV);
    tk_kernel_destroy(k);
}

START_TEST(elementwise_unary) {
    rng r = rng_for(__func__);
    tk_dtype dts[3] = {TK_F32, TK_BF16, TK_F16};
    for (int d = 0; d < 3; d++) {
        for (int op = 0; op < N_UN; op++) check_unary(op, dts[d], dts[d], &r);
        for (int to = 0; to < 3; to++) check_unary(N_UN, dts[d], dts[to], &r);
    }
}
END_TEST

/* sin/cos at rotary-embedding angles (position x frequency, |x| up to 1e5),
 * on a tile and on scalars (the scalar path grid evaluation shares): the
 * interpreter gives libm's sinf/cosf, within 1.2e-7 of double sin/cos. */
enum { NT = 4 };
START_TEST(trig_large) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("trig", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *f[NT], *OS = tk_param_tensor(k, "OS", TK_F32, 1), *z = c32(k, 0);
    const char *names[NT] = {"f0", "f1", "f2", "f3"};
    for (int i = 0; i < NT; i++) f[i] = tk_param_scalar(k, names[i], TK_F32);
    tk_value *t = ld2(k, wtile(TK_F32, 32, 16), A, z, z, 0);
    st2(k, O, z, z, tk_sin(k, t));
    st2(k, O, c32(k, 32), z, tk_cos(k, t));
    for (int i = 0; i < 2 * NT; i++) {
        tk_value *v = i < NT ? tk_sin(k, f[i]) : tk_cos(k, f[i - NT]), *idx[1] = {c32(k, 16 * i)};
        tk_store(k, OS, idx, tk_fill(k, cvec(TK_F32, 16), v));
    }
    finish(k);
    hbuf hA = hb(TK_F32, 512), hO = hb(TK_F32, 1024), hOS = hb(TK_F32, 16 * 2 * NT);
    hrand(&hA, &r, -1e5f, 1e5f);
    const float fixed[6] = {0.0f, 1e5f, -1e5f, (float)M_PI_2, 1000 * (float)M_PI_2, 63661.5f};
    for (int i = 0; i < 6; i++) hset(&hA, (size_t)i, fixed[i]);
    float fv[NT] = {1e5f, -99999.9f, frand(&r, -1e5f, 1e5f), 0.5f};
    tk_arg args[3 + NT] = {targ(&hA, 2, 32, 16, 0, 0), targ(&hO, 2, 64, 16, 0, 0),
                           targ(&hOS, 1, 16 * 2 * NT, 0, 0, 0)};
    for (int i = 0; i < NT; i++) args[3 + i] = tk_arg_f32(fv[i]);
    run_ok(k, 3 + NT, args);
    for (size_t i = 0; i < 512; i++) {
        float a = hget(&hA, i);
        EXPECT_F("sin", i, hget(&hO, i), sinf(a));
        EXPECT_F("cos", i, hget(&hO, 512 + i), cosf(a));
        ck_assert_double_le(fabs(sinf(a) - sin((double)a)) + fabs(cosf(a) - cos((double)a)),
                            1.2e-7);
    }
    for (int i = 0; i < 2 * NT; i++) {
        float a = fv[i % NT], want = i < NT ? sinf(a) : cosf(a);
        EXPECT_F("scalar sin/cos", i, hget(&hOS, (size_t)(16 * i + 15)), want);
    }
    hfree(&hA), hfree(&hO), hfree(&hOS);
    tk_kernel_destroy(k);
}
END_TEST

/* Scalar ops (elementwise on scalars and the scalar family): each result is
 * broadcast into a 16-vector and stored at O[16*i]. */
enum { NS = 32 };
START_TEST(scalar_ops) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("scalars", 1);
    tk_value *x = tk_param_scalar(k, "x", TK_I32), *y = tk_param_scalar(k, "y", TK_I32);
    tk_value *p = tk_param_scalar(k, "p", TK_I64), *q = tk_param_scalar(k, "q", TK_I64);
    tk_value *f = tk_param_scalar(k, "f", TK_F32), *g = tk_param_scalar(k, "g", TK_F32);
    tk_value *O = tk_param_tensor(k, "O", TK_F32, 1);
    tk_value *one = tk_const_f32(k, 1), *zero = tk_const_f32(k, 0);
    tk_value *lt = tk_lt(k, x, y), *gt = tk_gt(k, x, y);
    tk_value *v[NS] = {tk_add(k, x, y),
                       tk_sub(k, x, y),
                       tk_mul(k, x, y),
                       tk_div(k, x, y),
                       tk_max(k, x, y),
                       tk_min(k, x, y),
                       tk_rem(k, x, y),
                       tk_ceil_div(k, tk_abs(k, x), tk_abs(k, y)),
                       tk_neg(k, x),
                       tk_abs(k, x),
                       lt,
                       tk_le(k, x, y),
                       gt,
                       tk_ge(k, x, y),
                       tk_eq(k, x, x),
                       tk_ne(k, x, y),
                       tk_and(k, lt, gt),
                       tk_or(k, lt, gt),
                       tk_select(k, lt, x, y),
                       tk_cvt(k, f, TK_I32),
                       tk_cvt(k, x, TK_F32),
                       tk_add(k, f, g),
                       tk_div(k, f, g),
                       tk_mul(k, p, q),
                       tk_add(k, tk_const_i32(k, INT32_MAX), c32(k, 1)),
                       tk_ceil_div(k, c32(k, -7), c32(k, 2)),
                       tk_rem(k, c32(k, -7), c32(k, 2)),
                       tk_cvt(k, tk_const_f32(k, 1e10f), TK_I32),
                       tk_cvt(k, tk_const_f32(k, NAN), TK_I32),
                       tk_cvt(k, f, TK_BOOL),
                       tk_div(k, p, q),
                       tk_cvt(k, tk_cvt(k, p, TK_I32), TK_I64)};
    for (int i = 0; i < NS; i++) {
        tk_value *val = v[i];
        if (i == 10 || i == 11 || i == 12 || i == 13 || i == 14 || i == 15 || i == 16 || i == 17 ||
            i == 29)
            val = tk_select(k, val, one, zero); /* bool -> 1/0 */
        tk_value *idx[1] = {c32(k, 16 * i)};
        tk_store(k, O, idx, tk_fill(k, cvec(TK_F32, 16), val));
    }
    finish(k);
    int32_t xv = irand(&r, -1000, 1000), yv = irand(&r, 1, 1000) * (irand(&r, 0, 1) ? 1 : -1);
    int64_t pv = (int64_t)irand(&r, -100000, 100000), qv = irand(&r, 1, 300);
    float fv = frand(&r, -100, 100), gv = frand(&r, 0.5f, 10);
    hbuf hO = hb(TK_F32, 16 * NS);
    tk_arg args[7] = {tk_arg_i32(xv),
                      tk_arg_i32(yv),
                      tk_arg_i64(pv),
                      tk_arg_i64(qv),
                      tk_arg_f32(fv),
                      tk_arg_f32(gv),
                      targ(&hO, 1, 16 * NS, 0, 0, 0)};
    run_ok(k, 7, args);
    int32_t ax = abs(xv), ay = abs(yv);
    float want[NS] = {(float)(xv + yv),
                      (float)(xv - yv),
                      (float)(xv * yv),
                      (float)(xv / yv),
                      (float)(xv > yv ? xv : yv),
                      (float)(xv < yv ? xv : yv),
                      (float)(xv % yv),
                      (float)((ax + ay - 1) / ay),
                      (float)-xv,
                      (float)ax,
                      xv<yv, xv <= yv, xv>
                          yv,
                      xv >= yv,
                      1,
                      xv != yv,
                      0,
                      xv < yv || xv > yv,
                      (float)(xv < yv ? xv : yv),
                      (float)(int32_t)fv,
                      (float)xv,
                      fv + gv,
                      fv / gv,
                      (float)(pv * qv),
                      -2147483648.0f,
                      -3,
                      -1,
                      2147483648.0f,
                      0,
                      fv != 0,
                      (float)(pv / qv),
                      (float)(int32_t)pv};
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < 16; j++) EXPECT_F("scalar result", i, hget(&hO, 16 * i + j), want[i]);
    hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- reductions and masks ------------------------------------------------ */
static tk_value *(*const RED[4])(tk_kernel *, tk_value *) = {tk_row_max, tk_row_sum, tk_col_max,
                                                             tk_col_sum};

static void check_reduce(int op, tk_dtype dt, rng *r) {
    bool row = op < 2, mx = op % 2 == 0;
    tk_kernel *k = kern("reduce", 2);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *w = tk_warp_id(k), *z = c32(k, 0);
    tk_value *t = ld2(k, wtile(dt, 16, 32), A, tk_mul(k, w, c32(k, 16)), z, 0);
    st2(k, O, w, z, tk_cvt(k, RED[op](k, t), TK_F32)); /* exact: rounding shows */
    finish(k);
    int len = row ? 16 : 32;
    hbuf hA = hb(dt, 1024), hO = hb(TK_F32, 2 * (size_t)len);
    hrand(&hA, r, -8, 8);
    tk_arg args[2] = {targ(&hA, 2, 32, 32, 0, 0), targ(&hO, 2, 2, len, 0, 0)};
    run_ok(k, 2, args);
    for (int wi = 0; wi < 2; wi++)
        for (int v = 0; v < len; v++) {
            float acc = 0;
            for (int e = 0; e < (row ? 32 : 16); e++) {
                int R = 16 * wi + (row ? v : e), C = row ? e : v;
                float a = hget(&hA, (size_t)R * 32 + C);
                acc = e == 0 ? a : mx ? (a > acc ? a : acc) : acc + a;
            }
            EXPECT_F("reduction", wi * len + v, hget(&hO, (size_t)(wi * len + v)), rnd(dt, acc));
        }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}

START_TEST(reductions) {
    rng r = rng_for(__func__);
    tk_dtype dts[3] = {TK_F32, TK_BF16, TK_F16};
    for (int d = 0; d < 3; d++)
        for (int op = 0; op < 4; op++) check_reduce(op, dts[d], &r);
}
END_TEST

/* max_all of a bf16 tile and of an f32 vector: one f32 value per warp, in
 * every lane; it steers a warp-uniform if (warp 1's tile is all below 0). */
START_TEST(max_all) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("max_all", 2);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *w = tk_warp_id(k), *z = c32(k, 0);
    tk_value *tb = ld2(k, wtile(TK_BF16, 16, 32), A, tk_mul(k, w, c32(k, 16)), z, 0);
    tk_value *t = tk_cvt(k, tb, TK_F32);
    tk_value *mt = tk_max_all(k, tb), *mv = tk_max_all(k, tk_row_sum(k, t)); /* bf16, f32 */
    tk_if_begin(k, tk_gt(k, mt, tk_const_f32(k, 0.0f)));
    tk_value *pos = tk_add(k, mv, tk_const_f32(k, 1000.0f));
    tk_else(k, 1, &pos);
    tk_value *neg = mv, *res;
    tk_if_end(k, 1, &neg, &res);
    tk_value *row = tk_fill(k, tk_vec_type(TK_F32, 32, TK_PER_COL, TK_WARP, TK_ROW), mt);
    tk_value *o0[2] = {w, z}, *o1[2] = {w, c32(k, 32)};
    tk_store(k, O, o0, row);
    tk_store(k, O, o1, tk_fill(k, tk_vec_type(TK_F32, 32, TK_PER_COL, TK_WARP, TK_ROW), res));
    finish(k);
    hbuf hA = hb(TK_BF16, 1024), hO = hb(TK_F32, 128);
    hrand(&hA, &r, -8, 8);
    for (int i = 512; i < 1024; i++) hset(&hA, (size_t)i, -fabsf(hget(&hA, (size_t)i)) - 0.5f);
    tk_arg args[2] = {targ(&hA, 2, 32, 32, 0, 0), targ(&hO, 2, 2, 64, 0, 0)};
    run_ok(k, 2, args);
    for (int wi = 0; wi < 2; wi++) {
        float mx = -INFINITY, ms = -INFINITY;
        for (int i = 16 * wi; i < 16 * wi + 16; i++) {
            float sum = 0;
            for (int j = 0; j < 32; j++) {
                float a = hget(&hA, (size_t)i * 32 + j);
                mx = fmaxf(mx, a), sum += a;
            }
            ms = fmaxf(ms, sum);
        }
        float want = mx > 0 ? ms + 1000.0f : ms;
        for (int j = 0; j < 32; j++) {
            EXPECT_F("max_all of the tile", wi * 64 + j, hget(&hO, (size_t)(wi * 64 + j)), mx);
            EXPECT_F("max_all steering an if", wi * 64 + 32 + j,
                     hget(&hO, (size_t)(wi * 64 + 32 + j)), want);
        }
    }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* Row sum of a warpgroup tile: rows 0..63 of the group. */
START_TEST(reduction_warpgroup) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("reduce_wg", 4);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 2), *O = tk_param_tensor(k, "O", TK_BF16, 1);
    tk_value *z = c32(k, 0), *idx[1] = {z};
    tk_value *t = ld2(k, tk_tile_type(TK_BF16, 64, 32, TK_WARPGROUP, TK_ROW), A, z, z, 0);
    tk_store(k, O, idx, tk_row_sum(k, t));
    finish(k);
    hbuf hA = hb(TK_BF16, 64 * 32), hO = hb(TK_BF16, 64);
    hrand(&hA, &r, -3, 3);
    tk_arg args[2] = {targ(&hA, 2, 64, 32, 0, 0), targ(&hO, 1, 64, 0, 0, 0)};
    run_ok(k, 2, args);
    for (int i = 0; i < 64; i++) {
        float acc = hget(&hA, (size_t)i * 32);
        for (int j = 1; j < 32; j++) acc += hget(&hA, (size_t)i * 32 + j);
        EXPECT_F("warpgroup row sum", i, hget(&hO, (size_t)i), rnd(TK_BF16, acc));
    }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* A warpgroup running partly: max_all of a warpgroup tile is each warp's
 * max over its 16-row band, an if on it splits the warpgroup, and merges,
 * scalar operands and stores follow the bands. Bands 1 and 3 hold a value
 * above 0.5, bands 0 and 2 none. */
START_TEST(warpgroup_bands) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("wg_bands", 4);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *S = tk_param_tensor(k, "S", TK_F32, 2), *V = tk_param_tensor(k, "V", TK_F32, 1);
    tk_value *z = c32(k, 0), *iv[1] = {z};
    tk_value *t = ld2(k, tk_tile_type(TK_F32, 64, 32, TK_WARPGROUP, TK_ROW), A, z, z, 0);
    tk_value *m = tk_max_all(k, t), *rs = tk_row_sum(k, t);
    tk_if_begin(k, tk_gt(k, m, tk_const_f32(k, 0.5f)));
    st2(k, S, z, z, t); /* only bands 1 and 3 store */
    tk_value *up[2] = {tk_mul(k, t, tk_const_f32(k, 2.0f)), tk_add(k, rs, tk_const_f32(k, 100.0f))};
    tk_else(k, 2, up);
    tk_value *kept[2] = {t, rs}, *res[2];
    tk_if_end(k, 2, kept, res);
    st2(k, O, z, z, res[0]);
    st2(k, O, z, c32(k, 32), tk_add(k, t, m)); /* each band adds its own max */
    tk_store(k, V, iv, res[1]);
    finish(k);
    hbuf hA = hb(TK_F32, 64 * 32), hO = hb(TK_F32, 64 * 64), hS = hb(TK_F32, 64 * 32);
    hbuf hV = hb(TK_F32, 64);
    hrand(&hA, &r, -4, 0.4f);
    hset(&hA, (size_t)irand(&r, 16, 31) * 32 + (size_t)irand(&r, 0, 31), 3.0f);
    hset(&hA, (size_t)irand(&r, 48, 63) * 32 + (size_t)irand(&r, 0, 31), 0.75f);
    hfill(&hS, -7.0f);
    tk_arg args[4] = {targ(&hA, 2, 64, 32, 0, 0), targ(&hO, 2, 64, 64, 0, 0),
                      targ(&hS, 2, 64, 32, 0, 0), targ(&hV, 1, 64, 0, 0, 0)};
    run_ok(k, 4, args);
    for (int b = 0; b < 4; b++) {
        float mx = -INFINITY;
        for (int i = 16 * b; i < 16 * b + 16; i++)
            for (int j = 0; j < 32; j++) mx = fmaxf(mx, hget(&hA, (size_t)i * 32 + j));
        bool up_b = b % 2 == 1;
        for (int i = 16 * b; i < 16 * b + 16; i++) {
            float sum = 0;
            for (int j = 0; j < 32; j++) {
                size_t e = (size_t)i * 32 + (size_t)j;
                float a = hget(&hA, e);
                sum += a;
                EXPECT_F("the band's branch", e, hget(&hO, (size_t)i * 64 + j), up_b ? 2 * a : a);
                EXPECT_F("the band's own max", e, hget(&hO, (size_t)i * 64 + 32 + j), a + mx);
                EXPECT_F("a store in the branch", e, hget(&hS, e), up_b ? a : -7.0f);
            }
            float want = up_b ? sum + 100.0f : sum, got = hget(&hV, (size_t)i);
            ck_assert_msg(fabsf(got - want) <= 1e-4f * (1 + fabsf(want)),
                          "row %d's sum: got %g want %g (seed %llu)", i, got, want,
                          (unsigned long long)seed);
        }
    }
    hfree(&hA), hfree(&hO), hfree(&hS), hfree(&hV);
    tk_kernel_destroy(k);
}
END_TEST

static bool mask_drop(int kind, int a, int b, int i, int j) {
    return kind == TK_MASK_CAUSAL ? b + j > a + i : kind == TK_MASK_COLS ? a + j >= b : a + i >= b;
}

static void check_mask(int kind, tk_dtype dt, float fill, rng *r) {
    tk_kernel *k = kern("mask", 1);
    tk_value *A = tk_param_tensor(k, "A", dt, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *a = tk_param_scalar(k, "a", TK_I32), *b = tk_param_scalar(k, "b", TK_I64);
    tk_value *z = c32(k, 0);
    tk_value *t = ld2(k, wtile(dt, 32, 32), A, z, z, 0);
    st2(k, O, z, z, tk_cvt(k, tk_mask(k, t, (tk_mask_kind)kind, a, b, fill), TK_F32));
    finish(k);
    hbuf hA = hb(dt, 1024), hO = hb(TK_F32, 1024);
    hrand(&hA, r, -5, 5);
    int av = irand(r, -40, 40), bv = irand(r, -40, 40);
    tk_arg args[4] = {targ(&hA, 2, 32, 32, 0, 0), targ(&hO, 2, 32, 32, 0, 0), tk_arg_i32(av),
                      tk_arg_i64(bv)};
    run_ok(k, 4, args);
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 32; j++) {
            float want = mask_drop(kind, av, bv, i, j) ? rnd(dt, fill) : hget(&hA, i * 32 + j);
            ck_assert_msg(same(hget(&hO, i * 32 + j), want),
                          "mask kind %d a=%d b=%d (%d,%d): "
                          "got %g want %g (seed %llu)",
                          kind, av, bv, i, j, hget(&hO, i * 32 + j), want,
                          (unsigned long long)seed);
        }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}

START_TEST(masks) {
    rng r = rng_for(__func__);
    for (int kind = 0; kind < 3; kind++)
        for (int rep = 0; rep < 4; rep++) {
            check_mask(kind, TK_F32, -INFINITY, &r);
            check_mask(kind, TK_BF16, 0.1f, &r);
        }
}
END_TEST

/* ---- mma ----------------------------------------------------------------- */
enum { MM = 32, MN = 16, MK = 48 };

static void check_mma(int kind, tk_dtype dt, bool acc, rng *r) {
    bool at = kind == TK_MMA_ATB || kind == TK_MMA_ATBT,
         bt = kind == TK_MMA_ABT || kind == TK_MMA_ATBT;
    tk_kernel *k = kern("mma", 2);
    tk_value *A = tk_param_tensor(k, "A", dt, 3), *B = tk_param_tensor(k, "B", dt, 3);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 3), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *w = tk_warp_id(k), *z = c32(k, 0), *idx[3] = {w, z, z};
    tk_type ta = at ? tk_tile_type(dt, MK, MM, TK_WARP, TK_COL) : wtile(dt, MM, MK);
    tk_type tb = bt ? wtile(dt, MN, MK) : tk_tile_type(dt, MK, MN, TK_WARP, TK_COL);
    tk_value *a = tk_load(k, ta, A, idx, 0), *b = tk_load(k, tb, B, idx, 0);
    tk_value *c = acc ? tk_load(k, wtile(TK_F32, MM, MN), C, idx, 0) : NULL;
    tk_store(k, O, idx, tk_mma(k, (tk_mma_kind)kind, a, b, c));
    finish(k);
    hbuf hA = hb(dt, 2 * MM * MK), hB = hb(dt, 2 * MK * MN), hC = hb(TK_F32, 2 * MM * MN);
    hbuf hO = hb(TK_F32, 2 * MM * MN);
    hrand(&hA, r, -2, 2), hrand(&hB, r, -2, 2), hrand(&hC, r, -10, 10);
    tk_arg args[4] = {at ? targ(&hA, 3, 2, MK, MM, 0) : targ(&hA, 3, 2, MM, MK, 0),
                      bt ? targ(&hB, 3, 2, MN, MK, 0) : targ(&hB, 3, 2, MK, MN, 0),
                      targ(&hC, 3, 2, MM, MN, 0), targ(&hO, 3, 2, MM, MN, 0)};
    run_ok(k, 4, args);
    for (int wi = 0; wi < 2; wi++)
        for (int m = 0; m < MM; m++)
            for (int n = 0; n < MN; n++) {
                size_t o = (size_t)wi * MM * MN + (size_t)m * MN + n;
                float s = acc ? hget(&hC, o) : 0.0f;
                for (int kk = 0; kk < MK; kk++) {
                    float x = hget(&hA, (size_t)wi * MM * MK + (at ? kk * MM + m : m * MK + kk));
                    float y = hget(&hB, (size_t)wi * MK * MN + (bt ? n * MK + kk : kk * MN + n));
                    s += x * y;
                }
                ck_assert_msg(same(hget(&hO, o), s),
                              "mma kind %d %s acc %d [%d][%d][%d]: got "
                              "%.9g want %.9g (seed %llu)",
                              kind, tk_dtype_name(dt), acc, wi, m, n, hget(&hO, o), s,
                              (unsigned long long)seed);
            }
    hfree(&hA), hfree(&hB), hfree(&hC), hfree(&hO);
    tk_kernel_destroy(k);
}

START_TEST(mma_warp) {
    rng r = rng_for(__func__);
    for (int kind = 0; kind < 4; kind++)
        for (int acc = 0; acc < 2; acc++) {
            check_mma(kind, TK_BF16, acc, &r);
            check_mma(kind, TK_F16, acc, &r);
        }
}
END_TEST

/* Warpgroup A (128 rows, two groups of 4 warps): row m of group g uses the
 * B of warp 4g + (m % 64) / 16. Accumulating and overwriting. */
START_TEST(mma_warpgroup) {
    rng r = rng_for(__func__);
    enum { WM = 128, WN = 16, WK = 32 };
    tk_kernel *k = kern("mma_wg", 8);
    tk_value *A = tk_param_tensor(k, "A", TK_BF16, 3), *B = tk_param_tensor(k, "B", TK_BF16, 3);
    tk_value *C = tk_param_tensor(k, "C", TK_F32, 3), *O = tk_param_tensor(k, "O", TK_F32, 3);
    tk_value *O2 = tk_param_tensor(k, "O2", TK_F32, 3);
    tk_value *g = tk_warpgroup_id(k), *w = tk_warp_id(k), *z = c32(k, 0);
    tk_value *gi[3] = {g, z, z}, *wi[3] = {w, z, z};
    tk_value *a = tk_load(k, tk_tile_type(TK_BF16, WM, WK, TK_WARPGROUP, TK_ROW), A, gi, 0);
    tk_value *b = tk_load(k, tk_tile_type(TK_BF16, WK, WN, TK_WARP, TK_COL), B, wi, 0);
    tk_value *c = tk_load(k, tk_tile_type(TK_F32, WM, WN, TK_WARPGROUP, TK_ROW), C, gi, 0);
    tk_store(k, O, gi, tk_mma(k, TK_MMA_AB, a, b, c));
    tk_store(k, O2, gi, tk_mma(k, TK_MMA_AB, a, b, NULL));
    finish(k);
    hbuf hA = hb(TK_BF16, 2 * WM * WK), hB = hb(TK_BF16, 8 * WK * WN);
    hbuf hC = hb(TK_F32, 2 * WM * WN), hO = hb(TK_F32, 2 * WM * WN), hO2 = hb(TK_F32, 2 * WM * WN);
    hrand(&hA, &r, -2, 2), hrand(&hB, &r, -2, 2), hrand(&hC, &r, -4, 4);
    tk_arg args[5] = {targ(&hA, 3, 2, WM, WK, 0), targ(&hB, 3, 8, WK, WN, 0),
                      targ(&hC, 3, 2, WM, WN, 0), targ(&hO, 3, 2, WM, WN, 0),
                      targ(&hO2, 3, 2, WM, WN, 0)};
    run_ok(k, 5, args);
    for (int gg = 0; gg < 2; gg++)
        for (int m = 0; m < WM; m++)
            for (int n = 0; n < WN; n++) {
                size_t o = (size_t)gg * WM * WN + (size_t)m * WN + n;
                int bw = 4 * gg + (m % 64) / 16;
                float s = 0;
                for (int kk = 0; kk < WK; kk++)
                    s += hget(&hA, (size_t)gg * WM * WK + (size_t)m * WK + kk) *
                         hget(&hB, (size_t)bw * WK * WN + (size_t)kk * WN + n);
                float sc = hget(&hC, o);
                for (int kk = 0; kk < WK; kk++)
                    sc += hget(&hA, (size_t)gg * WM * WK + (size_t)m * WK + kk) *
                          hget(&hB, (size_t)bw * WK * WN + (size_t)kk * WN + n);
                EXPECT_F("warpgroup mma", o, hget(&hO, o), sc);
                EXPECT_F("warpgroup mma (no C)", o, hget(&hO2, o), s);
            }
    hfree(&hA), hfree(&hB), hfree(&hC), hfree(&hO), hfree(&hO2);
    tk_kernel_destroy(k);
}
END_TEST

/* Epilogue ops on a 32x32 f32 tile (one warp): leaky ReLU through a mask,
 * a where against a per-row vector, the mask as 0/1, tanh / erf / sigmoid,
 * and a tile rebuilt from its four 16x16 quarters in another order. */
START_TEST(epilogue_ops) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("epi", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z = c32(k, 0), *zf = tk_const_f32(k, 0),
             *x = ld2(k, wtile(TK_F32, 32, 32), A, z, z, 0);
    tk_value *m = tk_gt(k, x, zf);
    tk_value *out[7] = {
        tk_select(k, m, x, tk_mul(k, x, tk_const_f32(k, 0.1f))),
        tk_select(k, tk_lt(k, tk_row_max(k, x), x), zf, x), /* never: x <= its row max */
        tk_cvt(k, m, TK_F32),
        tk_tanh(k, x),
        tk_erf(k, x),
        tk_sigmoid(k, x),
        tk_concat(k, 0,
                  tk_concat(k, 1, tk_slice(k, x, 16, 16, 16, 16), tk_slice(k, x, 16, 0, 16, 16)),
                  tk_slice(k, x, 0, 0, 16, 32)),
    };
    for (int i = 0; i < 7; i++) st2(k, O, c32(k, 32 * i), z, out[i]);
    finish(k);
    hbuf hA = hb(TK_F32, 1024), hO = hb(TK_F32, 7 * 1024);
    hrand(&hA, &r, -3, 3);
    hset(&hA, 0, 0.0f), hset(&hA, 1, -0.0f), hset(&hA, 2, 5.0f), hset(&hA, 3, -12.0f);
    tk_arg args[2] = {targ(&hA, 2, 32, 32, 0, 0), targ(&hO, 2, 7 * 32, 32, 0, 0)};
    run_ok(k, 2, args);
    for (size_t e = 0; e < 1024; e++) {
        int i = (int)e / 32, j = (int)e % 32;
        float a = hget(&hA, e);
        EXPECT_F("leaky", e, hget(&hO, e), a > 0 ? a : a * 0.1f);
        EXPECT_F("where", e, hget(&hO, 1024 + e), a);
        EXPECT_F("mask", e, hget(&hO, 2048 + e), a > 0 ? 1.0f : 0.0f);
        EXPECT_F("tanh", e, hget(&hO, 3072 + e), tanhf(a));
        EXPECT_F("erf", e, hget(&hO, 4096 + e), erff(a));
        EXPECT_F("sigmoid", e, hget(&hO, 5120 + e), 1.0f / (1.0f + expf(-a)));
        int si = i < 16 ? i + 16 : i - 16, sj = i < 16 ? (j + 16) % 32 : j;
        EXPECT_F("slices", e, hget(&hO, 6144 + e), hget(&hA, (size_t)si * 32 + sj));
    }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* tk_pair_swap of a 32x32 f32 tile and of its PER_COL maxima, and tk_iota:
 * 1000·row + col from a tile's two axes and from a PER_ROW / PER_COL pair. */
START_TEST(pairs_iota) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("pairs", 1);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z = c32(k, 0), *x = ld2(k, wtile(TK_F32, 32, 32), A, z, z, 0);
    tk_type t = wtile(TK_F32, 32, 32);
    tk_value *th = tk_const_f32(k, 1000.0f);
    tk_value *vr = tk_iota(k, tk_vec_type(TK_F32, 32, TK_PER_ROW, TK_WARP, TK_ROW), TK_PER_ROW);
    tk_value *vc = tk_iota(k, tk_vec_type(TK_F32, 32, TK_PER_COL, TK_WARP, TK_ROW), TK_PER_COL);
    tk_value *out[4] = {
        tk_pair_swap(k, x),
        tk_add(k, tk_zeros(k, t), tk_pair_swap(k, tk_col_max(k, x))),
        tk_add(k, tk_mul(k, tk_iota(k, t, TK_PER_ROW), th), tk_iota(k, t, TK_PER_COL)),
        tk_add(k, tk_mul(k, tk_add(k, tk_zeros(k, t), vr), th), vc),
    };
    for (int i = 0; i < 4; i++) st2(k, O, c32(k, 32 * i), z, out[i]);
    finish(k);
    hbuf hA = hb(TK_F32, 1024), hO = hb(TK_F32, 4 * 1024);
    hrand(&hA, &r, -3, 3);
    tk_arg args[2] = {targ(&hA, 2, 32, 32, 0, 0), targ(&hO, 2, 4 * 32, 32, 0, 0)};
    run_ok(k, 2, args);
    for (size_t e = 0; e < 1024; e++) {
        int i = (int)e / 32, j = (int)e % 32;
        float m = -INFINITY;
        for (int ii = 0; ii < 32; ii++) m = fmaxf(m, hget(&hA, (size_t)ii * 32 + (j ^ 1)));
        EXPECT_F("pair_swap", e, hget(&hO, e), hget(&hA, (size_t)i * 32 + (j ^ 1)));
        EXPECT_F("pair_swap vec", e, hget(&hO, 1024 + e), m);
        EXPECT_F("iota tile", e, hget(&hO, 2048 + e), (float)(1000 * i + j));
        EXPECT_F("iota vecs", e, hget(&hO, 3072 + e), (float)(1000 * i + j));
    }
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* tk_col_bcast of each warp's 32x48 tile (rows 32w..) at columns 0, 19 and
 * 47 (O rows 128i + 32w ..), and of a 64x16 warpgroup tile at column 9 (O
 * rows 384..): every column is the chosen one. */
START_TEST(col_bcast) {
    rng r = rng_for(__func__);
    tk_kernel *k = kern("col_bcast", 4);
    tk_value *A = tk_param_tensor(k, "A", TK_F32, 2), *O = tk_param_tensor(k, "O", TK_F32, 2);
    tk_value *z = c32(k, 0), *r0 = tk_mul(k, tk_warp_id(k), c32(k, 32));
    tk_value *x = ld2(k, wtile(TK_F32, 32, 48), A, r0, z, 0);
    static const int cols[3] = {0, 19, 47};
    for (int i = 0; i < 3; i++)
        st2(k, O, tk_add(k, r0, c32(k, 128 * i)), z, tk_col_bcast(k, x, cols[i]));
    tk_type gt = tk_tile_type(TK_F32, 64, 16, TK_WARPGROUP, TK_ROW);
    st2(k, O, c32(k, 384), z, tk_col_bcast(k, ld2(k, gt, A, z, z, 0), 9));
    finish(k);
    hbuf hA = hb(TK_F32, 128 * 48), hO = hb(TK_F32, 448 * 48);
    hrand(&hA, &r, -3, 3);
    hfill(&hO, NAN);
    tk_arg args[2] = {targ(&hA, 2, 128, 48, 0, 0), targ(&hO, 2, 448, 48, 0, 0)};
    run_ok(k, 2, args);
    for (int i = 0; i < 384; i++)
        for (int j = 0; j < 48; j++)
            EXPECT_F("col_bcast", (size_t)i * 48 + j, hget(&hO, (size_t)i * 48 + j),
                     hget(&hA, (size_t)(i % 128) * 48 + cols[i / 128]));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 16; j++) /* the 16-column tile's store leaves the rest NaN */
            EXPECT_F("col_bcast wg", (size_t)(384 + i) * 48 + j,
                     hget(&hO, (size_t)(384 + i) * 48 + j), hget(&hA, (size_t)i * 48 + 9));
    hfree(&hA), hfree(&hO);
    tk_kernel_destroy(k);
}
END_TEST

/* ---- main ---------------------------------------------------------------- */
int main(void) {
    const interp_test tests[] = {{"elementwise", elementwise_binary},
                                 {"elementwise", elementwise_unary},
                                 {"elementwise", trig_large},
                                 {"elementwise", epilogue_ops},
                                 {"elementwise", pairs_iota},
                                 {"elementwise", col_bcast},
                                 {"scalar", scalar_ops},
                                 {"reduce", reductions},
                                 {"reduce", max_all},
                                 {"reduce", reduction_warpgroup},
                                 {"reduce", warpgroup_bands},
                                 {"reduce", masks},
                                 {"mma", mma_warp},
                                 {"mma", mma_warpgroup}};
    return interp_run("test_interp", "interp", tests, sizeof tests / sizeof tests[0]);
}
