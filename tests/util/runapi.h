/* The run API's arguments over host tensors, for the tests that run a
 * ready-made kernel's launches on the interpreter (test_based.c,
 * test_hedgehog*.c, test_rotary.c, test_attention_rotary.c, ...): strides,
 * a poisoned workspace, a kernel run on ref tensors and scalars. */
#ifndef TK_TEST_RUNAPI_H
#define TK_TEST_RUNAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk/tk.h"
#include "util/ref.h"

/* st[0..t->rank): t's own strides, or (own false) all 0, the run API's
 * dense default, so that the dense cases go through that path too. */
void tu_strides(int64_t *st, const ref_tensor *t, bool own);

/* A host workspace of `bytes` (NULL for 0), 256-byte aligned as the run
 * API wants it and poisoned with 0xff bytes, NaN in every f32, bf16 and
 * f16 slot, so that a read before the kernels' writes shows. */
void *tu_host_workspace(size_t bytes);

/* Runs k on the interpreter over n arguments: ts[i] where it has a rank,
 * else the scalar sc[i] (the slots th_compare takes); a failure fails the
 * test. */
void tu_interp_run_refs(tk_ctx *ctx, tk_kernel *k, int n, const ref_tensor *ts, const tk_arg *sc);

#endif
