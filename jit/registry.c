/* The ready-made kernels' memo (jit/registry.h): a context slot holding a
 * growable array of (definition, key bytes, program), searched linearly
 * under one mutex: a process uses a few dozen specializations at most, and a
 * hit costs a short scan and one memcmp per candidate, no hashing. The
 * programs one call lacks compile side by side on a pool's threads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ctx.h"
#include "jit/build.h"
#include "jit/host.h"
#include "jit/jit.h"
#include "jit/pool.h"
#include "jit/registry.h"

typedef struct tk_memo_entry {
    const tk_kernel_def *def;
    void *key;        /* def->key_size bytes                  */
    tk_program *prog; /* the memo's reference                 */
} tk_memo_entry;

typedef struct tk_memo {
    /* Guards everything below; held across a build and compile, so that
     * threads asking for the same key wait for one build. */
    pthread_mutex_t mu;
    tk_memo_entry *e;
    size_t n, cap;
    char arch[16]; /* the GPU's, once known ("" before) */
    tk_registry_compile_fn compile;
} tk_memo;

static void memo_destroy(void *state) {
    tk_memo *m = state;
    for (size_t i = 0; i < m->n; i++) {
        tk_program_release(m->e[i].prog);
        free(m->e[i].key);
    }
    free(m->e);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void *memo_make(tk_ctx *ctx) {
    /* The programs live in the JIT: take its slot first, so that it is made
     * before the memo and destroyed after it. */
    if (!tk_jit_of(ctx)) return NULL;
    tk_memo *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    m->compile = tk_compile_dg;
    return m;
}

static const tk_ctx_slot_def memo_slot = {"kernel registry", memo_make, memo_destroy};

static tk_program *memo_find(const tk_memo *m, const tk_kernel_def *def, const void *key) {
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].def == def && !memcmp(m->e[i].key, key, def->key_size)) return m->e[i].prog;
    return NULL;
}

/* One program a batch lacks: its first request, built kernel, result. */
typedef struct tk_memo_job {
    const tk_registry_req *req;
    tk_kernel *k;
    tk_program *p;
    tk_diag dg;
} tk_memo_job;

typedef struct tk_memo_batch {
    tk_ctx *ctx;
    tk_registry_compile_fn compile;
    tk_memo_job *job;
} tk_memo_batch;

static void memo_compile_one(void *user, int i) {
    tk_memo_batch *b = user;
    tk_memo_job *j = &b->job[i];
    b->compile(b->ctx, j->k, &j->p, &j->dg);
}

/* Room for `more` entries, so that adding them cannot fail half way. */
static tk_status memo_reserve(tk_ctx *ctx, tk_memo *m, size_t more) {
    if (m->n + more <= m->cap) return TK_OK;
    size_t cap = m->cap ? m->cap : 16;
    while (cap < m->n + more) cap *= 2;
    tk_memo_entry *e = realloc(m->e, cap * sizeof *e);
    if (!e) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_registry_programs: out of memory");
    m->e = e, m->cap = cap;
    return TK_OK;
}

/* The requests the memo lacks, each (def, key) once, into job[]; req[i]'s
 * job index into at[i] (-1: a hit, out[i] set). */
static int memo_misses(const tk_memo *m, int n, const tk_registry_req *req, tk_program **out,
                       int *at, tk_memo_job *job) {
    int nj = 0;
    for (int i = 0; i < n; i++) {
        const tk_registry_req *r = &req[i];
        at[i] = -1;
        if ((out[i] = memo_find(m, r->def, r->key))) continue;
        for (int q = 0; q < nj && at[i] < 0; q++)
            if (job[q].req->def == r->def && !memcmp(job[q].req->key, r->key, r->def->key_size))
                at[i] = q;
        if (at[i] < 0) job[at[i] = nj++].req = r;
    }
    return nj;
}

/* Builds the jobs' kernels here, one by one (each a fraction of a
 * millisecond; builders report on the context), then compiles them side by
 * side (jit/pool.h), then memoizes each success. The lock held. */
static tk_status memo_run(tk_ctx *ctx, tk_memo *m, tk_memo_job *job, int nj) {
    tk_status s = memo_reserve(ctx, m, (size_t)nj);
    for (int q = 0; q < nj && !s; q++) s = job[q].req->def->build(ctx, job[q].req->key, &job[q].k);
    if (!s) {
        tk_memo_batch b = {ctx, m->compile, job};
        if (nj == 1)
            memo_compile_one(&b, 0);
        else
            tk_pool_run(nj, memo_compile_one, &b);
    }
    const tk_diag *failed = NULL;
    for (int q = 0; q < nj; q++) {
        const tk_kernel_def *def = job[q].req->def;
        void *copy = job[q].p ? malloc(def->key_size ? def->key_size : 1) : NULL;
        if (copy) {
            memcpy(copy, job[q].req->key, def->key_size);
            m->e[m->n++] = (tk_memo_entry){.def = def, .key = copy, .prog = job[q].p};
        } else if (job[q].p) {
            tk_program_release(job[q].p), job[q].p = NULL;
            tk_diag_fail(&job[q].dg, TK_ERR_NO_MEMORY, "%s: out of memory", def->name);
        }
        if (!failed && job[q].dg.st) failed = &job[q].dg;
        tk_kernel_destroy(job[q].k);
    }
    return s ? s : failed ? tk_ctx_report(ctx, "", failed) : TK_OK;
}

static tk_status check_reqs(tk_ctx *ctx, int n, const tk_registry_req *req, tk_program **out) {
    if (n < 0 || (n && (!req || !out)))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_registry_programs: %s",
                           n < 0  ? "n is negative"
                           : !req ? "req is NULL"
                                  : "out is NULL");
    for (int i = 0; i < n; i++) {
        const tk_kernel_def *def = req[i].def;
        if (!def || !def->build || (!req[i].key && def->key_size))
            return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_registry_programs: request %d's %s", i,
                               !def          ? "def is NULL"
                               : !def->build ? "def->build is NULL"
                                             : "key is NULL");
    }
    return TK_OK;
}

tk_status tk_registry_programs(tk_ctx *ctx, int n, const tk_registry_req *req, tk_program **out,
                               tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = check_reqs(ctx, n, req, out);
    if (s) return s;
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return TK_ERR_NO_MEMORY; /* tk_ctx_slot says why */
    double t0 = tk_now_ms();
    int *at = malloc(sizeof *at * (size_t)n + 1);
    tk_memo_job *job = calloc((size_t)n + 1, sizeof *job);
    if (!at || !job) {
        free(at), free(job);
        return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_registry_programs: out of memory");
    }
    tk_origin origin = TK_FROM_MEMORY; /* the batch's: its least cached program's */
    pthread_mutex_lock(&m->mu);
    int nj = memo_misses(m, n, req, out, at, job);
    if (nj) s = memo_run(ctx, m, job, nj);
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < n && !s; i++) {
        if (at[i] >= 0) out[i] = job[at[i]].p;
        tk_origin o = at[i] >= 0 ? tk_program_origin(out[i]) : TK_FROM_MEMORY;
        origin = o < origin ? o : origin;
    }
    free(at), free(job);
    if (s) return s;
    if (info) {
        info->origin = origin;
        info->ms = tk_now_ms() - t0;
        tk_registry_arch(ctx, info->arch, sizeof info->arch);
    }
    return TK_OK;
}

tk_status tk_registry_program(tk_ctx *ctx, const tk_kernel_def *def, const void *key,
                              tk_program **out, tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!def || !def->build || !out || (!key && def->key_size))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_registry_program: %s is NULL",
                           !def          ? "def"
                           : !def->build ? "def->build"
                           : !out        ? "out"
                                         : "key");
    tk_registry_req r = {def, key};
    return tk_registry_programs(ctx, 1, &r, out, info);
}

void tk_registry_arch(tk_ctx *ctx, char *buf, size_t n) {
    if (!buf || !n) return;
    buf[0] = '\0';
    /* The interpreter's: never a driver's, never remembered (a memo made
     * before tk_ctx_set_backend may hold the GPU's). */
    tk_host_target t;
    if (tk_host_backend(ctx, &t)) {
        if (strlen(t.arch) < n) memcpy(buf, t.arch, strlen(t.arch) + 1);
        return;
    }
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return; /* out of memory: the caller's next step reports it */
    pthread_mutex_lock(&m->mu);
    if (!m->arch[0] && tk_gpu_arch(ctx, m->arch, sizeof m->arch)) m->arch[0] = '\0';
    size_t len = strlen(m->arch);
    if (len < n) memcpy(buf, m->arch, len + 1);
    pthread_mutex_unlock(&m->mu);
}

tk_status tk_registry_set_compile(tk_ctx *ctx, tk_registry_compile_fn compile) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return TK_ERR_NO_MEMORY;
    pthread_mutex_lock(&m->mu);
    m->compile = compile ? compile : tk_compile_dg;
    pthread_mutex_unlock(&m->mu);
    return TK_OK;
}

tk_status tk_params_read(tk_ctx *ctx, const char *fn, const void *src, void *dst, size_t dst_size,
                         size_t min_size) {
    memset(dst, 0, dst_size);
    if (!src) return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG, "%s: params is NULL", fn);
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size == 0)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: params.struct_size is 0; set it "
                                "to sizeof the struct (its TK_..._PARAMS_INIT does)",
                                fn);
    if (size < min_size)
        return tk_ctx_set_error(ctx, TK_ERR_INVALID_ARG,
                                "%s: params.struct_size is %zu; the "
                                "smallest layout is %zu bytes",
                                fn, size, min_size);
    /* A newer caller's struct: what this library cannot read must be unset. */
    for (size_t i = dst_size; i < size; i++)
        if (((const unsigned char *)src)[i])
            return tk_ctx_set_error(ctx, TK_ERR_UNSUPPORTED,
                                    "%s: params.struct_size is %zu and "
                                    "sets fields past byte %zu, which this library (%s) does "
                                    "not know",
                                    fn, size, dst_size, tk_version());
    memcpy(dst, src, size < dst_size ? size : dst_size);
    memcpy(dst, &dst_size, sizeof dst_size);
    return TK_OK;
}
