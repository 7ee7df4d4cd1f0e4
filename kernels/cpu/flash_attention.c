/* flash_attention.c: CPU fused memory-efficient attention. The forward streams over keys in
 * blocks with an online softmax (running max and sum), never holding more than one block of
 * scores, and saves the log-sum-exp; the backward recomputes each probability from it. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

#define KEY_BLOCK 64

static float dot(const float *x, const float *y, int64_t n)
{
    float s = 0.0f;
    for (int64_t d = 0; d < n; d++)
        s += x[d] * y[d];
    return s;
}

static size_t row_index(const struct attn_layout *a, int64_t b, int64_t h, int64_t i)
{
    return (size_t)((b * a->H + h) * a->Tq + i);
}

int cpu_flash_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    float *acc = cpu_scratch((size_t)a->D, "flash acc", e), s[KEY_BLOCK];
    if (!acc) {
        attn_free(&f);
        return -1;
    }
    float *lse = t[3];
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            for (int64_t i = 0; i < a->Tq; i++) {
                const float *q = f.q + attn_q_at(a, b, i, h);
                int64_t nk = attn_keys(a, i);
                float m = -INFINITY, l = 0.0f;
                memset(acc, 0, (size_t)a->D * sizeof *acc);
                for (int64_t j0 = 0; j0 < nk; j0 += KEY_BLOCK) {
                    int64_t n = nk - j0 < KEY_BLOCK ? nk - j0 : KEY_BLOCK;
                    float bm = -INFINITY;
                    for (int64_t j = 0; j < n; j++) {
                        s[j] = a->scale * dot(q, f.kv + attn_k_at(a, b, j0 + j, g), a->D);
                        bm = fmaxf(bm, s[j]);
                    }
                    float m_new = fmaxf(m, bm), corr = expf(m - m_new);
                    l *= corr;
                    for (int64_t d = 0; d < a->D; d++)
                        acc[d] *= corr;
                    for (int64_t j = 0; j < n; j++) {
                        float p = expf(s[j] - m_new);
                        const float *v = f.kv + attn_v_at(a, b, j0 + j, g);
                        l += p;
                        for (int64_t d = 0; d < a->D; d++)
                            acc[d] += p * v[d];
                    }
                    m = m_new;
                }
                for (int64_t d = 0; d < a->D; d++)
                    st(t[2], k->dtype, attn_o_at(a, b, i, h) + d, l > 0.0f ? acc[d] / l : 0.0f);
                lse[row_index(a, b, h, i)] = l > 0.0f ? m + logf(l) : -INFINITY;
            }
        }
    free(acc);
    attn_free(&f);
    return 0;
}

int cpu_flash_bwd_prep(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    const float *lse = t[2];
    float *stats = t[3];
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++)
            for (int64_t i = 0; i < a.Tq; i++) {
                size_t r = row_index(&a, b, h, i);
                int64_t o = attn_o_at(&a, b, i, h);
                float sum = 0.0f;
                for (int64_t d = 0; d < a.D; d++)
                    sum += ld(t[0], k->dtype, (size_t)(o + d)) * ld(t[1], k->dtype, (size_t)(o + d));
                stats[2 * r] = lse[r];
                stats[2 * r + 1] = sum;
            }
    return 0;
}

int cpu_flash_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    const float *stats = t[2];
    size_t nkv = kernel_get(k->kernel)->elems(k, 1);
    float *dkv = cpu_scratch(nkv, "flash dkv", e), *dq = dkv ? cpu_scratch((size_t)a->D, "flash dq", e) : NULL;
    float *dout = dq ? cpu_scratch((size_t)a->D, "flash do", e) : NULL;
    if (!dout) {
        free(dkv);
        free(dq);
        attn_free(&f);
        return -1;
    }
    memset(dkv, 0, nkv * sizeof *dkv);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            for (int64_t i = 0; i < a->Tq; i++) {
                const float *q = f.q + attn_q_at(a, b, i, h);
                size_t r = row_index(a, b, h, i);
                float lse = stats[2 * r], delta = stats[2 * r + 1];
                int64_t nk = attn_keys(a, i);
                for (int64_t d = 0; d < a->D; d++)
                    dout[d] = ld(t[3], k->dtype, (size_t)(attn_o_at(a, b, i, h) + d));
                memset(dq, 0, (size_t)a->D * sizeof *dq);
                for (int64_t j = 0; j < nk; j++) {
                    const float *kj = f.kv + attn_k_at(a, b, j, g), *vj = f.kv + attn_v_at(a, b, j, g);
                    float p = expf(a->scale * dot(q, kj, a->D) - lse);
                    float ds = a->scale * p * (dot(dout, vj, a->D) - delta);
                    float *dk = dkv + attn_k_at(a, b, j, g), *dv = dkv + attn_v_at(a, b, j, g);
                    for (int64_t d = 0; d < a->D; d++) {
                        dq[d] += ds * kj[d];
                        dk[d] += ds * q[d];
                        dv[d] += p * dout[d];
                    }
                }
                for (int64_t d = 0; d < a->D; d++)
                    st(t[4], k->dtype, (size_t)(attn_q_at(a, b, i, h) + d), dq[d]);
            }
        }
    attn_store_dkv(a, t[5], k->dtype, dkv);
    free(dkv);
    free(dq);
    free(dout);
    attn_free(&f);
    return 0;
}
