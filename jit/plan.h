/* Making a kernel's plan (the type: ops/nv/plan.h). The rules are in
 * jit/plan.c. They decide a kernel's block size, shared memory and entry
 * parameters: bump the cache key (jit/cache.c) when they change. */
#ifndef TK_JIT_PLAN_H
#define TK_JIT_PLAN_H

#include "ir/ir.h"
#include "ops/nv/plan.h"

/* The plan of finished kernel k for target tgt. A NULL tgt (an unknown arch)
 * gives the lockstep plan: no maps, no producer. */
void tk_plan_make(const tk_kernel *k, const tk_target *tgt, tk_plan *plan);

#endif
