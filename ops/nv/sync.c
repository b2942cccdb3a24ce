/* The sync strategies (tk_sync_ops in ops/nv/lower.h): what ASYNC_COMMIT,
 * ASYNC_WAIT and BARRIER mean in the code being emitted. The lowering driver
 * picks one (jit/lower.c, jit/lower_ws.c); ops/memory_nv.c calls it.
 *
 * lockstep  cp.async.commit_group / wait_group N / bar.sync 0.
 * ring      kernels with copies on the engine (ops/nv/tma.c): the same, and
 *           group j also completes on ring barrier j % R; a barrier is
 *           preceded by fence.proxy.async.
 * producer / consumer: the two sides of a warp-specialized kernel (the
 * split: jit/lower_ws.c). Only the group ring and the release rings carry
 * groups and barriers: neither side has cp.async groups of its own to track
 * (the producer's fallback copies arrive on the ring themselves). Group j
 * still lives on ring barrier j % R, which now expects W consumer arrivals
 * plus 32 from the producer warp:
 *
 *            producer (one warp)                consumers (W warps)
 *   copy     lane 0: expect_tx + boxes, or      nothing
 *            cp.async by the warp (fallback;
 *            then, for wgmma consumers, its
 *            wait and a proxy fence, and a
 *            release fence)
 *   commit   every lane: cp.async.mbarrier.     lane 0 of each warp arrives
 *            arrive.noinc (arrives once the
 *            lane's cp.async copies landed);
 *            a plain arrive with wgmma
 *   wait N   (not in the slice)                 parity waits, as before
 *   barrier  wait for rel[b % R] (all W         wait for ack[(b - R) % R];
 *            consumer warps arrived), arrive    lane 0 of each warp arrives on
 *            on ack[b % R], then, when some op  rel[b % R] (mbarrier.arrive
 *            reaches the engine's tiles by the  releases the warp's reads of
 *            generic proxy, fence.proxy.async   the stage); when they touched
 *            (generic_engine_tiles)             memory of their own since the
 *                                               barrier before
 *                                               (tk_ws_slice.sync_bar): the
 *                                               engine stores' reads, a proxy
 *                                               fence and a named barrier of
 *                                               the consumers first
 * (b counts barriers, the same in both roles.) The release pair is two
 * more rings of R mbarriers: rel's phase for barrier b + R cannot complete
 * before the producer acknowledged b (every consumer waits for that ack
 * before arriving), and ack's phase b + R needs every consumer's arrival
 * for b + R, made after its wait for ack b: neither runs two phases ahead
 * of a waiter. Multicasting (plan->multicast = n: either block of a
 * cluster may refill a stage in both), rel counts n·W consumer warps and
 * ack n producers, each arriving on the barrier in every block
 * (tk_mbar_arrive_release); the same argument holds. Every arrival on
 * group j still first waits for group j - R (tk_ring_arm), in both roles,
 * for the same reason. Nothing on the steady path is a full memory fence
 * (MEMBAR): mbarrier arrivals release and try_wait acquires. */
#include "ops/nv/lower.h"

static LLVMValueRef i32c(tk_lower *L, int64_t v) { return tk_lw_i32c(L, v); }

static unsigned block_scope(tk_lower *L) { return LLVMGetSyncScopeID(L->c, "block", 5); }

static void cp_commit(tk_lower *L) {
    tk_lw_intrin(L, "llvm.nvvm.cp.async.commit.group", NULL, 0, NULL, 0);
}

static void cp_wait(tk_lower *L, int pending) {
    LLVMValueRef n = i32c(L, pending);
    tk_lw_intrin(L, "llvm.nvvm.cp.async.wait.group", NULL, 0, &n, 1);
}

/* bar.sync 0: every thread of the block. */
static void bar_sync(tk_lower *L) {
    LLVMValueRef n = i32c(L, 0);
    tk_lw_intrin(L, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, 0, &n, 1);
}

static void proxy_fence(tk_lower *L) {
    tk_lw_intrin(L, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
}

static void no_op(tk_lower *L) { (void)L; }

/* ---- lockstep ------------------------------------------------------------------ */
/* In a kernel whose tensor cores read shared memory through wgmma's
 * descriptors (the async proxy), what threads wrote with ordinary stores or
 * cp.async (the generic proxy) is fenced over to the async proxy by each
 * writing thread before the barrier that publishes it. */
static void lockstep_barrier(tk_lower *L, const tk_op *op) {
    (void)op; /* no maps, so no engine stores: those are the ring's */
    if (L->plan->descriptors) proxy_fence(L);
    bar_sync(L);
}

const tk_sync_ops tk_sync_lockstep = {"lockstep", TK_ROLE_ALL,      cp_commit,
                                      cp_wait,    lockstep_barrier, no_op};

/* ---- ring ---------------------------------------------------------------------- */
static void ring_commit(tk_lower *L) {
    cp_commit(L);
    tk_ring_commit(L);
}

static void ring_wait(tk_lower *L, int pending) {
    cp_wait(L, pending);
    tk_ring_wait(L, pending);
}

/* A stage that every warp has read is the next copy's target right after
 * the barrier; the engine writes through the async proxy, which bar.sync
 * does not order after ldmatrix reads still in flight. Measured on the
 * H200: torn tiles once two blocks share an SM and k-loops run long. */
static void ring_barrier(tk_lower *L, const tk_op *op) {
    (void)op;
    tk_tma_store_reads_done(L);
    proxy_fence(L);
    bar_sync(L);
}

const tk_sync_ops tk_sync_ring = {"ring", TK_ROLE_ALL, ring_commit, ring_wait, ring_barrier, no_op};

/* ---- producer and consumers ---------------------------------------------------- */
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

/* Every producer lane arrives on the group's ring barrier once its copies
 * of the group landed: with wgmma consumers, a plain arrival after the
 * fallback's own wait and fence (producer_copy_done); otherwise one that
 * completes when the lane's cp.async copies have. */
static void producer_commit(tk_lower *L) {
    LLVMBuilderRef b = L->b;
    LLVMValueRef cnt = LLVMBuildLoad2(b, L->i32, L->ring_cnt, "");
    LLVMValueRef bar = tk_ring_arm(L, cnt), all = i32c(L, -1);
    /* lane 0's expect_tx (in the copies) before any lane's arrival */
    tk_lw_intrin(L, "llvm.nvvm.bar.warp.sync", NULL, 0, &all, 1);
    if (L->plan->descriptors)
        tk_lw_intrin(L, "llvm.nvvm.mbarrier.arrive.shared", NULL, 0, &bar, 1);
    else
        tk_lw_intrin(L, "llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared", NULL, 0, &bar, 1);
    LLVMBuildStore(b, LLVMBuildAdd(b, cnt, i32c(L, 1), ""), L->ring_cnt);
}

/* After a fallback copy (the threads' path, when the engine cannot take a
 * tile), which only the producer's lanes run. Its element path writes
 * shared memory with plain stores, which the noinc arrival does not order:
 * release them. Consumers that read through wgmma's descriptors (the async
 * proxy) need the copy's writes (cp.async or plain stores, the generic
 * proxy) complete and fenced over by the writing lane before its arrival.
 * Here, not in the commit: the engine's path pays none of it (two full
 * memory barriers per k-tile in the wgmma GEMM's producer). */
static void producer_copy_done(tk_lower *L) {
    if (L->plan->descriptors) {
        tk_lw_intrin(L, "llvm.nvvm.cp.async.wait.all", NULL, 0, NULL, 0);
        proxy_fence(L);
    }
    LLVMBuildFenceSyncScope(L->b, LLVMAtomicOrderingRelease, block_scope(L), "");
}

static void producer_barrier(tk_lower *L, const tk_op *op) {
    (void)op;
    LLVMValueRef parity, off = next_barrier(L, &parity);
    tk_mbar_wait(L, tk_lw_gep(L, L->rel, off), parity); /* every lane: fallbacks write too */
    tk_mbar_arrive_release(L, tk_lw_gep(L, L->ack, off));
    /* the consumers' generic accesses to the engine's tiles (ldmatrix)
     * before its writes; wgmma reads through the async proxy already */
    if (L->plan->generic_engine_tiles) proxy_fence(L);
}

static void consumer_barrier(tk_lower *L, const tk_op *op) {
    if (tk_plan_sync_barrier(L->plan, op)) {
        /* the engine's stores done reading the consumers' tiles; their
         * shared stores over to the async proxy (the engine's next store or
         * copy into those bytes) */
        tk_tma_store_reads_done(L);
        proxy_fence(L);
        LLVMValueRef a[2] = {i32c(L, 1), i32c(L, L->k->warps * 32)}; /* bar.sync 1, W*32 */
        tk_lw_intrin(L, "llvm.nvvm.barrier.cta.sync.aligned.count", NULL, 0, a, 2);
    }
    LLVMValueRef parity, off = next_barrier(L, &parity);
    /* the producer has seen barrier b - R: phase b/R - 1 of the same ack
     * slot, which on a fresh barrier (b < R) reads as over */
    tk_mbar_wait(L, tk_lw_gep(L, L->ack, off), LLVMBuildXor(L->b, parity, i32c(L, 1), ""));
    tk_mbar_arrive_release(L, tk_lw_gep(L, L->rel, off)); /* release: after the warp's reads */
}

/* ASYNC_WAIT is not in the producer's slice; its end waits for every group
 * it committed with wait(0) (jit/lower_ws.c). */
const tk_sync_ops tk_sync_producer = {"producer",   TK_ROLE_PRODUCER, producer_commit,
                                      tk_ring_wait, producer_barrier, producer_copy_done};
const tk_sync_ops tk_sync_consumer = {"consumer",   TK_ROLE_CONSUMER, tk_ring_commit,
                                      tk_ring_wait, consumer_barrier, no_op};
