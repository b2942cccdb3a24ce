/* Expected failures of the entry points that report through the context
 * (a status, and a message in tk_ctx_error): the checks the kernel and
 * backend tests make again and again, in one place so that a failed one
 * reads the same everywhere (what came, what was wanted, the message). */
#ifndef TK_TEST_EXPECT_H
#define TK_TEST_EXPECT_H

#include <check.h>

#include "tk/tk.h"

/* got is want, and ctx's error message contains text. */
void tu_expect_status(tk_ctx *ctx, tk_status got, tk_status want, const char *text);

/* The kernels' build functions differ only in their config's type, so
 * these are macros. build(ctx, cfg, &k) fails with st, its message
 * contains frag, and it leaves no kernel. */
#define TU_EXPECT_BUILD_FAILS(build, ctx, cfg, st, frag)                                           \
    do {                                                                                           \
        tk_kernel *k_ = (tk_kernel *)1;                                                            \
        tu_expect_status((ctx), build((ctx), (cfg), &k_), (st), (frag));                           \
        ck_assert_ptr_null(k_);                                                                    \
    } while (0)

/* build's NULL checks (no out pointer, config or context: each
 * TK_ERR_INVALID_ARG), then config ok builds. */
#define TU_EXPECT_BUILD_ARGS(build, ctx, ok)                                                       \
    do {                                                                                           \
        tk_kernel *k_ = NULL;                                                                      \
        ck_assert_int_eq(build((ctx), (ok), NULL), TK_ERR_INVALID_ARG);                            \
        ck_assert_int_eq(build((ctx), NULL, &k_), TK_ERR_INVALID_ARG);                             \
        ck_assert_int_eq(build(NULL, (ok), &k_), TK_ERR_INVALID_ARG);                              \
        ck_assert_int_eq(build((ctx), (ok), &k_), TK_OK);                                          \
        tk_kernel_destroy(k_);                                                                     \
    } while (0)

#endif
