/* pointwise_extra.c: CPU broadcast multiply and add, broadcast copy (expand) and its adjoint
 * (sum over the middle dim), batched transpose, strided block copies, and the seeded uniform and
 * integer fills used to initialise parameters and inputs. */
#include <string.h>

#include "cpu/cpu_kernels_extra.h"
#include "cpu/tensor_io.h"

int cpu_mul_bcast(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    for (int64_t o = 0; o < O; o++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++) {
                size_t at = (size_t)((o * R + r) * I + i);
                st(t[2], k->dtype, at, ld(t[0], k->dtype, at) * ld(t[1], k->dtype, (size_t)(o * I + i)));
            }
    return 0;
}

int cpu_add_bcast(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    const float alpha = k->fparam[0], beta = k->fparam[1];
    for (int64_t o = 0; o < O; o++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++) {
                size_t at = (size_t)((o * R + r) * I + i);
                st(t[2], k->dtype, at,
                   alpha * ld(t[0], k->dtype, at) + beta * ld(t[1], k->dtype, (size_t)(o * I + i)));
            }
    return 0;
}

int cpu_expand(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    for (int64_t o = 0; o < O; o++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++)
                st(t[1], k->dtype, (size_t)((o * R + r) * I + i), k->fparam[0] * ld(t[0], k->dtype, (size_t)(o * I + i)));
    return 0;
}

int cpu_reduce_sum(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    double *acc = calloc((size_t)I, sizeof *acc);
    if (!acc)
        return err_set(e, ERR_INTERNAL, "out of host memory for reduce_sum scratch");
    for (int64_t o = 0; o < O; o++) {
        memset(acc, 0, (size_t)I * sizeof *acc);
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++)
                acc[i] += ld(t[0], k->dtype, (size_t)((o * R + r) * I + i));
        for (int64_t i = 0; i < I; i++)
            st(t[1], k->dtype, (size_t)(o * I + i), (float)(k->fparam[0] * acc[i]));
    }
    free(acc);
    return 0;
}

int cpu_transpose(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t B = k->dims[0], R = k->dims[1], C = k->dims[2];
    const size_t es = dtype_size((enum dtype)k->dtype);
    const char *x = t[0];
    char *y = t[1];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++)
                memcpy(y + (size_t)((b * C + j) * R + i) * es, x + (size_t)((b * R + i) * C + j) * es, es);
    return 0;
}

int cpu_copy_blocks(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t outer = k->dims[0], len = k->dims[1], ss = k->dims[2], so = k->dims[3], ds = k->dims[4],
                  doff = k->dims[5];
    const size_t es = dtype_size((enum dtype)k->dtype);
    for (int64_t o = 0; o < outer; o++) {
        size_t src = (size_t)(o * ss + so), dst = (size_t)(o * ds + doff);
        if (!k->dims[6]) {
            memmove((char *)t[1] + dst * es, (const char *)t[0] + src * es, (size_t)len * es);
            continue;
        }
        for (int64_t i = 0; i < len; i++)
            st(t[1], k->dtype, dst + (size_t)i, ld(t[1], k->dtype, dst + (size_t)i) + ld(t[0], k->dtype, src + (size_t)i));
    }
    return 0;
}

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
