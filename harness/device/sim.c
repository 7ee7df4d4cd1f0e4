/* sim.c: the simulated device (see sim.h). */
#include "device/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/size.h"

struct sim {
    uint64_t context, used, next_base;
    const struct gpu_profile *profile;
    uint64_t *forced;
    size_t nforced, iforced;
};

static struct sim *sim_of(struct device *d)
{
    return d->impl;
}

static uint64_t place(struct sim *s, uint64_t size)
{
    uint64_t base = s->next_base;
    if (s->iforced < s->nforced)
        base = s->forced[s->iforced++];
    if (base + size + GiB > s->next_base)
        s->next_base = base + size + GiB;
    return base;
}

static bool fits(struct device *d, uint64_t size)
{
    struct sim *s = sim_of(d);
    return s->used + s->context + size <= d->total;
}

static enum dev_status sim_seg_alloc(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    sim_of(d)->used += size;
    *addr = place(sim_of(d), size);
    return DEV_OK;
}

static void sim_seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    sim_of(d)->used -= size;
}

static enum dev_status sim_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e)
{
    struct sim *s = sim_of(d);
    uint64_t base = s->next_base;
    s->next_base = base + size + GiB;
    *addr = base;
    return DEV_OK;
}

static void sim_va_release(struct device *d, uint64_t addr, uint64_t size)
{
}

static enum dev_status sim_map(struct device *d, uint64_t addr, uint64_t size, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    sim_of(d)->used += size;
    return DEV_OK;
}

static void sim_unmap(struct device *d, uint64_t addr, uint64_t size)
{
    sim_of(d)->used -= size;
}

static void sim_mem_info(struct device *d, uint64_t *free_bytes, uint64_t *total)
{
    struct sim *s = sim_of(d);
    uint64_t taken = s->used + s->context;
    *free_bytes = taken < d->total ? d->total - taken : 0;
    *total = d->total;
}

static void sim_sync(struct device *d)
{
}

static void sim_destroy(struct device *d)
{
    if (!d)
        return;
    free(sim_of(d)->forced);
    free(d->impl);
    free(d);
}

static const struct device_ops sim_ops = {
    .seg_alloc = sim_seg_alloc,
    .seg_free = sim_seg_free,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .mem_info = sim_mem_info,
    .launch = NULL,
    .sync = sim_sync,
    .destroy = sim_destroy,
};

struct device *sim_device_create(const char *name, uint64_t total, uint64_t context, const struct gpu_profile *profile)
{
    struct device *d = calloc(1, sizeof *d);
    struct sim *s = calloc(1, sizeof *s);
    if (!d || !s) {
        free(d);
        free(s);
        return NULL;
    }
    *s = (struct sim){.context = context, .next_base = 1ULL << 40, .profile = profile};
    d->ops = &sim_ops;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->total = total;
    d->measured = false;
    d->impl = s;
    return d;
}

int sim_device_force_addresses(struct device *d, const uint64_t *addrs, size_t n)
{
    struct sim *s = sim_of(d);
    free(s->forced);
    s->forced = n ? malloc(n * sizeof *addrs) : NULL;
    s->nforced = s->iforced = 0;
    if (n && !s->forced)
        return -1;
    if (n)
        memcpy(s->forced, addrs, n * sizeof *addrs);
    s->nforced = n;
    return 0;
}

const struct gpu_profile *sim_device_profile(const struct device *d)
{
    return ((const struct sim *)d->impl)->profile;
}

bool device_is_sim(const struct device *d)
{
    return d->ops == &sim_ops;
}
