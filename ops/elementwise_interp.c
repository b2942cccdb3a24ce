/* Interpreter semantics of the elementwise ops (ops/elementwise.c).
 *
 * Float math is done in float, as the GPU does (expf, exp2f, logf, log2f,
 * sqrtf, 1/sqrtf, sinf, cosf, tanhf, erff, 1/(1+expf(-x)); max/min ignore a
 * NaN operand like PTX max.f32); libm's sinf/cosf reduce any argument
 * exactly, the GPU's polynomial is within 2e-6 for |x| <= 1e5, its tanh is
 * tanh.approx (relative error 2^-11), its erf a polynomial within 2e-7
 * (ops/erf.h; ops/elementwise_nv.c). Compares follow C (a NaN compares
 * unequal to everything) and give 0/1 (a bool tile holds 0.0f/1.0f). Every
 * bf16/f16 result is rounded to its dtype (RNE) as it is produced; because
 * f32 carries more than 2*8+2 bits, computing +-*÷/sqrt in float and then
 * rounding gives the correctly rounded bf16/f16 result (no double-rounding
 * error). Integer scalars wrap (two's complement); a zero divisor is
 * TK_ERR_RUNTIME. CVT: float->int truncates toward zero and saturates (NaN
 * gives 0) like PTX cvt.rzi; int->float rounds to nearest even; ->bool is
 * `x != 0` (so a NaN converts to true). */
#include <math.h>

#include "ops/interp.h"

/* ---- float kernels ------------------------------------------------------ */
typedef float (*bin_fn)(float, float);
typedef float (*un_fn)(float);

static float f_add(float a, float b) { return a + b; }
static float f_sub(float a, float b) { return a - b; }
static float f_mul(float a, float b) { return a * b; }
static float f_div(float a, float b) { return a / b; }
static float f_max(float a, float b) { return fmaxf(a, b); }
static float f_min(float a, float b) { return fminf(a, b); }
static float f_neg(float a) { return -a; }
static float f_abs(float a) { return fabsf(a); }
static float f_exp(float a) { return expf(a); }
static float f_exp2(float a) { return exp2f(a); }
static float f_log(float a) { return logf(a); }
static float f_log2(float a) { return log2f(a); }
static float f_sqrt(float a) { return sqrtf(a); }
static float f_rsqrt(float a) { return 1.0f / sqrtf(a); }
static float f_sin(float a) { return sinf(a); }
static float f_cos(float a) { return cosf(a); }
static float f_tanh(float a) { return tanhf(a); }
static float f_erf(float a) { return erff(a); }
static float f_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

static bin_fn binary_fn(tk_opcode opc) {
    switch (opc) {
    case TK_OP_ADD: return f_add;
    case TK_OP_SUB: return f_sub;
    case TK_OP_MUL: return f_mul;
    case TK_OP_DIV: return f_div;
    case TK_OP_MAX: return f_max;
    default: return f_min;
    }
}

static un_fn unary_fn(tk_opcode opc) {
    switch (opc) {
    case TK_OP_NEG: return f_neg;
    case TK_OP_ABS: return f_abs;
    case TK_OP_EXP: return f_exp;
    case TK_OP_EXP2: return f_exp2;
    case TK_OP_LOG: return f_log;
    case TK_OP_LOG2: return f_log2;
    case TK_OP_SQRT: return f_sqrt;
    case TK_OP_SIN: return f_sin;
    case TK_OP_COS: return f_cos;
    case TK_OP_RSQRT: return f_rsqrt;
    case TK_OP_TANH: return f_tanh;
    case TK_OP_ERF: return f_erf;
    case TK_OP_SIGMOID: return f_sigmoid;
    default: return NULL; /* an op of the family without semantics: reported */
    }
}

static bool is_cmp(tk_opcode opc) {
    return opc == TK_OP_LT || opc == TK_OP_LE || opc == TK_OP_GT || opc == TK_OP_GE ||
           opc == TK_OP_EQ || opc == TK_OP_NE;
}

static bool cmp_f(tk_opcode opc, float a, float b) {
    switch (opc) {
    case TK_OP_LT: return a < b;
    case TK_OP_LE: return a <= b;
    case TK_OP_GT: return a > b;
    case TK_OP_GE: return a >= b;
    case TK_OP_EQ: return a == b;
    default: return a != b;
    }
}

static bool cmp_i(tk_opcode opc, int64_t a, int64_t b) {
    switch (opc) {
    case TK_OP_LT: return a < b;
    case TK_OP_LE: return a <= b;
    case TK_OP_GT: return a > b;
    case TK_OP_GE: return a >= b;
    case TK_OP_EQ: return a == b;
    default: return a != b;
    }
}

/* ---- scalars ------------------------------------------------------------ */
static bool int_binary(tk_opcode opc, int64_t a, int64_t b, int64_t *r) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (opc) {
    case TK_OP_ADD: *r = (int64_t)(ua + ub); return true;
    case TK_OP_SUB: *r = (int64_t)(ua - ub); return true;
    case TK_OP_MUL: *r = (int64_t)(ua * ub); return true;
    case TK_OP_MAX: *r = a > b ? a : b; return true;
    case TK_OP_MIN: *r = a < b ? a : b; return true;
    default: break;
    }
    if (b == 0) return false;
    *r = b == -1 ? (int64_t)(0 - ua) : a / b; /* INT64_MIN / -1 wraps */
    return true;
}

static int64_t float_to_int(float f, tk_dtype to) {
    if (isnan(f)) return 0;
    if (to == TK_I32) {
        if (f >= 2147483648.0f) return INT32_MAX;
        if (f <= -2147483648.0f) return INT32_MIN;
        return (int64_t)f;
    }
    if (f >= 9223372036854775808.0f) return INT64_MAX;
    if (f <= -9223372036854775808.0f) return INT64_MIN;
    return (int64_t)f;
}

static tk_sv cvt_scalar(tk_sv x, tk_dtype from, tk_dtype to) {
    tk_sv r = {.i = 0};
    bool ffrom = tk_dtype_is_float(from);
    if (to == TK_BOOL)
        r.i = ffrom ? x.f != 0.0f : x.i != 0;
    else if (tk_dtype_is_float(to))
        r.f = tk_interp_round(to, ffrom ? x.f : (float)x.i);
    else
        r.i = ffrom ? float_to_int(x.f, to) : tk_interp_wrap(to, x.i);
    return r;
}

tk_status tk_interp_eval_elementwise(tk_opcode opc, tk_dtype dt, int64_t attr, const tk_sv *x,
                                     tk_sv *r, const char **why) {
    bool fl = tk_dtype_is_float(dt);
    if (opc == TK_OP_SELECT) { /* dt is the condition's; the branches share theirs */
        *r = x[0].i ? x[1] : x[2];
        return TK_OK;
    }
    if (is_cmp(opc)) {
        r->i = fl ? cmp_f(opc, x[0].f, x[1].f) : cmp_i(opc, x[0].i, x[1].i);
        return TK_OK;
    }
    if (opc == TK_OP_CVT) {
        *r = cvt_scalar(x[0], dt, (tk_dtype)attr);
        return TK_OK;
    }
    if (tk_op_infos[opc].min_opnds == 2) {
        if (fl) {
            r->f = tk_interp_round(dt, binary_fn(opc)(x[0].f, x[1].f));
            return TK_OK;
        }
        if (!int_binary(opc, x[0].i, x[1].i, &r->i)) {
            *why = "division by zero";
            return TK_ERR_RUNTIME;
        }
        r->i = tk_interp_wrap(dt, r->i);
        return TK_OK;
    }
    if (fl) {
        un_fn f = unary_fn(opc);
        if (!f) {
            *why = "the elementwise family has no semantics for this op";
            return TK_ERR_UNSUPPORTED;
        }
        r->f = tk_interp_round(dt, f(x[0].f));
        return TK_OK;
    }
    /* integer NEG / ABS (the rule admits no other unary op on integers) */
    uint64_t u = (uint64_t)x[0].i;
    r->i = tk_interp_wrap(dt, opc == TK_OP_ABS && x[0].i >= 0 ? x[0].i : (int64_t)(0 - u));
    return TK_OK;
}

static tk_status run_scalar(tk_interp *I, const tk_op *op) {
    const tk_sv *in[3];
    for (int i = 0; i < 3; i++) in[i] = tk_interp_sv(I, op->opnds[i < op->nopnds ? i : 0]);
    tk_sv *r = tk_interp_sv(I, op->res[0]);
    for (int w = 0; w < I->warps; w++) {
        if (!tk_interp_warp_active(I, w)) continue;
        for (int t = 32 * w; t < 32 * w + 32; t++) {
            tk_sv x[3] = {in[0][t], in[1][t], in[2][t]};
            const char *why = "";
            tk_status s = tk_interp_eval_elementwise(op->opc, op->opnds[0]->type.dtype, op->attr[0],
                                                     x, &r[t], &why);
            if (s) return tk_interp_fail(I, op, w, s, "%s (lane %d)", why, t % 32);
        }
    }
    return TK_OK;
}

/* ---- tiles and vectors -------------------------------------------------- */
/* How one operand supplies element e of a tile/vec result. A scalar is
 * warp-uniform, not warpgroup-uniform: for a banded warpgroup result
 * (tk_interp_banded) each warp's rows take that warp's copy (SRC_BAND). */
typedef enum { SRC_FULL, SRC_SCALAR, SRC_BAND, SRC_ROW, SRC_COL } src_mode;

typedef struct src {
    src_mode mode;
    const float *p;
    float s[4];
    size_t cols; /* of the result; 1 for a vector (its rows are elements) */
} src;

static inline float src_get(const src *o, size_t e) {
    switch (o->mode) {
    case SRC_FULL: return o->p[e];
    case SRC_SCALAR: return o->s[0];
    case SRC_BAND: return o->s[e / o->cols % 64 / 16];
    case SRC_ROW: return o->p[e / o->cols];
    default: return o->p[e % o->cols];
    }
}

static src make_src(tk_interp *I, const tk_op *op, const tk_value *v, int inst) {
    const tk_type *r = &op->res[0]->type, *t = &v->type;
    src o = {.mode = SRC_FULL, .cols = r->kind == TK_KIND_TILE ? (size_t)r->cols : 1};
    if (t->kind == TK_KIND_SCALAR) {
        const tk_sv *sv = tk_interp_sv(I, v);
        int th = tk_interp_inst_thread(I, r->owner, inst);
        o.mode = tk_interp_banded(r) ? SRC_BAND : SRC_SCALAR;
        for (int b = 0; b < 4; b++) {
            int w = 4 * inst + b; /* band b's warp; an inactive one's rows are dropped */
            bool own = o.mode == SRC_BAND && tk_interp_warp_active(I, w);
            o.s[b] = tk_interp_sv_float(t->dtype, sv[own ? 32 * w : th]);
        }
        return o;
    }
    o.p = tk_interp_tile(I, v, inst);
    if (t->kind == TK_KIND_VEC && r->kind == TK_KIND_TILE)
        o.mode = t->axis == TK_PER_ROW ? SRC_ROW : SRC_COL;
    return o;
}

/* One instance of a tile/vec result. */
static void run_instance(tk_interp *I, const tk_op *op, int inst) {
    const tk_type *rt = &op->res[0]->type;
    float *d = tk_interp_tile(I, op->res[0], inst);
    size_t n = tk_interp_elems(rt);
    src a = make_src(I, op, op->opnds[0], inst);
    if (op->opc == TK_OP_FILL || op->opc == TK_OP_CVT) {
        for (size_t e = 0; e < n; e++) d[e] = tk_interp_round(rt->dtype, src_get(&a, e));
    } else if (op->opc == TK_OP_SELECT) { /* a is the condition: 0/1 */
        src x = make_src(I, op, op->opnds[1], inst), y = make_src(I, op, op->opnds[2], inst);
        for (size_t e = 0; e < n; e++)
            d[e] = tk_interp_round(rt->dtype,
                                   src_get(&a, e) != 0.0f ? src_get(&x, e) : src_get(&y, e));
    } else if (is_cmp(op->opc)) {
        src b = make_src(I, op, op->opnds[1], inst);
        for (size_t e = 0; e < n; e++) d[e] = cmp_f(op->opc, src_get(&a, e), src_get(&b, e));
    } else if (op->nopnds == 2) {
        src b = make_src(I, op, op->opnds[1], inst);
        bin_fn f = binary_fn(op->opc);
        for (size_t e = 0; e < n; e++)
            d[e] = tk_interp_round(rt->dtype, f(src_get(&a, e), src_get(&b, e)));
    } else {
        un_fn f = unary_fn(op->opc);
        for (size_t e = 0; f && e < n; e++) d[e] = tk_interp_round(rt->dtype, f(src_get(&a, e)));
    }
}

tk_status tk_interp_elementwise(tk_interp *I, const tk_op *op) {
    const tk_type *rt = &op->res[0]->type;
    if (rt->kind == TK_KIND_SCALAR) return run_scalar(I, op);
    if (op->nopnds == 1 && op->opc != TK_OP_FILL && op->opc != TK_OP_CVT && !unary_fn(op->opc))
        return tk_interp_fail(I, op, -1, TK_ERR_UNSUPPORTED,
                              "the elementwise family has no "
                              "semantics for this op (ops/elementwise_interp.c, unary_fn)");
    for (int i = 0; i < tk_interp_ninst(I, rt->owner); i++)
        if (tk_interp_inst_active(I, rt->owner, i)) run_instance(I, op, i);
    return TK_OK;
}
