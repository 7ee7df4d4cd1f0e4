/* attn_layout.h: where attention's q, k, v and o elements live (kernels.h's token-major layout,
 * separate q and kv or one packed qkv), shared by the CPU and CUDA attention kernels. */
#ifndef OOMLAB_ATTN_LAYOUT_H
#define OOMLAB_ATTN_LAYOUT_H

#include <math.h>
#include <stdint.h>

#include "elementwise.h"

struct attn_layout {
    int64_t B, H, Tq, Tk, D, Hkv, group; /* group: query heads per key/value head */
    int causal;
    float scale;
    int64_t q_row, kv_row; /* elements between consecutive tokens of q and of kv */
    int64_t k_off, v_off;  /* offset of head 0 of k and of v inside a kv (or qkv) row */
};

OOM_HD struct attn_layout attn_layout_of(const int64_t *dims, float scale)
{
    struct attn_layout a;
    a.B = dims[0];
    a.H = dims[1];
    a.Tq = dims[2];
    a.Tk = dims[3];
    a.D = dims[4];
    a.causal = dims[5] != 0;
    a.Hkv = dims[6] > 0 ? dims[6] : dims[1];
    a.group = a.H / a.Hkv;
    a.scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)a.D);
    if (dims[7]) {
        a.q_row = a.kv_row = (a.H + 2 * a.Hkv) * a.D;
        a.k_off = a.H * a.D;
    } else {
        a.q_row = a.H * a.D;
        a.kv_row = 2 * a.Hkv * a.D;
        a.k_off = 0;
    }
    a.v_off = a.k_off + a.Hkv * a.D;
    return a;
}

/* Element offsets of q[b, i, h, 0], k[b, j, g, 0], v[b, j, g, 0] and o[b, i, h, 0]. */
OOM_HD int64_t attn_q_at(const struct attn_layout *a, int64_t b, int64_t i, int64_t h)
{
    return (b * a->Tq + i) * a->q_row + h * a->D;
}

OOM_HD int64_t attn_k_at(const struct attn_layout *a, int64_t b, int64_t j, int64_t g)
{
    return (b * a->Tk + j) * a->kv_row + a->k_off + g * a->D;
}

OOM_HD int64_t attn_v_at(const struct attn_layout *a, int64_t b, int64_t j, int64_t g)
{
    return (b * a->Tk + j) * a->kv_row + a->v_off + g * a->D;
}

OOM_HD int64_t attn_o_at(const struct attn_layout *a, int64_t b, int64_t i, int64_t h)
{
    return ((b * a->Tq + i) * a->H + h) * a->D;
}

/* Number of keys query row i may see: all, or j <= i + (Tk - Tq) under the causal mask. */
OOM_HD int64_t attn_keys(const struct attn_layout *a, int64_t i)
{
    if (!a->causal)
        return a->Tk;
    int64_t n = i + (a->Tk - a->Tq) + 1;
    return n < 0 ? 0 : n > a->Tk ? a->Tk : n;
}

#endif
