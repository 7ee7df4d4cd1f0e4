/* kernels_random_test.c: the seeded uniform and integer fills against their definitions
 * (elementwise.h's draws), in every dtype. */
#include "kernels_test_util.h"

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
    test_fills();
    return done_testing();
}
