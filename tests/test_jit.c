/* JIT tests: driver entry points without (or with) a GPU, ptxas, the disk
 * and memory caches, and on a GPU machine loading and launching a cubin.
 * Launch argument checking and grid evaluation: tests/test_launch_checks.c.
 *
 * Everything is written under one mkdtemp directory (TMPDIR and
 * TK_CACHE_DIR point into it), removed at the end. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/ctx.h"
#include "jit/build.h"
#include "jit/cache.h"
#include "jit/jit.h"
#include "jit/link.h"
#include "jit/program.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char g_root[PATH_MAX]; /* the mkdtemp directory of this run */

static void sub(char *buf, size_t n, const char *name) { tu_join(buf, n, g_root, name); }

/* A fresh standalone JIT state whose disk cache is <root>/<name>. */
static struct tk_jit *jit_in(const char *name) {
    char dir[PATH_MAX];
    sub(dir, sizeof dir, name);
    struct tk_jit *j = tk_jit_new();
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(tk_cache_dir_set(&j->cache, dir), TK_OK);
    return j;
}

/* ---- Fixture: a tiny PTX kernel matching the ABI of tk_test_fill below:
 * X (f32 tensor, rank 1: ptr, dim, stride), v (f32): X[i*stride] = v. */
static const char *k_fill_ptx =
    ".version 8.0\n.target %s\n.address_size 64\n"
    ".visible .entry tk_test_fill(.param .u64 px, .param .u64 pd, .param .u64 ps,\n"
    "                             .param .f32 pv)\n{\n"
    "  .reg .pred %%p<2>;\n  .reg .b32 %%r<5>;\n  .reg .f32 %%f<2>;\n  .reg .b64 %%rd<8>;\n"
    "  ld.param.u64 %%rd1, [px];\n  ld.param.u64 %%rd2, [pd];\n  ld.param.u64 %%rd3, [ps];\n"
    "  ld.param.f32 %%f1, [pv];\n  mov.u32 %%r1, %%ctaid.x;\n  mov.u32 %%r2, %%ntid.x;\n"
    "  mov.u32 %%r3, %%tid.x;\n  mad.lo.s32 %%r4, %%r1, %%r2, %%r3;\n"
    "  cvt.s64.s32 %%rd4, %%r4;\n  setp.ge.s64 %%p1, %%rd4, %%rd2;\n  @%%p1 bra DONE;\n"
    "  mul.lo.s64 %%rd5, %%rd4, %%rd3;\n  shl.b64 %%rd6, %%rd5, 2;\n"
    "  cvta.to.global.u64 %%rd7, %%rd1;\n  add.s64 %%rd7, %%rd7, %%rd6;\n"
    "  st.global.f32 [%%rd7], %%f1;\nDONE:\n  ret;\n}\n";

typedef struct ptx_src {
    const char *arch;
    int calls; /* how often the cache asked for PTX (= rebuilds) */
    int bad;   /* produce PTX ptxas rejects */
} ptx_src;

static tk_status make_ptx(void *user, char **ptx, tk_diag *dg) {
    ptx_src *s = user;
    s->calls++;
    size_t n = strlen(k_fill_ptx) + 64;
    *ptx = malloc(n);
    snprintf(*ptx, n, k_fill_ptx, s->arch);
    if (s->bad) memcpy(strstr(*ptx, "mad.lo.s32"), "mad.lo.x99", 10);
    return TK_OK;
}

/* Builder kernel with the same signature; grid x = ceil_div(dim(X,0), 32). */
static tk_kernel *fill_kernel(tk_ctx *ctx) {
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "tk_test_fill", 1, &k), TK_OK);
    tk_value *x = tk_param_tensor(k, "X", TK_F32, 1);
    tk_param_scalar(k, "v", TK_F32);
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, x, 0), tk_const_i64(k, 32)), NULL, NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    return k;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* ---- Driver ------------------------------------------------------------ */
START_TEST(test_gpu_entry_points) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_status s = tk_gpu_init(ctx);
    if (s != TK_OK) {
        /* No libcuda (CI): NO_DRIVER. A driver without a device: CUDA. */
        ck_assert_msg(s == TK_ERR_NO_DRIVER || s == TK_ERR_CUDA, "%s", tk_ctx_error(ctx));
        if (s == TK_ERR_NO_DRIVER)
            ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_gpu_init: no CUDA driver"));
        printf("GPU tests skipped: %s\n", tk_ctx_error(ctx));
        void *p = (void *)&s;
        char arch[16], buf[4];
        ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), s);
        int sms = -1;
        ck_assert_int_eq(tk_gpu_sm_count(ctx, &sms), s);
        ck_assert_int_eq(sms, 0);
        ck_assert_int_eq(tk_gpu_sm_count(ctx, NULL), TK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_gpu_sm_count: n is NULL"));
        ck_assert_int_eq(tk_program_resident_blocks(NULL), 0);
        ck_assert_int_eq(tk_gpu_alloc(ctx, 16, &p), s);
        ck_assert_ptr_null(p);
        ck_assert_int_eq(tk_gpu_free(ctx, (void *)buf), s);
        ck_assert_int_eq(tk_gpu_upload(ctx, buf, buf, 4), s);
        ck_assert_int_eq(tk_gpu_download(ctx, buf, buf, 4), s);
        ck_assert_int_eq(tk_gpu_memset(ctx, buf, 0, 4), s);
        ck_assert_int_eq(tk_gpu_sync(ctx), s);
        ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_gpu_sync: "));
        tk_kernel *k = fill_kernel(ctx);
        tk_program *prog = (tk_program *)&s;
        ck_assert_int_eq(tk_compile(ctx, k, &prog), s);
        ck_assert_ptr_null(prog);
        tk_kernel_destroy(k);
    } else {
        char arch[16];
        ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
        ck_assert_msg(strncmp(arch, "sm_", 3) == 0, "%s", arch);
        int sms = 0;
        ck_assert_int_eq(tk_gpu_sm_count(ctx, &sms), TK_OK);
        ck_assert_int_gt(sms, 0);
        printf("GPU: %s, %d SMs\n", arch, sms);
        uint8_t in[256], out[256];
        for (int i = 0; i < 256; i++) in[i] = (uint8_t)i;
        void *d = NULL;
        ck_assert_int_eq(tk_gpu_alloc(ctx, sizeof in, &d), TK_OK);
        ck_assert_int_eq(tk_gpu_upload(ctx, d, in, sizeof in), TK_OK);
        ck_assert_int_eq(tk_gpu_memset(ctx, d, 0xAB, 16), TK_OK);
        ck_assert_int_eq(tk_gpu_download(ctx, out, d, sizeof out), TK_OK);
        ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
        for (int i = 0; i < 256; i++) ck_assert_int_eq(out[i], i < 16 ? 0xAB : i);
        ck_assert_int_eq(tk_gpu_free(ctx, d), TK_OK);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- ptxas -------------------------------------------------------------- */
START_TEST(test_ptxas_compile) {
    tk_ptxas px;
    tk_diag dg = {0};
    ck_assert_msg(tk_ptxas_find(&px, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_msg(strlen(px.version) > 0, "empty ptxas version");
    printf("ptxas: %s (%s)\n", px.path, px.version);
    ptx_src src = {"sm_90a", 0, 0};
    char *ptx;
    void *cubin;
    size_t n;
    make_ptx(&src, &ptx, &dg);
    ck_assert_msg(tk_ptxas_compile(&px, ptx, "sm_90a", &cubin, &n, &dg) == TK_OK, "%s", dg.msg);
    ck_assert(n > 4 && memcmp(cubin, "\177ELF", 4) == 0);
    free(cubin);
    free(ptx);
    src.bad = 1;
    make_ptx(&src, &ptx, &dg);
    ck_assert_int_eq(tk_ptxas_compile(&px, ptx, "sm_90a", &cubin, &n, &dg), TK_ERR_PTXAS);
    ck_assert_ptr_null(cubin);
    ck_assert_msg(strstr(dg.msg, "ptxas") && strstr(dg.msg, "line"), "%s", dg.msg);
    free(ptx);
    tk_diag_clear(&dg); /* the first failure wins: start afresh */
    ck_assert_int_eq(tk_ptxas_compile(&px, "", "sm_9x; rm", &cubin, &n, &dg), TK_ERR_INVALID_ARG);
    /* An explicit TK_PTXAS that is not there is reported, not replaced. The
     * caller's own (the ctest environment's, without /usr/local/cuda) is
     * put back for the tests after this one. */
    char *was = getenv("TK_PTXAS") ? strdup(getenv("TK_PTXAS")) : NULL;
    setenv("TK_PTXAS", "/nonexistent/ptxas", 1);
    tk_diag_clear(&dg);
    ck_assert_int_eq(tk_ptxas_find(&px, &dg), TK_ERR_PTXAS);
    ck_assert_ptr_nonnull(strstr(dg.msg, "TK_PTXAS"));
    if (was)
        setenv("TK_PTXAS", was, 1);
    else
        unsetenv("TK_PTXAS");
    free(was);
}
END_TEST

/* ---- Disk cache ------------------------------------------------------------ */
START_TEST(test_disk_hit_miss) {
    struct tk_jit *j = jit_in("hitmiss");
    tk_cache_id a, b;
    tk_cache_id_make(&a, "kernel text", "sm_90a", "ptxas X");
    tk_cache_id_make(&b, "kernel text", "sm_80", "ptxas X");
    ck_assert(a.key.lo != b.key.lo || a.key.hi != b.key.hi);
    void *p;
    size_t n;
    tk_diag dg = {0};
    ck_assert_int_eq(tk_disk_get(&j->cache, &a, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    const char payload[] = "not really a cubin";
    ck_assert_int_eq(tk_disk_put(&j->cache, &a, payload, sizeof payload, &dg), TK_OK);
    ck_assert_int_eq(tk_disk_get(&j->cache, &a, &p, &n, &dg), TK_OK);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(n, sizeof payload);
    ck_assert_mem_eq(p, payload, n);
    free(p);
    ck_assert_int_eq(tk_disk_get(&j->cache, &b, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(j->cache.stats.rejected, 0);
    /* Disabled disk cache: misses, and writes say why. */
    tk_cache_dir_set(&j->cache, NULL);
    ck_assert_int_eq(tk_disk_get(&j->cache, &a, &p, &n, &dg), TK_OK);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tk_disk_put(&j->cache, &a, payload, 1, &dg), TK_ERR_CACHE);
    tk_jit_destroy(j);
}
END_TEST

/* Damage kinds applied to a stored entry. */
enum {
    D_TRUNC_PAYLOAD,
    D_TRUNC_HEADER,
    D_FLIP,
    D_MAGIC,
    D_ARCH,
    D_COMPILER,
    D_LLVM,
    D_KEY,
    D_FORMAT,
    D_COUNT
};
static const char *damage_why[D_COUNT] = {"truncated",
                                          "truncated",
                                          "checksum",
                                          "wrong magic",
                                          "foreign arch",
                                          "foreign compiler version",
                                          "foreign LLVM version",
                                          "key mismatch",
                                          "unknown format"};

static void damage(const char *path, int kind) {
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    fstat(fd, &st);
    tk_disk_header h;
    ck_assert_int_eq(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    unsigned char byte;
    switch (kind) {
    case D_TRUNC_PAYLOAD: ck_assert_int_eq(ftruncate(fd, st.st_size - 7), 0); break;
    case D_TRUNC_HEADER: ck_assert_int_eq(ftruncate(fd, 50), 0); break;
    case D_FLIP:
        pread(fd, &byte, 1, st.st_size / 2 + 72);
        byte ^= 0x10;
        pwrite(fd, &byte, 1, st.st_size / 2 + 72);
        break;
    case D_MAGIC: memcpy(h.magic, "TKCUBIN0", 8); break;
    case D_ARCH:
        memset(h.arch, 0, 16);
        strcpy(h.arch, "sm_80");
        break;
    case D_COMPILER:
        memset(h.compiler, 0, 64);
        strcpy(h.compiler, "ptxas Build old");
        break;
    case D_LLVM:
        memset(h.llvm, 0, 16);
        strcpy(h.llvm, "21.1.0");
        break;
    case D_KEY: h.key_lo ^= 1; break;
    case D_FORMAT: h.format = 99; break;
    }
    if (kind >= D_MAGIC) ck_assert_int_eq(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
}

/* Every damaged entry is rejected (counted, deleted) and rebuilt through
 * the ptxas path; the rebuilt entry then hits. */
START_TEST(test_disk_rejects) {
    struct tk_jit *j = jit_in("rejects");
    const char *text = "kernel @rejects";
    ptx_src src = {"sm_90a", 0, 0};
    void *cubin;
    size_t n;
    tk_origin from;
    char path[PATH_MAX], comp[192];
    tk_diag dg = {0};
    ck_assert_msg(tk_cubin_via_ptxas(j, text, "sm_90a", make_ptx, &src, &cubin, &n, &from, &dg) ==
                      TK_OK,
                  "%s", dg.msg);
    ck_assert_int_eq(from, TK_FROM_COMPILE);
    free(cubin);
    const tk_ptxas *px;
    ck_assert_int_eq(tk_jit_ptxas(j, &px, &dg), TK_OK);
    tk_compiler_id_ptxas(px, comp, sizeof comp);
    tk_cache_id id;
    tk_cache_id_make(&id, text, "sm_90a", comp);
    ck_assert_int_eq(tk_disk_path(&j->cache, id.key, path, sizeof path), 0);
    ck_assert(file_exists(path));
    for (int kind = 0; kind < D_COUNT; kind++) {
        damage(path, kind);
        /* The bare store reports why... */
        void *p;
        tk_diag why = {0};
        tk_disk_get(&j->cache, &id, &p, &n, &why);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(why.msg, damage_why[kind]), "damage %d: %s", kind, why.msg);
        ck_assert(!file_exists(path));
        ck_assert_uint_eq(j->cache.stats.rejected, 2 * (uint64_t)kind + 1);
        /* ...and the ptxas path rebuilds (damaging again first). */
        int calls = src.calls;
        ck_assert_int_eq(
            tk_cubin_via_ptxas(j, text, "sm_90a", make_ptx, &src, &cubin, &n, &from, &dg), TK_OK);
        free(cubin);
        ck_assert_int_eq(src.calls, calls + 1);
        damage(path, kind);
        ck_assert_int_eq(
            tk_cubin_via_ptxas(j, text, "sm_90a", make_ptx, &src, &cubin, &n, &from, &dg), TK_OK);
        free(cubin);
        ck_assert_int_eq(from, TK_FROM_COMPILE);
        ck_assert_int_eq(src.calls, calls + 2);
        ck_assert_uint_eq(j->cache.stats.rejected, 2 * (uint64_t)kind + 2);
        ck_assert_int_eq(
            tk_cubin_via_ptxas(j, text, "sm_90a", make_ptx, &src, &cubin, &n, &from, &dg), TK_OK);
        free(cubin);
        ck_assert_int_eq(from, TK_FROM_DISK);
        ck_assert_int_eq(src.calls, calls + 2);
    }
    tk_cache_stats st;
    tk_cache_stats_copy(&j->cache, &st);
    ck_assert_uint_eq(st.misses, 1 + 2 * D_COUNT);
    ck_assert_uint_eq(st.disk_hits, D_COUNT);
    ck_assert(st.ptx_to_cubin_ms > 0);
    /* ptxas errors come back with its message. */
    src.bad = 1;
    ck_assert_int_eq(
        tk_cubin_via_ptxas(j, "other", "sm_90a", make_ptx, &src, &cubin, &n, &from, &dg),
        TK_ERR_PTXAS);
    ck_assert_ptr_null(cubin);
    tk_jit_destroy(j);
}
END_TEST

/* Processes racing to store (and read) the same entry: readers never see a
 * partial file, and one valid entry remains. */
START_TEST(test_disk_race) {
    enum { PROCS = 4, ROUNDS = 40, SIZE = 256 * 1024 };
    char dir[PATH_MAX];
    sub(dir, sizeof dir, "race");
    tk_cache_id id;
    tk_cache_id_make(&id, "racy kernel", "sm_90a", "ptxas X");
    unsigned char *payload = malloc(SIZE);
    for (int i = 0; i < SIZE; i++) payload[i] = (unsigned char)(i * 7);
    fflush(stdout);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        if ((pids[i] = fork()) == 0) {
            struct tk_jit *j = tk_jit_new();
            int bad = !j || tk_cache_dir_set(&j->cache, dir) != TK_OK;
            for (int r = 0; r < ROUNDS && !bad; r++) {
                void *p;
                size_t n;
                tk_diag dg = {0};
                bad |= tk_disk_put(&j->cache, &id, payload, SIZE, &dg) != TK_OK;
                tk_disk_get(&j->cache, &id, &p, &n, &dg);
                bad |= !p || n != SIZE || memcmp(p, payload, SIZE) != 0;
                free(p);
            }
            bad |= j->cache.stats.rejected != 0;
            tk_jit_destroy(j);
            _exit(bad);
        }
    }
    for (int i = 0; i < PROCS; i++) {
        int st;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", i);
    }
    struct tk_jit *j = jit_in("race");
    void *p;
    size_t n;
    tk_diag dg = {0};
    tk_disk_get(&j->cache, &id, &p, &n, &dg);
    ck_assert_ptr_nonnull(p);
    ck_assert_mem_eq(p, payload, SIZE);
    free(p);
    tk_jit_destroy(j);
    free(payload);
    /* Exactly the entry: no temp files left behind. */
    DIR *d = opendir(dir);
    int count = 0;
    for (struct dirent *e; (e = readdir(d));)
        count += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    ck_assert_int_eq(count, 1);
}
END_TEST

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

START_TEST(test_disk_evict) {
    struct tk_jit *j = jit_in("evict");
    enum { PAY = 1000 };
    const uint64_t entry = sizeof(tk_disk_header) + PAY;
    j->cache.limit = 3 * entry;
    char payload[PAY] = {0}, path[4][PATH_MAX];
    tk_diag dg = {0};
    tk_cache_id id[4];
    for (int i = 0; i < 4; i++) {
        char text[32];
        snprintf(text, sizeof text, "kernel %d", i);
        tk_cache_id_make(&id[i], text, "sm_90a", "ptxas X");
        tk_disk_path(&j->cache, id[i].key, path[i], sizeof path[i]);
        if (i == 3) { /* touch entry 0: now entry 1 is the least recently used */
            void *p;
            size_t n;
            tk_disk_get(&j->cache, &id[0], &p, &n, &dg);
            ck_assert_ptr_nonnull(p);
            free(p);
            sleep_ms(30);
        }
        ck_assert_int_eq(tk_disk_put(&j->cache, &id[i], payload, PAY, &dg), TK_OK);
        sleep_ms(30); /* mtimes must differ (coarse file system clocks) */
    }
    ck_assert(file_exists(path[0]));
    ck_assert(!file_exists(path[1]));
    ck_assert(file_exists(path[2]));
    ck_assert(file_exists(path[3]));
    ck_assert_uint_eq(j->cache.stats.evicted, 1);
    /* A tighter bound drops everything but the newest after the next write. */
    j->cache.limit = entry;
    ck_assert_int_eq(tk_disk_put(&j->cache, &id[1], payload, PAY, &dg), TK_OK);
    ck_assert_uint_eq(j->cache.stats.evicted, 4);
    ck_assert(file_exists(path[1]));
    ck_assert(!file_exists(path[0]) && !file_exists(path[2]) && !file_exists(path[3]));
    tk_jit_destroy(j);
}
END_TEST

/* ---- Memory table ------------------------------------------------------------ */
START_TEST(test_memory_table) {
    tk_cache c;
    ck_assert_int_eq(tk_cache_init(&c, NULL, NULL), 0);
    enum { N = 1000, LOOKUPS = 200000 };
    tk_cache_id id;
    tk_key keys[N];
    for (int i = 0; i < N; i++) {
        char text[32];
        snprintf(text, sizeof text, "k%d", i);
        tk_cache_id_make(&id, text, "sm_90a", "cuLink 13000");
        keys[i] = id.key;
        ck_assert_ptr_null(tk_mem_find(&c, keys[i]));
        void *v = (void *)(uintptr_t)(i + 1);
        ck_assert_ptr_eq(tk_mem_insert(&c, keys[i], v), v);
    }
    /* A second insert of a present key hands back the first value. */
    ck_assert_ptr_eq(tk_mem_insert(&c, keys[5], (void *)(uintptr_t)99999), (void *)(uintptr_t)6);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_eq(tk_mem_find(&c, keys[i]), (void *)(uintptr_t)(i + 1));
    double t0 = tk_now_ms();
    uintptr_t sum = 0;
    for (int i = 0; i < LOOKUPS; i++) sum += (uintptr_t)tk_mem_find(&c, keys[i % N]);
    double us = (tk_now_ms() - t0) * 1e3 / LOOKUPS;
    printf("memory cache hit: %.3f us per lookup (%d entries)\n", us, N);
    ck_assert(sum > 0);
    ck_assert_msg(us < 50.0, "memory hit took %.3f us", us);
    tk_cache_fini(&c);
}
END_TEST

/* ---- GPU: load a ptxas-built cubin and launch it through tk_launch ----------- */
START_TEST(test_gpu_launch) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (tk_gpu_init(ctx) != TK_OK) {
        printf("GPU tests skipped: %s\n", tk_ctx_error(ctx));
        tk_ctx_destroy(ctx);
        return;
    }
    struct tk_jit *j = tk_jit_of(ctx);
    tk_cuda *cu;
    tk_diag dg = {0};
    ck_assert_int_eq(tk_jit_cuda(j, &cu, &dg), TK_OK);
    ptx_src src = {cu->arch, 0, 0};
    char *ptx;
    void *cubin[2];
    size_t n;
    make_ptx(&src, &ptx, &dg);
    ck_assert_msg(tk_culink_compile(cu, ptx, false, &cubin[0], &n, &dg) == TK_OK, "%s", dg.msg);
    const tk_ptxas *px;
    ck_assert_msg(tk_jit_ptxas(j, &px, &dg) == TK_OK, "%s", dg.msg);
    ck_assert_msg(tk_ptxas_compile(px, ptx, cu->arch, &cubin[1], &n, &dg) == TK_OK, "%s", dg.msg);
    free(ptx);
    enum { N = 1000 };
    for (int c = 0; c < 2; c++) { /* the driver's cubin, then ptxas's */
        tk_kernel *k = fill_kernel(ctx);
        tk_program *p;
        ck_assert_int_eq(tk_program_new(ctx, k, NULL, &p, &dg), TK_OK);
        tk_kernel_destroy(k);
        ck_assert_msg(tk_program_load(p, cu, cubin[c], &dg) == TK_OK, "%s", dg.msg);
        free(cubin[c]);
        ck_assert_int_ge(tk_program_resident_blocks(p), 1); /* one warp, no shared memory */
        float *h = malloc(N * sizeof *h);
        void *d;
        int64_t dims[1] = {N - 1};
        ck_assert_int_eq(tk_gpu_alloc(ctx, N * sizeof *h, &d), TK_OK);
        ck_assert_int_eq(tk_gpu_memset(ctx, d, 0, N * sizeof *h), TK_OK);
        tk_arg args[2] = {tk_arg_tensor(d, TK_F32, 1, dims), tk_arg_f32(2.5f + (float)c)};
        ck_assert_msg(tk_launch(p, 2, args, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
        ck_assert_int_eq(tk_gpu_download(ctx, h, d, N * sizeof *h), TK_OK);
        for (int i = 0; i < N; i++)
            ck_assert_msg(h[i] == (i < N - 1 ? 2.5f + (float)c : 0.0f), "X[%d] = %g", i, h[i]);
        tk_gpu_free(ctx, d);
        free(h);
        tk_program_release(p);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_compile without lowering: an entry stored under the ptxas key (as
 * tk_precompile makes it) is found; an entry under the driver key that the
 * driver refuses is rejected first. Then launch, and a memory hit. */
START_TEST(test_gpu_compile_seeded) {
    tk_ctx *ctx;
    char dir[PATH_MAX], comp[192];
    tk_diag dg = {0};
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (tk_gpu_init(ctx) != TK_OK) {
        tk_ctx_destroy(ctx);
        return;
    }
    sub(dir, sizeof dir, "seeded");
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    struct tk_jit *j = tk_jit_of(ctx);
    tk_cuda *cu;
    const tk_ptxas *px;
    ck_assert_int_eq(tk_jit_cuda(j, &cu, &dg), TK_OK);
    ck_assert_msg(tk_jit_ptxas(j, &px, &dg) == TK_OK, "%s", dg.msg);
    tk_kernel *k = fill_kernel(ctx);
    char *text;
    ck_assert_int_eq(tk_kernel_print(k, &text), TK_OK);
    tk_cache_id drv, aot;
    tk_compiler_id_driver(cu, comp, sizeof comp);
    tk_cache_id_make(&drv, text, cu->arch, comp);
    tk_compiler_id_ptxas(px, comp, sizeof comp);
    tk_cache_id_make(&aot, text, cu->arch, comp);
    tk_free(text);
    ptx_src src = {cu->arch, 0, 0};
    char *ptx;
    void *cubin;
    size_t n;
    make_ptx(&src, &ptx, &dg);
    ck_assert_int_eq(tk_ptxas_compile(px, ptx, cu->arch, &cubin, &n, &dg), TK_OK);
    free(ptx);
    ck_assert_int_eq(tk_disk_put(&j->cache, &aot, cubin, n, &dg), TK_OK);
    free(cubin);
    ck_assert_int_eq(tk_disk_put(&j->cache, &drv, "garbage", 8, &dg), TK_OK);
    tk_program *p, *q;
    ck_assert_msg(tk_compile(ctx, k, &p) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_program_origin(p), TK_FROM_DISK);
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    ck_assert_uint_eq(st.rejected, 1);
    ck_assert_uint_eq(st.disk_hits, 1);
    ck_assert_int_eq(tk_compile(ctx, k, &q), TK_OK);
    ck_assert_ptr_eq(p, q);
    ck_assert_int_eq(tk_program_origin(q), TK_FROM_MEMORY);
    tk_program_release(q);
    tk_kernel_destroy(k);
    enum { N = 70 };
    float h[N];
    void *d;
    int64_t dims[1] = {N};
    ck_assert_int_eq(tk_gpu_alloc(ctx, sizeof h, &d), TK_OK);
    tk_arg args[2] = {tk_arg_tensor(d, TK_F32, 1, dims), tk_arg_f32(-1.25f)};
    ck_assert_msg(tk_launch(p, 2, args, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_download(ctx, h, d, sizeof h), TK_OK);
    for (int i = 0; i < N; i++) ck_assert(h[i] == -1.25f);
    dims[0] = 0; /* an empty grid launches nothing */
    args[0] = tk_arg_tensor(d, TK_F32, 1, dims);
    ck_assert_int_eq(tk_launch(p, 2, args, NULL), TK_OK);
    tk_gpu_free(ctx, d);
    tk_ctx_destroy(ctx);
    tk_program_release(p); /* after its context: the program keeps the driver */
}
END_TEST

/* ---- tk_precompile / tk_compile through the real lowering, when built --------- */
START_TEST(test_precompile_and_compile) {
    tk_ctx *ctx;
    char dir[PATH_MAX];
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    sub(dir, sizeof dir, "aot");
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    ck_assert_str_eq(tk_cache_dir(ctx), dir);
    tk_kernel *k = fill_kernel(ctx);
    const tk_kernel *ks[1] = {k};
    tk_status s = tk_precompile(ctx, ks, 1, "sm_90a");
    if (s == TK_ERR_UNSUPPORTED || s == TK_ERR_LLVM) {
        printf("precompile skipped: %s\n", tk_ctx_error(ctx));
    } else {
        ck_assert_msg(s == TK_OK, "%s", tk_ctx_error(ctx));
        ck_assert_int_eq(tk_precompile(ctx, ks, 1, "sm_90a"), TK_OK);
        tk_cache_stats st;
        tk_cache_stats_get(ctx, &st);
        ck_assert_uint_eq(st.misses, 1);
        ck_assert_uint_eq(st.disk_hits, 1);
    }
    ck_assert_int_eq(tk_precompile(ctx, ks, 1, "bogus"), TK_ERR_INVALID_ARG);
    tk_target_caps caps; /* the same status for the same bad arch string */
    ck_assert_int_eq(tk_target_caps_get(ctx, "bogus", &caps), TK_ERR_INVALID_ARG);
    tk_cache_set_dir(ctx, NULL);
    ck_assert_ptr_null(tk_cache_dir(ctx));
    ck_assert_int_eq(tk_precompile(ctx, ks, 1, "sm_90a"), TK_ERR_CACHE);
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    if (tk_gpu_init(ctx) == TK_OK) { /* memory hit, then a disk hit in a fresh context */
        tk_program *p1, *p2;
        s = tk_compile(ctx, k, &p1);
        ck_assert_msg(s == TK_OK || s == TK_ERR_UNSUPPORTED, "%s", tk_ctx_error(ctx));
        if (s == TK_OK) {
            ck_assert_int_eq(tk_compile(ctx, k, &p2), TK_OK);
            ck_assert_ptr_eq(p1, p2);
            ck_assert_int_eq(tk_program_origin(p2), TK_FROM_MEMORY);
            tk_program_release(p2);
            double t0 = tk_now_ms(); /* whole tk_compile: print, hash, lookup */
            for (int i = 0; i < 1000; i++) {
                ck_assert_int_eq(tk_compile(ctx, k, &p2), TK_OK);
                tk_program_release(p2);
            }
            printf("tk_compile memory hit: %.2f us\n", (tk_now_ms() - t0));
            tk_program_release(p1);
            tk_ctx *c2;
            ck_assert_int_eq(tk_ctx_create(&c2), TK_OK);
            ck_assert_int_eq(tk_cache_set_dir(c2, dir), TK_OK);
            ck_assert_int_eq(tk_compile(c2, k, &p1), TK_OK);
            ck_assert_int_eq(tk_program_origin(p1), TK_FROM_DISK);
            tk_ctx_destroy(c2);
            tk_program_release(p1); /* after its context: still safe */
        }
    }
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(g_root, sizeof g_root, "jit") != 0) return EXIT_FAILURE;
    setenv("TMPDIR", g_root, 1); /* ptxas temp files stay inside */
    tu_set_cache_dir(g_root);

    Suite *s = suite_create("jit");
    TCase *tc = tcase_create("jit");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_gpu_entry_points);
    tcase_add_test(tc, test_ptxas_compile);
    tcase_add_test(tc, test_disk_hit_miss);
    tcase_add_test(tc, test_disk_rejects);
    tcase_add_test(tc, test_disk_race);
    tcase_add_test(tc, test_disk_evict);
    tcase_add_test(tc, test_memory_table);
    tcase_add_test(tc, test_gpu_launch);
    tcase_add_test(tc, test_gpu_compile_seeded);
    tcase_add_test(tc, test_precompile_and_compile);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(g_root);
    return rc;
}
