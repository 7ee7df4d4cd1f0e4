/* tensor_io.c: whole-buffer fp32 <-> fp32/bf16/fp16 conversion (vectorized, one loop per dtype),
 * the scratch buffers CPU kernels use, the range check of integer ids and the split of chunked
 * kernels over the cores. */
#define _GNU_SOURCE
#include "cpu/tensor_io.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "cpu/cpu_bf16x8.h"
#include "cpu/cpu_vec.h"

CPU_BODY void bf16_to_f32_body(float *restrict dst, const uint16_t *restrict h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oom_bf16_to_f32(h[i]);
}

CPU_BODY void f16_to_f32_body(float *restrict dst, const uint16_t *restrict h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oom_f16_to_f32(h[i]);
}

CPU_BODY void f32_to_bf16_body(uint16_t *restrict h, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = oom_f32_to_bf16(src[i]);
}

CPU_BODY void f32_to_f16_body(uint16_t *restrict h, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = oom_f32_to_f16(src[i]);
}

CPU_MULTIVERSION(bf16_to_f32, (float *restrict dst, const uint16_t *restrict h, size_t n), (dst, h, n))
CPU_MULTIVERSION(f16_to_f32, (float *restrict dst, const uint16_t *restrict h, size_t n), (dst, h, n))
#ifdef OOM_HAVE_BF16X8
__attribute__((target("avx2,fma"))) static void f32_to_bf16_avx2(uint16_t *restrict h, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        bf16x8_store(h + i, _mm256_loadu_ps(src + i));
    f32_to_bf16_body(h + i, src + i, n - i);
}
#endif
CPU_DISPATCH(f32_to_bf16, (uint16_t *restrict h, const float *restrict src, size_t n), (h, src, n))
CPU_MULTIVERSION(f32_to_f16, (uint16_t *restrict h, const float *restrict src, size_t n), (h, src, n))

void tensor_to_f32(float *dst, const void *src, int dt, size_t n)
{
    if (dt == DT_BF16)
        bf16_to_f32(dst, src, n);
    else if (dt == DT_F16)
        f16_to_f32(dst, src, n);
    else if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
}

void tensor_from_f32(void *dst, int dt, const float *src, size_t n)
{
    if (dt == DT_BF16)
        f32_to_bf16(dst, src, n);
    else if (dt == DT_F16)
        f32_to_f16(dst, src, n);
    else if (dst != src)
        memcpy(dst, src, n * sizeof *src);
}

float *cpu_scratch(size_t n, const char *what, struct err *e)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p)
        err_set(e, ERR_INTERNAL, "out of host memory for %zu floats of %s scratch", n, what);
    return p;
}

int cpu_id_check(const char *name, int64_t row, int64_t id, int64_t limit, int allow_negative, struct err *e)
{
    if (id >= limit || (id < 0 && !allow_negative))
        return err_set(e, ERR_INPUT, "%s: row %lld has id %lld outside [0, %lld)", name, (long long)row,
                       (long long)id, (long long)limit);
    return 0;
}

/* Below this many elements per thread, starting a thread costs more than it saves. */
#define CPU_THREAD_MIN_ELEMS ((size_t)1 << 20)
#define CPU_MAX_THREADS 16

struct span {
    const struct kernel_call *k;
    void *const *t;
    cpu_chunk_fn *fn;
    size_t lo, hi, chunk;
};

static void *run_span(void *arg)
{
    const struct span *s = arg;
    for (size_t i0 = s->lo; i0 < s->hi; i0 += s->chunk)
        s->fn(s->k, s->t, i0, s->hi - i0 < s->chunk ? s->hi - i0 : s->chunk);
    return NULL;
}

static unsigned thread_limit; /* kernel_cpu_set_threads; 0: none */

void kernel_cpu_set_threads(unsigned n)
{
    thread_limit = n;
}

static size_t thread_count(size_t n)
{
    size_t want = n / CPU_THREAD_MIN_ELEMS;
    if (want < 2)
        return 1;
    cpu_set_t set;
    size_t cores = sched_getaffinity(0, sizeof set, &set) == 0 ? (size_t)CPU_COUNT(&set) : 1;
    if (thread_limit && thread_limit < cores)
        cores = thread_limit;
    want = want < cores ? want : cores;
    return want < CPU_MAX_THREADS ? want : CPU_MAX_THREADS;
}

void cpu_for_chunks(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, cpu_chunk_fn *fn)
{
    cpu_for_chunks_of(k, t, n, chunk, n, fn);
}

void cpu_for_chunks_of(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, size_t work,
                       cpu_chunk_fn *fn)
{
    const size_t chunks = (n + chunk - 1) / chunk, most = thread_count(work);
    const size_t nthreads = most < chunks ? most : chunks ? chunks : 1;
    const size_t per = (chunks + nthreads - 1) / nthreads * chunk; /* whole chunks per thread */
    struct span spans[CPU_MAX_THREADS];
    pthread_t threads[CPU_MAX_THREADS];
    int started[CPU_MAX_THREADS] = {0};
    for (size_t i = 0; i < nthreads; i++) {
        size_t lo = i * per < n ? i * per : n, hi = lo + per < n ? lo + per : n;
        spans[i] = (struct span){k, t, fn, lo, hi, chunk};
        if (i > 0)
            started[i] = pthread_create(&threads[i], NULL, run_span, &spans[i]) == 0;
    }
    run_span(&spans[0]);
    for (size_t i = 1; i < nthreads; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            run_span(&spans[i]); /* no thread to be had: this one does the work */
    }
}
