/* TileKittens: build tile-level GPU kernels at run time from C.
 *
 * Everything lives in a context (tk_ctx). A kernel (tk_kernel) is built op by
 * op with the tk_* builder calls below; each call returns a value handle
 * (tk_value *) or NULL once the kernel has an error. The first error sticks
 * (later calls are no-ops), so a whole kernel can be written without checking
 * every call; tk_kernel_finish() verifies it and reports that first error.
 *
 * Enum values are part of the ABI: never renumber them. */
#ifndef TK_TK_H
#define TK_TK_H

#include <stddef.h>
#include <stdint.h>

#include "tk/tk_export.h"
#include "tk/tk_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status ------------------------------------------------------------ */
typedef enum tk_status {
    TK_OK = 0,
    TK_ERR_INVALID_ARG = 1, /* a NULL, out-of-range or foreign argument      */
    TK_ERR_TYPE = 2,        /* operand kinds/dtypes do not fit the op        */
    TK_ERR_SHAPE = 3,       /* tile shapes do not fit the op                 */
    TK_ERR_SCOPE = 4,       /* op used at the wrong scope / uniformity       */
    TK_ERR_STATE = 5,       /* builder misuse: unbalanced for/if, finished   */
    TK_ERR_NO_MEMORY = 6,
    TK_ERR_NO_DRIVER = 7, /* libcuda.so.1 could not be loaded              */
    TK_ERR_CUDA = 8,      /* a CUDA driver call failed                     */
    TK_ERR_LLVM = 9,      /* LLVM lowering, verification or codegen failed */
    TK_ERR_PTXAS = 10,    /* ptxas / the driver's JIT rejected the PTX     */
    TK_ERR_CACHE = 11,    /* the disk cache could not be used              */
    TK_ERR_IO = 12,
    TK_ERR_UNSUPPORTED = 13, /* valid, but not supported on this target       */
    TK_ERR_LAUNCH = 14,      /* launch arguments do not match the signature   */
    TK_ERR_RUNTIME = 15      /* the interpreter met an invalid access         */
} tk_status;

TK_API const char *tk_status_name(tk_status s);

/* ---- Context ------------------------------------------------------------ */
typedef struct tk_ctx tk_ctx;

TK_API tk_status tk_ctx_create(tk_ctx **out);
TK_API void tk_ctx_destroy(tk_ctx *ctx);
/* Message of the calling thread's last failed context-level call (never
 * NULL; "" before any): threads sharing a context each read their own, as
 * with errno. The string stays valid until this thread's next call on the
 * context or tk_ctx_destroy. */
TK_API const char *tk_ctx_error(const tk_ctx *ctx);
/* Records a printf-style message as the context's last error and returns
 * `s`: for code written on this API that reports its own failures the way
 * the library does (the ready-made kernels use it). NULL ctx or fmt: only
 * returns s. */
TK_API tk_status tk_ctx_set_error(tk_ctx *ctx, tk_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Warnings: conditions the library works around but a user should know of
 * (today: a disk cache directory it cannot use, so every process
 * recompiles, "disk cache <dir>: <why>"; a kernel pack named in
 * TK_KERNEL_PACKS or installed that cannot be used, "kernel pack <dir>:
 * <why>"). Each is logged once per context, with the status that names
 * its kind, through `fn`; without a hook (the default, or fn NULL) one line
 * "tilekittens: <msg>" goes to stderr. To silence warnings, pass a function
 * that ignores them. Set the hook before the context is shared between
 * threads; it may be called from any thread that uses the context, with no
 * lock of the library held (it may call the library).
 * TK_ERR_INVALID_ARG for a NULL ctx. */
typedef void (*tk_log_fn)(void *user, tk_status s, const char *msg);
TK_API tk_status tk_ctx_set_log(tk_ctx *ctx, tk_log_fn fn, void *user);
/* Frees strings and buffers the library hands out (printer text, PTX, ...). */
TK_API void tk_free(void *p);

/* ---- Types -------------------------------------------------------------- */
typedef enum tk_dtype {
    TK_DT_NONE = 0,
    TK_F32 = 1,
    TK_BF16 = 2,
    TK_F16 = 3,
    TK_I32 = 4,
    TK_I64 = 5,
    TK_BOOL = 6,
    TK_FP8_E4M3 = 7, /* reserved: no op accepts it yet */
    TK_FP8_E5M2 = 8  /* reserved */
} tk_dtype;

typedef enum tk_kind {
    TK_KIND_NONE = 0,
    TK_KIND_SCALAR = 1,
    TK_KIND_TILE = 2, /* register tile, owned by a warp or a warpgroup     */
    TK_KIND_VEC = 3,  /* register vector: one value per row or per column  */
    TK_KIND_SMEM = 4, /* shared-memory tile (optionally `count` stages)    */
    TK_KIND_GVIEW = 5 /* global tensor view, rank 1..4, run-time shape     */
} tk_kind;

typedef enum tk_owner { TK_OWNER_NONE = 0, TK_WARP = 1, TK_WARPGROUP = 2 } tk_owner;

/* Register-tile fragment layout. ROW: the mma A / accumulator layout; COL:
 * the transposed one (what ldmatrix.trans produces), used for B of A*B. */
typedef enum tk_layout { TK_LAYOUT_NONE = 0, TK_ROW = 1, TK_COL = 2 } tk_layout;

/* A vector holds one value per row (PER_ROW, length = tile rows; what a row
 * reduction yields) or one per column (PER_COL, length = tile cols). */
typedef enum tk_axis { TK_AXIS_NONE = 0, TK_PER_ROW = 1, TK_PER_COL = 2 } tk_axis;

/* Shared tile layouts: how rows are placed to avoid bank conflicts. */
typedef enum tk_smem_layout {
    TK_SMEM_PLAIN = 0,   /* row-major, no padding                           */
    TK_SMEM_SWIZZLE = 1, /* 16-byte chunks XOR-swizzled by row (ldmatrix)    */
    TK_SMEM_PAD = 2      /* each row padded by 16 bytes                      */
} tk_smem_layout;

typedef struct tk_type {
    tk_kind kind;
    tk_dtype dtype;
    int32_t rows;        /* TILE/SMEM rows; VEC length                           */
    int32_t cols;        /* TILE/SMEM cols                                       */
    tk_owner owner;      /* TILE, VEC                                      */
    tk_layout layout;    /* TILE; VEC: layout of the tiles it pairs with   */
    tk_axis axis;        /* VEC                                            */
    tk_smem_layout smem; /* SMEM                                           */
    int32_t count;       /* SMEM: number of stages (>= 1)                  */
    int32_t rank;        /* GVIEW                                          */
} tk_type;

TK_API tk_type tk_scalar_type(tk_dtype dt);
TK_API tk_type tk_tile_type(tk_dtype dt, int rows, int cols, tk_owner owner, tk_layout layout);
TK_API tk_type tk_vec_type(tk_dtype dt, int len, tk_axis axis, tk_owner owner, tk_layout layout);
TK_API const char *tk_dtype_name(tk_dtype dt);
TK_API size_t tk_dtype_size(tk_dtype dt);

/* ---- Kernels ------------------------------------------------------------ */
typedef struct tk_kernel tk_kernel;
typedef struct tk_value tk_value;

typedef enum tk_scope {
    TK_SCOPE_NONE = 0,
    TK_SCOPE_THREAD = 1,
    TK_SCOPE_WARP = 2,
    TK_SCOPE_WARPGROUP = 3,
    TK_SCOPE_BLOCK = 4
} tk_scope;

/* A kernel run by blocks of `warps` warps (1..32). */
TK_API tk_status tk_kernel_create(tk_ctx *ctx, const char *name, int warps, tk_kernel **out);
TK_API void tk_kernel_destroy(tk_kernel *k);
TK_API tk_status tk_kernel_status(const tk_kernel *k);
TK_API const char *tk_kernel_error(const tk_kernel *k); /* "" when OK */
/* Verifies the kernel; afterwards it is immutable and can be run/compiled. */
TK_API tk_status tk_kernel_finish(tk_kernel *k);
/* Stable text form; *out is freed with tk_free. */
TK_API tk_status tk_kernel_print(const tk_kernel *k, char **out);
TK_API const char *tk_kernel_name(const tk_kernel *k);
TK_API int tk_kernel_warps(const tk_kernel *k);
/* Bytes of shared memory the kernel's tiles take per block (a launch on
 * sm_90 adds up to 1.2 KiB for kernels whose copies use the copy engine). */
TK_API size_t tk_kernel_smem_bytes(const tk_kernel *k);
/* Occupancy controls, 0 = none (the default). Part of the printed kernel
 * (so of its cache key); the lowering passes them to ptxas as the entry's
 * .maxnreg / .minnctapersm (the nvvm.maxnreg / nvvm.minctasm attributes).
 * maxnreg: at most n registers per thread (16..255); ptxas spills past it.
 * min_blocks: ptxas budgets registers so n blocks fit on an SM (1..32).
 * A bad n, or a finished kernel, is a sticky error (returned too). */
TK_API tk_status tk_kernel_set_maxnreg(tk_kernel *k, int n);
TK_API tk_status tk_kernel_set_min_blocks(tk_kernel *k, int n);
/* Blocks launched in clusters of n along x (1, 2, 4 or 8; 1: none, the
 * default): blocks 0..n-1 form cluster 0, n..2n-1 cluster 1, and so on, so
 * the grid's x must be a multiple of n (tk_launch and tk_interp_run fail
 * otherwise). What a cluster allows is TK_COPY_MULTICAST (below); ids and
 * everything else stay per block. Set before the kernel's first op; part
 * of the printed kernel. A bad n, or a kernel with ops, is a sticky error
 * (returned too). */
TK_API tk_status tk_kernel_set_cluster(tk_kernel *k, int n);

/* Signature. Parameters are numbered in creation order (tensors and scalars
 * share one numbering) and passed to tk_interp_run / tk_launch in that order. */
TK_API tk_value *tk_param_tensor(tk_kernel *k, const char *name, tk_dtype dt, int rank);
TK_API tk_value *tk_param_scalar(tk_kernel *k, const char *name, tk_dtype dt);
/* How the GPU's L2 should treat a tensor parameter's lines (default
 * TK_CACHE_NORMAL). TK_CACHE_STREAM: the kernel reads or writes each
 * element once and nothing reads it again soon (evict first), so the lines
 * of tensors that are read again stay in L2 instead; TK_CACHE_KEEP: read
 * again soon (evict last). On the GPU the hint rides on the param's
 * whole-chunk copies (tk_copy_to_shared / tk_copy_to_global: the 16-byte
 * loads and stores and the copy engine's copies; not cp.async, which ptxas
 * 13.0 miscompiles with a hint, nor the per-element paths at a tile's edge)
 * as an L2 cache policy; results never depend on it. Part of the printed kernel.
 * A bad policy, a value that is not one of k's tensor parameters, or a
 * finished kernel is a sticky error (returned too). */
enum { TK_CACHE_NORMAL = 0, TK_CACHE_STREAM = 1, TK_CACHE_KEEP = 2 };
TK_API tk_status tk_param_set_cache(tk_kernel *k, tk_value *param, int policy);
/* A specialization constant: part of the kernel's identity (printed, hashed
 * into the cache key); an i64 constant inside the kernel. Top level only,
 * like parameters (TK_ERR_STATE inside a for/if). */
TK_API tk_value *tk_spec(tk_kernel *k, const char *name, int64_t value);
/* Grid = (x, y, z) blocks, from values computed from parameters and
 * constants only (the host evaluates them at launch). NULL means 1. A value
 * depending on anything else (ids, loop results, exp/log/...) is rejected
 * here with TK_ERR_SCOPE. Every kernel calls it (tk_kernel_finish fails
 * with TK_ERR_STATE otherwise); tk_set_grid(k, NULL, NULL, NULL) is one block. */
TK_API void tk_set_grid(tk_kernel *k, tk_value *x, tk_value *y, tk_value *z);
/* Names a value for the printer and the error messages (%name instead of
 * %17): a C identifier of at most TK_MAX_VALUE_NAME characters, unique in
 * the kernel, given once (parameters and specs are named at creation).
 * Part of the printed kernel, so of its cache key. A bad name is a sticky
 * error (returned too); NULL v: TK_ERR_INVALID_ARG. */
#define TK_MAX_VALUE_NAME 30
TK_API tk_status tk_value_set_name(tk_value *v, const char *name);

/* ---- Ids and scalars ---------------------------------------------------- */
TK_API tk_value *tk_block_id(tk_kernel *k, int dim); /* i32, dim 0..2 */
TK_API tk_value *tk_warp_id(tk_kernel *k);           /* i32, warp in block */
TK_API tk_value *tk_warpgroup_id(tk_kernel *k);      /* i32, warp_id / 4 */
TK_API tk_value *tk_lane_id(tk_kernel *k);           /* i32, 0..31 (per thread) */
/* The same ids as i64, to meet i64 dims and indices without a tk_cvt
 * (binary scalar ops take one dtype: i32 and i64 never mix implicitly). */
TK_API tk_value *tk_block_id_i64(tk_kernel *k, int dim);
TK_API tk_value *tk_warp_id_i64(tk_kernel *k);
TK_API tk_value *tk_lane_id_i64(tk_kernel *k);
TK_API tk_value *tk_const_i32(tk_kernel *k, int32_t v);
TK_API tk_value *tk_const_i64(tk_kernel *k, int64_t v);
TK_API tk_value *tk_const_f32(tk_kernel *k, float v);
TK_API tk_value *tk_const_bool(tk_kernel *k, int v);
/* Run-time size of dimension `dim` of a global view (i64). */
TK_API tk_value *tk_dim(tk_kernel *k, tk_value *view, int dim);

/* Elementwise. Operands: scalar∘scalar, tile∘tile, vec∘vec, tile∘scalar,
 * vec∘scalar, and tile∘vec (broadcast along the vector's axis); the
 * reversed orders (scalar∘tile, vec∘tile, scalar∘vec) too.
 * Dtype rules (the same on the GPU and in the interpreter):
 *  - scalar∘scalar: one dtype (i32 and i64 do not mix: tk_cvt, or the
 *    *_id_i64 calls); integer tk_div truncates toward zero, like C.
 *  - tile/vec∘tile/vec: identical types.
 *  - tile/vec∘scalar: the scalar is f32 or the tile's dtype. The result
 *    has the TILE's dtype; a 16-bit tile is computed in f32 with the scalar
 *    as given (an f32 scalar is not rounded to bf16 first) and each result
 *    rounded once (RNE) to the tile's dtype. For an f32 result, tk_cvt the
 *    tile to f32 first.
 *  - every float op on a bf16/f16 tile or vector (add ... rsqrt, exp, log,
 *    sin, cos) computes in f32 and rounds each result once to the dtype. */
TK_API tk_value *tk_add(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_sub(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_mul(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_div(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_max(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_min(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_neg(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_abs(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_exp(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_exp2(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_log(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_log2(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_sqrt(tk_kernel *k, tk_value *a);
TK_API tk_value *tk_rsqrt(tk_kernel *k, tk_value *a);
/* sin/cos (radians) of a float scalar, tile or vector, same type out (TK_ERR_TYPE
 * on integers). In f32, then rounded to the dtype; abs error < 1e-7 for |x| <= 1e5. */
TK_API tk_value *tk_sin(tk_kernel *k, tk_value *x);
TK_API tk_value *tk_cos(tk_kernel *k, tk_value *x);
/* tanh, erf and the logistic sigmoid 1/(1+e^-x) of a float scalar, tile or
 * vector (GELU, SiLU), same type out; in f32, then rounded to the dtype.
 * On the GPU: tanh relative error about 2^-11 (tanh.approx); erf abs error
 * < 1.1e-7 (a polynomial); sigmoid within a few ulp (ex2.approx). */
TK_API tk_value *tk_tanh(tk_kernel *k, tk_value *x);
TK_API tk_value *tk_erf(tk_kernel *k, tk_value *x);
TK_API tk_value *tk_sigmoid(tk_kernel *k, tk_value *x);
/* Compares: a < b, a <= b, ... with the operand shapes of tk_add (a
 * tile/vec with a scalar or a broadcast vec); the result has their shape
 * and dtype bool: a bool scalar, or a bool tile/vec (a mask, for
 * tk_select; tk_cvt turns it into 0/1). Floats compare in f32 (a NaN
 * compares unequal to everything); bool scalars only with eq/ne. */
TK_API tk_value *tk_lt(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_le(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_gt(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_ge(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_eq(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_ne(tk_kernel *k, tk_value *a, tk_value *b);
/* cond ? a : b, per element. a and b as for tk_add (a scalar branch is
 * broadcast; f32 with a 16-bit tile is rounded once); cond a bool scalar
 * (uniform over the owner, for tiles) or a bool tile/vec of the result's
 * shape; two scalar branches with a bool tile give a float tile. E.g.
 * leaky ReLU: tk_select(k, tk_gt(k, x, zero), x, tk_mul(k, x, slope)). */
TK_API tk_value *tk_select(tk_kernel *k, tk_value *cond, tk_value *a, tk_value *b);
/* Scalar-only integer and logic ops. */
TK_API tk_value *tk_rem(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_ceil_div(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_and(tk_kernel *k, tk_value *a, tk_value *b);
TK_API tk_value *tk_or(tk_kernel *k, tk_value *a, tk_value *b);
/* dtype conversion of a scalar, tile or vector (a bool tile/vec converts to
 * a float dtype: 1 where true, 0 where false). */
TK_API tk_value *tk_cvt(tk_kernel *k, tk_value *a, tk_dtype to);

/* ---- Tiles --------------------------------------------------------------- */
/* A register tile or vector of `type` with every element = scalar `v`. */
TK_API tk_value *tk_fill(tk_kernel *k, tk_type type, tk_value *v);
TK_API tk_value *tk_zeros(tk_kernel *k, tk_type type);
/* The rows x cols sub-tile of `tile` at (row0, col0), same dtype, owner and
 * layout: offsets and sizes multiples of 16 (rows of a warpgroup tile: of
 * 64). Costs nothing: the registers are renamed, no data moves. */
TK_API tk_value *tk_slice(tk_kernel *k, tk_value *tile, int row0, int col0, int rows, int cols);
/* a and b joined: axis 0 puts b below a (same cols), axis 1 right of a
 * (same rows); same dtype, owner and layout; the result within 256x256.
 * Free like tk_slice. */
TK_API tk_value *tk_concat(tk_kernel *k, int axis, tk_value *a, tk_value *b);
/* `x` with its columns 2j and 2j+1 swapped (the pairs of an interleaved
 * rotation): a ROW-layout tile (warp or warpgroup) or a PER_COL vector of ROW
 * tiles, any dtype; same type out. Both columns of a pair sit in one thread,
 * so it renames registers like tk_slice (no shuffles). */
TK_API tk_value *tk_pair_swap(tk_kernel *k, tk_value *x);
/* An f32 register tile or vector of `type` whose elements hold their own
 * index: a tile's element (i, j) is i (axis TK_PER_ROW) or j (TK_PER_COL); a
 * vector's element i is i (axis: the vector's own). Positions and
 * frequencies computed in the kernel (kernels/rotary.c). */
TK_API tk_value *tk_iota(tk_kernel *k, tk_type type, tk_axis axis);
/* An f32 ROW-layout tile (warp or warpgroup) of x's type whose every column
 * is column `col` of x (0 <= col < x's cols): x[:, col] broadcast along the
 * rows, exactly. Two lane shuffles per 16 rows, off the tensor pipe (the
 * products of Based's feature map, kernels/based_common.c). */
TK_API tk_value *tk_col_bcast(tk_kernel *k, tk_value *x, int col);

typedef enum tk_mma_kind {
    TK_MMA_AB = 0,  /* A row, B col   : C += A * B     */
    TK_MMA_ABT = 1, /* A row, B row   : C += A * B^T   */
    TK_MMA_ATB = 2, /* A col, B col   : C += A^T * B   */
    TK_MMA_ATBT = 3 /* A col, B row   : C += A^T * B^T */
} tk_mma_kind;
/* bf16/f16 inputs, f32 row accumulator. c == NULL: start from zero. */
TK_API tk_value *tk_mma(tk_kernel *k, tk_mma_kind kind, tk_value *a, tk_value *b, tk_value *c);

/* Warpgroup matrix multiply: Hopper's tensor cores fed from shared memory
 * (wgmma, sm_90a only; on other targets a kernel uses tk_mma). Returns
 * acc + A·B (kind TK_MMA_AB), acc + A·Bᵀ (TK_MMA_ABT), or with A stored
 * transposed, acc + Aᵀ·B (TK_MMA_ATB) or acc + Aᵀ·Bᵀ (TK_MMA_ATBT):
 *   acc   f32 ROW tile owned by a warpgroup, 64q x N (N <= 256): one 64-row
 *         block per instruction, q repeats;
 *   a     a bf16/f16 ROW tile owned by the warpgroup, 64q x K (a_row NULL),
 *         or a shared tile of the same dtype with K columns, whose rows
 *         a_row .. a_row + 64q - 1 are A (a_row: a warpgroup-uniform integer,
 *         a multiple of 8, e.g. 64 * warpgroup id); for ATB and ATBT, a
 *         shared tile K x M' (rows of a multiple of 128 bytes) whose columns
 *         a_row .. a_row + 64q - 1 are A's rows (a_row a multiple of 64);
 *   b     a shared tile: K x N for AB and ATB, N x K for ABT and ATBT;
 * K a multiple of 16. Shared operands are SWIZZLE tiles with rows of 32, 64
 * or a multiple of 128 bytes (the layouts the copy engine writes), made by
 * tk_shared (or tk_stage of one) at an offset that is a multiple of their
 * swizzle atom (8 rows): allocate them first.
 * The multiply is asynchronous: the result may feed the acc of further
 * tk_wgmma calls at once, but anything else must read it through
 * tk_wgmma_wait, which returns it once at most `pending` (0..7) of the
 * warpgroup's tk_wgmma calls are still in flight (tk_kernel_finish refuses
 * any other read of it). Shared operands must not
 * be overwritten before that wait. On the interpreter the multiply happens at
 * issue and the wait is a copy. */
TK_API tk_value *tk_wgmma(tk_kernel *k, tk_mma_kind kind, tk_value *acc, tk_value *a, tk_value *b,
                          tk_value *a_row);
TK_API tk_value *tk_wgmma_wait(tk_kernel *k, tk_value *acc, int pending);
/* tk_wgmma_wait, issued after `after` (a tile, vector or scalar in
 * registers) is computed; it returns the same. For a wait that should let
 * other work run beside the multiply: ptxas places a wgmma wait as early as
 * it likes, above independent work written before it (FlashAttention-3's
 * overlapped softmax, docs/PERF_NOTES.md round 31). On sm_90a this form
 * stores the first register of `after` (each thread's first element) to a
 * shared-memory word of the thread's own just before the wait, an order
 * ptxas keeps: pass a value that depends on all the work to keep before the
 * wait (a row sum of the softmax, not one of its tiles, whose first element
 * is done early). The interpreter ignores `after`. */
TK_API tk_value *tk_wgmma_wait_after(tk_kernel *k, tk_value *acc, int pending, tk_value *after);

TK_API tk_value *tk_row_max(tk_kernel *k, tk_value *tile); /* -> PER_ROW vec */
TK_API tk_value *tk_row_sum(tk_kernel *k, tk_value *tile);
TK_API tk_value *tk_col_max(tk_kernel *k, tk_value *tile); /* -> PER_COL vec */
TK_API tk_value *tk_col_sum(tk_kernel *k, tk_value *tile);
/* The max of the elements the executing warp holds: all of a warp's tile
 * or vector; of a warpgroup's tile (or PER_ROW vector) the warp's rows
 * (16 in every 64). An f32 scalar, the same in every lane of the warp, so it may steer
 * an if (e.g. skip a rescale that no row of the warp needs). Such a branch
 * may split a warpgroup: its rows stay each warp's own, but what needs the
 * whole warpgroup (tk_wgmma) must come after the branch closes. */
TK_API tk_value *tk_max_all(tk_kernel *k, tk_value *x);

typedef enum tk_mask_kind {
    TK_MASK_CAUSAL = 0, /* drop (i,j) where b + j > a + i   (a=row0, b=col0) */
    TK_MASK_COLS = 1,   /* drop (i,j) where a + j >= b      (a=col0, b=limit) */
    TK_MASK_ROWS = 2    /* drop (i,j) where a + i >= b      (a=row0, b=limit) */
} tk_mask_kind;
/* Elements dropped by the mask become `fill` (e.g. -INFINITY). a, b: i32/i64
 * scalars, uniform over the owner. */
TK_API tk_value *tk_mask(tk_kernel *k, tk_value *tile, tk_mask_kind kind, tk_value *a, tk_value *b,
                         float fill);

/* ---- Memory -------------------------------------------------------------- */
/* Block-wide shared tile(s); `count` > 1 makes a ring of stages. */
TK_API tk_value *tk_shared(tk_kernel *k, tk_dtype dt, int rows, int cols, tk_smem_layout layout,
                           int count);
/* Stage `idx` (run-time, block-uniform) of a multi-stage shared tile. */
TK_API tk_value *tk_stage(tk_kernel *k, tk_value *smem, tk_value *idx);
/* The part [start, start + len) of a global view along `axis` (torch's
 * narrow): a view whose element i on that axis is element start + i of
 * `view`, of size len there, the other axes unchanged. start and len are
 * i32/i64 scalars, clamped to the view (start to [0, size], len to
 * [0, size - start]), so a narrowed view never reaches outside its parent:
 * a bad offset (a corrupt prefix sum read at run time) makes an empty or
 * shorter view, whose out-of-range elements load `fill` and store nothing,
 * as for any view. It is the way to one sequence of a packed batch. */
TK_API tk_value *tk_narrow(tk_kernel *k, tk_value *view, int axis, tk_value *start, tk_value *len);

/* Index arrays carry their count: each call below is a macro that takes an
 * ARRAY of indices (`tk_value *idx[2]`, or a one-element compound literal;
 * wrap a longer compound literal in parentheses) and passes its length to
 * the `_n` function, which checks it against the memory operand (a tensor of
 * rank r takes r indices, a shared tile 2). A wrong count, or a pointer where
 * the macro needs an array, is a sticky TK_ERR_INVALID_ARG naming the call;
 * code holding indices behind a pointer calls the `_n` function with the
 * count. Index values are i32 or i64 scalars (widened to i64).
 *
 * Register tile/vector loads and stores (scope: the owner).
 * Global: idx has `rank` entries: leading ones index dims, the last two are
 * the element row and column of the tile's top-left corner (a vector: the
 * last one is its first element). Out-of-range elements read `fill` and are
 * not written: this masking covers every index, leading ones included (a
 * leading index past its dimension reads only `fill` and writes nothing),
 * the same on the GPU and in the interpreter. Shared: idx = {row0, col0}
 * inside the shared tile.
 * A scalar type (tk_scalar_type(TK_I32 / TK_I64 / TK_F32), the tensor's
 * dtype) loads one element of a global tensor, idx naming every dim: each
 * thread reads it (a value as uniform as its indices), out of range it is
 * `fill`. Sizes, offsets and page tables a kernel reads at run time. */
TK_API tk_value *tk_load_n(tk_kernel *k, tk_type type, tk_value *src, int nidx,
                           tk_value *const *idx, float fill);
TK_API void tk_store_n(tk_kernel *k, tk_value *dst, int nidx, tk_value *const *idx, tk_value *val);
/* dst[idx...] += val, element by element, atomically (a reduction, REDG,
 * on the GPU): f32 values into an f32 tensor parameter, masked like tk_store.
 * Adds from different warps or blocks to one element all land, in no
 * particular order (so the sum's rounding may differ from run to run); a
 * read of an added element by another warp of the block needs a barrier
 * first, as after any store. */
TK_API void tk_store_add_n(tk_kernel *k, tk_value *dst, int nidx, tk_value *const *idx,
                           tk_value *val);

/* Block-wide copies between global and shared memory (scope: block).
 * async: TK_COPY_SYNC, or TK_COPY_ASYNC (cp.async; fill must be 0), or
 * TK_COPY_TMA: like TK_COPY_ASYNC, but on sm_90+ the tile comes through the
 * copy engine (TMA) when it can (a kernel tensor parameter of rank >= 2, or
 * a tk_narrow of one, for the tiles lying wholly inside the narrowed axes, a
 * SWIZZLE tile of 32, 64, 128 or 128·n-byte rows and at most 256 rows, at a
 * 1024-byte aligned offset, with 1024-byte stages in a ring (offsets follow
 * allocation order: allocate such tiles first); a tensor the kernel does not write,
 * aligned at launch; commits and waits reached by every warp alike), else
 * by cp.async. Either way copies complete with tk_async_commit/wait. On
 * sm_90a a kernel of 8 or more warps (whole warpgroups) whose async copies
 * all use the engine gets a producer warpgroup that issues them while the
 * kernel's warps compute (docs/LOWERING.md, "Warp specialization"); the
 * kernel is written, and interpreted, as if every warp ran every op.
 * TK_COPY_TMA | TK_COPY_MULTICAST, in a kernel of clusters
 * (tk_kernel_set_cluster): a promise that every block of the cluster makes
 * this same copy (the same tensor, coordinates and tile) at this point of
 * its run. Where the producer warpgroup issues it through the engine, each
 * block then fetches a 1/n share of the rows once for all n blocks
 * (multicast), which divides the tile's traffic from L2 by n; elsewhere
 * each block copies the whole tile. tk_interp_run checks the promise and
 * fails the first block that breaks it. */
enum { TK_COPY_SYNC = 0, TK_COPY_ASYNC = 1, TK_COPY_TMA = 2, TK_COPY_MULTICAST = 4 };
TK_API void tk_copy_to_shared_n(tk_kernel *k, tk_value *smem, tk_value *view, int nidx,
                                tk_value *const *idx, float fill, int async);
/* The shared tile to global memory. On sm_90+, when the tile is one the
 * engine can read (as for TK_COPY_TMA above) and the kernel neither reads
 * the tensor nor stores to it from registers, the copy engine stores it:
 * one thread issues the store, the tile may be written again after the
 * next barrier, and the stores land by the kernel's end in no order among
 * themselves: write each element of such a tensor once. */
TK_API void tk_copy_to_global_n(tk_kernel *k, tk_value *view, int nidx, tk_value *const *idx,
                                tk_value *smem);
/* view[idx...] += the f32 shared tile, element by element, atomically: as
 * tk_store_add is to tk_store. Where tk_copy_to_global would use the copy
 * engine, its reduction does the adds (cp.reduce.async.bulk.tensor, in L2:
 * one bulk operation per tile instead of one atomic per element); else each
 * thread adds its chunks' elements. Adds to one element from anywhere all
 * land, in no particular order. */
TK_API void tk_copy_to_global_add_n(tk_kernel *k, tk_value *view, int nidx, tk_value *const *idx,
                                    tk_value *smem);

/* The count the macros pass for something that is not an array of 1..4
 * value handles: the `_n` functions reject it. */
#define TK_IDX_NOT_ARRAY (-1)
#ifndef __cplusplus
#define TK_IDX_COUNT(idx)                                                                          \
    _Generic(&(idx), tk_value * (*)[1] : 1, tk_value *const(*)[1] : 1, tk_value *(*)[2] : 2,       \
             tk_value *const(*)[2] : 2, tk_value *(*)[3] : 3, tk_value *const(*)[3] : 3,           \
             tk_value *(*)[4] : 4, tk_value *const(*)[4] : 4, default                              \
             : TK_IDX_NOT_ARRAY)
#define tk_load(k, type, src, idx, fill)                                                           \
    tk_load_n((k), (type), (src), TK_IDX_COUNT(idx), (idx), (fill))
#define tk_store(k, dst, idx, val)     tk_store_n((k), (dst), TK_IDX_COUNT(idx), (idx), (val))
#define tk_store_add(k, dst, idx, val) tk_store_add_n((k), (dst), TK_IDX_COUNT(idx), (idx), (val))
#define tk_copy_to_shared(k, smem, view, idx, fill, async)                                         \
    tk_copy_to_shared_n((k), (smem), (view), TK_IDX_COUNT(idx), (idx), (fill), (async))
#define tk_copy_to_global(k, view, idx, smem)                                                      \
    tk_copy_to_global_n((k), (view), TK_IDX_COUNT(idx), (idx), (smem))
#define tk_copy_to_global_add(k, view, idx, smem)                                                  \
    tk_copy_to_global_add_n((k), (view), TK_IDX_COUNT(idx), (idx), (smem))
#endif
TK_API void tk_async_commit(tk_kernel *k);
/* Wait until at most `pending` committed groups are in flight. */
TK_API void tk_async_wait(tk_kernel *k, int pending);
TK_API void tk_barrier(tk_kernel *k);

/* ---- Launch order ------------------------------------------------------- */
/* A kernel that calls tk_grid_wait may start before the kernels launched
 * before it in the stream have ended (on sm_90+: programmatic dependent
 * launch; tk_launch asks for it), and each thread that reaches the wait
 * waits there until they have ended and their writes are visible. So what
 * comes before the wait (index arithmetic, zeroing, loads of tensors nobody
 * before it writes) overlaps the previous kernel's end and the launch gap;
 * it must not read what those kernels write, nor write what they read: the
 * interpreter, one kernel at a time, cannot tell. Reach it in every thread
 * that touches such memory. Elsewhere a kernel starts after the one before
 * it has ended and the wait does nothing. */
TK_API void tk_grid_wait(tk_kernel *k);
/* Lets the kernel launched after this one (if it waits with tk_grid_wait)
 * start once every block of this grid has called it or ended: its blocks
 * then take free SMs while this grid's run. Its wait still waits for this
 * grid's end; calling it early costs only the resources the next grid
 * takes. A no-op where tk_grid_wait is one. */
TK_API void tk_grid_release(tk_kernel *k);

/* ---- Control flow ------------------------------------------------------- */
/* for (iv = lo; iv < hi; iv += step) with `n` loop-carried values.
 * Returns iv; carried[i] receives the in-loop handle of init[i]. */
TK_API tk_value *tk_for_begin(tk_kernel *k, tk_value *lo, tk_value *hi, tk_value *step, int n,
                              tk_value *const *init, tk_value **carried);
/* Closes the innermost for; next[i] become carried[i] of the next trip;
 * results[i] receive the values after the last trip. */
TK_API void tk_for_end(tk_kernel *k, int n, tk_value *const *next, tk_value **results);
/* if (cond) { ... } [else { ... }] yielding `n` values. cond: bool scalar,
 * uniform over a warp (e.g. a warp-role test). */
TK_API void tk_if_begin(tk_kernel *k, tk_value *cond);
TK_API void tk_else(tk_kernel *k, int n, tk_value *const *then_yield);
/* n, yield: the else branch's (or, with no tk_else, the then branch's; an
 * if without else yields nothing). Yields are scalars, tiles or vectors: a
 * shared tile or tensor is TK_ERR_TYPE (here and in tk_else). */
TK_API void tk_if_end(tk_kernel *k, int n, tk_value *const *yield, tk_value **results);

/* ---- Arguments and the CPU interpreter ---------------------------------- */
typedef struct tk_arg {
    tk_kind kind; /* TK_KIND_GVIEW or TK_KIND_SCALAR */
    tk_dtype dtype;
    int32_t rank;
    void *data; /* host pointer (interpreter) or device pointer (GPU) */
    int64_t dims[4];
    int64_t strides[4]; /* in elements */
    union {
        int64_t i;
        double f;
    } scalar;
} tk_arg;

/* A dense row-major tensor (strides derived from dims). */
TK_API tk_arg tk_arg_tensor(void *data, tk_dtype dt, int rank, const int64_t *dims);
TK_API tk_arg tk_arg_strided(void *data, tk_dtype dt, int rank, const int64_t *dims,
                             const int64_t *strides);
TK_API tk_arg tk_arg_i32(int32_t v);
TK_API tk_arg tk_arg_i64(int64_t v);
TK_API tk_arg tk_arg_f32(float v);

/* Runs a finished kernel over its whole grid on host buffers, with the
 * context's interpreter options. */
TK_API tk_status tk_interp_run(const tk_kernel *k, int nargs, const tk_arg *args);

/* What tk_interp_run checks besides computing (docs/DESIGN.md, "The
 * interpreter"). A context starts with race_check on, unless the environment
 * says TK_RACE_CHECK=0, and shuffle_seed from TK_INTERP_SHUFFLE (0 if unset). */
typedef struct tk_interp_options {
    /* Nonzero: fail a run (TK_ERR_RUNTIME) at the first access to a shared
     * or global element that another warp wrote, or read before this write,
     * with no barrier between; and at any access to shared memory an async
     * copy has not yet landed in (no tk_async_wait retired it). */
    int race_check;
    /* Nonzero: between block-wide ops (barriers, copies, async waits, and
     * loops/ifs holding them) run the warps one after the other in an order
     * drawn from this seed, instead of in lockstep, so results that depend on
     * the order of warps show. */
    uint64_t shuffle_seed;
} tk_interp_options;

/* Sets / reads ctx's interpreter options. Not concurrently with a
 * tk_interp_run on the same context. */
TK_API tk_status tk_interp_set_options(tk_ctx *ctx, const tk_interp_options *opts);
TK_API tk_status tk_interp_get_options(tk_ctx *ctx, tk_interp_options *opts);
/* Evaluates the grid for these arguments. */
TK_API tk_status tk_kernel_grid(const tk_kernel *k, int nargs, const tk_arg *args, int64_t grid[3]);

/* bf16/f16 helpers for host code (round to nearest even). */
TK_API uint16_t tk_f32_to_bf16(float f);
TK_API float tk_bf16_to_f32(uint16_t h);
TK_API uint16_t tk_f32_to_f16(float f);
TK_API float tk_f16_to_f32(uint16_t h);

#ifdef __cplusplus
}
/* C++: the same calls as templates on the array's length. */
template <size_t N>
inline tk_value *tk_load(tk_kernel *k, tk_type type, tk_value *src, tk_value *const (&idx)[N],
                         float fill) {
    return tk_load_n(k, type, src, (int)N, idx, fill);
}
template <size_t N>
inline void tk_store(tk_kernel *k, tk_value *dst, tk_value *const (&idx)[N], tk_value *val) {
    tk_store_n(k, dst, (int)N, idx, val);
}
template <size_t N>
inline void tk_store_add(tk_kernel *k, tk_value *dst, tk_value *const (&idx)[N], tk_value *val) {
    tk_store_add_n(k, dst, (int)N, idx, val);
}
template <size_t N>
inline void tk_copy_to_shared(tk_kernel *k, tk_value *smem, tk_value *view,
                              tk_value *const (&idx)[N], float fill, int async) {
    tk_copy_to_shared_n(k, smem, view, (int)N, idx, fill, async);
}
template <size_t N>
inline void tk_copy_to_global(tk_kernel *k, tk_value *view, tk_value *const (&idx)[N],
                              tk_value *smem) {
    tk_copy_to_global_n(k, view, (int)N, idx, smem);
}
template <size_t N>
inline void tk_copy_to_global_add(tk_kernel *k, tk_value *view, tk_value *const (&idx)[N],
                                  tk_value *smem) {
    tk_copy_to_global_add_n(k, view, (int)N, idx, smem);
}
#endif
#endif
