// activation_extra.cu: CUDA twins of ReLU and quick GELU (forward and backward, one thread per
// element) and of the rotary embedding: one thread per (token, pair index d) evaluates the angle once
// and rotates pair (d, d + D/2) of each of the first H heads; when y is not x, the rest of each row
// is copied bit for bit (the CPU's memmove). Every element is read and written by the same thread,
// so y may be x (in-place ReLU, rope on q or on k inside kv) exactly as on the CPU.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

enum extra_act { ACT_RELU, ACT_QUICK_GELU };

__global__ void extra_act_fwd(int a, int dt, size_t n, const void *x, void *y)
{
    GRID_LOOP(i, n)
    {
        float v = ldt(x, dt, i);
        stt(y, dt, i, a == ACT_RELU ? oom_relu(v) : oom_quick_gelu(v));
    }
}

__global__ void extra_act_bwd(int a, int dt, size_t n, const void *x, const void *dy, void *dx)
{
    GRID_LOOP(i, n)
    {
        float v = ldt(x, dt, i), g = ldt(dy, dt, i);
        stt(dx, dt, i, a == ACT_RELU ? oom_relu_bwd(v, g) : g * oom_quick_gelu_grad(v));
    }
}

// n = B * T * D/2; token = b * T + t, whose position is t.
__global__ void rope_rotate(int dt, size_t n, int64_t T, int64_t H, int64_t D, int64_t row, float theta, int inverse,
                            const void *x, void *y)
{
    const int64_t half = D / 2;
    GRID_LOOP(e, n)
    {
        const int64_t token = (int64_t)e / half, d = (int64_t)e % half;
        float c, s, y0, y1;
        oom_rope_cos_sin(token % T, d, D, theta, inverse, &c, &s);
        for (int64_t h = 0; h < H; h++) {
            const size_t lo = (size_t)(token * row + h * D + d), hi = lo + (size_t)half;
            oom_rope_rotate(ldt(x, dt, lo), ldt(x, dt, hi), c, s, &y0, &y1);
            stt(y, dt, lo, y0);
            stt(y, dt, hi, y1);
        }
    }
}

// Columns [rotated, row) of every token row, x to y unchanged; n = tokens * (row - rotated).
__global__ void rope_copy_rest(int dt, size_t n, int64_t rotated, int64_t row, const void *x, void *y)
{
    const int64_t rest = row - rotated;
    GRID_LOOP(e, n)
    {
        const size_t at = (size_t)((int64_t)e / rest * row + rotated + (int64_t)e % rest);
        copy_elem(dt, x, at, y, at);
    }
}

static cudaError_t rope(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int64_t B = k->dims[0], T = k->dims[1], H = k->dims[2], D = k->dims[3], row = k->dims[4];
    const float theta = kernel_rope_theta(k);
    const size_t pairs = (size_t)(B * T * (D / 2)), rest = (size_t)(B * T * (row - H * D));
    rope_rotate<<<grid_for(pairs), THREADS, 0, s>>>(k->dtype, pairs, T, H, D, row, theta, k->dims[5] != 0, t[0], t[1]);
    if (t[1] != t[0] && rest > 0)
        rope_copy_rest<<<grid_for(rest), THREADS, 0, s>>>(k->dtype, rest, H * D, row, t[0], t[1]);
    return cudaGetLastError();
}

cudaError_t cuda_activation_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const size_t n = (size_t)k->dims[0];
    switch (k->kernel) {
    case K_RELU_FWD:
        extra_act_fwd<<<grid_for(n), THREADS, 0, s>>>(ACT_RELU, k->dtype, n, t[0], t[1]);
        break;
    case K_RELU_BWD:
        extra_act_bwd<<<grid_for(n), THREADS, 0, s>>>(ACT_RELU, k->dtype, n, t[0], t[1], t[2]);
        break;
    case K_QUICK_GELU_FWD:
        extra_act_fwd<<<grid_for(n), THREADS, 0, s>>>(ACT_QUICK_GELU, k->dtype, n, t[0], t[1]);
        break;
    case K_QUICK_GELU_BWD:
        extra_act_bwd<<<grid_for(n), THREADS, 0, s>>>(ACT_QUICK_GELU, k->dtype, n, t[0], t[1], t[2]);
        break;
    case K_ROPE:
        return rope(k, t, s);
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
