/* Op building for the public builder calls of ops/<family>.c: the families'
 * type rules, dispatched by opcode from the op table's family column, around
 * the IR's op creation (tk_op_new / tk_op_append, ir/ir.h). */
#ifndef TK_OPS_BUILD_H
#define TK_OPS_BUILD_H

#include "ir/ir.h"

/* Each family's type rule, tk_rule_<family> (ops/<family>.c). */
#define X(e, name, mn, mx, nres, scope, fam, ...) tk_status tk_rule_##fam(tk_kernel *k, tk_op *op);
#include "ir/ops.def"
#undef X

/* The rules by opcode, as the verifier takes them (tk_verify). */
extern const tk_rule_fn tk_op_rules[TK_OP_COUNT];

/* Creates an op with the given operands in the current region, runs its
 * rule, and returns it (NULL once the kernel has an error). */
tk_op *tk_build_op(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds);
/* The same, with attributes set before the rule runs. */
tk_op *tk_build_op_attr(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds, int64_t a0,
                        int64_t a1, double f);
/* The same, with the result type the caller asks for (FILL, loads, SHARED). */
tk_op *tk_build_op_typed(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds,
                         tk_type want, int64_t a0, int64_t a1, double f);

/* Checks a register tile/vector type a builder call asks for (shape
 * quanta, dtype, owner, layout); reports on op (ops/elementwise.c). */
tk_status tk_check_reg_type(tk_kernel *k, tk_op *op, const tk_type *t);

#endif
