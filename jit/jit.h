/* The JIT's per-context state: the backend (tk_ctx_set_backend), CUDA
 * driver table, ptxas probe, memory + disk caches and statistics, and the
 * interpreter backend's host allocations. A context slot (ir/ctx.h): made by
 * the first JIT/GPU entry point (tk_jit_of), destroyed with the context. */
#ifndef TK_JIT_JIT_H
#define TK_JIT_JIT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "ir/ctx.h"
#include "jit/cache.h"
#include "jit/cuda.h"
#include "jit/link.h"
#include "tk/tk_jit.h"

/* What an interpreter-backend context plans for (tk_ctx_set_backend). */
typedef struct tk_host_target {
    char arch[16]; /* a known target, "sm_90a" by default */
    int sms;       /* 132 by default                     */
} tk_host_target;

struct tk_jit {
    pthread_mutex_t lock; /* guards the driver start, the ptxas probe and the
                             backend (below)                                 */
    tk_cuda *cu;          /* refcounted; NULL until the driver is up        */
    bool cu_tried;        /* driver start attempted (failures are sticky)   */
    int device;           /* the GPU it starts on (tk_gpu_set_device): 0
                             unless set, fixed once cu_tried               */
    tk_diag cu_diag;      /* TK_OK, or why the driver is unusable           */
    tk_ptxas ptxas;       /* ptxas path and version, probed once            */
    bool ptxas_tried;
    tk_diag ptxas_diag; /* TK_OK, or why no ptxas was found               */
    tk_cache cache;     /* memory table, disk settings, statistics        */

    /* The backend (tk_ctx_set_backend, jit/host.c), under `lock`. */
    tk_backend backend;    /* TK_BACKEND_GPU unless set                      */
    tk_host_target target; /* TK_BACKEND_INTERP: the GPU the plans are for   */
    bool committed;        /* a program or an allocation was made: the backend
                              can no longer change                           */
    bool precompile;       /* TK_BACKEND_INTERP: each compile also precompiles
                              for target.arch into the disk cache (under lock) */
    void **host;           /* TK_BACKEND_INTERP: live tk_gpu_alloc blocks,    */
    size_t nhost, caphost; /* freed with the context as a GPU context's are  */
};

/* A standalone JIT state (tests use it without a context). NULL: no memory. */
struct tk_jit *tk_jit_new(void);
/* Frees a JIT state (NULL-safe); programs users still hold stay valid. */
void tk_jit_destroy(struct tk_jit *j);
/* The context's JIT state, made on first use (thread-safe: tk_ctx_slot);
 * NULL when out of memory. */
struct tk_jit *tk_jit_of(tk_ctx *ctx);
/* The context's JIT state if an entry point made it, else NULL. */
struct tk_jit *tk_jit_find(const tk_ctx *ctx);
/* The driver, started on first use on j->device; failures stay (a missing
 * driver does not appear later) and are re-reported with the same message. */
tk_status tk_jit_cuda(struct tk_jit *j, tk_cuda **cu, tk_diag *dg);
/* ptxas, probed once: TK_ERR_PTXAS with a message when none is found. */
tk_status tk_jit_ptxas(struct tk_jit *j, const tk_ptxas **out, tk_diag *dg);

/* A finished, error-free kernel (and, when arch is not NULL, a valid target);
 * otherwise reports "<what>: ..." on ctx. */
tk_status tk_jit_check_kernel(tk_ctx *ctx, const char *what, const tk_kernel *k, const char *arch);

/* Monotonic milliseconds, for statistics and timing. */
double tk_now_ms(void);

#endif
