/* Op kernels for the lowering tests, one per op family (and the memory
 * paths, control flow and a warp-specialized k-loop): tests/util/fixture_ops.c
 * and (the adding and clipped stores) fixture_copy.c. */
#ifndef TK_TEST_FIXTURE_OPS_H
#define TK_TEST_FIXTURE_OPS_H

#include "tk/tk.h"
#include "util/ref.h"

#define TU_OP_MAX_ARGS 8

/* Builds the kernel for element type dt and fills ts[0..*n) (reference
 * tensors, rank 0 for a scalar argument) and sc (the scalar arguments). */
typedef tk_kernel *(*tu_op_build)(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);

typedef struct tu_op_fixture {
    const char *name;
    tu_op_build build;
    double tol; /* rel err allowed against the interpreter */
} tu_op_fixture;

extern const tu_op_fixture tu_op_fixtures[];
extern const int tu_nop_fixtures;

tk_kernel *tu_ids(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_elementwise(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_reduce(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_mma(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_memory(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_memory_l2(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_strided(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_pipe(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_control(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_trig(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_epilogue(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_store_add(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_copy_add(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_copy_edge(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_gather(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_narrow(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_pairs(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);
tk_kernel *tu_col_bcast(tk_ctx *ctx, tk_dtype dt, ref_tensor *ts, tk_arg *sc, int *n);

void tu_free_tensors(ref_tensor *ts, int n);
/* The kernel alone: built, its reference tensors freed. */
tk_kernel *tu_op_kernel(tk_ctx *ctx, tu_op_build build, tk_dtype dt);

#endif
