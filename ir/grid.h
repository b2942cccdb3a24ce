/* A kernel's grid expressions (k->grid[0..2]) compiled for the host: the one
 * mechanism behind the builder's check (tk_set_grid), the verifier's, the
 * interpreter's grid (tk_kernel_grid, tk_interp_run) and tk_launch's.
 *
 * The expressions are copied into flat postfix code, so a compiled program
 * can evaluate them after its kernel is destroyed. Which ops may appear is
 * the op table's grid column; leaves are scalar parameters, constants and
 * dims of tensor parameters. Compiling is IR work (here); evaluating needs
 * op semantics and belongs to the ops layer (tk_grid_eval, ops/grid_eval.h),
 * which runs each op with the interpreter's own scalar semantics, so the
 * grid the GPU is launched over is the grid the interpreter runs. */
#ifndef TK_IR_GRID_H
#define TK_IR_GRID_H

#include <stdint.h>

#include "ir/diag.h"
#include "ir/ir.h"

typedef struct tk_ginst {
    int16_t op;     /* tk_opcode, or TK_GOP_PARAM                      */
    uint8_t dt;     /* dtype the op computes in (operand 0's; CONST: its
                        own dtype)                                       */
    uint8_t nopnds; /* values it pops                                   */
    int32_t param;  /* PARAM, DIM: parameter index                      */
    uint32_t id;    /* op id, for messages                              */
    int64_t attr;   /* DIM: dimension; CVT: target dtype; CONST: value   */
    double f;       /* CONST: float value                               */
} tk_ginst;

#define TK_GOP_PARAM     (-1)
#define TK_GRID_MAX_CODE 1024

typedef struct tk_grid_prog {
    int32_t start[3], len[3]; /* len 0: that grid dimension is 1 */
    int32_t n;
    tk_ginst *code; /* malloc'd */
} tk_grid_prog;

/* Compiles k's grid; on failure g is empty and dg says why. */
tk_status tk_grid_build(const tk_kernel *k, tk_grid_prog *g, tk_diag *dg);
/* Whether one value is a grid expression the host can evaluate: TK_OK, or
 * TK_ERR_SCOPE ("the grid depends on op #N (name), which the host cannot
 * evaluate") / TK_ERR_UNSUPPORTED (too large) with dg set. */
tk_status tk_grid_check(const tk_value *v, tk_diag *dg);
void tk_grid_free(tk_grid_prog *g);

#endif
