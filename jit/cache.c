/* Cache keys, the in-memory table and statistics (see jit/cache.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ir/ir.h"
#include "jit/cache.h"
#include "tk_codegen_id.h" /* generated into the build tree by cmake/codegen_id.cmake */

#ifndef TK_LLVM_VERSION
#define TK_LLVM_VERSION "unknown"
#endif

_Static_assert(sizeof(tk_disk_header) == 176, "tk_disk_header must have no padding");

/* Each field is hashed with its length in front, so no two different field
 * lists produce the same byte stream. */
static void tk_hash_field(XXH3_state_t *st, const char *s) {
    uint64_t len = strlen(s);
    XXH3_128bits_update(st, &len, sizeof len);
    XXH3_128bits_update(st, s, (size_t)len);
}

const char *tk_codegen_id(void) { return TK_CODEGEN_ID; }

void tk_cache_id_make(tk_cache_id *id, const char *ir_text, const char *arch,
                      const char *compiler) {
    tk_cache_id_make_for(id, ir_text, arch, compiler, TK_CODEGEN_ID);
}

void tk_cache_id_make_for(tk_cache_id *id, const char *ir_text, const char *arch,
                          const char *compiler, const char *codegen) {
    uint64_t h[2];
    tk_canon_hash(ir_text, h);
    tk_cache_id_from_hash(id, h, arch, compiler, codegen);
}

void tk_cache_id_of(tk_cache_id *id, const tk_kernel *k, const char *arch, const char *compiler) {
    tk_cache_id_from_hash(id, k->canon_hash, arch, compiler, TK_CODEGEN_ID);
}

/* s into dst (n bytes), cut to fit and NUL-terminated. */
static void tk_copy_cut(char *dst, size_t n, const char *s) {
    size_t len = strnlen(s, n - 1);
    memcpy(dst, s, len);
    dst[len] = '\0';
}

/* The version names the key's fields: bump it when they change. The entry
 * ABI a cubin was built for (ir/abi.h, the plan's extra parameters, shared
 * memory and block size) once needed a bump by hand too; the code
 * generator's digest now covers it. v2: plans; v3: producer warps; v4: the
 * code generator's digest; v5: the text's XXH3-128 in place of the text
 * (a kernel carries it from tk_kernel_finish: a lookup hashes ~200 bytes,
 * not the whole text). */
void tk_cache_id_from_hash(tk_cache_id *id, const uint64_t text_hash[2], const char *arch,
                           const char *compiler, const char *codegen) {
    XXH3_state_t st;
    memset(&st, 0, sizeof st);
    XXH3_128bits_reset(&st);
    tk_hash_field(&st, "tilekittens cache key v5");
    XXH3_128bits_update(&st, text_hash, 16);
    tk_hash_field(&st, arch);
    tk_hash_field(&st, TK_LLVM_VERSION);
    tk_hash_field(&st, compiler);
    tk_hash_field(&st, codegen);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    memset(id, 0, sizeof *id);
    id->key.lo = h.low64;
    id->key.hi = h.high64;
    tk_copy_cut(id->arch, sizeof id->arch, arch);
    tk_copy_cut(id->compiler, sizeof id->compiler, compiler);
    tk_copy_cut(id->llvm, sizeof id->llvm, TK_LLVM_VERSION);
    /* A prefix, not NUL-terminated when the id is long (the header keeps the
     * same bytes; the key hashes the whole id). */
    size_t len = strlen(codegen);
    memcpy(id->codegen, codegen, len < sizeof id->codegen ? len : sizeof id->codegen);
}

void tk_key_hex(tk_key k, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)k.hi, (unsigned long long)k.lo);
}

/* The directory the environment asks for; NULL: disabled (or no home). */
static char *tk_cache_default_dir(void) {
    const char *d = getenv("TK_CACHE_DIR");
    if (d) return *d ? strdup(d) : NULL;
    const char *base = getenv("XDG_CACHE_HOME");
    const char *tail = "/tilekittens";
    if (!base || !*base) {
        base = getenv("HOME");
        tail = "/.cache/tilekittens";
    }
    if (!base || !*base) return NULL;
    size_t n = strlen(base) + strlen(tail) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", base, tail);
    return s;
}

int tk_cache_init(tk_cache *c, tk_retain_fn retain, tk_release_fn release) {
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->lock, NULL) != 0) return -1;
    if (pthread_mutex_init(&c->defaults_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->lock);
        return -1;
    }
    c->retain = retain;
    c->release = release;
    c->limit = TK_CACHE_DEFAULT_LIMIT;
    c->dir = tk_cache_default_dir();
    return 0;
}

void tk_cache_fini(tk_cache *c) {
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].val && c->release) c->release(c->slots[i].val);
    free(c->slots);
    free(c->dir);
    for (int i = 0; i < c->npacks; i++) free(c->packs[i].dir);
    free(c->manifest_dir);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->defaults_lock);
    memset(c, 0, sizeof *c);
}

tk_status tk_cache_dir_set(tk_cache *c, const char *dir) {
    char *copy = NULL;
    if (dir && !(copy = strdup(dir))) return TK_ERR_NO_MEMORY;
    pthread_mutex_lock(&c->lock);
    free(c->dir);
    c->dir = copy;
    /* A new directory gets its own check and its own report. */
    c->disk_state = TK_DISK_UNCHECKED;
    c->stats.disk_error[0] = '\0';
    pthread_mutex_unlock(&c->lock);
    return TK_OK;
}

int tk_cache_dir_copy(tk_cache *c, char *buf, size_t n) {
    pthread_mutex_lock(&c->lock);
    int ok = c->dir && (size_t)snprintf(buf, n, "%s", c->dir) < n;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/* ---- Memory table ------------------------------------------------------ */
static int tk_key_eq(tk_key a, tk_key b) { return a.lo == b.lo && a.hi == b.hi; }

/* Keys are already uniform hashes: their low bits index directly. */
static size_t tk_slot_of(const tk_memslot *slots, size_t cap, tk_key key) {
    size_t i = (size_t)key.lo & (cap - 1);
    while (slots[i].val && !tk_key_eq(slots[i].key, key)) i = (i + 1) & (cap - 1);
    return i;
}

/* Doubles the table (kept at most half full so probes stay short). */
static int tk_mem_grow(tk_cache *c) {
    size_t cap = c->cap ? c->cap * 2 : 64;
    tk_memslot *s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].val) s[tk_slot_of(s, cap, c->slots[i].key)] = c->slots[i];
    free(c->slots);
    c->slots = s;
    c->cap = cap;
    return 0;
}

void *tk_mem_find(tk_cache *c, tk_key key) {
    void *v = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->cap) {
        v = c->slots[tk_slot_of(c->slots, c->cap, key)].val;
        if (v && c->retain) v = c->retain(v);
    }
    pthread_mutex_unlock(&c->lock);
    return v;
}

void *tk_mem_insert(tk_cache *c, tk_key key, void *val) {
    pthread_mutex_lock(&c->lock);
    if ((c->used + 1) * 2 > c->cap && tk_mem_grow(c) != 0) {
        pthread_mutex_unlock(&c->lock);
        return val; /* out of memory: works, just uncached */
    }
    tk_memslot *s = &c->slots[tk_slot_of(c->slots, c->cap, key)];
    void *out = val;
    if (s->val) {
        out = c->retain ? c->retain(s->val) : s->val; /* another thread won */
    } else {
        s->key = key;
        s->val = c->retain ? c->retain(val) : val;
        c->used++;
    }
    pthread_mutex_unlock(&c->lock);
    return out;
}

/* ---- Statistics ------------------------------------------------------------ */
void tk_cache_note(tk_cache *c, tk_stat what, double amount) {
    pthread_mutex_lock(&c->lock);
    tk_cache_stats *s = &c->stats;
    switch (what) {
    case TK_STAT_MEMORY_HIT: s->memory_hits++; break;
    case TK_STAT_DISK_HIT: s->disk_hits++; break;
    case TK_STAT_MISS: s->misses++; break;
    case TK_STAT_REJECTED: s->rejected++; break;
    case TK_STAT_EVICTED: s->evicted += (uint64_t)amount; break;
    case TK_STAT_LLVM_MS: s->llvm_ms += amount; break;
    case TK_STAT_CUBIN_MS: s->ptx_to_cubin_ms += amount; break;
    }
    pthread_mutex_unlock(&c->lock);
}

void tk_cache_stats_copy(tk_cache *c, tk_cache_stats *out) {
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}
