/* attn_cpu.h: what the unfused and fused CPU attention kernels share (attn_common.c): fp32 views
 * of their tensors, the causal mask, the blocking (query blocks of ATTN_BQ rows spread over the
 * cores, key blocks small enough for the BLAS to stay on the item's thread) and the gradient GEMMs
 * of one block of the backward. */
#ifndef OOMLAB_ATTN_CPU_H
#define OOMLAB_ATTN_CPU_H

#include <stdatomic.h>

#include "attn_layout.h"
#include "kernels.h"

#define ATTN_BQ 32      /* query rows per block */
#define ATTN_BK_MAX 256 /* most keys per block */

/* Index of query row i of head h of batch entry b among the B H Tq rows of lse, stats and P. */
static inline size_t attn_row(const struct attn_layout *a, int64_t b, int64_t h, int64_t i)
{
    return (size_t)((b * a->H + h) * a->Tq + i);
}

/* fp32 views of q and kv (indexed with the layout's offsets) and the layout itself. */
struct attn_f32 {
    struct attn_layout a;
    const float *q, *kv;
};

/* fp32 view of n elements of a tensor: the tensor itself when it is fp32, else a converted copy;
 * NULL with e set. Release with attn_unview. */
const float *attn_view(const void *src, int dt, size_t n, const char *what, struct err *e);
void attn_unview(const float *view, const void *src);
/* n elements from element `at` of a tensor as fp32: in place when it is fp32, else converted into buf. */
const float *attn_view_into(float *buf, const void *src, int dt, size_t at, size_t n);
/* Views tensors iq and ikv of the call as fp32 (the call must not write them while f is in use);
 * 0, or -1 with e set. */
int attn_load(struct attn_f32 *f, const struct kernel_call *k, void *const *t, int iq, int ikv, struct err *e);
void attn_free(struct attn_f32 *f, void *const *t, int iq, int ikv);
/* Sets to -inf the causally masked entries of a rows x cols score block (leading dimension ld)
 * whose first row is query i0 and first column key j0. */
void attn_mask_rows(const struct attn_layout *a, float *s, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t cols);
/* Stores n fp32 values at element offset i of a tensor of dtype dt. */
void attn_store(void *dst, int dt, size_t i, const float *src, size_t n);
/* x[j] = exp(x[j] - m) for j < n (0 for -inf), vectorized; returns their sum (attn_exp.c). */
float attn_exp_row(float *x, int64_t n, float m);

/* Keys per block for head size D: as many as keep ATTN_BQ x bk x D at one BLAS thread, a multiple of 16. */
int64_t attn_key_block(int64_t D);

/* One attention call split into items (query blocks, or key/value heads), with what they share. For a
 * backward (tensors q, kv, P or stats, do, dq, dkv): do as fp32 and dk, dv accumulated in an fp32 dkv
 * (the tensor itself when fp32, else scratch laid out like kv). */
struct attn_job {
    const struct kernel_call *k;
    void *const *t;
    struct attn_f32 f;
    int64_t nqb, bk; /* query blocks per head, keys per block */
    const float *dout;
    float *dkv;
    atomic_int failed; /* an item could not get its scratch */
};

/* 0, or -1 with e set (nothing left to release). */
int attn_job_start(struct attn_job *j, const struct kernel_call *k, void *const *t, int bwd, struct err *e);
/* Releases the job; -1 with e set if an item failed. */
int attn_job_end(struct attn_job *j, struct err *e);
/* Runs fn over n items on the cores, for a call of `passes` score-sized GEMMs. */
void attn_run(struct attn_job *j, int64_t n, double passes, void (*fn)(void *, int64_t));

/* Backward, per key/value head g of batch entry b: zero its dk and dv before its blocks; store them
 * into the dkv tensor after (fp32: already there). */
void attn_dkv_zero(const struct attn_job *j, int64_t b, int64_t g);
void attn_dkv_store(const struct attn_job *j, int64_t b, int64_t g);
/* Backward of one bq x bk block (query i0 of head h, key j0 of its key/value head; P and dS with
 * leading dimension ld): dq (bq x D) += dS K, dK += dS^T Q, dV += P^T dO, the last two on P and dS
 * transposed (the BLAS's small-matrix kernels take untransposed operands). */
void attn_block_grads(const struct attn_job *j, int64_t b, int64_t h, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
                      const float *p, const float *ds, int64_t ld, float *dq);
/* Stores dq (bq x D) for query rows from i0 of head h. */
void attn_dq_store(const struct attn_job *j, int64_t b, int64_t h, int64_t i0, int64_t bq, const float *dq);

#endif
