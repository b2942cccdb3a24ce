/* The bias gradient (tk_bias_grad_build, kernels/bias_grad.c; tk_bias_grad,
 * kernels/bias_grad_run.c): the config and parameter checks by their
 * messages; on the interpreter backend, the entry point against float64 at
 * ragged sizes (rows and columns off the tiles and the 256-row chunks;
 * bf16, f16, f32; a row pitch; accumulate on and off; guard elements past
 * dbias that must stay), bit-identical under shuffled warp orders; on the
 * GPU (skipped, with a line, without one), GPT-2's linear layers' sizes. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"
#include "util/devbuf.h"
#include "util/expect.h"
#include "util/harness.h"
#include "util/ref.h"
#include "util/run.h"

#define GUARD 40 /* floats past dbias: never written */

START_TEST(bad_configs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    tk_kernel *k = (tk_kernel *)1;
    static const struct {
        tk_bias_grad_config c;
        const char *msg;
    } bad[] = {
        {{.part = 2}, "part is 2"},
        {{.part = TK_BIAS_GRAD_PARTIAL, .dtype = TK_I32}, "dtype is i32"},
        {{.part = TK_BIAS_GRAD_REDUCE, .warps = 5}, "warps is 5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TU_EXPECT_BUILD_FAILS(tk_bias_grad_build, ctx, &bad[i].c, TK_ERR_INVALID_ARG, bad[i].msg);
    tk_bias_grad_config ok = {.part = TK_BIAS_GRAD_REDUCE}; /* the reduction takes no dtype */
    ck_assert_int_eq(tk_bias_grad_build(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_bias_grad_build(NULL, &ok, &k), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_bias_grad_build(ctx, &ok, &k), TK_OK);
    tk_kernel_destroy(k);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_params) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    _Alignas(16) static float buf[64];
    char *b = (char *)buf;
    tk_bias_grad_params ok = TK_BIAS_GRAD_PARAMS_INIT;
    ok.dtype = TK_BF16, ok.rows = 300, ok.cols = 10, ok.dy = buf, ok.dbias = buf;
    ok.workspace = buf;
    size_t need = 0;
    ck_assert_int_eq(tk_bias_grad_workspace(ctx, &ok, &need), TK_OK);
    ck_assert_uint_eq(need, 2 * 10 * 4); /* two chunks of 256 rows, a partial row each */
    ok.workspace_bytes = need;
    static const char *msg[] = {
        "dtype is i32",       "rows is 0",
        "rows is 2147483648", "cols is 0",
        "cols is 16777217",   "dy_stride is 9",
        "dy_stride is -1",    "accumulate is -1",
        "dy is NULL",         "dy is not 2-byte aligned",
        "dbias is NULL",      "dbias is not 4-byte aligned",
        "workspace is NULL",  "workspace_bytes is 79; 300 rows x 10 cols need 80",
        "struct_size is 0"};
    for (int i = 0; i < (int)(sizeof msg / sizeof msg[0]); i++) {
        tk_bias_grad_params p = ok;
        switch (i) {
        case 0: p.dtype = TK_I32; break;
        case 1: p.rows = 0; break;
        case 2: p.rows = (int64_t)1 << 31; break;
        case 3: p.cols = 0; break;
        case 4: p.cols = (1 << 24) + 1; break;
        case 5: p.dy_stride = 9; break;
        case 6: p.dy_stride = -1; break;
        case 7: p.accumulate = -1; break;
        case 8: p.dy = NULL; break;
        case 9: p.dy = b + 1; break;
        case 10: p.dbias = NULL; break;
        case 11: p.dbias = (float *)(b + 2); break;
        case 12: p.workspace = NULL; break;
        case 13: p.workspace_bytes = need - 1; break;
        case 14: p.struct_size = 0; break;
        }
        tu_expect_status(ctx, tk_bias_grad(ctx, &p, NULL), TK_ERR_INVALID_ARG, msg[i]);
    }
    ck_assert_int_eq(tk_bias_grad(ctx, NULL, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_bias_grad(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_bias_grad_workspace(ctx, &ok, NULL), TK_ERR_INVALID_ARG);
    ck_assert_int_eq(tk_bias_grad_prepare(NULL, &ok, NULL), TK_ERR_INVALID_ARG);
    tk_ctx_destroy(ctx);
}
END_TEST

/* ---- one problem --------------------------------------------------------- */
typedef struct bcase {
    tk_dtype dt;
    int64_t M, N, pad;
    int acc;
} bcase;

typedef struct bprob {
    bcase c;
    ref_tensor dy, db; /* db: N + GUARD floats */
    void *db0;
} bprob;

static void prob_make(bprob *p, const bcase *c) {
    p->c = *c;
    int64_t d[2] = {c->M, c->N}, n = c->N + GUARD;
    p->dy = ref_tensor_new_layout(c->dt, 2, d, NULL, c->pad);
    ref_tensor_random(&p->dy, -1.0, 1.0);
    p->db = ref_tensor_new(TK_F32, 1, &n);
    ref_tensor_fill_all(&p->db, NAN);
    if (c->acc) ref_tensor_random(&p->db, -1.0, 1.0);
    p->db0 = ref_tensor_snapshot(&p->db);
}

static void prob_free(bprob *p) {
    ref_tensor_free(&p->dy), ref_tensor_free(&p->db);
    free(p->db0);
}

/* Runs the call on ctx's device buffers from db's first state. */
static void run(tk_ctx *ctx, bprob *p) {
    const bcase *c = &p->c;
    void *dy = tu_dev_in(ctx, &p->dy), *db = tu_dev_in(ctx, &p->db);
    ck_assert_int_eq(tk_gpu_upload(ctx, db, p->db0, tu_bytes_of(&p->db)), TK_OK);
    tk_bias_grad_params q = TK_BIAS_GRAD_PARAMS_INIT;
    q.dtype = c->dt, q.accumulate = c->acc, q.rows = c->M, q.cols = c->N, q.dy = dy;
    q.dy_stride = c->N + c->pad, q.dbias = db;
    ck_assert_int_eq(tk_bias_grad_workspace(ctx, &q, &q.workspace_bytes), TK_OK);
    q.workspace = tu_dev_bytes(ctx, q.workspace_bytes);
    ck_assert_msg(tk_bias_grad(ctx, &q, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    tu_dev_take(ctx, &p->db, db);
    ck_assert_int_eq(tk_gpu_free(ctx, dy), TK_OK);
    ck_assert_int_eq(tk_gpu_free(ctx, q.workspace), TK_OK);
}

static void check(const bprob *p, const char *where) {
    const bcase *c = &p->c;
    const float *old = p->db0, *got = p->db.data;
    double num = 0, den = 0;
    for (int64_t n = 0; n < c->N; n++) {
        double want = c->acc ? old[n] : 0.0;
        for (int64_t m = 0; m < c->M; m++) want += ref_tensor_get(&p->dy, m * c->N + n);
        double e = isfinite(got[n]) ? got[n] - want : INFINITY;
        num += e * e, den += want * want;
    }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    printf("bias_grad %s %s M%lld N%lld pad%lld%s: rel err %.2e\n", where, tk_dtype_name(c->dt),
           (long long)c->M, (long long)c->N, (long long)c->pad, c->acc ? " acc" : "", err);
    ck_assert_msg(err <= 1e-5, "rel err %g", err);
    ck_assert_msg(!memcmp(old + c->N, got + c->N, GUARD * sizeof(float)), "guard written");
}

/* dt, M, N, pad, acc */
static const bcase cases[] = {
    {TK_BF16, 1, 1, 0, 0},   {TK_BF16, 1000, 100, 0, 1}, {TK_F16, 257, 2304, 0, 0},
    {TK_F32, 513, 64, 3, 0}, {TK_BF16, 4096, 768, 0, 1}, {TK_F16, 31, 300, 5, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

START_TEST(interp_against_f64) {
    tk_ctx *ctx = tu_interp_ctx(NULL, 0);
    tk_interp_options o = {.race_check = 1};
    ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
    bprob p;
    prob_make(&p, &cases[_i]);
    run(ctx, &p);
    check(&p, "interp");
    prob_free(&p);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The same bits under warp orders drawn from four seeds. */
START_TEST(deterministic) {
    const bcase c = {TK_BF16, 1500, 300, 0, 1};
    bprob p;
    prob_make(&p, &c);
    void *first = NULL;
    for (uint64_t seed = 0; seed < 4; seed++) {
        tk_ctx *ctx = tu_interp_ctx(NULL, 0);
        tk_interp_options o = {.race_check = 1, .shuffle_seed = seed};
        ck_assert_int_eq(tk_interp_set_options(ctx, &o), TK_OK);
        run(ctx, &p);
        if (!seed) first = ref_tensor_snapshot(&p.db);
        ck_assert_msg(!memcmp(first, p.db.data, tu_bytes_of(&p.db)), "seed %llu: other bits",
                      (unsigned long long)seed);
        tk_ctx_destroy(ctx);
    }
    printf("bias_grad interp deterministic: 4 warp orders, the same bits\n");
    free(first);
    prob_free(&p);
}
END_TEST

/* GPT-2 124M's linear layers at B·T = 16 x 1024: attn c_proj and mlp
 * c_proj (768), c_attn (2304), c_fc (3072); ragged; 64 x 1024 rows. */
static const bcase gpu_cases[] = {
    {TK_BF16, 16384, 768, 0, 1},  {TK_BF16, 16384, 2304, 0, 0}, {TK_BF16, 16384, 3072, 0, 1},
    {TK_F16, 16384, 3072, 0, 0},  {TK_F32, 1000, 1001, 7, 1},   {TK_BF16, 65536, 768, 0, 1},
    {TK_BF16, 12345, 2304, 8, 0},
};
#define NGPU (int)(sizeof gpu_cases / sizeof gpu_cases[0])

START_TEST(gpu_against_f64) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    if (th_gpu_or_skip(ctx) == TK_OK) {
        bprob p;
        prob_make(&p, &gpu_cases[_i]);
        run(ctx, &p);
        check(&p, "gpu");
        void *first = ref_tensor_snapshot(&p.db);
        run(ctx, &p); /* again: the same bits */
        ck_assert_msg(!memcmp(first, p.db.data, tu_bytes_of(&p.db)), "other bits");
        free(first);
        prob_free(&p);
    }
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bias_grad");
    TCase *tc = tu_tcase(s, "api", 0);
    tcase_add_test(tc, bad_configs);
    tcase_add_test(tc, bad_params);
    tc = tu_tcase(s, "interp", 600);
    tcase_add_loop_test(tc, interp_against_f64, 0, NCASES);
    tcase_add_test(tc, deterministic);
    tc = tu_tcase(s, "gpu", 600);
    tcase_add_loop_test(tc, gpu_against_f64, 0, NGPU);
    return run_suite(s);
}
