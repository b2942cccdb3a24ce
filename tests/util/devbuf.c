/* Device buffers for the backend tests (see devbuf.h). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk_jit.h"
#include "util/devbuf.h"

tk_ctx *tu_interp_ctx(const char *arch, int sms) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_msg(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, arch, sms) == TK_OK, "%s",
                  tk_ctx_error(ctx));
    return ctx;
}

size_t tu_bytes_of(const ref_tensor *t) { return (size_t)t->elems * tk_dtype_size(t->dt); }

void *tu_dev_in(tk_ctx *ctx, const ref_tensor *t) {
    void *d = NULL;
    ck_assert_msg(tk_gpu_alloc(ctx, tu_bytes_of(t), &d) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_uint_eq((uintptr_t)d % 256, 0);
    ck_assert_int_eq(tk_gpu_upload(ctx, d, t->data, tu_bytes_of(t)), TK_OK);
    return d;
}

void *tu_dev_out(tk_ctx *ctx, const ref_tensor *t) {
    void *d = NULL;
    ck_assert_msg(tk_gpu_alloc(ctx, tu_bytes_of(t), &d) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_memset(ctx, d, 0xff, tu_bytes_of(t)), TK_OK);
    return d;
}

void *tu_dev_copy(tk_ctx *ctx, const void *src, size_t n) {
    void *d = NULL;
    ck_assert_int_eq(tk_gpu_alloc(ctx, n, &d), TK_OK);
    ck_assert_int_eq(tk_gpu_upload(ctx, d, src, n), TK_OK);
    return d;
}

void *tu_dev_bytes(tk_ctx *ctx, size_t n) {
    void *d = NULL;
    ck_assert_int_eq(tk_gpu_alloc(ctx, n, &d), TK_OK);
    if (n) ck_assert_int_eq(tk_gpu_memset(ctx, d, 0xff, n), TK_OK);
    return d;
}

void tu_dev_take(tk_ctx *ctx, ref_tensor *t, void *d) {
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_download(ctx, t->data, d, tu_bytes_of(t)), TK_OK);
    ck_assert_int_eq(tk_gpu_free(ctx, d), TK_OK);
}

void tu_dev_get(tk_ctx *ctx, ref_tensor *t, const void *d) {
    ck_assert_int_eq(tk_gpu_download(ctx, t->data, d, tu_bytes_of(t)), TK_OK);
}

void tu_dev_reset(tk_ctx *ctx, ref_tensor *t, void *d, const void *before) {
    memcpy(t->data, before, tu_bytes_of(t));
    ck_assert_int_eq(tk_gpu_upload(ctx, d, t->data, tu_bytes_of(t)), TK_OK);
}

double tu_tol_of(tk_dtype dt) { return dt == TK_F16 ? 3e-3 : 1e-2; }

void tu_expect_close(const char *what, const ref_tensor *t, const double *want, double tol) {
    double *got = ref_tensor_to_f64(t);
    int64_t n = ref_tensor_count(t), nan = ref_count_nan(got, n);
    double e = ref_rel_err(got, want, n);
    free(got);
    printf("%-36s rel err %.2e\n", what, e);
    ck_assert_msg(nan == 0, "%s: %lld of %lld elements NaN (unwritten)", what, (long long)nan,
                  (long long)n);
    ck_assert_msg(e <= tol, "%s: rel err %.3e > %.1e", what, e, tol); /* NaN fails */
}

double *tu_f64_new(int64_t n) {
    double *p = calloc((size_t)n, sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}
