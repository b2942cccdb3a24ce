/* The interpreter's race checker (tk_interp_options.race_check).
 *
 * The interpreter runs a block's warps in lockstep, so a missing barrier
 * never changes a result on the CPU. The checker records, per block and per
 * barrier interval ("epoch"), who touched each shared element and each global
 * element, and fails the run (TK_ERR_RUNTIME) at the first access that
 * another agent touched in the same epoch with at least one write:
 *  - agents are a warp (warp-owned loads/stores), a warpgroup (its tiles;
 *    its own accesses are taken as ordered), or the block (block copies,
 *    whose elements the lowering spreads over every thread, and async
 *    copies landing);
 *  - a barrier starts a new epoch: it orders every earlier access of every
 *    warp before every later one;
 *  - an async copy (cp.async, copy engine) checks its destination as a
 *    write when issued, then keeps it "in flight": any access to it before
 *    a tk_async_wait retires its group is an error, and once landed it is a
 *    write by the block in the epoch of that wait, so other warps may read
 *    it only after the next barrier.
 *  - a warpgroup multiply (tk_wgmma) reads its shared operands when issued
 *    (a read by the warpgroup) and keeps reading them until a
 *    tk_wgmma_wait retires its group: any write to them meanwhile, by
 *    anyone, is an error (on the GPU the tensor cores read them
 *    asynchronously, so a refill "after the barrier" can still be early).
 * With one warp nothing can race, except access to an in-flight stage. */
#ifndef TK_OPS_RACE_H
#define TK_OPS_RACE_H

#include "ops/interp.h"

typedef struct tk_race tk_race;

/* Agents: warp w is w; warpgroup g is TK_RACE_WG + g; the block is TK_RACE_BLOCK. */
enum { TK_RACE_WG = 32, TK_RACE_BLOCK = 40 };

typedef enum tk_race_kind { TK_RACE_READ, TK_RACE_WRITE, TK_RACE_ISSUE } tk_race_kind;

/* The agent of owner instance `inst` of a value owned by o. */
static inline int tk_race_agent(tk_owner o, int inst) {
    return o == TK_WARPGROUP ? TK_RACE_WG + inst : inst;
}

/* Sets up I->race for kernel I->k (shadow of the block's shared memory,
 * the SHARED allocations for names); frees it. */
tk_status tk_race_init(tk_interp *I);
void tk_race_free(tk_interp *I);
/* A new block: nothing is in flight, nothing was touched. */
void tk_race_block(tk_interp *I);
/* A barrier: a new epoch. */
void tk_race_barrier(tk_interp *I);
/* n consecutive shared floats from offset off, accessed by `agent` in op. */
tk_status tk_race_smem(tk_interp *I, const tk_op *op, int agent, size_t off, size_t n,
                       tk_race_kind kind);
/* An async copy `op` into [off, off+n) landed (ASYNC_WAIT). */
void tk_race_landed(tk_interp *I, const tk_op *op, size_t off, size_t n);
/* Warpgroup wg issued the multiply op, reading the shared float ranges
 * [off[i], off[i] + n[i]) for i < nr (nr <= 2): checked as reads, then
 * pending until a wait retires the group. */
tk_status tk_race_wgmma_issue(tk_interp *I, const tk_op *op, int wg, const size_t *off,
                              const size_t *n, int nr);
/* tk_wgmma_wait(..., keep) by warpgroup wg: all but its newest `keep`
 * groups are retired. */
void tk_race_wgmma_wait(tk_interp *I, int wg, int keep);
/* One element of argument `param` at element offset `off`. */
tk_status tk_race_global(tk_interp *I, const tk_op *op, int agent, int param, int64_t off,
                         bool write);

#endif
