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
#include "cpu/cpu_items.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

#define BQ ATTN_BQ

static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

/* An unfused forward: the job and where its outputs are, and its additive score bias (or -1). */
struct ufwd {
    struct attn_job j; /* first: the items get a pointer to it */
    int ip, io, ibias;
};

/* Forward item: query block item % nqb of head (item / nqb) % H of batch entry item / (nqb H):
 * S = scale Q K^T (+ bias) by key blocks into a row block of Tk, masked row softmax into P (saved),
 * O = P V. */
static void fwd_item(void *ctx, int64_t item)
{
    const struct ufwd *u = ctx;
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / (j->nqb * a->H), h = item / j->nqb % a->H, i0 = item % j->nqb * BQ, g = h / a->group;
    const int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
    const int dt = j->k->dtype;
    /* fp32 o is written in place; other dtypes through scratch after the scores and a bias row */
    float *s = malloc((size_t)(BQ * (a->Tk + a->D) + a->Tk) * sizeof *s);
    if (!s) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *brow = s + BQ * a->Tk, *o = brow + a->Tk;
    int64_t o_ld = a->D;
    if (dt == DT_F32) {
        o = (float *)j->t[u->io] + attn_o_at(a, b, i0, h);
        o_ld = a->H * a->D;
    }
    for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)min64(j->bk, nk - j0), (int)a->D, a->scale,
                   j->f.q + attn_q_at(a, b, i0, h), (int)a->q_row, j->f.kv + attn_k_at(a, b, j0, g), (int)a->kv_row,
                   0.0f, s + j0, (int)a->Tk);
    for (int64_t r = 0; r < bq; r++) {
        float *row = s + r * a->Tk, mx = -INFINITY;
        const int64_t n = attn_keys(a, i0 + r);
        const size_t prow = attn_row(a, b, h, i0 + r) * (size_t)a->Tk;
        if (u->ibias >= 0) {
            const float *bias = attn_view_into(brow, j->t[u->ibias], dt, prow, (size_t)n);
            for (int64_t jj = 0; jj < n; jj++)
                row[jj] += bias[jj];
        }
#pragma omp simd reduction(max : mx)
        for (int64_t jj = 0; jj < n; jj++)
            mx = row[jj] > mx ? row[jj] : mx;
        float sum = n ? attn_exp_row(row, n, mx) : 0.0f, inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int64_t jj = 0; jj < n; jj++)
            row[jj] *= inv;
        memset(row + n, 0, (size_t)(a->Tk - n) * sizeof *row);
        attn_store(j->t[u->ip], dt, prow, row, (size_t)a->Tk);
        if (!nk)
            memset(o + r * o_ld, 0, (size_t)a->D * sizeof *o);
    }
    for (int64_t j0 = 0; j0 < nk; j0 += j->bk)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)min64(j->bk, nk - j0), 1.0f,
                   s + j0, (int)a->Tk, j->f.kv + attn_v_at(a, b, j0, g), (int)a->kv_row, j0 ? 1.0f : 0.0f, o,
                   (int)o_ld);
    for (int64_t r = 0; r < bq && dt != DT_F32; r++)
        attn_store(j->t[u->io], dt, (size_t)attn_o_at(a, b, i0 + r, h), o + r * o_ld, (size_t)a->D);
    free(s);
}

static int unfused_fwd(const struct kernel_call *k, void *const *t, int ip, int io, int ibias, struct err *e)
{
    struct ufwd u = {.ip = ip, .io = io, .ibias = ibias};
    if (attn_job_start(&u.j, k, t, 0, e) < 0)
        return -1;
    attn_run(&u.j, u.j.f.a.B * u.j.f.a.H * u.j.nqb, 2, fwd_item);
    return attn_job_end(&u.j, e);
}

int cpu_attn_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return unfused_fwd(k, t, 2, 3, -1, e);
}

/* dS = scale P (dP - rowsum(P dP)), dP = dO V^T, for the bq query rows from i0 of head h (P and dS
 * rows Tk apart), each over the keys its row sees; dS is 0 from there to `upto`. */
static void score_grads(const struct attn_layout *a, int64_t bk, const float *dout, const float *kv, int64_t b,
                        int64_t h, int64_t i0, int64_t bq, const float *p, float scale, int64_t upto, float *ds)
{
    const int64_t g = h / a->group, nk = attn_keys(a, i0 + bq - 1);
    for (int64_t j0 = 0; j0 < nk; j0 += bk)
        blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)min64(bk, nk - j0), (int)a->D, 1.0f,
                   dout + attn_o_at(a, b, i0, h), (int)(a->H * a->D), kv + attn_v_at(a, b, j0, g), (int)a->kv_row, 0.0f,
                   ds + j0, (int)a->Tk);
    for (int64_t r = 0; r < bq; r++) {
        const int64_t n = attn_keys(a, i0 + r);
        const float *pr = p + r * a->Tk;
        float *dr = ds + r * a->Tk, rowdot = 0.0f;
#pragma omp simd reduction(+ : rowdot)
        for (int64_t jj = 0; jj < n; jj++)
            rowdot += pr[jj] * dr[jj];
#pragma omp simd
        for (int64_t jj = 0; jj < n; jj++)
            dr[jj] = scale * pr[jj] * (dr[jj] - rowdot);
        memset(dr + n, 0, (size_t)(upto - n) * sizeof *dr);
    }
}

/* Backward item: key/value head item % Hkv of batch entry item / Hkv, with the query heads of its
 * group, as PyTorch's math path, by query blocks: dP = dO V^T, dS = scale P (dP - rowsum(P dP)),
 * then each key block's gradients (attn_block_grads). */
static void bwd_item(void *ctx, int64_t item)
{
    struct attn_job *j = ctx;
    const struct attn_layout *a = &j->f.a;
    const int64_t b = item / a->Hkv, g = item % a->Hkv;
    float *buf = malloc((size_t)(BQ * (2 * a->Tk + a->D)) * sizeof *buf);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *ds = buf + BQ * a->Tk, *dq = ds + BQ * a->Tk;
    attn_dkv_zero(j, b, g);
    for (int64_t h = g * a->group; h < (g + 1) * a->group; h++)
        for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) {
            const int64_t bq = min64(BQ, a->Tq - i0), nk = attn_keys(a, i0 + bq - 1);
            const float *p = attn_view_into(buf, j->t[2], j->k->dtype, attn_row(a, b, h, i0) * (size_t)a->Tk,
                                            (size_t)(bq * a->Tk));
            memset(dq, 0, (size_t)(bq * a->D) * sizeof *dq);
            score_grads(a, j->bk, j->dout, j->f.kv, b, h, i0, bq, p, a->scale, nk, ds);
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

/* Attention with an additive score bias [B, H, Tq, Tk] (T5's relative position bias). */
int cpu_attn_bias_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return unfused_fwd(k, t, 3, 4, 2, e);
}

/* The gradient of the scores from the saved P: dS = P (dP - rowsum(P dP)), dP = dO V^T. */
struct dscores_job {
    const struct kernel_call *k;
    void *const *t;
    struct attn_layout a;
    const float *kv, *dout;
    int64_t nqb, bk;
    atomic_int failed;
};

/* Item: query block item % nqb of head (item / nqb) % H of batch entry item / (nqb H). */
static void dscores_item(void *ctx, int64_t item)
{
    struct dscores_job *j = ctx;
    const struct attn_layout *a = &j->a;
    const int64_t b = item / (j->nqb * a->H), h = item / j->nqb % a->H, i0 = item % j->nqb * BQ;
    const int64_t bq = min64(BQ, a->Tq - i0);
    const size_t prow = attn_row(a, b, h, i0) * (size_t)a->Tk;
    float *dp = malloc((size_t)(2 * BQ * a->Tk) * sizeof *dp);
    if (!dp) {
        atomic_store(&j->failed, 1);
        return;
    }
    const float *p = attn_view_into(dp + BQ * a->Tk, j->t[1], j->k->dtype, prow, (size_t)(bq * a->Tk));
    score_grads(a, j->bk, j->dout, j->kv, b, h, i0, bq, p, 1.0f, a->Tk, dp);
    attn_store(j->t[3], j->k->dtype, prow, dp, (size_t)(bq * a->Tk));
    free(dp);
}

int cpu_attn_dscores(const struct kernel_call *k, void *const *t, struct err *e)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    struct dscores_job j = {.k = k, .t = t, .a = attn_layout_of(k->dims, k->fparam[0])};
    if (blas_load(e) < 0 || !(j.kv = attn_view(t[0], k->dtype, kd->elems(k, 0), "attention kv", e)))
        return -1;
    if (!(j.dout = attn_view(t[2], k->dtype, kd->elems(k, 2), "attention do", e))) {
        attn_unview(j.kv, t[0]);
        return -1;
    }
    j.nqb = (j.a.Tq + BQ - 1) / BQ;
    j.bk = attn_key_block(j.a.D);
    double scores = (double)j.a.B * (double)j.a.H * (double)j.a.Tq * (double)j.a.Tk;
    cpu_for_items(&j, j.a.B * j.a.H * j.nqb, (size_t)(scores * (double)j.a.D / 16.0), dscores_item);
    attn_unview(j.kv, t[0]);
    attn_unview(j.dout, t[2]);
    if (atomic_load(&j.failed))
        return err_set(e, ERR_INTERNAL, "attn_dscores: out of host memory for a block's scratch");
    return 0;
}
