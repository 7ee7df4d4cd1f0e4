/* device.h: the device interface (fio-style ops table) under the allocator model.
 * A device hands out segments (cudaMalloc) and virtual-memory reservations with mapped pages
 * (cuMemAddressReserve/cuMemMap for expandable segments), reports free/total memory, and may run
 * kernels. Devices: sim (accounting only, deterministic addresses), host (real memory, CPU kernels),
 * cuda (plugin: real GPU memory and kernels). */
#ifndef OOMLAB_DEVICE_H
#define OOMLAB_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

struct device;
struct kernel_call;

/* Results of memory requests: a device out of memory is an expected outcome, not an error. */
enum dev_status { DEV_OK = 0, DEV_OOM = 1, DEV_ERROR = -1 };

struct device_ops {
    /* cudaMalloc: a new segment of `size` bytes; *addr receives its base address. */
    enum dev_status (*seg_alloc)(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e);
    void (*seg_free)(struct device *d, uint64_t addr, uint64_t size);
    /* cuMemAddressReserve: a virtual range with nothing mapped (does not count against capacity). */
    enum dev_status (*va_reserve)(struct device *d, uint64_t size, uint64_t *addr, struct err *e);
    void (*va_release)(struct device *d, uint64_t addr, uint64_t size);
    /* cuMemCreate + cuMemMap + cuMemSetAccess of [addr, addr+size) inside a reservation. */
    enum dev_status (*map)(struct device *d, uint64_t addr, uint64_t size, struct err *e);
    void (*unmap)(struct device *d, uint64_t addr, uint64_t size);
    /* cudaMemGetInfo. */
    void (*mem_info)(struct device *d, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Runs one kernel on tensors at the given addresses (NULL where the device only accounts). */
    int (*launch)(struct device *d, const struct kernel_call *k, const uint64_t *tensor_addrs, struct err *e);
    void (*sync)(struct device *d);
    void (*destroy)(struct device *d);
};

struct device {
    const struct device_ops *ops;
    char name[64];        /* "sim:rtx5090", "host", "cuda:0" */
    uint64_t total;       /* what cudaMemGetInfo reports as total */
    bool measured;        /* true: figures are measured (host, cuda); false: modelled (sim) */
    void *impl;
};

#endif
