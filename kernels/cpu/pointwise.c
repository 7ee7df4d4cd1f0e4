/* pointwise.c: CPU casts, add, scale, fill, eye and per-channel bias (+ backward); casts, add, scale
 * and bias as vectorized loops over fp32 chunks (a bf16 bias add in one pass over its bf16 data). */
#include <string.h>

#include "cpu/cpu_bf16x8.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

/* bf16 <-> fp16 in one pass: exact via fp32 (bf16 -> fp32 is a shift), rounded once. */
CPU_BODY void bf16_to_f16_vec_body(uint16_t *restrict y, const uint16_t *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = oom_f32_to_f16(oom_bf16_to_f32(x[i]));
}

CPU_BODY void f16_to_bf16_body(uint16_t *restrict y, const uint16_t *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = oom_f32_to_bf16(oom_f16_to_f32(x[i]));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* CPUID's F16C bit (__builtin_cpu_supports("f16c") is gcc's alone); the caller's AVX2 check covers
 * the OS's saving of the AVX registers F16C also needs. */
static int cpu_has_f16c(void)
{
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}

/* bf16_to_f16_body with F16C: vcvtps2ph with round-to-nearest-even gives oom_f32_to_f16's bits for
 * every non-NaN input (overflow to inf and fp16 subnormals included); NaNs, whose payload it keeps,
 * are set to oom_f32_to_f16's quiet 0x7e00 with the sign. */
__attribute__((target("avx2,fma,f16c"))) static void bf16_to_f16_f16c(uint16_t *restrict y,
                                                                      const uint16_t *restrict x, size_t n)
{
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7f80), qnan = _mm_set1_epi16(0x7e00),
                  sign = _mm_set1_epi16((short)0x8000);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        __m128i r = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, abs), inf);
        r = _mm_blendv_epi8(r, _mm_or_si128(_mm_and_si128(h, sign), qnan), nan);
        _mm_storeu_si128((__m128i *)(y + i), r);
    }
    for (; i < n; i++)
        y[i] = oom_f32_to_f16(oom_bf16_to_f32(x[i]));
}
#endif

CPU_MULTIVERSION(bf16_to_f16_vec, (uint16_t *restrict y, const uint16_t *restrict x, size_t n), (y, x, n))

static void bf16_to_f16(uint16_t *restrict y, const uint16_t *restrict x, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2") && cpu_has_f16c()) {
        bf16_to_f16_f16c(y, x, n);
        return;
    }
#endif
    bf16_to_f16_vec(y, x, n);
}
CPU_MULTIVERSION(f16_to_bf16, (uint16_t *restrict y, const uint16_t *restrict x, size_t n), (y, x, n))

static void cast_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const int dst = (int)k->dims[1];
    if (k->dtype == DT_F32) {
        tensor_from_f32((uint16_t *)t[1] + i0, dst, (const float *)t[0] + i0, len);
    } else if (dst == DT_F32) {
        tensor_to_f32((float *)t[1] + i0, (const uint16_t *)t[0] + i0, k->dtype, len);
    } else if (k->dtype == DT_BF16 && dst == DT_F16) {
        bf16_to_f16((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, len);
    } else if (k->dtype == DT_F16 && dst == DT_BF16) {
        f16_to_bf16((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, len);
    } else { /* bf16 <-> fp16: exact via fp32, rounded once */
        float buf[CPU_CHUNK];
        tensor_to_f32(buf, (const uint16_t *)t[0] + i0, k->dtype, len);
        tensor_from_f32((uint16_t *)t[1] + i0, dst, buf, len);
    }
}

int cpu_cast(const struct kernel_call *k, void *const *t, struct err *e)
{
    if (k->dims[1] == k->dtype)
        memmove(t[1], t[0], (size_t)k->dims[0] * dtype_size((enum dtype)k->dtype));
    else
        cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, cast_chunk);
    return 0;
}

/* y = alpha * a + beta * b; y may be a or b. */
CPU_BODY void axpby_body(float *y, const float *a, const float *b, size_t n, float alpha, float beta)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = alpha * a[i] + beta * b[i];
}

CPU_BODY void scale_body(float *y, const float *x, size_t n, float alpha)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = alpha * x[i];
}

CPU_BODY void add_body(float *y, const float *x, const float *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] + b[i];
}

CPU_MULTIVERSION(axpby, (float *y, const float *a, const float *b, size_t n, float alpha, float beta),
                 (y, a, b, n, alpha, beta))
CPU_MULTIVERSION(scale, (float *y, const float *x, size_t n, float alpha), (y, x, n, alpha))
CPU_MULTIVERSION(add, (float *y, const float *x, const float *b, size_t n), (y, x, b, n))

static void add_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float ab[CPU_CHUNK], bb[CPU_CHUNK];
    const float *a = chunk_in(t[0], k->dtype, i0, len, ab), *b = chunk_in(t[1], k->dtype, i0, len, bb);
    float *y = chunk_out(t[2], k->dtype, i0, ab);
    axpby(y, a, b, len, k->fparam[0], k->fparam[1]);
    chunk_put(t[2], k->dtype, i0, len, y);
}

int cpu_add(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, add_chunk);
    return 0;
}

static void scale_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float buf[CPU_CHUNK];
    const float *x = chunk_in(t[0], k->dtype, i0, len, buf);
    float *y = chunk_out(t[1], k->dtype, i0, buf);
    scale(y, x, len, k->fparam[0]);
    chunk_put(t[1], k->dtype, i0, len, y);
}

int cpu_scale(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, scale_chunk);
    return 0;
}

int cpu_eye(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t n = (size_t)k->dims[0];
    for (size_t i = 0; i < n * n; i++)
        st(t[0], k->dtype, i, i % (n + 1) == 0 ? 1.0f : 0.0f);
    return 0;
}

int cpu_fill(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t n = (size_t)k->dims[0];
    if (k->dtype == DT_F32) {
        float *y = t[0];
        for (size_t i = 0; i < n; i++)
            y[i] = k->fparam[0];
    } else {
        uint16_t *y = t[0], v = k->dtype == DT_BF16 ? oom_f32_to_bf16(k->fparam[0]) : oom_f32_to_f16(k->fparam[0]);
        for (size_t i = 0; i < n; i++)
            y[i] = v;
    }
    return 0;
}

/* bb[j] = bias[c] for element i0 + j of channel c: runs of the bias vector when inner == 1 (a
 * linear layer's bias), else runs of one value. */
static void bias_chunk(const struct kernel_call *k, const void *bias, size_t i0, size_t len, float *bb)
{
    const size_t C = (size_t)k->dims[1], inner = (size_t)k->dims[2];
    size_t row = i0 / inner, off = i0 % inner; /* row = o * C + c */
    for (size_t j = 0, run; j < len; j += run) {
        size_t c = row % C;
        if (inner == 1) {
            run = C - c < len - j ? C - c : len - j;
            tensor_to_f32(bb + j, (const char *)bias + c * dtype_size((enum dtype)k->dtype), k->dtype, run);
            row += run;
        } else {
            run = inner - off < len - j ? inner - off : len - j;
            float b = ld(bias, k->dtype, c);
            for (size_t i = 0; i < run; i++)
                bb[j + i] = b;
            row++;
            off = 0;
        }
    }
}

/* y = x + b rounded to bf16, with x in bf16: one pass over x and y. */
CPU_BODY void add_bf16_body(uint16_t *y, const uint16_t *x, const float *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = oom_f32_to_bf16(oom_bf16_to_f32(x[i]) + b[i]);
}

#ifdef OOM_HAVE_BF16X8
__attribute__((target("avx2,fma"))) static void add_bf16_avx2(uint16_t *y, const uint16_t *x, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        bf16x8_store(y + i, _mm256_add_ps(bf16x8_load(x + i), _mm256_loadu_ps(b + i)));
    add_bf16_body(y + i, x + i, b + i, n - i);
}
#endif
CPU_DISPATCH(add_bf16, (uint16_t * y, const uint16_t *x, const float *b, size_t n), (y, x, b, n))

static void bias_add_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float xb[CPU_CHUNK], bb[CPU_CHUNK];
    bias_chunk(k, t[1], i0, len, bb);
    if (k->dtype == DT_BF16) {
        add_bf16((uint16_t *)t[2] + i0, (const uint16_t *)t[0] + i0, bb, len);
        return;
    }
    const float *x = chunk_in(t[0], k->dtype, i0, len, xb);
    float *y = chunk_out(t[2], k->dtype, i0, xb);
    add(y, x, bb, len);
    chunk_put(t[2], k->dtype, i0, len, y);
}

int cpu_bias_add(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)(k->dims[0] * k->dims[1] * k->dims[2]), CPU_CHUNK, bias_add_chunk);
    return 0;
}

#define BIAS_BWD_CHANNELS 256 /* channels a chunk of a convolution's bias gradient sums */
#define BIAS_BWD_ROWS 64       /* rows summed in fp32 before they are added to the fp64 sums */

CPU_MULTIVERSION(cpu_acc, (float *restrict acc, const float *restrict x, size_t n), (acc, x, n))

/* A linear layer's bias gradient (inner 1), BIAS_BWD_ROWS rows a chunk: their sum in fp32 per channel, into
 * row block i0 / (BIAS_BWD_ROWS * C) of the partial sums t[2]. Each chunk reads one contiguous run of rows. */
static void bias_bwd_rows(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t C = (size_t)k->dims[1];
    float *part = (float *)t[2] + i0 / (BIAS_BWD_ROWS * C) * C, buf[CPU_CHUNK];
    memset(part, 0, C * sizeof *part);
    for (size_t r0 = i0; r0 < i0 + len; r0 += C)
        for (size_t c0 = 0; c0 < C; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(C, c0);
            cpu_acc(part + c0, chunk_in(t[0], k->dtype, r0 + c0, n, buf), n);
        }
}

/* Channels [c0, c0 + len) of a convolution's bias gradient (inner > 1) in fp64: each channel's inner runs
 * reduced, over every outer index. */
static void bias_bwd_channels(const struct kernel_call *k, void *const *t, size_t c0, size_t len)
{
    const size_t outer = (size_t)k->dims[0], C = (size_t)k->dims[1], inner = (size_t)k->dims[2];
    double acc[BIAS_BWD_CHANNELS] = {0};
    float buf[CPU_CHUNK], out[BIAS_BWD_CHANNELS];
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < len; j++)
            for (size_t i0 = 0; i0 < inner; i0 += CPU_CHUNK) {
                size_t n = cpu_piece(inner, i0);
                const float *x = chunk_in(t[0], k->dtype, (o * C + c0 + j) * inner + i0, n, buf);
                double s = 0.0;
#pragma omp simd reduction(+ : s)
                for (size_t i = 0; i < n; i++)
                    s += (double)x[i];
                acc[j] += s;
            }
    }
    float *y = chunk_out(t[1], k->dtype, c0, out);
    for (size_t j = 0; j < len; j++)
        y[j] = (float)acc[j];
    chunk_put(t[1], k->dtype, c0, len, y);
}

/* With inner 1 the row blocks' fp32 sums are added in fp64 in block order, whatever the split over the cores. */
int cpu_bias_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t outer = (size_t)k->dims[0], C = (size_t)k->dims[1], all = (size_t)(k->dims[0] * k->dims[1] * k->dims[2]);
    if (k->dims[2] > 1) {
        cpu_for_chunks_of(k, t, C, BIAS_BWD_CHANNELS, all, bias_bwd_channels);
        return 0;
    }
    const size_t blocks = (outer + BIAS_BWD_ROWS - 1) / BIAS_BWD_ROWS;
    float *part = cpu_scratch(blocks * C, "bias gradient", e);
    double *acc = part ? calloc(C, sizeof *acc) : NULL;
    if (!acc) {
        free(part);
        return part ? err_set(e, ERR_INTERNAL, "out of host memory for the bias gradient's sums") : -1;
    }
    cpu_for_chunks(k, (void *[]){t[0], t[1], part}, all, BIAS_BWD_ROWS * C, bias_bwd_rows);
    for (size_t b = 0; b < blocks; b++)
        for (size_t c = 0; c < C; c++)
            acc[c] += (double)part[b * C + c];
    for (size_t c = 0; c < C; c++)
        part[c] = (float)acc[c];
    tensor_from_f32(t[1], k->dtype, part, C);
    free(part);
    free(acc);
    return 0;
}
