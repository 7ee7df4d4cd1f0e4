/* optim_extra.c: CPU optimizer steps beyond AdamW: SGD with momentum, AdamW with moments in the
 * parameter's (16-bit) dtype, and Adafactor (factored second moment, update clipping). */
#include <math.h>
#include <string.h>

#include "cpu/cpu_kernels_extra.h"
#include "cpu/tensor_io.h"

int cpu_sgd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const float lr = k->fparam[0], momentum = k->fparam[1], dampening = k->fparam[2], wd = k->fparam[3];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float p = ld(t[0], k->dtype, i), g = ld(t[1], k->dtype, i) + wd * p;
        if (momentum != 0.0f) {
            float buf = k->dims[1] <= 1 ? g : momentum * ld(t[2], k->dtype, i) + (1.0f - dampening) * g;
            st(t[2], k->dtype, i, buf);
            g = buf;
        }
        st(t[0], k->dtype, i, p - lr * g);
    }
    return 0;
}

int cpu_adamw_t(const struct kernel_call *k, void *const *t, struct err *e)
{
    float eps = k->dims[2] ? kernel_bits_f32(k->dims[2]) : 1e-8f;
    const struct oom_adamw a = oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], eps, k->fparam[3], k->dims[1]);
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float m = ld(t[2], k->dtype, i), v = ld(t[3], k->dtype, i);
        st(t[0], k->dtype, i, oom_adamw_elem(&a, ld(t[0], k->dtype, i), ld(t[1], k->dtype, i), &m, &v));
        st(t[2], k->dtype, i, m);
        st(t[3], k->dtype, i, v);
    }
    return 0;
}

int cpu_adafactor(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t R = k->dims[0], C = k->dims[1];
    const float lr = k->fparam[0] != 0.0f ? k->fparam[0] : 1e-3f, eps1 = k->fparam[1] != 0.0f ? k->fparam[1] : 1e-30f,
                clip = k->fparam[2] != 0.0f ? k->fparam[2] : 1.0f,
                decay = k->fparam[3] != 0.0f ? k->fparam[3] : -0.8f;
    const float beta2 = 1.0f - powf((float)(k->dims[2] > 0 ? k->dims[2] : 1), decay);
    const size_t n = (size_t)(R * C);
    float *state = t[2], *u = cpu_scratch(n, "adafactor update", e);
    if (!u)
        return -1;
    for (size_t i = 0; i < n; i++) {
        float g = ld(t[1], k->dtype, i);
        u[i] = g * g + eps1;
    }
    if (C > 1) { /* row means into state[0..R), column means into state[R..R+C) */
        float *rows = state, *cols = state + R;
        double rsum = 0.0;
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t c = 0; c < C; c++)
                s += u[r * C + c];
            rows[r] = beta2 * rows[r] + (1.0f - beta2) * (float)(s / (double)C);
            rsum += rows[r];
        }
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++)
                s += u[r * C + c];
            cols[c] = beta2 * cols[c] + (1.0f - beta2) * (float)(s / (double)R);
        }
        float rmean = (float)(rsum / (double)R);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                u[r * C + c] = ld(t[1], k->dtype, (size_t)(r * C + c)) / sqrtf(rows[r] / rmean * cols[c]);
    } else {
        for (size_t i = 0; i < n; i++) {
            state[i] = beta2 * state[i] + (1.0f - beta2) * u[i];
            u[i] = ld(t[1], k->dtype, i) / sqrtf(state[i]);
        }
    }
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)u[i] * u[i];
    float rms = (float)sqrt(ss / (double)n), div = rms / clip > 1.0f ? rms / clip : 1.0f;
    for (size_t i = 0; i < n; i++)
        st(t[0], k->dtype, i, ld(t[0], k->dtype, i) - lr * u[i] / div);
    free(u);
    return 0;
}
