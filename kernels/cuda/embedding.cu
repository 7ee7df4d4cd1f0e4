// embedding.cu: CUDA embeddings: the token lookup (one thread per output element; rows whose id is
// out of range get 0) and its backward, a scatter-add in fp32 (scratch unless the table is fp32);
// and the rotary position embedding: one thread per (token, pair index d) evaluates the angle once
// and rotates pair (d, d + D/2) of each of the first H heads; when y is not x, the rest of each row
// is copied bit for bit (the CPU's memmove). Every element is read and written by the same thread,
// so y may be x (rope on q, or on k inside kv) exactly as on the CPU.
#include "cuda/cuda_kernels.h"
#include "cuda/device_common.cuh"

__global__ void embedding_fwd(int dt, size_t n, int64_t V, int64_t C, const int64_t *ids, const void *table, void *y)
{
    GRID_LOOP(i, n)
    {
        int64_t id = ids[i / C];
        stt(y, dt, i, id >= 0 && id < V ? ldt(table, dt, id * C + i % C) : 0.0f);
    }
}

__global__ void embedding_scatter(int dt, size_t n, int64_t V, int64_t C, const int64_t *ids, const void *dy, float *acc)
{
    GRID_LOOP(i, n)
    {
        int64_t id = ids[i / C];
        if (id >= 0 && id < V)
            atomicAdd(&acc[id * C + i % C], ldt(dy, dt, i));
    }
}

__global__ void store_f32(int dt, size_t n, const float *src, void *dst)
{
    GRID_LOOP(i, n)
    stt(dst, dt, i, src[i]);
}

CUDA_KERNEL(cuda_embedding_fwd)
{
    const int64_t *d = k->dims;
    const size_t n = (size_t)(d[0] * d[2]);
    embedding_fwd<<<grid_for(n), THREADS, 0, c->stream>>>(k->dtype, n, d[1], d[2], (const int64_t *)t[0], t[1], t[2]);
    return cudaGetLastError();
}

// Embedding backward: scatter-add in fp32 (scratch unless the table is fp32), then convert.
CUDA_KERNEL(cuda_embedding_bwd)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const size_t n_table = (size_t)(V * C), n_rows = (size_t)(rows * C);
    float *acc = k->dtype == DT_F32 ? (float *)t[2] : (float *)c->scratch_get(c->user, n_table * sizeof(float));
    if (!acc)
        return cudaErrorMemoryAllocation;
    cudaError_t rc = cudaMemsetAsync(acc, 0, n_table * sizeof(float), c->stream);
    if (rc == cudaSuccess) {
        embedding_scatter<<<grid_for(n_rows), THREADS, 0, c->stream>>>(k->dtype, n_rows, V, C, (const int64_t *)t[0], t[1], acc);
        if (k->dtype != DT_F32)
            store_f32<<<grid_for(n_table), THREADS, 0, c->stream>>>(k->dtype, n_table, acc, t[2]);
        rc = cudaGetLastError();
    }
    if (acc != t[2])
        c->scratch_put(c->user, acc);
    return rc;
}

// n = B * T * D/2; token = b * T + t, whose position is t.
__global__ void rope_rotate(int dt, size_t n, int64_t T, int64_t H, int64_t D, int64_t row, float theta, int inverse,
                            const void *x, void *y)
{
    const int64_t half = D / 2;
    GRID_LOOP(e, n)
    {
        const int64_t token = (int64_t)e / half, d = (int64_t)e % half;
        float c, s, y0, y1;
        oom_rope_cos_sin(token % T, d, D, theta, inverse, &c, &s);
        for (int64_t h = 0; h < H; h++) {
            const size_t lo = (size_t)(token * row + h * D + d), hi = lo + (size_t)half;
            oom_rope_rotate(ldt(x, dt, lo), ldt(x, dt, hi), c, s, &y0, &y1);
            stt(y, dt, lo, y0);
            stt(y, dt, hi, y1);
        }
    }
}

// Columns [rotated, row) of every token row, x to y unchanged; n = tokens * (row - rotated).
__global__ void rope_copy_rest(int dt, size_t n, int64_t rotated, int64_t row, const void *x, void *y)
{
    const int64_t rest = row - rotated;
    GRID_LOOP(e, n)
    {
        const size_t at = (size_t)((int64_t)e / rest * row + rotated + (int64_t)e % rest);
        copy_elem(dt, x, at, y, at);
    }
}

CUDA_KERNEL(cuda_rope)
{
    const int64_t B = k->dims[0], T = k->dims[1], H = k->dims[2], D = k->dims[3], row = k->dims[4];
    const float theta = kernel_rope_theta(k);
    const size_t pairs = (size_t)(B * T * (D / 2)), rest = (size_t)(B * T * (row - H * D));
    rope_rotate<<<grid_for(pairs), THREADS, 0, c->stream>>>(k->dtype, pairs, T, H, D, row, theta, k->dims[5] != 0, t[0], t[1]);
    if (t[1] != t[0] && rest > 0)
        rope_copy_rest<<<grid_for(rest), THREADS, 0, c->stream>>>(k->dtype, rest, H * D, row, t[0], t[1]);
    return cudaGetLastError();
}
