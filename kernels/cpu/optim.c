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

/* oom_qmap_encode(map, x) is a step function of x in [-2, 2]. qfast splits those floats into
 * buckets by sign and the top 16 bits of |x| (8 exponent bits, 7 mantissa bits; all |x| < 2^-22
 * share a bucket), in each of which the code steps at most once: entry = the bits of the step's
 * threshold t (NaN if none) | code below t << 32 | code from t on << 40. The builder checks each
 * bucket's ends and finds t by bisection; tests/kernels_optim_test.c checks the lookup against
 * oom_qmap_encode over dense floats (exhaustively in [-2, 2] on request). Beyond +-2 the search
 * ends at lo = 254 (x > 2) or 0 (x < -2), so the code is its last comparison, done here the same
 * way (rounding makes it alternate far out). NaN looks up the -2 bucket and, compared with t,
 * gets the code below t: 0, as the search's comparisons all fail. */
#define QF_ELO 0x3480u /* top 16 bits of 2^-22 */
#define QF_EHI 0x4000u /* top 16 bits of 2.0 */
#define QF_NB (QF_EHI - QF_ELO + 1)
#define QF_CLAMP 2.0f
static uint64_t qfast[2][2 * QF_NB];
static int qfast_ok; /* 0 if some bucket steps twice: then the search is used */

/* A float's position in value order (-0 just below +0; NaN not asked). */
static int64_t qf_order(uint32_t bits)
{
    return bits >> 31 ? -(int64_t)(bits & 0x7fffffffu) - 1 : (int64_t)bits;
}

static uint32_t qf_unorder(int64_t k)
{
    return k < 0 ? 0x80000000u | (uint32_t)(-(k + 1)) : (uint32_t)k;
}

static int qfast_build(const float *map, uint64_t *tab)
{
    for (uint32_t sgn = 0; sgn < 2; sgn++)
        for (uint32_t e = QF_ELO; e <= QF_EHI; e++) {
            uint32_t a0 = e == QF_ELO ? 0u : e << 16, a1 = e == QF_EHI ? e << 16 : (e << 16) | 0xffffu;
            int64_t k0 = qf_order((sgn << 31) | a0), k1 = qf_order((sgn << 31) | a1);
            int64_t klo = k0 < k1 ? k0 : k1, khi = k0 < k1 ? k1 : k0;
            uint8_t clo = oom_qmap_encode(map, oom_bits_f32(qf_unorder(klo)));
            uint8_t chi = oom_qmap_encode(map, oom_bits_f32(qf_unorder(khi)));
            uint32_t thr = 0x7fc00000u; /* NaN: never reached */
            if (clo != chi) {
                int64_t l = klo, h = khi; /* code(l) == clo, code(h) == chi */
                while (h - l > 1) {
                    int64_t mid = l + (h - l) / 2;
                    if (oom_qmap_encode(map, oom_bits_f32(qf_unorder(mid))) == clo)
                        l = mid;
                    else
                        h = mid;
                }
                if (oom_qmap_encode(map, oom_bits_f32(qf_unorder(h))) != chi)
                    return 0; /* more than one step */
                thr = qf_unorder(h);
            }
            tab[sgn * QF_NB + (e - QF_ELO)] = thr | (uint64_t)clo << 32 | (uint64_t)chi << 40;
        }
    return 1;
}

static void qmaps_fill(void)
{
    oom_qmap_fill(1, qmaps[0]);
    oom_qmap_fill(0, qmaps[1]);
    qfast_ok = qfast_build(qmaps[0], qfast[0]) && qfast_build(qmaps[1], qfast[1]);
}

/* The bucket of x. */
CPU_BODY int qfast_index(float x)
{
    float xc = x > QF_CLAMP ? QF_CLAMP : x;
    xc = xc >= -QF_CLAMP ? xc : -QF_CLAMP; /* NaN too */
    uint32_t b = oom_f32_bits(xc), e = (b & 0x7fffffffu) >> 16;
    e = e < QF_ELO ? QF_ELO : e;
    return (int)(e - QF_ELO) + (int)(b >> 31) * (int)QF_NB;
}

/* oom_qmap_encode(map, x) from map's qfast table, branch-free. */
CPU_BODY uint8_t qfast_encode(const float *map, const uint64_t *tab, float x)
{
    uint64_t ent = tab[qfast_index(x)];
    int code = x >= oom_bits_f32((uint32_t)ent) ? (int)(ent >> 40) : (int)(ent >> 32);
    int big = fabsf(map[255] - x) < fabsf(map[254] - x) ? 255 : 254;
    int small = fabsf(map[1] - x) < fabsf(map[0] - x) ? 1 : 0;
    return (uint8_t)(x > QF_CLAMP ? big : x < -QF_CLAMP ? small : code);
}

CPU_BODY void qmap_encode_n_body(uint8_t *codes, const float *x, size_t n, int m)
{
    const uint64_t *tab = qfast[m];
    for (size_t i = 0; i < n; i++)
        codes[i] = qfast_encode(qmaps[m], tab, x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* qfast_encode on 8 floats with two 4-wide AVX2 gathers; the same steps, so the same codes. */
__attribute__((target("avx2,fma"))) static void qmap_encode_n_avx2(uint8_t *codes, const float *x, size_t n, int m)
{
    const long long *tab = (const long long *)qfast[m];
    const float *map = qmaps[m];
    const __m256 m0 = _mm256_set1_ps(map[0]), m1 = _mm256_set1_ps(map[1]), m254 = _mm256_set1_ps(map[254]),
                 m255 = _mm256_set1_ps(map[255]), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i elo = _mm256_set1_epi32((int)QF_ELO), ff = _mm256_set1_epi32(0xff);
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        /* min(c, v) keeps NaN, max(., -c) then turns it into -c */
        __m256 xc = _mm256_max_ps(_mm256_min_ps(_mm256_set1_ps(QF_CLAMP), v), _mm256_set1_ps(-QF_CLAMP));
        __m256i b = _mm256_castps_si256(xc);
        __m256i e = _mm256_max_epi32(_mm256_srli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), 16), elo);
        __m256i idx = _mm256_add_epi32(_mm256_sub_epi32(e, elo),
                                       _mm256_and_si256(_mm256_srai_epi32(b, 31), _mm256_set1_epi32((int)QF_NB)));
        __m256i g0 = _mm256_i32gather_epi64(tab, _mm256_castsi256_si128(idx), 8);
        __m256i g1 = _mm256_i32gather_epi64(tab, _mm256_extracti128_si256(idx, 1), 8);
        /* 32-bit halves: thresholds (even) and code pairs (odd), in element order 0 1 4 5 | 2 3 6 7 */
        __m256 thr = _mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), _MM_SHUFFLE(2, 0, 2, 0));
        __m256i cw = _mm256_castps_si256(
            _mm256_shuffle_ps(_mm256_castsi256_ps(g0), _mm256_castsi256_ps(g1), _MM_SHUFFLE(3, 1, 3, 1)));
        thr = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(thr), _MM_SHUFFLE(3, 1, 2, 0)));
        cw = _mm256_permute4x64_epi64(cw, _MM_SHUFFLE(3, 1, 2, 0));
        __m256i ge = _mm256_castps_si256(_mm256_cmp_ps(v, thr, _CMP_GE_OQ));
        __m256i code = _mm256_and_si256(_mm256_blendv_epi8(cw, _mm256_srli_epi32(cw, 8), ge), ff);
        __m256 d255 = _mm256_and_ps(_mm256_sub_ps(m255, v), absmask), d254 = _mm256_and_ps(_mm256_sub_ps(m254, v), absmask);
        __m256 d1 = _mm256_and_ps(_mm256_sub_ps(m1, v), absmask), d0 = _mm256_and_ps(_mm256_sub_ps(m0, v), absmask);
        __m256i big = _mm256_sub_epi32(_mm256_set1_epi32(254), _mm256_castps_si256(_mm256_cmp_ps(d255, d254, _CMP_LT_OQ)));
        __m256i small = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_castps_si256(_mm256_cmp_ps(d1, d0, _CMP_LT_OQ)));
        code = _mm256_blendv_epi8(code, big, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(QF_CLAMP), _CMP_GT_OQ)));
        code = _mm256_blendv_epi8(code, small, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(-QF_CLAMP), _CMP_LT_OQ)));
        __m256i bytes = _mm256_shuffle_epi8(code, pick);
        __m128i packed = _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
        _mm_storel_epi64((__m128i *)(codes + i), packed);
    }
    for (; i < n; i++)
        codes[i] = qfast_encode(map, qfast[m], x[i]);
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
