/* Parameter structs for the ready-made kernels' validation and registry
 * tests: every pointer is `buf`, which the checks under test never read
 * (they fail or stop before a launch), so any small buffer serves. */
#ifndef TK_TEST_PARAMS_H
#define TK_TEST_PARAMS_H

#include "tk/tk_run.h"

/* C[m,n] = A[m,k] B[k,n], in_dtype in, out_dtype out, dense, no config. */
tk_gemm_params tu_gemm_params(tk_dtype in_dtype, tk_dtype out_dtype, int64_t m, int64_t n,
                              int64_t k, void *buf);
/* batch 1, seq_q = seq_kv = seq, not causal, dense, default scale. */
tk_attention_params tu_attention_params(tk_dtype dtype, int head_dim, int64_t heads_q,
                                        int64_t heads_kv, int64_t seq, void *buf);

#endif
