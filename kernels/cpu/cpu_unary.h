/* cpu_unary.h: unary activations (y = f(x), dx = grad(x, dy)) over chunks of any dtype. fp32
 * runs their vectorized loops. A bf16 or fp16 input has only 65,536 values, so for an activation
 * whose backward is dy * f'(x) the 16-bit paths look up tables of f and f' over every value,
 * filled once by the same fp32 loops: the bits are those of converting, computing and rounding,
 * at the cost of a lookup. */
#ifndef OOMLAB_CPU_UNARY_H
#define OOMLAB_CPU_UNARY_H

#include <stdatomic.h>

#include "cpu/cpu_vec.h"

typedef void cpu_fwd_loop(float *y, const float *x, size_t n);
typedef void cpu_bwd_loop(float *dx, const float *x, const float *dy, size_t n);

/* f and f' of every 16-bit pattern of one dtype. */
struct unary_tables {
    uint16_t y[1 << 16]; /* f(x) rounded to the dtype */
    float dydx[1 << 16]; /* f'(x) in fp32: grad(x, 1) */
};

struct cpu_unary {
    cpu_fwd_loop *fwd;
    cpu_bwd_loop *bwd;
    int by_table; /* grad(x, dy) is dy * grad(x, 1) to the bit (not so for ReLU's sign of zero) */
    struct unary_tables *_Atomic tables[2]; /* bf16, fp16; built on first use */
};

/* Defines the loops name##_fwd and name##_bwd from the per-element f(x) and grad(x, dy), and
 * struct cpu_unary name. y may be x, dx may be x or dy (same index only). */
#define CPU_UNARY(name, f, grad, by_table)                                                \
    CPU_BODY void name##_fwd_body(float *y, const float *x, size_t n)                     \
    {                                                                                     \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = f(x[i]);               \
    }                                                                                     \
    CPU_BODY void name##_bwd_body(float *dx, const float *x, const float *dy, size_t n)   \
    {                                                                                     \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) dx[i] = grad(x[i], dy[i]);    \
    }                                                                                     \
    CPU_MULTIVERSION(name##_fwd, (float *y, const float *x, size_t n), (y, x, n))        \
    CPU_MULTIVERSION(name##_bwd, (float *dx, const float *x, const float *dy, size_t n), (dx, x, dy, n)) \
    static struct cpu_unary name = {name##_fwd, name##_bwd, by_table, {NULL, NULL}};

/* One chunk of a forward kernel, tensors {x, y}. */
void cpu_unary_fwd(const struct kernel_call *k, void *const *t, size_t i0, size_t len, struct cpu_unary *u);

/* One chunk of a backward kernel, tensors {x, dy, dx}. */
void cpu_unary_bwd(const struct kernel_call *k, void *const *t, size_t i0, size_t len, struct cpu_unary *u);

#endif
