/* kernels_test_util.h: helpers the kernel tests share: deterministic random data, typed buffers,
 * tolerance comparison and a central finite-difference gradient check. */
#ifndef OOMLAB_KERNELS_TEST_UTIL_H
#define OOMLAB_KERNELS_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/tensor_io.h"
#include "kernels.h"
#include "tap.h"

static const int test_dtypes[] = {DT_F32, DT_BF16, DT_F16};

static uint64_t test_rng_state = 0x1234567u;

static inline float rnd(void)
{
    test_rng_state = test_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(test_rng_state >> 40) / 16777216.0f * 2.0f - 1.0f; /* [-1, 1) */
}

static inline float *rnd_vec(size_t n, float scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * rnd();
    return x;
}

static inline float *zeros(size_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

/* Rounds values through a dtype, so a reference sees exactly the inputs the kernel sees. */
static inline void round_to(float *x, size_t n, int dt)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        if (dt == DT_BF16) {
            h = oom_f32_to_bf16(x[i]);
            x[i] = oom_bf16_to_f32(h);
        } else if (dt == DT_F16) {
            h = oom_f32_to_f16(x[i]);
            x[i] = oom_f16_to_f32(h);
        }
    }
}

/* A tensor of dtype dt holding x (n elements). */
static inline void *typed(const float *x, size_t n, int dt)
{
    void *p = malloc((n ? n : 1) * dtype_size((enum dtype)dt));
    tensor_from_f32(p, dt, x, n);
    return p;
}

static inline float *as_float(const void *p, size_t n, int dt)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    tensor_to_f32(x, p, dt, n);
    return x;
}

/* v rounded to dtype dt, as that dtype's bit pattern (the scalar conversions of elementwise.h). */
static inline uint32_t bits_of(int dt, float v)
{
    return dt == DT_F32 ? oom_f32_bits(v) : dt == DT_BF16 ? oom_f32_to_bf16(v) : oom_f32_to_f16(v);
}

/* Element i of a tensor of dtype dt as its bits. */
static inline uint32_t bits_at(const void *p, int dt, size_t i)
{
    return dt == DT_F32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}

/* A call with tensor ids 1..ntensors and dims as given (unused dims 0). */
static inline struct kernel_call kcall(unsigned kernel, int dt, const int64_t *dims, unsigned ndims)
{
    struct kernel_call k;
    memset(&k, 0, sizeof k);
    k.kernel = (uint16_t)kernel;
    k.dtype = (uint8_t)dt;
    k.ntensors = kernel_get(kernel)->ntensors;
    for (unsigned i = 0; i < ndims; i++)
        k.dims[i] = dims[i];
    for (unsigned i = 0; i < k.ntensors; i++)
        k.tensors[i] = i + 1;
    return k;
}
#define KCALL(kernel, dt, ...) \
    kcall(kernel, dt, (const int64_t[]){__VA_ARGS__}, sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static inline int run(const struct kernel_call *k, void *const *t)
{
    struct err e = {0};
    if (kernel_run_cpu(k, t, &e) < 0) {
        diag("%s failed: %s", kernel_get(k->kernel)->name, e.msg);
        return -1;
    }
    return 0;
}

/* max over i of |got - ref| / (1 + |ref|); NaN anywhere counts as infinite. */
static inline double rel_err(const float *got, const double *ref, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* Checks tensor p (n elements of dtype dt) against ref within tol; names the case on failure. */
static inline int check_close(const void *p, int dt, const double *ref, size_t n, double tol, const char *what)
{
    float *got = as_float(p, n, dt);
    double err = rel_err(got, ref, n);
    free(got);
    int good = ok(err <= tol, "%s (%s): error %.2g <= %.2g", what, dtype_name((enum dtype)dt), err, tol);
    return good;
}

static inline double *dvec(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* Central finite differences of loss() with respect to x[0..n) against the analytic gradient.
 * Checks at most 24 evenly spaced elements; passes when |fd - an| <= tol * (1 + |an|). */
static inline int fd_check(float *x, size_t n, double (*loss)(void *), void *ctx, const float *analytic, double tol,
                           const char *what)
{
    const float h = 1e-2f;
    size_t step = n > 24 ? n / 24 : 1;
    double worst = 0.0;
    for (size_t i = 0; i < n; i += step) {
        float saved = x[i];
        x[i] = saved + h;
        double lp = loss(ctx);
        x[i] = saved - h;
        double lm = loss(ctx);
        x[i] = saved;
        double fd = (lp - lm) / (2.0 * h), d = fabs(fd - analytic[i]) / (1.0 + fabs(analytic[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return ok(worst <= tol, "%s: finite differences, error %.2g <= %.2g", what, worst, tol);
}

/* sum_i w[i] * y[i] in double: the scalar loss a gradient check differentiates. */
static inline double wsum(const float *w, const float *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)w[i] * y[i];
    return s;
}

#define FD_TOL 1e-2

#endif
