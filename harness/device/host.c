/* host.c: the host device (see host.h). Segments are anonymous mmaps; expandable segments reserve address
 * space with PROT_NONE and map pages by making them readable and writable (and drop them with
 * MADV_DONTNEED), like cuMemAddressReserve/cuMemMap. Kernels run through the kernel table's CPU code. */
#include "device/host.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels.h"

struct host {
    uint64_t used;
};

static struct host *host_of(struct device *d)
{
    return d->impl;
}

static bool fits(struct device *d, uint64_t size)
{
    return host_of(d)->used + size <= d->total;
}

static enum dev_status host_seg_alloc(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return errno == ENOMEM ? DEV_OOM : (err_set(e, ERR_INTERNAL, "host: mmap of %llu bytes: %s",
                                                    (unsigned long long)size, strerror(errno)), DEV_ERROR);
    host_of(d)->used += size;
    *addr = (uint64_t)(uintptr_t)p;
    return DEV_OK;
}

static void host_seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    munmap((void *)(uintptr_t)addr, size);
    host_of(d)->used -= size;
}

static enum dev_status host_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return err_set(e, ERR_INTERNAL, "host: reserving %llu bytes of address space: %s", (unsigned long long)size,
                       strerror(errno)), DEV_ERROR;
    *addr = (uint64_t)(uintptr_t)p;
    return DEV_OK;
}

static void host_va_release(struct device *d, uint64_t addr, uint64_t size)
{
    munmap((void *)(uintptr_t)addr, size);
}

static enum dev_status host_map(struct device *d, uint64_t addr, uint64_t size, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    if (mprotect((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE))
        return err_set(e, ERR_INTERNAL, "host: mapping %llu bytes: %s", (unsigned long long)size, strerror(errno)),
               DEV_ERROR;
    host_of(d)->used += size;
    return DEV_OK;
}

static void host_unmap(struct device *d, uint64_t addr, uint64_t size)
{
    madvise((void *)(uintptr_t)addr, size, MADV_DONTNEED);
    mprotect((void *)(uintptr_t)addr, size, PROT_NONE);
    host_of(d)->used -= size;
}

static void host_mem_info(struct device *d, uint64_t *free_bytes, uint64_t *total)
{
    *free_bytes = d->total - host_of(d)->used;
    *total = d->total;
}

static int host_launch(struct device *d, const struct kernel_call *k, const uint64_t *addrs, struct err *e)
{
    void *ptrs[KERNEL_MAX_TENSORS];
    for (unsigned i = 0; i < KERNEL_MAX_TENSORS; i++)
        ptrs[i] = (void *)(uintptr_t)addrs[i];
    return kernel_run_cpu(k, ptrs, e);
}

static void host_sync(struct device *d)
{
}

static void host_destroy(struct device *d)
{
    if (d) {
        free(d->impl);
        free(d);
    }
}

static const struct device_ops host_ops = {
    .seg_alloc = host_seg_alloc,
    .seg_free = host_seg_free,
    .va_reserve = host_va_reserve,
    .va_release = host_va_release,
    .map = host_map,
    .unmap = host_unmap,
    .mem_info = host_mem_info,
    .launch = host_launch,
    .sync = host_sync,
    .destroy = host_destroy,
};

static uint64_t half_of_physical_memory(void)
{
    hwloc_topology_t topo;
    uint64_t total = 0;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        hwloc_obj_t root = hwloc_get_root_obj(topo);
        total = root->total_memory;
    }
    hwloc_topology_destroy(topo);
    return total / 2;
}

struct device *host_device_create(uint64_t capacity, struct err *e)
{
    if (!capacity && !(capacity = half_of_physical_memory())) {
        err_set(e, ERR_INTERNAL, "host: cannot read the machine's memory size; give --capacity");
        return NULL;
    }
    struct device *d = calloc(1, sizeof *d);
    struct host *h = calloc(1, sizeof *h);
    if (!d || !h) {
        free(d);
        free(h);
        err_set(e, ERR_INTERNAL, "out of host memory");
        return NULL;
    }
    d->ops = &host_ops;
    snprintf(d->name, sizeof d->name, "host");
    d->total = capacity;
    d->measured = true;
    d->impl = h;
    return d;
}
