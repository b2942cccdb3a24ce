/* Lowering of warp-specialized copy-engine kernels (jit/ws.h).
 *
 * The block has the kernel's W warps (consumers) and one producer
 * warpgroup after them. The entry splits on the warp index: the producer
 * warpgroup gives registers back (setmaxnreg.dec) and all but its first
 * warp exit; the consumers take them (setmaxnreg.inc). ptxas honours
 * setmaxnreg only in whole-program code, so the driver path loads such
 * kernels from PTX (jit/link.c). Each side then lowers the
 * kernel body in its role (L->role), which changes what the
 * synchronization ops mean; group j still lives on ring barrier j % R
 * (ops/nv/tma.c), which now expects W consumer arrivals plus 32 from the
 * producer warp:
 *
 *            producer (one warp)                consumers (W warps)
 *   copy     lane 0: expect_tx + boxes, or      nothing
 *            cp.async by the warp (fallback;
 *            then a release fence)
 *   commit   every lane: cp.async.mbarrier.     lane 0 of each warp arrives
 *            arrive.noinc (arrives once the
 *            lane's cp.async copies landed)
 *   wait N   (not in the slice)                 parity waits, as before
 *   barrier  wait for rel[b % R] (all W         wait for ack[(b - R) % R];
 *            consumer warps arrived), arrive    lane 0 of each warp arrives on
 *            on ack[b % R], then                rel[b % R] (mbarrier.arrive
 *            fence.proxy.async: the consumers'  releases the warp's reads of
 *            generic reads before the engine's  the stage); when they share
 *            writes                             memory of their own (jit/ws.h),
 *                                               a proxy fence and a named
 *                                               barrier of the consumers first
 * (b counts barriers, the same in both roles.) The release pair is two
 * more rings of R mbarriers: rel's phase for barrier b + R cannot complete
 * before the producer acknowledged b (every consumer waits for that ack
 * before arriving), and ack's phase b + R needs every consumer's arrival
 * for b + R, made after its wait for ack b: neither runs two phases ahead
 * of a waiter. Every arrival on group j still first waits for group j - R
 * (the arm in lower_tma.c), in both roles, for the same reason. Nothing on
 * the steady path is a full memory fence (MEMBAR): mbarrier arrivals
 * release and try_wait acquires. */
#include <string.h>

#include "jit/ws.h"
#include "ops/nv/lower.h"

static LLVMValueRef i32c(tk_lower *L, int64_t v) { return tk_lw_i32c(L, v); }

static unsigned block_scope(tk_lower *L) { return LLVMGetSyncScopeID(L->c, "block", 5); }

/* ---- Synchronization in each role ------------------------------------------ */
/* Counts a barrier b; returns the byte offset of its slot in a release
 * ring (b % R) and the parity of its phase there (b / R). */
static LLVMValueRef next_barrier(tk_lower *L, LLVMValueRef *parity) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef n = LLVMBuildLoad2(b, L->i32, L->bar_cnt, "");
    LLVMBuildStore(b, LLVMBuildAdd(b, n, i32c(L, 1), ""), L->bar_cnt);
    LLVMValueRef slot = LLVMBuildAnd(b, n, i32c(L, TK_TMA_RING - 1), "");
    *parity = LLVMBuildAnd(b, LLVMBuildLShr(b, n, i32c(L, __builtin_ctz(TK_TMA_RING)), ""),
                           i32c(L, 1), "");
    return LLVMBuildMul(b, slot, i32c(L, 8), "");
}

void tk_ws_commit_producer(tk_lower *L) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef cnt = LLVMBuildLoad2(b, L->i32, L->ring_cnt, "");
    LLVMValueRef bar = tk_ring_arm(L, cnt), all = i32c(L, -1);
    /* lane 0's expect_tx (in the copies) before any lane's arrival */
    tk_lw_intrin(L, "llvm.nvvm.bar.warp.sync", NULL, 0, &all, 1);
    tk_lw_intrin(L, "llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared", NULL, 0, &bar, 1);
    LLVMBuildStore(b, LLVMBuildAdd(b, cnt, i32c(L, 1), ""), L->ring_cnt);
}

/* The fallback's element path writes shared memory with plain stores,
 * which the noinc arrival does not order: release them first. Only on that
 * path, which is rare: the fence compiles to a full memory barrier. */
void tk_ws_fallback_done(tk_lower *L) {
    if (L->role == TK_ROLE_PRODUCER)
        LLVMBuildFenceSyncScope(L->b, LLVMAtomicOrderingRelease, block_scope(L), "");
}

void tk_ws_barrier_consumer(tk_lower *L) {
    if (L->ws->consumer_sync) {
        /* their shared stores before the engine may overwrite those bytes */
        tk_lw_intrin(L, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
        LLVMValueRef a[2] = {i32c(L, 1), i32c(L, L->k->warps * 32)}; /* bar.sync 1, W*32 */
        tk_lw_intrin(L, "llvm.nvvm.barrier.cta.sync.aligned.count", NULL, 0, a, 2);
    }
    LLVMValueRef parity, off = next_barrier(L, &parity);
    /* the producer has seen barrier b - R: phase b/R - 1 of the same ack
     * slot, which on a fresh barrier (b < R) reads as over */
    tk_mbar_wait(L, tk_lw_gep(L, L->ack, off), LLVMBuildXor(L->b, parity, i32c(L, 1), ""));
    tk_mbar_arrive_warp(L, tk_lw_gep(L, L->rel, off)); /* release: after the warp's reads */
}

void tk_ws_barrier_producer(tk_lower *L) {
    LLVMValueRef parity, off = next_barrier(L, &parity);
    tk_mbar_wait(L, tk_lw_gep(L, L->rel, off), parity); /* every lane: fallbacks write too */
    tk_mbar_arrive_warp(L, tk_lw_gep(L, L->ack, off));
    /* the consumers' reads (generic proxy) before the engine's writes */
    tk_lw_intrin(L, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
}

/* ---- The split ------------------------------------------------------------- */
static tk_status lower_role(tk_lower *L, tk_role role) {
    bool prod = role == TK_ROLE_PRODUCER;
    LLVMValueRef n = i32c(L, prod ? TK_WS_PRODUCER_REGS : tk_ws_consumer_regs(L->k->warps));
    tk_lw_intrin(L, prod ? "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32"
                         : "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32", NULL, 0, &n, 1);
    if (prod) { /* only the warpgroup's first warp goes on */
        LLVMBasicBlockRef run = tk_lw_block(L, "ws.produce"), quit = tk_lw_block(L, "ws.quit");
        LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntEQ, L->warp, i32c(L, L->k->warps), ""),
                        run, quit);
        LLVMPositionBuilderAtEnd(L->b, quit);
        LLVMBuildRetVoid(L->b);
        LLVMPositionBuilderAtEnd(L->b, run);
        L->ctid = L->lane;
        L->cnt = 32;
    } else {
        L->ctid = L->tid;
        L->cnt = L->k->warps * 32;
    }
    L->role = role;
    return tk_lower_region(L, L->k->body);
}

tk_status tk_ws_lower(tk_lower *L) {
    tk_ws_slice *s = tk_lw_alloc(L, sizeof *s);
    tk_lv *params = tk_lw_alloc(L, L->nvals * sizeof *params);
    if (!s || !params)
        return L->st;
    if (!tk_ws_slice_make(L->k, &L->tma, s))
        return tk_lw_fail(L, TK_ERR_LLVM, "warp specialization: the plan and the slice disagree");
    L->ws = s;
    memcpy(params, L->vals, L->nvals * sizeof *params); /* what the entry defined */
    LLVMBasicBlockRef prod = tk_lw_block(L, "ws.producer"), cons = tk_lw_block(L, "ws.consumer");
    LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntUGE, L->warp, i32c(L, L->k->warps), ""),
                    prod, cons);
    LLVMPositionBuilderAtEnd(L->b, prod);
    if (lower_role(L, TK_ROLE_PRODUCER) != TK_OK)
        return L->st;
    tk_ring_wait(L, 0); /* its fallback copies land before the warp exits */
    LLVMBuildRetVoid(L->b);
    memcpy(L->vals, params, L->nvals * sizeof *params);
    LLVMPositionBuilderAtEnd(L->b, cons);
    return lower_role(L, TK_ROLE_CONSUMER);
}
