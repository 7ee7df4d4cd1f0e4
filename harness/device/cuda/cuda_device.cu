// cuda_device.cu: the cuda device of the plugin: probing, opening, segments (cudaMalloc/cudaFree)
// under an optional capacity limit, cudaMemGetInfo, kernel time from CUDA events, where workspaces
// come from, sync, and the exported C entry points.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda/cuda_impl.h"
#include "device/profiles.h"

int cuda_fail(struct err *e, enum err_code code, const char *fmt, ...)
{
    if (!e || e->code != ERR_NONE)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return -1;
}

static enum dev_status seg_alloc(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e)
{
    cuda_dev *c = cuda_of(d);
    if (cuda_over_limit(c, size))
        return DEV_OOM;
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, size);
    if (rc == cudaErrorMemoryAllocation) {
        cudaGetLastError(); // an OOM is an outcome, not a sticky error
        return DEV_OOM;
    }
    if (rc != cudaSuccess) {
        cuda_fail(e, ERR_INTERNAL, "%s: cudaMalloc(%llu): %s", d->name, (unsigned long long)size, cudaGetErrorString(rc));
        return DEV_ERROR;
    }
    c->used += size;
    *addr = (uint64_t)(uintptr_t)p;
    return DEV_OK;
}

static void seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    cuda_dev *c = cuda_of(d);
    if (cudaFree((void *)(uintptr_t)addr) == cudaSuccess)
        c->used -= size;
}

static void mem_info(struct device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    cuda_dev *c = cuda_of(d);
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        f = t = 0;
    if (c->opt.capacity_limit && c->opt.capacity_limit < t) {
        uint64_t room = c->opt.capacity_limit - (c->used < c->opt.capacity_limit ? c->used : c->opt.capacity_limit);
        t = c->opt.capacity_limit;
        f = f < room ? f : room;
    }
    *free_bytes = f;
    *total_bytes = t;
}

static void sync_dev(struct device *d)
{
    cudaDeviceSynchronize();
    cuda_collect_timings(cuda_of(d));
}

// The GPU time of the kernels launched since the last call, from their CUDA events.
static double kernel_seconds(struct device *d)
{
    cuda_dev *c = cuda_of(d);
    sync_dev(d);
    double s = c->kernel_ms / 1e3;
    c->kernel_ms = 0;
    return s;
}

static void set_workspace(struct device *d, const struct device_workspace *ws)
{
    cuda_dev *c = cuda_of(d);
    sync_dev(d); // kernels still using a workspace finish before it goes back
    cuda_streams_release_workspaces(c);
    c->workspace = ws ? *ws : device_workspace{};
}

static void destroy(struct device *d)
{
    cuda_dev *c = cuda_of(d);
    cudaDeviceSynchronize();
    cuda_collect_timings(c);
    cuda_streams_destroy(c);
    cuda_vmm_release_all(c);
    delete c;
}

// In device.h's order (nvcc's C++17 has no designated initializers); place_next is NULL: the
// driver chooses addresses.
static const struct device_ops cuda_ops = {
    seg_alloc, seg_free,       cuda_va_reserve, cuda_va_release, cuda_map, cuda_unmap, mem_info,
    cuda_launch, kernel_seconds, NULL,          set_workspace,   sync_dev, destroy,
};

int cuda_workspace_alloc(cuda_dev *c, uint64_t bytes, int stream, uint64_t *addr)
{
    if (c->workspace.alloc)
        return c->workspace.alloc(c->workspace.user, bytes, stream, addr);
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    *addr = (uint64_t)(uintptr_t)p;
    return 0;
}

void cuda_workspace_free(cuda_dev *c, uint64_t addr)
{
    if (c->workspace.alloc)
        c->workspace.free(c->workspace.user, addr);
    else
        cudaFree((void *)(uintptr_t)addr);
}

extern "C" __attribute__((visibility("default"))) int oomlab_cuda_probe(char *reason, size_t n)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        snprintf(reason, n, "%s", cudaGetErrorString(rc));
        return 0;
    }
    if (count == 0)
        snprintf(reason, n, "the CUDA driver reports no devices");
    return count;
}

extern "C" __attribute__((visibility("default"))) int oomlab_cuda_open(int ordinal, const struct oomlab_cuda_options *opt,
                                                                       struct device **out, struct err *e)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess)
        return cuda_fail(e, ERR_INTERNAL, "cuda:%d: %s", ordinal, cudaGetErrorString(rc));
    if (ordinal < 0 || ordinal >= count)
        return cuda_fail(e, ERR_INPUT, "cuda:%d: no such device (%d found)", ordinal, count);
    if ((rc = cudaSetDevice(ordinal)) != cudaSuccess)
        return cuda_fail(e, ERR_INTERNAL, "cuda:%d: cudaSetDevice: %s", ordinal, cudaGetErrorString(rc));
    cuda_dev *c = new cuda_dev();
    c->ordinal = ordinal;
    if (opt)
        c->opt = *opt;
    size_t gpu_free = 0, gpu_total = 0;
    if (!c->opt.capacity_limit && c->opt.capacity_fraction > 0.0 && cudaMemGetInfo(&gpu_free, &gpu_total) == cudaSuccess)
        c->opt.capacity_limit = (uint64_t)((double)gpu_total * c->opt.capacity_fraction);
    c->dev.ops = &cuda_ops;
    c->dev.impl = c;
    snprintf(c->dev.name, sizeof c->dev.name, "cuda:%d", ordinal);
    snprintf(c->dev.timed_by, sizeof c->dev.timed_by, "CUDA events");
    // PyTorch's default cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG) for the compute capability.
    cudaDeviceProp prop;
    bool have_prop = cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess;
    c->dev.cublas_workspace_bytes =
        have_prop && prop.major >= 9 ? CUBLAS_WORKSPACE_SM90_BYTES : CUBLAS_WORKSPACE_PRE_SM90_BYTES;
    if (have_prop) {
        snprintf(c->dev.detail, sizeof c->dev.detail, "%s, sm_%d%d", prop.name, prop.major, prop.minor);
        const unsigned char *u = (const unsigned char *)prop.uuid.bytes; // as NVML writes it, for its telemetry
        snprintf(c->dev.uuid, sizeof c->dev.uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
                 u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    }
    uint64_t free_bytes, total;
    mem_info(&c->dev, &free_bytes, &total);
    c->dev.total = total;
    char why[256];
    c->have_vmm = cuda_vmm_init(c, why, sizeof why);
    if (!c->have_vmm) {
        cuda_fail(e, ERR_INTERNAL, "cuda:%d: virtual memory management unavailable: %s", ordinal, why);
        delete c;
        return -1;
    }
    *out = &c->dev;
    return 0;
}

extern "C" __attribute__((visibility("default"))) int oomlab_cuda_copy(struct device *d, void *dst, const void *src,
                                                                       uint64_t bytes, int to_device, struct err *e)
{
    cudaError_t rc = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (rc != cudaSuccess)
        return cuda_fail(e, ERR_INTERNAL, "%s: cudaMemcpy of %llu bytes: %s", d->name, (unsigned long long)bytes,
                         cudaGetErrorString(rc));
    return 0;
}

extern "C" __attribute__((visibility("default"))) int oomlab_cuda_abi(void)
{
    return OOMLAB_CUDA_ABI;
}
