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
CPU_UNARY(gelu_erf, gelu_erf_y, gelu_erf_dx, 1)
CPU_UNARY(silu, oom_silu, silu_dx, 1)

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
