/* optim_extra.c: CPU optimizer steps beyond AdamW: SGD with momentum, AdamW with moments in the
 * parameter's (16-bit) dtype (both vectorized loops over fp32 chunks, cpu_vec.h), and Adafactor
 * (factored second moment, update clipping). */
#include <string.h>

#include "cpu/cpu_kernels_extra.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

/* p_out = the SGD step of p; buf_out = the new momentum buffer (scratch without momentum).
 * Outputs may alias their inputs. */
CPU_BODY void sgd_loop_body(float *p_out, float *buf_out, const float *p, const float *g, const float *buf, size_t n,
                            struct oom_sgd s)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float b = buf[i];
        p_out[i] = oom_sgd_elem(&s, p[i], g[i], &b);
        buf_out[i] = b;
    }
}

CPU_MULTIVERSION(sgd_loop,
                 (float *p_out, float *buf_out, const float *p, const float *g, const float *buf, size_t n,
                  struct oom_sgd s),
                 (p_out, buf_out, p, g, buf, n, s))

static void sgd_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const struct oom_sgd s = oom_sgd_setup(k->fparam, k->dims[1]);
    float pb[CPU_CHUNK], gb[CPU_CHUNK], bb[CPU_CHUNK];
    const float *p = chunk_in(t[0], k->dtype, i0, len, pb), *g = chunk_in(t[1], k->dtype, i0, len, gb), *buf = bb;
    float *p_out = chunk_out(t[0], k->dtype, i0, pb), *buf_out = bb;
    if (oom_sgd_reads_buf(&s))
        buf = chunk_in(t[2], k->dtype, i0, len, bb);
    else
        memset(bb, 0, len * sizeof *bb);
    if (s.momentum != 0.0f)
        buf_out = chunk_out(t[2], k->dtype, i0, bb);
    sgd_loop(p_out, buf_out, p, g, buf, len, s);
    chunk_put(t[0], k->dtype, i0, len, p_out);
    if (s.momentum != 0.0f)
        chunk_put(t[2], k->dtype, i0, len, buf_out);
}

int cpu_sgd(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, sgd_chunk);
    return 0;
}

/* AdamW with m and v read from and written to (possibly the same) fp32 chunks. */
CPU_BODY void adamw_t_loop_body(float *p_out, float *m_out, float *v_out, const float *p, const float *g,
                                const float *m, const float *v, size_t n, struct oom_adamw a)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float mi = m[i], vi = v[i];
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &mi, &vi);
        m_out[i] = mi;
        v_out[i] = vi;
    }
}

CPU_MULTIVERSION(adamw_t_loop,
                 (float *p_out, float *m_out, float *v_out, const float *p, const float *g, const float *m,
                  const float *v, size_t n, struct oom_adamw a),
                 (p_out, m_out, v_out, p, g, m, v, n, a))

static void adamw_t_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const struct oom_adamw a =
        oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], kernel_adamw_eps(k), k->fparam[3], k->dims[1]);
    const int dt = k->dtype;
    float pb[CPU_CHUNK], gb[CPU_CHUNK], mb[CPU_CHUNK], vb[CPU_CHUNK];
    const float *p = chunk_in(t[0], dt, i0, len, pb), *g = chunk_in(t[1], dt, i0, len, gb);
    const float *m = chunk_in(t[2], dt, i0, len, mb), *v = chunk_in(t[3], dt, i0, len, vb);
    float *p_out = chunk_out(t[0], dt, i0, pb), *m_out = chunk_out(t[2], dt, i0, mb), *v_out = chunk_out(t[3], dt, i0, vb);
    adamw_t_loop(p_out, m_out, v_out, p, g, m, v, len, a);
    chunk_put(t[0], dt, i0, len, p_out);
    chunk_put(t[2], dt, i0, len, m_out);
    chunk_put(t[3], dt, i0, len, v_out);
}

int cpu_adamw_t(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, adamw_t_chunk);
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
