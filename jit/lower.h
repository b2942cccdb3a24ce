/* Lowering a finished kernel to NVPTX (jit/lower.c): the contract between the
 * lowering and the rest of jit/. Both return TK_OK or a status with a message
 * in err (NUL-terminated, at most errn bytes). Thread-safe: each call uses its
 * own LLVM context. */
#ifndef TK_JIT_LOWER_H
#define TK_JIT_LOWER_H

#include <stddef.h>

#include "tk/tk.h"

/* PTX text for arch ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"); *ptx is
 * malloc'd and NUL-terminated. */
tk_status tk_lower_ptx(const tk_kernel *k, const char *arch, char **ptx, char *err, size_t errn);
/* Textual LLVM IR after lowering and optimization; *text is malloc'd. */
tk_status tk_lower_llvm_text(const tk_kernel *k, const char *arch, char **text, char *err,
                             size_t errn);

#endif
