/* A compiled kernel: the loaded module and function, plus what tk_launch
 * needs of the kernel (signature, grid code, and its plan: block size,
 * shared memory, tensor maps), so the kernel itself may be destroyed after
 * tk_compile. On the interpreter backend (jit/host.h) the program holds a
 * copy of the kernel instead of a module. */
#ifndef TK_JIT_PROGRAM_H
#define TK_JIT_PROGRAM_H

#include <pthread.h>
#include <stdatomic.h>

#include "ir/ir.h"
#include "jit/cache.h"
#include "jit/cuda.h"
#include "ir/grid.h"
#include "ir/sig.h"
#include "ops/nv/plan.h"

/* One encoded tensor map: map `map` of the plan for the tensor at data with
 * these dims and strides. A program keeps TK_MAP_SETS x TK_MAP_WAYS of them
 * (jit/launch.c): a kernel launched on many tensors in turn (a trainer's
 * GEMM, layer after layer) encodes each once, not on every launch. */
#define TK_MAP_SET_BITS 5
#define TK_MAP_SETS     (1 << TK_MAP_SET_BITS)
#define TK_MAP_WAYS     4
typedef struct tk_map_memo {
    bool valid, ok; /* ok: the engine can address the tensor          */
    uint8_t map;    /* which of the plan's maps                        */
    const void *data;
    int64_t dims[4], strides[4];
    unsigned char enc[128]; /* a CUtensorMap (copied out to an aligned one) */
} tk_map_memo;

struct tk_program {
    atomic_int refs;   /* users + the memory cache                       */
    atomic_int origin; /* tk_origin of the latest tk_compile             */
    tk_ctx *ctx;       /* where launch errors are reported (not owned)   */
    tk_cuda *cu;       /* a reference, once a module is loaded           */
    CUmodule mod;
    CUfunction fn;

    /* The interpreter backend's: the kernel tk_launch runs (a copy, owned
     * and destroyed with the program), which then has no module. */
    tk_kernel *interp;

    char *name;       /* kernel (= PTX entry) name                      */
    tk_plan plan;     /* made once (jit/plan.c): the lowering reads it,
                              tk_launch takes threads, smem and maps from it */
    bool tma_off;     /* TK_NO_TMA was set at load: encode no maps      */
    int32_t resident; /* blocks the GPU runs at once: per SM (the driver's count
                         at load) times the SMs */
    tk_sig sig;       /* the kernel's, checked by tk_launch (ir/sig.c)  */
    int32_t nslots;
    tk_grid_prog grid;
    /* The encoded maps: TK_MAP_SETS sets of TK_MAP_WAYS, made with the
     * program when its plan has maps; map_victim: each set's next way to
     * replace. maps_mu guards both: launches may run on many threads. */
    pthread_mutex_t maps_mu;
    tk_map_memo *map_memo;
    uint8_t map_victim[TK_MAP_SETS];
};

/* Signature, grid and plan of a finished kernel compiled for `arch` (NULL
 * or unknown: the lockstep plan); no module yet (tests use such programs to
 * exercise argument checking without a GPU). ctx may be NULL (then launch
 * errors are only returned). */
tk_status tk_program_new(tk_ctx *ctx, const tk_kernel *k, const char *arch, tk_program **out,
                         tk_diag *dg);
/* Loads a cubin into p (context current), finds the entry, raises the
 * dynamic shared memory limit when above the 48 KB default. */
tk_status tk_program_load(tk_program *p, tk_cuda *cu, const void *cubin, tk_diag *dg);
tk_program *tk_program_retain(tk_program *p);
/* Arguments against the signature (tk_sig_check, the interpreter's rule);
 * TK_ERR_LAUNCH with a precise message. */
tk_status tk_program_check_args(const tk_program *p, int nargs, const tk_arg *args, tk_diag *dg);
/* Grid for checked args. */
tk_status tk_program_grid(const tk_program *p, const tk_arg *args, int64_t grid[3], tk_diag *dg);

/* Memory-cache hooks. */
void *tk_program_retain_v(void *p);
void tk_program_release_v(void *p);

#endif
