/* optim.c: CPU optimizer steps: AdamW with fp32 moments, the 8-bit block-wise AdamW (moments as
 * dynamic-map codes with a per-block absmax), the EMA update, SGD with momentum and AdamW with
 * moments in the parameter's (16-bit) dtype, as vectorized loops over fp32 chunks (cpu_vec.h);
 * and Adafactor (factored second moment, update clipping). */
#include <math.h>
#include <pthread.h>
#include <string.h>

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
 * buckets by sign and the top 16 bits of |x| (8 exponent bits, 7 mantissa bits; all |x| < 2^-23
 * share a bucket), in each of which the code steps at most once: entry = the low 16 bits of the
 * step's threshold t (its top 16 are the bucket's) | code below t << 16 | code from t on << 24.
 * The lowest bucket holds floats of other top bits, so it must not step (the maps' first step
 * from 0 is near 1.6e-7). The builder checks each bucket's ends and finds t by bisection;
 * tests/kernels_optim_test.c checks the lookup against oom_qmap_encode over dense floats
 * (exhaustively in [-2, 2] on request). Beyond +-2 the search ends at lo = 254 (x > 2) or 0
 * (x < -2), so the code is its last comparison, done here the same way (rounding makes it
 * alternate far out). NaN looks up the -2 bucket, which does not step: code 0, as the search's
 * comparisons all fail. */
#define QF_ELO 0x3400u /* top 16 bits of 2^-23 */
#define QF_EHI 0x4000u /* top 16 bits of 2.0 */
#define QF_NB (QF_EHI - QF_ELO + 1)
#define QF_CLAMP 2.0f
static uint32_t qfast[2][2 * QF_NB];
static int qfast_ok; /* 0 if some bucket steps twice (or the lowest once): then the search is used */

/* A float's position in value order (-0 just below +0; NaN not asked). */
static int64_t qf_order(uint32_t bits)
{
    return bits >> 31 ? -(int64_t)(bits & 0x7fffffffu) - 1 : (int64_t)bits;
}

static uint32_t qf_unorder(int64_t k)
{
    return k < 0 ? 0x80000000u | (uint32_t)(-(k + 1)) : (uint32_t)k;
}

static int qfast_build(const float *map, uint32_t *tab)
{
    for (uint32_t sgn = 0; sgn < 2; sgn++)
        for (uint32_t e = QF_ELO; e <= QF_EHI; e++) {
            uint32_t a0 = e == QF_ELO ? 0u : e << 16, a1 = e == QF_EHI ? e << 16 : (e << 16) | 0xffffu;
            int64_t k0 = qf_order((sgn << 31) | a0), k1 = qf_order((sgn << 31) | a1);
            int64_t klo = k0 < k1 ? k0 : k1, khi = k0 < k1 ? k1 : k0;
            uint8_t clo = oom_qmap_encode(map, oom_bits_f32(qf_unorder(klo)));
            uint8_t chi = oom_qmap_encode(map, oom_bits_f32(qf_unorder(khi)));
            uint32_t thr = 0; /* no step: either code */
            if (clo != chi) {
                if (e == QF_ELO)
                    return 0;
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
            tab[sgn * QF_NB + (e - QF_ELO)] = (thr & 0xffffu) | (uint32_t)clo << 16 | (uint32_t)chi << 24;
        }
    return 1;
}

static void qmaps_fill(void)
{
    oom_qmap_fill(1, qmaps[0]);
    oom_qmap_fill(0, qmaps[1]);
    qfast_ok = qfast_build(qmaps[0], qfast[0]) && qfast_build(qmaps[1], qfast[1]);
}

/* What 8-bit AdamW encodes: a moment over its block's absmax, 0 in a block of zeros. */
CPU_BODY float qscaled(float x, float absmax)
{
    return absmax > 0.0f ? x / absmax : 0.0f;
}

/* oom_qmap_encode(map, x) from map's qfast table, branch-free. */
CPU_BODY uint8_t qfast_encode(const float *map, const uint32_t *tab, float x)
{
    float xc = x > QF_CLAMP ? QF_CLAMP : x;
    xc = xc >= -QF_CLAMP ? xc : -QF_CLAMP; /* NaN too */
    uint32_t b = oom_f32_bits(xc), e = (b & 0x7fffffffu) >> 16;
    e = e < QF_ELO ? QF_ELO : e;
    uint32_t ent = tab[(e - QF_ELO) + (b >> 31) * QF_NB];
    float thr = oom_bits_f32((b & 0xffff0000u) | (ent & 0xffffu));
    int code = (int)(x >= thr ? ent >> 24 : (ent >> 16) & 0xffu);
    int big = fabsf(map[255] - x) < fabsf(map[254] - x) ? 255 : 254;
    int small = fabsf(map[1] - x) < fabsf(map[0] - x) ? 1 : 0;
    return (uint8_t)(x > QF_CLAMP ? big : x < -QF_CLAMP ? small : code);
}

/* codes[i] = the code of x[i] in map m (0 signed, 1 unsigned). */
CPU_BODY void qmap_encode_n_body(uint8_t *codes, const float *x, size_t n, int m)
{
    for (size_t i = 0; i < n; i++)
        codes[i] = qfast_encode(qmaps[m], qfast[m], x[i]);
}

/* m and v of n codes: the code's value times the block's absmax. */
CPU_BODY void adamw8_decode_body(float *m, float *v, const uint8_t *mq, const uint8_t *vq, float mscale, float vscale,
                                 size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = qmaps[0][mq[i]] * mscale;
        v[i] = qmaps[1][vq[i]] * vscale;
    }
}

/* The codes of one element's new moments over the block's absmax. */
CPU_BODY void adamw8_encode_one(uint8_t *mq, uint8_t *vq, float m, float v, float mmax, float vmax)
{
    m = qscaled(m, mmax);
    v = qscaled(v, vmax);
    *mq = qfast_ok ? qfast_encode(qmaps[0], qfast[0], m) : oom_qmap_encode(qmaps[0], m);
    *vq = qfast_ok ? qfast_encode(qmaps[1], qfast[1], v) : oom_qmap_encode(qmaps[1], v);
}

CPU_BODY void adamw8_encode_body(uint8_t *mq, uint8_t *vq, const float *m, const float *v, size_t n, float mmax,
                                 float vmax)
{
    for (size_t i = 0; i < n; i++)
        adamw8_encode_one(mq + i, vq + i, m[i], v[i], mmax, vmax);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX2_FMA __attribute__((target("avx2,fma")))

/* qfast_encode of 8 floats with one 8-wide gather (the same steps, so the same codes), stored to
 * codes; 0 if some x is beyond +-2 or NaN, whose codes the caller then redoes. */
AVX2_FMA static inline int qfast_encode8(uint8_t *codes, __m256 x, const int *tab)
{
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i b = _mm256_castps_si256(x), ab = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));
    __m256i e = _mm256_min_epi32(_mm256_max_epi32(_mm256_srli_epi32(ab, 16), _mm256_set1_epi32((int)QF_ELO)),
                                 _mm256_set1_epi32((int)QF_EHI));
    __m256i base = _mm256_sub_epi32(_mm256_and_si256(_mm256_srai_epi32(b, 31), _mm256_set1_epi32((int)QF_NB)),
                                    _mm256_set1_epi32((int)QF_ELO));
    __m256i ent = _mm256_i32gather_epi32(tab, _mm256_add_epi32(e, base), 4);
    __m256 thr = _mm256_castsi256_ps(_mm256_blend_epi16(b, ent, 0x55)); /* low 16 bits from ent */
    __m256i ge = _mm256_castps_si256(_mm256_cmp_ps(x, thr, _CMP_GE_OQ));
    /* shift the code wanted to the low byte: by 24 (ge: -1 << 3 = -8 below 16) or 16 */
    __m256i code = _mm256_srlv_epi32(ent, _mm256_sub_epi32(_mm256_set1_epi32(16), _mm256_slli_epi32(ge, 3)));
    __m256i bytes = _mm256_shuffle_epi8(code, pick);
    _mm_storel_epi64((__m128i *)codes,
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1)));
    return !_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x40000000))));
}

AVX2_FMA static void qmap_encode_n_avx2(uint8_t *codes, const float *x, size_t n, int m)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (!qfast_encode8(codes + i, _mm256_loadu_ps(x + i), (const int *)qfast[m]))
            qmap_encode_n_body(codes + i, x + i, 8, m);
    qmap_encode_n_body(codes + i, x + i, n - i, m);
}

/* adamw8_decode_body with 8 scalar loads per vector: on AMD Zen 3, where this was measured, an
 * 8-wide gather from the map takes longer. */
AVX2_FMA static void adamw8_decode_avx2(float *m, float *v, const uint8_t *mq, const uint8_t *vq, float mscale,
                                        float vscale, size_t n)
{
    const float *qm = qmaps[0], *qv = qmaps[1];
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint8_t *c = mq + i, *d = vq + i;
        __m256 mi = _mm256_setr_ps(qm[c[0]], qm[c[1]], qm[c[2]], qm[c[3]], qm[c[4]], qm[c[5]], qm[c[6]], qm[c[7]]);
        __m256 vi = _mm256_setr_ps(qv[d[0]], qv[d[1]], qv[d[2]], qv[d[3]], qv[d[4]], qv[d[5]], qv[d[6]], qv[d[7]]);
        _mm256_storeu_ps(m + i, _mm256_mul_ps(mi, _mm256_set1_ps(mscale)));
        _mm256_storeu_ps(v + i, _mm256_mul_ps(vi, _mm256_set1_ps(vscale)));
    }
    adamw8_decode_body(m + i, v + i, mq + i, vq + i, mscale, vscale, n - i);
}

/* adamw8_encode_body 8 elements at a time: qfast_encode8 of each moment over its absmax. */
AVX2_FMA static void adamw8_encode_avx2(uint8_t *mq, uint8_t *vq, const float *m, const float *v, size_t n, float mmax,
                                        float vmax)
{
    const __m256 mdiv = _mm256_set1_ps(mmax), vdiv = _mm256_set1_ps(vmax);
    /* qscaled: 0 where the absmax is 0 */
    const __m256 mkeep = _mm256_castsi256_ps(_mm256_set1_epi32(mmax > 0.0f ? -1 : 0)),
                 vkeep = _mm256_castsi256_ps(_mm256_set1_epi32(vmax > 0.0f ? -1 : 0));
    size_t i = 0;
    for (; qfast_ok && i + 8 <= n; i += 8) {
        __m256 mi = _mm256_and_ps(_mm256_div_ps(_mm256_loadu_ps(m + i), mdiv), mkeep);
        __m256 vi = _mm256_and_ps(_mm256_div_ps(_mm256_loadu_ps(v + i), vdiv), vkeep);
        int ok = qfast_encode8(mq + i, mi, (const int *)qfast[0]);
        ok &= qfast_encode8(vq + i, vi, (const int *)qfast[1]);
        for (size_t j = i; !ok && j < i + 8; j++)
            adamw8_encode_one(mq + j, vq + j, m[j], v[j], mmax, vmax);
    }
    adamw8_encode_body(mq + i, vq + i, m + i, v + i, n - i, mmax, vmax);
}

#endif

CPU_DISPATCH(qmap_encode_n, (uint8_t *codes, const float *x, size_t n, int m), (codes, x, n, m))
CPU_DISPATCH(adamw8_decode,
             (float *m, float *v, const uint8_t *mq, const uint8_t *vq, float mscale, float vscale, size_t n),
             (m, v, mq, vq, mscale, vscale, n))
CPU_DISPATCH(adamw8_encode, (uint8_t *mq, uint8_t *vq, const float *m, const float *v, size_t n, float mmax, float vmax),
             (mq, vq, m, v, n, mmax, vmax))

int cpu_qmap_encode_fast(int is_signed, uint8_t *codes, const float *x, size_t n)
{
    pthread_once(&qmaps_once, qmaps_fill);
    if (!qfast_ok)
        return 0;
    qmap_encode_n(codes, x, n, is_signed ? 0 : 1);
    return 1;
}

/* AdamW on the decoded moments m and v, which become the new ones (p_out may be p), raising *mmax
 * and *vmax to their absmax. */
CPU_BODY void adamw8_step_body(float *p_out, const float *p, const float *g, float *m, float *v, size_t n,
                               struct oom_adamw a, float *mmax, float *vmax)
{
    float mx = *mmax, vx = *vmax;
#pragma omp simd reduction(max : mx, vx)
    for (size_t i = 0; i < n; i++) {
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &m[i], &v[i]);
        float am = fabsf(m[i]);
        mx = am > mx ? am : mx; /* = fmaxf (skips a NaN; no -0 arises), but vectorizes */
        vx = v[i] > vx ? v[i] : vx;
    }
    *mmax = mx;
    *vmax = vx;
}

/* The step's new moments again, from the decoded old ones (same bits: oom_adamw_elem fuses by hand). */
CPU_BODY void adamw8_moments_body(float *m, float *v, const float *g, size_t n, struct oom_adamw a)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        oom_adamw_elem(&a, 0.0f, g[i], &m[i], &v[i]);
}

CPU_MULTIVERSION(adamw8_step,
                 (float *p_out, const float *p, const float *g, float *m, float *v, size_t n, struct oom_adamw a,
                  float *mmax, float *vmax),
                 (p_out, p, g, m, v, n, a, mmax, vmax))
CPU_MULTIVERSION(adamw8_moments, (float *m, float *v, const float *g, size_t n, struct oom_adamw a), (m, v, g, n, a))

/* One block from b0: the step in fp32 chunks, then (the new absmax known) the codes of the new
 * moments. A block of one chunk still holds them; a longer one decodes and steps them again. */
static void adamw8_block(const struct kernel_call *k, void *const *t, size_t b0, size_t len)
{
    const struct oom_adamw a = adamw_of(k);
    const size_t blk = b0 / (size_t)k->dims[3];
    uint8_t *mq = (uint8_t *)t[2] + b0, *vq = (uint8_t *)t[3] + b0;
    float *m_absmax = t[4], *v_absmax = t[5];
    const float mscale = m_absmax[blk], vscale = v_absmax[blk];
    float mmax = 0.0f, vmax = 0.0f, pb[CPU_CHUNK], gb[CPU_CHUNK], mb[CPU_CHUNK], vb[CPU_CHUNK];
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        const float *p = chunk_in(t[0], k->dtype, b0 + i0, n, pb), *g = chunk_in(t[1], k->dtype, b0 + i0, n, gb);
        float *p_out = chunk_out(t[0], k->dtype, b0 + i0, pb);
        adamw8_decode(mb, vb, mq + i0, vq + i0, mscale, vscale, n);
        adamw8_step(p_out, p, g, mb, vb, n, a, &mmax, &vmax);
        chunk_put(t[0], k->dtype, b0 + i0, n, p_out);
    }
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        if (len > CPU_CHUNK) {
            adamw8_decode(mb, vb, mq + i0, vq + i0, mscale, vscale, n);
            adamw8_moments(mb, vb, chunk_in(t[1], k->dtype, b0 + i0, n, gb), n, a);
        }
        adamw8_encode(mq + i0, vq + i0, mb, vb, n, mmax, vmax);
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

/* p_out = the SGD step of p; buf_out = the new momentum buffer (scratch without momentum).
 * Outputs may alias their inputs. */
CPU_BODY void sgd_loop_body(float *p_out, float *buf_out, const float *p, const float *g, const float *buf, size_t n,
                            struct oom_sgd s)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float b = buf[i];
        p_out[i] = oom_sgd_elem(&s, p[i], g[i], &b);
        buf_out[i] = b;
    }
}

CPU_MULTIVERSION(sgd_loop,
                 (float *p_out, float *buf_out, const float *p, const float *g, const float *buf, size_t n,
                  struct oom_sgd s),
                 (p_out, buf_out, p, g, buf, n, s))

static void sgd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const struct oom_sgd s = oom_sgd_setup(k->fparam, k->dims[1]);
    float pb[CPU_CHUNK], gb[CPU_CHUNK], bb[CPU_CHUNK];
    const float *p = chunk_in(t[0], k->dtype, i0, len, pb), *g = chunk_in(t[1], k->dtype, i0, len, gb), *buf = bb;
    float *p_out = chunk_out(t[0], k->dtype, i0, pb), *buf_out = bb;
    if (oom_sgd_reads_buf(&s))
        buf = chunk_in(t[2], k->dtype, i0, len, bb);
    else
        memset(bb, 0, len * sizeof *bb);
    if (s.momentum != 0.0f)
        buf_out = chunk_out(t[2], k->dtype, i0, bb);
    sgd_loop(p_out, buf_out, p, g, buf, len, s);
    chunk_put(t[0], k->dtype, i0, len, p_out);
    if (s.momentum != 0.0f)
        chunk_put(t[2], k->dtype, i0, len, buf_out);
}

int cpu_sgd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, sgd_chunk);
    return 0;
}

/* AdamW with m and v read from and written to (possibly the same) fp32 chunks. */
CPU_BODY void adamw_t_loop_body(float *p_out, float *m_out, float *v_out, const float *p, const float *g,
                                const float *m, const float *v, size_t n, struct oom_adamw a)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float mi = m[i], vi = v[i];
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &mi, &vi);
        m_out[i] = mi;
        v_out[i] = vi;
    }
}

CPU_MULTIVERSION(adamw_t_loop,
                 (float *p_out, float *m_out, float *v_out, const float *p, const float *g, const float *m,
                  const float *v, size_t n, struct oom_adamw a),
                 (p_out, m_out, v_out, p, g, m, v, n, a))

static void adamw_t_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const struct oom_adamw a = adamw_of(k);
    const int dt = k->dtype;
    float pb[CPU_CHUNK], gb[CPU_CHUNK], mb[CPU_CHUNK], vb[CPU_CHUNK];
    const float *p = chunk_in(t[0], dt, i0, len, pb), *g = chunk_in(t[1], dt, i0, len, gb);
    const float *m = chunk_in(t[2], dt, i0, len, mb), *v = chunk_in(t[3], dt, i0, len, vb);
    float *p_out = chunk_out(t[0], dt, i0, pb), *m_out = chunk_out(t[2], dt, i0, mb), *v_out = chunk_out(t[3], dt, i0, vb);
    adamw_t_loop(p_out, m_out, v_out, p, g, m, v, len, a);
    chunk_put(t[0], dt, i0, len, p_out);
    chunk_put(t[2], dt, i0, len, m_out);
    chunk_put(t[3], dt, i0, len, v_out);
}

int cpu_adamw_t(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, adamw_t_chunk);
    return 0;
}

int cpu_adafactor(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t R = k->dims[0], C = k->dims[1];
    const struct oom_adafactor a = oom_adafactor_setup(k->fparam, k->dims[2]);
    const size_t n = (size_t)(R * C);
    float *state = t[2], *u = cpu_scratch(n, "adafactor update", e);
    if (!u)
        return -1;
    for (size_t i = 0; i < n; i++)
        u[i] = oom_adafactor_sq(&a, ld(t[1], k->dtype, i));
    if (C > 1) { /* row means into state[0..R), column means into state[R..R+C) */
        float *rows = state, *cols = state + R;
        double rsum = 0.0;
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t c = 0; c < C; c++)
                s += u[r * C + c];
            rows[r] = oom_adafactor_ema(&a, rows[r], (float)(s / (double)C));
            rsum += rows[r];
        }
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++)
                s += u[r * C + c];
            cols[c] = oom_adafactor_ema(&a, cols[c], (float)(s / (double)R));
        }
        float rmean = (float)(rsum / (double)R);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                u[r * C + c] = oom_adafactor_update(ld(t[1], k->dtype, (size_t)(r * C + c)),
                                                    oom_adafactor_factored(rows[r], rmean, cols[c]));
    } else {
        for (size_t i = 0; i < n; i++) {
            state[i] = oom_adafactor_ema(&a, state[i], u[i]);
            u[i] = oom_adafactor_update(ld(t[1], k->dtype, i), state[i]);
        }
    }
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)u[i] * u[i];
    const float div = oom_adafactor_clip_div(&a, ss, n);
    for (size_t i = 0; i < n; i++)
        st(t[0], k->dtype, i, oom_adafactor_step(&a, ld(t[0], k->dtype, i), u[i], div));
    free(u);
    return 0;
}
