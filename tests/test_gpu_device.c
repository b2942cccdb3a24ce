/* Choosing the GPU (tk_gpu_set_device, tk/tk_jit.h): its argument checks
 * and order rules run anywhere; without a driver the chosen device is
 * reported through the driver's absence, on a GPU machine an ordinal past
 * the devices gets the count, and with two GPUs two contexts on different
 * devices work side by side on one thread. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/expect.h"
#include "util/run.h"

START_TEST(argument_checks) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_gpu_set_device(NULL, 0), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tu_expect_status(ctx, tk_gpu_set_device(ctx, -1), TK_ERR_INVALID_ARG,
                     "tk_gpu_set_device: device -1; devices are numbered from 0");
    /* before the driver starts the choice may change, and nothing is checked
       against the machine yet */
    ck_assert_int_eq(tk_gpu_set_device(ctx, 5), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 1), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 0), TK_OK);
    tk_ctx_destroy(ctx);
}
END_TEST

/* After the driver was started, or tried, the device is fixed: whatever
 * tk_gpu_init answered here (no driver in CI, a GPU elsewhere). */
START_TEST(fixed_once_started) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 0), TK_OK);
    tk_status s = tk_gpu_init(ctx);
    printf("tk_gpu_init on device 0: %s %s\n", tk_status_name(s), s ? tk_ctx_error(ctx) : "");
    tu_expect_status(ctx, tk_gpu_set_device(ctx, 1), TK_ERR_INVALID_ARG,
                     "already started (or tried) the GPU on device 0; choose the device before "
                     "tk_gpu_init");
    tu_expect_status(ctx, tk_gpu_set_device(ctx, 0), TK_ERR_INVALID_ARG, "already started");
    ck_assert_int_eq(tk_gpu_init(ctx), s); /* unchanged by the refusals */
    tk_ctx_destroy(ctx);
}
END_TEST

/* An allocation starts the driver as tk_gpu_init does. */
START_TEST(allocation_starts_it) {
    tk_ctx *ctx;
    void *p = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_status s = tk_gpu_alloc(ctx, 64, &p);
    if (s == TK_OK) ck_assert_int_eq(tk_gpu_free(ctx, p), TK_OK);
    tu_expect_status(ctx, tk_gpu_set_device(ctx, 0), TK_ERR_INVALID_ARG, "already started");
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(interpreter_is_device_zero) {
    tk_ctx *ctx;
    void *p = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, 0), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 0), TK_OK);
    tu_expect_status(
        ctx, tk_gpu_set_device(ctx, 1), TK_ERR_INVALID_ARG,
        "tk_gpu_set_device: device 1 on the interpreter backend, which is one device, 0");
    tu_expect_status(ctx, tk_gpu_set_device(ctx, -2), TK_ERR_INVALID_ARG, "device -2");
    ck_assert_int_eq(tk_gpu_alloc(ctx, 64, &p), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 0), TK_OK); /* still fine: nothing changes */
    ck_assert_int_eq(tk_gpu_free(ctx, p), TK_OK);
    tk_ctx_destroy(ctx);
    /* the other order: a context given GPU 2 does not become the interpreter */
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 2), TK_OK);
    tu_expect_status(
        ctx, tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, 0), TK_ERR_INVALID_ARG,
        "was given GPU 2 (tk_gpu_set_device); the interpreter backend is one device, 0");
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_GPU, NULL, 0), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 0), TK_OK);
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, 0), TK_OK);
    ck_assert_int_eq(tk_gpu_init(ctx), TK_OK);
    tk_ctx_destroy(ctx);
}
END_TEST

/* A device far past any machine's: no driver (CI) says so, a driver without
 * devices fails in cuInit (TK_ERR_CUDA), a GPU machine gives the count. */
START_TEST(ordinal_past_the_devices) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, 4096), TK_OK);
    tk_status s = tk_gpu_init(ctx);
    printf("tk_gpu_init on device 4096: %s %s\n", tk_status_name(s), tk_ctx_error(ctx));
    ck_assert_msg(s == TK_ERR_NO_DRIVER || s == TK_ERR_CUDA || s == TK_ERR_INVALID_ARG, "%s",
                  tk_ctx_error(ctx));
    if (s == TK_ERR_INVALID_ARG) {
        ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx),
                                     "tk_gpu_init: no CUDA device 4096 (tk_gpu_set_device): "
                                     "the driver sees"));
        void *p = NULL;
        tu_expect_status(ctx, tk_gpu_alloc(ctx, 16, &p), TK_ERR_INVALID_ARG, "no CUDA device 4096");
        ck_assert_ptr_null(p);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

#define NVAL 64

/* One context on device d holding NVAL floats i + d, or NULL (printed). */
static tk_ctx *device_ctx(int d, float **dev) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_set_device(ctx, d), TK_OK);
    if (tk_gpu_init(ctx) != TK_OK) {
        printf("device %d: %s\n", d, tk_ctx_error(ctx));
        tk_ctx_destroy(ctx);
        return NULL;
    }
    float host[NVAL];
    void *p = NULL;
    for (int i = 0; i < NVAL; i++) host[i] = (float)(i + d);
    ck_assert_int_eq(tk_gpu_alloc(ctx, sizeof host, &p), TK_OK);
    ck_assert_int_eq(tk_gpu_upload(ctx, p, host, sizeof host), TK_OK);
    *dev = p;
    return ctx;
}

static void expect_values(tk_ctx *ctx, const float *dev, int d) {
    float host[NVAL];
    ck_assert_int_eq(tk_gpu_download(ctx, host, dev, sizeof host), TK_OK);
    for (int i = 0; i < NVAL; i++) ck_assert_float_eq(host[i], (float)(i + d));
}

/* Two contexts on devices 0 and 1, used in turns from one thread: each
 * call makes its own device's context current. Skipped below two GPUs. */
START_TEST(two_devices_side_by_side) {
    float *a = NULL, *b = NULL;
    tk_ctx *c0 = device_ctx(0, &a);
    if (!c0) return; /* no GPU: printed */
    tk_ctx *c1 = device_ctx(1, &b);
    if (!c1) {
        printf("two-device case skipped: one GPU\n");
        tk_gpu_free(c0, a), tk_ctx_destroy(c0);
        return;
    }
    expect_values(c0, a, 0), expect_values(c1, b, 1), expect_values(c0, a, 0);
    char arch0[16], arch1[16];
    ck_assert_int_eq(tk_gpu_arch(c0, arch0, sizeof arch0), TK_OK);
    ck_assert_int_eq(tk_gpu_arch(c1, arch1, sizeof arch1), TK_OK);
    printf("devices 0 and 1: %s, %s\n", arch0, arch1);
    tk_gpu_free(c1, b), tk_gpu_free(c0, a);
    tk_ctx_destroy(c1), tk_ctx_destroy(c0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gpu_device");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, argument_checks);
    tcase_add_test(tc, fixed_once_started);
    tcase_add_test(tc, allocation_starts_it);
    tcase_add_test(tc, interpreter_is_device_zero);
    tcase_add_test(tc, ordinal_past_the_devices);
    tcase_add_test(tc, two_devices_side_by_side);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
