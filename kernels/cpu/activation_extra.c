/* activation_extra.c: CPU ReLU and quick GELU (x * sigmoid(1.702 x), CLIP's activation), forward
 * and backward (unary activations, cpu_unary.h; ReLU on bf16/fp16 works on the bit patterns), and
 * the rotary position embedding (forward rotation, or its inverse for backward). */
#include <string.h>

#include "cpu/cpu_kernels_extra.h"
#include "cpu/cpu_unary.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static inline float quick_gelu_dx(float x, float dy)
{
    return dy * oom_quick_gelu_grad(x);
}

CPU_UNARY(relu, oom_relu, oom_relu_bwd, 0)
CPU_UNARY(quick_gelu, oom_quick_gelu, quick_gelu_dx, 1)

/* ReLU on bf16 or fp16 bit patterns, with the bits that converting, computing in fp32 and
 * rounding give: x > 0 is a positive pattern up to inf (above it, NaN); otherwise +0. In
 * backward, dy passes as it is unless it is a NaN, which rounding makes quiet: bf16 keeps its
 * payload and sets bit 6, fp16 becomes 0x7e00 with its sign (nan_keep, nan_set). */
struct relu16 {
    int16_t inf;
    uint16_t nan_keep, nan_set;
};

static struct relu16 relu16_of(int dt)
{
    return dt == DT_BF16 ? (struct relu16){0x7f80, 0xffff, 0x0040} : (struct relu16){0x7c00, 0x8000, 0x7e00};
}

CPU_BODY void relu16_fwd_body(uint16_t *y, const uint16_t *x, size_t n, struct relu16 r)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int16_t s = (int16_t)x[i];
        y[i] = s > 0 && s <= r.inf ? x[i] : 0;
    }
}

CPU_BODY void relu16_bwd_body(uint16_t *dx, const uint16_t *x, const uint16_t *dy, size_t n, struct relu16 r)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int16_t s = (int16_t)x[i];
        uint16_t d = dy[i];
        d = (int16_t)(d & 0x7fff) > r.inf ? (uint16_t)((d & r.nan_keep) | r.nan_set) : d;
        dx[i] = s > 0 && s <= r.inf ? d : 0;
    }
}

CPU_MULTIVERSION(relu16_fwd, (uint16_t * y, const uint16_t *x, size_t n, struct relu16 r), (y, x, n, r))
CPU_MULTIVERSION(relu16_bwd, (uint16_t * dx, const uint16_t *x, const uint16_t *dy, size_t n, struct relu16 r),
                 (dx, x, dy, n, r))

static void relu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (k->dtype == DT_F32)
        cpu_unary_fwd(k, t, i0, len, &relu);
    else
        relu16_fwd((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, len, relu16_of(k->dtype));
}

static void relu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (k->dtype == DT_F32)
        cpu_unary_bwd(k, t, i0, len, &relu);
    else
        relu16_bwd((uint16_t *)t[2] + i0, (const uint16_t *)t[0] + i0, (const uint16_t *)t[1] + i0, len,
                   relu16_of(k->dtype));
}

static void quick_gelu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, &quick_gelu);
}

static void quick_gelu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, &quick_gelu);
}

int cpu_relu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, relu_fwd_chunk);
    return 0;
}

int cpu_relu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, relu_bwd_chunk);
    return 0;
}

int cpu_quick_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, quick_gelu_fwd_chunk);
    return 0;
}

int cpu_quick_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, quick_gelu_bwd_chunk);
    return 0;
}

int cpu_rope(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t B = k->dims[0], T = k->dims[1], H = k->dims[2], D = k->dims[3], row = k->dims[4], half = D / 2;
    const float theta = kernel_rope_theta(k);
    if (t[1] != t[0])
        memmove(t[1], t[0], (size_t)(B * T * row) * dtype_size((enum dtype)k->dtype));
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < T; p++)
            for (int64_t d = 0; d < half; d++) {
                float c, s, y0, y1;
                oom_rope_cos_sin(p, d, D, theta, k->dims[5] != 0, &c, &s);
                for (int64_t h = 0; h < H; h++) {
                    size_t lo = (size_t)((b * T + p) * row + h * D + d), hi = lo + (size_t)half;
                    oom_rope_rotate(ld(t[0], k->dtype, lo), ld(t[0], k->dtype, hi), c, s, &y0, &y1);
                    st(t[1], k->dtype, lo, y0);
                    st(t[1], k->dtype, hi, y1);
                }
            }
    return 0;
}
