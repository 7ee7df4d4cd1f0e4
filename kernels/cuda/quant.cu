// quant.cu: CUDA twin of the CPU dequantization (K_DEQUANT): one thread per element, each from
// elementwise.h's oom_dequant_elem, the signed dynamic map in constant memory.
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
