/* The warp-specialized split (the plan's producer warps: jit/plan.c).
 *
 * The block has the kernel's W warps (consumers) and one producer
 * warpgroup after them. The entry splits on the warp index: the producer
 * warpgroup gives registers back (setmaxnreg.dec) and all but its first
 * warp exit; the consumers take them (setmaxnreg.inc). ptxas honours
 * setmaxnreg only in whole-program code, so the driver path loads such
 * kernels from PTX (jit/link.c). Each side then lowers the kernel body with
 * its sync strategy (tk_sync_producer / tk_sync_consumer, ops/nv/sync.c:
 * what commits, waits and barriers mean there); the producer runs only its
 * slice (tk_lw_emits_op). */
#include "jit/lower_ws.h"

#include <string.h>

#include "ops/lower_walk.h"

static LLVMValueRef i32c(tk_lower *L, int64_t v) { return tk_lw_i32c(L, v); }

static tk_status lower_role(tk_lower *L, const tk_sync_ops *sync) {
    bool prod = sync->role == TK_ROLE_PRODUCER;
    LLVMValueRef n = i32c(L, prod ? L->plan->producer_regs : L->plan->consumer_regs);
    tk_lw_intrin(L,
                 prod ? "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32"
                      : "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32",
                 NULL, 0, &n, 1);
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
    L->sync = sync;
    return tk_lower_region(L, L->k->body);
}

tk_status tk_lower_split(tk_lower *L) {
    tk_lv *params = tk_lw_alloc(L, L->nvals * sizeof *params);
    if (!params) return L->dg->st;
    memcpy(params, L->vals, L->nvals * sizeof *params); /* what the entry defined */
    LLVMBasicBlockRef prod = tk_lw_block(L, "ws.producer"), cons = tk_lw_block(L, "ws.consumer");
    LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntUGE, L->warp, i32c(L, L->k->warps), ""), prod,
                    cons);
    LLVMPositionBuilderAtEnd(L->b, prod);
    if (lower_role(L, &tk_sync_producer) != TK_OK) return L->dg->st;
    L->sync->wait(L, 0); /* its fallback copies land before the warp exits */
    tk_cluster_end(L);
    LLVMBuildRetVoid(L->b);
    memcpy(L->vals, params, L->nvals * sizeof *params);
    LLVMPositionBuilderAtEnd(L->b, cons);
    return lower_role(L, &tk_sync_consumer);
}
