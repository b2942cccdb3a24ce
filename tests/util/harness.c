/* GPU test harness (see harness.h). */
#include "util/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;

uint64_t th_seed(void) {
    if (!rng_state) {
        const char *s = getenv("TK_SEED");
        rng_state = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock();
        if (!rng_state) rng_state = 0x9e3779b97f4a7c15ull;
        fprintf(stderr, "random seed %llu (TK_SEED to repeat)\n", (unsigned long long)rng_state);
    }
    return rng_state;
}

double th_uniform(void) {
    th_seed();
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

th_tensor th_tensor_new(tk_dtype dt, int rank, const int64_t *dims, int poison) {
    th_tensor t = {.dt = dt, .rank = rank, .elems = 1};
    for (int i = rank - 1; i >= 0; i--) {
        t.dims[i] = dims[i];
        t.strides[i] = t.elems;
        t.elems *= dims[i] > 0 ? dims[i] : 1;
    }
    t.host = calloc((size_t)t.elems, tk_dtype_size(dt));
    for (int64_t i = 0; i < t.elems; i++) th_set(&t, i, poison ? NAN : th_uniform());
    return t;
}

th_tensor th_tensor_clone(const th_tensor *t) {
    th_tensor c = *t;
    size_t b = (size_t)t->elems * tk_dtype_size(t->dt);
    c.host = malloc(b);
    memcpy(c.host, t->host, b);
    c.dev = NULL;
    return c;
}

void th_tensor_free(tk_ctx *ctx, th_tensor *t) {
    free(t->host);
    if (t->dev) tk_gpu_free(ctx, t->dev);
    t->host = t->dev = NULL;
}

double th_get(const th_tensor *t, int64_t i) {
    switch (t->dt) {
    case TK_F32: return ((const float *)t->host)[i];
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)t->host)[i]);
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)t->host)[i]);
    case TK_I32: return ((const int32_t *)t->host)[i];
    case TK_I64: return (double)((const int64_t *)t->host)[i];
    default: return NAN;
    }
}

void th_set(th_tensor *t, int64_t i, double v) {
    switch (t->dt) {
    case TK_F32: ((float *)t->host)[i] = (float)v; break;
    case TK_BF16: ((uint16_t *)t->host)[i] = tk_f32_to_bf16((float)v); break;
    case TK_F16: ((uint16_t *)t->host)[i] = tk_f32_to_f16((float)v); break;
    case TK_I32: ((int32_t *)t->host)[i] = (int32_t)v; break;
    case TK_I64: ((int64_t *)t->host)[i] = (int64_t)v; break;
    default: break;
    }
}

tk_arg th_arg(const th_tensor *t, int device) {
    return tk_arg_strided(device ? t->dev : t->host, t->dt, t->rank, t->dims, t->strides);
}

double th_rel_err(const th_tensor *a, const th_tensor *b) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < b->elems; i++) {
        double x = th_get(a, i), y = th_get(b, i);
        if (isnan(x) || isnan(y)) {
            if (isnan(x) != isnan(y)) return NAN;
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

tk_status th_gpu_or_skip(tk_ctx *ctx) {
    static int said; /* test-process output only: one line per process */
    tk_status s = tk_gpu_init(ctx);
    if (s && !said) {
        said = 1;
        printf("GPU tests skipped: %s\n", tk_ctx_error(ctx));
    }
    return s;
}

static tk_status gpu_run(tk_ctx *ctx, tk_kernel *k, int n, th_tensor *gpu, const tk_arg *scalars) {
    tk_program *p = NULL;
    tk_arg args[16];
    tk_status s = tk_compile(ctx, k, &p);
    for (int i = 0; !s && i < n; i++) {
        if (gpu[i].rank == 0) {
            args[i] = scalars[i];
            continue;
        }
        size_t b = (size_t)gpu[i].elems * tk_dtype_size(gpu[i].dt);
        s = tk_gpu_alloc(ctx, b, &gpu[i].dev);
        if (!s) s = tk_gpu_upload(ctx, gpu[i].dev, gpu[i].host, b);
        args[i] = th_arg(&gpu[i], 1);
    }
    if (!s) s = tk_launch(p, n, args, NULL);
    if (!s) s = tk_gpu_sync(ctx);
    for (int i = 0; !s && i < n; i++)
        if (gpu[i].rank)
            s = tk_gpu_download(ctx, gpu[i].host, gpu[i].dev,
                                (size_t)gpu[i].elems * tk_dtype_size(gpu[i].dt));
    if (s) fprintf(stderr, "GPU run of %s: %s: %s\n", tk_kernel_name(k), tk_status_name(s),
                   tk_ctx_error(ctx));
    tk_program_release(p);
    return s;
}

tk_status th_compare(tk_ctx *ctx, tk_kernel *k, int n, th_tensor *ts, const tk_arg *scalars,
                     double *worst) {
    th_tensor cpu[16], gpu[16];
    tk_arg args[16];
    *worst = 0;
    for (int i = 0; i < n; i++) {
        cpu[i] = ts[i].rank ? th_tensor_clone(&ts[i]) : ts[i];
        gpu[i] = ts[i].rank ? th_tensor_clone(&ts[i]) : ts[i];
        args[i] = ts[i].rank ? th_arg(&cpu[i], 0) : scalars[i];
    }
    tk_status s = tk_interp_run(k, n, args);
    if (s) fprintf(stderr, "interpreter run of %s: %s\n", tk_kernel_name(k), tk_ctx_error(ctx));
    if (!s) s = gpu_run(ctx, k, n, gpu, scalars);
    for (int i = 0; i < n; i++) {
        if (!ts[i].rank) continue;
        double e = s ? 0 : th_rel_err(&gpu[i], &cpu[i]);
        if (!s && (isnan(e) || e > *worst)) *worst = e;
        th_tensor_free(ctx, &cpu[i]);
        th_tensor_free(ctx, &gpu[i]);
    }
    return s;
}
