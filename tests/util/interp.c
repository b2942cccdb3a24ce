#include "util/interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t seed;

void interp_seed_init(const char *prog) {
    const char *env = getenv("TK_TEST_SEED");
    seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("%s: seed %llu (rerun with TK_TEST_SEED=%llu)\n", prog, (unsigned long long)seed,
           (unsigned long long)seed);
    fflush(stdout);
}

int interp_run(const char *prog, const char *suite, const interp_test *tests, size_t n) {
    interp_seed_init(prog);
    Suite *s = suite_create(suite);
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_checked_fixture(tc, ctx_setup, ctx_teardown);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, tests[i].t);
        suite_add_tcase(s, tc);
    }
    return run_suite(s);
}

rng rng_for(const char *name) {
    uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return (rng){h | 1};
}
uint64_t next_u64(rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}
float frand(rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)(next_u64(r) >> 40) / 16777216.0f;
}
int irand(rng *r, int lo, int hi) { return lo + (int)(next_u64(r) % (uint64_t)(hi - lo + 1)); }

float rnd(tk_dtype dt, float x) {
    if (dt == TK_BF16) return tk_bf16_to_f32(tk_f32_to_bf16(x));
    if (dt == TK_F16) return tk_f16_to_f32(tk_f32_to_f16(x));
    return x;
}

hbuf hb(tk_dtype dt, size_t n) {
    hbuf b = {dt, n, calloc(n ? n : 1, tk_dtype_size(dt))};
    ck_assert_ptr_nonnull(b.p);
    return b;
}
float hget(const hbuf *b, size_t i) {
    if (b->dt == TK_F32) return ((float *)b->p)[i];
    uint16_t h = ((uint16_t *)b->p)[i];
    return b->dt == TK_BF16 ? tk_bf16_to_f32(h) : tk_f16_to_f32(h);
}
void hset(hbuf *b, size_t i, float v) {
    if (b->dt == TK_F32)
        ((float *)b->p)[i] = v;
    else if (b->dt == TK_BF16)
        ((uint16_t *)b->p)[i] = tk_f32_to_bf16(v);
    else
        ((uint16_t *)b->p)[i] = tk_f32_to_f16(v);
}
void hrand(hbuf *b, rng *r, float lo, float hi) {
    for (size_t i = 0; i < b->n; i++) hset(b, i, frand(r, lo, hi));
}
void hfill(hbuf *b, float v) {
    for (size_t i = 0; i < b->n; i++) hset(b, i, v);
}
void hfree(hbuf *b) { free(b->p); }

tk_arg targ(hbuf *b, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t d[4] = {d0, d1, d2, d3};
    return tk_arg_tensor(b->p, b->dt, rank, d);
}

tk_kernel *kern(const char *name, int warps) {
    tk_kernel *k = NULL;
    ck_assert_int_eq(tk_kernel_create(ctx, name, warps, &k), TK_OK);
    tk_set_grid(k, NULL, NULL, NULL); /* one block, unless the test sets a grid */
    return k;
}
void finish(tk_kernel *k) {
    tk_status s = tk_kernel_finish(k);
    ck_assert_msg(s == TK_OK, "finish: %s", tk_kernel_error(k));
}
void run_ok(tk_kernel *k, int n, const tk_arg *a) {
    tk_status s = tk_interp_run(k, n, a);
    ck_assert_msg(s == TK_OK, "run: %s: %s", tk_status_name(s), tk_ctx_error(ctx));
}
void run_fails(tk_kernel *k, int n, const tk_arg *a, tk_status want, const char *text) {
    tk_status s = tk_interp_run(k, n, a);
    ck_assert_msg(s == want, "got %s, want %s: %s", tk_status_name(s), tk_status_name(want),
                  tk_ctx_error(ctx));
    ck_assert_msg(strstr(tk_ctx_error(ctx), text), "message '%s' lacks '%s'", tk_ctx_error(ctx),
                  text);
}

void set_race_check(bool on) {
    tk_interp_options o;
    ck_assert_int_eq(tk_interp_get_options(ctx, &o), TK_OK);
    o.race_check = on;
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
}
