/* activation_extra.c: CPU ReLU and quick GELU (x * sigmoid(1.702 x), CLIP's activation), forward
 * and backward, and the rotary position embedding (forward rotation, or its inverse for backward). */
#include <math.h>
#include <string.h>

#include "cpu/cpu_kernels_extra.h"
#include "cpu/tensor_io.h"

#define QUICK_GELU_K 1.702f

int cpu_relu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float x = ld(t[0], k->dtype, i);
        st(t[1], k->dtype, i, x > 0.0f ? x : 0.0f);
    }
    return 0;
}

int cpu_relu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, ld(t[0], k->dtype, i) > 0.0f ? ld(t[1], k->dtype, i) : 0.0f);
    return 0;
}

int cpu_quick_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float x = ld(t[0], k->dtype, i);
        st(t[1], k->dtype, i, x * oom_sigmoid(QUICK_GELU_K * x));
    }
    return 0;
}

int cpu_quick_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float x = ld(t[0], k->dtype, i), s = oom_sigmoid(QUICK_GELU_K * x);
        st(t[2], k->dtype, i, ld(t[1], k->dtype, i) * (s + QUICK_GELU_K * x * s * (1.0f - s)));
    }
    return 0;
}

int cpu_rope(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t B = k->dims[0], T = k->dims[1], H = k->dims[2], D = k->dims[3], row = k->dims[4], half = D / 2;
    const float theta = k->fparam[0] != 0.0f ? k->fparam[0] : 10000.0f, sign = k->dims[5] ? -1.0f : 1.0f;
    if (t[1] != t[0])
        memmove(t[1], t[0], (size_t)(B * T * row) * dtype_size((enum dtype)k->dtype));
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < T; p++)
            for (int64_t d = 0; d < half; d++) {
                double angle = (double)p * pow((double)theta, -2.0 * (double)d / (double)D);
                float c = (float)cos(angle), s = sign * (float)sin(angle);
                for (int64_t h = 0; h < H; h++) {
                    size_t lo = (size_t)((b * T + p) * row + h * D + d), hi = lo + (size_t)half;
                    float x0 = ld(t[0], k->dtype, lo), x1 = ld(t[0], k->dtype, hi);
                    st(t[1], k->dtype, lo, x0 * c - x1 * s);
                    st(t[1], k->dtype, hi, x1 * c + x0 * s);
                }
            }
    return 0;
}
