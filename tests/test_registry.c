/* The ready-made kernels' registry (jit/registry.h): one program per
 * (definition, key) and context, built and compiled once; what prepare
 * reports; the ready-made kernels' entry points on top of it.
 *
 * Without a GPU tk_compile cannot load a module, so these tests compile
 * with a stand-in (tk_registry_set_compile) that makes a program with no
 * module, as test_jit's launch checks do. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jit/jit.h"
#include "jit/pool.h"
#include "jit/program.h"
#include "jit/registry.h"
#include "tk/tk_run.h"
#include "util/run.h"
#include "util/params.h"

static tk_ctx *ctx;
static atomic_int g_builds, g_compiles;

/* Compiles in flight now, and the most seen at once; the toys of n = 13 and
 * 14 (kernels "unlucky13", "unlucky14") fail to compile. With g_pair set each compile waits (up to 10 s) until a
 * second one is in flight: only side-by-side compiles pass quickly. */
static atomic_int g_flying, g_most, g_pair;

static void wait_for_pair(void) {
    int now = atomic_fetch_add(&g_flying, 1) + 1, most = atomic_load(&g_most);
    while (now > most && !atomic_compare_exchange_weak(&g_most, &most, now)) {}
    for (int i = 0; i < 10000 && atomic_load(&g_pair) && atomic_load(&g_most) < 2; i++)
        usleep(1000);
    atomic_fetch_sub(&g_flying, 1);
}

static pthread_t g_compiled_on; /* the thread of the latest fake compile */
static pthread_mutex_t g_compiled_mu = PTHREAD_MUTEX_INITIALIZER;

static tk_status fake_compile(tk_ctx *c, const tk_kernel *k, tk_program **out, tk_diag *d) {
    tk_diag dg = {0};
    atomic_fetch_add(&g_compiles, 1);
    pthread_mutex_lock(&g_compiled_mu);
    g_compiled_on = pthread_self();
    pthread_mutex_unlock(&g_compiled_mu);
    wait_for_pair();
    const char *name = tk_kernel_name(k);
    if (!strncmp(name, "unlucky", 7)) {
        if (!strcmp(name, "unlucky14")) usleep(20000); /* fails after unlucky13 */
        return tk_diag_fail(d, TK_ERR_LLVM, "fake compile: kernel '%s' fails", name);
    }
    tk_status s = tk_program_new(c, k, NULL, out, &dg);
    return s ? tk_diag_fail(d, s, "fake compile: %s", dg.msg) : TK_OK;
}

static void setup(void) {
    atomic_store(&g_builds, 0);
    atomic_store(&g_compiles, 0);
    atomic_store(&g_flying, 0);
    atomic_store(&g_most, 0);
    atomic_store(&g_pair, 0);
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_ptr_null(tk_jit_find(ctx));
    ck_assert_int_eq(tk_registry_set_compile(ctx, fake_compile), TK_OK);
    /* The memo takes the JIT's slot first: made before it, destroyed after. */
    ck_assert_ptr_nonnull(tk_jit_find(ctx));
}

static void teardown(void) { tk_ctx_destroy(ctx); }

/* A toy kernel: its key is a number, a specialization constant; n < 0 fails. */
typedef struct toy_key {
    int32_t n;
} toy_key;

static tk_status build_toy(tk_ctx *c, const void *key, tk_kernel **out) {
    const toy_key *t = key;
    atomic_fetch_add(&g_builds, 1);
    if (t->n < 0) return tk_ctx_set_error(c, TK_ERR_INVALID_ARG, "toy: n is %d", (int)t->n);
    tk_kernel *k;
    tk_status s = tk_kernel_create(c,
                                   t->n == 13   ? "unlucky13"
                                   : t->n == 14 ? "unlucky14"
                                                : "toy",
                                   1, &k);
    if (s) return s;
    tk_spec(k, "n", t->n);
    tk_set_grid(k, NULL, NULL, NULL);
    if ((s = tk_kernel_finish(k))) {
        tk_kernel_destroy(k);
        return s;
    }
    *out = k;
    return TK_OK;
}

static const tk_kernel_def toy_def = {"toy", sizeof(toy_key), build_toy};
static const tk_kernel_def toy2_def = {"toy2", sizeof(toy_key), build_toy};

static tk_program *toy(const tk_kernel_def *def, int n, tk_prepare_info *info) {
    toy_key key;
    memset(&key, 0, sizeof key);
    key.n = n;
    tk_program *p = NULL;
    tk_status s = tk_registry_program(ctx, def, &key, &p, info);
    ck_assert_msg(s == TK_OK, "%s: %s", tk_status_name(s), tk_ctx_error(ctx));
    return p;
}

START_TEST(same_key_same_program) {
    tk_prepare_info info;
    memset(&info, 0xff, sizeof info);
    tk_program *p1 = toy(&toy_def, 1, &info);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert(info.ms >= 0.0);
    ck_assert_uint_lt(strlen(info.arch), sizeof info.arch);
    ck_assert_ptr_eq(toy(&toy_def, 1, &info), p1);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    ck_assert_ptr_eq(toy(&toy_def, 1, NULL), p1);
    ck_assert_int_eq(atomic_load(&g_builds), 1);
    ck_assert_int_eq(atomic_load(&g_compiles), 1);
    /* Another key, and the same key bytes of another definition. */
    tk_program *p2 = toy(&toy_def, 2, &info);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert_ptr_ne(p2, p1);
    tk_program *q1 = toy(&toy2_def, 1, NULL);
    ck_assert_ptr_ne(q1, p1);
    ck_assert_ptr_ne(q1, p2);
    ck_assert_int_eq(atomic_load(&g_builds), 3);
    /* Many specializations: no fixed limit. */
    for (int n = 0; n < 200; n++) ck_assert_ptr_nonnull(toy(&toy_def, 100 + n, NULL));
    ck_assert_ptr_eq(toy(&toy_def, 1, NULL), p1);
    ck_assert_ptr_eq(toy(&toy_def, 2, NULL), p2);
    ck_assert_int_eq(atomic_load(&g_builds), 203);
}
END_TEST

START_TEST(failures_are_not_memoized) {
    toy_key key = {.n = -1};
    tk_program *p = NULL;
    for (int i = 1; i <= 2; i++) {
        ck_assert_int_eq(tk_registry_program(ctx, &toy_def, &key, &p, NULL), TK_ERR_INVALID_ARG);
        ck_assert_str_eq(tk_ctx_error(ctx), "toy: n is -1");
        ck_assert_int_eq(atomic_load(&g_builds), i);
    }
    ck_assert_int_eq(atomic_load(&g_compiles), 0);
    ck_assert_int_eq(tk_registry_program(NULL, &toy_def, &key, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_program(ctx, NULL, &key, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_program(ctx, &toy_def, NULL, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_program(ctx, &toy_def, &key, NULL, NULL), TK_ERR_INVALID_ARG);
}
END_TEST

/* Several programs in one call: each (def, key) built and compiled once,
 * hits taken from the memo, the programs in request order. */
START_TEST(batch_builds_each_miss_once) {
    tk_program *p1 = toy(&toy_def, 1, NULL);
    toy_key key[5] = {{.n = 1}, {.n = 2}, {.n = 3}, {.n = 2}, {.n = 2}};
    tk_registry_req req[5];
    for (int i = 0; i < 5; i++) req[i] = (tk_registry_req){i == 4 ? &toy2_def : &toy_def, &key[i]};
    tk_program *out[5] = {0};
    tk_prepare_info info;
    ck_assert_int_eq(tk_registry_programs(ctx, 5, req, out, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert_int_eq(atomic_load(&g_builds), 4); /* toy 1 earlier; toy 2, 3 and toy2 2 now */
    ck_assert_int_eq(atomic_load(&g_compiles), 4);
    ck_assert_ptr_eq(out[0], p1);
    ck_assert_ptr_eq(out[1], out[3]);
    ck_assert(out[1] != out[2] && out[1] != out[4] && out[2] != out[4] && out[4] != p1);
    ck_assert_ptr_eq(toy(&toy_def, 3, NULL), out[2]);
    ck_assert_ptr_eq(toy(&toy2_def, 2, NULL), out[4]);
    tk_program *again[5];
    ck_assert_int_eq(tk_registry_programs(ctx, 5, req, again, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    ck_assert_int_eq(memcmp(again, out, sizeof out), 0);
    ck_assert_int_eq(atomic_load(&g_builds), 4);
    ck_assert_int_eq(tk_registry_programs(ctx, 0, NULL, NULL, &info), TK_OK);
    ck_assert_int_eq(tk_registry_programs(ctx, -1, req, out, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_programs(ctx, 2, NULL, out, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_programs(ctx, 2, req, NULL, NULL), TK_ERR_INVALID_ARG);
    req[1].def = NULL;
    ck_assert_int_eq(tk_registry_programs(ctx, 2, req, out, NULL), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_ctx_error(ctx), "tk_registry_programs: request 1's def is NULL");
    /* One definition's keys side by side: the same programs. */
    tk_program *of[4];
    ck_assert_int_eq(tk_registry_programs_of(ctx, &toy_def, 4, key, of, NULL), TK_OK);
    ck_assert_int_eq(memcmp(of, out, sizeof of), 0);
    ck_assert_int_eq(atomic_load(&g_builds), 4);
    ck_assert_int_eq(tk_registry_programs_of(ctx, &toy_def, 17, key, of, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_registry_programs_of(ctx, NULL, 1, key, of, NULL), TK_ERR_INVALID_ARG);
}
END_TEST

/* A cold batch compiles side by side: each compile waits for a second one
 * to be in flight, which only a pool of threads provides. */
START_TEST(batch_compiles_side_by_side) {
    if (tk_pool_threads(3) < 2) {
        printf("batch_compiles_side_by_side: one CPU here, so one compile at a time: skipped\n");
        return;
    }
    toy_key key[3] = {{.n = 21}, {.n = 22}, {.n = 23}};
    tk_registry_req req[3];
    for (int i = 0; i < 3; i++) req[i] = (tk_registry_req){&toy_def, &key[i]};
    tk_program *out[3];
    atomic_store(&g_pair, 1);
    ck_assert_int_eq(tk_registry_programs(ctx, 3, req, out, NULL), TK_OK);
    int most = atomic_load(&g_most);
    ck_assert_msg(most >= 2, "%d compile(s) at most in flight at once, expected 2 or more", most);
    /* One program: compiled on the calling thread, no pool. */
    atomic_store(&g_pair, 0);
    toy(&toy_def, 24, NULL);
    pthread_mutex_lock(&g_compiled_mu);
    bool here = pthread_equal(g_compiled_on, pthread_self());
    pthread_mutex_unlock(&g_compiled_mu);
    ck_assert(here);
}
END_TEST

/* A failed build stops the batch before any compile; a failed compile is
 * reported by name in request order and the others stay memoized. */
START_TEST(batch_failures) {
    toy_key key[3] = {{.n = 31}, {.n = -1}, {.n = 32}};
    tk_registry_req req[3];
    for (int i = 0; i < 3; i++) req[i] = (tk_registry_req){&toy_def, &key[i]};
    tk_program *out[3];
    ck_assert_int_eq(tk_registry_programs(ctx, 3, req, out, NULL), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_ctx_error(ctx), "toy: n is -1");
    ck_assert_int_eq(atomic_load(&g_compiles), 0);
    key[1].n = 13;
    ck_assert_int_eq(tk_registry_programs(ctx, 3, req, out, NULL), TK_ERR_LLVM);
    ck_assert_str_eq(tk_ctx_error(ctx), "fake compile: kernel 'unlucky13' fails");
    ck_assert_int_eq(atomic_load(&g_compiles), 3);
    toy(&toy_def, 31, NULL), toy(&toy_def, 32, NULL); /* memoized: no compile */
    ck_assert_int_eq(atomic_load(&g_compiles), 3);
    ck_assert_int_eq(tk_registry_programs(ctx, 3, req, out, NULL), TK_ERR_LLVM);
    ck_assert_int_eq(atomic_load(&g_compiles), 4); /* only the failure again */
    /* Two failures: the first in request order is reported, though it
     * finishes last (unlucky14 sleeps first). */
    key[0].n = 14;
    ck_assert_int_eq(tk_registry_programs(ctx, 3, req, out, NULL), TK_ERR_LLVM);
    ck_assert_str_eq(tk_ctx_error(ctx), "fake compile: kernel 'unlucky14' fails");
}
END_TEST

enum { THREADS = 8 };

typedef struct asker {
    pthread_barrier_t *go;
    tk_program *got;
    int n; /* the toy's key (7 unless set) */
} asker;

static void *ask(void *arg) {
    asker *a = arg;
    toy_key key = {.n = a->n ? a->n : 7};
    pthread_barrier_wait(a->go);
    if (tk_registry_program(ctx, &toy_def, &key, &a->got, NULL)) a->got = NULL;
    return NULL;
}

START_TEST(threads_share_one_build) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    pthread_t th[THREADS];
    asker a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (asker){.go = &go};
        ck_assert_int_eq(pthread_create(&th[i], NULL, ask, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < THREADS; i++) {
        ck_assert_ptr_nonnull(a[i].got);
        ck_assert_ptr_eq(a[i].got, a[0].got);
    }
    ck_assert_int_eq(atomic_load(&g_builds), 1);
}
END_TEST

/* Threads asking for different keys compile them at the same time: the
 * memo's lock is not held across a build and compile (each fake compile
 * waits for a second one in flight, as in batch_compiles_side_by_side). */
START_TEST(threads_compile_different_keys_at_once) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    pthread_t th[2];
    asker a[2] = {{.go = &go, .n = 41}, {.go = &go, .n = 42}};
    atomic_store(&g_pair, 1);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, ask, &a[i]), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    ck_assert(a[0].got && a[1].got && a[0].got != a[1].got);
    int most = atomic_load(&g_most);
    ck_assert_msg(most == 2, "%d compile(s) at most in flight at once, expected 2", most);
}
END_TEST

START_TEST(arch_is_the_gpus) {
    char a[16], b[16], want[16] = "";
    tk_registry_arch(ctx, a, sizeof a);
    tk_registry_arch(ctx, b, sizeof b);
    if (tk_gpu_arch(ctx, want, sizeof want)) want[0] = '\0';
    ck_assert_str_eq(a, want);
    ck_assert_str_eq(b, want);
}
END_TEST

/* ---- The ready-made kernels through the registry -------------------------- */
START_TEST(gemm_prepare_keys_on_the_config) {
    static char dummy[64];
    tk_gemm_params p = tu_gemm_params(TK_BF16, TK_F32, 64, 64, 64, dummy);
    tk_prepare_info info;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_F32, 0);
    cfg.block_m = 64; /* a shape tk_gemm_config_for never picks */
    p.config = &cfg;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    p.m = 4096; /* sizes are run-time values: the same kernel */
    ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    cfg.warps = 3; /* a bad config fails in the build, every time */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tk_gemm_prepare(ctx, &p, &info), TK_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "3 warps cannot split"));
    }
    ck_assert_int_eq(atomic_load(&g_compiles), 2);
}
END_TEST

START_TEST(attention_prepare_keys_on_the_spec) {
    static char dummy[64];
    tk_attention_params p = tu_attention_params(TK_BF16, 64, 2, 1, 64, dummy); /* not decoding */
    tk_prepare_info info;
    ck_assert_int_eq(tk_attention_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    p.seq_q = 1000, p.batch = 3;
    ck_assert_int_eq(tk_attention_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    p.causal = 1;
    ck_assert_int_eq(tk_attention_prepare(ctx, &p, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    ck_assert_int_eq(atomic_load(&g_compiles), 2);
}
END_TEST

/* One status per kind of bad input, the same from every entry point. */
START_TEST(bad_head_dim_is_invalid_everywhere) {
    static char dummy[64];
    tk_attention_params p = tu_attention_params(TK_BF16, 96, 1, 1, 8, dummy);
    ck_assert_int_eq(tk_attention_prepare(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_ctx_error(ctx),
                     "tk_attention_forward: head_dim is 96; expected 64, 128 or 256");
    ck_assert_int_eq(tk_attention_forward(ctx, &p, NULL), TK_ERR_INVALID_ARG);
    tk_attention_config cfg = {.dtype = TK_BF16, .head_dim = 96};
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_attention_fwd_build(ctx, &cfg, &k), TK_ERR_INVALID_ARG);
    ck_assert_str_eq(tk_ctx_error(ctx),
                     "tk_attention_fwd_build: head_dim is 96; expected 64, 128 or 256");
    ck_assert_int_eq(atomic_load(&g_builds) + atomic_load(&g_compiles), 0);
}
END_TEST

/* ---- Parameter structs grow (docs/API.md): struct_size ------------------- */
static tk_gemm_params small_gemm(void *dummy) {
    return tu_gemm_params(TK_BF16, TK_F32, 64, 64, 64, dummy);
}

START_TEST(struct_size_zero_or_small_is_invalid) {
    static char dummy[64];
    tk_gemm_params g = small_gemm(dummy);
    g.struct_size = 0;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &g, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_gemm: params.struct_size is 0"));
    ck_assert_int_eq(tk_gemm(ctx, &g, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_gemm_config_for_call(&g, "sm_90a").block_m, 0);
    g.struct_size = sizeof(size_t);
    ck_assert_int_eq(tk_gemm_prepare(ctx, &g, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "smallest layout"));
    tk_attention_params a = tu_attention_params(TK_BF16, 64, 1, 1, 8, dummy);
    a.struct_size = offsetof(tk_attention_params, lse_strides);
    ck_assert_int_eq(tk_attention_prepare(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "tk_attention_forward: params.struct_size"));
    ck_assert_int_eq(tk_attention_forward(ctx, &a, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_attention_prepare(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(atomic_load(&g_builds) + atomic_load(&g_compiles), 0);
}
END_TEST

/* A caller built before `config` existed: its struct ends at ldc, and the
 * library reads no further (a mismatched config there would be an error). */
START_TEST(old_size_gets_defaults) {
    static char dummy[64];
    tk_gemm_config wrong = tk_gemm_default_config(TK_F16, TK_F16, 1);
    tk_gemm_params g = small_gemm(dummy);
    g.config = &wrong;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &g, NULL), TK_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "config is for"));
    g.struct_size = offsetof(tk_gemm_params, config);
    tk_prepare_info info;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &g, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_COMPILE);
    tk_gemm_params fresh = small_gemm(dummy); /* config NULL: the same kernel */
    ck_assert_int_eq(tk_gemm_prepare(ctx, &fresh, &info), TK_OK);
    ck_assert_int_eq(info.origin, TK_FROM_MEMORY);
    tk_gemm_config a = tk_gemm_config_for_call(&g, "sm_90a");
    tk_gemm_config b = tk_gemm_config_for_call(&fresh, "sm_90a");
    ck_assert_int_ne(a.block_m, 0);
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
}
END_TEST

/* A caller built against a newer, larger struct: accepted while the fields
 * this library does not know are zero (their "as before" value). */
START_TEST(newer_size_needs_unknown_fields_zero) {
    static char dummy[64];
    struct {
        tk_gemm_params p;
        int64_t future;
    } big = {.p = small_gemm(dummy)};
    big.p.struct_size = sizeof big;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &big.p, NULL), TK_OK);
    big.future = 7;
    ck_assert_int_eq(tk_gemm_prepare(ctx, &big.p, NULL), TK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "does not know"));
}
END_TEST

START_TEST(version_is_the_headers) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TK_VERSION_MAJOR, TK_VERSION_MINOR, TK_VERSION_PATCH);
    ck_assert_str_eq(tk_version(), want);
    ck_assert_int_eq(tk_version_number(), TK_VERSION_NUMBER);
}
END_TEST

int main(void) {
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("memo");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, same_key_same_program);
    tcase_add_test(tc, failures_are_not_memoized);
    tcase_add_test(tc, threads_share_one_build);
    tcase_add_test(tc, threads_compile_different_keys_at_once);
    tcase_add_test(tc, batch_builds_each_miss_once);
    tcase_add_test(tc, batch_compiles_side_by_side);
    tcase_add_test(tc, batch_failures);
    tcase_add_test(tc, arch_is_the_gpus);
    tcase_add_test(tc, gemm_prepare_keys_on_the_config);
    tcase_add_test(tc, attention_prepare_keys_on_the_spec);
    tcase_add_test(tc, bad_head_dim_is_invalid_everywhere);
    tcase_add_test(tc, struct_size_zero_or_small_is_invalid);
    tcase_add_test(tc, old_size_gets_defaults);
    tcase_add_test(tc, newer_size_needs_unknown_fields_zero);
    tcase_add_test(tc, version_is_the_headers);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
