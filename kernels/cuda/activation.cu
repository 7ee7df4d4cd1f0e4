// activation.cu: CUDA GELU (erf and tanh), SiLU, ReLU and quick GELU, forward and backward, and
// the gated units GEGLU and SwiGLU: one thread per element, grid-stride, math from elementwise.h.
// Each element is read and written by the same thread, so y may be x (in-place ReLU) as on the CPU.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

enum act { ACT_GELU_ERF, ACT_GELU_TANH, ACT_SILU, ACT_RELU, ACT_QUICK_GELU };

__device__ inline float act_f(int a, float x)
{
    switch (a) {
    case ACT_SILU:
        return oom_silu(x);
    case ACT_RELU:
        return oom_relu(x);
    case ACT_QUICK_GELU:
        return oom_quick_gelu(x);
    default:
        return oom_gelu(x, a == ACT_GELU_TANH);
    }
}

// The activation's derivative at x (not ReLU's, whose backward is act_dx's own).
__device__ inline float act_grad(int a, float x)
{
    switch (a) {
    case ACT_SILU:
        return oom_silu_grad(x);
    case ACT_QUICK_GELU:
        return oom_quick_gelu_grad(x);
    default:
        return oom_gelu_grad(x, a == ACT_GELU_TANH);
    }
}

// dx from x and dy.
__device__ inline float act_dx(int a, float x, float dy)
{
    return a == ACT_RELU ? oom_relu_bwd(x, dy) : dy * act_grad(a, x);
}

__global__ void unary_fwd(int a, int dt, size_t n, const void *x, void *y)
{
    GRID_LOOP(i, n)
    stt(y, dt, i, act_f(a, ldt(x, dt, i)));
}

__global__ void unary_bwd(int a, int dt, size_t n, const void *x, const void *dy, void *dx)
{
    GRID_LOOP(i, n)
    stt(dx, dt, i, act_dx(a, ldt(x, dt, i), ldt(dy, dt, i)));
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

static cudaError_t act_fwd(int a, const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c)
{
    const size_t n = (size_t)k->dims[0];
    unary_fwd<<<grid_for(n), THREADS, 0, c->stream>>>(a, k->dtype, n, t[0], t[1]);
    return cudaGetLastError();
}

static cudaError_t act_bwd(int a, const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c)
{
    const size_t n = (size_t)k->dims[0];
    unary_bwd<<<grid_for(n), THREADS, 0, c->stream>>>(a, k->dtype, n, t[0], t[1], t[2]);
    return cudaGetLastError();
}

// GELU's dims[1] (GEGLU's dims[3]) picks tanh or erf.
static int gelu_of(int64_t approx)
{
    return approx ? ACT_GELU_TANH : ACT_GELU_ERF;
}

CUDA_KERNEL(cuda_gelu_fwd)
{
    return act_fwd(gelu_of(k->dims[1]), k, t, c);
}

CUDA_KERNEL(cuda_gelu_bwd)
{
    return act_bwd(gelu_of(k->dims[1]), k, t, c);
}

CUDA_KERNEL(cuda_silu_fwd)
{
    return act_fwd(ACT_SILU, k, t, c);
}

CUDA_KERNEL(cuda_silu_bwd)
{
    return act_bwd(ACT_SILU, k, t, c);
}

CUDA_KERNEL(cuda_relu_fwd)
{
    return act_fwd(ACT_RELU, k, t, c);
}

CUDA_KERNEL(cuda_relu_bwd)
{
    return act_bwd(ACT_RELU, k, t, c);
}

CUDA_KERNEL(cuda_quick_gelu_fwd)
{
    return act_fwd(ACT_QUICK_GELU, k, t, c);
}

CUDA_KERNEL(cuda_quick_gelu_bwd)
{
    return act_bwd(ACT_QUICK_GELU, k, t, c);
}

static cudaError_t glu_launch(int a, bool bwd, const struct kernel_call *k, void *const *t,
                              const struct cuda_kernel_ctx *c)
{
    const size_t m = (size_t)(k->dims[0] * k->dims[1]);
    const int packed = k->dims[2] != 0;
    if (bwd)
        glu_bwd<<<grid_for(m), THREADS, 0, c->stream>>>(a, packed, k->dtype, m, k->dims[1], t[0], t[1], t[2], t[3], t[4]);
    else
        glu_fwd<<<grid_for(m), THREADS, 0, c->stream>>>(a, packed, k->dtype, m, k->dims[1], t[0], t[1], t[2]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_geglu_fwd)
{
    return glu_launch(gelu_of(k->dims[3]), false, k, t, c);
}

CUDA_KERNEL(cuda_geglu_bwd)
{
    return glu_launch(gelu_of(k->dims[3]), true, k, t, c);
}

CUDA_KERNEL(cuda_swiglu_fwd)
{
    return glu_launch(ACT_SILU, false, k, t, c);
}

CUDA_KERNEL(cuda_swiglu_bwd)
{
    return glu_launch(ACT_SILU, true, k, t, c);
}
