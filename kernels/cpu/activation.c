/* activation.c: CPU GELU, SiLU, their gated forms (GEGLU, SwiGLU) and dropout, forward and
 * backward, on the per-element math of elementwise.h; GELU, SiLU and dropout as vectorized loops
 * over fp32 chunks (cpu_vec.h). */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static inline float gelu_tanh_dx(float x, float dy)
{
    return dy * oom_gelu_tanh_grad(x);
}

static inline float gelu_erf_dx(float x, float dy)
{
    return dy * oom_gelu_erf_grad(x);
}

static inline float silu_dx(float x, float dy)
{
    return dy * oom_silu_grad(x);
}

CPU_UNARY_LOOPS(gelu_tanh, oom_gelu_tanh, gelu_tanh_dx)
CPU_UNARY_LOOPS(gelu_erf, oom_gelu_erf, gelu_erf_dx)
CPU_UNARY_LOOPS(silu, oom_silu, silu_dx)

/* GELU's dims[1] picks tanh or erf. */
static void gelu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, k->dims[1] ? gelu_tanh_fwd : gelu_erf_fwd);
}

static void gelu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, k->dims[1] ? gelu_tanh_bwd : gelu_erf_bwd);
}

static void silu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, silu_fwd);
}

static void silu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, silu_bwd);
}

int cpu_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, gelu_fwd_chunk);
    return 0;
}

int cpu_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, gelu_bwd_chunk);
    return 0;
}

int cpu_silu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, silu_fwd_chunk);
    return 0;
}

int cpu_silu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, silu_bwd_chunk);
    return 0;
}

/* Gated units: element (r, f) of gate and up, separate [rows, F] or packed rows [up | gate]. */
static void glu_index(const struct kernel_call *k, int64_t r, int64_t f, size_t *gate, size_t *up)
{
    const int64_t F = k->dims[1];
    if (k->dims[2]) {
        *up = (size_t)(r * 2 * F + f);
        *gate = *up + (size_t)F;
    } else {
        *gate = *up = (size_t)(r * F + f);
    }
}

static float glu_act(const struct kernel_call *k, float g)
{
    return k->kernel == K_GEGLU_FWD || k->kernel == K_GEGLU_BWD ? oom_gelu(g, k->dims[3] != 0) : oom_silu(g);
}

static float glu_act_grad(const struct kernel_call *k, float g)
{
    return k->kernel == K_GEGLU_BWD ? oom_gelu_grad(g, k->dims[3] != 0) : oom_silu_grad(g);
}

static int glu_fwd(const struct kernel_call *k, void *const *t)
{
    for (int64_t r = 0; r < k->dims[0]; r++)
        for (int64_t f = 0; f < k->dims[1]; f++) {
            size_t gi, ui;
            glu_index(k, r, f, &gi, &ui);
            float y = glu_act(k, ld(t[0], k->dtype, gi)) * ld(t[1], k->dtype, ui);
            st(t[2], k->dtype, (size_t)(r * k->dims[1] + f), y);
        }
    return 0;
}

static int glu_bwd(const struct kernel_call *k, void *const *t)
{
    for (int64_t r = 0; r < k->dims[0]; r++)
        for (int64_t f = 0; f < k->dims[1]; f++) {
            size_t gi, ui;
            glu_index(k, r, f, &gi, &ui);
            float g = ld(t[0], k->dtype, gi), u = ld(t[1], k->dtype, ui);
            float dy = ld(t[2], k->dtype, (size_t)(r * k->dims[1] + f));
            st(t[3], k->dtype, gi, dy * u * glu_act_grad(k, g));
            st(t[4], k->dtype, ui, dy * glu_act(k, g));
        }
    return 0;
}

int cpu_geglu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_fwd(k, t);
}

int cpu_geglu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_bwd(k, t);
}

int cpu_swiglu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_fwd(k, t);
}

int cpu_swiglu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_bwd(k, t);
}

/* mask = keep(seed, i0 + i); y = x * mask * scale. y may be x. */
CPU_BODY void dropout_fwd_body(float *y, uint8_t *restrict mask, const float *x, size_t n, uint64_t seed, size_t i0,
                               float p, float scale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int keep = oom_dropout_keep(seed, i0 + i, p);
        mask[i] = (uint8_t)keep;
        y[i] = keep ? x[i] * scale : 0.0f;
    }
}

CPU_BODY void dropout_bwd_body(float *dx, const uint8_t *restrict mask, const float *dy, size_t n, float scale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* x * c mod 2^64 in each 64-bit lane, from 32 x 32 -> 64-bit multiplies (AVX2 has no 64-bit one). */
__attribute__((target("avx2,fma"))) static inline __m256i mul64c(__m256i x, uint64_t c)
{
    const __m256i clo = _mm256_set1_epi64x((long long)(c & 0xffffffffu)), chi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i lo = _mm256_mul_epu32(x, clo);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), clo), _mm256_mul_epu32(x, chi));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

/* oom_splitmix64 in each 64-bit lane: the same steps, so the same bits. */
__attribute__((target("avx2,fma"))) static inline __m256i splitmix4(__m256i x)
{
    x = _mm256_add_epi64(x, _mm256_set1_epi64x((long long)0x9e3779b97f4a7c15ull));
    x = mul64c(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)), 0xbf58476d1ce4e5b9ull);
    x = mul64c(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)), 0x94d049bb133111ebull);
    return _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
}

/* dropout_fwd_body, 8 elements a step: oom_dropout_keep's draw r >> 40 of 4 lanes at a time,
 * converted and compared as there (24 bits: exact in fp32). */
__attribute__((target("avx2,fma"))) static void dropout_fwd_avx2(float *y, uint8_t *restrict mask, const float *x,
                                                                 size_t n, uint64_t seed, size_t i0, float p,
                                                                 float scale)
{
    const __m256i vseed = _mm256_set1_epi64x((long long)seed), eight = _mm256_set1_epi64x(8);
    const __m256 vp = _mm256_set1_ps(p), vscale = _mm256_set1_ps(scale), ulp = _mm256_set1_ps(1.0f / 16777216.0f);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i ia = _mm256_add_epi64(_mm256_set1_epi64x((long long)i0), _mm256_setr_epi64x(0, 1, 2, 3));
    __m256i ib = _mm256_add_epi64(ia, _mm256_set1_epi64x(4));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i ra = _mm256_srli_epi64(splitmix4(_mm256_xor_si256(vseed, splitmix4(ia))), 40);
        __m256i rb = _mm256_srli_epi64(splitmix4(_mm256_xor_si256(vseed, splitmix4(ib))), 40);
        ia = _mm256_add_epi64(ia, eight);
        ib = _mm256_add_epi64(ib, eight);
        /* low halves, element order 0 1 4 5 | 2 3 6 7, then 0..7 */
        __m256i r = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(ra), _mm256_castsi256_ps(rb),
                                                          _MM_SHUFFLE(2, 0, 2, 0)));
        r = _mm256_permute4x64_epi64(r, _MM_SHUFFLE(3, 1, 2, 0));
        __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(r), ulp);
        __m256 keep = _mm256_cmp_ps(u, vp, _CMP_GE_OQ);
        _mm256_storeu_ps(y + i, _mm256_and_ps(keep, _mm256_mul_ps(_mm256_loadu_ps(x + i), vscale)));
        __m256i bytes = _mm256_shuffle_epi8(_mm256_and_si256(_mm256_castps_si256(keep), one), pick);
        __m128i packed = _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
        _mm_storel_epi64((__m128i *)(mask + i), packed);
    }
    for (; i < n; i++) {
        int keep = oom_dropout_keep(seed, i0 + i, p);
        mask[i] = (uint8_t)keep;
        y[i] = keep ? x[i] * scale : 0.0f;
    }
}

static void dropout_fwd_base(float *y, uint8_t *restrict mask, const float *x, size_t n, uint64_t seed, size_t i0,
                             float p, float scale)
{
    dropout_fwd_body(y, mask, x, n, seed, i0, p, scale);
}

static void dropout_fwd(float *y, uint8_t *restrict mask, const float *x, size_t n, uint64_t seed, size_t i0, float p,
                        float scale)
{
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        dropout_fwd_avx2(y, mask, x, n, seed, i0, p, scale);
    else
        dropout_fwd_base(y, mask, x, n, seed, i0, p, scale);
}
#else
CPU_MULTIVERSION(dropout_fwd,
                 (float *y, uint8_t *restrict mask, const float *x, size_t n, uint64_t seed, size_t i0, float p,
                  float scale),
                 (y, mask, x, n, seed, i0, p, scale))
#endif
CPU_MULTIVERSION(dropout_bwd, (float *dx, const uint8_t *restrict mask, const float *dy, size_t n, float scale),
                 (dx, mask, dy, n, scale))

static void dropout_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const float p = k->fparam[0];
    float buf[CPU_CHUNK];
    const float *x = chunk_in(t[0], k->dtype, i0, len, buf);
    float *y = chunk_out(t[1], k->dtype, i0, buf);
    dropout_fwd(y, (uint8_t *)t[2] + i0, x, len, (uint64_t)k->dims[1], i0, p, 1.0f / (1.0f - p));
    chunk_put(t[1], k->dtype, i0, len, y);
}

static void dropout_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float buf[CPU_CHUNK];
    const float *dy = chunk_in(t[0], k->dtype, i0, len, buf);
    float *dx = chunk_out(t[2], k->dtype, i0, buf);
    dropout_bwd(dx, (const uint8_t *)t[1] + i0, dy, len, 1.0f / (1.0f - k->fparam[0]));
    chunk_put(t[2], k->dtype, i0, len, dx);
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
