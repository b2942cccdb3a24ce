/* tk_launch: check arguments against the program's signature, evaluate the
 * grid, pack parameters per ir/abi.h and launch; or, for a program of the
 * interpreter backend, interpret it (jit/host.c) after the same checks,
 * without tensor maps or the driver. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/abi.h"
#include "jit/host.h"
#include "jit/jit.h"
#include "jit/program.h"
#include "ops/grid_eval.h"

/* a rank-4 tensor: ptr, 4 dims, 4 strides; then the tensor maps and their flags */
#define TK_MAX_SLOTS (TK_MAX_PARAMS * 9 + TK_TMA_MAX_MAPS + 1)

tk_status tk_program_check_args(const tk_program *p, int nargs, const tk_arg *args, tk_diag *dg) {
    return tk_sig_check(&p->sig, p->name, nargs, args, "tk_launch", dg);
}

tk_status tk_program_grid(const tk_program *p, const tk_arg *args, int64_t grid[3], tk_diag *dg) {
    static const int64_t max[3] = {INT32_MAX, 65535, 65535};
    tk_status s = tk_grid_eval(&p->grid, args, grid, "tk_launch", dg);
    for (int d = 0; s == TK_OK && d < 3; d++)
        if (grid[d] < 0 || grid[d] > max[d])
            s = tk_diag_fail(dg, TK_ERR_LAUNCH,
                             "tk_launch: kernel '%s' grid[%d] = %lld is outside 0..%lld", p->name,
                             d, (long long)grid[d], (long long)max[d]);
    if (s == TK_OK && p->plan.cluster > 1 && grid[0] % p->plan.cluster)
        s = tk_diag_fail(dg, TK_ERR_LAUNCH,
                         "tk_launch: kernel '%s' runs in clusters of %d blocks; its grid's x, "
                         "%lld, is not a multiple of that",
                         p->name, p->plan.cluster, (long long)grid[0]);
    return s;
}

/* One parameter slot: every ABI scalar fits 8 bytes. */
typedef union {
    uint64_t ptr;
    int64_t i64;
    int32_t i32;
    float f32;
} tk_slot;

/* Parameter values in ABI order (ir/abi.h) and cuLaunchKernel's pointers;
 * returns the count. */
static int tk_pack(const tk_program *p, const tk_arg *args, tk_slot *slot, void **ptrs) {
    int n = 0;
    for (int i = 0; i < p->sig.nparams; i++) {
        const tk_arg *a = &args[i];
        if (p->sig.params[i].kind == TK_KIND_GVIEW) {
            slot[n++].ptr = (uint64_t)(uintptr_t)a->data;
            for (int d = 0; d < a->rank; d++) slot[n++].i64 = a->dims[d];
            for (int d = 0; d < a->rank; d++) slot[n++].i64 = a->strides[d];
        } else if (p->sig.params[i].dtype == TK_F32) {
            slot[n++].f32 = (float)a->scalar.f;
        } else if (p->sig.params[i].dtype == TK_I64) {
            slot[n++].i64 = a->scalar.i;
        } else { /* i32, bool */
            slot[n++].i32 =
                p->sig.params[i].dtype == TK_BOOL ? a->scalar.i != 0 : (int32_t)a->scalar.i;
        }
    }
    for (int j = 0; j < n; j++) ptrs[j] = &slot[j];
    return n;
}

/* Map m of tensor argument a, as the copy engine needs it (innermost
 * dimension first, strides in bytes). False when the engine cannot address
 * the tensor (pointer or a row pitch not a multiple of 16 bytes, a strided
 * last dimension, sizes past its limits): the kernel then copies with
 * cp.async, or stores with the threads' copy.
 * Also false for a map the kernel stores through (`store`: it writes the
 * tensor, jit/plan.c) when the rows end inside a 16-byte chunk (last
 * dimension D, D·size not a multiple of 16). The engine clips a store in
 * whole 16-byte chunks of a row, not per element as it clips loads: a box
 * crossing D also writes the rest of the chunk, past the tensor (on an
 * H100, tk_cross_entropy's dX at bf16 V 50257 and a row pitch of 50304 had
 * its pitch's gaps written; a tensor's last row, or a rank-1 tensor, is
 * written past its end). The threads' copy masks per element. Every dense
 * tensor of rank 2 or more that the engine can address has D·size a
 * multiple of 16 (its pitch is D), so only padded pitches and rank-1
 * tensors lose the engine. */
static bool tk_map_encode(const tk_cuda *cu, const tk_tma_map *m, const tk_arg *a, bool store,
                          CUtensorMap *map) {
    int r = m->rank;
    int64_t esz = (int64_t)tk_dtype_size(m->dtype);
    cuuint64_t dim[4], stride[3];
    cuuint32_t box[4], estride[4];
    if ((uintptr_t)a->data % 16 || a->strides[r - 1] != 1) return false;
    if (store && a->dims[r - 1] * esz % 16) return false;
    for (int d = 0; d < r; d++) {
        int64_t n = a->dims[r - 1 - d], st = a->strides[r - 1 - d];
        if (n < 1 || n > ((int64_t)1 << 32)) return false;
        if (d && (st <= 0 || st > ((int64_t)1 << 40) / esz || st * esz % 16)) return false;
        dim[d] = (cuuint64_t)n;
        if (d) stride[d - 1] = (cuuint64_t)(st * esz);
        box[d] = (cuuint32_t)(d == 0 ? m->box_cols : d == 1 ? m->box_rows : 1);
        estride[d] = 1;
    }
    CUtensorMapDataType dt = m->dtype == TK_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                             : m->dtype == TK_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    CUtensorMapSwizzle sw = m->swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                            : m->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                               : CU_TENSOR_MAP_SWIZZLE_32B;
    return cu->cuTensorMapEncodeTiled(map, dt, (cuuint32_t)r, a->data, dim, stride, box, estride,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

_Static_assert(sizeof(CUtensorMap) == sizeof(((tk_map_memo *)0)->enc), "a memo holds one map");
_Static_assert(TK_TMA_MAX_MAPS <= 256, "a memo names its map in a byte");

/* Whether memo e is map i encoded from argument a (rank r). */
static bool tk_memo_hit(const tk_map_memo *e, int i, const tk_arg *a, int r) {
    if (!e->valid || e->map != i || e->data != a->data) return false;
    for (int d = 0; d < r; d++)
        if (e->dims[d] != a->dims[d] || e->strides[d] != a->strides[d]) return false;
    return true;
}

/* The memo's set for map i of a tensor at data: Fibonacci hashing (the
 * product's top bits) of the pointer above the 256-byte alignment
 * allocations have, and the map's number. Shapes are compared, not
 * hashed: one tensor rarely comes in several shapes. */
static int tk_memo_set(int i, const void *data) {
    uint64_t h = (((uint64_t)(uintptr_t)data >> 8) + (uint64_t)i * 0x51) * 0x9e3779b97f4a7c15ull;
    return (int)(h >> (64 - TK_MAP_SET_BITS));
}

/* Map i of p for argument a into *map; whether the engine can address it.
 * Encoded once per (map, pointer, dims, strides) while the memo holds it
 * (TK_MAP_SETS x TK_MAP_WAYS entries, round robin within a set): a call of
 * cuTensorMapEncodeTiled costs about a microsecond, and a trainer launches
 * each GEMM on a dozen layers' tensors in turn. Caller holds maps_mu. */
static bool tk_map_get(tk_program *p, int i, const tk_arg *a, CUtensorMap *map) {
    const tk_tma_map *m = &p->plan.maps[i];
    int set = tk_memo_set(i, a->data);
    tk_map_memo *ways = &p->map_memo[set * TK_MAP_WAYS];
    for (int w = 0; w < TK_MAP_WAYS; w++)
        if (tk_memo_hit(&ways[w], i, a, m->rank)) {
            memcpy(map, ways[w].enc, sizeof ways[w].enc);
            return ways[w].ok;
        }
    tk_map_memo *e = &ways[p->map_victim[set]];
    p->map_victim[set] = (uint8_t)((p->map_victim[set] + 1) % TK_MAP_WAYS);
    bool store = p->plan.written >> m->param & 1;   /* a load's tensor is never written */
    e->ok = tk_map_encode(p->cu, m, a, store, map); /* *map: zeroed by the caller */
    e->valid = true;
    e->map = (uint8_t)i;
    e->data = a->data;
    memcpy(e->dims, a->dims, (size_t)m->rank * sizeof *e->dims);
    memcpy(e->strides, a->strides, (size_t)m->rank * sizeof *e->strides);
    memcpy(e->enc, map, sizeof e->enc);
    return e->ok;
}

/* The program's tensor maps for these arguments, appended to the packed
 * parameters with the flags that say which were encoded (ops/nv/tma.c
 * reads bit i before issuing through map i). */
static int tk_pack_maps(tk_program *p, const tk_arg *args, CUtensorMap *maps, uint32_t *flags,
                        void **ptrs, int n) {
    if (!p->plan.nmaps) return n;
    *flags = 0;
    pthread_mutex_lock(&p->maps_mu);
    for (int i = 0; i < p->plan.nmaps; i++) {
        const tk_tma_map *m = &p->plan.maps[i];
        memset(&maps[i], 0, sizeof maps[i]);
        if (!p->tma_off && tk_map_get(p, i, &args[m->param], &maps[i])) *flags |= 1u << i;
        ptrs[n++] = &maps[i];
    }
    pthread_mutex_unlock(&p->maps_mu);
    ptrs[n++] = flags;
    return n;
}

/* The launch itself. A kernel that waits on the grids before it
 * (tk_grid_wait) may start before they end: programmatic stream
 * serialization, which only such a kernel may be given. */
static tk_status tk_launch_grid(tk_program *p, const int64_t g[3], CUstream stream, void **ptrs,
                                tk_diag *dg) {
    const tk_cuda *cu = p->cu;
    if (!p->plan.griddep)
        return tk_cuda_check(cu,
                             cu->cuLaunchKernel(p->fn, (unsigned)g[0], (unsigned)g[1],
                                                (unsigned)g[2], (unsigned)p->plan.threads, 1, 1,
                                                (unsigned)p->plan.smem, stream, ptrs, NULL),
                             "cuLaunchKernel", dg);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = (unsigned)g[0], cfg.gridDimY = (unsigned)g[1], cfg.gridDimZ = (unsigned)g[2];
    cfg.blockDimX = (unsigned)p->plan.threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = (unsigned)p->plan.smem;
    cfg.hStream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return tk_cuda_check(cu, cu->cuLaunchKernelEx(&cfg, p->fn, ptrs, NULL), "cuLaunchKernelEx", dg);
}

tk_status tk_launch(tk_program *p, int nargs, const tk_arg *args, void *stream) {
    tk_diag dg = {0};
    int64_t g[3];
    if (!p) return TK_ERR_INVALID_ARG;
    tk_status s = tk_program_check_args(p, nargs, args, &dg);
    if (s == TK_OK) s = tk_program_grid(p, args, g, &dg);
    if (s == TK_OK && !p->fn && !p->interp)
        s = tk_diag_fail(&dg, TK_ERR_STATE, "tk_launch: program '%s' has no loaded module",
                         p->name);
    if (s != TK_OK) return tk_ctx_report(p->ctx, "", &dg);
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) return TK_OK; /* an empty problem: nothing to run */
    if (p->interp) return tk_host_launch(p, nargs, args);
    tk_slot slot[TK_MAX_SLOTS];
    void *ptrs[TK_MAX_SLOTS];
    CUtensorMap maps[TK_TMA_MAX_MAPS];
    uint32_t flags;
    tk_pack_maps(p, args, maps, &flags, ptrs, tk_pack(p, args, slot, ptrs));
    s = tk_cuda_enter(p->cu, &dg);
    if (s == TK_OK) s = tk_launch_grid(p, g, (CUstream)stream, ptrs, &dg);
    return s == TK_OK ? TK_OK : tk_ctx_report(p->ctx, "tk_launch: ", &dg);
}
