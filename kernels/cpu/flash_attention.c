/* flash_attention.c: CPU fused memory-efficient attention (FlashAttention's blocking on
 * cblas_sgemm). The forward walks blocks of BQ queries by bk keys with an online softmax (running
 * max and sum per query row), never holding more than one block, and saves the log-sum-exp; the
 * backward recomputes each block of P from it and accumulates dq, dk, dv block by block. Both split
 * their work over the cores (forward: per query block of a head; backward: per key/value head, whose
 * dk and dv no other item writes), and the order of the sums within an item does not depend on the
 * split, so neither do the results. The softmax loops are vectorized (attn_exp.c). */
#include <math.h>
#include <string.h>

#include "attn_layout.h"
#include "cpu/attn_cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_items.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

#define BQ ATTN_BQ
#define BK_MAX ATTN_BK_MAX

static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

/* One step of the online softmax over a bq x bk block of scores s (leading dimension ld): per row,
 * the running max m and sum l take in the block, s becomes exp(s - new max) and the row's
 * accumulator (acc: D values per row, rows acc_ld apart) is scaled to the new max. */
CPU_BODY void online_softmax_body(float *restrict s, int64_t ld, int64_t bq, int64_t bk, float *restrict m,
                                  float *restrict l, float *restrict acc, int64_t acc_ld, int64_t D)
{
    for (int64_t r = 0; r < bq; r++) {
        float *row = s + r * ld, bm = -INFINITY;
#pragma omp simd reduction(max : bm)
        for (int64_t j = 0; j < bk; j++)
            bm = row[j] > bm ? row[j] : bm;
        float m_new = m[r] > bm ? m[r] : bm;
        if (m_new == -INFINITY) { /* nothing visible yet in this row */
            memset(row, 0, (size_t)bk * sizeof *row);
            continue;
        }
        float corr = expf(m[r] - m_new), sum = attn_exp_row(row, bk, m_new);
        l[r] = l[r] * corr + sum;
        m[r] = m_new;
        if (corr != 1.0f) {
            float *ar = acc + r * acc_ld;
#pragma omp simd
            for (int64_t d = 0; d < D; d++)
                ar[d] *= corr;
        }
    }
}

CPU_MULTIVERSION(online_softmax,
                 (float *restrict s, int64_t ld, int64_t bq, int64_t bk, float *restrict m, float *restrict l,
                  float *restrict acc, int64_t acc_ld, int64_t D),
                 (s, ld, bq, bk, m, l, acc, acc_ld, D))

/* P = exp(S - lse) (0 where masked) and dS = scale P (dP - delta), in place over a bq x bk block of
 * scores p and of dP in ds, rows from `row` of stats (lse, delta pairs). */
CPU_BODY void dsoftmax_body(float *restrict p, float *restrict ds, int64_t ld, int64_t bq, int64_t bk,
                            const float *restrict stats, float scale)
{
    for (int64_t r = 0; r < bq; r++) {
        float lse = stats[2 * r], delta = stats[2 * r + 1], *pr = p + r * ld, *dr = ds + r * ld;
        if (lse == -INFINITY) { /* a row that sees no key */
            memset(pr, 0, (size_t)bk * sizeof *pr);
            memset(dr, 0, (size_t)bk * sizeof *dr);
            continue;
        }
        attn_exp_row(pr, bk, lse); /* masked scores are -inf: 0 */
#pragma omp simd
        for (int64_t j = 0; j < bk; j++)
            dr[j] = scale * pr[j] * (dr[j] - delta);
    }
}

CPU_MULTIVERSION(dsoftmax,
                 (float *restrict p, float *restrict ds, int64_t ld, int64_t bq, int64_t bk,
                  const float *restrict stats, float scale),
                 (p, ds, ld, bq, bk, stats, scale))

/* Forward item: query block item % nqb of head (item / nqb) % H of batch entry item / (nqb H). */
static void fwd_item(void *ctx, int64_t item)
{
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / (j->nqb * a->H), h = item / j->nqb % a->H, i0 = item % j->nqb * BQ, g = h / a->group;
    const int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
    float s[BQ * BK_MAX], m[BQ], l[BQ];
    /* fp32 o is its own accumulator; other dtypes accumulate in fp32 scratch */
    const int f32 = j->k->dtype == DT_F32;
    const int64_t acc_ld = f32 ? a->H * a->D : a->D;
    float *acc = f32 ? (float *)j->t[2] + attn_o_at(a, b, i0, h) : malloc((size_t)(BQ * a->D) * sizeof *acc);
    if (!acc) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t r = 0; r < bq; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        memset(acc + r * acc_ld, 0, (size_t)a->D * sizeof *acc);
    }
    for (int64_t j0 = 0; j0 < nk; j0 += j->bk) {
        int64_t bk = min64(j->bk, nk - j0);
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, a->scale,
                   j->f.q + attn_q_at(a, b, i0, h), (int)a->q_row, j->f.kv + attn_k_at(a, b, j0, g), (int)a->kv_row,
                   0.0f, s, BK_MAX);
        attn_mask_rows(a, s, BK_MAX, i0, bq, j0, bk);
        online_softmax(s, BK_MAX, bq, bk, m, l, acc, acc_ld, a->D);
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)bk, 1.0f, s, BK_MAX,
                   j->f.kv + attn_v_at(a, b, j0, g), (int)a->kv_row, 1.0f, acc, (int)acc_ld);
    }
    float *lse = j->t[3];
    for (int64_t r = 0; r < bq; r++) {
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f, *ar = acc + r * acc_ld;
        for (int64_t d = 0; d < a->D; d++)
            ar[d] *= inv;
        if (!f32)
            attn_store(j->t[2], j->k->dtype, (size_t)attn_o_at(a, b, i0 + r, h), ar, (size_t)a->D);
        lse[attn_row(a, b, h, i0 + r)] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
    if (!f32)
        free(acc);
}

int cpu_flash_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_job j;
    if (attn_job_start(&j, k, t, 0, e) < 0)
        return -1;
    attn_run(&j, j.f.a.B * j.f.a.H * j.nqb, 2, fwd_item);
    return attn_job_end(&j, e);
}

/* sum of x[i] y[i] over n elements from element `at` of two tensors of dtype dt. */
static float dot_at(const void *x, const void *y, int dt, size_t at, int64_t n)
{
    float sum = 0.0f, bx[256], by[256];
    for (int64_t d0 = 0; d0 < n; d0 += 256) {
        const int64_t m = min64(256, n - d0);
        const float *xf = attn_view_into(bx, x, dt, at + (size_t)d0, (size_t)m);
        const float *yf = attn_view_into(by, y, dt, at + (size_t)d0, (size_t)m);
#pragma omp simd reduction(+ : sum)
        for (int64_t d = 0; d < m; d++)
            sum += xf[d] * yf[d];
    }
    return sum;
}

struct prep_job {
    const struct kernel_call *k;
    void *const *t;
    struct attn_layout a;
};

/* Prep item: the H rows of token item % Tq of batch entry item / Tq. */
static void prep_item(void *ctx, int64_t item)
{
    const struct prep_job *j = ctx;
    const int64_t b = item / j->a.Tq, i = item % j->a.Tq;
    const float *lse = j->t[2];
    float *stats = j->t[3];
    for (int64_t h = 0; h < j->a.H; h++) {
        size_t r = attn_row(&j->a, b, h, i);
        stats[2 * r] = lse[r];
        stats[2 * r + 1] = dot_at(j->t[0], j->t[1], j->k->dtype, (size_t)attn_o_at(&j->a, b, i, h), j->a.D);
    }
}

int cpu_flash_bwd_prep(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct prep_job j = {k, t, attn_layout_of(k->dims, k->fparam[0])};
    cpu_for_items(&j, j.a.B * j.a.Tq, (size_t)(j.a.B * j.a.Tq * j.a.H * j.a.D), prep_item);
    return 0;
}

/* Backward item: key/value head item % Hkv of batch entry item / Hkv, with the query heads of its
 * group. Per query block and key block: P = exp(S - lse), dP = dO V^T, dS = scale P (dP - delta),
 * then the block's gradients (attn_block_grads). */
static void bwd_item(void *ctx, int64_t item)
{
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / a->Hkv, g = item % a->Hkv, o_row = a->H * a->D;
    const float *all_stats = j->t[2];
    float p[BQ * BK_MAX], ds[BQ * BK_MAX], *dq = malloc((size_t)(BQ * a->D) * sizeof *dq);
    if (!dq) {
        atomic_store(&j->failed, 1);
        return;
    }
    attn_dkv_zero(j, b, g);
    for (int64_t h = g * a->group; h < (g + 1) * a->group; h++)
        for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) {
            int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
            const float *stats = all_stats + 2 * attn_row(a, b, h, i0);
            memset(dq, 0, (size_t)(bq * a->D) * sizeof *dq);
            for (int64_t j0 = 0; j0 < nk; j0 += j->bk) {
                int64_t bk = min64(j->bk, nk - j0);
                blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, a->scale,
                           j->f.q + attn_q_at(a, b, i0, h), (int)a->q_row, j->f.kv + attn_k_at(a, b, j0, g),
                           (int)a->kv_row, 0.0f, p, BK_MAX);
                attn_mask_rows(a, p, BK_MAX, i0, bq, j0, bk);
                blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, (int)a->D, 1.0f,
                           j->dout + attn_o_at(a, b, i0, h), (int)o_row, j->f.kv + attn_v_at(a, b, j0, g),
                           (int)a->kv_row, 0.0f, ds, BK_MAX);
                dsoftmax(p, ds, BK_MAX, bq, bk, stats, a->scale);
                attn_block_grads(j, b, h, i0, bq, j0, bk, p, ds, BK_MAX, dq);
            }
            attn_dq_store(j, b, h, i0, bq, dq);
        }
    attn_dkv_store(j, b, g);
    free(dq);
}

int cpu_flash_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    struct attn_job j;
    if (attn_job_start(&j, k, t, 1, e) < 0)
        return -1;
    attn_run(&j, j.f.a.B * j.f.a.Hkv, 5, bwd_item);
    return attn_job_end(&j, e);
}
