/* Hedgehog linear attention, backward: the dΦ kernel (TK_HEDGEHOG_BWD_DPHI;
 * the contract is in tk/tk_kernels.h, "The backward"):
 *   dPhi_i[f] = Σ_{j<=i} (X_i·Y_j + CX_i + CY_j) φ(U_j)[f]
 * for the block's f_cols features f0.. (CX or CY or neither, by c_side).
 * The C term is one more value column: with a_i = CX_i, w_j = 1 (CX) or
 * a_i = 1, w_j = CY_j (CY), it is a_i·w_j, so X̃ = [X, a] and Ỹ = [Y, w]
 * give dPhi_i = Σ_{j<=i} (X̃_i·Ỹ_j) φ_j. (C, in f32, takes two columns in
 * the dtype: its rounded value and the remainder, with 1 in both of the
 * other side's.) Chunked like the forward
 * (kernels/hedgehog.c) at chunks of C = 16·warps tokens, walked in order,
 * each warp owning 16 query rows of a chunk:
 *   inside the chunk  dA = X̃_i·Ỹ_jᵀ, causal-masked, then out = dA·φ over
 *                     the chunk's keys
 *   earlier chunks    out += X̃_i·S̃ᵀ with the linear state S̃ = Σ_{earlier
 *                     j} φ_j Ỹ_jᵀ: S [f_cols, v_cols] and zz = Σ w_j φ_j
 * φ of the chunk's U comes from the forward's feature map
 * (kernels/hedgehog_fm.c) into φᵀ [F, C] in shared memory: every feature
 * takes part in a token's softmax, though only f0.. are used after.
 * The state lives in the warps' registers, f32, in pieces of [16 features,
 * at most 64 values] (piece p in warp p mod W) and zz per 16 features, with
 * dtype copies in shared memory that every warp reads. dA, made once a
 * chunk, stays in registers in the dtype; out is made 32 features at a
 * time. The loops over values and keys run a run-time number of trips, so
 * that LLVM keeps them rolled: unrolled, each trip's shared addresses (64
 * bits each) would be hoisted out of the chunk loop and held throughout.
 * Copies (cp.async), one stage each, overlap the work: Y of the chunk
 * during its feature map, U of the next chunk once every warp has read
 * this one's, X of the next once every warp has made its out. Four
 * barriers a chunk. Any token stride works, negative included (the run
 * code's time-reversed views): only the copies, the loads of CX or CY and
 * the stores of dPhi touch global memory, each through its view.
 * phi = 1 (the maps apart): φᵀ comes from PU [B, H, F, Tp], TK_HEDGEHOG_MAP's
 * output for U (the same ops, so the same bits), and each chunk copies only
 * the block's f_cols rows of it, [f_cols, C], where every block of a head
 * would otherwise map all of U (D x D mmas a token) for each f_cols slice.
 * No W, b or U tiles then. sP and sY are read until the chunk's state
 * update, so both are issued at the top of the next trip, with only the C
 * column's loads to overlap them: three barriers a chunk. */
#include <stdbool.h>
#include <stdio.h>

#include "hedgehog_parts.h"

#define MAX_SLOTS 16 /* state pieces a warp: 16 slabs of 16 features, 1 warp  */
#define KB        64 /* keys a score tile takes                               */
#define FG        32 /* features an out tile takes                            */
/* A thread's registers of state, at most (so slots <= MAX_SLOTS): the
 * rest of the kernel takes 136 .. 176 more (reg_cap), so past about 80
 * ptxas spills, past this it would spill most of it */
#define MAX_STATE_REGS 128

typedef struct dp {
    tk_kernel *k;
    tk_hedgehog_config c; /* resolved */
    tk_dtype dt;
    bool phi;              /* φᵀ read from PU (the block's rows) instead of mapping U */
    int D, F, W, C, V, FC; /* head dim, features, warps, chunk, value columns, f_cols */
    int NS, VW, NVP, P;    /* slabs of 16 features; a piece's values; pieces a slab, in all */
    int slots, zslots;     /* pieces of S, slabs of zz a warp holds (the most) */
    tk_value *X, *Y, *CX, *CY, *U, *Wu, *Bu, *PU, *dPhi;
    /* ids; the first feature; the warp, its first row; chunks; D / 16 */
    tk_value *b, *h, *f0, *w, *r0, *nch, *np;
    tk_value *vend;         /* the value loops' end: Dv rounded up to 16, at most V */
    tk_value *c0, *tend;    /* the chunk's first token; the key loops' end (up to T) */
    tk_value *sW, *sB;      /* W [D, D]; b in every column [D, 16] */
    tk_value *sU, *sX, *sY; /* the chunk's U [C, D], X and Y [C, V] */
    tk_value *sP;           /* φᵀ [F, C] (phi: [f_cols, C]): tokens in columns */
    tk_value *sS, *sZ;      /* S [f_cols, V]; zz in columns 0, 1 [f_cols, 16] */
    tk_value *sA, *sWt;     /* a_i, w_j in columns 0, 1 [C, 16] (the C column) */
} dp;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }
static tk_type tile(tk_dtype dt, int rows, int cols, tk_layout l) {
    return tk_tile_type(dt, rows, cols, TK_WARP, l);
}
static tk_type vec(int len, tk_axis axis) {
    return tk_vec_type(TK_F32, len, axis, TK_WARP, TK_ROW);
}
static tk_hh_fm fm_of(const dp *g) {
    return (tk_hh_fm){g->k, g->dt, g->D, g->w, g->r0, g->np, g->h};
}
static tk_value *lds(const dp *g, tk_value *s, int rows, int cols, tk_layout l, tk_value *r,
                     tk_value *c) {
    tk_hh_fm fm = fm_of(g);
    return tk_hh_lds(&fm, s, rows, cols, l, r, c);
}
static void sts(const dp *g, tk_value *s, tk_value *r, tk_value *c, tk_value *x) {
    tk_hh_fm fm = fm_of(g);
    tk_hh_sts(&fm, s, r, c, x);
}

/* ---- the configuration ---------------------------------------------------- */
/* Values a state piece takes: all of V up to 64, else the widest multiple
 * of 16 up to 64 dividing V (a piece's tile has one static width). */
static int piece_width(int V) {
    if (V <= 64) return V;
    for (int vw = 64;; vw -= 16)
        if (V % vw == 0) return vw;
}

size_t tk_hh_dphi_smem_bytes(const tk_hedgehog_config *c) {
    size_t D = (size_t)c->head_dim, C = 16 * (size_t)c->warps, V = (size_t)c->v_cols;
    size_t F = 2 * D, FC = (size_t)c->f_cols;
    size_t n = 2 * C * V + FC * V; /* elements: X, Y, S */
    if (c->phi)
        n += FC * C; /* the block's rows of φᵀ */
    else
        n += D * D + C * D + F * C + (c->bias ? D * 16 : 0); /* W, U, φᵀ, b */
    if (c->c_side) n += FC * 16 + 2 * C * 16;
    return n * 2; /* bf16 / f16 */
}

/* The most features a block (the least repeated work: the feature map and
 * dA are the same for every block of a head) whose state takes at most 64
 * registers a thread and whose tiles fit in shared memory. */
tk_hedgehog_config tk_hh_dphi_resolve(const tk_hedgehog_config *c) {
    tk_hedgehog_config r = *c;
    if (!r.warps) r.warps = TK_HEDGEHOG_WARPS;
    if (r.f_cols) return r;
    for (r.f_cols = 2 * r.head_dim; r.f_cols > 16; r.f_cols /= 2) {
        size_t state = (size_t)r.f_cols * (size_t)r.v_cols * 4 / (32 * (size_t)r.warps);
        if (state <= 256 && tk_hh_dphi_smem_bytes(&r) <= TK_HEDGEHOG_SMEM_MAX) break;
    }
    return r;
}

/* ---- setup ------------------------------------------------------------------ */
static void params(dp *g) {
    tk_kernel *k = g->k;
    g->X = tk_param_tensor(k, "X", g->dt, 4);
    g->Y = tk_param_tensor(k, "Y", g->dt, 4);
    if (g->c.c_side == 1) g->CX = tk_param_tensor(k, "CX", TK_F32, 3);
    if (g->c.c_side == 2) g->CY = tk_param_tensor(k, "CY", TK_F32, 3);
    if (g->phi) {
        g->PU = tk_param_tensor(k, "PU", g->dt, 4);
    } else {
        g->U = tk_param_tensor(k, "U", g->dt, 4);
        g->Wu = tk_param_tensor(k, "Wu", g->dt, 3);
        if (g->c.bias) g->Bu = tk_param_tensor(k, "Bu", g->dt, 2);
    }
    g->dPhi = tk_param_tensor(k, "dPhi", TK_F32, 4);
}

/* Tokens ch·C .. of view src (X, Y or U) into shared tile s. */
static void copy_chunk(dp *g, tk_value *s, tk_value *src, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *idx[4] = {g->b, g->h, tk_mul(k, ch, i64c(k, g->C)), i64c(k, 0)};
    tk_copy_to_shared(k, s, src, idx, 0.0f, TK_COPY_ASYNC);
}

/* The copy of chunk ch of src into s when ch is a chunk (then a commit). */
static void copy_next(dp *g, tk_value *s, tk_value *src, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_if_begin(k, tk_lt(k, ch, g->nch));
    copy_chunk(g, s, src, ch);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* phi: the block's rows f0.. of chunk c0's φᵀ, [f_cols, C], from PU. */
static void copy_phi(dp *g) {
    tk_value *idx[4] = {g->b, g->h, g->f0, g->c0};
    tk_copy_to_shared(g->k, g->sP, g->PU, idx, 0.0f, TK_COPY_ASYNC);
}

static void shared_tiles(dp *g) {
    tk_kernel *k = g->k;
    tk_dtype dt = g->dt;
    /* the wide tiles first (they want the larger alignment) */
    if (g->phi) {
        g->sP = tk_shared(k, dt, g->FC, g->C, TK_SMEM_SWIZZLE, 1);
    } else {
        g->sW = tk_shared(k, dt, g->D, g->D, TK_SMEM_SWIZZLE, 1);
        g->sP = tk_shared(k, dt, g->F, g->C, TK_SMEM_SWIZZLE, 1);
        g->sU = tk_shared(k, dt, g->C, g->D, TK_SMEM_SWIZZLE, 1);
    }
    g->sX = tk_shared(k, dt, g->C, g->V, TK_SMEM_SWIZZLE, 1);
    g->sY = tk_shared(k, dt, g->C, g->V, TK_SMEM_SWIZZLE, 1);
    g->sS = tk_shared(k, dt, g->FC, g->V, TK_SMEM_SWIZZLE, 1);
    if (g->c.bias && !g->phi) g->sB = tk_shared(k, dt, g->D, 16, TK_SMEM_SWIZZLE, 1);
    if (!g->c.c_side) return;
    g->sZ = tk_shared(k, dt, g->FC, 16, TK_SMEM_SWIZZLE, 1);
    g->sA = tk_shared(k, dt, g->C, 16, TK_SMEM_SWIZZLE, 1);
    g->sWt = tk_shared(k, dt, g->C, 16, TK_SMEM_SWIZZLE, 1);
}

/* A [16, 16] f32 tile: v0 and v1 (per row) in columns 0 and 1, zeros
 * elsewhere. */
static tk_value *cols01_tile(dp *g, tk_value *v0, tk_value *v1) {
    tk_kernel *k = g->k;
    tk_type ft = tile(TK_F32, 16, 16, TK_ROW);
    tk_value *col = tk_iota(k, ft, TK_PER_COL), *z = tk_zeros(k, ft);
    tk_value *t = tk_select(k, tk_eq(k, col, f32c(k, 1.0f)), tk_add(k, z, v1), f32c(k, 0.0f));
    return tk_select(k, tk_eq(k, col, f32c(k, 0.0f)), tk_add(k, z, v0), t);
}

/* The C terms as one more value column, a_i of the queries (sA) and w_j
 * of the keys (sWt): a_i·w_j is CX_i (a = CX, w = 1) or CY_j (a = 1, w =
 * CY), so dA and the state take them through the mmas they make anyway,
 * and zz is that column of the state. The tile of the ones is filled once;
 * the other gets CX or CY of the chunk's tokens from c0 (this warp's rows:
 * v of its 16 tokens). */
static tk_value *c_tile(const dp *g, bool ones) { return (g->CX != NULL) == ones ? g->sWt : g->sA; }

static void c_column(dp *g, tk_value *t, tk_value *v0, tk_value *v1) {
    sts(g, t, g->r0, i64c(g->k, 0), cols01_tile(g, v0, v1));
}

static tk_value *c_values(dp *g) {
    tk_kernel *k = g->k;
    tk_value *idx[3] = {g->b, g->h, tk_add(k, g->c0, g->r0)};
    return tk_load(k, vec(16, TK_PER_ROW), g->CX ? g->CX : g->CY, idx, 0.0f);
}

/* CX or CY as two columns, its value in the dtype and the remainder: the
 * mmas then take it to about 16 bits. (Rounded to the dtype alone, its
 * error stays while X·Y and C cancel: with few keys a normalized dφ is
 * mostly that cancellation; bf16, T 3: dk 1.5e-2 against float64.) */
static void c_split(dp *g) {
    tk_kernel *k = g->k;
    tk_value *v = c_values(g), *hi = tk_cvt(k, tk_cvt(k, v, g->dt), TK_F32);
    c_column(g, c_tile(g, false), hi, tk_sub(k, v, hi));
}

/* n rounded up to 16, at most m: the end of a loop over n of the m
 * columns of a shared tile, 16 a trip. */
static tk_value *up_to(dp *g, tk_value *n, int m) {
    tk_kernel *k = g->k;
    tk_value *n16 = tk_mul(k, tk_ceil_div(k, n, i64c(k, 16)), i64c(k, 16));
    return tk_min(k, n16, i64c(k, m));
}

/* W (the head's entry) and U of the first chunk issued (z: 0). */
static void copy_map_inputs(dp *g, tk_value *z) {
    tk_kernel *k = g->k;
    tk_value *hw = tk_rem(k, g->h, tk_dim(k, g->Wu, 0)); /* head h: W entry h mod Hw */
    tk_copy_to_shared(k, g->sW, g->Wu, ((tk_value *[]){hw, z, z}), 0.0f, TK_COPY_ASYNC);
    copy_chunk(g, g->sU, g->U, z);
}

/* Grid (F / f_cols, H, B), ids, shared tiles; W, U (not with phi) and X
 * of the first chunk issued, the bias tile filled. */
static void setup(dp *g) {
    tk_kernel *k = g->k;
    tk_value *T = tk_dim(k, g->X, 2), *z = i64c(k, 0);
    tk_set_grid(k, i64c(k, g->F / g->FC), tk_dim(k, g->X, 1), tk_dim(k, g->X, 0));
    g->f0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, g->FC));
    g->h = tk_block_id_i64(k, 1);
    g->b = tk_block_id_i64(k, 2);
    g->w = tk_warp_id_i64(k);
    g->r0 = tk_mul(k, g->w, i64c(k, 16));
    g->nch = tk_ceil_div(k, T, i64c(k, g->C));
    /* D / 16 at run time (capped at it), as the forward: a constant trip
     * count would have LLVM unroll the feature map's piece loops */
    if (!g->phi) g->np = tk_min(k, tk_div(k, tk_dim(k, g->Wu, 1), i64c(k, 16)), i64c(k, g->D / 16));
    /* V's zero columns past Dv skipped; a run-time trip count, too */
    g->vend = up_to(g, tk_dim(k, g->X, 3), g->V);
    tk_value_set_name(g->f0, "f0");
    tk_value_set_name(g->r0, "r0");
    shared_tiles(g);
    if (!g->phi) copy_map_inputs(g, z);
    copy_chunk(g, g->sX, g->X, z);
    tk_async_commit(k);
    if (g->c.c_side) { /* the ones meet both of C's columns */
        tk_value *one = tk_fill(k, vec(16, TK_PER_ROW), f32c(k, 1.0f));
        c_column(g, c_tile(g, true), one, one);
    }
    if (!g->c.bias || g->phi) return;
    tk_hh_fm fm = fm_of(g);
    tk_hh_bias_cols(&fm, g->Bu, g->sB, 0);
}

/* ---- the state's layout ------------------------------------------------------ */
/* Slot s of this warp holds piece p = s·W + w (run time): slab p / NVP,
 * values (p mod NVP)·VW ..; its zz slot s, slab s·W + w. A slot past the
 * last piece (fewer pieces than warps) is skipped through guard_begin /
 * guard_end, which carry the slot's values around it. */
static tk_value *guard_begin(dp *g, tk_value *i, int n) {
    if (n % g->W) tk_if_begin(g->k, tk_lt(g->k, i, i64c(g->k, n)));
    return i;
}

static void guard_end(dp *g, int n, tk_value *const *cur, tk_value **next, int m) {
    if (n % g->W == 0) return;
    if (m) tk_else(g->k, m, next);
    tk_if_end(g->k, m, cur, next);
}

static tk_value *slot_index(dp *g, int s) {
    return tk_add(g->k, i64c(g->k, (int64_t)s * g->W), g->w);
}

/* Zeros: init[s] piece slot s, init[slots + s] zz slot s; the shared
 * copies of what this warp owns zeroed (the first chunk reads them). */
static int state_init(dp *g, tk_value **init) {
    tk_kernel *k = g->k;
    int n = 0;
    for (int s = 0; s < g->slots; s++) {
        init[n++] = tk_zeros(k, tile(TK_F32, 16, g->VW, TK_ROW));
        tk_value *p = guard_begin(g, slot_index(g, s), g->P);
        tk_value *fs = tk_div(k, p, i64c(k, g->NVP)), *vp = tk_rem(k, p, i64c(k, g->NVP));
        sts(g, g->sS, tk_mul(k, fs, i64c(k, 16)), tk_mul(k, vp, i64c(k, g->VW)), init[n - 1]);
        guard_end(g, g->P, NULL, NULL, 0);
    }
    for (int s = 0; s < g->zslots; s++) {
        init[n++] = tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW));
        tk_value *fs = guard_begin(g, slot_index(g, s), g->NS);
        sts(g, g->sZ, tk_mul(k, fs, i64c(k, 16)), i64c(k, 0), init[n - 1]);
        guard_end(g, g->NS, NULL, NULL, 0);
    }
    return n;
}

/* ---- one chunk ----------------------------------------------------------------- */
/* Top of trip ch: U and X of ch (and, at ch 0, W) have landed, and every
 * warp is past trip ch - 1, its reads of sY (and sP) included: Y of ch
 * issued (phi: and the block's rows of φᵀ). */
static void arrive(dp *g, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_async_wait(k, 0);
    tk_barrier(k); /* U, X of ch landed for all; every warp left chunk ch - 1 */
    copy_chunk(g, g->sY, g->Y, ch);
    if (g->phi) copy_phi(g);
    tk_async_commit(k);
}

/* phi: Y and φᵀ of the chunk (and the C column) in place for every warp. */
static void phi_landed(dp *g) {
    tk_async_wait(g->k, 0);
    tk_barrier(g->k);
}

/* φ of the chunk's U into sP, rescaled after a barrier, U of chunk ch + 1
 * issued once every warp has read this one's; Y of the chunk waited for. */
static void feature_map(dp *g, tk_value *ch1) {
    tk_kernel *k = g->k;
    tk_hh_fm fm = fm_of(g);
    tk_value *fac = tk_hh_feature_map(&fm, g->sU, g->sW, g->sB, g->sP);
    tk_barrier(k); /* the rescale reads back the warp's exps; every warp has read sU */
    copy_next(g, g->sU, g->U, ch1);
    tk_hh_rescale(&fm, g->sP, fac);
    tk_async_wait(k, 1); /* Y of this chunk (the U just issued may stay in flight) */
    tk_barrier(k);       /* φ final and Y landed for every warp */
}

/* Key block kb's dA for this warp's rows: X_i·Y_jᵀ over the value columns
 * (16 at a time: Y's block takes nb/4 registers) and the C column, causal. */
static tk_value *scores(dp *g, int kb, int nb) {
    tk_kernel *k = g->k;
    tk_value *j0 = i64c(k, (int64_t)kb * nb), *init = tk_zeros(k, tile(TK_F32, 16, nb, TK_ROW));
    tk_value *cur, *next, *fin;
    tk_value *c = tk_for_begin(k, i64c(k, 0), g->vend, i64c(k, 16), 1, &init, &cur);
    {
        tk_value *xi = lds(g, g->sX, 16, 16, TK_ROW, g->r0, c);
        next = tk_mma(k, TK_MMA_ABT, xi, lds(g, g->sY, nb, 16, TK_ROW, j0, c), cur);
    }
    tk_for_end(k, 1, &next, &fin);
    if (g->c.c_side)
        fin = tk_mma(k, TK_MMA_ABT, lds(g, g->sA, 16, 16, TK_ROW, g->r0, i64c(k, 0)),
                     lds(g, g->sWt, nb, 16, TK_ROW, j0, i64c(k, 0)), fin);
    return tk_mask(k, fin, TK_MASK_CAUSAL, g->r0, j0, 0.0f);
}

/* dA of this warp's rows against every key of the chunk, in the dtype. A
 * key block after all of the warp's rows is zeros (8 warps). */
static tk_value *chunk_scores(dp *g) {
    tk_kernel *k = g->k;
    int nb = g->C < KB ? g->C : KB;
    tk_value *a = NULL;
    for (int kb = 0; kb < g->C / nb; kb++) {
        tk_value *j0 = i64c(k, (int64_t)kb * nb), *res;
        if (kb) tk_if_begin(k, tk_lt(k, j0, tk_add(k, g->r0, i64c(k, 16))));
        res = tk_cvt(k, scores(g, kb, nb), g->dt);
        if (kb) {
            tk_else(k, 1, &res);
            tk_value *zero = tk_zeros(k, tile(g->dt, 16, nb, TK_ROW));
            tk_if_end(k, 1, &zero, &res);
        }
        a = a ? tk_concat(k, 1, a, res) : res;
    }
    return a;
}

/* out of this warp's rows for features f0 + fg .. + FG: dA·φ over the
 * chunk's keys (16 at a time, dA's slices in registers; the keys after
 * the warp's rows skipped), X_i·Sᵀ over the value columns and the C
 * column (a_i·zz); to dPhi. */
static void out_group(dp *g, tk_value *fg, tk_value *a) {
    tk_kernel *k = g->k;
    int fw = g->FC < FG ? g->FC : FG;
    tk_value *pr = tk_add(k, g->f0, fg), *o = NULL;
    tk_value *sr = g->phi ? fg : pr; /* sP's row: phi's holds the block's rows alone */
    for (int j = 0; j < g->C; j += 16) {
        tk_value *res, *j0 = i64c(k, j);
        if (j) tk_if_begin(k, tk_le(k, j0, g->r0));
        res = tk_mma(k, TK_MMA_ABT, tk_slice(k, a, 0, j, 16, 16),
                     lds(g, g->sP, fw, 16, TK_ROW, sr, j0), o);
        if (j) {
            tk_else(k, 1, &res);
            tk_if_end(k, 1, &o, &res);
        }
        o = res;
    }
    tk_value *cur, *next, *fin;
    tk_value *c = tk_for_begin(k, i64c(k, 0), g->vend, i64c(k, 16), 1, &o, &cur);
    {
        tk_value *xi = lds(g, g->sX, 16, 16, TK_ROW, g->r0, c);
        next = tk_mma(k, TK_MMA_ABT, xi, lds(g, g->sS, fw, 16, TK_ROW, fg, c), cur);
    }
    tk_for_end(k, 1, &next, &fin);
    if (g->c.c_side)
        fin = tk_mma(k, TK_MMA_ABT, lds(g, g->sA, 16, 16, TK_ROW, g->r0, i64c(k, 0)),
                     lds(g, g->sZ, fw, 16, TK_ROW, fg, i64c(k, 0)), fin);
    tk_value *idx[4] = {g->b, g->h, tk_add(k, g->c0, g->r0), pr};
    tk_store(k, g->dPhi, idx, fin);
}

/* This warp's rows of dPhi for the chunk. */
static void chunk_out(dp *g) {
    tk_kernel *k = g->k;
    tk_value *a = chunk_scores(g);
    int fw = g->FC < FG ? g->FC : FG;
    tk_value *fg = tk_for_begin(k, i64c(k, 0), i64c(k, g->FC), i64c(k, fw), 0, NULL, NULL);
    out_group(g, fg, a);
    tk_for_end(k, 0, NULL, NULL);
}

/* A loop over the chunk's keys, 16 a trip (an mma's depth), as far as the
 * last token, carrying init. */
static tk_value *keys_begin(dp *g, tk_value *init, tk_value **cur) {
    tk_kernel *k = g->k;
    return tk_for_begin(k, i64c(k, 0), g->tend, i64c(k, 16), 1, &init, cur);
}

/* S's piece p += φᵀ[slab] Y[:, values]; its dtype copy to sS. */
static tk_value *piece_update(dp *g, tk_value *p, tk_value *cur) {
    tk_kernel *k = g->k;
    tk_value *fs16 = tk_mul(k, tk_div(k, p, i64c(k, g->NVP)), i64c(k, 16));
    tk_value *v0 = tk_mul(k, tk_rem(k, p, i64c(k, g->NVP)), i64c(k, g->VW));
    tk_value *pr = g->phi ? fs16 : tk_add(k, g->f0, fs16), *s, *next, *fin; /* sP's row */
    tk_value *t = keys_begin(g, cur, &s);
    {
        tk_value *ph = lds(g, g->sP, 16, 16, TK_ROW, pr, t);
        next = tk_mma(k, TK_MMA_AB, ph, lds(g, g->sY, 16, g->VW, TK_COL, t, v0), s);
    }
    tk_for_end(k, 1, &next, &fin);
    sts(g, g->sS, fs16, v0, fin);
    return fin;
}

/* zz of slab fs += φᵀ[slab] w̃ (w̃: the keys' C columns, zeros past
 * column 1), a [16, 16] tile kept whole (C's value and remainder in
 * columns 0 and 1); its copy to sZ. */
static tk_value *zz_update(dp *g, tk_value *fs, tk_value *cur) {
    tk_kernel *k = g->k;
    tk_value *fs16 = tk_mul(k, fs, i64c(k, 16)), *m, *next, *fin;
    tk_value *pr = g->phi ? fs16 : tk_add(k, g->f0, fs16); /* sP's row */
    tk_value *t = keys_begin(g, tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW)), &m);
    {
        tk_value *ph = lds(g, g->sP, 16, 16, TK_ROW, pr, t);
        next = tk_mma(k, TK_MMA_AB, ph, lds(g, g->sWt, 16, 16, TK_COL, t, i64c(k, 0)), m);
    }
    tk_for_end(k, 1, &next, &fin);
    cur = tk_add(k, cur, fin);
    sts(g, g->sZ, fs16, i64c(k, 0), cur);
    return cur;
}

/* The chunk's keys into the state: next as state_init's init. (The last
 * chunk's tokens past T add φ of zero rows, which no chunk reads.) */
static void state_update(dp *g, tk_value *const *cur, tk_value **next) {
    for (int s = 0; s < g->slots; s++) {
        tk_value *p = guard_begin(g, slot_index(g, s), g->P);
        next[s] = piece_update(g, p, cur[s]);
        guard_end(g, g->P, &cur[s], &next[s], 1);
    }
    for (int s = 0; s < g->zslots; s++) {
        int i = g->slots + s;
        tk_value *fs = guard_begin(g, slot_index(g, s), g->NS);
        next[i] = zz_update(g, fs, cur[i]);
        guard_end(g, g->NS, &cur[i], &next[i], 1);
    }
}

static void build(dp *g) {
    tk_kernel *k = g->k;
    params(g);
    setup(g);
    tk_value *init[2 * MAX_SLOTS], *cur[2 * MAX_SLOTS], *next[2 * MAX_SLOTS];
    tk_value *fin[2 * MAX_SLOTS];
    int n = state_init(g, init);
    tk_value *ch = tk_for_begin(k, i64c(k, 0), g->nch, i64c(k, 1), n, init, cur);
    {
        tk_value *ch1 = tk_add(k, ch, i64c(k, 1));
        g->c0 = tk_mul(k, ch, i64c(k, g->C));
        g->tend = up_to(g, tk_sub(k, tk_dim(k, g->X, 2), g->c0), g->C);
        arrive(g, ch);
        if (g->c.c_side) c_split(g);
        if (g->phi)
            phi_landed(g);
        else
            feature_map(g, ch1);
        chunk_out(g);
        tk_barrier(k); /* every warp is done reading sX, sA, sS and sZ */
        copy_next(g, g->sX, g->X, ch1);
        state_update(g, cur, next);
    }
    tk_for_end(k, n, next, fin);
}

/* ---- tk_hh_build_dphi ------------------------------------------------------------ */
static tk_status bad(tk_ctx *ctx, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "tk_hedgehog_build: %s is %d; expected %s",
                            what, v, want);
}

static tk_status check_fields(tk_ctx *ctx, const tk_hedgehog_config *c) {
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: dtype is %s; expected TK_BF16 or TK_F16",
                                tk_dtype_name(c->dtype));
    if (c->head_dim != 64 && c->head_dim != 128)
        return bad(ctx, "head_dim", c->head_dim, "64 or 128");
    if (c->bias != 0 && c->bias != 1) return bad(ctx, "bias", c->bias, "0 or 1");
    int vc = c->v_cols, fc = c->f_cols, w = c->warps;
    if (vc < 16 || vc > 256 || vc % 16)
        return bad(ctx, "v_cols", vc, "a multiple of 16 in 16 .. 256 (BWD_DPHI: the value dim)");
    if (fc < 0 || fc % 16 || (fc && (2 * c->head_dim) % fc))
        return bad(ctx, "f_cols", fc, "0 or a multiple of 16 dividing 2·head_dim");
    if (c->c_side < 0 || c->c_side > 2) return bad(ctx, "c_side", c->c_side, "0, 1 or 2");
    if (c->phi != 0 && c->phi != 1) return bad(ctx, "phi", c->phi, "0 or 1");
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8)
        return bad(ctx, "warps", w, "0, 1, 2, 4 or 8");
    return TK_OK;
}

static void layout(dp *g) {
    g->dt = g->c.dtype, g->D = g->c.head_dim, g->F = 2 * g->D, g->W = g->c.warps;
    g->phi = g->c.phi;
    g->C = 16 * g->W, g->V = g->c.v_cols, g->FC = g->c.f_cols, g->NS = g->FC / 16;
    g->VW = piece_width(g->V), g->NVP = g->V / g->VW, g->P = g->NS * g->NVP;
    g->slots = (g->P + g->W - 1) / g->W;
    g->zslots = g->c.c_side ? (g->NS + g->W - 1) / g->W : 0;
}

/* f32 registers a thread of the warps that hold the most of the state
 * takes for it: the state alone, not what ptxas adds. */
static int state_regs(const tk_hedgehog_config *r) {
    dp g = {.c = *r};
    layout(&g);
    return g.slots * g.VW / 2 + g.zslots * 8;
}

static tk_status check_config(tk_ctx *ctx, const tk_hedgehog_config *c) {
    tk_status s = check_fields(ctx, c);
    if (s) return s;
    tk_hedgehog_config r = tk_hh_dphi_resolve(c);
    int regs = state_regs(&r);
    if (regs > MAX_STATE_REGS)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: f_cols %d, v_cols %d and warps %d keep %d "
                                "registers of state a thread; at most %d: fewer f_cols or more "
                                "warps",
                                r.f_cols, r.v_cols, r.warps, regs, MAX_STATE_REGS);
    size_t smem = tk_hh_dphi_smem_bytes(&r);
    if (smem > TK_HEDGEHOG_SMEM_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "tk_hedgehog_build: head_dim %d, v_cols %d, f_cols %d and warps %d "
                                "need %zu bytes of shared memory; a block has at most %d: fewer "
                                "f_cols or warps",
                                r.head_dim, r.v_cols, r.f_cols, r.warps, smem,
                                TK_HEDGEHOG_SMEM_MAX);
    return TK_OK;
}

/* Registers a thread may use: as many as let the blocks that fit both in
 * an H100's shared memory (228 KiB an SM, 1 KiB of it each block's) and in
 * its registers at what the kernel needs run together. The need: the
 * state's registers and up to 176 more (ptxas, CUDA 13, the least .maxnreg
 * without spills over D, v_cols 16 .. 256, f_cols, warps and C sides:
 * 136 .. 168 more on sm_90a, 176 on sm_80). So at the defaults this is 255
 * (2 blocks of 4 warps an SM at D 64, where shared memory would allow 3,
 * and 1 at D 128). */
static int reg_cap(const tk_hedgehog_config *c) {
    int threads = 32 * c->warps, need = state_regs(c) + 176;
    int by_smem = (int)((228 * 1024) / (tk_hh_dphi_smem_bytes(c) + 1024));
    int by_regs = 65536 / (threads * (need < 255 ? need : 255));
    int blocks = by_smem < by_regs ? by_smem : by_regs;
    int cap = 65536 / ((blocks > 1 ? blocks : 1) * threads) / 8 * 8;
    return cap > 255 ? 255 : cap;
}

tk_status tk_hh_build_dphi(tk_ctx *ctx, const tk_hedgehog_config *cfg, tk_kernel **out) {
    tk_status s = check_config(ctx, cfg);
    if (s) return s;
    dp g = {.c = tk_hh_dphi_resolve(cfg)};
    layout(&g);
    static const char *const side[] = {"", "_cx", "_cy"};
    char name[96]; /* phi: the bias is MAP's (unread here) */
    snprintf(name, sizeof name, "tk_hedgehog_dphi_%s_d%d_v%d_f%d_w%d%s%s%s", tk_dtype_name(g.dt),
             g.D, g.V, g.FC, g.W, side[g.c.c_side], g.c.bias && !g.phi ? "_bias" : "",
             g.phi ? "_phi" : "");
    if ((s = tk_kernel_create(ctx, name, g.W, &g.k))) return s;
    tk_kernel_set_maxnreg(g.k, reg_cap(&g.c));
    build(&g);
    if ((s = tk_kernel_finish(g.k))) {
        tk_ctx_set_error(ctx, s, "tk_hedgehog_build: %s", tk_kernel_error(g.k));
        tk_kernel_destroy(g.k);
        return s;
    }
    *out = g.k;
    return TK_OK;
}
