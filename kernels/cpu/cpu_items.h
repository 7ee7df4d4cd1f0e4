/* cpu_items.h: a kernel's work as n independent items (a query block of attention, a band of an
 * image of a convolution) spread over the cores the CPU kernels may use (cpu_for_chunks_of). */
#ifndef OOMLAB_CPU_ITEMS_H
#define OOMLAB_CPU_ITEMS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Most floats of a BLAS call made inside an item: OpenBLAS runs a GEMM on one thread when
 * m n k <= 65536 * GEMM_MULTITHREAD_THRESHOLD (4 by default; OpenBLAS interface/gemm.c), so items
 * whose GEMMs stay at or under it never start BLAS threads under ours. */
#define CPU_BLAS_ONE_THREAD_MNK 262144

typedef void cpu_item_fn(void *ctx, int64_t item);

/* Runs fn(ctx, item) for every item in [0, n), on as many threads as a call costing about `work`
 * elementwise operations is given (one for small calls). Items run in no set order. */
void cpu_for_items(void *ctx, int64_t n, size_t work, cpu_item_fn *fn);

/* Scratch buffers of one size for the items of one call: an item takes one and gives it back, so each
 * thread reuses one buffer (and its pages) across its items; all are freed when the call ends. */
#define CPU_POOL_MAX 16
struct cpu_pool {
    pthread_mutex_t mu;
    size_t floats;
    unsigned n;                /* buffers in free */
    float *free[CPU_POOL_MAX]; /* given back, ready for the next item */
};

/* Buffers of `floats` floats, zeroed when first allocated (not when reused). */
void cpu_pool_init(struct cpu_pool *p, size_t floats);
/* A buffer, or NULL if out of memory. */
float *cpu_pool_get(struct cpu_pool *p);
void cpu_pool_put(struct cpu_pool *p, float *buf);
/* Frees the buffers; every one taken must have been given back. */
void cpu_pool_free(struct cpu_pool *p);

#endif
