/* Based linear attention, backward (the forward and its notation:
 * kernels/based.c). With g_i = 1/(z_i + eps), dn_i = g_i do_i (the
 * gradient of num_i) and dz_i = -g_i (do_i·o_i) (normalize; else dn = do,
 * dz = 0):
 *   dv_j = Σ_{i>=j} a_ij dn_i
 *   ds_ij = (dn_i·v_j + dz_i)(1 + s_ij),  dq_i = scale Σ_j ds_ij k_j,
 *   dk_j = scale Σ_i ds_ij q_i
 * chunked like the forward: products inside a chunk, linear states across
 * chunks. Four kernels (tk/tk_kernels.h has their parameters):
 *   PREP  dz_i from do, o and z (a row reduction over all of Dv)
 *   DQ    chunks first to last with the forward's state S = Σ φ(k) vᵀ (and
 *         z1, Z2): dq_i's earlier-chunk part is the gradient of φ(q_i)ᵀ S
 *         through the feature map (tk_based_state_grad), plus dz_i's
 *   DKV   chunks last to first with R = Σ_{later i} φ(q_i) dn_iᵀ (and the
 *         dz-weighted sums rz1 = Σ dz q, RZ2 = Σ dz q qᵀ): dv_j's
 *         later-chunk part is φ(k_j)ᵀ R, dk_j's the gradient of it
 *   SUM   dq and dk summed over the value slices
 * A block owns `v_cols` value columns, so dq and dk come in partial sums,
 * one per slice (f32 in a workspace), added in a fixed order by SUM: the
 * result is deterministic. dz's terms belong to the first slice's block. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "based_parts.h"

static tk_value *i64c(tk_kernel *k, int64_t v) { return tk_const_i64(k, v); }
static tk_value *f32c(tk_kernel *k, float v) { return tk_const_f32(k, v); }

/* ---- PREP and SUM: 16 rows a warp, grid (ceil(T / 64), H, B) ---------- */
#define ROW_WARPS TK_BASED_ROW_WARPS

static tk_value *row_grid(tk_kernel *k, tk_value *view, tk_value **b, tk_value **h) {
    tk_value *T = tk_dim(k, view, 2);
    tk_set_grid(k, tk_ceil_div(k, T, i64c(k, 16 * ROW_WARPS)), tk_dim(k, view, 1),
                tk_dim(k, view, 0));
    *h = tk_block_id_i64(k, 1);
    *b = tk_block_id_i64(k, 2);
    return tk_add(k, tk_mul(k, tk_block_id_i64(k, 0), i64c(k, 16 * ROW_WARPS)),
                  tk_mul(k, tk_warp_id_i64(k), i64c(k, 16)));
}

/* DZ_i = -(dO_i·O_i) / (Z_i + eps), over Dv in 16-column tiles. */
static void build_prep(tk_kernel *k, tk_dtype dt) {
    tk_value *DO = tk_param_tensor(k, "dO", dt, 4), *O = tk_param_tensor(k, "O", dt, 4);
    tk_value *Z = tk_param_tensor(k, "Z", TK_F32, 3), *DZ = tk_param_tensor(k, "DZ", TK_F32, 3);
    tk_value *eps = tk_param_scalar(k, "eps", TK_F32);
    tk_value *b, *h, *r = row_grid(k, DO, &b, &h);
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    tk_type tt = tk_tile_type(dt, 16, 16, TK_WARP, TK_ROW);
    tk_value *init = tk_zeros(k, vt), *cur, *fin;
    tk_value *c0 = tk_for_begin(k, i64c(k, 0), tk_dim(k, DO, 3), i64c(k, 16), 1, &init, &cur);
    {
        tk_value *idx[4] = {b, h, r, c0};
        tk_value *d = tk_cvt(k, tk_load(k, tt, DO, idx, 0.0f), TK_F32);
        tk_value *o = tk_cvt(k, tk_load(k, tt, O, idx, 0.0f), TK_F32);
        tk_value *next = tk_add(k, cur, tk_row_sum(k, tk_mul(k, d, o)));
        tk_for_end(k, 1, &next, &fin);
    }
    tk_value *iz[3] = {b, h, r};
    tk_value *z = tk_add(k, tk_load(k, vt, Z, iz, 0.0f), eps);
    tk_store(k, DZ, iz, tk_div(k, tk_neg(k, fin), z));
}

/* Out[b] = Σ_s P[s·B + b], s = 0 .. NV - 1 in order. */
static void build_sum(tk_kernel *k, tk_dtype dt) {
    tk_value *P = tk_param_tensor(k, "P", TK_F32, 4), *Out = tk_param_tensor(k, "Out", dt, 4);
    tk_value *b, *h, *r = row_grid(k, Out, &b, &h);
    tk_value *B = tk_dim(k, Out, 0), *nv = tk_div(k, tk_dim(k, P, 0), B);
    tk_type tt = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
    tk_value *init = tk_zeros(k, tt), *cur, *fin;
    tk_value *s = tk_for_begin(k, i64c(k, 0), nv, i64c(k, 1), 1, &init, &cur);
    {
        tk_value *idx[4] = {tk_add(k, tk_mul(k, s, B), b), h, r, i64c(k, 0)};
        tk_value *next = tk_add(k, cur, tk_load(k, tt, P, idx, 0.0f));
        tk_for_end(k, 1, &next, &fin);
    }
    tk_store(k, Out, ((tk_value *[]){b, h, r, i64c(k, 0)}), tk_cvt(k, fin, dt));
}

/* ---- DQ and DKV ----------------------------------------------------------- */
typedef struct bwd {
    tk_based_kernel g;
    tk_value *Z, *DZ, *P, *dV, *eps;
    tk_value *first; /* bool: the block of the first value slice (dz's terms) */
    tk_value *S[TK_BASED_MAX_SLOTS];
    tk_value *m1, *M2; /* z1 and Z2 (DQ), rz1 and RZ2 (DKV) */
    tk_value *st, *c0;
} bwd;

static void bwd_params(bwd *w, int dkv) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_based_params(g);
    g->DO = tk_param_tensor(k, "dO", g->dt, 4);
    if (g->c->normalize) {
        w->Z = tk_param_tensor(k, "Z", TK_F32, 3);
        w->DZ = tk_param_tensor(k, "DZ", TK_F32, 3);
    }
    if (g->c->seg != TK_BASED_SEG_STATE) {
        w->P = tk_param_tensor(k, dkv ? "dKp" : "dQp", TK_F32, 4);
        if (dkv) w->dV = tk_param_tensor(k, "dV", g->dt, 4);
    }
    tk_based_seg_params(g);
    g->scale = tk_param_scalar(k, "scale", TK_F32);
    w->eps = tk_param_scalar(k, "eps", TK_F32);
    g->reverse = dkv;
    tk_based_setup(g);
    w->first = tk_eq(k, g->v0, i64c(k, 0));
}

/* dn for this warp's 16 rows of the chunk (bf16) and their dz (f32, 0
 * outside the first slice's block or unnormalized). */
static tk_value *dn_band(bwd *w, tk_value **dz) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_value *idx[2] = {g->r0, i64c(k, 0)};
    tk_value *d = tk_cvt(k,
                         tk_load(k, tk_tile_type(g->dt, 16, g->DVB, TK_WARP, TK_ROW),
                                 tk_stage(k, g->sDO, w->st), idx, 0.0f),
                         TK_F32);
    tk_type vt = tk_vec_type(TK_F32, 16, TK_PER_ROW, TK_WARP, TK_ROW);
    *dz = tk_zeros(k, vt);
    if (!g->c->normalize) return tk_cvt(k, d, g->dt);
    tk_value *iz[3] = {g->b, g->h, tk_add(k, w->c0, g->r0)};
    tk_value *gi = tk_div(k, f32c(k, 1.0f), tk_add(k, tk_load(k, vt, w->Z, iz, 0.0f), w->eps));
    *dz = tk_select(k, w->first, tk_load(k, vt, w->DZ, iz, 0.0f), *dz);
    return tk_cvt(k, tk_mul(k, d, gi), g->dt);
}

static tk_value *partial_idx(bwd *w, tk_value *out[4]) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_value *x = tk_block_id_i64(k, 0);
    out[0] = tk_add(k, tk_mul(k, x, tk_dim(k, g->Q, 0)), g->b);
    out[1] = g->h, out[2] = tk_add(k, w->c0, g->r0), out[3] = i64c(k, 0);
    return out[0];
}

/* dq for this warp's rows of the chunk: inside the chunk, from S, from dz. */
static void dq_out(bwd *w) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_value *z[2] = {i64c(k, 0), i64c(k, 0)}, *dz, *qb, *qf, *s;
    tk_value *dn = dn_band(w, &dz);
    tk_based_band(g, tk_stage(k, g->sQ, w->st), g->scale, &qb, &qf);
    tk_based_scores(g, qb, tk_stage(k, g->sK, w->st), &s);
    tk_value *vr = tk_load(k, tk_tile_type(g->dt, g->C, g->DVB, TK_WARP, TK_ROW),
                           tk_stage(k, g->sV, w->st), z, 0.0f);
    tk_value *da = tk_add(k, tk_mma(k, TK_MMA_ABT, dn, vr, NULL), dz);
    tk_value *ds = tk_mul(k, da, tk_add(k, s, f32c(k, 1.0f)));
    ds = tk_mask(k, ds, TK_MASK_CAUSAL, g->r0, i64c(k, 0), 0.0f);
    tk_value *kc = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL),
                           tk_stage(k, g->sK, w->st), z, 0.0f);
    tk_value *dq = tk_mma(k, TK_MMA_AB, tk_cvt(k, ds, g->dt), kc, NULL);
    dq = tk_add(k, dq, tk_based_state_grad(g, dn, qb));
    if (g->c->normalize) { /* dz_i (z1 + Z2 q_i) */
        tk_value *zq = tk_mma(k, TK_MMA_ABT, qb, tk_cvt(k, w->M2, g->dt), NULL);
        dq = tk_add(k, dq, tk_mul(k, tk_add(k, zq, w->m1), dz));
    }
    tk_value *pi[4];
    partial_idx(w, pi);
    tk_store(k, w->P, pi, tk_mul(k, dq, g->scale));
}

/* Keep (row j, column i) with i >= j: keys meet the queries at or after them. */
static tk_value *keep_later(tk_based_kernel *g) {
    tk_kernel *k = g->k;
    tk_type ft = tk_tile_type(TK_F32, 16, g->C, TK_WARP, TK_ROW);
    tk_value *row = tk_add(k, tk_iota(k, ft, TK_PER_ROW), tk_cvt(k, g->r0, TK_F32));
    return tk_ge(k, tk_iota(k, ft, TK_PER_COL), row);
}

/* a(s) = 1 + s + s²/2 on (row j, column i) with i >= j, else 0. */
static tk_value *scores_later(tk_based_kernel *g, tk_value *s) {
    tk_kernel *k = g->k;
    tk_value *a = tk_add(k, tk_mul(k, s, tk_add(k, tk_mul(k, s, f32c(k, 0.5f)), f32c(k, 1.0f))),
                         f32c(k, 1.0f));
    return tk_select(k, keep_later(g), a,
                     tk_zeros(k, tk_tile_type(TK_F32, 16, g->C, TK_WARP, TK_ROW)));
}

/* dk and dv for this warp's 16 keys of the chunk. The chunk's dz_i enter
 * da as an mma too: selector 0 (column 0 ones) against sDZ (column 0 dz_i),
 * so no vector of C values is loaded from global memory. */
static void dkv_out(bwd *w, tk_value *sDN, tk_value *sDZ) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_value *z[2] = {i64c(k, 0), i64c(k, 0)}, *kb, *kf;
    tk_value *qst = tk_stage(k, g->sQ, w->st);
    tk_based_band(g, tk_stage(k, g->sK, w->st), NULL, &kb, &kf);
    tk_value *qr = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_ROW), qst, z, 0.0f);
    tk_value *s = tk_mul(k, tk_mma(k, TK_MMA_ABT, kb, qr, NULL), g->scale); /* [j, i] */
    tk_value *dnc = tk_load(k, tk_tile_type(g->dt, g->C, g->DVB, TK_WARP, TK_COL), sDN, z, 0.0f);
    tk_value *dv = tk_mma(k, TK_MMA_AB, tk_cvt(k, scores_later(g, s), g->dt), dnc, NULL);
    dv = tk_based_state_apply(g, kb, kf, dv);
    tk_value *pi[4];
    partial_idx(w, pi);
    tk_store(k, w->dV, ((tk_value *[]){g->b, g->h, pi[2], g->v0}), tk_cvt(k, dv, g->dt));

    tk_value *iv[2] = {g->r0, i64c(k, 0)};
    tk_value *vb = tk_load(k, tk_tile_type(g->dt, 16, g->DVB, TK_WARP, TK_ROW),
                           tk_stage(k, g->sV, w->st), iv, 0.0f);
    tk_value *dnr = tk_load(k, tk_tile_type(g->dt, g->C, g->DVB, TK_WARP, TK_ROW), sDN, z, 0.0f);
    tk_value *da = tk_mma(k, TK_MMA_ABT, vb, dnr, NULL);
    if (sDZ) {
        tk_value *dzr = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_ROW), sDZ, z, 0.0f);
        da = tk_mma(k, TK_MMA_ABT, tk_based_selector(g, 0), dzr, da);
    }
    tk_value *ds = tk_mul(k, da, tk_add(k, s, f32c(k, 1.0f)));
    ds = tk_select(k, keep_later(g), ds,
                   tk_zeros(k, tk_tile_type(TK_F32, 16, g->C, TK_WARP, TK_ROW)));
    tk_value *qc = tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL), qst, z, 0.0f);
    tk_value *dk = tk_mul(k, tk_mma(k, TK_MMA_AB, tk_cvt(k, ds, g->dt), qc, NULL), g->scale);
    dk = tk_add(k, dk, tk_based_state_grad(g, vb, kb));
    if (g->c->normalize) { /* rz1 + RZ2 k_j */
        tk_value *rk = tk_mma(k, TK_MMA_ABT, kb, tk_cvt(k, w->M2, g->dt), NULL);
        dk = tk_add(k, dk, tk_add(k, rk, w->m1));
    }
    tk_store(k, w->P, pi, dk);
}

/* DKV's shared inputs of a chunk, this warp's rows: φ(q), dn, and with
 * normalize dz·q (sT) and dz in column 0 (sDZ). */
static void dkv_stage(bwd *w, tk_value *sDN, tk_value *sT, tk_value *sDZ) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    tk_value *dz, *qb, *qf, *idx[2] = {g->r0, i64c(k, 0)};
    tk_value *qst = tk_stage(k, g->sQ, w->st);
    tk_based_phi_to_shared(g, qst, g->scale);
    tk_store(k, sDN, idx, dn_band(w, &dz));
    if (!g->c->normalize) return;
    tk_based_band(g, qst, g->scale, &qb, &qf);
    tk_store(k, sT, idx, tk_cvt(k, tk_mul(k, qf, dz), g->dt));
    tk_type ft = tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW);
    tk_value *col0 = tk_eq(k, tk_iota(k, ft, TK_PER_COL), f32c(k, 0.0f));
    tk_value *dzt = tk_select(k, col0, tk_add(k, tk_zeros(k, ft), dz), tk_zeros(k, ft));
    tk_store(k, sDZ, idx, tk_cvt(k, dzt, g->dt));
}

static void build_bwd(bwd *w, int dkv) {
    tk_based_kernel *g = &w->g;
    tk_kernel *k = g->k;
    bwd_params(w, dkv);
    tk_value *sDN = dkv ? tk_shared(k, g->dt, g->C, g->DVB, TK_SMEM_SWIZZLE, 1) : NULL;
    bool zt = dkv && g->c->normalize;
    tk_value *sT = zt ? tk_shared(k, g->dt, g->C, 16, TK_SMEM_SWIZZLE, 1) : NULL;
    tk_value *sDZ = zt ? tk_shared(k, g->dt, g->C, 16, TK_SMEM_SWIZZLE, 1) : NULL;
    int n = g->slots + 2;
    tk_value *init[TK_BASED_MAX_SLOTS + 2], *cur[TK_BASED_MAX_SLOTS + 2];
    tk_value *next[TK_BASED_MAX_SLOTS + 2], *fin[TK_BASED_MAX_SLOTS + 2];
    bool state_pass = g->c->seg == TK_BASED_SEG_STATE; /* DKV: the segment's R alone */
    tk_based_state_init(g, init);
    tk_value *ch = tk_for_begin(k, i64c(k, 0), g->trips, i64c(k, 1), n, init, cur);
    {
        for (int s = 0; s < g->slots; s++) w->S[s] = cur[s];
        w->m1 = next[g->slots] = cur[g->slots];
        w->M2 = next[g->slots + 1] = cur[g->slots + 1];
        w->st = tk_based_arrive(g, ch);
        w->c0 = tk_mul(k, tk_based_chunk(g, ch), i64c(k, g->C));
        if (!dkv) {
            dq_out(w);
            tk_based_phi_to_shared(g, tk_stage(k, g->sK, w->st), NULL);
            tk_barrier(k); /* φ(k) complete; every warp is done reading S */
            tk_based_state_update(g, tk_stage(k, g->sV, w->st), w->S, next);
            if (g->c->normalize)
                tk_based_sums(g, tk_stage(k, g->sK, w->st), w->m1, w->M2, &next[g->slots],
                              &next[g->slots + 1]);
        } else {
            dkv_stage(w, sDN, sT, sDZ);
            tk_barrier(k); /* φ(q), dn, dz·q, dz complete */
            if (!state_pass) {
                dkv_out(w, sDN, sDZ);
                tk_barrier(k); /* every warp is done reading R */
            }
            tk_based_state_update(g, sDN, w->S, next);
            if (g->c->normalize) {
                tk_value *z[2] = {i64c(k, 0), i64c(k, 0)};
                tk_value *qst = tk_stage(k, g->sQ, w->st);
                tk_value *tr =
                    tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_ROW), sT, z, 0.0f);
                next[g->slots] = tk_add(k, w->m1, tk_col_sum(k, tk_cvt(k, tr, TK_F32)));
                tk_value *tc =
                    tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL), sT, z, 0.0f);
                tk_value *qc =
                    tk_load(k, tk_tile_type(g->dt, g->C, 16, TK_WARP, TK_COL), qst, z, 0.0f);
                tk_value *m = tk_mma(k, TK_MMA_ATB, tc, qc, NULL);
                next[g->slots + 1] = tk_add(k, w->M2, tk_mul(k, m, g->scale));
            }
        }
    }
    tk_for_end(k, n, next, fin);
    if (state_pass) tk_based_state_write(g, fin);
}

tk_status tk_based_build_bwd(tk_ctx *ctx, const tk_based_config *cfg, tk_kernel *k) {
    (void)ctx;
    if (cfg->part == TK_BASED_BWD_PREP) {
        build_prep(k, cfg->dtype);
        return TK_OK;
    }
    if (cfg->part == TK_BASED_BWD_SUM) {
        build_sum(k, cfg->dtype);
        return TK_OK;
    }
    bwd w = {0};
    tk_based_init(&w.g, k, cfg);
    build_bwd(&w, cfg->part == TK_BASED_BWD_DKV);
    return TK_OK;
}
