/* cuda_plugin.h: the C interface between oomlab and its CUDA plugin (build/oomlab-cuda.so), which
 * the main binary loads at run time (device/cuda_loader.c), so one build runs with or without a
 * driver. The loader finds the plugin's C entry points by the OOMLAB_CUDA_*_SYMBOL names below. */
#ifndef OOMLAB_CUDA_PLUGIN_H
#define OOMLAB_CUDA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever anything in this header changes; the loader refuses another version. */
#define OOMLAB_CUDA_ABI 2

/* Device memory for library workspaces (cuBLAS per stream, cuDNN per call) and kernel scratch,
 * taken from the caller's allocator the way PyTorch takes them from its caching allocator, so
 * they count in the memory model. alloc returns 0 with *addr, or -1 when the memory is not
 * there (an OOM). Frees are stream-ordered: memory freed after a launch may be reused by later
 * work on the same stream. With alloc NULL the plugin uses cudaMalloc/cudaFree itself. The
 * cuBLAS workspaces live until the device's destroy, which gives them back through free, so the
 * allocator behind these callbacks must outlive the device. */
struct cuda_workspace_alloc {
    int (*alloc)(void *user, uint64_t bytes, int stream, uint64_t *addr);
    void (*free)(void *user, uint64_t addr);
    void *user;
};

struct oomlab_cuda_options {
    uint64_t capacity_limit;          /* 0: the GPU's memory; else report and enforce this total */
    double capacity_fraction;         /* with capacity_limit 0: this share of the GPU's total, if > 0 */
    uint64_t cublas_workspace_bytes;  /* per stream; 0: PyTorch's default for the GPU */
    struct cuda_workspace_alloc workspace;
};

/* Number of usable CUDA devices, or 0 with the runtime's own message in reason. Never fails hard:
 * with no driver or no GPU it reports why. */
typedef int (*oomlab_cuda_probe_fn)(char *reason, size_t n);
/* Opens device `ordinal`: 0 and *out, or -1 with e set (ERR_INTERNAL). */
typedef int (*oomlab_cuda_open_fn)(int ordinal, const struct oomlab_cuda_options *opt, struct device **out,
                                   struct err *e);
/* GPU time of every kernel launched on d so far, in milliseconds, measured with CUDA events
 * (waits for the launched work to finish). */
typedef double (*oomlab_cuda_kernel_ms_fn)(struct device *d);
/* Synchronous copy between host memory and device memory of d (to_device: host -> device),
 * for tests and for loading data; 0, or -1 with e set. */
typedef int (*oomlab_cuda_copy_fn)(struct device *d, void *dst, const void *src, uint64_t bytes, int to_device,
                                   struct err *e);
/* OOMLAB_CUDA_ABI of the plugin. */
typedef int (*oomlab_cuda_abi_fn)(void);

#define OOMLAB_CUDA_PROBE_SYMBOL "oomlab_cuda_probe"
#define OOMLAB_CUDA_OPEN_SYMBOL "oomlab_cuda_open"
#define OOMLAB_CUDA_KERNEL_MS_SYMBOL "oomlab_cuda_kernel_ms"
#define OOMLAB_CUDA_ABI_SYMBOL "oomlab_cuda_abi"
#define OOMLAB_CUDA_COPY_SYMBOL "oomlab_cuda_copy"

#ifdef __cplusplus
}
#endif

#endif
