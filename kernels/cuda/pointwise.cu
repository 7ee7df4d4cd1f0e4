// pointwise.cu: CUDA GELU, SiLU, GEGLU/SwiGLU, dropout, casts, add, scale, fill, bias add and
// nearest 2x upsampling (+ backward): one thread per element, grid-stride, math from elementwise.h.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

enum act { ACT_GELU_ERF, ACT_GELU_TANH, ACT_SILU };

__device__ inline float act_f(int a, float x)
{
    return a == ACT_SILU ? oom_silu(x) : oom_gelu(x, a == ACT_GELU_TANH);
}

__device__ inline float act_grad(int a, float x)
{
    return a == ACT_SILU ? oom_silu_grad(x) : oom_gelu_grad(x, a == ACT_GELU_TANH);
}

__global__ void unary_fwd(int a, int dt, size_t n, const void *x, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, act_f(a, ldt(x, dt, i)));
}

__global__ void unary_bwd(int a, int dt, size_t n, const void *x, const void *dy, void *dx)
{
    GRID_LOOP(i, n)
    stt(dx, dt, i, ldt(dy, dt, i) * act_grad(a, ldt(x, dt, i)));
}

// Gated units: element (r, f) of gate and up, separate or packed rows [up | gate].
__device__ inline void glu_index(int packed, int64_t F, size_t i, size_t *gi, size_t *ui)
{
    size_t r = i / F, f = i % F;
    if (packed) {
        *ui = r * 2 * F + f;
        *gi = *ui + F;
    } else {
        *gi = *ui = i;
    }
}

__global__ void glu_fwd(int a, int packed, int dt, size_t n, int64_t F, const void *gate, const void *up, void *y)
{
    GRID_LOOP(i, n)
    {
        size_t gi, ui;
        glu_index(packed, F, i, &gi, &ui);
        stt(y, dt, i, act_f(a, ldt(gate, dt, gi)) * ldt(up, dt, ui));
    }
}

__global__ void glu_bwd(int a, int packed, int dt, size_t n, int64_t F, const void *gate, const void *up,
                        const void *dy, void *dgate, void *dup)
{
    GRID_LOOP(i, n)
    {
        size_t gi, ui;
        glu_index(packed, F, i, &gi, &ui);
        float g = ldt(gate, dt, gi), u = ldt(up, dt, ui), d = ldt(dy, dt, i);
        stt(dgate, dt, gi, d * u * act_grad(a, g));
        stt(dup, dt, ui, d * act_f(a, g));
    }
}

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

__global__ void upsample_fwd(int dt, size_t n_out, int64_t H, int64_t W, const void *x, void *y)
{
    GRID_LOOP(i, n_out)
    {
        size_t w = i % (2 * W), h = i / (2 * W) % (2 * H), plane = i / (4 * H * W);
        stt(y, dt, i, ldt(x, dt, (plane * H + h / 2) * W + w / 2));
    }
}

__global__ void upsample_bwd(int dt, size_t n_in, int64_t H, int64_t W, const void *dy, void *dx)
{
    GRID_LOOP(i, n_in)
    {
        size_t w = i % W, h = i / W % H, plane = i / (H * W);
        size_t top = (plane * 2 * H + 2 * h) * 2 * W + 2 * w, below = top + 2 * W;
        stt(dx, dt, i, ldt(dy, dt, top) + ldt(dy, dt, top + 1) + ldt(dy, dt, below) + ldt(dy, dt, below + 1));
    }
}

cudaError_t cuda_pointwise_launch(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int dt = k->dtype;
    const int64_t *d = k->dims;
    const size_t n = (size_t)d[0];
    const int gelu = d[1] ? ACT_GELU_TANH : ACT_GELU_ERF;
    switch (k->kernel) {
    case K_GELU_FWD:
        unary_fwd<<<grid_for(n), THREADS, 0, s>>>(gelu, dt, n, t[0], t[1]);
        break;
    case K_GELU_BWD:
        unary_bwd<<<grid_for(n), THREADS, 0, s>>>(gelu, dt, n, t[0], t[1], t[2]);
        break;
    case K_SILU_FWD:
        unary_fwd<<<grid_for(n), THREADS, 0, s>>>(ACT_SILU, dt, n, t[0], t[1]);
        break;
    case K_SILU_BWD:
        unary_bwd<<<grid_for(n), THREADS, 0, s>>>(ACT_SILU, dt, n, t[0], t[1], t[2]);
        break;
    case K_GEGLU_FWD:
    case K_SWIGLU_FWD: {
        int a = k->kernel == K_SWIGLU_FWD ? ACT_SILU : d[3] ? ACT_GELU_TANH : ACT_GELU_ERF;
        size_t m = (size_t)(d[0] * d[1]);
        glu_fwd<<<grid_for(m), THREADS, 0, s>>>(a, d[2] != 0, dt, m, d[1], t[0], t[1], t[2]);
        break;
    }
    case K_GEGLU_BWD:
    case K_SWIGLU_BWD: {
        int a = k->kernel == K_SWIGLU_BWD ? ACT_SILU : d[3] ? ACT_GELU_TANH : ACT_GELU_ERF;
        size_t m = (size_t)(d[0] * d[1]);
        glu_bwd<<<grid_for(m), THREADS, 0, s>>>(a, d[2] != 0, dt, m, d[1], t[0], t[1], t[2], t[3], t[4]);
        break;
    }
    case K_DROPOUT_FWD:
        dropout_fwd<<<grid_for(n), THREADS, 0, s>>>(dt, n, oom_dropout_stream((uint64_t)d[1]),
                                                     oom_dropout_threshold(k->fparam[0]), 1.0f / (1.0f - k->fparam[0]),
                                                     t[0], t[1], (uint8_t *)t[2]);
        break;
    case K_DROPOUT_BWD:
        dropout_bwd<<<grid_for(n), THREADS, 0, s>>>(dt, n, 1.0f / (1.0f - k->fparam[0]), t[0], (const uint8_t *)t[1],
                                                     t[2]);
        break;
    case K_CAST:
        cast_kernel<<<grid_for(n), THREADS, 0, s>>>(dt, (int)d[1], n, t[0], t[1]);
        break;
    case K_ADD:
        add_kernel<<<grid_for(n), THREADS, 0, s>>>(dt, n, k->fparam[0], k->fparam[1], t[0], t[1], t[2]);
        break;
    case K_SCALE:
        scale_kernel<<<grid_for(n), THREADS, 0, s>>>(dt, n, k->fparam[0], t[0], t[1]);
        break;
    case K_FILL:
        fill_kernel<<<grid_for(n), THREADS, 0, s>>>(dt, n, k->fparam[0], t[0]);
        break;
    case K_BIAS_ADD: {
        size_t m = (size_t)(d[0] * d[1] * d[2]);
        bias_add_kernel<<<grid_for(m), THREADS, 0, s>>>(dt, m, d[1], d[2], t[0], t[1], t[2]);
        break;
    }
    case K_UPSAMPLE2X_FWD: {
        size_t m = (size_t)(4 * d[0] * d[1] * d[2] * d[3]);
        upsample_fwd<<<grid_for(m), THREADS, 0, s>>>(dt, m, d[2], d[3], t[0], t[1]);
        break;
    }
    case K_UPSAMPLE2X_BWD: {
        size_t m = (size_t)(d[0] * d[1] * d[2] * d[3]);
        upsample_bwd<<<grid_for(m), THREADS, 0, s>>>(dt, m, d[2], d[3], t[0], t[1]);
        break;
    }
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
