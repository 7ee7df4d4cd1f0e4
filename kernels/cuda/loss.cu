// loss.cu: CUDA cross-entropy over logits and its gradient, one thread block per row with block
// reductions.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

// Rows whose target is negative (ignore_index) or out of range get loss 0 and no gradient.
__global__ void ce_fwd(int dt, int64_t V, const void *logits, const int64_t *target, float *loss, float *lse)
{
    size_t base = blockIdx.x * (size_t)V;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
        mx = fmaxf(mx, ldt(logits, dt, base + c));
    mx = block_reduce(mx, true);
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
        sum += expf(ldt(logits, dt, base + c) - mx);
    sum = block_reduce(sum, false);
    if (threadIdx.x == 0) {
        int64_t tg = target[blockIdx.x];
        float l = mx + logf(sum);
        lse[blockIdx.x] = l;
        loss[blockIdx.x] = tg >= 0 && tg < V ? l - ldt(logits, dt, base + tg) : 0.0f;
    }
}

__global__ void ce_bwd(int dt, int64_t V, float scale, const void *logits, const int64_t *target, const float *lse,
                       void *dlogits)
{
    size_t base = blockIdx.x * (size_t)V;
    int64_t tg = target[blockIdx.x];
    bool valid = tg >= 0 && tg < V;
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
        float g = valid ? scale * (expf(ldt(logits, dt, base + c) - lse[blockIdx.x]) - (c == tg ? 1.0f : 0.0f)) : 0.0f;
        stt(dlogits, dt, base + c, g);
    }
}

CUDA_KERNEL(cuda_cross_entropy_fwd)
{
    ce_fwd<<<(unsigned)k->dims[0], THREADS, 0, c->stream>>>(k->dtype, k->dims[1], t[0], (const int64_t *)t[1],
                                                            (float *)t[2], (float *)t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_cross_entropy_bwd)
{
    ce_bwd<<<(unsigned)k->dims[0], THREADS, 0, c->stream>>>(k->dtype, k->dims[1], k->fparam[0], t[0],
                                                            (const int64_t *)t[1], (const float *)t[2], t[3]);
    return cudaGetLastError();
}
