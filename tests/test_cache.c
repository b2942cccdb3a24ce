/* Cache-key tests: the code generator's identity (TK_CODEGEN_ID, a digest of
 * the library's sources made at build time) is part of every key and of the
 * disk entry's header, so a cubin lowered by other code is never loaded for
 * the same IR. The rest of the cache is tested in test_jit.c.
 *
 * The disk store writes under one mkdtemp directory, removed at the end. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "jit/cache.h"
#include "tk/tk.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char g_root[PATH_MAX]; /* the mkdtemp directory of this run */

static const char *k_gen_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *k_gen_b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab";

static int key_eq(tk_key a, tk_key b) { return a.lo == b.lo && a.hi == b.hi; }

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A bare cache (no value hooks) whose disk store is <root>/<name>. */
static void cache_in(tk_cache *c, const char *name) {
    char dir[PATH_MAX];
    ck_assert_int_lt(snprintf(dir, sizeof dir, "%s/%s", g_root, name), (int)sizeof dir);
    ck_assert_int_eq(tk_cache_init(c, NULL, NULL), 0);
    ck_assert_int_eq(tk_cache_dir_set(c, dir), TK_OK);
}

START_TEST(test_codegen_id_in_key) {
    const char *id = tk_codegen_id();
    ck_assert_uint_eq(strlen(id), 64);
    ck_assert_uint_eq(strspn(id, "0123456789abcdef"), 64);
    tk_cache_id a, b, a2, built;
    tk_cache_id_make_for(&a, "kernel text", "sm_90a", "ptxas X", k_gen_a);
    tk_cache_id_make_for(&a2, "kernel text", "sm_90a", "ptxas X", k_gen_a);
    ck_assert(key_eq(a.key, a2.key));
    /* Ids differing only past the header's prefix still make other keys. */
    tk_cache_id_make_for(&b, "kernel text", "sm_90a", "ptxas X", k_gen_b);
    ck_assert(!key_eq(a.key, b.key));
    ck_assert_mem_eq(a.codegen, b.codegen, sizeof a.codegen);
    /* The plain call keys under this build's code generator. */
    tk_cache_id_make(&built, "kernel text", "sm_90a", "ptxas X");
    tk_cache_id_make_for(&a2, "kernel text", "sm_90a", "ptxas X", id);
    ck_assert(key_eq(built.key, a2.key));
    ck_assert_mem_eq(built.codegen, id, sizeof built.codegen);
    ck_assert(!key_eq(built.key, a.key));
}
END_TEST

/* A finished kernel's id, made from the hash it carries (the memory-cache
 * lookup's path), is the id of its text (the pack and precompile paths');
 * each field still separates keys, and an identity too long for the
 * one-shot key buffer (the streaming path) does too. */
START_TEST(test_kernel_id_is_text_id) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k[2];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tk_kernel_create(ctx, i ? "tk_test_key_b" : "tk_test_key_a", 4, &k[i]),
                         TK_OK);
        tk_param_tensor(k[i], "A", TK_F32, 2);
        tk_set_grid(k[i], NULL, NULL, NULL);
        ck_assert_int_eq(tk_kernel_finish(k[i]), TK_OK);
    }
    tk_cache_id of, text, other, arch, comp;
    tk_cache_id_of(&of, k[0], "sm_90a", "cuLink 13000");
    tk_cache_id_make(&text, k[0]->canon, "sm_90a", "cuLink 13000");
    ck_assert(key_eq(of.key, text.key));
    ck_assert_mem_eq(&of, &text, sizeof of);
    tk_cache_id_of(&other, k[1], "sm_90a", "cuLink 13000");
    tk_cache_id_of(&arch, k[0], "sm_80", "cuLink 13000");
    tk_cache_id_of(&comp, k[0], "sm_90a", "cuLink 13010");
    ck_assert(!key_eq(of.key, other.key) && !key_eq(of.key, arch.key) && !key_eq(of.key, comp.key));
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tk_cache_id b1, b2;
    tk_cache_id_of(&b1, k[0], "sm_90a", big);
    big[300] = 'y';
    tk_cache_id_of(&b2, k[0], "sm_90a", big);
    ck_assert(!key_eq(b1.key, b2.key) && !key_eq(b1.key, of.key));
    /* every identity length around the one-shot buffer's end: a key each, no overflow */
    tk_key prev = b2.key;
    for (size_t len = 380; len < 520; len++) {
        big[len] = '\0';
        tk_cache_id_of(&b1, k[0], "sm_90a", big);
        ck_assert(!key_eq(b1.key, prev));
        prev = b1.key;
        big[len] = 'x';
    }
    for (int i = 0; i < 2; i++) tk_kernel_destroy(k[i]);
    tk_ctx_destroy(ctx);
}
END_TEST

/* An entry stored by another code generator is a miss for this one: its key
 * (so its file) differs, and a header naming another generator at this key's
 * file is rejected, counted and deleted. */
START_TEST(test_codegen_foreign_entry) {
    tk_cache c;
    cache_in(&c, "foreign");
    tk_cache_id old, cur, forged;
    tk_cache_id_make_for(&old, "kernel text", "sm_90a", "ptxas X", "0123456789abcdef");
    tk_cache_id_make_for(&cur, "kernel text", "sm_90a", "ptxas X", "fedcba9876543210");
    const char payload[] = "a cubin from the old lowering";
    tk_diag dg = {0};
    char path[PATH_MAX];
    void *p;
    size_t n;
    ck_assert_int_eq(tk_disk_put(&c, &old, payload, sizeof payload, &dg), TK_OK);
    ck_assert_int_eq(tk_disk_get(&c, &old, &p, &n, &dg), TK_OK);
    ck_assert_ptr_nonnull(p);
    free(p);
    ck_assert_int_eq(tk_disk_get(&c, &cur, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    /* Same key, other generator in the header (as a key collision would be). */
    forged = cur;
    memcpy(forged.codegen, old.codegen, sizeof forged.codegen);
    ck_assert_int_eq(tk_disk_put(&c, &forged, payload, sizeof payload, &dg), TK_OK);
    ck_assert_int_eq(tk_disk_path(&c, cur.key, path, sizeof path), 0);
    ck_assert(file_exists(path));
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_disk_get(&c, &cur, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(dg.msg, "foreign code generator"), "%s", dg.msg);
    ck_assert(!file_exists(path));
    tk_cache_stats st;
    tk_cache_stats_copy(&c, &st);
    ck_assert_uint_eq(st.rejected, 1);
    /* The old generator's entry is untouched (the LRU limit retires it). */
    ck_assert_int_eq(tk_disk_get(&c, &old, &p, &n, &dg), TK_OK);
    ck_assert_ptr_nonnull(p);
    free(p);
    tk_cache_fini(&c);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(g_root, sizeof g_root, "cache") != 0) return EXIT_FAILURE;
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, test_codegen_id_in_key);
    tcase_add_test(tc, test_codegen_foreign_entry);
    tcase_add_test(tc, test_kernel_id_is_text_id);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(g_root);
    return rc;
}
