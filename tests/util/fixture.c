#include "util/fixture.h"

#include <check.h>

#include "util/ref.h"

tk_ctx *ctx;

/* Every test runs the interpreter with the race checker on, whatever
 * TK_RACE_CHECK says (TK_INTERP_SHUFFLE still applies). */
void ctx_setup(void) {
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_interp_options o;
    ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
    o.race_check = 1;
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
}

void ctx_teardown(void) {
    tk_ctx_destroy(ctx);
    ctx = NULL;
}

void ctx_setup_seeded(void) {
    ctx_setup();
    ref_seed();
}

TCase *ctx_tcase(Suite *s, const char *name, int timeout) {
    TCase *tc = tu_tcase(s, name, timeout);
    tcase_add_checked_fixture(tc, ctx_setup_seeded, ctx_teardown);
    return tc;
}
