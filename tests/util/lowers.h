/* Lowering checks shared by the tests: a kernel lowered for sm_80 and
 * sm_90a, its LLVM IR verified and its PTX assembled by ptxas (skipped with
 * one line where there is none: TK_PTXAS or /usr/local/cuda/bin/ptxas). */
#ifndef TK_TEST_LOWERS_H
#define TK_TEST_LOWERS_H

#include <stddef.h>

#include "tk/tk.h"

/* The two archs every kernel lowers for. */
extern const char *const tu_archs[2];

/* Assembles ptx with `ptxas -v`; returns its exit status (-1: skipped) and
 * the spill bytes (stores + loads) it reported; its output in log. */
int tu_run_ptxas(const char *ptx, const char *arch, long *spills, char *log, size_t logn);

/* Lowers k for both archs: IR verifies, PTX assembles. Returns the spill
 * bytes of the worse arch (0 when ptxas is missing). */
long tu_check_lowers(const tk_kernel *k);

#endif
