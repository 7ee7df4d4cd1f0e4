// pointwise_extra.cu: CUDA twins of the appended layout kernels: broadcast multiply and add, expand
// (broadcast copy), reduce_sum (its adjoint, summed in double as on the CPU), batched transpose
// through shared-memory tiles, and strided block copies. Elementwise kernels give each output element
// to one thread, which reads its inputs before writing it, so y may be an input of y's size (y = a,
// or any tensor when repeat = 1) exactly as on the CPU; copy_blocks with x = y keeps the CPU's order.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

enum bcast_op { BCAST_MUL, BCAST_ADD, BCAST_EXPAND };

// y[o, r, i] from a[o, r, i] (not read by expand) and b[o, i]; n = outer * repeat * inner.
__global__ void bcast_kernel(int op, int dt, size_t n, int64_t R, int64_t I, float alpha, float beta, const void *a,
                             const void *b, void *y)
{
    GRID_LOOP(i, n)
    {
        float bv = ldt(b, dt, i / (size_t)(R * I) * I + i % I);
        float v = op == BCAST_MUL   ? ldt(a, dt, i) * bv
                  : op == BCAST_ADD ? alpha * ldt(a, dt, i) + beta * bv
                                    : alpha * bv;
        stt(y, dt, i, v);
    }
}

// y[o, i] = alpha * sum over r of x[o, r, i], in double. A block covers `lanes` consecutive i (all of
// inner when it is smaller than 32) and splits r over blockDim.x / lanes slices, each summing its
// rows in order; slice 0 then adds the slices' sums in order (deterministic).
__global__ void reduce_sum_kernel(int dt, int64_t O, int64_t R, int64_t I, int lanes, double alpha, const void *x,
                                  void *y)
{
    __shared__ double part[THREADS];
    const int lane = threadIdx.x % lanes, slice = threadIdx.x / lanes, slices = blockDim.x / lanes;
    const int64_t chunks = (I + lanes - 1) / lanes;
    for (int64_t w = blockIdx.x; w < O * chunks; w += gridDim.x) {
        const int64_t o = w / chunks, i = w % chunks * lanes + lane;
        double acc = 0.0;
        if (i < I)
            for (int64_t r = slice; r < R; r += slices)
                acc += ldt(x, dt, (size_t)((o * R + r) * I + i));
        part[threadIdx.x] = acc;
        __syncthreads();
        if (slice == 0 && i < I) {
            double sum = 0.0;
            for (int j = 0; j < slices; j++)
                sum += part[j * lanes + lane];
            stt(y, dt, (size_t)(o * I + i), (float)(alpha * sum));
        }
        __syncthreads();
    }
}

#define TILE 32
#define TILE_ROWS 8

// y[b, j, i] = x[b, i, j] bit for bit, one 32 x 32 tile at a time through shared memory (block 32 x 8).
template <typename E>
__global__ void transpose_kernel(int64_t B, int64_t R, int64_t C, const E *x, E *y)
{
    __shared__ E tile[TILE][TILE + 1];
    const int64_t tr = (R + TILE - 1) / TILE, tc = (C + TILE - 1) / TILE;
    for (int64_t t = blockIdx.x; t < B * tr * tc; t += gridDim.x) {
        const int64_t b = t / (tr * tc), r0 = t / tc % tr * TILE, c0 = t % tc * TILE;
        const E *xb = x + b * R * C;
        E *yb = y + b * R * C;
        for (int k = threadIdx.y; k < TILE; k += TILE_ROWS)
            if (r0 + k < R && c0 + threadIdx.x < C)
                tile[k][threadIdx.x] = xb[(r0 + k) * C + c0 + threadIdx.x];
        __syncthreads();
        for (int k = threadIdx.y; k < TILE; k += TILE_ROWS)
            if (c0 + k < C && r0 + threadIdx.x < R)
                yb[(c0 + k) * R + r0 + threadIdx.x] = tile[threadIdx.x][k];
        __syncthreads();
    }
}

// The blocks' geometry: dims {outer, len, src_stride, src_off, dst_stride, dst_off, accumulate}.
struct blocks {
    int64_t outer, len, src_stride, src_off, dst_stride, dst_off;
    int accumulate;
};

// One thread per element: y[o * dst_stride + dst_off + i] (+)= x[o * src_stride + src_off + i].
__global__ void copy_blocks_kernel(int dt, blocks g, const void *x, void *y)
{
    GRID_LOOP(e, g.outer * g.len)
    {
        const int64_t o = (int64_t)e / g.len, i = (int64_t)e % g.len;
        const size_t src = (size_t)(o * g.src_stride + g.src_off + i), dst = (size_t)(o * g.dst_stride + g.dst_off + i);
        if (g.accumulate)
            stt(y, dt, dst, ldt(y, dt, dst) + ldt(x, dt, src));
        else
            copy_elem(dt, x, src, y, dst);
    }
}

// x is y and a block's source overlaps its destination: the CPU's loop, one thread per block with
// memmove's direction (or accumulation in increasing i). Launched with one thread it also keeps the
// CPU's block order, for blocks that could overlap each other.
__global__ void copy_blocks_in_order(int dt, blocks g, void *y)
{
    GRID_LOOP(o, g.outer)
    {
        const size_t src = (size_t)((int64_t)o * g.src_stride + g.src_off);
        const size_t dst = (size_t)((int64_t)o * g.dst_stride + g.dst_off), len = (size_t)g.len;
        if (g.accumulate)
            for (size_t i = 0; i < len; i++)
                stt(y, dt, dst + i, ldt(y, dt, dst + i) + ldt(y, dt, src + i));
        else if (dst > src)
            for (size_t i = len; i-- > 0;)
                copy_elem(dt, y, src + i, y, dst + i);
        else
            for (size_t i = 0; i < len; i++)
                copy_elem(dt, y, src + i, y, dst + i);
    }
}

static cudaError_t copy_blocks(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int64_t *d = k->dims;
    const blocks g = {d[0], d[1], d[2], d[3], d[4], d[5], d[6] != 0};
    const int64_t gap = g.src_off > g.dst_off ? g.src_off - g.dst_off : g.dst_off - g.src_off;
    if (t[0] != t[1] || (g.src_stride == g.dst_stride && (gap == 0 || gap >= g.len))) {
        const size_t n = (size_t)(g.outer * g.len);
        copy_blocks_kernel<<<grid_for(n), THREADS, 0, s>>>(k->dtype, g, t[0], t[1]);
    } else if (g.src_stride == g.dst_stride) { // each block stays inside its own stride: blocks are independent
        copy_blocks_in_order<<<grid_for((size_t)g.outer), THREADS, 0, s>>>(k->dtype, g, t[1]);
    } else {
        copy_blocks_in_order<<<1, 1, 0, s>>>(k->dtype, g, t[1]);
    }
    return cudaGetLastError();
}

static cudaError_t transpose(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int64_t B = k->dims[0], R = k->dims[1], C = k->dims[2];
    const int64_t tiles = B * ((R + TILE - 1) / TILE) * ((C + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(tiles < 65536 ? tiles : 65536);
    const dim3 threads(TILE, TILE_ROWS);
    if (k->dtype == DT_F32)
        transpose_kernel<<<blocks, threads, 0, s>>>(B, R, C, (const uint32_t *)t[0], (uint32_t *)t[1]);
    else
        transpose_kernel<<<blocks, threads, 0, s>>>(B, R, C, (const uint16_t *)t[0], (uint16_t *)t[1]);
    return cudaGetLastError();
}

static cudaError_t reduce_sum(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    int lanes = 1;
    while (lanes < 32 && lanes < I)
        lanes *= 2;
    const int64_t work = O * ((I + lanes - 1) / lanes);
    const unsigned blocks = (unsigned)(work < 65536 ? work : 65536);
    reduce_sum_kernel<<<blocks, THREADS, 0, s>>>(k->dtype, O, R, I, lanes, (double)k->fparam[0], t[0], t[1]);
    return cudaGetLastError();
}

cudaError_t cuda_pointwise_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s)
{
    const int64_t *d = k->dims;
    const size_t n = (size_t)(d[0] * d[1] * d[2]);
    const float alpha = k->fparam[0], beta = k->fparam[1];
    switch (k->kernel) {
    case K_MUL_BCAST:
        bcast_kernel<<<grid_for(n), THREADS, 0, s>>>(BCAST_MUL, k->dtype, n, d[1], d[2], alpha, beta, t[0], t[1], t[2]);
        break;
    case K_ADD_BCAST:
        bcast_kernel<<<grid_for(n), THREADS, 0, s>>>(BCAST_ADD, k->dtype, n, d[1], d[2], alpha, beta, t[0], t[1], t[2]);
        break;
    case K_EXPAND:
        bcast_kernel<<<grid_for(n), THREADS, 0, s>>>(BCAST_EXPAND, k->dtype, n, d[1], d[2], alpha, beta, NULL, t[0], t[1]);
        break;
    case K_REDUCE_SUM:
        return reduce_sum(k, t, s);
    case K_TRANSPOSE:
        return transpose(k, t, s);
    case K_COPY_BLOCKS:
        return copy_blocks(k, t, s);
    default:
        return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
