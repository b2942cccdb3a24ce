/* The forward attention tests' verdict on O and L (see attn_check.h). */
#include "util/attn_check.h"

#include <check.h>
#include <stdlib.h>

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
