/* Target descriptions: what each supported arch can do. Every per-target
 * decision of the lowering and the plan reads these capabilities, never the
 * arch string; the table is in ops/nv/target.c (the list in
 * docs/LOWERING.md), the public query is tk_target_caps_get (tk/tk_jit.h). */
#ifndef TK_OPS_NV_TARGET_H
#define TK_OPS_NV_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tk_target {
    const char *arch;     /* what callers pass: "sm_80", ..., "sm_90a"            */
    const char *cpu;      /* LLVM CPU name                                         */
    const char *features; /* LLVM features: the PTX ISA version emitted            */
    int sm;               /* 80, 86, 89, 90                                        */
    bool mma_sync;        /* mma.sync.aligned.m16n8k16 (bf16 / f16)                */
    bool ldmatrix;        /* ldmatrix.sync.aligned.m8n8.x4 (.trans)                */
    bool cp_async;        /* cp.async.cg 16-byte copies, commit/wait_group         */
    bool stmatrix;        /* stmatrix.sync.aligned.m8n8.x4 (sm_90+)                */
    bool tma;             /* the copy engine: cp.async.bulk.tensor, mbarrier tx    */
    bool wgmma;           /* wgmma.mma_async (arch-specific sm_90a)                */
    bool setmaxnreg;      /* setmaxnreg.inc/dec (arch-specific sm_90a)             */
    bool griddep;         /* griddepcontrol: programmatic dependent launch (sm_90+) */
    int32_t smem_max;     /* dynamic shared memory per block, opt-in maximum (bytes) */
} tk_target;

/* The description of `arch`; NULL for NULL or an arch not in the table. */
const tk_target *tk_target_find(const char *arch);
/* The known archs, comma-separated ("sm_80, sm_86, ..."), into buf (always
 * NUL-terminated when n > 0), for messages. */
void tk_target_names(char *buf, size_t n);

#endif
