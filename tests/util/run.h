/* The runner every test program's main ends with. Separate from fixture.h
 * so that tests with their own context (not the shared `ctx`) can use it. */
#ifndef TK_TEST_RUN_H
#define TK_TEST_RUN_H

#include <check.h>

/* Runs every test of s (CK_NORMAL output) and frees it: EXIT_SUCCESS when
 * all pass, else EXIT_FAILURE (a test program's main returns this). */
int run_suite(Suite *s);

/* A new TCase `name`, added to s; timeout in seconds (0: Check's default). */
TCase *tu_tcase(Suite *s, const char *name, int timeout);

#endif
