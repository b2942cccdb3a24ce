/* Kernel packs (jit/pack.c): read-only directories of cubins looked up
 * under the compiler their manifest names, whatever ptxas this machine has.
 * Fake payloads stand in for cubins (the GPU side, loading one, is
 * scripts/device-run.sh aot's). Everything is written under one mkdtemp
 * directory, removed at the end. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit/cache.h"
#include "tk/tk.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char g_root[PATH_MAX]; /* the mkdtemp directory of this run */

static const char *k_text = "kernel text";
static const char k_payload[] = "a cubin made by ptxas X";

static void path_of(char *buf, const char *name) {
    ck_assert_int_lt(snprintf(buf, PATH_MAX, "%s/%s", g_root, name), PATH_MAX);
}

/* A bare cache (no value hooks) whose disk store is <root>/<name>. */
static void cache_in(tk_cache *c, const char *name) {
    char dir[PATH_MAX];
    path_of(dir, name);
    ck_assert_int_eq(tk_cache_init(c, NULL, NULL), 0);
    ck_assert_int_eq(tk_cache_dir_set(c, dir), TK_OK);
}

/* <root>/<name>: a pack of compiler's entry for k_text on sm_90a, made as
 * tk_precompile makes one (an entry stored, then the directory marked). */
static void make_pack(const char *name, const char *compiler) {
    tk_cache c;
    cache_in(&c, name);
    tk_cache_id id;
    tk_cache_id_make(&id, k_text, "sm_90a", compiler);
    tk_diag dg = {0};
    ck_assert_int_eq(tk_disk_put(&c, &id, k_payload, sizeof k_payload, &dg), TK_OK);
    ck_assert_int_eq(tk_pack_mark(&c, compiler, &dg), TK_OK);
    tk_cache_fini(&c);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char path[PATH_MAX];
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", dir, file), (int)sizeof path);
    mkdir(dir, 0700);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The manifest is what makes a directory a pack: none, or a malformed one,
 * is an error naming the directory and the reason. */
START_TEST(test_pack_manifest) {
    static const struct {
        const char *name, *text, *why;
    } bad[] = {
        {"none", NULL, "no tk-pack manifest"},
        {"magic", "a kernel pack\ncompiler ptxas X\n", "is not a tilekittens kernel pack 1"},
        {"nocomp", "tilekittens kernel pack 1\nwho made it\n", "names no compiler"},
        {"empty", "tilekittens kernel pack 1\ncompiler \n", "names no compiler"},
        {"zero", "tilekittens kernel pack 1\n", "names no compiler"},
        {"nonl", "tilekittens kernel pack 1\ncompiler ptxas X", "not ended"},
        {"crlf", "tilekittens kernel pack 1\r\ncompiler ptxas X\r\n", "is not a tilekittens"},
        {"cr", "tilekittens kernel pack 1\ncompiler ptxas X\r\n", "control character"},
    };
    tk_cache c;
    cache_in(&c, "user");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[PATH_MAX];
        path_of(dir, bad[i].name);
        mkdir(dir, 0700);
        if (bad[i].text) write_text(dir, "tk-pack", bad[i].text);
        tk_diag dg = {0};
        ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_ERR_CACHE);
        ck_assert_msg(strstr(dg.msg, dir) && strstr(dg.msg, bad[i].why), "%s: %s", bad[i].name,
                      dg.msg);
    }
    ck_assert_int_eq(tk_pack_count(&c), 0);
    char dir[PATH_MAX], fifo[PATH_MAX + 16];
    tk_diag dg = {0};
    path_of(dir, "missing");
    ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_ERR_CACHE);
    ck_assert_msg(strstr(dg.msg, "no such directory"), "%s", dg.msg);
    /* a FIFO in place of the manifest is refused, not waited on */
    path_of(dir, "fifo");
    mkdir(dir, 0700);
    snprintf(fifo, sizeof fifo, "%s/tk-pack", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_ERR_CACHE);
    ck_assert_msg(strstr(dg.msg, "not a regular file"), "%s", dg.msg);
    path_of(dir, "good");
    write_text(dir, "tk-pack", "tilekittens kernel pack 1\ncompiler ptxas X\ncompiler ptxas Y\n");
    ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_OK);
    ck_assert_int_eq(tk_pack_count(&c), 1);
    ck_assert_int_eq(c.packs[0].ncomp, 2);
    ck_assert_str_eq(c.packs[0].compiler[1], "ptxas Y");
    /* the same directory by another name is one pack */
    char again[PATH_MAX + 8];
    snprintf(again, sizeof again, "%s/./", dir);
    ck_assert_int_eq(tk_pack_add(&c, again, &dg), TK_OK);
    ck_assert_int_eq(tk_pack_count(&c), 1);
    tk_cache_fini(&c);
}
END_TEST

/* A pack's entry is found under its own compiler's key from a cache whose
 * compilers are others (none here), and only for the same text and arch. */
START_TEST(test_pack_foreign_compiler) {
    make_pack("made_x", "ptxas X");
    tk_cache c;
    cache_in(&c, "user_x");
    char dir[PATH_MAX];
    path_of(dir, "made_x");
    tk_diag dg = {0};
    ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_OK);
    tk_cache_id id, want;
    void *p;
    size_t n;
    ck_assert_int_eq(tk_pack_get(&c, 0, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(n, sizeof k_payload);
    ck_assert_mem_eq(p, k_payload, n);
    free(p);
    tk_cache_id_make(&want, k_text, "sm_90a", "ptxas X");
    ck_assert(id.key.lo == want.key.lo && id.key.hi == want.key.hi);
    ck_assert_int_eq(tk_pack_get(&c, 0, k_text, "sm_80", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tk_pack_get(&c, 0, "other text", "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tk_pack_get(&c, 1, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK); /* no pack 1 */
    ck_assert_ptr_null(p);
    tk_cache_stats st;
    tk_cache_stats_copy(&c, &st);
    ck_assert_uint_eq(st.rejected, 0);
    tk_cache_fini(&c);
}
END_TEST

/* A corrupt entry in a pack is a miss, counted as rejected, and stays:
 * the directory is another's. */
START_TEST(test_pack_corrupt_kept) {
    make_pack("corrupt", "ptxas X");
    tk_cache c;
    cache_in(&c, "user_c");
    char dir[PATH_MAX], path[PATH_MAX], hex[33];
    path_of(dir, "corrupt");
    tk_diag dg = {0};
    ck_assert_int_eq(tk_pack_add(&c, dir, &dg), TK_OK);
    tk_cache_id id;
    tk_cache_id_make(&id, k_text, "sm_90a", "ptxas X");
    tk_key_hex(id.key, hex);
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s.tkc", dir, hex), (int)sizeof path);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -1, SEEK_END);
    fputc('!', f); /* the payload's last byte: its checksum no longer holds */
    fclose(f);
    void *p;
    size_t n;
    ck_assert_int_eq(tk_pack_get(&c, 0, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(dg.msg, "checksum mismatch"), "%s", dg.msg);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    /* a FIFO at an entry's name is refused, not waited on, and stays */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_pack_get(&c, 0, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(dg.msg, "not a regular file"), "%s", dg.msg);
    ck_assert_int_eq(stat(path, &st), 0);
    tk_cache_stats cs;
    tk_cache_stats_copy(&c, &cs);
    ck_assert_uint_eq(cs.rejected, 2);
    tk_cache_fini(&c);
}
END_TEST

static void read_text(const char *path, char *text, size_t n) {
    memset(text, 0, n);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(text, 1, n - 1, f), 0);
    fclose(f);
}

static ino_t inode_of(const char *path) {
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_ino;
}

/* The manifest lists each compiler that marked the directory (the last
 * four); marking with one it names writes nothing; a pack's entries are
 * found under any of its compilers. */
START_TEST(test_pack_mark) {
    tk_cache c;
    cache_in(&c, "marked");
    tk_diag dg = {0};
    char dir[PATH_MAX], path[PATH_MAX], text[1024];
    path_of(dir, "marked");
    ck_assert_int_eq(tk_pack_mark(&c, "ptxas X", &dg), TK_OK); /* made on first use */
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/tk-pack", dir), (int)sizeof path);
    read_text(path, text, sizeof text);
    ck_assert_str_eq(text, "tilekittens kernel pack 1\ncompiler ptxas X\n");
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0644); /* every user of an install reads it */
    ino_t before = inode_of(path);
    tk_cache other;
    cache_in(&other, "marked");
    ck_assert_int_eq(tk_pack_mark(&other, "ptxas X", &dg), TK_OK);
    ck_assert_uint_eq(inode_of(path), before); /* named already: not rewritten */
    tk_cache_fini(&other);
    cache_in(&other, "marked");
    tk_cache_id id;
    tk_cache_id_make(&id, k_text, "sm_90a", "ptxas Y");
    ck_assert_int_eq(tk_disk_put(&other, &id, k_payload, sizeof k_payload, &dg), TK_OK);
    ck_assert_int_eq(tk_pack_mark(&other, "ptxas Y", &dg), TK_OK);
    tk_cache_fini(&other);
    read_text(path, text, sizeof text);
    ck_assert_str_eq(text, "tilekittens kernel pack 1\ncompiler ptxas X\ncompiler ptxas Y\n");
    tk_cache user; /* finds Y's entry, the second compiler's */
    void *p;
    size_t n;
    ck_assert_int_eq(tk_cache_init(&user, NULL, NULL), 0);
    ck_assert_int_eq(tk_pack_add(&user, dir, &dg), TK_OK);
    ck_assert_int_eq(tk_pack_get(&user, 0, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_nonnull(p);
    free(p);
    tk_cache_fini(&user);
    for (int i = 0; i < 4; i++) { /* five compilers: the first goes */
        char name[32];
        snprintf(name, sizeof name, "ptxas %d", i);
        cache_in(&other, "marked");
        ck_assert_int_eq(tk_pack_mark(&other, name, &dg), TK_OK);
        tk_cache_fini(&other);
    }
    read_text(path, text, sizeof text);
    ck_assert_str_eq(text, "tilekittens kernel pack 1\ncompiler ptxas 0\ncompiler ptxas 1\n"
                           "compiler ptxas 2\ncompiler ptxas 3\n");
    tk_cache_init(&user, NULL, NULL);
    ck_assert_int_eq(tk_pack_add(&user, dir, &dg), TK_OK);
    ck_assert_int_eq(user.packs[0].ncomp, 4);
    ck_assert_int_eq(tk_pack_get(&user, 0, k_text, "sm_90a", &id, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p); /* ptxas Y's entry: Y is no longer named */
    tk_cache_fini(&user);
    tk_cache_fini(&c);
}
END_TEST

static int g_warned;
static char g_warning[512];

static void on_warn(void *user, tk_status s, const char *msg) {
    (void)user;
    ck_assert_int_eq(s, TK_ERR_CACHE);
    g_warned++;
    snprintf(g_warning, sizeof g_warning, "%s", msg);
}

/* TK_KERNEL_PACKS and the installed pack are added once per cache; a bad
 * one is told through the hook and skipped; a missing installed pack is no
 * news. At most TK_MAX_PACKS. */
START_TEST(test_pack_defaults) {
    make_pack("env_a", "ptxas X");
    make_pack("inst", "ptxas Z");
    char a[PATH_MAX], bad[PATH_MAX], inst[PATH_MAX], none[PATH_MAX], env[3 * PATH_MAX + 8];
    path_of(a, "env_a"), path_of(bad, "env_bad"), path_of(inst, "inst"), path_of(none, "absent");
    mkdir(bad, 0700);
    snprintf(env, sizeof env, "%s::%s:", bad, a);
    ck_assert_int_eq(setenv("TK_KERNEL_PACKS", env, 1), 0);
    tk_cache c;
    cache_in(&c, "user_d");
    c.warn = on_warn;
    g_warned = 0;
    tk_pack_defaults(&c, inst);
    tk_pack_defaults(&c, inst); /* once */
    ck_assert_int_eq(g_warned, 1);
    ck_assert_msg(strstr(g_warning, bad) && strstr(g_warning, "no tk-pack"), "%s", g_warning);
    ck_assert_int_eq(tk_pack_count(&c), 2);
    ck_assert_str_eq(c.packs[0].dir, a);
    ck_assert_str_eq(c.packs[1].compiler[0], "ptxas Z");
    tk_cache_fini(&c);

    cache_in(&c, "user_d");
    unsetenv("TK_KERNEL_PACKS");
    tk_pack_defaults(&c, none);
    ck_assert_int_eq(tk_pack_count(&c), 0);
    tk_diag dg = {0};
    for (int i = 0; i <= TK_MAX_PACKS; i++) {
        char name[32], dir[PATH_MAX];
        snprintf(name, sizeof name, "many%d", i);
        make_pack(name, "ptxas X");
        path_of(dir, name);
        ck_assert_int_eq(tk_pack_add(&c, dir, &dg), i < TK_MAX_PACKS ? TK_OK : TK_ERR_CACHE);
        ck_assert_int_eq(tk_pack_add(&c, dir, &dg), i < TK_MAX_PACKS ? TK_OK : TK_ERR_CACHE);
    }
    ck_assert_int_eq(tk_pack_count(&c), TK_MAX_PACKS); /* each once */
    ck_assert_msg(strstr(dg.msg, "at most 8"), "%s", dg.msg);
    tk_cache_fini(&c);
}
END_TEST

static int g_logged;
static char g_log[512];
static const char *g_seen; /* what the hook's own call into the library saw */

/* Calls the library back, as a hook may: no lock of it is held. */
static void on_log(void *user, tk_status s, const char *msg) {
    (void)s;
    g_logged++;
    snprintf(g_log, sizeof g_log, "%s", msg);
    g_seen = tk_cache_pack(user, 0);
}

/* The public face: tk_cache_add_pack's checks and messages, tk_cache_pack's
 * order (the environment's packs at the first lookup, a bad one logged once,
 * through a hook that calls back), TK_INSTALLED_PACK. */
START_TEST(test_pack_api) {
    make_pack("api", "ptxas X");
    make_pack("api_inst", "ptxas X");
    char good[PATH_MAX], none[PATH_MAX], inst[PATH_MAX], *real;
    path_of(good, "api"), path_of(none, "api_none"), path_of(inst, "api_inst");
    mkdir(none, 0700);
    ck_assert_int_eq(tk_cache_add_pack(NULL, good), TK_ERR_INVALID_ARG);
    ck_assert_ptr_null(tk_cache_pack(NULL, 0));
    ck_assert_int_eq(setenv("TK_KERNEL_PACKS", none, 1), 0);
    ck_assert_int_eq(setenv("TK_INSTALLED_PACK", "", 1), 0); /* none installed */
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_ctx_set_log(ctx, on_log, ctx), TK_OK);
    g_logged = 0;
    ck_assert_int_eq(tk_cache_add_pack(ctx, NULL), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_ctx_error(ctx), "tk_cache_add_pack: dir is NULL");
    ck_assert_int_eq(tk_cache_add_pack(ctx, ""), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_cache_add_pack(ctx, none), TK_ERR_CACHE);
    ck_assert_msg(strstr(tk_ctx_error(ctx), none) && strstr(tk_ctx_error(ctx), "no tk-pack"), "%s",
                  tk_ctx_error(ctx));
    ck_assert_int_eq(tk_cache_add_pack(ctx, good), TK_OK);
    ck_assert_ptr_nonnull(real = realpath(good, NULL));
    ck_assert_str_eq(tk_cache_pack(ctx, 0), real); /* the environment's bad one: skipped */
    ck_assert_ptr_null(tk_cache_pack(ctx, 1));
    ck_assert_ptr_null(tk_cache_pack(ctx, -1));
    ck_assert_int_eq(g_logged, 1);
    ck_assert_msg(strstr(g_log, none) && strstr(g_log, "kernel pack"), "%s", g_log);
    ck_assert_str_eq(g_seen, real);
    tk_ctx_destroy(ctx);
    free(real);

    unsetenv("TK_KERNEL_PACKS");
    ck_assert_int_eq(setenv("TK_INSTALLED_PACK", inst, 1), 0);
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_ptr_nonnull(real = realpath(inst, NULL));
    ck_assert_str_eq(tk_cache_pack(ctx, 0), real);
    free(real);
    tk_ctx_destroy(ctx);
    unsetenv("TK_INSTALLED_PACK");
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(g_root, sizeof g_root, "pack") != 0) return EXIT_FAILURE;
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_add_test(tc, test_pack_manifest);
    tcase_add_test(tc, test_pack_foreign_compiler);
    tcase_add_test(tc, test_pack_corrupt_kept);
    tcase_add_test(tc, test_pack_mark);
    tcase_add_test(tc, test_pack_defaults);
    tcase_add_test(tc, test_pack_api);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(g_root);
    return rc;
}
