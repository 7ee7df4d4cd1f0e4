/* host.h: the host device: real memory from the OS under a capacity, so the allocator model OOMs exactly
 * where it says, and the CPU kernels running on real data, timed with a monotonic clock (measured). */
#ifndef OOMLAB_HOST_H
#define OOMLAB_HOST_H

#include "device/device.h"

/* capacity 0: half of the machine's physical memory (hwloc). */
struct device *host_device_create(uint64_t capacity, struct err *e);

#endif
