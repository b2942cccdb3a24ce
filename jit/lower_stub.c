/* Weak stand-ins for the lowering (jit/lower.h) so libtk links and the rest
 * of the JIT works while the real lowering is not built; the real, strong
 * definitions override these at link time. */
#include <stdio.h>

#include "jit/lower.h"

static tk_status tk_lower_missing(void **out, char *err, size_t errn)
{
    if (out)
        *out = NULL;
    if (err && errn)
        snprintf(err, errn, "lowering not built");
    return TK_ERR_UNSUPPORTED;
}

__attribute__((weak)) tk_status tk_lower_ptx(const tk_kernel *k, const char *arch, char **ptx,
                                             char *err, size_t errn)
{
    return tk_lower_missing((void **)ptx, err, errn);
}

__attribute__((weak)) tk_status tk_lower_llvm_text(const tk_kernel *k, const char *arch,
                                                   char **text, char *err, size_t errn)
{
    return tk_lower_missing((void **)text, err, errn);
}
