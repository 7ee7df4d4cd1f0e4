/* cpu_bf16x8.h: eight bf16 values to and from an AVX2 vector of fp32, with elementwise.h's
 * rounding (to nearest even; a NaN stays a quiet NaN, as oom_f32_to_bf16 makes it). gcc's own
 * vectorization of oom_f32_to_bf16 takes half as long again: this is what the bf16 loops that
 * run at memory speed use. x86-64 only; callers guard with OOM_HAVE_BF16X8. */
#ifndef OOMLAB_CPU_BF16X8_H
#define OOMLAB_CPU_BF16X8_H

#if defined(__x86_64__) && defined(__GNUC__)
#define OOM_HAVE_BF16X8 1
#include <immintrin.h>
#include <stdint.h>

__attribute__((target("avx2,fma"))) static inline __m256 bf16x8_load(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

__attribute__((target("avx2,fma"))) static inline void bf16x8_store(uint16_t *p, __m256 f)
{
    const __m256i u = _mm256_castps_si256(f), hi = _mm256_srli_epi32(u, 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    /* every lane is in [0, 0xffff]: the unsigned-saturating pack keeps it */
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}
#endif

#endif
