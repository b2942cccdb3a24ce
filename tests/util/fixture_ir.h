/* Kernel-shaped fixtures built with the public builder, shared by the
 * builder and printer tests. Value ids follow creation order: no call nests
 * two op-making calls as arguments (C leaves their order open), so the
 * printed text is stable. */
#ifndef TK_TEST_FIXTURE_IR_H
#define TK_TEST_FIXTURE_IR_H

#include "tk/tk.h"

/* A small pipelined bf16 GEMM into k (4 warps): a 2-stage cp.async ring,
 * mma and an f32 store; params A, B (bf16) and C (f32), specs BM = bm,
 * BN = 64, BK = 32. */
void tu_build_gemm(tk_kernel *k, int bm);

/* Masked softmax rows into k (2 warps): scale, causal and column masks
 * filled with `fill`, row max/sum, broadcasts and an if/else with yields;
 * params X (f32, rank 3), n (i64) and scale (f32). */
void tu_build_softmax(tk_kernel *k, float fill);

#endif
