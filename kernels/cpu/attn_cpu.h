/* attn_cpu.h: helpers the unfused and fused CPU attention kernels share. */
#ifndef OOMLAB_ATTN_CPU_H
#define OOMLAB_ATTN_CPU_H

#include "attn_layout.h"
#include "kernels.h"

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
/* Writes the k and v entries of an fp32 gradient laid out like kv into dst. */
void attn_store_dkv(const struct attn_layout *a, void *dst, int dt, const float *dkv);
/* Stores n fp32 values at element offset i of a tensor of dtype dt. */
void attn_store(void *dst, int dt, size_t i, const float *src, size_t n);

/* x[j] = exp(x[j] - m) for j < n (0 for -inf), vectorized; returns their sum (attn_exp.c). */
float attn_exp_row(float *x, int64_t n, float m);

#endif
