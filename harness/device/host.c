/* host.c: the host device (see host.h). All memory lives in one large PROT_NONE address-space arena,
 * and segments and expandable reservations are placed in it by the sim device's policy (each above every
 * earlier one, 1 GiB apart, never reused), so the allocator model breaks best-fit ties exactly as on sim
 * and a host run's memory figures equal the sim run's. Mapping makes pages readable and writable;
 * unmapping drops them (MADV_DONTNEED) and makes them inaccessible again, like cuMemMap/cuMemUnmap.
 * Kernels run through the kernel table's CPU code on the real data, each timed with CLOCK_MONOTONIC
 * (the calls are synchronous, so the clock sees the whole kernel). */
#include "device/host.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"

#define ARENA_BYTES (16ULL << 40) /* 16 TiB of address space, reserved, never committed as a whole */
#define GAP (1ULL << 30)

struct host {
    uint64_t used;
    uint64_t arena, next;  /* arena base; next placement */
    double kernel_seconds; /* measured since the last kernel_seconds() */
};

/* The next placement (or 0 when the arena is exhausted). */
static uint64_t place(struct host *h, uint64_t size)
{
    uint64_t at = h->next;
    if (at + size > h->arena + ARENA_BYTES)
        return 0;
    h->next = at + size + GAP;
    return at;
}

static int protect(uint64_t addr, uint64_t size, int prot)
{
    void *p = mmap((void *)(uintptr_t)addr, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

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
    uint64_t at = place(host_of(d), size);
    if (!at)
        return err_set(e, ERR_INTERNAL, "host: the 16 TiB address arena is exhausted"), DEV_ERROR;
    if (protect(at, size, PROT_READ | PROT_WRITE))
        return errno == ENOMEM ? DEV_OOM : (err_set(e, ERR_INTERNAL, "host: mapping %llu bytes: %s",
                                                    (unsigned long long)size, strerror(errno)), DEV_ERROR);
    host_of(d)->used += size;
    *addr = at;
    return DEV_OK;
}

static void host_seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    protect(addr, size, PROT_NONE); /* back to reserved-only: the pages are returned to the OS */
    host_of(d)->used -= size;
}

static enum dev_status host_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e)
{
    uint64_t at = place(host_of(d), size);
    if (!at)
        return err_set(e, ERR_INTERNAL, "host: the 16 TiB address arena is exhausted"), DEV_ERROR;
    *addr = at; /* already reserved as part of the arena */
    return DEV_OK;
}

static void host_va_release(struct device *d, uint64_t addr, uint64_t size)
{
    /* the range stays reserved in the arena and is never reused, as on sim */
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
    protect(addr, size, PROT_NONE);
    host_of(d)->used -= size;
}

static void host_mem_info(struct device *d, uint64_t *free_bytes, uint64_t *total)
{
    *free_bytes = d->total - host_of(d)->used;
    *total = d->total;
}

static int host_launch(struct device *d, const struct kernel_call *k, const uint64_t *addrs, struct err *e)
{
    void *ptrs[KERNEL_MAX_TENSORS] = {0};
    for (unsigned i = 0; i < k->ntensors && i < KERNEL_MAX_TENSORS; i++)
        ptrs[i] = (void *)(uintptr_t)addrs[i];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = kernel_run_cpu(k, ptrs, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    host_of(d)->kernel_seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

static double host_kernel_seconds(struct device *d)
{
    double t = host_of(d)->kernel_seconds;
    host_of(d)->kernel_seconds = 0;
    return t;
}

static void host_destroy(struct device *d)
{
    if (d) {
        munmap((void *)(uintptr_t)host_of(d)->arena, ARENA_BYTES);
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
    .kernel_seconds = host_kernel_seconds,
    .destroy = host_destroy,
};

/* The cgroup v2 memory limit of this process, 0 if none or unreadable. */
static uint64_t cgroup_memory_limit(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long limit = 0;
    if (f) {
        if (fscanf(f, "%llu", &limit) != 1) /* "max": no limit */
            limit = 0;
        fclose(f);
    }
    return limit;
}

/* Physical memory from the kernel's own count (sysinfo), not hwloc's: hwloc sums the NUMA nodes'
 * memory, which on some VMs leaves out memory attached to no node (seen: node0 6.3 of 23.5 GiB). */
uint64_t host_memory_bytes(const char **source)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0, limit = cgroup_memory_limit();
    int limited = limit && (!ram || limit < ram);
    if (source)
        *source = limited ? "cgroup limit" : "RAM";
    return limited ? limit : ram;
}

struct device *host_device_create(uint64_t capacity, struct err *e)
{
    struct device *d = calloc(1, sizeof *d);
    struct host *h = calloc(1, sizeof *h);
    if (!d || !h) {
        free(d);
        free(h);
        err_set(e, ERR_INTERNAL, "out of host memory");
        return NULL;
    }
    void *arena = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED) {
        free(d);
        free(h);
        err_set(e, ERR_INTERNAL, "host: cannot reserve %llu bytes of address space: %s",
                (unsigned long long)ARENA_BYTES, strerror(errno));
        return NULL;
    }
    h->arena = h->next = (uint64_t)(uintptr_t)arena;
    d->ops = &host_ops;
    d->kind = &host_device_kind;
    snprintf(d->name, sizeof d->name, "host");
    snprintf(d->timed_by, sizeof d->timed_by, "CLOCK_MONOTONIC around each CPU kernel");
    d->total = capacity;
    d->cublas_workspace_bytes = CUBLAS_WORKSPACE_PRE_SM90_BYTES;
    d->impl = h;
    return d;
}

/* SIZE or FRACTION of the host's memory. */
static int host_parse(const char *arg, struct device_spec *out, struct err *e)
{
    return arg ? capacity_parse(arg, &out->own, e) : 0;
}

static void host_probe(struct device_probe *out)
{
    hwloc_topology_t topo;
    int cores = 0, pus = 0;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    }
    hwloc_topology_destroy(topo);
    const char *source;
    uint64_t memory = host_memory_bytes(&source);
    char all[32];
    size_format_pytorch(memory, all, sizeof all);
    out->available = memory > 0;
    size_format_pytorch(memory / 2, out->capacity, sizeof out->capacity);
    snprintf(out->notes, sizeof out->notes,
             "real host memory under a capacity (default half of %s %s), CPU kernels on real data; %d cores, "
             "%d hardware threads (hwloc)",
             all, source, cores, pus);
}

/* The spec's own size or share of the host's memory, unless --capacity gives one. */
static struct device *host_open(const struct device_spec *spec, const struct device_open_options *opt, struct err *e)
{
    struct capacity capacity = opt->capacity.bytes || opt->capacity.fraction > 0.0 ? opt->capacity : spec->own;
    const uint64_t memory = host_memory_bytes(NULL);
    uint64_t total = capacity_resolve(capacity, memory, memory / 2);
    if (!total) {
        err_set(e, ERR_INTERNAL, "device %s: cannot read the machine's memory size; give --capacity SIZE", spec->text);
        return NULL;
    }
    return host_device_create(total, e);
}

const struct device_kind host_device_kind = {
    .name = "host",
    .forms = "host, host:SIZE, host:FRACTION",
    .flags = DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_DETERMINISTIC_PLACEMENT,
    .parse = host_parse,
    .probe = host_probe,
    .open = host_open,
};
