/* A null CUDA driver: libcuda.so.1 with no GPU behind it.
 *
 * Built as build/null-cuda/libcuda.so.1 and put first on LD_LIBRARY_PATH, it
 * lets the library's whole driver path run on a machine without a GPU:
 * device queries, the cuLink compile, module load, tensor-map encoding and
 * launches. Kernels never run. What it is for:
 *   - CI checks of what the library hands the driver: every launch and
 *     tensor map is checked against the limits the CUDA driver API
 *     documents (grid and block sizes, dynamic shared memory against the
 *     opt-in attribute, cuTensorMapEncodeTiled's alignment, stride and box
 *     rules), a module's entry must exist in the PTX or cubin loaded, and
 *     each launch parameter is read at the size the entry's PTX declares;
 *   - the library's own host cost (memory hits, argument packing, launch
 *     bookkeeping) measured apart from the real driver's (bench_jit).
 * "Device memory" is host memory, so copies work and a test can read back
 * what it wrote. The driver version it reports is 1, a number no real
 * driver has: the cache keys of its fake cubins ("cuLink 1") never match a
 * real driver's entries. TK_NULL_CUDA_CC=80 makes it an sm_80 device (an
 * A100's 108 SMs and 163 KiB of shared memory) instead of an H100.
 *
 * Only the functions the library resolves are provided, through
 * cuGetProcAddress_v2 as a real driver does. TK_NULL_CUDA_REPORT=FILE
 * appends the calls made of each to FILE at unload. */
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NULL_MAGIC   0x4e554c4cu /* "NULL" */
#define CUBIN_MAGIC  "TK-NULL-CUBIN"
#define MAX_ENTRY    128
#define DEFAULT_SMEM (48 * 1024) /* dynamic shared memory without the opt-in */

/* Every driver function provided: its name and implementation. */
#define NULL_CUDA(X)                                                                               \
    X(cuInit, n_init)                                                                              \
    X(cuDriverGetVersion, n_version)                                                               \
    X(cuDeviceGetCount, n_count)                                                                   \
    X(cuDeviceGet, n_get)                                                                          \
    X(cuDeviceGetAttribute, n_attr)                                                                \
    X(cuDevicePrimaryCtxRetain, n_retain)                                                          \
    X(cuDevicePrimaryCtxRelease, n_release)                                                        \
    X(cuCtxSetCurrent, n_set_current)                                                              \
    X(cuCtxSynchronize, n_sync)                                                                    \
    X(cuMemAlloc, n_alloc)                                                                         \
    X(cuMemFree, n_free)                                                                           \
    X(cuMemcpyHtoD, n_htod)                                                                        \
    X(cuMemcpyDtoH, n_dtoh)                                                                        \
    X(cuMemsetD8, n_memset)                                                                        \
    X(cuLinkCreate, n_link_create)                                                                 \
    X(cuLinkAddData, n_link_add)                                                                   \
    X(cuLinkComplete, n_link_complete)                                                             \
    X(cuLinkDestroy, n_link_destroy)                                                               \
    X(cuModuleLoadData, n_load)                                                                    \
    X(cuModuleLoadDataEx, n_load_ex)                                                               \
    X(cuModuleUnload, n_unload)                                                                    \
    X(cuModuleGetFunction, n_get_function)                                                         \
    X(cuFuncSetAttribute, n_func_attr)                                                             \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, n_occupancy)                                    \
    X(cuOccupancyMaxActiveClusters, n_occupancy_clusters)                                          \
    X(cuLaunchKernel, n_launch)                                                                    \
    X(cuLaunchKernelEx, n_launch_ex)                                                               \
    X(cuGetErrorString, n_error_string)                                                            \
    X(cuTensorMapEncodeTiled, n_tensor_map)
#define ENUM(name, impl) F_##name,
enum { NULL_CUDA(ENUM) F_COUNT };

typedef struct {
    int cc, sms, smem_optin, smem_sm;
} null_device;

static null_device dev(void) {
    const char *cc = getenv("TK_NULL_CUDA_CC");
    if (cc && !strcmp(cc, "80")) return (null_device){80, 108, 163 * 1024, 164 * 1024};
    return (null_device){90, 132, 227 * 1024, 228 * 1024};
}

/* A module keeps the text it was loaded from, to answer which entries it has. */
#define MAX_PARAMS 256
struct CUfunc_st {
    uint32_t magic;
    int max_dyn_smem;
    char name[MAX_ENTRY];
    int nparams;                /* from the PTX's .entry; -1: not known (an ELF cubin) */
    uint16_t psize[MAX_PARAMS]; /* each parameter's bytes */
    struct CUfunc_st *next;     /* the module's functions, freed with it */
};
struct CUmod_st {
    uint32_t magic;
    char *image;
    size_t size;
    struct CUfunc_st *fns;
};
struct CUlinkState_st {
    uint32_t magic;
    char *ptx;
};

static struct {
    pthread_mutex_t mu;
    long calls[F_COUNT];     /* per function, rejected calls included */
    long rejected;           /* launches and tensor maps refused */
    unsigned char param_sum; /* of every parameter byte read: keeps the reads */
    long checked;            /* launches whose parameters the PTX declared */
    char why[256];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* For tests and benchmarks (dlsym'ed): the calls made of one driver
 * function (by its cuGetProcAddress name; -1 when not provided), and the
 * launches and tensor maps refused, with the last one's reason. */
__attribute__((visibility("default"))) long tk_null_cuda_calls(const char *name);
__attribute__((visibility("default"))) long tk_null_cuda_rejected(char *why, size_t n);
/* Launches whose every parameter was read at the size its PTX declares (a
 * module from PTX; an ELF cubin's launches are not counted). */
__attribute__((visibility("default"))) long tk_null_cuda_params_checked(void);

static void tick(int f) {
    pthread_mutex_lock(&g.mu);
    g.calls[f]++;
    pthread_mutex_unlock(&g.mu);
}

__attribute__((format(printf, 1, 2))) static CUresult reject(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g.mu);
    g.rejected++;
    vsnprintf(g.why, sizeof g.why, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&g.mu);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- Device and context ------------------------------------------------- */
static CUresult n_init(unsigned flags) {
    tick(F_cuInit);
    return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult n_version(int *v) {
    tick(F_cuDriverGetVersion);
    return *v = 1, CUDA_SUCCESS;
}
static CUresult n_count(int *n) {
    tick(F_cuDeviceGetCount);
    return *n = 1, CUDA_SUCCESS;
}
static CUresult n_get(CUdevice *d, int i) {
    tick(F_cuDeviceGet);
    return i ? CUDA_ERROR_INVALID_DEVICE : (*d = 0, CUDA_SUCCESS);
}

static CUresult n_attr(int *v, CUdevice_attribute a, CUdevice d) {
    tick(F_cuDeviceGetAttribute);
    null_device x = dev();
    if (d) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = x.cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = x.cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = x.smem_optin; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = x.sms; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

static int ctx_token;
static CUresult n_retain(CUcontext *c, CUdevice d) {
    tick(F_cuDevicePrimaryCtxRetain);
    return d ? CUDA_ERROR_INVALID_DEVICE : (*c = (CUcontext)&ctx_token, CUDA_SUCCESS);
}
static CUresult n_release(CUdevice d) {
    tick(F_cuDevicePrimaryCtxRelease);
    return d ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
static CUresult n_set_current(CUcontext c) {
    tick(F_cuCtxSetCurrent);
    return c && c != (CUcontext)&ctx_token ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
static CUresult n_sync(void) {
    tick(F_cuCtxSynchronize);
    return CUDA_SUCCESS;
}

/* ---- Memory: host memory standing in for the device's -------------------- */
static CUresult n_alloc(CUdeviceptr *p, size_t n) {
    tick(F_cuMemAlloc);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}
static CUresult n_free(CUdeviceptr p) {
    tick(F_cuMemFree);
    return free((void *)(uintptr_t)p), CUDA_SUCCESS;
}
static CUresult n_htod(CUdeviceptr d, const void *h, size_t n) {
    tick(F_cuMemcpyHtoD);
    return memcpy((void *)(uintptr_t)d, h, n), CUDA_SUCCESS;
}
static CUresult n_dtoh(void *h, CUdeviceptr d, size_t n) {
    tick(F_cuMemcpyDtoH);
    return memcpy(h, (const void *)(uintptr_t)d, n), CUDA_SUCCESS;
}
static CUresult n_memset(CUdeviceptr d, unsigned char v, size_t n) {
    tick(F_cuMemsetD8);
    return memset((void *)(uintptr_t)d, v, n), CUDA_SUCCESS;
}

/* ---- Compile and load ----------------------------------------------------- */
static CUresult n_link_create(unsigned n, CUjit_option *o, void **v, CUlinkState *st) {
    tick(F_cuLinkCreate);
    (void)n, (void)o, (void)v;
    struct CUlinkState_st *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = NULL_MAGIC;
    *st = s;
    return CUDA_SUCCESS;
}

static CUresult n_link_add(CUlinkState st, CUjitInputType t, void *data, size_t n, const char *name,
                           unsigned no, CUjit_option *o, void **v) {
    tick(F_cuLinkAddData);
    (void)name, (void)no, (void)o, (void)v;
    if (!st || st->magic != NULL_MAGIC || t != CU_JIT_INPUT_PTX || !data || !n || st->ptx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!memchr(data, 0, n) || !strstr(data, ".entry")) return CUDA_ERROR_INVALID_PTX;
    return (st->ptx = strdup(data)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The "cubin": a magic line and the PTX, so a module loaded from it can
 * still say which entries it has. */
static CUresult n_link_complete(CUlinkState st, void **img, size_t *n) {
    tick(F_cuLinkComplete);
    if (!st || st->magic != NULL_MAGIC || !st->ptx) return CUDA_ERROR_INVALID_VALUE;
    size_t len = strlen(CUBIN_MAGIC) + 1 + strlen(st->ptx) + 1;
    char *c = malloc(len);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(c, len, "%s\n%s", CUBIN_MAGIC, st->ptx);
    free(st->ptx);
    st->ptx = c; /* owned by the link state until cuLinkDestroy, as the real one */
    *img = c;
    *n = len;
    return CUDA_SUCCESS;
}

static CUresult n_link_destroy(CUlinkState st) {
    tick(F_cuLinkDestroy);
    if (!st || st->magic != NULL_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    free(st->ptx);
    free(st);
    return CUDA_SUCCESS;
}

/* An image is our cubin, PTX (NUL-terminated), or an ELF cubin from ptxas
 * (a packed or precompiled entry); its size is unknown to the driver, so an
 * ELF is read up to its section headers' end. */
static size_t image_size(const char *img) {
    if (!memcmp(img, "\177ELF", 4)) {
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, img + 0x28, 8);
        memcpy(&shentsize, img + 0x3a, 2);
        memcpy(&shnum, img + 0x3c, 2);
        return (size_t)(shoff + (uint64_t)shentsize * shnum);
    }
    return strlen(img) + 1;
}

static CUresult n_load(CUmodule *m, const void *image) {
    tick(F_cuModuleLoadData);
    if (!image) return CUDA_ERROR_INVALID_VALUE;
    const char *img = image;
    bool ours = !strncmp(img, CUBIN_MAGIC, strlen(CUBIN_MAGIC));
    bool elf = !memcmp(img, "\177ELF", 4);
    if (!ours && !elf && !strstr(img, ".entry")) return CUDA_ERROR_INVALID_IMAGE;
    struct CUmod_st *mod = calloc(1, sizeof *mod);
    size_t n = image_size(img);
    if (!mod || !(mod->image = malloc(n))) return free(mod), CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(mod->image, img, n);
    mod->size = n;
    mod->magic = NULL_MAGIC;
    *m = mod;
    return CUDA_SUCCESS;
}

static CUresult n_load_ex(CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v) {
    tick(F_cuModuleLoadDataEx);
    (void)n, (void)o, (void)v;
    return n_load(m, image);
}

static CUresult n_unload(CUmodule m) {
    tick(F_cuModuleUnload);
    if (!m || m->magic != NULL_MAGIC) return CUDA_ERROR_INVALID_HANDLE;
    for (struct CUfunc_st *f = m->fns, *next; f; f = next) {
        next = f->next;
        f->magic = 0; /* a launch through it now fails, as on a real driver */
        free(f);
    }
    m->magic = 0;
    free(m->image);
    free(m);
    return CUDA_SUCCESS;
}

/* The entry must be in the image: ".entry name(" in PTX, or the name as a
 * NUL-terminated string in an ELF's string tables. */
static bool has_entry(const struct CUmod_st *m, const char *name) {
    char want[MAX_ENTRY + 16];
    if (memcmp(m->image, "\177ELF", 4)) {
        snprintf(want, sizeof want, ".entry %s(", name);
        return strstr(m->image, want) != NULL;
    }
    size_t len = strlen(name) + 1;
    for (const char *p = m->image; (p = memmem(p, m->size - (size_t)(p - m->image), name, len));
         p++)
        if (p > m->image && p[-1] == 0) return true;
    return false;
}

/* Bytes of one PTX parameter declaration (".param .u64 .ptr .align 1 x",
 * ".param .align 64 .b8 x[128]"), 0 if unparsable. */
static int param_bytes(const char *decl, size_t len) {
    static const struct {
        const char *type;
        int bytes;
    } types[] = {{".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8}, {".u32", 4},
                 {".s32", 4}, {".b32", 4}, {".f32", 4}, {".u16", 2}, {".s16", 2},
                 {".b16", 2}, {".f16", 2}, {".u8", 1},  {".s8", 1},  {".b8", 1}};
    int elem = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0] && !elem; t++) {
        size_t n = strlen(types[t].type);
        for (const char *p = decl; p + n <= decl + len; p++)
            if (!memcmp(p, types[t].type, n) && (p[n] == ' ' || p[n] == '\t')) {
                elem = types[t].bytes;
                break;
            }
    }
    const char *br = memchr(decl, '[', len);
    return br ? elem * atoi(br + 1) : elem;
}

/* The parameter sizes of entry `name` in PTX text, into f; nparams -1 when
 * the declaration cannot be read. */
static void ptx_params(const char *ptx, const char *name, struct CUfunc_st *f) {
    char want[MAX_ENTRY + 16];
    snprintf(want, sizeof want, ".entry %s(", name);
    const char *p = strstr(ptx, want), *end = p ? strchr(p, ')') : NULL;
    f->nparams = -1;
    if (!end) return;
    int n = 0;
    for (p += strlen(want); p < end && n < MAX_PARAMS;) {
        const char *decl = strstr(p, ".param");
        if (!decl || decl > end) break;
        const char *comma = memchr(decl, ',', (size_t)(end - decl));
        size_t len = (size_t)((comma ? comma : end) - decl);
        int b = param_bytes(decl, len);
        if (b <= 0 || b > 4096) return;
        f->psize[n++] = (uint16_t)b;
        p = decl + len;
    }
    f->nparams = n;
}

static CUresult n_get_function(CUfunction *f, CUmodule m, const char *name) {
    tick(F_cuModuleGetFunction);
    if (!m || m->magic != NULL_MAGIC || !name) return CUDA_ERROR_INVALID_HANDLE;
    if (strlen(name) >= MAX_ENTRY || !has_entry(m, name)) return CUDA_ERROR_NOT_FOUND;
    for (struct CUfunc_st *fn = m->fns; fn; fn = fn->next)
        if (!strcmp(fn->name, name)) return *f = fn, CUDA_SUCCESS; /* one handle per entry */
    struct CUfunc_st *fn = calloc(1, sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    fn->magic = NULL_MAGIC;
    fn->max_dyn_smem = DEFAULT_SMEM;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    if (memcmp(m->image, "\177ELF", 4))
        ptx_params(m->image, name, fn);
    else
        fn->nparams = -1;
    fn->next = m->fns;
    m->fns = fn;
    *f = fn;
    return CUDA_SUCCESS;
}

static CUresult n_func_attr(CUfunction f, CUfunction_attribute a, int v) {
    tick(F_cuFuncSetAttribute);
    if (!f || f->magic != NULL_MAGIC) return CUDA_ERROR_INVALID_HANDLE;
    if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_SUCCESS;
    if (v < 0 || v > dev().smem_optin)
        return reject("dynamic shared memory %d > the opt-in limit %d", v, dev().smem_optin);
    f->max_dyn_smem = v;
    return CUDA_SUCCESS;
}

static CUresult n_occupancy(int *n, CUfunction f, int threads, size_t smem) {
    tick(F_cuOccupancyMaxActiveBlocksPerMultiprocessor);
    if (!f || f->magic != NULL_MAGIC || threads <= 0 || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    int by_threads = 2048 / threads, by_smem = smem ? (int)(dev().smem_sm / (smem + 1024)) : 32;
    *n = by_threads < by_smem ? by_threads : by_smem;
    return CUDA_SUCCESS;
}

static CUresult n_occupancy_clusters(int *n, CUfunction f, const CUlaunchConfig *c) {
    tick(F_cuOccupancyMaxActiveClusters);
    if (!f || f->magic != NULL_MAGIC || !c) return CUDA_ERROR_INVALID_VALUE;
    *n = dev().sms / 2;
    return CUDA_SUCCESS;
}

/* ---- Launches -------------------------------------------------------------- */
static CUresult check_launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned smem, void **params) {
    if (!f || f->magic != NULL_MAGIC) return CUDA_ERROR_INVALID_HANDLE;
    if (!grid[0] || !grid[1] || !grid[2] || grid[0] > 0x7fffffffu)
        return reject("grid %u x %u x %u (x 1 .. 2^31-1, y and z >= 1)", grid[0], grid[1], grid[2]);
    if (grid[1] > 65535 || grid[2] > 65535)
        return reject("grid y %u or z %u past 65535", grid[1], grid[2]);
    long threads = (long)block[0] * block[1] * block[2];
    if (threads < 1 || threads > 1024 || block[2] > 64)
        return reject("block of %ld threads (z %u)", threads, block[2]);
    if ((int)smem > f->max_dyn_smem)
        return reject("%u bytes of dynamic shared memory, %d allowed", smem, f->max_dyn_smem);
    if (!params && f->nparams) return reject("no kernel parameters");
    /* Each declared parameter's bytes are read, as the driver copies them
     * into the launch: a pointer to smaller storage than the PTX declares
     * is an overread that the sanitizer builds report. */
    unsigned char sum = 0, buf[4096];
    for (int i = 0; i < f->nparams; i++) {
        if (!params[i]) return reject("parameter %d of %s is NULL", i, f->name);
        memcpy(buf, params[i], f->psize[i]);
        for (int b = 0; b < f->psize[i]; b++) sum ^= buf[b];
    }
    pthread_mutex_lock(&g.mu);
    g.param_sum ^= sum;
    g.checked += f->nparams >= 0;
    pthread_mutex_unlock(&g.mu);
    return CUDA_SUCCESS;
}

static CUresult n_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                         void **extra) {
    tick(F_cuLaunchKernel);
    (void)s;
    if (extra) return CUDA_ERROR_INVALID_VALUE;
    return check_launch(f, (unsigned[]){gx, gy, gz}, (unsigned[]){bx, by, bz}, smem, params);
}

static CUresult n_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    tick(F_cuLaunchKernelEx);
    if (!c || extra) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        if (a->id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
        unsigned x = a->value.clusterDim.x, y = a->value.clusterDim.y, z = a->value.clusterDim.z;
        if (!x || !y || !z || x * y * z > 8 || c->gridDimX % x || c->gridDimY % y ||
            c->gridDimZ % z)
            return reject("cluster %u x %u x %u does not divide the grid", x, y, z);
    }
    return check_launch(f, (unsigned[]){c->gridDimX, c->gridDimY, c->gridDimZ},
                        (unsigned[]){c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes,
                        params);
}

/* cuTensorMapEncodeTiled's documented requirements. */
static CUresult n_tensor_map(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                             const cuuint64_t *dims, const cuuint64_t *strides,
                             const cuuint32_t *box, const cuuint32_t *estr,
                             CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                             CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    tick(F_cuTensorMapEncodeTiled);
    (void)l2, (void)oob;
    /* bytes per element, in CUtensorMapDataType order (UINT8 .. TFLOAT32_FTZ) */
    static const int esize[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    if (!map || (uintptr_t)map % 64) return reject("map not 64-byte aligned");
    if ((unsigned)t >= sizeof esize / sizeof esize[0]) return reject("data type %d", (int)t);
    if (rank < 1 || rank > 5 || (il != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3))
        return reject("rank %u", rank);
    if (!addr || (uintptr_t)addr % (il == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
        return reject("global address %p not aligned", addr);
    int es = esize[t];
    for (cuuint32_t i = 0; i < rank; i++) {
        if (!dims[i] || dims[i] > (1ull << 32))
            return reject("dim %u is %llu (1 .. 2^32)", i, (unsigned long long)dims[i]);
        if (!box[i] || box[i] > 256) return reject("box dim %u is %u (1 .. 256)", i, box[i]);
        if (!estr[i] || estr[i] > 8) return reject("element stride %u is %u (1 .. 8)", i, estr[i]);
        if (i + 1 < rank && (strides[i] % 16 || strides[i] >= (1ull << 40)))
            return reject("stride %u is %llu bytes (a multiple of 16, < 2^40)", i,
                          (unsigned long long)strides[i]);
    }
    long inner = (long)box[0] * es;
    if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 16)
        return reject("inner box of %ld bytes is not a multiple of 16", inner);
    long span = sw == CU_TENSOR_MAP_SWIZZLE_32B    ? 32
                : sw == CU_TENSOR_MAP_SWIZZLE_64B  ? 64
                : sw == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                                                   : 0;
    if (span && il == CU_TENSOR_MAP_INTERLEAVE_NONE && inner > span)
        return reject("inner box of %ld bytes wider than the %ld-byte swizzle", inner, span);
    memset(map, 0, sizeof *map);
    memcpy(map, &addr, sizeof addr);
    return CUDA_SUCCESS;
}

static CUresult n_error_string(CUresult r, const char **s) {
    tick(F_cuGetErrorString);
    switch (r) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument (null driver)"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found (null driver)"; break;
    case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed (null driver)"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid (null driver)"; break;
    default: *s = "error (null driver)"; break;
    }
    return CUDA_SUCCESS;
}

/* ---- The table cuGetProcAddress answers from --------------------------------- */
#define FN(name, impl) {#name, (void (*)(void))impl},
static const struct {
    const char *name;
    void (*fn)(void);
} table[] = {NULL_CUDA(FN)};

long tk_null_cuda_calls(const char *name) {
    long n = -1;
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(table[i].name, name)) n = g.calls[i];
    pthread_mutex_unlock(&g.mu);
    return n;
}

long tk_null_cuda_params_checked(void) {
    pthread_mutex_lock(&g.mu);
    long n = g.checked;
    pthread_mutex_unlock(&g.mu);
    return n;
}

long tk_null_cuda_rejected(char *why, size_t n) {
    pthread_mutex_lock(&g.mu);
    long r = g.rejected;
    if (why && n) snprintf(why, n, "%s", g.why);
    pthread_mutex_unlock(&g.mu);
    return r;
}

/* TK_NULL_CUDA_REPORT=FILE: every function's calls and the refusals, one
 * "name count" line each, appended to FILE when the driver is unloaded (the
 * library's last context gone, or the process's end), for scripts that
 * compare runs (scripts/null-driver-steps.sh). */
__attribute__((destructor)) static void report(void) {
    const char *path = getenv("TK_NULL_CUDA_REPORT");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < F_COUNT; i++) fprintf(f, "%s %ld\n", table[i].name, g.calls[i]);
    fprintf(f, "params_checked %ld\n", g.checked);
    fprintf(f, "rejected %ld%s%s\n", g.rejected, g.rejected ? " " : "", g.rejected ? g.why : "");
    pthread_mutex_unlock(&g.mu);
    fclose(f);
}

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *name, void **fn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *q) {
    (void)version, (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) {
            memcpy(fn, &table[i].fn, sizeof *fn); /* as dlsym's callers do */
            if (q) *q = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *fn = NULL;
    if (q) *q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
