/* dropout.c: CPU dropout, forward (the mask from elementwise.h's counter-based draws, then
 * y = x * mask / (1 - p)) and backward (dx = dy * mask / (1 - p)), as vectorized loops that read
 * and write each dtype directly; bf16's forward in one AVX2 pass where the CPU has it. */
#include <string.h>

#include "cpu/cpu_bf16x8.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"

/* mask[i] = keep(i0 + i). The draws of the pairs that elements [i0, i0 + n) fall in come first;
 * on a little-endian CPU their 32-bit halves, in memory order, are then the elements' in order,
 * each holding its 24 bits above 8 others. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dropout_mask_body reads the draws' halves in little-endian order");

CPU_BODY void dropout_mask_body(uint8_t *restrict mask, size_t n, uint64_t stream, size_t i0, uint32_t threshold)
{
    union {
        uint64_t draw[CPU_CHUNK / 2 + 1];
        uint32_t half[CPU_CHUNK + 2];
    } r;
    const size_t p0 = i0 / 2, pairs = (i0 + n + 1) / 2 - p0;
    uint64_t state = stream + p0 * OOM_DROPOUT_GAMMA;
    for (size_t j = 0; j < pairs; j++) {
        r.draw[j] = oom_splitmix64(state); /* = oom_dropout_draw(stream, p0 + j) */
        state += OOM_DROPOUT_GAMMA;
    }
    const uint32_t *half = r.half + (i0 & 1);
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        mask[i] = half[i] >> 8 >= threshold;
}

CPU_MULTIVERSION(dropout_mask, (uint8_t *restrict mask, size_t n, uint64_t stream, size_t i0, uint32_t threshold),
                 (mask, n, stream, i0, threshold))

static inline float f32_load(float v)
{
    return v;
}

static inline float f32_store(float v)
{
    return v;
}

/* name(y, x, mask, n, scale): y = x * mask * scale for elements of type T, in fp32 between load
 * and store, as PyTorch computes it (a dropped NaN stays NaN). y may be x. */
#define MASKED_SCALE(name, T, load, store)                                                                    \
    CPU_BODY void name##_body(T *y, const T *x, const uint8_t *restrict mask, size_t n, float scale)         \
    {                                                                                                         \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = store(load(x[i]) * (mask[i] ? scale : 0.0f)); \
    }                                                                                                         \
    CPU_MULTIVERSION(name, (T * y, const T *x, const uint8_t *restrict mask, size_t n, float scale),         \
                     (y, x, mask, n, scale))

MASKED_SCALE(masked_scale_f32, float, f32_load, f32_store)
MASKED_SCALE(masked_scale_f16, uint16_t, oom_f16_to_f32, oom_f32_to_f16)

CPU_BODY void masked_scale_bf16_body(uint16_t *y, const uint16_t *x, const uint8_t *restrict mask, size_t n,
                                     float scale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = oom_f32_to_bf16(oom_bf16_to_f32(x[i]) * (mask[i] ? scale : 0.0f));
}

#ifdef OOM_HAVE_BF16X8
/* masked_scale_bf16_body eight at a time (gcc's own vectorization of it takes twice as long): the
 * mask's bytes widened to lanes of scale or 0. */
__attribute__((target("avx2,fma"))) static void masked_scale_bf16_avx2(uint16_t *y, const uint16_t *x,
                                                                        const uint8_t *restrict mask, size_t n,
                                                                        float scale)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m8;
        memcpy(&m8, mask + i, sizeof m8);
        __m256i keep = _mm256_cmpgt_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m8)), _mm256_setzero_si256());
        bf16x8_store(y + i, _mm256_mul_ps(bf16x8_load(x + i), _mm256_and_ps(s, _mm256_castsi256_ps(keep))));
    }
    masked_scale_bf16_body(y + i, x + i, mask + i, n - i, scale);
}
#endif
CPU_DISPATCH(masked_scale_bf16, (uint16_t * y, const uint16_t *x, const uint8_t *restrict mask, size_t n, float scale),
             (y, x, mask, n, scale))

/* Elements [i0, i0 + len) of y = x * mask * scale in the call's dtype. */
static void masked_scale(int dt, void *y, const void *x, const uint8_t *mask, size_t i0, size_t len, float scale)
{
    if (dt == DT_BF16)
        masked_scale_bf16((uint16_t *)y + i0, (const uint16_t *)x + i0, mask + i0, len, scale);
    else if (dt == DT_F16)
        masked_scale_f16((uint16_t *)y + i0, (const uint16_t *)x + i0, mask + i0, len, scale);
    else
        masked_scale_f32((float *)y + i0, (const float *)x + i0, mask + i0, len, scale);
}

static float dropout_scale(const struct kernel_call *k)
{
    return 1.0f / (1.0f - k->fparam[0]);
}

#ifdef OOM_HAVE_BF16X8
/* z * c mod 2^64 in each 64-bit lane: AVX2 multiplies 32-bit halves only. */
__attribute__((target("avx2,fma"))) static inline __m256i mul64_by(__m256i z, uint64_t c)
{
    const __m256i lo = _mm256_set1_epi64x((long long)(c & 0xffffffffu)), hi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(z, 32), lo), _mm256_mul_epu32(z, hi));
    return _mm256_add_epi64(_mm256_mul_epu32(z, lo), _mm256_slli_epi64(cross, 32));
}

/* oom_splitmix64 of four states. */
__attribute__((target("avx2,fma"))) static inline __m256i splitmix64x4(__m256i z)
{
    z = _mm256_add_epi64(z, _mm256_set1_epi64x((long long)0x9e3779b97f4a7c15ull));
    z = mul64_by(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xbf58476d1ce4e5b9ull);
    z = mul64_by(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94d049bb133111ebull);
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* The bf16 forward in one pass, 8 elements (4 draws) at a time from an even i0: the mask bytes
 * and y = x * mask * scale, as dropout_mask and masked_scale_bf16 give them. Returns how many
 * elements it did (a multiple of 8); the caller does the rest. */
__attribute__((target("avx2,fma"))) static size_t dropout_fwd_bf16_avx2(uint16_t *y, const uint16_t *x, uint8_t *mask,
                                                                        size_t n, uint64_t stream, size_t i0,
                                                                        uint32_t threshold, float scale)
{
    const uint64_t g = OOM_DROPOUT_GAMMA, p0 = i0 / 2;
    __m256i state = _mm256_add_epi64(_mm256_set1_epi64x((long long)(stream + p0 * g)),
                                     _mm256_setr_epi64x(0, (long long)g, (long long)(2 * g), (long long)(3 * g)));
    const __m256i step = _mm256_set1_epi64x((long long)(4 * g)), below = _mm256_set1_epi32((int)threshold - 1);
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8, state = _mm256_add_epi64(state, step)) {
        /* the draws' 32-bit halves are the 8 elements in order (little-endian); keep: bits >= threshold */
        __m256i keep = _mm256_cmpgt_epi32(_mm256_srli_epi32(splitmix64x4(state), 8), below);
        __m128i k16 = _mm_packs_epi32(_mm256_castsi256_si128(keep), _mm256_extracti128_si256(keep, 1));
        _mm_storel_epi64((__m128i *)(mask + i), _mm_and_si128(_mm_packs_epi16(k16, k16), _mm_set1_epi8(1)));
        bf16x8_store(y + i, _mm256_mul_ps(bf16x8_load(x + i), _mm256_and_ps(s, _mm256_castsi256_ps(keep))));
    }
    return i;
}
#endif

/* tensors {x, y, mask}; dims[1] the seed */
static void dropout_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    uint8_t *mask = t[2];
    const uint64_t stream = oom_dropout_stream((uint64_t)k->dims[1]);
    const uint32_t threshold = oom_dropout_threshold(k->fparam[0]);
    size_t done = 0;
#ifdef OOM_HAVE_BF16X8
    if (k->dtype == DT_BF16 && i0 % 2 == 0 && cpu_has_avx2_fma())
        done = dropout_fwd_bf16_avx2((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, mask + i0, len, stream, i0,
                                     threshold, dropout_scale(k));
#endif
    dropout_mask(mask + i0 + done, len - done, stream, i0 + done, threshold);
    masked_scale(k->dtype, t[1], t[0], mask, i0 + done, len - done, dropout_scale(k));
}

/* tensors {dy, mask, dx} */
static void dropout_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    masked_scale(k->dtype, t[2], t[0], t[1], i0, len, dropout_scale(k));
}

int cpu_dropout_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, dropout_fwd_chunk);
    return 0;
}

int cpu_dropout_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, dropout_bwd_chunk);
    return 0;
}
