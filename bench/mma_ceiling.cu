// The mma.sync ceiling of this GPU: warps issuing independent
// mma.sync.m16n8k16 bf16 (f32 accumulate) from registers, no memory traffic.
// It bounds what any sm_80-path kernel (ours, FlashAttention-2) can reach.
// Built on the GPU machine by nvcc (not part of the library):
//   nvcc -O3 -arch=sm_90 bench/mma_ceiling.cu -o mma_ceiling && ./mma_ceiling [seconds]
// With `seconds`, it also runs the 8-warp, 16-chain loop for that long on
// operands that change every iteration (random bits, as random inputs give),
// which is what a GEMM does under the GPU's power limit: read the clock and
// power beside it (nvidia-smi) to get the power-limited ceiling.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

template <int CHAINS> __global__ void mma_loop(float *out, int iters) {
    unsigned a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 ^ 1, b1 = a0 ^ 2;
    float acc[CHAINS][4] = {};
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int c = 0; c < CHAINS; c++)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Operands stepped by an LCG each iteration, exponents kept so that values
// lie in [2^-7, 2) in magnitude: finite, normal, random bits like randn data.
__global__ void mma_random(float *out, int iters) {
    unsigned x = threadIdx.x * 2654435761u + blockIdx.x;
    float acc[16][4] = {};
    for (int i = 0; i < iters; i++) {
        unsigned r[6];
#pragma unroll
        for (int j = 0; j < 6; j++) {
            x = x * 1664525u + 1013904223u;
            r[j] = (x & 0x83ff83ffu) | 0x3c003c00u;
        }
#pragma unroll
        for (int c = 0; c < 16; c++)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                         "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]));
    }
    float s = 0;
    for (int c = 0; c < 16; c++) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

static void sustained(int sms, double seconds, float *out) {
    const int iters = 1 << 14, threads = 128, blocks = sms * 2;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    mma_random<<<blocks, threads>>>(out, iters); /* warm-up */
    cudaDeviceSynchronize();
    float ms = 0;
    int launches = 0;
    cudaEventRecord(e0);
    while (ms < seconds * 1e3) {
        for (int i = 0; i < 20; i++) mma_random<<<blocks, threads>>>(out, iters);
        launches += 20;
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    double flops = 2.0 * 16 * 8 * 16 * 16 * (double)iters * blocks * (threads / 32) * launches;
    printf("sustained %.1f s, 8 warps per SM, random operands: %.0f TFLOP/s\n", ms / 1e3,
           flops / (ms * 1e-3) / 1e12);
}

template <int CHAINS> static void run(int sms, int warps_per_sm, float *out) {
    const int iters = 4096, threads = 128, blocks = sms * warps_per_sm / 4;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    mma_loop<CHAINS><<<blocks, threads>>>(out, iters);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0);
        mma_loop<CHAINS><<<blocks, threads>>>(out, iters);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        best = ms < best ? ms : best;
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    double flops = 2.0 * 16 * 8 * 16 * CHAINS * (double)iters * blocks * (threads / 32);
    printf("| %d | %d | %.0f |\n", warps_per_sm, CHAINS, flops / (best * 1e-3) / 1e12);
}

int main(int argc, char **argv) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *out;
    cudaMalloc(&out, 1 << 24);
    printf("| warps per SM | independent accumulators per warp | TFLOP/s |\n|---|---|---|\n");
    run<4>(sms, 8, out);
    run<8>(sms, 8, out);
    run<16>(sms, 8, out);
    run<8>(sms, 16, out);
    run<4>(sms, 4, out);
    run<16>(sms, 4, out);
    if (argc > 1) sustained(sms, atof(argv[1]), out);
    return cudaDeviceSynchronize() != cudaSuccess;
}
