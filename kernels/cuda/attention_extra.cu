// attention_extra.cu: CUDA twins of attention with an additive score bias (T5's relative position
// bias) and of the score gradient, one warp per query row as in attention.cu. The forward's lanes take
// the keys for the scores and the head dimension for o, which sums the fp32 probabilities in key
// order as the CPU does (not the stored, rounded p); head dimension up to 256. The score gradient
// needs no per-lane accumulators, so it has no head-dimension limit. Each lane reads bias (or p) at
// its own keys before writing p (or ds) there, so p may be bias and ds may be p, as on the CPU.
#include <stdio.h>

#include "cuda/attn_warp.cuh"
#include "cuda/cuda_kernels.h"

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

cudaError_t cuda_attention_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s, char *why,
                                        size_t why_len)
{
    const attn_layout a = attn_layout_of(k->dims, k->fparam[0]);
    const unsigned blocks = warp_blocks(a.B * a.H * a.Tq), threads = 32 * WARPS_PER_BLOCK;
    switch (k->kernel) {
    case K_ATTN_BIAS_FWD:
        if (a.D > 32 * MAX_D_PER_LANE) {
            snprintf(why, why_len, "CUDA attn_bias_fwd supports head dimension up to %d (got %lld)",
                     32 * MAX_D_PER_LANE, (long long)a.D);
            return cudaErrorNotSupported;
        }
        attn_bias_fwd<<<blocks, threads, 0, s>>>(a, k->dtype, t[0], t[1], t[2], t[3], t[4]);
        break;
    case K_ATTN_DSCORES:
        attn_dscores<<<blocks, threads, 0, s>>>(a, k->dtype, t[0], t[1], t[2], t[3]);
        break;
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
