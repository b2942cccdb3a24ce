/* dp.c on a GPU machine: gpt_dp_check [max_ranks]
 *
 * Prints one PASS / FAIL / SKIP line per case and exits 0 when none failed:
 *   1. NCCL loads (its version and file), the driver's GPU count;
 *   2. a one-rank NCCL communicator in a forked rank on GPU 0 (the whole
 *      path: dlopen, the id, ncclCommInitRank on TileKittens' context, the
 *      sums, the bucket stream and events): runs on a one-GPU machine;
 *   3. with two GPUs or more: min(GPUs, max_ranks) ranks through
 *      gpt_dp_launch, one process per GPU;
 *   4. last, one rank in this process without NCCL (the trainer's one-GPU
 *      path: the sums are no-ops). Last because it starts CUDA here, after
 *      which this process can no longer fork ranks that use the GPU.
 * Each rank sums a buffer whose element i on rank r is (i % 1000) + 1000 r
 * (integers, so every sum is exact in f32), once with gpt_dp_allreduce and
 * once as three buckets with work between them, then times the sum of a
 * gradient the size of the 124m config's (86,039,040 f32). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dp.h"
#include "tk/tk.h"
#include "tk/tk_jit.h"

#define CHECK_N    ((size_t)(1u << 22) + 7) /* odd: no bucket is a round size */
#define GRAD_124M  ((size_t)86039040)       /* GPT-2 124m with 256 tokens      */
#define TIMED_REPS 5

/* What a rank is told: whether it has a real communicator. */
typedef struct rank_job {
    int with_nccl; /* 0: one rank, no NCCL, sums are no-ops */
    int own_id;    /* the rank makes the id (one rank)       */
} rank_job;

static float value(size_t i, int rank) { return (float)(i % 1000) + 1000.0f * (float)rank; }

/* The sum over `ranks` ranks of value(i, r). */
static float summed(size_t i, int ranks) {
    return (float)ranks * (float)(i % 1000) + 1000.0f * (float)(ranks * (ranks - 1) / 2);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The elements of dev [lo, hi) that are not want(i); the first printed. */
static size_t mismatches(tk_ctx *ctx, const float *dev, float *host, size_t lo, size_t hi,
                         int ranks, int zero) {
    size_t bad = 0;
    if (tk_gpu_download(ctx, host + lo, dev + lo, (hi - lo) * sizeof(float)) != TK_OK) return hi;
    for (size_t i = lo; i < hi; i++) {
        float want = zero ? 0.0f : summed(i, ranks);
        if (host[i] != want && bad++ == 0)
            printf("    element %zu is %g, expected %g\n", i, (double)host[i], (double)want);
    }
    return bad;
}

static int fill(tk_ctx *ctx, float *dev, float *host, int rank) {
    for (size_t i = 0; i < CHECK_N; i++) host[i] = value(i, rank);
    return tk_gpu_upload(ctx, dev, host, CHECK_N * sizeof(float)) != TK_OK;
}

/* The whole buffer in one sum on the default stream. */
static int check_whole(tk_ctx *ctx, gpt_dp *dp, float *dev, float *host, int rank, int ranks) {
    if (fill(ctx, dev, host, rank) || gpt_dp_allreduce(dp, dev, CHECK_N, NULL)) return 1;
    return mismatches(ctx, dev, host, 0, CHECK_N, ranks, 0) != 0;
}

/* Three buckets posted as a backward would, with work on the default
 * stream between them; after gpt_dp_finish, work that overwrites the first
 * bucket must come after its sum (it stays zero). */
static int check_buckets(tk_ctx *ctx, gpt_dp *dp, float *dev, float *host, void *scratch, int rank,
                         int ranks) {
    size_t a = CHECK_N / 3, b = a + 12345;
    if (fill(ctx, dev, host, rank)) return 1;
    int err = gpt_dp_bucket_ready(dp, dev + b, CHECK_N - b, NULL) ||
              tk_gpu_memset(ctx, scratch, 1, CHECK_N * sizeof(float)) ||
              gpt_dp_bucket_ready(dp, dev + a, b - a, NULL) ||
              tk_gpu_memset(ctx, scratch, 2, CHECK_N * sizeof(float)) ||
              gpt_dp_bucket_ready(dp, dev, a, NULL) || gpt_dp_finish(dp, NULL) ||
              tk_gpu_memset(ctx, dev, 0, a * sizeof(float));
    if (err) return 1;
    return (mismatches(ctx, dev, host, 0, a, ranks, 1) +
            mismatches(ctx, dev, host, a, CHECK_N, ranks, 0)) != 0;
}

/* Times TIMED_REPS sums of the 124m config's gradient (after one unmeasured). */
static void time_sum(tk_ctx *ctx, gpt_dp *dp, int rank, int ranks) {
    void *g = NULL;
    if (tk_gpu_alloc(ctx, GRAD_124M * sizeof(float), &g) != TK_OK ||
        tk_gpu_memset(ctx, g, 0, GRAD_124M * sizeof(float)) != TK_OK)
        return;
    gpt_dp_allreduce(dp, g, GRAD_124M, NULL);
    tk_gpu_sync(ctx);
    double t0 = now_ms();
    for (int i = 0; i < TIMED_REPS; i++) gpt_dp_allreduce(dp, g, GRAD_124M, NULL);
    tk_gpu_sync(ctx);
    double ms = (now_ms() - t0) / TIMED_REPS;
    double bus = 2.0 * (ranks - 1) / ranks * (double)(GRAD_124M * sizeof(float)) / (ms * 1e6);
    if (rank == 0)
        printf("  %d rank(s): sum of %zu f32 (124m's gradient) %.2f ms, bus bandwidth %.0f GB/s\n",
               ranks, GRAD_124M, ms, bus);
    tk_gpu_free(ctx, g);
}

/* Both checks and the timing on an open communicator. */
static int rank_checks(tk_ctx *ctx, gpt_dp *dp, int rank, int ranks) {
    float *host = malloc(CHECK_N * sizeof(float));
    void *dev = NULL, *scratch = NULL;
    int bad = !host || tk_gpu_alloc(ctx, CHECK_N * sizeof(float), &dev) != TK_OK ||
              tk_gpu_alloc(ctx, CHECK_N * sizeof(float), &scratch) != TK_OK;
    float *d = dev;
    int whole = bad || check_whole(ctx, dp, d, host, rank, ranks);
    int buckets = bad || check_buckets(ctx, dp, d, host, scratch, rank, ranks);
    printf("  rank %d/%d: gpt_dp_allreduce %s, buckets %s%s%s\n", rank, ranks,
           whole ? "FAIL" : "PASS", buckets ? "FAIL" : "PASS", gpt_dp_error(dp)[0] ? ": " : "",
           gpt_dp_error(dp));
    if (!whole && !buckets) time_sum(ctx, dp, rank, ranks);
    tk_gpu_free(ctx, scratch), tk_gpu_free(ctx, dev), free(host);
    return whole || buckets;
}

/* A rank: TileKittens on GPU `rank`, then the communicator, then checks. */
static int check_rank(int rank, int nranks, const void *uid, void *arg) {
    const rank_job *job = arg;
    char err[1024] = "";
    unsigned char own[GPT_DP_UID_BYTES];
    if (job->own_id && gpt_dp_unique_id(own, err, sizeof err) != 0) {
        printf("  rank %d/%d: FAIL the id: %s\n", rank, nranks, err);
        return 1;
    }
    if (job->own_id) uid = own;
    tk_ctx *ctx = NULL;
    gpt_dp *dp = NULL;
    int rc = 1;
    if (tk_ctx_create(&ctx) != TK_OK || tk_gpu_set_device(ctx, rank) != TK_OK ||
        tk_gpu_init(ctx) != TK_OK)
        printf("  rank %d/%d: FAIL TileKittens on GPU %d: %s\n", rank, nranks, rank,
               ctx ? tk_ctx_error(ctx) : "no context");
    else if (gpt_dp_open(&dp, rank, nranks, job->with_nccl ? uid : NULL, err, sizeof err))
        printf("  rank %d/%d: FAIL gpt_dp_open: %s\n", rank, nranks, err);
    else
        rc = rank_checks(ctx, dp, rank, job->with_nccl ? nranks : 1);
    gpt_dp_close(dp);
    tk_ctx_destroy(ctx);
    fflush(stdout);
    return rc;
}

/* One case's line; 1 when it failed. */
static int report(const char *name, int rc, const char *err) {
    printf("%s %s%s%s\n", rc ? "FAIL" : "PASS", name, rc ? ": " : "", rc ? err : "");
    fflush(stdout);
    return rc != 0;
}

static int nccl_cases(int gpus, int max_ranks) {
    char err[1024] = "";
    /* forked, its id made there: this process keeps no NCCL thread and no
       CUDA for the cases after */
    rank_job job = {1, 1};
    int fails = report("one rank with an NCCL communicator (forked, GPU 0)",
                       gpt_dp_fork(1, check_rank, &job, NULL, err, sizeof err), err);
    job.own_id = 0;
    int ranks = gpus < max_ranks ? gpus : max_ranks;
    if (ranks < 2) {
        printf("SKIP several ranks: %d GPU(s), at most %d rank(s) asked\n", gpus, max_ranks);
        return fails;
    }
    char name[96];
    snprintf(name, sizeof name, "%d ranks through gpt_dp_launch, one process per GPU", ranks);
    fails += report(name, gpt_dp_launch(ranks, check_rank, &job, err, sizeof err), err);
    return fails;
}

int main(int argc, char **argv) {
    int max_ranks = argc > 1 ? atoi(argv[1]) : 8, gpus = 0, fails = 0;
    char err[1024] = "", info[400] = "";
    if (!getenv("NCCL_NVLS_ENABLE"))
        printf("note: NCCL_NVLS_ENABLE is unset (a shared host may ask for 0)\n");
    int nccl = gpt_dp_nccl_load(info, sizeof info, err, sizeof err) == 0;
    fails += report(nccl ? info : "loading NCCL", !nccl, err);
    if (gpt_dp_device_count(&gpus, err, sizeof err) != 0 || gpus < 1)
        return report("a GPU", 1, gpus < 1 && !err[0] ? "the driver sees none" : err);
    printf("GPUs: %d\n", gpus);
    if (nccl) fails += nccl_cases(gpus, max_ranks);
    rank_job local = {0, 0};
    fails += report("one rank in this process without NCCL (sums are no-ops)",
                    gpt_dp_launch(1, check_rank, &local, err, sizeof err), err);
    printf("%s: %d case(s) failed\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
