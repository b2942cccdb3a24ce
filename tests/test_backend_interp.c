/* The interpreter backend's rules (tk_ctx_set_backend, tk/tk_jit.h), through
 * the public API only: its argument checks and messages, its target as
 * tk_gpu_arch and tk_gpu_sm_count report it, host memory behind tk_gpu_*,
 * a kernel destroyed after tk_compile still launching, the target's shared
 * memory limit, a failed run reported by tk_launch, no disk cache traffic,
 * and launches from several threads. The ready-made entry points on this
 * backend are test_backend_interp_kernels.c's. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/ref.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char tmp_root[256];

/* ---- The backend's rules ---------------------------------------------------------- */
static void expect_target(tk_ctx *ctx, const char *arch, int sms) {
    char buf[16];
    int n = 0;
    ck_assert_int_eq(tk_gpu_arch(ctx, buf, sizeof buf), TK_OK);
    ck_assert_str_eq(buf, arch);
    ck_assert_int_eq(tk_gpu_sm_count(ctx, &n), TK_OK);
    ck_assert_int_eq(n, sms);
}

START_TEST(set_backend_checks) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_set_backend(NULL, TK_BACKEND_INTERP, NULL, 0), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, (tk_backend)7, NULL, 0), TK_ERR_INVALID_ARG,
                     "backend 7 is neither TK_BACKEND_GPU (0) nor TK_BACKEND_INTERP (1)");
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, "sm_70", 0),
                     TK_ERR_INVALID_ARG, "unknown arch \"sm_70\"; the known ones are sm_80");
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, "bogus", 0),
                     TK_ERR_INVALID_ARG, "unknown arch \"bogus\"");
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, -1), TK_ERR_INVALID_ARG,
                     "sms is -1; expected 1 .. 4096, or 0 for 132");
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_GPU, NULL, 5000), TK_ERR_INVALID_ARG,
                     "sms is 5000");
    /* until something is made the setting may change */
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, "sm_86", 84), TK_OK);
    expect_target(ctx, "sm_86", 84);
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, 0), TK_OK);
    expect_target(ctx, "sm_90a", 132);
    char small[4];
    tu_expect_status(ctx, tk_gpu_arch(ctx, small, sizeof small), TK_ERR_INVALID_ARG,
                     "buffer too small for \"sm_90a\"");
    ck_assert_int_eq(tk_gpu_init(ctx), TK_OK);
    ck_assert_int_eq(tk_gpu_sync(ctx), TK_OK);
    void *p = NULL, *kept = NULL, *none = &p;
    ck_assert_int_eq(tk_gpu_alloc(ctx, 0, &none), TK_OK); /* zero bytes: NULL, nothing made */
    ck_assert_ptr_null(none);
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, NULL, 0), TK_OK);
    ck_assert_int_eq(tk_gpu_alloc(ctx, 1000, &p), TK_OK);
    ck_assert_int_eq(tk_gpu_alloc(ctx, 24, &kept), TK_OK); /* left for tk_ctx_destroy */
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_GPU, NULL, 0), TK_ERR_INVALID_ARG,
                     "already compiled a program or allocated memory on the interpreter backend");
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, "sm_80", 0),
                     TK_ERR_INVALID_ARG, "set the backend before either");
    expect_target(ctx, "sm_90a", 132); /* unchanged */
    int local = 0;
    tu_expect_status(ctx, tk_gpu_free(ctx, &local), TK_ERR_INVALID_ARG,
                     "is not a block tk_gpu_alloc gave this context");
    tu_expect_status(ctx, tk_gpu_upload(ctx, p, NULL, 4), TK_ERR_INVALID_ARG,
                     "tk_gpu_upload: NULL pointer");
    ck_assert_int_eq(tk_gpu_free(ctx, p), TK_OK);
    tu_expect_status(ctx, tk_gpu_free(ctx, p), TK_ERR_INVALID_ARG, "(or it was freed already)");
    ck_assert_int_eq(tk_gpu_free(ctx, NULL), TK_OK);
    tk_ctx_destroy(ctx);
}
END_TEST

/* X[rows, 64] f32 scaled by s in place, one warp per 16 rows; `big`: a
 * 128 KiB shared tile besides, more than an sm_86 block may have. */
static tk_kernel *scale_kernel(tk_ctx *ctx, bool big) {
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "scale", 1, &k), TK_OK);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2), *s = tk_param_scalar(k, "s", TK_F32);
    tk_value *row0 = tk_mul(k, tk_cvt(k, tk_block_id(k, 0), TK_I64), tk_const_i64(k, 16));
    tk_value *idx[2] = {row0, tk_const_i64(k, 0)};
    tk_value *x = tk_load(k, tk_tile_type(TK_F32, 16, 64, TK_WARP, TK_ROW), X, idx, 0.0f);
    if (big) tk_shared(k, TK_F32, 128, 128, TK_SMEM_PLAIN, 2);
    tk_store(k, X, idx, tk_mul(k, x, s));
    tk_set_grid(k, tk_ceil_div(k, tk_dim(k, X, 0), tk_const_i64(k, 16)), NULL, NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    return k;
}

/* tk_compile keeps its own copy: the kernel may be destroyed before the
 * launches, as on the GPU. */
START_TEST(compile_and_launch) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    tk_kernel *k = scale_kernel(ctx, false);
    tk_program *prog = NULL;
    ck_assert_msg(tk_compile(ctx, k, &prog) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_kernel_destroy(k);
    ck_assert_int_eq(tk_program_origin(prog), TK_FROM_COMPILE);
    ck_assert_int_eq(tk_program_resident_blocks(prog) % 132, 0);
    ck_assert_int_gt(tk_program_resident_blocks(prog), 0);
    enum { ROWS = 37 };
    float host[ROWS * 64];
    for (int i = 0; i < ROWS * 64; i++) host[i] = (float)i;
    float *dx = NULL;
    ck_assert_int_eq(tk_gpu_alloc(ctx, sizeof host, (void **)&dx), TK_OK);
    ck_assert_int_eq(tk_gpu_upload(ctx, dx, host, sizeof host), TK_OK);
    int64_t dims[2] = {ROWS, 64};
    tk_arg args[2] = {tk_arg_tensor(dx, TK_F32, 2, dims), tk_arg_f32(0.5f)};
    ck_assert_msg(tk_launch(prog, 2, args, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    /* a view into the middle of the allocation, rows backwards */
    int64_t rdims[2] = {4, 64}, rst[2] = {-64, 1};
    tk_arg rev[2] = {tk_arg_strided(dx + 20 * 64, TK_F32, 2, rdims, rst), tk_arg_f32(2.0f)};
    ck_assert_msg(tk_launch(prog, 2, rev, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(tk_gpu_download(ctx, host, dx, sizeof host), TK_OK);
    for (int i = 0; i < ROWS * 64; i++) {
        int row = i / 64;
        float want = (float)i * (row >= 17 && row <= 20 ? 1.0f : 0.5f);
        ck_assert_msg(host[i] == want, "X[%d] = %g, expected %g", i, host[i], want);
    }
    /* the checks are the GPU's */
    tu_expect_status(ctx, tk_launch(prog, 1, args, NULL), TK_ERR_LAUNCH, "tk_launch");
    dims[0] = 0; /* an empty grid: nothing runs */
    args[0] = tk_arg_tensor(dx, TK_F32, 2, dims);
    ck_assert_int_eq(tk_launch(prog, 2, args, NULL), TK_OK);
    tk_program_release(prog);
    ck_assert_int_eq(tk_gpu_free(ctx, dx), TK_OK);
    tu_expect_status(ctx, tk_ctx_set_backend(ctx, TK_BACKEND_GPU, NULL, 0), TK_ERR_INVALID_ARG,
                     "already compiled");
    tk_ctx_destroy(ctx);
}
END_TEST

/* The target's shared memory bounds a program, as the GPU's would. */
START_TEST(shared_memory_limit) {
    tk_ctx *ctx = tu_interp_ctx("sm_86", 0);
    tk_kernel *k = scale_kernel(ctx, true);
    tk_program *prog = NULL;
    tu_expect_status(ctx, tk_compile(ctx, k, &prog), TK_ERR_UNSUPPORTED,
                     "bytes of shared memory, sm_86 allows");
    ck_assert_ptr_null(prog);
    /* nothing was made: the backend may still change */
    ck_assert_int_eq(tk_ctx_set_backend(ctx, TK_BACKEND_INTERP, "sm_90a", 0), TK_OK);
    ck_assert_msg(tk_compile(ctx, k, &prog) == TK_OK, "%s", tk_ctx_error(ctx));
    tk_program_release(prog);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Two warps storing the same elements with no barrier: the race checker
 * fails the launch, and the message names the launch and the kernel. */
START_TEST(run_failure_reported) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    tk_kernel *k;
    ck_assert_int_eq(tk_kernel_create(ctx, "racy", 2, &k), TK_OK);
    tk_value *X = tk_param_tensor(k, "X", TK_F32, 2);
    tk_value *idx[2] = {tk_const_i64(k, 0), tk_const_i64(k, 0)};
    tk_store(k, X, idx,
             tk_fill(k, tk_tile_type(TK_F32, 16, 16, TK_WARP, TK_ROW), tk_const_f32(k, 1.0f)));
    tk_set_grid(k, NULL, NULL, NULL);
    ck_assert_msg(tk_kernel_finish(k) == TK_OK, "%s", tk_kernel_error(k));
    tk_program *prog = NULL;
    ck_assert_int_eq(tk_compile(ctx, k, &prog), TK_OK);
    tk_kernel_destroy(k);
    void *dx = tu_dev_bytes(ctx, 16 * 16 * 4);
    int64_t dims[2] = {16, 16};
    tk_arg a = tk_arg_tensor(dx, TK_F32, 2, dims);
    tu_expect_status(ctx, tk_launch(prog, 1, &a, NULL), TK_ERR_RUNTIME,
                     "tk_launch: kernel 'racy' on the interpreter: tk_interp_run");
    ck_assert_msg(strstr(tk_ctx_error(ctx), "race"), "%s", tk_ctx_error(ctx));
    tk_program_release(prog);
    ck_assert_int_eq(tk_gpu_free(ctx, dx), TK_OK);
    tk_ctx_destroy(ctx);
}
END_TEST

static int dir_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* Interpreted programs never reach the disk cache; the registry memoizes
 * them per context as it does GPU programs, with the set arch. */
START_TEST(no_disk_cache) {
    char dir[512];
    tu_join(dir, sizeof dir, tmp_root, "interp-cache");
    tk_ctx *ctx = tu_interp_ctx("sm_80", 0);
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    int64_t dims[2] = {64, 64};
    ref_tensor a = ref_tensor_new(TK_BF16, 2, dims);
    ref_tensor_random(&a, -1, 1);
    void *da = tu_dev_in(ctx, &a), *dc = tu_dev_bytes(ctx, 64 * 64 * 4);
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_F32, p.m = p.n = p.k = 64, p.a = da, p.b = da, p.c = dc;
    tk_prepare_info info;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert_str_eq(info.arch, "sm_80");
    ck_assert_int_eq(tk_gemm(ctx, &p, NULL), TK_OK);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    ck_assert(st.disk_hits == 0 && st.misses == 0 && st.rejected == 0 && st.evicted == 0);
    ck_assert(st.memory_hits == 0 && st.llvm_ms == 0 && st.ptx_to_cubin_ms == 0);
    ck_assert_str_eq(st.disk_error, "");
    ck_assert_int_eq(dir_entries(dir), 0);
    tk_gpu_free(ctx, da), tk_gpu_free(ctx, dc);
    ref_tensor_free(&a);
    tk_ctx_destroy(ctx);
}
END_TEST

/* tk_cache_set_precompile: an interpreted run's compiles also fill the disk
 * cache for the backend's arch through ptxas; a second context finds them
 * there (disk hits, no ptxas run). */
static tk_status gemm_prepare_64(tk_ctx *ctx, tk_prepare_info *info) {
    void *d = tu_dev_bytes(ctx, 64 * 64 * 4);
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_F32, p.m = p.n = p.k = 64, p.a = p.b = p.c = d;
    tk_status s = tk_gemm_prepare(ctx, &p, info);
    tk_gpu_free(ctx, d);
    return s;
}

START_TEST(precompile_fills_the_disk_cache) {
    char dir[512];
    tu_join(dir, sizeof dir, tmp_root, "precompiled");
    tk_ctx *gpu = NULL;
    ck_assert_int_eq(tk_ctx_create(&gpu), TK_OK);
    tu_expect_status(gpu, tk_cache_set_precompile(gpu, 1), TK_ERR_STATE, "interpreter backend");
    tk_ctx_destroy(gpu);
    tk_ctx *ctx = tu_interp_ctx("sm_90a", 132);
    ck_assert_int_eq(tk_cache_set_dir(ctx, NULL), TK_OK);
    tu_expect_status(ctx, tk_cache_set_precompile(ctx, 1), TK_ERR_CACHE, "disabled");
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    tk_status s = tk_cache_set_precompile(ctx, 1);
    if (s != TK_OK && strstr(tk_ctx_error(ctx), "ptxas")) {
        printf("precompile_fills_the_disk_cache: no ptxas here (%s): skipped\n", tk_ctx_error(ctx));
        tk_ctx_destroy(ctx);
        return;
    }
    ck_assert_msg(s == TK_OK, "%s", tk_ctx_error(ctx));
    tk_prepare_info info;
    ck_assert_msg(gemm_prepare_64(ctx, &info) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    tk_cache_stats st;
    tk_cache_stats_get(ctx, &st);
    ck_assert_msg(st.misses == 1 && st.disk_hits == 0 && st.ptx_to_cubin_ms > 0,
                  "misses %llu, disk hits %llu", (unsigned long long)st.misses,
                  (unsigned long long)st.disk_hits);
    int entries = dir_entries(dir);
    ck_assert_int_ge(entries, 1);
    tk_ctx_destroy(ctx);
    /* a second run: the kernel is there already */
    ctx = tu_interp_ctx("sm_90a", 132);
    ck_assert_int_eq(tk_cache_set_dir(ctx, dir), TK_OK);
    ck_assert_int_eq(tk_cache_set_precompile(ctx, 1), TK_OK);
    ck_assert_int_eq(gemm_prepare_64(ctx, NULL), TK_OK);
    tk_cache_stats_get(ctx, &st);
    ck_assert(st.misses == 0 && st.disk_hits == 1 && st.ptx_to_cubin_ms == 0);
    ck_assert_int_eq(dir_entries(dir), entries);
    /* off: nothing more is written */
    ck_assert_int_eq(tk_cache_set_precompile(ctx, 0), TK_OK);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- Threads ---------------------------------------------------------------------- */
typedef struct job {
    tk_ctx *ctx;
    int64_t m;
    int ok;
} job;

/* A GEMM of ones on the context: every output element is k. */
static void *gemm_job(void *arg) {
    job *j = arg;
    int64_t m = j->m, n = 48, k = 40;
    size_t na = (size_t)(m * k), nb = (size_t)(k * n);
    uint16_t *ones = malloc(2 * (na > nb ? na : nb));
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    for (size_t i = 0; i < (na > nb ? na : nb); i++) ones[i] = tk_f32_to_bf16(1.0f);
    void *da = NULL, *db = NULL, *dc = NULL;
    tk_gemm_params p = TK_GEMM_PARAMS_INIT;
    p.in_dtype = TK_BF16, p.out_dtype = TK_F32, p.m = m, p.n = n, p.k = k;
    j->ok = !tk_gpu_alloc(j->ctx, 2 * na, &da) && !tk_gpu_alloc(j->ctx, 2 * nb, &db) &&
            !tk_gpu_alloc(j->ctx, 4 * (size_t)(m * n), &dc) &&
            !tk_gpu_upload(j->ctx, da, ones, 2 * na) && !tk_gpu_upload(j->ctx, db, ones, 2 * nb);
    p.a = da, p.b = db, p.c = dc;
    j->ok =
        j->ok && !tk_gemm(j->ctx, &p, NULL) && !tk_gpu_download(j->ctx, c, dc, 4 * (size_t)(m * n));
    for (int64_t i = 0; j->ok && i < m * n; i++) j->ok = c[i] == (float)k;
    tk_gpu_free(j->ctx, da), tk_gpu_free(j->ctx, db), tk_gpu_free(j->ctx, dc);
    free(ones), free(c);
    return NULL;
}

/* Launches on one context from two threads, and on two contexts at once. */
START_TEST(threads) {
    tk_ctx *one = tu_interp_ctx(NULL, 0), *other = tu_interp_ctx("sm_80", 0);
    job jobs[4] = {{one, 20, 0}, {one, 33, 0}, {other, 20, 0}, {other, 17, 0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, gemm_job, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) ck_assert_msg(jobs[i].ok, "job %d failed", i);
    tk_ctx_destroy(one), tk_ctx_destroy(other);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(tmp_root, sizeof tmp_root, "backend-interp")) return EXIT_FAILURE;
    tu_set_cache_dir(tmp_root);
    Suite *s = suite_create("backend_interp");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, set_backend_checks);
    tcase_add_test(tc, compile_and_launch);
    tcase_add_test(tc, shared_memory_limit);
    tcase_add_test(tc, run_failure_reported);
    tcase_add_test(tc, no_disk_cache);
    tcase_add_test(tc, precompile_fills_the_disk_cache);
    tcase_add_test(tc, threads);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(tmp_root);
    return rc;
}
