/* broadcast.c: CPU kernels over {outer, repeat, inner}: multiply and add with an operand
 * broadcast over the middle dim, the broadcast copy (expand) and its adjoint (the sum over the middle dim,
 * in double), as vectorized loops over fp32 chunks of the output split over the cores. */
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

enum bcast_op { BCAST_MUL, BCAST_ADD, BCAST_EXPAND };

/* y[j] = op(a[j], b[j]) over one run where the broadcast operand is contiguous (bstride 1) or one value
 * (bstride 0); the expand has no a. */
CPU_BODY void bcast_run(float *y, const float *a, const float *b, size_t bstride, size_t n, enum bcast_op op, float alpha,
                        float beta)
{
    if (op == BCAST_MUL) {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            y[j] = a[j] * b[j * bstride];
    } else if (op == BCAST_ADD) {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            y[j] = alpha * a[j] + beta * b[j * bstride];
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            y[j] = alpha * b[j * bstride];
    }
}

/* Elements [i0, i0 + len) of y (element (o, r, i) at (o * repeat + r) * inner + i; the broadcast operand's
 * at o * inner + i), in runs over which that operand is contiguous: the whole chunk when repeat is 1, runs of
 * inner elements otherwise, or runs of one value when inner is 1. */
CPU_BODY void bcast_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len, enum bcast_op op)
{
    const size_t R = (size_t)k->dims[1], I = (size_t)k->dims[2];
    const void *bsrc = t[op == BCAST_EXPAND ? 0 : 1];
    void *dst = t[op == BCAST_EXPAND ? 1 : 2];
    float ab[CPU_CHUNK], bb[CPU_CHUNK];
    const float *a = op == BCAST_EXPAND ? NULL : chunk_in(t[0], k->dtype, i0, len, ab);
    float *y = chunk_out(dst, k->dtype, i0, ab);
    const float alpha = k->fparam[0], beta = k->fparam[1];
    for (size_t j = 0; j < len;) {
        const size_t at = i0 + j, o = at / (R * I), i = at % I;
        size_t run, bstride = 1;
        const float *b;
        if (R == 1) {
            run = len - j;
            b = chunk_in(bsrc, k->dtype, at, run, bb);
        } else if (I == 1) {
            run = R - at % R < len - j ? R - at % R : len - j;
            bb[0] = ld(bsrc, k->dtype, o);
            b = bb;
            bstride = 0;
        } else {
            run = I - i < len - j ? I - i : len - j;
            b = chunk_in(bsrc, k->dtype, o * I + i, run, bb);
        }
        bcast_run(y + j, a ? a + j : NULL, b, bstride, run, op, alpha, beta);
        j += run;
    }
    chunk_put(dst, k->dtype, i0, len, y);
}

CPU_BODY void mul_bcast_chunk_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    bcast_chunk(k, t, i0, len, BCAST_MUL);
}
CPU_BODY void add_bcast_chunk_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    bcast_chunk(k, t, i0, len, BCAST_ADD);
}
CPU_BODY void expand_chunk_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    bcast_chunk(k, t, i0, len, BCAST_EXPAND);
}
CPU_MULTIVERSION(mul_bcast_chunk, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))
CPU_MULTIVERSION(add_bcast_chunk, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))
CPU_MULTIVERSION(expand_chunk, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

static size_t bcast_elems(const struct kernel_call *k)
{
    return (size_t)(k->dims[0] * k->dims[1] * k->dims[2]);
}

int cpu_mul_bcast(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, bcast_elems(k), CPU_CHUNK, mul_bcast_chunk);
    return 0;
}

int cpu_add_bcast(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, bcast_elems(k), CPU_CHUNK, add_bcast_chunk);
    return 0;
}

int cpu_expand(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, bcast_elems(k), CPU_CHUNK, expand_chunk);
    return 0;
}

/* Outputs [j0, j0 + len) of reduce_sum (output (o, i) at o * inner + i), each the sum over r of its inputs in
 * fp64, times alpha: in runs of one o, the repeat's rows of the run added in turn; with inner 1, each output's
 * own contiguous run of repeat elements. */
CPU_BODY void reduce_sum_chunk_body(const struct kernel_call *k, void *const *t, size_t j0, size_t len)
{
    const size_t R = (size_t)k->dims[1], I = (size_t)k->dims[2];
    double acc[CPU_CHUNK];
    float buf[CPU_CHUNK], yb[CPU_CHUNK];
    float *y = chunk_out(t[1], k->dtype, j0, yb);
    for (size_t j = 0, run; j < len; j += run) {
        const size_t o = (j0 + j) / I, i = (j0 + j) % I;
        run = I - i < len - j ? I - i : len - j;
        if (I == 1) {
            double s = 0.0;
            for (size_t r0 = 0; r0 < R; r0 += CPU_CHUNK) {
                size_t n = cpu_piece(R, r0);
                const float *x = chunk_in(t[0], k->dtype, o * R + r0, n, buf);
#pragma omp simd reduction(+ : s)
                for (size_t c = 0; c < n; c++)
                    s += (double)x[c];
            }
            acc[0] = s;
        } else {
            memset(acc, 0, run * sizeof *acc);
            for (size_t r = 0; r < R; r++) {
                const float *x = chunk_in(t[0], k->dtype, (o * R + r) * I + i, run, buf);
#pragma omp simd
                for (size_t c = 0; c < run; c++)
                    acc[c] += (double)x[c];
            }
        }
        for (size_t c = 0; c < run; c++)
            y[j + c] = (float)(k->fparam[0] * acc[c]);
    }
    chunk_put(t[1], k->dtype, j0, len, y);
}
CPU_MULTIVERSION(reduce_sum_chunk, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_reduce_sum(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t outs = (size_t)(k->dims[0] * k->dims[2]);
    cpu_for_chunks_of(k, t, outs, CPU_CHUNK, bcast_elems(k), reduce_sum_chunk);
    return 0;
}
