/* tensor_io.c: whole-buffer fp32 <-> fp32/bf16/fp16 conversion (one tight loop per dtype) and
 * the scratch buffers CPU kernels use. */
#include "cpu/tensor_io.h"

#include "cpu/cpu_kernels.h"

#include <string.h>

void tensor_to_f32(float *dst, const void *src, int dt, size_t n)
{
    const uint16_t *h = src;
    if (dt == DT_BF16)
        for (size_t i = 0; i < n; i++)
            dst[i] = oom_bf16_to_f32(h[i]);
    else if (dt == DT_F16)
        for (size_t i = 0; i < n; i++)
            dst[i] = oom_f16_to_f32(h[i]);
    else if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
}

void tensor_from_f32(void *dst, int dt, const float *src, size_t n)
{
    uint16_t *h = dst;
    if (dt == DT_BF16)
        for (size_t i = 0; i < n; i++)
            h[i] = oom_f32_to_bf16(src[i]);
    else if (dt == DT_F16)
        for (size_t i = 0; i < n; i++)
            h[i] = oom_f32_to_f16(src[i]);
    else if (dst != src)
        memcpy(dst, src, n * sizeof *src);
}

float *cpu_scratch(size_t n, const char *what, struct err *e)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p)
        err_set(e, ERR_INTERNAL, "out of host memory for %zu floats of %s scratch", n, what);
    return p;
}
