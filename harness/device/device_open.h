/* device_open.h: turning a --device string ("sim", "sim:rtx5090", "sim:24GiB", "host", "host:50%",
 * "cuda:0") and an optional --capacity (a size or a fraction) into a device. */
#ifndef OOMLAB_DEVICE_OPEN_H
#define OOMLAB_DEVICE_OPEN_H

#include "device/cuda/cuda_plugin.h"
#include "device/device.h"
#include "util/err.h"
#include "util/size.h"

/* capacity {0, 0} = the spec's own (profile, size, or half the host's memory); bytes: the total the
 * device reports; a fraction: that share of the device's full memory (the profile's or size's total,
 * the host's memory, the GPU's). workspace (NULL = the device's own): where a real GPU's cuBLAS and
 * cuDNN workspaces come from; the harness points it at the allocator model, as PyTorch does. */
struct device *device_open(const char *spec, struct capacity capacity, const struct cuda_workspace_alloc *workspace,
                           struct err *e);

#endif
