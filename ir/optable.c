/* The op table, expanded from ir/ops.def. */
#include "ir/ir.h"

#define TK_SCOPE_ROW_THREAD TK_SCOPE_THREAD
#define TK_SCOPE_ROW_BLOCK TK_SCOPE_BLOCK
#define TK_SCOPE_ROW_OWNER TK_SCOPE_OWNER

const tk_op_info tk_op_infos[TK_OP_COUNT] = {
#define X(e, name, mn, mx, nres, scope, fam) \
    [TK_OP_##e] = {name, mn, mx, nres, TK_SCOPE_ROW_##scope, #fam, tk_rule_##fam},
#include "ir/ops.def"
#undef X
};

/* Every opcode has a row: a missing one would leave a NULL rule. */
#define X(e, name, mn, mx, nres, scope, fam) +1
_Static_assert(0
#include "ir/ops.def"
               == TK_OP_COUNT, "ops.def and tk_opcode disagree");
#undef X
