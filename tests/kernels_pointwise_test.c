/* kernels_pointwise_test.c: dtype casts (round to nearest even on known bit patterns, exhaustive
 * round trips, the cast kernel for every dtype pair), add, scale, fill, bias (+ backward), nearest 2x
 * upsampling (+ backward), cross-entropy (+ backward) and embedding (+ backward), each against a
 * naive reference; backward kernels also against finite differences. */
#include "kernels_test_util.h"

static float f32_of(uint32_t bits)
{
    return oom_bits_f32(bits);
}

static void cast_patterns(void)
{
    static const struct {
        uint32_t in;
        uint16_t bf16;
        const char *what;
    } bf[] = {
        {0x3f800000u, 0x3f80, "1.0"},
        {0x3f808000u, 0x3f80, "tie, even below"},
        {0x3f818000u, 0x3f82, "tie, even above"},
        {0x3f808001u, 0x3f81, "just above a tie"},
        {0x3f807fffu, 0x3f80, "just below a tie"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX rounds to inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "smallest subnormal rounds to 0"},
    };
    for (size_t i = 0; i < sizeof bf / sizeof *bf; i++)
        is_int(oom_f32_to_bf16(f32_of(bf[i].in)), bf[i].bf16, "f32 0x%08x -> bf16: %s", bf[i].in, bf[i].what);
    uint16_t nan = oom_f32_to_bf16(f32_of(0x7f800001u));
    ok((nan & 0x7f80) == 0x7f80 && (nan & 0x7f), "signalling NaN stays NaN in bf16 (0x%04x)", nan);

    static const struct {
        uint32_t in;
        uint16_t f16;
        const char *what;
    } hf[] = {
        {0x3f800000u, 0x3c00, "1.0"},
        {0x3f801000u, 0x3c00, "1 + 2^-11: tie, even below"},
        {0x3f803000u, 0x3c02, "1 + 3 * 2^-11: tie, even above"},
        {0x3f801001u, 0x3c01, "just above a tie"},
        {0x477fe000u, 0x7bff, "65504 (max)"},
        {0x477fefffu, 0x7bff, "just below 65520"},
        {0x477ff000u, 0x7c00, "65520 rounds to inf"},
        {0x38800000u, 0x0400, "2^-14, smallest normal"},
        {0x33800000u, 0x0001, "2^-24, smallest subnormal"},
        {0x33000000u, 0x0000, "2^-25: tie, rounds to 0"},
        {0x33400000u, 0x0001, "1.5 * 2^-25 rounds up"},
        {0x33c00000u, 0x0002, "3 * 2^-25: tie, even above"},
        {0x387fe000u, 0x0400, "1023.5 * 2^-24: tie, rounds to the smallest normal"},
        {0xc0000000u, 0xc000, "-2"},
        {0x80000000u, 0x8000, "-0"},
        {0x7f800000u, 0x7c00, "inf"},
    };
    for (size_t i = 0; i < sizeof hf / sizeof *hf; i++)
        is_int(oom_f32_to_f16(f32_of(hf[i].in)), hf[i].f16, "f32 0x%08x -> f16: %s", hf[i].in, hf[i].what);
    nan = oom_f32_to_f16(f32_of(0x7fc00000u));
    ok((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff), "NaN stays NaN in f16 (0x%04x)", nan);

    int bad_f16 = 0, bad_bf16 = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        int is_nan16 = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        int is_nanb = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (!is_nan16 && oom_f32_to_f16(oom_f16_to_f32((uint16_t)h)) != h)
            bad_f16++;
        if (!is_nanb && oom_f32_to_bf16(oom_bf16_to_f32((uint16_t)h)) != h)
            bad_bf16++;
    }
    is_int(bad_f16, 0, "every f16 value survives f16 -> f32 -> f16");
    is_int(bad_bf16, 0, "every bf16 value survives bf16 -> f32 -> bf16");
    ok(oom_f16_to_f32(0x0001) == ldexpf(1.0f, -24) && oom_f16_to_f32(0x8400) == -ldexpf(1.0f, -14),
       "f16 subnormal and negative normal decode exactly");
}

static void cast_kernel(void)
{
    float x[4] = {f32_of(0x3f808000u), f32_of(0x3f818000u), 1.0f / 3.0f, -65520.0f};
    uint16_t bf[4], hf[4];
    struct kernel_call k = KCALL(K_CAST, DT_F32, 4, DT_BF16);
    run(&k, (void *[]){x, bf});
    ok(bf[0] == 0x3f80 && bf[1] == 0x3f82 && bf[2] == 0x3eab && bf[3] == 0xc780, "cast fp32 -> bf16 kernel");
    k = KCALL(K_CAST, DT_BF16, 4, DT_F16);
    run(&k, (void *[]){bf, hf});
    ok(hf[0] == 0x3c00 && hf[1] == 0x3c10 && hf[3] == 0xfc00, "cast bf16 -> fp16 kernel (0x%04x 0x%04x 0x%04x)", hf[0],
       hf[1], hf[3]);
    float back[4];
    k = KCALL(K_CAST, DT_F16, 4, DT_F32);
    run(&k, (void *[]){hf, back});
    ok(back[0] == 1.0f && isinf(back[3]) && back[3] < 0, "cast fp16 -> fp32 kernel");
}

/* The cast kernel for every (source, destination) pair against the scalar conversions checked
 * above: every 16-bit source pattern (and a few again, for a tail shorter than a vector), and fp32
 * sources from special values and random bits. NaN
 * must stay NaN (its payload is the kernel's choice); every other value has exact bits. */
static void cast_pairs(void)
{
    const size_t n16 = (1u << 16) + 13, n32 = 70001; /* not multiples of any chunk or vector width */
    uint32_t *src32 = malloc(n32 * 4);
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                       0x00000001u, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x3f808000u, 0x7f7fffffu};
    for (size_t i = 0; i < n32; i++) {
        test_rng_state = test_rng_state * 6364136223846793005ull + 1442695040888963407ull;
        src32[i] = i < sizeof special / sizeof *special ? special[i] : (uint32_t)(test_rng_state >> 32);
    }
    uint16_t *src16 = malloc(n16 * 2);
    for (size_t i = 0; i < n16; i++)
        src16[i] = (uint16_t)(i * 0x9e37u); /* every pattern, out of order */
    for (unsigned a = 0; a < 3; a++)
        for (unsigned b = 0; b < 3; b++) {
            int from = test_dtypes[a], to = test_dtypes[b];
            size_t n = from == DT_F32 ? n32 : n16, bad = 0, first = n;
            const void *x = from == DT_F32 ? (const void *)src32 : (const void *)src16;
            void *y = malloc(n * 4);
            struct kernel_call k = KCALL(K_CAST, from, (int64_t)n, to);
            if (run(&k, (void *[]){(void *)x, y}) < 0)
                bad = n;
            for (size_t i = 0; i < n && bad < n; i++) {
                float v = from == DT_F32 ? f32_of(src32[i]) : from == DT_BF16 ? oom_bf16_to_f32(src16[i]) : oom_f16_to_f32(src16[i]);
                uint32_t want = bits_of(to, v), got = bits_at(y, to, i);
                int nan_ok = isnan(v) && (to == DT_F32 ? isnan(f32_of(got)) : to == DT_BF16 ? isnan(oom_bf16_to_f32((uint16_t)got))
                                                                                         : isnan(oom_f16_to_f32((uint16_t)got)));
                if (got != want && !nan_ok) {
                    bad++;
                    if (first == n)
                        first = i;
                }
            }
            ok(bad == 0, "cast %s -> %s: %zu values as the scalar conversion rounds them (%zu differ, first #%zu)",
               dtype_name((enum dtype)from), dtype_name((enum dtype)to), n, bad, first);
            free(y);
        }
    free(src32);
    free(src16);
}

static void simple_ops(int dt)
{
    const size_t n = 99;
    float *a = rnd_vec(n, 2.0f), *b = rnd_vec(n, 2.0f);
    round_to(a, n, dt);
    round_to(b, n, dt);
    double *ref = malloc(n * sizeof *ref);
    void *ta = typed(a, n, dt), *tb = typed(b, n, dt), *ty = malloc(n * 4);
    struct kernel_call k = KCALL(K_ADD, dt, (int64_t)n);
    k.fparam[0] = 1.0f;
    k.fparam[1] = -0.5f;
    for (size_t i = 0; i < n; i++)
        ref[i] = a[i] - 0.5 * b[i];
    run(&k, (void *[]){ta, tb, ty});
    check_close(ty, dt, ref, n, kernel_get(K_ADD)->tol[dt], "add");
    run(&k, (void *[]){ta, tb, ta}); /* in place, as gradient accumulation does */
    check_close(ta, dt, ref, n, kernel_get(K_ADD)->tol[dt], "add in place");
    k = KCALL(K_SCALE, dt, (int64_t)n);
    k.fparam[0] = 3.0f;
    for (size_t i = 0; i < n; i++)
        ref[i] = 3.0 * b[i];
    run(&k, (void *[]){tb, ty});
    check_close(ty, dt, ref, n, kernel_get(K_SCALE)->tol[dt], "scale");
    k = KCALL(K_FILL, dt, (int64_t)n);
    k.fparam[0] = 0.25f;
    for (size_t i = 0; i < n; i++)
        ref[i] = 0.25;
    run(&k, (void *[]){ty});
    check_close(ty, dt, ref, n, 0, "fill");
    free(a);
    free(b);
    free(ref);
    free(ta);
    free(tb);
    free(ty);
}

/* A linear kernel L and its backward B satisfy <L(x), w> = <x, B(w)>: checked by finite
 * differences of x -> <L(x), w> (exact for a linear map up to rounding). */
struct linear {
    struct kernel_call fwd;
    float *x, *extra, *w; /* extra: bias for bias_add (differentiated separately) */
    size_t ny;
};

static double linear_loss(void *arg)
{
    struct linear *l = arg;
    float *y = zeros(l->ny);
    if (l->fwd.kernel == K_BIAS_ADD)
        run(&l->fwd, (void *[]){l->x, l->extra, y});
    else
        run(&l->fwd, (void *[]){l->x, y});
    double s = wsum(l->w, y, l->ny);
    free(y);
    return s;
}

/* bias_add bit for bit: x + bias[c] in fp32, rounded once to the dtype, for a linear layer's
 * layout (inner 1) whose rows run across chunk boundaries, and a conv's (inner > 1). */
static void bias_add_bits(int dt)
{
    static const int64_t shapes[][3] = {{7, 700, 1}, {3, 5, 1111}};
    for (size_t s = 0; s < 2; s++) {
        const int64_t outer = shapes[s][0], C = shapes[s][1], inner = shapes[s][2];
        const size_t n = (size_t)(outer * C * inner);
        float *x = rnd_vec(n, 4.0f), *bias = rnd_vec((size_t)C, 4.0f);
        void *tx = typed(x, n, dt), *tb = typed(bias, (size_t)C, dt), *ty = malloc(n * 4);
        struct kernel_call k = KCALL(K_BIAS_ADD, dt, outer, C, inner);
        run(&k, (void *[]){tx, tb, ty});
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            float v = ld(tx, dt, i) + ld(tb, dt, i / (size_t)inner % (size_t)C);
            bad += bits_at(ty, dt, i) != bits_of(dt, v);
        }
        ok(bad == 0, "bias_add (%s, %lld x %lld x %lld): x + bias in fp32 rounded once, bit for bit (%zu differ)",
           dtype_name((enum dtype)dt), (long long)outer, (long long)C, (long long)inner, bad);
        free(x);
        free(bias);
        free(tx);
        free(tb);
        free(ty);
    }
}

/* bias_add and bias_bwd on outer x C x inner, checked against fp64 sums. */
static void bias_case(int dt, int64_t outer, int64_t C, int64_t inner)
{
    size_t n = (size_t)(outer * C * inner);
    float *x = rnd_vec(n, 1.0f), *bias = rnd_vec((size_t)C, 1.0f), *dy = rnd_vec(n, 1.0f);
    round_to(x, n, dt);
    round_to(bias, (size_t)C, dt);
    round_to(dy, n, dt);
    double *ref = malloc(n * sizeof *ref), *dref = calloc((size_t)C, sizeof *dref);
    for (size_t i = 0; i < n; i++) {
        ref[i] = x[i] + (double)bias[i / inner % C];
        dref[i / inner % C] += dy[i];
    }
    void *tx = typed(x, n, dt), *tb = typed(bias, (size_t)C, dt), *ty = malloc(n * 4), *tdy = typed(dy, n, dt);
    void *tdb = malloc((size_t)C * 4);
    struct kernel_call k = KCALL(K_BIAS_ADD, dt, outer, C, inner);
    run(&k, (void *[]){tx, tb, ty});
    check_close(ty, dt, ref, n, kernel_get(K_BIAS_ADD)->tol[dt], "bias_add");
    struct kernel_call kb = KCALL(K_BIAS_BWD, dt, outer, C, inner);
    run(&kb, (void *[]){tdy, tdb});
    check_close(tdb, dt, dref, (size_t)C, kernel_get(K_BIAS_BWD)->tol[dt], "bias_bwd");
    if (dt == DT_F32) {
        struct linear l = {k, x, bias, dy, n};
        fd_check(bias, (size_t)C, linear_loss, &l, tdb, FD_TOL, "bias_bwd");
    }
    free(ref);
    free(dref);
    free(tx);
    free(tb);
    free(ty);
    free(tdy);
    free(tdb);
    free(x);
    free(bias);
    free(dy);
}

static void bias_and_upsample(int dt)
{
    bias_case(dt, 3, 5, 4);
    bias_case(dt, 7, 300, 1);     /* a linear layer's bias (inner 1): one block of 7 rows */
    bias_case(dt, 8192, 300, 1);  /* enough rows to be split over threads */
    bias_case(dt, 2, 3, 5000);    /* a channel's run longer than a chunk */
    bias_case(dt, 70, 2500, 1);   /* rows longer than a chunk, a last block of 6 rows */

    /* upsample2x */
    const int64_t N = 2, Ch = 3, H = 3, W = 4;
    size_t nx = (size_t)(N * Ch * H * W), ny = 4 * nx;
    float *x = rnd_vec(nx, 1.0f), *dy = rnd_vec(ny, 1.0f);
    round_to(x, nx, dt);
    round_to(dy, ny, dt);
    double *ref = malloc(ny * sizeof *ref), *dref = calloc(nx, sizeof *dref);
    for (int64_t p = 0; p < N * Ch; p++)
        for (int64_t h = 0; h < 2 * H; h++)
            for (int64_t w = 0; w < 2 * W; w++) {
                size_t yi = (size_t)((p * 2 * H + h) * 2 * W + w), xi = (size_t)((p * H + h / 2) * W + w / 2);
                ref[yi] = x[xi];
                dref[xi] += dy[yi];
            }
    void *tx = typed(x, nx, dt), *ty = malloc(ny * 4), *tdy = typed(dy, ny, dt);
    void *tdx = malloc(nx * 4);
    struct kernel_call k = KCALL(K_UPSAMPLE2X_FWD, dt, N, Ch, H, W);
    run(&k, (void *[]){tx, ty});
    check_close(ty, dt, ref, ny, 0, "upsample2x_fwd");
    struct kernel_call kb = KCALL(K_UPSAMPLE2X_BWD, dt, N, Ch, H, W);
    run(&kb, (void *[]){tdy, tdx});
    check_close(tdx, dt, dref, nx, kernel_get(K_UPSAMPLE2X_BWD)->tol[dt], "upsample2x_bwd");
    if (dt == DT_F32) {
        struct linear l = {k, x, NULL, dy, ny};
        fd_check(x, nx, linear_loss, &l, tdx, FD_TOL, "upsample2x_bwd");
    }
    free(ref);
    free(dref);
    free(tx);
    free(ty);
    free(tdy);
    free(tdx);
    free(x);
    free(dy);
}

struct ce {
    int64_t rows, V;
    float *logits;
    int64_t *target;
};

static double ce_loss(void *arg)
{
    struct ce *c = arg;
    float *loss = zeros((size_t)c->rows), *lse = zeros((size_t)c->rows);
    struct kernel_call k = KCALL(K_CROSS_ENTROPY_FWD, DT_F32, c->rows, c->V);
    run(&k, (void *[]){c->logits, c->target, loss, lse});
    double s = 0;
    for (int64_t r = 0; r < c->rows; r++)
        s += loss[r];
    free(loss);
    free(lse);
    return s;
}

/* rows x V logits, targets spread over the row (row 3 ignored); the first shape checks finite differences and a
 * target out of range, the larger ones rows longer than a kernel's 2048-element piece and rows split over threads. */
static void cross_entropy(int dt, int64_t rows, int64_t V)
{
    struct ce c = {rows, V, NULL, NULL};
    size_t n = (size_t)(c.rows * c.V);
    c.logits = rnd_vec(n, 3.0f);
    round_to(c.logits, n, dt);
    int64_t *target = malloc((size_t)rows * sizeof *target);
    for (int64_t r = 0; r < rows; r++)
        target[r] = r == 3 ? -100 : (r * 7 + 3) % V;
    c.target = target;
    double *loss_ref = malloc((size_t)rows * sizeof *loss_ref), *lse_ref = malloc((size_t)rows * sizeof *lse_ref),
           *dref = malloc(n * sizeof *dref);
    for (int64_t r = 0; r < c.rows; r++) {
        double mx = -INFINITY, z = 0;
        for (int64_t j = 0; j < c.V; j++)
            mx = fmax(mx, c.logits[r * c.V + j]);
        for (int64_t j = 0; j < c.V; j++)
            z += exp(c.logits[r * c.V + j] - mx);
        double lse = lse_ref[r] = mx + log(z);
        loss_ref[r] = target[r] < 0 ? 0 : lse - c.logits[r * c.V + target[r]];
        for (int64_t j = 0; j < c.V; j++)
            dref[r * c.V + j] = target[r] < 0 ? 0 : exp(c.logits[r * c.V + j] - lse) - (j == target[r]);
    }
    void *tl = typed(c.logits, n, dt), *tdl = malloc(n * 4);
    float *loss = zeros((size_t)rows), *lse = zeros((size_t)rows);
    struct kernel_call k = KCALL(K_CROSS_ENTROPY_FWD, dt, c.rows, c.V);
    run(&k, (void *[]){tl, target, loss, lse});
    char msg[128];
    snprintf(msg, sizeof msg, "cross_entropy_fwd loss, %lld x %lld %s logits (ignore_index row gives 0)", (long long)rows,
             (long long)V, dtype_name((enum dtype)dt));
    check_close(loss, DT_F32, loss_ref, (size_t)rows, 1e-5, msg);
    snprintf(msg, sizeof msg, "cross_entropy_fwd lse, %s logits (every row, ignored ones too)", dtype_name((enum dtype)dt));
    check_close(lse, DT_F32, lse_ref, (size_t)rows, 1e-5, msg);
    struct kernel_call kb = KCALL(K_CROSS_ENTROPY_BWD, dt, c.rows, c.V);
    kb.fparam[0] = 1.0f;
    run(&kb, (void *[]){tl, target, lse, tdl});
    snprintf(msg, sizeof msg, "cross_entropy_bwd, %lld x %lld", (long long)rows, (long long)V);
    check_close(tdl, dt, dref, n, kernel_get(K_CROSS_ENTROPY_BWD)->tol[dt], msg);
    if (dt == DT_F32 && n < 100)
        fd_check(c.logits, n, ce_loss, &c, tdl, FD_TOL, "cross_entropy_bwd");
    if (n < 100) {
        target[2] = V;
        struct err e = {0};
        ok(kernel_run_cpu(&k, (void *[]){tl, target, loss, lse}, &e) < 0 && strstr(e.msg, "outside"),
           "target out of range rejected: %s", e.msg);
    }
    free(c.logits);
    free(target);
    free(loss_ref);
    free(lse_ref);
    free(loss);
    free(lse);
    free(dref);
    free(tl);
    free(tdl);
}

struct emb {
    int64_t rows, V, C;
    int64_t *ids;
    float *table, *w;
};

static double emb_loss(void *arg)
{
    struct emb *m = arg;
    size_t ny = (size_t)(m->rows * m->C);
    float *y = zeros(ny);
    struct kernel_call k = KCALL(K_EMBEDDING_FWD, DT_F32, m->rows, m->V, m->C);
    run(&k, (void *[]){m->ids, m->table, y});
    double l = wsum(m->w, y, ny);
    free(y);
    return l;
}

static void embedding(int dt)
{
    const int64_t rows = 5, V = 4, C = 3;
    int64_t ids[5] = {2, 0, 2, 3, 2};
    float *table = rnd_vec((size_t)(V * C), 1.0f), *dy = rnd_vec((size_t)(rows * C), 1.0f);
    round_to(table, (size_t)(V * C), dt);
    round_to(dy, (size_t)(rows * C), dt);
    double y_ref[15], dt_ref[12] = {0};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < C; c++) {
            y_ref[r * C + c] = table[ids[r] * C + c];
            dt_ref[ids[r] * C + c] += dy[r * C + c];
        }
    void *tt = typed(table, 12, dt), *ty = malloc(15 * 4), *tdy = typed(dy, 15, dt), *tdt = malloc(12 * 4);
    struct kernel_call k = KCALL(K_EMBEDDING_FWD, dt, rows, V, C);
    run(&k, (void *[]){ids, tt, ty});
    check_close(ty, dt, y_ref, 15, 0, "embedding_fwd");
    k = KCALL(K_EMBEDDING_BWD, dt, rows, V, C);
    run(&k, (void *[]){ids, tdy, tdt});
    check_close(tdt, dt, dt_ref, 12, kernel_get(K_EMBEDDING_BWD)->tol[dt], "embedding_bwd (repeated ids add up)");
    if (dt == DT_F32) {
        struct emb m = {rows, V, C, ids, table, dy};
        fd_check(table, 12, emb_loss, &m, tdt, FD_TOL, "embedding_bwd");
    }
    free(table);
    free(dy);
    free(tt);
    free(ty);
    free(tdy);
    free(tdt);
}

int main(void)
{
    cast_patterns();
    cast_kernel();
    cast_pairs();
    for (unsigned d = 0; d < 3; d++) {
        simple_ops(test_dtypes[d]);
        bias_and_upsample(test_dtypes[d]);
        bias_add_bits(test_dtypes[d]);
        cross_entropy(test_dtypes[d], 6, 11);
        cross_entropy(test_dtypes[d], 5, 5000);
        cross_entropy(test_dtypes[d], 1100, 2048);
        embedding(test_dtypes[d]);
    }
    return done_testing();
}
