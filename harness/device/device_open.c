/* device_open.c: device construction from the command line's --device and --capacity. */
#include "device/device_open.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "device/host.h"
#include "device/profiles.h"
#include "device/sim.h"
#include "util/size.h"

static struct device *open_sim(const char *spec, const char *arg, struct capacity capacity, struct err *e)
{
    const struct gpu_profile *p = gpu_profile_find(*arg ? arg : "rtx5090");
    uint64_t total, context = 0;
    char name[64];
    if (p) {
        total = p->total_bytes;
        context = p->context_bytes;
        snprintf(name, sizeof name, "sim:%s", p->name);
    } else {
        if (size_parse(arg, &total, e)) {
            err_prefix(e, "--device %s: not a GPU profile (see `oomlab list profiles`) nor a size: ", spec);
            return NULL;
        }
        snprintf(name, sizeof name, "sim:%s", arg);
    }
    if (capacity.bytes) {
        total = capacity.bytes;
        context = 0;
        snprintf(name + strlen(name), sizeof name - strlen(name), "@%llu", (unsigned long long)capacity.bytes);
    } else if (capacity.fraction > 0.0) { /* the same card with a share of it: the context stays */
        if (capacity_resolve(capacity, total, total, &total, e)) {
            err_prefix(e, "--device %s: ", spec);
            return NULL;
        }
        snprintf(name + strlen(name), sizeof name - strlen(name), "@%g%%", capacity.fraction * 100.0);
    }
    if (total == 0) {
        err_set(e, ERR_INPUT, "--device %s: capacity must be positive", spec);
        return NULL;
    }
    struct device *d = sim_device_create(name, total, context, p);
    if (!d)
        err_set(e, ERR_INTERNAL, "out of host memory creating device %s", spec);
    return d;
}

/* host or host:SIZE|FRACTION, whose fractions are of the host's memory; --capacity wins. */
static struct device *open_host(const char *spec, struct capacity capacity, struct err *e)
{
    struct capacity own = {0, 0.0};
    if (spec[4] && capacity_parse(spec + 5, &own, e)) {
        err_prefix(e, "--device %s: ", spec);
        return NULL;
    }
    if (!capacity.bytes && capacity.fraction == 0.0)
        capacity = own;
    const uint64_t memory = host_memory_bytes(NULL);
    uint64_t total;
    if (capacity_resolve(capacity, memory, memory / 2, &total, e)) {
        err_prefix(e, "--device %s: ", spec);
        return NULL;
    }
    if (!total) {
        err_set(e, ERR_INTERNAL, "--device %s: cannot read the machine's memory size; give --capacity SIZE", spec);
        return NULL;
    }
    return host_device_create(total, e);
}

struct device *device_open(const char *spec, struct capacity capacity, const struct cuda_workspace_alloc *workspace,
                           struct err *e)
{
    if (!spec || !strcmp(spec, "sim"))
        return open_sim("sim", "", capacity, e);
    if (!strncmp(spec, "sim:", 4))
        return open_sim(spec, spec + 4, capacity, e);
    if (!strcmp(spec, "host") || !strncmp(spec, "host:", 5))
        return open_host(spec, capacity, e);
    if (!strcmp(spec, "cuda") || !strncmp(spec, "cuda:", 5)) {
        char *end;
        long ordinal = spec[4] ? strtol(spec + 5, &end, 10) : 0;
        if (spec[4] && (*end || ordinal < 0)) {
            err_set(e, ERR_INPUT, "--device %s: expected cuda or cuda:N", spec);
            return NULL;
        }
        struct oomlab_cuda_options opt = {.capacity_limit = capacity.bytes, .capacity_fraction = capacity.fraction};
        if (workspace)
            opt.workspace = *workspace;
        return cuda_device_open(NULL, (int)ordinal, &opt, e);
    }
    err_set(e, ERR_INPUT,
            "unknown device '%s' (devices: sim, sim:PROFILE, sim:SIZE, host, host:SIZE, host:FRACTION, cuda, cuda:N)",
            spec);
    return NULL;
}
