/* The attention backward on packed variable-length batches
 * (tk_attention_bwd_params.cu_seqlens_q/kv; the varlen kernels of
 * kernels/attention_bwd.c and attention_bwd_hopper.c):
 * - every kernel set and mode on the CPU interpreter (race checker on),
 *   with the calls tk_attention_backward makes (tk_attn_bwd_calls), at
 *   small ragged batches (empty sequences, sequences without keys or
 *   without queries, causal bottom-right per sequence, GQA) against float64
 *   gradients computed sequence by sequence; outputs NaN-poisoned with gaps
 *   that must stay untouched; keys no query sees get dK = dV = 0;
 * - bad parameters: a status naming the field;
 * - on a GPU (skipped without one): the backward in both modes and kernel
 *   sets against float64, and the deterministic mode bit-identical to the
 *   dense backward called on each sequence's rows.
 * O and L come from the float64 forward (O rounded to the dtype), as in
 * test_attention_bwd.c, so the gradients are the exact ones of the inputs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_bwd_parts.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/attn_check.h"
#include "util/devbuf.h"
#include "util/fixture.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/varlen.h"

#define MAX_SEQS 8

typedef struct vcase {
    int B;
    int lq[MAX_SEQS], lkv[MAX_SEQS];
    int Hq, Hkv, D, causal;
    tk_dtype dt;
} vcase;

/* Q, O, dO, dQ [Tq, Hq, D]; K, V, dK, dV [Tkv, Hkv, D]; L [Hq, Tq] */
enum { T_Q, T_K, T_V, T_O, T_DO, T_L, T_DQ, T_DK, T_DV, NT };

typedef struct problem {
    vcase c;
    int64_t Tq, Tkv;
    int32_t cu_q[MAX_SEQS + 1], cu_kv[MAX_SEQS + 1];
    float scale;
    ref_tensor t[NT];
    void *before[NT];
    double *want[3]; /* dQ, dK, dV (packed, logical) */
} problem;

static bool is_kv(int i) { return i == T_K || i == T_V || i == T_DK || i == T_DV; }

/* The float64 forward (into O, L) and backward of each sequence on its own. */
static void reference(problem *p) {
    const vcase *c = &p->c;
    const int64_t D = c->D, Hq = c->Hq, Hkv = c->Hkv;
    double *x[4];
    for (int i = 0; i < 4; i++) x[i] = ref_tensor_to_f64(&p->t[i == 3 ? T_DO : i]);
    double *o = calloc((size_t)ref_tensor_count(&p->t[T_O]), sizeof(double));
    ck_assert_ptr_nonnull(o);
    for (int b = 0; b < c->B; b++) { /* O and L, as the forward stores them */
        int64_t nq = c->lq[b], nk = c->lkv[b], q0 = p->cu_q[b];
        double *qs = tu_varlen_gather(x[T_Q], Hq, D, q0, nq);
        double *ks = tu_varlen_gather(x[T_K], Hkv, D, p->cu_kv[b], nk);
        double *vs = tu_varlen_gather(x[T_V], Hkv, D, p->cu_kv[b], nk);
        double *os = calloc((size_t)(Hq * (nq ? nq : 1) * D), sizeof(double));
        double *ls = malloc(sizeof(double) * (size_t)(Hq * (nq ? nq : 1)));
        ck_assert(os && ls);
        for (int64_t i = 0; i < Hq * nq; i++) ls[i] = -INFINITY;
        if (nq && nk) ref_attention(qs, ks, vs, os, ls, 1, Hq, Hkv, nq, nk, D, p->scale, c->causal);
        tu_varlen_scatter(o, os, Hq, D, q0, nq);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < nq; i++)
                ref_tensor_set(&p->t[T_L], h * p->Tq + q0 + i, ls[h * nq + i]);
        free(qs), free(ks), free(vs), free(os), free(ls);
    }
    for (int64_t i = 0; i < ref_tensor_count(&p->t[T_O]); i++) ref_tensor_set(&p->t[T_O], i, o[i]);
    free(o);
    double *os_all = ref_tensor_to_f64(&p->t[T_O]); /* O as the kernels read it */
    for (int b = 0; b < c->B; b++) {
        int64_t nq = c->lq[b], nk = c->lkv[b], q0 = p->cu_q[b], k0 = p->cu_kv[b];
        double *s[4], *os = tu_varlen_gather(os_all, Hq, D, q0, nq);
        for (int i = 0; i < 4; i++)
            s[i] = tu_varlen_gather(x[i], i == 1 || i == 2 ? Hkv : Hq, D,
                                    i == 1 || i == 2 ? k0 : q0, i == 1 || i == 2 ? nk : nq);
        double *dw = malloc(sizeof(double) * (size_t)(Hq * (nq ? nq : 1)));
        double *g[3] = {calloc((size_t)(Hq * (nq ? nq : 1) * D), sizeof(double)),
                        calloc((size_t)(Hkv * (nk ? nk : 1) * D), sizeof(double)),
                        calloc((size_t)(Hkv * (nk ? nk : 1) * D), sizeof(double))};
        ck_assert(dw && g[0] && g[1] && g[2]);
        for (int64_t r = 0; r < Hq * nq; r++) {
            double d = 0;
            for (int64_t e = 0; e < D; e++) d += s[3][r * D + e] * os[r * D + e];
            dw[r] = d;
        }
        if (nq && nk)
            ref_attention_bwd(s[0], s[1], s[2], s[3], dw, g[0], g[1], g[2], 1, Hq, Hkv, nq, nk, D,
                              p->scale, c->causal);
        tu_varlen_scatter(p->want[0], g[0], Hq, D, q0, nq);
        tu_varlen_scatter(p->want[1], g[1], Hkv, D, k0, nk);
        tu_varlen_scatter(p->want[2], g[2], Hkv, D, k0, nk);
        for (int i = 0; i < 4; i++) free(s[i]);
        for (int i = 0; i < 3; i++) free(g[i]);
        free(dw), free(os);
    }
    free(os_all);
    for (int i = 0; i < 4; i++) free(x[i]);
}

static void problem_init(problem *p, const vcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    for (int b = 0; b < c->B; b++) {
        p->cu_q[b + 1] = p->cu_q[b] + c->lq[b];
        p->cu_kv[b + 1] = p->cu_kv[b] + c->lkv[b];
    }
    p->Tq = p->cu_q[c->B], p->Tkv = p->cu_kv[c->B];
    p->scale = (float)((0.75 + 0.25 * ref_uniform()) / sqrt((double)c->D));
    for (int i = 0; i < NT; i++) {
        int64_t T = is_kv(i) ? p->Tkv : p->Tq, H = is_kv(i) ? c->Hkv : c->Hq;
        int64_t dims[3] = {T, H, c->D}, dl[2] = {c->Hq, p->Tq};
        p->t[i] = i == T_L ? ref_tensor_new_layout(TK_F32, 2, dl, NULL, 2)
                           : ref_tensor_new_layout(c->dt, 3, dims, NULL, i >= T_DQ ? 8 : 0);
    }
    ref_tensor_random(&p->t[T_Q], -2, 2);
    ref_tensor_random(&p->t[T_K], -2, 2);
    ref_tensor_random(&p->t[T_V], -1, 1);
    ref_tensor_random(&p->t[T_DO], -1, 1);
    for (int i = 0; i < 3; i++) {
        int64_t n = ref_tensor_count(&p->t[T_DQ + i]);
        p->want[i] = calloc((size_t)n, sizeof(double));
        ck_assert_ptr_nonnull(p->want[i]);
    }
    reference(p);
    for (int i = T_DQ; i < NT; i++) {
        ref_tensor_fill_all(&p->t[i], NAN);
        p->before[i] = ref_tensor_snapshot(&p->t[i]);
    }
}

static void problem_free(problem *p) {
    for (int i = 0; i < NT; i++) {
        ref_tensor_free(&p->t[i]);
        free(p->before[i]);
    }
    for (int i = 0; i < 3; i++) free(p->want[i]);
}

static void problem_check(const problem *p, const char *where) {
    const vcase *c = &p->c;
    double err[3];
    tu_attn_grads(&p->t[T_DQ], p->want, &p->before[T_DQ], where, err);
    printf("varlen bwd %-16s B%d Hq%d Hkv%d D%3d %s %s Tq %-5lld Tkv %-5lld: dQ %.2e dK %.2e "
           "dV %.2e\n",
           where, c->B, c->Hq, c->Hkv, c->D, tk_dtype_name(c->dt), c->causal ? "causal" : "full  ",
           (long long)p->Tq, (long long)p->Tkv, err[0], err[1], err[2]);
    ck_assert_msg(err[0] <= 1e-2 && err[1] <= 1e-2 && err[2] <= 1e-2,
                  "rel err dQ %g dK %g dV %g > 1e-2", err[0], err[1], err[2]);
}

/* The call on data pointers dev (host ones for the interpreter). */
static tk_attention_bwd_params params_of(const problem *p, void *const dev[NT], const int32_t *cu_q,
                                         const int32_t *cu_kv, int kernel, int mode) {
    const vcase *c = &p->c;
    tk_attention_bwd_params a = TK_ATTENTION_BWD_PARAMS_INIT;
    a.dtype = c->dt, a.head_dim = c->D, a.causal = c->causal, a.scale = p->scale;
    a.batch = c->B, a.heads_q = c->Hq, a.heads_kv = c->Hkv, a.seq_q = p->Tq, a.seq_kv = p->Tkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.dout = dev[T_DO];
    a.lse = dev[T_L], a.dq = dev[T_DQ], a.dk = dev[T_DK], a.dv = dev[T_DV];
    int64_t *st[NT] = {a.q_strides,   a.k_strides,  a.v_strides,  a.o_strides, a.dout_strides,
                       a.lse_strides, a.dq_strides, a.dk_strides, a.dv_strides};
    for (int i = 0; i < NT; i++)
        if (i != T_L) tu_varlen_strides(st[i], &p->t[i]);
    a.lse_strides[1] = p->t[T_L].strides[0], a.lse_strides[2] = p->t[T_L].strides[1];
    a.cu_seqlens_q = cu_q, a.cu_seqlens_kv = cu_kv;
    a.max_seqlen_q = tu_varlen_longest(c->lq, c->B),
    a.max_seqlen_kv = tu_varlen_longest(c->lkv, c->B);
    a.kernel = kernel, a.mode = mode;
    return a;
}

/* ---- on the interpreter --------------------------------------------------- */
/* Every kernel tk_attention_backward would launch for a (kernel resolved),
 * with a NaN-poisoned host workspace. */
static void run_interp(tk_attention_bwd_params *a) {
    size_t bytes = 0;
    ck_assert_msg(tk_attention_backward_workspace(ctx, a, &bytes) == TK_OK, "%s",
                  tk_ctx_error(ctx));
    float *ws = malloc(bytes);
    ck_assert_ptr_nonnull(ws);
    for (size_t i = 0; i < bytes / sizeof(float); i++) ws[i] = NAN;
    a->workspace = ws, a->workspace_bytes = bytes;
    tk_attn_bwd_call calls[3];
    int n = tk_attn_bwd_calls(a, calls);
    for (int i = 0; i < n; i++) {
        bool any = calls[i].part == TK_ATTN_BWD_PREP || calls[i].part == TK_ATTN_BWD_CONVERT;
        tk_attention_bwd_config cfg = {.dtype = a->dtype,
                                       .head_dim = a->head_dim,
                                       .causal = !any && a->causal,
                                       .part = calls[i].part,
                                       .wgmma = !any && a->kernel == TK_ATTN_WGMMA,
                                       .varlen = 1};
        tk_kernel *k = NULL;
        ck_assert_msg(tk_attention_bwd_build(ctx, &cfg, &k) == TK_OK, "%s", tk_ctx_error(ctx));
        tk_status s = tk_interp_run(k, calls[i].nargs, calls[i].args);
        ck_assert_msg(s == TK_OK, "part %d: %s", calls[i].part, tk_ctx_error(ctx));
        tk_kernel_destroy(k);
    }
    free(ws);
    a->workspace = NULL;
}

static const vcase cases[] = {
    {3, {5, 0, 70}, {9, 4, 70}, 2, 1, 64, 0, TK_BF16},    /* no queries: dK = dV = 0 */
    {3, {17, 1, 40}, {17, 1, 100}, 2, 2, 64, 1, TK_BF16}, /* causal bottom-right     */
    {2, {30, 8}, {0, 20}, 4, 1, 64, 1, TK_F16},           /* no keys: dQ = 0         */
    {3, {3, 65, 4}, {130, 65, 2}, 2, 1, 128, 1, TK_BF16}, /* D 128, ragged tiles     */
    {2, {129, 3}, {70, 200}, 1, 1, 64, 0, TK_BF16},       /* two query tiles         */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void interp_case(const vcase *c, int kernel, int mode) {
    problem p;
    problem_init(&p, c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    tk_attention_bwd_params a = params_of(&p, host, p.cu_q, p.cu_kv, kernel, mode);
    run_interp(&a);
    static const char *names[2][2] = {{"interp", "interp fast"},
                                      {"interp wgmma", "interp wg fast"}};
    problem_check(&p, names[kernel == TK_ATTN_WGMMA][mode]);
    problem_free(&p);
}

START_TEST(test_varlen_bwd) { interp_case(&cases[_i % N_CASES], TK_ATTN_MMA_SYNC, _i / N_CASES); }
END_TEST

START_TEST(test_varlen_bwd_wgmma) {
    interp_case(&cases[_i % N_CASES], TK_ATTN_WGMMA, _i / N_CASES);
}
END_TEST

START_TEST(test_varlen_bwd_errors) {
    vcase c = {2, {5, 7}, {5, 7}, 2, 1, 64, 0, TK_BF16};
    problem p;
    problem_init(&p, &c);
    void *host[NT];
    for (int i = 0; i < NT; i++) host[i] = p.t[i].data;
    size_t bytes;
    tk_attention_bwd_params a = params_of(&p, host, NULL, p.cu_kv, 0, 0);
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &bytes), TK_ERR_INVALID_ARG);
    ck_assert(strstr(tk_ctx_error(ctx), "cu_seqlens_kv is set but cu_seqlens_q is NULL"));
    a = params_of(&p, host, p.cu_q, p.cu_kv, 0, 0);
    a.max_seqlen_q = 13;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &bytes), TK_ERR_INVALID_ARG);
    ck_assert(strstr(tk_ctx_error(ctx), "max_seqlen_q is 13"));
    a = params_of(&p, host, p.cu_q, p.cu_kv, 0, 0);
    a.max_seqlen_kv = -2;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &bytes), TK_ERR_INVALID_ARG);
    ck_assert(strstr(tk_ctx_error(ctx), "max_seqlen_kv is -2"));
    /* the workspace is one sequence of seq_q rows, whatever the batch */
    a = params_of(&p, host, p.cu_q, p.cu_kv, 0, 0);
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &bytes), TK_OK);
    ck_assert_uint_eq(bytes, (size_t)(c.Hq * p.Tq) * sizeof(float));
    tk_attention_bwd_config cfg = {.dtype = TK_BF16, .head_dim = 64, .varlen = -1};
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_attention_bwd_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert(strstr(tk_ctx_error(ctx), "varlen is -1"));
    problem_free(&p);
}
END_TEST

/* ---- on a GPU ------------------------------------------------------------------ */
/* Shapes whose float64 references stay in seconds on the host. */
static const vcase gpu_cases[] = {
    {5, {0, 1, 17, 500, 1000}, {0, 1, 17, 500, 1000}, 4, 2, 128, 1, TK_BF16},
    {5, {500, 1000, 17, 0, 1}, {1000, 800, 1, 5, 0}, 4, 4, 128, 0, TK_BF16},
    {4, {333, 1, 700, 64}, {1500, 129, 700, 64}, 4, 1, 64, 1, TK_F16},
    {6, {63, 64, 65, 127, 128, 129}, {65, 64, 63, 129, 128, 127}, 4, 2, 64, 0, TK_BF16},
    {3, {512, 512, 512}, {512, 512, 512}, 8, 8, 128, 1, TK_BF16},
};

static void run_gpu(problem *p, void *dev[NT], tk_attention_bwd_params *a) {
    for (int i = T_DQ; i < NT; i++) /* poisoned outputs */
        tu_dev_reset(ctx, &p->t[i], dev[i], p->before[i]);
    size_t bytes = 0;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, a, &bytes), TK_OK);
    void *ws = tu_dev_bytes(ctx, bytes);
    a->workspace = ws, a->workspace_bytes = bytes;
    tk_status s = tk_attention_backward(ctx, a, NULL);
    ck_assert_msg(s == TK_OK, "tk_attention_backward: %s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    for (int i = T_DQ; i < NT; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
    tk_gpu_free(ctx, ws);
}

/* The dense backward on each sequence with queries and keys, in place. */
static void run_dense_per_sequence(problem *p, void *dev[NT], int kernel) {
    const vcase *c = &p->c;
    for (int i = T_DQ; i < NT; i++) tu_dev_reset(ctx, &p->t[i], dev[i], p->before[i]);
    for (int b = 0; b < c->B; b++) {
        if (!c->lq[b] || !c->lkv[b]) continue;
        tk_attention_bwd_params a = params_of(p, dev, NULL, NULL, kernel, 0);
        a.max_seqlen_q = a.max_seqlen_kv = 0;
        a.batch = 1, a.seq_q = c->lq[b], a.seq_kv = c->lkv[b];
        size_t esz = tk_dtype_size(c->dt);
        int64_t q0 = p->cu_q[b], k0 = p->cu_kv[b];
        const void **in[NT] = {&a.q, &a.k, &a.v, &a.o, &a.dout};
        void **out[3] = {&a.dq, &a.dk, &a.dv};
        int64_t *st[NT] = {a.q_strides,   a.k_strides,  a.v_strides,  a.o_strides, a.dout_strides,
                           a.lse_strides, a.dq_strides, a.dk_strides, a.dv_strides};
        for (int i = 0; i < NT; i++) {
            if (i == T_L) continue;
            int64_t r0 = is_kv(i) ? k0 : q0;
            char *base = (char *)dev[i] + (size_t)(r0 * p->t[i].strides[0]) * esz;
            if (i < T_L)
                *in[i] = base;
            else
                *out[i - T_DQ] = base;
            st[i][0] = st[i][2] * (is_kv(i) ? p->Tkv : p->Tq); /* unused: batch 1 */
        }
        a.lse = (float *)dev[T_L] + q0 * p->t[T_L].strides[1];
        a.lse_strides[0] = 4 * p->Tq;
        size_t bytes = 0;
        ck_assert_int_eq(tk_attention_backward_workspace(ctx, &a, &bytes), TK_OK);
        void *ws = NULL;
        ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, &ws), TK_OK);
        a.workspace = ws, a.workspace_bytes = bytes;
        tk_status s = tk_attention_backward(ctx, &a, NULL);
        ck_assert_msg(s == TK_OK, "dense sequence %d: %s", b, tk_ctx_error(ctx));
        ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
        tk_gpu_free(ctx, ws);
    }
    for (int i = T_DQ; i < NT; i++) tu_dev_get(ctx, &p->t[i], dev[i]);
}

/* Gradient tensor i of the varlen run (`first`) equals the per-sequence
 * dense run's in every row of a sequence that has both queries and keys. */
static void same_as_dense(const problem *p, int i, const void *first) {
    const vcase *c = &p->c;
    ref_tensor v = p->t[i];
    v.data = (void *)first;
    bool kv = is_kv(i);
    int64_t n = ref_tensor_count(&v), per = (kv ? c->Hkv : c->Hq) * c->D, diff = 0;
    const int32_t *cu = kv ? p->cu_kv : p->cu_q;
    for (int64_t e = 0; e < n; e++) {
        int64_t tok = e / per;
        int b = 0;
        while (b < c->B && cu[b + 1] <= tok) b++;
        if (b == c->B || !c->lq[b] || !c->lkv[b]) continue;
        diff += ref_tensor_get(&v, e) != ref_tensor_get(&p->t[i], e);
    }
    ck_assert_msg(diff == 0, "%lld elements of d%c differ from the dense backward per sequence",
                  (long long)diff, "QKV"[i - T_DQ]);
}

static void gpu_run(problem *pp, int kernel);

/* Both kernel sets on one problem (its reference computed once). */
static void gpu_case(const vcase *c) {
    problem p;
    problem_init(&p, c);
    gpu_run(&p, TK_ATTN_AUTO);
    gpu_run(&p, TK_ATTN_MMA_SYNC);
    problem_free(&p);
}

static void gpu_run(problem *pp, int kernel) {
    problem p = *pp;
    const vcase *c = &p.c;
    void *dev[NT];
    for (int i = 0; i < NT; i++) dev[i] = tu_dev_in(ctx, &p.t[i]);
    size_t cub = sizeof(int32_t) * (size_t)(c->B + 1);
    int32_t *cu_q = tu_dev_copy(ctx, p.cu_q, cub), *cu_kv = tu_dev_copy(ctx, p.cu_kv, cub);
    void *first[3]; /* the deterministic mode's gradients */
    for (int mode = 0; mode < 2; mode++) {
        tk_attention_bwd_params a = params_of(&p, dev, cu_q, cu_kv, kernel, mode);
        run_gpu(&p, dev, &a);
        problem_check(&p, kernel == TK_ATTN_MMA_SYNC ? (mode ? "gpu mma fast" : "gpu mma")
                                                     : (mode ? "gpu fast" : "gpu"));
        for (int i = 0; !mode && i < 3; i++) first[i] = ref_tensor_snapshot(&p.t[T_DQ + i]);
    }
    run_dense_per_sequence(&p, dev, kernel);
    for (int i = 0; i < 3; i++) {
        same_as_dense(&p, T_DQ + i, first[i]);
        free(first[i]);
    }
    for (int i = 0; i < NT; i++) tk_gpu_free(ctx, dev[i]);
    tk_gpu_free(ctx, cu_q), tk_gpu_free(ctx, cu_kv);
}

START_TEST(test_varlen_bwd_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&gpu_cases[_i]);
}
END_TEST

START_TEST(test_varlen_bwd_small_on_gpu) {
    if (th_gpu_or_skip(ctx)) return;
    gpu_case(&cases[_i]);
}
END_TEST

static Suite *varlen_bwd_suite(void) {
    Suite *s = suite_create("attention_varlen_bwd");
    TCase *tc = ctx_tcase(s, "api", 0);
    tcase_add_test(tc, test_varlen_bwd_errors);
    tc = ctx_tcase(s, "interp", 900);
    tcase_add_loop_test(tc, test_varlen_bwd, 0, 2 * N_CASES);
    tcase_add_loop_test(tc, test_varlen_bwd_wgmma, 0, 2 * N_CASES);
    tc = ctx_tcase(s, "gpu", 900);
    tcase_add_loop_test(tc, test_varlen_bwd_on_gpu, 0,
                        (int)(sizeof gpu_cases / sizeof gpu_cases[0]));
    tc = ctx_tcase(s, "gpu_small", 900);
    tcase_add_loop_test(tc, test_varlen_bwd_small_on_gpu, 0, N_CASES);
    return s;
}

int main(void) { return run_suite(varlen_bwd_suite()); }
