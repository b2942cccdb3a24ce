/* Internal IR: the data structures behind tk_kernel / tk_value.
 *
 * A kernel is a tree of regions. A region is a list of ops; FOR and IF own
 * nested regions. Values are SSA: each is defined once, by an op result, a
 * region argument (loop induction variable / carried value) or a parameter.
 * All of a kernel's memory comes from its arena and is freed at once. */
#ifndef TK_IR_H
#define TK_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk/tk.h"

/* ---- Arena -------------------------------------------------------------- */
typedef struct tk_arena tk_arena;
tk_arena *tk_arena_new(void);
void tk_arena_free(tk_arena *a);
/* Zeroed, 16-byte aligned; NULL when out of memory. */
void *tk_arena_alloc(tk_arena *a, size_t n);
char *tk_arena_strdup(tk_arena *a, const char *s);

/* ---- Op table ----------------------------------------------------------- */
typedef enum tk_opcode {
#define X(e, ...) TK_OP_##e,
#include "ir/ops.def"
#undef X
    TK_OP_COUNT
} tk_opcode;

/* Scope codes in the table beyond tk_scope: OWNER is resolved at build. */
#define TK_SCOPE_OWNER 100

typedef struct tk_op tk_op;
typedef struct tk_region tk_region;

typedef enum tk_uniformity {
    TK_UNI_BLOCK = 0, /* same for every thread of a block                */
    TK_UNI_WARP = 1,  /* same within a warp (warp id, warp-role tests)   */
    TK_UNI_THREAD = 2 /* varies per thread (lane id)                     */
} tk_uniformity;

struct tk_value {
    tk_kernel *k; /* owner, to reject values of another kernel       */
    uint32_t id;  /* dense, 1-based, in creation order                */
    tk_type type;
    tk_op *def;            /* defining op, NULL for params and region args    */
    tk_region *region_arg; /* the region this is an argument of, or NULL */
    int32_t index;         /* result index / region arg index / param index   */
    tk_uniformity uni;
    const char *name;     /* parameter / spec name, or NULL                  */
    const char *label;    /* tk_value_set_name's name (printed %label), or NULL */
    tk_value *next_label; /* the kernel's labelled values, newest first   */
    tk_region *home;      /* region the value is defined in (visibility)     */
};

struct tk_region {
    tk_op *parent; /* the FOR/IF op owning this region                */
    tk_op *first, *last;
    int32_t nargs; /* FOR body: iv + carried values                   */
    tk_value **args;
    int32_t nyield; /* values yielded at the end of the region         */
    tk_value **yield;
};

struct tk_op {
    tk_opcode opc;
    tk_scope scope; /* resolved scope (never TK_SCOPE_OWNER)           */
    int32_t nopnds;
    tk_value **opnds;
    int32_t nres;
    tk_value **res;
    int64_t attr[2]; /* op-specific: dim, mma kind, mask kind, async,
                          pending groups, const integer, ...             */
    double fattr;    /* fill value, float constant                      */
    tk_type want;    /* result type asked for by the builder call (FILL,
                          loads, SHARED); the rule checks it             */
    tk_region *regions[2];
    tk_region *parent; /* region containing this op                      */
    tk_op *next;
    uint32_t id; /* creation order, for messages                    */
};

/* The uni column's OPND: a result is as uniform as the op's operands. */
#define TK_UNI_OPERANDS (-1)

/* The print column: how ir/print.c shows an op's attributes (ops.def). */
typedef enum tk_print_form {
    TK_PRINT_PLAIN,   /* no attributes                                    */
    TK_PRINT_AXIS,    /* axis=attr[0]                                     */
    TK_PRINT_TO,      /* to=<dtype attr[0]>                               */
    TK_PRINT_PENDING, /* pending=attr[0]                                  */
    TK_PRINT_MMA,     /* kind=<tk_mma_kind attr[0]>                       */
    TK_PRINT_AT,      /* at=attr[0],attr[1]                               */
    TK_PRINT_MASK,    /* kind=<tk_mask_kind attr[0]> fill=fattr           */
    TK_PRINT_FILL,    /* fill=fattr, unless +0                            */
    TK_PRINT_COPY,    /* async / async tma (attr[0]), then as FILL        */
    TK_PRINT_STORE,   /* add (attr[0]: the store adds, tk_store_add)      */
    TK_PRINT_CONST,   /* "<dtype> <value>" and its spec name, no type     */
    TK_PRINT_SHARED,  /* its type as the argument, "@<offset attr[0]>"    */
    TK_PRINT_FOR,     /* the loop header and its body                     */
    TK_PRINT_IF,      /* the condition and both regions                   */
    TK_PRINT_COL      /* col=attr[0]                                      */
} tk_print_form;

/* An op's row of ir/ops.def: identity, and the facts the IR layer reads.
 * Semantics (rules, interpreter, lowering) are the ops layer's, found by
 * opcode through the family column. */
typedef struct tk_op_info {
    const char *name;
    int8_t min_opnds, max_opnds, nres;
    int16_t scope; /* tk_scope or TK_SCOPE_OWNER                       */
    const char *family;
    int8_t uni;    /* tk_uniformity of every result, or TK_UNI_OPERANDS */
    bool grid;     /* may appear in a grid expression (ir/grid.c)      */
    uint8_t print; /* tk_print_form                                    */
} tk_op_info;

extern const tk_op_info tk_op_infos[TK_OP_COUNT];

/* A type rule (one per family: tk_rule_<family>, ops/<family>.c) checks an
 * op's operand types and attributes and sets its result types; it returns
 * TK_OK or reports with tk_opfail and returns its status. The ops layer
 * hands its table of them (by opcode) to tk_verify / tk_kernel_seal. */
typedef tk_status (*tk_rule_fn)(tk_kernel *k, tk_op *op);

/* ---- Kernel ------------------------------------------------------------- */
typedef struct tk_spec_entry {
    const char *name;
    int64_t value;
} tk_spec_entry;

#define TK_MAX_PARAMS 64
#define TK_MAX_SPECS  32
#define TK_MAX_NEST   32

struct tk_kernel {
    tk_ctx *ctx;
    tk_arena *arena;
    const char *name;
    int32_t warps;
    tk_status status; /* first error, sticky                          */
    char error[512];
    bool finished;

    tk_region *body;          /* top-level region                             */
    tk_region *cur;           /* where new ops are appended                   */
    tk_op *open[TK_MAX_NEST]; /* FOR/IF ops under construction, innermost last */
    int32_t nopen;

    tk_value *params[TK_MAX_PARAMS];
    int32_t nparams;
    tk_spec_entry specs[TK_MAX_SPECS];
    int32_t nspecs;
    tk_value *grid[3];            /* NULL = 1                                     */
    bool grid_set;                /* tk_set_grid was called (finish requires it)  */
    tk_value *labels;             /* values named by tk_value_set_name            */
    int32_t maxnreg;              /* tk_kernel_set_maxnreg: 0 = ptxas decides     */
    int32_t min_blocks;           /* tk_kernel_set_min_blocks: 0 = no minimum     */
    int32_t cluster;              /* tk_kernel_set_cluster: 0 = none (1 block)    */
    uint8_t cache[TK_MAX_PARAMS]; /* tk_param_set_cache, by param index */

    uint32_t nvalues; /* ids handed out so far                        */
    uint32_t nops;
    size_t smem_bytes;      /* total shared bytes (sum of SHARED ops)       */
    const char *canon;      /* printed form, made once by tk_kernel_finish */
    uint64_t canon_hash[2]; /* XXH3-128 of canon (low, high), made with it:
                               what the JIT's cache keys hash, so that a
                               lookup does not rehash the text each time  */
};

/* XXH3-128 of a kernel's canonical text (low, high): k->canon_hash, and
 * what the JIT hashes for a text it reads back (a kernel pack's). */
void tk_canon_hash(const char *text, uint64_t out[2]);

/* ---- Helpers shared by the builder, rules and verifier ------------------ */
/* Records the first error on k (later ones are dropped); returns `s`. */
tk_status tk_kfail(tk_kernel *k, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, prefixed with "tk_<call>: ", the public call that makes op. */
tk_status tk_opfail(tk_kernel *k, const tk_op *op, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "64x32 bf16 row tile (warp)" style text for messages and the printer. */
void tk_type_str(const tk_type *t, char *buf, size_t n);
bool tk_type_eq(const tk_type *a, const tk_type *b);
bool tk_dtype_is_float(tk_dtype dt); /* f32, bf16, f16 */
bool tk_dtype_is_int(tk_dtype dt);   /* i32, i64 */
/* Bytes one shared tile stage occupies with its layout (padding included). */
size_t tk_smem_stage_bytes(const tk_type *t);
/* Row pitch in elements of a shared tile (padding included). */
int32_t tk_smem_pitch(const tk_type *t);
/* The hardware swizzle a SWIZZLE shared tile's layout is (ops/nv/mem.c): 32,
 * 64 or 128 bytes for rows of 32, 64 or a multiple of 128 bytes (wide rows
 * cut into 128-byte column blocks), 0 for any other tile. The copy engine's
 * tensor maps (jit/plan.c) and wgmma's matrix descriptors (ops/wgmma_nv.c)
 * both name the swizzle through this one function, so what the engine
 * writes is what the tensor cores read. */
int32_t tk_smem_swizzle_bytes(const tk_type *t);

/* Building an op takes three steps; the ops layer's tk_build_op
 * (ops/build.h) runs them with the op's rule in the middle:
 *  1. tk_op_new: checks the kernel is open, the operand count against the
 *     table and each operand (tk_check_operand); makes the op with its
 *     attributes, the result type asked for (`want`: FILL, loads, SHARED)
 *     and untyped results. Not yet in any region. NULL on error (sticky).
 *  2. the rule sets the result types;
 *  3. tk_op_append: resolves the scope, checks that scalar operands are
 *     uniform enough for it, sets the results' uniformity, numbers the op
 *     and appends it to the current region. NULL on error. */
tk_op *tk_op_new(tk_kernel *k, tk_opcode opc, int nopnds, tk_value *const *opnds, tk_type want,
                 int64_t a0, int64_t a1, double f);
tk_op *tk_op_append(tk_kernel *k, tk_op *op);
/* The public builder call (without "tk_") that makes ops of opcode opc:
 * "load" for LOAD_G2R and LOAD_S2R, ...; the op's own name for most. */
const char *tk_op_call(tk_opcode opc);
/* How messages and the printer refer to v: a parameter or spec by its name,
 * a value named by tk_value_set_name as %name, any other as %<id>. */
const char *tk_value_ref(const tk_value *v, char *buf, size_t n);
/* Validates one operand of op `opname` (non-NULL, this kernel, visible). */
bool tk_check_operand(tk_kernel *k, const char *opname, int i, const tk_value *v);
/* The scope op runs at: the table's, or for tile ops their owner's. */
tk_scope tk_op_scope(const tk_op *op);
/* The least a result of op varies, from the table's uni column: that
 * uniformity, or (OPND) the most varying of its first n operands, at least
 * warp-varying for an op that runs per warp/warpgroup. */
tk_uniformity tk_op_least_uni(const tk_op *op, int n);
/* Result i of op as a value (the rule has set its type). */
tk_value *tk_op_result(tk_op *op, int i);
tk_value *tk_new_value(tk_kernel *k, tk_type type);
/* Kernel, parameter and spec names are C identifiers. */
bool tk_is_ident(const char *name);

/* Verifier (ir/verify.c): structure, types (re-running each op's rule from
 * rules[opc]), scopes and uniformity. */
tk_status tk_verify(tk_kernel *k, const tk_rule_fn rules[TK_OP_COUNT]);
/* What tk_kernel_finish does, with the type rules given: checks nothing is
 * left open, verifies, and freezes k with its canonical text (k->canon). */
tk_status tk_kernel_seal(tk_kernel *k, const tk_rule_fn rules[TK_OP_COUNT]);

/* Walk helpers. */
#define TK_FOREACH_OP(region, op) for (tk_op *op = (region)->first; op; op = op->next)

#endif
