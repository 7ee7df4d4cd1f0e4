/* kernels_conv_test.c: CPU conv2d (oneDNN) against direct convolution in every dtype, and its backward (data,
 * filter) against direct adjoints and against finite differences: stride 1 (1x1 to 5x5 filters, channels
 * under and over oneDNN's block of 16, padding 0 to R - 1 and beyond) and strides 2, 3; the forward and the
 * backward to the input split over the cores give the bits of one thread. */
#include "kernels_test_util.h"

struct shape {
    int64_t N, C, H, W, K, R, stride, pad, P, Q;
};

static struct shape shape_of(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t stride, int64_t pad)
{
    struct shape s = {N, C, H, W, K, R, stride, pad, (H + 2 * pad - R) / stride + 1, (W + 2 * pad - R) / stride + 1};
    return s;
}

/* Visits every (input, filter, output) triple of the direct convolution. */
#define FOR_TAPS(s, xi, wi, yi)                                                                              \
    for (int64_t n = 0; n < s.N; n++)                                                                        \
        for (int64_t kk = 0; kk < s.K; kk++)                                                                 \
            for (int64_t p = 0; p < s.P; p++)                                                                \
                for (int64_t q = 0; q < s.Q; q++)                                                            \
                    for (int64_t c = 0; c < s.C; c++)                                                        \
                        for (int64_t r = 0; r < s.R; r++)                                                    \
                            for (int64_t u = 0; u < s.R; u++)                                                \
                                for (int64_t h = p * s.stride - s.pad + r, wc = q * s.stride - s.pad + u,   \
                                             xi = ((n * s.C + c) * s.H + h) * s.W + wc,                     \
                                             wi = ((kk * s.C + c) * s.R + r) * s.R + u,                      \
                                             yi = ((n * s.K + kk) * s.P + p) * s.Q + q, once_ = 1;           \
                                     once_ && h >= 0 && h < s.H && wc >= 0 && wc < s.W; once_ = 0)

static struct kernel_call call(unsigned kernel, int dt, struct shape s)
{
    return KCALL(kernel, dt, s.N, s.C, s.H, s.W, s.K, s.R, s.stride, s.pad);
}

struct fd_ctx {
    struct shape s;
    float *x, *w, *wy;
};

static double conv_loss(void *p)
{
    struct fd_ctx *c = p;
    struct kernel_call k = call(K_CONV2D_FWD, DT_F32, c->s);
    size_t ny = (size_t)(c->s.N * c->s.K * c->s.P * c->s.Q);
    float *y = zeros(ny);
    void *t[3] = {c->x, c->w, y};
    run(&k, t);
    double l = wsum(c->wy, y, ny);
    free(y);
    return l;
}

static void conv_case(int dt, struct shape s)
{
    size_t nx = (size_t)(s.N * s.C * s.H * s.W), nw = (size_t)(s.K * s.C * s.R * s.R), ny = (size_t)(s.N * s.K * s.P * s.Q);
    float *x = rnd_vec(nx, 1.0f), *w = rnd_vec(nw, 0.5f), *dy = rnd_vec(ny, 1.0f);
    round_to(x, nx, dt);
    round_to(w, nw, dt);
    round_to(dy, ny, dt);
    double *y_ref = calloc(ny, sizeof(double)), *dx_ref = calloc(nx, sizeof(double)), *dw_ref = calloc(nw, sizeof(double));
    FOR_TAPS(s, xi, wi, yi)
    {
        y_ref[yi] += (double)x[xi] * w[wi];
        dx_ref[xi] += (double)dy[yi] * w[wi];
        dw_ref[wi] += (double)dy[yi] * x[xi];
    }
    char what[160];
    snprintf(what, sizeof what, "N%lld C%lld %lldx%lld K%lld R%lld stride %lld pad %lld", (long long)s.N,
             (long long)s.C, (long long)s.H, (long long)s.W, (long long)s.K, (long long)s.R, (long long)s.stride,
             (long long)s.pad);
    void *tx = typed(x, nx, dt), *tw = typed(w, nw, dt), *tdy = typed(dy, ny, dt);
    void *ty = typed(dy, ny, dt), *tdx = typed(x, nx, dt), *tdw = typed(w, nw, dt);
    struct kernel_call k = call(K_CONV2D_FWD, dt, s);
    char msg[200];
    snprintf(msg, sizeof msg, "conv2d_fwd %s", what);
    if (run(&k, (void *[]){tx, tw, ty}) == 0)
        check_close(ty, dt, y_ref, ny, kernel_get(K_CONV2D_FWD)->tol[dt], msg);
    else
        ok(0, "%s ran", msg);
    k = call(K_CONV2D_BWD_DATA, dt, s);
    snprintf(msg, sizeof msg, "conv2d_bwd_data %s", what);
    if (run(&k, (void *[]){tdy, tw, tdx}) == 0)
        check_close(tdx, dt, dx_ref, nx, kernel_get(K_CONV2D_BWD_DATA)->tol[dt], msg);
    else
        ok(0, "%s ran", msg);
    k = call(K_CONV2D_BWD_FILTER, dt, s);
    snprintf(msg, sizeof msg, "conv2d_bwd_filter %s", what);
    if (run(&k, (void *[]){tx, tdy, tdw}) == 0)
        check_close(tdw, dt, dw_ref, nw, kernel_get(K_CONV2D_BWD_FILTER)->tol[dt], msg);
    else
        ok(0, "%s ran", msg);

    if (dt == DT_F32) {
        struct fd_ctx c = {s, x, w, dy};
        float *dx = as_float(tdx, nx, dt), *dw = as_float(tdw, nw, dt);
        snprintf(msg, sizeof msg, "conv2d_bwd_data %s", what);
        fd_check(x, nx, conv_loss, &c, dx, FD_TOL, msg);
        snprintf(msg, sizeof msg, "conv2d_bwd_filter %s", what);
        fd_check(w, nw, conv_loss, &c, dw, FD_TOL, msg);
        free(dx);
        free(dw);
    }
    void *all[] = {x, w, dy, y_ref, dx_ref, dw_ref, tx, tw, tdy, ty, tdx, tdw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* A large call, fp32: it matches direct convolution on the default threads and on one; the forward and the
 * backward to the input give the same bits on both, the backward to the filter (oneDNN sums its threads'
 * partial gradients) the same bits when run again on the same threads. */
static void conv_large_case(struct shape s, const char *what)
{
    size_t nx = (size_t)(s.N * s.C * s.H * s.W), nw = (size_t)(s.K * s.C * s.R * s.R), ny = (size_t)(s.N * s.K * s.P * s.Q);
    float *x = rnd_vec(nx, 1.0f), *w = rnd_vec(nw, 0.5f), *dy = rnd_vec(ny, 1.0f);
    double *y_ref = calloc(ny, sizeof(double)), *dx_ref = calloc(nx, sizeof(double)), *dw_ref = calloc(nw, sizeof(double));
    FOR_TAPS(s, xi, wi, yi)
    {
        y_ref[yi] += (double)x[xi] * w[wi];
        dx_ref[xi] += (double)dy[yi] * w[wi];
        dw_ref[wi] += (double)dy[yi] * x[xi];
    }
    float *y[3], *dx[3], *dw[3];
    for (int i = 0; i < 3; i++) { /* default threads, one thread, default threads again */
        y[i] = zeros(ny);
        dx[i] = zeros(nx);
        dw[i] = zeros(nw);
        kernel_cpu_set_threads(i == 1 ? 1 : 0);
        struct kernel_call k = call(K_CONV2D_FWD, DT_F32, s);
        run(&k, (void *[]){x, w, y[i]});
        k = call(K_CONV2D_BWD_DATA, DT_F32, s);
        run(&k, (void *[]){dy, w, dx[i]});
        k = call(K_CONV2D_BWD_FILTER, DT_F32, s);
        run(&k, (void *[]){x, dy, dw[i]});
    }
    kernel_cpu_set_threads(0);
    ok(!memcmp(y[0], y[1], ny * 4), "conv2d_fwd: same bits on all cores and on one, %s", what);
    ok(!memcmp(dx[0], dx[1], nx * 4), "conv2d_bwd_data: same bits on all cores and on one, %s", what);
    ok(!memcmp(dw[0], dw[2], nw * 4), "conv2d_bwd_filter: same bits run again on all cores, %s", what);
    char msg[160];
    snprintf(msg, sizeof msg, "conv2d_fwd, %s", what);
    check_close(y[0], DT_F32, y_ref, ny, kernel_get(K_CONV2D_FWD)->tol[DT_F32], msg);
    snprintf(msg, sizeof msg, "conv2d_bwd_data, %s", what);
    check_close(dx[0], DT_F32, dx_ref, nx, kernel_get(K_CONV2D_BWD_DATA)->tol[DT_F32], msg);
    for (int i = 0; i < 2; i++) {
        snprintf(msg, sizeof msg, "conv2d_bwd_filter on %s, %s", i ? "one core" : "all cores", what);
        check_close(dw[i], DT_F32, dw_ref, nw, kernel_get(K_CONV2D_BWD_FILTER)->tol[DT_F32], msg);
    }
    void *all[] = {x, w, dy, y_ref, dx_ref, dw_ref, y[0], y[1], y[2], dx[0], dx[1], dx[2], dw[0], dw[1], dw[2]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

int main(void)
{
    for (unsigned d = 0; d < 3; d++) {
        conv_case(test_dtypes[d], shape_of(2, 3, 7, 6, 4, 3, 1, 1));
        conv_case(test_dtypes[d], shape_of(1, 9, 5, 21, 10, 3, 1, 1)); /* channels not a multiple of 16 */
        conv_case(test_dtypes[d], shape_of(1, 4, 9, 9, 3, 3, 2, 1));
        conv_case(test_dtypes[d], shape_of(2, 5, 4, 5, 6, 1, 1, 0));
        conv_case(test_dtypes[d], shape_of(1, 3, 6, 5, 2, 5, 1, 2)); /* 5x5 filter */
        conv_case(test_dtypes[d], shape_of(2, 2, 5, 7, 3, 3, 1, 0)); /* no padding */
        conv_case(test_dtypes[d], shape_of(1, 3, 8, 7, 2, 3, 1, 2)); /* padding R - 1: dx's own is 0 */
        conv_case(test_dtypes[d], shape_of(1, 2, 4, 4, 3, 1, 1, 1)); /* padding > R - 1: dx by col2im */
        conv_case(test_dtypes[d], shape_of(1, 2, 9, 8, 3, 3, 3, 2)); /* stride 3 */
        conv_case(test_dtypes[d], shape_of(1, 2, 3, 3, 2, 3, 2, 0)); /* a single output pixel */
    }
    conv_large_case(shape_of(2, 70, 9, 70, 66, 3, 1, 1), "stride 1, channels in partial blocks of 16");
    conv_large_case(shape_of(1, 64, 176, 176, 4, 3, 2, 1), "stride 2");
    struct kernel_call k = call(K_CONV2D_FWD, DT_F32, shape_of(2, 3, 8, 8, 4, 3, 1, 1));
    ok(kernel_get(K_CONV2D_FWD)->flops(&k) == 2.0 * 2 * 4 * 8 * 8 * 3 * 3 * 3, "conv flops = 2 N K P Q C R R");
    is_u64(kernel_tensor_bytes(&k, 2), 4 * 2 * 4 * 8 * 8, "conv output bytes");
    return done_testing();
}
