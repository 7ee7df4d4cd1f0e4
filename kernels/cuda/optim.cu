// optim.cu: CUDA optimizer steps: AdamW with fp32 moments or with moments in the parameter's dtype,
// SGD with momentum and the EMA update (one thread per element, math from elementwise.h); 8-bit
// block-wise AdamW (one thread block per quantization block: dequantize, update, block absmax,
// requantize with the dynamic map); and Adafactor: row and column means of g^2 + eps1 summed in
// double as on the CPU (a block per row; a thread per column, rows in order), the mean row
// statistic, the update's sum of squares for clipping (fixed per-block partials, so the result is
// deterministic), then the step. Adafactor's update g / sqrt(v) is recomputed in the last pass
// instead of being stored, so its only scratch is a few KB from the caller's allocator.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

// The signed (m) and unsigned (v) dynamic maps, filled once from oom_qmap_fill on the host.
__constant__ float c_qmap[2][OOM_QMAP_SIZE];

static struct oom_adamw adamw_of(const struct kernel_call *k)
{
    return oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], kernel_adamw_eps(k), k->fparam[3], k->dims[1]);
}

__global__ void adamw_kernel(int dt, size_t n, struct oom_adamw a, void *param, const void *grad, float *m, float *v)
{
    GRID_LOOP(i, n)
    {
        float mi = m[i], vi = v[i];
        stt(param, dt, i, oom_adamw_elem(&a, ldt(param, dt, i), ldt(grad, dt, i), &mi, &vi));
        m[i] = mi;
        v[i] = vi;
    }
}

// One thread block per quantization block; the block's updated moments live in shared memory.
__global__ void adamw8_kernel(int dt, size_t n, int64_t block, struct oom_adamw a, void *param, const void *grad,
                              uint8_t *mq, uint8_t *vq, float *m_absmax, float *v_absmax)
{
    extern __shared__ float moments[]; // m[block], v[block]
    float *ms = moments, *vs = moments + block;
    size_t b0 = blockIdx.x * (size_t)block;
    int64_t len = n - b0 < (size_t)block ? (int64_t)(n - b0) : block;
    float mmax = 0.0f, vmax = 0.0f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        float mi = c_qmap[0][mq[b0 + i]] * m_absmax[blockIdx.x], vi = c_qmap[1][vq[b0 + i]] * v_absmax[blockIdx.x];
        stt(param, dt, b0 + i, oom_adamw_elem(&a, ldt(param, dt, b0 + i), ldt(grad, dt, b0 + i), &mi, &vi));
        ms[i] = mi;
        vs[i] = vi;
        mmax = fmaxf(mmax, fabsf(mi));
        vmax = fmaxf(vmax, vi);
    }
    mmax = block_reduce(mmax, true);
    vmax = block_reduce(vmax, true);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        mq[b0 + i] = oom_qmap_encode(c_qmap[0], mmax > 0.0f ? ms[i] / mmax : 0.0f);
        vq[b0 + i] = oom_qmap_encode(c_qmap[1], vmax > 0.0f ? vs[i] / vmax : 0.0f);
    }
    if (threadIdx.x == 0) {
        m_absmax[blockIdx.x] = mmax;
        v_absmax[blockIdx.x] = vmax;
    }
}

__global__ void ema_kernel(int dt, size_t n, float decay, const void *param, void *shadow)
{
    GRID_LOOP(i, n)
    stt(shadow, dt, i, oom_ema_elem(ldt(shadow, dt, i), ldt(param, dt, i), decay));
}

static cudaError_t qmap_upload(cudaStream_t s)
{
    static float host[2][OOM_QMAP_SIZE]; // static: the async copy reads it after we return
    static bool done;
    if (done)
        return cudaSuccess;
    oom_qmap_fill(1, host[0]);
    oom_qmap_fill(0, host[1]);
    cudaError_t rc = cudaMemcpyToSymbolAsync(c_qmap, host, sizeof host, 0, cudaMemcpyHostToDevice, s);
    done = rc == cudaSuccess;
    return rc;
}

__global__ void sgd_kernel(int dt, size_t n, struct oom_sgd s, void *param, const void *grad, void *buf)
{
    GRID_LOOP(i, n)
    {
        float b = oom_sgd_reads_buf(&s) ? ldt(buf, dt, i) : 0.0f;
        float p = oom_sgd_elem(&s, ldt(param, dt, i), ldt(grad, dt, i), &b);
        if (s.momentum != 0.0f)
            stt(buf, dt, i, b);
        stt(param, dt, i, p);
    }
}

__global__ void adamw_t_kernel(int dt, size_t n, struct oom_adamw a, void *param, const void *grad, void *m, void *v)
{
    GRID_LOOP(i, n)
    {
        float mi = ldt(m, dt, i), vi = ldt(v, dt, i);
        stt(param, dt, i, oom_adamw_elem(&a, ldt(param, dt, i), ldt(grad, dt, i), &mi, &vi));
        stt(m, dt, i, mi);
        stt(v, dt, i, vi);
    }
}

#define ADAFACTOR_PARTIALS 1024

// What Adafactor's passes hand each other on the device.
struct adafactor_scratch {
    double partial[ADAFACTOR_PARTIALS]; // per-block sums of the update's squares
    float row_mean;                     // mean of the updated row statistics (matrices)
    float clip_div;                     // max(1, RMS(update) / clip)
};

// Matrices, pass 1: one block per row r; rows[r] moves towards the row's mean of g^2 + eps1.
__global__ void adafactor_rows(int dt, int64_t C, struct oom_adafactor a, const void *grad, float *rows)
{
    const size_t base = blockIdx.x * (size_t)C;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        s += oom_adafactor_sq(&a, ldt(grad, dt, base + c));
    s = block_sum_f64(s);
    if (threadIdx.x == 0)
        rows[blockIdx.x] = oom_adafactor_ema(&a, rows[blockIdx.x], (float)(s / (double)C));
}

// Matrices, pass 2: one thread per column c, its rows summed in order.
__global__ void adafactor_cols(int dt, int64_t R, int64_t C, struct oom_adafactor a, const void *grad, float *cols)
{
    GRID_LOOP(c, C)
    {
        double s = 0.0;
        for (int64_t r = 0; r < R; r++)
            s += oom_adafactor_sq(&a, ldt(grad, dt, (size_t)r * C + c));
        cols[c] = oom_adafactor_ema(&a, cols[c], (float)(s / (double)R));
    }
}

// Matrices, pass 3 (one block): the mean of the updated row statistics.
__global__ void adafactor_row_mean(int64_t R, const float *rows, adafactor_scratch *w)
{
    double s = 0.0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
        s += rows[r];
    s = block_sum_f64(s);
    if (threadIdx.x == 0)
        w->row_mean = (float)(s / (double)R);
}

// The unclipped update of element i: from the factored statistics (C > 1) or from its own.
__device__ inline float adafactor_elem_update(int dt, int64_t R, int64_t C, const void *grad, const float *state,
                                              const adafactor_scratch *w, size_t i)
{
    const float g = ldt(grad, dt, i);
    if (C == 1)
        return oom_adafactor_update(g, state[i]);
    return oom_adafactor_update(g, oom_adafactor_factored(state[i / C], w->row_mean, state[R + i % C]));
}

// Pass 4: vectors first move each element's statistic; then each block sums its updates' squares.
__global__ void adafactor_sum_sq(int dt, size_t n, int64_t R, int64_t C, struct oom_adafactor a, const void *grad,
                                 float *state, adafactor_scratch *w)
{
    double s = 0.0;
    GRID_LOOP(i, n)
    {
        if (C == 1)
            state[i] = oom_adafactor_ema(&a, state[i], oom_adafactor_sq(&a, ldt(grad, dt, i)));
        const float u = adafactor_elem_update(dt, R, C, grad, state, w, i);
        s += (double)u * u;
    }
    s = block_sum_f64(s);
    if (threadIdx.x == 0)
        w->partial[blockIdx.x] = s;
}

// Pass 5 (one block): the clipping divisor from the partial sums, added in a fixed order.
__global__ void adafactor_clip(unsigned parts, size_t n, struct oom_adafactor a, adafactor_scratch *w)
{
    double s = 0.0;
    for (unsigned j = threadIdx.x; j < parts; j += blockDim.x)
        s += w->partial[j];
    s = block_sum_f64(s);
    if (threadIdx.x == 0)
        w->clip_div = oom_adafactor_clip_div(&a, s, n);
}

// Pass 6: param -= lr * update / clip_div.
__global__ void adafactor_apply(int dt, size_t n, int64_t R, int64_t C, struct oom_adafactor a, void *param,
                                const void *grad, const float *state, const adafactor_scratch *w)
{
    GRID_LOOP(i, n)
    stt(param, dt, i, oom_adafactor_step(&a, ldt(param, dt, i), adafactor_elem_update(dt, R, C, grad, state, w, i),
                                         w->clip_div));
}

CUDA_KERNEL(cuda_adamw)
{
    const size_t n = (size_t)k->dims[0];
    adamw_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, adamw_of(k), t[0], t[1], (float *)t[2],
                                                          (float *)t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_adamw8)
{
    const size_t n = (size_t)k->dims[0];
    const int64_t block = k->dims[3];
    const size_t shared = 2 * (size_t)block * sizeof(float);
    if (shared > 48 * 1024)
        return cuda_kernel_fail(c, cudaErrorNotSupported, "CUDA adamw8 supports blocks up to 6144 elements (got %lld)",
                                (long long)block);
    cudaError_t rc = qmap_upload(c->stream);
    if (rc != cudaSuccess)
        return rc;
    unsigned blocks = (unsigned)((n + block - 1) / block);
    adamw8_kernel<<<blocks, THREADS, shared, c->stream>>>(k->dtype, n, block, adamw_of(k), t[0], t[1], (uint8_t *)t[2],
                                                          (uint8_t *)t[3], (float *)t[4], (float *)t[5]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_ema)
{
    const size_t n = (size_t)k->dims[0];
    ema_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, k->fparam[0], t[0], t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_sgd)
{
    const size_t n = (size_t)k->dims[0];
    sgd_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, oom_sgd_setup(k->fparam, k->dims[1]), t[0], t[1],
                                                        t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_adamw_t)
{
    const size_t n = (size_t)k->dims[0];
    adamw_t_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, adamw_of(k), t[0], t[1], t[2], t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_adafactor)
{
    const int dt = k->dtype;
    const int64_t R = k->dims[0], C = k->dims[1];
    const size_t n = (size_t)(R * C);
    const struct oom_adafactor a = oom_adafactor_setup(k->fparam, k->dims[2]);
    float *state = (float *)t[2];
    adafactor_scratch *w = (adafactor_scratch *)c->scratch_get(c->user, sizeof *w);
    if (!w)
        return cudaErrorMemoryAllocation;
    if (C > 1) {
        adafactor_rows<<<(unsigned)R, THREADS, 0, c->stream>>>(dt, C, a, t[1], state);
        adafactor_cols<<<grid_for((size_t)C), THREADS, 0, c->stream>>>(dt, R, C, a, t[1], state + R);
        adafactor_row_mean<<<1, THREADS, 0, c->stream>>>(R, state, w);
    }
    const unsigned parts = grid_for(n) < ADAFACTOR_PARTIALS ? grid_for(n) : ADAFACTOR_PARTIALS;
    adafactor_sum_sq<<<parts, THREADS, 0, c->stream>>>(dt, n, R, C, a, t[1], state, w);
    adafactor_clip<<<1, THREADS, 0, c->stream>>>(parts, n, a, w);
    adafactor_apply<<<grid_for(n), THREADS, 0, c->stream>>>(dt, n, R, C, a, t[0], t[1], state, w);
    const cudaError_t rc = cudaGetLastError();
    c->scratch_put(c->user, w);
    return rc;
}
