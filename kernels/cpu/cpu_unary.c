/* cpu_unary.c: the chunk functions of the unary activations (cpu_unary.h): fp32 through the
 * activation's loops, bf16/fp16 through its tables (built on first use, once per dtype) or, for
 * an activation without tables, converted to fp32 and back. */
#include "cpu/cpu_unary.h"

#include <stdlib.h>
#include <string.h>

#define PATTERNS (1u << 16)

/* Four lookups per 64-bit load and store: twice the rate of one element at a time. */
CPU_BODY void lookup_body(uint16_t *y, const uint16_t *x, const uint16_t *tab, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t in, out = 0;
        memcpy(&in, x + i, sizeof in);
        for (int j = 0; j < 4; j++)
            out |= (uint64_t)tab[(in >> (16 * j)) & 0xffffu] << (16 * j);
        memcpy(y + i, &out, sizeof out);
    }
    for (; i < n; i++)
        y[i] = tab[x[i]];
}

CPU_BODY void lookup_grad_bf16_body(uint16_t *dx, const uint16_t *x, const uint16_t *dy, const float *dydx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dx[i] = oom_f32_to_bf16(oom_bf16_to_f32(dy[i]) * dydx[x[i]]);
}

CPU_BODY void lookup_grad_f16_body(uint16_t *dx, const uint16_t *x, const uint16_t *dy, const float *dydx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dx[i] = oom_f32_to_f16(oom_f16_to_f32(dy[i]) * dydx[x[i]]);
}

CPU_MULTIVERSION(lookup, (uint16_t * y, const uint16_t *x, const uint16_t *tab, size_t n), (y, x, tab, n))
CPU_MULTIVERSION(lookup_grad_bf16, (uint16_t * dx, const uint16_t *x, const uint16_t *dy, const float *dydx, size_t n),
                 (dx, x, dy, dydx, n))
CPU_MULTIVERSION(lookup_grad_f16, (uint16_t * dx, const uint16_t *x, const uint16_t *dy, const float *dydx, size_t n),
                 (dx, x, dy, dydx, n))

/* f and f' of every pattern, by the fp32 loops; NULL without memory (the caller converts). */
static struct unary_tables *tables_build(const struct cpu_unary *u, int dt)
{
    struct unary_tables *tb = malloc(sizeof *tb);
    uint16_t *patterns = malloc(PATTERNS * sizeof *patterns);
    float *x = malloc(PATTERNS * sizeof *x), *v = malloc(PATTERNS * sizeof *v);
    if (tb && patterns && x && v) {
        for (uint32_t i = 0; i < PATTERNS; i++)
            patterns[i] = (uint16_t)i;
        tensor_to_f32(x, patterns, dt, PATTERNS);
        u->fwd(v, x, PATTERNS);
        tensor_from_f32(tb->y, dt, v, PATTERNS);
        for (uint32_t i = 0; i < PATTERNS; i++)
            v[i] = 1.0f;
        u->bwd(tb->dydx, x, v, PATTERNS);
    } else {
        free(tb);
        tb = NULL;
    }
    free(patterns);
    free(x);
    free(v);
    return tb;
}

/* The tables of u for a 16-bit dtype; the first caller builds them (a racing builder's copy,
 * equal to the winner's, is dropped). */
static const struct unary_tables *tables_of(struct cpu_unary *u, int dt)
{
    if (!u->by_table)
        return NULL;
    struct unary_tables *_Atomic *slot = &u->tables[dt == DT_BF16 ? 0 : 1];
    struct unary_tables *tb = atomic_load_explicit(slot, memory_order_acquire);
    if (tb)
        return tb;
    struct unary_tables *built = tables_build(u, dt), *none = NULL;
    if (!built)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &none, built, memory_order_acq_rel, memory_order_acquire))
        return built;
    free(built);
    return none;
}

void cpu_unary_fwd(const struct kernel_call *k, void *const *t, size_t i0, size_t len, struct cpu_unary *u)
{
    const struct unary_tables *tb = k->dtype == DT_F32 ? NULL : tables_of(u, k->dtype);
    if (tb) {
        lookup((uint16_t *)t[1] + i0, (const uint16_t *)t[0] + i0, tb->y, len);
        return;
    }
    float buf[CPU_CHUNK];
    const float *x = chunk_in(t[0], k->dtype, i0, len, buf);
    float *y = chunk_out(t[1], k->dtype, i0, buf);
    u->fwd(y, x, len);
    chunk_put(t[1], k->dtype, i0, len, y);
}

void cpu_unary_bwd(const struct kernel_call *k, void *const *t, size_t i0, size_t len, struct cpu_unary *u)
{
    const struct unary_tables *tb = k->dtype == DT_F32 ? NULL : tables_of(u, k->dtype);
    if (tb) {
        const uint16_t *x = (const uint16_t *)t[0] + i0, *dy = (const uint16_t *)t[1] + i0;
        uint16_t *dx = (uint16_t *)t[2] + i0;
        if (k->dtype == DT_BF16)
            lookup_grad_bf16(dx, x, dy, tb->dydx, len);
        else
            lookup_grad_f16(dx, x, dy, tb->dydx, len);
        return;
    }
    float xb[CPU_CHUNK], gb[CPU_CHUNK];
    const float *x = chunk_in(t[0], k->dtype, i0, len, xb);
    const float *dy = chunk_in(t[1], k->dtype, i0, len, gb);
    float *dx = chunk_out(t[2], k->dtype, i0, gb);
    u->bwd(dx, x, dy, len);
    chunk_put(t[2], k->dtype, i0, len, dx);
}
