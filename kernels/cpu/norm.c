/* norm.c: CPU row-wise softmax, the normalisations (LayerNorm, RMSNorm, GroupNorm) with their
 * backward kernels (statistics kept in fp32 and saved for the backward), and the row L2 norm (DoRA). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

/* One row of softmax, in CPU_CHUNK pieces: its max, then exp(x - max) summed, then scaled by 1/sum. An fp32
 * row keeps the exponentials in y between the last two passes; a 16-bit one computes them again rather
 * than round them twice. The loops vectorize (libmvec's expf). */
static void softmax_row(const struct kernel_call *k, void *const *t, size_t base, size_t cols)
{
    float buf[CPU_CHUNK], out[CPU_CHUNK];
    const bool f32 = k->dtype == DT_F32;
    float mx = -INFINITY;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cols - c0 < CPU_CHUNK ? cols - c0 : CPU_CHUNK;
        const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
#pragma omp simd reduction(max : mx)
        for (size_t c = 0; c < n; c++)
            mx = x[c] > mx ? x[c] : mx;
    }
    float sum = 0.0f;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cols - c0 < CPU_CHUNK ? cols - c0 : CPU_CHUNK;
        const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
        float *y = f32 ? (float *)t[1] + base + c0 : out;
#pragma omp simd reduction(+ : sum)
        for (size_t c = 0; c < n; c++) {
            y[c] = expf(x[c] - mx);
            sum += y[c];
        }
    }
    const float inv = 1.0f / sum;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cols - c0 < CPU_CHUNK ? cols - c0 : CPU_CHUNK;
        float *y = f32 ? (float *)t[1] + base + c0 : out;
        if (!f32) {
            const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                y[c] = expf(x[c] - mx);
        }
#pragma omp simd
        for (size_t c = 0; c < n; c++)
            y[c] *= inv;
        chunk_put(t[1], k->dtype, base + c0, n, y);
    }
}

/* Rows [i0 / cols, (i0 + len) / cols): chunks are whole rows. */
static void softmax_rows(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t cols = (size_t)k->dims[1];
    for (size_t base = i0; base < i0 + len; base += cols)
        softmax_row(k, t, base, cols);
}

int cpu_softmax_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t rows = (size_t)k->dims[0], cols = (size_t)k->dims[1];
    if (rows && cols) {
        size_t per = cols < CPU_CHUNK ? CPU_CHUNK / cols : 1; /* rows per chunk */
        cpu_for_chunks(k, t, rows * cols, per * cols, softmax_rows);
    }
    return 0;
}

int cpu_softmax_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], cols = k->dims[1];
    for (int64_t r = 0; r < rows; r++) {
        size_t base = (size_t)(r * cols);
        float dot = 0.0f;
        for (int64_t c = 0; c < cols; c++)
            dot += ld(t[0], k->dtype, base + c) * ld(t[1], k->dtype, base + c);
        for (int64_t c = 0; c < cols; c++)
            st(t[2], k->dtype, base + c, ld(t[0], k->dtype, base + c) * (ld(t[1], k->dtype, base + c) - dot));
    }
    return 0;
}

/* Mean and 1/std of n elements at stride 1 from x + base (variance is the biased one, as PyTorch's). */
static void moments(const void *x, int dt, size_t base, size_t n, float eps, float *mean, float *rstd)
{
    double s = 0.0, s2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = ld(x, dt, base + i);
        s += v;
        s2 += v * v;
    }
    double m = s / (double)n, var = s2 / (double)n - m * m;
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt((var > 0.0 ? var : 0.0) + eps));
}

int cpu_layernorm_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    float *mean = t[4], *rstd = t[5];
    for (int64_t r = 0; r < rows; r++) {
        size_t base = (size_t)(r * C);
        moments(t[0], k->dtype, base, (size_t)C, k->fparam[0], &mean[r], &rstd[r]);
        for (int64_t c = 0; c < C; c++) {
            float xh = (ld(t[0], k->dtype, base + c) - mean[r]) * rstd[r];
            st(t[3], k->dtype, base + c, xh * ld(t[1], k->dtype, c) + ld(t[2], k->dtype, c));
        }
    }
    return 0;
}

/* dx of a normalisation over n elements: rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
 * xhat = (x - mean) * rstd; for RMSNorm mean = 0 and the mean(g) term is dropped (center = 0). */
static void norm_dx(const struct kernel_call *k, void *const *t, size_t base, size_t n, size_t cstride, size_t c0,
                    float mean, float rstd, int center)
{
    double sg = 0.0, sgx = 0.0;
    for (size_t i = 0; i < n; i++) {
        float g = ld(t[0], k->dtype, base + i) * ld(t[2], k->dtype, c0 + i / cstride);
        float xh = (ld(t[1], k->dtype, base + i) - mean) * rstd;
        sg += g;
        sgx += g * xh;
    }
    float mg = center ? (float)(sg / (double)n) : 0.0f, mgx = (float)(sgx / (double)n);
    void *dx = t[k->kernel == K_RMSNORM_BWD ? 4 : 5];
    for (size_t i = 0; i < n; i++) {
        float g = ld(t[0], k->dtype, base + i) * ld(t[2], k->dtype, c0 + i / cstride);
        float xh = (ld(t[1], k->dtype, base + i) - mean) * rstd;
        st(dx, k->dtype, base + i, rstd * (g - mg - xh * mgx));
    }
}

int cpu_layernorm_bwd_dx(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    const float *mean = t[3], *rstd = t[4];
    for (int64_t r = 0; r < rows; r++)
        norm_dx(k, t, (size_t)(r * C), (size_t)C, 1, 0, mean[r], rstd[r], 1);
    return 0;
}

int cpu_layernorm_bwd_params(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    const float *mean = t[2], *rstd = t[3];
    for (int64_t c = 0; c < C; c++) {
        double dg = 0.0, db = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            size_t i = (size_t)(r * C + c);
            float dy = ld(t[0], k->dtype, i);
            dg += dy * (ld(t[1], k->dtype, i) - mean[r]) * rstd[r];
            db += dy;
        }
        st(t[4], k->dtype, (size_t)c, (float)dg);
        st(t[5], k->dtype, (size_t)c, (float)db);
    }
    return 0;
}

int cpu_rmsnorm_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    float *rstd = t[3];
    for (int64_t r = 0; r < rows; r++) {
        size_t base = (size_t)(r * C);
        double s2 = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double v = ld(t[0], k->dtype, base + c);
            s2 += v * v;
        }
        rstd[r] = (float)(1.0 / sqrt(s2 / (double)C + k->fparam[0]));
        for (int64_t c = 0; c < C; c++)
            st(t[2], k->dtype, base + c, ld(t[0], k->dtype, base + c) * rstd[r] * ld(t[1], k->dtype, c));
    }
    return 0;
}

int cpu_rmsnorm_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    const float *rstd = t[3];
    for (int64_t r = 0; r < rows; r++)
        norm_dx(k, t, (size_t)(r * C), (size_t)C, 1, 0, 0.0f, rstd[r], 0);
    for (int64_t c = 0; c < C; c++) {
        double dg = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            size_t i = (size_t)(r * C + c);
            dg += ld(t[0], k->dtype, i) * ld(t[1], k->dtype, i) * rstd[r];
        }
        st(t[5], k->dtype, (size_t)c, (float)dg);
    }
    return 0;
}

int cpu_groupnorm_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t N = k->dims[0], C = k->dims[1], HW = k->dims[2], G = k->dims[3], cg = C / G;
    float *mean = t[4], *rstd = t[5];
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            size_t base = (size_t)((n * C + g * cg) * HW), s = (size_t)(n * G + g);
            moments(t[0], k->dtype, base, (size_t)(cg * HW), k->fparam[0], &mean[s], &rstd[s]);
            for (int64_t i = 0; i < cg * HW; i++) {
                int64_t c = g * cg + i / HW;
                float xh = (ld(t[0], k->dtype, base + i) - mean[s]) * rstd[s];
                st(t[3], k->dtype, base + i, xh * ld(t[1], k->dtype, c) + ld(t[2], k->dtype, c));
            }
        }
    return 0;
}

int cpu_groupnorm_bwd_dx(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t N = k->dims[0], C = k->dims[1], HW = k->dims[2], G = k->dims[3], cg = C / G;
    const float *mean = t[3], *rstd = t[4];
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            size_t s = (size_t)(n * G + g);
            norm_dx(k, t, (size_t)((n * C + g * cg) * HW), (size_t)(cg * HW), (size_t)HW, (size_t)(g * cg), mean[s],
                    rstd[s], 1);
        }
    return 0;
}

int cpu_groupnorm_bwd_params(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t N = k->dims[0], C = k->dims[1], HW = k->dims[2], G = k->dims[3], cg = C / G;
    const float *mean = t[2], *rstd = t[3];
    for (int64_t c = 0; c < C; c++) {
        double dg = 0.0, db = 0.0;
        for (int64_t n = 0; n < N; n++) {
            size_t s = (size_t)(n * G + c / cg), base = (size_t)((n * C + c) * HW);
            for (int64_t i = 0; i < HW; i++) {
                float dy = ld(t[0], k->dtype, base + i);
                dg += dy * (ld(t[1], k->dtype, base + i) - mean[s]) * rstd[s];
                db += dy;
            }
        }
        st(t[4], k->dtype, (size_t)c, (float)dg);
        st(t[5], k->dtype, (size_t)c, (float)db);
    }
    return 0;
}

int cpu_row_norm(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], C = k->dims[1];
    const double p = k->fparam[0] != 0.0f ? k->fparam[0] : 1.0;
    for (int64_t r = 0; r < rows; r++) {
        double s2 = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double v = ld(t[0], k->dtype, (size_t)(r * C + c));
            s2 += v * v;
        }
        st(t[1], k->dtype, (size_t)r, (float)pow(sqrt(s2), p));
    }
    return 0;
}
