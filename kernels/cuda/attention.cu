// attention.cu: CUDA attention, one warp per query row (forward, dq) or per key row (dk, dv), the
// lanes splitting the head dimension or the keys. Unfused: the forward writes P and reads it back
// for P v; the backward keeps each row's sum(P * dP) in caller-provided scratch. Fused: online
// softmax over 32-key chunks, nothing of size Tq x Tk stored; the backward recomputes P from lse.
// Head dimension up to 256 (8 accumulators per lane).
#include <stdio.h>

#include "cuda/attn_warp.cuh"
#include "cuda/cuda_kernels.h"

__global__ void attn_fwd(attn_layout a, int dt, const void *q, const void *kv, void *p, void *o)
{
    int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    int lane = threadIdx.x & 31;
    qrow w = qrow_of(a, r);
    int64_t qo = attn_q_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = lane; j < nk; j += 32)
        mx = fmaxf(mx, a.scale * lane_dot(q, qo, kv, attn_k_at(&a, w.b, j, w.g), dt, a.D));
    mx = warp_max(mx);
    for (int64_t j = lane; j < nk; j += 32)
        sum += expf(a.scale * lane_dot(q, qo, kv, attn_k_at(&a, w.b, j, w.g), dt, a.D) - mx);
    sum = warp_sum(sum);
    size_t prow = (size_t)r * a.Tk;
    for (int64_t j = lane; j < a.Tk; j += 32) {
        float pj = j < nk ? expf(a.scale * lane_dot(q, qo, kv, attn_k_at(&a, w.b, j, w.g), dt, a.D) - mx) / sum : 0.0f;
        stt(p, dt, prow + j, pj);
    }
    __syncwarp();
    for (int64_t d = lane; d < a.D; d += 32) {
        float acc = 0.0f;
        for (int64_t j = 0; j < nk; j++)
            acc += ldt(p, dt, prow + j) * ldt(kv, dt, attn_v_at(&a, w.b, j, w.g) + d);
        stt(o, dt, attn_o_at(&a, w.b, w.i, w.h) + d, acc);
    }
}

// Unfused backward, pass 1 (per query row): rowdot = sum_j P dP, then dq = scale sum_j dS k_j.
__global__ void attn_bwd_dq(attn_layout a, int dt, const void *q, const void *kv, const void *p, const void *dout,
                            void *dq, float *rowdot)
{
    int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    int lane = threadIdx.x & 31;
    qrow w = qrow_of(a, r);
    int64_t oo = attn_o_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    size_t prow = (size_t)r * a.Tk;
    float rd = 0.0f, acc[MAX_D_PER_LANE] = {0};
    for (int64_t j = 0; j < nk; j++)
        rd += ldt(p, dt, prow + j) * warp_dot(dout, oo, kv, attn_v_at(&a, w.b, j, w.g), dt, a.D);
    for (int64_t j = 0; j < nk; j++) {
        float dp = warp_dot(dout, oo, kv, attn_v_at(&a, w.b, j, w.g), dt, a.D);
        float ds = a.scale * ldt(p, dt, prow + j) * (dp - rd);
        int64_t ko = attn_k_at(&a, w.b, j, w.g);
        for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
            acc[m] += ds * ldt(kv, dt, ko + lane + 32 * m);
    }
    for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
        stt(dq, dt, attn_q_at(&a, w.b, w.i, w.h) + lane + 32 * m, acc[m]);
    if (lane == 0)
        rowdot[r] = rd;
}

// First query row that sees key j (causal), so key-row passes skip the masked ones.
__device__ inline int64_t first_query(const attn_layout &a, int64_t j)
{
    int64_t i = a.causal ? j - (a.Tk - a.Tq) : 0;
    return i < 0 ? 0 : i;
}

// Key row (b, g, j): dk = scale sum dS q_i and dv = sum P do_i over the group's heads and queries.
// Unfused reads P and rowdot; fused (p == NULL) recomputes P from stats = (lse, delta).
__global__ void attn_bwd_dkv(attn_layout a, int dt, const void *q, const void *kv, const void *p, const float *rowdot,
                             const float *stats, const void *dout, void *dkv)
{
    int64_t r = warp_row();
    if (r >= a.B * a.Hkv * a.Tk)
        return;
    int lane = threadIdx.x & 31;
    int64_t j = r % a.Tk, g = r / a.Tk % a.Hkv, b = r / (a.Tk * a.Hkv);
    int64_t ko = attn_k_at(&a, b, j, g), vo = attn_v_at(&a, b, j, g);
    float dk[MAX_D_PER_LANE] = {0}, dv[MAX_D_PER_LANE] = {0};
    for (int64_t h = g * a.group; h < (g + 1) * a.group; h++)
        for (int64_t i = first_query(a, j); i < a.Tq; i++) {
            int64_t row = (b * a.H + h) * a.Tq + i, qo = attn_q_at(&a, b, i, h), oo = attn_o_at(&a, b, i, h);
            float pj, sub;
            if (p) {
                pj = ldt(p, dt, (size_t)row * a.Tk + j);
                sub = rowdot[row];
            } else {
                pj = expf(a.scale * warp_dot(q, qo, kv, ko, dt, a.D) - stats[2 * row]);
                sub = stats[2 * row + 1];
            }
            float ds = a.scale * pj * (warp_dot(dout, oo, kv, vo, dt, a.D) - sub);
            for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++) {
                dk[m] += ds * ldt(q, dt, qo + lane + 32 * m);
                dv[m] += pj * ldt(dout, dt, oo + lane + 32 * m);
            }
        }
    for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++) {
        stt(dkv, dt, ko + lane + 32 * m, dk[m]);
        stt(dkv, dt, vo + lane + 32 * m, dv[m]);
    }
}

// Fused forward: 32 keys at a time, lane = key for the scores, lane = head-dim slice for o.
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

cudaError_t cuda_attention_launch(const struct kernel_call *k, void *const *t, cudaStream_t s,
                                  const struct cuda_scratch *scratch, char *why, size_t why_len)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    const int dt = k->dtype, threads = 32 * WARPS_PER_BLOCK;
    const int64_t qrows = a.B * a.H * a.Tq, krows = a.B * a.Hkv * a.Tk;
    if (a.D > 32 * MAX_D_PER_LANE) {
        snprintf(why, why_len, "CUDA attention supports head dimension up to %d (got %lld)", 32 * MAX_D_PER_LANE,
                 (long long)a.D);
        return cudaErrorNotSupported;
    }
    switch (k->kernel) {
    case K_ATTN_FWD:
        attn_fwd<<<warp_blocks(qrows), threads, 0, s>>>(a, dt, t[0], t[1], t[2], t[3]);
        break;
    case K_ATTN_BWD: {
        float *rowdot = (float *)scratch->get(scratch->user, (size_t)qrows * sizeof(float));
        if (!rowdot)
            return cudaErrorMemoryAllocation;
        attn_bwd_dq<<<warp_blocks(qrows), threads, 0, s>>>(a, dt, t[0], t[1], t[2], t[3], t[4], rowdot);
        attn_bwd_dkv<<<warp_blocks(krows), threads, 0, s>>>(a, dt, t[0], t[1], t[2], rowdot, NULL, t[3], t[5]);
        scratch->put(scratch->user, rowdot);
        break;
    }
    case K_FLASH_FWD:
        flash_fwd<<<warp_blocks(qrows), threads, 0, s>>>(a, dt, t[0], t[1], t[2], (float *)t[3]);
        break;
    case K_FLASH_BWD_PREP:
        flash_bwd_prep<<<grid_for((size_t)qrows), THREADS, 0, s>>>(a, dt, t[0], t[1], (const float *)t[2], (float *)t[3]);
        break;
    case K_FLASH_BWD:
        flash_bwd_dq<<<warp_blocks(qrows), threads, 0, s>>>(a, dt, t[0], t[1], (const float *)t[2], t[3], t[4]);
        attn_bwd_dkv<<<warp_blocks(krows), threads, 0, s>>>(a, dt, t[0], t[1], NULL, NULL, (const float *)t[2], t[3],
                                                           t[5]);
        break;
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
