// flash_attention.cu: CUDA fused attention, one warp per query row: online softmax over 32-key
// chunks, nothing of size Tq x Tk stored; the backward recomputes P from the saved log-sum-exp,
// dq per query row here and dk, dv per key row in attention.cu's pass. Head dimension up to 256.
#include "cuda/attn_warp.cuh"
#include "cuda/cuda_kernels.h"

// Forward: 32 keys at a time, lane = key for the scores, lane = head-dim slice for o.
__global__ void flash_fwd(attn_layout a, int dt, const void *q, const void *kv, void *o, float *lse)
{
    int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    int lane = threadIdx.x & 31;
    qrow w = qrow_of(a, r);
    int64_t qo = attn_q_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    float m = -INFINITY, l = 0.0f, acc[MAX_D_PER_LANE] = {0};
    for (int64_t j0 = 0; j0 < nk; j0 += 32) {
        int64_t j = j0 + lane;
        float s = j < nk ? a.scale * lane_dot(q, qo, kv, attn_k_at(&a, w.b, j, w.g), dt, a.D) : -INFINITY;
        float m_new = fmaxf(m, warp_max(s)), corr = expf(m - m_new);
        float pj = j < nk ? expf(s - m_new) : 0.0f;
        l = l * corr + warp_sum(pj);
        for (int mm = 0; mm < MAX_D_PER_LANE; mm++)
            acc[mm] *= corr;
        for (int jj = 0; jj < 32 && j0 + jj < nk; jj++) {
            float pb = __shfl_sync(0xffffffffu, pj, jj);
            int64_t vo = attn_v_at(&a, w.b, j0 + jj, w.g);
            for (int mm = 0; mm < MAX_D_PER_LANE && lane + 32 * mm < a.D; mm++)
                acc[mm] += pb * ldt(kv, dt, vo + lane + 32 * mm);
        }
        m = m_new;
    }
    for (int mm = 0; mm < MAX_D_PER_LANE && lane + 32 * mm < a.D; mm++)
        stt(o, dt, attn_o_at(&a, w.b, w.i, w.h) + lane + 32 * mm, l > 0.0f ? acc[mm] / l : 0.0f);
    if (lane == 0)
        lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
}

__global__ void flash_bwd_prep(attn_layout a, int dt, const void *o, const void *dout, const float *lse, float *stats)
{
    GRID_LOOP(r, a.B * a.H * a.Tq)
    {
        qrow w = qrow_of(a, (int64_t)r);
        int64_t oo = attn_o_at(&a, w.b, w.i, w.h);
        float s = 0.0f;
        for (int64_t d = 0; d < a.D; d++)
            s += ldt(o, dt, oo + d) * ldt(dout, dt, oo + d);
        stats[2 * r] = lse[r];
        stats[2 * r + 1] = s;
    }
}

__global__ void flash_bwd_dq(attn_layout a, int dt, const void *q, const void *kv, const float *stats,
                             const void *dout, void *dq)
{
    int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    int lane = threadIdx.x & 31;
    qrow w = qrow_of(a, r);
    int64_t qo = attn_q_at(&a, w.b, w.i, w.h), oo = attn_o_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    float lse = stats[2 * r], delta = stats[2 * r + 1], acc[MAX_D_PER_LANE] = {0};
    for (int64_t j = 0; j < nk; j++) {
        int64_t ko = attn_k_at(&a, w.b, j, w.g);
        float pj = expf(a.scale * warp_dot(q, qo, kv, ko, dt, a.D) - lse);
        float ds = a.scale * pj * (warp_dot(dout, oo, kv, attn_v_at(&a, w.b, j, w.g), dt, a.D) - delta);
        for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
            acc[m] += ds * ldt(kv, dt, ko + lane + 32 * m);
    }
    for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
        stt(dq, dt, qo + lane + 32 * m, acc[m]);
}

CUDA_KERNEL(cuda_flash_fwd)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attention", a);
    flash_fwd<<<warp_blocks(a.B * a.H * a.Tq), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1], t[2],
                                                                                      (float *)t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_flash_bwd_prep)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attention", a);
    flash_bwd_prep<<<grid_for((size_t)(a.B * a.H * a.Tq)), THREADS, 0, c->stream>>>(a, k->dtype, t[0], t[1],
                                                                                    (const float *)t[2], (float *)t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_flash_bwd)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attention", a);
    flash_bwd_dq<<<warp_blocks(a.B * a.H * a.Tq), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1],
                                                                                         (const float *)t[2], t[3], t[4]);
    attn_dkv_launch(a, k->dtype, t[0], t[1], NULL, NULL, (const float *)t[2], t[3], t[5], c->stream);
    return cudaGetLastError();
}
