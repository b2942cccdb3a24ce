/* The run API's arguments over host tensors (see runapi.h). */
#include "util/runapi.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

void tu_strides(int64_t *st, const ref_tensor *t, bool own) {
    for (int d = 0; d < t->rank; d++) st[d] = own ? t->strides[d] : 0;
}

void *tu_host_workspace(size_t bytes) {
    if (!bytes) return NULL;
    void *ws = aligned_alloc(256, (bytes + 255) / 256 * 256);
    ck_assert_ptr_nonnull(ws);
    memset(ws, 0xff, bytes);
    return ws;
}

void tu_interp_run_refs(tk_ctx *ctx, tk_kernel *k, int n, const ref_tensor *ts, const tk_arg *sc) {
    tk_arg args[16];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) args[i] = ts[i].rank ? ref_tensor_arg(&ts[i]) : sc[i];
    ck_assert_msg(tk_interp_run(k, n, args) == TK_OK, "%s", tk_ctx_error(ctx));
}
