/* cuda_plugin_test.c: the CUDA plugin loader on whatever machine runs it: a missing plugin says
 * oomlab was built without nvcc, a library that is not the plugin is refused with a reason, and
 * the real plugin (build/oomlab-cuda.so, if nvcc built it) either finds GPUs or, with no driver or
 * no GPU, reports why without crashing; opening a device then fails with that reason. */
#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "tap.h"

/* The plugin beside the oomlab binary: build/oomlab-cuda.so for build/tests/cuda_plugin.t. */
static int plugin_path(char *buf, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    char *tests_dir = dirname(exe);
    snprintf(buf, n, "%s/../%s", tests_dir, OOMLAB_CUDA_PLUGIN_NAME);
    return 0;
}

int main(void)
{
    char why[512] = "";
    is_int(cuda_probe("/nonexistent/oomlab-cuda.so", why, sizeof why), 0, "missing plugin: no devices");
    ok(strstr(why, "built without nvcc") != NULL, "missing plugin: reason '%s'", why);

    why[0] = '\0';
    is_int(cuda_probe("/proc/self/exe", why, sizeof why), 0, "the test binary itself is not a plugin");
    ok(why[0] != '\0', "refused with the loader's reason: '%s'", why);

    char path[PATH_MAX + 64];
    ok(plugin_path(path, sizeof path) == 0, "plugin path %s", path);
    why[0] = '\0';
    if (access(path, F_OK) != 0) {
        is_int(cuda_probe(path, why, sizeof why), 0, "plugin not built: no devices");
        ok(strstr(why, "built without nvcc") != NULL, "plugin not built: reason '%s'", why);
        return done_testing();
    }
    int n = cuda_probe(path, why, sizeof why);
    struct err e = {0};
    struct oomlab_cuda_options opt = {0};
    if (n == 0) {
        ok(why[0] != '\0', "no usable GPU here, and the reason says why: '%s'", why);
        struct device *d = cuda_device_open(path, 0, &opt, &e);
        ok(d == NULL && e.code == ERR_INPUT && strstr(e.msg, why), "opening cuda:0 fails with it: '%s'", e.msg);
        return done_testing();
    }
    diag("%d CUDA device(s) found", n);
    struct device *d = cuda_device_open(path, 0, &opt, &e);
    ok(d != NULL, "cuda:0 opens %s", e.msg);
    if (d) {
        uint64_t free_bytes = 0, total = 0;
        d->ops->mem_info(d, &free_bytes, &total);
        ok(total > 0 && free_bytes <= total, "mem_info: %llu of %llu bytes free", (unsigned long long)free_bytes,
           (unsigned long long)total);
        d->ops->destroy(d);
    }
    return done_testing();
}
