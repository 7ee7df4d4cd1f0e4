/* attn_warp.cuh: what the warp-per-row CUDA attention kernels (attention.cu, flash_attention.cu)
 * share: warps per block, head-dim slices per lane and its limit, dot products split over a warp or
 * done by one lane, query-row indexing, and the key-row backward pass both backward kernels end with. */
#ifndef OOMLAB_ATTN_WARP_CUH
#define OOMLAB_ATTN_WARP_CUH

#include "attn_layout.h"
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

#define WARPS_PER_BLOCK 4
#define MAX_D_PER_LANE 8 // head dimension up to 32 * 8 = 256 where lanes hold slices of it

// Sum over d of a[ao + d] * b[bo + d], split over the warp's lanes; every lane gets the result.
__device__ inline float warp_dot(const void *a, int64_t ao, const void *b, int64_t bo, int dt, int64_t D)
{
    float s = 0.0f;
    for (int64_t d = threadIdx.x & 31; d < D; d += 32)
        s += ldt(a, dt, ao + d) * ldt(b, dt, bo + d);
    return warp_sum(s);
}

// One lane's whole dot product (used when lanes split the keys instead of the head dimension).
__device__ inline float lane_dot(const void *a, int64_t ao, const void *b, int64_t bo, int dt, int64_t D)
{
    float s = 0.0f;
    for (int64_t d = 0; d < D; d++)
        s += ldt(a, dt, ao + d) * ldt(b, dt, bo + d);
    return s;
}

__device__ inline int64_t warp_row()
{
    return blockIdx.x * (int64_t)WARPS_PER_BLOCK + (threadIdx.x >> 5);
}

// Query row r = (b * H + h) * Tq + i, the layout of p's rows, lse and stats.
struct qrow {
    int64_t b, h, i, g;
};

__device__ inline qrow qrow_of(const attn_layout &a, int64_t r)
{
    qrow q;
    q.i = r % a.Tq;
    q.h = r / a.Tq % a.H;
    q.b = r / (a.Tq * a.H);
    q.g = q.h / a.group;
    return q;
}

static inline unsigned warp_blocks(int64_t rows)
{
    return (unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

// Whether the head dimension fits the lanes' accumulators; if not, attn_head_dim_fail says so.
static inline bool attn_head_dim_fits(const attn_layout &a)
{
    return a.D <= 32 * MAX_D_PER_LANE;
}

static inline cudaError_t attn_head_dim_fail(const struct cuda_kernel_ctx *c, const char *what, const attn_layout &a)
{
    return cuda_kernel_fail(c, cudaErrorNotSupported, "CUDA %s supports head dimension up to %d (got %lld)", what,
                            32 * MAX_D_PER_LANE, (long long)a.D);
}

// The backward's key-row pass (attention.cu): dk and dv of key row (b, g, j) over the group's heads
// and queries, from the saved P and each query row's sum(P * dP) (unfused: p and rowdot), or
// recomputing P from stats = (lse, delta) (fused: p NULL).
void attn_dkv_launch(const attn_layout &a, int dt, const void *q, const void *kv, const void *p, const float *rowdot,
                     const float *stats, const void *dout, void *dkv, cudaStream_t s);

#endif
