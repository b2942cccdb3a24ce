/* The ready-made kernels' memo (jit/registry.h): a context slot holding a
 * growable array of (definition, key bytes, program), searched linearly
 * under one mutex: a process uses a few dozen specializations at most, and a
 * hit costs a short scan and one memcmp per candidate, no hashing. The
 * programs one call lacks compile side by side on a pool's threads, and
 * threads asking for different keys compile them at the same time. */
#include <pthread.h>
#include <stdbool.h>
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
    void *key;        /* def->key_size bytes                                   */
    tk_program *prog; /* the memo's reference; NULL while a thread builds it   */
} tk_memo_entry;

typedef struct tk_memo {
    /* Guards everything below. Not held across builds and compiles: a thread
     * claims a key with an entry of no program, and threads asking for it
     * wait on `done` until that entry gets its program or goes away. */
    pthread_mutex_t mu;
    pthread_cond_t done;
    tk_memo_entry *e;
    size_t n, cap;
    char arch[16]; /* the GPU's, once known ("" before) */
    int sms;       /* its SM count, once known (0 before) */
    tk_registry_compile_fn compile;
} tk_memo;

static void memo_destroy(void *state) {
    tk_memo *m = state;
    for (size_t i = 0; i < m->n; i++) {
        tk_program_release(m->e[i].prog);
        free(m->e[i].key);
    }
    free(m->e);
    pthread_cond_destroy(&m->done);
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
    if (pthread_cond_init(&m->done, NULL)) {
        pthread_mutex_destroy(&m->mu);
        free(m);
        return NULL;
    }
    m->compile = tk_compile_dg;
    return m;
}

static const tk_ctx_slot_def memo_slot = {"kernel registry", memo_make, memo_destroy};

/* Keys of def->key_size bytes (0: every key is the same, maybe NULL). */
static bool same_key(const tk_kernel_def *def, const void *a, const void *b) {
    return !def->key_size || !memcmp(a, b, def->key_size);
}

static tk_memo_entry *memo_find(const tk_memo *m, const tk_kernel_def *def, const void *key) {
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].def == def && same_key(def, m->e[i].key, key)) return &m->e[i];
    return NULL;
}

/* One program a call claimed: its first request, built kernel, result and
 * where it came from (read when made: a later memory hit of the same text
 * on another thread rewrites the program's own). */
typedef struct tk_memo_job {
    const tk_registry_req *req;
    tk_kernel *k;
    tk_program *p;
    tk_origin origin;
    tk_diag dg;
} tk_memo_job;

typedef struct tk_memo_batch {
    tk_ctx *ctx;
    tk_registry_compile_fn compile;
    tk_memo_job *job;
} tk_memo_batch;

/* Compiles job i, a status always with its message and a success always
 * with a program (a compile step that breaks either rule fails here). */
static void memo_compile_one(void *user, int i) {
    tk_memo_batch *b = user;
    tk_memo_job *j = &b->job[i];
    tk_status s = b->compile(b->ctx, j->k, &j->p, &j->dg);
    if (s && !j->dg.st)
        tk_diag_fail(&j->dg, s, "tk_compile: kernel '%s' failed", tk_kernel_name(j->k));
    if (!s && !j->p)
        tk_diag_fail(&j->dg, TK_ERR_STATE, "tk_compile: kernel '%s': no program",
                     tk_kernel_name(j->k));
    if (j->dg.st && j->p) {
        tk_program_release(j->p);
        j->p = NULL;
    }
    if (j->p) j->origin = tk_program_origin(j->p);
}

/* A claim on r's key: an entry with no program yet (the lock held). */
static tk_status memo_claim(tk_ctx *ctx, tk_memo *m, const tk_registry_req *r) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        tk_memo_entry *e = realloc(m->e, cap * sizeof *e);
        if (!e) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", r->def->name);
        m->e = e, m->cap = cap;
    }
    void *copy = malloc(r->def->key_size ? r->def->key_size : 1);
    if (!copy) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", r->def->name);
    if (r->def->key_size) memcpy(copy, r->key, r->def->key_size);
    m->e[m->n++] = (tk_memo_entry){.def = r->def, .key = copy, .prog = NULL};
    return TK_OK;
}

/* One pass over the requests (the lock held): hits into out[], keys being
 * built by another thread noted (*busy), and the others claimed as jobs,
 * each key once (an entry of no program is this pass's claim or another
 * thread's). A claim that fails stops the pass; the jobs claimed so far are
 * in *nj. A pass that claims nothing and finds nothing busy has filled
 * out[]. */
static tk_status memo_pass(tk_ctx *ctx, tk_memo *m, int n, const tk_registry_req *req,
                           tk_program **out, tk_memo_job *job, int *nj, bool *busy) {
    *nj = 0, *busy = false;
    for (int i = 0; i < n; i++) {
        const tk_registry_req *r = &req[i];
        tk_memo_entry *e = memo_find(m, r->def, r->key);
        bool mine = false;
        if (e && e->prog) {
            out[i] = e->prog;
            continue;
        }
        for (int q = 0; q < *nj && !mine; q++)
            mine = job[q].req->def == r->def && same_key(r->def, job[q].req->key, r->key);
        if (mine) continue;
        if (e) { /* another thread's claim */
            *busy = true;
            continue;
        }
        tk_status s = memo_claim(ctx, m, r);
        if (s) return s;
        job[(*nj)++] = (tk_memo_job){.req = r};
    }
    return TK_OK;
}

/* Builds the claimed kernels here, one by one (a fraction of a millisecond
 * each; builders report on the context) and checks each is finished, then
 * compiles them side by side (jit/pool.h). The lock not held. */
static tk_status memo_work(tk_ctx *ctx, tk_registry_compile_fn compile, tk_memo_job *job, int nj) {
    tk_status s = TK_OK;
    for (int q = 0; q < nj && !s; q++) {
        const tk_kernel_def *def = job[q].req->def;
        s = def->build(ctx, job[q].req->key, &job[q].k);
        if (!s) s = tk_jit_check_kernel(ctx, def->name, job[q].k, NULL);
    }
    if (s) return s; /* no compile: the builds so far are dropped */
    tk_memo_batch b = {ctx, compile, job};
    tk_pool_run(nj, memo_compile_one, &b); /* one job: on this thread, no pool */
    for (int q = 0; q < nj; q++)
        if (job[q].dg.st) return tk_ctx_report(ctx, "", &job[q].dg); /* request order */
    return TK_OK;
}

/* The claims settled (the lock held): each compiled program into its entry,
 * the entries of the others removed (failures are not memoized), waiting
 * threads woken. */
static void memo_settle(tk_memo *m, tk_memo_job *job, int nj) {
    for (int q = 0; q < nj; q++) {
        tk_memo_entry *e = memo_find(m, job[q].req->def, job[q].req->key);
        if (job[q].p) {
            e->prog = job[q].p;
        } else {
            free(e->key);
            *e = m->e[--m->n];
        }
        tk_kernel_destroy(job[q].k);
        job[q].k = NULL;
    }
    pthread_cond_broadcast(&m->done);
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

/* Passes until every request is a hit: claims built and compiled with the
 * lock released, other threads' claims waited for (a claim that failed is
 * gone by then, and the next pass claims it again). *origin: the least
 * cached of the programs this call compiled. */
static tk_status memo_get(tk_ctx *ctx, tk_memo *m, int n, const tk_registry_req *req,
                          tk_program **out, tk_memo_job *job, tk_origin *origin) {
    tk_status s = TK_OK;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        int nj;
        bool busy;
        s = memo_pass(ctx, m, n, req, out, job, &nj, &busy);
        if (nj) {
            tk_registry_compile_fn compile = m->compile;
            pthread_mutex_unlock(&m->mu);
            if (!s) s = memo_work(ctx, compile, job, nj);
            for (int q = 0; q < nj; q++)
                if (job[q].p && job[q].origin < *origin) *origin = job[q].origin;
            pthread_mutex_lock(&m->mu);
            memo_settle(m, job, nj);
        }
        if (s || (!nj && !busy)) break;
        if (!nj) pthread_cond_wait(&m->done, &m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* Every request a ready program, into out[]: a launch's path, which
 * allocates nothing. */
static bool memo_all_hits(tk_memo *m, int n, const tk_registry_req *req, tk_program **out) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    for (tk_memo_entry *e; i < n && (e = memo_find(m, req[i].def, req[i].key)) && e->prog; i++)
        out[i] = e->prog;
    pthread_mutex_unlock(&m->mu);
    return i == n;
}

tk_status tk_registry_programs(tk_ctx *ctx, int n, const tk_registry_req *req, tk_program **out,
                               tk_prepare_info *info) {
    if (!ctx) return TK_ERR_INVALID_ARG;
    tk_status s = check_reqs(ctx, n, req, out);
    if (s || !n) return s;
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return TK_ERR_NO_MEMORY; /* tk_ctx_slot says why */
    double t0 = info ? tk_now_ms() : 0.0;
    tk_origin origin = TK_FROM_MEMORY; /* the least cached program's */
    if (!memo_all_hits(m, n, req, out)) {
        tk_memo_job *job = calloc((size_t)n, sizeof *job);
        s = job ? memo_get(ctx, m, n, req, out, job, &origin)
                : tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "tk_registry_programs: out of memory");
        free(job);
        if (s) return s;
    }
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

tk_status tk_registry_programs_of(tk_ctx *ctx, const tk_kernel_def *def, int n, const void *keys,
                                  tk_program **out, tk_prepare_info *info) {
    enum { MAX = 16 }; /* an entry point's launches */
    if (!ctx) return TK_ERR_INVALID_ARG;
    if (!def || n < 0 || n > MAX || (n && !keys))
        return tk_ctx_fail(ctx, TK_ERR_INVALID_ARG, "tk_registry_programs_of: %s",
                           !def               ? "def is NULL"
                           : n < 0 || n > MAX ? "n out of 0..16"
                                              : "keys is NULL");
    tk_registry_req req[MAX];
    for (int i = 0; i < n; i++)
        req[i] = (tk_registry_req){def, (const char *)keys + (size_t)i * def->key_size};
    return tk_registry_programs(ctx, n, req, out, info);
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

int tk_registry_sm_count(tk_ctx *ctx) {
    tk_host_target t;
    if (tk_host_backend(ctx, &t)) return t.sms;
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return 0;
    pthread_mutex_lock(&m->mu);
    if (m->sms <= 0 && tk_gpu_sm_count(ctx, &m->sms)) m->sms = 0;
    int n = m->sms;
    pthread_mutex_unlock(&m->mu);
    return n;
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
