/* attention.c: CPU unfused attention on cblas_sgemm: the forward materialises the probabilities P
 * (saved for the backward), the backward computes dq, dk, dv from P as PyTorch's math path does;
 * attention with an additive score bias (T5's relative position bias) and the gradient of the
 * scores (= of that bias) from the saved probabilities. Also the fp32 loading helpers this file and
 * flash_attention.c share. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

const float *attn_view(const void *src, int dt, size_t n, const char *what, struct err *e)
{
    if (dt == DT_F32)
        return src;
    float *f = cpu_scratch(n, what, e);
    if (f)
        tensor_to_f32(f, src, dt, n);
    return f;
}

const float *attn_view_into(float *buf, const void *src, int dt, size_t at, size_t n)
{
    if (dt == DT_F32)
        return (const float *)src + at;
    tensor_to_f32(buf, (const char *)src + at * dtype_size((enum dtype)dt), dt, n);
    return buf;
}

void attn_unview(const float *view, const void *src)
{
    if (view != src)
        free((float *)view);
}

int attn_load(struct attn_f32 *f, const struct kernel_call *k, void *const *t, int iq, int ikv, struct err *e)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    f->a = attn_layout_of(k->dims, k->fparam[0]);
    f->q = attn_view(t[iq], k->dtype, kd->elems(k, iq), "attention q", e);
    f->kv = f->q ? attn_view(t[ikv], k->dtype, kd->elems(k, ikv), "attention kv", e) : NULL;
    if (!f->kv) {
        if (f->q)
            attn_unview(f->q, t[iq]);
        return -1;
    }
    return 0;
}

void attn_free(struct attn_f32 *f, void *const *t, int iq, int ikv)
{
    attn_unview(f->q, t[iq]);
    attn_unview(f->kv, t[ikv]);
}

void attn_store(void *dst, int dt, size_t i, const float *src, size_t n)
{
    tensor_from_f32((char *)dst + i * dtype_size((enum dtype)dt), dt, src, n);
}

/* Row i of a Tq x Tk score block starting at query row i0: mask keys past attn_keys (-inf). */
void attn_mask_rows(const struct attn_layout *a, float *s, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    if (!a->causal)
        return;
    for (int64_t r = 0; r < rows; r++) {
        int64_t first = attn_keys(a, i0 + r) - j0;
        for (int64_t j = first > 0 ? first : 0; j < cols; j++)
            s[r * ld + j] = -INFINITY;
    }
}

/* Per (b, h): S = scale Q K^T (one GEMM), masked row softmax into P (saved), O = P V (one GEMM). */
int cpu_attn_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (blas_load(e) < 0 || attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    float *s = cpu_scratch((size_t)(a->Tq * a->Tk), "attention scores", e);
    float *o = s ? cpu_scratch((size_t)(a->Tq * a->D), "attention output", e) : NULL;
    if (!o) {
        free(s);
        attn_free(&f, t, 0, 1);
        return -1;
    }
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->Tq, (int)a->Tk, (int)a->D, a->scale,
                        f.q + attn_q_at(a, b, 0, h), (int)a->q_row, f.kv + attn_k_at(a, b, 0, g), (int)a->kv_row, 0.0f,
                        s, (int)a->Tk);
            attn_mask_rows(a, s, a->Tk, 0, a->Tq, 0, a->Tk);
            for (int64_t i = 0; i < a->Tq; i++) {
                float *row = s + i * a->Tk, mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < a->Tk; j++)
                    mx = fmaxf(mx, row[j]);
                for (int64_t j = 0; j < a->Tk; j++)
                    sum += row[j] = mx == -INFINITY ? 0.0f : expf(row[j] - mx);
                size_t prow = (size_t)(((b * a->H + h) * a->Tq + i) * a->Tk);
                for (int64_t j = 0; j < a->Tk; j++) {
                    row[j] = sum > 0.0f ? row[j] / sum : 0.0f;
                    st(t[2], k->dtype, prow + (size_t)j, row[j]);
                }
            }
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a->Tq, (int)a->D, (int)a->Tk, 1.0f, s,
                        (int)a->Tk, f.kv + attn_v_at(a, b, 0, g), (int)a->kv_row, 0.0f, o, (int)a->D);
            for (int64_t i = 0; i < a->Tq; i++)
                for (int64_t d = 0; d < a->D; d++)
                    st(t[3], k->dtype, (size_t)(attn_o_at(a, b, i, h) + d), o[i * a->D + d]);
        }
    free(s);
    free(o);
    attn_free(&f, t, 0, 1);
    return 0;
}

/* Per (b, h), as PyTorch's math path: dV += P^T dO, dP = dO V^T, dS = scale P (dP - rowsum(P dP)),
 * dQ = dS K, dK += dS^T Q (the += gathers the query heads of a key/value head). */
int cpu_attn_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (blas_load(e) < 0 || attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    const int64_t o_row = a->H * a->D;
    size_t nkv = kernel_get(k->kernel)->elems(k, 1), nblk = (size_t)(a->Tq * a->Tk);
    float *dkv = cpu_scratch(nkv, "attention dkv", e), *p = dkv ? cpu_scratch(nblk, "attention P", e) : NULL;
    float *ds = p ? cpu_scratch(nblk, "attention dS", e) : NULL;
    float *dq = ds ? cpu_scratch((size_t)(a->Tq * a->D), "attention dq", e) : NULL;
    const float *dout = dq ? attn_view(t[3], k->dtype, kernel_get(k->kernel)->elems(k, 3), "attention do", e) : NULL;
    if (!dout) {
        free(dkv);
        free(p);
        free(ds);
        free(dq);
        attn_free(&f, t, 0, 1);
        return -1;
    }
    memset(dkv, 0, nkv * sizeof *dkv);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            const float *q = f.q + attn_q_at(a, b, 0, h), *kk = f.kv + attn_k_at(a, b, 0, g);
            const float *v = f.kv + attn_v_at(a, b, 0, g), *dob = dout + attn_o_at(a, b, 0, h);
            tensor_to_f32(p, (const char *)t[2] + ((b * a->H + h) * nblk) * dtype_size((enum dtype)k->dtype),
                          k->dtype, nblk);
            blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)a->Tk, (int)a->D, (int)a->Tq, 1.0f, p, (int)a->Tk,
                        dob, (int)o_row, 1.0f, dkv + attn_v_at(a, b, 0, g), (int)a->kv_row);
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->Tq, (int)a->Tk, (int)a->D, 1.0f, dob,
                        (int)o_row, v, (int)a->kv_row, 0.0f, ds, (int)a->Tk);
            for (int64_t i = 0; i < a->Tq; i++) {
                float *pr = p + i * a->Tk, *dr = ds + i * a->Tk, rowdot = 0.0f;
                for (int64_t j = 0; j < a->Tk; j++)
                    rowdot += pr[j] * dr[j];
                for (int64_t j = 0; j < a->Tk; j++)
                    dr[j] = a->scale * pr[j] * (dr[j] - rowdot);
            }
            blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a->Tq, (int)a->D, (int)a->Tk, 1.0f, ds,
                        (int)a->Tk, kk, (int)a->kv_row, 0.0f, dq, (int)a->D);
            blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)a->Tk, (int)a->D, (int)a->Tq, 1.0f, ds, (int)a->Tk,
                        q, (int)a->q_row, 1.0f, dkv + attn_k_at(a, b, 0, g), (int)a->kv_row);
            for (int64_t i = 0; i < a->Tq; i++)
                for (int64_t d = 0; d < a->D; d++)
                    st(t[4], k->dtype, (size_t)(attn_q_at(a, b, i, h) + d), dq[i * a->D + d]);
        }
    attn_store_dkv(a, t[5], k->dtype, dkv);
    free(dkv);
    free(p);
    free(ds);
    free(dq);
    attn_unview(dout, t[3]);
    attn_free(&f, t, 0, 1);
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
        attn_free(&f, t, 0, 1);
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
    attn_free(&f, t, 0, 1);
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
