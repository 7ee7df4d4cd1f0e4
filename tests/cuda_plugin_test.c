/* cuda_plugin_test.c: the CUDA plugin loader on whatever machine runs it: a missing plugin says
 * oomlab was built without nvcc, a library that is not the plugin is refused with a reason, and
 * the real plugin (build/oomlab-cuda.so, if nvcc built it) either finds GPUs or, with no driver or
 * no GPU, reports why without crashing; opening a device then fails with that reason. On a GPU:
 * the device is of the cuda kind (measured, runs kernels asynchronously), takes its cuBLAS
 * workspace (PyTorch's size for the GPU) from the workspace interface it is given and gives it back
 * when told, and reports its kernels' time from CUDA events. */
#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "kernels.h"
#include "tap.h"

/* A workspace source that hands out device segments and counts what it lent. */
struct lender {
    struct device *d;
    uint64_t addr, bytes;
    int allocs, frees;
};

static int lend(void *user, uint64_t bytes, int stream, uint64_t *addr)
{
    struct lender *l = user;
    struct err e = {0};
    if (l->addr || l->d->ops->seg_alloc(l->d, bytes, stream, addr, &e) != DEV_OK)
        return -1;
    l->addr = *addr;
    l->bytes = bytes;
    l->allocs++;
    return 0;
}

static void take_back(void *user, uint64_t addr)
{
    struct lender *l = user;
    if (addr == l->addr) {
        l->d->ops->seg_free(l->d, addr, l->bytes);
        l->addr = 0;
        l->frees++;
    }
}

/* A 256^3 fp32 GEMM on the GPU, its cuBLAS workspace from a lender. */
static void gemm_on_gpu(struct device *d)
{
    struct err e = {0};
    struct lender l = {.d = d};
    struct device_workspace ws = {lend, take_back, &l};
    d->ops->set_workspace(d, &ws);
    uint64_t t[3] = {0};
    const uint64_t bytes = 256 * 256 * 4;
    int fine = 1;
    for (int i = 0; i < 3 && fine; i++)
        fine = d->ops->seg_alloc(d, bytes, 0, &t[i], &e) == DEV_OK;
    struct kernel_call k = {.kernel = K_GEMM, .dtype = DT_F32, .ntensors = 3, .dims = {256, 256, 256},
                            .tensors = {1, 2, 3}, .fparam = {1.0f, 0.0f}};
    const struct kernel_cost cost = kernel_cost(&k);
    ok(fine && d->ops->launch(d, &k, &cost, t, &e) == 0, "a GEMM runs %s", e.msg);
    double s = d->ops->kernel_seconds(d);
    ok(s > 0 && s < 1, "its CUDA events say %.6f s", s);
    ok(d->ops->kernel_seconds(d) == 0.0, "and the next reading starts again from 0");
    ok(l.allocs == 1 && l.bytes == d->cublas_workspace_bytes, "cuBLAS took its %llu-byte workspace from the lender",
       (unsigned long long)l.bytes);
    d->ops->set_workspace(d, NULL);
    is_int(l.frees, 1, "and gave it back when the lender went away");
    for (int i = 0; i < 3; i++)
        if (t[i])
            d->ops->seg_free(d, t[i], bytes);
}

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
        ok(d->kind == &cuda_device_kind && device_has(d, DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_ASYNC_KERNELS),
           "a cuda device: measured, runs kernels asynchronously");
        ok(d->ops->kernel_seconds && d->ops->set_workspace && d->ops->sync && !d->ops->place_next,
           "kernel time, workspaces and sync; the driver places segments");
        is_str(d->timed_by, "CUDA events", "timed by CUDA events");
        ok(d->cublas_workspace_bytes == 33554432 || d->cublas_workspace_bytes == 8519680,
           "%s: PyTorch's cuBLAS workspace for it, %llu B", d->detail, (unsigned long long)d->cublas_workspace_bytes);
        gemm_on_gpu(d);
        d->ops->destroy(d);
    }
    return done_testing();
}
