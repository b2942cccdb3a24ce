/* The NVPTX lowering kit: the state of one lowering (tk_lower) and the
 * helpers that every op family's lowering (ops/<family>_nv.c) builds on.
 * The kit knows the IR, the target (ops/nv/target.h) and the kernel's plan
 * (ops/nv/plan.h), not the op families: the region walker that dispatches
 * to them is ops/lower_walk.c, the driver that makes the module and picks
 * the sync strategy is jit/lower.c.
 *
 * Representation (docs/LOWERING.md is the full contract):
 *  - every IR value becomes a tk_lv, a flat array of LLVM values:
 *      scalar       1 value (i1 for bool, i32, i64, float)
 *      tile / vec   one scalar per element the thread holds, in fragment
 *                   order (tk_frag_* below): bfloat / half / float / i32
 *      smem         1 value: `ptr addrspace(3)` to stage 0 (or to the stage)
 *      gview        1 + 3*rank values: ptr addrspace(1), dims (i64), strides (i64),
 *                   origin (i64: the coordinates of its first element in the
 *                   root tensor parameter; 0 for the parameter, moved by NARROW)
 *  - loop-carried and if-yielded values get one phi per slot. */
#ifndef TK_OPS_NV_LOWER_H
#define TK_OPS_NV_LOWER_H

#include <llvm-c/Core.h>
#include <stdbool.h>

#include "ir/diag.h"
#include "ir/ir.h"
#include "ops/nv/plan.h"
#include "ops/nv/target.h"

/* ---- Lowered values ----------------------------------------------------- */
typedef struct tk_lv {
    int32_t n;
    LLVMValueRef *v;
} tk_lv;

typedef struct tk_lower_mem tk_lower_mem; /* allocations, freed at the end */

/* Which warps the code being emitted runs on: all of them (lockstep), or
 * one side of a warp-specialized kernel (jit/lower_ws.c). */
typedef enum tk_role { TK_ROLE_ALL = 0, TK_ROLE_CONSUMER, TK_ROLE_PRODUCER } tk_role;

typedef struct tk_lower tk_lower;

/* A sync strategy: what the block-wide synchronization ops mean in the code
 * being emitted (ops/nv/sync.c). The driver picks one (tk_lower.sync):
 *   lockstep  cp.async groups and bar.sync 0;
 *   ring      lockstep, plus the copy engine's mbarrier ring (ops/nv/tma.c);
 *   producer  the producer warp of a warp-specialized kernel;
 *   consumer  its consumer warps. */
typedef struct tk_sync_ops {
    const char *name;
    tk_role role;
    void (*commit)(tk_lower *L);                   /* ASYNC_COMMIT                    */
    void (*wait)(tk_lower *L, int pending);        /* ASYNC_WAIT pending              */
    void (*barrier)(tk_lower *L, const tk_op *op); /* BARRIER                  */
    void (*copy_done)(tk_lower *L);                /* after an engine copy's cp.async fallback */
} tk_sync_ops;
extern const tk_sync_ops tk_sync_lockstep, tk_sync_ring, tk_sync_producer, tk_sync_consumer;

struct tk_lower {
    const tk_kernel *k;
    const tk_target *tgt;
    const tk_plan *plan; /* made once per (kernel, target): jit/plan.c      */
    const tk_sync_ops *sync;
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef i1, i8, i16, i32, i64, f32, bf16, f16, vd, pg, ps; /* pg/ps: global/shared ptr */
    LLVMValueRef smem;  /* dynamic shared memory (ptr addrspace(3))            */
    LLVMValueRef sbase; /* where SHARED offsets start: smem, or smem aligned up
                           for the copy engine (ops/nv/tma.c)               */
    /* Copy-engine state (ops/nv/tma.c), used when plan->nmaps > 0. */
    LLVMValueRef tma_map[TK_TMA_MAX_MAPS];  /* map params (generic ptr)          */
    LLVMValueRef tma_flags;                 /* i32: bit i = map i was encoded    */
    LLVMValueRef ring, ring_cnt, ring_done; /* barriers; i32 allocas           */
    /* Warp specialization (ops/nv/sync.c), when plan->producer_warps > 0. */
    LLVMValueRef rel, ack; /* release and acknowledgement rings (shared)       */
    LLVMValueRef bar_cnt;  /* barriers passed (i32 alloca)                      */
    LLVMValueRef crank;    /* %cluster_ctarank when plan->multicast (i32)       */
    /* The threads block-wide copies are spread over: ctid in 0..cnt-1. */
    LLVMValueRef ctid;
    int cnt;
    LLVMValueRef sink;  /* 16-byte global scratch: masked loads/stores go here  */
    LLVMValueRef l2[3]; /* tk_param_set_cache's policies (i64), made in the entry
                           block for those some param uses; [0] stays NULL */
    /* Per-thread ids, computed once in the entry block (i32). */
    LLVMValueRef tid, lane, warp, g, t, wg_warp;
    tk_lv *vals; /* indexed by tk_value id                              */
    uint32_t nvals;
    uint8_t *use; /* per value id: TK_USE_* bits (jit/lower.c, pre-pass)  */
    tk_lower_mem *mem;
    const tk_op *cur; /* op being lowered, for messages                      */
    tk_diag *dg;      /* the first failure (tk_lw_fail); never NULL          */
};

/* How a value is used, found by a walk over the kernel before lowering: a
 * 16-bit tile that only ever feeds MMA as its B operand is loaded by
 * ldmatrix in the matrix order that puts each n-half's two B registers next
 * to each other (ops/memory_nv.c), so mma.sync reads them in place. */
enum { TK_USE_MMA_A = 1, TK_USE_MMA_B = 2, TK_USE_OTHER = 4 };
/* Whether v is used as an MMA B operand and in no other way. */
bool tk_lw_mma_b_only(const tk_lower *L, const tk_value *v);

/* ---- Context helpers (ops/nv/util.c) --------------------------------- */
/* Records the first failure in L->dg, prefixed with the op being lowered;
 * returns the recorded status. Code that lowers reads L->dg->st to stop. */
tk_status tk_lw_fail(tk_lower *L, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *tk_lw_alloc(tk_lower *L, size_t n); /* zeroed, freed by tk_lw_free_all */
void tk_lw_free_all(tk_lower *L);
/* The lowered form of an already-lowered value (NULL + failure if missing). */
tk_lv *tk_lw_get(tk_lower *L, const tk_value *v);
/* Defines v with n (still empty) slots. */
tk_lv *tk_lw_def(tk_lower *L, const tk_value *v, int n);
/* Whether the code being emitted runs op / computes v: everything, except
 * in a producer warp, which runs only its slice (ops/nv/plan.h). */
bool tk_lw_emits_op(const tk_lower *L, const tk_op *op);
bool tk_lw_emits_val(const tk_lower *L, const tk_value *v);

/* Types and constants. */
LLVMTypeRef tk_lw_type(tk_lower *L, tk_dtype dt); /* element type in registers */
LLVMValueRef tk_lw_i32c(tk_lower *L, int64_t v);
LLVMValueRef tk_lw_i64c(tk_lower *L, int64_t v);
LLVMValueRef tk_lw_constf(tk_lower *L, tk_dtype dt, double v); /* any dtype */
/* Numeric conversion with the interpreter's meaning (C casts, RNE rounding). */
LLVMValueRef tk_lw_cvt(tk_lower *L, LLVMValueRef v, tk_dtype from, tk_dtype to);
LLVMValueRef tk_lw_to_i64(tk_lower *L, LLVMValueRef v); /* sign-extends ints */
LLVMValueRef tk_lw_to_i32(tk_lower *L, LLVMValueRef v);
/* Integer/float helpers used by several families. */
LLVMValueRef tk_lw_add(tk_lower *L, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef tk_lw_mul(tk_lower *L, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef tk_lw_and(tk_lower *L, LLVMValueRef a, LLVMValueRef b);
/* b as an sdiv/srem divisor free of UB: 0 and -1 become 1 (*is_m1: b == -1). */
LLVMValueRef tk_lw_safe_divisor(tk_lower *L, LLVMValueRef b, LLVMValueRef *is_m1);

/* Intrinsic call by name ("llvm.nvvm.ex2.approx"); ov: overload types. The
 * call's argument types are taken from the declaration. */
LLVMValueRef tk_lw_intrin(tk_lower *L, const char *name, LLVMTypeRef *ov, unsigned nov,
                          LLVMValueRef *args, unsigned nargs);
/* Inline PTX: only for instructions LLVM has no intrinsic for. */
LLVMValueRef tk_lw_asm(tk_lower *L, LLVMTypeRef ret, const char *text, const char *cons,
                       LLVMValueRef *args, unsigned nargs, bool side_effects);
/* The L2 cache policy of the tensor parameter `view` is (or narrows),
 * from tk_param_set_cache: an i64 for PTX's .L2::cache_hint operands, or
 * NULL for TK_CACHE_NORMAL. tk_lw_l2_init makes them in the entry block. */
void tk_lw_l2_init(tk_lower *L);
LLVMValueRef tk_lw_l2_policy(const tk_lower *L, const tk_value *view);

/* Control-flow helpers for the lowering's own code (not IR FOR/IF). */
LLVMBasicBlockRef tk_lw_block(tk_lower *L, const char *name);
/* A counted loop `for (iv = start; iv < end; iv += step)` over i32, emitted
 * as real IR (slow paths stay compact). */
typedef struct tk_lw_loop {
    LLVMBasicBlockRef head, body, exit;
    LLVMValueRef iv, step;
    bool rolled; /* set before tk_lw_loop_end: forbid unrolling (slow paths,
                    whose unrolled invariants LICM would keep in registers) */
} tk_lw_loop;
LLVMValueRef tk_lw_loop_begin(tk_lower *L, tk_lw_loop *lp, LLVMValueRef start, LLVMValueRef end,
                              LLVMValueRef step);
void tk_lw_loop_end(tk_lower *L, tk_lw_loop *lp);

/* if (cond) fast(...) else slow(...): each path computes n values into its
 * array; out[i] receives their merge (a phi). Used for uniform fast/slow
 * splits such as "whole tile in bounds and aligned". */
typedef void (*tk_lw_path)(tk_lower *L, void *ctx, LLVMValueRef *out);
void tk_lw_branch2(tk_lower *L, LLVMValueRef cond, tk_lw_path fast, tk_lw_path slow, void *ctx,
                   int n, LLVMValueRef *out);

/* Memory helpers. Masked accesses are branch-free: a masked-off load reads
 * L->sink and its result is replaced by `fill`; a masked-off store writes
 * L->sink (a per-module scratch nobody reads). */
LLVMValueRef tk_lw_load(tk_lower *L, LLVMTypeRef ty, LLVMValueRef ptr, unsigned align);
void tk_lw_store(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, unsigned align);
LLVMValueRef tk_lw_load_masked(tk_lower *L, LLVMTypeRef ty, LLVMValueRef ptr, LLVMValueRef ok,
                               LLVMValueRef fill, unsigned align);
/* *ptr += val (f32, global) where ok, atomically. */
void tk_lw_add_masked(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, LLVMValueRef ok);
void tk_lw_store_masked(tk_lower *L, LLVMValueRef val, LLVMValueRef ptr, LLVMValueRef ok,
                        unsigned align);
LLVMValueRef tk_lw_sink(tk_lower *L); /* the scratch, a valid dummy address */
LLVMValueRef tk_lw_gep(tk_lower *L, LLVMValueRef ptr, LLVMValueRef byte_off);

/* ---- The copy engine (ops/nv/tma.c) ----------------------------------- */
/* Entry parameter types after the kernel's own (n of them so far): one
 * map per plan entry, then the flags; returns the new count, -1 past max. */
int tk_tma_param_types(tk_lower *L, LLVMTypeRef *tys, int n, int max);
/* Binds those parameters; `first` is the index of the first map. */
void tk_tma_bind(tk_lower *L, unsigned first);
/* Entry-block setup: L->sbase, and with a plan the ring and its counters. */
void tk_tma_entry(tk_lower *L);
/* The ring's part of ASYNC_COMMIT / ASYNC_WAIT (the sync strategies). */
void tk_ring_commit(tk_lower *L);
void tk_ring_wait(tk_lower *L, int pending);
/* Spins until phase `parity` of mbarrier `bar` is over (try_wait acquires). */
void tk_mbar_wait(tk_lower *L, LLVMValueRef bar, LLVMValueRef parity);
/* bar.warp.sync, then lane 0 arrives on `bar` for the warp (releases its
 * accesses so far). */
void tk_mbar_arrive_warp(tk_lower *L, LLVMValueRef bar);
/* The same on a release ring's barrier (rel, ack: ops/nv/sync.c); with
 * plan->multicast on the barrier at its offset in every block of the
 * cluster, whose either producer may refill a stage (mapa; ops/nv/tma.c says
 * why it releases at CTA scope). */
void tk_mbar_arrive_release(tk_lower *L, LLVMValueRef bar);
/* The kernel's end in a multicasting kernel: a cluster barrier, so that no
 * block exits while its peers may still arrive on its release rings. */
void tk_cluster_end(tk_lower *L);
/* Group cnt's ring barrier, once its previous phase (group cnt - R) is over. */
LLVMValueRef tk_ring_arm(tk_lower *L, LLVMValueRef cnt);

/* COPY_G2S `op` through plan map `map` into stage `dst` when the launch
 * encoded the map and the coordinates fit, else through cp_async(cp_ctx). */
void tk_tma_copy(tk_lower *L, const tk_op *op, int map, LLVMValueRef dst, tk_lw_path cp_async,
                 void *cp_ctx);
/* COPY_S2G through the engine's store where the launch encoded its map
 * (else `plain`, with plain_ctx); its reads of the shared tile complete at
 * tk_tma_store_reads_done, which barriers call, the stores themselves at
 * tk_tma_store_drain, the kernel's end. Both do nothing in kernels without
 * such stores (tk_plan.stores). */
void tk_tma_store(tk_lower *L, const tk_op *op, int map, LLVMValueRef src, tk_lw_path plain,
                  void *plain_ctx);
void tk_tma_store_reads_done(tk_lower *L);
void tk_tma_store_drain(tk_lower *L);

/* ---- Fragments (ops/nv/frag.c): which elements a thread holds ---------
 * A tile's elements are ordered (I, J, e): I = local row subtile, J = col
 * subtile, e = 0..7, index (I * C/16 + J) * 8 + e. The element's position is
 * a compile-time part (row_c, col_c) plus a per-thread lane part
 * (tk_frag_lane_row/col). Vectors: see tk_vec_pos. */
int tk_frag_count(const tk_type *t); /* elements per thread (tile or vec) */
void tk_frag_pos(const tk_type *t, int idx, int *row_c, int *col_c);
LLVMValueRef tk_frag_lane_row(tk_lower *L, const tk_type *t); /* i32 */
LLVMValueRef tk_frag_lane_col(tk_lower *L, const tk_type *t); /* i32 */
/* Local subtile grid of a tile: rows (per warp) and cols of 16x16 subtiles. */
int tk_frag_subrows(const tk_type *t);
int tk_frag_subcols(const tk_type *t);
/* Vector element idx sits at position pos_c + tk_vec_lane(L, vt). */
int tk_vec_pos(const tk_type *vt, int idx);
LLVMValueRef tk_vec_lane(tk_lower *L, const tk_type *vt);
/* Vector slots per subtile (2 or 4). */
int tk_vec_per_sub(const tk_type *vt);
/* The index in a vector along `axis` (paired with tile t) of tile element idx. */
int tk_frag_vec_index(const tk_type *t, tk_axis axis, int idx);
/* Whether this thread is the one lane (and warp) that stores vector slot
 * values: several lanes hold copies of each vector element. */
LLVMValueRef tk_vec_writer(tk_lower *L, const tk_type *vt);

/* ---- Memory addressing (ops/nv/mem.c) ---------------------------------- */
/* Address of element (row, col) (i32, tile-relative) of one stage of a shared
 * tile at `base`, honouring its layout (PLAIN / PAD / SWIZZLE). */
LLVMValueRef tk_smem_addr(tk_lower *L, const tk_type *st, LLVMValueRef base, LLVMValueRef row,
                          LLVMValueRef col);
/* The same for (row + row_c, col + col_c) with row_c, col_c compile-time
 * constants, arranged so the run-time part is independent of them where the
 * swizzle allows (ops/nv/mem.c): loop-invariant lane addresses. */
LLVMValueRef tk_smem_addr_c(tk_lower *L, const tk_type *st, LLVMValueRef base, LLVMValueRef row,
                            int64_t row_c, LLVMValueRef col, int64_t col_c);
/* Byte offset of (row, col) in a shared tile (i32). */
LLVMValueRef tk_smem_off(tk_lower *L, const tk_type *st, LLVMValueRef row, LLVMValueRef col);
/* Bytes per row of one stage (padding included). */
int32_t tk_smem_row_bytes(const tk_type *st);
/* Bytes between an element and the one below it: the row bytes, or 128 when
 * a SWIZZLE tile's rows are cut into 128-byte column blocks. */
int32_t tk_smem_row_step(const tk_type *st);
/* Whether moving `drows` rows down adds exactly drows * row step to every
 * offset (always for PLAIN/PAD; for SWIZZLE when drows is a multiple of the
 * swizzle period), so such moves become constant address offsets. */
bool tk_smem_row_shift_ok(const tk_type *st, int drows);

/* A global view opened for addressing a 2-D window at (row0, col0) with the
 * leading indices fixed. All values i64. */
typedef struct tk_gwin {
    LLVMValueRef ptr;        /* view base pointer                          */
    LLVMValueRef base_off;   /* element offset of (lead..., 0, 0)          */
    LLVMValueRef lead_ok;    /* leading indices in range (i1)              */
    LLVMValueRef row0, col0; /* window origin (i64)                        */
    LLVMValueRef rows, cols; /* view dims of the last two axes             */
    LLVMValueRef srow, scol; /* strides (elements) of the last two axes     */
    tk_dtype dt;
    int rank;
} tk_gwin;
/* idx: the op's rank index operands. wdims = 2: the last two index the
 * window's (row0, col0) (tiles, copies); wdims = 1 (vectors, rank-1 views):
 * only the last one does (col0) and the window has one row. */
void tk_gwin_open(tk_lower *L, tk_gwin *w, const tk_value *view, tk_value *const *idx, int wdims);
/* Pointer to window element (r, c) (i64 offsets from row0/col0) and whether
 * it is inside the view. */
LLVMValueRef tk_gwin_addr(tk_lower *L, const tk_gwin *w, LLVMValueRef r, LLVMValueRef c);
LLVMValueRef tk_gwin_inb(tk_lower *L, const tk_gwin *w, LLVMValueRef r, LLVMValueRef c);
/* Whole window rows x cols inside the view (i1). */
LLVMValueRef tk_gwin_all_inb(tk_lower *L, const tk_gwin *w, int rows, int cols);
/* Window rows start `bytes`-aligned and are contiguous (unit col stride). */
LLVMValueRef tk_gwin_aligned(tk_lower *L, const tk_gwin *w, int bytes);

/* Block-wide copies between global and shared memory (ops/nv/copy.c). */
tk_status tk_lower_copy_g2s(tk_lower *L, const tk_op *op);
tk_status tk_lower_copy_s2g(tk_lower *L, const tk_op *op);

#endif
