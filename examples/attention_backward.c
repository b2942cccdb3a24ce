/* Attention training step from C: the forward, then the backward, and the
 * gradients dQ, dK, dV checked against float64 CPU gradients.
 *
 * With a GPU: tk_attention_forward gives O and L, tk_attention_backward
 * (both kernels: dQ, then dK and dV) the gradients, at a couple of shapes,
 * one of them grouped-query. The library picks the kernels (TK_ATTN_AUTO).
 * Without a GPU: builds the same three kernels (forward, backward dQ,
 * backward dK/dV; mma.sync) and runs them on the CPU interpreter at a small
 * grouped-query, causal shape with a ragged sequence length.
 *
 * The reference computes the gradients from Q, K, V and dO alone:
 *   P = softmax(scale·QKᵀ, masked)   dV = Pᵀ·dO   dP = dO·Vᵀ
 *   dS = P∘(dP − rowsum(dO∘O))       dQ = scale·dS·K   dK = scale·dSᵀ·Q
 * summed over the query heads of each kv head (GQA).
 *
 *   ./attention_backward */
#include "example_util.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

typedef struct shape {
    int64_t b, hq, hkv, nq, nkv, d;
    int causal;
} shape;

/* The tensors of one step: inputs, the forward's outputs, the gradients. */
enum { T_Q, T_K, T_V, T_DO, T_O, T_DQ, T_DK, T_DV, T_L, NT };

typedef struct problem {
    shape s;
    float scale;
    void *t[NT];
    size_t bytes[NT];
} problem;

static int is_kv(int i) { return i == T_K || i == T_V || i == T_DK || i == T_DV; }

static problem make_problem(shape s) {
    problem p = {.s = s, .scale = 1.0f / sqrtf((float)s.d)};
    size_t nq = (size_t)(s.b * s.hq * s.nq), nkv = (size_t)(s.b * s.hkv * s.nkv);
    for (int i = 0; i < NT; i++) {
        p.bytes[i] = i == T_L ? nq * sizeof(float) : (is_kv(i) ? nkv : nq) * (size_t)s.d * 2;
        /* NaN: an output element the kernels miss shows up in the error */
        p.t[i] = ex_poisoned(p.bytes[i]);
    }
    for (int i = T_Q; i <= T_DO; i++)
        ex_fill_bf16(p.t[i], p.bytes[i] / 2, i < T_V ? -2.0f : -1.0f, i < T_V ? 2.0f : 1.0f);
    return p;
}

static void free_problem(problem *p) {
    for (int i = 0; i < NT; i++) free(p->t[i]);
}

/* ---- float64 reference ------------------------------------------------------- */
static double *to_f64(const uint16_t *x, size_t n) {
    double *y = ex_alloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = tk_bf16_to_f32(x[i]);
    return y;
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One query row attending keys 0..nkeys-1: adds its share to dq (its own
 * row) and to dk, dv (the kv head's rows). pp, dp: scratch of nkeys. */
static void ref_row(const double *q, const double *k, const double *v, const double *g,
                    int64_t nkeys, int64_t D, double scale, double *pp, double *dp, double *dq,
                    double *dk, double *dv) {
    double m = -INFINITY, l = 0, drow = 0;
    for (int64_t j = 0; j < nkeys; j++) m = fmax(m, pp[j] = scale * dot(q, k + j * D, D));
    for (int64_t j = 0; j < nkeys; j++) l += pp[j] = exp(pp[j] - m);
    /* Σ_j P_j·dP_j equals rowsum(dO∘O) for the exact O */
    for (int64_t j = 0; j < nkeys; j++) {
        pp[j] /= l, dp[j] = dot(g, v + j * D, D);
        drow += pp[j] * dp[j];
    }
    for (int64_t j = 0; j < nkeys; j++) {
        double ds = scale * pp[j] * (dp[j] - drow);
        for (int64_t d = 0; d < D; d++) {
            dq[d] += ds * k[j * D + d];
            dk[j * D + d] += ds * q[d];
            dv[j * D + d] += pp[j] * g[d];
        }
    }
}

/* want[0..2]: dQ, dK, dV of p's inputs (zeroed first: rows without keys
 * contribute nothing). */
static void reference(const problem *p, double *want[3]) {
    const shape *s = &p->s;
    double *in[4];
    for (int i = T_Q; i <= T_DO; i++) in[i] = to_f64(p->t[i], p->bytes[i] / 2);
    for (int i = 0; i < 3; i++) {
        size_t n = p->bytes[T_DQ + i] / 2 * sizeof(double);
        want[i] = memset(ex_alloc(n), 0, n);
    }
    double *pp = ex_alloc(2 * (size_t)s->nkv * sizeof(double)), *dp = pp + s->nkv;
    int64_t D = s->d, group = s->hq / s->hkv;
    for (int64_t b = 0; b < s->b; b++)
        for (int64_t h = 0; h < s->hq; h++)
            for (int64_t i = 0; i < s->nq; i++) {
                /* causal is aligned bottom-right: key j is seen iff j <= i + Nkv − Nq */
                int64_t nkeys = s->causal ? i + s->nkv - s->nq + 1 : s->nkv;
                nkeys = nkeys > s->nkv ? s->nkv : nkeys;
                int64_t row = ((b * s->hq + h) * s->nq + i) * D;
                int64_t kv = (b * s->hkv + h / group) * s->nkv * D;
                if (nkeys > 0)
                    ref_row(in[T_Q] + row, in[T_K] + kv, in[T_V] + kv, in[T_DO] + row, nkeys, D,
                            p->scale, pp, dp, want[0] + row, want[1] + kv, want[2] + kv);
            }
    for (int i = 0; i < 4; i++) free(in[i]);
    free(pp);
}

/* ‖out − ref‖/‖ref‖ of each gradient; PASS when all are <= 1e-2. */
static int report(const problem *p, const char *where) {
    static const char *names[3] = {"dQ", "dK", "dV"};
    double *want[3], err[3];
    reference(p, want);
    const shape *s = &p->s;
    printf("  %s B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld D=%lld%s:", where, (long long)s->b,
           (long long)s->hq, (long long)s->hkv, (long long)s->nq, (long long)s->nkv,
           (long long)s->d, s->causal ? " causal" : "");
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        const uint16_t *got = p->t[T_DQ + i];
        ex_err e = {0};
        for (size_t j = 0; j < p->bytes[T_DQ + i] / 2; j++)
            ex_err_add(&e, tk_bf16_to_f32(got[j]), want[i][j]);
        err[i] = ex_err_rel(e);
        ok = ok && err[i] <= 1e-2; /* NaN fails */
        printf(" %s %.2e", names[i], err[i]);
        free(want[i]);
    }
    printf("  %s\n", ok ? "PASS" : "FAIL");
    return ok;
}

/* ---- GPU: the public entry points ------------------------------------------ */
static tk_attention_params fwd_params(const problem *p, void *const dev[NT]) {
    const shape *s = &p->s;
    return (tk_attention_params){.struct_size = sizeof(tk_attention_params),
                                 .dtype = TK_BF16,
                                 .head_dim = (int32_t)s->d,
                                 .causal = s->causal,
                                 .batch = s->b,
                                 .heads_q = s->hq,
                                 .heads_kv = s->hkv,
                                 .seq_q = s->nq,
                                 .seq_kv = s->nkv,
                                 .q = dev[T_Q],
                                 .k = dev[T_K],
                                 .v = dev[T_V],
                                 .o = dev[T_O],
                                 .lse = dev[T_L]};
}

static tk_attention_bwd_params bwd_params(const problem *p, void *const dev[NT]) {
    const shape *s = &p->s;
    tk_attention_bwd_params a = TK_ATTENTION_BWD_PARAMS_INIT;
    a.dtype = TK_BF16, a.head_dim = (int32_t)s->d, a.causal = s->causal;
    a.batch = s->b, a.heads_q = s->hq, a.heads_kv = s->hkv, a.seq_q = s->nq, a.seq_kv = s->nkv;
    a.q = dev[T_Q], a.k = dev[T_K], a.v = dev[T_V], a.o = dev[T_O], a.dout = dev[T_DO];
    a.lse = dev[T_L], a.dq = dev[T_DQ], a.dk = dev[T_DK], a.dv = dev[T_DV];
    return a;
}

/* Which kernels TK_ATTN_AUTO picked (the forward and the backward resolve
 * it alike) and where the backward's came from. */
static tk_status say_kernels(tk_ctx *ctx, const tk_attention_params *f,
                             const tk_attention_bwd_params *a) {
    tk_attn_kernel kern = TK_ATTN_AUTO;
    tk_prepare_info info;
    tk_status s = tk_attention_kernel_for(ctx, f, &kern);
    if (!s) s = tk_attention_backward_prepare(ctx, a, &info);
    if (!s)
        printf("GPU %s: %s kernels; backward %s in %.1f ms\n", info.arch,
               kern == TK_ATTN_WGMMA ? "wgmma (Hopper)" : "mma.sync",
               info.origin == TK_FROM_COMPILE ? "compiled"
               : info.origin == TK_FROM_DISK  ? "loaded from the disk cache"
                                              : "found in memory",
               info.ms);
    return s;
}

/* Forward then backward on the device copies; the gradients come back. */
static tk_status gpu_step(tk_ctx *ctx, problem *p, void *dev[NT], void **ws, int first) {
    tk_attention_params f = fwd_params(p, dev);
    tk_attention_bwd_params a = bwd_params(p, dev);
    tk_status s = tk_attention_backward_workspace(ctx, &a, &a.workspace_bytes);
    if (!s) s = tk_gpu_alloc(ctx, a.workspace_bytes, ws);
    a.workspace = *ws;
    if (!s && first) s = say_kernels(ctx, &f, &a);
    if (!s) s = tk_attention_forward(ctx, &f, NULL);
    if (!s) s = tk_attention_backward(ctx, &a, NULL); /* same stream: after O and L */
    if (!s) s = tk_gpu_sync(ctx);
    for (int i = T_DQ; i <= T_DV && !s; i++) s = tk_gpu_download(ctx, p->t[i], dev[i], p->bytes[i]);
    return s;
}

static int run_gpu(tk_ctx *ctx, shape sh, int first) {
    problem p = make_problem(sh);
    void *dev[NT] = {0}, *ws = NULL;
    tk_status s = TK_OK;
    /* the outputs go up NaN-poisoned too */
    for (int i = 0; i < NT && !s; i++)
        if (!(s = tk_gpu_alloc(ctx, p.bytes[i], &dev[i])))
            s = tk_gpu_upload(ctx, dev[i], p.t[i], p.bytes[i]);
    if (!s) s = gpu_step(ctx, &p, dev, &ws, first);
    if (s) fprintf(stderr, "GPU run failed: %s: %s\n", tk_status_name(s), tk_ctx_error(ctx));
    int ok = !s && report(&p, "GPU");
    for (int i = 0; i < NT; i++)
        if (dev[i]) tk_gpu_free(ctx, dev[i]);
    if (ws) tk_gpu_free(ctx, ws);
    free_problem(&p);
    return ok;
}

/* ---- CPU interpreter: the kernels themselves, a small shape ------------------ */
static tk_status interp_fwd(tk_ctx *ctx, const shape *s, tk_arg *args) {
    tk_attention_config cfg = {.dtype = TK_BF16, .head_dim = (int)s->d, .causal = s->causal};
    tk_kernel *k = NULL;
    tk_status st = tk_attention_fwd_build(ctx, &cfg, &k);
    if (!st) printf("kernel %s\n", tk_kernel_name(k));
    if (!st) st = tk_interp_run(k, 6, args);
    tk_kernel_destroy(k);
    return st;
}

/* mma.sync (wgmma 0): the kernels every GPU runs, and the faster ones to
 * interpret. */
static tk_status interp_bwd(tk_ctx *ctx, const shape *s, int part, tk_arg *args) {
    tk_attention_bwd_config cfg = {
        .dtype = TK_BF16, .head_dim = (int)s->d, .causal = s->causal, .part = part, .wgmma = 0};
    tk_kernel *k = NULL;
    tk_status st = tk_attention_bwd_build(ctx, &cfg, &k);
    if (!st) printf("kernel %s\n", tk_kernel_name(k));
    if (!st) st = tk_interp_run(k, 9, args);
    tk_kernel_destroy(k);
    return st;
}

static int run_interpreter(tk_ctx *ctx, shape sh) {
    problem p = make_problem(sh);
    const shape *s = &p.s;
    int64_t dq[4] = {s->b, s->hq, s->nq, s->d}, dk[4] = {s->b, s->hkv, s->nkv, s->d};
    int64_t dl[3] = {s->b, s->hq, s->nq};
    tk_arg a[NT];
    for (int i = 0; i < T_L; i++) a[i] = tk_arg_tensor(p.t[i], TK_BF16, 4, is_kv(i) ? dk : dq);
    a[T_L] = tk_arg_tensor(p.t[T_L], TK_F32, 3, dl);
    /* D = rowsum(dO∘O): written by the dQ kernel, read by the dK/dV kernel */
    float *dw = ex_poisoned((size_t)(s->b * s->hq * s->nq) * sizeof(float));
    tk_arg w = tk_arg_tensor(dw, TK_F32, 3, dl), sc = tk_arg_f32(p.scale);
    tk_arg fwd[6] = {a[T_Q], a[T_K], a[T_V], a[T_O], a[T_L], sc};
    tk_arg bq[9] = {a[T_Q], a[T_K], a[T_V], a[T_O], a[T_DO], a[T_L], w, a[T_DQ], sc};
    tk_arg bkv[9] = {a[T_Q], a[T_K], a[T_V], a[T_DO], a[T_L], w, a[T_DK], a[T_DV], sc};
    tk_status st = interp_fwd(ctx, s, fwd);
    if (!st) st = interp_bwd(ctx, s, TK_ATTN_BWD_DQ, bq);
    if (!st) st = interp_bwd(ctx, s, TK_ATTN_BWD_DKDV, bkv);
    if (st) fprintf(stderr, "interpreter: %s: %s\n", tk_status_name(st), tk_ctx_error(ctx));
    int ok = !st && report(&p, "interpreter");
    free(dw);
    free_problem(&p);
    return ok;
}

int main(void) {
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    srand(1234);
    int ok = 1;
    if (tk_gpu_init(ctx) == TK_OK) {
        static const shape shapes[] = {{2, 8, 8, 1000, 1000, 128, 1}, {1, 8, 2, 300, 513, 64, 1}};
        for (int i = 0; i < 2 && ok; i++) ok = run_gpu(ctx, shapes[i], i == 0);
    } else {
        printf("no GPU (%s): running on the CPU interpreter\n", tk_ctx_error(ctx));
        /* grouped-query 2:1, 70 rows (not a multiple of 64), causal */
        ok = run_interpreter(ctx, (shape){1, 2, 1, 70, 70, 64, 1});
    }
    tk_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
