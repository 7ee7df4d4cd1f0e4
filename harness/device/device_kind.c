/* device_kind.c: the device-kind table, the one parser of device specs, and device_open (see
 * device_kind.h). Each kind's row lives in its own file: sim.c, host.c, cuda_loader.c. */
#include "device/device_kind.h"

#include <stdio.h>
#include <string.h>

#include "device/cuda_loader.h"
#include "device/host.h"
#include "device/sim.h"

static const struct device_kind *const kinds[] = {&sim_device_kind, &host_device_kind, &cuda_device_kind};

size_t device_kind_count(void)
{
    return sizeof kinds / sizeof kinds[0];
}

const struct device_kind *device_kind_at(size_t i)
{
    return i < device_kind_count() ? kinds[i] : NULL;
}

bool device_has(const struct device *d, unsigned flags)
{
    return d->kind && (d->kind->flags & flags) == flags;
}

int device_spec_parse(const char *text, struct device_spec *out, struct err *e)
{
    *out = (struct device_spec){0};
    const char *colon = strchr(text, ':');
    size_t name_len = colon ? (size_t)(colon - text) : strlen(text);
    if (strlen(text) >= sizeof out->text)
        return err_set(e, ERR_INPUT, "a device spec is at most %zu characters", sizeof out->text - 1);
    snprintf(out->text, sizeof out->text, "%s", text);
    for (size_t i = 0; i < device_kind_count(); i++) {
        const struct device_kind *k = kinds[i];
        if (strlen(k->name) != name_len || strncmp(text, k->name, name_len))
            continue;
        if (colon && !colon[1])
            return err_set(e, ERR_INPUT, "nothing after the ':' in '%s'", text);
        out->kind = k;
        return k->parse(colon ? colon + 1 : NULL, out, e);
    }
    char forms[256] = "";
    for (size_t i = 0; i < device_kind_count(); i++)
        snprintf(forms + strlen(forms), sizeof forms - strlen(forms), "%s%s", i ? ", " : "", kinds[i]->forms);
    return err_set(e, ERR_INPUT, "unknown device '%s' (devices: %s)", text, forms);
}

struct device *device_open_spec(const struct device_spec *spec, const struct device_open_options *opt, struct err *e)
{
    static const struct device_open_options defaults;
    if (!opt)
        opt = &defaults;
    struct device *d = spec->kind->open(spec, opt, e);
    if (d && opt->cublas_workspace_bytes)
        d->cublas_workspace_bytes = opt->cublas_workspace_bytes;
    return d;
}

struct device *device_open(const char *text, const struct device_open_options *opt, struct err *e)
{
    struct device_spec spec;
    if (device_spec_parse(text, &spec, e)) {
        err_prefix(e, "device %s: ", text);
        return NULL;
    }
    return device_open_spec(&spec, opt, e);
}
