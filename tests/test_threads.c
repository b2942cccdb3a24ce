/* Separate contexts from separate threads: no global mutable state means
 * threads that each own a context can build, verify, print, interpret and
 * lower kernels at the same time and get exactly what one thread alone
 * gets. And threads sharing one context may call the ready-made kernels
 * (tk_run.h) at the same time: the context's lazily made tables are
 * created once (a lost race used to leak one; the ASan build catches it). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/run.h"
#include "util/params.h"

enum { THREADS = 4, M = 40, N = 48, K = 72 };

typedef struct job {
    int transpose_b;
    uint16_t a[M * K], b[K * N];
    float c[M * N];
    char *text, *ptx;
    tk_status status;
} job;

static void *work(void *arg) {
    job *j = arg;
    tk_ctx *ctx = NULL;
    tk_kernel *k = NULL;
    tk_status s = tk_ctx_create(&ctx);
    tk_gemm_config cfg = tk_gemm_default_config(TK_BF16, TK_F32, j->transpose_b);
    cfg.block_m = cfg.block_n = 64, cfg.block_k = 32, cfg.warps = 4, cfg.stages = 2;
    if (!s) s = tk_gemm_build(ctx, &cfg, &k);
    if (!s) s = tk_kernel_print(k, &j->text);
    int64_t da[2] = {M, K}, db[2] = {j->transpose_b ? N : K, j->transpose_b ? K : N};
    int64_t dc[2] = {M, N};
    tk_arg args[3] = {tk_arg_tensor(j->a, TK_BF16, 2, da), tk_arg_tensor(j->b, TK_BF16, 2, db),
                      tk_arg_tensor(j->c, TK_F32, 2, dc)};
    if (!s) s = tk_interp_run(k, 3, args);
    if (!s) s = tk_emit_ptx(ctx, k, "sm_80", &j->ptx);
    j->status = s;
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
    return NULL;
}

static void fill(job *j, int transpose_b) {
    memset(j, 0, sizeof *j);
    j->transpose_b = transpose_b;
    for (int i = 0; i < M * K; i++) j->a[i] = tk_f32_to_bf16((float)((i * 7) % 13) / 13.0f);
    for (int i = 0; i < K * N; i++) j->b[i] = tk_f32_to_bf16((float)((i * 5) % 11) / 11.0f);
}

START_TEST(contexts_in_parallel_match_one_thread) {
    static job solo[2], par[THREADS];
    for (int t = 0; t < 2; t++) {
        fill(&solo[t], t);
        work(&solo[t]);
        ck_assert_msg(solo[t].status == TK_OK, "status %s", tk_status_name(solo[t].status));
    }
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        fill(&par[i], i % 2);
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &par[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        const job *want = &solo[i % 2];
        ck_assert_int_eq(par[i].status, TK_OK);
        ck_assert_str_eq(par[i].text, want->text);
        ck_assert_str_eq(par[i].ptx, want->ptx);
        ck_assert_int_eq(memcmp(par[i].c, want->c, sizeof want->c), 0);
        tk_free(par[i].text);
        tk_free(par[i].ptx);
    }
    for (int t = 0; t < 2; t++) tk_free(solo[t].text), tk_free(solo[t].ptx);
}
END_TEST

static void *gemm_calls(void *arg) {
    static char dummy[64]; /* never read: without a GPU the call stops at compiling */
    tk_gemm_params p = tu_gemm_params(TK_BF16, TK_F32, 4, 4, 4, dummy);
    for (int i = 0; i < 3; i++) tk_gemm(arg, &p, NULL);
    return NULL;
}

START_TEST(threads_share_a_context) {
    for (int round = 0; round < 50; round++) {
        tk_ctx *ctx = NULL;
        ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, gemm_calls, ctx), 0);
        for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        tk_ctx_destroy(ctx);
    }
}
END_TEST

/* Each thread reads its own last error on a shared context: a failure on
 * another thread never replaces or tears it. */
typedef struct failer {
    tk_ctx *ctx;
    pthread_barrier_t *go;
    int id, wrong;
} failer;

static void *fail_often(void *arg) {
    failer *f = arg;
    char want[32];
    snprintf(want, sizeof want, "thread %d", f->id);
    pthread_barrier_wait(f->go);
    for (int i = 0; i < 2000; i++) {
        tk_ctx_set_error(f->ctx, TK_ERR_INVALID_ARG, "thread %d", f->id);
        f->wrong += strcmp(tk_ctx_error(f->ctx), want) != 0;
    }
    return NULL;
}

START_TEST(errors_are_per_thread) {
    tk_ctx *ctx = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_ctx_set_error(ctx, TK_ERR_STATE, "main");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    pthread_t th[THREADS];
    failer f[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (failer){.ctx = ctx, .go = &go, .id = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fail_often, &f[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < THREADS; i++)
        ck_assert_msg(f[i].wrong == 0, "thread %d read another's message %d times", i, f[i].wrong);
    ck_assert_str_eq(tk_ctx_error(ctx), "main");
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("contexts");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, contexts_in_parallel_match_one_thread);
    tcase_add_test(tc, threads_share_a_context);
    tcase_add_test(tc, errors_are_per_thread);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
