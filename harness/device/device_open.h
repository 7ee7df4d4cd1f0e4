/* device_open.h: turning a --device string ("sim", "sim:rtx5090", "sim:24GiB", "host", "cuda:0") and an
 * optional --capacity into a device. */
#ifndef OOMLAB_DEVICE_OPEN_H
#define OOMLAB_DEVICE_OPEN_H

#include "device/cuda/cuda_plugin.h"
#include "device/device.h"
#include "util/err.h"

/* capacity 0 = the spec's own (profile or size); otherwise the total the device reports.
 * workspace (NULL = the device's own): where a real GPU's cuBLAS and cuDNN workspaces come from; the
 * harness points it at the allocator model, as PyTorch does. */
struct device *device_open(const char *spec, uint64_t capacity, const struct cuda_workspace_alloc *workspace,
                           struct err *e);

#endif
