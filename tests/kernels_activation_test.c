/* kernels_activation_test.c: GELU (tanh, erf), SiLU, ReLU, quick GELU, GEGLU and SwiGLU (separate
 * and packed) and dropout against naive double references in every dtype; backward kernels against
 * finite differences (dropout's too, under its fixed mask); the 16-bit unary activations over every
 * input pattern, bit for bit the fp32 kernel's result rounded; dropout's mask deterministic, at the
 * right rate, drawn as elementwise.h defines it and reused by its backward. */
#include "kernels_test_util.h"

static double gelu_ref(double x, int tanh_approx)
{
    if (tanh_approx)
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double silu_ref(double x)
{
    return x / (1.0 + exp(-x));
}

static double gelu_grad_ref(double x, int tanh_approx)
{
    if (tanh_approx) {
        const double c = sqrt(2.0 / M_PI), t = tanh(c * (x + 0.044715 * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
    }
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

static double silu_grad_ref(double x)
{
    const double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

/* ---- unary: gelu (approx 0/1), silu ---- */

struct unary {
    unsigned fwd;
    int64_t n, approx;
    float *x, *w;
};

static double unary_loss(void *arg)
{
    struct unary *u = arg;
    float *y = zeros((size_t)u->n);
    struct kernel_call k = KCALL(u->fwd, DT_F32, u->n, u->approx);
    run(&k, (void *[]){u->x, y});
    double l = wsum(u->w, y, (size_t)u->n);
    free(y);
    return l;
}

static void unary_case(unsigned fwd, int64_t approx, int dt)
{
    struct unary u = {fwd, 101, approx, rnd_vec(101, 4.0f), rnd_vec(101, 1.0f)};
    size_t n = (size_t)u.n;
    round_to(u.x, n, dt);
    round_to(u.w, n, dt);
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ref[i] = fwd == K_GELU_FWD ? gelu_ref(u.x[i], (int)approx) : silu_ref(u.x[i]);
    void *tx = typed(u.x, n, dt), *ty = malloc(n * 4), *tdy = typed(u.w, n, dt), *tdx = malloc(n * 4);
    struct kernel_call k = KCALL(fwd, dt, u.n, approx);
    char msg[64];
    snprintf(msg, sizeof msg, "%s approx=%lld", kernel_get(fwd)->name, (long long)approx);
    run(&k, (void *[]){tx, ty});
    check_close(ty, dt, ref, n, kernel_get(fwd)->tol[dt], msg);
    k.kernel = fwd + 1;
    k.ntensors = 3;
    run(&k, (void *[]){tx, tdy, tdx});
    for (size_t i = 0; i < n; i++)
        ref[i] = u.w[i] * (fwd == K_GELU_FWD ? gelu_grad_ref(u.x[i], (int)approx) : silu_grad_ref(u.x[i]));
    snprintf(msg, sizeof msg, "%s approx=%lld", kernel_get(fwd + 1)->name, (long long)approx);
    check_close(tdx, dt, ref, n, kernel_get(fwd + 1)->tol[dt], msg);
    if (dt == DT_F32)
        fd_check(u.x, n, unary_loss, &u, tdx, FD_TOL, kernel_get(fwd + 1)->name);
    free(u.x);
    free(u.w);
    free(ref);
    free(tx);
    free(ty);
    free(tdy);
    free(tdx);
}

/* Every bf16 or fp16 pattern as x (dy random): the 16-bit forward and backward (tables, or
 * conversion for ReLU) give exactly the fp32 kernels' results on the same values, rounded. */
static void unary_exhaustive_case(unsigned fwd, int64_t approx, int dt)
{
    const size_t n = 1u << 16;
    uint16_t *x = malloc(n * 2), *dy = malloc(n * 2), *y = malloc(n * 2), *dx = malloc(n * 2);
    float *dyf = rnd_vec(n, 3.0f);
    for (size_t i = 0; i < n; i++)
        x[i] = (uint16_t)i;
    tensor_from_f32(dy, dt, dyf, n);
    float *xf = as_float(x, n, dt), *yf = zeros(n), *dxf = zeros(n);
    free(dyf);
    dyf = as_float(dy, n, dt);
    struct kernel_call k = KCALL(fwd, dt, (int64_t)n, approx), kf = KCALL(fwd, DT_F32, (int64_t)n, approx);
    run(&k, (void *[]){x, y});
    run(&kf, (void *[]){xf, yf});
    k.kernel = kf.kernel = fwd + 1;
    k.ntensors = kf.ntensors = 3;
    run(&k, (void *[]){x, dy, dx});
    run(&kf, (void *[]){xf, dyf, dxf});
    uint16_t *want_y = typed(yf, n, dt), *want_dx = typed(dxf, n, dt);
    size_t bad_y = 0, bad_dx = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        bad_y += y[i] != want_y[i];
        bad_dx += dx[i] != want_dx[i];
        if (first == n && (y[i] != want_y[i] || dx[i] != want_dx[i]))
            first = i;
    }
    ok(bad_y == 0 && bad_dx == 0, "%s approx=%lld (%s): all %zu patterns as the fp32 kernel rounds them (%zu y, %zu dx differ; first 0x%04zx)",
       kernel_get(fwd)->name, (long long)approx, dtype_name((enum dtype)dt), n, bad_y, bad_dx, first);
    void *all[] = {x, dy, y, dx, dyf, xf, yf, dxf, want_y, want_dx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* Exact GELU in fp32 over a dense sweep of [-13, 13] against double erfc: forward within 3e-7 of x Phi(x)
 * scaled by max(1, |x|) (Phi's error; PyTorch's own CPU GELU is off by 1.2e-6 at x = 3.5); the lower tail
 * as erfc, within the relative error of Abramowitz and Stegun's erfc (2e-3 to x = -5, 4% to x = -12.5, where
 * GELU is -6e-35; 1 + erf, PyTorch's form, is 0 from x = -5.5); backward within 4e-7 of Phi(x) + x phi(x);
 * the edges: +-0, +-inf, NaN, far tails (the gradient at +-inf NaN, inf * 0, as PyTorch's); and the same
 * bits split over two threads as on one. The forward's AVX-512 table (activation.c) is held closer. */
static void gelu_erf_accuracy_case(void)
{
    const size_t n = 260001;
    float *x = malloc(n * sizeof *x), *y = zeros(n), *one = malloc(n * sizeof *one), *g = zeros(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = -13.0f + 26.0f * (float)i / (float)(n - 1);
        one[i] = 1.0f;
    }
    struct kernel_call k = KCALL(K_GELU_FWD, DT_F32, (int64_t)n, 0), kb = KCALL(K_GELU_BWD, DT_F32, (int64_t)n, 0);
    run(&k, (void *[]){x, y});
    run(&kb, (void *[]){x, one, g});
    double fwd = 0, tail5 = 0, tail = 0, bwd = 0;
    for (size_t i = 0; i < n; i++) {
        const double xd = x[i], phi = 0.5 * erfc(-xd / sqrt(2.0)), yr = xd * phi;
        const double gr = phi + xd * exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI);
        fwd = fmax(fwd, fabs(y[i] - yr) / fmax(1.0, fabs(xd)));
        const double rel = fabs(y[i] - yr) / fabs(yr);
        if (xd >= -5.0 && xd <= -3.0)
            tail5 = fmax(tail5, rel);
        else if (xd >= -12.5 && xd < -5.0)
            tail = fmax(tail, rel);
        bwd = fmax(bwd, fabs(g[i] - gr));
    }
    ok(fwd <= 3e-7, "gelu_fwd (erf): largest error %.3g of x Phi(x), per max(1, |x|), <= 3e-7", fwd);
    ok(tail5 <= 2e-3 && tail <= 0.04,
       "gelu_fwd (erf): lower tail within %.3g relative to x = -5 (<= 2e-3), %.3g to -12.5 (<= 0.04)", tail5, tail);
    ok(bwd <= 4e-7, "gelu_bwd (erf): largest error %.3g of Phi(x) + x phi(x), <= 4e-7", bwd);
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq"))
        ok(fwd <= 1.2e-7 && tail5 <= 1e-5 && tail <= 2e-3,
           "gelu_fwd (erf), AVX-512's table: within 1.2e-7 (%.3g), the tail 1e-5 to x = -5 (%.3g), 2e-3 to -12.5 (%.3g)",
           fwd, tail5, tail);
#endif

    float ex[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 20.0f, -20.0f, 1e-30f}, ey[8], eg[8], e1[8];
    for (int i = 0; i < 8; i++)
        e1[i] = 1.0f;
    k.dims[0] = kb.dims[0] = 8;
    run(&k, (void *[]){ex, ey});
    run(&kb, (void *[]){ex, e1, eg});
    ok(ey[0] == 0.0f && !signbit(ey[0]) && ey[1] == 0.0f && signbit(ey[1]), "gelu_fwd (erf): +0 -> +0, -0 -> -0");
    ok(ey[2] == INFINITY && isnan(ey[3]) && isnan(ey[4]), "gelu_fwd (erf): inf -> inf; -inf (-inf * 0) and NaN -> NaN");
    ok(ey[5] == 20.0f && ey[6] == 0.0f && ey[7] == 5e-31f, "gelu_fwd (erf): 20 -> 20, -20 -> 0, 1e-30 -> 5e-31");
    ok(eg[0] == 0.5f && eg[1] == 0.5f && isnan(eg[2]) && isnan(eg[3]) && isnan(eg[4]) && eg[5] == 1.0f && eg[6] == 0.0f,
       "gelu_bwd (erf): 0.5 at +-0, 1 and 0 in the far tails, NaN at +-inf and NaN (%g %g %g %g %g %g %g)", eg[0],
       eg[1], eg[2], eg[3], eg[4], eg[5], eg[6]);

    const size_t big = 3u << 16; /* enough for two threads' spans */
    float *bx = rnd_vec(big, 6.0f), *y1 = zeros(big), *y2 = zeros(big);
    k.dims[0] = (int64_t)big;
    kernel_cpu_set_threads(1);
    run(&k, (void *[]){bx, y1});
    kernel_cpu_set_threads(2);
    run(&k, (void *[]){bx, y2});
    kernel_cpu_set_threads(0);
    ok(memcmp(y1, y2, big * sizeof *y1) == 0, "gelu_fwd (erf): the same bits on one thread and on two");
    void *all[] = {x, y, one, g, bx, y1, y2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* ---- gated: geglu, swiglu; separate or packed [up | gate] rows ---- */

struct gated {
    unsigned fwd;
    int64_t rows, F, packed, approx;
    float *gate, *up, *w;
};

/* Packs separate gate and up into rows [up | gate]. */
static float *pack(const struct gated *g)
{
    float *p = zeros((size_t)(g->rows * 2 * g->F));
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t f = 0; f < g->F; f++) {
            p[r * 2 * g->F + f] = g->up[r * g->F + f];
            p[r * 2 * g->F + g->F + f] = g->gate[r * g->F + f];
        }
    return p;
}

static double gated_loss(void *arg)
{
    struct gated *g = arg;
    size_t n = (size_t)(g->rows * g->F);
    float *y = zeros(n);
    struct kernel_call k = KCALL(g->fwd, DT_F32, g->rows, g->F, 0, g->approx);
    run(&k, (void *[]){g->gate, g->up, y});
    double l = wsum(g->w, y, n);
    free(y);
    return l;
}

static void gated_case(unsigned fwd, int64_t approx, int dt)
{
    struct gated g = {fwd, 4, 13, 0, approx, rnd_vec(52, 3.0f), rnd_vec(52, 1.0f), rnd_vec(52, 1.0f)};
    size_t n = 52;
    round_to(g.gate, n, dt);
    round_to(g.up, n, dt);
    round_to(g.w, n, dt);
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ref[i] = (fwd == K_GEGLU_FWD ? gelu_ref(g.gate[i], (int)approx) : silu_ref(g.gate[i])) * g.up[i];
    const char *name = kernel_get(fwd)->name;
    double tol = kernel_get(fwd)->tol[dt];
    char msg[80];
    void *tg = typed(g.gate, n, dt), *tu = typed(g.up, n, dt), *ty = malloc(n * 4);
    void *tdy = typed(g.w, n, dt), *tdg = malloc(n * 4), *tdu = malloc(n * 4);
    struct kernel_call k = KCALL(fwd, dt, g.rows, g.F, 0, approx);
    run(&k, (void *[]){tg, tu, ty});
    snprintf(msg, sizeof msg, "%s approx=%lld", name, (long long)approx);
    check_close(ty, dt, ref, n, tol, msg);
    struct kernel_call kb = KCALL(fwd + 1, dt, g.rows, g.F, 0, approx);
    run(&kb, (void *[]){tg, tu, tdy, tdg, tdu});
    /* dgate = dy * up * act'(gate), dup = dy * act(gate) */
    double *rdg = malloc(n * sizeof *rdg), *rdu = malloc(n * sizeof *rdu);
    for (size_t i = 0; i < n; i++) {
        double x = g.gate[i];
        double act = fwd == K_GEGLU_FWD ? gelu_ref(x, (int)approx) : silu_ref(x);
        double grad = fwd == K_GEGLU_FWD ? gelu_grad_ref(x, (int)approx) : silu_grad_ref(x);
        rdg[i] = g.w[i] * g.up[i] * grad;
        rdu[i] = g.w[i] * act;
    }
    snprintf(msg, sizeof msg, "%s approx=%lld dgate", kernel_get(fwd + 1)->name, (long long)approx);
    check_close(tdg, dt, rdg, n, kernel_get(fwd + 1)->tol[dt], msg);
    snprintf(msg, sizeof msg, "%s approx=%lld dup", kernel_get(fwd + 1)->name, (long long)approx);
    check_close(tdu, dt, rdu, n, kernel_get(fwd + 1)->tol[dt], msg);

    /* packed layout: same y, and dgate/dup land in the packed gradient */
    float *packed = pack(&g);
    void *tp = typed(packed, 2 * n, dt), *ty2 = malloc(n * 4), *tdp = malloc(2 * n * 4);
    k.dims[2] = kb.dims[2] = 1;
    k.tensors[1] = k.tensors[0];
    kb.tensors[1] = kb.tensors[0];
    kb.tensors[4] = kb.tensors[3];
    run(&k, (void *[]){tp, tp, ty2});
    float *y1 = as_float(ty, n, dt);
    double *y1d = dvec(y1, n);
    snprintf(msg, sizeof msg, "%s packed equals separate", name);
    check_close(ty2, dt, y1d, n, 0, msg);
    run(&kb, (void *[]){tp, tp, tdy, tdp, tdp});
    struct gated sep = g;
    sep.gate = as_float(tdg, n, dt);
    sep.up = as_float(tdu, n, dt);
    float *dpacked = pack(&sep), *got = as_float(tdp, 2 * n, dt);
    double *dref = dvec(dpacked, 2 * n);
    snprintf(msg, sizeof msg, "%s packed gradient equals separate", kernel_get(fwd + 1)->name);
    ok(rel_err(got, dref, 2 * n) == 0, "%s", msg);
    if (dt == DT_F32) {
        snprintf(msg, sizeof msg, "%s dgate", kernel_get(fwd + 1)->name);
        fd_check(g.gate, n, gated_loss, &g, sep.gate, FD_TOL, msg);
        snprintf(msg, sizeof msg, "%s dup", kernel_get(fwd + 1)->name);
        fd_check(g.up, n, gated_loss, &g, sep.up, FD_TOL, msg);
    }
    void *all[] = {g.gate, g.up, g.w, ref, tg, tu, ty, tdy, tdg, tdu, packed, tp, ty2, tdp, y1, y1d,
                   sep.gate, sep.up, dpacked, got, dref, rdg, rdu};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* sum(w * dropout(x)) under a fixed seed, for the finite-difference check of dropout's backward */
struct dropped {
    size_t n;
    float p;
    float *x, *w;
};

static double dropout_loss(void *arg)
{
    struct dropped *d = arg;
    float *y = zeros(d->n);
    uint8_t *mask = malloc(d->n);
    struct kernel_call k = KCALL(K_DROPOUT_FWD, DT_F32, (int64_t)d->n, 42);
    k.fparam[0] = d->p;
    run(&k, (void *[]){d->x, y, mask});
    double l = wsum(d->w, y, d->n);
    free(y);
    free(mask);
    return l;
}

/* dropout_bwd(w) is d/dx sum(w * dropout(x)) with the forward's mask */
static void dropout_fd_case(void)
{
    struct dropped d = {300, 0.25f, rnd_vec(300, 1.0f), rnd_vec(300, 1.0f)};
    float *y = zeros(d.n), *dx = zeros(d.n);
    uint8_t *mask = malloc(d.n);
    struct kernel_call k = KCALL(K_DROPOUT_FWD, DT_F32, (int64_t)d.n, 42);
    k.fparam[0] = d.p;
    run(&k, (void *[]){d.x, y, mask});
    struct kernel_call kb = KCALL(K_DROPOUT_BWD, DT_F32, (int64_t)d.n);
    kb.fparam[0] = d.p;
    run(&kb, (void *[]){d.w, mask, dx});
    fd_check(d.x, d.n, dropout_loss, &d, dx, FD_TOL, "dropout_bwd");
    free(d.x);
    free(d.w);
    free(y);
    free(dx);
    free(mask);
}

static void dropout_case(int dt)
{
    const size_t n = 20001; /* ten chunks and an odd tail */
    const float p = 0.25f;
    float *x = rnd_vec(n, 1.0f);
    round_to(x, n, dt);
    void *tx = typed(x, n, dt), *ty = malloc(n * 4), *tdx = malloc(n * 4);
    uint8_t *mask = malloc(n), *mask2 = malloc(n);
    struct kernel_call k = KCALL(K_DROPOUT_FWD, dt, (int64_t)n, 42);
    k.fparam[0] = p;
    run(&k, (void *[]){tx, ty, mask});
    run(&k, (void *[]){tx, tdx, mask2});
    ok(memcmp(mask, mask2, n) == 0, "dropout (%s): same seed, same mask", dtype_name((enum dtype)dt));
    /* the mask is elementwise.h's definition, which the CUDA kernel evaluates per element */
    const uint64_t stream = oom_dropout_stream(42);
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += mask[i] != oom_dropout_keep(stream, i, oom_dropout_threshold(p));
    ok(off == 0, "dropout (%s): every mask bit as oom_dropout_keep draws it (%zu differ)", dtype_name((enum dtype)dt), off);
    size_t kept = 0;
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) {
        kept += mask[i];
        ref[i] = mask[i] ? x[i] / (1.0 - p) : 0.0;
    }
    ok(fabs((double)kept / n - (1 - p)) < 0.02, "dropout keeps %.3f of elements (want %.2f)", (double)kept / n, 1 - p);
    check_close(ty, dt, ref, n, kernel_get(K_DROPOUT_FWD)->tol[dt], "dropout_fwd y");
    k.dims[1] = 43;
    run(&k, (void *[]){tx, tdx, mask2});
    ok(memcmp(mask, mask2, n) != 0, "another seed, another mask");
    /* backward: dx = dy * mask / (1 - p), i.e. the forward applied to dy with the same mask */
    struct kernel_call kb = KCALL(K_DROPOUT_BWD, dt, (int64_t)n);
    kb.fparam[0] = p;
    run(&kb, (void *[]){tx, mask, tdx});
    check_close(tdx, dt, ref, n, kernel_get(K_DROPOUT_BWD)->tol[dt], "dropout_bwd dx");
    free(x);
    free(tx);
    free(ty);
    free(tdx);
    free(mask);
    free(mask2);
    free(ref);
}

/* dropout_fwd's y, bit for bit: x * (mask ? 1 / (1 - p) : 0) in fp32, rounded once to the dtype,
 * over special values (NaN, infinities, signed zeros, the largest and smallest values) that the
 * vector loops and their tails both see. */
static void dropout_bits_case(int dt)
{
    static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0e38f, -1.0e-40f, 1.0f, -2.5f, 65504.0f};
    const size_t ns = sizeof special / sizeof *special, n = 37 * ns; /* not a multiple of 8 */
    float *x = zeros(n);
    for (size_t i = 0; i < n; i++)
        x[i] = special[i % ns] * (i % 3 == 2 ? 0.3f : 1.0f);
    void *tx = typed(x, n, dt), *ty = malloc(n * 4);
    uint8_t *mask = malloc(n);
    struct kernel_call k = KCALL(K_DROPOUT_FWD, dt, (int64_t)n, 7);
    k.fparam[0] = 0.5f;
    run(&k, (void *[]){tx, ty, mask});
    const float scale = 1.0f / (1.0f - k.fparam[0]);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        float v = ld(tx, dt, i) * (mask[i] ? scale : 0.0f);
        uint32_t want = bits_of(dt, v);
        if (bits_at(ty, dt, i) != want && first == n)
            first = i;
        bad += bits_at(ty, dt, i) != want;
    }
    ok(bad == 0, "dropout (%s): y bit for bit x * mask * scale rounded once, NaN and inf included (%zu differ, first #%zu)",
       dtype_name((enum dtype)dt), bad, first);
    free(x);
    free(tx);
    free(ty);
    free(mask);
}

/* The mask at the ends of the threshold's range (p = 0 keeps all; a tiny p drops only bits 0;
 * p = 0.9) over a length that leaves a tail: every byte as oom_dropout_keep draws it. */
static void dropout_mask_edges(int dt)
{
    static const float ps[] = {0.0f, 1e-9f, 0.9f};
    const size_t n = 5003;
    float *x = rnd_vec(n, 1.0f);
    void *tx = typed(x, n, dt), *ty = malloc(n * 4);
    uint8_t *mask = malloc(n);
    for (size_t j = 0; j < sizeof ps / sizeof *ps; j++) {
        struct kernel_call k = KCALL(K_DROPOUT_FWD, dt, (int64_t)n, 99);
        k.fparam[0] = ps[j];
        run(&k, (void *[]){tx, ty, mask});
        const uint64_t stream = oom_dropout_stream(99);
        size_t off = 0;
        for (size_t i = 0; i < n; i++)
            off += mask[i] != oom_dropout_keep(stream, i, oom_dropout_threshold(ps[j]));
        ok(off == 0, "dropout (%s, p = %g): every mask byte as oom_dropout_keep draws it (%zu differ)",
           dtype_name((enum dtype)dt), (double)ps[j], off);
    }
    free(x);
    free(tx);
    free(ty);
    free(mask);
}

/* ReLU on 16-bit patterns works on the bits: every x pattern with every dy pattern (NaNs with and
 * without the quiet bit among them), against converting, computing and rounding. */
static void relu16_bits_case(int dt)
{
    const size_t n = 1u << 16;
    uint16_t *x = malloc(n * 2), *dy = malloc(n * 2), *y = malloc(n * 2), *dx = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        x[i] = (uint16_t)i;
        dy[i] = (uint16_t)(i * 0x9e37u + 0x1234u); /* odd multiplier: every pattern once */
    }
    struct kernel_call kf = KCALL(K_RELU_FWD, dt, (int64_t)n), kb = KCALL(K_RELU_BWD, dt, (int64_t)n);
    run(&kf, (void *[]){x, y});
    run(&kb, (void *[]){x, dy, dx});
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float xf = ld(x, dt, i), yf = oom_relu(xf), dxf = oom_relu_bwd(xf, ld(dy, dt, i));
        bad += y[i] != bits_of(dt, yf) || dx[i] != bits_of(dt, dxf);
    }
    ok(bad == 0, "relu (%s): every x and dy pattern as fp32 computes and rounds them (%zu differ)",
       dtype_name((enum dtype)dt), bad);
    free(x);
    free(dy);
    free(y);
    free(dx);
}

/* The draw behind the masks: SplitMix64 of the stream, two elements per 64-bit draw. */
static void dropout_rng_case(void)
{
    const uint64_t d = 0x0123456789abcdefull;
    ok(oom_dropout_bits(d, 4) == 0x89abcdu && oom_dropout_bits(d, 5) == 0x012345u,
       "an even element takes bits 8-31 of its pair's draw, an odd one bits 40-63");
    /* SplitMix64's published first output for seed 0 */
    ok(oom_dropout_draw(0, 0) == 0xe220a8397b1dcdafull, "draw 0 of stream 0 is SplitMix64's first output");
    ok(oom_dropout_draw(7, 3) == oom_splitmix64(7 + 3 * OOM_DROPOUT_GAMMA), "draw j of a stream is its j-th SplitMix64 step");
    ok(oom_dropout_threshold(0.0f) == 0 && oom_dropout_threshold(0.25f) == 4194304u &&
           oom_dropout_threshold(1e-9f) == 1u,
       "threshold: p = 0 keeps every draw, p = 0.25 keeps bits >= 2^22, any p > 0 drops bits 0");
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

int main(void)
{
    dropout_rng_case();
    dropout_fd_case();
    for (unsigned d = 0; d < 3; d++) {
        int dt = test_dtypes[d];
        unary_case(K_GELU_FWD, 1, dt);
        unary_case(K_GELU_FWD, 0, dt);
        unary_case(K_SILU_FWD, 0, dt);
        gated_case(K_GEGLU_FWD, 1, dt);
        gated_case(K_GEGLU_FWD, 0, dt);
        gated_case(K_SWIGLU_FWD, 0, dt);
        dropout_case(dt);
        dropout_bits_case(dt);
        dropout_mask_edges(dt);
        if (dt != DT_F32) {
            relu16_bits_case(dt);
            unary_exhaustive_case(K_GELU_FWD, 1, dt);
            unary_exhaustive_case(K_GELU_FWD, 0, dt);
            unary_exhaustive_case(K_SILU_FWD, 0, dt);
            unary_exhaustive_case(K_QUICK_GELU_FWD, 0, dt);
            unary_exhaustive_case(K_RELU_FWD, 0, dt);
        }
    }
    test_activations();
    gelu_erf_accuracy_case();
    return done_testing();
}
