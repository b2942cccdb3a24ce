/* Ready-made kernels on device pointers (include/tk/tk_run.h).
 *
 * Each specialization is built and compiled once per context and kept in a
 * small table here, so a call after the first costs a table lookup plus the
 * launch: no IR is rebuilt, no text hashed. Sizes and strides are run-time
 * arguments of the one compiled kernel. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ctx.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

enum { TK_RUN_MAX = 64, TK_RUN_KEY = 9 };

typedef struct tk_run_entry {
    int kind; /* 1 attention, 2 gemm */
    int key[TK_RUN_KEY];
    tk_program *prog;
} tk_run_entry;

struct tk_runcache {
    pthread_mutex_t mu;
    int n;
    tk_run_entry e[TK_RUN_MAX];
    char arch[16]; /* the GPU's, once known ("" before) */
};

void tk_runcache_destroy(struct tk_runcache *rc) {
    if (!rc) return;
    for (int i = 0; i < rc->n; i++) tk_program_release(rc->e[i].prog);
    pthread_mutex_destroy(&rc->mu);
    free(rc);
}

static struct tk_runcache *runcache(tk_ctx *ctx) {
    struct tk_runcache *rc = __atomic_load_n(&ctx->run, __ATOMIC_ACQUIRE), *expected = NULL;
    if (rc) return rc;
    /* Threads sharing a context may race to make it (as tk_jit_of): one
     * wins, the others free their own. */
    if (!(rc = calloc(1, sizeof *rc))) return NULL;
    pthread_mutex_init(&rc->mu, NULL);
    if (__atomic_compare_exchange_n(&ctx->run, &expected, rc, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return rc;
    tk_runcache_destroy(rc);
    return expected;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef tk_status (*tk_builder)(tk_ctx *ctx, const int key[TK_RUN_KEY], tk_kernel **out);

/* The program for (kind, key): from the table, else built and compiled. */
static tk_status get_program(tk_ctx *ctx, int kind, const int key[TK_RUN_KEY], tk_builder build,
                             tk_program **out, tk_prepare_info *info) {
    struct tk_runcache *rc = runcache(ctx);
    if (!rc) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "out of memory");
    double t0 = now_ms();
    tk_status s = TK_OK;
    pthread_mutex_lock(&rc->mu);
    tk_run_entry *e = NULL;
    for (int i = 0; i < rc->n && !e; i++)
        if (rc->e[i].kind == kind && !memcmp(rc->e[i].key, key, sizeof rc->e[i].key))
            e = &rc->e[i];
    tk_origin origin = TK_FROM_MEMORY;
    if (!e) {
        tk_kernel *k = NULL;
        tk_program *p = NULL;
        if (rc->n == TK_RUN_MAX)
            s = tk_ctx_fail(ctx, TK_ERR_UNSUPPORTED, "more than %d specializations in one context",
                            TK_RUN_MAX);
        if (!s) s = build(ctx, key, &k);
        if (!s) s = tk_compile(ctx, k, &p);
        tk_kernel_destroy(k);
        if (!s) {
            e = &rc->e[rc->n++];
            e->kind = kind;
            memcpy(e->key, key, sizeof e->key);
            e->prog = p;
            origin = tk_program_origin(p);
        }
    }
    pthread_mutex_unlock(&rc->mu);
    if (s) return s;
    *out = e->prog;
    if (info) {
        info->origin = origin;
        info->ms = now_ms() - t0;
        if (tk_gpu_arch(ctx, info->arch, sizeof info->arch)) info->arch[0] = '\0';
    }
    return TK_OK;
}

/* ---- attention ---------------------------------------------------------- */
static tk_status build_attention(tk_ctx *ctx, const int key[TK_RUN_KEY], tk_kernel **out) {
    tk_attention_config cfg = {.dtype = (tk_dtype)key[0], .head_dim = key[1], .causal = key[2]};
    return tk_attention_fwd_build(ctx, &cfg, out);
}

static tk_status check_attention(tk_ctx *ctx, const tk_attention_params *p) {
    const char *fn = "tk_attention_forward";
    if (!p) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: params is NULL", fn);
    if (p->dtype != TK_BF16 && p->dtype != TK_F16)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: dtype is %s; expected bf16 or f16", fn,
                           tk_dtype_name(p->dtype));
    if (p->head_dim != 64 && p->head_dim != 128)
        return tk_ctx_fail(ctx, TK_ERR_UNSUPPORTED, "%s: head_dim %d is not supported (64, 128)",
                           fn, p->head_dim);
    if (p->causal != 0 && p->causal != 1)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: causal is %d; expected 0 or 1", fn,
                           p->causal);
    if (!(p->scale >= 0.0f) || isinf(p->scale))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: scale %g is not a finite value >= 0",
                           fn, (double)p->scale);
    const int64_t sz[5] = {p->batch, p->heads_q, p->heads_kv, p->seq_q, p->seq_kv};
    static const char *names[5] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_kv"};
    for (int i = 0; i < 5; i++)
        if (sz[i] <= 0)
            return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s is %lld; sizes must be >= 1", fn,
                               names[i], (long long)sz[i]);
    if (p->heads_q % p->heads_kv)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: heads_q (%lld) is not a multiple of "
                           "heads_kv (%lld)", fn, (long long)p->heads_q, (long long)p->heads_kv);
    const void *ptr[5] = {p->q, p->k, p->v, p->o, p->lse};
    static const char *pn[5] = {"q", "k", "v", "o", "lse"};
    for (int i = 0; i < 5; i++)
        if (!ptr[i]) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn, pn[i]);
    const int64_t *st[4] = {p->q_strides, p->k_strides, p->v_strides, p->o_strides};
    for (int i = 0; i < 4; i++) {
        bool dense = !st[i][0] && !st[i][1] && !st[i][2] && !st[i][3];
        if (!dense && st[i][3] != 1)
            return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[3] is %lld; the head "
                               "dimension must be contiguous (stride 1)", fn, pn[i],
                               (long long)st[i][3]);
        for (int d = 0; d < 3 && !dense; d++)
            if (st[i][d] < 0)
                return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s_strides[%d] is negative", fn,
                                   pn[i], d);
    }
    return TK_OK;
}

static tk_arg attn_tensor(const void *data, tk_dtype dt, int rank, const int64_t *dims,
                          const int64_t *strides) {
    bool dense = true;
    for (int i = 0; i < rank; i++) dense = dense && !strides[i];
    return dense ? tk_arg_tensor((void *)data, dt, rank, dims)
                 : tk_arg_strided((void *)data, dt, rank, dims, strides);
}

/* The checked parameters' program (built and compiled on first use). */
static tk_status attention_program(tk_ctx *ctx, const tk_attention_params *p, tk_program **prog,
                                   tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = check_attention(ctx, p);
    if (s) return s;
    const int key[TK_RUN_KEY] = {p->dtype, p->head_dim, p->causal};
    return get_program(ctx, 1, key, build_attention, prog, info);
}

tk_status tk_attention_prepare(tk_ctx *ctx, const tk_attention_params *p, tk_prepare_info *info) {
    tk_program *prog = NULL;
    return attention_program(ctx, p, &prog, info);
}

tk_status tk_attention_forward(tk_ctx *ctx, const tk_attention_params *p, void *stream) {
    tk_program *prog = NULL;
    tk_status s = attention_program(ctx, p, &prog, NULL);
    if (s) return s;
    int64_t D = p->head_dim;
    int64_t qd[4] = {p->batch, p->heads_q, p->seq_q, D};
    int64_t kd[4] = {p->batch, p->heads_kv, p->seq_kv, D};
    int64_t ld[3] = {p->batch, p->heads_q, p->seq_q};
    float scale = p->scale > 0.0f ? p->scale : 1.0f / sqrtf((float)D);
    tk_arg args[6] = {
        attn_tensor(p->q, p->dtype, 4, qd, p->q_strides),
        attn_tensor(p->k, p->dtype, 4, kd, p->k_strides),
        attn_tensor(p->v, p->dtype, 4, kd, p->v_strides),
        attn_tensor(p->o, p->dtype, 4, qd, p->o_strides),
        attn_tensor(p->lse, TK_F32, 3, ld, p->lse_strides),
        tk_arg_f32(scale),
    };
    return tk_launch(prog, 6, args, stream);
}

/* ---- GEMM --------------------------------------------------------------- */
static tk_status build_gemm(tk_ctx *ctx, const int key[TK_RUN_KEY], tk_kernel **out) {
    tk_gemm_config cfg = {.in_dtype = (tk_dtype)key[0], .out_dtype = (tk_dtype)key[1],
                          .transpose_b = key[2], .block_m = key[3], .block_n = key[4],
                          .block_k = key[5], .warps = key[6], .stages = key[7],
                          .tma = key[8]};
    return tk_gemm_build(ctx, &cfg, out);
}

static tk_status check_gemm(tk_ctx *ctx, const tk_gemm_params *p) {
    const char *fn = "tk_gemm";
    if (!p) return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: params is NULL", fn);
    if (p->in_dtype != TK_BF16 && p->in_dtype != TK_F16)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: in_dtype is %s; expected bf16 or f16",
                           fn, tk_dtype_name(p->in_dtype));
    if (p->out_dtype != TK_BF16 && p->out_dtype != TK_F16 && p->out_dtype != TK_F32)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: out_dtype is %s; expected bf16, f16 or "
                           "f32", fn, tk_dtype_name(p->out_dtype));
    if (p->transpose_b != 0 && p->transpose_b != 1)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: transpose_b is %d; expected 0 or 1", fn,
                           p->transpose_b);
    if (p->m <= 0 || p->n <= 0 || p->k <= 0)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: m, n, k are %lld, %lld, %lld; each must "
                           "be >= 1", fn, (long long)p->m, (long long)p->n, (long long)p->k);
    if (!p->a || !p->b || !p->c)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                           !p->a ? "a" : !p->b ? "b" : "c");
    int64_t bcols = p->transpose_b ? p->k : p->n;
    if ((p->lda && p->lda < p->k) || (p->ldb && p->ldb < bcols) || (p->ldc && p->ldc < p->n))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "%s: a leading dimension is smaller than its "
                           "row (lda %lld < k %lld, ldb %lld < %lld or ldc %lld < n %lld)", fn,
                           (long long)p->lda, (long long)p->k, (long long)p->ldb,
                           (long long)bcols, (long long)p->ldc, (long long)p->n);
    return TK_OK;
}

/* The GPU's arch into buf ("" if there is none), asked of the driver once
 * per context rather than on every call. */
static void run_arch(tk_ctx *ctx, char buf[16]) {
    struct tk_runcache *rc = runcache(ctx);
    buf[0] = '\0';
    if (!rc) return; /* out of memory: get_program reports it */
    pthread_mutex_lock(&rc->mu);
    if (!rc->arch[0] && tk_gpu_arch(ctx, rc->arch, sizeof rc->arch)) rc->arch[0] = '\0';
    memcpy(buf, rc->arch, sizeof rc->arch);
    pthread_mutex_unlock(&rc->mu);
}

/* The copy engine reads 16-byte aligned tensors with 16-byte row pitches
 * (else the launch encodes no map, and the producer warp's own copies are
 * slow): other calls get the cp.async kernel that sm_90 without its
 * arch-specific features would. */
tk_gemm_config tk_gemm_config_for_call(const tk_gemm_params *p, const char *arch) {
    int64_t esz = (int64_t)tk_dtype_size(p->in_dtype);
    int64_t lda = p->lda ? p->lda : p->k;
    int64_t ldb = p->ldb ? p->ldb : (p->transpose_b ? p->k : p->n);
    bool engine = ((uintptr_t)p->a | (uintptr_t)p->b) % 16 == 0 && lda * esz % 16 == 0 &&
                  ldb * esz % 16 == 0;
    if (arch && !engine && !strcmp(arch, "sm_90a"))
        arch = "sm_90";
    return tk_gemm_config_for(p->in_dtype, p->out_dtype, p->transpose_b, p->m, p->n, arch);
}

/* The configuration of a call: the caller's, if it names one for the same
 * dtypes and transposition, else the library's choice for the size and GPU. */
static tk_status gemm_choose(tk_ctx *ctx, const tk_gemm_params *p, tk_gemm_config *c) {
    const tk_gemm_config *g = p->config;
    if (!g) {
        char arch[16];
        run_arch(ctx, arch);
        *c = tk_gemm_config_for_call(p, arch[0] ? arch : NULL);
        return TK_OK;
    }
    if (g->in_dtype != p->in_dtype || g->out_dtype != p->out_dtype ||
        g->transpose_b != p->transpose_b)
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_gemm: config is for %s -> %s, "
                           "transpose_b %d; the params for %s -> %s, transpose_b %d",
                           tk_dtype_name(g->in_dtype), tk_dtype_name(g->out_dtype),
                           g->transpose_b, tk_dtype_name(p->in_dtype),
                           tk_dtype_name(p->out_dtype), p->transpose_b);
    *c = *g;
    return TK_OK;
}

static tk_status gemm_program(tk_ctx *ctx, const tk_gemm_params *p, tk_program **prog,
                              tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_gemm_config c = {0};
    tk_status s = check_gemm(ctx, p);
    if (!s) s = gemm_choose(ctx, p, &c);
    if (s) return s;
    const int key[TK_RUN_KEY] = {c.in_dtype, c.out_dtype, c.transpose_b, c.block_m, c.block_n,
                                 c.block_k,  c.warps,     c.stages,      c.tma};
    return get_program(ctx, 2, key, build_gemm, prog, info);
}

tk_status tk_gemm_prepare(tk_ctx *ctx, const tk_gemm_params *p, tk_prepare_info *info) {
    tk_program *prog = NULL;
    return gemm_program(ctx, p, &prog, info);
}

tk_status tk_gemm(tk_ctx *ctx, const tk_gemm_params *p, void *stream) {
    tk_program *prog = NULL;
    tk_status s = gemm_program(ctx, p, &prog, NULL);
    if (s) return s;
    int64_t bcols = p->transpose_b ? p->k : p->n, brows = p->transpose_b ? p->n : p->k;
    int64_t ad[2] = {p->m, p->k}, bd[2] = {brows, bcols}, cd[2] = {p->m, p->n};
    int64_t as[2] = {p->lda ? p->lda : p->k, 1}, bs[2] = {p->ldb ? p->ldb : bcols, 1};
    int64_t cs[2] = {p->ldc ? p->ldc : p->n, 1};
    tk_arg args[3] = {
        tk_arg_strided((void *)p->a, p->in_dtype, 2, ad, as),
        tk_arg_strided((void *)p->b, p->in_dtype, 2, bd, bs),
        tk_arg_strided(p->c, p->out_dtype, 2, cd, cs),
    };
    return tk_launch(prog, 3, args, stream);
}
