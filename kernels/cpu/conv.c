/* conv.c: CPU 2-D convolution (NCHW, square filter, groups = 1) on cblas_sgemm: forward, backward to
 * the input and backward to the filter. Stride 1 (the common case) needs no im2col: one GEMM per
 * filter tap on a zero-padded copy of one image (see shifted_conv), every buffer the size of one
 * image; the backward to the input is the forward of dy with the filter turned round. Other strides
 * go through im2col + GEMM (+ col2im) per image. OpenBLAS threads the GEMMs. */
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

/* Stride 1 without im2col. On an image zero-padded to Hp x Wp, output (p, q) of tap (r, s) reads
 * xp[c][p + r][q + s]: at offset r Wp + s from xp[c][p][q]. So, computing "wide" outputs, P rows of
 * Wp of which the last Wp - Q are junk (they read the next row), tap (r, s) is one GEMM on xp shifted
 * by r Wp + s, with no copy: yw (K x P Wp) += w_rs (K x C) xp_rs (C x P Wp, rows Hp Wp apart). */
struct wide {
    int64_t C, H, W, pad, Hp, Wp, P; /* image channels and size, its padding, padded size, output rows */
    float *xp;                       /* [C][Hp][Wp], then R - 1 floats the last junk columns read */
};

static int wide_get(struct wide *v, int64_t C, int64_t H, int64_t W, int64_t pad, int64_t R, struct err *e)
{
    *v = (struct wide){C, H, W, pad, H + 2 * pad, W + 2 * pad, H + 2 * pad - R + 1, NULL};
    v->xp = cpu_scratch((size_t)(C * v->Hp * v->Wp + R), "conv padded image", e);
    if (v->xp)
        memset(v->xp, 0, (size_t)(C * v->Hp * v->Wp + R) * sizeof *v->xp);
    return v->xp ? 0 : -1;
}

static const void *elem(const void *p, int dt, int64_t i)
{
    return (const char *)p + i * (int64_t)dtype_size((enum dtype)dt);
}

/* Copies image x (C x H x W, from element x0 of a tensor of dtype dt) inside the zero border of xp. */
static void wide_fill(struct wide *v, const void *x, int dt, int64_t x0)
{
    for (int64_t c = 0; c < v->C; c++)
        for (int64_t h = 0; h < v->H; h++)
            tensor_to_f32(v->xp + (c * v->Hp + h + v->pad) * v->Wp + v->pad, elem(x, dt, x0 + (c * v->H + h) * v->W),
                          dt, (size_t)v->W);
}

/* yw (K x P Wp) = sum over taps t = r R + s of wt[t] (K x C) times xp shifted by r Wp + s. */
static void shifted_conv(const struct wide *v, const float *wt, int64_t K, int64_t R, float *yw)
{
    const int64_t ncol = v->P * v->Wp;
    for (int64_t t = 0; t < R * R; t++)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)K, (int)ncol, (int)v->C, 1.0f, wt + t * K * v->C,
                   (int)v->C, v->xp + t / R * v->Wp + t % R, (int)(v->Hp * v->Wp), t ? 1.0f : 0.0f, yw, (int)ncol);
}

/* Stores the Q real columns of each wide output row (K x P rows of Wp) at element y0 of y. */
static void unwiden(void *y, int dt, int64_t y0, const float *yw, int64_t K, int64_t P, int64_t Q, int64_t Wp)
{
    for (int64_t r = 0; r < K * P; r++)
        tensor_from_f32((char *)y + (y0 + r * Q) * (int64_t)dtype_size((enum dtype)dt), dt, yw + r * Wp, (size_t)Q);
}

/* The inverse: rows of Q from element y0 of y into wide rows of Wp (junk columns untouched). */
static void widen(float *yw, const void *y, int dt, int64_t y0, int64_t K, int64_t P, int64_t Q, int64_t Wp)
{
    for (int64_t r = 0; r < K * P; r++)
        tensor_to_f32(yw + r * Wp, elem(y, dt, y0 + r * Q), dt, (size_t)Q);
}

/* wt[r R + s][a][b] = w[a][b][r][s] (flip = 0) or w[b][a][R-1-r][R-1-s] (flip = 1: the filter of the
 * backward to the input), from w [A][B][R][R] of dtype dt; NULL with e set. */
static float *taps_of(const void *w, int dt, int64_t A, int64_t B, int64_t R, int flip, struct err *e)
{
    const int64_t n = A * B * R * R;
    float *wf = cpu_scratch((size_t)n, "conv filter", e), *wt = wf ? cpu_scratch((size_t)n, "conv filter taps", e) : NULL;
    if (!wt) {
        free(wf);
        return NULL;
    }
    tensor_to_f32(wf, w, dt, (size_t)n);
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < R * R; t++)
                wt[(t * (flip ? B : A) + (flip ? b : a)) * (flip ? A : B) + (flip ? a : b)] =
                    wf[(a * B + b) * R * R + (flip ? R * R - 1 - t : t)];
    free(wf);
    return wt;
}

/* y (Kout x P x Q per image) = stride-1 convolution of x (Cin x H x W per image, padded by pad) with
 * filter taps wt, for the N images of a call. */
static int conv_stride1(const struct kernel_call *k, const void *x, const float *wt, void *y, int64_t N, int64_t Cin,
                        int64_t H, int64_t W, int64_t Kout, int64_t R, int64_t pad, struct err *e)
{
    struct wide v;
    if (wide_get(&v, Cin, H, W, pad, R, e) < 0)
        return -1;
    const int64_t Q = v.Wp - R + 1;
    float *yw = cpu_scratch((size_t)(Kout * v.P * v.Wp), "conv wide output", e);
    if (!yw) {
        free(v.xp);
        return -1;
    }
    for (int64_t n = 0; n < N; n++) {
        wide_fill(&v, x, k->dtype, n * Cin * H * W);
        shifted_conv(&v, wt, Kout, R, yw);
        unwiden(y, k->dtype, n * Kout * v.P * Q, yw, Kout, v.P, Q, v.Wp);
    }
    free(v.xp);
    free(yw);
    return 0;
}

int cpu_conv2d_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    if (c.stride == 1) {
        float *wt = blas_load(e) < 0 ? NULL : taps_of(t[1], k->dtype, c.K, c.C, c.R, 0, e);
        int rc = wt ? conv_stride1(k, t[0], wt, t[2], c.N, c.C, c.H, c.W, c.K, c.R, c.pad, e) : -1;
        free(wt);
        return rc;
    }
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
    if (c.stride == 1 && c.pad <= c.R - 1) { /* dx = dy padded by R - 1 - pad, convolved with w turned round */
        float *wt = blas_load(e) < 0 ? NULL : taps_of(t[1], k->dtype, c.K, c.C, c.R, 1, e);
        int rc = wt ? conv_stride1(k, t[0], wt, t[2], c.N, c.K, c.P, c.Q, c.C, c.R, c.R - 1 - c.pad, e) : -1;
        free(wt);
        return rc;
    }
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

/* Stride 1: dw_rs (K x C) = sum over images of dy widened with zero junk columns (K x P Wp) times
 * the padded image shifted by r Wp + s, transposed. */
static int bwd_filter_stride1(const struct kernel_call *k, void *const *t, const struct conv *c, struct err *e)
{
    struct wide v;
    if (blas_load(e) < 0 || wide_get(&v, c->C, c->H, c->W, c->pad, c->R, e) < 0)
        return -1;
    const int64_t ncol = v.P * v.Wp, nw = c->K * c->C * c->R * c->R;
    float *dyw = cpu_scratch((size_t)(c->K * ncol), "conv wide dy", e);
    float *dwt = dyw ? cpu_scratch((size_t)nw, "conv filter taps", e) : NULL;
    float *dw = dwt ? cpu_scratch((size_t)nw, "conv filter", e) : NULL;
    if (dw) {
        memset(dyw, 0, (size_t)(c->K * ncol) * sizeof *dyw);
        for (int64_t n = 0; n < c->N; n++) {
            wide_fill(&v, t[0], k->dtype, n * c->C * c->H * c->W);
            widen(dyw, t[1], k->dtype, n * c->K * c->pq, c->K, c->P, c->Q, v.Wp);
            for (int64_t tap = 0; tap < c->R * c->R; tap++)
                blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c->K, (int)c->C, (int)ncol, 1.0f, dyw,
                           (int)ncol, v.xp + tap / c->R * v.Wp + tap % c->R, (int)(v.Hp * v.Wp), n ? 1.0f : 0.0f,
                           dwt + tap * c->K * c->C, (int)c->C);
        }
        for (int64_t kc = 0; kc < c->K * c->C; kc++)
            for (int64_t tap = 0; tap < c->R * c->R; tap++)
                dw[kc * c->R * c->R + tap] = dwt[tap * c->K * c->C + kc];
        tensor_from_f32(t[2], k->dtype, dw, (size_t)nw);
    }
    free(v.xp);
    free(dyw);
    free(dwt);
    free(dw);
    return dw ? 0 : -1;
}

int cpu_conv2d_bwd_filter(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    if (c.stride == 1)
        return bwd_filter_stride1(k, t, &c, e);
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
