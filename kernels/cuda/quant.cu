// quant.cu: CUDA twins of the CPU kernels of bitsandbytes' formats (cpu/quant.c): K_DEQUANT one
// thread an element (the signed dynamic map in constant memory), K_INT8_QUANT_ROWS one block a row,
// K_INT8_GEMM one thread an output; the math is elementwise.h's.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__constant__ float c_dynmap[OOM_QMAP_SIZE];

__global__ void dequant_kernel(int dt, size_t n, int64_t block, int kind, const uint8_t *q, const float *absmax,
                               void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, oom_dequant_elem(kind, q, absmax, block, i, c_dynmap));
}

CUDA_KERNEL(cuda_dequant)
{
    static float host[OOM_QMAP_SIZE]; // static: the async copy reads it after we return
    static bool done;
    if (!done) {
        oom_qmap_fill(1, host);
        cudaError_t rc = cudaMemcpyToSymbolAsync(c_dynmap, host, sizeof host, 0, cudaMemcpyHostToDevice, c->stream);
        if (rc != cudaSuccess)
            return rc;
        done = true;
    }
    const size_t n = (size_t)k->dims[0];
    dequant_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, k->dims[1], (int)k->dims[2],
                                                           (const uint8_t *)t[0], (const float *)t[1], t[2]);
    return cudaGetLastError();
}

// One block a row: the row's absmax by a shared-memory reduction, then its codes.
__global__ void int8_quant_rows_kernel(int dt, size_t cols, const void *x, uint8_t *q, float *absmax)
{
    __shared__ float part[THREADS];
    const size_t r = blockIdx.x;
    float m = 0.0f;
    for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
        m = fmaxf(m, fabsf(ldt(x, dt, r * cols + c)));
    part[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    m = part[0];
    if (threadIdx.x == 0)
        absmax[r] = m;
    for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
        q[r * cols + c] = oom_int8_quantize(ldt(x, dt, r * cols + c), m);
}

// One thread an output: the int32 sum of a row of a and a row of b, then its scaled value.
__global__ void int8_gemm_kernel(int dt, size_t M, size_t N, size_t K, const int8_t *a, const int8_t *b,
                                 const float *sa, const float *sb, float *acc, void *y)
{
    GRID_LOOP(i, M * N)
    {
        const size_t m = i / N, n = i % N;
        int32_t s = 0;
        for (size_t k = 0; k < K; k++)
            s += (int32_t)a[m * K + k] * b[n * K + k];
        acc[i] = (float)s;
        stt(y, dt, i, oom_int8_dequant((float)s, sa[m], sb[n]));
    }
}

CUDA_KERNEL(cuda_int8_quant_rows)
{
    const size_t rows = (size_t)k->dims[0], cols = (size_t)k->dims[1];
    int8_quant_rows_kernel<<<(unsigned)rows, THREADS, 0, c->stream>>>(k->dtype, cols, t[0], (uint8_t *)t[1],
                                                                     (float *)t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_int8_gemm)
{
    const size_t M = (size_t)k->dims[0], N = (size_t)k->dims[1], K = (size_t)k->dims[2];
    int8_gemm_kernel<<<grid_for(M * N), THREADS, 0, c->stream>>>(k->dtype, M, N, K, (const int8_t *)t[0],
                                                                  (const int8_t *)t[1], (const float *)t[2],
                                                                  (const float *)t[3], (float *)t[4], t[5]);
    return cudaGetLastError();
}
