/* The library's driver path, run on the null driver (tests/nullcuda): no
 * GPU, but every device query, compile, module load, tensor-map encoding
 * and launch goes through libcuda's interface as on a real one.
 *   - What the ready-made entry points hand the driver is valid by the
 *     driver API's documented rules (the null driver refuses the rest), at
 *     ragged sizes and at the grid's limits.
 *   - A prepared call makes one cuCtxSetCurrent and one launch per kernel
 *     and no other driver call: no allocation, copy, synchronization,
 *     compile or tensor-map encoding. That is what CUDA graph capture and
 *     the launch-cost targets need, and a regression would be silent on a
 *     GPU (it still computes the right thing).
 *   - Tensor maps are encoded again only when a pointer changes.
 *   - Every launch passes each parameter the kernel's PTX declares, at its
 *     declared size (the null driver reads them; the sanitizer builds catch
 *     a short one).
 * ctest puts build/null-cuda first on LD_LIBRARY_PATH and hides ptxas, so
 * every module goes through cuLink as PTX; run any other way (a real
 * driver, or none) the test skips with a line. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_run.h"
#include "util/params.h"
#include "util/run.h"
#include "util/tmpdir.h"

static char g_root[256];
static long (*calls_of)(const char *name);
static long (*rejected)(char *why, size_t n);
static long (*params_checked)(void);

/* The driver functions a prepared call may not make. */
static const char *const g_forbidden[] = {
    "cuMemAlloc",
    "cuMemFree",
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
    "cuMemsetD8",
    "cuCtxSynchronize",
    "cuLinkCreate",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuFuncSetAttribute",
    "cuTensorMapEncodeTiled",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuOccupancyMaxActiveClusters",
};
enum { NFORBID = sizeof g_forbidden / sizeof g_forbidden[0] };

typedef struct {
    long set_current, launches, checked, forbidden[NFORBID];
} snap;

static snap take(void) {
    snap s = {0};
    s.set_current = calls_of("cuCtxSetCurrent");
    s.launches = calls_of("cuLaunchKernel") + calls_of("cuLaunchKernelEx");
    s.checked = params_checked();
    for (int i = 0; i < NFORBID; i++) s.forbidden[i] = calls_of(g_forbidden[i]);
    return s;
}

static void no_rejections(const char *what) {
    char why[256];
    long r = rejected(why, sizeof why);
    ck_assert_msg(r == 0, "%s: the driver refused %ld launches or tensor maps; the last: %s", what,
                  r, why);
}

typedef tk_status (*entry)(tk_ctx *ctx, const void *params);

/* Calls f once (compiles, loads, encodes maps), then R times more: each of
 * those makes `kernels` launches, as many cuCtxSetCurrent and nothing else. */
static void steady(tk_ctx *ctx, const char *what, entry f, const void *params, int kernels) {
    enum { R = 3 };
    ck_assert_msg(f(ctx, params) == TK_OK, "%s: %s", what, tk_ctx_error(ctx));
    snap a = take();
    for (int i = 0; i < R; i++)
        ck_assert_msg(f(ctx, params) == TK_OK, "%s: %s", what, tk_ctx_error(ctx));
    snap b = take();
    ck_assert_msg(b.launches - a.launches == (long)R * kernels,
                  "%s: %ld launches in %d calls, want %d each", what, b.launches - a.launches, R,
                  kernels);
    ck_assert_msg(b.set_current - a.set_current == b.launches - a.launches,
                  "%s: %ld cuCtxSetCurrent for %ld launches", what, b.set_current - a.set_current,
                  b.launches - a.launches);
    /* ctest hides ptxas (TK_PTXAS names no file): every module is PTX
     * through cuLink, whose entries declare their parameters */
    ck_assert_msg(b.checked - a.checked == b.launches - a.launches,
                  "%s: %ld of %ld launches had their parameters checked against the PTX", what,
                  b.checked - a.checked, b.launches - a.launches);
    for (int i = 0; i < NFORBID; i++)
        ck_assert_msg(b.forbidden[i] == a.forbidden[i], "%s: a prepared call made %ld %s", what,
                      (b.forbidden[i] - a.forbidden[i]) / R, g_forbidden[i]);
    no_rejections(what);
}

/* steady() for a call whose kernel count depends on its sizes: counted on
 * a call after the first, then held to. */
static void steady_any(tk_ctx *ctx, const char *what, entry f, const void *params) {
    ck_assert_msg(f(ctx, params) == TK_OK, "%s: %s", what, tk_ctx_error(ctx));
    snap a = take();
    ck_assert_msg(f(ctx, params) == TK_OK, "%s: %s", what, tk_ctx_error(ctx));
    long kernels = take().launches - a.launches;
    ck_assert_msg(kernels >= 1, "%s: no launch", what);
    steady(ctx, what, f, params, (int)kernels);
}

/* steady_any() with a workspace of `bytes` (at least 256) in the call's
 * own workspace fields, freed after. */
static void steady_ws(tk_ctx *ctx, const char *what, entry f, const void *params, void **ws,
                      size_t *ws_bytes, size_t bytes) {
    ck_assert_int_eq(tk_gpu_alloc(ctx, bytes ? bytes : 256, ws), TK_OK);
    *ws_bytes = bytes;
    steady_any(ctx, what, f, params);
    tk_gpu_free(ctx, *ws);
    *ws = NULL, *ws_bytes = 0;
}

static tk_status attn(tk_ctx *ctx, const void *p) { return tk_attention_forward(ctx, p, NULL); }
static tk_status attn_bwd(tk_ctx *ctx, const void *p) {
    return tk_attention_backward(ctx, p, NULL);
}
static tk_status gemm(tk_ctx *ctx, const void *p) { return tk_gemm(ctx, p, NULL); }
static tk_status norm(tk_ctx *ctx, const void *p) { return tk_norm_forward(ctx, p, NULL); }
static tk_status norm_bwd(tk_ctx *ctx, const void *p) { return tk_norm_backward(ctx, p, NULL); }
static tk_status rotary(tk_ctx *ctx, const void *p) { return tk_rotary(ctx, p, NULL); }
static tk_status xent(tk_ctx *ctx, const void *p) { return tk_cross_entropy(ctx, p, NULL); }
static tk_status based(tk_ctx *ctx, const void *p) { return tk_based_forward(ctx, p, NULL); }
static tk_status based_bwd(tk_ctx *ctx, const void *p) { return tk_based_backward(ctx, p, NULL); }

/* A context on the null driver with one device buffer, or NULL after
 * printing why the test skips. Kernels never run, so one buffer serves as
 * every tensor whatever its size. */
static tk_ctx *null_ctx(void **buf, size_t bytes) {
    tk_ctx *ctx;
    ck_assert_int_eq(tk_ctx_create(&ctx), TK_OK);
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *c = dl ? dlsym(dl, "tk_null_cuda_calls") : NULL,
         *r = dl ? dlsym(dl, "tk_null_cuda_rejected") : NULL,
         *pc = dl ? dlsym(dl, "tk_null_cuda_params_checked") : NULL;
    if (!c || !r || !pc || tk_gpu_init(ctx) != TK_OK) {
        printf("null-driver tests skipped: libcuda.so.1 is not tests/nullcuda's (ctest puts "
               "build/null-cuda first on LD_LIBRARY_PATH)\n");
        if (dl) dlclose(dl);
        tk_ctx_destroy(ctx);
        return NULL;
    }
    memcpy(&calls_of, &c, sizeof c);
    memcpy(&rejected, &r, sizeof r);
    memcpy(&params_checked, &pc, sizeof pc);
    dlclose(dl); /* the library holds its own reference */
    ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, buf), TK_OK);
    return ctx;
}

START_TEST(test_attention_forward) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    ck_assert_str_eq(arch, "sm_90a");
    static const struct {
        int d, causal, kernel;
        int64_t b, hq, hkv, nq, nkv;
    } cases[] = {
        {128, 0, TK_ATTN_AUTO, 2, 5, 5, 1000, 777}, /* ragged both ways */
        {128, 1, TK_ATTN_AUTO, 1, 8, 2, 777, 1000}, /* GQA, causal */
        {64, 1, TK_ATTN_AUTO, 3, 4, 4, 200, 200},
        {256, 0, TK_ATTN_AUTO, 1, 2, 1, 300, 129},
        {128, 0, TK_ATTN_MMA_SYNC, 2, 3, 3, 513, 65},
        {128, 0, TK_ATTN_AUTO, 65535, 1, 1, 16, 16}, /* the grid's y limit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_attention_params p =
            tu_attention_params(TK_BF16, cases[i].d, cases[i].hq, cases[i].hkv, cases[i].nq, buf);
        p.batch = cases[i].b, p.seq_kv = cases[i].nkv, p.causal = cases[i].causal;
        p.kernel = cases[i].kernel;
        char what[96];
        snprintf(what, sizeof what, "attention D%d B%lld N %lld/%lld case %zu", cases[i].d,
                 (long long)p.batch, (long long)p.seq_q, (long long)p.seq_kv, i);
        steady(ctx, what, attn, &p, 1);
    }
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

/* Decoding splits the keys over blocks and merges (two kernels) when a
 * workspace holds the partials. */
START_TEST(test_attention_decode) {
    void *buf, *ws;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    tk_attention_params p = tu_attention_params(TK_BF16, 128, 32, 8, 1, buf);
    p.seq_kv = 8191;
    size_t bytes = 0;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &p, &bytes), TK_OK);
    ck_assert_msg(bytes > 0, "a one-query call over 8191 keys splits");
    ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, &ws), TK_OK);
    p.workspace = ws, p.workspace_bytes = bytes;
    steady(ctx, "decode B1 Hq32/8 Nkv 8191, split", attn, &p, 2);
    p.workspace = NULL, p.workspace_bytes = 0;
    steady(ctx, "decode B1 Hq32/8 Nkv 8191, no workspace", attn, &p, 1);
    tk_gpu_free(ctx, ws);
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_attention_backward) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    for (int mode = 0; mode < 2; mode++) {
        tk_attention_bwd_params p = TK_ATTENTION_BWD_PARAMS_INIT;
        p.dtype = TK_BF16, p.head_dim = 128, p.causal = 1, p.mode = mode;
        p.batch = 2, p.heads_q = 6, p.heads_kv = 3, p.seq_q = 1000, p.seq_kv = 1000;
        p.q = p.k = p.v = p.o = p.dout = buf;
        p.lse = buf;
        p.dq = p.dk = p.dv = buf;
        size_t bytes = 0;
        ck_assert_int_eq(tk_attention_backward_workspace(ctx, &p, &bytes), TK_OK);
        steady_ws(ctx, mode ? "attention backward, fast" : "attention backward, deterministic",
                  attn_bwd, &p, &p.workspace, &p.workspace_bytes, bytes);
    }
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_gemm) {
    void *buf, *ws;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    static const int64_t shapes[][3] = {{1000, 777, 333},
                                        {4096, 4096, 4096},
                                        {128, 4096, 4096},
                                        {8192, 8192, 64},
                                        {65535 * 64, 64, 64}};
    int splits = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        tk_gemm_params p =
            tu_gemm_params(TK_BF16, TK_BF16, shapes[i][0], shapes[i][1], shapes[i][2], buf);
        char what[64];
        snprintf(what, sizeof what, "gemm %lldx%lldx%lld", (long long)p.m, (long long)p.n,
                 (long long)p.k);
        steady(ctx, what, gemm, &p, 1);
        /* with a workspace, a split over K where it pays: partials, then their sum */
        size_t bytes = 0;
        ck_assert_int_eq(tk_gemm_workspace(ctx, &p, &bytes), TK_OK);
        if (!bytes) continue;
        ck_assert_int_eq(tk_gpu_alloc(ctx, bytes, &ws), TK_OK);
        p.workspace = ws, p.workspace_bytes = bytes;
        strcat(what, ", split");
        steady(ctx, what, gemm, &p, 2);
        tk_gpu_free(ctx, ws);
        splits++;
    }
    ck_assert_msg(splits > 0, "a skinny product splits over K");
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_norm) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    tk_norm_params p = TK_NORM_PARAMS_INIT;
    p.dtype = TK_BF16, p.kind = TK_NORM_LAYER, p.eps = 1e-5f;
    p.rows = 16384, p.cols = 768;
    p.x = p.residual = p.weight = p.bias = buf;
    p.h = p.y = buf;
    p.mean = p.rstd = buf;
    steady(ctx, "layernorm 16384x768", norm, &p, 1);
    p.rows = 3, p.cols = 16383;
    steady(ctx, "layernorm 3x16383", norm, &p, 1);
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The trainer's other kernels at GPT-2 124M's shapes and ragged ones. */
START_TEST(test_training_kernels) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    static const int64_t norm_shapes[][2] = {{16384, 768}, {5, 1000}};
    for (int i = 0; i < 2; i++) {
        tk_norm_bwd_params p = TK_NORM_BWD_PARAMS_INIT;
        p.dtype = TK_BF16, p.kind = TK_NORM_LAYER;
        p.rows = norm_shapes[i][0], p.cols = norm_shapes[i][1];
        p.h = p.dy = p.dh = p.weight = buf;
        p.mean = p.rstd = buf;
        p.dx = p.dweight = p.dbias = buf;
        size_t bytes = 0;
        ck_assert_int_eq(tk_norm_backward_workspace(ctx, &p, &bytes), TK_OK);
        steady_ws(ctx, i ? "layernorm backward 5x1000" : "layernorm backward 16384x768", norm_bwd,
                  &p, &p.workspace, &p.workspace_bytes, bytes);
    }
    tk_rotary_params r = TK_ROTARY_PARAMS_INIT;
    r.dtype = TK_BF16, r.style = TK_ROTARY_NEOX, r.head_dim = 128;
    r.batch = 3, r.seq = 1001, r.heads_q = 8, r.heads_k = 2;
    r.q = r.k = r.q_out = r.k_out = buf;
    steady(ctx, "rotary NeoX q and k", rotary, &r, 2);
    tk_xent_params x = TK_XENT_PARAMS_INIT;
    x.dtype = TK_BF16, x.rows = 16384, x.vocab = 50257;
    x.logits = x.dlogits = buf;
    x.targets = buf;
    x.loss = x.loss_mean = buf;
    x.dloss_scale = 1.0f / 16384;
    size_t bytes = 0;
    ck_assert_int_eq(tk_cross_entropy_workspace(ctx, &x, &bytes), TK_OK);
    steady_ws(ctx, "cross-entropy 16384 x 50257, mean", xent, &x, &x.workspace, &x.workspace_bytes,
              bytes);
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The inference entry points (packed batches, a paged KV cache with an
 * append, forward and backward) and Based linear attention. */
START_TEST(test_inference_and_linear) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    tk_attention_params v = tu_attention_params(TK_BF16, 128, 8, 2, 3000, buf);
    v.batch = 5, v.causal = 1;
    v.cu_seqlens_q = v.cu_seqlens_kv = buf;
    v.max_seqlen_q = 1000, v.max_seqlen_kv = 1000;
    steady(ctx, "attention varlen, 5 sequences", attn, &v, 1);
    tk_attention_bwd_params vb = TK_ATTENTION_BWD_PARAMS_INIT;
    vb.dtype = TK_BF16, vb.head_dim = 128, vb.causal = 1;
    vb.batch = 5, vb.heads_q = 8, vb.heads_kv = 2, vb.seq_q = vb.seq_kv = 3000;
    vb.q = vb.k = vb.v = vb.o = vb.dout = buf;
    vb.lse = buf;
    vb.dq = vb.dk = vb.dv = buf;
    vb.cu_seqlens_q = vb.cu_seqlens_kv = buf;
    vb.max_seqlen_q = vb.max_seqlen_kv = 1000;
    size_t bytes = 0;
    ck_assert_int_eq(tk_attention_backward_workspace(ctx, &vb, &bytes), TK_OK);
    steady_ws(ctx, "attention backward varlen", attn_bwd, &vb, &vb.workspace, &vb.workspace_bytes,
              bytes);
    /* decoding from pages of 64 tokens, appending this step's row first */
    tk_attention_params d = tu_attention_params(TK_BF16, 128, 32, 8, 1, buf);
    d.batch = 4, d.seq_kv = 4000;
    d.seqlens_kv = buf, d.block_table = buf;
    d.page_size = 64, d.max_pages = 64, d.num_pages = 256;
    d.k_new = d.v_new = buf;
    ck_assert_int_eq(tk_attention_forward_workspace(ctx, &d, &bytes), TK_OK);
    steady_ws(ctx, "paged decode with an append", attn, &d, &d.workspace, &d.workspace_bytes,
              bytes);
    tk_based_params b = TK_BASED_PARAMS_INIT;
    b.dtype = TK_BF16, b.normalize = 1;
    b.batch = 2, b.heads = 3, b.seq = 1000, b.head_dim_v = 64;
    b.q = b.k = b.v = b.o = buf;
    b.z = buf;
    ck_assert_int_eq(tk_based_forward_workspace(ctx, &b, &bytes), TK_OK);
    steady_ws(ctx, "Based forward, normalized", based, &b, &b.workspace, &b.workspace_bytes, bytes);
    tk_based_bwd_params bb = TK_BASED_BWD_PARAMS_INIT;
    bb.dtype = TK_BF16, bb.normalize = 1;
    bb.batch = 2, bb.heads = 3, bb.seq = 1000, bb.head_dim_v = 64;
    bb.q = bb.k = bb.v = bb.dout = bb.o = buf;
    bb.z = buf;
    bb.dq = bb.dk = bb.dv = buf;
    ck_assert_int_eq(tk_based_backward_workspace(ctx, &bb, &bytes), TK_OK);
    steady_ws(ctx, "Based backward, normalized", based_bwd, &bb, &bb.workspace, &bb.workspace_bytes,
              bytes);
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

/* The same path on an sm_80 device (an A100's limits): mma.sync kernels,
 * no tensor maps. */
START_TEST(test_sm80) {
    setenv("TK_NULL_CUDA_CC", "80", 1);
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) {
        unsetenv("TK_NULL_CUDA_CC");
        return;
    }
    char arch[16];
    ck_assert_int_eq(tk_gpu_arch(ctx, arch, sizeof arch), TK_OK);
    ck_assert_str_eq(arch, "sm_80");
    long maps = calls_of("cuTensorMapEncodeTiled");
    tk_attention_params a = tu_attention_params(TK_BF16, 128, 8, 2, 999, buf);
    a.causal = 1;
    steady(ctx, "sm_80 attention D128 causal GQA", attn, &a, 1);
    tk_gemm_params g = tu_gemm_params(TK_BF16, TK_BF16, 4096, 4096, 4096, buf);
    steady(ctx, "sm_80 gemm 4096^3", gemm, &g, 1);
    ck_assert_int_eq(calls_of("cuTensorMapEncodeTiled"), maps);
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
    unsetenv("TK_NULL_CUDA_CC");
}
END_TEST

/* A tensor map is encoded once per pointer (and shape): launches that take
 * turns over several tensors, as a trainer's layers do, encode each once. */
START_TEST(test_maps_follow_pointers) {
    void *buf;
    tk_ctx *ctx = null_ctx(&buf, 64 << 20);
    if (!ctx) return;
    tk_attention_params p = tu_attention_params(TK_BF16, 128, 4, 4, 1024, buf);
    ck_assert_int_eq(attn(ctx, &p), TK_OK);
    long first = calls_of("cuTensorMapEncodeTiled");
    ck_assert_msg(first > 0, "the sm_90a attention reads through tensor maps");
    enum { LAYERS = 12 };
    for (int l = 1; l < LAYERS; l++) { /* a new Q each time: encoded */
        long before = calls_of("cuTensorMapEncodeTiled");
        p.q = (char *)buf + l * (2 << 20);
        ck_assert_int_eq(attn(ctx, &p), TK_OK);
        ck_assert_msg(calls_of("cuTensorMapEncodeTiled") > before, "layer %d's Q not encoded", l);
    }
    long all = calls_of("cuTensorMapEncodeTiled");
    for (int round = 0; round < 3; round++) /* the same twelve again: none */
        for (int l = 0; l < LAYERS; l++) {
            p.q = (char *)buf + l * (2 << 20);
            ck_assert_int_eq(attn(ctx, &p), TK_OK);
        }
    ck_assert_msg(calls_of("cuTensorMapEncodeTiled") == all,
                  "%ld maps encoded again for tensors seen before",
                  calls_of("cuTensorMapEncodeTiled") - all);
    p.seq_q = p.seq_kv = 1000; /* the same pointers in another shape: encoded */
    ck_assert_int_eq(attn(ctx, &p), TK_OK);
    ck_assert_int_gt(calls_of("cuTensorMapEncodeTiled"), all);
    no_rejections("attention over twelve layers' Q");
    tk_gpu_free(ctx, buf);
    tk_ctx_destroy(ctx);
}
END_TEST

int main(void) {
    if (tu_tmpdir_make(g_root, sizeof g_root, "nulldrv") != 0) return EXIT_FAILURE;
    tu_set_cache_dir(g_root);
    Suite *s = suite_create("null_driver");
    TCase *tc = tcase_create("null_driver");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_attention_forward);
    tcase_add_test(tc, test_attention_decode);
    tcase_add_test(tc, test_attention_backward);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_norm);
    tcase_add_test(tc, test_training_kernels);
    tcase_add_test(tc, test_inference_and_linear);
    tcase_add_test(tc, test_maps_follow_pointers);
    tcase_add_test(tc, test_sm80); /* last: it sets TK_NULL_CUDA_CC while it runs */
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    tu_tmpdir_remove(g_root);
    return rc;
}
