// norm.cu: CUDA softmax along rows, the normalisations (LayerNorm, RMSNorm, GroupNorm) with their
// backward kernels, and the row L2 norm (DoRA): one thread block per row (or group) with block reductions; parameter
// gradients one block per channel, so nothing needs atomics.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__global__ void softmax_fwd(int dt, int64_t cols, const void *x, void *y)
{
    size_t base = blockIdx.x * (size_t)cols;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        mx = fmaxf(mx, ldt(x, dt, base + c));
    mx = block_reduce(mx, true);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        sum += expf(ldt(x, dt, base + c) - mx);
    sum = block_reduce(sum, false);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        stt(y, dt, base + c, expf(ldt(x, dt, base + c) - mx) / sum);
}

__global__ void softmax_bwd(int dt, int64_t cols, const void *y, const void *dy, void *dx)
{
    size_t base = blockIdx.x * (size_t)cols;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        dot += ldt(y, dt, base + c) * ldt(dy, dt, base + c);
    dot = block_reduce(dot, false);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        stt(dx, dt, base + c, ldt(y, dt, base + c) * (ldt(dy, dt, base + c) - dot));
}

// Normalisation of one group of len elements at base; the channel of element i is c0 + i / cstride.
// LayerNorm: group = row, cstride = 1. GroupNorm: group = (n, g), cstride = HW. rms: no centring.
__global__ void norm_fwd(int dt, int rms, int64_t len, int64_t groups_per_sample, int64_t cpg, int64_t cstride,
                         float eps, const void *x, const void *gamma, const void *beta, void *y, float *mean,
                         float *rstd)
{
    size_t base = blockIdx.x * (size_t)len;
    int64_t c0 = (blockIdx.x % groups_per_sample) * cpg;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
        s += ldt(x, dt, base + i);
    float m = rms ? 0.0f : block_reduce(s, false) / len, s2 = 0.0f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        float d = ldt(x, dt, base + i) - m;
        s2 += d * d;
    }
    float r = rsqrtf(block_reduce(s2, false) / len + eps);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        int64_t c = c0 + i / cstride;
        float v = (ldt(x, dt, base + i) - m) * r * ldt(gamma, dt, c) + (beta ? ldt(beta, dt, c) : 0.0f);
        stt(y, dt, base + i, v);
    }
    if (threadIdx.x == 0) {
        if (mean)
            mean[blockIdx.x] = m;
        rstd[blockIdx.x] = r;
    }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma (rms: no mean(g) term).
__global__ void norm_bwd_dx(int dt, int rms, int64_t len, int64_t groups_per_sample, int64_t cpg, int64_t cstride,
                            const void *dy, const void *x, const void *gamma, const float *mean, const float *rstd,
                            void *dx)
{
    size_t base = blockIdx.x * (size_t)len;
    int64_t c0 = (blockIdx.x % groups_per_sample) * cpg;
    float m = mean ? mean[blockIdx.x] : 0.0f, r = rstd[blockIdx.x], sg = 0.0f, sgx = 0.0f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        float g = ldt(dy, dt, base + i) * ldt(gamma, dt, c0 + i / cstride);
        sg += g;
        sgx += g * (ldt(x, dt, base + i) - m) * r;
    }
    float mg = rms ? 0.0f : block_reduce(sg, false) / len, mgx = block_reduce(sgx, false) / len;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        float g = ldt(dy, dt, base + i) * ldt(gamma, dt, c0 + i / cstride);
        float xh = (ldt(x, dt, base + i) - m) * r;
        stt(dx, dt, base + i, r * (g - mg - xh * mgx));
    }
}

// One block per channel c: dgamma = sum dy * xhat, dbeta = sum dy over every element of channel c.
// Element j of the channel: outer index j / inner, inner index j % inner; stats index per outer.
__global__ void norm_bwd_params(int dt, int64_t C, int64_t outer, int64_t inner, int64_t groups_per_sample,
                                int64_t cpg, const void *dy, const void *x, const float *mean, const float *rstd,
                                void *dgamma, void *dbeta)
{
    int64_t c = blockIdx.x;
    float sg = 0.0f, sb = 0.0f;
    for (int64_t j = threadIdx.x; j < outer * inner; j += blockDim.x) {
        int64_t o = j / inner;
        size_t i = (size_t)(o * C + c) * inner + j % inner;
        int64_t stat = o * groups_per_sample + c / cpg;
        float d = ldt(dy, dt, i);
        sg += d * (ldt(x, dt, i) - (mean ? mean[stat] : 0.0f)) * rstd[stat];
        sb += d;
    }
    sg = block_reduce(sg, false);
    sb = block_reduce(sb, false);
    if (threadIdx.x == 0) {
        stt(dgamma, dt, c, sg);
        if (dbeta)
            stt(dbeta, dt, c, sb);
    }
}

CUDA_KERNEL(cuda_softmax_fwd)
{
    softmax_fwd<<<(unsigned)k->dims[0], THREADS, 0, c->stream>>>(k->dtype, k->dims[1], t[0], t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_softmax_bwd)
{
    softmax_bwd<<<(unsigned)k->dims[0], THREADS, 0, c->stream>>>(k->dtype, k->dims[1], t[0], t[1], t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_layernorm_fwd)
{
    const int64_t *d = k->dims;
    norm_fwd<<<(unsigned)d[0], THREADS, 0, c->stream>>>(k->dtype, 0, d[1], 1, 0, 1, k->fparam[0], t[0], t[1], t[2], t[3],
                                                        (float *)t[4], (float *)t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_layernorm_bwd_dx)
{
    const int64_t *d = k->dims;
    norm_bwd_dx<<<(unsigned)d[0], THREADS, 0, c->stream>>>(k->dtype, 0, d[1], 1, 0, 1, t[0], t[1], t[2],
                                                           (const float *)t[3], (const float *)t[4], t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_layernorm_bwd_params)
{
    const int64_t *d = k->dims;
    norm_bwd_params<<<(unsigned)d[1], THREADS, 0, c->stream>>>(k->dtype, d[1], d[0], 1, 1, d[1], t[0], t[1],
                                                               (const float *)t[2], (const float *)t[3], t[4], t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_rmsnorm_fwd)
{
    const int64_t *d = k->dims;
    norm_fwd<<<(unsigned)d[0], THREADS, 0, c->stream>>>(k->dtype, 1, d[1], 1, 0, 1, k->fparam[0], t[0], t[1], NULL, t[2],
                                                        NULL, (float *)t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_rmsnorm_bwd)
{
    const int64_t *d = k->dims;
    norm_bwd_dx<<<(unsigned)d[0], THREADS, 0, c->stream>>>(k->dtype, 1, d[1], 1, 0, 1, t[0], t[1], t[2], NULL,
                                                           (const float *)t[3], t[4]);
    norm_bwd_params<<<(unsigned)d[1], THREADS, 0, c->stream>>>(k->dtype, d[1], d[0], 1, 1, d[1], t[0], t[1], NULL,
                                                               (const float *)t[3], t[5], NULL);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_groupnorm_fwd)
{
    const int64_t *d = k->dims, C = d[1], HW = d[2], G = d[3];
    norm_fwd<<<(unsigned)(d[0] * G), THREADS, 0, c->stream>>>(k->dtype, 0, C / G * HW, G, C / G, HW, k->fparam[0], t[0],
                                                              t[1], t[2], t[3], (float *)t[4], (float *)t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_groupnorm_bwd_dx)
{
    const int64_t *d = k->dims, C = d[1], HW = d[2], G = d[3];
    norm_bwd_dx<<<(unsigned)(d[0] * G), THREADS, 0, c->stream>>>(k->dtype, 0, C / G * HW, G, C / G, HW, t[0], t[1], t[2],
                                                                 (const float *)t[3], (const float *)t[4], t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_groupnorm_bwd_params)
{
    const int64_t *d = k->dims, C = d[1], HW = d[2], G = d[3];
    norm_bwd_params<<<(unsigned)C, THREADS, 0, c->stream>>>(k->dtype, C, d[0], HW, G, C / G, t[0], t[1],
                                                            (const float *)t[2], (const float *)t[3], t[4], t[5]);
    return cudaGetLastError();
}

__global__ void row_norm(int dt, int64_t cols, float p, const void *x, void *y)
{
    size_t base = blockIdx.x * (size_t)cols;
    float s2 = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = ldt(x, dt, base + c);
        s2 += v * v;
    }
    s2 = block_reduce(s2, false);
    if (threadIdx.x == 0)
        stt(y, dt, blockIdx.x, powf(sqrtf(s2), p));
}

CUDA_KERNEL(cuda_row_norm)
{
    const int64_t *d = k->dims;
    row_norm<<<(unsigned)d[0], THREADS, 0, c->stream>>>(k->dtype, d[1], k->fparam[0] != 0.0f ? k->fparam[0] : 1.0f,
                                                        t[0], t[1]);
    return cudaGetLastError();
}
