/* conv.c: CPU 2-D convolution (NCHW, square filter, groups = 1) by im2col + cblas_sgemm, forward,
 * backward to the input (GEMM + col2im) and backward to the filter. */
#include <string.h>

#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

struct conv {
    int64_t N, C, H, W, K, R, stride, pad, P, Q;
    int64_t crr, pq; /* rows and columns of one image's column matrix */
};

static struct conv conv_of(const struct kernel_call *k)
{
    struct conv c = {k->dims[0], k->dims[1], k->dims[2], k->dims[3], k->dims[4], k->dims[5], k->dims[6], k->dims[7], 0, 0, 0, 0};
    c.P = (c.H + 2 * c.pad - c.R) / c.stride + 1;
    c.Q = (c.W + 2 * c.pad - c.R) / c.stride + 1;
    c.crr = c.C * c.R * c.R;
    c.pq = c.P * c.Q;
    return c;
}

/* col[(c, r, s), (p, q)] = x[c, p*stride - pad + r, q*stride - pad + s] (0 outside the image). */
static void im2col(const struct conv *c, const float *x, float *col)
{
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t r = 0; r < c->R; r++)
            for (int64_t s = 0; s < c->R; s++) {
                float *row = col + ((ch * c->R + r) * c->R + s) * c->pq;
                for (int64_t p = 0; p < c->P; p++) {
                    int64_t h = p * c->stride - c->pad + r;
                    for (int64_t q = 0; q < c->Q; q++) {
                        int64_t w = q * c->stride - c->pad + s;
                        row[p * c->Q + q] = h >= 0 && h < c->H && w >= 0 && w < c->W ? x[(ch * c->H + h) * c->W + w] : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: x[c, h, w] += every column entry that read it. */
static void col2im(const struct conv *c, const float *col, float *x)
{
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t r = 0; r < c->R; r++)
            for (int64_t s = 0; s < c->R; s++) {
                const float *row = col + ((ch * c->R + r) * c->R + s) * c->pq;
                for (int64_t p = 0; p < c->P; p++) {
                    int64_t h = p * c->stride - c->pad + r;
                    if (h < 0 || h >= c->H)
                        continue;
                    for (int64_t q = 0; q < c->Q; q++) {
                        int64_t w = q * c->stride - c->pad + s;
                        if (w >= 0 && w < c->W)
                            x[(ch * c->H + h) * c->W + w] += row[p * c->Q + q];
                    }
                }
            }
}

/* fp32 copies of the two inputs, a zeroed fp32 output and one image's column matrix. */
struct conv_bufs {
    float *in0, *in1, *out, *col;
};

static int bufs_get(struct conv_bufs *b, const struct kernel_call *k, void *const *t, struct err *e)
{
    size_t n0 = kernel_get(k->kernel)->elems(k, 0), n1 = kernel_get(k->kernel)->elems(k, 1);
    size_t n2 = kernel_get(k->kernel)->elems(k, 2);
    struct conv c = conv_of(k);
    memset(b, 0, sizeof *b);
    if (blas_load(e) < 0)
        return -1;
    if (!(b->in0 = cpu_scratch(n0, "conv input", e)) || !(b->in1 = cpu_scratch(n1, "conv input", e)) ||
        !(b->out = cpu_scratch(n2, "conv output", e)) || !(b->col = cpu_scratch((size_t)(c.crr * c.pq), "im2col", e)))
        return -1;
    tensor_to_f32(b->in0, t[0], k->dtype, n0);
    tensor_to_f32(b->in1, t[1], k->dtype, n1);
    memset(b->out, 0, n2 * sizeof *b->out);
    return 0;
}

static int bufs_put(struct conv_bufs *b, const struct kernel_call *k, void *const *t, int rc)
{
    if (rc == 0)
        tensor_from_f32(t[2], k->dtype, b->out, kernel_get(k->kernel)->elems(k, 2));
    free(b->in0);
    free(b->in1);
    free(b->out);
    free(b->col);
    return rc;
}

int cpu_conv2d_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    struct conv_bufs b;
    if (bufs_get(&b, k, t, e) < 0)
        return bufs_put(&b, k, t, -1);
    for (int64_t n = 0; n < c.N; n++) {
        im2col(&c, b.in0 + n * c.C * c.H * c.W, b.col);
        /* y[n] (K x PQ) = w (K x CRR) * col (CRR x PQ) */
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c.K, (int)c.pq, (int)c.crr, 1.0f, b.in1,
                    (int)c.crr, b.col, (int)c.pq, 0.0f, b.out + n * c.K * c.pq, (int)c.pq);
    }
    return bufs_put(&b, k, t, 0);
}

int cpu_conv2d_bwd_data(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    struct conv_bufs b;
    if (bufs_get(&b, k, t, e) < 0)
        return bufs_put(&b, k, t, -1);
    for (int64_t n = 0; n < c.N; n++) {
        /* dcol (CRR x PQ) = w^T (CRR x K) * dy[n] (K x PQ), then scattered back into dx[n] */
        blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c.crr, (int)c.pq, (int)c.K, 1.0f, b.in1,
                    (int)c.crr, b.in0 + n * c.K * c.pq, (int)c.pq, 0.0f, b.col, (int)c.pq);
        col2im(&c, b.col, b.out + n * c.C * c.H * c.W);
    }
    return bufs_put(&b, k, t, 0);
}

int cpu_conv2d_bwd_filter(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    struct conv_bufs b;
    if (bufs_get(&b, k, t, e) < 0)
        return bufs_put(&b, k, t, -1);
    for (int64_t n = 0; n < c.N; n++) {
        im2col(&c, b.in0 + n * c.C * c.H * c.W, b.col);
        /* dw (K x CRR) += dy[n] (K x PQ) * col^T (PQ x CRR) */
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c.K, (int)c.crr, (int)c.pq, 1.0f,
                    b.in1 + n * c.K * c.pq, (int)c.pq, b.col, (int)c.pq, 1.0f, b.out, (int)c.crr);
    }
    return bufs_put(&b, k, t, 0);
}
