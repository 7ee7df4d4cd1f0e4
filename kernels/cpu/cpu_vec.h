/* cpu_vec.h: what lets the CPU elementwise kernels run at memory speed: glibc's vector math
 * (libmvec) made visible to the vectorizer, an exp the vectorizer inlines, loops compiled three times
 * (AVX-512, AVX2 + FMA, baseline x86-64) with the choice made at run time, fp32 views of chunks of
 * fp32/bf16/fp16 tensors, and the split of long tensors and of whole rows over the cores (cpu_threads.h). */
#ifndef OOMLAB_CPU_VEC_H
#define OOMLAB_CPU_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_threads.h"
#include "cpu/tensor_io.h"

/* math.h declares the vector variants only under -ffast-math; with these, gcc's `#pragma omp simd`
 * loops (-fopenmp-simd -fno-math-errno) call _ZGVdN8v_expf and friends (libm.so links libmvec).
 * clang has no such attribute; it leaves the loops with these calls (and a few it cannot
 * if-convert) scalar and warns at each `omp simd` it does not honour, which says nothing wrong about
 * the code, so that warning is off for the kernels. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float erff(float);
#endif
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* A loop body, inlined into both compiled versions of its loop. */
#define CPU_BODY static inline __attribute__((always_inline))

/* CPU_DISPATCH(name, (params), (args)) defines static void name(params) running name##_avx2(args)
 * (written by hand, or by CPU_MULTIVERSION) when the CPU has AVX2 and FMA, else name##_body(args)
 * compiled for baseline x86-64. CPU_MULTIVERSION(name, (params), (args)) compiles name##_body
 * three times, for AVX-512 (F, VL, BW, DQ: 16 floats a vector, as PyTorch's CPU kernels use where the
 * CPU has it), for AVX2 + FMA and for the baseline, and dispatches; CPU_MULTIVERSION_AVX512 likewise, with
 * name##_avx512 written by hand. (target_clones cannot ask for AVX2
 * and FMA together, and "arch=haswell" misses AMD CPUs.) */
#if defined(__x86_64__) && defined(__GNUC__)
/* What every name##_avx2 (target "avx2,fma") needs of the CPU. */
static inline int cpu_has_avx2_fma(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* What every name##_avx512 (CPU_AVX512_TARGET) needs of the CPU. */
static inline int cpu_has_avx512(void)
{
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}
#define CPU_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"

#define CPU_DISPATCH(name, params, args)                 \
    static void name##_base params { name##_body args; } \
    static void name params                              \
    {                                                    \
        if (cpu_has_avx2_fma())                          \
            name##_avx2 args;                            \
        else                                             \
            name##_base args;                            \
    }
/* CPU_MULTIVERSION with name##_avx512 written by hand (intrinsics): name##_body compiled for AVX2 + FMA and the
 * baseline, and the dispatch. */
#define CPU_MULTIVERSION_AVX512(name, params, args)                                          \
    __attribute__((target("avx2,fma"))) static void name##_avx2 params { name##_body args; } \
    static void name##_base params { name##_body args; }                                     \
    static void name params                                                                  \
    {                                                                                        \
        if (cpu_has_avx512())                                                                \
            name##_avx512 args;                                                              \
        else if (cpu_has_avx2_fma())                                                         \
            name##_avx2 args;                                                                \
        else                                                                                 \
            name##_base args;                                                                \
    }
#define CPU_MULTIVERSION(name, params, args)                                                            \
    __attribute__((target(CPU_AVX512_TARGET))) static void name##_avx512 params { name##_body args; } \
    CPU_MULTIVERSION_AVX512(name, params, args)
#else
#define CPU_DISPATCH(name, params, args) \
    static void name params { name##_body args; }
#define CPU_MULTIVERSION CPU_DISPATCH
#define CPU_MULTIVERSION_AVX512 CPU_DISPATCH
#endif

/* e^x for x <= 0 (and NaN), for the vectorizer: Cephes' expf (Cody-Waite reduction by ln 2, degree-6
 * polynomial; within 1.5 ulp) written without branches, calls or float-to-int conversion, so an `omp simd`
 * loop inlines it at the full vector width. The kernels' arguments are differences from a row's maximum (or
 * -z^2), never above 0, so there is no overflow to guard; results below about 2^-126 (x < -87.7) flush to 0; NaN
 * stays NaN. libmvec's expf is as accurate but an out-of-line call per vector, which keeps the loop's other
 * work (a running sum, a scale) from fusing with it. */
CPU_BODY float cpu_exp_nonpos(float x)
{
    /* 1.5 * 2^23 + 127: adding it rounds to an integer n in the low bits, biased by 127, so those bits shifted
     * to the exponent's place are 2^n */
    const float magic = 12582912.0f + 127.0f;
    x = x < -88.0f ? -88.0f : x; /* n = -127 there: a scale of 0 */
    float t = x * 1.44269504f + magic, n = t - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r + 1.0f; /* e^r = 1 + r + r^2 P(r), by Horner */
    p = p * r + 1.0f;
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    uint32_t sb = (uint32_t)ti << 23; /* 2^n, n in [-127, 0]: 127 + n from the low bits, the rest shifted out */
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    return p * scale;
}

/* Elements per chunk: each fp32 buffer of a chunk is 8 KiB, so a kernel's few stay in L1. */
#define CPU_CHUNK 2048

/* Elements [i0, i0 + len) of tensor p as fp32: p itself for fp32, else converted into buf. */
static inline const float *chunk_in(const void *p, int dt, size_t i0, size_t len, float *buf)
{
    if (dt == DT_F32)
        return (const float *)p + i0;
    tensor_to_f32(buf, (const uint16_t *)p + i0, dt, len);
    return buf;
}

/* Where a kernel writes fp32 results for elements from i0 of tensor p: p itself for fp32, else
 * buf, which chunk_put then rounds into p. */
static inline float *chunk_out(void *p, int dt, size_t i0, float *buf)
{
    return dt == DT_F32 ? (float *)p + i0 : buf;
}

static inline void chunk_put(void *p, int dt, size_t i0, size_t len, const float *buf)
{
    if (dt != DT_F32)
        tensor_from_f32((uint16_t *)p + i0, dt, buf, len);
}

/* Runs a row-wise fn over rows x cols elements in chunks of whole rows (about CPU_CHUNK elements, at least
 * one row), long ranges split over the cores; fn walks each row in CPU_CHUNK pieces (cpu_piece). */
static inline void cpu_for_rows(const struct kernel_call *k, void *const *t, size_t rows, size_t cols, cpu_chunk_fn *fn)
{
    if (rows && cols)
        cpu_for_chunks(k, t, rows * cols, (cols < CPU_CHUNK ? CPU_CHUNK / cols : 1) * cols, fn);
}

/* Length of the piece of a row of cols elements that starts at c0. */
static inline size_t cpu_piece(size_t cols, size_t c0)
{
    return cols - c0 < CPU_CHUNK ? cols - c0 : CPU_CHUNK;
}

/* The largest of a row's cols elements from base (NaNs skipped; -inf for none), in CPU_CHUNK pieces. */
CPU_BODY float cpu_row_max(const void *x, int dt, size_t base, size_t cols)
{
    float buf[CPU_CHUNK], mx = -INFINITY;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cpu_piece(cols, c0);
        const float *v = chunk_in(x, dt, base + c0, n, buf);
#pragma omp simd reduction(max : mx)
        for (size_t c = 0; c < n; c++)
            mx = v[c] > mx ? v[c] : mx;
    }
    return mx;
}

/* acc[i] += x[i]: a row added into running sums (instantiate with CPU_MULTIVERSION(cpu_acc, ...)). */
CPU_BODY void cpu_acc_body(float *restrict acc, const float *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        acc[i] += x[i];
}

#endif
