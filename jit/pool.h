/* A fork-join pool for independent jobs (compiles, mostly: each holds an
 * LLVM context or waits on a ptxas process or the driver's JIT, so they
 * share nothing and scale with the cores). No state outlives a call. */
#ifndef TK_JIT_POOL_H
#define TK_JIT_POOL_H

#define TK_POOL_MAX 16 /* threads at most, the caller's included */

typedef void (*tk_pool_fn)(void *user, int i);

/* Threads tk_pool_run would use for n jobs: the CPUs this process may run
 * on, at most TK_POOL_MAX, at most n, at least 1. */
int tk_pool_threads(int n);

/* fn(user, i) for every i in 0..n-1, each exactly once, on tk_pool_threads(n)
 * threads (the calling thread works too; a thread that cannot be started
 * only makes the pool smaller); returns when every job has returned. */
void tk_pool_run(int n, tk_pool_fn fn, void *user);

#endif
