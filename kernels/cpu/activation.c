/* activation.c: CPU GELU, SiLU and their gated forms (GEGLU, SwiGLU), ReLU and quick GELU
 * (x * sigmoid(1.702 x), CLIP's activation), forward and backward, on the per-element math of
 * elementwise.h; all but the gated forms as unary activations (cpu_unary.h); ReLU on bf16/fp16
 * works on the bit patterns. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_unary.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static inline float gelu_tanh_dx(float x, float dy)
{
    return dy * oom_gelu_tanh_grad(x);
}

/* The normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 and the density phi(x) for the vectorizer: erfc by
 * Abramowitz and Stegun 7.1.26 (erfc(z) = t P(t) e^(-z^2), t = 1 / (1 + 0.3275911 |z|), within 1.5e-7 of
 * erf), as PyTorch's vectorized CPU erf does (aten/src/ATen/cpu/vec/vec512/vec512_float.h), but with Phi =
 * erfc / 2 below 0 and 1 - erfc / 2 above: PyTorch's GELU takes 1 + erf (aten/src/ATen/native/cpu/Gelu.h),
 * 0 from x = -5.5 on, where this keeps the formula's relative error (0.2% at x = -5, 3% at -12). z = x / sqrt 2
 * is never formed: 1 / sqrt 2 is folded into t's constant and erfc's 1/2 into P's. The exponential,
 * e^(-x^2/2) = 2^w with w = -x^2/2 log2 e, is p(f) 2^n for n = w rounded and f = w - n in [-1/2, 1/2]: p of
 * degree 5, fitted to 2^f's relative error (within 1e-7; a sixth degree leaves GELU's largest error as it is),
 * 2^n from n's bits, exact products, no range reduction by ln 2, shared with phi: a fifth fewer vector
 * operations than with e^x (measured: 12% less time on 2M elements). Below w = -118 (|x| > 12.79, GELU under
 * 1e-36) both are 0 rather than subnormal, which could cost a microcode assist per vector. libmvec's erff is
 * more exact in the last bits but an out-of-line call per vector, twice as slow here. */
CPU_BODY float gelu_phi(float x, float *pdf)
{
    const float t = 1.0f / (1.0f + 0.3275911f * 0.70710678f * fabsf(x));
    const float half_poly = t * (0.5f * 0.254829592f + t * (0.5f * -0.284496736f + t * (0.5f * 1.421413741f +
                                 t * (0.5f * -1.453152027f + t * (0.5f * 1.061405429f)))));
    /* 1.5 * 2^23 + 127: adding it rounds w to an integer n in the low bits, biased by 127, so those bits
     * shifted to the exponent's place are 2^n (n in [-118, 0] where it is used) */
    const float magic = 12582912.0f + 127.0f;
    const float w = x * (x * -0.72134752f), wn = w + magic, n = wn - magic, f = w - n;
    const float p = 1.0f + f * (6.931470037e-01f + f * (2.402224243e-01f + f * (5.550733581e-02f +
                                f * (9.671512991e-03f + f * 1.326472382e-03f))));
    int32_t bits;
    memcpy(&bits, &wn, sizeof bits);
    const uint32_t scale_bits = (uint32_t)bits << 23;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    const int flush = w < -118.0f; /* not NaN: x NaN stays NaN */
    const float half_erfc = flush ? 0.0f : half_poly * p * scale;
    *pdf = flush ? 0.0f : p * 0.39894228f * scale;
    return x >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

CPU_BODY float gelu_erf_y(float x)
{
    float pdf;
    return x * gelu_phi(x, &pdf);
}

CPU_BODY float gelu_erf_dx(float x, float dy)
{
    float pdf, cdf = gelu_phi(x, &pdf);
    return dy * (cdf + x * pdf);
}

static inline float silu_dx(float x, float dy)
{
    return dy * oom_silu_grad(x);
}

CPU_UNARY(gelu_tanh, oom_gelu_tanh, gelu_tanh_dx, 1)
CPU_UNARY(silu, oom_silu, silu_dx, 1)

CPU_BODY void gelu_erf_fwd_body(float *y, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = gelu_erf_y(x[i]);
}

CPU_BODY void gelu_erf_bwd_body(float *dx, const float *x, const float *dy, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dx[i] = gelu_erf_dx(x[i], dy[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The forward on AVX-512, where a 32-entry table lookup is one vpermt2ps: Q(z) = erfc(z / sqrt 2) / 2 by
 * pieces, degree 6 in r on 32 intervals centred on z = k / 2.5 (z = (k + r) / 2.5, r in [-1/2, 1/2], k up to
 * 31), Phi(x) = Q(|x|) below 0 and 1 - Q(|x|) above, 0 and 1 beyond |x| = 12.5 (GELU under 1e-34). 7 lookups and
 * 6 FMAs instead of a division, two polynomials and 2^n: 21 vector operations to gelu_phi's 26 and its division,
 * and the loop near the speed of its loads and stores (measured, 2M elements, fastest call: 0.70 -> 0.64 ms; a
 * copy takes 0.57). Within 2.7e-8 of Q (GELU within 2 ulp from x = -3 up), 0.14% of it in the lower tail. The
 * backward keeps gelu_phi, which gives phi too. */
#define GELU_Q_DEG 6
static const float gelu_q[GELU_Q_DEG + 1][32] __attribute__((aligned(64))) = {
    /* written by scripts/fit-gelu-table: float32 error of Q on [0, 12.5] at most 2.7e-08 absolute,
     * 0.0014 relative */
    {5.000000000e-01f, 3.445782661e-01f, 2.118553966e-01f, 1.150696725e-01f, 5.479929224e-02f, 2.275013179e-02f,
     8.197535761e-03f, 2.555130282e-03f, 6.871379446e-04f, 1.591085893e-04f, 3.167124669e-05f, 5.412545761e-06f,
     7.933288089e-07f, 9.964443848e-08f, 1.071762679e-08f, 9.865936956e-10f, 7.768929250e-11f, 5.231047366e-12f,
     3.010709358e-13f, 1.480714728e-14f, 6.221340001e-16f, 2.232589259e-17f, 6.841651688e-19f, 1.790052288e-20f,
     3.998133617e-22f, 7.622149982e-24f, 1.240150603e-25f, 1.721875741e-27f, 2.039941988e-29f, 2.061980955e-31f,
     1.778147897e-33f, 1.308084144e-35f},
    {-1.595769078e-01f, -1.473080516e-01f, -1.158766225e-01f, -7.767442614e-02f, -4.436833411e-02f, -2.159638703e-02f,
     -8.957811631e-03f, -3.166180337e-03f, -9.536352009e-04f, -2.447608276e-04f, -5.353214510e-05f, -9.977014088e-06f,
     -1.584527809e-06f, -2.144434035e-07f, -2.473085736e-08f, -2.430409651e-09f, -2.035324687e-10f, -1.452452221e-11f,
     -8.832502871e-13f, -4.576982510e-14f, -2.021099386e-15f, -7.605157447e-17f, -2.438594827e-18f, -6.663160846e-20f,
     -1.551414801e-21f, -3.078078770e-23f, -5.203938884e-25f, -7.496887998e-27f, -9.202822720e-29f, -9.626010391e-31f,
     -8.579258827e-33f, -6.515135539e-35f},
    {0.000000000e+00f, 1.178464480e-02f, 1.854025573e-02f, 1.864185743e-02f, 1.419786550e-02f, 8.638556115e-03f,
     4.299751949e-03f, 1.773062395e-03f, 6.103267078e-04f, 1.762274478e-04f, 4.282539521e-05f, 8.779610653e-06f,
     1.521089530e-06f, 2.230058413e-07f, 2.769534646e-08f, 2.915951480e-09f, 2.604479410e-10f, 1.974514649e-11f,
     1.271128276e-12f, 6.951311407e-14f, 3.230172215e-15f, 1.275788452e-16f, 4.283723547e-18f, 1.223026085e-19f,
     2.969558406e-21f, 6.132682932e-23f, 1.077368243e-24f, 1.610196225e-26f, 2.047550254e-28f, 2.215475456e-30f,
     2.039894122e-32f, 1.598398877e-34f},
    {4.255275708e-03f, 3.299647244e-03f, 1.112455153e-03f, -9.113067645e-04f, -1.845686696e-03f, -1.727720606e-03f,
     -1.137068379e-03f, -5.775248865e-04f, -2.349779243e-04f, -7.806020585e-05f, -2.141082223e-05f, -4.883775091e-06f,
     -9.309579241e-07f, -1.488287467e-07f, -2.000619581e-08f, -2.265870824e-09f, -2.165622959e-10f, -1.748860258e-11f,
     -1.194531995e-12f, -6.906839467e-14f, -3.383052344e-15f, -1.404584047e-16f, -4.945625201e-18f, -1.477487909e-19f,
     -3.746508193e-21f, -8.066413883e-23f, -1.475096036e-24f, -2.291752480e-26f, -3.025751980e-28f, -3.395616489e-30f,
     -3.239794968e-32f, -2.628557586e-34f},
    {0.000000000e+00f, -4.462431534e-04f, -5.833636387e-04f, -3.877099953e-04f, -8.328142576e-05f, 1.151646575e-04f,
     1.582083933e-04f, 1.144098205e-04f, 5.891620094e-05f, 2.340654828e-05f, 7.426084267e-06f, 1.916613428e-06f,
     4.069591171e-07f, 7.162176274e-08f, 1.050244336e-08f, 1.288117724e-09f, 1.325282661e-10f, 1.146407361e-11f,
     8.352899535e-13f, 5.133883973e-14f, 2.664994563e-15f, 1.169587064e-16f, 4.343412486e-18f, 1.365883150e-19f,
     3.639630238e-21f, 8.222484017e-23f, 1.575654798e-24f, 2.562216368e-26f, 3.536957343e-28f, 4.146166435e-30f,
     4.128514541e-32f, 3.492882281e-34f},
    {-1.012736975e-04f, -6.448658678e-05f, 1.031820921e-05f, 5.850527305e-05f, 5.466700168e-05f, 2.311731077e-05f,
     -2.897440027e-06f, -1.165766571e-05f, -9.425319149e-06f, -4.885193448e-06f, -1.878888497e-06f, -5.652723303e-07f,
     -1.365334867e-07f, -2.687793810e-08f, -4.354466565e-09f, -5.844537632e-10f, -6.530305463e-11f, -6.096134448e-12f,
     -4.767884221e-13f, -3.131162322e-14f, -1.729683842e-15f, -8.048992124e-17f, -3.159037087e-18f, -1.046759584e-19f,
     -2.930837023e-21f, -6.939183398e-23f, -1.390184626e-24f, -2.357887527e-26f, -3.387419235e-28f, -4.123762453e-30f,
     -4.255583717e-32f, -3.723996180e-34f},
    {0.000000000e+00f, 1.118374530e-05f, 1.173039800e-05f, 3.441606623e-06f, -4.083432941e-06f, -5.463591606e-06f,
     -2.822294391e-06f, -2.218100690e-07f, 7.537591955e-07f, 6.582382639e-07f, 3.307170857e-07f, 1.192067671e-07f,
     3.302765705e-08f, 7.263364576e-09f, 1.291076135e-09f, 1.876283295e-10f, 2.246853398e-11f, 2.229600836e-12f,
     1.841149168e-13f, 1.269339434e-14f, 7.325153104e-16f, 3.545796715e-17f, 1.442167374e-18f, 4.935652944e-20f,
     1.423068924e-21f, 3.460250324e-23f, 7.101905189e-25f, 1.231295778e-26f, 1.804522571e-28f, 2.236823186e-30f,
     2.346376650e-32f, 2.083832126e-34f},
};

__attribute__((target(CPU_AVX512_TARGET))) static inline __m512 gelu_q_coef(int j, __m512i k)
{
    return _mm512_permutex2var_ps(_mm512_load_ps(gelu_q[j]), k, _mm512_load_ps(gelu_q[j] + 16));
}

__attribute__((target(CPU_AVX512_TARGET))) static inline __m512 gelu_erf_y16(__m512 x)
{
    /* 1.5 * 2^23: adding it rounds z * 2.5 to the integer k, in the low bits */
    const __m512 s = _mm512_set1_ps(2.5f), magic = _mm512_set1_ps(12582912.0f), one = _mm512_set1_ps(1.0f);
    const __m512 z = _mm512_abs_ps(x), u = _mm512_fmadd_ps(z, s, magic);
    const __m512 r = _mm512_fmsub_ps(z, s, _mm512_sub_ps(u, magic));
    const __m512i k = _mm512_castps_si512(u);
    __m512 q = gelu_q_coef(GELU_Q_DEG, k);
    for (int j = GELU_Q_DEG - 1; j > 0; j--)
        q = _mm512_fmadd_ps(q, r, gelu_q_coef(j, k));
    /* 0 above 12.5, for inf and for NaN (x * 0 is NaN again) */
    q = _mm512_maskz_fmadd_ps(_mm512_cmp_ps_mask(z, _mm512_set1_ps(12.5f), _CMP_LE_OQ), q, r, gelu_q_coef(0, k));
    const __m512 phi = _mm512_mask_sub_ps(q, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), one, q);
    return _mm512_mul_ps(x, phi);
}

/* Plain stores, one vector an iteration, per CPU_CHUNK: on 2M elements (one core, fastest of 300 calls, measured)
 * 0.61 ms, at the memory's pace (its arithmetic alone, in L1: 0.22 ns an element, 0.46 ms), where torch takes
 * 0.73-0.77. Tried and not kept: streaming stores (_mm512_stream_ps, two vectors an iteration, one sfence per
 * 64K-element call) 0.64 ms, also with the other core copying 64 MB buffers (0.65 to 0.64-0.68), though an 8 MB
 * copy streams in 0.62 ms against 1.02: 8-32 MB buffers stay in this VM's last-level cache (reads at 28-30 GB/s,
 * 13 at 512 MB), so a write's read for ownership is cheap and the streamed output leaves the cache; 64K-element
 * calls instead of CPU_CHUNK, 0.60-0.61. */
__attribute__((target(CPU_AVX512_TARGET))) static void gelu_erf_fwd_avx512(float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, gelu_erf_y16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, gelu_erf_y16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

CPU_MULTIVERSION_AVX512(gelu_erf_fwd, (float *y, const float *x, size_t n), (y, x, n))
CPU_MULTIVERSION(gelu_erf_bwd, (float *dx, const float *x, const float *dy, size_t n), (dx, x, dy, n))
static struct cpu_unary gelu_erf = {gelu_erf_fwd, gelu_erf_bwd, 1, {NULL, NULL}};

/* GELU's dims[1] picks tanh or erf. */
static void gelu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, k->dims[1] ? &gelu_tanh : &gelu_erf);
}

static void gelu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, k->dims[1] ? &gelu_tanh : &gelu_erf);
}

static void silu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, &silu);
}

static void silu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, &silu);
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

static inline float quick_gelu_dx(float x, float dy)
{
    return dy * oom_quick_gelu_grad(x);
}

CPU_UNARY(relu, oom_relu, oom_relu_bwd, 0)
CPU_UNARY(quick_gelu, oom_quick_gelu, quick_gelu_dx, 1)

/* ReLU on bf16 or fp16 bit patterns, with the bits that converting, computing in fp32 and
 * rounding give: x > 0 is a positive pattern up to inf (above it, NaN); otherwise +0. In
 * backward, dy passes as it is unless it is a NaN, which rounding makes quiet: bf16 keeps its
 * payload and sets bit 6, fp16 becomes 0x7e00 with its sign (nan_keep, nan_set). */
struct relu16 {
    int16_t inf;
    uint16_t nan_keep, nan_set;
};

static struct relu16 relu16_of(int dt)
{
    return dt == DT_BF16 ? (struct relu16){0x7f80, 0xffff, 0x0040} : (struct relu16){0x7c00, 0x8000, 0x7e00};
}

CPU_BODY void relu16_fwd_body(uint16_t *y, const uint16_t *x, size_t n, struct relu16 r)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int16_t s = (int16_t)x[i];
        y[i] = s > 0 && s <= r.inf ? x[i] : 0;
    }
}

CPU_BODY void relu16_bwd_body(uint16_t *dx, const uint16_t *x, const uint16_t *dy, size_t n, struct relu16 r)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        int16_t s = (int16_t)x[i];
        uint16_t d = dy[i];
        d = (int16_t)(d & 0x7fff) > r.inf ? (uint16_t)((d & r.nan_keep) | r.nan_set) : d;
        dx[i] = s > 0 && s <= r.inf ? d : 0;
    }
}

CPU_MULTIVERSION(relu16_fwd, (uint16_t * y, const uint16_t *x, size_t n, struct relu16 r), (y, x, n, r))
CPU_MULTIVERSION(relu16_bwd, (uint16_t * dx, const uint16_t *x, const uint16_t *dy, size_t n, struct relu16 r),
                 (dx, x, dy, n, r))

static void relu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (k->dtype == DT_F32)
        cpu_unary_fwd(k, t, i0, len, &relu);
    else
        relu16_fwd((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, len, relu16_of(k->dtype));
}

static void relu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    if (k->dtype == DT_F32)
        cpu_unary_bwd(k, t, i0, len, &relu);
    else
        relu16_bwd((uint16_t *)t[2] + i0, (const uint16_t *)t[0] + i0, (const uint16_t *)t[1] + i0, len,
                   relu16_of(k->dtype));
}

static void quick_gelu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, &quick_gelu);
}

static void quick_gelu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, &quick_gelu);
}

int cpu_relu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, relu_fwd_chunk);
    return 0;
}

int cpu_relu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, relu_bwd_chunk);
    return 0;
}

int cpu_quick_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, quick_gelu_fwd_chunk);
    return 0;
}

int cpu_quick_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, quick_gelu_bwd_chunk);
    return 0;
}
