/* attention.c: CPU unfused attention on cblas_sgemm: the forward materialises the probabilities P
 * (saved for the backward), the backward computes dq, dk, dv from P as PyTorch's math path does,
 * both by blocks spread over the cores as the fused kernels are (attn_common.c); attention with an
 * additive score bias (T5's relative position bias) and the gradient of the scores (= of that bias)
 * from the saved probabilities. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

#define BQ ATTN_BQ

static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

/* Forward item: query block item % nqb of head (item / nqb) % H of batch entry item / (nqb H):
 * S = scale Q K^T by key blocks into a row block of Tk, masked row softmax into P (saved), O = P V. */
static void fwd_item(void *ctx, int64_t item)
{
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / (j->nqb * a->H), h = item / j->nqb % a->H, i0 = item % j->nqb * BQ, g = h / a->group;
    const int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1), dt = j->k->dtype;
    /* fp32 o is written in place; other dtypes through scratch after the scores */
    float *s = malloc((size_t)(BQ * (a->Tk + a->D)) * sizeof *s), *o = s + BQ * a->Tk;
    int64_t o_ld = a->D;
    if (!s) {
        atomic_store(&j->failed, 1);
        return;
    }
    if (dt == DT_F32) {
        o = (float *)j->t[3] + attn_o_at(a, b, i0, h);
        o_ld = a->H * a->D;
    }
    for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)min64(j->bk, nk - j0), (int)a->D, a->scale,
                   j->f.q + attn_q_at(a, b, i0, h), (int)a->q_row, j->f.kv + attn_k_at(a, b, j0, g), (int)a->kv_row,
                   0.0f, s + j0, (int)a->Tk);
    for (int64_t r = 0; r < bq; r++) {
        float *row = s + r * a->Tk, mx = -INFINITY;
        int64_t n = attn_keys(a, i0 + r);
#pragma omp simd reduction(max : mx)
        for (int64_t jj = 0; jj < n; jj++)
            mx = row[jj] > mx ? row[jj] : mx;
        float sum = n ? attn_exp_row(row, n, mx) : 0.0f, inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int64_t jj = 0; jj < n; jj++)
            row[jj] *= inv;
        memset(row + n, 0, (size_t)(a->Tk - n) * sizeof *row);
        attn_store(j->t[2], (int)dt, (size_t)(attn_row(a, b, h, i0 + r) * a->Tk), row, (size_t)a->Tk);
        if (!nk)
            memset(o + r * o_ld, 0, (size_t)a->D * sizeof *o);
    }
    for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)min64(j->bk, nk - j0), 1.0f,
                   s + j0, (int)a->Tk, j->f.kv + attn_v_at(a, b, j0, g), (int)a->kv_row, j0 ? 1.0f : 0.0f, o,
                   (int)o_ld);
    for (int64_t r = 0; r < bq && dt != DT_F32; r++)
        attn_store(j->t[3], (int)dt, (size_t)attn_o_at(a, b, i0 + r, h), o + r * o_ld, (size_t)a->D);
    free(s);
}

int cpu_attn_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_job j;
    if (attn_job_start(&j, k, t, 0, e) < 0)
        return -1;
    attn_run(&j, j.f.a.B * j.f.a.H * j.nqb, 2, fwd_item);
    return attn_job_end(&j, e);
}

/* Backward item: key/value head item % Hkv of batch entry item / Hkv, with the query heads of its
 * group, as PyTorch's math path, by query blocks: dP = dO V^T, dS = scale P (dP - rowsum(P dP)),
 * then each key block's gradients (attn_block_grads). */
static void bwd_item(void *ctx, int64_t item)
{
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / a->Hkv, g = item % a->Hkv, o_row = a->H * a->D;
    float *buf = malloc((size_t)(BQ * (2 * a->Tk + a->D)) * sizeof *buf), *ds = buf + BQ * a->Tk, *dq = ds + BQ * a->Tk;
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    attn_dkv_zero(j, b, g);
    for (int64_t h = g * a->group; h < (g + 1) * a->group; h++)
        for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) {
            const int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
            const float *p = attn_view_into(buf, j->t[2], j->k->dtype, attn_row(a, b, h, i0) * (size_t)a->Tk,
                                            (size_t)(bq * a->Tk));
            memset(dq, 0, (size_t)(bq * a->D) * sizeof *dq);
            for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
                blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)min64(j->bk, nk - j0), (int)a->D, 1.0f,
                           j->dout + attn_o_at(a, b, i0, h), (int)o_row, j->f.kv + attn_v_at(a, b, j0, g),
                           (int)a->kv_row, 0.0f, ds + j0, (int)a->Tk);
            for (int64_t r = 0; r < bq; r++) {
                const float *pr = p + r * a->Tk;
                float *dr = ds + r * a->Tk, rowdot = 0.0f;
#pragma omp simd reduction(+ : rowdot)
                for (int64_t jj = 0; jj < nk; jj++)
                    rowdot += pr[jj] * dr[jj];
#pragma omp simd
                for (int64_t jj = 0; jj < nk; jj++)
                    dr[jj] = a->scale * pr[jj] * (dr[jj] - rowdot);
            }
            for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
                attn_block_grads(j, b, h, i0, bq, j0, min64(j->bk, nk - j0), p + j0, ds + j0, a->Tk, dq);
            attn_dq_store(j, b, h, i0, bq, dq);
        }
    attn_dkv_store(j, b, g);
    free(buf);
}

int cpu_attn_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_job j;
    if (attn_job_start(&j, k, t, 1, e) < 0)
        return -1;
    attn_run(&j, j.f.a.B * j.f.a.Hkv, 5, bwd_item);
    return attn_job_end(&j, e);
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
