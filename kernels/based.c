/* Based linear attention (Arora et al. 2024), forward: causal attention whose
 * score is the 2nd-order Taylor expansion of exp, a(q, k) = 1 + s + s²/2 with
 * s = scale·q·k, over feature dim 16. The contract (parameters, grid) is in
 * tk/tk_kernels.h ("Based linear attention").
 *
 * a(q, k) = φ(q)·φ(k) with the 288 features φ(x) = [x⊗x/√2 (256), x (16),
 * 1, 0 x 15] (s²/2 = (q⊗q)·(k⊗k)/2), so the causal sum splits at chunks of C
 * rows into a quadratic part inside the chunk and a linear-state part:
 *   num_i = Σ_{j<=i, same chunk} a_ij v_j + φ(q_i)ᵀ S,   S = Σ_{earlier} φ(k_j) v_jᵀ
 *   z_i   = Σ_{j<=i, same chunk} a_ij     + c0 + q_i·z1 + ½ q_iᵀ Z2 q_i
 * (z1 = Σ k_j, Z2 = Σ k_j k_jᵀ, c0 the keys before the chunk) and
 * o_i = num_i / (z_i + eps), or num_i unnormalized.
 *
 * A block owns one (batch, head) and `v_cols` value columns, and walks the
 * chunks in order. Each warp computes the output of 16 rows of a chunk and
 * keeps, in registers, the f32 state S for the 16-feature slabs it owns
 * (slab j, 0..17, belongs to warp j mod W); z1 and Z2 every warp keeps
 * whole. Per chunk (q, k, v arrive in shared memory by cp.async, the next
 * chunk's copies overlapping this one's work):
 *   intra   s = q kᵀ (mma), a = 1 + s + s²/2 masked causal, o = a·v, z
 *   inter   o += Σ_j φ_j(q) · S_j, with S_j in bf16 from shared memory;
 *           φ_j(q) for j < 16 is q ⊙ q[:, j] / √2, where the column
 *           broadcast q[:, j] is an mma with a selector tile (exact)
 *   write   o (normalized), z
 *   state   φ(k) of the chunk into shared memory (each warp its 16 rows),
 *           S_j += φ_j(k)ᵀ v (mma Aᵀ·B), S_j to shared memory in bf16;
 *           z1 += Σ k, Z2 += kᵀk.
 * The state update is sequential over chunks (the recurrence), so the grid
 * is B·H·(Dv / v_cols) blocks; v_cols trades parallelism for redundant
 * intra-chunk work. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "based_parts.h"

typedef struct fwd {
    tk_based_kernel g;
    tk_value *O, *Z, *eps;
    tk_value *S[TK_BASED_MAX_SLOTS]; /* this warp's state slabs (carried) */
    tk_value *z1, *Z2;               /* key sums (carried)                */
} fwd;

/* The chunk's output for this warp's rows: intra + inter, and z. */
static void chunk_out(fwd *f, tk_value *st, tk_value *c0) {
    tk_based_kernel *g = &f->g;
    tk_kernel *k = g->k;
    tk_dtype dt = g->dt;
    tk_value *qb, *qf;
    tk_based_band(g, tk_stage(k, g->sQ, st), g->scale, &qb, &qf);
    tk_value *a = tk_based_scores(g, qb, tk_stage(k, g->sK, st), 0);
    tk_value *z = tk_row_sum(k, a);
    tk_value *vt =
        tk_load(k, tk_tile_type(dt, g->C, g->DVB, TK_WARP, TK_COL), tk_stage(k, g->sV, st),
                ((tk_value *[]){tk_based_i64(k, 0), tk_based_i64(k, 0)}), 0.0f);
    tk_value *o = tk_mma(k, TK_MMA_AB, tk_cvt(k, a, dt), vt, NULL);
    o = tk_based_state_apply(g, qb, qf, o);
    if (g->c->normalize || g->c->stats) {
        /* z += c0 + q·z1 + ½ q·(Z2 q) */
        tk_value *qz2 = tk_mma(k, TK_MMA_ABT, qb, tk_cvt(k, f->Z2, dt), NULL);
        tk_value *quad =
            tk_row_sum(k, tk_mul(k, qf, tk_add(k, f->z1, tk_mul(k, qz2, tk_const_f32(k, 0.5f)))));
        z = tk_add(k, tk_add(k, z, quad), tk_cvt(k, c0, TK_F32));
    }
    if (g->c->normalize) o = tk_mul(k, o, tk_div(k, tk_const_f32(k, 1.0f), tk_add(k, z, f->eps)));
    tk_value *row = tk_add(k, c0, g->r0);
    tk_store(k, f->O, ((tk_value *[]){g->b, g->h, row, g->v0}), tk_cvt(k, o, dt));
    if (f->Z) {
        /* one block of the head's value slices writes z */
        tk_if_begin(k, tk_eq(k, tk_block_id_i64(k, 0), tk_based_i64(k, 0)));
        tk_store(k, f->Z, ((tk_value *[]){g->b, g->h, row}), z);
        tk_if_end(k, 0, NULL, NULL);
    }
}

/* S_j += φ_j(k)ᵀ v for the slabs this warp owns (then S_j to shared
 * memory), z1 += Σ k, Z2 += kᵀk. */
static void chunk_state(fwd *f, tk_value *st, tk_value **next) {
    tk_based_kernel *g = &f->g;
    tk_kernel *k = g->k;
    tk_based_phi_to_shared(g, tk_stage(k, g->sK, st), NULL);
    tk_barrier(k); /* φ(k) complete; every warp is done reading S */
    tk_based_state_update(g, tk_stage(k, g->sV, st), f->S, next);
    if (g->c->normalize || g->c->stats)
        tk_based_sums(g, tk_stage(k, g->sK, st), f->z1, f->Z2, &next[g->slots],
                      &next[g->slots + 1]);
}

static void build(fwd *f) {
    tk_based_kernel *g = &f->g;
    tk_kernel *k = g->k;
    const tk_based_config *c = g->c;
    bool state_pass = c->seg == TK_BASED_SEG_STATE; /* the segment's S alone */
    tk_based_params(g);
    if (!state_pass) {
        f->O = tk_param_tensor(k, "O", g->dt, 4);
        f->Z = c->stats ? tk_param_tensor(k, "Z", TK_F32, 3) : NULL;
    }
    tk_based_seg_params(g);
    if (!state_pass) {
        g->scale = tk_param_scalar(k, "scale", TK_F32);
        f->eps = tk_param_scalar(k, "eps", TK_F32);
    }
    tk_based_setup(g);

    int n = g->slots + 2;
    tk_value *init[TK_BASED_MAX_SLOTS + 2], *cur[TK_BASED_MAX_SLOTS + 2];
    tk_value *next[TK_BASED_MAX_SLOTS + 2], *fin[TK_BASED_MAX_SLOTS + 2];
    tk_based_state_init(g, init);
    tk_value *ch = tk_for_begin(k, tk_based_i64(k, 0), g->trips, tk_based_i64(k, 1), n, init, cur);
    {
        for (int s = 0; s < g->slots; s++) f->S[s] = cur[s];
        f->z1 = cur[g->slots];
        f->Z2 = cur[g->slots + 1];
        tk_value *st = tk_based_arrive(g, ch);
        if (!state_pass) chunk_out(f, st, tk_mul(k, tk_based_chunk(g, ch), tk_based_i64(k, g->C)));
        next[g->slots] = f->z1;
        next[g->slots + 1] = f->Z2;
        chunk_state(f, st, next);
    }
    tk_for_end(k, n, next, fin);
    if (state_pass) tk_based_state_write(g, fin);
}

tk_status tk_based_build_fwd(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel *k) {
    (void)ctx;
    fwd f = {0};
    tk_based_init(&f.g, k, cfg);
    build(&f);
    return TK_OK;
}
