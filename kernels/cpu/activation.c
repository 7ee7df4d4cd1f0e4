/* activation.c: CPU GELU, SiLU, their gated forms (GEGLU, SwiGLU) and dropout, forward and
 * backward, on the per-element math of elementwise.h. */
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

enum unary { U_GELU_TANH, U_GELU_ERF, U_SILU };

#define CHUNK 1024

/* The unary op of a call: GELU's dims[1] picks tanh or erf. */
static enum unary unary_of(const struct kernel_call *k)
{
    if (k->kernel == K_SILU_FWD || k->kernel == K_SILU_BWD)
        return U_SILU;
    return k->dims[1] ? U_GELU_TANH : U_GELU_ERF;
}

/* y = f(x) (forward) or dx = dy * f'(x) (backward, dy given), on fp32 chunks so that each inner
 * loop is one op over a float array, whatever the dtype. */
static void map_unary(const struct kernel_call *k, const void *x, const void *dy, void *out)
{
    const enum unary op = unary_of(k);
    const size_t n = (size_t)k->dims[0], esize = dtype_size((enum dtype)k->dtype);
    float xb[CHUNK], gb[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t len = n - i0 < CHUNK ? n - i0 : CHUNK;
        tensor_to_f32(xb, (const char *)x + i0 * esize, k->dtype, len);
        if (dy) {
            tensor_to_f32(gb, (const char *)dy + i0 * esize, k->dtype, len);
            for (size_t i = 0; i < len; i++)
                xb[i] = gb[i] * (op == U_SILU       ? oom_silu_grad(xb[i])
                                 : op == U_GELU_TANH ? oom_gelu_tanh_grad(xb[i])
                                                     : oom_gelu_erf_grad(xb[i]));
        } else if (op == U_SILU) {
            for (size_t i = 0; i < len; i++)
                xb[i] = oom_silu(xb[i]);
        } else if (op == U_GELU_TANH) {
            for (size_t i = 0; i < len; i++)
                xb[i] = oom_gelu_tanh(xb[i]);
        } else {
            for (size_t i = 0; i < len; i++)
                xb[i] = oom_gelu_erf(xb[i]);
        }
        tensor_from_f32((char *)out + i0 * esize, k->dtype, xb, len);
    }
}

int cpu_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    map_unary(k, t[0], NULL, t[1]);
    return 0;
}

int cpu_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    map_unary(k, t[0], t[1], t[2]);
    return 0;
}

int cpu_silu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    map_unary(k, t[0], NULL, t[1]);
    return 0;
}

int cpu_silu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    map_unary(k, t[0], t[1], t[2]);
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

int cpu_dropout_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const float p = k->fparam[0], keep_scale = 1.0f / (1.0f - p);
    const uint64_t seed = (uint64_t)k->dims[1];
    uint8_t *mask = t[2];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        mask[i] = (uint8_t)oom_dropout_keep(seed, i, p);
        st(t[1], k->dtype, i, mask[i] ? ld(t[0], k->dtype, i) * keep_scale : 0.0f);
    }
    return 0;
}

int cpu_dropout_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const float keep_scale = 1.0f / (1.0f - k->fparam[0]);
    const uint8_t *mask = t[1];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, mask[i] ? ld(t[0], k->dtype, i) * keep_scale : 0.0f);
    return 0;
}
