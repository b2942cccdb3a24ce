/* The calling convention between a lowered kernel and tk_launch.
 *
 * PTX entry: `.entry <kernel name>` (calling convention 71, PTX_Kernel).
 * Parameters, in the kernel's parameter order (tk_param_* creation order):
 *   tensor of rank r : ptr (i8 addrspace(1)*), then r x i64 dims, then
 *                      r x i64 strides (in elements)
 *   scalar           : i32 for TK_I32/TK_BOOL, i64 for TK_I64, f32 for TK_F32
 *                      (bf16/f16 scalar parameters are rejected by the builder)
 *   then, when the kernel's plan (ops/nv/plan.h, made by jit/plan.c) has maps: one
 *   `.param .align 64 .b8 [128]` CUtensorMap per map and an i32 whose bit i
 *   says map i was encoded (else its copies take cp.async).
 * Block: the plan's threads: (warps * 32, 1, 1), plus a producer warpgroup
 * when the plan splits one off. Grid: tk_kernel_grid().
 * Shared memory: one dynamic extern array of tk_kernel_smem_bytes() bytes
 * (plus the plan's smem_extra with maps: the base is then rounded up to 1024
 * bytes and an mbarrier ring follows the tiles); each SHARED op owns
 * [offset, offset + bytes) from that base, offsets from tk_smem_offset()
 * below (128-byte aligned). */
#ifndef TK_ABI_H
#define TK_ABI_H

#include "ir/ir.h"

#define TK_SMEM_ALIGN 128
#define TK_SMEM_LIMIT (227 * 1024) /* Hopper's per-block maximum of shared memory */

/* Number of 64-bit-or-smaller words a parameter occupies in the entry's
 * parameter list (1 + 2*rank for tensors, 1 for scalars). */
int tk_abi_param_slots(const tk_value *param);
/* Byte offset of a SHARED op's storage in the block's dynamic shared memory
 * (the op's attr[0], set by the builder). */
static inline size_t tk_smem_offset(const tk_op *shared_op) { return (size_t)shared_op->attr[0]; }
/* The SHARED op that allocated a shared value, directly or through a STAGE;
 * NULL when its offset cannot be known (e.g. a value carried by a loop). */
static inline const tk_op *tk_smem_alloc_of(const tk_value *v) {
    const tk_op *d = v ? v->def : NULL;
    if (d && d->opc == TK_OP_STAGE) d = d->opnds[0]->def;
    return d && d->opc == TK_OP_SHARED ? d : NULL;
}

/* The tensor parameter a view is, or that a chain of NARROWs cuts it from
 * (views cannot be carried or yielded, so every view has one). */
static inline const tk_value *tk_view_root(const tk_value *v) {
    while (v && v->def && v->def->opc == TK_OP_NARROW) v = v->def->opnds[0];
    return v;
}

/* k's parameter number of v, or -1 when v is not one of k's parameters. */
static inline int tk_param_index(const tk_kernel *k, const tk_value *v) {
    for (int i = 0; v && i < k->nparams; i++)
        if (k->params[i] == v) return i;
    return -1;
}

/* The parameter number of the tensor a view is or narrows, or -1. */
static inline int tk_view_param(const tk_kernel *k, const tk_value *v) {
    return tk_param_index(k, tk_view_root(v));
}

#endif
