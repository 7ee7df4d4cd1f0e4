/* optim_extra.c: CPU optimizer steps beyond AdamW: SGD with momentum, AdamW with moments in the
 * parameter's (16-bit) dtype, and Adafactor (factored second moment, update clipping). */
#include "cpu/cpu_kernels_extra.h"
#include "cpu/tensor_io.h"

int cpu_sgd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const struct oom_sgd s = oom_sgd_setup(k->fparam, k->dims[1]);
    for (size_t i = 0; i < (size_t)k->dims[0]; i++) {
        float buf = oom_sgd_reads_buf(&s) ? ld(t[2], k->dtype, i) : 0.0f;
        float p = oom_sgd_elem(&s, ld(t[0], k->dtype, i), ld(t[1], k->dtype, i), &buf);
        if (s.momentum != 0.0f)
            st(t[2], k->dtype, i, buf);
        st(t[0], k->dtype, i, p);
    }
    return 0;
}

int cpu_adamw_t(const struct kernel_call *k, void *const *t, struct err *e)
{
    float eps = kernel_adamw_eps(k);
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
    const struct oom_adafactor a = oom_adafactor_setup(k->fparam, k->dims[2]);
    const size_t n = (size_t)(R * C);
    float *state = t[2], *u = cpu_scratch(n, "adafactor update", e);
    if (!u)
        return -1;
    for (size_t i = 0; i < n; i++)
        u[i] = oom_adafactor_sq(&a, ld(t[1], k->dtype, i));
    if (C > 1) { /* row means into state[0..R), column means into state[R..R+C) */
        float *rows = state, *cols = state + R;
        double rsum = 0.0;
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t c = 0; c < C; c++)
                s += u[r * C + c];
            rows[r] = oom_adafactor_ema(&a, rows[r], (float)(s / (double)C));
            rsum += rows[r];
        }
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < R; r++)
                s += u[r * C + c];
            cols[c] = oom_adafactor_ema(&a, cols[c], (float)(s / (double)R));
        }
        float rmean = (float)(rsum / (double)R);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                u[r * C + c] = oom_adafactor_update(ld(t[1], k->dtype, (size_t)(r * C + c)),
                                                    oom_adafactor_factored(rows[r], rmean, cols[c]));
    } else {
        for (size_t i = 0; i < n; i++) {
            state[i] = oom_adafactor_ema(&a, state[i], u[i]);
            u[i] = oom_adafactor_update(ld(t[1], k->dtype, i), state[i]);
        }
    }
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)u[i] * u[i];
    const float div = oom_adafactor_clip_div(&a, ss, n);
    for (size_t i = 0; i < n; i++)
        st(t[0], k->dtype, i, oom_adafactor_step(&a, ld(t[0], k->dtype, i), u[i], div));
    free(u);
    return 0;
}
