// attention.cu: CUDA unfused attention, one warp per query row (forward, dq) or per key row (dk, dv),
// the lanes splitting the head dimension (up to 256: 8 accumulators per lane) or the keys. The
// forward writes P and reads it back for P v; the backward keeps each row's sum(P * dP) in scratch;
// its key-row pass serves flash_attention.cu too. Attention with an additive score bias (T5's
// relative position bias) takes the keys on its lanes for the scores and the head dimension for o,
// summing the fp32 probabilities in key order as the CPU does (not the stored, rounded p); the score
// gradient needs no per-lane accumulators and so has no head-dimension limit. Each lane reads bias
// (or p) at its own keys before writing p (or ds) there, so p may be bias and ds may be p, as on the
// CPU.
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

void attn_dkv_launch(const attn_layout &a, int dt, const void *q, const void *kv, const void *p, const float *rowdot,
                     const float *stats, const void *dout, void *dkv, cudaStream_t s)
{
    attn_bwd_dkv<<<warp_blocks(a.B * a.Hkv * a.Tk), 32 * WARPS_PER_BLOCK, 0, s>>>(a, dt, q, kv, p, rowdot, stats, dout,
                                                                                   dkv);
}

CUDA_KERNEL(cuda_attn_fwd)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attention", a);
    attn_fwd<<<warp_blocks(a.B * a.H * a.Tq), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1], t[2], t[3]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_attn_bwd)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    const int64_t qrows = a.B * a.H * a.Tq;
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attention", a);
    float *rowdot = (float *)c->scratch_get(c->user, (size_t)qrows * sizeof(float));
    if (!rowdot)
        return cudaErrorMemoryAllocation;
    attn_bwd_dq<<<warp_blocks(qrows), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1], t[2], t[3], t[4],
                                                                             rowdot);
    attn_dkv_launch(a, k->dtype, t[0], t[1], t[2], rowdot, NULL, t[3], t[5], c->stream);
    c->scratch_put(c->user, rowdot);
    return cudaGetLastError();
}

// Scaled, biased score of key j for the query row at qo / prow.
__device__ inline float biased_score(const attn_layout &a, int dt, const void *q, int64_t qo, const void *kv,
                                     const qrow &w, const void *bias, size_t prow, int64_t j)
{
    return a.scale * lane_dot(q, qo, kv, attn_k_at(&a, w.b, j, w.g), dt, a.D) + ldt(bias, dt, prow + j);
}

__global__ void attn_bias_fwd(attn_layout a, int dt, const void *q, const void *kv, const void *bias, void *p, void *o)
{
    const int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    const int lane = threadIdx.x & 31;
    const qrow w = qrow_of(a, r);
    const int64_t qo = attn_q_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    const size_t prow = (size_t)r * a.Tk;
    float mx = -INFINITY, sum = 0.0f, acc[MAX_D_PER_LANE] = {0};
    for (int64_t j = lane; j < nk; j += 32)
        mx = fmaxf(mx, biased_score(a, dt, q, qo, kv, w, bias, prow, j));
    mx = warp_max(mx);
    for (int64_t j = lane; j < nk; j += 32)
        sum += expf(biased_score(a, dt, q, qo, kv, w, bias, prow, j) - mx);
    sum = warp_sum(sum);
    for (int64_t j0 = 0; j0 < a.Tk; j0 += 32) {
        const int64_t j = j0 + lane;
        const float pj = j < nk ? expf(biased_score(a, dt, q, qo, kv, w, bias, prow, j) - mx) / sum : 0.0f;
        if (j < a.Tk)
            stt(p, dt, prow + j, pj);
        for (int jj = 0; jj < 32 && j0 + jj < nk; jj++) {
            const float pb = __shfl_sync(0xffffffffu, pj, jj);
            const int64_t vo = attn_v_at(&a, w.b, j0 + jj, w.g);
            for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
                acc[m] += pb * ldt(kv, dt, vo + lane + 32 * m);
        }
    }
    for (int m = 0; m < MAX_D_PER_LANE && lane + 32 * m < a.D; m++)
        stt(o, dt, attn_o_at(&a, w.b, w.i, w.h) + lane + 32 * m, acc[m]);
}

// dS = P * (dP - sum_j P dP), dP_j = do . v_j; dP is recomputed in the second pass rather than
// stored, so ds (which may be 16-bit) never holds an intermediate.
__global__ void attn_dscores(attn_layout a, int dt, const void *kv, const void *p, const void *dout, void *ds)
{
    const int64_t r = warp_row();
    if (r >= a.B * a.H * a.Tq)
        return;
    const int lane = threadIdx.x & 31;
    const qrow w = qrow_of(a, r);
    const int64_t oo = attn_o_at(&a, w.b, w.i, w.h), nk = attn_keys(&a, w.i);
    const size_t prow = (size_t)r * a.Tk;
    float rowdot = 0.0f;
    for (int64_t j = lane; j < nk; j += 32)
        rowdot += ldt(p, dt, prow + j) * lane_dot(dout, oo, kv, attn_v_at(&a, w.b, j, w.g), dt, a.D);
    rowdot = warp_sum(rowdot);
    for (int64_t j = lane; j < a.Tk; j += 32) {
        float g = 0.0f;
        if (j < nk)
            g = ldt(p, dt, prow + j) * (lane_dot(dout, oo, kv, attn_v_at(&a, w.b, j, w.g), dt, a.D) - rowdot);
        stt(ds, dt, prow + j, g);
    }
}

CUDA_KERNEL(cuda_attn_bias_fwd)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    if (!attn_head_dim_fits(a))
        return attn_head_dim_fail(c, "attn_bias_fwd", a);
    attn_bias_fwd<<<warp_blocks(a.B * a.H * a.Tq), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1], t[2],
                                                                                          t[3], t[4]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_attn_dscores)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    attn_dscores<<<warp_blocks(a.B * a.H * a.Tq), 32 * WARPS_PER_BLOCK, 0, c->stream>>>(a, k->dtype, t[0], t[1], t[2],
                                                                                         t[3]);
    return cudaGetLastError();
}
