/* Lowering driver: kernel + plan -> LLVM module (NVPTX) -> O3 -> PTX.
 *
 * Steps: target lookup (ops/nv/target.c), the kernel's plan (jit/plan.c:
 * the caller's, or made here), module + target machine, the entry function
 * with the ABI of ir/abi.h, per-thread ids in the entry block, the use
 * pre-pass, the sync strategy (ops/nv/sync.c), the region walk
 * (ops/lower_walk.c; warp-specialized kernels: once per role,
 * jit/lower_ws.c), verify, "default<O3>", emit. Each call owns its LLVM
 * context, so concurrent calls are safe once the NVPTX target is registered
 * (pthread_once). */
#include "jit/lower.h"
#include "jit/jit.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/abi.h"
#include "jit/lower_ws.h"
#include "jit/plan.h"
#include "ops/lower_walk.h"

#define TRIPLE "nvptx64-nvidia-cuda"

/* ---- Module setup --------------------------------------------------------- */
static void init_llvm_once(void) {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

static LLVMTargetMachineRef make_tm(tk_lower *L) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_llvm_once);
    LLVMTargetRef T;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(TRIPLE, &T, &msg)) {
        tk_lw_fail(L, TK_ERR_LLVM, "NVPTX target unavailable: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    return LLVMCreateTargetMachine(T, TRIPLE, L->tgt->cpu, L->tgt->features,
                                   LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                   LLVMCodeModelDefault);
}

static void init_types(tk_lower *L) {
    LLVMContextRef c = L->c;
    L->i1 = LLVMInt1TypeInContext(c);
    L->i8 = LLVMInt8TypeInContext(c);
    L->i16 = LLVMInt16TypeInContext(c);
    L->i32 = LLVMInt32TypeInContext(c);
    L->i64 = LLVMInt64TypeInContext(c);
    L->f32 = LLVMFloatTypeInContext(c);
    L->bf16 = LLVMBFloatTypeInContext(c);
    L->f16 = LLVMHalfTypeInContext(c);
    L->vd = LLVMVoidTypeInContext(c);
    L->pg = LLVMPointerTypeInContext(c, 1);
    L->ps = LLVMPointerTypeInContext(c, 3);
}

/* Entry parameters per ir/abi.h: tensor = ptr, dims[rank], strides[rank];
 * scalar = i32 (i32/bool), i64, f32. */
static int param_types(tk_lower *L, LLVMTypeRef *tys, int max) {
    int n = 0;
    for (int i = 0; i < L->k->nparams; i++) {
        const tk_value *p = L->k->params[i];
        if (p->type.kind == TK_KIND_GVIEW) {
            if (n + 1 + 2 * p->type.rank > max) return -1;
            tys[n++] = L->pg;
            for (int d = 0; d < 2 * p->type.rank; d++) tys[n++] = L->i64;
        } else {
            if (n + 1 > max) return -1;
            tk_dtype dt = p->type.dtype;
            tys[n++] = dt == TK_I64 ? L->i64 : dt == TK_F32 ? L->f32 : L->i32;
        }
    }
    return tk_tma_param_types(L, tys, n, max);
}

static void name_param(LLVMValueRef v, const char *base, const char *sfx, int d) {
    char buf[96];
    if (sfx)
        snprintf(buf, sizeof buf, "%s.%s%d", base ? base : "p", sfx, d);
    else
        snprintf(buf, sizeof buf, "%s", base ? base : "p");
    LLVMSetValueName2(v, buf, strlen(buf));
}

/* Binds each parameter's lowered form to the entry's arguments. */
static tk_status bind_params(tk_lower *L) {
    unsigned a = 0;
    for (int i = 0; i < L->k->nparams; i++) {
        const tk_value *p = L->k->params[i];
        if (p->type.kind == TK_KIND_GVIEW) {
            int r = p->type.rank;
            tk_lv *lv = tk_lw_def(L, p, 1 + 3 * r);
            if (!lv) return L->dg->st;
            lv->v[0] = LLVMGetParam(L->fn, a++);
            name_param(lv->v[0], p->name, NULL, 0);
            for (int d = 0; d < 2 * r; d++) {
                lv->v[1 + d] = LLVMGetParam(L->fn, a++);
                name_param(lv->v[1 + d], p->name, d < r ? "dim" : "stride", d % r);
            }
            for (int d = 0; d < r; d++) lv->v[1 + 2 * r + d] = tk_lw_i64c(L, 0); /* origin */
        } else {
            tk_lv *lv = tk_lw_def(L, p, 1);
            if (!lv) return L->dg->st;
            LLVMValueRef v = LLVMGetParam(L->fn, a++);
            name_param(v, p->name, NULL, 0);
            if (p->type.dtype == TK_BOOL) /* bool travels as i32 */
                v = LLVMBuildICmp(L->b, LLVMIntNE, v, tk_lw_i32c(L, 0), "");
            lv->v[0] = v;
        }
    }
    tk_tma_bind(L, a);
    return TK_OK;
}

static LLVMValueRef sreg(tk_lower *L, const char *name) {
    return tk_lw_intrin(L, name, NULL, 0, NULL, 0);
}

/* tid and its derived lane-position values, once, in the entry block. */
static void init_ids(tk_lower *L) {
    LLVMBuilderRef b = L->b;
    L->tid = sreg(L, "llvm.nvvm.read.ptx.sreg.tid.x");
    LLVMSetValueName2(L->tid, "tid", 3);
    L->lane = LLVMBuildAnd(b, L->tid, tk_lw_i32c(L, 31), "lane");
    L->warp = LLVMBuildLShr(b, L->tid, tk_lw_i32c(L, 5), "warp");
    L->g = LLVMBuildLShr(b, L->lane, tk_lw_i32c(L, 2), "g");        /* lane / 4 */
    L->t = LLVMBuildAnd(b, L->lane, tk_lw_i32c(L, 3), "t");         /* lane % 4 */
    L->wg_warp = LLVMBuildAnd(b, L->warp, tk_lw_i32c(L, 3), "wgw"); /* warp in warpgroup */
    L->ctid = L->tid; /* copies: every thread (jit/lower_ws.c narrows this) */
    L->cnt = L->k->warps * 32;
}

static void fn_attr_int(tk_lower *L, const char *key, int v) {
    char s[16];
    int len = snprintf(s, sizeof s, "%d", v);
    LLVMAddAttributeAtIndex(
        L->fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(L->c, key, (unsigned)strlen(key), s, (unsigned)len));
}

/* tk_kernel_set_maxnreg / _min_blocks, as .maxnreg / .minnctapersm. A
 * warp-specialized kernel already fixes both (one block per SM, registers
 * moved by setmaxnreg), so it takes neither rather than ignoring one. */
static tk_status occupancy(tk_lower *L) {
    const tk_kernel *k = L->k;
    if (!k->maxnreg && !k->min_blocks) return TK_OK;
    if (L->plan->producer_warps)
        return tk_lw_fail(L, TK_ERR_UNSUPPORTED,
                          "kernel '%s' is warp-specialized on this target "
                          "(one block per SM, registers set by setmaxnreg): maxnreg and "
                          "min_blocks do not apply",
                          k->name);
    if (k->maxnreg) fn_attr_int(L, "nvvm.maxnreg", k->maxnreg);
    if (k->min_blocks) fn_attr_int(L, "nvvm.minctasm", k->min_blocks);
    return TK_OK;
}

/* tk_kernel_set_cluster, as .reqnctapercluster (and .explicitcluster):
 * the launch needs no attribute of its own, and %cluster_ctarank and the
 * cluster's shared memory windows are defined. */
static tk_status cluster(tk_lower *L) {
    const tk_kernel *k = L->k;
    if (k->cluster < 2) return TK_OK;
    if (!L->plan->tgt || !L->plan->tgt->tma)
        return tk_lw_fail(L, TK_ERR_UNSUPPORTED,
                          "kernel '%s' runs in clusters of %d blocks: clusters need sm_90 or later",
                          k->name, k->cluster);
    char s[16];
    int len = snprintf(s, sizeof s, "%d,1,1", k->cluster);
    LLVMAddAttributeAtIndex(
        L->fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(L->c, "nvvm.cluster_dim", 16, s, (unsigned)len));
    return TK_OK;
}

static tk_status build_entry(tk_lower *L) {
    LLVMTypeRef tys[TK_MAX_PARAMS * 9 + TK_TMA_MAX_MAPS + 1]; /* as tk_launch's slots */
    int n = param_types(L, tys, (int)(sizeof tys / sizeof tys[0]));
    if (n < 0) return tk_lw_fail(L, TK_ERR_LLVM, "too many parameter slots");
    LLVMTypeRef fty = LLVMFunctionType(L->vd, tys, (unsigned)n, 0);
    L->fn = LLVMAddFunction(L->m, L->k->name, fty);
    LLVMSetFunctionCallConv(L->fn, 71); /* PTX_Kernel: an .entry */
    /* Exact block size: lets LLVM bound tid and ptxas budget registers. */
    char nt[16];
    int len = snprintf(nt, sizeof nt, "%d", L->plan->threads);
    LLVMAddAttributeAtIndex(L->fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(L->c, "nvvm.reqntid", 12, nt, (unsigned)len));
    /* ptxas honours setmaxnreg (jit/lower_ws.c) only when it knows the
     * registers at entry: one block per SM, all of the register file */
    if (L->plan->producer_warps)
        LLVMAddAttributeAtIndex(L->fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(L->c, "nvvm.minctasm", 13, "1", 1));
    if (occupancy(L) != TK_OK || cluster(L) != TK_OK) return L->dg->st;
    LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, L->fn, "entry"));

    /* extern __shared__ __align__(128) char tk_smem[]; */
    L->smem = LLVMAddGlobalInAddressSpace(L->m, LLVMArrayType2(L->i8, 0), "tk_smem", 3);
    LLVMSetLinkage(L->smem, LLVMExternalLinkage);
    LLVMSetAlignment(L->smem, TK_SMEM_ALIGN);

    init_ids(L);
    if (bind_params(L) != TK_OK) return L->dg->st;
    tk_lw_l2_init(L);
    tk_tma_entry(L);
    return L->dg->st;
}

/* ---- Use pre-pass ---------------------------------------------------------- */
/* Whether operand i of op is a FOR's initial carried value (its uses are
 * those of the loop's region argument and result: carry_uses). */
static bool is_init(const tk_op *op, int i) { return op->opc == TK_OP_FOR && i >= 3; }

static void note_uses(tk_lower *L, const tk_region *r) {
    if (!r) return;
    TK_FOREACH_OP(r, op) {
        for (int i = 0; i < op->nopnds; i++) {
            uint32_t id = op->opnds[i] ? op->opnds[i]->id : 0;
            if (id == 0 || id >= L->nvals || is_init(op, i)) continue;
            bool mma = op->opc == TK_OP_MMA && i < 2;
            L->use[id] |= !mma ? TK_USE_OTHER : i == 0 ? TK_USE_MMA_A : TK_USE_MMA_B;
        }
        for (int i = 0; i < 2; i++) note_uses(L, op->regions[i]);
    }
}

static bool or_use(tk_lower *L, const tk_value *v, uint8_t u) {
    if (!v || v->id == 0 || v->id >= L->nvals || (L->use[v->id] | u) == L->use[v->id]) return false;
    L->use[v->id] |= u;
    return true;
}

/* A value yielded by a FOR body or IF branch (or passed as a FOR's initial
 * value) is used the way the result and, for FOR, the next trip's region
 * argument are: a fragment carried through a k-loop into mma's B operand
 * keeps the B register order (no copies at the back edge). Returns whether
 * anything changed (nested regions need another round). */
static bool carry_uses(tk_lower *L, const tk_region *r) {
    bool changed = false;
    if (!r) return false;
    TK_FOREACH_OP(r, op) {
        for (int i = 0; i < 2; i++) {
            const tk_region *sub = op->regions[i];
            if (!sub) continue;
            changed |= carry_uses(L, sub);
            bool loop = op->opc == TK_OP_FOR;
            for (int y = 0; y < sub->nyield; y++) {
                uint8_t u = y < op->nres && op->res[y] && op->res[y]->id < L->nvals
                                ? L->use[op->res[y]->id]
                                : TK_USE_OTHER;
                if (loop && 1 + y < sub->nargs && sub->args[1 + y]->id < L->nvals)
                    u |= L->use[sub->args[1 + y]->id];
                else if (loop)
                    u = TK_USE_OTHER;
                changed |= or_use(L, sub->yield[y], u);
                if (loop && 3 + y < op->nopnds) changed |= or_use(L, op->opnds[3 + y], u);
            }
        }
    }
    return changed;
}

/* ---- Driver ------------------------------------------------------------- */
/* The kernel, its target and its plan: `plan` when the caller has one (it
 * must be for this target), else one made into *own. */
static tk_status check_kernel(tk_lower *L, const tk_kernel *k, const char *arch,
                              const tk_plan *plan, tk_plan *own) {
    if (!k) return tk_lw_fail(L, TK_ERR_INVALID_ARG, "kernel is NULL");
    if (k->status != TK_OK)
        return tk_lw_fail(L, TK_ERR_STATE, "kernel '%s' has an error: %s", k->name, k->error);
    if (!k->finished) return tk_lw_fail(L, TK_ERR_STATE, "kernel '%s' is not finished", k->name);
    L->tgt = tk_target_find(arch);
    if (!L->tgt) {
        char known[128];
        tk_target_names(known, sizeof known);
        return tk_lw_fail(L, TK_ERR_UNSUPPORTED, "unsupported arch '%s' (%s)",
                          arch ? arch : "(null)", known);
    }
    if (plan && plan->tgt != L->tgt)
        return tk_lw_fail(L, TK_ERR_STATE, "the plan was made for another target than '%s'", arch);
    if (!plan) tk_plan_make(k, L->tgt, own);
    L->plan = plan ? plan : own;
    return TK_OK;
}

static tk_status verify(tk_lower *L) {
    char *msg = NULL;
    if (LLVMVerifyModule(L->m, LLVMReturnStatusAction, &msg)) {
        tk_lw_fail(L, TK_ERR_LLVM, "LLVM verifier: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return L->dg->st;
    }
    LLVMDisposeMessage(msg);
    return TK_OK;
}

static tk_status optimize(tk_lower *L, LLVMTargetMachineRef tm) {
    LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(L->m, "default<O3>", tm, o);
    LLVMDisposePassBuilderOptions(o);
    if (e) {
        char *msg = LLVMGetErrorMessage(e);
        tk_lw_fail(L, TK_ERR_LLVM, "LLVM passes: %s", msg);
        LLVMDisposeErrorMessage(msg);
    }
    return L->dg->st;
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static tk_status emit(tk_lower *L, LLVMTargetMachineRef tm, bool ptx, char **out) {
    if (!ptx) {
        char *s = LLVMPrintModuleToString(L->m);
        *out = dup_n(s, strlen(s));
        LLVMDisposeMessage(s);
    } else {
        char *msg = NULL;
        LLVMMemoryBufferRef buf;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, L->m, LLVMAssemblyFile, &msg, &buf)) {
            tk_lw_fail(L, TK_ERR_LLVM, "PTX emission: %s", msg ? msg : "?");
            LLVMDisposeMessage(msg);
            return L->dg->st;
        }
        *out = dup_n(LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
        LLVMDisposeMemoryBuffer(buf);
    }
    return *out ? TK_OK : tk_lw_fail(L, TK_ERR_NO_MEMORY, "out of memory");
}

/* The body with the sync strategy the plan calls for: lockstep, lockstep
 * with the copy engine's ring, or split into producer and consumers. */
static tk_status lower_body(tk_lower *L) {
    if (L->plan->producer_warps) return tk_lower_split(L);
    L->sync = L->plan->nmaps ? &tk_sync_ring : &tk_sync_lockstep;
    return tk_lower_region(L, L->k->body);
}

static tk_status lower_and_emit(tk_lower *L, LLVMTargetMachineRef tm, bool ptx, char **out,
                                tk_lower_times *t) {
    double t0 = tk_now_ms();
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(L->m, td);
    LLVMDisposeTargetData(td);
    LLVMSetTarget(L->m, TRIPLE);
    L->nvals = L->k->nvalues + 1;
    L->vals = tk_lw_alloc(L, L->nvals * sizeof *L->vals);
    L->use = tk_lw_alloc(L, L->nvals);
    if (!L->vals || !L->use) return L->dg->st;
    note_uses(L, L->k->body);
    while (carry_uses(L, L->k->body)) {}
    if (build_entry(L) != TK_OK) return L->dg->st;
    if (lower_body(L) != TK_OK) return L->dg->st;
    tk_tma_store_drain(L);
    tk_cluster_end(L);
    LLVMBuildRetVoid(L->b);
    double t1 = tk_now_ms();
    if (verify(L) != TK_OK) return L->dg->st;
    double t2 = tk_now_ms();
    if (optimize(L, tm) != TK_OK) return L->dg->st;
    double t3 = tk_now_ms();
    tk_status s = emit(L, tm, ptx, out);
    *t = (tk_lower_times){t1 - t0, t2 - t1, t3 - t2, tk_now_ms() - t3};
    return s;
}

static tk_status run(const tk_kernel *k, const char *arch, const tk_plan *plan, bool ptx,
                     char **out, tk_lower_times *times, tk_diag *dg) {
    tk_lower_times unused;
    tk_diag diag = {0}; /* this call's own: a fresh lowering starts with no failure */
    tk_lower L = {.k = k, .sync = &tk_sync_lockstep, .dg = &diag};
    tk_plan own;
    if (!out) return tk_diag_fail(dg, TK_ERR_INVALID_ARG, "output pointer is NULL");
    *out = NULL;
    if (check_kernel(&L, k, arch, plan, &own) != TK_OK)
        return tk_diag_fail(dg, diag.st, "%s", diag.msg);
    L.c = LLVMContextCreate();
    L.m = LLVMModuleCreateWithNameInContext(k->name, L.c);
    L.b = LLVMCreateBuilderInContext(L.c);
    init_types(&L);
    LLVMTargetMachineRef tm = make_tm(&L);
    if (tm) {
        lower_and_emit(&L, tm, ptx, out, times ? times : &unused);
        LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeBuilder(L.b);
    LLVMDisposeModule(L.m);
    LLVMContextDispose(L.c);
    tk_lw_free_all(&L);
    if (diag.st == TK_OK) return TK_OK;
    free(*out);
    *out = NULL;
    return tk_diag_fail(dg, diag.st, "%s", diag.msg);
}

tk_status tk_lower_ptx(const tk_kernel *k, const char *arch, char **ptx, tk_diag *dg) {
    return run(k, arch, NULL, true, ptx, NULL, dg);
}

tk_status tk_lower_ptx_plan(const tk_kernel *k, const char *arch, const tk_plan *plan, char **ptx,
                            tk_diag *dg) {
    return run(k, arch, plan, true, ptx, NULL, dg);
}

tk_status tk_lower_ptx_timed(const tk_kernel *k, const char *arch, const tk_plan *plan, char **ptx,
                             tk_lower_times *t, tk_diag *dg) {
    *t = (tk_lower_times){0, 0, 0, 0};
    return run(k, arch, plan, true, ptx, t, dg);
}

tk_status tk_lower_llvm_text(const tk_kernel *k, const char *arch, char **text, tk_diag *dg) {
    return run(k, arch, NULL, false, text, NULL, dg);
}
