/* The target table: the one place per-target facts live (ops/nv/target.h).
 *
 * PTX 8.0 is the oldest ISA that knows sm_90a and is what CUDA 12.0 drivers
 * JIT; sm_90a gets 8.3 (the wgmma / setmaxnreg forms). stmatrix, the copy
 * engine and griddepcontrol (PTX 7.8) need sm_90; wgmma and setmaxnreg the
 * arch-specific sm_90a.
 * Shared memory per block is the opt-in maximum of cudaFuncSetAttribute
 * (CUDA programming guide, compute capabilities table). */
#include "ops/nv/target.h"

#include <stdio.h>
#include <string.h>

#define KIB 1024

static const tk_target targets[] = {
    /* arch    cpu      features  sm  mma   ldm   cpa   stm    tma    wgmma  maxnreg griddep smem */
    {"sm_80", "sm_80", "+ptx80", 80, true, true, true, false, false, false, false, false,
     163 * KIB},
    {"sm_86", "sm_86", "+ptx80", 86, true, true, true, false, false, false, false, false, 99 * KIB},
    {"sm_89", "sm_89", "+ptx80", 89, true, true, true, false, false, false, false, false, 99 * KIB},
    {"sm_90", "sm_90", "+ptx80", 90, true, true, true, true, true, false, false, true, 227 * KIB},
    {"sm_90a", "sm_90a", "+ptx83", 90, true, true, true, true, true, true, true, true, 227 * KIB},
};

#define NTARGETS (sizeof targets / sizeof targets[0])

const tk_target *tk_target_find(const char *arch) {
    if (!arch) return NULL;
    for (size_t i = 0; i < NTARGETS; i++)
        if (strcmp(targets[i].arch, arch) == 0) return &targets[i];
    return NULL;
}

void tk_target_names(char *buf, size_t n) {
    size_t used = 0;
    if (!buf || !n) return;
    buf[0] = 0;
    for (size_t i = 0; i < NTARGETS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", targets[i].arch);
}
