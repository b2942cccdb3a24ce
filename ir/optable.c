/* The op table, expanded from ir/ops.def: identity and the columns the IR
 * layer reads. The families' functions are dispatched by the ops layer
 * (ops/build.c, ops/interp.c), never from here. */
#include "ir/ir.h"

#define TK_SCOPE_ROW_THREAD TK_SCOPE_THREAD
#define TK_SCOPE_ROW_BLOCK  TK_SCOPE_BLOCK
#define TK_SCOPE_ROW_OWNER  TK_SCOPE_OWNER

#define TK_UNI_ROW_OPND   TK_UNI_OPERANDS
#define TK_UNI_ROW_BLOCK  TK_UNI_BLOCK
#define TK_UNI_ROW_WARP   TK_UNI_WARP
#define TK_UNI_ROW_THREAD TK_UNI_THREAD

#define TK_GRID_ROW_yes true
#define TK_GRID_ROW_no  false

const tk_op_info tk_op_infos[TK_OP_COUNT] = {
#define X(e, name, mn, mx, nres, scope, fam, uni, grid, print)                                     \
    [TK_OP_##e] = {name,                                                                           \
                   mn,                                                                             \
                   mx,                                                                             \
                   nres,                                                                           \
                   TK_SCOPE_ROW_##scope,                                                           \
                   #fam,                                                                           \
                   TK_UNI_ROW_##uni,                                                               \
                   TK_GRID_ROW_##grid,                                                             \
                   TK_PRINT_##print},
#include "ir/ops.def"
#undef X
};

/* Every opcode has a row: a missing one would leave a nameless op. */
#define X(...) +1
_Static_assert(0
#include "ir/ops.def"
                   == TK_OP_COUNT,
               "ops.def and tk_opcode disagree");
#undef X
