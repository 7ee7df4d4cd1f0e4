// pointwise.cu: CUDA casts, add, scale, fill, eye and per-channel bias add (one thread per element,
// grid-stride, math from elementwise.h), and the bias gradient (one block per channel).
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__global__ void cast_kernel(int src, int dst, size_t n, const void *x, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dst, i, ldt(x, src, i));
}

__global__ void add_kernel(int dt, size_t n, float alpha, float beta, const void *a, const void *b, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, alpha * ldt(a, dt, i) + beta * ldt(b, dt, i));
}

__global__ void scale_kernel(int dt, size_t n, float alpha, const void *x, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, alpha * ldt(x, dt, i));
}

__global__ void fill_kernel(int dt, size_t n, float value, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, value);
}

__global__ void bias_add_kernel(int dt, size_t n, int64_t C, int64_t inner, const void *x, const void *bias, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, ldt(x, dt, i) + ldt(bias, dt, (i / inner) % C));
}

__global__ void bias_bwd_kernel(int dt, int64_t C, int64_t outer, int64_t inner, const void *dy, void *dbias)
{
    int64_t c = blockIdx.x;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < outer * inner; j += blockDim.x)
        s += ldt(dy, dt, (size_t)((j / inner) * C + c) * inner + j % inner);
    s = block_reduce(s, false);
    if (threadIdx.x == 0)
        stt(dbias, dt, c, s);
}

CUDA_KERNEL(cuda_cast)
{
    const size_t n = (size_t)k->dims[0];
    cast_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, (int)k->dims[1], n, t[0], t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_add)
{
    const size_t n = (size_t)k->dims[0];
    add_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, k->fparam[0], k->fparam[1], t[0], t[1], t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_scale)
{
    const size_t n = (size_t)k->dims[0];
    scale_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, k->fparam[0], t[0], t[1]);
    return cudaGetLastError();
}

__global__ void eye_kernel(int dt, size_t n, void *y)
{
    GRID_LOOP(i, n * n)
    stt(y, dt, i, i % (n + 1) == 0 ? 1.0f : 0.0f);
}

CUDA_KERNEL(cuda_eye)
{
    const size_t n = (size_t)k->dims[0];
    eye_kernel<<<grid_for(n * n), THREADS, 0, c->stream>>>(k->dtype, n, t[0]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_fill)
{
    const size_t n = (size_t)k->dims[0];
    fill_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, k->fparam[0], t[0]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_bias_add)
{
    const int64_t *d = k->dims;
    const size_t m = (size_t)(d[0] * d[1] * d[2]);
    bias_add_kernel<<<grid_for(m), THREADS, 0, c->stream>>>(k->dtype, m, d[1], d[2], t[0], t[1], t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_bias_bwd)
{
    const int64_t *d = k->dims;
    bias_bwd_kernel<<<(unsigned)d[1], THREADS, 0, c->stream>>>(k->dtype, d[1], d[0], d[2], t[0], t[1]);
    return cudaGetLastError();
}
