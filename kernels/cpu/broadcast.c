/* broadcast.c: CPU kernels over {outer, repeat, inner}: multiply and add with an operand
 * broadcast over the middle dim, the broadcast copy (expand) and its adjoint (the sum over the
 * middle dim, in double). */
#include <string.h>

#include "cpu/cpu_kernels.h"
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
