#include "util/fixture.h"

#include <check.h>
#include <stdlib.h>

tk_ctx *ctx;

void ctx_setup(void) { ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK); }

void ctx_teardown(void) {
    tk_ctx_destroy(ctx);
    ctx = NULL;
}

int run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
