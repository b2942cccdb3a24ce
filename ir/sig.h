/* Kernel signatures and argument checking, shared by the interpreter and
 * tk_launch (a compiled program keeps a tk_sig because it outlives the
 * kernel it came from). */
#ifndef TK_SIG_H
#define TK_SIG_H

#include "ir/diag.h"
#include "ir/ir.h"

typedef struct tk_sig_param {
    char name[48]; /* for messages (truncated) */
    tk_kind kind;  /* TK_KIND_GVIEW or TK_KIND_SCALAR */
    tk_dtype dtype;
    int32_t rank; /* tensors; 0 for scalars */
} tk_sig_param;

/* A kernel's parameter list: what an argument list is checked against. */
typedef struct tk_sig {
    int32_t nparams;
    tk_sig_param params[TK_MAX_PARAMS];
} tk_sig;

/* The signature of k's parameters. */
void tk_sig_of(const tk_kernel *k, tk_sig *out);
/* TK_OK, or TK_ERR_LAUNCH with a message in dg naming the argument and what
 * was expected ("fn: argument 2 ('V') is a rank-3 tensor, the kernel expects
 * rank 4"). The one argument rule of the interpreter and tk_launch: kinds,
 * dtypes and ranks match; tensors have rank 1..4, non-NULL data, dims >= 0;
 * a bool parameter takes a bool or an i32 argument (the public API builds
 * scalars with tk_arg_i32; nonzero is true). `kernel` names the kernel in
 * the count message. */
tk_status tk_sig_check(const tk_sig *sig, const char *kernel, int nargs, const tk_arg *args,
                       const char *fn, tk_diag *dg);

#endif
