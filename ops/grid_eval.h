/* Host evaluation of a compiled grid program (ir/grid.h): each op runs with
 * the interpreter's scalar semantics (ops/interp.h), so the grid tk_launch
 * uses is the grid tk_interp_run runs. */
#ifndef TK_OPS_GRID_EVAL_H
#define TK_OPS_GRID_EVAL_H

#include "ir/grid.h"

/* Evaluates the grid for args (checked against the signature already).
 * TK_ERR_LAUNCH on a zero divisor, the message prefixed with `fn`. */
tk_status tk_grid_eval(const tk_grid_prog *g, const tk_arg *args, int64_t out[3], const char *fn,
                       tk_diag *dg);

#endif
