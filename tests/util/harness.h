/* GPU test harness: run one kernel on the CPU interpreter and on the GPU
 * with the same fresh random inputs and NaN-poisoned outputs, and compare
 * every tensor afterwards. */
#ifndef TK_TEST_HARNESS_H
#define TK_TEST_HARNESS_H

#include <stdint.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"

/* A host tensor described once, mirrored on the device on demand. */
typedef struct th_tensor {
    tk_dtype dt;
    int rank;
    int64_t dims[4];
    int64_t strides[4]; /* elements; dense row-major unless set          */
    int64_t elems;      /* allocation size in elements (covers strides)  */
    void *host;
    void *dev;
} th_tensor;

/* Dense tensor filled with uniform random values in [-1, 1) (exact in its
 * dtype), or NaN when `poison`. */
th_tensor th_tensor_new(tk_dtype dt, int rank, const int64_t *dims, int poison);
void th_tensor_free(tk_ctx *ctx, th_tensor *t);
double th_get(const th_tensor *t, int64_t i);     /* element i of the allocation */
void th_set(th_tensor *t, int64_t i, double v);
th_tensor th_tensor_clone(const th_tensor *t);
tk_arg th_arg(const th_tensor *t, int device);

/* xorshift random numbers seeded once per process (printed by th_seed). */
uint64_t th_seed(void);
double th_uniform(void); /* [-1, 1) */

/* ‖a−b‖/‖b‖ over all elements; NaN where NaN positions differ or a value
 * is NaN in one only (so unwritten outputs fail). */
double th_rel_err(const th_tensor *a, const th_tensor *b);

/* Runs k on the interpreter (on clones of `ts`) and on the GPU (tensors
 * uploaded, launched, downloaded), then compares each tensor: the worst
 * relative error is returned in *worst. Scalars are passed through
 * `scalars` (indexed like the kernel's parameters; tensor slots ignored).
 * Returns TK_OK or the failing status (message printed). */
tk_status th_compare(tk_ctx *ctx, tk_kernel *k, int n, th_tensor *ts, const tk_arg *scalars,
                     double *worst);

/* TK_OK when a GPU is usable; otherwise prints "GPU tests skipped: ..." once. */
tk_status th_gpu_or_skip(tk_ctx *ctx);

#endif
