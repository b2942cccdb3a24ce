/* Kernel packs: read-only directories of cubins compiled ahead of time.
 *
 * A disk cache entry is keyed by the compiler that made it, and tk_compile
 * looks its own directory up under the keys of the compilers it has (the
 * driver's JIT, the local ptxas). A directory that tk_precompile filled on
 * another machine therefore missed on a GPU machine without that very
 * ptxas, although the driver loads any cubin for its arch that it is not
 * too old for. A pack's manifest names the compilers of its entries, so its
 * keys can be made anywhere: the cubins are used as they are, and a cubin
 * the driver refuses is a miss, never deleted (another's directory).
 *
 * Every directory tk_precompile (tk-aot) fills gets a manifest; packs are
 * added with tk_cache_add_pack, TK_KERNEL_PACKS, and the install's pack. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit/cache.h"
#include "jit/fs.h"

#define MANIFEST_MAX 4096 /* bytes read of a manifest */

/* The manifest's text (NUL-terminated, at most MANIFEST_MAX bytes), or why
 * not. Opened without blocking and read only as a regular file: a FIFO
 * planted there must not hang the library. */
static const char *manifest_text(const char *dir, char *text, size_t *len) {
    char path[PATH_MAX];
    struct stat st;
    if (stat(dir, &st) != 0) return errno == ENOENT ? "no such directory" : strerror(errno);
    if (!S_ISDIR(st.st_mode)) return "not a directory";
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, TK_PACK_MANIFEST) >= sizeof path)
        return "path too long";
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? "no " TK_PACK_MANIFEST " manifest (tk-aot writes one)"
                               : "unreadable " TK_PACK_MANIFEST " manifest";
    const char *why = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = "the " TK_PACK_MANIFEST " manifest is not a regular file";
    else if (st.st_size > MANIFEST_MAX)
        why = "the " TK_PACK_MANIFEST " manifest is too long";
    else if (tk_read_all(fd, text, (size_t)st.st_size) != 0)
        why = "unreadable " TK_PACK_MANIFEST " manifest";
    else
        *len = (size_t)st.st_size, text[*len] = '\0';
    close(fd);
    return why;
}

/* The compilers a manifest names (the last TK_PACK_COMPILERS of them), or
 * why it is unusable. */
static const char *manifest_read(const char *dir, tk_pack_entry *e) {
    char text[MANIFEST_MAX + 1];
    size_t len = 0, m = strlen(TK_PACK_MAGIC), c = strlen("compiler ");
    const char *why = manifest_text(dir, text, &len);
    if (why) return why;
    if (len < m + 1 || memcmp(text, TK_PACK_MAGIC, m) != 0 || text[m] != '\n')
        return "the manifest is not a " TK_PACK_MAGIC;
    e->ncomp = 0;
    for (char *line = text + m + 1, *nl; line < text + len; line = nl + 1) {
        if (!(nl = memchr(line, '\n', (size_t)(text + len - line))))
            return "the manifest's last line is not ended";
        size_t idn = (size_t)(nl - line) - c;
        if ((size_t)(nl - line) <= c || memcmp(line, "compiler ", c) != 0)
            return "the manifest has a line that names no compiler";
        for (const char *p = line + c; p < nl; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                return "the manifest's compiler line has a control character";
        if (idn >= TK_PACK_ID_LEN) return "the manifest's compiler line is too long";
        if (e->ncomp == TK_PACK_COMPILERS) /* keep the last ones */
            memmove(e->compiler[0], e->compiler[1], sizeof e->compiler[0] * --e->ncomp);
        memcpy(e->compiler[e->ncomp], line + c, idn), e->compiler[e->ncomp++][idn] = '\0';
    }
    return e->ncomp ? NULL : "the manifest names no compiler";
}

tk_status tk_pack_add(tk_cache *c, const char *dir, tk_diag *dg) {
    tk_pack_entry e = {0};
    const char *why = manifest_read(dir, &e);
    if (why) return tk_diag_fail(dg, TK_ERR_CACHE, "kernel pack %s: %s", dir, why);
    if (!(e.dir = realpath(dir, NULL))) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_lock(&c->lock);
    int dup = 0, full = c->npacks == TK_MAX_PACKS;
    for (int i = 0; i < c->npacks; i++) dup |= strcmp(c->packs[i].dir, e.dir) == 0;
    if (!dup && !full) c->packs[c->npacks++] = e;
    pthread_mutex_unlock(&c->lock);
    if (!dup && !full) return TK_OK;
    free(e.dir);
    if (dup) return TK_OK; /* added before (another name for it, or twice) */
    return tk_diag_fail(dg, TK_ERR_CACHE, "kernel pack %s not added: a context takes at most %d",
                        dir, TK_MAX_PACKS);
}

/* TK_KERNEL_PACKS's directories and the installed pack, each failure's
 * message in msgs (at most TK_MAX_PACKS + 1 of them). */
static int add_defaults(tk_cache *c, const char *installed, tk_diag *msgs) {
    const char *env = getenv("TK_KERNEL_PACKS");
    char dir[PATH_MAX];
    int bad = 0;
    for (const char *p = env; p && *p;) {
        size_t len = strcspn(p, ":");
        tk_diag dg = {0};
        if (len >= sizeof dir)
            tk_diag_fail(&dg, TK_ERR_CACHE, "TK_KERNEL_PACKS: a directory name of %zu bytes", len);
        else if (len)
            memcpy(dir, p, len), dir[len] = '\0', tk_pack_add(c, dir, &dg);
        if (dg.st != TK_OK && bad < TK_MAX_PACKS) msgs[bad++] = dg;
        p += len + (p[len] == ':');
    }
    if (!installed) installed = tk_pack_installed(dir, sizeof dir);
    char manifest[PATH_MAX];
    struct stat st;
    /* an install without a pack (no ptxas then) is no news */
    if (installed && *installed &&
        (size_t)snprintf(manifest, sizeof manifest, "%s/%s", installed, TK_PACK_MANIFEST) <
            sizeof manifest &&
        stat(manifest, &st) == 0 && tk_pack_add(c, installed, &msgs[bad]) != TK_OK)
        bad++;
    return bad;
}

void tk_pack_defaults(tk_cache *c, const char *installed) {
    if (atomic_load(&c->packs_defaulted)) return;
    tk_diag msgs[TK_MAX_PACKS + 1] = {0};
    int bad = 0;
    pthread_mutex_lock(&c->defaults_lock);
    if (!atomic_load(&c->packs_defaulted)) {
        bad = add_defaults(c, installed, msgs);
        atomic_store(&c->packs_defaulted, true);
    }
    pthread_mutex_unlock(&c->defaults_lock);
    pthread_mutex_lock(&c->lock);
    void (*warn)(void *, tk_status, const char *) = c->warn;
    void *user = c->warn_user;
    pthread_mutex_unlock(&c->lock);
    /* told with no lock held: the hook may call the library back */
    for (int i = 0; i < bad && warn; i++) warn(user, msgs[i].st, msgs[i].msg);
}

#ifdef TK_PACK_REL
static const char tk_pack_anchor = 0; /* an address inside this library's file */

/* This code's file, when it is a shared library (not the program, which
 * links the static library): "<its real directory>/TK_PACK_REL". */
static const char *beside_library(char *buf, size_t n) {
    Dl_info info;
    char *lib = NULL, *exe = NULL;
    const char *out = NULL;
    /* a relative name (or the program's own) says nothing of an install */
    if (dladdr(&tk_pack_anchor, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
        (lib = realpath(info.dli_fname, NULL)) && (exe = realpath("/proc/self/exe", NULL)) &&
        strcmp(lib, exe) != 0) {
        char *slash = strrchr(lib, '/'), *real;
        *slash = '\0';
        if ((size_t)snprintf(buf, n, "%s/%s", lib, TK_PACK_REL) < n &&
            (real = realpath(buf, NULL))) {
            if ((size_t)snprintf(buf, n, "%s", real) < n) out = buf;
            free(real);
        }
    }
    free(lib);
    free(exe);
    return out;
}
#endif

const char *tk_pack_installed(char *buf, size_t n) {
    const char *env = getenv("TK_INSTALLED_PACK");
    if (env) return *env && (size_t)snprintf(buf, n, "%s", env) < n ? buf : NULL;
#ifdef TK_PACK_REL
    if (beside_library(buf, n)) return buf;
    return (size_t)snprintf(buf, n, "%s", TK_PACK_DIR) < n ? buf : NULL;
#else
    return NULL; /* a build that installs no kernel pack */
#endif
}

int tk_pack_count(tk_cache *c) {
    pthread_mutex_lock(&c->lock);
    int n = c->npacks;
    pthread_mutex_unlock(&c->lock);
    return n;
}

tk_status tk_pack_get(tk_cache *c, int i, const char *text, const char *arch, tk_cache_id *id,
                      void **payload, size_t *n, tk_diag *dg) {
    char dir[PATH_MAX];
    tk_pack_entry e = {0};
    *payload = NULL;
    *n = 0;
    pthread_mutex_lock(&c->lock);
    int ok = i >= 0 && i < c->npacks &&
             (size_t)snprintf(dir, sizeof dir, "%s", c->packs[i].dir) < sizeof dir;
    if (ok) e = c->packs[i]; /* its compilers; the dir pointer is not used */
    pthread_mutex_unlock(&c->lock);
    for (int k = 0; ok && k < e.ncomp && !*payload; k++) {
        tk_cache_id_make(id, text, arch, e.compiler[k]);
        tk_disk_get_at(c, dir, id, payload, n, dg);
    }
    return TK_OK;
}

/* Writes dir's manifest naming e's compilers (a temp file renamed over it:
 * readers see the old manifest or the new one). */
static tk_status manifest_write(const char *dir, const tk_pack_entry *e, tk_diag *dg) {
    char tmp[PATH_MAX], path[PATH_MAX], text[MANIFEST_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, TK_PACK_MANIFEST) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.tmp-pack-XXXXXX", dir) >= sizeof tmp)
        return tk_diag_fail(dg, TK_ERR_IO, "cache path too long: %s", dir);
    size_t len = (size_t)snprintf(text, sizeof text, "%s\n", TK_PACK_MAGIC);
    for (int k = 0; k < e->ncomp; k++) /* fits: 4 lines of < 200 bytes */
        len += (size_t)snprintf(text + len, sizeof text - len, "compiler %s\n", e->compiler[k]);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return tk_diag_fail(dg, TK_ERR_IO, "cannot create a file in %s: %s", dir, strerror(errno));
    /* a pack is read by every user of an installed library */
    int bad = fchmod(fd, 0644) != 0 || tk_write_all(fd, text, len) || fsync(fd) != 0;
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return tk_diag_fail(dg, TK_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    return TK_OK;
}

tk_status tk_pack_mark(tk_cache *c, const char *compiler, tk_diag *dg) {
    char dir[PATH_MAX];
    /* off or read-only: entries stored by others, whose manifest it has */
    if (tk_disk_check(c) != TK_DISK_OK || !tk_cache_dir_copy(c, dir, sizeof dir)) return TK_OK;
    pthread_mutex_lock(&c->lock);
    bool done = c->manifest_dir && strcmp(c->manifest_dir, dir) == 0;
    pthread_mutex_unlock(&c->lock);
    if (done) return TK_OK;
    if (strlen(compiler) >= TK_PACK_ID_LEN)
        return tk_diag_fail(dg, TK_ERR_IO, "compiler identity too long for a manifest");
    tk_pack_entry e = {0};
    int known = 0;
    if (manifest_read(dir, &e) != NULL) e.ncomp = 0; /* none yet, or unusable: a new one */
    for (int k = 0; k < e.ncomp; k++) known |= strcmp(e.compiler[k], compiler) == 0;
    if (!known) {
        if (e.ncomp == TK_PACK_COMPILERS) /* the oldest goes */
            memmove(e.compiler[0], e.compiler[1], sizeof e.compiler[0] * --e.ncomp);
        snprintf(e.compiler[e.ncomp++], TK_PACK_ID_LEN, "%s", compiler);
        tk_status s = manifest_write(dir, &e, dg);
        if (s != TK_OK) return s;
    }
    char *copy = strdup(dir);
    if (!copy) return tk_diag_fail(dg, TK_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_lock(&c->lock);
    free(c->manifest_dir);
    c->manifest_dir = copy;
    pthread_mutex_unlock(&c->lock);
    return TK_OK;
}
