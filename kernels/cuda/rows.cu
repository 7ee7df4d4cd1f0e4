// rows.cu: CUDA kernels that reduce along rows or channels: softmax, LayerNorm, RMSNorm, GroupNorm
// (+ backward), bias gradient, cross-entropy (+ backward) and embedding (+ backward). One thread
// block per row (or group, or channel) with block reductions; parameter gradients one block per
// channel, so nothing needs atomics except the embedding's scatter-add.
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

__global__ void bias_bwd(int dt, int64_t C, int64_t outer, int64_t inner, const void *dy, void *dbias)
{
    int64_t c = blockIdx.x;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < outer * inner; j += blockDim.x)
        s += ldt(dy, dt, (size_t)((j / inner) * C + c) * inner + j % inner);
    s = block_reduce(s, false);
    if (threadIdx.x == 0)
        stt(dbias, dt, c, s);
}

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

__global__ void embedding_fwd(int dt, size_t n, int64_t V, int64_t C, const int64_t *ids, const void *table, void *y)
{
    GRID_LOOP(i, n)
    {
        int64_t id = ids[i / C];
        stt(y, dt, i, id >= 0 && id < V ? ldt(table, dt, id * C + i % C) : 0.0f);
    }
}

__global__ void embedding_scatter(int dt, size_t n, int64_t V, int64_t C, const int64_t *ids, const void *dy, float *acc)
{
    GRID_LOOP(i, n)
    {
        int64_t id = ids[i / C];
        if (id >= 0 && id < V)
            atomicAdd(&acc[id * C + i % C], ldt(dy, dt, i));
    }
}

__global__ void store_f32(int dt, size_t n, const float *src, void *dst)
{
    GRID_LOOP(i, n)
    stt(dst, dt, i, src[i]);
}

// Embedding backward: scatter-add in fp32 (scratch unless the table is fp32), then convert.
static cudaError_t embedding_bwd(const struct kernel_call *k, void *const *t, cudaStream_t s,
                                 const struct cuda_scratch *scratch)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const size_t n_table = (size_t)(V * C), n_rows = (size_t)(rows * C);
    float *acc = k->dtype == DT_F32 ? (float *)t[2] : (float *)scratch->get(scratch->user, n_table * sizeof(float));
    if (!acc)
        return cudaErrorMemoryAllocation;
    cudaError_t rc = cudaMemsetAsync(acc, 0, n_table * sizeof(float), s);
    if (rc == cudaSuccess) {
        embedding_scatter<<<grid_for(n_rows), THREADS, 0, s>>>(k->dtype, n_rows, V, C, (const int64_t *)t[0], t[1], acc);
        if (k->dtype != DT_F32)
            store_f32<<<grid_for(n_table), THREADS, 0, s>>>(k->dtype, n_table, acc, t[2]);
        rc = cudaGetLastError();
    }
    if (acc != t[2])
        scratch->put(scratch->user, acc);
    return rc;
}

cudaError_t cuda_rows_launch(const struct kernel_call *k, void *const *t, cudaStream_t s,
                             const struct cuda_scratch *scratch)
{
    const int dt = k->dtype;
    const int64_t *d = k->dims;
    const float eps = k->fparam[0];
    const unsigned rows = (unsigned)d[0];
    switch (k->kernel) {
    case K_SOFTMAX_FWD:
        softmax_fwd<<<rows, THREADS, 0, s>>>(dt, d[1], t[0], t[1]);
        break;
    case K_SOFTMAX_BWD:
        softmax_bwd<<<rows, THREADS, 0, s>>>(dt, d[1], t[0], t[1], t[2]);
        break;
    case K_LAYERNORM_FWD:
        norm_fwd<<<rows, THREADS, 0, s>>>(dt, 0, d[1], 1, 0, 1, eps, t[0], t[1], t[2], t[3], (float *)t[4], (float *)t[5]);
        break;
    case K_LAYERNORM_BWD_DX:
        norm_bwd_dx<<<rows, THREADS, 0, s>>>(dt, 0, d[1], 1, 0, 1, t[0], t[1], t[2], (const float *)t[3],
                                             (const float *)t[4], t[5]);
        break;
    case K_LAYERNORM_BWD_PARAMS:
        norm_bwd_params<<<(unsigned)d[1], THREADS, 0, s>>>(dt, d[1], d[0], 1, 1, d[1], t[0], t[1], (const float *)t[2],
                                                           (const float *)t[3], t[4], t[5]);
        break;
    case K_RMSNORM_FWD:
        norm_fwd<<<rows, THREADS, 0, s>>>(dt, 1, d[1], 1, 0, 1, eps, t[0], t[1], NULL, t[2], NULL, (float *)t[3]);
        break;
    case K_RMSNORM_BWD:
        norm_bwd_dx<<<rows, THREADS, 0, s>>>(dt, 1, d[1], 1, 0, 1, t[0], t[1], t[2], NULL, (const float *)t[3], t[4]);
        norm_bwd_params<<<(unsigned)d[1], THREADS, 0, s>>>(dt, d[1], d[0], 1, 1, d[1], t[0], t[1], NULL,
                                                           (const float *)t[3], t[5], NULL);
        break;
    case K_GROUPNORM_FWD: {
        const int64_t C = d[1], HW = d[2], G = d[3];
        norm_fwd<<<(unsigned)(d[0] * G), THREADS, 0, s>>>(dt, 0, C / G * HW, G, C / G, HW, eps, t[0], t[1], t[2], t[3],
                                                         (float *)t[4], (float *)t[5]);
        break;
    }
    case K_GROUPNORM_BWD_DX: {
        const int64_t C = d[1], HW = d[2], G = d[3];
        norm_bwd_dx<<<(unsigned)(d[0] * G), THREADS, 0, s>>>(dt, 0, C / G * HW, G, C / G, HW, t[0], t[1], t[2],
                                                            (const float *)t[3], (const float *)t[4], t[5]);
        break;
    }
    case K_GROUPNORM_BWD_PARAMS: {
        const int64_t C = d[1], HW = d[2], G = d[3];
        norm_bwd_params<<<(unsigned)C, THREADS, 0, s>>>(dt, C, d[0], HW, G, C / G, t[0], t[1], (const float *)t[2],
                                                        (const float *)t[3], t[4], t[5]);
        break;
    }
    case K_BIAS_BWD:
        bias_bwd<<<(unsigned)d[1], THREADS, 0, s>>>(dt, d[1], d[0], d[2], t[0], t[1]);
        break;
    case K_CROSS_ENTROPY_FWD:
        ce_fwd<<<rows, THREADS, 0, s>>>(dt, d[1], t[0], (const int64_t *)t[1], (float *)t[2], (float *)t[3]);
        break;
    case K_CROSS_ENTROPY_BWD:
        ce_bwd<<<rows, THREADS, 0, s>>>(dt, d[1], k->fparam[0], t[0], (const int64_t *)t[1], (const float *)t[2], t[3]);
        break;
    case K_EMBEDDING_FWD: {
        size_t n = (size_t)(d[0] * d[2]);
        embedding_fwd<<<grid_for(n), THREADS, 0, s>>>(dt, n, d[1], d[2], (const int64_t *)t[0], t[1], t[2]);
        break;
    }
    case K_EMBEDDING_BWD:
        return embedding_bwd(k, t, s, scratch);
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
