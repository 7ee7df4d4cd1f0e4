/* sim.c: the simulated device and its row of the device-kind table (see sim.h). */
#include "device/sim.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernel_time.h"
#include "device/profile_detect.h"
#include "scenario/suggest.h"

/* A kernel's modelled time, kept for the next call of its shape (struct kernel_cost's shape_id; 0: empty). */
struct kept_time {
    uint64_t shape_id;
    double flops, bytes;        /* the cost it was timed with */
    int launches;               /* its CUDA kernels, whole */
    double host_each, gpu_each; /* the host and GPU time of each */
};
#define SIM_KEPT_TIMES 512 /* a power of two; shape ids count up, so consecutive ones take different slots */

struct sim {
    uint64_t context, used, next_base;
    const struct gpu_profile *profile;
    const struct software_stack *stack;
    struct kernel_rates rates; /* profile's under stack */
    struct kept_time *times;   /* SIM_KEPT_TIMES kernels' modelled times by shape id, allocated at the first */
    uint64_t *forced;
    size_t nforced, iforced;
    /* Since the last kernel_seconds() (a synchronisation): when the host has issued its last launch,
     * and when the GPU finishes the last kernel it was given. */
    double host_clock, gpu_clock;
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

/* Times k afresh into *out, as kept for its shape. */
static __attribute__((noinline)) int time_call(struct sim *s, const struct kernel_call *k, const struct kernel_cost *cost,
                                               struct kept_time *out, struct err *e)
{
    struct kernel_time t;
    if (kernel_time_model(k, cost, &s->rates, &t, e))
        return -1;
    int n = t.launches > 1 ? (int)(t.launches + 0.5) : 1;
    *out = (struct kept_time){cost->shape_id, cost->flops, cost->bytes, n, t.host_seconds / n, t.gpu_seconds / n};
    return 0;
}

_Static_assert(offsetof(struct kept_time, bytes) == offsetof(struct kept_time, flops) + sizeof(double) &&
                   offsetof(struct kernel_cost, bytes) == offsetof(struct kernel_cost, flops) + sizeof(double),
               "sim_launch compares {flops, bytes} as one run of bytes");

/* The host issues a kernel's launches one after another, each taking the framework's time per op; the
 * GPU starts each as soon as it is issued and the previous kernel is done. So the GPU idles while the
 * host is slower than the kernels it issues (small batches), and the host runs ahead otherwise. */
static void issue(struct sim *s, const struct kept_time *kept)
{
    for (int i = 0; i < kept->launches; i++) {
        s->host_clock += kept->host_each;
        if (s->gpu_clock < s->host_clock)
            s->gpu_clock = s->host_clock;
        s->gpu_clock += kept->gpu_each;
    }
}

/* sim_launch's slow path: the call is timed afresh, and kept for its shape. Without a shape id, or without
 * memory for the kept times, it is not kept. */
static __attribute__((noinline)) int launch_timed(struct device *d, const struct kernel_call *k,
                                                  const struct kernel_cost *cost, struct err *e)
{
    struct sim *s = sim_of(d);
    struct kept_time now, *kept = &now;
    if (cost->shape_id && (s->times || (s->times = calloc(SIM_KEPT_TIMES, sizeof *s->times))))
        kept = &s->times[cost->shape_id & (SIM_KEPT_TIMES - 1)];
    if (time_call(s, k, cost, kept, e))
        return err_prefix(e, "%s: ", d->name);
    issue(s, kept);
    return 0;
}

/* The model reads the call and its cost: the same shape with the same cost (to the bit) takes the time
 * kept for it. */
static int sim_launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost,
                      const uint64_t *tensor_addrs, struct err *e)
{
    struct sim *s = sim_of(d);
    const struct kept_time *kept = s->times ? &s->times[cost->shape_id & (SIM_KEPT_TIMES - 1)] : NULL;
    if (!cost->shape_id || !kept || kept->shape_id != cost->shape_id ||
        memcmp(&kept->flops, &cost->flops, 2 * sizeof(double)))
        return launch_timed(d, k, cost, e);
    issue(s, kept);
    return 0;
}

/* A synchronisation: the host waits for the GPU, and the time since the previous one is the GPU's
 * (never shorter than the host's, as every kernel starts after its launch). The runner reads it at
 * phase and step boundaries, where a training loop synchronises (loss.item(), GradScaler's inf check). */
static double sim_kernel_seconds(struct device *d)
{
    struct sim *s = sim_of(d);
    double t = s->gpu_clock;
    s->host_clock = s->gpu_clock = 0;
    return t;
}

static int sim_place_next(struct device *d, const uint64_t *addrs, size_t n, struct err *e)
{
    struct sim *s = sim_of(d);
    free(s->forced);
    s->forced = n ? malloc(n * sizeof *addrs) : NULL;
    s->nforced = s->iforced = 0;
    if (n && !s->forced)
        return err_set(e, ERR_INTERNAL, "out of host memory for %zu segment addresses", n);
    if (n)
        memcpy(s->forced, addrs, n * sizeof *addrs);
    s->nforced = n;
    return 0;
}

static void sim_destroy(struct device *d)
{
    if (!d)
        return;
    free(sim_of(d)->forced);
    free(sim_of(d)->times);
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
    .launch = sim_launch,
    .kernel_seconds = sim_kernel_seconds,
    .place_next = sim_place_next,
    .destroy = sim_destroy,
};

/* Says how the device times kernels: its architecture's calibration and, when not today's, its stack. */
static void describe_timing(struct device *d)
{
    const struct sim *s = sim_of(d);
    const struct arch_calibration *cal = s->profile->calibration;
    char stack[96] = "";
    if (s->stack != software_stack_for(0, 0))
        snprintf(stack, sizeof stack, ", %s", s->stack->name);
    snprintf(d->timed_by, sizeof d->timed_by, "kernel-time model for %s (%s%s), calibrated on %s", cal->name,
             s->profile->name, stack, cal->source);
}

struct device *sim_device_create(const char *name, uint64_t total, uint64_t context, const struct gpu_profile *profile)
{
    struct device *d = calloc(1, sizeof *d);
    struct sim *s = calloc(1, sizeof *s);
    if (!d || !s) {
        free(d);
        free(s);
        return NULL;
    }
    if (!profile)
        profile = gpu_profile_default();
    *s = (struct sim){.context = context, .next_base = 1ULL << 40, .profile = profile, .stack = software_stack_for(0, 0)};
    s->rates = kernel_rates_for(profile, s->stack);
    d->ops = &sim_ops;
    d->kind = &sim_device_kind;
    snprintf(d->name, sizeof d->name, "%s", name);
    d->total = total;
    d->cublas_workspace_bytes = profile->cublas_workspace_bytes;
    d->impl = s;
    describe_timing(d);
    return d;
}

void sim_device_set_stack(struct device *d, const struct software_stack *stack)
{
    sim_of(d)->stack = stack;
    sim_of(d)->rates = kernel_rates_for(sim_of(d)->profile, stack);
    if (sim_of(d)->times) /* timed at the old rates */
        memset(sim_of(d)->times, 0, SIM_KEPT_TIMES * sizeof *sim_of(d)->times);
    describe_timing(d);
}

static const char *profile_name_at(const void *list, size_t i)
{
    return gpu_profile_at(i)->name;
}

/* "@cudaMAJOR[.MINOR]" after a profile or size: that CUDA version's context replaces the profile's. */
static int parse_cuda_suffix(const char *at, struct device_spec *out, struct err *e)
{
    int major = 0, minor = 0, used = 0;
    if (strncmp(at, "@cuda", 5) || sscanf(at + 5, "%d%n", &major, &used) != 1 || major <= 0 || major > 99)
        return err_set(e, ERR_INPUT, "'%s' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2", at);
    const char *rest = at + 5 + used;
    if (*rest == '.') {
        int n = 0;
        if (sscanf(rest + 1, "%d%n", &minor, &n) != 1 || minor < 0 || minor > 99)
            return err_set(e, ERR_INPUT, "'%s' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2", at);
        rest += 1 + n;
    }
    if (*rest)
        return err_set(e, ERR_INPUT, "'%s' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2", at);
    out->cuda_major = major;
    out->cuda_minor = minor;
    return 0;
}

/* The CUDA context a parsed spec's card starts with. */
static uint64_t spec_context(const struct device_spec *spec)
{
    return spec->cuda_major ? software_stack_for(spec->cuda_major, spec->cuda_minor)->context_bytes
                            : spec->profile->context_bytes;
}

static int unknown_profile(const char *name, struct err *e)
{
    const char *near = suggest_closest(name, gpu_profile_count(), profile_name_at, NULL);
    if (near)
        return err_set(e, ERR_INPUT, "unknown GPU profile '%s' (did you mean '%s'?)", name, near);
    char known[512] = "";
    for (size_t i = 0; i < gpu_profile_count(); i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", gpu_profile_at(i)->name);
    return err_set(e, ERR_INPUT, "unknown GPU profile '%s' (known: %s)", name, known);
}

/* PROFILE, gpuN (the profile of this machine's GPU N, see profile_detect.h), or SIZE: a card of that total with the default profile's architecture, which must leave
 * room beyond the CUDA context; either may end in @cudaMAJOR.MINOR. */
static int sim_parse(const char *arg, struct device_spec *out, struct err *e)
{
    out->profile = gpu_profile_default();
    if (!arg)
        return 0;
    char base[64];
    const char *at = strchr(arg, '@');
    size_t len = at ? (size_t)(at - arg) : strlen(arg);
    if (len == 0 || len >= sizeof base)
        return err_set(e, ERR_INPUT, "expected a profile or a size before '%s'", at ? at : arg);
    memcpy(base, arg, len);
    base[len] = '\0';
    if (at && parse_cuda_suffix(at, out, e))
        return -1;
    if (isdigit((unsigned char)*base) || *base == '.') {
        if (size_parse(base, &out->own.bytes, e))
            return -1;
        if (out->own.bytes == 0)
            return err_set(e, ERR_INPUT, "a device of 0 bytes");
        if (out->own.bytes <= spec_context(out)) {
            char size[32], context[32];
            size_format_pytorch(out->own.bytes, size, sizeof size);
            size_format_pytorch(spec_context(out), context, sizeof context);
            return err_set(e, ERR_INPUT,
                           "a %s card cannot hold the %s CUDA context of the %s architecture a bare size takes "
                           "(a size given with --capacity has none)",
                           size, context, out->profile->name);
        }
        return 0;
    }
    if ((out->profile = gpu_profile_find(base)))
        return 0;
    unsigned gpu;
    char tail;
    if (sscanf(base, "gpu%u%c", &gpu, &tail) == 1 && isdigit((unsigned char)base[3]))
        return gpu_profile_detect(gpu, &out->profile, e);
    return unknown_profile(base, e);
}

static void sim_probe(struct device_probe *out)
{
    const struct gpu_profile *p = gpu_profile_default();
    char context[32], profiles[320] = "";
    size_format_pytorch(p->context_bytes, context, sizeof context);
    for (size_t i = 0; i < gpu_profile_count(); i++)
        snprintf(profiles + strlen(profiles), sizeof profiles - strlen(profiles), "%s%s", i ? ", " : "",
                 gpu_profile_at(i)->name);
    out->available = true;
    size_format_pytorch(p->total_bytes, out->capacity, sizeof out->capacity);
    snprintf(out->notes, sizeof out->notes,
             "simulated GPU: sim:PROFILE (%s; default %s), sim:gpuN (the profile of this machine's GPU N) or sim:SIZE (a card of that total with the %s's "
             "rates, kernel-time calibration, cuBLAS workspace and %s CUDA context); @cudaX.Y after either "
             "takes that CUDA version's context",
             profiles, p->name, p->name, context);
}

/* The spec's profile or size; --capacity as a size replaces the total and drops the CUDA context, as
 * a share it scales the total and keeps the context (as set_per_process_memory_fraction would). */
static struct device *sim_open(const struct device_spec *spec, const struct device_open_options *opt, struct err *e)
{
    const struct gpu_profile *p = spec->profile;
    uint64_t total = spec->own.bytes ? spec->own.bytes : p->total_bytes, context = spec_context(spec);
    char name[64];
    if (spec->own.bytes || spec->cuda_major)
        snprintf(name, sizeof name, "%s", spec->text);
    else
        snprintf(name, sizeof name, "sim:%s", p->name);
    if (opt->capacity.bytes) {
        total = opt->capacity.bytes;
        context = 0;
        snprintf(name + strlen(name), sizeof name - strlen(name), "@%llu", (unsigned long long)opt->capacity.bytes);
    } else if (opt->capacity.fraction > 0.0) {
        if (capacity_resolve(opt->capacity, total, total, &total, e)) {
            err_prefix(e, "device %s: ", spec->text);
            return NULL;
        }
        snprintf(name + strlen(name), sizeof name - strlen(name), "@%g%%", opt->capacity.fraction * 100.0);
    }
    if (total == 0) {
        err_set(e, ERR_INPUT, "device %s: capacity must be positive", spec->text);
        return NULL;
    }
    struct device *d = sim_device_create(name, total, context, p);
    if (!d) {
        err_set(e, ERR_INTERNAL, "out of host memory creating device %s", spec->text);
        return NULL;
    }
    if (spec->cuda_major)
        sim_device_set_stack(d, software_stack_for(spec->cuda_major, spec->cuda_minor));
    if (spec->own.bytes) {
        char ctx[32];
        size_format_pytorch(context, ctx, sizeof ctx);
        snprintf(d->detail, sizeof d->detail, "%s architecture: its rates, kernel-time calibration, cuBLAS workspace%s%s%s",
                 p->name, context ? " and " : "", context ? ctx : "", context ? " CUDA context" : "");
    }
    return d;
}

const struct device_kind sim_device_kind = {
    .name = "sim",
    .forms = "sim, sim:PROFILE, sim:SIZE, sim:gpuN",
    .flags = DEVICE_DETERMINISTIC_PLACEMENT | DEVICE_ASYNC_KERNELS,
    .parse = sim_parse,
    .probe = sim_probe,
    .open = sim_open,
};
