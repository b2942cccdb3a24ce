/* The warp-specialized split of the lowering driver (jit/lower_ws.c). */
#ifndef TK_JIT_LOWER_WS_H
#define TK_JIT_LOWER_WS_H

#include "ops/nv/lower.h"

/* The body, once for the producer warp and once for the consumers (after
 * the entry block), for a plan with producer warps. */
tk_status tk_lower_split(tk_lower *L);

#endif
