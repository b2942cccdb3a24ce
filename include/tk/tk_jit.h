/* TileKittens JIT: lower a finished kernel to PTX through LLVM NVPTX, turn PTX
 * into a cubin (the CUDA driver's JIT linker, or ptxas ahead of time), cache
 * it in memory and on disk, load and launch it.
 *
 * libcuda.so.1 is loaded with dlopen on first use; on a machine without a
 * driver every GPU entry point returns TK_ERR_NO_DRIVER with a message and
 * the rest of the library works. A context set to the interpreter backend
 * (tk_ctx_set_backend) runs the same entry points on the CPU instead. */
#ifndef TK_TK_JIT_H
#define TK_TK_JIT_H

#include <stdbool.h>

#include "tk/tk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Lowering ----------------------------------------------------------- */
/* PTX for `arch` ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"). *ptx is
 * NUL-terminated, freed with tk_free. */
TK_API tk_status tk_emit_ptx(tk_ctx *ctx, const tk_kernel *k, const char *arch, char **ptx);
/* Textual LLVM IR after lowering and optimization (for debugging). */
TK_API tk_status tk_emit_llvm(tk_ctx *ctx, const tk_kernel *k, const char *arch, char **ir);

/* ---- Targets -------------------------------------------------------------- */
/* What a target can do: kernels pick instructions and block shapes by these
 * capabilities, not by the arch string. */
typedef struct tk_target_caps {
    const char *arch;          /* "sm_80", ... (static storage)                 */
    const char *llvm_cpu;      /* LLVM CPU name                                  */
    const char *llvm_features; /* LLVM features: the PTX ISA version emitted     */
    int sm;                    /* 80, 86, 89, 90                                 */
    bool mma_sync;             /* mma.sync m16n8k16 (bf16 / f16)                 */
    bool ldmatrix;             /* ldmatrix.x4 (.trans)                            */
    bool cp_async;             /* cp.async 16-byte copies, commit/wait groups     */
    bool stmatrix;             /* stmatrix.x4 (sm_90+)                            */
    bool tma;                  /* the tensor copy engine (sm_90+)                 */
    bool wgmma;                /* wgmma.mma_async (sm_90a)                        */
    bool setmaxnreg;           /* setmaxnreg (sm_90a): producer warpgroups       */
    size_t smem_per_block;     /* dynamic shared memory per block, opt-in maximum */
} tk_target_caps;
/* The capabilities of `arch`. TK_ERR_INVALID_ARG for a NULL arch or out, or
 * a string that is no arch name ("bogus"), TK_ERR_UNSUPPORTED (the message lists the known archs) for an arch the
 * lowering does not know. ctx may be NULL: then only the status reports. */
TK_API tk_status tk_target_caps_get(tk_ctx *ctx, const char *arch, tk_target_caps *out);

/* ---- Device -------------------------------------------------------------- */
/* Where a context's programs run (tk_ctx_set_backend). */
typedef enum tk_backend { TK_BACKEND_GPU = 0, TK_BACKEND_INTERP = 1 } tk_backend;
/* Where this context's programs run.
 * TK_BACKEND_GPU (the default): device 0 (or tk_gpu_set_device's), through
 * the CUDA driver.
 * TK_BACKEND_INTERP: the CPU interpreter (tk_interp_run); no driver needed.
 * tk_gpu_alloc returns host memory aligned to 256 bytes (tk_gpu_free takes
 * only this context's blocks; tk_ctx_destroy frees those left), which
 * tk_gpu_upload, tk_gpu_download and tk_gpu_memset copy and fill;
 * tk_gpu_init and tk_gpu_sync return TK_OK. tk_compile makes a program that
 * keeps its own copy of the kernel instead of a module (no LLVM, no PTX,
 * neither memory nor disk cache: tk_cache_stats stays zero, unless
 * tk_cache_set_precompile fills the disk cache for arch). tk_launch
 * checks the arguments and the grid as for the GPU, then interprets the
 * kernel before it returns (the stream is ignored), with the context's
 * interpreter options (tk_interp_set_options: race_check is on unless
 * TK_RACE_CHECK=0); a failed run is its status (TK_ERR_RUNTIME for an
 * invalid access or a race) with a message naming the kernel. Launches may
 * run on several threads at once, as on the GPU.
 * `arch` and `sms` are the GPU the ready-made entry points (tk/tk_run.h)
 * plan for: their kernel choices, block shapes, shared-memory limits and
 * splits, and what tk_gpu_arch and tk_gpu_sm_count answer. NULL and 0 mean
 * "sm_90a" and 132 (an H100); arch may be any arch tk_target_caps_get
 * knows, sms 0 .. 4096. Every kernel runs whatever the arch (the
 * interpreter runs the IR, which is the same for every target); tk_compile
 * refuses one whose shared memory exceeds arch's limit (TK_ERR_UNSUPPORTED,
 * as that GPU would), and tk_program_resident_blocks is an estimate from
 * the kernel's threads and shared memory on arch, times sms. arch and sms
 * are checked for either backend and used by TK_BACKEND_INTERP only.
 * Set the backend before the context compiles a program or allocates
 * memory: afterwards, and for a backend outside the enum, an unknown arch
 * or sms outside 0 .. 4096, TK_ERR_INVALID_ARG with a message. */
TK_API tk_status tk_ctx_set_backend(tk_ctx *ctx, tk_backend b, const char *arch, int sms);
/* Which GPU this context runs on: `ordinal` as the CUDA driver numbers its
 * devices (after CUDA_VISIBLE_DEVICES), 0 unless set. Call it before anything
 * starts the driver on this context: tk_gpu_init, any other tk_gpu_* call,
 * tk_compile or a tk/tk_run.h entry point; the device is then fixed for the
 * context's life. Other contexts may choose other GPUs, in one process or
 * one per process (data parallelism: one process per GPU, each context on
 * its own). The context uses that device's primary context, the one the
 * CUDA runtime (and so NCCL, cuBLAS) uses for the same device: after
 * tk_gpu_init it is current on the calling thread, as every tk_gpu_* call
 * leaves it.
 * TK_ERR_INVALID_ARG with a message for a negative ordinal, or once the
 * context has started (or tried to start) the driver. An ordinal the driver
 * does not have is known only when the driver starts: then that call
 * (tk_gpu_init, ...) fails with TK_ERR_INVALID_ARG, saying how many devices
 * there are, and so does every later GPU call on this context (use a new
 * context). On the interpreter backend, which stands for one GPU, 0 is
 * accepted (it changes nothing) and any other ordinal is TK_ERR_INVALID_ARG;
 * likewise tk_ctx_set_backend to the interpreter refuses a context given
 * another device. */
TK_API tk_status tk_gpu_set_device(tk_ctx *ctx, int ordinal);
/* TK_OK when a CUDA driver and the context's device are usable (device 0
 * unless tk_gpu_set_device chose another; its primary context). */
TK_API tk_status tk_gpu_init(tk_ctx *ctx);
/* The device's target, e.g. "sm_90a" for an H100/H200. */
TK_API tk_status tk_gpu_arch(tk_ctx *ctx, char *buf, size_t n);
/* The device's streaming multiprocessors (132 on an H200). */
TK_API tk_status tk_gpu_sm_count(tk_ctx *ctx, int *n);
TK_API tk_status tk_gpu_alloc(tk_ctx *ctx, size_t bytes, void **dptr);
TK_API tk_status tk_gpu_free(tk_ctx *ctx, void *dptr);
TK_API tk_status tk_gpu_upload(tk_ctx *ctx, void *dst, const void *src, size_t bytes);
TK_API tk_status tk_gpu_download(tk_ctx *ctx, void *dst, const void *src, size_t bytes);
TK_API tk_status tk_gpu_memset(tk_ctx *ctx, void *dst, uint8_t byte, size_t bytes);
TK_API tk_status tk_gpu_sync(tk_ctx *ctx);

/* ---- Compile, cache, launch ---------------------------------------------- */
typedef struct tk_program tk_program;

/* Compiles `k` for the current device, through the memory and disk caches.
 * The program keeps what it needs of `k` (signature, grid); k may be
 * destroyed afterwards. Release with tk_program_release. */
TK_API tk_status tk_compile(tk_ctx *ctx, const tk_kernel *k, tk_program **out);
TK_API void tk_program_release(tk_program *p);
/* Whether the last tk_compile of this program was a memory hit, a disk hit
 * or a fresh compile. */
typedef enum tk_origin { TK_FROM_COMPILE = 0, TK_FROM_DISK = 1, TK_FROM_MEMORY = 2 } tk_origin;
TK_API tk_origin tk_program_origin(const tk_program *p);

/* What preparing a ready-made kernel took (tk/tk_run.h's *_prepare): where
 * it came from, how long, and for which arch. For an entry point of several
 * kernels (every one readies them in one call, compiling them side by side
 * when cold): the least cached one's origin and the whole call's time.
 * Not to be read when the call fails. */
typedef struct tk_prepare_info {
    tk_origin origin;
    double ms;
    char arch[16];
} tk_prepare_info;

/* Blocks of p the GPU runs at once: on each SM as many as registers,
 * threads and shared memory allow (the driver's count when p was loaded),
 * times the SMs; 0 for NULL. A persistent kernel's grid. */
TK_API int tk_program_resident_blocks(const tk_program *p);

/* Launches over the grid the kernel's grid expressions give for `args`.
 * Arguments are checked against the signature (count, kind, dtype, rank,
 * NULL pointers, a byte extent that 64-bit addresses hold). The grid must
 * fit the device (x <= 2^31-1, y and z <= 65535) and its i32 arithmetic
 * must not wrap (a size converted to i32 must fit): else TK_ERR_LAUNCH
 * with a message, never a silent success. A grid dimension of 0 (a size
 * of 0) is an empty problem: nothing runs, TK_OK.
 * stream: a CUstream, NULL for the default stream. */
TK_API tk_status tk_launch(tk_program *p, int nargs, const tk_arg *args, void *stream);

typedef struct tk_cache_stats {
    uint64_t memory_hits;
    uint64_t disk_hits;
    uint64_t misses;        /* compiled from scratch                     */
    uint64_t rejected;      /* corrupt/truncated/foreign entries skipped  */
    uint64_t evicted;       /* entries removed to honour the size bound   */
    double llvm_ms;         /* time in lowering + LLVM codegen            */
    double ptx_to_cubin_ms; /* time in the driver JIT / ptxas             */
    /* "" while the disk cache works; else "<dir>: <reason>", the first
     * problem met with the directory (it cannot be created, is no
     * directory, is read-only so new kernels are not stored, or an entry
     * could not be written). Logged once through tk_ctx_set_log's hook;
     * kernels still compile and run, only without the disk's help. */
    char disk_error[320];
} tk_cache_stats;
TK_API void tk_cache_stats_get(const tk_ctx *ctx, tk_cache_stats *out);

/* Disk cache directory: TK_CACHE_DIR, else $XDG_CACHE_HOME/tilekittens,
 * else ~/.cache/tilekittens. Overridable per context; NULL disables disk.
 * The directory is checked on first use (created, a directory, writable);
 * a read-only one still serves hits (a shipped cache, docs/DESIGN.md), an
 * unusable one is skipped; either is reported once (disk_error above). */
TK_API tk_status tk_cache_set_dir(tk_ctx *ctx, const char *dir);
/* The directory in use (NULL: disk cache off); the string stays valid until
 * the next tk_cache_set_dir on this context or tk_ctx_destroy. */
TK_API const char *tk_cache_dir(const tk_ctx *ctx);
/* Kernel packs: read-only directories of cubins compiled ahead of time, such
 * as the ones tk-aot (tk_precompile) fills: each gets a manifest, "tk-pack",
 * naming the ptxas builds that made its entries. On a miss in the memory and
 * disk caches, tk_compile looks in each pack in the order added, under those
 * compilers' keys, so a GPU machine uses a pack with no ptxas of its own:
 * the driver loads any cubin for its arch that it is not too old for (one
 * it refuses is a miss; nothing in a pack is written or deleted). Also
 * added, at the first lookup: each directory of TK_KERNEL_PACKS
 * (':'-separated), then the pack the library's install put in
 * <datadir>/tilekittens/kernels (CMake TK_INSTALL_KERNELS; found beside
 * the shared library; TK_INSTALLED_PACK names another, empty: none); one
 * of those that cannot be used is reported once through tk_ctx_set_log's
 * hook and skipped. The entries match only the library build that made
 * them (the keys hold the code generator's digest). A directory added
 * before (by any name) is not added again. TK_ERR_CACHE naming the reason
 * for a directory that is missing or has no readable manifest, or past 8
 * packs. */
TK_API tk_status tk_cache_add_pack(tk_ctx *ctx, const char *dir);
/* The directory of kernel pack i (from 0, in lookup order, the default ones
 * included), valid until tk_ctx_destroy; NULL past the last (or a NULL ctx). */
TK_API const char *tk_cache_pack(tk_ctx *ctx, int i);
/* Upper bound of the disk cache in bytes (default 1 GiB); older entries
 * (least recently used) are evicted past it. */
TK_API tk_status tk_cache_set_limit(tk_ctx *ctx, uint64_t bytes);

/* Ahead of time: compiles each kernel for `arch` with ptxas (no GPU needed)
 * into the context's disk cache; kernels already there are disk hits. The
 * kernels compile in parallel (a thread each, up to the cores, at most 16).
 * Misuse (a NULL or unfinished kernel, no disk cache, no ptxas) fails before
 * any work; otherwise every kernel is attempted, and a failure names each
 * kernel that failed ("k of n kernels failed: kernel i 'name': why; ...")
 * with the first failure's status. Entries are keyed as tk_compile looks
 * them up on a GPU machine with the same ptxas (jit/build.c). */
TK_API tk_status tk_precompile(tk_ctx *ctx, const tk_kernel *const *ks, int n, const char *arch);
/* Ahead of time through a whole program: on the interpreter backend, with
 * on != 0 every tk_compile (so every ready-made entry point's first call or
 * prepare) also compiles its kernel for the backend's arch with ptxas into
 * this context's disk cache, as tk_precompile does (in tk_cache_stats:
 * misses, llvm_ms, ptx_to_cubin_ms, disk hits for kernels already there).
 * Running a program's start-up once on a machine without a GPU, with the
 * backend's arch and sms those of the target GPU and the run's own sizes,
 * so fills a directory that a GPU machine then loads with zero compiles,
 * provided it runs the same library build (the keys hold LLVM's version
 * and the code generator's digest) and finds the same ptxas (TK_PTXAS,
 * PATH or /usr/local/cuda/bin; docs/DESIGN.md, "Shipping a kernel cache").
 * A kernel that fails to precompile fails its tk_compile, with a message
 * saying so. TK_ERR_STATE turning it on in a GPU context; TK_ERR_CACHE
 * without a usable disk cache; ptxas's absence is tk_precompile's error.
 * on == 0 turns it off. */
TK_API tk_status tk_cache_set_precompile(tk_ctx *ctx, int on);

#ifdef __cplusplus
}
#endif
#endif
