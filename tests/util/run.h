/* The runner every test program's main ends with. Separate from fixture.h
 * so that tests with their own context (not the shared `ctx`) can use it. */
#ifndef TK_TEST_RUN_H
#define TK_TEST_RUN_H

#include <check.h>

/* Runs every test of s (CK_NORMAL output) and frees it: EXIT_SUCCESS when
 * all pass, else EXIT_FAILURE (a test program's main returns this). */
int run_suite(Suite *s);

#endif
