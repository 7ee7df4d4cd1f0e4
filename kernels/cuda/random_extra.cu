// random_extra.cu: CUDA twins of the seeded fills: uniform values in [lo, hi) and integers in
// [0, high), element i drawn from splitmix64 of the seed and i with elementwise.h's functions, so
// the GPU writes exactly the values the CPU does (one thread per element, in any order).
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__global__ void rand_uniform_kernel(int dt, size_t n, uint64_t seed, float lo, float hi, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, oom_uniform_value(lo, hi, oom_uniform01(seed, i), dt));
}

__global__ void randint_kernel(size_t n, uint64_t seed, uint64_t high, int64_t *y)
{
    GRID_LOOP(i, n)
    y[i] = oom_randint(seed, i, high);
}

cudaError_t cuda_random_launch(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const size_t n = (size_t)k->dims[0];
    const uint64_t seed = (uint64_t)k->dims[1];
    switch (k->kernel) {
    case K_RAND_UNIFORM:
        rand_uniform_kernel<<<grid_for(n), THREADS, 0, s>>>(k->dtype, n, seed, k->fparam[0], k->fparam[1], t[0]);
        break;
    case K_RANDINT:
        randint_kernel<<<grid_for(n), THREADS, 0, s>>>(n, seed, (uint64_t)k->dims[2], (int64_t *)t[0]);
        break;
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
