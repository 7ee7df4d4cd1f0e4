/* attn_common.c: what the unfused (attention.c) and fused (flash_attention.c) CPU attention kernels
 * share (attn_cpu.h). */
#include <math.h>
#include <string.h>

#include "cpu/attn_cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_items.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"
#include "cpu/transpose.h"

const float *attn_view(const void *src, int dt, size_t n, const char *what, struct err *e)
{
    if (dt == DT_F32)
        return src;
    float *f = cpu_scratch(n, what, e);
    if (f)
        tensor_to_f32(f, src, dt, n);
    return f;
}

void attn_unview(const float *view, const void *src)
{
    if (view != src)
        free((float *)view);
}

const float *attn_view_into(float *buf, const void *src, int dt, size_t at, size_t n)
{
    if (dt == DT_F32)
        return (const float *)src + at;
    tensor_to_f32(buf, (const char *)src + at * dtype_size((enum dtype)dt), dt, n);
    return buf;
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

/* Row i of a score block starting at query row i0: mask keys past attn_keys (-inf). */
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

int64_t attn_key_block(int64_t D)
{
    int64_t bk = CPU_BLAS_ONE_THREAD_MNK / (ATTN_BQ * D) / 16 * 16;
    return bk < 16 ? 16 : bk > ATTN_BK_MAX ? ATTN_BK_MAX : bk;
}

int attn_job_start(struct attn_job *j, const struct kernel_call *k, void *const *t, int bwd, struct err *e)
{
    memset(j, 0, sizeof *j);
    j->k = k;
    j->t = t;
    if (blas_load(e) < 0 || attn_load(&j->f, k, t, 0, 1, e) < 0)
        return -1;
    j->nqb = (j->f.a.Tq + ATTN_BQ - 1) / ATTN_BQ;
    j->bk = attn_key_block(j->f.a.D);
    if (!bwd)
        return 0;
    j->dkv = k->dtype == DT_F32 ? t[5] : cpu_scratch(kernel_get(k->kernel)->elems(k, 1), "attention dkv", e);
    j->dout = j->dkv ? attn_view(t[3], k->dtype, kernel_get(k->kernel)->elems(k, 3), "attention do", e) : NULL;
    if (!j->dout) {
        if (j->dkv != t[5])
            free(j->dkv);
        attn_free(&j->f, t, 0, 1);
        return -1;
    }
    return 0;
}

int attn_job_end(struct attn_job *j, struct err *e)
{
    if (j->dkv && j->dkv != j->t[5])
        free(j->dkv);
    if (j->dout)
        attn_unview(j->dout, j->t[3]);
    attn_free(&j->f, j->t, 0, 1);
    if (atomic_load(&j->failed))
        return err_set(e, ERR_INTERNAL, "%s: out of host memory for a block's scratch", kernel_get(j->k->kernel)->name);
    return 0;
}

/* A score costs 2 D multiply-adds in each GEMM pass, about D / 8 elementwise operations' time. */
void attn_run(struct attn_job *j, int64_t n, double passes, void (*fn)(void *, int64_t))
{
    const struct attn_layout *a = &j->f.a;
    double scores = (double)a->B * (double)a->H * (double)a->Tq * (double)a->Tk * (a->causal ? 0.5 : 1.0);
    cpu_for_items(j, n, (size_t)(scores * (double)a->D / 16.0 * passes), fn);
}

void attn_dkv_zero(const struct attn_job *j, int64_t b, int64_t g)
{
    const struct attn_layout *a = &j->f.a;
    for (int64_t jj = 0; jj < a->Tk; jj++) {
        memset(j->dkv + attn_k_at(a, b, jj, g), 0, (size_t)a->D * sizeof *j->dkv);
        memset(j->dkv + attn_v_at(a, b, jj, g), 0, (size_t)a->D * sizeof *j->dkv);
    }
}

void attn_dkv_store(const struct attn_job *j, int64_t b, int64_t g)
{
    const struct attn_layout *a = &j->f.a;
    /* packed: only the k and v columns of each row, so dq (same tensor) is left intact */
    for (int64_t jj = 0; jj < a->Tk && j->dkv != j->t[5]; jj++) {
        attn_store(j->t[5], j->k->dtype, (size_t)attn_k_at(a, b, jj, g), j->dkv + attn_k_at(a, b, jj, g), (size_t)a->D);
        attn_store(j->t[5], j->k->dtype, (size_t)attn_v_at(a, b, jj, g), j->dkv + attn_v_at(a, b, jj, g), (size_t)a->D);
    }
}

void attn_block_grads(const struct attn_job *j, int64_t b, int64_t h, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
                      const float *p, const float *ds, int64_t ld, float *dq)
{
    const struct attn_layout *a = &j->f.a;
    const int64_t g = h / a->group, o_row = a->H * a->D;
    const float *q = j->f.q + attn_q_at(a, b, i0, h), *dob = j->dout + attn_o_at(a, b, i0, h);
    float pt[ATTN_BK_MAX * ATTN_BQ], dst[ATTN_BK_MAX * ATTN_BQ];
    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, (int)a->D, (int)bk, 1.0f, ds, (int)ld,
               j->f.kv + attn_k_at(a, b, j0, g), (int)a->kv_row, 1.0f, dq, (int)a->D);
    f32_transpose(pt, ATTN_BQ, p, ld, bq, bk);
    f32_transpose(dst, ATTN_BQ, ds, ld, bq, bk);
    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk, (int)a->D, (int)bq, 1.0f, dst, ATTN_BQ, q,
               (int)a->q_row, 1.0f, j->dkv + attn_k_at(a, b, j0, g), (int)a->kv_row);
    blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bk, (int)a->D, (int)bq, 1.0f, pt, ATTN_BQ, dob,
               (int)o_row, 1.0f, j->dkv + attn_v_at(a, b, j0, g), (int)a->kv_row);
}

void attn_dq_store(const struct attn_job *j, int64_t b, int64_t h, int64_t i0, int64_t bq, const float *dq)
{
    for (int64_t r = 0; r < bq; r++)
        attn_store(j->t[4], j->k->dtype, (size_t)attn_q_at(&j->f.a, b, i0 + r, h), dq + r * j->f.a.D, (size_t)j->f.a.D);
}
