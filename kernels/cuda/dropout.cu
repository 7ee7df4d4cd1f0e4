// dropout.cu: CUDA dropout, forward (elementwise.h's counter-based draws, so the mask is the CPU's
// bit for bit) and backward through the saved mask; one thread per element, grid-stride.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__global__ void dropout_fwd(int dt, size_t n, uint64_t stream, uint32_t threshold, float scale, const void *x, void *y,
                            uint8_t *mask)
{
    GRID_LOOP(i, n)
    {
        int keep = oom_dropout_keep(stream, i, threshold);
        mask[i] = (uint8_t)keep;
        stt(y, dt, i, ldt(x, dt, i) * (keep ? scale : 0.0f));
    }
}

__global__ void dropout_bwd(int dt, size_t n, float scale, const void *dy, const uint8_t *mask, void *dx)
{
    GRID_LOOP(i, n)
    stt(dx, dt, i, ldt(dy, dt, i) * (mask[i] ? scale : 0.0f));
}

CUDA_KERNEL(cuda_dropout_fwd)
{
    const size_t n = (size_t)k->dims[0];
    dropout_fwd<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, oom_dropout_stream((uint64_t)k->dims[1]),
                                                         oom_dropout_threshold(k->fparam[0]),
                                                         1.0f / (1.0f - k->fparam[0]), t[0], t[1], (uint8_t *)t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_dropout_bwd)
{
    const size_t n = (size_t)k->dims[0];
    dropout_bwd<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, 1.0f / (1.0f - k->fparam[0]), t[0],
                                                         (const uint8_t *)t[1], t[2]);
    return cudaGetLastError();
}
