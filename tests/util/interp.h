/* Helpers for the interpreter tests (test_interp*.c): a fixture with a
 * fresh context `ctx` per test, per-test random streams from one printed
 * seed, host buffers in f32/bf16/f16, and kernel build/run shorthands.
 * Kernels are built through the public builder API only. */
#ifndef TK_TEST_INTERP_H
#define TK_TEST_INTERP_H

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk/tk.h"
#include "util/fixture.h"

/* ---- fixture, randomness, host buffers ---------------------------------- */
extern uint64_t seed;
/* Sets `seed` from $TK_TEST_SEED or else the clock and prints it as
 * "<prog>: seed N (rerun with TK_TEST_SEED=N)". */
void interp_seed_init(const char *prog);

typedef struct rng {
    uint64_t s;
} rng;

/* A generator per test, so one test's draws do not shift another's. */
rng rng_for(const char *name);
uint64_t next_u64(rng *r);
float frand(rng *r, float lo, float hi);
int irand(rng *r, int lo, int hi);
float rnd(tk_dtype dt, float x); /* x rounded to dt */

typedef struct hbuf {
    tk_dtype dt;
    size_t n;
    void *p;
} hbuf;

hbuf hb(tk_dtype dt, size_t n); /* zero-filled */
float hget(const hbuf *b, size_t i);
void hset(hbuf *b, size_t i, float v);
void hrand(hbuf *b, rng *r, float lo, float hi);
void hfill(hbuf *b, float v);
void hfree(hbuf *b);

/* A dense tensor argument over a host buffer. */
tk_arg targ(hbuf *b, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

static inline bool same(float a, float b) { return a == b || (isnan(a) && isnan(b)); }
#define EXPECT_F(what, i, got, want)                                                               \
    ck_assert_msg(same((got), (want)), "%s[%zu]: got %.9g, want %.9g (seed %llu)", (what),         \
                  (size_t)(i), (double)(got), (double)(want), (unsigned long long)seed)

/* One test per TCase named `name` (ctx fixture, 600 s timeout). */
typedef struct interp_test {
    const char *name;
    const TTest *t;
} interp_test;
/* interp_seed_init(prog), then runs suite `suite` of the n tests: the
 * exit status for main (run_suite). */
int interp_run(const char *prog, const char *suite, const interp_test *tests, size_t n);

/* ---- kernel helpers ------------------------------------------------------ */
tk_kernel *kern(const char *name, int warps);
void finish(tk_kernel *k);
void run_ok(tk_kernel *k, int n, const tk_arg *a);
/* Turns the race checker of the test's context on or off (it starts on). */
void set_race_check(bool on);
/* Runs expecting failure `want` whose message contains `text`. */
void run_fails(tk_kernel *k, int n, const tk_arg *a, tk_status want, const char *text);

static inline tk_value *c32(tk_kernel *k, int v) { return tk_const_i32(k, v); }
static inline tk_type wtile(tk_dtype dt, int r, int c) {
    return tk_tile_type(dt, r, c, TK_WARP, TK_ROW);
}
static inline tk_type rvec(tk_dtype dt, int n) {
    return tk_vec_type(dt, n, TK_PER_ROW, TK_WARP, TK_ROW);
}
static inline tk_type cvec(tk_dtype dt, int n) {
    return tk_vec_type(dt, n, TK_PER_COL, TK_WARP, TK_ROW);
}
static inline tk_value *ld2(tk_kernel *k, tk_type t, tk_value *v, tk_value *a, tk_value *b,
                            float fill) {
    tk_value *idx[2] = {a, b};
    return tk_load(k, t, v, idx, fill);
}
static inline void st2(tk_kernel *k, tk_value *v, tk_value *a, tk_value *b, tk_value *val) {
    tk_value *idx[2] = {a, b};
    tk_store(k, v, idx, val);
}

#endif
