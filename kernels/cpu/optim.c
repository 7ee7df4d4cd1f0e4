/* optim.c: CPU optimizer-side kernels: the AdamW step with fp32 moments, the 8-bit block-wise
 * AdamW step (moments as dynamic-map codes with a per-block absmax) and the EMA update, as
 * vectorized loops over fp32 chunks (cpu_vec.h). */
#include <math.h>
#include <pthread.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static struct oom_adamw adamw_of(const struct kernel_call *k)
{
    float eps = kernel_adamw_eps(k);
    return oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], eps, k->fparam[3], k->dims[1]);
}

/* p_out = the AdamW step of p; m and v in place. p_out may be p. */
CPU_BODY void adamw_loop_body(float *p_out, const float *p, const float *g, float *m, float *v, size_t n,
                         struct oom_adamw a)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &m[i], &v[i]);
}

CPU_MULTIVERSION(adamw_loop, (float *p_out, const float *p, const float *g, float *m, float *v, size_t n,
                              struct oom_adamw a),
                 (p_out, p, g, m, v, n, a))

static void adamw_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float pb[CPU_CHUNK], gb[CPU_CHUNK];
    const float *p = chunk_in(t[0], k->dtype, i0, len, pb), *g = chunk_in(t[1], k->dtype, i0, len, gb);
    float *p_out = chunk_out(t[0], k->dtype, i0, pb);
    adamw_loop(p_out, p, g, (float *)t[2] + i0, (float *)t[3] + i0, len, adamw_of(k));
    chunk_put(t[0], k->dtype, i0, len, p_out);
}

int cpu_adamw(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, adamw_chunk);
    return 0;
}

/* The dynamic maps, signed (m) and unsigned (v), built once, and for each a direct-lookup table
 * for the nearest-code search (qfast_encode below). */
static float qmaps[2][OOM_QMAP_SIZE];
static pthread_once_t qmaps_once = PTHREAD_ONCE_INIT;

/* oom_qmap_encode first finds lo, the last of codes 0..254 with map[lo] <= x (or 0), then picks
 * the nearer of lo and lo + 1. lo is a monotone step function of x, so qfast splits the floats
 * into buckets by sign and the top 16 bits of |x| (8 exponent bits, 7 mantissa bits; all
 * |x| < 2^-22 share a bucket, x is clamped to [-2, 2] first: lo is 254 above 1 and 0 below -1)
 * and stores, per bucket, the smallest lo in it; every bucket spans at most one step of lo (checked
 * when the table is built), so lo = base + (map[base + 1] <= x), capped at 254. The final choice
 * is oom_qmap_encode's own, so the code is the same for every float, NaN included (NaN clamps to
 * -2: lo 0, and every comparison is false, as in the search). tests/kernels_optim_test.c checks
 * it against oom_qmap_encode densely over all floats. */
#define QF_ELO 0x3480u /* top 16 bits of 2^-22 */
#define QF_EHI 0x4000u /* top 16 bits of 2.0 */
#define QF_NB (QF_EHI - QF_ELO + 1)
static int32_t qfast[2][2 * QF_NB];
static int qfast_ok; /* 0 if some bucket spans two steps: then the search is used */

static int qmap_ref_lo(const float *map, float x)
{
    int lo = map[127] <= x ? 127 : 0;
    for (int step = 64; step > 0; step /= 2)
        lo = map[lo + step] <= x ? lo + step : lo;
    return lo;
}

static int qfast_build(const float *map, int32_t *tab)
{
    for (uint32_t sgn = 0; sgn < 2; sgn++)
        for (uint32_t e = QF_ELO; e <= QF_EHI; e++) {
            uint32_t a0 = e == QF_ELO ? 0u : e << 16, a1 = e == QF_EHI ? 0x7f800000u : (e << 16) | 0xffffu;
            int l0 = qmap_ref_lo(map, oom_bits_f32((sgn << 31) | a0));
            int l1 = qmap_ref_lo(map, oom_bits_f32((sgn << 31) | a1));
            int lmin = l0 < l1 ? l0 : l1, lmax = l0 < l1 ? l1 : l0;
            if (lmax - lmin > 1)
                return 0;
            tab[sgn * QF_NB + (e - QF_ELO)] = lmin;
        }
    return 1;
}

static void qmaps_fill(void)
{
    oom_qmap_fill(1, qmaps[0]);
    oom_qmap_fill(0, qmaps[1]);
    qfast_ok = qfast_build(qmaps[0], qfast[0]) && qfast_build(qmaps[1], qfast[1]);
}

/* oom_qmap_encode(map, x) without the search (tab: map's qfast table); branch-free. */
CPU_BODY uint8_t qfast_encode(const float *map, const int32_t *tab, float x)
{
    float xc = x > 2.0f ? 2.0f : x;
    xc = xc >= -2.0f ? xc : -2.0f;
    uint32_t b = oom_f32_bits(xc), e = (b & 0x7fffffffu) >> 16;
    e = e < QF_ELO ? QF_ELO : e;
    int lo = tab[(int)(e - QF_ELO) + (int)(b >> 31) * (int)QF_NB];
    lo += map[lo + 1] <= x ? 1 : 0;
    lo = lo > 254 ? 254 : lo;
    return (uint8_t)(fabsf(map[lo + 1] - x) < fabsf(map[lo] - x) ? lo + 1 : lo);
}

CPU_BODY void qmap_encode_n_body(uint8_t *codes, const float *x, size_t n, int m)
{
    const float *map = qmaps[m];
    const int32_t *tab = qfast[m];
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        codes[i] = qfast_encode(map, tab, x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* qfast_encode on 8 floats with AVX2 gathers; the same steps, so the same codes. */
__attribute__((target("avx2,fma"))) static void qmap_encode_n_avx2(uint8_t *codes, const float *x, size_t n, int m)
{
    const float *map = qmaps[m];
    const int32_t *tab = qfast[m];
    const __m256i one = _mm256_set1_epi32(1), elo = _mm256_set1_epi32((int)QF_ELO);
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* min(2, v) keeps NaN, max(., -2) then turns it into -2 */
        __m256 xc = _mm256_max_ps(_mm256_min_ps(_mm256_set1_ps(2.0f), v), _mm256_set1_ps(-2.0f));
        __m256i b = _mm256_castps_si256(xc);
        __m256i e = _mm256_max_epi32(_mm256_srli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), 16), elo);
        __m256i idx = _mm256_add_epi32(_mm256_sub_epi32(e, elo),
                                       _mm256_and_si256(_mm256_srai_epi32(b, 31), _mm256_set1_epi32((int)QF_NB)));
        __m256i lo = _mm256_i32gather_epi32((const int *)tab, idx, 4);
        __m256 up = _mm256_i32gather_ps(map, _mm256_add_epi32(lo, one), 4);
        lo = _mm256_sub_epi32(lo, _mm256_castps_si256(_mm256_cmp_ps(up, v, _CMP_LE_OQ)));
        lo = _mm256_min_epi32(lo, _mm256_set1_epi32(254));
        __m256 a = _mm256_i32gather_ps(map, lo, 4), c = _mm256_i32gather_ps(map, _mm256_add_epi32(lo, one), 4);
        __m256 da = _mm256_and_ps(_mm256_sub_ps(a, v), absmask), dc = _mm256_and_ps(_mm256_sub_ps(c, v), absmask);
        __m256i code = _mm256_sub_epi32(lo, _mm256_castps_si256(_mm256_cmp_ps(dc, da, _CMP_LT_OQ)));
        __m256i bytes = _mm256_shuffle_epi8(code, pick);
        __m128i packed = _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
        _mm_storel_epi64((__m128i *)(codes + i), packed);
    }
    for (; i < n; i++)
        codes[i] = qfast_encode(map, tab, x[i]);
}
static void qmap_encode_n_base(uint8_t *codes, const float *x, size_t n, int m)
{
    qmap_encode_n_body(codes, x, n, m);
}
static void qmap_encode_n(uint8_t *codes, const float *x, size_t n, int m)
{
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        qmap_encode_n_avx2(codes, x, n, m);
    else
        qmap_encode_n_base(codes, x, n, m);
}
#else
CPU_MULTIVERSION(qmap_encode_n, (uint8_t *codes, const float *x, size_t n, int m), (codes, x, n, m))
#endif

int cpu_qmap_encode_fast(int is_signed, uint8_t *codes, const float *x, size_t n)
{
    pthread_once(&qmaps_once, qmaps_fill);
    if (!qfast_ok)
        return 0;
    qmap_encode_n(codes, x, n, is_signed ? 0 : 1);
    return 1;
}

/* Decodes m and v of n elements, applies AdamW (p_out may be p) and raises *mmax, *vmax to the
 * new moments' absmax. */
CPU_BODY void adamw8_step_body(float *p_out, const float *p, const float *g, const uint8_t *mq, const uint8_t *vq,
                               float mscale, float vscale, size_t n, struct oom_adamw a, float *mmax, float *vmax)
{
    const float *qm = qmaps[0], *qv = qmaps[1];
    float mx = *mmax, vx = *vmax;
#pragma omp simd reduction(max : mx, vx)
    for (size_t i = 0; i < n; i++) {
        float m = qm[(int32_t)mq[i]] * mscale, v = qv[(int32_t)vq[i]] * vscale;
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &m, &v);
        float am = fabsf(m);
        mx = am > mx ? am : mx; /* = fmaxf (skips a NaN; no -0 arises), but vectorizes */
        vx = v > vx ? v : vx;
    }
    *mmax = mx;
    *vmax = vx;
}

/* Recomputes the same new moments from the old codes and encodes them against the new absmax. */
CPU_BODY void adamw8_encode_body(uint8_t *mq, uint8_t *vq, const float *g, float mscale, float vscale, size_t n,
                                 struct oom_adamw a, float mmax, float vmax)
{
    const float *qm = qmaps[0], *qv = qmaps[1];
    if (!qfast_ok) {
        for (size_t i = 0; i < n; i++) {
            float m = qm[(int32_t)mq[i]] * mscale, v = qv[(int32_t)vq[i]] * vscale;
            oom_adamw_elem(&a, 0.0f, g[i], &m, &v);
            mq[i] = oom_qmap_encode(qmaps[0], mmax > 0.0f ? m / mmax : 0.0f);
            vq[i] = oom_qmap_encode(qmaps[1], vmax > 0.0f ? v / vmax : 0.0f);
        }
        return;
    }
    float xm[CPU_CHUNK], xv[CPU_CHUNK];
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float m = qm[(int32_t)mq[i]] * mscale, v = qv[(int32_t)vq[i]] * vscale;
        oom_adamw_elem(&a, 0.0f, g[i], &m, &v);
        xm[i] = mmax > 0.0f ? m / mmax : 0.0f;
        xv[i] = vmax > 0.0f ? v / vmax : 0.0f;
    }
    qmap_encode_n(mq, xm, n, 0);
    qmap_encode_n(vq, xv, n, 1);
}

CPU_MULTIVERSION(adamw8_step,
                 (float *p_out, const float *p, const float *g, const uint8_t *mq, const uint8_t *vq, float mscale,
                  float vscale, size_t n, struct oom_adamw a, float *mmax, float *vmax),
                 (p_out, p, g, mq, vq, mscale, vscale, n, a, mmax, vmax))
CPU_MULTIVERSION(adamw8_encode,
                 (uint8_t *mq, uint8_t *vq, const float *g, float mscale, float vscale, size_t n, struct oom_adamw a,
                  float mmax, float vmax),
                 (mq, vq, g, mscale, vscale, n, a, mmax, vmax))

/* One block from b0: the step in fp32 pieces, then (the new absmax known) the codes. */
static void adamw8_block(const struct kernel_call *k, void *const *t, size_t b0, size_t len)
{
    const struct oom_adamw a = adamw_of(k);
    const size_t blk = b0 / (size_t)k->dims[3];
    uint8_t *mq = (uint8_t *)t[2] + b0, *vq = (uint8_t *)t[3] + b0;
    float *m_absmax = t[4], *v_absmax = t[5];
    const float mscale = m_absmax[blk], vscale = v_absmax[blk];
    float mmax = 0.0f, vmax = 0.0f, pb[CPU_CHUNK], gb[CPU_CHUNK];
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        const float *p = chunk_in(t[0], k->dtype, b0 + i0, n, pb), *g = chunk_in(t[1], k->dtype, b0 + i0, n, gb);
        float *p_out = chunk_out(t[0], k->dtype, b0 + i0, pb);
        adamw8_step(p_out, p, g, mq + i0, vq + i0, mscale, vscale, n, a, &mmax, &vmax);
        chunk_put(t[0], k->dtype, b0 + i0, n, p_out);
    }
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        adamw8_encode(mq + i0, vq + i0, chunk_in(t[1], k->dtype, b0 + i0, n, gb), mscale, vscale, n, a, mmax, vmax);
    }
    m_absmax[blk] = mmax;
    v_absmax[blk] = vmax;
}

int cpu_adamw8(const struct kernel_call *k, void *const *t, struct err *e)
{
    pthread_once(&qmaps_once, qmaps_fill);
    cpu_for_chunks(k, t, (size_t)k->dims[0], (size_t)k->dims[3], adamw8_block);
    return 0;
}

CPU_BODY void ema_body(float *shadow_out, const float *shadow, const float *param, size_t n, float decay)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        shadow_out[i] = oom_ema_elem(shadow[i], param[i], decay);
}

CPU_MULTIVERSION(ema, (float *shadow_out, const float *shadow, const float *param, size_t n, float decay),
                 (shadow_out, shadow, param, n, decay))

static void ema_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float pb[CPU_CHUNK], sb[CPU_CHUNK];
    const float *param = chunk_in(t[0], k->dtype, i0, len, pb), *shadow = chunk_in(t[1], k->dtype, i0, len, sb);
    float *out = chunk_out(t[1], k->dtype, i0, sb);
    ema(out, shadow, param, len, k->fparam[0]);
    chunk_put(t[1], k->dtype, i0, len, out);
}

int cpu_ema(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, ema_chunk);
    return 0;
}
