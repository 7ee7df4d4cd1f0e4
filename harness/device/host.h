/* host.h: the host device: real memory from the OS under a capacity, so the allocator model OOMs exactly
 * where it says, and the CPU kernels running on real data, each timed with a monotonic clock (measured).
 * Having no GPU architecture, its cuBLAS workspace is PyTorch's default before Hopper. */
#ifndef OOMLAB_HOST_H
#define OOMLAB_HOST_H

#include "device/device_kind.h"

/* host, host:SIZE or host:FRACTION (of host_memory_bytes(); default half). */
extern const struct device_kind host_device_kind;

/* A host device of `capacity` bytes (its kind's open picks the default: half of host_memory_bytes()). */
struct device *host_device_create(uint64_t capacity, struct err *e);

/* The real memory behind the model's address addr on a host device, for reading results (tests,
 * tools); NULL if addr is in no segment or mapped range. */
void *host_device_pointer(struct device *d, uint64_t addr);

/* The memory this process may use: the machine's physical memory, or the cgroup's memory limit
 * when that is lower; *source (if not NULL) says which ("RAM" or "cgroup limit"). 0 if unknown. */
uint64_t host_memory_bytes(const char **source);

#endif
