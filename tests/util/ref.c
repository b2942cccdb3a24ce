/* Test helpers: see ref.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid */
#include "util/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- random numbers ------------------------------------------------------ */
static uint64_t rng_state, rng_seed;

uint64_t ref_seed(void) {
    if (rng_seed) return rng_seed;
    const char *env = getenv("TK_TEST_SEED");
    uint64_t s = env && *env ? strtoull(env, NULL, 0) : 0;
    if (!s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        s = s ? s : 1;
    }
    rng_seed = rng_state = s;
    printf("ref: seed %llu (TK_TEST_SEED=%llu repeats this run)\n", (unsigned long long)s,
           (unsigned long long)s);
    fflush(stdout);
    return s;
}

static uint64_t next_u64(void) {
    ref_seed();
    uint64_t x = rng_state; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

double ref_uniform(void) { return (double)(next_u64() >> 11) * 0x1.0p-52 - 1.0; }

int64_t ref_randint(int64_t lo, int64_t hi) {
    return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}

/* ---- tensors ------------------------------------------------------------- */
ref_tensor ref_tensor_new_layout(tk_dtype dt, int rank, const int64_t *dims, const int *perm,
                                 int64_t pad) {
    ref_tensor t = {.dt = dt, .rank = rank};
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int d = perm ? perm[i] : i;
        t.strides[d] = s;
        s *= dims[d] + (i == rank - 1 ? pad : 0);
    }
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.elems = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) {
            t.elems = 1;
            break;
        }
        t.elems += (dims[i] - 1) * t.strides[i];
    }
    t.data = calloc((size_t)t.elems, tk_dtype_size(dt));
    if (!t.data) abort();
    return t;
}

ref_tensor ref_tensor_new(tk_dtype dt, int rank, const int64_t *dims) {
    return ref_tensor_new_layout(dt, rank, dims, NULL, 0);
}

void ref_tensor_free(ref_tensor *t) {
    free(t->data);
    t->data = NULL;
}

int64_t ref_tensor_count(const ref_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

int64_t ref_tensor_offset(const ref_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        off += (i % t->dims[d]) * t->strides[d];
        i /= t->dims[d];
    }
    return off;
}

static double raw_get(const ref_tensor *t, int64_t off) {
    switch (t->dt) {
    case TK_F32: return ((const float *)t->data)[off];
    case TK_BF16: return tk_bf16_to_f32(((const uint16_t *)t->data)[off]);
    case TK_F16: return tk_f16_to_f32(((const uint16_t *)t->data)[off]);
    case TK_I32: return ((const int32_t *)t->data)[off];
    default: abort();
    }
}

static void raw_set(ref_tensor *t, int64_t off, double v) {
    switch (t->dt) {
    case TK_F32: ((float *)t->data)[off] = (float)v; break;
    case TK_BF16: ((uint16_t *)t->data)[off] = tk_f32_to_bf16((float)v); break;
    case TK_F16: ((uint16_t *)t->data)[off] = tk_f32_to_f16((float)v); break;
    case TK_I32: ((int32_t *)t->data)[off] = (int32_t)v; break; /* truncates */
    default: abort();
    }
}

double ref_tensor_get(const ref_tensor *t, int64_t i) {
    return raw_get(t, ref_tensor_offset(t, i));
}
void ref_tensor_set(ref_tensor *t, int64_t i, double v) { raw_set(t, ref_tensor_offset(t, i), v); }

void ref_tensor_random(ref_tensor *t, double lo, double hi) {
    int64_t n = ref_tensor_count(t);
    for (int64_t i = 0; i < n; i++)
        ref_tensor_set(t, i, lo + (hi - lo) * 0.5 * (ref_uniform() + 1.0));
}

void ref_tensor_fill_all(ref_tensor *t, double v) {
    for (int64_t i = 0; i < t->elems; i++) raw_set(t, i, v);
}

double *ref_tensor_to_f64(const ref_tensor *t) {
    int64_t n = ref_tensor_count(t);
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!d) abort();
    for (int64_t i = 0; i < n; i++) d[i] = ref_tensor_get(t, i);
    return d;
}

void *ref_tensor_snapshot(const ref_tensor *t) {
    size_t bytes = (size_t)t->elems * tk_dtype_size(t->dt);
    void *p = malloc(bytes);
    if (!p) abort();
    memcpy(p, t->data, bytes);
    return p;
}

int64_t ref_tensor_stray_writes(const ref_tensor *t, const void *before) {
    unsigned char *logical = calloc((size_t)t->elems, 1);
    if (!logical) abort();
    int64_t n = ref_tensor_count(t), bad = 0;
    for (int64_t i = 0; i < n; i++) logical[ref_tensor_offset(t, i)] = 1;
    size_t es = tk_dtype_size(t->dt);
    for (int64_t i = 0; i < t->elems; i++)
        if (!logical[i] && memcmp((const char *)t->data + (size_t)i * es,
                                  (const char *)before + (size_t)i * es, es))
            bad++;
    free(logical);
    return bad;
}

tk_arg ref_tensor_arg(const ref_tensor *t) {
    return tk_arg_strided(t->data, t->dt, t->rank, t->dims, t->strides);
}

/* ---- references ---------------------------------------------------------- */
void ref_gemm(const double *A, const double *B, double *C, int64_t M, int64_t N, int64_t K,
              int transpose_b) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += A[i * K + k] * (transpose_b ? B[j * K + k] : B[k * N + j]);
            C[i * N + j] = s;
        }
}

void ref_attention(const double *Q, const double *K, const double *V, double *O, double *L,
                   int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D,
                   double scale, int causal) {
    double *s = malloc(sizeof(double) * (size_t)(Nkv ? Nkv : 1));
    if (!s) abort();
    int64_t group = Hq / Hkv > 0 ? Hq / Hkv : 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / group;
            const double *k = K + (b * Hkv + hk) * Nkv * D, *v = V + (b * Hkv + hk) * Nkv * D;
            for (int64_t i = 0; i < Nq; i++) {
                const double *q = Q + ((b * Hq + h) * Nq + i) * D;
                double *o = O + ((b * Hq + h) * Nq + i) * D;
                int64_t nkeys = causal ? i + Nkv - Nq + 1 : Nkv; /* keys 0..nkeys-1 */
                if (nkeys > Nkv) nkeys = Nkv;
                if (nkeys < 0) nkeys = 0;
                double m = -INFINITY;
                for (int64_t j = 0; j < nkeys; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += q[d] * k[j * D + d];
                    s[j] = scale * dot;
                    if (s[j] > m) m = s[j];
                }
                double l = 0;
                for (int64_t d = 0; d < D; d++) o[d] = 0;
                for (int64_t j = 0; j < nkeys; j++) {
                    double p = exp(s[j] - m);
                    l += p;
                    for (int64_t d = 0; d < D; d++) o[d] += p * v[j * D + d];
                }
                for (int64_t d = 0; d < D; d++) o[d] = nkeys ? o[d] / l : 0.0;
                L[(b * Hq + h) * Nq + i] = nkeys ? m + log(l) : -INFINITY;
            }
        }
    free(s);
}

/* One query row's gradients: p (its softmax weights over nkeys keys) given,
 * and its D = dO·O (NULL: from the exact O = Σ p_j v_j). */
static void bwd_row(const double *q, const double *k, const double *v, const double *g,
                    const double *p, const double *drow, int64_t nkeys, int64_t D, double scale,
                    double *dq, double *dk, double *dv) {
    double dd = 0;
    for (int64_t j = 0; !drow && j < nkeys; j++)
        for (int64_t d = 0; d < D; d++) dd += p[j] * v[j * D + d] * g[d];
    if (drow) dd = *drow;
    for (int64_t j = 0; j < nkeys; j++) {
        double dp = 0;
        for (int64_t d = 0; d < D; d++) dp += g[d] * v[j * D + d];
        double ds = p[j] * (dp - dd);
        for (int64_t d = 0; d < D; d++) {
            dq[d] += scale * ds * k[j * D + d];
            dk[j * D + d] += scale * ds * q[d];
            dv[j * D + d] += p[j] * g[d];
        }
    }
}

void ref_attention_bwd(const double *Q, const double *K, const double *V, const double *dO,
                       const double *Drows, double *dQ, double *dK, double *dV, int64_t B,
                       int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nkv, int64_t D, double scale,
                       int causal) {
    double *p = malloc(sizeof(double) * (size_t)(Nkv ? Nkv : 1));
    if (!p) abort();
    memset(dQ, 0, sizeof(double) * (size_t)(B * Hq * Nq * D));
    memset(dK, 0, sizeof(double) * (size_t)(B * Hkv * Nkv * D));
    memset(dV, 0, sizeof(double) * (size_t)(B * Hkv * Nkv * D));
    int64_t group = Hq / Hkv > 0 ? Hq / Hkv : 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t kv = (b * Hkv + h / group) * Nkv * D;
            for (int64_t i = 0; i < Nq; i++) {
                int64_t row = ((b * Hq + h) * Nq + i) * D;
                int64_t nkeys = causal ? i + Nkv - Nq + 1 : Nkv;
                if (nkeys > Nkv) nkeys = Nkv;
                if (nkeys <= 0) continue;
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < nkeys; j++) {
                    double dot = 0;
                    for (int64_t d = 0; d < D; d++) dot += Q[row + d] * K[kv + j * D + d];
                    p[j] = scale * dot;
                    if (p[j] > m) m = p[j];
                }
                for (int64_t j = 0; j < nkeys; j++) l += (p[j] = exp(p[j] - m));
                for (int64_t j = 0; j < nkeys; j++) p[j] /= l;
                const double *drow = Drows ? Drows + (b * Hq + h) * Nq + i : NULL;
                bwd_row(Q + row, K + kv, V + kv, dO + row, p, drow, nkeys, D, scale, dQ + row,
                        dK + kv, dV + kv);
            }
        }
    free(p);
}

/* ---- comparison ---------------------------------------------------------- */
double ref_rel_err(const double *out, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(out[i]) || isnan(ref[i])) return NAN;
        if (isinf(ref[i]) || isinf(out[i])) {
            if (out[i] != ref[i]) return INFINITY;
            continue;
        }
        double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double ref_tensor_rel_err(const ref_tensor *t, const double *ref) {
    double *out = ref_tensor_to_f64(t);
    double e = ref_rel_err(out, ref, ref_tensor_count(t));
    free(out);
    return e;
}

int64_t ref_count_nan(const double *x, int64_t n) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += isnan(x[i]) != 0;
    return c;
}
