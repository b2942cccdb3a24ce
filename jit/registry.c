/* The ready-made kernels' memo (jit/registry.h): a context slot holding a
 * growable array of (definition, key bytes, program), searched linearly
 * under one mutex: a process uses a few dozen specializations at most, and a
 * hit costs a short scan and one memcmp per candidate, no hashing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ctx.h"
#include "jit/host.h"
#include "jit/jit.h"
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
    m->compile = tk_compile;
    return m;
}

static const tk_ctx_slot_def memo_slot = {"kernel registry", memo_make, memo_destroy};

static tk_program *memo_find(const tk_memo *m, const tk_kernel_def *def, const void *key) {
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].def == def && !memcmp(m->e[i].key, key, def->key_size)) return m->e[i].prog;
    return NULL;
}

/* Builds and compiles (def, key) into a new entry (the lock held). */
static tk_status memo_add(tk_ctx *ctx, tk_memo *m, const tk_kernel_def *def, const void *key,
                          tk_program **out) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        tk_memo_entry *e = realloc(m->e, cap * sizeof *e);
        if (!e) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", def->name);
        m->e = e;
        m->cap = cap;
    }
    void *copy = malloc(def->key_size ? def->key_size : 1);
    if (!copy) return tk_ctx_fail(ctx, TK_ERR_NO_MEMORY, "%s: out of memory", def->name);
    memcpy(copy, key, def->key_size);
    tk_kernel *k = NULL;
    tk_program *p = NULL;
    tk_status s = def->build(ctx, key, &k);
    if (!s) s = m->compile(ctx, k, &p);
    tk_kernel_destroy(k);
    if (s) {
        free(copy);
        return s;
    }
    m->e[m->n++] = (tk_memo_entry){.def = def, .key = copy, .prog = p};
    *out = p;
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
    tk_memo *m = tk_ctx_slot(ctx, &memo_slot);
    if (!m) return TK_ERR_NO_MEMORY; /* tk_ctx_slot says why */
    double t0 = tk_now_ms();
    tk_origin origin = TK_FROM_MEMORY;
    tk_status s = TK_OK;
    pthread_mutex_lock(&m->mu);
    tk_program *p = memo_find(m, def, key);
    if (!p && !(s = memo_add(ctx, m, def, key, &p))) origin = tk_program_origin(p);
    pthread_mutex_unlock(&m->mu);
    if (s) return s;
    *out = p;
    if (info) {
        info->origin = origin;
        info->ms = tk_now_ms() - t0;
        tk_registry_arch(ctx, info->arch, sizeof info->arch);
    }
    return TK_OK;
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
    m->compile = compile ? compile : tk_compile;
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
