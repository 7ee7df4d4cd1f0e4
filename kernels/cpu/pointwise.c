/* pointwise.c: CPU casts, add, scale, fill, per-channel bias (+ backward) and nearest 2x
 * upsampling (+ backward). */
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_cast(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int dst = (int)k->dims[1];
    if (dst == k->dtype) {
        memmove(t[1], t[0], (size_t)k->dims[0] * dtype_size((enum dtype)dst));
        return 0;
    }
    if (k->dtype == DT_F32) {
        tensor_from_f32(t[1], dst, t[0], (size_t)k->dims[0]);
        return 0;
    }
    if (dst == DT_F32) {
        tensor_to_f32(t[1], t[0], k->dtype, (size_t)k->dims[0]);
        return 0;
    }
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) /* bf16 <-> fp16: exact via fp32, rounded once */
        st(t[1], dst, i, ld(t[0], k->dtype, i));
    return 0;
}

int cpu_add(const struct kernel_call *k, void *const *t, struct err *e)
{
    const float alpha = k->fparam[0], beta = k->fparam[1];
    if (k->dtype == DT_F32) {
        const float *a = t[0], *b = t[1];
        float *y = t[2];
        for (size_t i = 0; i < (size_t)k->dims[0]; i++)
            y[i] = alpha * a[i] + beta * b[i];
        return 0;
    }
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, alpha * ld(t[0], k->dtype, i) + beta * ld(t[1], k->dtype, i));
    return 0;
}

int cpu_scale(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[1], k->dtype, i, k->fparam[0] * ld(t[0], k->dtype, i));
    return 0;
}

int cpu_fill(const struct kernel_call *k, void *const *t, struct err *e)
{
    if (k->fparam[0] == 0.0f) {
        memset(t[0], 0, (size_t)k->dims[0] * dtype_size((enum dtype)k->dtype));
        return 0;
    }
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[0], k->dtype, i, k->fparam[0]);
    return 0;
}

int cpu_bias_add(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t outer = k->dims[0], C = k->dims[1], inner = k->dims[2];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < C; c++) {
            float b = ld(t[1], k->dtype, (size_t)c);
            size_t base = (size_t)((o * C + c) * inner);
            for (int64_t i = 0; i < inner; i++)
                st(t[2], k->dtype, base + i, ld(t[0], k->dtype, base + i) + b);
        }
    return 0;
}

int cpu_bias_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t outer = k->dims[0], C = k->dims[1], inner = k->dims[2];
    for (int64_t c = 0; c < C; c++) {
        double s = 0.0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++)
                s += ld(t[0], k->dtype, (size_t)((o * C + c) * inner + i));
        st(t[1], k->dtype, (size_t)c, (float)s);
    }
    return 0;
}

int cpu_upsample2x_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t planes = k->dims[0] * k->dims[1], H = k->dims[2], W = k->dims[3];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < 2 * H; h++)
            for (int64_t w = 0; w < 2 * W; w++)
                st(t[1], k->dtype, (size_t)((p * 2 * H + h) * 2 * W + w),
                   ld(t[0], k->dtype, (size_t)((p * H + h / 2) * W + w / 2)));
    return 0;
}

int cpu_upsample2x_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t planes = k->dims[0] * k->dims[1], H = k->dims[2], W = k->dims[3];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                size_t top = (size_t)((p * 2 * H + 2 * h) * 2 * W + 2 * w), below = top + (size_t)(2 * W);
                float s = ld(t[0], k->dtype, top) + ld(t[0], k->dtype, top + 1) + ld(t[0], k->dtype, below) +
                          ld(t[0], k->dtype, below + 1);
                st(t[1], k->dtype, (size_t)((p * H + h) * W + w), s);
            }
    return 0;
}
