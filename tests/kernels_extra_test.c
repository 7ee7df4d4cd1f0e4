/* kernels_extra_test.c: the kernels appended for the workload generator against naive references
 * (broadcast ops, expand/reduce, transpose, block copies, ReLU, quick GELU, rotary embedding,
 * attention with a bias, SGD, 16-bit-state AdamW, Adafactor, seeded fills) in every dtype; backward
 * kernels (ReLU, quick GELU, rope's inverse, attention score gradient) against references in every
 * dtype and against finite differences (or as adjoints of their forward) in fp32. */
#include "kernels_test_util.h"

/* v rounded to dtype dt, as a tensor of that dtype stores it. */
static double in_dt(double v, int dt)
{
    float f = (float)v;
    round_to(&f, 1, dt);
    return f;
}

static void test_bcast(void)
{
    const int64_t O = 2, R = 3, I = 4, nf = O * R * I, ns = O * I;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *a = rnd_vec((size_t)nf, 1.0f), *b = rnd_vec((size_t)ns, 1.0f);
        round_to(a, (size_t)nf, dt);
        round_to(b, (size_t)ns, dt);
        void *ta = typed(a, (size_t)nf, dt), *tb = typed(b, (size_t)ns, dt), *ty = typed(a, (size_t)nf, dt);
        double *mul = malloc((size_t)nf * sizeof *mul), *add = malloc((size_t)nf * sizeof *add);
        for (int64_t o = 0; o < O; o++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t i = 0; i < I; i++) {
                    int64_t at = (o * R + r) * I + i;
                    mul[at] = (double)a[at] * b[o * I + i];
                    add[at] = 0.5 * a[at] - 2.0 * b[o * I + i];
                }
        struct kernel_call k = KCALL(K_MUL_BCAST, dt, O, R, I);
        void *t3[3] = {ta, tb, ty};
        run(&k, t3);
        check_close(ty, dt, mul, (size_t)nf, kernel_get(K_MUL_BCAST)->tol[dt], "mul_bcast");
        k = KCALL(K_ADD_BCAST, dt, O, R, I);
        k.fparam[0] = 0.5f;
        k.fparam[1] = -2.0f;
        run(&k, t3);
        check_close(ty, dt, add, (size_t)nf, kernel_get(K_ADD_BCAST)->tol[dt], "add_bcast");
        free(a), free(b), free(ta), free(tb), free(ty), free(mul), free(add);
    }
}

/* expand and reduce_sum against loops in every dtype, and as adjoints: <expand(x), y> = <x, reduce(y)>. */
static void test_expand_reduce(void)
{
    const int64_t O = 3, R = 5, I = 2, nf = O * R * I, ns = O * I;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)ns, 1.0f), *y = rnd_vec((size_t)nf, 1.0f);
        round_to(x, (size_t)ns, dt);
        round_to(y, (size_t)nf, dt);
        void *tx = typed(x, (size_t)ns, dt), *ty = typed(y, (size_t)nf, dt), *ex = malloc((size_t)nf * 4), *ry = malloc((size_t)ns * 4);
        struct kernel_call k = KCALL(K_EXPAND, dt, O, R, I);
        k.fparam[0] = 1.5f;
        void *te[2] = {tx, ex};
        run(&k, te);
        double *ref = malloc((size_t)nf * sizeof *ref), *rref = calloc((size_t)ns, sizeof *rref);
        for (int64_t o = 0; o < O; o++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t i = 0; i < I; i++) {
                    ref[(o * R + r) * I + i] = 1.5 * x[o * I + i];
                    rref[o * I + i] += 1.5 * y[(o * R + r) * I + i];
                }
        check_close(ex, dt, ref, (size_t)nf, kernel_get(K_EXPAND)->tol[dt], "expand");
        k = KCALL(K_REDUCE_SUM, dt, O, R, I);
        k.fparam[0] = 1.5f;
        void *tr[2] = {ty, ry};
        run(&k, tr);
        check_close(ry, dt, rref, (size_t)ns, kernel_get(K_REDUCE_SUM)->tol[dt], "reduce_sum");
        if (dt == DT_F32) {
            double lhs = wsum(y, ex, (size_t)nf), rhs = wsum(x, ry, (size_t)ns);
            ok(fabs(lhs - rhs) <= 1e-5 * (1 + fabs(lhs)), "reduce_sum is expand's adjoint: %.6f vs %.6f", lhs, rhs);
        }
        free(x), free(y), free(tx), free(ty), free(ex), free(ry), free(ref), free(rref);
    }
}

static void test_transpose_and_blocks(void)
{
    const int64_t B = 2, R = 3, C = 5, n = B * R * C;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)n, 1.0f);
        round_to(x, (size_t)n, dt);
        void *tx = typed(x, (size_t)n, dt), *ty = typed(x, (size_t)n, dt);
        double *ref = malloc((size_t)n * sizeof *ref);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < R; i++)
                for (int64_t j = 0; j < C; j++)
                    ref[(b * C + j) * R + i] = x[(b * R + i) * C + j];
        struct kernel_call k = KCALL(K_TRANSPOSE, dt, B, R, C);
        void *ts[2] = {tx, ty};
        run(&k, ts);
        check_close(ty, dt, ref, (size_t)n, 0.0, "transpose");
        free(x), free(tx), free(ty), free(ref);
    }
    /* concatenation of [2, 3] and [2, 2] rows into [2, 5], then accumulate a slice back */
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {7, 8, 9, 10.25f}, y0[10] = {0};
        void *ta = typed(a, 6, dt), *tb = typed(b, 4, dt), *ty = typed(y0, 10, dt);
        struct kernel_call k = KCALL(K_COPY_BLOCKS, dt, 2, 3, 3, 0, 5, 0, 0);
        run(&k, (void *[]){ta, ty});
        k = KCALL(K_COPY_BLOCKS, dt, 2, 2, 2, 0, 5, 3, 0);
        run(&k, (void *[]){tb, ty});
        double cat[10] = {1, 2, 3, 7, 8, 4, 5, 6, 9, 10.25};
        check_close(ty, dt, cat, 10, 0.0, "copy_blocks: concatenation");
        k = KCALL(K_COPY_BLOCKS, dt, 2, 2, 2, 0, 5, 3, 1);
        run(&k, (void *[]){tb, ty});
        double acc[10] = {1, 2, 3, 14, 16, 4, 5, 6, 18, 20.5};
        check_close(ty, dt, acc, 10, kernel_get(K_COPY_BLOCKS)->tol[dt], "copy_blocks: accumulate leaves the other blocks alone");
        free(ta), free(tb), free(ty);
    }
    struct err e = {0};
    struct kernel_call k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 3, 3, 1, 5, 0, 0);
    ok(kernel_validate(&k, &e) < 0, "copy_blocks: a block overrunning its stride is rejected (%s)", e.msg);
}

struct act_ctx {
    unsigned kernel;
    float *x, *w, *y;
    size_t n;
};

static double act_loss(void *p)
{
    struct act_ctx *c = p;
    struct kernel_call k = KCALL(c->kernel, DT_F32, (int64_t)c->n);
    void *t[2] = {c->x, c->y};
    run(&k, t);
    return wsum(c->w, c->y, c->n);
}

static void test_activations(void)
{
    static const unsigned fwd[2] = {K_RELU_FWD, K_QUICK_GELU_FWD}, bwd[2] = {K_RELU_BWD, K_QUICK_GELU_BWD};
    const size_t n = 64;
    for (int a = 0; a < 2; a++) {
        for (size_t t = 0; t < 3; t++) {
            int dt = test_dtypes[t];
            float *x = rnd_vec(n, 3.0f);
            round_to(x, n, dt);
            double *ref = malloc(n * sizeof *ref);
            for (size_t i = 0; i < n; i++)
                ref[i] = a == 0 ? (x[i] > 0 ? x[i] : 0) : x[i] / (1.0 + exp(-1.702 * x[i]));
            void *tx = typed(x, n, dt), *ty = typed(x, n, dt);
            struct kernel_call k = KCALL(fwd[a], dt, (int64_t)n);
            void *ts[2] = {tx, ty};
            run(&k, ts);
            check_close(ty, dt, ref, n, kernel_get(fwd[a])->tol[dt], kernel_get(fwd[a])->name);
            /* backward: dy times the derivative (ReLU's at 0 is 0, as PyTorch's threshold_backward) */
            float *dy = rnd_vec(n, 1.0f);
            round_to(dy, n, dt);
            for (size_t i = 0; i < n; i++) {
                double sg = 1.0 / (1.0 + exp(-1.702 * x[i]));
                ref[i] = dy[i] * (a == 0 ? (x[i] > 0 ? 1.0 : 0.0) : sg + 1.702 * x[i] * sg * (1.0 - sg));
            }
            void *tdy = typed(dy, n, dt), *tdx = typed(dy, n, dt);
            k = KCALL(bwd[a], dt, (int64_t)n);
            run(&k, (void *[]){tx, tdy, tdx});
            check_close(tdx, dt, ref, n, kernel_get(bwd[a])->tol[dt], kernel_get(bwd[a])->name);
            free(x), free(ref), free(tx), free(ty), free(dy), free(tdy), free(tdx);
        }
        float *x = rnd_vec(n, 3.0f), *w = rnd_vec(n, 1.0f), *y = zeros(n), *dx = zeros(n);
        for (size_t i = 0; i < n; i++) /* keep ReLU's kink out of the finite-difference step */
            if (fabsf(x[i]) < 0.05f)
                x[i] = 0.5f;
        struct kernel_call k = KCALL(bwd[a], DT_F32, (int64_t)n);
        void *ts[3] = {x, w, dx};
        run(&k, ts);
        struct act_ctx c = {fwd[a], x, w, y, n};
        fd_check(x, n, act_loss, &c, dx, FD_TOL, kernel_get(bwd[a])->name);
        free(x), free(w), free(y), free(dx);
    }
}

struct rope_ctx {
    struct kernel_call k;
    float *x, *w, *y;
    size_t n;
};

static double rope_loss(void *p)
{
    struct rope_ctx *c = p;
    void *t[2] = {c->x, c->y};
    run(&c->k, t);
    return wsum(c->w, c->y, c->n);
}

/* rope and its inverse (the backward) against rotations in double in every dtype; in fp32 the
 * inverse undoes it, runs in place, and is the forward's gradient by finite differences. */
static void test_rope(void)
{
    const int64_t B = 2, T = 5, H = 2, D = 8, row = 3 * D, n = B * T * row; /* a third head left alone */
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)n, 1.0f);
        round_to(x, (size_t)n, dt);
        double *ref = dvec(x, (size_t)n), *iref = dvec(x, (size_t)n);
        for (int64_t b = 0; b < B; b++)
            for (int64_t p = 0; p < T; p++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t d = 0; d < D / 2; d++) {
                        double ang = p * pow(10000.0, -2.0 * d / D);
                        int64_t lo = (b * T + p) * row + h * D + d, hi = lo + D / 2;
                        ref[lo] = x[lo] * cos(ang) - x[hi] * sin(ang);
                        ref[hi] = x[hi] * cos(ang) + x[lo] * sin(ang);
                        iref[lo] = x[lo] * cos(ang) + x[hi] * sin(ang);
                        iref[hi] = x[hi] * cos(ang) - x[lo] * sin(ang);
                    }
        void *tx = typed(x, (size_t)n, dt), *ty = malloc((size_t)n * 4), *tb = malloc((size_t)n * 4);
        struct kernel_call k = KCALL(K_ROPE, dt, B, T, H, D, row, 0);
        double tol = kernel_get(K_ROPE)->tol[dt];
        run(&k, (void *[]){tx, ty});
        check_close(ty, dt, ref, (size_t)n, tol, "rope: rotate_half, untouched heads copied");
        k.dims[5] = 1;
        run(&k, (void *[]){tx, tb});
        check_close(tb, dt, iref, (size_t)n, tol, "rope inverse: rotates back, untouched heads copied");
        if (dt == DT_F32) {
            run(&k, (void *[]){ty, tb});
            double *orig = dvec(x, (size_t)n);
            check_close(tb, DT_F32, orig, (size_t)n, 1e-5, "rope: inverse undoes it (the backward)");
            k.dims[5] = 0;
            run(&k, (void *[]){tb, tb});
            check_close(tb, DT_F32, ref, (size_t)n, 1e-5, "rope: in place");
            /* the backward of y = rope(x) for a loss sum(w * y) is rope_inverse(w) */
            float *w = rnd_vec((size_t)n, 1.0f), *dx = zeros((size_t)n), *y = zeros((size_t)n);
            k.dims[5] = 1;
            run(&k, (void *[]){w, dx});
            struct rope_ctx c = {k, x, w, y, (size_t)n};
            c.k.dims[5] = 0;
            fd_check(x, (size_t)n, rope_loss, &c, dx, FD_TOL, "rope inverse (backward)");
            free(orig), free(w), free(dx), free(y);
        }
        free(x), free(ref), free(iref), free(tx), free(ty), free(tb);
    }
}

/* Attention with a bias: reference p and o in double; dscores checked by finite differences of
 * sum(w * o) with respect to the bias. */
struct attn_ctx {
    struct kernel_call k;
    float *q, *kv, *bias, *p, *o, *w;
    size_t no;
};

static double attn_loss(void *c_)
{
    struct attn_ctx *c = c_;
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
                struct attn_ctx c = {k, q, kv, bias, zeros(np), zeros(no), w, no};
                fd_check(bias, np, attn_loss, &c, tds, FD_TOL,
                         causal ? "attn_dscores: bias gradient (causal)" : "attn_dscores: bias gradient");
                free(c.p), free(c.o);
            }
            free(q), free(kv), free(bias), free(w), free(pref), free(oref), free(dsref);
            free(tq), free(tkv), free(tbias), free(tw), free(tp), free(to), free(tds);
        }
}

/* SGD (momentum with dampening, and without momentum) and AdamW with 16-bit state over a few steps
 * against PyTorch's formulas in double, the reference keeping its state in the tensors' dtype. */
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
static void test_fills(void)
{
    const size_t n = 4096;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        void *a = malloc(n * 4), *b = malloc(n * 4);
        struct kernel_call k = KCALL(K_RAND_UNIFORM, dt, (int64_t)n, 42);
        k.fparam[0] = -0.5f, k.fparam[1] = 0.25f;
        run(&k, (void *[]){a});
        run(&k, (void *[]){b});
        double *ref = malloc(n * sizeof *ref);
        size_t at_hi = 0; /* draws that round to hi in this dtype: PyTorch writes lo for them */
        for (size_t i = 0; i < n; i++) {
            ref[i] = -0.5 + 0.75 * oom_uniform01(42, i);
            float r = (float)ref[i];
            round_to(&r, 1, dt);
            if (r == 0.25f) {
                ref[i] = -0.5;
                at_hi++;
            }
        }
        check_close(a, dt, ref, n, kernel_get(K_RAND_UNIFORM)->tol[dt], "rand_uniform: lo + (hi - lo) * u");
        float *af = as_float(a, n, dt);
        double mean = 0, lo = 1, hi = -1;
        for (size_t i = 0; i < n; i++) {
            mean += af[i] / (double)n;
            lo = af[i] < lo ? af[i] : lo;
            hi = af[i] > hi ? af[i] : hi;
        }
        ok(!memcmp(a, b, n * dtype_size((enum dtype)dt)) && lo >= -0.5 && hi < 0.25 && fabs(mean + 0.125) < 0.02,
           "rand_uniform (%s): deterministic, in [lo, hi) (%zu draws rounding to hi written as lo), mean %.4f",
           dtype_name((enum dtype)dt), at_hi, mean);
        if (dt == DT_BF16)
            ok(at_hi > 0, "rand_uniform (bf16): the case arises (%zu of %zu draws round to hi)", at_hi, n);
        k.dims[1] = 43;
        run(&k, (void *[]){b});
        ok(memcmp(a, b, n * dtype_size((enum dtype)dt)) != 0, "rand_uniform (%s): another seed, other values",
           dtype_name((enum dtype)dt));
        free(a), free(b), free(ref), free(af);
    }
    /* randint ignores the call's dtype: y is i64 */
    for (size_t t = 0; t < 3; t++) {
        int64_t *ids = calloc(n, sizeof *ids);
        int seen[10] = {0}, inside = 1;
        size_t off = 0;
        struct kernel_call r = KCALL(K_RANDINT, test_dtypes[t], (int64_t)n, 7, 10);
        run(&r, (void *[]){ids});
        for (size_t i = 0; i < n; i++) {
            inside = inside && ids[i] >= 0 && ids[i] < 10;
            if (ids[i] >= 0 && ids[i] < 10)
                seen[ids[i]] = 1;
            off += ids[i] != (int64_t)floor(oom_uniform01(7, i) * 10.0);
        }
        int all = 1;
        for (int i = 0; i < 10; i++)
            all = all && seen[i];
        ok(inside && all && off == 0, "randint (%s call): floor(u * high) for every element (%zu differ), each of [0, 10) seen",
           dtype_name((enum dtype)test_dtypes[t]), off);
        free(ids);
    }
}

int main(void)
{
    test_bcast();
    test_expand_reduce();
    test_transpose_and_blocks();
    test_activations();
    test_rope();
    test_attn_bias();
    test_sgd_adamw_t();
    test_adafactor();
    test_fills();
    return done_testing();
}
