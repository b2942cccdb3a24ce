/* The on-disk cubin store (see jit/cache.h for the format and guarantees). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "jit/cache.h"
#include "jit/fs.h"
#include "jit/jit.h"

/* Temp files older than this are leftovers of crashed writers. */
#define TK_STALE_TMP_S 3600

int tk_disk_path(tk_cache *c, tk_key key, char *buf, size_t n) {
    char dir[PATH_MAX], hex[33];
    if (!tk_cache_dir_copy(c, dir, sizeof dir)) return -1;
    tk_key_hex(key, hex);
    return (size_t)snprintf(buf, n, "%s/%s.tkc", dir, hex) < n ? 0 : -1;
}

/* Records the directory's first problem in the statistics and tells
 * c->warn, once per directory (a problem with a directory since replaced
 * is dropped). */
static void tk_disk_problem(tk_cache *c, const char *dir, tk_disk_state state, const char *why) {
    char msg[sizeof c->stats.disk_error];
    snprintf(msg, sizeof msg, "%s: %s", dir, why);
    pthread_mutex_lock(&c->lock);
    int first = c->dir && strcmp(c->dir, dir) == 0 && !c->stats.disk_error[0];
    if (first) {
        memcpy(c->stats.disk_error, msg, sizeof msg);
        if (state != TK_DISK_UNCHECKED) c->disk_state = state;
    }
    void (*warn)(void *, tk_status, const char *) = c->warn;
    void *user = c->warn_user;
    pthread_mutex_unlock(&c->lock);
    char told[sizeof msg + 16];
    snprintf(told, sizeof told, "disk cache %s", msg);
    if (first && warn) warn(user, TK_ERR_CACHE, told);
}

/* Whether a file can be made in dir: creates and deletes a probe. 0 or -1. */
static int tk_dir_probe(const char *dir) {
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.tmp-probe-XXXXXX", dir) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return -1;
    close(fd);
    unlink(tmp);
    return 0;
}

tk_disk_state tk_disk_check(tk_cache *c) {
    char dir[PATH_MAX], why[PATH_MAX + 96];
    pthread_mutex_lock(&c->lock);
    tk_disk_state st = (tk_disk_state)c->disk_state;
    pthread_mutex_unlock(&c->lock);
    if (st != TK_DISK_UNCHECKED) return st;
    if (!tk_cache_dir_copy(c, dir, sizeof dir)) return TK_DISK_OFF;
    /* Racing threads may both probe: the answers agree, one is reported. */
    st = TK_DISK_OK;
    if (tk_mkdirs(dir) != 0) {
        int e = errno;
        st = TK_DISK_OFF;
        snprintf(why, sizeof why,
                 "%s%s (the disk cache is off: every process compiles its "
                 "kernels anew)",
                 e == ENOTDIR || e == EEXIST ? "" : "cannot be created: ",
                 e == ENOTDIR || e == EEXIST ? "not a directory" : strerror(e));
    } else if (tk_dir_probe(dir) != 0) {
        st = TK_DISK_READONLY;
        snprintf(why, sizeof why,
                 "not writable: %s (entries are read, new kernels are not "
                 "stored)",
                 strerror(errno));
    }
    if (st != TK_DISK_OK) tk_disk_problem(c, dir, st, why);
    pthread_mutex_lock(&c->lock);
    if (c->disk_state == TK_DISK_UNCHECKED && c->dir && strcmp(c->dir, dir) == 0)
        c->disk_state = st;
    st = (tk_disk_state)c->disk_state;
    pthread_mutex_unlock(&c->lock);
    return st;
}

static void tk_header_make(tk_disk_header *h, const tk_cache_id *id, const void *payload,
                           size_t n) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, TK_DISK_MAGIC, 8);
    h->format = TK_DISK_FORMAT;
    h->header_size = sizeof *h;
    h->key_lo = id->key.lo;
    h->key_hi = id->key.hi;
    memcpy(h->arch, id->arch, sizeof h->arch);
    memcpy(h->compiler, id->compiler, sizeof h->compiler);
    memcpy(h->llvm, id->llvm, sizeof h->llvm);
    memcpy(h->codegen, id->codegen, sizeof h->codegen);
    h->payload_size = n;
    h->checksum = XXH3_64bits(payload, n);
}

/* Why the header does not describe this id in a file of `size` bytes, or
 * NULL when it does. */
static const char *tk_header_check(const tk_disk_header *h, const tk_cache_id *id, off_t size) {
    if (memcmp(h->magic, TK_DISK_MAGIC, 8) != 0) return "wrong magic";
    if (h->format != TK_DISK_FORMAT || h->header_size != sizeof *h) return "unknown format version";
    if (h->key_lo != id->key.lo || h->key_hi != id->key.hi) return "key mismatch";
    if (memcmp(h->arch, id->arch, sizeof h->arch) != 0) return "foreign arch";
    if (memcmp(h->compiler, id->compiler, sizeof h->compiler) != 0)
        return "foreign compiler version";
    if (memcmp(h->llvm, id->llvm, sizeof h->llvm) != 0) return "foreign LLVM version";
    if (memcmp(h->codegen, id->codegen, sizeof h->codegen) != 0) return "foreign code generator";
    if ((uint64_t)size - sizeof *h != h->payload_size)
        return (uint64_t)size - sizeof *h < h->payload_size ? "truncated" : "trailing bytes";
    return NULL;
}

/* Reads and checks the entry open at fd. NULL, or why it is unusable. */
static const char *tk_entry_read(int fd, const tk_cache_id *id, void **payload, size_t *n) {
    struct stat st;
    tk_disk_header h;
    if (fstat(fd, &st) != 0) return "cannot stat";
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if ((size_t)st.st_size < sizeof h) return "truncated";
    if (tk_read_all(fd, &h, sizeof h) != 0) return "unreadable header";
    const char *why = tk_header_check(&h, id, st.st_size);
    if (why) return why;
    void *buf = malloc(h.payload_size ? h.payload_size : 1);
    if (!buf) return "out of memory";
    if (tk_read_all(fd, buf, h.payload_size) != 0) {
        free(buf);
        return "truncated";
    }
    if (XXH3_64bits(buf, h.payload_size) != h.checksum) {
        free(buf);
        return "checksum mismatch";
    }
    *payload = buf;
    *n = h.payload_size;
    return NULL;
}

/* Deletes path if it is still the file we judged (a writer may have renamed
 * a fresh entry over it meanwhile), and counts the rejection. */
static void tk_entry_drop(tk_cache *c, const char *path, int fd) {
    struct stat a, b;
    if (fd < 0 ||
        (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev))
        unlink(path);
    tk_cache_note(c, TK_STAT_REJECTED, 1);
}

tk_status tk_disk_get(tk_cache *c, const tk_cache_id *id, void **payload, size_t *n, tk_diag *dg) {
    char path[PATH_MAX];
    *payload = NULL;
    *n = 0;
    if (tk_disk_check(c) == TK_DISK_OFF || tk_disk_path(c, id->key, path, sizeof path) != 0)
        return TK_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) return TK_OK; /* absent or unreadable: a miss either way */
    const char *why = tk_entry_read(fd, id, payload, n);
    if (why) {
        tk_diag_fail(dg, TK_ERR_CACHE, "rejected %s: %s", path, why); /* still a miss */
        tk_entry_drop(c, path, fd);
    } else {
        futimens(fd, NULL); /* LRU: a hit makes the entry young again */
    }
    close(fd);
    return TK_OK;
}

tk_status tk_disk_get_at(tk_cache *c, const char *dir, const tk_cache_id *id, void **payload,
                         size_t *n, tk_diag *dg) {
    char path[PATH_MAX], hex[33];
    *payload = NULL;
    *n = 0;
    tk_key_hex(id->key, hex);
    if ((size_t)snprintf(path, sizeof path, "%s/%s.tkc", dir, hex) >= sizeof path) return TK_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) return TK_OK;
    const char *why = tk_entry_read(fd, id, payload, n);
    close(fd);
    if (why) { /* another's directory: judged, counted, left as it is */
        tk_cache_note(c, TK_STAT_REJECTED, 1);
        tk_diag_fail(dg, TK_ERR_CACHE, "rejected %s: %s", path, why);
    }
    return TK_OK;
}

void tk_disk_reject(tk_cache *c, const tk_cache_id *id) {
    char path[PATH_MAX];
    if (tk_disk_path(c, id->key, path, sizeof path) == 0) tk_entry_drop(c, path, -1);
}

/* Header + payload into a fresh temp file next to the entry, fsync'ed. */
static tk_status tk_entry_write(const char *dir, const char *hex, const tk_disk_header *h,
                                const void *payload, char *tmp, size_t tmpn, tk_diag *dg) {
    if ((size_t)snprintf(tmp, tmpn, "%s/.tmp-%s-XXXXXX", dir, hex) >= tmpn)
        return tk_diag_fail(dg, TK_ERR_IO, "cache path too long: %s", dir);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return tk_diag_fail(dg, TK_ERR_IO, "cannot create a file in %s: %s", dir, strerror(errno));
    int bad = tk_write_all(fd, h, sizeof *h) || tk_write_all(fd, payload, h->payload_size) ||
              fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return tk_diag_fail(dg, TK_ERR_IO, "cannot write %s: %s", tmp, strerror(e));
    }
    return TK_OK;
}

static void tk_disk_evict(tk_cache *c, const char *dir);

tk_status tk_disk_put(tk_cache *c, const tk_cache_id *id, const void *payload, size_t n,
                      tk_diag *dg) {
    char dir[PATH_MAX], hex[33], tmp[PATH_MAX], path[PATH_MAX];
    if (!tk_cache_dir_copy(c, dir, sizeof dir))
        return tk_diag_fail(dg, TK_ERR_CACHE, "the disk cache is disabled");
    if (tk_disk_check(c) != TK_DISK_OK) {
        tk_cache_stats st;
        tk_cache_stats_copy(c, &st);
        return tk_diag_fail(dg, TK_ERR_IO, "cache directory %s", st.disk_error);
    }
    tk_key_hex(id->key, hex);
    if ((size_t)snprintf(path, sizeof path, "%s/%s.tkc", dir, hex) >= sizeof path)
        return tk_diag_fail(dg, TK_ERR_IO, "cache path too long: %s", dir);
    tk_disk_header h;
    tk_header_make(&h, id, payload, n);
    tk_diag mine = {0};
    tk_status s = tk_entry_write(dir, hex, &h, payload, tmp, sizeof tmp, &mine);
    /* rename is atomic: readers see the old entry, none, or the whole new one. */
    if (s == TK_OK && rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        s = tk_diag_fail(&mine, TK_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    if (s != TK_OK) { /* e.g. a full disk: the state stays, the first one is told */
        tk_disk_problem(c, dir, TK_DISK_UNCHECKED, mine.msg);
        return tk_diag_fail(dg, s, "%s", mine.msg);
    }
    tk_disk_evict(c, dir);
    return TK_OK;
}

/* ---- LRU eviction ---------------------------------------------------------- */
typedef struct tk_dent {
    char name[40];
    uint64_t size;
    struct timespec mtime;
} tk_dent;

static int tk_dent_older(const void *pa, const void *pb) {
    const tk_dent *a = pa, *b = pb;
    if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
    if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* "<32 hex>.tkc" */
static int tk_is_entry_name(const char *s) {
    if (strlen(s) != 36 || strcmp(s + 32, ".tkc") != 0) return 0;
    return strspn(s, "0123456789abcdef") == 32;
}

/* Lists the entries of dir (sizes, mtimes), deleting stale temp files. */
static tk_dent *tk_disk_scan(int dfd, size_t *count, uint64_t *total) {
    DIR *d = fdopendir(dup(dfd));
    tk_dent *v = NULL;
    size_t n = 0, cap = 0;
    *total = 0;
    struct dirent *e;
    time_t now = time(NULL);
    while (d && (e = readdir(d))) {
        struct stat st;
        int entry = tk_is_entry_name(e->d_name);
        if (!entry && strncmp(e->d_name, ".tmp-", 5) != 0) continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!entry) {
            if (now - st.st_mtime > TK_STALE_TMP_S) unlinkat(dfd, e->d_name, 0);
            continue;
        }
        if (n == cap) {
            tk_dent *nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        memcpy(v[n].name, e->d_name, 37); /* entry names are exactly 36 chars */
        v[n].size = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        *total += v[n++].size;
    }
    if (d) closedir(d);
    *count = n;
    return v;
}

/* Deletes least recently used entries until the directory fits the limit. */
static void tk_disk_evict(tk_cache *c, const char *dir) {
    pthread_mutex_lock(&c->lock);
    uint64_t limit = c->limit;
    pthread_mutex_unlock(&c->lock);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    size_t n;
    uint64_t total;
    tk_dent *v = tk_disk_scan(dfd, &n, &total);
    if (total > limit && v) {
        qsort(v, n, sizeof *v, tk_dent_older);
        uint64_t evicted = 0;
        for (size_t i = 0; i < n && total > limit; i++) {
            /* ENOENT: another process evicted it first; it is gone either way. */
            if (unlinkat(dfd, v[i].name, 0) == 0) evicted++;
            total -= v[i].size;
        }
        if (evicted) tk_cache_note(c, TK_STAT_EVICTED, (double)evicted);
    }
    free(v);
    close(dfd);
}
