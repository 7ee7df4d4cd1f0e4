/* attention.c: CPU unfused attention: forward materialises the probabilities P (saved for the
 * backward), backward computes dq, dk, dv from P as PyTorch's math path does. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int attn_load(struct attn_f32 *f, const struct kernel_call *k, void *const *t, int iq, int ikv, struct err *e)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    size_t nq = kd->elems(k, iq), nkv = kd->elems(k, ikv);
    f->a = attn_layout_of(k->dims, k->fparam[0]);
    f->q = cpu_scratch(nq, "attention q", e);
    f->kv = f->q ? cpu_scratch(nkv, "attention kv", e) : NULL;
    if (!f->kv) {
        free(f->q);
        return -1;
    }
    tensor_to_f32(f->q, t[iq], k->dtype, nq);
    tensor_to_f32(f->kv, t[ikv], k->dtype, nkv);
    return 0;
}

void attn_free(struct attn_f32 *f)
{
    free(f->q);
    free(f->kv);
}

static float dot(const float *x, const float *y, int64_t n)
{
    float s = 0.0f;
    for (int64_t d = 0; d < n; d++)
        s += x[d] * y[d];
    return s;
}

int cpu_attn_fwd(const struct kernel_call *k, void *const *t, struct err *e)
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
                int64_t nk = attn_keys(a, i);
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    row[j] = a->scale * dot(q, f.kv + attn_k_at(a, b, j, g), a->D);
                    mx = fmaxf(mx, row[j]);
                }
                for (int64_t j = 0; j < nk; j++)
                    sum += row[j] = expf(row[j] - mx);
                memset(acc, 0, (size_t)a->D * sizeof *acc);
                size_t prow = (size_t)(((b * a->H + h) * a->Tq + i) * a->Tk);
                for (int64_t j = 0; j < a->Tk; j++) {
                    float p = j < nk ? row[j] / sum : 0.0f;
                    st(t[2], k->dtype, prow + j, p);
                    const float *v = f.kv + attn_v_at(a, b, j, g);
                    for (int64_t d = 0; d < a->D && j < nk; d++)
                        acc[d] += p * v[d];
                }
                for (int64_t d = 0; d < a->D; d++)
                    st(t[3], k->dtype, attn_o_at(a, b, i, h) + d, acc[d]);
            }
        }
    free(row);
    free(acc);
    attn_free(&f);
    return 0;
}

int cpu_attn_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    size_t nkv = kernel_get(k->kernel)->elems(k, 1);
    float *dkv = cpu_scratch(nkv, "attention dkv", e), *ds = dkv ? cpu_scratch((size_t)a->Tk, "attention ds", e) : NULL;
    float *dq = ds ? cpu_scratch((size_t)a->D, "attention dq", e) : NULL;
    float *dout = dq ? cpu_scratch((size_t)a->D, "attention do", e) : NULL;
    if (!dout) {
        free(dkv);
        free(ds);
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
                size_t prow = (size_t)(((b * a->H + h) * a->Tq + i) * a->Tk);
                int64_t nk = attn_keys(a, i);
                for (int64_t d = 0; d < a->D; d++)
                    dout[d] = ld(t[3], k->dtype, attn_o_at(a, b, i, h) + d);
                float rowdot = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    float p = ld(t[2], k->dtype, prow + j);
                    ds[j] = dot(dout, f.kv + attn_v_at(a, b, j, g), a->D); /* dP */
                    rowdot += p * ds[j];
                    float *dv = dkv + attn_v_at(a, b, j, g);
                    for (int64_t d = 0; d < a->D; d++)
                        dv[d] += p * dout[d];
                }
                memset(dq, 0, (size_t)a->D * sizeof *dq);
                for (int64_t j = 0; j < nk; j++) {
                    float s = a->scale * ld(t[2], k->dtype, prow + j) * (ds[j] - rowdot);
                    const float *kj = f.kv + attn_k_at(a, b, j, g);
                    float *dk = dkv + attn_k_at(a, b, j, g);
                    for (int64_t d = 0; d < a->D; d++) {
                        dq[d] += s * kj[d];
                        dk[d] += s * q[d];
                    }
                }
                for (int64_t d = 0; d < a->D; d++)
                    st(t[4], k->dtype, attn_q_at(a, b, i, h) + d, dq[d]);
            }
        }
    attn_store_dkv(a, t[5], k->dtype, dkv);
    free(dkv);
    free(ds);
    free(dq);
    free(dout);
    attn_free(&f);
    return 0;
}

void attn_store_dkv(const struct attn_layout *a, void *dst, int dt, const float *dkv)
{
    /* packed: only the k and v columns of each row, so dq (same tensor) is left intact */
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t j = 0; j < a->Tk; j++)
            for (int64_t g = 0; g < a->Hkv; g++)
                for (int64_t d = 0; d < a->D; d++) {
                    int64_t ki = attn_k_at(a, b, j, g) + d, vi = attn_v_at(a, b, j, g) + d;
                    st(dst, dt, (size_t)ki, dkv[ki]);
                    st(dst, dt, (size_t)vi, dkv[vi]);
                }
}
