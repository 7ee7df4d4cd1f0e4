/* attention_extra.c: CPU unfused attention with an additive score bias (T5's relative position
 * bias), and the gradient of the scores (= of that bias) from the saved probabilities. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/cpu_kernels_extra.h"
#include "cpu/tensor_io.h"

static float dot(const float *x, const float *y, int64_t n)
{
    float s = 0.0f;
    for (int64_t d = 0; d < n; d++)
        s += x[d] * y[d];
    return s;
}

int cpu_attn_bias_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    float *row = cpu_scratch((size_t)a->Tk, "attention row", e), *acc = row ? cpu_scratch((size_t)a->D, "attention acc", e) : NULL;
    if (!acc) {
        free(row);
        attn_free(&f);
        return -1;
    }
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            for (int64_t i = 0; i < a->Tq; i++) {
                const float *q = f.q + attn_q_at(a, b, i, h);
                size_t prow = (size_t)(((b * a->H + h) * a->Tq + i) * a->Tk);
                int64_t nk = attn_keys(a, i);
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    row[j] = a->scale * dot(q, f.kv + attn_k_at(a, b, j, g), a->D) + ld(t[2], k->dtype, prow + j);
                    mx = fmaxf(mx, row[j]);
                }
                for (int64_t j = 0; j < nk; j++)
                    sum += row[j] = expf(row[j] - mx);
                memset(acc, 0, (size_t)a->D * sizeof *acc);
                for (int64_t j = 0; j < a->Tk; j++) {
                    float p = j < nk ? row[j] / sum : 0.0f;
                    st(t[3], k->dtype, prow + j, p);
                    const float *v = f.kv + attn_v_at(a, b, j, g);
                    for (int64_t d = 0; d < a->D && j < nk; d++)
                        acc[d] += p * v[d];
                }
                for (int64_t d = 0; d < a->D; d++)
                    st(t[4], k->dtype, attn_o_at(a, b, i, h) + d, acc[d]);
            }
        }
    free(row);
    free(acc);
    attn_free(&f);
    return 0;
}

int cpu_attn_dscores(const struct kernel_call *k, void *const *t, struct err *e)
{
    const struct attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    size_t nkv = kernel_get(k->kernel)->elems(k, 0);
    float *kv = cpu_scratch(nkv, "attention kv", e), *dp = kv ? cpu_scratch((size_t)a.Tk, "attention dp", e) : NULL;
    float *dout = dp ? cpu_scratch((size_t)a.D, "attention do", e) : NULL;
    if (!dout) {
        free(kv);
        free(dp);
        return -1;
    }
    tensor_to_f32(kv, t[0], k->dtype, nkv);
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++) {
            int64_t g = h / a.group;
            for (int64_t i = 0; i < a.Tq; i++) {
                size_t prow = (size_t)(((b * a.H + h) * a.Tq + i) * a.Tk);
                int64_t nk = attn_keys(&a, i);
                for (int64_t d = 0; d < a.D; d++)
                    dout[d] = ld(t[2], k->dtype, attn_o_at(&a, b, i, h) + d);
                float rowdot = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    dp[j] = dot(dout, kv + attn_v_at(&a, b, j, g), a.D);
                    rowdot += ld(t[1], k->dtype, prow + j) * dp[j];
                }
                for (int64_t j = 0; j < a.Tk; j++)
                    st(t[3], k->dtype, prow + j, j < nk ? ld(t[1], k->dtype, prow + j) * (dp[j] - rowdot) : 0.0f);
            }
        }
    free(kv);
    free(dp);
    free(dout);
    return 0;
}
