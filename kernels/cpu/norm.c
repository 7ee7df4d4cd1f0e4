/* norm.c: CPU row-wise softmax, the normalisations (LayerNorm, RMSNorm, GroupNorm) with their
 * backward kernels (statistics kept in fp32 and saved for the backward), and the row L2 norm (DoRA).
 * Softmax, LayerNorm and RMSNorm are vectorized loops over fp32 pieces of whole rows, the rows split over
 * the cores (cpu_vec.h); their parameter gradients are summed over blocks of rows, added in block order. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

/* One row of softmax, in CPU_CHUNK pieces: its max, then exp(x - max) summed, then scaled by 1/sum. An fp32
 * row keeps the exponentials in y between the last two passes; a 16-bit one computes them again rather
 * than round them twice. */
CPU_BODY void softmax_row(const struct kernel_call *k, void *const *t, size_t base, size_t cols)
{
    float buf[CPU_CHUNK], out[CPU_CHUNK];
    const bool f32 = k->dtype == DT_F32;
    const float mx = cpu_row_max(t[0], k->dtype, base, cols);
    float sum = 0.0f;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cpu_piece(cols, c0);
        const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
        float *y = f32 ? (float *)t[1] + base + c0 : out;
#pragma omp simd reduction(+ : sum)
        for (size_t c = 0; c < n; c++) {
            y[c] = cpu_exp_nonpos(x[c] - mx);
            sum += y[c];
        }
    }
    const float inv = 1.0f / sum;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cpu_piece(cols, c0);
        float *y = f32 ? (float *)t[1] + base + c0 : out;
        if (!f32) {
            const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                y[c] = cpu_exp_nonpos(x[c] - mx);
        }
#pragma omp simd
        for (size_t c = 0; c < n; c++)
            y[c] *= inv;
        chunk_put(t[1], k->dtype, base + c0, n, y);
    }
}

/* Rows [i0 / cols, (i0 + len) / cols): chunks are whole rows. */
CPU_BODY void softmax_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t cols = (size_t)k->dims[1];
    for (size_t base = i0; base < i0 + len; base += cols)
        softmax_row(k, t, base, cols);
}
CPU_MULTIVERSION(softmax_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_softmax_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], softmax_rows);
    return 0;
}

/* dx = y * (dy - sum(y * dy)) for whole rows; the dot product of a row in fp32 per piece, fp64 across pieces. */
CPU_BODY void softmax_bwd_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t cols = (size_t)k->dims[1];
    float yb[CPU_CHUNK], gb[CPU_CHUNK];
    for (size_t base = i0; base < i0 + len; base += cols) {
        double dot = 0.0;
        for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(cols, c0);
            const float *y = chunk_in(t[0], k->dtype, base + c0, n, yb), *g = chunk_in(t[1], k->dtype, base + c0, n, gb);
            float d = 0.0f;
#pragma omp simd reduction(+ : d)
            for (size_t c = 0; c < n; c++)
                d += y[c] * g[c];
            dot += d;
        }
        const float dt = (float)dot;
        for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(cols, c0);
            const float *y = chunk_in(t[0], k->dtype, base + c0, n, yb), *g = chunk_in(t[1], k->dtype, base + c0, n, gb);
            float *dx = chunk_out(t[2], k->dtype, base + c0, gb);
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                dx[c] = y[c] * (g[c] - dt);
            chunk_put(t[2], k->dtype, base + c0, n, dx);
        }
    }
}
CPU_MULTIVERSION(softmax_bwd_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_softmax_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], softmax_bwd_rows);
    return 0;
}

/* Sum of a row's x - shift and of its squares, each piece in fp32, fp64 across pieces. */
CPU_BODY void row_sums(const void *x, int dt, size_t base, size_t cols, float shift, double *s1, double *s2)
{
    float buf[CPU_CHUNK];
    double a = 0.0, b = 0.0;
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cpu_piece(cols, c0);
        const float *v = chunk_in(x, dt, base + c0, n, buf);
        float p = 0.0f, q = 0.0f;
#pragma omp simd reduction(+ : p, q)
        for (size_t c = 0; c < n; c++) {
            float d = v[c] - shift;
            p += d;
            q += d * d;
        }
        a += p;
        b += q;
    }
    *s1 = a;
    *s2 = b;
}

/* y = (x - mean) * rstd * gamma (+ beta when beta is not NULL) over one row, in pieces. */
CPU_BODY void norm_row_out(const struct kernel_call *k, const void *x, const void *gamma, const void *beta, void *y,
                           size_t base, size_t cols, float mean, float rstd)
{
    float xb[CPU_CHUNK], gb[CPU_CHUNK], bb[CPU_CHUNK];
    for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
        size_t n = cpu_piece(cols, c0);
        const float *xv = chunk_in(x, k->dtype, base + c0, n, xb), *g = chunk_in(gamma, k->dtype, c0, n, gb);
        float *yv = chunk_out(y, k->dtype, base + c0, xb);
        if (beta) {
            const float *b = chunk_in(beta, k->dtype, c0, n, bb);
            const float shift = -mean * rstd;
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                yv[c] = (xv[c] * rstd + shift) * g[c] + b[c];
        } else {
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                yv[c] = xv[c] * rstd * g[c];
        }
        chunk_put(y, k->dtype, base + c0, n, yv);
    }
}

/* LayerNorm forward over whole rows: the moments in one pass about the row's first element (so a large mean
 * costs no precision), the variance the biased one, as PyTorch's. */
CPU_BODY void layernorm_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t cols = (size_t)k->dims[1];
    float *mean = t[4], *rstd = t[5];
    for (size_t base = i0; base < i0 + len; base += cols) {
        const size_t r = base / cols;
        const float shift = ld(t[0], k->dtype, base);
        double s1, s2;
        row_sums(t[0], k->dtype, base, cols, shift, &s1, &s2);
        const double d = s1 / (double)cols, var = s2 / (double)cols - d * d;
        mean[r] = (float)(shift + d);
        rstd[r] = (float)(1.0 / sqrt((var > 0.0 ? var : 0.0) + k->fparam[0]));
        norm_row_out(k, t[0], t[1], t[2], t[3], base, cols, mean[r], rstd[r]);
    }
}
CPU_MULTIVERSION(layernorm_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_layernorm_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], layernorm_rows);
    return 0;
}

/* RMSNorm forward over whole rows. */
CPU_BODY void rmsnorm_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t cols = (size_t)k->dims[1];
    float *rstd = t[3];
    for (size_t base = i0; base < i0 + len; base += cols) {
        double s1, s2;
        row_sums(t[0], k->dtype, base, cols, 0.0f, &s1, &s2);
        rstd[base / cols] = (float)(1.0 / sqrt(s2 / (double)cols + k->fparam[0]));
        norm_row_out(k, t[0], t[1], NULL, t[2], base, cols, 0.0f, rstd[base / cols]);
    }
}
CPU_MULTIVERSION(rmsnorm_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_rmsnorm_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], rmsnorm_rows);
    return 0;
}

/* dx of LayerNorm (center) or RMSNorm over whole rows: rstd * (g - mean(g) - xhat * mean(g * xhat)),
 * g = dy * gamma, xhat = (x - mean) * rstd; RMSNorm has mean 0 and drops the mean(g) term. Tensors dy, x,
 * gamma first; then LayerNorm's mean, rstd, dx or RMSNorm's rstd, dx. */
CPU_BODY void norm_dx_rows(const struct kernel_call *k, void *const *t, size_t i0, size_t len, int center)
{
    const size_t cols = (size_t)k->dims[1];
    const float *mean = center ? t[3] : NULL, *rstd = t[center ? 4 : 3];
    void *dx = t[center ? 5 : 4];
    float db[CPU_CHUNK], xb[CPU_CHUNK], gb[CPU_CHUNK];
    for (size_t base = i0; base < i0 + len; base += cols) {
        const float m = center ? mean[base / cols] : 0.0f, rs = rstd[base / cols];
        double sg = 0.0, sgx = 0.0;
        for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(cols, c0);
            const float *dy = chunk_in(t[0], k->dtype, base + c0, n, db), *x = chunk_in(t[1], k->dtype, base + c0, n, xb),
                        *ga = chunk_in(t[2], k->dtype, c0, n, gb);
            float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
            for (size_t c = 0; c < n; c++) {
                float g = dy[c] * ga[c];
                a += g;
                b += g * ((x[c] - m) * rs);
            }
            sg += a;
            sgx += b;
        }
        const float mg = center ? (float)(sg / (double)cols) : 0.0f, mgx = (float)(sgx / (double)cols);
        for (size_t c0 = 0; c0 < cols; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(cols, c0);
            const float *dy = chunk_in(t[0], k->dtype, base + c0, n, db), *x = chunk_in(t[1], k->dtype, base + c0, n, xb),
                        *ga = chunk_in(t[2], k->dtype, c0, n, gb);
            float *out = chunk_out(dx, k->dtype, base + c0, db);
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                out[c] = rs * (dy[c] * ga[c] - mg - (x[c] - m) * rs * mgx);
            chunk_put(dx, k->dtype, base + c0, n, out);
        }
    }
}

CPU_BODY void layernorm_dx_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    norm_dx_rows(k, t, i0, len, 1);
}
CPU_MULTIVERSION(layernorm_dx_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

CPU_BODY void rmsnorm_dx_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    norm_dx_rows(k, t, i0, len, 0);
}
CPU_MULTIVERSION(rmsnorm_dx_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_layernorm_bwd_dx(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], layernorm_dx_rows);
    return 0;
}

#define NORM_PARAM_ROWS 64 /* rows a chunk of dgamma/dbeta sums in fp32, before the blocks are added in fp64 */

/* A block of NORM_PARAM_ROWS rows of dgamma = sum of dy * (x - mean) * rstd and (LayerNorm, center) dbeta = sum
 * of dy, in fp32, into the block's 2 C partial sums in t[6] (dgamma's C, then dbeta's). Tensors dy, x, then
 * LayerNorm's mean, rstd or RMSNorm's gamma, rstd. */
CPU_BODY void norm_params_rows(const struct kernel_call *k, void *const *t, size_t i0, size_t len, int center)
{
    const size_t C = (size_t)k->dims[1];
    const float *mean = center ? t[2] : NULL, *rstd = t[3];
    float *pg = (float *)t[6] + i0 / (NORM_PARAM_ROWS * C) * 2 * C, *pb = pg + C, db[CPU_CHUNK], xb[CPU_CHUNK];
    memset(pg, 0, 2 * C * sizeof *pg);
    for (size_t base = i0; base < i0 + len; base += C) {
        const float m = center ? mean[base / C] : 0.0f, rs = rstd[base / C];
        for (size_t c0 = 0; c0 < C; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(C, c0);
            const float *dy = chunk_in(t[0], k->dtype, base + c0, n, db), *x = chunk_in(t[1], k->dtype, base + c0, n, xb);
            float *g = pg + c0, *b = pb + c0;
#pragma omp simd
            for (size_t j = 0; j < n; j++) {
                g[j] += dy[j] * ((x[j] - m) * rs);
                b[j] += dy[j];
            }
        }
    }
}

CPU_BODY void layernorm_params_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    norm_params_rows(k, t, i0, len, 1);
}
CPU_MULTIVERSION(layernorm_params, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

CPU_BODY void rmsnorm_params_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    norm_params_rows(k, t, i0, len, 0);
}
CPU_MULTIVERSION(rmsnorm_params, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

/* dgamma (into tensor dg) and, unless db is -1, dbeta: the row blocks' sums (fn) added in fp64 in block order,
 * whatever the split over the cores. */
static int norm_params(const struct kernel_call *k, void *const *t, int dg, int db, cpu_chunk_fn *fn, struct err *e)
{
    const size_t rows = (size_t)k->dims[0], C = (size_t)k->dims[1], blocks = (rows + NORM_PARAM_ROWS - 1) / NORM_PARAM_ROWS;
    float *part = cpu_scratch(blocks * 2 * C, "norm parameter gradient", e);
    double *acc = part ? calloc(2 * C, sizeof *acc) : NULL;
    if (!acc) {
        free(part);
        return part ? err_set(e, ERR_INTERNAL, "out of host memory for the norm parameter gradient's sums") : -1;
    }
    cpu_for_chunks(k, (void *[]){t[0], t[1], t[2], t[3], t[4], t[5], part}, rows * C, NORM_PARAM_ROWS * C, fn);
    for (size_t b = 0; b < blocks; b++)
        for (size_t c = 0; c < 2 * C; c++)
            acc[c] += (double)part[b * 2 * C + c];
    for (size_t c = 0; c < 2 * C; c++)
        part[c] = (float)acc[c];
    tensor_from_f32(t[dg], k->dtype, part, C);
    if (db >= 0)
        tensor_from_f32(t[db], k->dtype, part + C, C);
    free(part);
    free(acc);
    return 0;
}

int cpu_layernorm_bwd_params(const struct kernel_call *k, void *const *t, struct err *e)
{
    return k->dims[0] && k->dims[1] ? norm_params(k, t, 4, 5, layernorm_params, e) : 0;
}

/* dx row by row, then dgamma by row blocks. */
int cpu_rmsnorm_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t rows = (size_t)k->dims[0], C = (size_t)k->dims[1];
    if (!rows || !C)
        return 0;
    cpu_for_rows(k, t, rows, C, rmsnorm_dx_rows);
    return norm_params(k, t, 5, -1, rmsnorm_params, e);
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

/* dx of GroupNorm's group of n elements: rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma,
 * xhat = (x - mean) * rstd; gamma is per channel, cstride elements each, from channel c0. */
static void norm_dx(const struct kernel_call *k, void *const *t, size_t base, size_t n, size_t cstride, size_t c0,
                    float mean, float rstd)
{
    double sg = 0.0, sgx = 0.0;
    for (size_t i = 0; i < n; i++) {
        float g = ld(t[0], k->dtype, base + i) * ld(t[2], k->dtype, c0 + i / cstride);
        float xh = (ld(t[1], k->dtype, base + i) - mean) * rstd;
        sg += g;
        sgx += g * xh;
    }
    float mg = (float)(sg / (double)n), mgx = (float)(sgx / (double)n);
    void *dx = t[5];
    for (size_t i = 0; i < n; i++) {
        float g = ld(t[0], k->dtype, base + i) * ld(t[2], k->dtype, c0 + i / cstride);
        float xh = (ld(t[1], k->dtype, base + i) - mean) * rstd;
        st(dx, k->dtype, base + i, rstd * (g - mg - xh * mgx));
    }
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
                    rstd[s]);
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
