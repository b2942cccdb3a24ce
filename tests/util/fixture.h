/* The context of the running test, shared by the Check fixtures of
 * build.h and interp.h: created before each test, destroyed after it;
 * and (util/run.h) the runner every test program's main ends with. */
#ifndef TK_TEST_FIXTURE_H
#define TK_TEST_FIXTURE_H

#include <check.h>

#include "tk/tk.h"
#include "util/run.h"

extern tk_ctx *ctx;

void ctx_setup(void);    /* ctx = a new context, race checker on */
void ctx_teardown(void); /* destroys ctx, ctx = NULL */

#endif
