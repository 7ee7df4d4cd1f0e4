/* transpose.h: an fp32 matrix transposed into another, for GEMMs that the BLAS runs fastest untransposed
 * (conv2d's backward to the filter, attention's backward). */
#ifndef OOMLAB_CPU_TRANSPOSE_H
#define OOMLAB_CPU_TRANSPOSE_H

#include <stdint.h>

/* dst[q][k] (rows dk apart) = src[k][q] (rows sq apart) for k < K, q < Q. */
void f32_transpose(float *restrict dst, int64_t dk, const float *restrict src, int64_t sq, int64_t K, int64_t Q);

#endif
