/* A small pipelined bf16 GEMM built with the public builder — the
 * kernel-shaped fixture shared by the builder and printer tests. */
#ifndef TK_TEST_GEMM_IR_H
#define TK_TEST_GEMM_IR_H

#include "tk/tk.h"

/* Adds to k (4 warps) a 2-stage cp.async ring, mma and an f32 store:
 * params A, B (bf16) and C (f32), specs BM = bm, BN = 64, BK = 32. Value ids
 * follow creation order: no call nests two op-making calls as arguments
 * (C leaves their order open), so the printed text is stable. */
void tu_build_gemm(tk_kernel *k, int bm);

#endif
