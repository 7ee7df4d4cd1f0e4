// cuda_impl.h: state shared by the CUDA plugin's source files (C++, plugin only): the device, its
// per-stream library handles, the driver's virtual-memory entry points, and error helpers.
#ifndef OOMLAB_CUDA_IMPL_H
#define OOMLAB_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <vector>

#include "device/cuda/cuda_plugin.h"
#include "kernels.h"

// Driver functions reached through cudaGetDriverEntryPointByVersion (the plugin links no libcuda).
struct cuda_driver {
    CUresult (*mem_address_reserve)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags);
    CUresult (*mem_address_free)(CUdeviceptr ptr, size_t size);
    CUresult (*mem_create)(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                           unsigned long long flags);
    CUresult (*mem_release)(CUmemGenericAllocationHandle handle);
    CUresult (*mem_map)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                        unsigned long long flags);
    CUresult (*mem_unmap)(CUdeviceptr ptr, size_t size);
    CUresult (*mem_set_access)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
    CUresult (*mem_get_allocation_granularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option);
    CUresult (*get_error_string)(CUresult error, const char **str);
};

// What one stream owns: its CUDA stream, cuBLAS and cuDNN handles and the cuBLAS workspace.
struct cuda_stream_ctx {
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    uint64_t cublas_ws; // device address of the cuBLAS workspace (0: none yet)
};

// A launch's start and stop events, read back at the next sync.
struct cuda_timing {
    cudaEvent_t start, stop;
};

struct cuda_dev {
    struct device dev; // first: the harness sees &dev
    int ordinal;
    struct oomlab_cuda_options opt;
    struct device_workspace workspace; // alloc NULL: cudaMalloc/cudaFree
    uint64_t used;  // bytes in segments and mapped pages, for capacity_limit
    size_t granularity;
    CUmemAllocationProp prop;
    struct cuda_driver drv;
    bool have_vmm;
    std::map<uint64_t, CUmemGenericAllocationHandle> pages; // mapped granules by address
    std::map<int, cuda_stream_ctx> streams;
    std::vector<cuda_timing> pending, spare_events;
    double kernel_ms; // of the kernels whose events were read since the last kernel_seconds
};

static inline cuda_dev *cuda_of(struct device *d)
{
    return (cuda_dev *)d->impl;
}

// True if `more` bytes would take the device past its capacity limit.
static inline bool cuda_over_limit(const cuda_dev *c, uint64_t more)
{
    return c->opt.capacity_limit && c->used + more > c->opt.capacity_limit;
}

// Sets e (first error wins) and returns -1.
int cuda_fail(struct err *e, enum err_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Virtual memory (cuda_vmm.cu).
bool cuda_vmm_init(cuda_dev *c, char *why, size_t n);
enum dev_status cuda_va_reserve(struct device *d, uint64_t size, uint64_t *addr, struct err *e);
void cuda_va_release(struct device *d, uint64_t addr, uint64_t size);
enum dev_status cuda_map(struct device *d, uint64_t addr, uint64_t size, struct err *e);
void cuda_unmap(struct device *d, uint64_t addr, uint64_t size);
void cuda_vmm_release_all(cuda_dev *c);

// Workspaces and scratch for cuBLAS, cuDNN and kernels alike: through c->workspace, else cudaMalloc
// (cuda_device.cu).
int cuda_workspace_alloc(cuda_dev *c, uint64_t bytes, int stream, uint64_t *addr);
void cuda_workspace_free(cuda_dev *c, uint64_t addr);

// Kernels (cuda_launch.cu).
int cuda_launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost, const uint64_t *addrs,
                struct err *e);
// Gives every stream's cuBLAS workspace back (a later GEMM takes a new one).
void cuda_streams_release_workspaces(cuda_dev *c);
void cuda_streams_destroy(cuda_dev *c);
void cuda_collect_timings(cuda_dev *c);

#endif
