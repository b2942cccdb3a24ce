/* The kernel cache: 128-bit keys, an in-memory table of loaded programs and
 * an on-disk store of cubins.
 *
 * Key = XXH3-128 over (the canonical IR text's XXH3-128, target arch, LLVM version,
 * compiler identity, code-generator identity). The compiler identity names
 * the PTX->cubin path and its version ("cuLink <driver version>" or "ptxas
 * <build line>"), so entries made by another driver/ptxas are distinct
 * entries, never reused. The code-generator identity (TK_CODEGEN_ID) is a
 * SHA-256 of the library's sources made at build time (cmake/codegen_id.cmake),
 * so a cubin lowered by other code is never loaded for the same IR.
 *
 * Disk entry <dir>/<32 hex digits of the key>.tkc: a tk_disk_header then the
 * payload (a cubin). Entries are written to a temp file in the same
 * directory, fsync'ed and renamed into place, so concurrent processes never
 * see partial files. An entry that fails any check (size, magic, format,
 * key, arch, compiler, LLVM version, code generator, payload checksum) is counted in
 * stats.rejected, deleted and treated as a miss. The directory is kept under
 * a byte limit by deleting least recently used entries (hits touch mtime). */
#ifndef TK_JIT_CACHE_H
#define TK_JIT_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/diag.h"
#include "tk/tk_jit.h"

typedef struct tk_key {
    uint64_t lo, hi;
} tk_key;

/* Everything that identifies one disk entry; the header repeats it. */
typedef struct tk_cache_id {
    tk_key key;
    char arch[16];
    char compiler[64]; /* truncated copy; the key hashes the full identity */
    char llvm[16];
    char codegen[32]; /* leading hex digits of the code generator's id */
} tk_cache_id;

/* On-disk header, little-endian, 176 bytes, no padding. Format 2 added
 * codegen. */
#define TK_DISK_MAGIC  "TKCUBIN1"
#define TK_DISK_FORMAT 2u
typedef struct tk_disk_header {
    char magic[8];
    uint32_t format;
    uint32_t header_size;
    uint64_t key_lo, key_hi;
    char arch[16];
    char compiler[64];
    char llvm[16];
    char codegen[32];
    uint64_t payload_size;
    uint64_t checksum; /* XXH3-64 of the payload */
} tk_disk_header;

/* Builds the id (and key) for this key material, under this build's code
 * generator (tk_codegen_id). */
void tk_cache_id_make(tk_cache_id *id, const char *ir_text, const char *arch, const char *compiler);
/* The same under an explicit code-generator identity (tests pass two). */
void tk_cache_id_make_for(tk_cache_id *id, const char *ir_text, const char *arch,
                          const char *compiler, const char *codegen);
/* The same for a finished kernel's text, from the hash it carries
 * (k->canon_hash): what a memory-cache lookup pays. */
void tk_cache_id_of(tk_cache_id *id, const tk_kernel *k, const char *arch, const char *compiler);
/* The id from a text's tk_canon_hash (ir/ir.h): the other three's core. */
void tk_cache_id_from_hash(tk_cache_id *id, const uint64_t text_hash[2], const char *arch,
                           const char *compiler, const char *codegen);
/* TK_CODEGEN_ID: 64 hex digits, fixed when the library is built. */
const char *tk_codegen_id(void);
void tk_key_hex(tk_key k, char out[33]);

/* Reference hooks for table values (tk_program in the library; tests may
 * store anything with NULL hooks). */
typedef void *(*tk_retain_fn)(void *);
typedef void (*tk_release_fn)(void *);

typedef struct tk_memslot {
    tk_key key;
    void *val; /* NULL: empty slot */
} tk_memslot;

/* A kernel pack (jit/pack.c): a read-only directory of entries made by the
 * ptxas builds its manifest names, looked up under those compilers' keys. */
#define TK_MAX_PACKS      8
#define TK_PACK_COMPILERS 4 /* a manifest keeps the last four           */
#define TK_PACK_ID_LEN    192
typedef struct tk_pack_entry {
    char *dir; /* its real path: each directory once */
    int ncomp;
    char compiler[TK_PACK_COMPILERS][TK_PACK_ID_LEN];
} tk_pack_entry;

typedef struct tk_cache {
    pthread_mutex_t lock; /* guards every field below                  */
    tk_memslot *slots;    /* open addressing, linear probing, 2^n       */
    size_t cap, used;
    tk_retain_fn retain;
    tk_release_fn release;
    char *dir;      /* NULL: disk cache disabled                  */
    int disk_state; /* tk_disk_state of `dir`                     */
    /* Told once per directory about its first problem (the JIT logs it
     * through the context); NULL: only stats.disk_error records it. */
    void (*warn)(void *user, tk_status s, const char *msg);
    void *warn_user;
    uint64_t limit; /* bytes of *.tkc entries kept                */
    tk_cache_stats stats;
    tk_pack_entry packs[TK_MAX_PACKS]; /* in the order added              */
    int npacks;
    /* held while TK_KERNEL_PACKS and the installed pack are added, so that
     * no compile on another thread looks before they are there */
    pthread_mutex_t defaults_lock;
    atomic_bool packs_defaulted; /* set (under defaults_lock) once added */
    char *manifest_dir;          /* the disk directory whose manifest is written */
} tk_cache;

#define TK_CACHE_DEFAULT_LIMIT (1ull << 30)

/* What the first use found of the directory (reset by tk_cache_dir_set). */
typedef enum tk_disk_state {
    TK_DISK_UNCHECKED = 0,
    TK_DISK_OK,       /* entries are read and written                  */
    TK_DISK_READONLY, /* entries are read; new ones are not stored      */
    TK_DISK_OFF       /* cannot be created / not a directory: skipped   */
} tk_disk_state;

/* Default dir from TK_CACHE_DIR (empty: disabled), else
 * $XDG_CACHE_HOME/tilekittens, else $HOME/.cache/tilekittens. 0 or -1. */
int tk_cache_init(tk_cache *c, tk_retain_fn retain, tk_release_fn release);
/* Releases the table's references and frees everything. */
void tk_cache_fini(tk_cache *c);
/* NULL disables the disk cache. TK_ERR_NO_MEMORY or TK_OK. */
tk_status tk_cache_dir_set(tk_cache *c, const char *dir);
/* Copies the directory into buf; 0 when the disk cache is disabled. */
int tk_cache_dir_copy(tk_cache *c, char *buf, size_t n);

/* ---- Memory table (O(1), one mutex) ---------------------------------- */
/* The value for key, retained for the caller; NULL on a miss. */
void *tk_mem_find(tk_cache *c, tk_key key);
/* Adds key -> val, the table retaining val; returns val. When key is
 * already present returns the existing value retained for the caller (drop
 * val and use it). Out of memory: returns val uncached. */
void *tk_mem_insert(tk_cache *c, tk_key key, void *val);

/* ---- Statistics ---------------------------------------------------------- */
typedef enum tk_stat {
    TK_STAT_MEMORY_HIT,
    TK_STAT_DISK_HIT,
    TK_STAT_MISS,
    TK_STAT_REJECTED,
    TK_STAT_EVICTED,
    TK_STAT_LLVM_MS,
    TK_STAT_CUBIN_MS
} tk_stat;
void tk_cache_note(tk_cache *c, tk_stat what, double amount);
void tk_cache_stats_copy(tk_cache *c, tk_cache_stats *out);

/* ---- Disk store (jit/cache_disk.c) ---------------------------------------- */
/* TK_OK with *payload (malloc'd) on a hit, TK_OK with *payload NULL on a miss
 * (including a rejected entry, which is deleted: TK_ERR_CACHE and the reason
 * are recorded in dg, but the call succeeds). Hits touch the mtime. */
tk_status tk_disk_get(tk_cache *c, const tk_cache_id *id, void **payload, size_t *n, tk_diag *dg);
/* Stores atomically, then evicts past the limit. TK_ERR_CACHE when the disk
 * cache is disabled, TK_ERR_IO when the directory cannot be written (the
 * first such problem is also recorded in stats.disk_error and told to
 * c->warn, once). */
tk_status tk_disk_put(tk_cache *c, const tk_cache_id *id, const void *payload, size_t n,
                      tk_diag *dg);
/* The directory's state, checked on first use: see tk_disk_state. */
tk_disk_state tk_disk_check(tk_cache *c);
/* Deletes an entry found unusable after a hit (e.g. the driver refused the
 * cubin), counting it as rejected. */
void tk_disk_reject(tk_cache *c, const tk_cache_id *id);
/* <dir>/<hex key>.tkc. 0, or -1 when disabled / too long. */
int tk_disk_path(tk_cache *c, tk_key key, char *buf, size_t n);
/* tk_disk_get in another directory, read-only (a kernel pack): a hit
 * touches nothing, an unusable entry is counted as rejected (its reason in
 * dg) and left in place. */
tk_status tk_disk_get_at(tk_cache *c, const char *dir, const tk_cache_id *id, void **payload,
                         size_t *n, tk_diag *dg);

/* ---- Kernel packs (jit/pack.c) --------------------------------------------- */
/* The manifest naming a pack's compilers, <dir>/TK_PACK_MANIFEST: the line
 * TK_PACK_MAGIC, then one line "compiler <identity>" (jit/link.h's ptxas
 * identity) per ptxas build whose entries the directory holds. */
#define TK_PACK_MANIFEST "tk-pack"
#define TK_PACK_MAGIC    "tilekittens kernel pack 1"
/* Appends dir after reading its manifest (a directory already added is not
 * added twice): TK_ERR_CACHE naming the reason (no such directory, no
 * manifest, a malformed one, too many packs), TK_ERR_NO_MEMORY. */
tk_status tk_pack_add(tk_cache *c, const char *dir, tk_diag *dg);
/* Adds, once per cache, every directory of TK_KERNEL_PACKS (':'-separated)
 * and then the install's pack, `installed` (NULL: tk_pack_installed's), if
 * it has a manifest. A bad one is told to c->warn, with no lock held, and
 * skipped. Compiles on other threads wait until the packs are there. */
void tk_pack_defaults(tk_cache *c, const char *installed);
/* The install's pack, in buf: TK_INSTALLED_PACK if set (empty: none), else
 * <the shared library's directory>/TK_PACK_REL, else the configured
 * TK_PACK_DIR; NULL for a build that installs none. */
const char *tk_pack_installed(char *buf, size_t n);
/* Packs added so far (after tk_pack_defaults). */
int tk_pack_count(tk_cache *c);
/* The entry for (text, arch) in pack i under the first of its compilers
 * that has one: *payload as tk_disk_get_at gives it, *id its id. */
tk_status tk_pack_get(tk_cache *c, int i, const char *text, const char *arch, tk_cache_id *id,
                      void **payload, size_t *n, tk_diag *dg);
/* Makes the writable disk directory a pack of `compiler`'s entries: adds it
 * to the manifest (written atomically) once per directory and process.
 * TK_ERR_IO when the manifest cannot be written. */
tk_status tk_pack_mark(tk_cache *c, const char *compiler, tk_diag *dg);

#endif
