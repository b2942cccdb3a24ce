/* Kernel signatures and argument checking, shared by the interpreter and
 * tk_launch (a compiled program keeps a copy of the signature because it
 * outlives the kernel it came from). */
#ifndef TK_SIG_H
#define TK_SIG_H

#include "ir/ir.h"

typedef struct tk_sig_param {
    char name[32];
    tk_kind kind;   /* TK_KIND_GVIEW or TK_KIND_SCALAR */
    tk_dtype dtype;
    int32_t rank;
} tk_sig_param;

/* Fills out[0..k->nparams) from the kernel's parameters. */
void tk_sig_of(const tk_kernel *k, tk_sig_param *out);
/* TK_OK, or TK_ERR_LAUNCH with a message in err naming the argument and
 * what was expected ("fn: argument 2 ('V') is a rank-3 tensor, the kernel
 * expects rank 4"). Tensor dims must be >= 0, data non-NULL. */
tk_status tk_sig_check(const tk_sig_param *sig, int np, int nargs, const tk_arg *args,
                       const char *fn, char *err, size_t errn);

#endif
