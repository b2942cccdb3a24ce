/* Hedgehog linear attention (Zhang et al. 2024), forward: causal linear
 * attention with a learned feature map, flash-linear-attention's
 * HedgehogFeatureMap + chunk_linear_attn. The contract (parameters, grid)
 * is in tk/tk_kernels.h ("Hedgehog linear attention").
 *
 * φ(x) = softmax([2y, -2y]) with y = x·Wᵀ + b has F = 2D features, so the
 * causal sum splits at chunks of C rows into an exact part inside the chunk
 * and a linear state:
 *   num_i = Σ_{j<=i, same chunk} a_ij v_j + φ(q_i)ᵀ S,   S = Σ_{earlier} φ(k_j) v_jᵀ
 *   z_i   = Σ_{j<=i, same chunk} a_ij     + φ(q_i)·z1,  z1 = Σ_{earlier} φ(k_j)
 * with a_ij = φ(q_i)·φ(k_j), and o_i = s·num_i / (s·z_i + eps) (s: scale),
 * or s·num_i unnormalized.
 *
 * A block owns one (batch, head) and `v_cols` value columns and walks the
 * chunks in order; each warp owns 16 tokens of a chunk. Per chunk:
 *   feature map  each warp's tokens of k, then q, transposed: yᵀ [16
 *                features, 16 tokens] a piece (an mma of W's rows, W in
 *                shared memory, with the tokens), softmax over [2y, -2y]
 *                down the features, online over the pieces (a piece's max
 *                is 2·max|y|); the exps into φkᵀ / φqᵀ [F, C] in the
 *                dtype, then, once each token's max and sum are known,
 *                rescaled in place. Transposed, every piece is a row block
 *                of these tiles and of S, so every mma below reads them at
 *                rows 16p
 *   intra        A = φq·φkᵀ causal-masked, o = A·v, z = rowsum(A)
 *   inter        o += φ(q)·S, z += φ(q)·z1 (S, z1 from shared memory in
 *                the dtype); o, z out
 *   state        the F x v_cols state S lives in the warps' registers in
 *                slabs of 16 features (slab j in warp j mod W, as Based's),
 *                with a dtype copy in shared memory that every warp reads;
 *                S_j += φkᵀ[j] v, z1_j += Σ_tokens φkᵀ[j].
 * Copies (cp.async) overlap the work: v of the next chunk (two stages) from
 * the chunk's start, q and k of the next chunk (one stage each: shared
 * memory is short) as soon as every warp has read them, mid-chunk. Five
 * barriers a chunk (feature_maps, build). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "hedgehog_parts.h"

#define MAX_SLOTS 16 /* F / 16 slabs over 1 warp                         */
#define KB        64 /* keys an intra-chunk score tile takes             */

typedef struct hh {
    tk_kernel *k;
    tk_hedgehog_config c; /* resolved */
    tk_dtype dt;
    int D, F, W, C, V,
        slots;  /* head dim, features, warps, chunk rows, value columns, slabs a warp */
    bool z;     /* the key sums and z (normalize or stats)        */
    bool state; /* TK_HEDGEHOG_SEG_STATE: the segment's S (and z1) alone */
    bool phi;   /* φ(q)ᵀ, φ(k)ᵀ read from Q, K (TK_HEDGEHOG_MAP's P)      */
    tk_value *Q, *K, *Vv, *Wq, *Wk, *Bq, *Bk, *O, *Z, *scale, *eps;
    tk_value *b, *h, *v0, *w, *r0, *nch; /* ids, the warp's first row, chunks */
    tk_value *np, *nf;                   /* D / 16, F / 16 as run-time values   */
    tk_value *sWq, *sWk;                 /* W [D, D]                            */
    tk_value *sBq, *sBk;                 /* b in every column [D, 16]           */
    tk_value *sQ, *sK, *sV;              /* the chunk's q, k [C, D]; v [C, V] x 2 */
    tk_value *sPq, *sPk;                 /* φ(q)ᵀ, φ(k)ᵀ [F, C]: tokens in columns */
    tk_value *sS, *sZ;                   /* S [F, V], z1 in every column [F, 16] */
    tk_value *St, *L;                    /* seg: the segments' states, chunks a segment */
    tk_value *seg, *nseg;                /* seg: this block's segment, the count        */
    tk_value *c_lo, *trips;              /* the block's first chunk (seg), its chunks   */
} hh;

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_type tile(tk_dtype dt, int rows, int cols, tk_layout l) {
    return tk_tile_type(dt, rows, cols, TK_WARP, l);
}
/* A rows x cols tile of shared tile s at (r, c), in g's dtype. */
static tk_hh_fm fm_of(const hh *g) {
    return (tk_hh_fm){g->k, g->dt, g->D, g->w, g->r0, g->np, g->h};
}
static tk_value *lds(hh *g, tk_value *s, int rows, int cols, tk_layout l, tk_value *r,
                     tk_value *c) {
    tk_hh_fm fm = fm_of(g);
    return tk_hh_lds(&fm, s, rows, cols, l, r, c);
}
static void sts(hh *g, tk_value *s, tk_value *r, tk_value *c, tk_value *x) {
    tk_hh_fm fm = fm_of(g);
    tk_hh_sts(&fm, s, r, c, x);
}
/* The chunk trip ch works on (emits nothing without segments, which keeps
 * the whole-sequence kernel's code as it was). */
static tk_value *chunk_of(hh *g, tk_value *ch) { return g->c_lo ? tk_add(g->k, g->c_lo, ch) : ch; }

/* ---- the configuration ---------------------------------------------------- */
tk_hedgehog_config tk_hedgehog_resolve(const tk_hedgehog_config *c) {
    tk_hedgehog_config r = *c;
    /* the most columns (the least repeated feature-map work) whose state
     * slabs, 64 registers a warp, fit without spills (ptxas sm_90a; D 128
     * at 64 columns: 128 registers of slabs, 188 bytes of spill stores) */
    if (!r.v_cols) r.v_cols = r.head_dim == 64 ? 64 : 32;
    if (!r.warps) r.warps = TK_HEDGEHOG_WARPS;
    return r;
}

size_t tk_hedgehog_smem_bytes(const tk_hedgehog_config *c) {
    size_t D = (size_t)c->head_dim, C = 16 * (size_t)c->warps, V = (size_t)c->v_cols, F = 2 * D;
    size_t n = 2 * C * V + 2 * C * F + F * V; /* elements */
    if (!c->phi) n += 2 * D * D + 2 * C * D;  /* W, q and k */
    if (c->bias && !c->phi) n += 2 * D * 16;
    if (c->normalize || c->stats) n += F * 16;
    return n * 2; /* bf16 / f16 */
}

/* ---- setup ------------------------------------------------------------------ */
static void params_weights(hh *g) {
    tk_kernel *k = g->k;
    g->Wq = tk_param_tensor(k, "Wq", g->dt, 3);
    g->Wk = tk_param_tensor(k, "Wk", g->dt, 3);
    if (g->c.bias) {
        g->Bq = tk_param_tensor(k, "Bq", g->dt, 2);
        g->Bk = tk_param_tensor(k, "Bk", g->dt, 2);
    }
}

static void params_rest(hh *g) {
    tk_kernel *k = g->k;
    if (!g->state) {
        g->O = tk_param_tensor(k, "O", g->dt, 4);
        if (g->c.stats) g->Z = tk_param_tensor(k, "Z", TK_F32, 3);
    }
    if (g->c.seg) {
        g->St = tk_param_tensor(k, "St", TK_F32, 4);
        g->L = tk_param_scalar(k, "seg_chunks", TK_I64);
    }
    if (g->state) return;
    g->scale = tk_param_scalar(k, "scale", TK_F32);
    g->eps = tk_param_scalar(k, "eps", TK_F32);
}

static void params(hh *g) {
    tk_kernel *k = g->k;
    g->Q = tk_param_tensor(k, g->phi ? "PQ" : "Q", g->dt, 4);
    g->K = tk_param_tensor(k, g->phi ? "PK" : "K", g->dt, 4);
    g->Vv = tk_param_tensor(k, "V", g->dt, 4);
    if (!g->phi) params_weights(g);
    params_rest(g);
}

/* The entry of weights X [Hw, ...] head h uses: h mod Hw. */
static tk_value *head_of(hh *g, tk_value *X) { return tk_rem(g->k, g->h, tk_dim(g->k, X, 0)); }

/* phi: chunk ch's φ(q)ᵀ (q) or φ(k)ᵀ [F, C] from PQ or PK. */
static void copy_phi(hh *g, tk_value *ch, bool q) {
    tk_kernel *k = g->k;
    tk_value *idx[4] = {g->b, g->h, i64c(k, 0), tk_mul(k, ch, i64c(k, g->C))};
    tk_copy_to_shared(k, q ? g->sPq : g->sPk, q ? g->Q : g->K, idx, 0.0f, TK_COPY_ASYNC);
}

static void copy_qk(hh *g, tk_value *ch) {
    tk_kernel *k = g->k;
    if (g->phi) {
        if (!g->state) copy_phi(g, ch, true);
        copy_phi(g, ch, false);
        return;
    }
    tk_value *idx[4] = {g->b, g->h, tk_mul(k, ch, i64c(k, g->C)), i64c(k, 0)};
    if (!g->state) tk_copy_to_shared(k, g->sQ, g->Q, idx, 0.0f, TK_COPY_ASYNC);
    tk_copy_to_shared(k, g->sK, g->K, idx, 0.0f, TK_COPY_ASYNC);
}

static void copy_v(hh *g, tk_value *st, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *idx[4] = {g->b, g->h, tk_mul(k, ch, i64c(k, g->C)), g->v0};
    tk_copy_to_shared(k, tk_stage(k, g->sV, st), g->Vv, idx, 0.0f, TK_COPY_ASYNC);
}

static void copy_weights(hh *g) {
    tk_kernel *k = g->k;
    tk_value *z = i64c(k, 0);
    if (!g->state) /* the state pass maps only the keys */
        tk_copy_to_shared(k, g->sWq, g->Wq, ((tk_value *[]){head_of(g, g->Wq), z, z}), 0.0f,
                          TK_COPY_ASYNC);
    tk_copy_to_shared(k, g->sWk, g->Wk, ((tk_value *[]){head_of(g, g->Wk), z, z}), 0.0f,
                      TK_COPY_ASYNC);
}

static void shared_tiles(hh *g) {
    tk_kernel *k = g->k;
    tk_dtype dt = g->dt;
    /* the wide tiles first (they want the larger alignment) */
    if (!g->phi) {
        g->sWq = tk_shared(k, dt, g->D, g->D, TK_SMEM_SWIZZLE, 1);
        g->sWk = tk_shared(k, dt, g->D, g->D, TK_SMEM_SWIZZLE, 1);
    }
    g->sPq = tk_shared(k, dt, g->F, g->C, TK_SMEM_SWIZZLE, 1);
    g->sPk = tk_shared(k, dt, g->F, g->C, TK_SMEM_SWIZZLE, 1);
    g->sS = tk_shared(k, dt, g->F, g->V, TK_SMEM_SWIZZLE, 1);
    if (!g->phi) {
        g->sQ = tk_shared(k, dt, g->C, g->D, TK_SMEM_SWIZZLE, 1);
        g->sK = tk_shared(k, dt, g->C, g->D, TK_SMEM_SWIZZLE, 1);
    }
    g->sV = tk_shared(k, dt, g->C, g->V, TK_SMEM_SWIZZLE, 2);
    if (g->c.bias && !g->phi) {
        g->sBq = tk_shared(k, dt, g->D, 16, TK_SMEM_SWIZZLE, 1);
        g->sBk = tk_shared(k, dt, g->D, 16, TK_SMEM_SWIZZLE, 1);
    }
    if (g->z) g->sZ = tk_shared(k, dt, g->F, 16, TK_SMEM_SWIZZLE, 1);
}

/* The state pass's segments whose state another segment reads. */
static tk_value *seg_used(hh *g) {
    tk_kernel *k = g->k;
    return tk_lt(k, g->seg, tk_sub(k, g->nseg, i64c(k, 1)));
}

/* Batch entry, segment and chunk range from block z (= b·NS + s). */
static void seg_ids(hh *g, tk_value *z) {
    tk_kernel *k = g->k;
    g->b = tk_div(k, z, g->nseg);
    g->seg = tk_rem(k, z, g->nseg);
    g->c_lo = tk_mul(k, g->seg, g->L);
    g->trips = tk_min(k, g->L, tk_sub(k, g->nch, g->c_lo));
    if (g->state) /* no work where no one reads it */
        g->trips = tk_select(k, seg_used(g), g->trips, i64c(k, 0));
}

/* Grid (ceil(Dv / V), H, B), ids, shared tiles; the weights and the first
 * chunk's copies issued, the biases' tiles filled. With segments grid z is
 * B·NS and the block's chunks its segment's. */
static void setup(hh *g) {
    tk_kernel *k = g->k;
    tk_value *sh = g->phi ? g->Vv : g->Q; /* [B, H, T, ...] */
    tk_value *B = tk_dim(k, sh, 0), *H = tk_dim(k, sh, 1), *T = tk_dim(k, sh, 2);
    if (g->c.seg) {
        g->nch = tk_ceil_div(k, T, i64c(k, g->C));
        g->nseg = tk_ceil_div(k, g->nch, g->L);
        tk_set_grid(k, tk_ceil_div(k, tk_dim(k, g->Vv, 3), i64c(k, g->V)), H,
                    tk_mul(k, B, g->nseg));
    } else {
        tk_set_grid(k, tk_ceil_div(k, tk_dim(k, g->Vv, 3), i64c(k, g->V)), H, B);
    }
    g->v0 = tk_mul(k, tk_block_id_i64(k, 0), i64c(k, g->V));
    g->h = tk_block_id_i64(k, 1);
    if (g->c.seg)
        seg_ids(g, tk_block_id_i64(k, 2));
    else
        g->b = tk_block_id_i64(k, 2);
    g->w = tk_warp_id_i64(k);
    g->r0 = tk_mul(k, g->w, i64c(k, 16));
    if (!g->c.seg) g->nch = g->trips = tk_ceil_div(k, T, i64c(k, g->C));
    /* D / 16 from Wq's run-time size (capped at it): with a constant trip
     * count LLVM unrolls the piece loops (D 64), undoing what they are for */
    if (g->phi) /* F / 32 from PQ's */
        g->np = tk_min(k, tk_div(k, tk_dim(k, g->Q, 2), i64c(k, 32)), i64c(k, g->D / 16));
    else
        g->np = tk_min(k, tk_div(k, tk_dim(k, g->Wq, 1), i64c(k, 16)), i64c(k, g->D / 16));
    g->nf = tk_mul(k, g->np, i64c(k, 2));
    tk_value_set_name(g->v0, "v0");
    tk_value_set_name(g->r0, "r0");
    shared_tiles(g);
    if (g->state) tk_if_begin(k, tk_gt(k, g->trips, i64c(k, 0)));
    if (!g->phi) copy_weights(g);
    copy_qk(g, chunk_of(g, i64c(k, 0)));
    copy_v(g, i64c(k, 0), chunk_of(g, i64c(k, 0)));
    if (g->state) tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    if (!g->c.bias || g->phi) return;
    tk_hh_fm fm = fm_of(g);
    if (!g->state) tk_hh_bias_cols(&fm, g->Bq, g->sBq, 0);
    tk_hh_bias_cols(&fm, g->Bk, g->sBk, 1 % g->W);
}

/* ---- segments: the states in St ------------------------------------------------ */
/* Slot s's slab (s·W + w): features 16j .. 16j + 15. */
static tk_value *slab_of(hh *g, int s) { return tk_add(g->k, i64c(g->k, (int64_t)s * g->W), g->w); }

/* Segment s's entry of St (its first index). */
static tk_value *st_entry(hh *g, tk_value *s) {
    tk_kernel *k = g->k;
    tk_value *xb = tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), tk_dim(k, g->Q, 0)), g->b);
    return tk_add(k, tk_mul(k, xb, g->nseg), s);
}

/* *acc plus, in order, the St entries of segments 0 .. seg - 1 at (row,
 * 0) as type ty: one value a loop, so that only one sum is in flight. */
static void add_segments(hh *g, tk_type ty, tk_value *row, tk_value **acc) {
    tk_kernel *k = g->k;
    tk_value *cur, *next;
    tk_value *s = tk_for_begin(k, i64c(k, 0), g->seg, i64c(k, 1), 1, acc, &cur);
    {
        tk_value *idx[4] = {st_entry(g, s), g->h, row, i64c(k, 0)};
        next = tk_add(k, cur, tk_load(k, ty, g->St, idx, 0.0f));
    }
    tk_for_end(k, 1, &next, acc);
}

/* init (zeros, as state_init's) plus the earlier segments' states: the
 * owned slabs of S, then their z1. */
static void add_other_segments(hh *g, tk_value **init) {
    tk_kernel *k = g->k;
    for (int s = 0; s < g->slots; s++)
        add_segments(g, tile(TK_F32, 16, g->V, TK_ROW), tk_mul(k, slab_of(g, s), i64c(k, 16)),
                     &init[s]);
    if (!g->z) return;
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    for (int s = 0; s < g->slots; s++)
        add_segments(g, vt, tk_add(k, i64c(k, g->F), slab_of(g, s)), &init[g->slots + s]);
}

/* The state pass's end: the owned slabs of S (and z1) to the segment's St
 * entry, where a later segment reads them. */
static void state_write(hh *g, tk_value *const *fin) {
    tk_kernel *k = g->k;
    tk_if_begin(k, seg_used(g));
    tk_value *e = st_entry(g, g->seg), *c0 = i64c(k, 0);
    for (int s = 0; s < g->slots; s++) {
        tk_value *j = slab_of(g, s);
        tk_store(k, g->St, ((tk_value *[]){e, g->h, tk_mul(k, j, i64c(k, 16)), c0}), fin[s]);
        if (g->z)
            tk_store(k, g->St, ((tk_value *[]){e, g->h, tk_add(k, i64c(k, g->F), j), c0}),
                     fin[g->slots + s]);
    }
    tk_if_end(k, 0, NULL, NULL);
}

/* The state's first values: init[s] slab slot s, init[slots + s] its key
 * sums (with z); zeros, or in a segment's run the earlier segments' sum.
 * The owned slabs' dtype copies set to them (the state pass reads none). */
static int state_init(hh *g, tk_value **init) {
    tk_kernel *k = g->k;
    int n = 0;
    bool run = g->c.seg == TK_HEDGEHOG_SEG_RUN;
    for (int s = 0; s < g->slots; s++) init[n++] = tk_zeros(k, tile(TK_F32, 16, g->V, TK_ROW));
    if (g->z)
        for (int s = 0; s < g->slots; s++)
            init[n++] = tk_zeros(k, tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW));
    if (run) add_other_segments(g, init);
    if (g->state) return n;
    for (int s = 0; s < g->slots; s++) {
        tk_value *j16 = tk_mul(k, tk_add(k, i64c(k, (int64_t)s * g->W), g->w), i64c(k, 16));
        sts(g, g->sS, j16, i64c(k, 0), run ? init[s] : tk_zeros(k, tile(TK_F32, 16, g->V, TK_ROW)));
        if (!g->z) continue;
        tk_value *z16 = tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW));
        sts(g, g->sZ, j16, i64c(k, 0), run ? tk_add(k, z16, init[g->slots + s]) : z16);
    }
    return n;
}

/* Top of trip ch: its copies have landed and every warp is past trip
 * ch - 1; v of ch + 1 is issued into the other stage. Returns the stage. */
static tk_value *arrive(hh *g, tk_value *ch) {
    tk_kernel *k = g->k;
    tk_value *st = tk_rem(k, ch, i64c(k, 2)), *ch1 = tk_add(k, ch, i64c(k, 1));
    tk_async_wait(k, 0);
    tk_barrier(k); /* chunk ch landed for all; every warp left chunk ch - 1 */
    tk_if_begin(k, tk_lt(k, ch1, g->trips));
    copy_v(g, tk_sub(k, i64c(k, 1), st), chunk_of(g, ch1));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    return st;
}

/* ---- the chunk's output, the state ---------------------------------------------- */
/* φ(q)ᵀ's pieces [16 features, 16 tokens] are the A of ATB mmas: φ(q)·X
 * over the features, 16 at a time. The scores (A) and the state's terms
 * run one after the other, so that only one set of accumulators is live. */

/* Key block kb's scores for this warp's rows, φq·φkᵀ, causal-masked. */
static tk_value *scores(hh *g, int kb) {
    tk_kernel *k = g->k;
    int nb = g->C < KB ? g->C : KB;
    tk_value *j0 = i64c(k, (int64_t)kb * nb), *init = tk_zeros(k, tile(TK_F32, 16, nb, TK_ROW));
    tk_value *cur, *next, *fin;
    tk_value *f = tk_for_begin(k, i64c(k, 0), g->nf, i64c(k, 1), 1, &init, &cur);
    {
        tk_value *r = tk_mul(k, f, i64c(k, 16));
        next = tk_mma(k, TK_MMA_ATB, lds(g, g->sPq, 16, 16, TK_COL, r, g->r0),
                      lds(g, g->sPk, 16, nb, TK_COL, r, j0), cur);
    }
    tk_for_end(k, 1, &next, &fin);
    return tk_mask(k, fin, TK_MASK_CAUSAL, g->r0, j0, 0.0f);
}

/* The state's terms added: o += φ(q)·S; with z, z += φ(q)·z1 (an mma
 * against z1 in every column: equal columns). */
static tk_value *inter(hh *g, tk_value *o, tk_value **z) {
    tk_kernel *k = g->k;
    int n = g->z ? 2 : 1;
    tk_value *init[2] = {o, tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW))}, *cur[2], *next[2], *fin[2];
    tk_value *f = tk_for_begin(k, i64c(k, 0), g->nf, i64c(k, 1), n, init, cur);
    {
        tk_value *r = tk_mul(k, f, i64c(k, 16)), *c0 = i64c(k, 0);
        tk_value *qp = lds(g, g->sPq, 16, 16, TK_COL, r, g->r0);
        next[0] = tk_mma(k, TK_MMA_ATB, qp, lds(g, g->sS, 16, g->V, TK_COL, r, c0), cur[0]);
        if (n > 1)
            next[1] = tk_mma(k, TK_MMA_ATB, qp, lds(g, g->sZ, 16, 16, TK_COL, r, c0), cur[1]);
    }
    tk_for_end(k, n, next, fin);
    if (g->z) *z = tk_add(k, *z, tk_row_max(k, fin[1]));
    return fin[0];
}

/* acc + a·v over the value columns of stage block j0 (nb rows), 16
 * columns at a time: a [16, nb] dtype; acc [16, V] f32 (NULL: zeros).
 * (v whole would hold C·V/64 registers: 64 at 64 columns.) */
static tk_value *times_v(hh *g, tk_value *a, tk_value *sv, tk_value *j0, int nb, tk_value *acc) {
    tk_kernel *k = g->k;
    tk_value *o = NULL;
    for (int c = 0; c < g->V; c += 16) {
        tk_value *vc = lds(g, sv, nb, 16, TK_COL, j0, i64c(k, c));
        tk_value *oc = tk_mma(k, TK_MMA_AB, a, vc, acc ? tk_slice(k, acc, 0, c, 16, 16) : NULL);
        o = o ? tk_concat(k, 1, o, oc) : oc;
    }
    return o;
}

/* o, z of this warp's rows: over the chunk's key blocks o += A·v, z +=
 * rowsum(A), then the state's terms. A key block after all of this warp's
 * rows is skipped (8 warps). *z: NULL without z. */
static tk_value *chunk_attend(hh *g, tk_value *st, tk_value **z) {
    tk_kernel *k = g->k;
    int nb = g->C < KB ? g->C : KB, n = g->z ? 2 : 1;
    tk_value *o = NULL, *sv = tk_stage(k, g->sV, st);
    for (int kb = 0; kb < g->C / nb; kb++) {
        tk_value *j0 = i64c(k, (int64_t)kb * nb), *carry[2] = {o, *z}, *res[2];
        if (kb) tk_if_begin(k, tk_lt(k, j0, tk_add(k, g->r0, i64c(k, 16))));
        tk_value *a = scores(g, kb);
        res[0] = times_v(g, tk_cvt(k, a, g->dt), sv, j0, nb, o);
        if (g->z) res[1] = kb ? tk_add(k, *z, tk_row_sum(k, a)) : tk_row_sum(k, a);
        if (kb) {
            tk_else(k, n, res);
            tk_if_end(k, n, carry, res);
        }
        o = res[0];
        if (g->z) *z = res[1];
    }
    return inter(g, o, z);
}

/* o and z of this warp's rows, scaled (normalized), to O and Z. */
static void write_out(hh *g, tk_value *c0, tk_value *o, tk_value *z) {
    tk_kernel *k = g->k;
    if (g->c.normalize) /* s·num / (s·z + eps) */
        o = tk_mul(k, o, tk_div(k, g->scale, tk_add(k, tk_mul(k, z, g->scale), g->eps)));
    else
        o = tk_mul(k, o, g->scale);
    tk_value *row = tk_add(k, c0, g->r0);
    tk_store(k, g->O, ((tk_value *[]){g->b, g->h, row, g->v0}), tk_cvt(k, o, g->dt));
    if (!g->Z) return;
    /* one block of the head's value slices writes z */
    tk_if_begin(k, tk_eq(k, tk_block_id_i64(k, 0), i64c(k, 0)));
    tk_store(k, g->Z, ((tk_value *[]){g->b, g->h, row}), tk_mul(k, z, g->scale));
    tk_if_end(k, 0, NULL, NULL);
}

/* For each owned slab j (features 16j..16j+15): S_j += φkᵀ[j] v and z1_j
 * += Σ_tokens φkᵀ[j], their dtype copies to sS and sZ; next as
 * state_init's init. (The last chunk's rows past T add φ of zero rows to
 * z1, which no chunk reads.) */
static void state_update(hh *g, tk_value *st, tk_value *const *cur, tk_value **next) {
    tk_kernel *k = g->k;
    tk_value *z = i64c(k, 0), *sv = tk_stage(k, g->sV, st);
    for (int s = 0; s < g->slots; s++) {
        tk_value *j16 = tk_mul(k, tk_add(k, i64c(k, (int64_t)s * g->W), g->w), i64c(k, 16));
        tk_value *pk = lds(g, g->sPk, 16, g->C, TK_ROW, j16, z);
        next[s] = times_v(g, pk, sv, z, g->C, cur[s]);
        if (!g->state) sts(g, g->sS, j16, z, next[s]); /* the state pass reads no S */
        if (!g->z) continue;
        tk_value *sum = cur[g->slots + s];
        for (int c = 0; c < g->C; c += 16) /* 16 columns at a time in f32 */
            sum = tk_add(k, sum, tk_row_sum(k, tk_cvt(k, tk_slice(k, pk, 0, c, 16, 16), TK_F32)));
        next[g->slots + s] = sum;
        if (!g->state)
            sts(g, g->sZ, j16, z, tk_add(k, tk_zeros(k, tile(TK_F32, 16, 16, TK_ROW)), sum));
    }
}

/* The feature maps of the chunk's k then q, each rescaled after a barrier;
 * q and k of chunk ch + 1 issued once every warp has read this chunk's.
 * Two of the barriers (marked lanes) order a warp's stores before its own
 * loads of them by other lanes, which the interpreter's race checker takes
 * as ordered (docs/DESIGN.md): without them every test still passes; a
 * warp-level sync would do, the API has none. The others it demands. */
static void feature_maps(hh *g, tk_value *ch1) {
    tk_kernel *k = g->k;
    tk_hh_fm fm = fm_of(g);
    tk_value *fk = tk_hh_feature_map(&fm, g->sK, g->sWk, g->sBk, g->sPk);
    tk_barrier(k); /* lanes: the rescale reads back φk's exps */
    tk_hh_rescale(&fm, g->sPk, fk);
    tk_value *fq = tk_hh_feature_map(&fm, g->sQ, g->sWq, g->sBq, g->sPq);
    tk_barrier(k); /* φk final for every warp; every warp has read sQ, sK */
    tk_if_begin(k, tk_lt(k, ch1, g->trips));
    copy_qk(g, chunk_of(g, ch1));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
    tk_hh_rescale(&fm, g->sPq, fq);
    tk_barrier(k); /* lanes: the scores read back φq */
}

/* The state pass's chunk: φ of the keys alone (no output), then the
 * state's update; k of trip ch1 issued once every warp has read sK. */
static void key_map(hh *g, tk_value *ch1) {
    tk_kernel *k = g->k;
    tk_hh_fm fm = fm_of(g);
    tk_value *fk = tk_hh_feature_map(&fm, g->sK, g->sWk, g->sBk, g->sPk);
    tk_barrier(k); /* lanes: the rescale reads back φk's exps */
    tk_hh_rescale(&fm, g->sPk, fk);
    tk_barrier(k); /* φk final for every warp; every warp has read sK */
    tk_if_begin(k, tk_lt(k, ch1, g->trips));
    copy_qk(g, chunk_of(g, ch1));
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

/* phi: chunk ch1's φ(q)ᵀ or φ(k)ᵀ issued (its tile's last reader past a
 * barrier), landing by the next trip's arrive. */
static void next_phi(hh *g, tk_value *ch1, bool q) {
    tk_kernel *k = g->k;
    tk_if_begin(k, tk_lt(k, ch1, g->trips));
    copy_phi(g, chunk_of(g, ch1), q);
    tk_if_end(k, 0, NULL, NULL);
    tk_async_commit(k);
}

static void build(hh *g) {
    tk_kernel *k = g->k;
    params(g);
    setup(g);
    tk_value *init[2 * MAX_SLOTS], *cur[2 * MAX_SLOTS], *next[2 * MAX_SLOTS];
    tk_value *fin[2 * MAX_SLOTS];
    int n = state_init(g, init);
    tk_value *ch = tk_for_begin(k, i64c(k, 0), g->trips, i64c(k, 1), n, init, cur);
    {
        tk_value *st = arrive(g, ch), *ch1 = tk_add(k, ch, i64c(k, 1));
        if (g->state) {
            if (!g->phi) key_map(g, ch1);
        } else {
            if (!g->phi) feature_maps(g, ch1);
            tk_value *z = NULL, *o = chunk_attend(g, st, &z);
            write_out(g, tk_mul(k, chunk_of(g, ch), i64c(k, g->C)), o, z);
            tk_barrier(k); /* every warp is done reading sS and sZ (phi: and sPq) */
            if (g->phi) next_phi(g, ch1, true);
        }
        state_update(g, st, cur, next);
        if (g->phi) {
            tk_barrier(k); /* every warp is done reading sPk */
            next_phi(g, ch1, false);
        }
    }
    tk_for_end(k, n, next, fin);
    if (g->state) state_write(g, fin);
}

/* ---- tk_hedgehog_build ------------------------------------------------------------ */
static tk_status bad(tk_ctx *ctx, const char *fn, const char *what, int v, const char *want) {
    return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is %d; %s", fn, what, v, want);
}

static tk_status check_flag(tk_ctx *ctx, const char *fn, const char *what, int v) {
    return v == 0 || v == 1 ? TK_OK : bad(ctx, fn, what, v, "expected 0 or 1");
}

static tk_status check_config(tk_ctx *ctx, const char *fn, const tk_hedgehog_config *c) {
    tk_status s;
    if (c->dtype != TK_BF16 && c->dtype != TK_F16)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: dtype is %s; expected TK_BF16 or TK_F16", fn,
                                tk_dtype_name(c->dtype));
    if (c->head_dim != 64 && c->head_dim != 128)
        return bad(ctx, fn, "head_dim", c->head_dim, "expected 64 or 128");
    if ((s = check_flag(ctx, fn, "normalize", c->normalize)) ||
        (s = check_flag(ctx, fn, "stats", c->stats)) || (s = check_flag(ctx, fn, "bias", c->bias)))
        return s;
    int vc = c->v_cols;
    if (vc != 0 && (vc < 16 || vc > 128 || vc % 16))
        return bad(ctx, fn, "v_cols", vc, "expected 0 or a multiple of 16 in 16 .. 128");
    int w = c->warps;
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8)
        return bad(ctx, fn, "warps", w, "expected 0, 1, 2, 4 or 8");
    if (c->seg < TK_HEDGEHOG_SEG_NONE || c->seg > TK_HEDGEHOG_SEG_STATE)
        return bad(ctx, fn, "seg", c->seg, "expected 0 (none), 1 (run) or 2 (state)");
    if (c->f_cols || c->c_side)
        return bad(ctx, fn, c->f_cols ? "f_cols" : "c_side", c->f_cols ? c->f_cols : c->c_side,
                   "the forward takes 0");
    if ((s = check_flag(ctx, fn, "phi", c->phi))) return s;
    tk_hedgehog_config r = tk_hedgehog_resolve(c);
    size_t smem = tk_hedgehog_smem_bytes(&r);
    if (smem > TK_HEDGEHOG_SMEM_MAX)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: head_dim %d, v_cols %d and warps %d need %zu bytes of shared "
                                "memory; a block has at most %d: fewer v_cols or warps",
                                fn, r.head_dim, r.v_cols, r.warps, smem, TK_HEDGEHOG_SMEM_MAX);
    return TK_OK;
}

/* Registers a thread may use: what lets the blocks that fit in an H100's
 * shared memory (228 KiB an SM, 1 KiB of it each block's) run together.
 * Shared memory allows 2 blocks of 4 warps at D 64 and 1 at D 128, so this
 * is 255 for every configuration today (ptxas sm_90a, the defaults: 232
 * and 242 registers, no spills; tk/tk_kernels.h). */
static int reg_cap(const tk_hedgehog_config *c) {
    size_t per = tk_hedgehog_smem_bytes(c) + 1024;
    int blocks = (int)((228 * 1024) / per), threads = 32 * c->warps;
    int cap = blocks ? 65536 / (blocks * threads) / 8 * 8 : 255;
    return cap > 255 ? 255 : cap;
}

tk_status tk_hedgehog_build(tk_ctx *ctx, const tk_hedgehog_config *cfg, tk_kernel **out) {
    const char *fn = "tk_hedgehog_build";
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!out || !cfg)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, out ? "cfg" : "out");
    *out = NULL;
    if (cfg->part != TK_HEDGEHOG_FWD && cfg->seg)
        return bad(ctx, fn, "seg", cfg->seg, "only the forward (part 0) takes segments");
    if (cfg->part != TK_HEDGEHOG_FWD && cfg->part != TK_HEDGEHOG_BWD_DPHI && cfg->phi)
        return bad(ctx, fn, "phi", cfg->phi,
                   "only the forward (part 0) and BWD_DPHI (part 2) read mapped inputs");
    if (cfg->part != TK_HEDGEHOG_FWD) return tk_hh_build_part(ctx, cfg, out);
    tk_status s = check_config(ctx, fn, cfg);
    if (s) return s;
    hh g = {.c = tk_hedgehog_resolve(cfg)};
    g.dt = g.c.dtype, g.D = g.c.head_dim, g.F = 2 * g.D, g.W = g.c.warps, g.C = 16 * g.W;
    g.V = g.c.v_cols, g.slots = g.F / 16 / g.W, g.z = g.c.normalize || g.c.stats;
    g.state = g.c.seg == TK_HEDGEHOG_SEG_STATE;
    g.phi = g.c.phi;
    static const char *const segs[] = {"", "_segrun", "_segstate"};
    char name[96];
    snprintf(name, sizeof name, "tk_hedgehog_fwd_%s_d%d_v%d_w%d%s%s%s%s%s", tk_dtype_name(g.dt),
             g.D, g.V, g.W, g.c.normalize ? "_norm" : "", g.c.stats ? "_stats" : "",
             g.c.bias && !g.phi ? "_bias" : "", segs[g.c.seg], g.phi ? "_phi" : "");
    if ((s = tk_kernel_create(ctx, name, g.W, &g.k))) return s;
    tk_kernel_set_maxnreg(g.k, reg_cap(&g.c));
    build(&g);
    if ((s = tk_kernel_finish(g.k))) {
        tk_ctx_set_error(ctx, s, "%s: %s", fn, tk_kernel_error(g.k));
        tk_kernel_destroy(g.k);
        return s;
    }
    *out = g.k;
    return TK_OK;
}
