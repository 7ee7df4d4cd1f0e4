/* tensor_io.c: whole-buffer fp32 <-> fp32/bf16/fp16 conversion (vectorized, one loop per dtype),
 * the scratch buffers CPU kernels use and the range check of integer ids. */
#include "cpu/tensor_io.h"

#include <string.h>

#include "cpu/cpu_bf16x8.h"
#include "cpu/cpu_vec.h"

CPU_BODY void bf16_to_f32_body(float *restrict dst, const uint16_t *restrict h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oom_bf16_to_f32(h[i]);
}

CPU_BODY void f16_to_f32_body(float *restrict dst, const uint16_t *restrict h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oom_f16_to_f32(h[i]);
}

CPU_BODY void f32_to_bf16_body(uint16_t *restrict h, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = oom_f32_to_bf16(src[i]);
}

CPU_BODY void f32_to_f16_body(uint16_t *restrict h, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = oom_f32_to_f16(src[i]);
}

CPU_MULTIVERSION(bf16_to_f32, (float *restrict dst, const uint16_t *restrict h, size_t n), (dst, h, n))
CPU_MULTIVERSION(f16_to_f32, (float *restrict dst, const uint16_t *restrict h, size_t n), (dst, h, n))
#ifdef OOM_HAVE_BF16X8
__attribute__((target("avx2,fma"))) static void f32_to_bf16_avx2(uint16_t *restrict h, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        bf16x8_store(h + i, _mm256_loadu_ps(src + i));
    f32_to_bf16_body(h + i, src + i, n - i);
}
#endif
CPU_DISPATCH(f32_to_bf16, (uint16_t *restrict h, const float *restrict src, size_t n), (h, src, n))
CPU_MULTIVERSION(f32_to_f16, (uint16_t *restrict h, const float *restrict src, size_t n), (h, src, n))

void tensor_to_f32(float *dst, const void *src, int dt, size_t n)
{
    if (dt == DT_BF16)
        bf16_to_f32(dst, src, n);
    else if (dt == DT_F16)
        f16_to_f32(dst, src, n);
    else if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
}

void tensor_from_f32(void *dst, int dt, const float *src, size_t n)
{
    if (dt == DT_BF16)
        f32_to_bf16(dst, src, n);
    else if (dt == DT_F16)
        f32_to_f16(dst, src, n);
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

int cpu_id_check(const char *name, int64_t row, int64_t id, int64_t limit, int allow_negative, struct err *e)
{
    if (id >= limit || (id < 0 && !allow_negative))
        return err_set(e, ERR_INPUT, "%s: row %lld has id %lld outside [0, %lld)", name, (long long)row,
                       (long long)id, (long long)limit);
    return 0;
}
