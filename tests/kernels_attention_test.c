/* kernels_attention_test.c: unfused and fused attention against naive attention (causal, GQA,
 * Tq != Tk, packed qkv) in every dtype; fused equals unfused; both backward kernels (and the
 * fused backward's prep pass) against naive backward in every dtype, against finite differences
 * of the forward and against each other; calls split over the cores give the bits of one thread;
 * causal rows that see no key; attention with a score bias and the score gradient
 * against references in every dtype and finite differences in fp32. */
#include "kernels_test_util.h"

struct cfg {
    int64_t B, H, Tq, Tk, D, causal, Hkv;
};

static size_t nq(struct cfg c) { return (size_t)(c.B * c.Tq * c.H * c.D); }
static size_t nkv(struct cfg c) { return (size_t)(c.B * c.Tk * 2 * c.Hkv * c.D); }
static size_t np(struct cfg c) { return (size_t)(c.B * c.H * c.Tq * c.Tk); }
static size_t nrows(struct cfg c) { return (size_t)(c.B * c.H * c.Tq); }

static struct kernel_call call(unsigned kernel, int dt, struct cfg c)
{
    return KCALL(kernel, dt, c.B, c.H, c.Tq, c.Tk, c.D, c.causal, c.Hkv, 0);
}

/* Naive attention in double: q [B,Tq,H,D], kv [B,Tk,2,Hkv,D] -> o, p, lse. */
static void attn_ref(struct cfg c, const float *q, const float *kv, double *o, double *p, double *lse)
{
    double scale = 1.0 / sqrt((double)c.D);
    double *s = malloc((size_t)c.Tk * sizeof *s);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.H; h++)
            for (int64_t i = 0; i < c.Tq; i++) {
                int64_t g = h / (c.H / c.Hkv);
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < c.Tk; j++) {
                    int masked = c.causal && j > i + (c.Tk - c.Tq);
                    double d = 0.0;
                    for (int64_t x = 0; x < c.D; x++)
                        d += (double)q[((b * c.Tq + i) * c.H + h) * c.D + x] *
                             kv[(((b * c.Tk + j) * 2 + 0) * c.Hkv + g) * c.D + x];
                    s[j] = masked ? -INFINITY : d * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j < c.Tk; j++)
                    sum += s[j] = exp(s[j] - mx);
                size_t row = (size_t)((b * c.H + h) * c.Tq + i);
                lse[row] = mx + log(sum);
                for (int64_t x = 0; x < c.D; x++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < c.Tk; j++)
                        acc += s[j] / sum * kv[(((b * c.Tk + j) * 2 + 1) * c.Hkv + g) * c.D + x];
                    o[((b * c.Tq + i) * c.H + h) * c.D + x] = acc;
                }
                for (int64_t j = 0; j < c.Tk; j++)
                    p[row * c.Tk + j] = s[j] / sum;
            }
    free(s);
}

/* Naive attention backward in double from p (attn_ref's): dP = do v^T, dS = P (dP - rowsum(P dP)),
 * dq = scale dS k, dk = scale dS^T q, dv = P^T do (k/v heads summed over their query heads); and
 * the prep pass's per-row stats (lse, rowsum(do * o)). */
static void attn_bwd_ref(struct cfg c, const float *q, const float *kv, const double *p, const double *o,
                         const double *lse, const float *dout, double *dq, double *dkv, double *stats)
{
    double scale = 1.0 / sqrt((double)c.D);
    double *dp = malloc((size_t)c.Tk * sizeof *dp);
    memset(dq, 0, nq(c) * sizeof *dq);
    memset(dkv, 0, nkv(c) * sizeof *dkv);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.H; h++)
            for (int64_t i = 0; i < c.Tq; i++) {
                int64_t g = h / (c.H / c.Hkv);
                size_t row = (size_t)((b * c.H + h) * c.Tq + i), qi = (size_t)(((b * c.Tq + i) * c.H + h) * c.D);
                double dot = 0.0, delta = 0.0;
                for (int64_t j = 0; j < c.Tk; j++) {
                    size_t vj = (size_t)((((b * c.Tk + j) * 2 + 1) * c.Hkv + g) * c.D);
                    dp[j] = 0.0;
                    for (int64_t x = 0; x < c.D; x++)
                        dp[j] += (double)dout[qi + x] * kv[vj + x];
                    dot += p[row * c.Tk + j] * dp[j];
                }
                for (int64_t x = 0; x < c.D; x++)
                    delta += (double)dout[qi + x] * o[qi + x];
                stats[2 * row] = lse[row];
                stats[2 * row + 1] = delta;
                for (int64_t j = 0; j < c.Tk; j++) {
                    size_t kj = (size_t)((((b * c.Tk + j) * 2 + 0) * c.Hkv + g) * c.D), vj = kj + (size_t)(c.Hkv * c.D);
                    double pij = p[row * c.Tk + j], ds = pij * (dp[j] - dot) * scale;
                    for (int64_t x = 0; x < c.D; x++) {
                        dq[qi + x] += ds * kv[kj + x];
                        dkv[kj + x] += ds * q[qi + x];
                        dkv[vj + x] += pij * dout[qi + x];
                    }
                }
            }
    free(dp);
}

struct fd_ctx {
    struct cfg c;
    float *q, *kv, *w;
    unsigned fwd; /* K_ATTN_FWD or K_FLASH_FWD */
};

static double attn_loss(void *arg)
{
    struct fd_ctx *f = arg;
    float *p = zeros(np(f->c)), *o = zeros(nq(f->c));
    struct kernel_call k = call(f->fwd, DT_F32, f->c);
    if (f->fwd == K_FLASH_FWD)
        run(&k, (void *[]){f->q, f->kv, o, p});
    else
        run(&k, (void *[]){f->q, f->kv, p, o});
    double l = wsum(f->w, o, nq(f->c));
    free(p);
    free(o);
    return l;
}

static void attn_case(int dt, struct cfg c)
{
    char what[128], msg[192];
    snprintf(what, sizeof what, "B%lld H%lld/%lld Tq%lld Tk%lld D%lld%s", (long long)c.B, (long long)c.H,
             (long long)c.Hkv, (long long)c.Tq, (long long)c.Tk, (long long)c.D, c.causal ? " causal" : "");
    float *q = rnd_vec(nq(c), 1.0f), *kv = rnd_vec(nkv(c), 1.0f), *dout = rnd_vec(nq(c), 1.0f);
    round_to(q, nq(c), dt);
    round_to(kv, nkv(c), dt);
    round_to(dout, nq(c), dt);
    double *o_ref = malloc(nq(c) * sizeof(double)), *p_ref = malloc(np(c) * sizeof(double));
    double *lse_ref = malloc(nrows(c) * sizeof(double));
    attn_ref(c, q, kv, o_ref, p_ref, lse_ref);
    double tol = kernel_get(K_ATTN_FWD)->tol[dt];

    void *tq = typed(q, nq(c), dt), *tkv = typed(kv, nkv(c), dt), *tdo = typed(dout, nq(c), dt);
    void *tp = malloc(np(c) * 4), *to = malloc(nq(c) * 4);
    struct kernel_call k = call(K_ATTN_FWD, dt, c);
    snprintf(msg, sizeof msg, "attn_fwd o %s", what);
    run(&k, (void *[]){tq, tkv, tp, to});
    check_close(to, dt, o_ref, nq(c), tol, msg);
    snprintf(msg, sizeof msg, "attn_fwd p %s", what);
    check_close(tp, dt, p_ref, np(c), tol, msg);

    void *fo = malloc(nq(c) * 4);
    float *lse = zeros(nrows(c)), *stats = zeros(2 * nrows(c));
    k = call(K_FLASH_FWD, dt, c);
    run(&k, (void *[]){tq, tkv, fo, lse});
    snprintf(msg, sizeof msg, "flash_fwd o %s", what);
    check_close(fo, dt, o_ref, nq(c), tol, msg);
    snprintf(msg, sizeof msg, "flash_fwd lse %s", what);
    check_close(lse, DT_F32, lse_ref, nrows(c), 1e-5, msg);
    float *uo = as_float(to, nq(c), dt), *fof = as_float(fo, nq(c), dt);
    double *uod = dvec(uo, nq(c));
    snprintf(msg, sizeof msg, "flash_fwd equals attn_fwd %s", what);
    check_close(fo, dt, uod, nq(c), tol, msg);

    /* backward: unfused from p, fused from (lse, delta) */
    void *udq = malloc(nq(c) * 4), *udkv = malloc(nkv(c) * 4), *fdq = malloc(nq(c) * 4), *fdkv = malloc(nkv(c) * 4);
    k = call(K_ATTN_BWD, dt, c);
    run(&k, (void *[]){tq, tkv, tp, tdo, udq, udkv});
    k = call(K_FLASH_BWD_PREP, dt, c);
    run(&k, (void *[]){fo, tdo, lse, stats});
    k = call(K_FLASH_BWD, dt, c);
    run(&k, (void *[]){tq, tkv, stats, tdo, fdq, fdkv});
    double *dq_ref = malloc(nq(c) * sizeof(double)), *dkv_ref = malloc(nkv(c) * sizeof(double));
    double *stats_ref = malloc(2 * nrows(c) * sizeof(double));
    attn_bwd_ref(c, q, kv, p_ref, o_ref, lse_ref, dout, dq_ref, dkv_ref, stats_ref);
    snprintf(msg, sizeof msg, "flash_bwd_prep stats %s, %s inputs", what, dtype_name((enum dtype)dt));
    check_close(stats, DT_F32, stats_ref, 2 * nrows(c), kernel_get(K_FLASH_BWD_PREP)->tol[dt], msg);
    snprintf(msg, sizeof msg, "attn_bwd dq %s", what);
    check_close(udq, dt, dq_ref, nq(c), kernel_get(K_ATTN_BWD)->tol[dt], msg);
    snprintf(msg, sizeof msg, "attn_bwd dkv %s", what);
    check_close(udkv, dt, dkv_ref, nkv(c), kernel_get(K_ATTN_BWD)->tol[dt], msg);
    snprintf(msg, sizeof msg, "flash_bwd dq %s", what);
    check_close(fdq, dt, dq_ref, nq(c), kernel_get(K_FLASH_BWD)->tol[dt], msg);
    snprintf(msg, sizeof msg, "flash_bwd dkv %s", what);
    check_close(fdkv, dt, dkv_ref, nkv(c), kernel_get(K_FLASH_BWD)->tol[dt], msg);
    float *dq = as_float(udq, nq(c), dt), *dkv = as_float(udkv, nkv(c), dt);
    double *dqd = dvec(dq, nq(c)), *dkvd = dvec(dkv, nkv(c));
    snprintf(msg, sizeof msg, "flash_bwd dq equals attn_bwd %s", what);
    check_close(fdq, dt, dqd, nq(c), 2 * tol, msg);
    snprintf(msg, sizeof msg, "flash_bwd dkv equals attn_bwd %s", what);
    check_close(fdkv, dt, dkvd, nkv(c), 2 * tol, msg);
    if (dt == DT_F32) {
        struct fd_ctx f = {c, q, kv, dout, K_ATTN_FWD};
        snprintf(msg, sizeof msg, "attn_bwd dq %s", what);
        fd_check(q, nq(c), attn_loss, &f, dq, FD_TOL, msg);
        snprintf(msg, sizeof msg, "attn_bwd dkv %s", what);
        fd_check(kv, nkv(c), attn_loss, &f, dkv, FD_TOL, msg);
        f.fwd = K_FLASH_FWD;
        snprintf(msg, sizeof msg, "flash_bwd dq %s", what);
        fd_check(q, nq(c), attn_loss, &f, fdq, FD_TOL, msg);
        snprintf(msg, sizeof msg, "flash_bwd dkv %s", what);
        fd_check(kv, nkv(c), attn_loss, &f, fdkv, FD_TOL, msg);
    }
    void *all[] = {q, kv, dout, o_ref, p_ref, lse_ref, tq, tkv, tdo, tp, to, fo, lse, stats, uo, fof, uod,
                   udq, udkv, fdq, fdkv, dq, dkv, dqd, dkvd, dq_ref, dkv_ref, stats_ref};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* Packed qkv [B, T, H + 2 Hkv, D] gives the same o, dq, dk, dv as separate q and kv. */
static void packed_case(unsigned fwd, unsigned bwd)
{
    struct cfg c = {2, 4, 6, 6, 8, 1, 2};
    int64_t row = (c.H + 2 * c.Hkv) * c.D;
    size_t n = (size_t)(c.B * c.Tq * row);
    float *qkv = rnd_vec(n, 1.0f), *q = zeros(nq(c)), *kv = zeros(nkv(c)), *dout = rnd_vec(nq(c), 1.0f);
    for (int64_t bt = 0; bt < c.B * c.Tq; bt++) {
        memcpy(q + bt * c.H * c.D, qkv + bt * row, (size_t)(c.H * c.D) * 4);
        memcpy(kv + bt * 2 * c.Hkv * c.D, qkv + bt * row + c.H * c.D, (size_t)(2 * c.Hkv * c.D) * 4);
    }
    float *o1 = zeros(nq(c)), *o2 = zeros(nq(c)), *aux1 = zeros(np(c)), *aux2 = zeros(np(c));
    float *stats = zeros(2 * nrows(c)), *dq = zeros(nq(c)), *dkv = zeros(nkv(c)), *dqkv = zeros(n);
    struct kernel_call k = call(fwd, DT_F32, c);
    if (fwd == K_FLASH_FWD)
        run(&k, (void *[]){q, kv, o1, aux1});
    else
        run(&k, (void *[]){q, kv, aux1, o1});
    struct kernel_call kp = k;
    kp.dims[7] = 1;
    kp.tensors[1] = kp.tensors[0];
    if (fwd == K_FLASH_FWD)
        run(&kp, (void *[]){qkv, qkv, o2, aux2});
    else
        run(&kp, (void *[]){qkv, qkv, aux2, o2});
    double *o1d = dvec(o1, nq(c));
    check_close(o2, DT_F32, o1d, nq(c), 1e-6, kernel_get(fwd)->name);

    void *aux = aux1;
    if (bwd == K_FLASH_BWD) {
        k = call(K_FLASH_BWD_PREP, DT_F32, c);
        run(&k, (void *[]){o1, dout, aux1, stats});
        aux = stats;
    }
    k = call(bwd, DT_F32, c);
    run(&k, (void *[]){q, kv, aux, dout, dq, dkv});
    kp = k;
    kp.dims[7] = 1;
    kp.tensors[1] = kp.tensors[0];
    kp.tensors[5] = kp.tensors[4];
    struct err e = {0};
    ok(kernel_run_cpu(&kp, (void *[]){qkv, qkv, aux, dout, dqkv, dqkv}, &e) == 0, "%s packed runs %s",
       kernel_get(bwd)->name, e.msg);
    float *dq2 = zeros(nq(c)), *dkv2 = zeros(nkv(c));
    for (int64_t bt = 0; bt < c.B * c.Tq; bt++) {
        memcpy(dq2 + bt * c.H * c.D, dqkv + bt * row, (size_t)(c.H * c.D) * 4);
        memcpy(dkv2 + bt * 2 * c.Hkv * c.D, dqkv + bt * row + c.H * c.D, (size_t)(2 * c.Hkv * c.D) * 4);
    }
    double *dqd = dvec(dq, nq(c)), *dkvd = dvec(dkv, nkv(c));
    char msg[96];
    snprintf(msg, sizeof msg, "%s packed dq", kernel_get(bwd)->name);
    check_close(dq2, DT_F32, dqd, nq(c), 1e-6, msg);
    snprintf(msg, sizeof msg, "%s packed dkv", kernel_get(bwd)->name);
    check_close(dkv2, DT_F32, dkvd, nkv(c), 1e-6, msg);
    void *all[] = {qkv, q, kv, dout, o1, o2, aux1, aux2, stats, dq, dkv, dqkv, o1d, dq2, dkv2, dqd, dkvd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* Forward and backward of one call, fused (flash) or not, on the default threads or on `threads`:
 * o, lse (fused) or P, dq, dkv (fp32). */
static void attn_run(int fused, struct cfg c, const float *q, const float *kv, const float *dout, unsigned threads,
                     float *o, float *aux, float *dq, float *dkv)
{
    float *stats = zeros(2 * nrows(c));
    kernel_cpu_set_threads(threads);
    struct kernel_call k = call(fused ? K_FLASH_FWD : K_ATTN_FWD, DT_F32, c);
    run(&k, fused ? (void *[]){(void *)q, (void *)kv, o, aux} : (void *[]){(void *)q, (void *)kv, aux, o});
    if (fused) {
        k = call(K_FLASH_BWD_PREP, DT_F32, c);
        run(&k, (void *[]){o, (void *)dout, aux, stats});
    }
    k = call(fused ? K_FLASH_BWD : K_ATTN_BWD, DT_F32, c);
    run(&k, (void *[]){(void *)q, (void *)kv, fused ? stats : aux, (void *)dout, dq, dkv});
    kernel_cpu_set_threads(0);
    free(stats);
}

/* A call big enough to be split over the cores (where there are two) gives the bits it gives on one
 * thread, and matches naive attention: grouped heads, causal with Tk > Tq, Tq not a multiple of the
 * query block and D (72) not a multiple of 16; fused and unfused. */
static void threads_case(int fused)
{
    struct cfg c = {2, 4, 300, 332, 72, 1, 2};
    const char *name = fused ? "flash" : "attn";
    const size_t naux = fused ? nrows(c) : np(c);
    float *q = rnd_vec(nq(c), 1.0f), *kv = rnd_vec(nkv(c), 1.0f), *dout = rnd_vec(nq(c), 1.0f);
    float *o[2], *aux[2], *dq[2], *dkv[2];
    for (int i = 0; i < 2; i++) {
        o[i] = zeros(nq(c));
        aux[i] = zeros(naux);
        dq[i] = zeros(nq(c));
        dkv[i] = zeros(nkv(c));
        attn_run(fused, c, q, kv, dout, i ? 1 : 0, o[i], aux[i], dq[i], dkv[i]);
    }
    ok(!memcmp(o[0], o[1], nq(c) * 4) && !memcmp(aux[0], aux[1], naux * 4), "%s_fwd: same bits on all cores and on one", name);
    ok(!memcmp(dq[0], dq[1], nq(c) * 4) && !memcmp(dkv[0], dkv[1], nkv(c) * 4), "%s_bwd: same bits on all cores and on one", name);
    double *o_ref = malloc(nq(c) * sizeof(double)), *p_ref = malloc(np(c) * sizeof(double));
    double *lse_ref = malloc(nrows(c) * sizeof(double)), *dq_ref = malloc(nq(c) * sizeof(double));
    double *dkv_ref = malloc(nkv(c) * sizeof(double)), *stats_ref = malloc(2 * nrows(c) * sizeof(double));
    attn_ref(c, q, kv, o_ref, p_ref, lse_ref);
    attn_bwd_ref(c, q, kv, p_ref, o_ref, lse_ref, dout, dq_ref, dkv_ref, stats_ref);
    unsigned fwd = fused ? K_FLASH_FWD : K_ATTN_FWD, bwd = fused ? K_FLASH_BWD : K_ATTN_BWD;
    char msg[96];
    snprintf(msg, sizeof msg, "%s_fwd o, large call", name);
    check_close(o[0], DT_F32, o_ref, nq(c), kernel_get(fwd)->tol[DT_F32], msg);
    snprintf(msg, sizeof msg, "%s_fwd %s, large call", name, fused ? "lse" : "p");
    check_close(aux[0], DT_F32, fused ? lse_ref : p_ref, naux, fused ? 1e-5 : kernel_get(fwd)->tol[DT_F32], msg);
    snprintf(msg, sizeof msg, "%s_bwd dq, large call", name);
    check_close(dq[0], DT_F32, dq_ref, nq(c), kernel_get(bwd)->tol[DT_F32], msg);
    snprintf(msg, sizeof msg, "%s_bwd dkv, large call", name);
    check_close(dkv[0], DT_F32, dkv_ref, nkv(c), kernel_get(bwd)->tol[DT_F32], msg);
    void *all[] = {q, kv, dout, o[0], o[1], aux[0], aux[1], dq[0], dq[1], dkv[0], dkv[1], o_ref, p_ref, lse_ref,
                   dq_ref, dkv_ref, stats_ref};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* Causal with Tq > Tk: the first Tq - Tk queries see no key; their o and dq are 0, their lse -inf
 * (fused; P 0 unfused), and nothing is NaN. */
static void keyless_rows_case(int fused)
{
    struct cfg c = {1, 2, 70, 3, 8, 1, 1};
    float *q = rnd_vec(nq(c), 1.0f), *kv = rnd_vec(nkv(c), 1.0f), *dout = rnd_vec(nq(c), 1.0f);
    float *o = zeros(nq(c)), *lse = zeros(fused ? nrows(c) : np(c)), *dq = zeros(nq(c)), *dkv = zeros(nkv(c));
    attn_run(fused, c, q, kv, dout, 0, o, lse, dq, dkv);
    int keyless = 1, finite = 1;
    for (int64_t h = 0; h < c.H; h++)
        for (int64_t i = 0; i < c.Tq; i++) {
            int none = i < c.Tq - c.Tk;
            for (int64_t jj = 0; jj < (fused ? 1 : c.Tk); jj++) {
                float aux = fused ? lse[h * c.Tq + i] : lse[(h * c.Tq + i) * c.Tk + jj];
                keyless &= !none || (fused ? isinf(aux) : aux == 0.0f);
                finite &= (fused && none) || isfinite(aux);
            }
            for (int64_t d = 0; d < c.D; d++) {
                size_t x = (size_t)((i * c.H + h) * c.D + d);
                keyless &= !none || (o[x] == 0.0f && dq[x] == 0.0f);
                finite &= isfinite(o[x]) && isfinite(dq[x]);
            }
        }
    for (size_t x = 0; x < nkv(c); x++)
        finite &= isfinite(dkv[x]);
    ok(keyless, "%s: causal rows that see no key give o = dq = 0 and %s", fused ? "flash" : "attn",
       fused ? "lse = -inf" : "P = 0");
    ok(finite, "%s: every other figure of a call with keyless rows is finite", fused ? "flash" : "attn");
    void *all[] = {q, kv, dout, o, lse, dq, dkv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

struct attn_bias_ctx {
    struct kernel_call k;
    float *q, *kv, *bias, *p, *o, *w;
    size_t no;
};

static double attn_bias_loss(void *c_)
{
    struct attn_bias_ctx *c = c_;
    void *t[5] = {c->q, c->kv, c->bias, c->p, c->o};
    run(&c->k, t);
    return wsum(c->w, c->o, c->no);
}

static void test_attn_bias(void)
{
    const int64_t B = 1, H = 2, Tq = 3, Tk = 4, D = 4, Hkv = 1;
    for (size_t t = 0; t < 3; t++)
        for (int causal = 0; causal < 2; causal++) {
            int dt = test_dtypes[t];
            struct kernel_call k = KCALL(K_ATTN_BIAS_FWD, dt, B, H, Tq, Tk, D, causal, Hkv, 0);
            k.fparam[0] = 0.7f;
            size_t nq = kernel_get(K_ATTN_BIAS_FWD)->elems(&k, 0), nkv = kernel_get(K_ATTN_BIAS_FWD)->elems(&k, 1);
            size_t np = (size_t)(B * H * Tq * Tk), no = nq;
            float *q = rnd_vec(nq, 1.0f), *kv = rnd_vec(nkv, 1.0f), *bias = rnd_vec(np, 1.0f), *w = rnd_vec(no, 1.0f);
            round_to(q, nq, dt);
            round_to(kv, nkv, dt);
            round_to(bias, np, dt);
            round_to(w, no, dt);
            double *pref = calloc(np, sizeof *pref), *oref = calloc(no, sizeof *oref), *dsref = calloc(np, sizeof *dsref);
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < Tq; i++) {
                    double s[8], dp[8], mx = -1e30, sum = 0, rowdot = 0;
                    int64_t nk = causal ? i + (Tk - Tq) + 1 : Tk;
                    for (int64_t j = 0; j < nk; j++) {
                        double dotp = 0;
                        dp[j] = 0;
                        for (int64_t d = 0; d < D; d++) {
                            dotp += (double)q[(i * H + h) * D + d] * kv[(j * 2) * Hkv * D + d];
                            dp[j] += (double)w[(i * H + h) * D + d] * kv[(j * 2 + 1) * Hkv * D + d];
                        }
                        s[j] = 0.7 * dotp + bias[(h * Tq + i) * Tk + j];
                        mx = s[j] > mx ? s[j] : mx;
                    }
                    for (int64_t j = 0; j < nk; j++)
                        sum += s[j] = exp(s[j] - mx);
                    for (int64_t j = 0; j < nk; j++) {
                        pref[(h * Tq + i) * Tk + j] = s[j] / sum;
                        rowdot += s[j] / sum * dp[j];
                        for (int64_t d = 0; d < D; d++)
                            oref[(i * H + h) * D + d] += s[j] / sum * kv[(j * 2 + 1) * Hkv * D + d];
                    }
                    for (int64_t j = 0; j < nk; j++) /* masked entries stay 0 */
                        dsref[(h * Tq + i) * Tk + j] = s[j] / sum * (dp[j] - rowdot);
                }
            void *tq = typed(q, nq, dt), *tkv = typed(kv, nkv, dt), *tbias = typed(bias, np, dt), *tw = typed(w, no, dt);
            void *tp = typed(bias, np, dt), *to = typed(w, no, dt), *tds = typed(bias, np, dt);
            run(&k, (void *[]){tq, tkv, tbias, tp, to});
            double tol = kernel_get(K_ATTN_BIAS_FWD)->tol[dt];
            check_close(tp, dt, pref, np, tol, causal ? "attn_bias_fwd: probabilities (causal)" : "attn_bias_fwd: probabilities");
            check_close(to, dt, oref, no, tol, causal ? "attn_bias_fwd: output (causal)" : "attn_bias_fwd: output");
            struct kernel_call kd = KCALL(K_ATTN_DSCORES, dt, B, H, Tq, Tk, D, causal, Hkv, 0);
            kd.fparam[0] = 0.7f;
            run(&kd, (void *[]){tkv, tp, tw, tds});
            check_close(tds, dt, dsref, np, kernel_get(K_ATTN_DSCORES)->tol[dt],
                        causal ? "attn_dscores (causal: masked entries 0)" : "attn_dscores");
            if (dt == DT_F32) {
                struct attn_bias_ctx c = {k, q, kv, bias, zeros(np), zeros(no), w, no};
                fd_check(bias, np, attn_bias_loss, &c, tds, FD_TOL,
                         causal ? "attn_dscores: bias gradient (causal)" : "attn_dscores: bias gradient");
                free(c.p), free(c.o);
            }
            free(q), free(kv), free(bias), free(w), free(pref), free(oref), free(dsref);
            free(tq), free(tkv), free(tbias), free(tw), free(tp), free(to), free(tds);
        }
}

/* SGD (momentum with dampening, and without momentum) and AdamW with 16-bit state over a few steps
 * against PyTorch's formulas in double, the reference keeping its state in the tensors' dtype. */

int main(void)
{
    for (unsigned d = 0; d < 3; d++) {
        attn_case(test_dtypes[d], (struct cfg){2, 2, 5, 5, 8, 0, 2});
        attn_case(test_dtypes[d], (struct cfg){1, 4, 7, 7, 16, 1, 2});
        attn_case(test_dtypes[d], (struct cfg){1, 2, 3, 9, 8, 1, 1});
        attn_case(test_dtypes[d], (struct cfg){1, 2, 70, 150, 4, 0, 2});
        attn_case(test_dtypes[d], (struct cfg){1, 4, 100, 130, 8, 1, 2});
    }
    packed_case(K_ATTN_FWD, K_ATTN_BWD);
    packed_case(K_FLASH_FWD, K_FLASH_BWD);
    for (int fused = 0; fused < 2; fused++) {
        threads_case(fused);
        keyless_rows_case(fused);
    }
    test_attn_bias();
    return done_testing();
}
