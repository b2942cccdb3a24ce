/* The producer/consumer release ring of warp-specialized kernels
 * (ops/nv/ws.c, ops/nv/tma.c) in a standalone CUDA program, with twins that
 * differ in one point each, so that one device run tells whether
 * compute-sanitizer's racecheck reports on the library's ring are races or
 * a blind spot of the tool (issue 12).
 *
 * One block: W consumer warps and a producer warpgroup of which warp W
 * works (the others exit, as in the library). A sequence of `tiles` tiles
 * streams through `stages` shared stages of 8 KiB; tile t holds the words
 * t * 4096 + w + 1, so a stage refilled too early shows the next tile's
 * values. The lockstep program both roles are cut from is the GEMM's
 * (kernels/gemm.c):
 *   for s < S-1: copy tile s into stage s; commit          (groups 0..S-2)
 *   wait(S-2); barrier 0; copy tile S-1; commit
 *   for kt < T: read stage kt%S; wait(S-2); barrier kt+1;
 *               copy tile kt+S into stage kt%S; commit
 * and the roles do what ops/nv/ws.c makes of it (R = 8 mbarriers per ring):
 *   commit   producer: every lane cp.async.mbarrier.arrive.noinc on
 *            ring[j%R]; consumer: lane 0 arrives (ring counts W + 32)
 *   barrier  consumer: wait ack[b%R] for barrier b-R, bar.warp.sync, lane 0
 *            arrives on rel[b%R] (counts W); producer: EVERY lane waits
 *            rel[b%R] with parity (b/R)&1, lane 0 arrives on ack[b%R],
 *            fence.proxy.async
 *   copy     producer, all 32 lanes: cp.async.cg 16 B (copy=cp, the
 *            library's aligned fallback) or ld.global + st.shared then
 *            fence.acq_rel.cta (copy=st, its element path: the STS.U16
 *            racecheck names)
 *   wait     consumers: parity waits on ring[g%R] for every group below
 * Consumers read each stage with ldmatrix.x4 (read=ldsm; lane l gives row
 * l's address and gets words 32q + l) or plain loads (read=lds), sleep a
 * random, per-warp time between reads (sleep > 0), and count words that
 * differ from the tile they expect. Under a tool, run with sleep=0: then the
 * only WARPSYNC the consumers execute is ptxas's at the head of each tile,
 * after the previous release, as far from the reads as in the library (whose
 * k-loop has none); with sleep, ptxas puts one after every __nanosleep.
 *
 * Variants (argv[1]):
 *   ok      the library's protocol
 *   all     every consumer lane arrives on rel (counts 32 W): no lane relies
 *           on bar.warp.sync to carry its reads into lane 0's release
 *   bar     ok, but the warp meets at a named barrier of 32 threads
 *           (bar.sync 1+warp, 32) instead of bar.warp.sync: ptxas compiles
 *           bar.warp.sync (any mask) in a converged warp to a BRA.DIV and a
 *           NOP, so a tool that watches instructions sees no warp sync there,
 *           while BAR.SYNC is an instruction every tool knows
 *   broken  the producer waits for the release of the barrier BEFORE the one
 *           it should (b - 1 instead of b): a stage is refilled while
 *           consumers still read it. Must show mismatches on the GPU. (One
 *           barrier early, not no wait at all: a producer that never waits
 *           runs whole mbarrier phases ahead of the consumers, whose parity
 *           waits then alias and hang instead of reading bad data.)
 *   ring_race VARIANT [copy=cp|st] [read=ldsm|lds] [warps=8] [stages=3]
 *             [tiles=64] [blocks=264] [iters=20] [sleep=2000 (ns, 0: none)]
 * Prints the mismatch count; exit 0 when there is none, 1 when there are,
 * 2 on a usage or CUDA error.
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O2 ring_race.cu -o ring_race */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define RING           8
#define STAGE_BYTES    8192
#define STAGE_WORDS    (STAGE_BYTES / 4)
#define PRODUCER_WARPS 4
#define MAX_LOG        8

enum { V_OK, V_ALL, V_BAR, V_BROKEN };
static const char *const variant_names[] = {"ok", "all", "bar", "broken"};

struct params {
    int variant, copy_st, read_lds, warps, stages, tiles, sleep_ns;
};

struct report {
    unsigned long long mismatches, checked;
    unsigned nlog;
    unsigned log[MAX_LOG][5]; /* block, warp, tile, word, value read */
};

__host__ __device__ static uint32_t expected(int tile, int word) {
    return (uint32_t)tile * 4096u + (uint32_t)word + 1u;
}

/* ---- PTX ------------------------------------------------------------------- */
__device__ static uint32_t saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ static void mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(saddr(bar)), "r"(count) : "memory");
}
__device__ static void mbar_arrive(uint64_t *bar) { /* .release.cta by default */
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [%0]; }" ::"r"(saddr(bar))
                 : "memory");
}
__device__ static void mbar_wait(uint64_t *bar, unsigned parity) { /* .acquire.cta */
    uint32_t ok = 0;
    while (!ok)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2;"
                     " selp.u32 %0, 1, 0, p; }"
                     : "=r"(ok)
                     : "r"(saddr(bar)), "r"(parity)
                     : "memory");
}
__device__ static void cp_async_arrive_noinc(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(saddr(bar)) : "memory");
}
__device__ static void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(dst)), "l"(src)
                 : "memory");
}
__device__ static void warp_sync_all() { asm volatile("bar.warp.sync -1;" ::: "memory"); }
__device__ static void warp_bar(int warp) { /* named barrier 1+warp, this warp only */
    asm volatile("barrier.sync.aligned %0, 32;" ::"r"(1 + warp) : "memory");
}
__device__ static void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ static void fence_acq_rel_cta() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }
__device__ static void ldmatrix_x4(const void *row, uint32_t r[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr(row))
                 : "memory");
}

/* ---- The ring ---------------------------------------------------------------- */
struct ring {
    uint64_t *grp, *rel, *ack;
    int committed, waited, barriers; /* per thread, the same in every lane */
};

/* Parity waits for every group below `target` not waited for yet. */
__device__ static void wait_below(ring &r, int target) {
    for (; r.waited < target; r.waited++)
        mbar_wait(&r.grp[r.waited % RING], (unsigned)(r.waited / RING) & 1u);
}

/* ---- Producer ------------------------------------------------------------------ */
__device__ static void produce_copy(const params &p, const uint32_t *src, uint8_t *stage, int tile,
                                    int lane) {
    const uint4 *g = reinterpret_cast<const uint4 *>(src + (size_t)tile * STAGE_WORDS);
    uint4 *s = reinterpret_cast<uint4 *>(stage);
    for (int c = lane; c < STAGE_BYTES / 16; c += 32) {
        if (p.copy_st)
            s[c] = g[c]; /* ld.global + st.shared */
        else
            cp_async16(&s[c], &g[c]);
    }
    if (p.copy_st) fence_acq_rel_cta(); /* tk_ws_fallback_done: release the plain stores */
}

__device__ static void produce_commit(ring &r) { /* tk_ws_commit_producer */
    wait_below(r, r.committed - RING + 1);
    warp_sync_all();
    cp_async_arrive_noinc(&r.grp[r.committed % RING]);
    r.committed++;
}

__device__ static void produce_barrier(const params &p, ring &r, int lane) {
    int b = r.barriers++;
    int w = p.variant == V_BROKEN ? b - 1 : b; /* broken: one barrier too early */
    if (w >= 0)                                /* every lane: each one's copies come after */
        mbar_wait(&r.rel[w % RING], (unsigned)(w / RING) & 1u);
    warp_sync_all();
    if (lane == 0) mbar_arrive(&r.ack[b % RING]);
    fence_proxy_async();
}

__device__ static void producer(const params &p, const uint32_t *src, uint8_t *smem, ring &r,
                                int lane) {
    const int S = p.stages, T = p.tiles;
    for (int s = 0; s < S - 1; s++) {
        if (s < T) produce_copy(p, src, smem + s * STAGE_BYTES, s, lane);
        produce_commit(r);
    }
    produce_barrier(p, r, lane);
    if (S - 1 < T) produce_copy(p, src, smem + (S - 1) * STAGE_BYTES, S - 1, lane);
    produce_commit(r);
    for (int kt = 0; kt < T; kt++) {
        produce_barrier(p, r, lane);
        if (kt + S < T) produce_copy(p, src, smem + (kt % S) * STAGE_BYTES, kt + S, lane);
        produce_commit(r);
    }
    wait_below(r, r.committed); /* its copies land before the warp exits */
}

/* ---- Consumers ------------------------------------------------------------------- */
__device__ static void consume_commit(ring &r, int lane) { /* tk_ring_commit */
    wait_below(r, r.committed - RING + 1);
    warp_sync_all();
    if (lane == 0) mbar_arrive(&r.grp[r.committed % RING]);
    r.committed++;
}

__device__ static void consume_barrier(const params &p, ring &r, int warp,
                                       int lane) { /* tk_ws_barrier_consumer */
    int b = r.barriers++;
    mbar_wait(&r.ack[b % RING], ((unsigned)(b / RING) & 1u) ^ 1u);
    if (p.variant == V_BAR)
        warp_bar(warp);
    else
        warp_sync_all();
    if (lane == 0 || p.variant == V_ALL) mbar_arrive(&r.rel[b % RING]);
}

__device__ static uint32_t lcg(uint32_t &s) { return s = s * 1664525u + 1013904223u; }

/* Reads all of stage `stage`, which must hold tile `tile`, in 16 pieces of
 * 512 bytes (a rotated order per warp), sleeping between pieces (SLEEP).
 * Without SLEEP the loop has no branch that could diverge, so that ptxas, as
 * in the library's k-loop, puts no WARPSYNC near the ldmatrix (a tool could
 * take it for the warp synchronization the protocol leaves to bar.warp.sync):
 * runs under a tool use sleep=0. */
template <bool LDS, bool SLEEP>
__device__ static void consume_read(const params &p, const uint8_t *stage, int tile, int warp,
                                    int lane, report *rep) {
    uint32_t seed = (blockIdx.x * 131u + (unsigned)warp) * 7919u + (unsigned)tile * 104729u;
    unsigned bad = 0, bad_word = 0, bad_value = 0;
#pragma unroll
    for (int i = 0; i < STAGE_BYTES / 512; i++) {
        int piece = (i + warp) % (STAGE_BYTES / 512);
        const uint8_t *base = stage + piece * 512;
        uint32_t v[4];
        if (LDS) {
            for (int q = 0; q < 4; q++) v[q] = ((volatile const uint32_t *)base)[32 * q + lane];
        } else {
            ldmatrix_x4(base + lane * 16, v);
        }
        for (int q = 0; q < 4; q++) {
            int word = piece * 128 + 32 * q + lane;
            bool miss = v[q] != expected(tile, word);
            bad_word = miss && !bad ? (unsigned)word : bad_word;
            bad_value = miss && !bad ? v[q] : bad_value;
            bad += miss;
        }
        if (SLEEP) /* warp-uniform, but ptxas puts a WARPSYNC after it */
            __nanosleep(lcg(seed) % (unsigned)p.sleep_ns);
    }
    if (bad) {
        atomicAdd(&rep->mismatches, (unsigned long long)bad);
        /* few atomics on one address: broken runs miss a lot */
        unsigned k =
            *(volatile unsigned *)&rep->nlog < MAX_LOG ? atomicAdd(&rep->nlog, 1u) : MAX_LOG;
        if (k < MAX_LOG) {
            unsigned e[5] = {blockIdx.x, (unsigned)warp, (unsigned)tile, bad_word, bad_value};
            for (int f = 0; f < 5; f++) rep->log[k][f] = e[f];
        }
    }
    if (lane == 0) atomicAdd(&rep->checked, (unsigned long long)STAGE_WORDS);
}

template <bool LDS, bool SLEEP>
__device__ static void consumer(const params &p, const uint8_t *smem, ring &r, int warp, int lane,
                                report *rep) {
    const int S = p.stages, T = p.tiles;
    for (int s = 0; s < S - 1; s++) consume_commit(r, lane);
    wait_below(r, r.committed - (S - 2));
    consume_barrier(p, r, warp, lane);
    consume_commit(r, lane);
    for (int kt = 0; kt < T; kt++) {
        consume_read<LDS, SLEEP>(p, smem + (kt % S) * STAGE_BYTES, kt, warp, lane, rep);
        wait_below(r, r.committed - (S - 2)); /* tile kt+1 landed */
        consume_barrier(p, r, warp, lane);    /* releases stage kt%S */
        consume_commit(r, lane);
    }
}

template <bool LDS, bool SLEEP>
__global__ void ring_kernel(params p, const uint32_t *src, report *rep) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + p.stages * STAGE_BYTES);
    ring r = {bars, bars + RING, bars + 2 * RING, 0, 0, 0};
    int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) {
        for (int i = 0; i < RING; i++) {
            mbar_init(&r.grp[i], (unsigned)p.warps + 32u);
            mbar_init(&r.rel[i], (unsigned)p.warps * (p.variant == V_ALL ? 32u : 1u));
            mbar_init(&r.ack[i], 1u);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == p.warps)
        producer(p, src, smem, r, lane);
    else if (warp < p.warps)
        consumer<LDS, SLEEP>(p, smem, r, warp, lane, rep);
}

/* ---- Host ------------------------------------------------------------------------ */
static int check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "ring_race: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

static int parse(int argc, char **argv, params *p, int *blocks, int *iters) {
    p->variant = -1, p->copy_st = 0, p->read_lds = 0, p->warps = 8, p->stages = 3;
    p->tiles = 64, p->sleep_ns = 2000;
    *blocks = 264, *iters = 20;
    for (int v = 0; argc > 1 && v < 4; v++)
        if (!strcmp(argv[1], variant_names[v])) p->variant = v;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        int n = eq ? atoi(eq + 1) : 0;
        if (!strcmp(a, "copy=st") || !strcmp(a, "copy=cp"))
            p->copy_st = a[5] == 's';
        else if (!strcmp(a, "read=lds") || !strcmp(a, "read=ldsm"))
            p->read_lds = !a[8];
        else if (!strncmp(a, "warps=", 6))
            p->warps = n;
        else if (!strncmp(a, "stages=", 7))
            p->stages = n;
        else if (!strncmp(a, "tiles=", 6))
            p->tiles = n;
        else if (!strncmp(a, "blocks=", 7))
            *blocks = n;
        else if (!strncmp(a, "iters=", 6))
            *iters = n;
        else if (!strncmp(a, "sleep=", 6))
            p->sleep_ns = n;
        else
            return 0;
    }
    return p->variant >= 0 && p->warps >= 1 && p->warps <= 15 && p->stages >= 2 && p->stages <= 6 &&
           p->tiles >= 1 && p->tiles <= 100000 && *blocks >= 1 && *iters >= 1 && p->sleep_ns >= 0;
}

int main(int argc, char **argv) {
    params p;
    int blocks, iters;
    if (!parse(argc, argv, &p, &blocks, &iters)) {
        fprintf(stderr, "usage: ring_race ok|all|bar|broken [copy=cp|st] [read=ldsm|lds] "
                        "[warps=8] [stages=3] [tiles=64] [blocks=264] [iters=20] [sleep=2000]\n");
        return 2;
    }
    size_t words = (size_t)p.tiles * STAGE_WORDS;
    uint32_t *h = (uint32_t *)malloc(words * 4), *src = NULL;
    report *rep = NULL, out;
    if (!h) return 2;
    for (size_t i = 0; i < words; i++)
        h[i] = expected((int)(i / STAGE_WORDS), (int)(i % STAGE_WORDS));
    size_t smem = (size_t)p.stages * STAGE_BYTES + 3 * RING * sizeof(uint64_t);
    int threads = (p.warps + PRODUCER_WARPS) * 32;
    void (*const kernels[2][2])(params, const uint32_t *,
                                report *) = {{ring_kernel<false, false>, ring_kernel<false, true>},
                                             {ring_kernel<true, false>, ring_kernel<true, true>}};
    void (*kernel)(params, const uint32_t *, report *) = kernels[p.read_lds][p.sleep_ns > 0];
    if (check(cudaMalloc(&src, words * 4), "cudaMalloc") ||
        check(cudaMalloc(&rep, sizeof *rep), "cudaMalloc") ||
        check(cudaMemcpy(src, h, words * 4, cudaMemcpyHostToDevice), "upload") ||
        check(cudaMemset(rep, 0, sizeof *rep), "memset") ||
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
              "smem limit"))
        return 2;
    for (int it = 0; it < iters; it++) kernel<<<blocks, threads, smem>>>(p, src, rep);
    if (check(cudaGetLastError(), "launch") || check(cudaDeviceSynchronize(), "kernel") ||
        check(cudaMemcpy(&out, rep, sizeof out, cudaMemcpyDeviceToHost), "download"))
        return 2;
    printf("ring_race %s copy=%s read=%s warps=%d stages=%d tiles=%d blocks=%d iters=%d "
           "sleep=%d: %llu mismatches in %llu words read\n",
           variant_names[p.variant], p.copy_st ? "st" : "cp", p.read_lds ? "lds" : "ldsm", p.warps,
           p.stages, p.tiles, blocks, iters, p.sleep_ns, out.mismatches, out.checked);
    for (unsigned k = 0; k < out.nlog && k < MAX_LOG; k++)
        printf("  block %u warp %u tile %u word %u: read %u (= tile %d's), expected %u\n",
               out.log[k][0], out.log[k][1], out.log[k][2], out.log[k][3], out.log[k][4],
               out.log[k][4] ? (int)((out.log[k][4] - 1) / 4096) : -1,
               expected((int)out.log[k][2], (int)out.log[k][3]));
    cudaFree(src), cudaFree(rep), free(h);
    return out.mismatches ? 1 : 0;
}
