/* optim.c: CPU optimizer-side kernels: the AdamW step with fp32 moments, the 8-bit block-wise
 * AdamW step (moments as dynamic-map codes with a per-block absmax) and the EMA update, as
 * vectorized loops over fp32 chunks (cpu_vec.h). */
#include <math.h>
#include <pthread.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

static struct oom_adamw adamw_of(const struct kernel_call *k)
{
    float eps = kernel_adamw_eps(k);
    return oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], eps, k->fparam[3], k->dims[1]);
}

/* p_out = the AdamW step of p; m and v in place. p_out may be p. */
CPU_BODY void adamw_loop_body(float *p_out, const float *p, const float *g, float *m, float *v, size_t n,
                         struct oom_adamw a)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &m[i], &v[i]);
}

CPU_MULTIVERSION(adamw_loop, (float *p_out, const float *p, const float *g, float *m, float *v, size_t n,
                              struct oom_adamw a),
                 (p_out, p, g, m, v, n, a))

static void adamw_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float pb[CPU_CHUNK], gb[CPU_CHUNK];
    const float *p = chunk_in(t[0], k->dtype, i0, len, pb), *g = chunk_in(t[1], k->dtype, i0, len, gb);
    float *p_out = chunk_out(t[0], k->dtype, i0, pb);
    adamw_loop(p_out, p, g, (float *)t[2] + i0, (float *)t[3] + i0, len, adamw_of(k));
    chunk_put(t[0], k->dtype, i0, len, p_out);
}

int cpu_adamw(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, adamw_chunk);
    return 0;
}

/* The dynamic maps, signed (m) and unsigned (v), built once. */
static float qmaps[2][OOM_QMAP_SIZE];
static pthread_once_t qmaps_once = PTHREAD_ONCE_INIT;

static void qmaps_fill(void)
{
    oom_qmap_fill(1, qmaps[0]);
    oom_qmap_fill(0, qmaps[1]);
}

/* Decodes m and v of n elements, applies AdamW (p_out may be p) and raises *mmax, *vmax to the
 * new moments' absmax. */
CPU_BODY void adamw8_step_body(float *p_out, const float *p, const float *g, const uint8_t *mq, const uint8_t *vq,
                               float mscale, float vscale, size_t n, struct oom_adamw a, float *mmax, float *vmax)
{
    float mx = *mmax, vx = *vmax;
#pragma omp simd reduction(max : mx, vx)
    for (size_t i = 0; i < n; i++) {
        float m = qmaps[0][mq[i]] * mscale, v = qmaps[1][vq[i]] * vscale;
        p_out[i] = oom_adamw_elem(&a, p[i], g[i], &m, &v);
        mx = fmaxf(mx, fabsf(m));
        vx = fmaxf(vx, v);
    }
    *mmax = mx;
    *vmax = vx;
}

/* Recomputes the same new moments from the old codes and encodes them against the new absmax. */
CPU_BODY void adamw8_encode_body(uint8_t *mq, uint8_t *vq, const float *g, float mscale, float vscale, size_t n,
                                 struct oom_adamw a, float mmax, float vmax)
{
    for (size_t i = 0; i < n; i++) {
        float m = qmaps[0][mq[i]] * mscale, v = qmaps[1][vq[i]] * vscale;
        oom_adamw_elem(&a, 0.0f, g[i], &m, &v);
        mq[i] = oom_qmap_encode(qmaps[0], mmax > 0.0f ? m / mmax : 0.0f);
        vq[i] = oom_qmap_encode(qmaps[1], vmax > 0.0f ? v / vmax : 0.0f);
    }
}

CPU_MULTIVERSION(adamw8_step,
                 (float *p_out, const float *p, const float *g, const uint8_t *mq, const uint8_t *vq, float mscale,
                  float vscale, size_t n, struct oom_adamw a, float *mmax, float *vmax),
                 (p_out, p, g, mq, vq, mscale, vscale, n, a, mmax, vmax))
CPU_MULTIVERSION(adamw8_encode,
                 (uint8_t *mq, uint8_t *vq, const float *g, float mscale, float vscale, size_t n, struct oom_adamw a,
                  float mmax, float vmax),
                 (mq, vq, g, mscale, vscale, n, a, mmax, vmax))

/* One block from b0: the step in fp32 pieces, then (the new absmax known) the codes. */
static void adamw8_block(const struct kernel_call *k, void *const *t, size_t b0, size_t len)
{
    const struct oom_adamw a = adamw_of(k);
    const size_t blk = b0 / (size_t)k->dims[3];
    uint8_t *mq = (uint8_t *)t[2] + b0, *vq = (uint8_t *)t[3] + b0;
    float *m_absmax = t[4], *v_absmax = t[5];
    const float mscale = m_absmax[blk], vscale = v_absmax[blk];
    float mmax = 0.0f, vmax = 0.0f, pb[CPU_CHUNK], gb[CPU_CHUNK];
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        const float *p = chunk_in(t[0], k->dtype, b0 + i0, n, pb), *g = chunk_in(t[1], k->dtype, b0 + i0, n, gb);
        float *p_out = chunk_out(t[0], k->dtype, b0 + i0, pb);
        adamw8_step(p_out, p, g, mq + i0, vq + i0, mscale, vscale, n, a, &mmax, &vmax);
        chunk_put(t[0], k->dtype, b0 + i0, n, p_out);
    }
    for (size_t i0 = 0; i0 < len; i0 += CPU_CHUNK) {
        size_t n = len - i0 < CPU_CHUNK ? len - i0 : CPU_CHUNK;
        adamw8_encode(mq + i0, vq + i0, chunk_in(t[1], k->dtype, b0 + i0, n, gb), mscale, vscale, n, a, mmax, vmax);
    }
    m_absmax[blk] = mmax;
    v_absmax[blk] = vmax;
}

int cpu_adamw8(const struct kernel_call *k, void *const *t, struct err *e)
{
    pthread_once(&qmaps_once, qmaps_fill);
    cpu_for_chunks(k, t, (size_t)k->dims[0], (size_t)k->dims[3], adamw8_block);
    return 0;
}

CPU_BODY void ema_body(float *shadow_out, const float *shadow, const float *param, size_t n, float decay)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        shadow_out[i] = oom_ema_elem(shadow[i], param[i], decay);
}

CPU_MULTIVERSION(ema, (float *shadow_out, const float *shadow, const float *param, size_t n, float decay),
                 (shadow_out, shadow, param, n, decay))

static void ema_chunk(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    float pb[CPU_CHUNK], sb[CPU_CHUNK];
    const float *param = chunk_in(t[0], k->dtype, i0, len, pb), *shadow = chunk_in(t[1], k->dtype, i0, len, sb);
    float *out = chunk_out(t[1], k->dtype, i0, sb);
    ema(out, shadow, param, len, k->fparam[0]);
    chunk_put(t[1], k->dtype, i0, len, out);
}

int cpu_ema(const struct kernel_call *k, void *const *t, struct err *e)
{
    cpu_for_chunks(k, t, (size_t)k->dims[0], CPU_CHUNK, ema_chunk);
    return 0;
}
