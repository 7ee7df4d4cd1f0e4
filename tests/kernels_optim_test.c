/* kernels_optim_test.c: AdamW against PyTorch's formula in double over several steps (fp32 and
 * low-precision params), 8-bit block-wise AdamW against a plain per-element reference (codes and
 * absmax exact, every dtype) and tracking fp32 AdamW, the dynamic 8-bit map, the EMA update, and
 * SGD with momentum, AdamW with 16-bit moments and Adafactor against references in double. */
#include "kernels_test_util.h"
#include "cpu/cpu_kernels.h"

#define LR 1e-3f
#define B1 0.9f
#define B2 0.999f
#define WD 0.01f

static struct kernel_call adamw_call(unsigned kernel, int dt, int64_t n, int64_t step, int64_t block)
{
    struct kernel_call k = KCALL(kernel, dt, n, step, 0, block);
    k.fparam[0] = LR;
    k.fparam[1] = B1;
    k.fparam[2] = B2;
    k.fparam[3] = WD;
    return k;
}

static void adamw_case(int dt)
{
    const size_t n = 300;
    const int steps = 5;
    float *p0 = rnd_vec(n, 1.0f), *m = zeros(n), *v = zeros(n);
    round_to(p0, n, dt);
    double *p = dvec(p0, n), *mr = calloc(n, sizeof(double)), *vr = calloc(n, sizeof(double));
    void *tp = typed(p0, n, dt);
    for (int s = 1; s <= steps; s++) {
        float *g = rnd_vec(n, 0.1f);
        round_to(g, n, dt);
        void *tg = typed(g, n, dt);
        struct kernel_call k = adamw_call(K_ADAMW, dt, (int64_t)n, s, 0);
        run(&k, (void *[]){tp, tg, m, v});
        for (size_t i = 0; i < n; i++) {
            p[i] *= 1.0 - (double)LR * WD;
            mr[i] = B1 * mr[i] + (1.0 - B1) * g[i];
            vr[i] = B2 * vr[i] + (1.0 - B2) * (double)g[i] * g[i];
            double mh = mr[i] / (1.0 - pow(B1, s)), vh = vr[i] / (1.0 - pow(B2, s));
            p[i] -= LR * mh / (sqrt(vh) + 1e-8);
        }
        free(g);
        free(tg);
    }
    /* low precision: each step rounds the param, so the error grows with the steps */
    double tol = kernel_get(K_ADAMW)->tol[dt] * (dt == DT_F32 ? 1 : steps);
    check_close(tp, dt, p, n, tol, "adamw 5 steps vs PyTorch's formula");
    check_close(m, DT_F32, mr, n, 1e-6, "adamw m");
    check_close(v, DT_F32, vr, n, 1e-6, "adamw v");
    free(p0);
    free(m);
    free(v);
    free(p);
    free(mr);
    free(vr);
    free(tp);
}

static void qmap_checks(void)
{
    float s[OOM_QMAP_SIZE], u[OOM_QMAP_SIZE];
    oom_qmap_fill(1, s);
    oom_qmap_fill(0, u);
    int sorted = 1;
    for (int i = 1; i < OOM_QMAP_SIZE; i++)
        sorted &= s[i - 1] < s[i] && u[i - 1] < u[i];
    ok(sorted, "dynamic maps strictly increasing");
    ok(s[OOM_QMAP_SIZE - 1] == 1.0f && s[0] > -1.0f && s[0] < -0.99f, "signed map spans (-1, 1]: %g .. %g", s[0],
       s[OOM_QMAP_SIZE - 1]);
    ok(u[0] == 0.0f && u[OOM_QMAP_SIZE - 1] == 1.0f, "unsigned map spans [0, 1]");
    ok(s[oom_qmap_encode(s, 0.0f)] == 0.0f && u[oom_qmap_encode(u, 1.0f)] == 1.0f, "0 and 1 encode exactly");
    ok(fabsf(s[oom_qmap_encode(s, 0.3f)] - 0.3f) < 0.02f, "0.3 encodes to %g", s[oom_qmap_encode(s, 0.3f)]);

    /* The direct lookup 8-bit AdamW encodes with gives oom_qmap_encode's code for every float:
     * with OOMLAB_EXHAUSTIVE=1 for all 2^31 + 2^30 patterns in [-2, 2] (about 1.5 minutes; run
     * when the lookup was written: 0 mismatches) and a stride through the rest; by default for
     * every 13th pattern in [-2, 2], every 97th beyond, and the few patterns around every lookup
     * bucket edge, code value and midpoint of neighbouring codes (where the answer can change). */
    enum { PIECE = 1 << 16 };
    static float xs[PIECE];
    static uint8_t fast[PIECE];
    long bad[2] = {0, 0}, checked = 0;
    int have = 1;
    const char *ex = getenv("OOMLAB_EXHAUSTIVE");
    const uint32_t dstride = ex && *ex == '1' ? 1 : 13;
    for (uint64_t b0 = 0; b0 < (1ull << 32) && have; b0 += PIECE) {
        uint32_t top = (uint32_t)b0 & 0x7fffffffu;
        uint32_t stride = top <= 0x40000000u ? dstride : 97; /* |x| <= 2 */
        size_t n = 0;
        for (uint32_t j = (uint32_t)(b0 >> 16) % stride; j < PIECE; j += stride)
            xs[n++] = oom_bits_f32((uint32_t)b0 + j);
        if (b0 == 0) { /* the edges, appended to the first piece's few */
            for (uint32_t e = 0x3400u; e <= 0x4001u; e++) /* the buckets' span */
                for (uint32_t sg = 0; sg < 2; sg++)
                    for (int d = -2; d <= 1 && n < PIECE; d++)
                        xs[n++] = oom_bits_f32((sg << 31) | ((e << 16) + (uint32_t)d));
            for (int m = 0; m < 2; m++)
                for (int i = 0; i < OOM_QMAP_SIZE; i++) {
                    const float *map = m ? u : s;
                    float pts[2] = {map[i], i + 1 < OOM_QMAP_SIZE ? 0.5f * (map[i] + map[i + 1]) : 2.0f};
                    for (int q = 0; q < 2; q++)
                        for (int d = -12; d <= 12 && n < PIECE; d++)
                            xs[n++] = oom_bits_f32(oom_f32_bits(pts[q]) + (uint32_t)d);
                }
        }
        for (int m = 0; m < 2; m++) {
            const float *map = m ? u : s;
            have = cpu_qmap_encode_fast(!m, fast, xs, n);
            for (size_t i = 0; i < n && have; i++)
                bad[m] += fast[i] != oom_qmap_encode(map, xs[i]);
        }
        checked += (long)n;
        if (b0 == 0)
            ok(n < PIECE, "qmap edge points fit one piece (%zu)", n);
    }
    ok(have, "qmap direct lookup tables built");
    ok(bad[0] == 0 && bad[1] == 0, "qmap direct lookup == nearest-code search on %ld floats (mismatches %ld signed, %ld unsigned)",
       checked, bad[0], bad[1]);
}

/* 8-bit AdamW against a plain per-element reference over several steps: each block decodes its
 * codes times its absmax, takes the AdamW step, and encodes the new moments (nearest code, by the
 * search) over their new absmax. Codes and absmax must match exactly; params within tolerance. */
static void adamw8_exact_case(int dt, size_t n, int64_t block)
{
    const int steps = 4;
    float qs[OOM_QMAP_SIZE], qu[OOM_QMAP_SIZE];
    oom_qmap_fill(1, qs);
    oom_qmap_fill(0, qu);
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    float *p = rnd_vec(n, 1.0f);
    round_to(p, n, dt);
    void *tp = typed(p, n, dt);
    uint8_t *mq = calloc(n, 1), *vq = calloc(n, 1), *rmq = calloc(n, 1), *rvq = calloc(n, 1);
    float *mabs = zeros(nb), *vabs = zeros(nb), *rmabs = zeros(nb), *rvabs = zeros(nb);
    float *nm = zeros(n), *nv = zeros(n);
    size_t bad_codes = 0, bad_absmax = 0;
    for (int s = 1; s <= steps; s++) {
        float *g = rnd_vec(n, 0.1f);
        round_to(g, n, dt);
        void *tg = typed(g, n, dt);
        struct kernel_call k = adamw_call(K_ADAMW8, dt, (int64_t)n, s, block);
        run(&k, (void *[]){tp, tg, mq, vq, mabs, vabs});
        struct oom_adamw a = oom_adamw_setup(LR, B1, B2, kernel_adamw_eps(&k), WD, s);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * (size_t)block, hi = lo + (size_t)block < n ? lo + (size_t)block : n;
            float mmax = 0.0f, vmax = 0.0f;
            for (size_t i = lo; i < hi; i++) {
                nm[i] = qs[rmq[i]] * rmabs[b];
                nv[i] = qu[rvq[i]] * rvabs[b];
                float q = oom_adamw_elem(&a, p[i], g[i], &nm[i], &nv[i]);
                round_to(&q, 1, dt);
                p[i] = q;
                mmax = fabsf(nm[i]) > mmax ? fabsf(nm[i]) : mmax;
                vmax = nv[i] > vmax ? nv[i] : vmax;
            }
            for (size_t i = lo; i < hi; i++) {
                rmq[i] = oom_qmap_encode(qs, mmax > 0.0f ? nm[i] / mmax : 0.0f);
                rvq[i] = oom_qmap_encode(qu, vmax > 0.0f ? nv[i] / vmax : 0.0f);
            }
            rmabs[b] = mmax;
            rvabs[b] = vmax;
            bad_absmax += mabs[b] != rmabs[b] || vabs[b] != rvabs[b];
        }
        for (size_t i = 0; i < n; i++)
            bad_codes += mq[i] != rmq[i] || vq[i] != rvq[i];
        free(g);
        free(tg);
    }
    ok(bad_codes == 0 && bad_absmax == 0,
       "adamw8 (%s) n %zu block %lld, %d steps: every code and absmax as the plain reference makes them "
       "(%zu codes, %zu absmax differ)",
       dtype_name((enum dtype)dt), n, (long long)block, steps, bad_codes, bad_absmax);
    double *pref = dvec(p, n);
    char msg[64];
    snprintf(msg, sizeof msg, "adamw8 params, block %lld", (long long)block);
    check_close(tp, dt, pref, n, kernel_get(K_ADAMW)->tol[dt], msg);
    void *all[] = {p, tp, mq, vq, rmq, rvq, mabs, vabs, rmabs, rvabs, nm, nv, pref};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* 8-bit AdamW against fp32 AdamW on the same gradients: params must stay within tol of the fp32
 * path's total movement (tol[dt] of the 8-bit entry is that fraction). */
static void adamw8_case(size_t n, int64_t block)
{
    const int steps = 20;
    float *p0 = rnd_vec(n, 1.0f), *p32 = malloc(n * 4), *p8 = malloc(n * 4), *m = zeros(n), *v = zeros(n);
    memcpy(p32, p0, n * 4);
    memcpy(p8, p0, n * 4);
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    uint8_t *mq = calloc(n, 1), *vq = calloc(n, 1);
    float *mabs = zeros(nb), *vabs = zeros(nb);
    for (int s = 1; s <= steps; s++) {
        float *g = rnd_vec(n, 0.1f);
        for (size_t i = 0; i < n; i++)
            g[i] += 0.02f * (float)(i % 7) - 0.06f; /* a persistent direction, as real gradients have */
        struct kernel_call k = adamw_call(K_ADAMW, DT_F32, (int64_t)n, s, 0);
        run(&k, (void *[]){p32, g, m, v});
        k = adamw_call(K_ADAMW8, DT_F32, (int64_t)n, s, block);
        run(&k, (void *[]){p8, g, mq, vq, mabs, vabs});
        free(g);
    }
    double moved = 0.0, dev = 0.0;
    for (size_t i = 0; i < n; i++) {
        moved = fmax(moved, fabs((double)p32[i] - p0[i]));
        dev = fmax(dev, fabs((double)p8[i] - p32[i]));
    }
    double tol = kernel_get(K_ADAMW8)->tol[DT_F32];
    ok(dev <= tol * moved, "adamw8 n %zu block %lld tracks adamw over %d steps: deviation %.3g <= %.2g * movement %.3g",
       n, (long long)block, steps, dev, tol, moved);
    free(p0);
    free(p32);
    free(p8);
    free(m);
    free(v);
    free(mq);
    free(vq);
    free(mabs);
    free(vabs);
}

static void ema_case(int dt)
{
    const size_t n = 257;
    float *p = rnd_vec(n, 1.0f), *s = rnd_vec(n, 1.0f);
    round_to(p, n, dt);
    round_to(s, n, dt);
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ref[i] = 0.999 * s[i] + 0.001 * (double)p[i];
    void *tp = typed(p, n, dt), *ts = typed(s, n, dt);
    struct kernel_call k = KCALL(K_EMA, dt, (int64_t)n);
    k.fparam[0] = 0.999f;
    run(&k, (void *[]){tp, ts});
    check_close(ts, dt, ref, n, kernel_get(K_EMA)->tol[dt], "ema");
    free(p);
    free(s);
    free(ref);
    free(tp);
    free(ts);
}

/* v rounded to dtype dt, as a tensor of that dtype stores it. */
static double in_dt(double v, int dt)
{
    float f = (float)v;
    round_to(&f, 1, dt);
    return f;
}

static void test_sgd_adamw_t(void)
{
    const size_t n = 32;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *p0 = rnd_vec(n, 1.0f), *g = rnd_vec(n, 1.0f), *buf0 = rnd_vec(n, 1.0f);
        round_to(p0, n, dt);
        round_to(g, n, dt);
        round_to(buf0, n, dt);
        for (int mom = 0; mom < 2; mom++) {
            void *tp = typed(p0, n, dt), *tg = typed(g, n, dt), *tb = typed(buf0, n, dt);
            double *ref = dvec(p0, n), *rbuf = dvec(buf0, n);
            struct kernel_call k = KCALL(K_SGD, dt, (int64_t)n, 1);
            k.fparam[0] = 0.1f, k.fparam[1] = mom ? 0.9f : 0.0f, k.fparam[2] = 0.1f, k.fparam[3] = 0.01f;
            for (int step = 1; step <= 3; step++) {
                k.dims[1] = step;
                run(&k, (void *[]){tp, tg, tb});
                for (size_t i = 0; i < n; i++) {
                    double gi = g[i] + 0.01 * ref[i];
                    if (mom) {
                        rbuf[i] = in_dt(step == 1 ? gi : 0.9 * rbuf[i] + 0.9 * gi, dt);
                        gi = rbuf[i];
                    }
                    ref[i] = in_dt(ref[i] - 0.1 * gi, dt);
                }
            }
            double tol = kernel_get(K_SGD)->tol[dt];
            check_close(tp, dt, ref, n, tol, mom ? "sgd: three momentum steps, param" : "sgd: three steps without momentum, param");
            check_close(tb, dt, rbuf, n, tol, mom ? "sgd: three momentum steps, buf" : "sgd: without momentum buf untouched");
            free(tp), free(tg), free(tb), free(ref), free(rbuf);
        }
        free(p0), free(g), free(buf0);
    }
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *g = rnd_vec(n, 1.0f), *p0 = rnd_vec(n, 1.0f), *m32 = zeros(n), *v32 = zeros(n), *p32 = malloc(n * sizeof *p32);
        round_to(p0, n, dt);
        memcpy(p32, p0, n * sizeof *p32);
        void *tp = typed(p0, n, dt), *tg = typed(g, n, dt), *tm = typed(m32, n, dt), *tv = typed(v32, n, dt);
        float *gr = as_float(tg, n, dt);
        double *pr = dvec(p0, n), *mr = calloc(n, sizeof *mr), *vr = calloc(n, sizeof *vr);
        struct kernel_call a = KCALL(K_ADAMW, DT_F32, (int64_t)n, 1, 0), at = KCALL(K_ADAMW_T, dt, (int64_t)n, 1, 0);
        float hp[4] = {1e-2f, 0.9f, 0.999f, 0.01f};
        memcpy(a.fparam, hp, sizeof hp);
        memcpy(at.fparam, hp, sizeof hp);
        void *t32[4] = {p32, gr, m32, v32}, *tt[4] = {tp, tg, tm, tv};
        for (int step = 1; step <= 2; step++) {
            a.dims[1] = at.dims[1] = step;
            run(&a, t32);
            run(&at, tt);
            for (size_t i = 0; i < n; i++) { /* the step uses m and v before they are stored (rounded) */
                double pd = pr[i] * (1.0 - 1e-2 * 0.01), m = 0.9 * mr[i] + 0.1 * gr[i];
                double v = 0.999 * vr[i] + 0.001 * (double)gr[i] * gr[i];
                double mh = m / (1.0 - pow(0.9, step)), vh = v / (1.0 - pow(0.999, step));
                pr[i] = in_dt(pd - 1e-2 * mh / (sqrt(vh) + 1e-8), dt);
                mr[i] = in_dt(m, dt);
                vr[i] = in_dt(v, dt);
            }
        }
        double tol = kernel_get(K_ADAMW_T)->tol[dt];
        check_close(tp, dt, pr, n, tol, "adamw_t: param after two steps, PyTorch's formula");
        check_close(tm, dt, mr, n, tol, "adamw_t: m");
        check_close(tv, dt, vr, n, tol, "adamw_t: v");
        double *r = dvec(p32, n);
        check_close(tp, dt, r, n, tol, "adamw_t: matches fp32-state AdamW");
        free(p0), free(m32), free(v32), free(p32), free(tp), free(tg), free(tm), free(tv), free(gr), free(r);
        free(g), free(pr), free(mr), free(vr);
    }
}

static void adafactor_ref(double *p, const float *g, double *state, int64_t R, int64_t C, int step, double clip)
{
    double beta2 = 1.0 - pow(step, -0.8), *u = malloc((size_t)(R * C) * sizeof *u), ss = 0;
    if (C > 1) {
        double rsum = 0;
        for (int64_t r = 0; r < R; r++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++)
                s += (double)g[r * C + c] * g[r * C + c] + 1e-30;
            state[r] = beta2 * state[r] + (1 - beta2) * s / C;
            rsum += state[r];
        }
        for (int64_t c = 0; c < C; c++) {
            double s = 0;
            for (int64_t r = 0; r < R; r++)
                s += (double)g[r * C + c] * g[r * C + c] + 1e-30;
            state[R + c] = beta2 * state[R + c] + (1 - beta2) * s / R;
        }
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                u[r * C + c] = g[r * C + c] / sqrt(state[r] / (rsum / R) * state[R + c]);
    } else {
        for (int64_t r = 0; r < R; r++) {
            state[r] = beta2 * state[r] + (1 - beta2) * ((double)g[r] * g[r] + 1e-30);
            u[r] = g[r] / sqrt(state[r]);
        }
    }
    for (int64_t i = 0; i < R * C; i++)
        ss += u[i] * u[i];
    double rms = sqrt(ss / (double)(R * C)), div = rms / clip > 1.0 ? rms / clip : 1.0;
    for (int64_t i = 0; i < R * C; i++)
        p[i] -= 1e-2 * u[i] / div;
    free(u);
}

static void test_adafactor(void)
{
    /* clip 1 (the default) normalises the update, so a second case with clip 10 sees its scale */
    static const int64_t shapes[2][2] = {{6, 4}, {7, 1}};
    for (size_t t = 0; t < 3; t++)
        for (int s = 0; s < 4; s++) {
            int dt = test_dtypes[t];
            double clip = s < 2 ? 1.0 : 10.0;
            int64_t R = shapes[s % 2][0], C = shapes[s % 2][1], n = R * C, ns = C > 1 ? R + C : R;
            float *p = rnd_vec((size_t)n, 1.0f), *g = rnd_vec((size_t)n, 1.0f), *state = zeros((size_t)ns);
            round_to(p, (size_t)n, dt);
            round_to(g, (size_t)n, dt);
            double *ref = dvec(p, (size_t)n), *rstate = calloc((size_t)ns, sizeof *rstate);
            void *tp = typed(p, (size_t)n, dt), *tg = typed(g, (size_t)n, dt);
            struct kernel_call k = KCALL(K_ADAFACTOR, dt, R, C, 1);
            k.fparam[0] = 1e-2f;
            k.fparam[2] = s < 2 ? 0.0f : 10.0f;
            void *ts[3] = {tp, tg, state};
            for (int step = 1; step <= 3; step++) {
                k.dims[2] = step;
                run(&k, ts);
                adafactor_ref(ref, g, rstate, R, C, step, clip);
                for (int64_t i = 0; i < n; i++) /* the param is stored in its dtype after each step */
                    ref[i] = in_dt(ref[i], dt);
            }
            double tol = kernel_get(K_ADAFACTOR)->tol[dt];
            char msg[80];
            snprintf(msg, sizeof msg, "adafactor: %s, clip %g, three steps", C > 1 ? "factored" : "vector", clip);
            check_close(tp, dt, ref, (size_t)n, tol, msg);
            snprintf(msg, sizeof msg, "adafactor: %s, %s grads", C > 1 ? "row and column means" : "second moment",
                     dtype_name((enum dtype)dt));
            check_close(state, DT_F32, rstate, (size_t)ns, 1e-5, msg);
            free(p), free(g), free(state), free(ref), free(rstate), free(tp), free(tg);
        }
}

/* The seeded fills against their definitions (elementwise.h's oom_uniform01, the draw the CUDA
 * kernels share) in every dtype, and the statistics of the draws. */

int main(void)
{
    for (unsigned d = 0; d < 3; d++) {
        adamw_case(test_dtypes[d]);
        ema_case(test_dtypes[d]);
    }
    qmap_checks();
    adamw8_case(5000, 2048);
    adamw8_case(5000, 256);
    adamw8_case(5003, 3001); /* blocks over a CPU chunk (2048), ends not a multiple of 8 */
    for (unsigned d = 0; d < 3; d++) {
        adamw8_exact_case(test_dtypes[d], 5000, 2048);
        adamw8_exact_case(test_dtypes[d], 5003, 3001);
        adamw8_exact_case(test_dtypes[d], 1000, 256);
    }
    test_sgd_adamw_t();
    test_adafactor();
    return done_testing();
}
