/* Lowering of WGMMA and WGMMA_WAIT (rules: ops/wgmma.c), sm_90a only.
 *
 * WGMMA  wgmma.fence, then per 64-row block q of acc and
 *        per 16-deep k-step s one
 *          wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{bf16|f16}.{bf16|f16}
 *        as LLVM inline asm (LLVM 22 has no intrinsic for it), then
 *        wgmma.commit_group: one group per WGMMA op. Into tk_zeros, each
 *        block's first k-step has scale-d 0 (is_zero_fill). Shared operands
 *        written by ordinary stores or cp.async (the generic proxy) reach
 *        the tensor cores (the async proxy) through the fence.proxy.async
 *        that every writer issues before the barrier publishing them (each
 *        sync strategy does, ops/nv/sync.c, when the plan has descriptors):
 *        the reader needs none of its own.
 *   - acc: block q's N/2 registers per thread are acc's fragment slots
 *     q*N/2 .. (q+1)*N/2 - 1, in order: the ROW fragment layout of a
 *     warpgroup tile (ops/nv/frag.c: warp w holds rows 16w.., lanes as in
 *     mma.sync's m16n8 accumulator, subtile J's elements 0-3 / 4-7 its two
 *     n8 halves) is wgmma's m64nNk16 D layout, so nothing is shuffled.
 *   - register A: subtile (q, s) of the warp's row band, packed as
 *     mma.sync's A fragment (ops/mma_nv.c).
 *   - shared A and B: 64-bit matrix descriptors (desc below); a transposed
 *     A (ATB, ATBT) is read M-major through the transpose bit, as B of
 *     A*B is read N-major, block q from column block (a_row + 64q) / 64.
 * WGMMA_WAIT  wgmma.wait_group N (intrinsic), then an empty asm that takes
 *        and returns every accumulator register: LLVM cannot know that the
 *        wait is what makes them valid, and without the tie it may move a
 *        read of them above it. With `after` (tk_wgmma_wait_after), first a
 *        volatile st.shared of after's first register to the thread's own
 *        word (plan.pin_offset): ptxas places a wait as early as the
 *        multiply's own operands allow, above any independent work written
 *        before it, but keeps it behind a shared-memory store (checked in
 *        the SASS of the overlapped attention trip: the P·V wait moved
 *        from before the softmax's first shuffle to after its 65th exp2;
 *        PERF_NOTES round 31). A word per thread: no two threads write the
 *        same address, which compute-sanitizer's racecheck would report. */
#include <stdio.h>

#include "ops/lower_walk.h"

static LLVMValueRef i64c(tk_lower *L, int64_t v) { return tk_lw_i64c(L, v); }

/* Byte offset of element (row, col) in the tile's layout WITHOUT the
 * swizzle's XOR: the canonical address a descriptor gives the hardware,
 * which applies the swizzle itself. row is a multiple of 8, col of 16. */
static LLVMValueRef canonical_off(tk_lower *L, const tk_type *t, LLVMValueRef row, int col) {
    int64_t esz = (int64_t)tk_dtype_size(t->dtype), rb = (int64_t)t->cols * esz;
    int64_t cb = (int64_t)col * esz, step = tk_smem_row_step(t);
    int64_t fixed = rb > 128 ? cb / 128 * t->rows * 128 + cb % 128 : cb; /* column blocks */
    LLVMValueRef r = LLVMBuildMul(L->b, tk_lw_to_i64(L, row), i64c(L, step), "");
    return LLVMBuildAdd(L->b, r, i64c(L, fixed), "");
}

/* The matrix descriptor (PTX ISA, "Matrix Descriptor Format") of the core
 * matrices of shared tile t that start at shared address addr:
 *   bits 0-13 start address >> 4, 16-29 leading byte offset >> 4,
 *   32-45 stride byte offset >> 4, 62-63 swizzle (1: 128 B, 2: 64 B, 3: 32 B).
 * K-major (A; B of A*B^T): groups of 8 rows are 8 * swizzle bytes apart
 * (SBO); the leading offset is unused with a swizzle (1, as the ISA's
 * canonical layouts give it). N-major (B of A*B; a transposed A, M-major):
 * 8 k-rows are 8 * swizzle bytes apart (SBO), and N runs on in the next
 * column block, rows * 128 bytes further (LBO; tiles of one block never
 * get there). The swizzle is tk_smem_swizzle_bytes, the one the copy
 * engine writes. */
static LLVMValueRef desc_at(tk_lower *L, const tk_type *t, LLVMValueRef addr, bool n_major) {
    LLVMBuilderRef b = L->b;
    int64_t sw = tk_smem_swizzle_bytes(t), sbo = 8 * sw;
    int64_t lbo = n_major ? (int64_t)t->rows * sw : 16, mode = sw == 128 ? 1 : sw == 64 ? 2 : 3;
    LLVMValueRef lo = LLVMBuildLShr(b, LLVMBuildAnd(b, addr, i64c(L, 0x3ffff), ""), i64c(L, 4), "");
    uint64_t hi = ((uint64_t)(lbo >> 4) & 0x3fff) << 16 | ((uint64_t)(sbo >> 4) & 0x3fff) << 32 |
                  (uint64_t)mode << 62;
    return LLVMBuildOr(b, lo, LLVMConstInt(L->i64, hi, 0), "");
}

/* The descriptor of tile t (at `base`) from element (row, col). */
static LLVMValueRef desc(tk_lower *L, const tk_type *t, LLVMValueRef base, LLVMValueRef row,
                         int col, bool n_major) {
    LLVMValueRef addr = LLVMBuildPtrToInt(L->b, base, L->i64, "");
    return desc_at(L, t, LLVMBuildAdd(L->b, addr, canonical_off(L, t, row, col), ""), n_major);
}

/* A transposed A's descriptor for k-step s from column `col` (run-time, a
 * multiple of 64 = one 128-byte column block, rows * 128 bytes long). */
static LLVMValueRef desc_t(tk_lower *L, const tk_type *t, LLVMValueRef base, LLVMValueRef col,
                           int s) {
    LLVMValueRef blk =
        LLVMBuildMul(L->b, tk_lw_to_i64(L, col),
                     i64c(L, (int64_t)t->rows * (int64_t)tk_dtype_size(t->dtype)), "");
    LLVMValueRef addr = LLVMBuildAdd(L->b, LLVMBuildPtrToInt(L->b, base, L->i64, ""), blk, "");
    return desc_at(L, t, LLVMBuildAdd(L->b, addr, canonical_off(L, t, i64c(L, 16 * s), 0), ""),
                   true);
}

/* Two 16-bit elements in one 32-bit register, the first in the low half. */
static LLVMValueRef pack32(tk_lower *L, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), 2);
    LLVMValueRef v = LLVMGetPoison(vt);
    v = LLVMBuildInsertElement(L->b, v, x, tk_lw_i32c(L, 0), "");
    v = LLVMBuildInsertElement(L->b, v, y, tk_lw_i32c(L, 1), "");
    return LLVMBuildBitCast(L->b, v, L->i32, "");
}

/* Appends `$first, ..., $(first + n - 1)` to buf at *len. */
static void regs(char *buf, size_t cap, size_t *len, int first, int n) {
    for (int i = 0; i < n; i++)
        *len += (size_t)snprintf(buf + *len, cap - *len, "%s$%d", i ? ", " : "", first + i);
}

/* The operands' transpose bits: a (descriptor A only) M-major, b N-major. */
typedef struct wg_trans {
    bool a, b;
} wg_trans;

/* One wgmma: acc[0..n) = A * B + acc, with `ain` the A operand(s) (one
 * descriptor, or four registers) and bdesc B's descriptor; `fresh`: acc is
 * zero, so scale-d 0 (acc = A * B) and the registers are outputs only. */
static void issue1(tk_lower *L, const char *dt, int N, LLVMValueRef *acc, LLVMValueRef *ain, int na,
                   LLVMValueRef bdesc, wg_trans tr, bool fresh) {
    const int n = N / 2;
    const size_t cap = 16384;
    char *text = tk_lw_alloc(L, cap), *cons = tk_lw_alloc(L, cap);
    LLVMValueRef *args = tk_lw_alloc(L, (size_t)(na + 2 + n) * sizeof *args);
    if (!text || !cons || !args) return;
    size_t t = (size_t)snprintf(text, cap,
                                "{\n.reg .pred p;\nsetp.ne.b32 p, $%d, 0;\n"
                                "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {",
                                n + na + 1, N, dt, dt);
    regs(text, cap, &t, 0, n);
    t += (size_t)snprintf(text + t, cap - t, "}, ");
    if (na == 1) {
        t += (size_t)snprintf(text + t, cap - t, "$%d", n);
    } else {
        t += (size_t)snprintf(text + t, cap - t, "{");
        regs(text, cap, &t, n, na);
        t += (size_t)snprintf(text + t, cap - t, "}");
    }
    /* scale-d p (accumulate), imm-scale-a/b 1, imm-trans-a (descriptor A
     * only), imm-trans-b */
    snprintf(text + t, cap - t, ", $%d, p, 1, 1%s, %d;\n}", n + na,
             na != 1 ? ""
             : tr.a  ? ", 1"
                     : ", 0",
             tr.b ? 1 : 0);
    size_t c = 0;
    for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, cap - c, "=f,");
    for (int i = 0; i < na; i++) c += (size_t)snprintf(cons + c, cap - c, na == 1 ? "l," : "r,");
    c += (size_t)snprintf(cons + c, cap - c, "l,r");
    for (int i = 0; i < n && !fresh; i++) c += (size_t)snprintf(cons + c, cap - c, ",%d", i);
    for (int i = 0; i < na; i++) args[i] = ain[i];
    args[na] = bdesc;
    args[na + 1] = tk_lw_i32c(L, !fresh);
    for (int i = 0; i < n; i++) args[na + 2 + i] = acc[i];
    LLVMTypeRef *fs = tk_lw_alloc(L, (size_t)n * sizeof *fs);
    if (!fs) return;
    for (int i = 0; i < n; i++) fs[i] = L->f32;
    LLVMTypeRef rt = LLVMStructTypeInContext(L->c, fs, (unsigned)n, 0);
    LLVMValueRef r = tk_lw_asm(L, rt, text, cons, args, (unsigned)(na + 2 + (fresh ? 0 : n)), true);
    for (int i = 0; i < n && r; i++) acc[i] = LLVMBuildExtractValue(L->b, r, (unsigned)i, "");
}

/* Whether v is tk_zeros (a FILL of 0): its multiply starts with scale-d 0
 * instead of zeroing registers, which is exact up to the sign of a zero
 * product. Those zeroing moves would be register writes after wgmma.fence,
 * and with another multiply still in flight ptxas then serializes them (it
 * injects a wgmma wait, C7517). */
static bool is_zero_fill(const tk_value *v) {
    const tk_op *f = v->def, *c = f && f->opc == TK_OP_FILL ? f->opnds[0]->def : NULL;
    return c && c->opc == TK_OP_CONST && c->fattr == 0.0;
}

static tk_status lower_issue(tk_lower *L, const tk_op *op) {
    const tk_type *ct = &op->res[0]->type, *at = &op->opnds[1]->type, *bt = &op->opnds[2]->type;
    tk_lv *acc = tk_lw_get(L, op->opnds[0]), *a = tk_lw_get(L, op->opnds[1]);
    tk_lv *bv = tk_lw_get(L, op->opnds[2]), *d = tk_lw_def(L, op->res[0], tk_frag_count(ct));
    tk_lv *row = op->nopnds > 3 ? tk_lw_get(L, op->opnds[3]) : NULL;
    if (!acc || !a || !bv || !d || (op->nopnds > 3 && !row)) return L->dg->st;
    const char *dt = at->dtype == TK_BF16 ? "bf16" : "f16";
    const int64_t kd = op->attr[0];
    const bool reg = at->kind == TK_KIND_TILE;
    const wg_trans tr = {.a = kd == TK_MMA_ATB || kd == TK_MMA_ATBT,
                         .b = kd == TK_MMA_AB || kd == TK_MMA_ATB};
    const int N = ct->cols, n = N / 2, K = tr.a ? at->rows : at->cols;
    const bool zero = is_zero_fill(op->opnds[0]);
    for (int i = 0; i < d->n; i++) d->v[i] = acc->v[i];
    /* A register A is packed before wgmma.fence: the ISA wants the fence
     * between the last write of an A register and the wgmma reading it.
     * Nothing pins the packed values above the fence (as an empty asm pins
     * the accumulators below a wait); in the kernels that compute their A
     * (the attention's P, the backward's P and dS) LLVM keeps them there,
     * and ptxas would flag the opposite (C7517). */
    const int nq = ct->rows / 64, ns = K / 16;
    LLVMValueRef *ain = tk_lw_alloc(L, (size_t)(nq * ns * 4) * sizeof *ain);
    if (!ain) return L->dg->st;
    for (int q = 0; q < nq; q++)
        for (int s = 0; s < ns; s++) {
            LLVMValueRef *x = ain + (q * ns + s) * 4;
            if (reg) {
                int base = (q * ns + s) * 8;
                for (int p = 0; p < 4; p++)
                    x[p] = pack32(L, a->v[base + 2 * p], a->v[base + 2 * p + 1]);
            } else {
                LLVMValueRef r =
                    LLVMBuildAdd(L->b, tk_lw_to_i64(L, row->v[0]), i64c(L, 64 * q), "");
                x[0] = tr.a ? desc_t(L, at, a->v[0], r, s) : desc(L, at, a->v[0], r, 16 * s, false);
            }
        }
    tk_lw_intrin(L, "llvm.nvvm.wgmma.fence.sync.aligned", NULL, 0, NULL, 0);
    for (int q = 0; q < nq; q++) {
        for (int s = 0; s < ns; s++) {
            LLVMValueRef bd = tr.b ? desc(L, bt, bv->v[0], i64c(L, 16 * s), 0, true)
                                   : desc(L, bt, bv->v[0], i64c(L, 0), 16 * s, false);
            issue1(L, dt, N, d->v + q * n, ain + (q * ns + s) * 4, reg ? 4 : 1, bd, tr,
                   zero && s == 0);
        }
    }
    tk_lw_intrin(L, "llvm.nvvm.wgmma.commit_group.sync.aligned", NULL, 0, NULL, 0);
    return L->dg->st;
}

/* v's bits as an i32 (a vector's first element; wider cut, narrower
 * zero-extended): what the pin stores, its value never read. */
static LLVMValueRef as_i32(tk_lower *L, LLVMValueRef v) {
    LLVMBuilderRef b = L->b;
    switch (LLVMGetTypeKind(LLVMTypeOf(v))) {
    case LLVMVectorTypeKind: return as_i32(L, LLVMBuildExtractElement(b, v, tk_lw_i32c(L, 0), ""));
    case LLVMFloatTypeKind: return LLVMBuildBitCast(b, v, L->i32, "");
    case LLVMDoubleTypeKind: return as_i32(L, LLVMBuildBitCast(b, v, L->i64, ""));
    case LLVMHalfTypeKind:
    case LLVMBFloatTypeKind: return as_i32(L, LLVMBuildBitCast(b, v, L->i16, ""));
    case LLVMIntegerTypeKind:
        return LLVMGetIntTypeWidth(LLVMTypeOf(v)) > 32 ? LLVMBuildTrunc(b, v, L->i32, "")
                                                       : LLVMBuildZExt(b, v, L->i32, "");
    default: return tk_lw_i32c(L, 0); /* no other register type exists */
    }
}

/* tk_wgmma_wait_after's pin: after's first register into the thread's
 * word at plan.pin_offset. */
static void pin_store(tk_lower *L, const tk_value *after) {
    tk_lv *a = tk_lw_get(L, after);
    if (!a || !a->n) return;
    LLVMValueRef off = LLVMBuildAdd(L->b, tk_lw_i32c(L, (int64_t)L->plan->pin_offset),
                                    LLVMBuildMul(L->b, L->tid, tk_lw_i32c(L, 4), ""), "");
    LLVMValueRef st = LLVMBuildStore(L->b, as_i32(L, a->v[0]), tk_lw_gep(L, L->sbase, off));
    LLVMSetVolatile(st, 1);
}

static tk_status lower_wait(tk_lower *L, const tk_op *op) {
    tk_lv *acc = tk_lw_get(L, op->opnds[0]);
    tk_lv *d = acc ? tk_lw_def(L, op->res[0], acc->n) : NULL;
    if (!d) return L->dg->st;
    if (op->nopnds > 1) pin_store(L, op->opnds[1]);
    LLVMValueRef pending = i64c(L, op->attr[0]);
    tk_lw_intrin(L, "llvm.nvvm.wgmma.wait_group.sync.aligned", NULL, 0, &pending, 1);
    const int n = acc->n;
    const size_t cap = (size_t)n * 12 + 16;
    char *cons = tk_lw_alloc(L, cap);
    LLVMTypeRef *fs = tk_lw_alloc(L, (size_t)n * sizeof *fs);
    if (!cons || !fs) return L->dg->st;
    size_t c = 0;
    for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, cap - c, "%s=f", i ? "," : "");
    for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, cap - c, ",%d", i);
    for (int i = 0; i < n; i++) fs[i] = L->f32;
    LLVMTypeRef rt = LLVMStructTypeInContext(L->c, fs, (unsigned)n, 0);
    LLVMValueRef r = tk_lw_asm(L, rt, "", cons, acc->v, (unsigned)n, true);
    for (int i = 0; i < n && r; i++) d->v[i] = LLVMBuildExtractValue(L->b, r, (unsigned)i, "");
    return L->dg->st;
}

tk_status tk_lower_wgmma(tk_lower *L, const tk_op *op) {
    if (!L->tgt->wgmma)
        return tk_lw_fail(L, TK_ERR_UNSUPPORTED,
                          "tk_%s needs sm_90a (the target is %s); "
                          "kernels for other GPUs use tk_mma",
                          tk_op_infos[op->opc].name, L->tgt->arch);
    return op->opc == TK_OP_WGMMA ? lower_issue(L, op) : lower_wait(L, op);
}
