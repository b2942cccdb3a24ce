/* Device buffers through the public tk_gpu_* entry points, for tests that
 * run the ready-made kernels on a context of either backend (most of them
 * on TK_BACKEND_INTERP, tk/tk_jit.h): inputs uploaded from a ref_tensor,
 * outputs NaN-poisoned, results downloaded and checked against float64. */
#ifndef TK_TEST_DEVBUF_H
#define TK_TEST_DEVBUF_H

#include <stddef.h>

#include "tk/tk.h"
#include "util/ref.h"

/* A new context on the interpreter backend planning for arch and sms
 * (NULL and 0: sm_90a, 132); fails the test when it cannot be made. */
tk_ctx *tu_interp_ctx(const char *arch, int sms);

/* Bytes of t's whole allocation. */
size_t tu_bytes_of(const ref_tensor *t);
/* A device copy of t's whole allocation (256-byte aligned). */
void *tu_dev_in(tk_ctx *ctx, const ref_tensor *t);
/* Device memory for output t, poisoned: every bf16, f16 and f32 a NaN. */
void *tu_dev_out(tk_ctx *ctx, const ref_tensor *t);
/* n bytes of src in a new device buffer (tables, prefix sums, raw bytes). */
void *tu_dev_copy(tk_ctx *ctx, const void *src, size_t n);
/* n bytes of device memory, poisoned (0xff); NULL for n = 0. */
void *tu_dev_bytes(tk_ctx *ctx, size_t n);
/* Output t back from d after a sync; d is freed. */
void tu_dev_take(tk_ctx *ctx, ref_tensor *t, void *d);
/* t's whole allocation back from d, which stays (the caller has synced). */
void tu_dev_get(tk_ctx *ctx, ref_tensor *t, const void *d);
/* t's allocation back to `before` (its snapshot when poisoned), on the host
 * and in its device copy d: an output poisoned again for another run. */
void tu_dev_reset(tk_ctx *ctx, ref_tensor *t, void *d, const void *before);

/* The relative error a dtype's inputs allow: 3e-3 for f16, else 1e-2. */
double tu_tol_of(tk_dtype dt);
/* t's logical elements against want: no NaN (an unwritten output), and
 * ‖t − want‖/‖want‖ <= tol; prints the error under `what`. */
void tu_expect_close(const char *what, const ref_tensor *t, const double *want, double tol);
/* n zeroed doubles (the test fails when out of memory). */
double *tu_f64_new(int64_t n);

#endif
