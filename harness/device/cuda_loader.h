/* cuda_loader.h: finding and loading the CUDA device plugin (oomlab-cuda.so, beside the oomlab
 * binary) at run time, so the main binary never links CUDA and runs on machines without a driver.
 * Every failure comes back as a reason a user can act on, never as a crash. */
#ifndef OOMLAB_CUDA_LOADER_H
#define OOMLAB_CUDA_LOADER_H

#include <stddef.h>

#include "device/cuda/cuda_plugin.h"
#include "device/device_kind.h"
#include "util/err.h"

/* The ordinal of cuda:auto in a device_spec: the GPU gpu_select_auto picks when the device opens. */
#define CUDA_ORDINAL_AUTO (-1)

/* cuda, cuda:N or cuda:auto, through the plugin; unavailable (with the reason) where it cannot load or finds
 * no GPU. Its cuBLAS workspace is PyTorch's default for the GPU's compute capability. */
extern const struct device_kind cuda_device_kind;

/* The default plugin path: OOMLAB_CUDA_PLUGIN_NAME beside /proc/self/exe, else in ../lib/oomlab/ from it
 * (an installed oomlab), else the first (to name where it was looked for).
 * Returns 0, or -1 if the path does not fit in n bytes or /proc/self/exe is unreadable. */
int cuda_plugin_default_path(char *buf, size_t n);

/* Number of usable CUDA devices through the plugin at `path` (NULL: the default path), or 0 with
 * the reason in why: "oomlab was built without nvcc" when the plugin file is missing, the
 * dynamic loader's message when it cannot be loaded, or the CUDA runtime's own message when
 * there is no driver or no GPU. */
int cuda_probe(const char *path, char *why, size_t n);

/* Opens cuda:ordinal through the plugin at `path` (NULL: default) with opt (NULL: the whole GPU).
 * Kernel calls launched on the device are checked against the kernel table first; workspaces come
 * from the device's own memory until set_workspace says otherwise. NULL with e set (ERR_INPUT with
 * the probe's reason when CUDA is unavailable). */
struct device *cuda_device_open(const char *path, int ordinal, const struct oomlab_cuda_options *opt, struct err *e);

/* Synchronous copy host -> device (to_device) or device -> host on a device from cuda_device_open:
 * device.h has no data movement, but tests and data loading need it. 0, or -1 with e set. */
int cuda_device_copy(struct device *d, void *dst, const void *src, uint64_t bytes, int to_device, struct err *e);

#endif
