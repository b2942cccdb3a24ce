/* Op building: the rule dispatch table and the one function every public
 * builder call goes through (see ops/build.h). tk_kernel_finish lives here
 * too, since the verifier re-runs the rules. */
#include "ops/build.h"

const tk_rule_fn tk_op_rules[TK_OP_COUNT] = {
#define X(e, name, mn, mx, nres, scope, fam, ...) [TK_OP_##e] = tk_rule_##fam,
#include "ir/ops.def"
#undef X
};

/* Every opcode has a rule: a missing row would leave a NULL one. */
#define X(...) +1
_Static_assert(0
#include "ir/ops.def"
                       == TK_OP_COUNT &&
                   sizeof tk_op_rules / sizeof tk_op_rules[0] == TK_OP_COUNT,
               "ops.def and the rule table disagree");
#undef X

tk_op *tk_build_op_typed(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds,
                         tk_type want, int64_t a0, int64_t a1, double f) {
    tk_op *op = tk_op_new(k, opc, nopnds, opnds, want, a0, a1, f);
    if (!op || tk_op_rules[opc](k, op) != TK_OK) return NULL;
    return tk_op_append(k, op);
}

tk_op *tk_build_op_attr(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds, int64_t a0,
                        int64_t a1, double f) {
    return tk_build_op_typed(k, opc, nopnds, opnds, (tk_type){0}, a0, a1, f);
}

tk_op *tk_build_op(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds) {
    return tk_build_op_attr(k, opc, nopnds, opnds, 0, 0, 0.0);
}

tk_status tk_kernel_finish(tk_kernel *k) { return tk_kernel_seal(k, tk_op_rules); }
