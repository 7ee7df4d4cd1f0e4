/* device_common.cuh: what every CUDA kernel file needs: typed element access (fp32/bf16/fp16 as
 * float, via elementwise.h, or bit for bit), grid-stride loops, launch sizes and warp/block
 * reductions (fp32, and fp64 where the CPU kernel sums in double). */
#ifndef OOMLAB_DEVICE_COMMON_CUH
#define OOMLAB_DEVICE_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "elementwise.h"
#include "dtype.h"

__device__ inline float ldt(const void *p, int dt, size_t i)
{
    if (dt == DT_BF16)
        return oom_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == DT_F16)
        return oom_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

__device__ inline void stt(void *p, int dt, size_t i, float v)
{
    if (dt == DT_BF16)
        ((uint16_t *)p)[i] = oom_f32_to_bf16(v);
    else if (dt == DT_F16)
        ((uint16_t *)p)[i] = oom_f32_to_f16(v);
    else
        ((float *)p)[i] = v;
}

// Element src of x to element dst of y bit for bit, as the CPU's memcpy/memmove (NaN payloads kept).
__device__ inline void copy_elem(int dt, const void *x, size_t src, void *y, size_t dst)
{
    if (dt == DT_F32)
        ((uint32_t *)y)[dst] = ((const uint32_t *)x)[src];
    else
        ((uint16_t *)y)[dst] = ((const uint16_t *)x)[src];
}

#define GRID_LOOP(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)blockDim.x * gridDim.x)

#define THREADS 256

/* Blocks for a grid-stride loop over n elements (capped: each thread then loops). */
static inline unsigned grid_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

__device__ inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (or max) over the block; every thread gets the result. blockDim.x must be a multiple of 32. */
__device__ inline float block_reduce(float v, bool is_max)
{
    __shared__ float part[32];
    __shared__ float result;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nwarps ? part[lane] : (is_max ? -INFINITY : 0.0f);
        w = is_max ? warp_max(w) : warp_sum(w);
        if (lane == 0)
            result = w;
    }
    __syncthreads();
    float r = result;
    __syncthreads(); /* part and result may be reused by the next reduction */
    return r;
}

__device__ inline double warp_sum_f64(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block in double; every thread gets it. blockDim.x must be a multiple of 32. */
__device__ inline double block_sum_f64(double v)
{
    __shared__ double part[32];
    __shared__ double result;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum_f64(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double w = warp_sum_f64(lane < nwarps ? part[lane] : 0.0);
        if (lane == 0)
            result = w;
    }
    __syncthreads();
    double r = result;
    __syncthreads(); /* part and result may be reused by the next reduction */
    return r;
}

#endif
