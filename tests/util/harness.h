/* GPU test harness: run one kernel on the CPU interpreter and on the GPU
 * with the same inputs and NaN-poisoned outputs (ref_tensor from ref.h),
 * and compare every tensor afterwards. */
#ifndef TK_TEST_HARNESS_H
#define TK_TEST_HARNESS_H

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/ref.h"

/* TK_OK when a GPU is usable; otherwise prints "GPU tests skipped: ..." once. */
tk_status th_gpu_or_skip(tk_ctx *ctx);
/* For a GPU test with a context of its own: a new context where a GPU is
 * usable, else NULL (the test returns; th_gpu_or_skip said why). */
tk_ctx *th_gpu_ctx(void);

/* Device copy of a host tensor's whole allocation (NULL on failure). */
void *th_upload(tk_ctx *ctx, const ref_tensor *t);
/* tk_arg of t with a device data pointer. */
tk_arg th_dev_arg(const ref_tensor *t, void *dev);

/* Runs k on the interpreter (on copies of ts) and on the GPU, then compares
 * each tensor's allocation (NaN positions must agree: unwritten stays NaN
 * on both). Slots with rank 0 are scalars taken from `scalars`. *worst gets
 * the largest relative error. Returns TK_OK or the failing status. */
tk_status th_compare(tk_ctx *ctx, tk_kernel *k, int n, const ref_tensor *ts, const tk_arg *scalars,
                     double *worst);

#endif
