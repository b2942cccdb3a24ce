/* Lowering for kernels with copies on the engine (ops/nv/plan.h): the tensor-map
 * parameters, the aligned shared base, the mbarrier ring that tracks async
 * groups, COPY_G2S issued through the copy engine, and COPY_S2G as its store.
 *
 * Async groups on an mbarrier ring. cp.async.commit/wait_group cannot see
 * the copy engine, so in these kernels group j (the j-th ASYNC_COMMIT, the
 * same count in every thread) also completes on ring barrier j % R in
 * phase j / R (R = TK_TMA_RING; each phase expects one arrival per warp;
 * warp-specialized kernels change the roles, ops/nv/sync.c):
 *   copy    thread 0 adds the tile's bytes to barrier cnt % R
 *           (mbarrier.expect_tx) and issues one box per 128-byte column
 *           block; the engine completes those bytes on it. A copy that
 *           cannot use the engine at run time (no map at launch: unaligned
 *           tensor, TK_NO_TMA) takes the plain cp.async path instead.
 *   commit  cp.async.commit_group (for such copies), then lane 0 of each
 *           warp arrives once the warp has converged; cnt++.
 *   wait N  cp.async.wait_group N, then a parity wait for each group below
 *           cnt - N not yet waited for.
 * Before a warp arms a barrier for group j (expect_tx or arrival) its
 * threads first wait for group j - R, so no barrier can run two phases
 * ahead of a thread that still has to wait on it. Arrivals are per warp, not
 * per thread (cp.async.mbarrier.arrive would track the cp.async copies too,
 * but costs an LSU instruction per thread and k-tile: 4% of a GEMM's speed
 * measured on the H200). Both counters are per-thread allocas, which
 * mem2reg turns into registers; in the GEMM's k-loop R is deeper than the
 * stages, so that first wait is a compare that never branches. */
#include <stdio.h>

#include "ops/nv/lower.h"

static LLVMValueRef i32c(tk_lower *L, int64_t v) { return tk_lw_i32c(L, v); }

/* ---- Entry ------------------------------------------------------------------ */
int tk_tma_param_types(tk_lower *L, LLVMTypeRef *tys, int n, int max) {
    if (!L->plan->nmaps) return n;
    if (n + L->plan->nmaps + 1 > max) return -1;
    for (int i = 0; i < L->plan->nmaps; i++) tys[n++] = LLVMPointerTypeInContext(L->c, 0);
    tys[n++] = L->i32;
    return n;
}

/* Map i is a 128-byte CUtensorMap passed by value and read in place by the
 * copy engine: `.param .align 64 .b8 [128]`, its address taken as a
 * grid constant (no local copy). */
void tk_tma_bind(tk_lower *L, unsigned first) {
    if (!L->plan->nmaps) return;
    LLVMTypeRef map_ty = LLVMArrayType2(L->i8, 128);
    unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
    unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
    for (int i = 0; i < L->plan->nmaps; i++) {
        unsigned idx = first + (unsigned)i + 1; /* attribute index: params from 1 */
        LLVMAddAttributeAtIndex(L->fn, idx, LLVMCreateTypeAttribute(L->c, byval, map_ty));
        LLVMAddAttributeAtIndex(L->fn, idx, LLVMCreateEnumAttribute(L->c, align, 64));
        LLVMAddAttributeAtIndex(L->fn, idx,
                                LLVMCreateStringAttribute(L->c, "nvvm.grid_constant", 18, "", 0));
        L->tma_map[i] = LLVMGetParam(L->fn, first + (unsigned)i);
    }
    L->tma_flags = LLVMGetParam(L->fn, first + (unsigned)L->plan->nmaps);
    LLVMSetValueName2(L->tma_flags, "tma.flags", 9);
}

static LLVMValueRef ring_bar(tk_lower *L, LLVMValueRef j) {
    LLVMValueRef slot = LLVMBuildAnd(L->b, j, i32c(L, TK_TMA_RING - 1), "");
    return tk_lw_gep(L, L->ring, LLVMBuildMul(L->b, slot, i32c(L, 8), ""));
}

/* In the entry block: the base of SHARED offsets rounded up to
 * TK_TMA_ALIGN (the plan's smem_extra pays for the slack), the ring after the
 * tiles, initialized by thread 0 before a block-wide barrier, and the two
 * group counters. A kernel with neither maps nor wgmma descriptors
 * (plan.align_base) uses tk_smem itself as the base. */
void tk_tma_entry(tk_lower *L) {
    LLVMBuilderRef b = L->b;
    L->sbase = L->smem;
    if (!L->plan->align_base) return;
    if (L->plan->nmaps) {
        L->ring_cnt = LLVMBuildAlloca(b, L->i32, "ring.cnt");
        L->ring_done = LLVMBuildAlloca(b, L->i32, "ring.done");
        LLVMBuildStore(b, i32c(L, 0), L->ring_cnt);
        LLVMBuildStore(b, i32c(L, 0), L->ring_done);
    }
    LLVMValueRef addr = LLVMBuildPtrToInt(b, L->smem, L->i64, "");
    LLVMValueRef up = LLVMBuildAnd(b, LLVMBuildAdd(b, addr, tk_lw_i64c(L, TK_TMA_ALIGN - 1), ""),
                                   tk_lw_i64c(L, -TK_TMA_ALIGN), "");
    L->sbase = tk_lw_gep(L, L->smem, LLVMBuildSub(b, up, addr, ""));
    if (!L->plan->nmaps) return;
    L->ring = tk_lw_gep(L, L->sbase, i32c(L, (int64_t)L->plan->ring_offset));
    L->rel = tk_lw_gep(L, L->ring, i32c(L, 8 * TK_TMA_RING));
    L->ack = tk_lw_gep(L, L->ring, i32c(L, 16 * TK_TMA_RING));
    L->bar_cnt = LLVMBuildAlloca(b, L->i32, "bar.cnt");
    LLVMBuildStore(b, i32c(L, 0), L->bar_cnt);
    /* arrivals per phase: one per warp; warp-specialized, one per consumer
     * warp and one per producer lane (ops/nv/sync.c); multicasting, the
     * release rings count every block of the cluster */
    int arrivals = L->k->warps + (L->plan->producer_warps ? 32 : 0);
    int mc = L->plan->multicast ? L->plan->multicast : 1;
    if (mc > 1)
        L->crank = tk_lw_intrin(L, "llvm.nvvm.read.ptx.sreg.cluster.ctarank", NULL, 0, NULL, 0);
    LLVMBasicBlockRef init = tk_lw_block(L, "ring.init"), go = tk_lw_block(L, "ring.ready");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, L->tid, i32c(L, 0), ""), init, go);
    LLVMPositionBuilderAtEnd(b, init);
    for (int i = 0; i < TK_TMA_RING; i++) {
        LLVMValueRef a[2] = {tk_lw_gep(L, L->ring, i32c(L, 8 * i)), i32c(L, arrivals)};
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.init.shared", NULL, 0, a, 2);
        if (!L->plan->producer_warps) continue;
        /* the release rings (ops/nv/sync.c): every consumer warp; the producer */
        LLVMValueRef r[2] = {tk_lw_gep(L, L->rel, i32c(L, 8 * i)), i32c(L, mc * L->k->warps)};
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.init.shared", NULL, 0, r, 2);
        LLVMValueRef q[2] = {tk_lw_gep(L, L->ack, i32c(L, 8 * i)), i32c(L, mc)};
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.init.shared", NULL, 0, q, 2);
    }
    /* make the initialized barriers visible to the copy engine */
    tk_lw_intrin(L, "llvm.nvvm.fence.mbarrier_init.release.cluster", NULL, 0, NULL, 0);
    LLVMBuildBr(b, go);
    LLVMPositionBuilderAtEnd(b, go);
    if (mc > 1) { /* every block's barriers initialized before any peer copies or arrives */
        tk_lw_intrin(L, "llvm.nvvm.barrier.cluster.arrive", NULL, 0, NULL, 0);
        tk_lw_intrin(L, "llvm.nvvm.barrier.cluster.wait", NULL, 0, NULL, 0);
        return;
    }
    LLVMValueRef zero = i32c(L, 0);
    tk_lw_intrin(L, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, 0, &zero, 1);
}

void tk_cluster_end(tk_lower *L) {
    if (!L->plan->multicast) return;
    tk_lw_intrin(L, "llvm.nvvm.barrier.cluster.arrive", NULL, 0, NULL, 0);
    tk_lw_intrin(L, "llvm.nvvm.barrier.cluster.wait", NULL, 0, NULL, 0);
}

/* ---- mbarriers ------------------------------------------------------------- */
void tk_mbar_wait(tk_lower *L, LLVMValueRef bar, LLVMValueRef parity) {
    LLVMBasicBlockRef spin = tk_lw_block(L, "mbar.spin"), done = tk_lw_block(L, "mbar.done");
    LLVMBuildBr(L->b, spin);
    LLVMPositionBuilderAtEnd(L->b, spin);
    LLVMValueRef a[2] = {bar, parity};
    LLVMValueRef ok =
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta", NULL, 0, a, 2);
    LLVMBuildCondBr(L->b, ok, done, spin);
    LLVMPositionBuilderAtEnd(L->b, done);
}

/* bar.warp.sync, then lane 0 alone runs what `arrive` emits. */
static void lane0(tk_lower *L, LLVMValueRef bar, void (*arrive)(tk_lower *, LLVMValueRef)) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef all = i32c(L, -1);
    tk_lw_intrin(L, "llvm.nvvm.bar.warp.sync", NULL, 0, &all, 1);
    LLVMBasicBlockRef one = tk_lw_block(L, "mbar.arrive"), cont = tk_lw_block(L, "mbar.arrived");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, L->lane, i32c(L, 0), ""), one, cont);
    LLVMPositionBuilderAtEnd(b, one);
    arrive(L, bar);
    LLVMBuildBr(b, cont);
    LLVMPositionBuilderAtEnd(b, cont);
}

static void arrive_here(tk_lower *L, LLVMValueRef bar) {
    tk_lw_intrin(L, "llvm.nvvm.mbarrier.arrive.shared", NULL, 0, &bar, 1);
}

/* On the barrier at bar's offset in each block of the cluster, this one's
 * included (mapa of its own rank is its own barrier). Release at CTA scope,
 * as CUTLASS's cluster barriers arrive: what it orders (the warp's reads of
 * its stage, retired before this) is done before the arrival reaches the
 * peer. `.release.cluster` made the pairs 2.3x slower than one block alone
 * (H100, bench/RESULTS.md 2026-12-07); acquiring at cluster scope in the
 * waits measured the same as at CTA scope, so the waits stay as they are. */
static void arrive_everywhere(tk_lower *L, LLVMValueRef bar) {
    for (int q = 0; q < L->plan->multicast; q++) {
        LLVMValueRef m[2] = {bar, i32c(L, q)};
        LLVMValueRef a[2] = {tk_lw_intrin(L, "llvm.nvvm.mapa.shared.cluster", NULL, 0, m, 2),
                             i32c(L, 1)};
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.arrive.scope.cta.space.cluster", NULL, 0, a, 2);
    }
}

void tk_mbar_arrive_warp(tk_lower *L, LLVMValueRef bar) { lane0(L, bar, arrive_here); }
void tk_mbar_arrive_release(tk_lower *L, LLVMValueRef bar) {
    lane0(L, bar, L->plan->multicast ? arrive_everywhere : arrive_here);
}

/* ---- The ring ----------------------------------------------------------------- */
/* Waits for every group below `target` (i32, may be <= 0) not waited for yet. */
static void wait_below(tk_lower *L, LLVMValueRef target) {
    LLVMBuilderRef b = L->b;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b), head = tk_lw_block(L, "ring.head"),
                      body = tk_lw_block(L, "ring.wait"), out = tk_lw_block(L, "ring.out");
    LLVMValueRef done0 = LLVMBuildLoad2(b, L->i32, L->ring_done, "");
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, head);
    LLVMValueRef j = LLVMBuildPhi(b, L->i32, "ring.j");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j, target, ""), body, out);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef parity = LLVMBuildAnd(
        b, LLVMBuildLShr(b, j, i32c(L, __builtin_ctz(TK_TMA_RING)), ""), i32c(L, 1), "");
    tk_mbar_wait(L, ring_bar(L, j), parity);
    LLVMBasicBlockRef next = LLVMGetInsertBlock(b);
    LLVMValueRef j1 = LLVMBuildAdd(b, j, i32c(L, 1), "");
    LLVMBuildBr(b, head);
    LLVMValueRef in[2] = {done0, j1};
    LLVMBasicBlockRef from[2] = {pre, next};
    LLVMAddIncoming(j, in, from, 2);
    LLVMPositionBuilderAtEnd(b, out);
    LLVMBuildStore(b, j, L->ring_done);
}

LLVMValueRef tk_ring_arm(tk_lower *L, LLVMValueRef cnt) {
    wait_below(L, LLVMBuildSub(L->b, cnt, i32c(L, TK_TMA_RING - 1), ""));
    return ring_bar(L, cnt);
}

void tk_ring_commit(tk_lower *L) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef cnt = LLVMBuildLoad2(b, L->i32, L->ring_cnt, "");
    tk_mbar_arrive_warp(L, tk_ring_arm(L, cnt)); /* once the whole warp has armed */
    LLVMBuildStore(b, LLVMBuildAdd(b, cnt, i32c(L, 1), ""), L->ring_cnt);
}

void tk_ring_wait(tk_lower *L, int pending) {
    LLVMValueRef cnt = LLVMBuildLoad2(L->b, L->i32, L->ring_cnt, "");
    wait_below(L, LLVMBuildSub(L->b, cnt, i32c(L, pending), ""));
}

/* ---- COPY_G2S through the engine -------------------------------------------------- */
typedef struct tma_copy {
    const tk_op *op;
    int first; /* operand index of the tile's first coordinate          */
    const tk_tma_map *m;
    LLVMValueRef map, smem; /* tensor map (generic ptr), stage (shared)   */
    LLVMValueRef coord[4];  /* i32, innermost first                        */
    tk_lw_path cp_async;    /* the fallback and its context                */
    void *cp_ctx;
} tma_copy;

/* The axes a chain of NARROWs cut from the map's tensor (bit per axis). */
static unsigned narrowed_axes(const tk_value *view) {
    unsigned m = 0;
    for (; view && view->def && view->def->opc == TK_OP_NARROW; view = view->def->opnds[0])
        m |= 1u << view->def->attr[0];
    return m;
}

/* Whether the tile's extent from x along narrowed axis d lies inside the
 * view (the engine clips at the tensor's bounds, not the view's: a tile
 * crossing a narrowed edge takes the threads' masked copy). */
static LLVMValueRef inside(tk_lower *L, tma_copy *t, int d, LLVMValueRef x, LLVMValueRef dim) {
    LLVMBuilderRef b = L->b;
    const tk_value *sm = t->op->opnds[t->first == 2 ? 0 : t->op->nopnds - 1];
    int r = t->m->rank;
    int64_t ext = d == r - 1 ? sm->type.cols : d == r - 2 ? sm->type.rows : 1;
    LLVMValueRef end = LLVMBuildAdd(b, x, tk_lw_i64c(L, ext), "");
    return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, x, tk_lw_i64c(L, 0), ""),
                        LLVMBuildICmp(b, LLVMIntSLE, end, dim, ""), "");
}

/* The coordinates of the tile (innermost first) in the map's tensor, and
 * whether they all fit i32 with room for the boxes, the innermost one
 * starts on 16 bytes (the engine's rule: an unaligned start stops the
 * kernel on an illegal instruction, as a dQacc tile narrowed to a sequence
 * at an odd row did, packed sequences in the fused backward) and, on
 * narrowed axes, the tile lies inside the view (else the cp.async path
 * handles the copy). */
static LLVMValueRef coords(tk_lower *L, tma_copy *t) {
    LLVMBuilderRef b = L->b;
    int r = t->m->rank;
    const tk_value *view = t->op->opnds[t->first - 1];
    unsigned cut = narrowed_axes(view);
    tk_lv *vl = cut ? tk_lw_get(L, view) : NULL;
    LLVMValueRef ok = LLVMConstInt(L->i1, 1, 0);
    for (int d = 0; d < r; d++) {
        tk_lv *iv = tk_lw_get(L, t->op->opnds[t->first + d]);
        LLVMValueRef x = iv ? tk_lw_to_i64(L, iv->v[0]) : tk_lw_i64c(L, 0);
        if (vl && (cut >> d & 1)) {
            ok = LLVMBuildAnd(b, ok, inside(L, t, d, x, vl->v[1 + d]), "");
            x = LLVMBuildAdd(b, x, vl->v[1 + 2 * r + d], "");
        }
        LLVMValueRef sh = LLVMBuildAdd(b, x, tk_lw_i64c(L, (int64_t)1 << 31), "");
        ok = LLVMBuildAnd(
            b, ok, LLVMBuildICmp(b, LLVMIntULT, sh, tk_lw_i64c(L, ((int64_t)1 << 32) - 1024), ""),
            "");
        if (d == r - 1) {
            int64_t esz = (int64_t)tk_dtype_size(t->m->dtype);
            LLVMValueRef bytes = LLVMBuildMul(b, x, tk_lw_i64c(L, esz), "");
            LLVMValueRef low = LLVMBuildAnd(b, bytes, tk_lw_i64c(L, 15), "");
            ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, low, tk_lw_i64c(L, 0), ""), "");
        }
        t->coord[r - 1 - d] = LLVMBuildTrunc(b, x, L->i32, "");
    }
    return ok;
}

/* The engine's path when the tile's coordinates fit and its map was
 * encoded at launch, else the plain one. */
static void tma_branch(tk_lower *L, tma_copy *t, tk_lw_path engine, tk_lw_path plain) {
    LLVMValueRef ok = coords(L, t);
    int map = (int)(t->m - L->plan->maps);
    LLVMValueRef bit =
        LLVMBuildAnd(L->b, LLVMBuildLShr(L->b, L->tma_flags, i32c(L, map), ""), i32c(L, 1), "");
    ok = LLVMBuildAnd(L->b, ok, LLVMBuildICmp(L->b, LLVMIntNE, bit, i32c(L, 0), ""), "");
    tk_lw_branch2(L, ok, engine, plain, t, 0, NULL);
}

static void issue(tk_lower *L, void *ctx, LLVMValueRef *out) {
    tma_copy *t = ctx;
    LLVMBuilderRef b = L->b;
    const tk_type *st = &t->op->opnds[0]->type;
    int esz = (int)tk_dtype_size(st->dtype), r = t->m->rank;
    int blocks = st->cols * esz / t->m->swizzle;
    (void)out;
    LLVMBasicBlockRef one = tk_lw_block(L, "tma.issue"), cont = tk_lw_block(L, "tma.done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, L->ctid, i32c(L, 0), ""), one, cont);
    LLVMPositionBuilderAtEnd(b, one);
    LLVMValueRef bar = tk_ring_arm(L, LLVMBuildLoad2(b, L->i32, L->ring_cnt, ""));
    LLVMValueRef ex[2] = {bar, i32c(L, (int64_t)st->rows * st->cols * esz)};
    tk_lw_intrin(L, "llvm.nvvm.mbarrier.expect.tx.scope.cta.space.cta", NULL, 0, ex, 2);
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.g2s.tile.%dd", r);
    LLVMTypeRef cluster = LLVMPointerTypeInContext(L->c, 7);
    /* multicast: this block's share of the rows (the map's box), written at
     * the same offset in every block of the cluster, each of whose barriers
     * the engine completes by the share's bytes; the whole tile's bytes are
     * expected above, the other shares coming from the peers */
    bool mc = tk_plan_copy_multicast(L->plan, t->op);
    LLVMValueRef row0 = mc ? LLVMBuildMul(b, L->crank, i32c(L, t->m->box_rows), "") : NULL;
    LLVMValueRef at = mc ? LLVMBuildMul(b, row0, i32c(L, t->m->swizzle), "") : i32c(L, 0);
    LLVMValueRef l2 = tk_lw_l2_policy(L, t->op->opnds[1]);
    for (int k = 0; k < blocks; k++) {
        LLVMValueRef a[16];
        int n = 0;
        LLVMValueRef off = i32c(L, (int64_t)k * st->rows * t->m->swizzle);
        LLVMValueRef dst = tk_lw_gep(L, t->smem, mc ? LLVMBuildAdd(b, off, at, "") : off);
        a[n++] = LLVMBuildAddrSpaceCast(b, dst, cluster, "");
        a[n++] = bar;
        a[n++] = t->map;
        for (int d = 0; d < r; d++)
            a[n++] = d == 1 && mc ? LLVMBuildAdd(b, t->coord[1], row0, "")
                     : d          ? t->coord[d]
                         : LLVMBuildAdd(b, t->coord[0], i32c(L, (int64_t)k * t->m->box_cols), "");
        a[n++] = LLVMConstInt(L->i16, mc ? (1u << L->plan->multicast) - 1 : 0, 0); /* cta mask */
        a[n++] = l2 ? l2 : tk_lw_i64c(L, 0);      /* tk_param_set_cache */
        a[n++] = LLVMConstInt(L->i1, mc, 0);      /* multicast          */
        a[n++] = LLVMConstInt(L->i1, l2 != 0, 0); /* cache hint or not  */
        a[n++] = i32c(L, 0);                      /* no cta group        */
        tk_lw_intrin(L, name, NULL, 0, a, (unsigned)n);
    }
    LLVMBuildBr(b, cont);
    LLVMPositionBuilderAtEnd(b, cont);
}

/* The threads' own copy, when the engine cannot. */
static void plain(tk_lower *L, void *ctx, LLVMValueRef *out) {
    tma_copy *t = ctx;
    t->cp_async(L, t->cp_ctx, out);
}

static void fallback(tk_lower *L, void *ctx, LLVMValueRef *out) {
    plain(L, ctx, out);
    L->sync->copy_done(L);
}

/* COPY_G2S or COPY_S2G `op` (tile coordinates from operand `first`) through
 * map `map` with shared stage `smem`: `engine` where tma_branch allows,
 * else `other`, which calls cp_async(cp_ctx). */
static void tma_run(tk_lower *L, const tk_op *op, int first, int map, LLVMValueRef smem,
                    tk_lw_path engine, tk_lw_path other, tk_lw_path cp_async, void *cp_ctx) {
    tma_copy t = {.op = op,
                  .first = first,
                  .m = &L->plan->maps[map],
                  .map = L->tma_map[map],
                  .smem = smem,
                  .cp_async = cp_async,
                  .cp_ctx = cp_ctx};
    tma_branch(L, &t, engine, other);
}

void tk_tma_copy(tk_lower *L, const tk_op *op, int map, LLVMValueRef dst, tk_lw_path cp_async,
                 void *cp_ctx) {
    tma_run(L, op, 2, map, dst, issue, fallback, cp_async, cp_ctx);
}

/* ---- COPY_S2G through the engine ------------------------------------------------- */
/* Thread 0 stores the tile, one box per column block, as one bulk group:
 * the writers fenced their shared stores over to the async proxy before
 * the barrier that ordered them before this copy (ops/nv/sync.c). The
 * engine clips what lies outside the tensor, in its last dimension only in
 * whole 16-byte chunks of a row: the launch encodes no map to store through
 * where the rows end inside a chunk (jit/launch.c), and the threads copy. */
static void issue_store(tk_lower *L, void *ctx, LLVMValueRef *out) {
    tma_copy *t = ctx;
    LLVMBuilderRef b = L->b;
    const tk_type *st = &t->op->opnds[t->op->nopnds - 1]->type;
    int r = t->m->rank, blocks = st->cols * (int)tk_dtype_size(st->dtype) / t->m->swizzle;
    (void)out;
    LLVMBasicBlockRef one = tk_lw_block(L, "tma.store"), cont = tk_lw_block(L, "tma.stored");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, L->ctid, i32c(L, 0), ""), one, cont);
    LLVMPositionBuilderAtEnd(b, one);
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.%s.tile.%dd",
             t->op->attr[0] ? "reduce.add" : "s2g", r); /* tk_copy_to_global_add: in L2 */
    LLVMValueRef l2 = tk_lw_l2_policy(L, t->op->opnds[0]);
    for (int k = 0; k < blocks; k++) {
        LLVMValueRef a[8];
        int n = 0;
        a[n++] = tk_lw_gep(L, t->smem, i32c(L, (int64_t)k * st->rows * t->m->swizzle));
        a[n++] = t->map;
        for (int d = 0; d < r; d++)
            a[n++] = d ? t->coord[d]
                       : LLVMBuildAdd(b, t->coord[0], i32c(L, (int64_t)k * t->m->box_cols), "");
        a[n++] = l2 ? l2 : tk_lw_i64c(L, 0);      /* tk_param_set_cache */
        a[n++] = LLVMConstInt(L->i1, l2 != 0, 0); /* cache hint or not  */
        tk_lw_intrin(L, name, NULL, 0, a, (unsigned)n);
    }
    tk_lw_intrin(L, "llvm.nvvm.cp.async.bulk.commit.group", NULL, 0, NULL, 0);
    LLVMBuildBr(b, cont);
    LLVMPositionBuilderAtEnd(b, cont);
}

void tk_tma_store(tk_lower *L, const tk_op *op, int map, LLVMValueRef src, tk_lw_path threads,
                  void *threads_ctx) {
    tma_run(L, op, 1, map, src, issue_store, plain, threads, threads_ctx);
}

void tk_tma_store_reads_done(tk_lower *L) {
    if (!L->plan->stores) return;
    LLVMValueRef n = i32c(L, 0);
    tk_lw_intrin(L, "llvm.nvvm.cp.async.bulk.wait.group.read", NULL, 0, &n, 1);
}

void tk_tma_store_drain(tk_lower *L) {
    if (!L->plan->stores || L->sync->role == TK_ROLE_PRODUCER) return;
    LLVMValueRef n = i32c(L, 0);
    tk_lw_intrin(L, "llvm.nvvm.cp.async.bulk.wait.group", NULL, 0, &n, 1);
}
