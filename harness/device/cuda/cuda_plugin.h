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

/* Bumped whenever anything in this header or in device.h changes; the loader refuses another version. */
#define OOMLAB_CUDA_ABI 6

/* Library workspaces and kernel scratch come from the device's own memory (cudaMalloc) until the
 * caller points them elsewhere with the device's set_workspace op (struct device_workspace). The
 * cuBLAS workspace per stream is the device's cublas_workspace_bytes when the stream's first GEMM
 * runs: PyTorch's default for the GPU unless the caller changed it after opening. */
struct oomlab_cuda_options {
    uint64_t capacity_limit;          /* 0: the GPU's memory; else report and enforce this total */
    double capacity_fraction;         /* with capacity_limit 0: this share of the GPU's total, if > 0 */
};

/* Number of usable CUDA devices, or 0 with the runtime's own message in reason. Never fails hard:
 * with no driver or no GPU it reports why. */
typedef int (*oomlab_cuda_probe_fn)(char *reason, size_t n);
/* Opens device `ordinal`: 0 and *out, or -1 with e set (ERR_INTERNAL). */
typedef int (*oomlab_cuda_open_fn)(int ordinal, const struct oomlab_cuda_options *opt, struct device **out,
                                   struct err *e);
/* Synchronous copy between host memory and device memory of d (to_device: host -> device),
 * for tests and for loading data; 0, or -1 with e set. */
typedef int (*oomlab_cuda_copy_fn)(struct device *d, void *dst, const void *src, uint64_t bytes, int to_device,
                                   struct err *e);
/* OOMLAB_CUDA_ABI of the plugin. */
typedef int (*oomlab_cuda_abi_fn)(void);

#define OOMLAB_CUDA_PROBE_SYMBOL "oomlab_cuda_probe"
#define OOMLAB_CUDA_OPEN_SYMBOL "oomlab_cuda_open"
#define OOMLAB_CUDA_ABI_SYMBOL "oomlab_cuda_abi"
#define OOMLAB_CUDA_COPY_SYMBOL "oomlab_cuda_copy"

#ifdef __cplusplus
}
#endif

#endif
