/* Small helpers shared by every lowering: errors, allocations, the value
 * map, types, conversions, intrinsic / inline-asm calls, loops and masked
 * memory. */
#include <llvm-c/DebugInfo.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/abi.h"
#include "ops/nv/lower.h"

tk_status tk_lw_fail(tk_lower *L, tk_status s, const char *fmt, ...) {
    if (L->dg->st != TK_OK) /* the first failure is the informative one */
        return L->dg->st;
    char what[TK_DIAG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!L->cur) return tk_diag_fail(L->dg, s, "%s", what);
    return tk_diag_fail(L->dg, s, "op %u (%s): %s", L->cur->id, tk_op_infos[L->cur->opc].name,
                        what);
}

/* ---- Allocations: a list of blocks, freed together ------------------------- */
struct tk_lower_mem {
    tk_lower_mem *next;
    max_align_t data[];
};

void *tk_lw_alloc(tk_lower *L, size_t n) {
    tk_lower_mem *m = calloc(1, sizeof *m + n);
    if (!m) {
        tk_lw_fail(L, TK_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    m->next = L->mem;
    L->mem = m;
    return m->data;
}

void tk_lw_free_all(tk_lower *L) {
    for (tk_lower_mem *m = L->mem, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    L->mem = NULL;
}

/* ---- The value map ------------------------------------------------------------ */
tk_lv *tk_lw_get(tk_lower *L, const tk_value *v) {
    if (!v || v->id == 0 || v->id >= L->nvals) {
        tk_lw_fail(L, TK_ERR_LLVM, "operand is not a value of this kernel");
        return NULL;
    }
    tk_lv *lv = &L->vals[v->id];
    if (lv->v) return lv;
    tk_lw_fail(L, TK_ERR_LLVM, "value %%%u used before it was lowered", v->id);
    return NULL;
}

tk_lv *tk_lw_def(tk_lower *L, const tk_value *v, int n) {
    if (!v || v->id == 0 || v->id >= L->nvals || n <= 0) {
        tk_lw_fail(L, TK_ERR_LLVM, "bad result value");
        return NULL;
    }
    tk_lv *lv = &L->vals[v->id];
    lv->v = tk_lw_alloc(L, (size_t)n * sizeof *lv->v);
    lv->n = lv->v ? n : 0;
    return lv->v ? lv : NULL;
}

bool tk_lw_emits_op(const tk_lower *L, const tk_op *op) {
    return L->sync->role != TK_ROLE_PRODUCER || tk_plan_has_op(L->plan, op);
}

bool tk_lw_emits_val(const tk_lower *L, const tk_value *v) {
    return L->sync->role != TK_ROLE_PRODUCER || tk_plan_has_val(L->plan, v);
}

bool tk_lw_mma_b_only(const tk_lower *L, const tk_value *v) {
    return L->use && v && v->id < L->nvals && L->use[v->id] == TK_USE_MMA_B;
}

/* ---- Types, constants, conversions --------------------------------------- */
LLVMTypeRef tk_lw_type(tk_lower *L, tk_dtype dt) {
    switch (dt) {
    case TK_F32: return L->f32;
    case TK_BF16: return L->bf16;
    case TK_F16: return L->f16;
    case TK_I64: return L->i64;
    case TK_BOOL: return L->i1;
    default: return L->i32;
    }
}

LLVMValueRef tk_lw_i32c(tk_lower *L, int64_t v) {
    return LLVMConstInt(L->i32, (unsigned long long)v, 1);
}

LLVMValueRef tk_lw_i64c(tk_lower *L, int64_t v) {
    return LLVMConstInt(L->i64, (unsigned long long)v, 1);
}

LLVMValueRef tk_lw_constf(tk_lower *L, tk_dtype dt, double v) {
    if (tk_dtype_is_float(dt)) return LLVMConstReal(tk_lw_type(L, dt), v);
    if (dt == TK_BOOL) return LLVMConstInt(L->i1, v != 0, 0);
    return LLVMConstInt(tk_lw_type(L, dt), (unsigned long long)(long long)v, 1);
}

static LLVMValueRef int_resize(tk_lower *L, LLVMValueRef v, LLVMTypeRef to) {
    LLVMTypeRef from = LLVMTypeOf(v);
    if (from == to) return v;
    if (from == L->i1) return LLVMBuildZExt(L->b, v, to, "");
    if (LLVMGetIntTypeWidth(from) < LLVMGetIntTypeWidth(to)) return LLVMBuildSExt(L->b, v, to, "");
    return LLVMBuildTrunc(L->b, v, to, "");
}

static bool is_half(tk_dtype dt) { return dt == TK_BF16 || dt == TK_F16; }

/* float -> float: bf16 <-> f16 goes through f32 (LLVM has no direct cast). */
static LLVMValueRef cvt_ff(tk_lower *L, LLVMValueRef v, tk_dtype from, tk_dtype to) {
    LLVMBuilderRef b = L->b;
    if (is_half(from) && is_half(to)) v = LLVMBuildFPExt(b, v, L->f32, "");
    if (to == TK_F32) return from == TK_F32 ? v : LLVMBuildFPExt(b, v, L->f32, "");
    return LLVMBuildFPTrunc(b, v, tk_lw_type(L, to), ""); /* round to nearest even */
}

/* float -> int saturates (cvt.rzi.sat semantics): no poison for NaN / huge. */
static LLVMValueRef cvt_fi(tk_lower *L, LLVMValueRef v, tk_dtype from, tk_dtype to) {
    if (is_half(from)) v = LLVMBuildFPExt(L->b, v, L->f32, "");
    if (to == TK_BOOL) return LLVMBuildFCmp(L->b, LLVMRealUNE, v, LLVMConstReal(L->f32, 0), "");
    LLVMTypeRef ov[2] = {tk_lw_type(L, to), L->f32};
    return tk_lw_intrin(L, "llvm.fptosi.sat", ov, 2, &v, 1);
}

LLVMValueRef tk_lw_cvt(tk_lower *L, LLVMValueRef v, tk_dtype from, tk_dtype to) {
    LLVMBuilderRef b = L->b;
    if (from == to) return v;
    bool ff = tk_dtype_is_float(from), tf = tk_dtype_is_float(to);
    if (ff && tf) return cvt_ff(L, v, from, to);
    if (ff) return cvt_fi(L, v, from, to);
    if (tf)
        return from == TK_BOOL ? LLVMBuildUIToFP(b, v, tk_lw_type(L, to), "")
                               : LLVMBuildSIToFP(b, v, tk_lw_type(L, to), "");
    if (to == TK_BOOL) return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
    if (from == TK_BOOL) return LLVMBuildZExt(b, v, tk_lw_type(L, to), "");
    return int_resize(L, v, tk_lw_type(L, to));
}

LLVMValueRef tk_lw_to_i64(tk_lower *L, LLVMValueRef v) { return int_resize(L, v, L->i64); }
LLVMValueRef tk_lw_to_i32(tk_lower *L, LLVMValueRef v) { return int_resize(L, v, L->i32); }

/* Integer add/mul/and with operands widened to the wider type. */
static void widen(tk_lower *L, LLVMValueRef *a, LLVMValueRef *b) {
    LLVMTypeRef ta = LLVMTypeOf(*a), tb = LLVMTypeOf(*b);
    if (ta == tb) return;
    if (LLVMGetIntTypeWidth(ta) < LLVMGetIntTypeWidth(tb))
        *a = int_resize(L, *a, tb);
    else
        *b = int_resize(L, *b, ta);
}

LLVMValueRef tk_lw_add(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    widen(L, &a, &b);
    return LLVMBuildAdd(L->b, a, b, "");
}

LLVMValueRef tk_lw_mul(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    widen(L, &a, &b);
    return LLVMBuildMul(L->b, a, b, "");
}

LLVMValueRef tk_lw_and(tk_lower *L, LLVMValueRef a, LLVMValueRef b) {
    if (!a) return b;
    if (!b) return a;
    return LLVMBuildAnd(L->b, a, b, "");
}

/* LLVM's x / 0 and MIN / -1 are immediate UB (the optimizer may assume they
 * never happen), so 0 and -1 become 1 and the callers patch the result
 * (*is_m1: b was -1). A zero divisor is an error in the interpreter; on the
 * GPU its result is unspecified but defined. */
LLVMValueRef tk_lw_safe_divisor(tk_lower *L, LLVMValueRef b, LLVMValueRef *is_m1) {
    LLVMTypeRef t = LLVMTypeOf(b);
    *is_m1 = LLVMBuildICmp(L->b, LLVMIntEQ, b, LLVMConstAllOnes(t), "");
    LLVMValueRef zero = LLVMBuildICmp(L->b, LLVMIntEQ, b, LLVMConstNull(t), "");
    return LLVMBuildSelect(L->b, LLVMBuildOr(L->b, *is_m1, zero, ""), LLVMConstInt(t, 1, 0), b, "");
}

/* ---- Calls ---------------------------------------------------------------- */
LLVMValueRef tk_lw_intrin(tk_lower *L, const char *name, LLVMTypeRef *ov, unsigned nov,
                          LLVMValueRef *args, unsigned nargs) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) {
        tk_lw_fail(L, TK_ERR_LLVM, "LLVM has no intrinsic %s", name);
        return LLVMGetPoison(L->i32);
    }
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(L->m, id, ov, nov);
    LLVMTypeRef fty = LLVMIntrinsicGetType(L->c, id, ov, nov);
    unsigned np = LLVMCountParamTypes(fty);
    if (np != nargs) {
        tk_lw_fail(L, TK_ERR_LLVM, "%s takes %u arguments, got %u", name, np, nargs);
        return LLVMGetPoison(L->i32);
    }
    LLVMTypeRef pt[16];
    LLVMGetParamTypes(fty, pt);
    LLVMValueRef a[16];
    for (unsigned i = 0; i < nargs && i < 16; i++)    /* same-size reinterpretation: */
        a[i] = LLVMTypeOf(args[i]) == pt[i] ? args[i] /* e.g. <2 x bfloat> -> i32 */
                                            : LLVMBuildBitCast(L->b, args[i], pt[i], "");
    return LLVMBuildCall2(L->b, fty, fn, a, nargs, "");
}

LLVMValueRef tk_lw_asm(tk_lower *L, LLVMTypeRef ret, const char *text, const char *cons,
                       LLVMValueRef *args, unsigned nargs, bool side_effects) {
    LLVMTypeRef *pt = tk_lw_alloc(L, (nargs + 1) * sizeof *pt); /* wgmma ties 256 */
    if (!pt) return NULL;
    for (unsigned i = 0; i < nargs; i++) pt[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef fty = LLVMFunctionType(ret, pt, nargs, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), cons, strlen(cons), side_effects, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef call = LLVMBuildCall2(L->b, fty, fn, args, nargs, "");
    /* warp-synchronous instructions (wgmma's .sync.aligned, tanh.approx
     * alike): LLVM must not duplicate or sink the call into divergent code,
     * as clang marks every CUDA inline asm */
    unsigned conv = LLVMGetEnumAttributeKindForName("convergent", 10);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateEnumAttribute(L->c, conv, 0));
    return call;
}

/* createpolicy once per policy in use: it only encodes the policy, so one
 * register serves every access (PTX ISA, "createpolicy"). */
void tk_lw_l2_init(tk_lower *L) {
    static const char *const text[3] = {NULL,
                                        "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;",
                                        "createpolicy.fractional.L2::evict_last.b64 $0, 1.0;"};
    for (int i = 0; i < L->k->nparams; i++) {
        int c = L->k->cache[i];
        if (c && !L->l2[c]) L->l2[c] = tk_lw_asm(L, L->i64, text[c], "=l", NULL, 0, false);
    }
}

LLVMValueRef tk_lw_l2_policy(const tk_lower *L, const tk_value *view) {
    int p = tk_view_param(L->k, view);
    return p < 0 ? NULL : L->l2[L->k->cache[p]];
}

/* ---- Control flow of the lowering's own code ------------------------------- */
LLVMBasicBlockRef tk_lw_block(tk_lower *L, const char *name) {
    return LLVMAppendBasicBlockInContext(L->c, L->fn, name);
}

LLVMValueRef tk_lw_loop_begin(tk_lower *L, tk_lw_loop *lp, LLVMValueRef start, LLVMValueRef end,
                              LLVMValueRef step) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b);
    lp->head = tk_lw_block(L, "lp.head");
    lp->body = tk_lw_block(L, "lp.body");
    lp->exit = tk_lw_block(L, "lp.exit");
    lp->step = step;
    LLVMBuildBr(L->b, lp->head);
    LLVMPositionBuilderAtEnd(L->b, lp->head);
    lp->iv = LLVMBuildPhi(L->b, L->i32, "lp.iv");
    LLVMAddIncoming(lp->iv, &start, &pre, 1);
    LLVMValueRef c = LLVMBuildICmp(L->b, LLVMIntSLT, lp->iv, end, "");
    LLVMBuildCondBr(L->b, c, lp->body, lp->exit);
    LLVMPositionBuilderAtEnd(L->b, lp->body);
    return lp->iv;
}

/* !llvm.loop !{self, !{"llvm.loop.unroll.disable"}} on a back edge. */
static void keep_rolled(tk_lower *L, LLVMValueRef br) {
    LLVMMetadataRef self = LLVMTemporaryMDNode(L->c, NULL, 0);
    LLVMMetadataRef s = LLVMMDStringInContext2(L->c, "llvm.loop.unroll.disable", 24);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(L->c, &s, 1)};
    LLVMMetadataRef loop = LLVMMDNodeInContext2(L->c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, loop);
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(L->c, "llvm.loop", 9),
                    LLVMMetadataAsValue(L->c, loop));
}

void tk_lw_loop_end(tk_lower *L, tk_lw_loop *lp) {
    LLVMValueRef next = LLVMBuildAdd(L->b, lp->iv, lp->step, "lp.next");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(L->b);
    LLVMValueRef br = LLVMBuildBr(L->b, lp->head);
    if (lp->rolled) keep_rolled(L, br);
    LLVMAddIncoming(lp->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(L->b, lp->exit);
}

static bool is16(tk_lower *L, LLVMTypeRef t) { return t == L->bf16 || t == L->f16; }

/* Packs 16-bit pair i, i+1 of `v` into a <2 x T> before bb's terminator. */
static LLVMValueRef pack_at_end(tk_lower *L, LLVMBasicBlockRef bb, LLVMValueRef *v, int i) {
    LLVMPositionBuilderBefore(L->b, LLVMGetBasicBlockTerminator(bb));
    LLVMValueRef p = LLVMGetPoison(LLVMVectorType(LLVMTypeOf(v[i]), 2));
    p = LLVMBuildInsertElement(L->b, p, v[i], tk_lw_i32c(L, 0), "");
    return LLVMBuildInsertElement(L->b, p, v[i + 1], tk_lw_i32c(L, 1), "");
}

/* Merges path values at the join jb: 16-bit pairs as one <2 x T> phi (one
 * 32-bit register, not two), everything else one phi per value. Phis first,
 * then the unpacking. */
static void merge(tk_lower *L, LLVMValueRef *fv, LLVMBasicBlockRef fe, LLVMValueRef *sv,
                  LLVMBasicBlockRef se, LLVMBasicBlockRef jb, int n, LLVMValueRef *out) {
    LLVMBasicBlockRef bb[2] = {fe, se};
    for (int i = 0; i < n; i++) {
        LLVMTypeRef t = LLVMTypeOf(fv[i]);
        bool pair = i + 1 < n && is16(L, t) && LLVMTypeOf(fv[i + 1]) == t;
        LLVMValueRef in[2] = {fv[i], sv[i]};
        if (pair) {
            in[0] = pack_at_end(L, fe, fv, i);
            in[1] = pack_at_end(L, se, sv, i);
        }
        LLVMPositionBuilderAtEnd(L->b, jb);
        out[i] = LLVMBuildPhi(L->b, LLVMTypeOf(in[0]), "");
        LLVMAddIncoming(out[i], in, bb, 2);
        if (pair) out[++i] = NULL; /* filled from the pair's phi below */
    }
    for (int i = 0; i < n; i++) {
        if (i + 1 < n && !out[i + 1]) {
            LLVMValueRef phi = out[i];
            out[i] = LLVMBuildExtractElement(L->b, phi, tk_lw_i32c(L, 0), "");
            out[++i] = LLVMBuildExtractElement(L->b, phi, tk_lw_i32c(L, 1), "");
        }
    }
}

/* !prof !{"branch_weights", 2000, 1} on a conditional branch: the fast path
 * is the steady state, so block placement makes it the fall-through chain
 * and keeps the slow code out of the loop's straight line. */
static void likely_true(tk_lower *L, LLVMValueRef br) {
    LLVMMetadataRef ops[3] = {
        LLVMMDStringInContext2(L->c, "branch_weights", 14),
        LLVMValueAsMetadata(LLVMConstInt(L->i32, 2000, 0)),
        LLVMValueAsMetadata(LLVMConstInt(L->i32, 1, 0)),
    };
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(L->c, "prof", 4),
                    LLVMMetadataAsValue(L->c, LLVMMDNodeInContext2(L->c, ops, 3)));
}

void tk_lw_branch2(tk_lower *L, LLVMValueRef cond, tk_lw_path fast, tk_lw_path slow, void *ctx,
                   int n, LLVMValueRef *out) {
    LLVMBasicBlockRef fb = tk_lw_block(L, "fast"), sb = tk_lw_block(L, "slow"),
                      jb = tk_lw_block(L, "join");
    LLVMValueRef *fv = tk_lw_alloc(L, sizeof *fv * (size_t)(n + 1));
    LLVMValueRef *sv = tk_lw_alloc(L, sizeof *sv * (size_t)(n + 1));
    if (!fv || !sv) return;
    likely_true(L, LLVMBuildCondBr(L->b, cond, fb, sb));
    LLVMPositionBuilderAtEnd(L->b, fb);
    fast(L, ctx, fv);
    LLVMBasicBlockRef fe = LLVMGetInsertBlock(L->b);
    LLVMBuildBr(L->b, jb);
    LLVMPositionBuilderAtEnd(L->b, sb);
    slow(L, ctx, sv);
    LLVMBasicBlockRef se = LLVMGetInsertBlock(L->b);
    LLVMBuildBr(L->b, jb);
    LLVMPositionBuilderAtEnd(L->b, jb);
    merge(L, fv, fe, sv, se, jb, n, out);
}

/* ---- Memory ------------------------------------------------------------- */
/* 16 bytes of global scratch, externally visible so that no pass treats the
 * stores that land here as dead or the loads as constant. */
LLVMValueRef tk_lw_sink(tk_lower *L) {
    if (!L->sink) {
        LLVMTypeRef ty = LLVMArrayType2(L->i32, 4);
        L->sink = LLVMAddGlobalInAddressSpace(L->m, ty, "tk_sink", 1);
        LLVMSetInitializer(L->sink, LLVMConstNull(ty));
        LLVMSetAlignment(L->sink, 16);
    }
    return L->sink;
}

LLVMValueRef tk_lw_gep(tk_lower *L, LLVMValueRef ptr, LLVMValueRef byte_off) {
    return LLVMBuildGEP2(L->b, L->i8, ptr, &byte_off, 1, "");
}

LLVMValueRef tk_lw_load(tk_lower *L, LLVMTypeRef ty, LLVMValueRef ptr, unsigned align) {
    LLVMValueRef v = LLVMBuildLoad2(L->b, ty, ptr, "");
    LLVMSetAlignment(v, align);
    return v;
}

void tk_lw_store(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, unsigned align) {
    LLVMSetAlignment(LLVMBuildStore(L->b, val, ptr), align);
}

LLVMValueRef tk_lw_load_masked(tk_lower *L, LLVMTypeRef ty, LLVMValueRef ptr, LLVMValueRef ok,
                               LLVMValueRef fill, unsigned align) {
    LLVMValueRef p = LLVMBuildSelect(L->b, ok, ptr, tk_lw_sink(L), "");
    LLVMValueRef v = tk_lw_load(L, ty, p, align);
    return LLVMBuildSelect(L->b, ok, v, fill, "");
}

/* if (ok) store: a branch around one store, which ptxas turns into a
 * predicated st; keeps each element's unpacking and address local. */
/* A relaxed atomicrmw fadd whose result nobody reads: NVPTX emits
 * atom.global.add.f32, which ptxas turns into a fire-and-forget
 * REDG.ADD.F32 (checked in the SASS). */
void tk_lw_add_masked(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, LLVMValueRef ok) {
    LLVMBasicBlockRef st = tk_lw_block(L, "add"), next = tk_lw_block(L, "add.next");
    LLVMBuildCondBr(L->b, ok, st, next);
    LLVMPositionBuilderAtEnd(L->b, st);
    LLVMBuildAtomicRMW(L->b, LLVMAtomicRMWBinOpFAdd, ptr, val, LLVMAtomicOrderingMonotonic, 0);
    LLVMBuildBr(L->b, next);
    LLVMPositionBuilderAtEnd(L->b, next);
}

void tk_lw_store_masked(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, LLVMValueRef ok,
                        unsigned align) {
    LLVMBasicBlockRef st = tk_lw_block(L, "st"), next = tk_lw_block(L, "st.next");
    LLVMBuildCondBr(L->b, ok, st, next);
    LLVMPositionBuilderAtEnd(L->b, st);
    tk_lw_store(L, val, ptr, align);
    LLVMBuildBr(L->b, next);
    LLVMPositionBuilderAtEnd(L->b, next);
}
