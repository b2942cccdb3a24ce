/* Ready-made kernels on device pointers: one call builds (once per
 * specialization and context), compiles through the kernel cache and
 * launches. One compiled kernel per specialization serves every size.
 *
 * Specializations: attention — (dtype, head_dim, causal, arch); GEMM —
 * (input dtype, output dtype, transpose_b, block shape, arch). Sizes and
 * strides are run-time values. */
#ifndef TK_TK_RUN_H
#define TK_TK_RUN_H

/* Each family in its own header; this one includes them all. Every entry
 * point's tk_prepare_info is tk/tk_jit.h's. */
#include "tk/tk_run_attention.h"
#include "tk/tk_run_gemm.h"
#include "tk/tk_run_linear.h"
#include "tk/tk_run_norm.h"
#include "tk/tk_run_train.h"

#endif
