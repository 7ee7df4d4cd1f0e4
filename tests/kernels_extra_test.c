/* kernels_extra_test.c: the kernels appended for the workload generator against naive references
 * (broadcast ops, expand/reduce, transpose, block copies, ReLU, quick GELU, rotary embedding,
 * attention with a bias, SGD, 16-bit-state AdamW, Adafactor, seeded fills), backward kernels also
 * against finite differences or as adjoints of their forward. */
#include "kernels_test_util.h"

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

/* expand and reduce_sum against loops, and as adjoints: <expand(x), y> = <x, reduce(y)>. */
static void test_expand_reduce(void)
{
    const int64_t O = 3, R = 5, I = 2, nf = O * R * I, ns = O * I;
    float *x = rnd_vec((size_t)ns, 1.0f), *y = rnd_vec((size_t)nf, 1.0f), *ex = zeros((size_t)nf), *ry = zeros((size_t)ns);
    struct kernel_call k = KCALL(K_EXPAND, DT_F32, O, R, I);
    k.fparam[0] = 1.5f;
    void *te[2] = {x, ex};
    run(&k, te);
    double *ref = malloc((size_t)nf * sizeof *ref);
    for (int64_t o = 0; o < O; o++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++)
                ref[(o * R + r) * I + i] = 1.5 * x[o * I + i];
    check_close(ex, DT_F32, ref, (size_t)nf, 1e-6, "expand");
    k = KCALL(K_REDUCE_SUM, DT_F32, O, R, I);
    k.fparam[0] = 1.5f;
    void *tr[2] = {y, ry};
    run(&k, tr);
    double lhs = wsum(y, ex, (size_t)nf), rhs = wsum(x, ry, (size_t)ns);
    ok(fabs(lhs - rhs) <= 1e-5 * (1 + fabs(lhs)), "reduce_sum is expand's adjoint: %.6f vs %.6f", lhs, rhs);
    free(x), free(y), free(ex), free(ry), free(ref);
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
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {7, 8, 9, 10}, y[10] = {0};
    struct kernel_call k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 3, 3, 0, 5, 0, 0);
    void *ta[2] = {a, y}, *tb[2] = {b, y};
    run(&k, ta);
    k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 2, 2, 0, 5, 3, 0);
    run(&k, tb);
    double cat[10] = {1, 2, 3, 7, 8, 4, 5, 6, 9, 10};
    check_close(y, DT_F32, cat, 10, 0.0, "copy_blocks: concatenation");
    k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 2, 2, 0, 5, 3, 1);
    run(&k, tb);
    double acc[10] = {1, 2, 3, 14, 16, 4, 5, 6, 18, 20};
    check_close(y, DT_F32, acc, 10, 0.0, "copy_blocks: accumulate leaves the other blocks alone");
    struct err e = {0};
    k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 3, 3, 1, 5, 0, 0);
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
            free(x), free(ref), free(tx), free(ty);
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

static void test_rope(void)
{
    const int64_t B = 2, T = 5, H = 2, D = 8, row = 3 * D, n = B * T * row; /* a third head left alone */
    float *x = rnd_vec((size_t)n, 1.0f), *y = zeros((size_t)n), *back = zeros((size_t)n);
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++)
        ref[i] = x[i];
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < T; p++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D / 2; d++) {
                    double ang = p * pow(10000.0, -2.0 * d / D);
                    int64_t lo = (b * T + p) * row + h * D + d, hi = lo + D / 2;
                    ref[lo] = x[lo] * cos(ang) - x[hi] * sin(ang);
                    ref[hi] = x[hi] * cos(ang) + x[lo] * sin(ang);
                }
    struct kernel_call k = KCALL(K_ROPE, DT_F32, B, T, H, D, row, 0);
    void *ts[2] = {x, y};
    run(&k, ts);
    check_close(y, DT_F32, ref, (size_t)n, 1e-5, "rope: rotate_half, untouched heads copied");
    k.dims[5] = 1;
    void *tb[2] = {y, back};
    run(&k, tb);
    double *orig = dvec(x, (size_t)n);
    check_close(back, DT_F32, orig, (size_t)n, 1e-5, "rope: inverse undoes it (the backward)");
    k.dims[5] = 0;
    void *tin[2] = {back, back};
    run(&k, tin);
    check_close(back, DT_F32, ref, (size_t)n, 1e-5, "rope: in place");
    free(x), free(y), free(back), free(ref), free(orig);
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
    for (int causal = 0; causal < 2; causal++) {
        struct kernel_call k = KCALL(K_ATTN_BIAS_FWD, DT_F32, B, H, Tq, Tk, D, causal, Hkv, 0);
        k.fparam[0] = 0.7f;
        size_t nq = kernel_get(K_ATTN_BIAS_FWD)->elems(&k, 0), nkv = kernel_get(K_ATTN_BIAS_FWD)->elems(&k, 1);
        size_t np = (size_t)(B * H * Tq * Tk), no = nq;
        struct attn_ctx c = {k, rnd_vec(nq, 1.0f), rnd_vec(nkv, 1.0f), rnd_vec(np, 1.0f), zeros(np), zeros(no),
                             rnd_vec(no, 1.0f), no};
        attn_loss(&c);
        double *pref = calloc(np, sizeof *pref), *oref = calloc(no, sizeof *oref);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Tq; i++) {
                double s[8], mx = -1e30, sum = 0;
                int64_t nk = causal ? i + (Tk - Tq) + 1 : Tk;
                for (int64_t j = 0; j < nk; j++) {
                    double dotp = 0;
                    for (int64_t d = 0; d < D; d++)
                        dotp += (double)c.q[(i * H + h) * D + d] * c.kv[(j * 2) * Hkv * D + d];
                    s[j] = 0.7 * dotp + c.bias[(h * Tq + i) * Tk + j];
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < nk; j++)
                    sum += s[j] = exp(s[j] - mx);
                for (int64_t j = 0; j < nk; j++) {
                    pref[(h * Tq + i) * Tk + j] = s[j] / sum;
                    for (int64_t d = 0; d < D; d++)
                        oref[(i * H + h) * D + d] += s[j] / sum * c.kv[(j * 2 + 1) * Hkv * D + d];
                }
            }
        check_close(c.p, DT_F32, pref, np, 1e-5, causal ? "attn_bias_fwd: probabilities (causal)" : "attn_bias_fwd: probabilities");
        check_close(c.o, DT_F32, oref, no, 1e-5, causal ? "attn_bias_fwd: output (causal)" : "attn_bias_fwd: output");
        float *ds = zeros(np);
        struct kernel_call kd = KCALL(K_ATTN_DSCORES, DT_F32, B, H, Tq, Tk, D, causal, Hkv, 0);
        kd.fparam[0] = 0.7f;
        void *td[4] = {c.kv, c.p, c.w, ds};
        run(&kd, td);
        fd_check(c.bias, np, attn_loss, &c, ds, FD_TOL, causal ? "attn_dscores: bias gradient (causal)" : "attn_dscores: bias gradient");
        free(c.q), free(c.kv), free(c.bias), free(c.p), free(c.o), free(c.w), free(pref), free(oref), free(ds);
    }
}

static void test_sgd_adamw_t(void)
{
    const size_t n = 32;
    float *p = rnd_vec(n, 1.0f), *g = rnd_vec(n, 1.0f), *buf = zeros(n);
    double *ref = dvec(p, n), *rbuf = calloc(n, sizeof *rbuf);
    struct kernel_call k = KCALL(K_SGD, DT_F32, (int64_t)n, 1);
    k.fparam[0] = 0.1f, k.fparam[1] = 0.9f, k.fparam[2] = 0.0f, k.fparam[3] = 0.01f;
    void *ts[3] = {p, g, buf};
    for (int step = 1; step <= 2; step++) {
        k.dims[1] = step;
        run(&k, ts);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i] + 0.01 * ref[i];
            rbuf[i] = step == 1 ? gi : 0.9 * rbuf[i] + gi;
            ref[i] -= 0.1 * rbuf[i];
        }
    }
    check_close(p, DT_F32, ref, n, 1e-5, "sgd: two momentum steps");
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *p0 = rnd_vec(n, 1.0f), *m32 = zeros(n), *v32 = zeros(n), *p32 = malloc(n * sizeof *p32);
        round_to(p0, n, dt);
        memcpy(p32, p0, n * sizeof *p32);
        void *tp = typed(p0, n, dt), *tg = typed(g, n, dt), *tm = typed(m32, n, dt), *tv = typed(v32, n, dt);
        float *gr = as_float(tg, n, dt);
        struct kernel_call a = KCALL(K_ADAMW, DT_F32, (int64_t)n, 1, 0), at = KCALL(K_ADAMW_T, dt, (int64_t)n, 1, 0);
        float hp[4] = {1e-2f, 0.9f, 0.999f, 0.01f};
        memcpy(a.fparam, hp, sizeof hp);
        memcpy(at.fparam, hp, sizeof hp);
        void *t32[4] = {p32, gr, m32, v32}, *tt[4] = {tp, tg, tm, tv};
        for (int step = 1; step <= 2; step++) {
            a.dims[1] = at.dims[1] = step;
            run(&a, t32);
            run(&at, tt);
        }
        double *r = dvec(p32, n);
        check_close(tp, dt, r, n, kernel_get(K_ADAMW_T)->tol[dt], "adamw_t: matches fp32-state AdamW");
        free(p0), free(m32), free(v32), free(p32), free(tp), free(tg), free(tm), free(tv), free(gr), free(r);
    }
    free(p), free(g), free(buf), free(ref), free(rbuf);
}

static void adafactor_ref(double *p, const float *g, double *state, int64_t R, int64_t C, int step)
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
    double rms = sqrt(ss / (double)(R * C)), div = rms > 1.0 ? rms : 1.0;
    for (int64_t i = 0; i < R * C; i++)
        p[i] -= 1e-2 * u[i] / div;
    free(u);
}

static void test_adafactor(void)
{
    static const int64_t shapes[2][2] = {{6, 4}, {7, 1}};
    for (int s = 0; s < 2; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1], n = R * C, ns = C > 1 ? R + C : R;
        float *p = rnd_vec((size_t)n, 1.0f), *g = rnd_vec((size_t)n, 1.0f), *state = zeros((size_t)ns);
        double *ref = dvec(p, (size_t)n), *rstate = calloc((size_t)ns, sizeof *rstate);
        struct kernel_call k = KCALL(K_ADAFACTOR, DT_F32, R, C, 1);
        k.fparam[0] = 1e-2f;
        void *ts[3] = {p, g, state};
        for (int step = 1; step <= 3; step++) {
            k.dims[2] = step;
            run(&k, ts);
            adafactor_ref(ref, g, rstate, R, C, step);
        }
        check_close(p, DT_F32, ref, (size_t)n, 1e-5, C > 1 ? "adafactor: factored, three steps" : "adafactor: vector, three steps");
        free(p), free(g), free(state), free(ref), free(rstate);
    }
}

static void test_fills(void)
{
    const size_t n = 4096;
    float *a = zeros(n), *b = zeros(n);
    struct kernel_call k = KCALL(K_RAND_UNIFORM, DT_F32, (int64_t)n, 42);
    k.fparam[0] = -0.5f, k.fparam[1] = 0.25f;
    void *ta[1] = {a}, *tb[1] = {b};
    run(&k, ta);
    run(&k, tb);
    double mean = 0, lo = 1, hi = -1;
    for (size_t i = 0; i < n; i++) {
        mean += a[i] / (double)n;
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
    }
    ok(!memcmp(a, b, n * sizeof *a) && lo >= -0.5 && hi < 0.25 && fabs(mean + 0.125) < 0.02,
       "rand_uniform: deterministic, in [lo, hi), mean %.4f", mean);
    k.dims[1] = 43;
    run(&k, tb);
    ok(memcmp(a, b, n * sizeof *a) != 0, "rand_uniform: another seed, other values");
    int64_t *ids = calloc(n, sizeof *ids);
    int seen[10] = {0}, inside = 1;
    struct kernel_call r = KCALL(K_RANDINT, DT_F32, (int64_t)n, 7, 10);
    void *ti[1] = {ids};
    run(&r, ti);
    for (size_t i = 0; i < n; i++) {
        inside = inside && ids[i] >= 0 && ids[i] < 10;
        if (ids[i] >= 0 && ids[i] < 10)
            seen[ids[i]] = 1;
    }
    int all = 1;
    for (int i = 0; i < 10; i++)
        all = all && seen[i];
    ok(inside && all, "randint: every value in [0, 10), each seen");
    free(a), free(b), free(ids);
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
