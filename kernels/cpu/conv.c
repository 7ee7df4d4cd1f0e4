/* conv.c: CPU 2-D convolution (NCHW, square filter, groups = 1) on cblas_sgemm: forward, backward to
 * the input and backward to the filter. Stride 1 (the common case) needs no im2col: on a zero-padded
 * band of rows of an image, an AVX-512 direct kernel (s1_direct) where the CPU has it, else one GEMM per
 * filter tap (see s1_item), bands spread over the cores in GEMMs small enough for OpenBLAS to keep on
 * the calling thread; the backward to the input is the
 * forward of dy with the filter turned round, and the backward to the filter sums per tap over bands
 * (see dw_group). Other strides go through im2col + GEMM (+ col2im), bands of output rows at a time so
 * the column matrix stays bounded, and leave the threading to OpenBLAS. */
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "cpu/blas.h"
#include "cpu/cpu_items.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"
#include "cpu/transpose.h"

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

/* The column matrix of output rows [p0, p0 + rows) of one image (CRR x rows Q):
 * col[(c, r, s), (p - p0, q)] = x[c, p*stride - pad + r, q*stride - pad + s] (0 outside the image). */
static void im2col(const struct conv *c, const float *x, int64_t p0, int64_t rows, float *col)
{
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t r = 0; r < c->R; r++)
            for (int64_t s = 0; s < c->R; s++) {
                float *row = col + ((ch * c->R + r) * c->R + s) * rows * c->Q;
                for (int64_t p = p0; p < p0 + rows; p++) {
                    int64_t h = p * c->stride - c->pad + r;
                    for (int64_t q = 0; q < c->Q; q++) {
                        int64_t w = q * c->stride - c->pad + s;
                        row[(p - p0) * c->Q + q] =
                            h >= 0 && h < c->H && w >= 0 && w < c->W ? x[(ch * c->H + h) * c->W + w] : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: x[c, h, w] += every column entry that read it. */
static void col2im(const struct conv *c, const float *col, int64_t p0, int64_t rows, float *x)
{
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t r = 0; r < c->R; r++)
            for (int64_t s = 0; s < c->R; s++) {
                const float *row = col + ((ch * c->R + r) * c->R + s) * rows * c->Q;
                for (int64_t p = p0; p < p0 + rows; p++) {
                    int64_t h = p * c->stride - c->pad + r;
                    if (h < 0 || h >= c->H)
                        continue;
                    for (int64_t q = 0; q < c->Q; q++) {
                        int64_t w = q * c->stride - c->pad + s;
                        if (w >= 0 && w < c->W)
                            x[(ch * c->H + h) * c->W + w] += row[(p - p0) * c->Q + q];
                    }
                }
            }
}

/* Most floats of a column matrix: an image's is built a band of output rows at a time. */
#define COL_FLOATS ((int64_t)1 << 22)

/* fp32 views of the two inputs, a zeroed fp32 output (the tensors themselves when fp32) and the column
 * matrix of a band of `band` output rows. */
struct conv_bufs {
    const float *in0, *in1;
    float *out, *col;
    int64_t band;
};

/* The tensor itself when fp32, else an fp32 copy; NULL with e set. */
static const float *f32_view(const void *src, int dt, size_t n, struct err *e)
{
    float *f = dt == DT_F32 ? NULL : cpu_scratch(n, "conv input", e);
    if (f)
        tensor_to_f32(f, src, dt, n);
    return dt == DT_F32 ? src : f;
}

static int bufs_get(struct conv_bufs *b, const struct kernel_call *k, void *const *t, struct err *e)
{
    size_t n0 = kernel_get(k->kernel)->elems(k, 0), n1 = kernel_get(k->kernel)->elems(k, 1);
    size_t n2 = kernel_get(k->kernel)->elems(k, 2);
    struct conv c = conv_of(k);
    memset(b, 0, sizeof *b);
    b->band = COL_FLOATS / (c.crr * c.Q);
    b->band = b->band < 1 ? 1 : b->band > c.P ? c.P : b->band;
    if (blas_load(e) < 0 || !(b->in0 = f32_view(t[0], k->dtype, n0, e)) || !(b->in1 = f32_view(t[1], k->dtype, n1, e)) ||
        !(b->out = k->dtype == DT_F32 ? t[2] : cpu_scratch(n2, "conv output", e)) ||
        !(b->col = cpu_scratch((size_t)(c.crr * b->band * c.Q), "im2col", e)))
        return -1;
    memset(b->out, 0, n2 * sizeof *b->out);
    return 0;
}

static int bufs_put(struct conv_bufs *b, const struct kernel_call *k, void *const *t, int rc)
{
    if (rc == 0 && b->out != t[2])
        tensor_from_f32(t[2], k->dtype, b->out, kernel_get(k->kernel)->elems(k, 2));
    if (b->in0 != t[0])
        free((float *)b->in0);
    if (b->in1 != t[1])
        free((float *)b->in1);
    if (b->out != t[2])
        free(b->out);
    free(b->col);
    return rc;
}

/* Stride 1 without im2col. On an image zero-padded to Hp x Wp, output (p, q) of tap (r, s) reads
 * xp[c][p + r][q + s]: at offset r Wp + s from xp[c][p][q]. So, computing "wide" outputs, rows of
 * Wp of which the last Wp - Q are junk (they read the next row), tap (r, s) is a GEMM on xp shifted
 * by r Wp + s, with no copy: yw (K x rows Wp) += w_rs (K x C) xp_rs (C x rows Wp). */

/* Fills a band of padded rows [hp0, hp0 + rows) of a C x H x W image padded by pad into xp, laid out
 * [C][cs / Wp][Wp] (cs >= rows Wp): image rows into their place, rows outside the image zeroed; the pad
 * columns are left as they are (zero: no band writes them). From element x0 of a tensor of dtype dt. */
static void fill_band(float *xp, int64_t cs, const void *x, int dt, int64_t x0, int64_t C, int64_t H, int64_t W,
                      int64_t pad, int64_t hp0, int64_t rows)
{
    const int64_t Wp = W + 2 * pad, esize = dtype_size((enum dtype)dt);
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < rows; i++) {
            int64_t h = hp0 + i - pad;
            float *row = xp + c * cs + i * Wp;
            if (h >= 0 && h < H)
                tensor_to_f32(row + pad, (const char *)x + (x0 + (c * H + h) * W) * esize, dt, (size_t)W);
            else
                memset(row, 0, (size_t)Wp * sizeof *row);
        }
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

/* A stride-1 convolution of N images x (Cin x H x W, padded by pad) with filter taps wt into y
 * (Kout x P x Q): items are bands of `band` output rows of an image, each in a pooled buffer holding
 * its padded input rows ([Cin][cs], cs = (band + R - 1) Wp, then R - 1 floats the last junk columns
 * read) and its wide outputs (Kout x band Wp). */
struct s1_job {
    int dt;
    const void *x;
    const float *wt, *wpack; /* wpack: pack_taps(wt) when s1_direct runs, else NULL */
    void *y;
    int64_t Cin, H, W, Kout, R, pad, Wp, P, Q, band, nbands, cs;
    struct cpu_pool pool;
    atomic_int failed;
};

/* GEMM blocks: 64 x 64 x 64 = CPU_BLAS_ONE_THREAD_MNK, so the BLAS stays on the item's thread. */
#define CB 64

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Direct stride-1 kernel (AVX-512): the same wide outputs as the per-tap GEMMs, but each 8 x 48 tile
 * of yw stays in 24 registers through all R R Cin products, so yw is written once instead of read and
 * written per tap and no GEMM call packs its operands (per-tap 64-blocks of cblas_sgemm ran at 70% of
 * oneDNN's speed). Tiles of 8 output channels start at min(m0, Kout - 8): a last, partial tile
 * recomputes a few rows, to the same bits, so every output sums its products in one fixed order. */
#define DM 8  /* output channels per tile */
#define DV 3  /* 16-float vectors of wide columns per tile */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target(CPU_AVX512_TARGET))) static void s1_direct(const struct s1_job *j, const float *xp, float *yw,
                                                                 int64_t ncol, int64_t ld)
{
    const int64_t Kout = j->Kout, Cin = j->Cin, cs = j->cs, R = j->R, Wp = j->Wp;
    for (int64_t c0 = 0; c0 < ncol; c0 += 16 * DV) {
        __mmask16 mask[DV];
        for (int v = 0; v < DV; v++) {
            int64_t left = ncol - c0 - 16 * v;
            mask[v] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        }
        const float *wp = j->wpack;
        for (int64_t m = 0; m < Kout; m += DM) {
            __m512 acc[DM][DV];
            for (int i = 0; i < DM; i++)
                for (int v = 0; v < DV; v++)
                    acc[i][v] = _mm512_setzero_ps();
            for (int64_t r = 0; r < R; r++)
                for (int64_t s = 0; s < R; s++) {
                    const float *xt = xp + r * Wp + s + c0;
                    for (int64_t c = 0; c < Cin; c++, xt += cs, wp += DM) {
                        __m512 xv[DV];
                        for (int v = 0; v < DV; v++)
                            xv[v] = _mm512_maskz_loadu_ps(mask[v], xt + 16 * v);
                        for (int i = 0; i < DM; i++) {
                            __m512 w = _mm512_set1_ps(wp[i]);
                            for (int v = 0; v < DV; v++)
                                acc[i][v] = _mm512_fmadd_ps(w, xv[v], acc[i][v]);
                        }
                    }
                }
            float *yt = yw + min64(m, Kout - DM) * ld + c0;
            for (int i = 0; i < DM; i++)
                for (int v = 0; v < DV; v++)
                    _mm512_mask_storeu_ps(yt + i * ld + 16 * v, mask[v], acc[i][v]);
        }
    }
}
#endif

/* wpack[tile][tap][c][i] = wt[tap][m0 + i][c], tile of output channels m0 = min(tile DM, Kout - DM):
 * s1_direct's broadcasts, in the order it reads them. NULL with e set. */
static float *pack_taps(const float *wt, int64_t taps, int64_t Kout, int64_t Cin, struct err *e)
{
    const int64_t tiles = (Kout + DM - 1) / DM;
    float *wp = cpu_scratch((size_t)(tiles * taps * Cin * DM), "conv filter tiles", e);
    for (int64_t m = 0; wp && m < tiles; m++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t c = 0; c < Cin; c++)
                for (int64_t i = 0; i < DM; i++)
                    wp[((m * taps + t) * Cin + c) * DM + i] = wt[(t * Kout + min64(m * DM, Kout - DM) + i) * Cin + c];
    return wp;
}

/* Whether s1_direct runs here: AVX-512 and at least one tile of output channels. */
static int s1_direct_ok(int64_t Kout)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return Kout >= DM && cpu_has_avx512();
#else
    return 0;
#endif
}

/* The wide outputs yw (Kout x ncol, rows ld apart) of a band's padded rows xp by one GEMM per tap. */
static void s1_gemms(const struct s1_job *j, const float *xp, float *yw, int64_t ncol, int64_t ld)
{
    for (int64_t c0 = 0; c0 < ncol; c0 += CB)
        for (int64_t m0 = 0; m0 < j->Kout; m0 += CB)
            for (int64_t t = 0; t < j->R * j->R; t++)
                for (int64_t k0 = 0; k0 < j->Cin; k0 += CB)
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)min64(CB, j->Kout - m0),
                               (int)min64(CB, ncol - c0), (int)min64(CB, j->Cin - k0), 1.0f,
                               j->wt + (t * j->Kout + m0) * j->Cin + k0, (int)j->Cin,
                               xp + k0 * j->cs + t / j->R * j->Wp + t % j->R + c0, (int)j->cs,
                               t || k0 ? 1.0f : 0.0f, yw + m0 * ld + c0, (int)ld);
}

static void s1_item(void *ctx, int64_t item)
{
    struct s1_job *j = ctx;
    const int64_t n = item / j->nbands, p0 = item % j->nbands * j->band, rows = min64(j->band, j->P - p0);
    const int64_t ncol = rows * j->Wp, ld = j->band * j->Wp;
    float *xp = cpu_pool_get(&j->pool);
    if (!xp) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *yw = xp + j->Cin * j->cs + j->R;
    fill_band(xp, j->cs, j->x, j->dt, n * j->Cin * j->H * j->W, j->Cin, j->H, j->W, j->pad, p0, rows + j->R - 1);
#if defined(__x86_64__) && defined(__GNUC__)
    if (j->wpack)
        s1_direct(j, xp, yw, ncol, ld);
    else
#endif
        s1_gemms(j, xp, yw, ncol, ld);
    const int64_t esize = dtype_size((enum dtype)j->dt);
    for (int64_t k = 0; k < j->Kout; k++)
        for (int64_t i = 0; i < rows; i++)
            tensor_from_f32((char *)j->y + (((n * j->Kout + k) * j->P + p0 + i) * j->Q) * esize, j->dt,
                            yw + k * ld + i * j->Wp, (size_t)j->Q);
    cpu_pool_put(&j->pool, xp);
}

static int conv_stride1(const struct kernel_call *k, const void *x, const float *wt, void *y, int64_t N, int64_t Cin,
                        int64_t H, int64_t W, int64_t Kout, int64_t R, int64_t pad, struct err *e)
{
    struct s1_job j = {.dt = k->dtype, .x = x, .wt = wt, .y = y, .Cin = Cin, .H = H, .W = W, .Kout = Kout, .R = R,
                       .pad = pad, .Wp = W + 2 * pad, .P = H + 2 * pad - R + 1, .Q = W + 2 * pad - R + 1};
    /* at least 8 items, so that two or more threads have work even for one image */
    j.nbands = min64(j.P, (8 + N - 1) / N);
    j.band = (j.P + j.nbands - 1) / j.nbands;
    j.nbands = (j.P + j.band - 1) / j.band;
    j.cs = (j.band + R - 1) * j.Wp;
    if (s1_direct_ok(Kout) && !(j.wpack = pack_taps(wt, R * R, Kout, Cin, e)))
        return -1;
    cpu_pool_init(&j.pool, (size_t)(Cin * j.cs + R + Kout * j.band * j.Wp));
    double flops = 2.0 * (double)(N * Kout * j.P * j.Wp) * (double)(Cin * R * R);
    cpu_for_items(&j, N * j.nbands, (size_t)(flops / 16.0), s1_item);
    cpu_pool_free(&j.pool);
    free((float *)j.wpack);
    if (atomic_load(&j.failed))
        return err_set(e, ERR_INTERNAL, "%s: out of host memory for a band's scratch", kernel_get(k->kernel)->name);
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
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t p0 = 0; p0 < c.P; p0 += b.band) {
            const int64_t rows = c.P - p0 < b.band ? c.P - p0 : b.band;
            im2col(&c, b.in0 + n * c.C * c.H * c.W, p0, rows, b.col);
            /* y[n][:, band] (K x rows Q) = w (K x CRR) * col (CRR x rows Q) */
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c.K, (int)(rows * c.Q), (int)c.crr, 1.0f, b.in1,
                       (int)c.crr, b.col, (int)(rows * c.Q), 0.0f, b.out + n * c.K * c.pq + p0 * c.Q, (int)c.pq);
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
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t p0 = 0; p0 < c.P; p0 += b.band) {
            const int64_t rows = c.P - p0 < b.band ? c.P - p0 : b.band;
            /* dcol (CRR x rows Q) = w^T (CRR x K) * dy[n][:, band] (K x rows Q), then scattered back into dx[n] */
            blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c.crr, (int)(rows * c.Q), (int)c.K, 1.0f, b.in1,
                       (int)c.crr, b.in0 + n * c.K * c.pq + p0 * c.Q, (int)c.pq, 0.0f, b.col, (int)(rows * c.Q));
            col2im(&c, b.col, p0, rows, b.out + n * c.C * c.H * c.W);
        }
    return bufs_put(&b, k, t, 0);
}

/* Stride 1, backward to the filter: per tap, dw_rs^T (C x K) = sum over bands of the padded input
 * rows shifted by r Wp + s (C x band Wp) times the band's dy, widened with zero junk columns and
 * transposed (band Wp x K), in the forward's 64-blocks. Items are groups of bands, each summing into
 * its own partial; the partials are added in group order, so the split over the cores does not change
 * the result. */
struct dw_job {
    int dt;
    const void *x, *dy;
    int64_t C, H, W, K, R, pad, Wp, P, Q, band, nbands, nitems, cs, ngroups;
    float *partial;       /* ngroups x [R R][C][K] */
    struct cpu_pool pool; /* per band: padded rows [C][cs] + R, dy^T [band Wp][K], one output row of dy [K][Q] */
    atomic_int failed;
};

/* Most floats of the groups' partials together (unless two groups need more). */
#define DW_PARTIAL_FLOATS ((int64_t)1 << 22)

static void dw_band(const struct dw_job *j, float *buf, int64_t item, float *acc)
{
    const int64_t n = item / j->nbands, p0 = item % j->nbands * j->band, rows = min64(j->band, j->P - p0);
    const int64_t ncol = rows * j->Wp, esize = dtype_size((enum dtype)j->dt);
    float *xp = buf, *dyt = buf + j->C * j->cs + j->R, *row = dyt + j->band * j->Wp * j->K;
    fill_band(xp, j->cs, j->x, j->dt, n * j->C * j->H * j->W, j->C, j->H, j->W, j->pad, p0, rows + j->R - 1);
    for (int64_t i = 0; i < rows; i++) { /* output row p0 + i of the K channels: [K][Q], P Q apart in dy */
        const int64_t at = (n * j->K * j->P + p0 + i) * j->Q;
        const float *src = j->dt == DT_F32 ? (const float *)j->dy + at : row;
        for (int64_t k = 0; k < j->K && src == row; k++)
            tensor_to_f32(row + k * j->Q, (const char *)j->dy + (at + k * j->P * j->Q) * esize, j->dt, (size_t)j->Q);
        f32_transpose(dyt + i * j->Wp * j->K, j->K, src, src == row ? j->Q : j->P * j->Q, j->K, j->Q);
    }
    for (int64_t c0 = 0; c0 < ncol; c0 += CB)
        for (int64_t t = 0; t < j->R * j->R; t++)
            for (int64_t m0 = 0; m0 < j->C; m0 += CB)
                for (int64_t n0 = 0; n0 < j->K; n0 += CB)
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)min64(CB, j->C - m0),
                               (int)min64(CB, j->K - n0), (int)min64(CB, ncol - c0), 1.0f,
                               xp + m0 * j->cs + t / j->R * j->Wp + t % j->R + c0, (int)j->cs, dyt + c0 * j->K + n0,
                               (int)j->K, 1.0f, acc + (t * j->C + m0) * j->K + n0, (int)j->K);
}

static void dw_group(void *ctx, int64_t g)
{
    struct dw_job *j = ctx;
    float *buf = cpu_pool_get(&j->pool);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t item = g * j->nitems / j->ngroups; item < (g + 1) * j->nitems / j->ngroups; item++)
        dw_band(j, buf, item, j->partial + g * j->R * j->R * j->C * j->K);
    cpu_pool_put(&j->pool, buf);
}

static int bwd_filter_stride1(const struct kernel_call *k, void *const *t, const struct conv *c, struct err *e)
{
    struct dw_job j = {.dt = k->dtype, .x = t[0], .dy = t[1], .C = c->C, .H = c->H, .W = c->W, .K = c->K, .R = c->R,
                       .pad = c->pad, .Wp = c->W + 2 * c->pad, .P = c->P, .Q = c->Q};
    const int64_t nw = c->K * c->C * c->R * c->R;
    j.nbands = min64(j.P, (8 + c->N - 1) / c->N);
    j.band = (j.P + j.nbands - 1) / j.nbands;
    j.nbands = (j.P + j.band - 1) / j.band;
    j.nitems = c->N * j.nbands;
    j.cs = (j.band + j.R - 1) * j.Wp;
    j.ngroups = min64(j.nitems, min64(CPU_POOL_MAX, DW_PARTIAL_FLOATS / nw > 2 ? DW_PARTIAL_FLOATS / nw : 2));
    if (blas_load(e) < 0 || !(j.partial = cpu_scratch((size_t)(j.ngroups * nw), "conv2d_bwd_filter partial sums", e)))
        return -1;
    memset(j.partial, 0, (size_t)(j.ngroups * nw) * sizeof *j.partial);
    cpu_pool_init(&j.pool, (size_t)(j.C * j.cs + j.R + j.band * j.Wp * j.K + j.K * j.Q));
    double flops = 2.0 * (double)(c->N * c->K * c->P * j.Wp) * (double)(c->C * c->R * c->R);
    cpu_for_items(&j, j.ngroups, (size_t)(flops / 16.0), dw_group);
    cpu_pool_free(&j.pool);
    int rc = 0;
    if (atomic_load(&j.failed))
        rc = err_set(e, ERR_INTERNAL, "conv2d_bwd_filter: out of host memory for a band's scratch");
    else { /* dw[k][c][tap] = sum over groups, in order, of partial[g][tap][c][k] */
        float *dw = cpu_scratch((size_t)nw, "conv filter", e);
        if (!dw)
            rc = -1;
        else {
            for (int64_t kc = 0; kc < c->K * c->C; kc++)
                for (int64_t tap = 0; tap < c->R * c->R; tap++) {
                    float sum = 0.0f;
                    for (int64_t g = 0; g < j.ngroups; g++)
                        sum += j.partial[g * nw + (tap * c->C + kc % c->C) * c->K + kc / c->C];
                    dw[kc * c->R * c->R + tap] = sum;
                }
            tensor_from_f32(t[2], k->dtype, dw, (size_t)nw);
            free(dw);
        }
    }
    free(j.partial);
    return rc;
}

int cpu_conv2d_bwd_filter(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct conv c = conv_of(k);
    if (c.stride == 1)
        return bwd_filter_stride1(k, t, &c, e);
    struct conv_bufs b;
    if (bufs_get(&b, k, t, e) < 0)
        return bufs_put(&b, k, t, -1);
    for (int64_t n = 0; n < c.N; n++)
        for (int64_t p0 = 0; p0 < c.P; p0 += b.band) {
            const int64_t rows = c.P - p0 < b.band ? c.P - p0 : b.band;
            im2col(&c, b.in0 + n * c.C * c.H * c.W, p0, rows, b.col);
            /* dw (K x CRR) += dy[n][:, band] (K x rows Q) * col^T (rows Q x CRR) */
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c.K, (int)c.crr, (int)(rows * c.Q), 1.0f,
                       b.in1 + n * c.K * c.pq + p0 * c.Q, (int)c.pq, b.col, (int)(rows * c.Q), 1.0f, b.out, (int)c.crr);
        }
    return bufs_put(&b, k, t, 0);
}
