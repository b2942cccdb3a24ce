/* Kernel-building helpers for the builder and verifier tests
 * (test_builder*.c, test_verify.c): a fixture that gives every test a fresh
 * context `ctx` and a 4-warp kernel `k` named "t", assertions on the
 * kernel's sticky status and message, and short constructors. */
#ifndef TK_TEST_BUILD_H
#define TK_TEST_BUILD_H

#include <check.h>
#include <string.h>

#include "tk/tk.h"
#include "util/fixture.h"

extern tk_kernel *k;

void build_setup(void);
/* TK_TEST_VERBOSE=1 prints every kernel's final error, to read them. */
void build_teardown(void);
/* Replaces the fixture's kernel by one with `warps` warps. */
void rewarp(int warps);
/* Adds to s a TCase `name` with this fixture and the n tests; returns it
 * (for loop tests). */
TCase *build_tcase(Suite *s, const char *name, const TTest *const *tests, size_t n);

#define EXPECT(st, frag)                                                                           \
    do {                                                                                           \
        tk_status s_ = tk_kernel_status(k);                                                        \
        const char *e_ = tk_kernel_error(k);                                                       \
        ck_assert_msg(s_ == (st), "status %s, expected %s (error: %s)", tk_status_name(s_),        \
                      tk_status_name(st), e_);                                                     \
        ck_assert_msg(strstr(e_, (frag)) != NULL, "error \"%s\" lacks \"%s\"", e_, (frag));        \
    } while (0)

#define EXPECT_FINISH(st, frag)                                                                    \
    do {                                                                                           \
        ck_assert_int_eq(tk_kernel_status(k), TK_OK);                                              \
        tk_status f_ = tk_kernel_finish(k);                                                        \
        ck_assert_msg(f_ == (st), "finish: %s, expected %s (error: %s)", tk_status_name(f_),       \
                      tk_status_name(st), tk_kernel_error(k));                                     \
        EXPECT(st, frag);                                                                          \
    } while (0)

#define EXPECT_CTX(call, st, frag)                                                                 \
    do {                                                                                           \
        tk_status c_ = (call);                                                                     \
        ck_assert_msg(c_ == (st), "%s, expected %s", tk_status_name(c_), tk_status_name(st));      \
        ck_assert_msg(strstr(tk_ctx_error(ctx), (frag)) != NULL,                                   \
                      "ctx error \"%s\" lacks "                                                    \
                      "\"%s\"",                                                                    \
                      tk_ctx_error(ctx), (frag));                                                  \
    } while (0)

#define OK_FINISH()                                                                                \
    do {                                                                                           \
        tk_status f_ = tk_kernel_finish(k);                                                        \
        ck_assert_msg(f_ == TK_OK, "finish: %s: %s", tk_status_name(f_), tk_kernel_error(k));      \
    } while (0)

/* ---- small helpers (on the fixture's kernel) ------------------------------ */
static inline tk_value *ci(int v) { return tk_const_i32(k, v); }
static inline tk_value *cf(float v) { return tk_const_f32(k, v); }

static inline tk_type wtile(tk_dtype dt, int r, int c, tk_layout l) {
    return tk_tile_type(dt, r, c, TK_WARP, l);
}
static inline tk_value *tile(tk_dtype dt, int r, int c, tk_layout l) {
    return tk_zeros(k, wtile(dt, r, c, l));
}
static inline tk_value *wgtile(tk_dtype dt, int r, int c) {
    return tk_zeros(k, tk_tile_type(dt, r, c, TK_WARPGROUP, TK_ROW));
}
static inline tk_value *f32t(int r, int c) { return tile(TK_F32, r, c, TK_ROW); }

#endif
