/* Lowering of elementwise ops (rules: ops/elementwise.c).
 *
 * Elementwise ops never talk across lanes: result element i is computed from
 * operand element i of the same thread. Scalars are splat; a tile∘vec
 * broadcast picks, for tile element i, the vector slot holding the same row
 * (PER_ROW) or column (PER_COL) - tk_frag_vec_index (ops/nv/frag.c).
 *
 * Precision: float math runs in f32 and rounds once to the result dtype
 * (bf16/f16 tiles), like the interpreter. exp2/log2/rsqrt use the SFU
 * approximations (ex2.approx, lg2.approx, rsqrt.approx); exp(x) =
 * ex2(x*log2 e), log(x) = lg2(x)*ln 2; sqrt is IEEE (llvm.sqrt). sin/cos
 * are a Cody-Waite reduction and polynomials in f32 FMAs (ops/trig.h: abs
 * error < 1e-7 for |x| <= 1e5), not sin.approx (its error grows with |x|)
 * nor llvm.sin (LLVM 22's NVPTX cannot select it, a fatal error that aborts
 * the process; with `afn` it is sin.approx). tanh is tanh.approx.f32
 * (sm_75+; relative error about 2^-11, PTX ISA) as inline PTX: LLVM 22 has
 * no NVVM intrinsic for it and llvm.tanh cannot be selected. erf is a
 * polynomial pair in f32 FMAs and one ex2 (ops/erf.h: abs error 1.03e-7);
 * sigmoid x = 1 / (1 + ex2(-x log2 e)) with an IEEE division (0 and 1 at
 * the ends, no NaN: ex2 saturates to inf or 0).
 * Compares: ordered for floats (false with a NaN; NE is unordered: true),
 * signed for ints, in the operands' compute dtype (f32 for floats); a bool
 * tile holds one i1 per slot. Select picks per slot in the result dtype (a
 * scalar branch converted to it once, as the interpreter rounds it).
 * ex2 is the .ftz form: results below 2^-126 become 0 (an absolute error
 * under 1.2e-38). Without .ftz, ptxas wraps every MUFU.EX2 in a range test
 * and two conditional multiplies to produce denormals - 4 instructions
 * instead of 1, which in attention's softmax (one exp2 per score) costs
 * more issue slots than the mma.sync themselves. */
#include "ops/lower_walk.h"
#include "ops/erf.h"
#include "ops/trig.h"

#define LOG2E 1.4426950408889634
#define LN2   0.6931471805599453

/* Compute dtype: f32 for any float, the int dtype otherwise. */
static tk_dtype compute_dt(tk_dtype dt) { return tk_dtype_is_float(dt) ? TK_F32 : dt; }

/* Operand v's value for result element idx of type rt, in dtype `cdt`. */
static LLVMValueRef elem(tk_lower *L, const tk_value *v, const tk_lv *lv, const tk_type *rt,
                         int idx, tk_dtype cdt) {
    const tk_type *t = &v->type;
    int slot = idx;
    if (t->kind == TK_KIND_SCALAR)
        slot = 0;
    else if (t->kind == TK_KIND_VEC && rt->kind == TK_KIND_TILE)
        slot = tk_frag_vec_index(rt, t->axis, idx);
    return tk_lw_cvt(L, lv->v[slot], t->dtype, cdt);
}

static LLVMValueRef fbin(tk_lower *L, tk_opcode opc, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = L->b;
    LLVMValueRef ab[2] = {a, b};
    LLVMTypeRef ty = LLVMTypeOf(a);
    LLVMValueRef r;
    switch (opc) {
    case TK_OP_ADD: r = LLVMBuildFAdd(B, a, b, ""); break;
    case TK_OP_SUB: r = LLVMBuildFSub(B, a, b, ""); break;
    case TK_OP_MUL: r = LLVMBuildFMul(B, a, b, ""); break;
    case TK_OP_DIV: return LLVMBuildFDiv(B, a, b, "");
    case TK_OP_MAX: return tk_lw_intrin(L, "llvm.maxnum", &ty, 1, ab, 2); /* fmaxf */
    default: return tk_lw_intrin(L, "llvm.minnum", &ty, 1, ab, 2);
    }
    /* A product feeding a sum may become one fma (as nvcc's default
     * -fmad=true): attention's exp2(s·scale - m) is one FFMA per score.
     * The interpreter rounds twice; the difference is one rounding. */
    if (LLVMIsAInstruction(r)) LLVMSetFastMathFlags(r, LLVMFastMathAllowContract);
    return r;
}

static LLVMValueRef ibin(tk_lower *L, tk_opcode opc, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = L->b;
    LLVMValueRef ab[2] = {a, b};
    LLVMTypeRef ty = LLVMTypeOf(a);
    switch (opc) {
    case TK_OP_ADD: return LLVMBuildAdd(B, a, b, "");
    case TK_OP_SUB: return LLVMBuildSub(B, a, b, "");
    case TK_OP_MUL: return LLVMBuildMul(B, a, b, "");
    case TK_OP_DIV: { /* truncating; MIN / -1 wraps to MIN, as -MIN does */
        LLVMValueRef m1, q = LLVMBuildSDiv(B, a, tk_lw_safe_divisor(L, b, &m1), "");
        return LLVMBuildSelect(B, m1, LLVMBuildNeg(B, a, ""), q, "");
    }
    case TK_OP_MAX: return tk_lw_intrin(L, "llvm.smax", &ty, 1, ab, 2);
    default: return tk_lw_intrin(L, "llvm.smin", &ty, 1, ab, 2);
    }
}

static LLVMValueRef fc(tk_lower *L, float v) { return LLVMConstReal(L->f32, v); }

static LLVMValueRef fma3(tk_lower *L, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMValueRef abc[3] = {a, b, c};
    return tk_lw_intrin(L, "llvm.fma", &L->f32, 1, abc, 3);
}

/* Whether bit `bit` of q is set (i1). */
static LLVMValueRef bit_set(tk_lower *L, LLVMValueRef q, int bit) {
    LLVMValueRef m = LLVMBuildAnd(L->b, q, tk_lw_i32c(L, bit), "");
    return LLVMBuildICmp(L->b, LLVMIntNE, m, tk_lw_i32c(L, 0), "");
}

/* sin x (is_cos 0) or cos x (1), operation for operation as tk_trig_f32
 * (ops/trig.h). Both polynomials are built and one is selected, so a tk_sin
 * and a tk_cos of one value share all but the selects once LLVM merges them. */
static LLVMValueRef trig(tk_lower *L, LLVMValueRef x, int is_cos) {
    LLVMBuilderRef B = L->b;
    LLVMValueRef k = LLVMBuildFMul(B, x, fc(L, TK_TRIG_2_OVER_PI), "");
    k = tk_lw_intrin(L, "llvm.rint", &L->f32, 1, &k, 1);
    LLVMValueRef r = fma3(L, k, fc(L, -TK_TRIG_PIO2_HI), x);
    r = fma3(L, k, fc(L, -TK_TRIG_PIO2_MID), r);
    r = fma3(L, k, fc(L, -TK_TRIG_PIO2_LO), r);
    LLVMValueRef r2 = LLVMBuildFMul(B, r, r, "");
    LLVMValueRef s =
        fma3(L, fma3(L, fc(L, TK_TRIG_S3), r2, fc(L, TK_TRIG_S2)), r2, fc(L, TK_TRIG_S1));
    s = fma3(L, LLVMBuildFMul(B, s, r2, ""), r, r);
    LLVMValueRef c =
        fma3(L, fma3(L, fc(L, TK_TRIG_C3), r2, fc(L, TK_TRIG_C2)), r2, fc(L, TK_TRIG_C1));
    c = fma3(L, fma3(L, c, r2, fc(L, -0.5f)), r2, fc(L, 1.0f));
    /* The quadrant. fptosi is poison past i32 (|x| > 3e9, inf, NaN: r is
     * meaningless or NaN there anyway); freeze makes that an arbitrary
     * quadrant instead of undefined behaviour. */
    LLVMValueRef q = LLVMBuildFreeze(B, LLVMBuildFPToSI(B, k, L->i32, ""), "");
    q = LLVMBuildAdd(B, q, tk_lw_i32c(L, is_cos), ""); /* cos x = sin(x + pi/2) */
    LLVMValueRef v = LLVMBuildSelect(B, bit_set(L, q, 1), c, s, "");
    return LLVMBuildSelect(B, bit_set(L, q, 2), LLVMBuildFNeg(B, v, ""), v, "");
}

static LLVMValueRef ex2(tk_lower *L, LLVMValueRef x) {
    return tk_lw_intrin(L, "llvm.nvvm.ex2.approx.ftz", &L->f32, 1, &x, 1);
}

/* p(s) = c[n-1] s^(n-1) + ... + c[0] by Horner's rule in FMAs. */
static LLVMValueRef horner(tk_lower *L, const float *c, int n, LLVMValueRef s) {
    LLVMValueRef p = fc(L, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) p = fma3(L, p, s, fc(L, c[i]));
    return p;
}

/* erf x, operation for operation as tk_erf_f32 (ops/erf.h). */
static LLVMValueRef erf_f32(tk_lower *L, LLVMValueRef x) {
    LLVMBuilderRef B = L->b;
    LLVMValueRef t = tk_lw_intrin(L, "llvm.fabs", &L->f32, 1, &x, 1);
    LLVMValueRef small = fma3(L, horner(L, tk_erf_s, TK_ERF_NS, LLVMBuildFMul(B, x, x, "")), x, x);
    LLVMValueRef mn[2] = {t, fc(L, 4.0f)};
    LLVMValueRef u = tk_lw_intrin(L, "llvm.minnum", &L->f32, 1, mn, 2);
    u = LLVMBuildFSub(B, u, fc(L, 2.5f), "");
    LLVMValueRef big = LLVMBuildFSub(B, fc(L, 1.0f), ex2(L, horner(L, tk_erf_b, TK_ERF_NB, u)), "");
    LLVMValueRef cs[2] = {big, x};
    big = tk_lw_intrin(L, "llvm.copysign", &L->f32, 1, cs, 2);
    LLVMValueRef far = LLVMBuildFCmp(B, LLVMRealOGE, t, fc(L, 1.0f), "");
    return LLVMBuildSelect(B, far, big, small, "");
}

static LLVMValueRef fun(tk_lower *L, tk_opcode opc, LLVMValueRef x) {
    LLVMBuilderRef B = L->b;
    LLVMTypeRef f = L->f32;
    switch (opc) {
    case TK_OP_NEG: return LLVMBuildFNeg(B, x, "");
    case TK_OP_ABS: return tk_lw_intrin(L, "llvm.fabs", &f, 1, &x, 1);
    case TK_OP_EXP:
        x = LLVMBuildFMul(B, x, LLVMConstReal(f, LOG2E), "");
        return tk_lw_intrin(L, "llvm.nvvm.ex2.approx.ftz", &f, 1, &x, 1);
    case TK_OP_EXP2: return tk_lw_intrin(L, "llvm.nvvm.ex2.approx.ftz", &f, 1, &x, 1);
    case TK_OP_LOG:
        x = tk_lw_intrin(L, "llvm.nvvm.lg2.approx.f", NULL, 0, &x, 1);
        return LLVMBuildFMul(B, x, LLVMConstReal(f, LN2), "");
    case TK_OP_LOG2: return tk_lw_intrin(L, "llvm.nvvm.lg2.approx.f", NULL, 0, &x, 1);
    case TK_OP_SQRT: return tk_lw_intrin(L, "llvm.sqrt", &f, 1, &x, 1);
    case TK_OP_SIN: return trig(L, x, 0);
    case TK_OP_COS: return trig(L, x, 1);
    case TK_OP_RSQRT: return tk_lw_intrin(L, "llvm.nvvm.rsqrt.approx.f", NULL, 0, &x, 1);
    case TK_OP_TANH: return tk_lw_asm(L, f, "tanh.approx.f32 $0, $1;", "=f,f", &x, 1, false);
    case TK_OP_ERF: return erf_f32(L, x);
    case TK_OP_SIGMOID:
        x = ex2(L, LLVMBuildFMul(B, x, LLVMConstReal(f, -LOG2E), ""));
        return LLVMBuildFDiv(B, fc(L, 1.0f), LLVMBuildFAdd(B, fc(L, 1.0f), x, ""), "");
    default: /* an op of the family without a lowering: reported, never guessed */
        tk_lw_fail(L, TK_ERR_UNSUPPORTED, "no lowering for %s (ops/elementwise_nv.c, fun)",
                   tk_op_infos[opc].name);
        return LLVMGetPoison(f);
    }
}

static LLVMValueRef iun(tk_lower *L, tk_opcode opc, LLVMValueRef x) {
    if (opc == TK_OP_NEG) return LLVMBuildNeg(L->b, x, "");
    LLVMValueRef a[2] = {x, LLVMConstInt(L->i1, 0, 0)}; /* abs(INT_MIN) wraps */
    LLVMTypeRef ty = LLVMTypeOf(x);
    return tk_lw_intrin(L, "llvm.abs", &ty, 1, a, 2);
}

/* Rounds f32 results to a 16-bit result dtype two at a time: one
 * cvt.rn.{bf16,f16}x2.f32 per pair (llvm.nvvm.ff2*x2.rn; a plain vector
 * fptrunc is split into two scalar cvts for sm_80), so a tile's 16-bit values
 * travel packed in 32-bit registers, as mma and 32-bit stores want them, and
 * an element is unpacked only where it is used alone. The instruction puts
 * its first operand in the upper half: (x[i+1], x[i]) gives element i low. */
static void round_pairs(tk_lower *L, LLVMValueRef *v, int n, tk_dtype from, tk_dtype to) {
    bool half = to == TK_BF16 || to == TK_F16;
    int i = 0;
    if (half && from == TK_F32) {
        const char *name = to == TK_BF16 ? "llvm.nvvm.ff2bf16x2.rn" : "llvm.nvvm.ff2f16x2.rn";
        for (; i + 1 < n; i += 2) {
            LLVMValueRef hl[2] = {v[i + 1], v[i]};
            LLVMValueRef p = tk_lw_intrin(L, name, NULL, 0, hl, 2);
            v[i] = LLVMBuildExtractElement(L->b, p, tk_lw_i32c(L, 0), "");
            v[i + 1] = LLVMBuildExtractElement(L->b, p, tk_lw_i32c(L, 1), "");
        }
    }
    for (; i < n; i++) v[i] = tk_lw_cvt(L, v[i], from, to);
}

static LLVMValueRef compare(tk_lower *L, tk_opcode opc, tk_dtype dt, LLVMValueRef a,
                            LLVMValueRef b) {
    LLVMIntPredicate ip;
    LLVMRealPredicate fp;
    switch (opc) {
    case TK_OP_LT: ip = LLVMIntSLT, fp = LLVMRealOLT; break;
    case TK_OP_LE: ip = LLVMIntSLE, fp = LLVMRealOLE; break;
    case TK_OP_GT: ip = LLVMIntSGT, fp = LLVMRealOGT; break;
    case TK_OP_GE: ip = LLVMIntSGE, fp = LLVMRealOGE; break;
    case TK_OP_EQ: ip = LLVMIntEQ, fp = LLVMRealOEQ; break;
    default: ip = LLVMIntNE, fp = LLVMRealUNE; break; /* NaN != anything */
    }
    if (tk_dtype_is_float(dt)) return LLVMBuildFCmp(L->b, fp, a, b, "");
    return LLVMBuildICmp(L->b, ip, a, b, "");
}

static bool is_cmp(tk_opcode opc) {
    return opc == TK_OP_LT || opc == TK_OP_LE || opc == TK_OP_GT || opc == TK_OP_GE ||
           opc == TK_OP_EQ || opc == TK_OP_NE;
}

/* A compare's operands meet in the compute dtype of their tile/vector (or of
 * the scalars): f32 for floats, so a bf16 tile meets an f32 scalar exactly. */
static tk_status lower_compare(tk_lower *L, const tk_op *op, const tk_type *rt, tk_lv *r) {
    tk_lv *a = tk_lw_get(L, op->opnds[0]), *b = tk_lw_get(L, op->opnds[1]);
    if (!a || !b) return L->dg->st;
    const tk_type *ta = &op->opnds[0]->type, *tb = &op->opnds[1]->type;
    tk_dtype cdt = compute_dt(ta->kind == TK_KIND_SCALAR ? tb->dtype : ta->dtype);
    for (int i = 0; i < r->n; i++) {
        LLVMValueRef x = elem(L, op->opnds[0], a, rt, i, cdt);
        LLVMValueRef y = elem(L, op->opnds[1], b, rt, i, cdt);
        r->v[i] = compare(L, op->opc, cdt, x, y);
    }
    return TK_OK;
}

static tk_status lower_select(tk_lower *L, const tk_op *op, const tk_type *rt, tk_lv *r) {
    tk_lv *c = tk_lw_get(L, op->opnds[0]), *a = tk_lw_get(L, op->opnds[1]);
    tk_lv *b = tk_lw_get(L, op->opnds[2]);
    if (!a || !b || !c) return L->dg->st;
    for (int i = 0; i < r->n; i++) {
        LLVMValueRef x = elem(L, op->opnds[1], a, rt, i, rt->dtype);
        LLVMValueRef y = elem(L, op->opnds[2], b, rt, i, rt->dtype);
        LLVMValueRef k = elem(L, op->opnds[0], c, rt, i, TK_BOOL);
        r->v[i] = LLVMBuildSelect(L->b, k, x, y, "");
    }
    return TK_OK;
}

static tk_status lower_binary(tk_lower *L, const tk_op *op, const tk_type *rt, tk_lv *r) {
    tk_lv *a = tk_lw_get(L, op->opnds[0]), *b = tk_lw_get(L, op->opnds[1]);
    if (!a || !b) return L->dg->st;
    tk_dtype cdt = compute_dt(rt->dtype);
    for (int i = 0; i < r->n; i++) {
        LLVMValueRef x = elem(L, op->opnds[0], a, rt, i, cdt);
        LLVMValueRef y = elem(L, op->opnds[1], b, rt, i, cdt);
        r->v[i] = tk_dtype_is_float(cdt) ? fbin(L, op->opc, x, y) : ibin(L, op->opc, x, y);
    }
    round_pairs(L, r->v, r->n, cdt, rt->dtype);
    return TK_OK;
}

static tk_status lower_unary(tk_lower *L, const tk_op *op, const tk_type *rt, tk_lv *r) {
    const tk_value *in = op->opnds[0];
    tk_lv *a = tk_lw_get(L, in);
    if (!a) return L->dg->st;
    if (op->opc == TK_OP_FILL) { /* one conversion, repeated */
        LLVMValueRef x = tk_lw_cvt(L, a->v[0], in->type.dtype, rt->dtype);
        for (int i = 0; i < r->n; i++) r->v[i] = x;
        return TK_OK;
    }
    if (op->opc == TK_OP_CVT) {
        tk_dtype from = in->type.dtype;
        /* bf16 <-> f16 goes through f32; so does a bool tile (a mask: 0/1) */
        tk_dtype mid =
            from == TK_BOOL && in->type.kind != TK_KIND_SCALAR ? TK_F32 : compute_dt(from);
        for (int i = 0; i < r->n; i++) r->v[i] = tk_lw_cvt(L, a->v[i], from, mid);
        round_pairs(L, r->v, r->n, mid, rt->dtype);
        return TK_OK;
    }
    tk_dtype cdt = compute_dt(rt->dtype);
    for (int i = 0; i < r->n; i++) {
        LLVMValueRef x =
            tk_lw_cvt(L, a->v[in->type.kind == TK_KIND_SCALAR ? 0 : i], in->type.dtype, cdt);
        r->v[i] = tk_dtype_is_float(cdt) ? fun(L, op->opc, x) : iun(L, op->opc, x);
    }
    round_pairs(L, r->v, r->n, cdt, rt->dtype);
    return TK_OK;
}

tk_status tk_lower_elementwise(tk_lower *L, const tk_op *op) {
    const tk_type *rt = &op->res[0]->type;
    tk_lv *r = tk_lw_def(L, op->res[0], tk_frag_count(rt));
    if (!r) return L->dg->st;
    /* FILL/CVT results repeat or convert their single operand. */
    if (op->opc == TK_OP_SELECT) return lower_select(L, op, rt, r);
    if (is_cmp(op->opc)) return lower_compare(L, op, rt, r);
    if (op->nopnds == 2) return lower_binary(L, op, rt, r);
    return lower_unary(L, op, rt, r);
}
