/* host.c: the host device (see host.h). The model sees addresses placed by the sim device's policy
 * (each segment or reservation above every earlier one, 1 GiB apart, never reused), so the allocator
 * model breaks best-fit ties exactly as on sim and a host run's memory figures equal the sim run's;
 * behind each range is real memory of its own size wherever the OS puts it, found again through a
 * sorted table when a kernel runs, so the process needs address space for what it holds, not for the
 * model's addresses (any `ulimit -v` above the capacity works). An expandable reservation is a
 * PROT_NONE mapping of its size; mapping makes pages readable and writable, unmapping returns them to
 * the OS and makes them inaccessible again, like cuMemMap/cuMemUnmap.
 * Kernels run through the kernel table's CPU code on the real data, each timed with CLOCK_MONOTONIC
 * (the calls are synchronous, so the clock sees the whole kernel). */
#include "device/host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "device/topology.h"
#include "kernels.h"
#include "util/vec.h"

#define FIRST_BASE (1ULL << 40) /* the sim's address policy: first base 2^40, next = base + size + 1 GiB */
#define GAP (1ULL << 30)

/* A range of the model's address space and the real memory behind it: a segment (cudaMalloc), or a
 * virtual reservation for expandable segments, backed by a PROT_NONE reservation of its own size in
 * which mapped pages become readable and writable, so a tensor across mapped pages is contiguous. */
struct range {
    uint64_t addr, size; /* the model's addresses */
    char *real;
};

struct host {
    uint64_t used;
    uint64_t next;            /* the next model address */
    struct range *ranges;     /* sorted by addr */
    size_t nranges, ranges_cap;
    double kernel_seconds;    /* measured since the last kernel_seconds() */
};

static struct host *host_of(struct device *d)
{
    return d->impl;
}

/* The range holding addr, or NULL. */
static struct range *range_of(struct host *h, uint64_t addr)
{
    size_t lo = 0, hi = h->nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (h->ranges[mid].addr + h->ranges[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < h->nranges && h->ranges[lo].addr <= addr ? &h->ranges[lo] : NULL;
}

/* A new range above every earlier one (addresses are never reused, as on sim) backed by `size` bytes
 * of real address space with protection prot; 0 with *addr set, or an errno. */
static int range_add(struct host *h, uint64_t size, int prot, uint64_t *addr)
{
    if (vec_grow((void **)&h->ranges, &h->ranges_cap, h->nranges + 1, sizeof *h->ranges))
        return ENOMEM;
    void *real = mmap(NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (real == MAP_FAILED)
        return errno;
    h->ranges[h->nranges++] = (struct range){h->next, size, real};
    *addr = h->next;
    h->next += size + GAP;
    return 0;
}

static void range_remove(struct host *h, uint64_t addr)
{
    struct range *r = range_of(h, addr);
    if (!r)
        return;
    munmap(r->real, r->size);
    size_t i = (size_t)(r - h->ranges);
    memmove(&h->ranges[i], &h->ranges[i + 1], (h->nranges - i - 1) * sizeof *h->ranges);
    h->nranges--;
}

static bool fits(struct device *d, uint64_t size)
{
    return host_of(d)->used + size <= d->total;
}

static enum dev_status host_seg_alloc(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    int err = range_add(host_of(d), size, PROT_READ | PROT_WRITE, addr);
    if (err == ENOMEM)
        return DEV_OOM;
    if (err)
        return err_set(e, ERR_INTERNAL, "host: mapping %llu bytes: %s", (unsigned long long)size, strerror(err)),
               DEV_ERROR;
    host_of(d)->used += size;
    return DEV_OK;
}

static void host_seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    range_remove(host_of(d), addr);
    host_of(d)->used -= size;
}

static enum dev_status host_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e)
{
    int err = range_add(host_of(d), size, PROT_NONE, addr);
    if (err)
        return err_set(e, ERR_INTERNAL, "host: reserving %llu bytes of address space for expandable segments: %s",
                       (unsigned long long)size, strerror(err)),
               DEV_ERROR;
    return DEV_OK;
}

static void host_va_release(struct device *d, uint64_t addr, uint64_t size)
{
    range_remove(host_of(d), addr);
}

/* The real address of [addr, addr + size) inside one range, or NULL. */
static char *real_of(struct host *h, uint64_t addr, uint64_t size)
{
    struct range *r = range_of(h, addr);
    return r && addr + size <= r->addr + r->size ? r->real + (addr - r->addr) : NULL;
}

void *host_device_pointer(struct device *d, uint64_t addr)
{
    return real_of(host_of(d), addr, 1);
}

static enum dev_status host_map(struct device *d, uint64_t addr, uint64_t size, struct err *e)
{
    if (!fits(d, size))
        return DEV_OOM;
    char *real = real_of(host_of(d), addr, size);
    if (!real)
        return err_set(e, ERR_INTERNAL, "host: mapping %llu bytes at 0x%llx outside any reservation",
                       (unsigned long long)size, (unsigned long long)addr),
               DEV_ERROR;
    if (mprotect(real, size, PROT_READ | PROT_WRITE))
        return errno == ENOMEM ? DEV_OOM
                               : (err_set(e, ERR_INTERNAL, "host: mapping %llu bytes: %s", (unsigned long long)size,
                                          strerror(errno)),
                                  DEV_ERROR);
    host_of(d)->used += size;
    return DEV_OK;
}

static void host_unmap(struct device *d, uint64_t addr, uint64_t size)
{
    char *real = real_of(host_of(d), addr, size);
    if (real) /* a fresh PROT_NONE mapping in place returns the pages to the OS */
        mmap(real, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    host_of(d)->used -= size;
}

static void host_mem_info(struct device *d, uint64_t *free_bytes, uint64_t *total)
{
    *free_bytes = d->total - host_of(d)->used;
    *total = d->total;
}

static int host_launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost, const uint64_t *addrs,
                       struct err *e)
{
    void *ptrs[KERNEL_MAX_TENSORS] = {0};
    for (unsigned i = 0; i < k->ntensors && i < KERNEL_MAX_TENSORS; i++) {
        uint64_t bytes = kernel_tensor_bytes(k, i);
        if (addrs[i] && !(ptrs[i] = real_of(host_of(d), addrs[i], bytes ? bytes : 1)))
            return err_set(e, ERR_INTERNAL, "host: kernel tensor %u at 0x%llx is not in device memory", i,
                           (unsigned long long)addrs[i]);
    }
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
    if (!d)
        return;
    struct host *h = host_of(d);
    for (size_t i = 0; i < h->nranges; i++)
        munmap(h->ranges[i].real, h->ranges[i].size);
    free(h->ranges);
    free(h);
    free(d);
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

static uint64_t read_limit(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long limit = 0;
    if (f) {
        if (fscanf(f, "%llu", &limit) != 1) /* "max": no limit */
            limit = 0;
        fclose(f);
    }
    return limit;
}

/* The cgroup memory limit of this process (v2, else v1, whose "no limit" is a huge number the caller
 * compares with RAM), 0 if none or unreadable. */
static uint64_t cgroup_memory_limit(void)
{
    uint64_t v2 = read_limit("/sys/fs/cgroup/memory.max");
    return v2 ? v2 : read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
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
    h->next = FIRST_BASE;
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
    struct host_topology topo;
    struct err te = {0};
    if (host_topology_read(&topo, &te))
        topo = (struct host_topology){0};
    const char *source;
    uint64_t memory = host_memory_bytes(&source);
    char all[32];
    size_format_pytorch(memory, all, sizeof all);
    out->available = memory > 0;
    size_format_pytorch(memory / 2, out->capacity, sizeof out->capacity);
    struct err e = {0};
    if (kernel_cpu_load(&e)) { /* its kernels need the BLAS, which is loaded only now */
        out->available = false;
        snprintf(out->notes, sizeof out->notes, "unavailable: %.700s", e.msg);
        return;
    }
    snprintf(out->notes, sizeof out->notes,
             "real host memory under a capacity (default half of %s %s), CPU kernels on real data; %d cores, "
             "%d hardware threads (hwloc)",
             all, source, topo.cores, topo.pus);
}

/* The spec's own size or share of the host's memory, unless --capacity gives one. */
static struct device *host_open(const struct device_spec *spec, const struct device_open_options *opt, struct err *e)
{
    struct capacity capacity = opt->capacity.bytes || opt->capacity.fraction > 0.0 ? opt->capacity : spec->own;
    const uint64_t memory = host_memory_bytes(NULL);
    uint64_t total;
    if (capacity_resolve(capacity, memory, memory / 2, &total, e)) {
        err_prefix(e, "device %s: ", spec->text);
        return NULL;
    }
    if (!total) {
        err_set(e, ERR_INTERNAL, "device %s: cannot read the machine's memory size; give --capacity SIZE", spec->text);
        return NULL;
    }
    if (memory && total > memory / 10 * 9) { /* the host device takes real memory: the OS needs some too */
        char want[32], all[32], most[32];
        size_format_pytorch(total, want, sizeof want);
        size_format_pytorch(memory, all, sizeof all);
        size_format_flag(memory / 10 * 9, most, sizeof most);
        err_set(e, ERR_INPUT,
                "device %s: %s is more than 90%% of this machine's %s, and the host device takes real memory; "
                "give at most %s (or 90%%)",
                spec->text, want, all, most);
        return NULL;
    }
    if (kernel_cpu_load(e)) {
        err_prefix(e, "device %s: ", spec->text);
        return NULL;
    }
    struct host_topology topo;
    struct err te = {0};
    kernel_cpu_set_threads(host_topology_read(&topo, &te) ? 0 : (unsigned)topo.cores_allowed);
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
