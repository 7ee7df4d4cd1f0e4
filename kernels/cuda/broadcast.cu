// broadcast.cu: CUDA twins of the kernels over {outer, repeat, inner}: broadcast multiply and add,
// expand (broadcast copy) and reduce_sum (its adjoint, summed in double as on the CPU). Elementwise
// kernels give each output element to one thread, which reads its inputs before writing it, so y may
// be an input of y's size (y = a, or any tensor when repeat = 1) exactly as on the CPU.
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

static cudaError_t bcast_launch(int op, const struct kernel_call *k, const void *a, const void *b, void *y,
                               const struct cuda_kernel_ctx *c)
{
    const int64_t *d = k->dims;
    const size_t n = (size_t)(d[0] * d[1] * d[2]);
    bcast_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(op, k->dtype, n, d[1], d[2], k->fparam[0], k->fparam[1], a, b, y);
    return cudaGetLastError();
}

CUDA_KERNEL(cuda_mul_bcast)
{
    return bcast_launch(BCAST_MUL, k, t[0], t[1], t[2], c);
}

CUDA_KERNEL(cuda_add_bcast)
{
    return bcast_launch(BCAST_ADD, k, t[0], t[1], t[2], c);
}

CUDA_KERNEL(cuda_expand)
{
    return bcast_launch(BCAST_EXPAND, k, NULL, t[0], t[1], c);
}

CUDA_KERNEL(cuda_reduce_sum)
{
    const int64_t O = k->dims[0], R = k->dims[1], I = k->dims[2];
    int lanes = 1;
    while (lanes < 32 && lanes < I)
        lanes *= 2;
    const int64_t work = O * ((I + lanes - 1) / lanes);
    const unsigned blocks = (unsigned)(work < 65536 ? work : 65536);
    reduce_sum_kernel<<<blocks, THREADS, 0, c->stream>>>(k->dtype, O, R, I, lanes, (double)k->fparam[0], t[0], t[1]);
    return cudaGetLastError();
}
