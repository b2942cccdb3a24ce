/* A toy decode loop over a paged KV cache.
 *
 * Three sequences with prompts of different lengths (one empty) share a
 * pool of 16-token pages, handed out in a shuffled order as a serving
 * engine's allocator would. Every step, each sequence brings one new
 * token: its query and its K/V row. One call of tk_attention_forward
 * appends the rows to the cache (k_new / v_new at seqlens_kv[b]) and
 * attends all of the sequence's keys; the host then counts the token in
 * (seqlens_kv[b] += 1) and gives a sequence a new page when it needs one.
 * The last step's outputs are checked against float64 softmax attention
 * over each sequence's whole history.
 *
 * With a GPU this is the library's call (split-KV when it pays). Without
 * one, the same kernels (tk_attention_decode_build: the append, then the
 * direct attention) run on the CPU interpreter, which shows the
 * parameters each kernel takes.
 *
 *   ./decode_paged */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk/tk.h"
#include "tk/tk_jit.h"
#include "tk/tk_kernels.h"
#include "tk/tk_run.h"

enum { B = 3, HQ = 8, HKV = 2, D = 64, PAGE = 16, MAX_PAGES = 8, NUM_PAGES = 32, STEPS = 20 };
#define ROW (HKV * D) /* one token's K (or V) in the pool: [page, token, head, D] */

typedef struct cache {
    uint16_t k[NUM_PAGES * PAGE * ROW], v[NUM_PAGES * PAGE * ROW];
    int32_t table[B * MAX_PAGES], lens[B];
    int32_t free_pages[NUM_PAGES], nfree;
    /* the host's copy of every token, for the reference: [B][t][HKV][D] */
    float hk[B][MAX_PAGES * PAGE][HKV][D], hv[B][MAX_PAGES * PAGE][HKV][D];
} cache;

typedef struct step {
    uint16_t q[B * HQ * D], kn[B * HKV * D], vn[B * HKV * D], o[B * HQ * D];
    float lse[B * HQ];
} step;

static float frand(void) { return 2.0f * (float)rand() / (float)RAND_MAX - 1.0f; }

static uint16_t bf(float x, float *rounded) {
    uint16_t h = tk_f32_to_bf16(x);
    if (rounded) *rounded = tk_bf16_to_f32(h);
    return h;
}

/* A page for token t of sequence b if it starts one. */
static int ensure_page(cache *c, int b, int t) {
    if (t % PAGE) return 0;
    if (!c->nfree || t / PAGE >= MAX_PAGES) return -1;
    c->table[b * MAX_PAGES + t / PAGE] = c->free_pages[--c->nfree];
    return 0;
}

static void init_cache(cache *c, const int *prompt) {
    memset(c, 0, sizeof *c);
    memset(c->k, 0xff, sizeof c->k); /* NaN: stale slots must never be read */
    memset(c->v, 0xff, sizeof c->v);
    for (int i = 0; i < NUM_PAGES; i++) c->free_pages[i] = i;
    for (int i = NUM_PAGES - 1; i > 0; i--) { /* a shuffled free list */
        int j = rand() % (i + 1), x = c->free_pages[i];
        c->free_pages[i] = c->free_pages[j], c->free_pages[j] = x;
    }
    c->nfree = NUM_PAGES;
    for (int i = 0; i < B * MAX_PAGES; i++) c->table[i] = -1;
    for (int b = 0; b < B; b++) { /* the prompts, written by the host (a prefill would) */
        for (int t = 0; t < prompt[b]; t++) {
            if (ensure_page(c, b, t)) exit(1);
            int32_t page = c->table[b * MAX_PAGES + t / PAGE];
            size_t at = ((size_t)page * PAGE + (size_t)(t % PAGE)) * ROW;
            for (int h = 0; h < HKV; h++)
                for (int d = 0; d < D; d++) {
                    c->k[at + (size_t)h * D + d] = bf(frand(), &c->hk[b][t][h][d]);
                    c->v[at + (size_t)h * D + d] = bf(frand(), &c->hv[b][t][h][d]);
                }
        }
        c->lens[b] = prompt[b];
    }
}

/* This step's query and new K/V row per sequence (kept for the reference). */
static int new_token(cache *c, step *s) {
    for (int b = 0; b < B; b++) {
        int t = c->lens[b];
        if (ensure_page(c, b, t)) return -1;
        for (int i = 0; i < HQ * D; i++) s->q[b * HQ * D + i] = bf(frand(), NULL);
        for (int h = 0; h < HKV; h++)
            for (int d = 0; d < D; d++) {
                s->kn[(b * HKV + h) * D + d] = bf(frand(), &c->hk[b][t][h][d]);
                s->vn[(b * HKV + h) * D + d] = bf(frand(), &c->hv[b][t][h][d]);
            }
    }
    memset(s->o, 0xff, sizeof s->o);
    memset(s->lse, 0xff, sizeof s->lse);
    return 0;
}

/* ‖O − ref‖/‖ref‖ over the step's outputs, each sequence's lens[b] + 1 keys. */
static double check(const cache *c, const step *s) {
    double num = 0, den = 0, scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++) {
            int hk = h / (HQ / HKV), n = c->lens[b] + 1;
            double w[MAX_PAGES * PAGE], m = -INFINITY, l = 0;
            for (int t = 0; t < n; t++) {
                double dot = 0;
                for (int d = 0; d < D; d++)
                    dot += tk_bf16_to_f32(s->q[(b * HQ + h) * D + d]) * c->hk[b][t][hk][d];
                w[t] = dot * scale;
                m = w[t] > m ? w[t] : m;
            }
            for (int t = 0; t < n; t++) l += (w[t] = exp(w[t] - m));
            for (int d = 0; d < D; d++) {
                double ref = 0;
                for (int t = 0; t < n; t++) ref += w[t] * c->hv[b][t][hk][d] / l;
                double e = tk_bf16_to_f32(s->o[(b * HQ + h) * D + d]) - ref;
                num += e * e, den += ref * ref;
            }
        }
    return sqrt(num / den); /* NaN anywhere: NaN, which fails the check */
}

static tk_attention_params call_params(void *dq, void *dk, void *dv, void *dout, void *dlse,
                                       void *dlens, void *dtable, void *dkn, void *dvn) {
    tk_attention_params p = TK_ATTENTION_PARAMS_INIT;
    p.dtype = TK_BF16, p.head_dim = D;
    p.batch = B, p.heads_q = HQ, p.heads_kv = HKV, p.seq_q = 1;
    p.seq_kv = MAX_PAGES * PAGE; /* the longest a sequence may be: it sizes the splits */
    p.q = dq, p.k = dk, p.v = dv, p.o = dout, p.lse = dlse;
    p.seqlens_kv = dlens, p.block_table = dtable;
    p.max_pages = MAX_PAGES, p.num_pages = NUM_PAGES, p.page_size = PAGE;
    p.k_new = dkn, p.v_new = dvn; /* appended at lens[b], then attended */
    return p;
}

/* ---- the library's call on the GPU ---------------------------------------- */
static int run_gpu(tk_ctx *ctx, cache *c, step *s) {
    void *d[9] = {0};
    const size_t bytes[9] = {sizeof s->q,     sizeof c->k,   sizeof c->v,
                             sizeof s->o,     sizeof s->lse, sizeof c->lens,
                             sizeof c->table, sizeof s->kn,  sizeof s->vn};
    tk_status st = TK_OK;
    for (int i = 0; i < 9 && !st; i++) st = tk_gpu_alloc(ctx, bytes[i], &d[i]);
    if (!st) st = tk_gpu_upload(ctx, d[1], c->k, sizeof c->k);
    if (!st) st = tk_gpu_upload(ctx, d[2], c->v, sizeof c->v);
    tk_attention_params p = call_params(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]);
    size_t ws_bytes = 0;
    void *ws = NULL;
    if (!st) st = tk_attention_forward_workspace(ctx, &p, &ws_bytes);
    if (!st && ws_bytes) st = tk_gpu_alloc(ctx, ws_bytes, &ws);
    p.workspace = ws, p.workspace_bytes = ws_bytes;
    double err = NAN;
    for (int i = 0; i < STEPS && !st; i++) {
        if (new_token(c, s)) {
            fprintf(stderr, "decode_paged: out of pages\n");
            st = TK_ERR_INVALID_ARG;
            break;
        }
        st = tk_gpu_upload(ctx, d[0], s->q, sizeof s->q); /* the step's inputs */
        if (!st) st = tk_gpu_upload(ctx, d[5], c->lens, sizeof c->lens);
        if (!st) st = tk_gpu_upload(ctx, d[6], c->table, sizeof c->table);
        if (!st) st = tk_gpu_upload(ctx, d[7], s->kn, sizeof s->kn);
        if (!st) st = tk_gpu_upload(ctx, d[8], s->vn, sizeof s->vn);
        if (!st) st = tk_attention_forward(ctx, &p, NULL);
        if (!st) st = tk_gpu_sync(ctx);
        if (!st && i == STEPS - 1) {
            st = tk_gpu_download(ctx, s->o, d[3], sizeof s->o);
            if (!st) err = check(c, s);
        }
        for (int b = 0; b < B; b++) c->lens[b]++;
    }
    if (st) fprintf(stderr, "decode_paged: %s: %s\n", tk_status_name(st), tk_ctx_error(ctx));
    for (int i = 0; i < 9; i++)
        if (d[i]) tk_gpu_free(ctx, d[i]);
    if (ws) tk_gpu_free(ctx, ws);
    printf("GPU: %d steps, lengths now %d, %d, %d; last step rel err %.2e\n", STEPS, c->lens[0],
           c->lens[1], c->lens[2], err);
    return !st && err <= 1e-2;
}

/* ---- the same kernels on the CPU interpreter ------------------------------ */
/* The append kernel, then the direct attention (no split), with the
 * parameters tk_kernels.h lists for TK_ATTN_CACHE_PAGED. */
static int run_interpreter(tk_ctx *ctx, cache *c, step *s) {
    tk_attention_decode_config cfg = {.dtype = TK_BF16,
                                      .head_dim = D,
                                      .pack = TK_ATTN_PACK_QUERIES,
                                      .cache = TK_ATTN_CACHE_PAGED,
                                      .chunk = 16};
    tk_kernel *append = NULL, *attend = NULL;
    cfg.part = TK_ATTN_DECODE_APPEND;
    tk_status st = tk_attention_decode_build(ctx, &cfg, &append);
    cfg.part = TK_ATTN_DECODE_DIRECT;
    if (!st) st = tk_attention_decode_build(ctx, &cfg, &attend);
    int64_t pool[4] = {NUM_PAGES, HKV, PAGE, D}, pool_st[4] = {PAGE * ROW, D, ROW, 1};
    int64_t qd[4] = {B, HQ, 1, D}, nd[4] = {B, HKV, 1, D}, bd[1] = {B}, td[2] = {B, MAX_PAGES};
    int64_t ld[4] = {B, HKV, HQ / HKV, 1}, ls[4] = {HQ, HQ / HKV, 1, 1}; /* L [B, Hkv, G, Nq] */
    tk_arg K = tk_arg_strided(c->k, TK_BF16, 4, pool, pool_st);
    tk_arg V = tk_arg_strided(c->v, TK_BF16, 4, pool, pool_st);
    tk_arg lens = tk_arg_tensor(c->lens, TK_I32, 1, bd),
           table = tk_arg_tensor(c->table, TK_I32, 2, td);
    double err = NAN;
    for (int i = 0; i < STEPS && !st; i++) {
        if (new_token(c, s)) {
            st = TK_ERR_INVALID_ARG;
            break;
        }
        tk_arg a[6] = {tk_arg_tensor(s->kn, TK_BF16, 4, nd),
                       tk_arg_tensor(s->vn, TK_BF16, 4, nd),
                       K,
                       V,
                       lens,
                       table};
        st = tk_interp_run(append, 6, a);
        tk_arg b[9] = {tk_arg_tensor(s->q, TK_BF16, 4, qd),
                       K,
                       V,
                       tk_arg_tensor(s->o, TK_BF16, 4, qd),
                       tk_arg_strided(s->lse, TK_F32, 4, ld, ls),
                       tk_arg_f32(1.0f / sqrtf((float)D)),
                       lens,
                       tk_arg_i32(1), /* rows appended: attend lens[b] + 1 keys */
                       table};
        if (!st) st = tk_interp_run(attend, 9, b);
        if (!st && i == STEPS - 1) err = check(c, s);
        for (int b2 = 0; b2 < B; b2++) c->lens[b2]++;
    }
    if (st) fprintf(stderr, "decode_paged: %s: %s\n", tk_status_name(st), tk_ctx_error(ctx));
    tk_kernel_destroy(append);
    tk_kernel_destroy(attend);
    printf("interpreter: %d steps, lengths now %d, %d, %d; last step rel err %.2e\n", STEPS,
           c->lens[0], c->lens[1], c->lens[2], err);
    return !st && err <= 1e-2;
}

int main(void) {
    srand(7);
    static cache c;
    static step s;
    const int prompt[B] = {5, 40, 0};
    init_cache(&c, prompt);
    tk_ctx *ctx;
    if (tk_ctx_create(&ctx)) return 1;
    int ok;
    if (tk_gpu_init(ctx) == TK_OK) {
        ok = run_gpu(ctx, &c, &s);
    } else {
        printf("no GPU (%s): running on the CPU interpreter\n", tk_ctx_error(ctx));
        ok = run_interpreter(ctx, &c, &s);
    }
    tk_ctx_destroy(ctx);
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
