/* tensor_io.h: reading and writing fp32/bf16/fp16 tensor elements as float in the CPU kernels,
 * and whole-buffer conversion to and from fp32 scratch (for BLAS calls). */
#ifndef OOMLAB_TENSOR_IO_H
#define OOMLAB_TENSOR_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dtype.h"
#include "elementwise.h"

static inline float ld(const void *p, int dt, size_t i)
{
    switch (dt) {
    case DT_BF16:
        return oom_bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F16:
        return oom_f16_to_f32(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

static inline void st(void *p, int dt, size_t i, float v)
{
    switch (dt) {
    case DT_BF16:
        ((uint16_t *)p)[i] = oom_f32_to_bf16(v);
        break;
    case DT_F16:
        ((uint16_t *)p)[i] = oom_f32_to_f16(v);
        break;
    default:
        ((float *)p)[i] = v;
    }
}

/* dst[i] = src[i] as fp32 for n elements (kept out of line: the loops are the hot path). */
void tensor_to_f32(float *dst, const void *src, int dt, size_t n);
/* dst[i] = src[i] converted from fp32, rounding to nearest even. */
void tensor_from_f32(void *dst, int dt, const float *src, size_t n);

#endif
