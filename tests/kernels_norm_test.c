/* kernels_norm_test.c: softmax, LayerNorm, RMSNorm and GroupNorm against naive references in every
 * dtype (outputs and saved statistics); every backward kernel against a double reference in every
 * dtype and against finite differences in fp32. */
#include "kernels_test_util.h"

/* A normalisation problem: groups of `len` elements; channel of element i of group g is chan(). */
struct norm {
    unsigned fwd;
    int64_t rows, C, HW, G; /* LN/RMS/softmax: rows x C; GN: N = rows, C, HW, G */
    float eps;
    float *x, *gamma, *beta, *w; /* w: loss weights on y */
};

static size_t n_x(const struct norm *n) { return (size_t)(n->rows * n->C * (n->fwd == K_GROUPNORM_FWD ? n->HW : 1)); }
static size_t n_stats(const struct norm *n) { return (size_t)(n->rows * (n->fwd == K_GROUPNORM_FWD ? n->G : 1)); }

static struct kernel_call fwd_call(const struct norm *n, int dt)
{
    struct kernel_call k = n->fwd == K_GROUPNORM_FWD ? KCALL(n->fwd, dt, n->rows, n->C, n->HW, n->G)
                                                     : KCALL(n->fwd, dt, n->rows, n->C);
    k.fparam[0] = n->eps;
    return k;
}

/* Runs the forward in fp32 on the problem's data; y and stats (mean, rstd) get the results. */
static void run_fwd(const struct norm *n, float *y, float *mean, float *rstd)
{
    struct kernel_call k = fwd_call(n, DT_F32);
    if (n->fwd == K_SOFTMAX_FWD)
        run(&k, (void *[]){n->x, y});
    else if (n->fwd == K_RMSNORM_FWD)
        run(&k, (void *[]){n->x, n->gamma, y, rstd});
    else
        run(&k, (void *[]){n->x, n->gamma, n->beta, y, mean, rstd});
}

static double norm_loss(void *arg)
{
    struct norm *n = arg;
    float *y = zeros(n_x(n)), *mean = zeros(n_stats(n)), *rstd = zeros(n_stats(n));
    run_fwd(n, y, mean, rstd);
    double l = wsum(n->w, y, n_x(n));
    free(y);
    free(mean);
    free(rstd);
    return l;
}

/* Reference forward in double: y, mean and rstd per group (softmax: y only). */
static void ref_fwd(const struct norm *n, double *y, double *mean, double *rstd)
{
    int gn = n->fwd == K_GROUPNORM_FWD;
    int64_t groups = gn ? n->rows * n->G : n->rows, len = gn ? n->C / n->G * n->HW : n->C;
    for (int64_t g = 0; g < groups; g++) {
        const float *x = n->x + g * len;
        double s = 0, s2 = 0, mx = -INFINITY;
        for (int64_t i = 0; i < len; i++) {
            s += x[i];
            s2 += (double)x[i] * x[i];
            mx = fmax(mx, x[i]);
        }
        double m = s / len, var = s2 / len - m * m;
        if (n->fwd == K_SOFTMAX_FWD) {
            double z = 0;
            for (int64_t i = 0; i < len; i++)
                z += exp(x[i] - mx);
            for (int64_t i = 0; i < len; i++)
                y[g * len + i] = exp(x[i] - mx) / z;
            continue;
        }
        if (n->fwd == K_RMSNORM_FWD) {
            m = 0;
            var = s2 / len;
        }
        mean[g] = m;
        rstd[g] = 1.0 / sqrt(var + n->eps);
        for (int64_t i = 0; i < len; i++) {
            int64_t c = gn ? (g % n->G) * (n->C / n->G) + i / n->HW : i;
            double b = n->fwd == K_RMSNORM_FWD ? 0.0 : n->beta[c];
            y[g * len + i] = (x[i] - m) * rstd[g] * n->gamma[c] + b;
        }
    }
}

/* Reference backward in double from the forward's double statistics: dx for every kernel; dgamma
 * and dbeta (LN, GN), dgamma (RMS). Softmax's backward takes its forward's output y. */
static void ref_bwd(const struct norm *n, const float *y, const double *mean, const double *rstd, double *dx,
                    double *dgamma, double *dbeta)
{
    int gn = n->fwd == K_GROUPNORM_FWD;
    int64_t groups = gn ? n->rows * n->G : n->rows, len = gn ? n->C / n->G * n->HW : n->C;
    for (int64_t c = 0; c < n->C; c++)
        dgamma[c] = dbeta[c] = 0.0;
    for (int64_t g = 0; g < groups; g++) {
        const float *x = n->x + g * len, *dy = n->w + g * len;
        if (n->fwd == K_SOFTMAX_FWD) {
            double dot = 0;
            for (int64_t i = 0; i < len; i++)
                dot += (double)y[g * len + i] * dy[i];
            for (int64_t i = 0; i < len; i++)
                dx[g * len + i] = y[g * len + i] * (dy[i] - dot);
            continue;
        }
        double m = n->fwd == K_RMSNORM_FWD ? 0.0 : mean[g], sg = 0, sgx = 0;
        for (int64_t i = 0; i < len; i++) {
            int64_t c = gn ? (g % n->G) * (n->C / n->G) + i / n->HW : i;
            double xh = (x[i] - m) * rstd[g], gi = (double)dy[i] * n->gamma[c];
            sg += gi;
            sgx += gi * xh;
            dgamma[c] += dy[i] * xh;
            dbeta[c] += dy[i];
        }
        double mg = n->fwd == K_RMSNORM_FWD ? 0.0 : sg / len, mgx = sgx / len;
        for (int64_t i = 0; i < len; i++) {
            int64_t c = gn ? (g % n->G) * (n->C / n->G) + i / n->HW : i;
            double xh = (x[i] - m) * rstd[g];
            dx[g * len + i] = rstd[g] * ((double)dy[i] * n->gamma[c] - mg - xh * mgx);
        }
    }
}

static void norm_case(unsigned fwd, int dt, int64_t rows, int64_t C, int64_t HW, int64_t G)
{
    struct norm n = {fwd, rows, C, HW, G, 1e-5f, NULL, NULL, NULL, NULL};
    size_t nx = n_x(&n), ns = n_stats(&n);
    n.x = rnd_vec(nx, 2.0f);
    for (size_t i = 0; i < nx; i++)
        n.x[i] += 0.5f;
    n.gamma = rnd_vec((size_t)C, 1.0f);
    n.beta = rnd_vec((size_t)C, 1.0f);
    n.w = rnd_vec(nx, 1.0f);
    round_to(n.x, nx, dt);
    round_to(n.gamma, (size_t)C, dt);
    round_to(n.beta, (size_t)C, dt);
    round_to(n.w, nx, dt);
    double *y_ref = malloc(nx * sizeof(double)), *m_ref = malloc(ns * sizeof(double)), *r_ref = malloc(ns * sizeof(double));
    ref_fwd(&n, y_ref, m_ref, r_ref);
    const char *name = kernel_get(fwd)->name;
    double tol = kernel_get(fwd)->tol[dt];
    char msg[96];

    void *tx = typed(n.x, nx, dt), *tg = typed(n.gamma, (size_t)C, dt), *tb = typed(n.beta, (size_t)C, dt);
    void *ty = malloc(nx * 4), *tdy = typed(n.w, nx, dt), *tdx = malloc(nx * 4), *tdg = malloc((size_t)C * 4);
    void *tdb = malloc((size_t)C * 4);
    float *mean = zeros(ns), *rstd = zeros(ns);
    struct kernel_call k = fwd_call(&n, dt);
    if (fwd == K_SOFTMAX_FWD)
        run(&k, (void *[]){tx, ty});
    else if (fwd == K_RMSNORM_FWD)
        run(&k, (void *[]){tx, tg, ty, rstd});
    else
        run(&k, (void *[]){tx, tg, tb, ty, mean, rstd});
    snprintf(msg, sizeof msg, "%s y", name);
    check_close(ty, dt, y_ref, nx, tol, msg);
    if (fwd != K_SOFTMAX_FWD) {
        snprintf(msg, sizeof msg, "%s rstd", name);
        check_close(rstd, DT_F32, r_ref, ns, 1e-5, msg);
    }
    if (fwd == K_LAYERNORM_FWD || fwd == K_GROUPNORM_FWD) {
        snprintf(msg, sizeof msg, "%s mean", name);
        check_close(mean, DT_F32, m_ref, ns, 1e-5, msg);
    }

    k = fwd_call(&n, dt);
    if (fwd == K_SOFTMAX_FWD) {
        k.kernel = K_SOFTMAX_BWD;
        k.ntensors = 3;
        run(&k, (void *[]){ty, tdy, tdx});
    } else if (fwd == K_RMSNORM_FWD) {
        k.kernel = K_RMSNORM_BWD;
        k.ntensors = 6;
        run(&k, (void *[]){tdy, tx, tg, rstd, tdx, tdg});
    } else {
        k.kernel = fwd + 1; /* *_BWD_DX, then *_BWD_PARAMS */
        run(&k, (void *[]){tdy, tx, tg, mean, rstd, tdx});
        k.kernel = fwd + 2;
        run(&k, (void *[]){tdy, tx, mean, rstd, tdg, tdb});
    }
    /* backward kernels against the double reference in every dtype, each within its own tolerance */
    double *dx_ref = malloc(nx * sizeof(double)), *dg_ref = malloc((size_t)C * sizeof(double));
    double *db_ref = malloc((size_t)C * sizeof(double));
    float *yin = as_float(ty, nx, dt); /* softmax_bwd's input: the forward's output, as stored */
    ref_bwd(&n, yin, m_ref, r_ref, dx_ref, dg_ref, db_ref);
    unsigned kdx = fwd == K_SOFTMAX_FWD ? K_SOFTMAX_BWD : fwd == K_RMSNORM_FWD ? K_RMSNORM_BWD : fwd + 1;
    unsigned kpar = fwd == K_RMSNORM_FWD ? K_RMSNORM_BWD : fwd + 2;
    snprintf(msg, sizeof msg, "%s dx", kernel_get(kdx)->name);
    check_close(tdx, dt, dx_ref, nx, kernel_get(kdx)->tol[dt], msg);
    if (fwd != K_SOFTMAX_FWD) {
        snprintf(msg, sizeof msg, "%s dgamma", kernel_get(kpar)->name);
        check_close(tdg, dt, dg_ref, (size_t)C, kernel_get(kpar)->tol[dt], msg);
    }
    if (fwd == K_LAYERNORM_FWD || fwd == K_GROUPNORM_FWD) {
        snprintf(msg, sizeof msg, "%s dbeta", kernel_get(kpar)->name);
        check_close(tdb, dt, db_ref, (size_t)C, kernel_get(kpar)->tol[dt], msg);
    }
    free(dx_ref);
    free(dg_ref);
    free(db_ref);
    free(yin);
    /* and by finite differences of the fp32 forward */
    if (dt == DT_F32) {
        snprintf(msg, sizeof msg, "%s dx", kernel_get(kdx)->name);
        fd_check(n.x, nx, norm_loss, &n, tdx, FD_TOL, msg);
        if (fwd != K_SOFTMAX_FWD) {
            snprintf(msg, sizeof msg, "%s dgamma", kernel_get(kpar)->name);
            fd_check(n.gamma, (size_t)C, norm_loss, &n, tdg, FD_TOL, msg);
        }
        if (fwd == K_LAYERNORM_FWD || fwd == K_GROUPNORM_FWD) {
            snprintf(msg, sizeof msg, "%s dbeta", kernel_get(kpar)->name);
            fd_check(n.beta, (size_t)C, norm_loss, &n, tdb, FD_TOL, msg);
        }
    }
    void *all[] = {n.x, n.gamma, n.beta, n.w, y_ref, m_ref, r_ref, tx, tg, tb, ty, tdy, tdx, tdg, tdb, mean, rstd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* K_EYE (DoRA's x_eye): eye(3). K_ROW_NORM: rows (3, 4), (0, 0), (1, 2, 2 of a 3-column case) give 5, 0, 3; p = -1 gives 1/5; and
 * a 4096-column random row in every dtype against a double reference. */
static void test_row_norm(void)
{
    float x[4] = {3, 4, 0, 0}, y[2], r[1], x3[3] = {1, 2, -2}, y3[1];
    struct kernel_call k = KCALL(K_ROW_NORM, DT_F32, 2, 2);
    run(&k, (void *[]){x, y});
    ok(y[0] == 5.0f && y[1] == 0.0f, "row norm: |(3, 4)| = 5, |(0, 0)| = 0");
    k.dims[0] = 1;
    k.fparam[0] = -1.0f;
    run(&k, (void *[]){x, r});
    ok(fabsf(r[0] - 0.2f) < 1e-7f, "row norm, p = -1: 1 / 5 (%g)", r[0]);
    struct kernel_call k3 = KCALL(K_ROW_NORM, DT_F32, 1, 3);
    run(&k3, (void *[]){x3, y3});
    ok(y3[0] == 3.0f, "row norm: |(1, 2, -2)| = 3");
    ok(kernel_tensor_bytes(&k, 1) == 4 && kernel_tensor_bytes(&k3, 0) == 12, "row norm: y one value a row");
    float eye[9];
    struct kernel_call ke = KCALL(K_EYE, DT_F32, 3);
    run(&ke, (void *[]){eye});
    ok(!memcmp(eye, (float[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, sizeof eye) && kernel_tensor_bytes(&ke, 0) == 36,
       "eye(3): the identity, 9 values");
    for (unsigned d = 0; d < 3; d++) {
        int dt = test_dtypes[d];
        const size_t rows = 7, cols = 4096;
        float *xf = rnd_vec(rows * cols, 1.0f);
        round_to(xf, rows * cols, dt);
        double ref[7];
        for (size_t i = 0; i < rows; i++) {
            double s2 = 0.0;
            for (size_t c = 0; c < cols; c++)
                s2 += (double)xf[i * cols + c] * xf[i * cols + c];
            ref[i] = sqrt(s2);
        }
        float *z = zeros(rows);
        void *tx = typed(xf, rows * cols, dt), *ty = typed(z, rows, dt);
        struct kernel_call kd = KCALL(K_ROW_NORM, dt, (int64_t)rows, (int64_t)cols);
        run(&kd, (void *[]){tx, ty});
        check_close(ty, dt, ref, rows, kernel_get(K_ROW_NORM)->tol[dt], "row norm of 7 x 4096 against double");
        free(xf);
        free(z);
        free(tx);
        free(ty);
    }
}

int main(void)
{
    test_row_norm();
    for (unsigned d = 0; d < 3; d++) {
        int dt = test_dtypes[d];
        norm_case(K_SOFTMAX_FWD, dt, 6, 37, 0, 0);
        norm_case(K_SOFTMAX_FWD, dt, 3, 5000, 0, 0);  /* a row longer than the kernels' 2048-element chunk */
        norm_case(K_SOFTMAX_FWD, dt, 40000, 64, 0, 0); /* enough rows to be split over threads */
        norm_case(K_LAYERNORM_FWD, dt, 5, 48, 0, 0);
        norm_case(K_LAYERNORM_FWD, dt, 3000, 70, 0, 0); /* rows over threads; parameter sums in 47 row blocks */
        norm_case(K_LAYERNORM_FWD, dt, 3, 4100, 0, 0);  /* rows longer than a chunk */
        norm_case(K_RMSNORM_FWD, dt, 5, 40, 0, 0);
        norm_case(K_RMSNORM_FWD, dt, 3000, 70, 0, 0);
        norm_case(K_GROUPNORM_FWD, dt, 2, 8, 9, 4);
    }
    return done_testing();
}
