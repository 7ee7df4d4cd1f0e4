/* optim.c: CPU optimizer-side kernels: the AdamW step with fp32 moments, the 8-bit block-wise
 * AdamW step (moments as dynamic-map codes with a per-block absmax) and the EMA update. */
#include <math.h>

#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

static struct oom_adamw adamw_of(const struct kernel_call *k)
{
    float eps = kernel_adamw_eps(k);
    return oom_adamw_setup(k->fparam[0], k->fparam[1], k->fparam[2], eps, k->fparam[3], k->dims[1]);
}

int cpu_adamw(const struct kernel_call *k, void *const *t, struct err *e)
{
    const struct oom_adamw a = adamw_of(k);
    float *m = t[2], *v = t[3];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[0], k->dtype, i, oom_adamw_elem(&a, ld(t[0], k->dtype, i), ld(t[1], k->dtype, i), &m[i], &v[i]));
    return 0;
}

int cpu_adamw8(const struct kernel_call *k, void *const *t, struct err *e)
{
    const struct oom_adamw a = adamw_of(k);
    const size_t n = (size_t)k->dims[0], block = (size_t)k->dims[3];
    uint8_t *mq = t[2], *vq = t[3];
    float *m_absmax = t[4], *v_absmax = t[5];
    float smap[OOM_QMAP_SIZE], umap[OOM_QMAP_SIZE];
    oom_qmap_fill(1, smap);
    oom_qmap_fill(0, umap);
    float *m = cpu_scratch(2 * block, "adamw8 block", e), *v = m + block;
    if (!m)
        return -1;
    for (size_t b0 = 0, blk = 0; b0 < n; b0 += block, blk++) {
        size_t len = n - b0 < block ? n - b0 : block;
        float mmax = 0.0f, vmax = 0.0f;
        for (size_t i = 0; i < len; i++) {
            m[i] = smap[mq[b0 + i]] * m_absmax[blk];
            v[i] = umap[vq[b0 + i]] * v_absmax[blk];
            float p = oom_adamw_elem(&a, ld(t[0], k->dtype, b0 + i), ld(t[1], k->dtype, b0 + i), &m[i], &v[i]);
            st(t[0], k->dtype, b0 + i, p);
            mmax = fmaxf(mmax, fabsf(m[i]));
            vmax = fmaxf(vmax, v[i]);
        }
        m_absmax[blk] = mmax;
        v_absmax[blk] = vmax;
        for (size_t i = 0; i < len; i++) {
            mq[b0 + i] = oom_qmap_encode(smap, mmax > 0.0f ? m[i] / mmax : 0.0f);
            vq[b0 + i] = oom_qmap_encode(umap, vmax > 0.0f ? v[i] / vmax : 0.0f);
        }
    }
    free(m);
    return 0;
}

#define CHUNK 1024

int cpu_ema(const struct kernel_call *k, void *const *t, struct err *e)
{
    const size_t n = (size_t)k->dims[0], esize = dtype_size((enum dtype)k->dtype);
    const float decay = k->fparam[0];
    float pb[CHUNK], sb[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) { /* fp32 chunks keep the inner loop dtype-free */
        size_t len = n - i0 < CHUNK ? n - i0 : CHUNK;
        char *shadow = (char *)t[1] + i0 * esize;
        tensor_to_f32(pb, (const char *)t[0] + i0 * esize, k->dtype, len);
        tensor_to_f32(sb, shadow, k->dtype, len);
        for (size_t i = 0; i < len; i++)
            sb[i] = oom_ema_elem(sb[i], pb[i], decay);
        tensor_from_f32(shadow, k->dtype, sb, len);
    }
    return 0;
}
