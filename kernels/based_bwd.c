/* Based linear attention, backward (see kernels/based.c for the forward). */
#include "based_parts.h"

tk_status tk_based_build_bwd(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel *k) {
    (void)cfg;
    (void)k;
    return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED, "tk_based_build: backward not yet built");
}
