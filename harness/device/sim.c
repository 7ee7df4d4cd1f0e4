/* sim.c: the simulated device and its row of the device-kind table (see sim.h). */
#include "device/sim.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "scenario/suggest.h"

struct sim {
    uint64_t context, used, next_base;
    const struct gpu_profile *profile;
    uint64_t *forced;
    size_t nforced, iforced;
    double kernel_seconds; /* modelled since the last kernel_seconds() */
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

/* The roofline: a kernel takes as long as the slower of its compute (FLOPs at the profile's tensor
 * rate for 16-bit dtypes, its plain fp32 rate for fp32) and its memory traffic (bytes at the
 * bandwidth). */
static int sim_launch(struct device *d, const struct kernel_call *k, const uint64_t *tensor_addrs, struct err *e)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    if (!kd)
        return err_set(e, ERR_INTERNAL, "%s: unknown kernel %u", d->name, k->kernel);
    const struct gpu_profile *p = sim_of(d)->profile;
    double flops = kd->flops(k), bytes = kd->bytes(k);
    double rate = (k->dtype == DT_F32 ? p->tflops_fp32 : p->tflops_16bit) * 1e12;
    double t_compute = flops / rate, t_memory = bytes / (p->bandwidth_gbs * 1e9);
    sim_of(d)->kernel_seconds += t_compute > t_memory ? t_compute : t_memory;
    return 0;
}

static double sim_kernel_seconds(struct device *d)
{
    double t = sim_of(d)->kernel_seconds;
    sim_of(d)->kernel_seconds = 0;
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
    *s = (struct sim){.context = context, .next_base = 1ULL << 40, .profile = profile};
    d->ops = &sim_ops;
    d->kind = &sim_device_kind;
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->timed_by, sizeof d->timed_by, "roofline of %s", profile->name);
    d->total = total;
    d->cublas_workspace_bytes = profile->cublas_workspace_bytes;
    d->impl = s;
    return d;
}

static const char *profile_name_at(const void *list, size_t i)
{
    return gpu_profile_at(i)->name;
}

/* PROFILE, or SIZE: a card of that total with the default profile's architecture, which must leave
 * room beyond that architecture's CUDA context. */
static int sim_parse(const char *arg, struct device_spec *out, struct err *e)
{
    out->profile = gpu_profile_default();
    if (!arg)
        return 0;
    if (isdigit((unsigned char)*arg) || *arg == '.') {
        if (size_parse(arg, &out->own.bytes, e))
            return -1;
        if (out->own.bytes == 0)
            return err_set(e, ERR_INPUT, "a device of 0 bytes");
        if (out->own.bytes <= out->profile->context_bytes) {
            char size[32], context[32];
            size_format_pytorch(out->own.bytes, size, sizeof size);
            size_format_pytorch(out->profile->context_bytes, context, sizeof context);
            return err_set(e, ERR_INPUT,
                           "a %s card cannot hold the %s CUDA context of the %s architecture a bare size takes "
                           "(a size given with --capacity has none)",
                           size, context, out->profile->name);
        }
        return 0;
    }
    if ((out->profile = gpu_profile_find(arg)))
        return 0;
    const char *near = suggest_closest(arg, gpu_profile_count(), profile_name_at, NULL);
    if (near)
        return err_set(e, ERR_INPUT, "unknown GPU profile '%s' (did you mean '%s'?)", arg, near);
    char known[512] = "";
    for (size_t i = 0; i < gpu_profile_count(); i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", gpu_profile_at(i)->name);
    return err_set(e, ERR_INPUT, "unknown GPU profile '%s' (known: %s)", arg, known);
}

static void sim_probe(struct device_probe *out)
{
    const struct gpu_profile *p = gpu_profile_default();
    char context[32], profiles[256] = "";
    size_format_pytorch(p->context_bytes, context, sizeof context);
    for (size_t i = 0; i < gpu_profile_count(); i++)
        snprintf(profiles + strlen(profiles), sizeof profiles - strlen(profiles), "%s%s", i ? ", " : "",
                 gpu_profile_at(i)->name);
    out->available = true;
    size_format_pytorch(p->total_bytes, out->capacity, sizeof out->capacity);
    snprintf(out->notes, sizeof out->notes,
             "simulated GPU: sim:PROFILE (%s; default %s) or sim:SIZE (a card of that total with the %s's "
             "roofline rates, cuBLAS workspace and %s CUDA context)",
             profiles, p->name, p->name, context);
}

/* The spec's profile or size; --capacity as a size replaces the total and drops the CUDA context, as
 * a share it scales the total and keeps the context (as set_per_process_memory_fraction would). */
static struct device *sim_open(const struct device_spec *spec, const struct device_open_options *opt, struct err *e)
{
    const struct gpu_profile *p = spec->profile;
    uint64_t total = spec->own.bytes ? spec->own.bytes : p->total_bytes, context = p->context_bytes;
    char name[64];
    if (spec->own.bytes)
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
    if (spec->own.bytes) {
        char ctx[32];
        size_format_pytorch(context, ctx, sizeof ctx);
        snprintf(d->detail, sizeof d->detail, "%s architecture: its roofline rates, cuBLAS workspace%s%s%s", p->name,
                 context ? " and " : "", context ? ctx : "", context ? " CUDA context" : "");
    }
    return d;
}

const struct device_kind sim_device_kind = {
    .name = "sim",
    .forms = "sim, sim:PROFILE, sim:SIZE",
    .flags = DEVICE_DETERMINISTIC_PLACEMENT,
    .parse = sim_parse,
    .probe = sim_probe,
    .open = sim_open,
};
