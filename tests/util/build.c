#include "util/build.h"

#include <stdio.h>
#include <stdlib.h>

tk_kernel *k;

void build_setup(void) {
    ctx_setup();
    ck_assert_int_eq(tk_kernel_create(ctx, "t", 4, &k), TK_OK);
    tk_set_grid(k, NULL, NULL, NULL); /* one block; tests may set another grid */
}

void build_teardown(void) {
    if (getenv("TK_TEST_VERBOSE") && k && tk_kernel_status(k))
        fprintf(stderr, "%-18s %s\n", tk_status_name(tk_kernel_status(k)), tk_kernel_error(k));
    tk_kernel_destroy(k);
    k = NULL;
    ctx_teardown();
}

void rewarp(int warps) {
    tk_kernel_destroy(k);
    k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, "t", warps, &k), TK_OK);
    tk_set_grid(k, NULL, NULL, NULL); /* one block; tests may set another grid */
}

TCase *build_tcase(Suite *s, const char *name, const TTest *const *tests, size_t n) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, build_setup, build_teardown);
    for (size_t i = 0; i < n; i++) tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}
