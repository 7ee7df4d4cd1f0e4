/* attn_exp.c: the exponentials of attention's softmax, x[j] = exp(x[j] - m) over a row of scores,
 * with their sum. libmvec's expf (cpu_vec.h) costs a call per eight values, a fifth of the fused
 * forward's time; this inlines Cephes' expf (range reduction by ln 2 split in two, degree-6
 * polynomial, relative error below 2e-7) into the loop. Scores far below the row's max (masked:
 * -inf) give exactly 0, as expf does. AVX-512 when the CPU has it, else AVX2 + FMA, else libmvec. */
#include <math.h>

#include "cpu/attn_cpu.h"
#include "cpu/cpu_vec.h"

#define EXP_LO (-87.33654f) /* below: 0 (exp is subnormal there) */
#define EXP_HI 88.0f        /* above: clamped (2^127 at most); scores minus their max are <= 0 */

CPU_BODY float exp_row_body(float *restrict x, int64_t n, float m)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        float p = expf(x[j] - m);
        x[j] = p;
        sum += p;
    }
    return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline __m256 exp8(__m256 x)
{
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n)));
}

__attribute__((target("avx2,fma"))) static float exp_row_avx2(float *restrict x, int64_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 p0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        __m256 p1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm));
        _mm256_storeu_ps(x + j, p0);
        _mm256_storeu_ps(x + j + 8, p1);
        s0 = _mm256_add_ps(s0, p0);
        s1 = _mm256_add_ps(s1, p1);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 p0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, p0);
        s0 = _mm256_add_ps(s0, p0);
    }
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h) + exp_row_body(x + j, n - j, m);
}

/* The same sixteen at a time; scalef applies 2^n. */
__attribute__((target("avx512f"))) static float exp_row_avx512(float *restrict x, int64_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + j), vm);
        const __mmask16 keep = _mm512_cmp_ps_mask(v, _mm512_set1_ps(EXP_LO), _CMP_GE_OQ);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(EXP_LO)), _mm512_set1_ps(EXP_HI));
        const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), v);
        r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
        __m512 p = _mm512_set1_ps(1.9875691500e-4f);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
        p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
        p = _mm512_maskz_scalef_ps(keep, p, k);
        _mm512_storeu_ps(x + j, p);
        sum = _mm512_add_ps(sum, p);
    }
    return _mm512_reduce_add_ps(sum) + exp_row_avx2(x + j, n - j, m);
}

float attn_exp_row(float *x, int64_t n, float m)
{
    if (__builtin_cpu_supports("avx512f"))
        return exp_row_avx512(x, n, m);
    return cpu_has_avx2_fma() ? exp_row_avx2(x, n, m) : exp_row_body(x, n, m);
}
#else
float attn_exp_row(float *x, int64_t n, float m)
{
    return exp_row_body(x, n, m);
}
#endif
