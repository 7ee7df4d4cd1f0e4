/* attn_cpu.h: helpers the unfused and fused CPU attention kernels share. */
#ifndef OOMLAB_ATTN_CPU_H
#define OOMLAB_ATTN_CPU_H

#include "attn_layout.h"
#include "kernels.h"

/* fp32 copies of q and kv (indexed with the layout's offsets) and the layout itself. */
struct attn_f32 {
    struct attn_layout a;
    float *q, *kv;
};

/* Loads tensors iq and ikv of the call as fp32; 0, or -1 with e set. */
int attn_load(struct attn_f32 *f, const struct kernel_call *k, void *const *t, int iq, int ikv, struct err *e);
void attn_free(struct attn_f32 *f);
/* An o-shaped tensor (do) of the call as fp32 [B, Tq, H, D]; NULL with e set. */
float *attn_load_o(const struct kernel_call *k, const void *src, struct err *e);
/* Sets to -inf the causally masked entries of a rows x cols score block (leading dimension ld)
 * whose first row is query i0 and first column key j0. */
void attn_mask_rows(const struct attn_layout *a, float *s, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t cols);
/* Writes the k and v entries of an fp32 gradient laid out like kv into dst. */
void attn_store_dkv(const struct attn_layout *a, void *dst, int dt, const float *dkv);

#endif
