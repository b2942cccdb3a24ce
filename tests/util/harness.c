/* GPU test harness (see harness.h). */
#include "util/harness.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tk_status th_gpu_or_skip(tk_ctx *ctx) {
    static int said; /* one line per test process */
    tk_status s = tk_gpu_init(ctx);
    if (s && !said) {
        said = 1;
        printf("GPU tests skipped: %s\n", tk_ctx_error(ctx));
    }
    return s;
}

tk_ctx *th_gpu_ctx(void) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (th_gpu_or_skip(ctx) == TK_OK) return ctx;
    tk_ctx_destroy(ctx);
    return NULL;
}

static size_t bytes_of(const ref_tensor *t) { return (size_t)t->elems * tk_dtype_size(t->dt); }

void *th_upload(tk_ctx *ctx, const ref_tensor *t) {
    void *d = NULL;
    if (tk_gpu_alloc(ctx, bytes_of(t), &d)) return NULL;
    if (tk_gpu_upload(ctx, d, t->data, bytes_of(t))) {
        tk_gpu_free(ctx, d);
        return NULL;
    }
    return d;
}

tk_arg th_dev_arg(const ref_tensor *t, void *dev) {
    tk_arg a = ref_tensor_arg(t);
    a.data = dev;
    return a;
}

static ref_tensor clone(const ref_tensor *t) {
    ref_tensor c = *t;
    c.data = ref_tensor_snapshot(t);
    return c;
}

/* Relative error over the whole allocation; NaN where NaN positions differ. */
static double alloc_rel_err(const ref_tensor *out, const ref_tensor *ref) {
    ref_tensor a = *out, b = *ref;
    int64_t dims = a.elems;
    a.rank = b.rank = 1;
    a.dims[0] = b.dims[0] = dims;
    a.strides[0] = b.strides[0] = 1;
    double num = 0, den = 0;
    for (int64_t i = 0; i < dims; i++) {
        double x = ref_tensor_get(&a, i), y = ref_tensor_get(&b, i);
        if (isnan(x) || isnan(y)) {
            if (isnan(x) != isnan(y)) return NAN;
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static tk_status gpu_run(tk_ctx *ctx, tk_kernel *k, int n, ref_tensor *gpu, const tk_arg *sc) {
    tk_program *p = NULL;
    void *dev[16] = {0};
    tk_arg args[16];
    tk_status s = tk_compile(ctx, k, &p);
    for (int i = 0; !s && i < n; i++) {
        if (!gpu[i].rank) { /* a scalar: the caller passes scalars[] whenever it has one */
            args[i] = sc[i];
            continue;
        }
        if (!(dev[i] = th_upload(ctx, &gpu[i]))) s = TK_ERR_CUDA;
        args[i] = th_dev_arg(&gpu[i], dev[i]);
    }
    if (!s) s = tk_launch(p, n, args, NULL);
    if (!s) s = tk_gpu_sync(ctx);
    for (int i = 0; !s && i < n; i++)
        if (dev[i]) s = tk_gpu_download(ctx, gpu[i].data, dev[i], bytes_of(&gpu[i]));
    if (s)
        fprintf(stderr, "GPU run of %s: %s: %s\n", tk_kernel_name(k), tk_status_name(s),
                tk_ctx_error(ctx));
    for (int i = 0; i < n; i++)
        if (dev[i]) tk_gpu_free(ctx, dev[i]);
    tk_program_release(p);
    return s;
}

tk_status th_compare(tk_ctx *ctx, tk_kernel *k, int n, const ref_tensor *ts, const tk_arg *scalars,
                     double *worst) {
    ref_tensor cpu[16], gpu[16];
    tk_arg args[16];
    *worst = 0;
    for (int i = 0; i < n; i++) {
        cpu[i] = ts[i].rank ? clone(&ts[i]) : ts[i];
        gpu[i] = ts[i].rank ? clone(&ts[i]) : ts[i];
        args[i] = ts[i].rank ? ref_tensor_arg(&cpu[i]) : scalars[i];
    }
    tk_status s = tk_interp_run(k, n, args);
    if (s) fprintf(stderr, "interpreter run of %s: %s\n", tk_kernel_name(k), tk_ctx_error(ctx));
    if (!s) s = gpu_run(ctx, k, n, gpu, scalars);
    for (int i = 0; i < n; i++) {
        if (!ts[i].rank) continue;
        double e = s ? 0 : alloc_rel_err(&gpu[i], &cpu[i]);
        if (!s && (isnan(e) || e > *worst)) *worst = e;
        ref_tensor_free(&cpu[i]);
        ref_tensor_free(&gpu[i]);
    }
    return s;
}
