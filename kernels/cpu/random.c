/* random.c: CPU seeded fills that initialise parameters and inputs: uniform values in [lo, hi)
 * and integers in [0, high), element i drawn from splitmix64 of the seed and i (elementwise.h). */
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_rand_uniform(const struct kernel_call *k, void *const *t, struct err *e)
{
    const float lo = k->fparam[0], hi = k->fparam[1];
    const uint64_t seed = (uint64_t)k->dims[1];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[0], k->dtype, i, oom_uniform_value(lo, hi, oom_uniform01(seed, i), k->dtype));
    return 0;
}

int cpu_randint(const struct kernel_call *k, void *const *t, struct err *e)
{
    const uint64_t seed = (uint64_t)k->dims[1], high = (uint64_t)k->dims[2];
    int64_t *y = t[0];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        y[i] = oom_randint(seed, i, high);
    return 0;
}
