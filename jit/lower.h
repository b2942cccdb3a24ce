/* Lowering a finished kernel to NVPTX (jit/lower.c): the contract between the
 * lowering and the rest of jit/. Each returns TK_OK or a status with its
 * message recorded in dg (ir/diag.h). Thread-safe: each
 * call uses its own LLVM context. */
#ifndef TK_JIT_LOWER_H
#define TK_JIT_LOWER_H

#include <stddef.h>

#include "ir/diag.h"
#include "ops/nv/plan.h"
#include "tk/tk.h"

/* PTX text for arch ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"); *ptx is
 * malloc'd and NUL-terminated. The kernel's plan is made for this call. */
tk_status tk_lower_ptx(const tk_kernel *k, const char *arch, char **ptx, tk_diag *dg);
/* The same with the plan the caller made for k and arch (tk_plan_make; the
 * program's), NULL: made for this call. TK_ERR_STATE when the plan is for
 * another target. */
tk_status tk_lower_ptx_plan(const tk_kernel *k, const char *arch, const tk_plan *plan, char **ptx,
                            tk_diag *dg);
/* Where one lowering's time went (milliseconds): building the LLVM module
 * from the IR, the verifier, the optimization pipeline, PTX emission
 * (instruction selection, register allocation, printing). */
typedef struct tk_lower_times {
    double build_ms, verify_ms, opt_ms, emit_ms;
} tk_lower_times;
/* tk_lower_ptx_plan, also reporting its stages' times into *t (not NULL). */
tk_status tk_lower_ptx_timed(const tk_kernel *k, const char *arch, const tk_plan *plan, char **ptx,
                             tk_lower_times *t, tk_diag *dg);
/* Textual LLVM IR after lowering and optimization; *text is malloc'd. */
tk_status tk_lower_llvm_text(const tk_kernel *k, const char *arch, char **text, tk_diag *dg);

#endif
