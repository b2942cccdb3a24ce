/* The forward attention tests' verdict on O and L (see attn_check.h). */
#include "util/attn_check.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

float tu_attn_fill(ref_tensor t[5], void *before[5], int D) {
    ref_tensor_random(&t[0], -2, 2);
    ref_tensor_random(&t[1], -2, 2);
    ref_tensor_random(&t[2], -1, 1);
    for (int i = 3; i < 5; i++) {
        ref_tensor_fill_all(&t[i], NAN);
        before[i] = ref_tensor_snapshot(&t[i]);
    }
    return (float)((0.75 + 0.25 * ref_uniform()) / sqrt((double)D));
}

tu_attn_out tu_attn_measure(const ref_tensor *o, const ref_tensor *l, const double *want_o,
                            const double *want_l, const void *before_o, const void *before_l) {
    double *go = ref_tensor_to_f64(o), *gl = ref_tensor_to_f64(l);
    int64_t no = ref_tensor_count(o), nl = ref_tensor_count(l);
    tu_attn_out r = {.eo = ref_rel_err(go, want_o, no), .el = ref_rel_err(gl, want_l, nl)};
    r.nan = ref_count_nan(go, no) + ref_count_nan(gl, nl);
    if (before_o) r.stray += ref_tensor_stray_writes(o, before_o);
    if (before_l) r.stray += ref_tensor_stray_writes(l, before_l);
    free(go), free(gl);
    return r;
}

void tu_attn_expect(const tu_attn_out *r) {
    ck_assert_msg(r->nan == 0, "%lld elements of O and L not written (or NaN)", (long long)r->nan);
    ck_assert_msg(r->stray == 0, "%lld writes outside O / L", (long long)r->stray);
    ck_assert_msg(r->eo <= 1e-2, "O rel err %g > 1e-2", r->eo);
    ck_assert_msg(r->el <= 1e-3, "L rel err %g > 1e-3", r->el);
}

void tu_attn_grads(const ref_tensor g[3], double *const want[3], void *const before[3],
                   const char *where, double err[3]) {
    for (int i = 0; i < 3; i++) {
        double *got = ref_tensor_to_f64(&g[i]);
        int64_t n = ref_tensor_count(&g[i]), nan = ref_count_nan(got, n);
        err[i] = ref_rel_err(got, want[i], n);
        ck_assert_msg(nan == 0, "%s: %lld of %lld d%c elements not written (or NaN)", where,
                      (long long)nan, (long long)n, "QKV"[i]);
        ck_assert_msg(ref_tensor_stray_writes(&g[i], before[i]) == 0, "writes outside");
        free(got);
    }
}
