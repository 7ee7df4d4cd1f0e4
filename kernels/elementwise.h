/* elementwise.h: per-element math written once for the C CPU kernels and the CUDA kernels:
 * fp32 <-> bf16/fp16 conversion (round to nearest even), GELU (tanh and erf), SiLU, ReLU, quick
 * GELU and their derivatives, the rotary embedding's rotation, one element of AdamW, SGD and EMA,
 * Adafactor's per-call constants, the counter-based RNG (dropout, uniform and integer fills) and
 * the dynamic 8-bit map. */
#ifndef OOMLAB_ELEMENTWISE_H
#define OOMLAB_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

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

/* Branch-free (every case computed, one selected) so that loops over it vectorize. */
OOM_HD float oom_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float sub = (float)(int32_t)mant * 5.9604644775390625e-8f; /* exp 0: mant * 2^-24, exact */
    uint32_t bits = exp == 0    ? oom_f32_bits(sub)
                    : exp == 31 ? 0x7f800000u | (mant << 13)
                                : ((exp + 112) << 23) | (mant << 13);
    return oom_bits_f32(bits | sign);
}

/* Branch-free like oom_f16_to_f32. */
OOM_HD uint16_t oom_f32_to_f16(float f)
{
    uint32_t x = oom_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    /* subnormal result: adding 0.5 puts the fp16 subnormal ulp (2^-24) at the fp32 ulp, so the
     * FPU's own round-to-nearest-even does the rounding */
    uint32_t sub = oom_f32_bits(oom_bits_f32(x) + 0.5f) - 0x3f000000u;
    /* normal: rebias the exponent by -112 and round to nearest even */
    uint32_t normal = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
    /* >= 65520 rounds to inf; NaN stays NaN (quiet) */
    uint32_t big = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    return (uint16_t)(sign | (x < 0x38800000u ? sub : x < 0x477ff000u ? normal : big));
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

OOM_HD float oom_relu(float x)
{
    return x > 0.0f ? x : 0.0f;
}

/* ReLU's backward: dy where x > 0, else 0. */
OOM_HD float oom_relu_bwd(float x, float dy)
{
    return x > 0.0f ? dy : 0.0f;
}

/* Quick GELU (CLIP): x * sigmoid(1.702 x). */
#define OOM_QUICK_GELU_K 1.702f

OOM_HD float oom_quick_gelu(float x)
{
    return x * oom_sigmoid(OOM_QUICK_GELU_K * x);
}

OOM_HD float oom_quick_gelu_grad(float x)
{
    float s = oom_sigmoid(OOM_QUICK_GELU_K * x);
    return s + OOM_QUICK_GELU_K * x * s * (1.0f - s);
}

/* ---- rotary position embedding ---- */

/* cos and sin of the angle pos * theta^(-2d / D) that rotates pair (d, d + D/2) of a head at
 * position pos, evaluated in double and rounded to float; sin negated for the inverse rotation. */
OOM_HD void oom_rope_cos_sin(int64_t pos, int64_t d, int64_t D, float theta, int inverse, float *c, float *s)
{
    double angle = (double)pos * pow((double)theta, -2.0 * (double)d / (double)D);
    *c = (float)cos(angle);
    *s = (inverse ? -1.0f : 1.0f) * (float)sin(angle);
}

/* rotate_half: (x0, x1) -> (x0 c - x1 s, x1 c + x0 s). */
OOM_HD void oom_rope_rotate(float x0, float x1, float c, float s, float *y0, float *y1)
{
    *y0 = x0 * c - x1 * s;
    *y1 = x1 * c + x0 * s;
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
    /* fused by hand: every compiled copy (a step, a recompute, CPU or GPU) gets the same bits, where
     * the compiler's own contraction may pick either product */
    *m = fmaf(a->beta1, *m, (1.0f - a->beta1) * g);
    *v = fmaf(a->beta2, *v, (1.0f - a->beta2) * g * g);
    float denom = sqrtf(*v) * a->inv_sqrt_bc2 + a->eps;
    return p - a->step_size * *m / denom;
}

OOM_HD float oom_ema_elem(float shadow, float param, float decay)
{
    return decay * shadow + (1.0f - decay) * param;
}

/* Per-call constants of torch.optim.SGD (fparam {lr, momentum, dampening, weight_decay}). */
struct oom_sgd {
    float lr, momentum, dampening, weight_decay;
    int first_step; /* step <= 1: the momentum buffer starts as the gradient */
};

OOM_HD struct oom_sgd oom_sgd_setup(const float *fparam, int64_t step)
{
    struct oom_sgd s;
    s.lr = fparam[0];
    s.momentum = fparam[1];
    s.dampening = fparam[2];
    s.weight_decay = fparam[3];
    s.first_step = step <= 1;
    return s;
}

/* 1 if the step reads the momentum buffer (momentum on, after the first step). */
OOM_HD int oom_sgd_reads_buf(const struct oom_sgd *s)
{
    return s->momentum != 0.0f && !s->first_step;
}

/* One element of SGD: returns the new parameter. With momentum, *buf (read only if
 * oom_sgd_reads_buf) becomes the new momentum buffer, which the caller stores. */
OOM_HD float oom_sgd_elem(const struct oom_sgd *s, float p, float g, float *buf)
{
    g = g + s->weight_decay * p;
    if (s->momentum != 0.0f) {
        *buf = s->first_step ? g : s->momentum * *buf + (1.0f - s->dampening) * g;
        g = *buf;
    }
    return p - s->lr * g;
}

/* Per-call constants of Adafactor (fparam {lr, eps1, clip, decay_rate}, 0s meaning 1e-3, 1e-30,
 * 1.0, -0.8): beta2 = 1 - step^decay_rate. */
struct oom_adafactor {
    float lr, eps1, clip, beta2;
};

OOM_HD struct oom_adafactor oom_adafactor_setup(const float *fparam, int64_t step)
{
    struct oom_adafactor a;
    a.lr = fparam[0] != 0.0f ? fparam[0] : 1e-3f;
    a.eps1 = fparam[1] != 0.0f ? fparam[1] : 1e-30f;
    a.clip = fparam[2] != 0.0f ? fparam[2] : 1.0f;
    float decay = fparam[3] != 0.0f ? fparam[3] : -0.8f;
    a.beta2 = 1.0f - powf((float)(step > 0 ? step : 1), decay);
    return a;
}

/* The squared gradient the second moment averages (eps1 keeps it positive). */
OOM_HD float oom_adafactor_sq(const struct oom_adafactor *a, float g)
{
    return g * g + a->eps1;
}

/* A second-moment statistic (element, row mean or column mean) moved towards this step's mean. */
OOM_HD float oom_adafactor_ema(const struct oom_adafactor *a, float state, float mean)
{
    return a->beta2 * state + (1.0f - a->beta2) * mean;
}

/* The second moment of element (r, c) rebuilt from its row and column means. */
OOM_HD float oom_adafactor_factored(float row, float row_mean, float col)
{
    return row / row_mean * col;
}

/* The unclipped update g / sqrt(v). */
OOM_HD float oom_adafactor_update(float g, float v)
{
    return g / sqrtf(v);
}

/* Divisor clipping the update's RMS to clip, from the sum of its n squares. */
OOM_HD float oom_adafactor_clip_div(const struct oom_adafactor *a, double sum_sq, size_t n)
{
    float rms = (float)sqrt(sum_sq / (double)n);
    return rms / a->clip > 1.0f ? rms / a->clip : 1.0f;
}

OOM_HD float oom_adafactor_step(const struct oom_adafactor *a, float p, float update, float div)
{
    return p - a->lr * update / div;
}

/* ---- counter-based RNG (dropout, seeded fills) ---- */

OOM_HD uint64_t oom_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Dropout's random bits: the SplitMix64 sequence of the seed's stream, one 64-bit draw serving
 * two elements (as one Philox call serves four in PyTorch), 24 bits each: bits 8-31 of the
 * draw for the even element, bits 40-63 for the odd one. */
OOM_HD uint64_t oom_dropout_stream(uint64_t seed)
{
    return oom_splitmix64(seed);
}

#define OOM_DROPOUT_GAMMA 0x9e3779b97f4a7c15ull

OOM_HD uint64_t oom_dropout_draw(uint64_t stream, uint64_t pair)
{
    return oom_splitmix64(stream + pair * OOM_DROPOUT_GAMMA);
}

OOM_HD uint32_t oom_dropout_bits(uint64_t draw, uint64_t i)
{
    return (uint32_t)(draw >> (i & 1 ? 32 : 0)) >> 8;
}

/* Elements whose 24 bits reach this survive: u = bits / 2^24 >= p. */
OOM_HD uint32_t oom_dropout_threshold(float p)
{
    return (uint32_t)ceilf(p * 16777216.0f);
}

/* 1 if element i survives dropout. */
OOM_HD int oom_dropout_keep(uint64_t stream, uint64_t i, uint32_t threshold)
{
    return oom_dropout_bits(oom_dropout_draw(stream, i >> 1), i) >= threshold;
}

/* The uniform [0, 1) draw behind K_RAND_UNIFORM and K_RANDINT: 53 random bits of element i. */
OOM_HD double oom_uniform01(uint64_t seed, uint64_t i)
{
    uint64_t r = oom_splitmix64(seed ^ oom_splitmix64(i + 0x5851f42d4c957f2dull));
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

/* lo + (hi - lo) * u, rounded after the multiply and after the add on every device (CUDA would
 * otherwise fuse them), so a seeded fill has the same bits on the CPU and the GPU. */
OOM_HD float oom_uniform_between(float lo, float hi, double u)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(lo, __fmul_rn(hi - lo, (float)u));
#else
    return lo + (hi - lo) * (float)u;
#endif
}

/* v rounded to a tensor dtype (fp32, bf16, fp16) and read back. */
OOM_HD float oom_round_to(int dt, float v)
{
    return dt == DT_BF16 ? oom_bf16_to_f32(oom_f32_to_bf16(v)) : dt == DT_F16 ? oom_f16_to_f32(oom_f32_to_f16(v)) : v;
}

/* One element of PyTorch's uniform_ in dtype dt: lo + (hi - lo) * u rounded to dt, or lo where that
 * rounds to hi, so the values stay in [lo, hi) (PyTorch's uniform kernel does the same, #96947). */
OOM_HD float oom_uniform_value(float lo, float hi, double u, int dt)
{
    float v = oom_round_to(dt, oom_uniform_between(lo, hi, u));
    return v == oom_round_to(dt, hi) ? oom_round_to(dt, lo) : v;
}

/* An integer in [0, high) for element i (high >= 1). */
OOM_HD int64_t oom_randint(uint64_t seed, uint64_t i, uint64_t high)
{
    uint64_t v = (uint64_t)(oom_uniform01(seed, i) * (double)high);
    return (int64_t)(v < high ? v : high - 1);
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

/* Index of the code nearest to x (x already divided by the block's absmax). lo becomes the last
 * of codes 0..254 that is <= x (or 0) in a fixed 8 steps, 127 + 64 + ... + 1 = 254, so that loops
 * over it vectorize; then the nearer of lo and lo + 1. */
OOM_HD uint8_t oom_qmap_encode(const float *map, float x)
{
    int lo = map[127] <= x ? 127 : 0;
    for (int step = 64; step > 0; step /= 2)
        lo = map[lo + step] <= x ? lo + step : lo;
    return (uint8_t)(fabsf(map[lo + 1] - x) < fabsf(map[lo] - x) ? lo + 1 : lo);
}

/* ---- bitsandbytes blockwise dequantization (K_DEQUANT) ---- */

enum oom_dequant_kind { OOM_DQ_NF4, OOM_DQ_FP4, OOM_DQ_DYNAMIC8, OOM_DQ_INT8_ROW, OOM_DQ_KINDS };

/* The 16 code values of a 4-bit type, as bitsandbytes' get_4bit_type (functional.py) lists them:
 * NF4's normal-float quantiles, and FP4's e2m1 values divided by their largest magnitude (12). */
OOM_HD float oom_code4(int kind, unsigned idx)
{
    const float nf4[16] = {-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
                           -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
                           0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
                           0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};
    const float fp4[16] = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f,
                           -0.0f, -0.0625f, -8.0f, -12.0f, -4.0f, -6.0f, -2.0f, -3.0f};
    return kind == OOM_DQ_NF4 ? nf4[idx & 15] : fp4[idx & 15] / 12.0f;
}

/* Element i of a dequantized tensor: 4-bit codes two to a byte (element 2j in byte j's high nibble),
 * or one byte each (the signed dynamic map for a nested absmax; signed int8 over 127 for LLM.int8's
 * row-wise CB * SCB / 127, whose block is a row); times the absmax of i's block. */
OOM_HD float oom_dequant_elem(int kind, const uint8_t *q, const float *absmax, int64_t block, size_t i,
                              const float *dynmap)
{
    float scale = absmax[i / (size_t)block];
    switch (kind) {
    case OOM_DQ_NF4:
    case OOM_DQ_FP4:
        return oom_code4(kind, (i & 1) ? q[i / 2] & 15u : q[i / 2] >> 4) * scale;
    case OOM_DQ_DYNAMIC8:
        return dynmap[q[i]] * scale;
    default:
        return (float)(int8_t)q[i] * (scale / 127.0f);
    }
}

/* LLM.int8's row-wise quantization of an activation (int8_vectorwise_quant without outliers):
 * round(x * 127 / absmax of its row), as a signed byte. */
OOM_HD uint8_t oom_int8_quantize(float x, float absmax)
{
    return absmax > 0.0f ? (uint8_t)(int8_t)rintf(x * (127.0f / absmax)) : 0;
}

/* int8_mm_dequant: an int32 product of two int8 rows scaled back by both rows' absmax / 127. */
OOM_HD float oom_int8_dequant(float acc, float row_absmax, float col_absmax)
{
    return acc * (row_absmax * col_absmax) * (1.0f / (127.0f * 127.0f));
}

#endif
