/* flash_attention.c: CPU fused memory-efficient attention (FlashAttention's blocking on
 * cblas_sgemm). The forward walks 64 x 64 blocks of scores with an online softmax (running max
 * and sum per query row), never holding more than one block, and saves the log-sum-exp; the
 * backward recomputes each block of P from it and accumulates dq, dk, dv block by block. */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

#define BQ 64 /* query rows per block */
#define BK 64 /* keys per block */

static size_t row_index(const struct attn_layout *a, int64_t b, int64_t h, int64_t i)
{
    return (size_t)((b * a->H + h) * a->Tq + i);
}

static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

int cpu_flash_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (blas_load(e) < 0 || attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    float *acc = cpu_scratch((size_t)(BQ * a->D), "flash accumulator", e);
    if (!acc) {
        attn_free(&f);
        return -1;
    }
    float s[BQ * BK], m[BQ], l[BQ];
    float *lse = t[3];
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) {
                int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
                memset(acc, 0, (size_t)(bq * a->D) * sizeof *acc);
                for (int64_t r = 0; r < bq; r++) {
                    m[r] = -INFINITY;
                    l[r] = 0.0f;
                }
                for (int64_t j0 = 0; j0 < nk; j0 += BK) {
                    int64_t bk = min64(BK, nk - j0);
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, a->scale,
                                f.q + attn_q_at(a, b, i0, h), (int)a->q_row, f.kv + attn_k_at(a, b, j0, g),
                                (int)a->kv_row, 0.0f, s, BK);
                    attn_mask_rows(a, s, BK, i0, bq, j0, bk);
                    for (int64_t r = 0; r < bq; r++) {
                        float *row = s + r * BK, bm = -INFINITY;
                        for (int64_t j = 0; j < bk; j++)
                            bm = fmaxf(bm, row[j]);
                        float m_new = fmaxf(m[r], bm);
                        if (m_new == -INFINITY) { /* nothing visible yet in this row */
                            memset(row, 0, (size_t)bk * sizeof *row);
                            continue;
                        }
                        float corr = expf(m[r] - m_new), sum = 0.0f;
                        for (int64_t j = 0; j < bk; j++)
                            sum += row[j] = expf(row[j] - m_new);
                        l[r] = l[r] * corr + sum;
                        m[r] = m_new;
                        for (int64_t d = 0; d < a->D; d++)
                            acc[r * a->D + d] *= corr;
                    }
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)bk, 1.0f, s, BK,
                                f.kv + attn_v_at(a, b, j0, g), (int)a->kv_row, 1.0f, acc, (int)a->D);
                }
                for (int64_t r = 0; r < bq; r++) {
                    for (int64_t d = 0; d < a->D; d++)
                        st(t[2], k->dtype, (size_t)(attn_o_at(a, b, i0 + r, h) + d),
                           l[r] > 0.0f ? acc[r * a->D + d] / l[r] : 0.0f);
                    lse[row_index(a, b, h, i0 + r)] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
                }
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

/* Per query block and key block: P = exp(S - lse), dP = dO V^T, dS = scale P (dP - delta),
 * dQ += dS K, dK += dS^T Q, dV += P^T dO. */
int cpu_flash_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_f32 f;
    if (blas_load(e) < 0 || attn_load(&f, k, t, 0, 1, e) < 0)
        return -1;
    const struct attn_layout *a = &f.a;
    const float *stats = t[2];
    const int64_t o_row = a->H * a->D;
    size_t nkv = kernel_get(k->kernel)->elems(k, 1);
    float *dkv = cpu_scratch(nkv, "flash dkv", e), *dq = dkv ? cpu_scratch((size_t)(BQ * a->D), "flash dq", e) : NULL;
    float *dout = dq ? attn_load_o(k, t[3], e) : NULL;
    if (!dout) {
        free(dkv);
        free(dq);
        attn_free(&f);
        return -1;
    }
    memset(dkv, 0, nkv * sizeof *dkv);
    float p[BQ * BK], ds[BQ * BK];
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++) {
            int64_t g = h / a->group;
            for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) {
                int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
                const float *q = f.q + attn_q_at(a, b, i0, h), *dob = dout + attn_o_at(a, b, i0, h);
                memset(dq, 0, (size_t)(bq * a->D) * sizeof *dq);
                for (int64_t j0 = 0; j0 < nk; j0 += BK) {
                    int64_t bk = min64(BK, nk - j0);
                    const float *kk = f.kv + attn_k_at(a, b, j0, g), *v = f.kv + attn_v_at(a, b, j0, g);
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, a->scale, q,
                                (int)a->q_row, kk, (int)a->kv_row, 0.0f, p, BK);
                    attn_mask_rows(a, p, BK, i0, bq, j0, bk);
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, 1.0f, dob,
                                (int)o_row, v, (int)a->kv_row, 0.0f, ds, BK);
                    for (int64_t r = 0; r < bq; r++) {
                        size_t row = row_index(a, b, h, i0 + r);
                        float lse = stats[2 * row], delta = stats[2 * row + 1];
                        for (int64_t j = 0; j < bk; j++) {
                            float pj = p[r * BK + j] == -INFINITY ? 0.0f : expf(p[r * BK + j] - lse);
                            p[r * BK + j] = pj;
                            ds[r * BK + j] = a->scale * pj * (ds[r * BK + j] - delta);
                        }
                    }
                    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)bk, 1.0f, ds, BK,
                                kk, (int)a->kv_row, 1.0f, dq, (int)a->D);
                    blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, (int)a->D, (int)bq, 1.0f, ds, BK, q,
                                (int)a->q_row, 1.0f, dkv + attn_k_at(a, b, j0, g), (int)a->kv_row);
                    blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, (int)a->D, (int)bq, 1.0f, p, BK, dob,
                                (int)o_row, 1.0f, dkv + attn_v_at(a, b, j0, g), (int)a->kv_row);
                }
                for (int64_t r = 0; r < bq; r++)
                    for (int64_t d = 0; d < a->D; d++)
                        st(t[4], k->dtype, (size_t)(attn_q_at(a, b, i0 + r, h) + d), dq[r * a->D + d]);
            }
        }
    attn_store_dkv(a, t[5], k->dtype, dkv);
    free(dkv);
    free(dq);
    free(dout);
    attn_free(&f);
    return 0;
}
