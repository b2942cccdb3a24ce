/* What the op fixtures (tests/util/fixture_ops.c, fixture_copy.c) share:
 * constants, a warp's row band, finishing a kernel, a reference tensor
 * random or NaN-poisoned. */
#ifndef TK_TEST_FIXTURE_OPS_PARTS_H
#define TK_TEST_FIXTURE_OPS_PARTS_H

#include <math.h>

#include "tk/tk.h"
#include "util/ref.h"

static inline tk_value *c64(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static inline tk_value *c32(tk_kernel *k, int32_t v) { return tk_const_i32(k, v); }
static inline tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }

static inline tk_value *i64(tk_kernel *k, tk_value *v) { return tk_cvt(k, v, TK_I64); }

/* The origin row of this warp's band: block * rows_per_block + warp * rows_per_warp. */
static inline tk_value *band(tk_kernel *k, int rows_per_block, int rows_per_warp) {
    tk_value *b = tk_mul(k, i64(k, tk_block_id(k, 0)), c64(k, rows_per_block));
    return tk_add(k, b, tk_mul(k, i64(k, tk_warp_id(k)), c64(k, rows_per_warp)));
}

static inline tk_kernel *finish(tk_kernel *k) {
    tk_kernel_finish(k);
    return k;
}

static inline ref_tensor tensor(tk_dtype dt, int rank, const int64_t *dims, int poison) {
    ref_tensor t = ref_tensor_new(dt, rank, dims);
    if (poison)
        ref_tensor_fill_all(&t, NAN);
    else
        ref_tensor_random(&t, -1.0, 1.0);
    return t;
}

#endif
