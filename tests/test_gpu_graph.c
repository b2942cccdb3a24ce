/* CUDA graphs (issue 15): once prepared, tk_gemm and tk_attention_forward
 * (also a split decoding call, whose merge kernel is launched to start early:
 * a programmatic edge in the graph) can be captured into a graph, and the
 * graph replayed on new inputs gives the bits a direct call gives. Capture runs in the driver's global mode, in
 * which a synchronization, allocation or module load made by any thread
 * during the capture fails the call: the library's launch path must make
 * none. The graph calls come from the driver itself (dlopen, as the
 * library does): the public API has no stream or graph functions.
 * Skips, saying why, without a GPU. */
#include <check.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/ref.h"

/* The driver calls the test needs beyond the library's. */
typedef struct drv {
    void *dl;
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
} drv;

static bool drv_open(drv *d) {
    memset(d, 0, sizeof *d);
    if (!(d->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) return false;
    void **f[] = {(void **)&d->stream_create, (void **)&d->stream_destroy,
                  (void **)&d->stream_sync,   (void **)&d->begin,
                  (void **)&d->end,           (void **)&d->instantiate,
                  (void **)&d->launch,        (void **)&d->exec_destroy,
                  (void **)&d->graph_destroy};
    const char *names[] = {
        "cuStreamCreate",          "cuStreamDestroy_v2", "cuStreamSynchronize",
        "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
        "cuGraphLaunch",           "cuGraphExecDestroy", "cuGraphDestroy"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(*f[i] = dlsym(d->dl, names[i]))) return false;
    return true;
}

/* n random bf16 values in [-1, 1) uploaded to dst. */
static void upload_random(tk_ctx *ctx, void *dst, int64_t n) {
    uint16_t *h = malloc((size_t)n * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++) h[i] = tk_f32_to_bf16((float)ref_uniform());
    ck_assert_int_eq(tk_gpu_upload(ctx, dst, h, (size_t)n * sizeof *h), TK_OK);
    free(h);
}

/* The outputs of one round: C of the GEMM, O and L of the attention and of
 * the decoding call. */
enum { OUT_C, OUT_O, OUT_L, OUT_DO, OUT_DL, NOUT };

typedef struct problem {
    tk_gemm_params g;
    tk_attention_params a, dec;
    void *ws;           /* the decoding call's partials */
    void *in[5];        /* A, B, Q, K, V */
    int64_t in_n[5];    /* elements */
    void *out[2][NOUT]; /* [graph, direct] */
    size_t out_bytes[NOUT];
} problem;

static void *gpu_buf(tk_ctx *ctx, size_t bytes) {
    void *p = NULL;
    ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, &p), TK_OK);
    return p;
}

/* GEMM 1000 x 700 x 384 (A·B, the library's choice: the persistent wgmma
 * kernel on sm_90a for its grid, here forced by naming its shape) and
 * attention B 2, H 4, N 333, D 128, causal. */
static void problem_make(tk_ctx *ctx, problem *p, const tk_gemm_config *cfg) {
    memset(p, 0, sizeof *p);
    int64_t m = 1000, n = 700, k = 384, B = 2, H = 4, N = 333, D = 128;
    int64_t qn = B * H * N * D;
    int64_t ins[5] = {m * k, k * n, qn, qn, qn};
    for (int i = 0; i < 5; i++) {
        p->in_n[i] = ins[i];
        p->in[i] = gpu_buf(ctx, (size_t)ins[i] * 2);
    }
    size_t outs[NOUT] = {(size_t)(m * n * 2), (size_t)qn * 2, (size_t)(B * H * N * 4),
                         (size_t)(32 * D * 2), 32 * 4};
    for (int r = 0; r < 2; r++)
        for (int o = 0; o < NOUT; o++) {
            p->out_bytes[o] = outs[o];
            p->out[r][o] = gpu_buf(ctx, outs[o]);
        }
    p->g = (tk_gemm_params)TK_GEMM_PARAMS_INIT;
    p->g.in_dtype = p->g.out_dtype = TK_BF16;
    p->g.m = m, p->g.n = n, p->g.k = k;
    p->g.a = p->in[0], p->g.b = p->in[1];
    p->g.config = cfg;
    p->a = (tk_attention_params){.struct_size = sizeof(tk_attention_params),
                                 .dtype = TK_BF16,
                                 .head_dim = (int)D,
                                 .batch = B,
                                 .heads_q = H,
                                 .heads_kv = H,
                                 .seq_q = N,
                                 .seq_kv = N,
                                 .causal = 1,
                                 .q = p->in[2],
                                 .k = p->in[3],
                                 .v = p->in[4]};
    /* decoding: one query of 32 heads against the same K and V seen as 8 kv
     * heads of 333 keys, in 4 key ranges (split kernel, then the merge) */
    p->dec = p->a;
    p->dec.batch = 1, p->dec.heads_q = 32, p->dec.heads_kv = 8, p->dec.seq_q = 1;
    p->dec.causal = 0, p->dec.num_splits = 4;
    p->dec.o = p->out[0][OUT_DO], p->dec.lse = p->out[0][OUT_DL];
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &p->dec, &p->dec.workspace_bytes), TK_OK);
    p->ws = p->dec.workspace = gpu_buf(ctx, p->dec.workspace_bytes);
}

static void problem_free(tk_ctx *ctx, problem *p) {
    for (int i = 0; i < 5; i++) tk_gpu_free(ctx, p->in[i]);
    tk_gpu_free(ctx, p->ws);
    for (int r = 0; r < 2; r++)
        for (int o = 0; o < NOUT; o++) tk_gpu_free(ctx, p->out[r][o]);
}

/* Points the calls at round r's outputs, poisoned (0xFF bytes: NaN). */
static void aim(tk_ctx *ctx, problem *p, int r) {
    for (int o = 0; o < NOUT; o++)
        ck_assert_int_eq(tk_gpu_memset(ctx, p->out[r][o], 0xFF, p->out_bytes[o]), TK_OK);
    p->g.c = p->out[r][OUT_C];
    p->a.o = p->out[r][OUT_O];
    p->a.lse = p->out[r][OUT_L];
    p->dec.o = p->out[r][OUT_DO];
    p->dec.lse = p->out[r][OUT_DL];
}

/* Elements of `size` bytes still all 0xFF (the poison). */
static size_t poisoned(const unsigned char *h, size_t bytes, size_t size) {
    size_t n = 0;
    for (size_t i = 0; i + size <= bytes; i += size) {
        size_t j = 0;
        while (j < size && h[i + j] == 0xFF) j++;
        n += j == size;
    }
    return n;
}

static tk_status calls(tk_ctx *ctx, problem *p, CUstream s) {
    tk_status st = tk_gemm(ctx, &p->g, s);
    if (!st) st = tk_attention_forward(ctx, &p->a, s);
    return st ? st : tk_attention_forward(ctx, &p->dec, s);
}

START_TEST(graph_replays_on_new_inputs) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    drv d;
    if (tk_gpu_init(ctx) != TK_OK || !drv_open(&d)) {
        printf("GPU graph test skipped: %s\n",
               tk_ctx_error(ctx)[0] ? tk_ctx_error(ctx) : "no driver graph calls");
        tk_ctx_destroy(ctx);
        return;
    }
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    tk_gemm_config cfg = tk_gemm_config_for(TK_BF16, TK_BF16, 0, 4096, 4096, arch);
    problem p;
    problem_make(ctx, &p, &cfg);
    printf("graph: GEMM %s, attention %s\n", cfg.wgmma ? "wgmma (persistent)" : "mma.sync", arch);
    CUstream s;
    ck_assert_int_eq(d.stream_create(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    aim(ctx, &p, 0);
    /* prepare: compile and load outside the capture */
    ck_assert_msg(tk_gemm_prepare(ctx, &p.g, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_attention_prepare(ctx, &p.a, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    ck_assert_msg(tk_attention_prepare(ctx, &p.dec, NULL) == TK_OK, "%s", tk_ctx_error(ctx));
    for (int i = 0; i < 5; i++) upload_random(ctx, p.in[i], p.in_n[i]);
    CUgraph graph;
    ck_assert_int_eq(d.begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    tk_status st = calls(ctx, &p, s);
    ck_assert_int_eq(d.end(s, &graph), CUDA_SUCCESS);
    ck_assert_msg(st == TK_OK, "a call failed under capture: %s", tk_ctx_error(ctx));
    CUgraphExec exec;
    ck_assert_int_eq(d.instantiate(&exec, graph, 0), CUDA_SUCCESS);

    for (int round = 0; round < 2; round++) { /* new inputs each replay */
        for (int i = 0; i < 5; i++) upload_random(ctx, p.in[i], p.in_n[i]);
        aim(ctx, &p, 0);
        ck_assert_int_eq(d.launch(exec, s), CUDA_SUCCESS);
        ck_assert_int_eq(d.stream_sync(s), CUDA_SUCCESS);
        aim(ctx, &p, 1); /* the same inputs, called directly */
        ck_assert_int_eq(calls(ctx, &p, s), TK_OK);
        ck_assert_int_eq(d.stream_sync(s), CUDA_SUCCESS);
        for (int o = 0; o < NOUT; o++) {
            unsigned char *h[2];
            for (int r = 0; r < 2; r++) {
                h[r] = malloc(p.out_bytes[o]);
                ck_assert_int_eq(tk_gpu_download(ctx, h[r], p.out[r][o], p.out_bytes[o]), TK_OK);
            }
            ck_assert_msg(memcmp(h[0], h[1], p.out_bytes[o]) == 0,
                          "round %d: output %d of the graph differs from the direct call", round,
                          o);
            bool f32 = o == OUT_L || o == OUT_DL;
            ck_assert_msg(poisoned(h[0], p.out_bytes[o], f32 ? 4 : 2) == 0,
                          "round %d: output %d has elements nobody wrote", round, o);
            free(h[0]);
            free(h[1]);
        }
        printf("graph round %d: C, O and L, decoding O and L bit-identical to direct calls\n",
               round);
    }
    d.exec_destroy(exec);
    d.graph_destroy(graph);
    d.stream_destroy(s);
    problem_free(ctx, &p);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    Suite *su = suite_create("gpu_graph");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, graph_replays_on_new_inputs);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
