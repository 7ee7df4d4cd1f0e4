/* elementwise.h: per-element math written once for the C CPU kernels and the CUDA kernels:
 * fp32 <-> bf16/fp16 conversion (round to nearest even), GELU (tanh and erf), SiLU and their
 * derivatives, one AdamW element, one EMA element, the dropout RNG and the dynamic 8-bit map. */
#ifndef OOMLAB_ELEMENTWISE_H
#define OOMLAB_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define OOM_HD __host__ __device__ inline
#else
#define OOM_HD static inline
#endif

OOM_HD uint32_t oom_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

OOM_HD float oom_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- bf16 ---- */

OOM_HD float oom_bf16_to_f32(uint16_t h)
{
    return oom_bits_f32((uint32_t)h << 16);
}

OOM_HD uint16_t oom_f32_to_bf16(float f)
{
    uint32_t u = oom_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN (quiet) */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- fp16 ---- */

OOM_HD float oom_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float mag = (float)mant * 5.9604644775390625e-8f; /* mant * 2^-24, exact */
        return oom_bits_f32(oom_f32_bits(mag) | sign);
    }
    if (exp == 31)
        return oom_bits_f32(sign | 0x7f800000u | (mant << 13));
    return oom_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

OOM_HD uint16_t oom_f32_to_f16(float f)
{
    uint32_t x = oom_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
    if (x >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) {
        /* subnormal result: adding 0.5 puts the fp16 subnormal ulp (2^-24) at the fp32 ulp,
         * so the FPU's own round-to-nearest-even does the rounding */
        float v = oom_bits_f32(x) + 0.5f;
        return (uint16_t)(sign | (oom_f32_bits(v) - 0x3f000000u));
    }
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd; /* rebias the exponent by -112 and round to nearest even */
    return (uint16_t)(sign | (x >> 13));
}

/* ---- activations ---- */

#define OOM_SQRT_2_OVER_PI 0.7978845608028654f
#define OOM_GELU_C 0.044715f

/* 0.5 x (1 + tanh(u)) = x * sigmoid(2u): one expf instead of tanhf, same value. */
OOM_HD float oom_gelu_tanh(float x)
{
    float u = OOM_SQRT_2_OVER_PI * (x + OOM_GELU_C * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

OOM_HD float oom_gelu_tanh_grad(float x)
{
    float u = OOM_SQRT_2_OVER_PI * (x + OOM_GELU_C * x * x * x);
    float t = 2.0f / (1.0f + expf(-2.0f * u)) - 1.0f; /* tanh(u) */
    float du = OOM_SQRT_2_OVER_PI * (1.0f + 3.0f * OOM_GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

OOM_HD float oom_gelu_erf(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

OOM_HD float oom_gelu_erf_grad(float x)
{
    return 0.5f * (1.0f + erff(x * 0.7071067811865476f)) + x * expf(-0.5f * x * x) * 0.3989422804014327f;
}

OOM_HD float oom_gelu(float x, int approx_tanh)
{
    return approx_tanh ? oom_gelu_tanh(x) : oom_gelu_erf(x);
}

OOM_HD float oom_gelu_grad(float x, int approx_tanh)
{
    return approx_tanh ? oom_gelu_tanh_grad(x) : oom_gelu_erf_grad(x);
}

OOM_HD float oom_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

OOM_HD float oom_silu(float x)
{
    return x * oom_sigmoid(x);
}

OOM_HD float oom_silu_grad(float x)
{
    float s = oom_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

/* ---- optimizer and EMA ---- */

/* Per-call AdamW constants: bias corrections depend on the step only. */
struct oom_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    float step_size;     /* lr / (1 - beta1^step) */
    float inv_sqrt_bc2;  /* 1 / sqrt(1 - beta2^step) */
};

OOM_HD struct oom_adamw oom_adamw_setup(float lr, float beta1, float beta2, float eps, float wd, int64_t step)
{
    struct oom_adamw a;
    a.lr = lr;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.eps = eps;
    a.weight_decay = wd;
    a.step_size = lr / (1.0f - powf(beta1, (float)step));
    a.inv_sqrt_bc2 = 1.0f / sqrtf(1.0f - powf(beta2, (float)step));
    return a;
}

/* One element of PyTorch's AdamW: decoupled weight decay, then the bias-corrected Adam step. */
OOM_HD float oom_adamw_elem(const struct oom_adamw *a, float p, float g, float *m, float *v)
{
    p -= a->lr * a->weight_decay * p;
    *m = a->beta1 * *m + (1.0f - a->beta1) * g;
    *v = a->beta2 * *v + (1.0f - a->beta2) * g * g;
    float denom = sqrtf(*v) * a->inv_sqrt_bc2 + a->eps;
    return p - a->step_size * *m / denom;
}

OOM_HD float oom_ema_elem(float shadow, float param, float decay)
{
    return decay * shadow + (1.0f - decay) * param;
}

/* ---- dropout RNG ---- */

OOM_HD uint64_t oom_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 1 if element i survives dropout with probability p under this seed. */
OOM_HD int oom_dropout_keep(uint64_t seed, uint64_t i, float p)
{
    uint64_t r = oom_splitmix64(seed ^ oom_splitmix64(i));
    float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* 24 random bits in [0, 1) */
    return u >= p;
}

/* ---- 8-bit dynamic quantization (bitsandbytes' dynamic tree map) ---- */

#define OOM_QMAP_SIZE 256

/* Fills the 256 code values in ascending order: signed in [-1, 1] for Adam's m, unsigned in
 * [0, 1] for v. For exponent i = 0..6, 2^i (signed) or 2^(i+1) (unsigned) linearly spaced
 * fractions in [0.1, 1] times 10^(i-6), plus 0 and 1. Host code; kernels receive the table. */
static inline void oom_qmap_fill(int is_signed, float *map)
{
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
        float scale = powf(10.0f, (float)(i - 6));
        for (int j = 0; j + 1 < items; j++) {
            float lo = 0.1f + 0.9f * (float)j / (float)(items - 1);
            float hi = 0.1f + 0.9f * (float)(j + 1) / (float)(items - 1);
            float mid = scale * 0.5f * (lo + hi);
            map[n++] = mid;
            if (is_signed)
                map[n++] = -mid;
        }
    }
    map[n++] = 0.0f;
    map[n++] = 1.0f; /* n == 256 either way: 2 * 127 or 254, plus 0 and 1 */
    for (int i = 1; i < n; i++) {
        float x = map[i];
        int j = i - 1;
        while (j >= 0 && map[j] > x) {
            map[j + 1] = map[j];
            j--;
        }
        map[j + 1] = x;
    }
}

/* Index of the code nearest to x (x already divided by the block's absmax). */
OOM_HD uint8_t oom_qmap_encode(const float *map, float x)
{
    int lo = 0, hi = OOM_QMAP_SIZE - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (map[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return (uint8_t)(fabsf(map[hi] - x) < fabsf(map[lo] - x) ? hi : lo);
}

#endif
