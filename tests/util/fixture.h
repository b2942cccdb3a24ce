/* The context of the running test, shared by the Check fixtures of
 * build.h and interp.h and by the kernel tests' TCases (ctx_tcase:
 * test_kernels.c, test_attention_*.c): created before each test, destroyed
 * after it; and (util/run.h) the runner every test program's main ends
 * with. */
#ifndef TK_TEST_FIXTURE_H
#define TK_TEST_FIXTURE_H

#include <check.h>

#include "tk/tk.h"
#include "util/run.h"

extern tk_ctx *ctx;

void ctx_setup(void);    /* ctx = a new context, race checker on */
void ctx_teardown(void); /* destroys ctx, ctx = NULL */
/* ctx_setup, then ref_seed (util/ref.h): the tests that draw from ref's
 * stream print its seed before their first line of output. */
void ctx_setup_seeded(void);

/* tu_tcase (util/run.h) whose tests get ctx_setup_seeded / ctx_teardown as
 * a checked fixture. */
TCase *ctx_tcase(Suite *s, const char *name, int timeout);

#endif
