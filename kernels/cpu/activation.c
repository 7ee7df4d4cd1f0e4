/* activation.c: CPU GELU, SiLU and their gated forms (GEGLU, SwiGLU), forward and backward, on
 * the per-element math of elementwise.h; GELU and SiLU as unary activations (cpu_unary.h). */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_unary.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static inline float gelu_tanh_dx(float x, float dy)
{
    return dy * oom_gelu_tanh_grad(x);
}

static inline float gelu_erf_dx(float x, float dy)
{
    return dy * oom_gelu_erf_grad(x);
}

static inline float silu_dx(float x, float dy)
{
    return dy * oom_silu_grad(x);
}

CPU_UNARY(gelu_tanh, oom_gelu_tanh, gelu_tanh_dx, 1)
CPU_UNARY(gelu_erf, oom_gelu_erf, gelu_erf_dx, 1)
CPU_UNARY(silu, oom_silu, silu_dx, 1)

/* GELU's dims[1] picks tanh or erf. */
static void gelu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, k->dims[1] ? &gelu_tanh : &gelu_erf);
}

static void gelu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, k->dims[1] ? &gelu_tanh : &gelu_erf);
}

static void silu_fwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_fwd(k, t, i0, len, &silu);
}

static void silu_bwd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    cpu_unary_bwd(k, t, i0, len, &silu);
}

int cpu_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, gelu_fwd_chunk);
    return 0;
}

int cpu_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, gelu_bwd_chunk);
    return 0;
}

int cpu_silu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, silu_fwd_chunk);
    return 0;
}

int cpu_silu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, silu_bwd_chunk);
    return 0;
}

/* Gated units: element (r, f) of gate and up, separate [rows, F] or packed rows [up | gate]. */
static void glu_index(const struct kernel_call *k, int64_t r, int64_t f, size_t *gate, size_t *up)
{
    const int64_t F = k->dims[1];
    if (k->dims[2]) {
        *up = (size_t)(r * 2 * F + f);
        *gate = *up + (size_t)F;
    } else {
        *gate = *up = (size_t)(r * F + f);
    }
}

static float glu_act(const struct kernel_call *k, float g)
{
    return k->kernel == K_GEGLU_FWD || k->kernel == K_GEGLU_BWD ? oom_gelu(g, k->dims[3] != 0) : oom_silu(g);
}

static float glu_act_grad(const struct kernel_call *k, float g)
{
    return k->kernel == K_GEGLU_BWD ? oom_gelu_grad(g, k->dims[3] != 0) : oom_silu_grad(g);
}

static int glu_fwd(const struct kernel_call *k, void *const *t)
{
    for (int64_t r = 0; r < k->dims[0]; r++)
        for (int64_t f = 0; f < k->dims[1]; f++) {
            size_t gi, ui;
            glu_index(k, r, f, &gi, &ui);
            float y = glu_act(k, ld(t[0], k->dtype, gi)) * ld(t[1], k->dtype, ui);
            st(t[2], k->dtype, (size_t)(r * k->dims[1] + f), y);
        }
    return 0;
}

static int glu_bwd(const struct kernel_call *k, void *const *t)
{
    for (int64_t r = 0; r < k->dims[0]; r++)
        for (int64_t f = 0; f < k->dims[1]; f++) {
            size_t gi, ui;
            glu_index(k, r, f, &gi, &ui);
            float g = ld(t[0], k->dtype, gi), u = ld(t[1], k->dtype, ui);
            float dy = ld(t[2], k->dtype, (size_t)(r * k->dims[1] + f));
            st(t[3], k->dtype, gi, dy * u * glu_act_grad(k, g));
            st(t[4], k->dtype, ui, dy * glu_act(k, g));
        }
    return 0;
}

int cpu_geglu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_fwd(k, t);
}

int cpu_geglu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_bwd(k, t);
}

int cpu_swiglu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_fwd(k, t);
}

int cpu_swiglu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return glu_bwd(k, t);
}
