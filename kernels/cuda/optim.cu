// optim.cu: CUDA AdamW (fp32 moments), 8-bit block-wise AdamW (one thread block per quantization
// block: dequantize, update, block absmax, requantize with the dynamic map) and the EMA update.
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

cudaError_t cuda_optim_launch(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const size_t n = (size_t)k->dims[0];
    switch (k->kernel) {
    case K_ADAMW:
        adamw_kernel<<<grid_for(n), THREADS, 0, s>>>(k->dtype, n, adamw_of(k), t[0], t[1], (float *)t[2], (float *)t[3]);
        break;
    case K_ADAMW8: {
        const int64_t block = k->dims[3];
        const size_t shared = 2 * (size_t)block * sizeof(float);
        if (shared > 48 * 1024)
            return cudaErrorNotSupported;
        cudaError_t rc = qmap_upload(s);
        if (rc != cudaSuccess)
            return rc;
        unsigned blocks = (unsigned)((n + block - 1) / block);
        adamw8_kernel<<<blocks, THREADS, shared, s>>>(k->dtype, n, block, adamw_of(k), t[0], t[1], (uint8_t *)t[2],
                                                      (uint8_t *)t[3], (float *)t[4], (float *)t[5]);
        break;
    }
    case K_EMA:
        ema_kernel<<<grid_for(n), THREADS, 0, s>>>(k->dtype, n, k->fparam[0], t[0], t[1]);
        break;
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
