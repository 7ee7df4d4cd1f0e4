/* activation.c: CPU GELU, SiLU, their gated forms (GEGLU, SwiGLU) and dropout, forward and
 * backward, on the per-element math of elementwise.h. */
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_gelu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int approx = k->dims[1] != 0;
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[1], k->dtype, i, oom_gelu(ld(t[0], k->dtype, i), approx));
    return 0;
}

int cpu_gelu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int approx = k->dims[1] != 0;
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, ld(t[1], k->dtype, i) * oom_gelu_grad(ld(t[0], k->dtype, i), approx));
    return 0;
}

int cpu_silu_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[1], k->dtype, i, oom_silu(ld(t[0], k->dtype, i)));
    return 0;
}

int cpu_silu_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, ld(t[1], k->dtype, i) * oom_silu_grad(ld(t[0], k->dtype, i)));
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
