// layout.cu: CUDA twins of the kernels that move elements: batched transpose through shared-memory
// tiles, strided block copies (copy_blocks with x = y keeps the CPU's order), and nearest 2x
// upsampling (+ backward, the sum of the 4 elements each input fed), one thread per output element.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

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

__global__ void upsample_fwd(int dt, size_t n_out, int64_t H, int64_t W, const void *x, void *y)
{
    GRID_LOOP(i, n_out)
    {
        size_t w = i % (2 * W), h = i / (2 * W) % (2 * H), plane = i / (4 * H * W);
        stt(y, dt, i, ldt(x, dt, (plane * H + h / 2) * W + w / 2));
    }
}

__global__ void upsample_bwd(int dt, size_t n_in, int64_t H, int64_t W, const void *dy, void *dx)
{
    GRID_LOOP(i, n_in)
    {
        size_t w = i % W, h = i / W % H, plane = i / (H * W);
        size_t top = (plane * 2 * H + 2 * h) * 2 * W + 2 * w, below = top + 2 * W;
        stt(dx, dt, i, ldt(dy, dt, top) + ldt(dy, dt, top + 1) + ldt(dy, dt, below) + ldt(dy, dt, below + 1));
    }
}

CUDA_KERNEL(cuda_upsample2x_fwd)
{
    const int64_t *d = k->dims;
    const size_t m = (size_t)(4 * d[0] * d[1] * d[2] * d[3]);
    upsample_fwd<<<grid_for(m), THREADS, 0, c->stream>>>(k->dtype, m, d[2], d[3], t[0], t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_upsample2x_bwd)
{
    const int64_t *d = k->dims;
    const size_t m = (size_t)(d[0] * d[1] * d[2] * d[3]);
    upsample_bwd<<<grid_for(m), THREADS, 0, c->stream>>>(k->dtype, m, d[2], d[3], t[0], t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_transpose)
{
    const int64_t B = k->dims[0], R = k->dims[1], C = k->dims[2];
    const int64_t tiles = B * ((R + TILE - 1) / TILE) * ((C + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(tiles < 65536 ? tiles : 65536);
    const dim3 threads(TILE, TILE_ROWS);
    if (k->dtype == DT_F32)
        transpose_kernel<<<blocks, threads, 0, c->stream>>>(B, R, C, (const uint32_t *)t[0], (uint32_t *)t[1]);
    else
        transpose_kernel<<<blocks, threads, 0, c->stream>>>(B, R, C, (const uint16_t *)t[0], (uint16_t *)t[1]);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_copy_blocks)
{
    const int64_t *d = k->dims;
    const blocks g = {d[0], d[1], d[2], d[3], d[4], d[5], d[6] != 0};
    const int64_t gap = g.src_off > g.dst_off ? g.src_off - g.dst_off : g.dst_off - g.src_off;
    if (t[0] != t[1] || (g.src_stride == g.dst_stride && (gap == 0 || gap >= g.len))) {
        const size_t n = (size_t)(g.outer * g.len);
        copy_blocks_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, g, t[0], t[1]);
    } else if (g.src_stride == g.dst_stride) { // each block stays inside its own stride: blocks are independent
        copy_blocks_in_order<<<grid_for((size_t)g.outer), THREADS, 0, c->stream>>>(k->dtype, g, t[1]);
    } else {
        copy_blocks_in_order<<<1, 1, 0, c->stream>>>(k->dtype, g, t[1]);
    }
    return cudaGetLastError();
}
