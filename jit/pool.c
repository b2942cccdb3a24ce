/* jit/pool.h: threads take the next job index from one atomic counter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "jit/pool.h"

#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct tk_pool {
    tk_pool_fn fn;
    void *user;
    int n;
    atomic_int next;
} tk_pool;

int tk_pool_threads(int n) {
    /* the CPUs this process may run on (a container's or taskset's), else
     * the machine's */
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    int t = cores < 1 ? 1 : cores > TK_POOL_MAX ? TK_POOL_MAX : (int)cores;
    return n < 1 ? 1 : n < t ? n : t;
}

static void *tk_pool_worker(void *arg) {
    tk_pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) p->fn(p->user, i);
    return NULL;
}

void tk_pool_run(int n, tk_pool_fn fn, void *user) {
    tk_pool p = {.fn = fn, .user = user, .n = n};
    atomic_init(&p.next, 0);
    pthread_t th[TK_POOL_MAX];
    int started = 0, want = tk_pool_threads(n) - 1;
    while (started < want && pthread_create(&th[started], NULL, tk_pool_worker, &p) == 0) started++;
    tk_pool_worker(&p);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}
