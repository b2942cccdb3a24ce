/* Context slots (ir/ctx.h): per-context state of the layers above the IR,
 * made on first use and destroyed with the context in reverse order of
 * creation; one state per definition even when threads race to make it. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ctx.h"
#include "util/run.h"

/* What makes and destroys did, in order ("+a+b-b-a"), and how many states
 * are alive. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[256];
static atomic_int g_made, g_destroyed;

static void note(char sign, char name) {
    pthread_mutex_lock(&g_mu);
    size_t n = strlen(g_log);
    if (n + 2 < sizeof g_log) g_log[n] = sign, g_log[n + 1] = name, g_log[n + 2] = '\0';
    pthread_mutex_unlock(&g_mu);
}

static void reset(void) {
    g_log[0] = '\0';
    atomic_store(&g_made, 0);
    atomic_store(&g_destroyed, 0);
}

static void *state_new(char name) {
    char *s = malloc(1);
    if (!s) return NULL;
    *s = name;
    atomic_fetch_add(&g_made, 1);
    note('+', name);
    return s;
}

static void state_free(void *state) {
    note('-', *(char *)state);
    atomic_fetch_add(&g_destroyed, 1);
    free(state);
}

static void *make_a(tk_ctx *ctx) { return state_new('a'); }
static void *make_c(tk_ctx *ctx) { return state_new('c'); }
static const tk_ctx_slot_def def_a = {"a", make_a, state_free};
/* b depends on a (as the kernel registry on the JIT): a is made first. */
static void *make_b(tk_ctx *ctx) { return tk_ctx_slot(ctx, &def_a) ? state_new('b') : NULL; }
static const tk_ctx_slot_def def_b = {"b", make_b, state_free};
static const tk_ctx_slot_def def_c = {"c", make_c, state_free};

START_TEST(same_state_on_every_call) {
    reset();
    tk_ctx *ctx = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_ptr_null(tk_ctx_slot_find(ctx, &def_a));
    void *a = tk_ctx_slot(ctx, &def_a);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(*(char *)a, 'a');
    for (int i = 0; i < 3; i++) ck_assert_ptr_eq(tk_ctx_slot(ctx, &def_a), a);
    ck_assert_ptr_eq(tk_ctx_slot_find(ctx, &def_a), a);
    ck_assert_ptr_null(tk_ctx_slot_find(ctx, &def_c));
    ck_assert_int_eq(atomic_load(&g_made), 1);
    ck_assert_ptr_null(tk_ctx_slot(NULL, &def_a));
    ck_assert_ptr_null(tk_ctx_slot(ctx, NULL));
    tk_ctx_destroy(ctx);
    ck_assert_str_eq(g_log, "+a-a");
}
END_TEST

START_TEST(destroyed_in_reverse_order_of_creation) {
    reset();
    tk_ctx *ctx = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    void *b = tk_ctx_slot(ctx, &def_b), *c = tk_ctx_slot(ctx, &def_c);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(tk_ctx_slot_find(ctx, &def_a)); /* made by b's make, first */
    ck_assert_ptr_eq(tk_ctx_slot(ctx, &def_b), b);
    ck_assert_str_eq(g_log, "+a+b+c");
    tk_ctx_destroy(ctx);
    ck_assert_str_eq(g_log, "+a+b+c-c-b-a");
    tk_ctx_destroy(NULL);
}
END_TEST

/* ---- Threads racing to make the first state --------------------------------- */
enum { THREADS = 8, ROUNDS = 25 };

static void *make_slow(tk_ctx *ctx) {
    usleep(200); /* widens the window in which other threads make theirs */
    return tk_ctx_slot(ctx, &def_a) ? state_new('s') : NULL;
}
static const tk_ctx_slot_def def_slow = {"slow", make_slow, state_free};

typedef struct racer {
    tk_ctx *ctx;
    pthread_barrier_t *go;
    const tk_ctx_slot_def *def;
    void *got;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    pthread_barrier_wait(r->go);
    r->got = tk_ctx_slot(r->ctx, r->def);
    return NULL;
}

START_TEST(threads_race_to_make_one_state) {
    for (int round = 0; round < ROUNDS; round++) {
        reset();
        tk_ctx *ctx = NULL;
        ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, THREADS);
        pthread_t th[THREADS];
        racer r[THREADS];
        for (int i = 0; i < THREADS; i++) {
            /* Half ask for the slow slot, half for the one it takes first. */
            r[i] = (racer){.ctx = ctx, .go = &go, .def = i % 2 ? &def_slow : &def_a};
            ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < THREADS; i++) {
            ck_assert_ptr_nonnull(r[i].got);
            ck_assert_ptr_eq(r[i].got, tk_ctx_slot_find(ctx, r[i].def));
        }
        /* Every state but the two published ones was destroyed by its maker. */
        ck_assert_int_eq(atomic_load(&g_made) - atomic_load(&g_destroyed), 2);
        tk_ctx_destroy(ctx);
        ck_assert_int_eq(atomic_load(&g_made), atomic_load(&g_destroyed));
        size_t n = strlen(g_log);
        ck_assert_str_eq(g_log + n - 4, "-s-a"); /* a was published before s */
    }
}
END_TEST

/* ---- Failures --------------------------------------------------------------- */
static void *make_none(tk_ctx *ctx) { return NULL; }
static const tk_ctx_slot_def def_none = {"none", make_none, state_free};

START_TEST(failed_make_takes_no_slot) {
    reset();
    tk_ctx *ctx = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    ck_assert_ptr_null(tk_ctx_slot(ctx, &def_none));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "'none': out of memory"));
    ck_assert_ptr_null(tk_ctx_slot_find(ctx, &def_none));
    ck_assert_ptr_nonnull(tk_ctx_slot(ctx, &def_a));
    tk_ctx_destroy(ctx);
    ck_assert_str_eq(g_log, "+a-a");
}
END_TEST

START_TEST(full_table_is_an_error) {
    reset();
    static tk_ctx_slot_def many[TK_CTX_SLOTS + 1];
    for (int i = 0; i <= TK_CTX_SLOTS; i++) many[i] = (tk_ctx_slot_def){"many", make_c, state_free};
    tk_ctx *ctx = NULL;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    for (int i = 0; i < TK_CTX_SLOTS; i++) ck_assert_ptr_nonnull(tk_ctx_slot(ctx, &many[i]));
    ck_assert_ptr_null(tk_ctx_slot(ctx, &many[TK_CTX_SLOTS]));
    ck_assert_ptr_nonnull(strstr(tk_ctx_error(ctx), "slots are taken"));
    ck_assert_int_eq(atomic_load(&g_made) - atomic_load(&g_destroyed), TK_CTX_SLOTS);
    for (int i = 0; i < TK_CTX_SLOTS; i++)
        ck_assert_ptr_eq(tk_ctx_slot(ctx, &many[i]), tk_ctx_slot_find(ctx, &many[i]));
    tk_ctx_destroy(ctx);
    ck_assert_int_eq(atomic_load(&g_made), atomic_load(&g_destroyed));
}
END_TEST

int main(void) {
    Suite *s = suite_create("ctx_slots");
    TCase *tc = tcase_create("slots");
    tcase_add_test(tc, same_state_on_every_call);
    tcase_add_test(tc, destroyed_in_reverse_order_of_creation);
    tcase_add_test(tc, threads_race_to_make_one_state);
    tcase_add_test(tc, failed_make_takes_no_slot);
    tcase_add_test(tc, full_table_is_an_error);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
