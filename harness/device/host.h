/* host.h: the host device: real memory from the OS under a capacity, so the allocator model OOMs exactly
 * where it says, and the CPU kernels running on real data, timed with a monotonic clock (measured). */
#ifndef OOMLAB_HOST_H
#define OOMLAB_HOST_H

#include "device/device.h"

/* A host device of `capacity` bytes (device_open picks the default: half of host_memory_bytes()). */
struct device *host_device_create(uint64_t capacity, struct err *e);

/* The memory this process may use: the machine's physical memory, or the cgroup's memory limit
 * when that is lower; *source (if not NULL) says which ("RAM" or "cgroup limit"). 0 if unknown. */
uint64_t host_memory_bytes(const char **source);

#endif
