/* cuda_loader.c: dlopen of the CUDA plugin, with reasons for every way it can be unavailable, a
 * launch wrapper that validates kernel calls against the kernel table before they reach the GPU, and
 * the cuda row of the device-kind table. */
#include "device/cuda_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/gpu_select.h"
#include "kernels.h"

#ifndef OOMLAB_CUDA_PLUGIN_NAME
#define OOMLAB_CUDA_PLUGIN_NAME "oomlab-cuda.so"
#endif

struct plugin {
    void *handle;
    oomlab_cuda_probe_fn probe;
    oomlab_cuda_open_fn open;
    oomlab_cuda_copy_fn copy;
};

/* The one loaded plugin (a process uses one build's plugin; it is never unloaded, as CUDA
 * libraries do not support it). */
static struct plugin loaded;
static struct device_ops validated_ops;
static const struct device_ops *plugin_ops;

int cuda_plugin_default_path(char *buf, size_t n)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    const char *dir = dirname(exe);
    /* beside the binary (the build tree), else where `make install` puts it: PREFIX/lib/oomlab */
    int w = snprintf(buf, n, "%s/%s", dir, OOMLAB_CUDA_PLUGIN_NAME);
    if (w > 0 && (size_t)w < n && access(buf, F_OK) == 0)
        return 0;
    int v = snprintf(buf, n, "%s/../lib/oomlab/%s", dir, OOMLAB_CUDA_PLUGIN_NAME);
    if (v > 0 && (size_t)v < n && access(buf, F_OK) == 0)
        return 0;
    w = snprintf(buf, n, "%s/%s", dir, OOMLAB_CUDA_PLUGIN_NAME); /* neither: name the build tree's place */
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* Loads the plugin once: 0, or -1 with why. */
static int plugin_load(const char *path, char *why, size_t n)
{
    char def[4096];
    if (loaded.handle)
        return 0;
    if (!path) {
        if (cuda_plugin_default_path(def, sizeof def) < 0) {
            snprintf(why, n, "cannot locate the oomlab binary to find %s beside it", OOMLAB_CUDA_PLUGIN_NAME);
            return -1;
        }
        path = def;
    }
    if (access(path, F_OK) != 0) {
        if (errno == ENOENT)
            snprintf(why, n, "oomlab was built without nvcc (no %s)", path);
        else
            snprintf(why, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *msg = dlerror();
        snprintf(why, n, "%s", msg ? msg : "dlopen failed without a message");
        return -1;
    }
    oomlab_cuda_abi_fn abi = (oomlab_cuda_abi_fn)dlsym(h, OOMLAB_CUDA_ABI_SYMBOL);
    struct plugin p = {h, (oomlab_cuda_probe_fn)dlsym(h, OOMLAB_CUDA_PROBE_SYMBOL),
                       (oomlab_cuda_open_fn)dlsym(h, OOMLAB_CUDA_OPEN_SYMBOL),
                       (oomlab_cuda_copy_fn)dlsym(h, OOMLAB_CUDA_COPY_SYMBOL)};
    if (!abi || !p.probe || !p.open || !p.copy) {
        snprintf(why, n, "%s is not an oomlab CUDA plugin (missing %s)", path,
                 !abi ? OOMLAB_CUDA_ABI_SYMBOL : !p.probe ? OOMLAB_CUDA_PROBE_SYMBOL
                                                : !p.open ? OOMLAB_CUDA_OPEN_SYMBOL
                                                          : OOMLAB_CUDA_COPY_SYMBOL);
        dlclose(h);
        return -1;
    }
    if (abi() != OOMLAB_CUDA_ABI) {
        snprintf(why, n, "%s has plugin ABI %d, this oomlab expects %d: rebuild with make", path, abi(), OOMLAB_CUDA_ABI);
        dlclose(h);
        return -1;
    }
    loaded = p;
    return 0;
}

int cuda_probe(const char *path, char *why, size_t n)
{
    if (plugin_load(path, why, n) < 0)
        return 0;
    return loaded.probe(why, n);
}

static int validated_launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost,
                            const uint64_t *addrs, struct err *e)
{
    if (kernel_validate(k, e) < 0)
        return -1;
    return plugin_ops->launch(d, k, cost, addrs, e);
}

struct device *cuda_device_open(const char *path, int ordinal, const struct oomlab_cuda_options *opt, struct err *e)
{
    char why[512];
    if (cuda_probe(path, why, sizeof why) <= 0) {
        err_set(e, ERR_INPUT, "cuda:%d unavailable: %s", ordinal, why);
        return NULL;
    }
    struct device *d = NULL;
    if (loaded.open(ordinal, opt, &d, e) < 0)
        return NULL;
    if (!plugin_ops) {
        plugin_ops = d->ops;
        validated_ops = *d->ops;
        validated_ops.launch = validated_launch;
    }
    d->ops = &validated_ops;
    d->kind = &cuda_device_kind;
    return d;
}

int cuda_device_copy(struct device *d, void *dst, const void *src, uint64_t bytes, int to_device, struct err *e)
{
    if (!loaded.copy)
        return err_set(e, ERR_INTERNAL, "%s: the CUDA plugin is not loaded", d->name);
    return loaded.copy(d, dst, src, bytes, to_device, e);
}

/* N: the device's ordinal; auto: chosen by gpu_select when opened. */
static int cuda_parse(const char *arg, struct device_spec *out, struct err *e)
{
    if (!arg)
        return 0;
    if (!strcmp(arg, "auto")) {
        out->ordinal = CUDA_ORDINAL_AUTO;
        return 0;
    }
    char *end;
    long n = strtol(arg, &end, 10);
    if (!(*arg >= '0' && *arg <= '9') || *end || n > INT_MAX)
        return err_set(e, ERR_INPUT, "'%s' is not a CUDA device number or 'auto'", arg);
    out->ordinal = (int)n;
    return 0;
}

static void cuda_kind_probe(struct device_probe *out)
{
    char why[400] = "";
    int n = cuda_probe(NULL, why, sizeof why);
    out->available = n > 0;
    snprintf(out->capacity, sizeof out->capacity, "%s", n > 0 ? "see cuda:N" : "-");
    if (n > 0)
        snprintf(out->notes, sizeof out->notes, "%d GPU%s through %s: cuda:0 .. cuda:%d", n, n > 1 ? "s" : "",
                 OOMLAB_CUDA_PLUGIN_NAME, n - 1);
    else
        snprintf(out->notes, sizeof out->notes, "unavailable: %s", why);
}

/* --capacity as a size limits the bytes the device hands out; as a share, of the GPU's total. */
static struct device *cuda_kind_open(const struct device_spec *spec, const struct device_open_options *opt,
                                     struct err *e)
{
    struct oomlab_cuda_options o = {.capacity_limit = opt->capacity.bytes, .capacity_fraction = opt->capacity.fraction};
    int ordinal = spec->ordinal;
    if (ordinal == CUDA_ORDINAL_AUTO && gpu_select_auto(&ordinal, stderr, e))
        return NULL;
    return cuda_device_open(NULL, ordinal, &o, e);
}

const struct device_kind cuda_device_kind = {
    .name = "cuda",
    .forms = "cuda, cuda:N, cuda:auto",
    .flags = DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_ASYNC_KERNELS,
    .parse = cuda_parse,
    .probe = cuda_kind_probe,
    .open = cuda_kind_open,
};
