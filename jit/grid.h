/* The grid expressions of a kernel (k->grid[0..2]) copied into a program as
 * flat postfix code, so tk_launch can evaluate them after k is destroyed.
 * Only scalar ops built from parameters and constants appear there (the
 * verifier guarantees it): param refs, CONST, DIM, ADD SUB MUL DIV MIN MAX
 * REM CEIL_DIV, comparisons, AND OR, SELECT, NEG ABS CVT. */
#ifndef TK_JIT_GRID_H
#define TK_JIT_GRID_H

#include <stdint.h>

#include "ir/ir.h"

typedef struct tk_ginst {
    int16_t op;      /* tk_opcode, or TK_GOP_PARAM                     */
    uint8_t dt;      /* result dtype                                    */
    uint8_t opdt;    /* dtype the op computes in (its operands')        */
    int32_t param;   /* PARAM, DIM: parameter index                     */
    int32_t dim;     /* DIM: dimension                                  */
    int64_t i;       /* CONST (integer / bool)                          */
    double f;        /* CONST (float)                                   */
} tk_ginst;

#define TK_GOP_PARAM (-1)
#define TK_GRID_MAX_CODE 1024

typedef struct tk_grid_prog {
    int32_t start[3], len[3];  /* len 0: that grid dimension is 1 */
    int32_t n;
    tk_ginst *code;            /* malloc'd */
} tk_grid_prog;

tk_status tk_grid_build(const tk_kernel *k, tk_grid_prog *g, char *err, size_t errn);
/* args were checked against the signature already. */
tk_status tk_grid_eval(const tk_grid_prog *g, const tk_arg *args, int64_t out[3], char *err,
                       size_t errn);
void tk_grid_free(tk_grid_prog *g);

#endif
