// random.cu: CUDA twins of the seeded fills: uniform values in [lo, hi) and integers in
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

CUDA_KERNEL(cuda_rand_uniform)
{
    const size_t n = (size_t)k->dims[0];
    rand_uniform_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, (uint64_t)k->dims[1], k->fparam[0],
                                                                 k->fparam[1], t[0]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_randint)
{
    const size_t n = (size_t)k->dims[0];
    randint_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(n, (uint64_t)k->dims[1], (uint64_t)k->dims[2], (int64_t *)t[0]);
    return cudaGetLastError();
}
