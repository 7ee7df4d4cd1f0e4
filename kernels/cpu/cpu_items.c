/* cpu_items.c: cpu_for_items (cpu_items.h) on cpu_for_chunks_of, whose tensor array carries the
 * items' context to each chunk untouched, and the items' scratch pool. */
#include "cpu/cpu_items.h"

#include <stdlib.h>

#include "cpu/cpu_vec.h"

struct items {
    void *ctx;
    cpu_item_fn *fn;
};

static void run_items(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const struct items *it = t[0];
    for (size_t i = i0; i < i0 + len; i++)
        it->fn(it->ctx, (int64_t)i);
}

void cpu_for_items(void *ctx, int64_t n, size_t work, cpu_item_fn *fn)
{
    struct items it = {ctx, fn};
    void *slot[1] = {&it};
    cpu_for_chunks_of(NULL, slot, (size_t)n, 1, work, run_items);
}

void cpu_pool_init(struct cpu_pool *p, size_t floats)
{
    pthread_mutex_init(&p->mu, NULL);
    p->floats = floats;
    p->n = 0;
}

float *cpu_pool_get(struct cpu_pool *p)
{
    float *buf = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n)
        buf = p->free[--p->n];
    pthread_mutex_unlock(&p->mu);
    return buf ? buf : calloc(p->floats ? p->floats : 1, sizeof *buf);
}

void cpu_pool_put(struct cpu_pool *p, float *buf)
{
    pthread_mutex_lock(&p->mu);
    if (p->n < CPU_POOL_MAX) {
        p->free[p->n++] = buf;
        buf = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    free(buf);
}

void cpu_pool_free(struct cpu_pool *p)
{
    while (p->n)
        free(p->free[--p->n]);
    pthread_mutex_destroy(&p->mu);
}
