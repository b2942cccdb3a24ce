/* No silent failure (issue 15): an unusable disk cache directory is
 * reported once per context (log hook + tk_cache_stats.disk_error) and
 * kernels still work; sizes past the grid's or the kernels' limits fail
 * with a message instead of launching nothing or a wrong grid. All on the
 * CPU: programs without modules check arguments and grids. */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ctx.h"
#include "jit/cache.h"
#include "jit/jit.h"
#include "jit/program.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/run.h"
#include "util/tmpdir.h"
#include "util/params.h"

static char g_root[PATH_MAX];

typedef struct logged {
    int n;
    tk_status st;
    char msg[512];
} logged;

static void log_hook(void *user, tk_status s, const char *msg) {
    logged *l = user;
    l->n++;
    l->st = s;
    snprintf(l->msg, sizeof l->msg, "%s", msg);
}

/* A context whose cache directory is `dir`, warnings into *l. */
static tk_ctx *ctx_with(const char *dir, logged *l) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_ctx_set_log(ctx, log_hook, l), TK_OK);
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    return ctx;
}

/* Two lookups and a store through the context's cache: one warning. */
static void use_cache(tk_ctx *ctx, tk_status want_put) {
    struct tk_jit *j = tk_jit_of(ctx);
    ck_assert_ptr_nonnull(j);
    tk_cache_id id;
    tk_cache_id_make(&id, "kernel text", "sm_90a", "test compiler");
    void *p;
    size_t n;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tk_disk_get(&j->cache, &id, &p, &n, NULL), TK_OK);
        ck_assert_ptr_null(p);
    }
    char payload[8] = "cubin";
    tk_diag dg = {0};
    ck_assert_int_eq(tk_disk_put(&j->cache, &id, payload, sizeof payload, &dg), want_put);
}

static void expect_reported(tk_ctx *ctx, const logged *l, const char *dir, const char *why) {
    ck_assert_int_eq(l->n, 1);
    ck_assert_int_eq(l->st, TK_ERR_CACHE);
    ck_assert_msg(strstr(l->msg, dir) && strstr(l->msg, why), "log: %s", l->msg);
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    ck_assert_msg(strstr(st.disk_error, dir) && strstr(st.disk_error, why), "stats: %s",
                  st.disk_error);
}

START_TEST(test_cache_dir_is_a_file) {
    char file[PATH_MAX], below[PATH_MAX];
    tu_join(file, sizeof file, g_root, "a-file");
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    logged l = {0};
    tk_ctx *ctx = ctx_with(file, &l);
    use_cache(ctx, TK_ERR_IO);
    use_cache(ctx, TK_ERR_IO); /* still once */
    expect_reported(ctx, &l, file, "not a directory");
    /* tk_precompile, whose whole point is the disk, fails with the reason. */
    ck_assert_int_eq(tk_precompile(ctx, NULL, 0, "sm_90a"), TK_ERR_CACHE);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "not a directory"));
    ck_assert_int_eq(l.n, 1);
    /* A usable directory clears the record; a new bad one is told again. */
    tu_join(below, sizeof below, g_root, "fine");
    ck_assert_int_eq(tk_cache_set_dir(ctx, below), TK_OK);
    use_cache(ctx, TK_OK);
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    ck_assert_str_eq(st.disk_error, "");
    tu_join(below, sizeof below, file, "sub");
    ck_assert_int_eq(tk_cache_set_dir(ctx, below), TK_OK);
    use_cache(ctx, TK_ERR_IO);
    ck_assert_int_eq(l.n, 2);
    ck_assert_ptr_nonnull(strstr(l.msg, below));
    tk_ctx_destroy(ctx);
}
END_TEST

/* Read-only (root may write anywhere chmod allows: /proc refuses everyone):
 * hits would still be served, new entries are not stored. */
START_TEST(test_cache_dir_not_writable) {
    logged l = {0};
    tk_ctx *ctx = ctx_with("/proc", &l);
    use_cache(ctx, TK_ERR_IO);
    expect_reported(ctx, &l, "/proc", "not writable");
    struct tk_jit *j = tk_jit_of(ctx);
    ck_assert_int_eq(tk_disk_check(&j->cache), TK_DISK_READONLY);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Without a hook: one line on stderr. */
START_TEST(test_cache_warning_default_stderr) {
    char file[PATH_MAX], out[PATH_MAX], buf[1024] = {0};
    tu_join(file, sizeof file, g_root, "a-file");
    tu_join(out, sizeof out, g_root, "stderr.txt");
    close(open(file, O_CREAT | O_WRONLY, 0600));
    fflush(stderr);
    int saved = dup(2), fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_int_eq(tk_cache_set_dir(ctx, file), TK_OK);
    use_cache(ctx, TK_ERR_IO);
    use_cache(ctx, TK_ERR_IO);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    FILE *f = fopen(out, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "tilekittens: disk cache ", 24) == 0, "%s", buf);
    ck_assert_ptr_null(strchr(buf, '\n') + 1 < buf + n ? buf + n : NULL); /* one line */
    tk_ctx_destroy(ctx);
    ck_assert_int_eq(tk_ctx_set_log(NULL, NULL, NULL), TK_ERR_INVALID_ARG);
}
END_TEST

/* A kernel whose grid converts a size to i32: X = ceil(dim(A,1) / 16). */
static tk_kernel *i32_grid_kernel(tk_ctx *ctx) {
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "tk_test_i32grid", 4, &k), TK_OK);
    tk_value *a = tk_param_tensor(k, "A", TK_F32, 2);
    tk_value *n = tk_cvt(k, tk_dim(k, a, 1), TK_I32);
    tk_value *gy = tk_mul(k, tk_cvt(k, tk_dim(k, a, 0), TK_I32), tk_const_i32(k, 1 << 20));
    tk_set_grid(k, tk_ceil_div(k, n, tk_const_i32(k, 16)), tk_max(k, gy, tk_const_i32(k, 1)), NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    return k;
}

static void grid_fails(tk_program *p, const tk_arg *args, const char *msg) {
    int64_t g[3];
    tk_diag dg = {0};
    ck_assert_int_eq(tk_program_grid(p, args, g, &dg), TK_ERR_LAUNCH);
    ck_assert_msg(strstr(dg.msg, msg), "got \"%s\", want \"%s\"", dg.msg, msg);
}

START_TEST(test_launch_sizes) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = i32_grid_kernel(ctx);
    tk_program *p;
    tk_diag dg = {0};
    ck_assert_msg(tk_program_new(ctx, k, NULL, &p, &dg) == TK_OK, "%s", dg.msg);
    float x;
    int64_t d[2] = {0, 64}, st[2] = {1, 1}, g[3];
    tk_arg a = tk_arg_strided(&x, TK_F32, 2, d, st);
    ck_assert_int_eq(tk_program_check_args(p, 1, &a, &dg), TK_OK);
    ck_assert_int_eq(tk_program_grid(p, &a, g, &dg), TK_OK);
    ck_assert(g[0] == 4 && g[1] == 1 && g[2] == 1);
    a.dims[1] = ((int64_t)1 << 32) + 64; /* wraps to 64 in i32: must not look like 4 blocks */
    grid_fails(p, &a, "overflows the kernel's 32-bit (i32) arithmetic");
    a.dims[1] = 64;
    a.dims[0] = 4096; /* 4096 << 20 wraps in the i32 multiply */
    grid_fails(p, &a, "overflows the kernel's 32-bit (i32) arithmetic");
    a.dims[0] = 1; /* 2^20 rows of blocks: past y <= 65535 */
    grid_fails(p, &a, "grid[1] = 1048576 is outside 0..65535");
    /* A tensor whose byte extent overflows int64 (dense strides saturate). */
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    a = tk_arg_tensor(&x, TK_F32, 2, huge);
    ck_assert_int_eq(tk_program_check_args(p, 1, &a, &dg), TK_ERR_LAUNCH);
    ck_assert_msg(strstr(dg.msg, "spans more than 2^63 bytes"), "%s", dg.msg);
    tk_diag_clear(&dg);
    int64_t neg[2] = {3, ((int64_t)1 << 62)};
    a = tk_arg_strided(&x, TK_F32, 2, huge, neg); /* a stride that overflows times dims */
    ck_assert_int_eq(tk_program_check_args(p, 1, &a, &dg), TK_ERR_LAUNCH);
    tk_program_release(p);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

static void fails_with(tk_ctx *ctx, tk_status s, const char *msg) {
    ck_assert_int_eq(s, TK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(tk_ctx_error(ctx), msg), "got \"%s\", want \"%s\"", tk_ctx_error(ctx),
                  msg);
}

START_TEST(test_gemm_sizes) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    void *dev = (void *)(uintptr_t)256; /* never dereferenced: checks come first */
    tk_gemm_params p = tu_gemm_params(TK_BF16, TK_BF16, 1024, 1024, 1024, dev);
    p.k = (int64_t)1 << 31;
    fails_with(ctx, tk_gemm(ctx, &p, NULL), "32-bit indexing allows each up to");
    p.k = 1024;
    p.m = (int64_t)1 << 40;
    fails_with(ctx, tk_gemm_prepare(ctx, &p, NULL), "m, n, k are 1099511627776");
    p.m = 65536 * 128 + 1; /* 65537 block rows of 128 */
    fails_with(ctx, tk_gemm(ctx, &p, NULL), "exceed the kernel's limits");
    p.m = 1 << 22, p.n = INT32_MAX - 65535; /* 2^15 x 2^24 blocks: past 2^31 */
    fails_with(ctx, tk_gemm(ctx, &p, NULL), "exceed the kernel's limits");
    /* the persistent wgmma kernel: tiles past 2^31 - 1 - 65536 */
    tk_gemm_config w = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 4096, 4096, "sm_90a");
    ck_assert_int_eq(w.wgmma, 1);
    p.config = &w;
    fails_with(ctx, tk_gemm(ctx, &p, NULL), "none for wgmma, 2147418111 tiles");
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_attention_sizes) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    void *dev = (void *)(uintptr_t)256;
    tk_attention_params p = tu_attention_params(TK_BF16, 128, 8, 8, 128, dev);
    p.batch = 65536;
    fails_with(ctx, tk_attention_forward(ctx, &p, NULL),
               "batch is 65536; the kernel allows "
               "at most 65535");
    p.batch = 1, p.heads_q = p.heads_kv = 70000;
    fails_with(ctx, tk_attention_prepare(ctx, &p, NULL), "heads_q is 70000");
    p.heads_q = p.heads_kv = 8, p.seq_kv = (int64_t)1 << 31;
    fails_with(ctx, tk_attention_forward(ctx, &p, NULL), "seq_kv is 2147483648");
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(g_root, sizeof g_root, "silent") != 0) return EXIT_FAILURE;
    tu_set_cache_dir(g_root);
    Suite *s = suite_create("silent");
    TCase *tc = tcase_create("silent");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cache_dir_is_a_file);
    tcase_add_test(tc, test_cache_dir_not_writable);
    tcase_add_test(tc, test_cache_warning_default_stderr);
    tcase_add_test(tc, test_launch_sizes);
    tcase_add_test(tc, test_gemm_sizes);
    tcase_add_test(tc, test_attention_sizes);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(g_root);
    return rc;
}
