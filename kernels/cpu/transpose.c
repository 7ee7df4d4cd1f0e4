/* transpose.c: f32_transpose (transpose.h), with 8 x 8 blocks in AVX registers where the CPU has AVX2. */
#include "cpu/transpose.h"

#include "cpu/cpu_bf16x8.h"
#include "cpu/cpu_vec.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* In 16 x 16 blocks, which stay in cache. */
CPU_BODY void blocked_transpose_body(float *restrict dst, int64_t dk, const float *restrict src, int64_t sq, int64_t K, int64_t Q)
{
    for (int64_t k0 = 0; k0 < K; k0 += 16)
        for (int64_t q0 = 0; q0 < Q; q0 += 16)
            for (int64_t k = k0; k < min64(k0 + 16, K); k++)
                for (int64_t q = q0; q < min64(q0 + 16, Q); q++)
                    dst[q * dk + k] = src[k * sq + q];
}

#ifdef OOM_HAVE_BF16X8
/* The same by 8 x 8 blocks in AVX registers (unpack, shuffle, swap of 128-bit halves). */
__attribute__((target("avx2,fma"))) static void blocked_transpose_avx2(float *restrict dst, int64_t dk, const float *restrict src,
                                                               int64_t sq, int64_t K, int64_t Q)
{
    const int64_t K8 = K / 8 * 8, Q8 = Q / 8 * 8;
    for (int64_t k = 0; k < K8; k += 8)
        for (int64_t q = 0; q < Q8; q += 8) {
            __m256 r[8], u[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(src + (k + i) * sq + q);
            for (int i = 0; i < 8; i += 2) {
                u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) {
                r[i] = _mm256_shuffle_ps(u[i], u[i + 2], 0x44);
                r[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], 0xee);
                r[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0x44);
                r[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0xee);
            }
            for (int i = 0; i < 4; i++) {
                _mm256_storeu_ps(dst + (q + i) * dk + k, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
                _mm256_storeu_ps(dst + (q + i + 4) * dk + k, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
            }
        }
    blocked_transpose_body(dst + Q8 * dk, dk, src + Q8, sq, K, Q - Q8); /* the last columns, then the last rows */
    blocked_transpose_body(dst + K8, dk, src + K8 * sq, sq, K - K8, Q8);
}
#endif
CPU_DISPATCH(blocked_transpose, (float *restrict dst, int64_t dk, const float *restrict src, int64_t sq, int64_t K, int64_t Q),
             (dst, dk, src, sq, K, Q))

void f32_transpose(float *restrict dst, int64_t dk, const float *restrict src, int64_t sq, int64_t K, int64_t Q)
{
    blocked_transpose(dst, dk, src, sq, K, Q);
}
