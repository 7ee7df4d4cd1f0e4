/* device.h: the device interface (fio-style ops table) under the allocator model.
 * A device hands out segments (cudaMalloc) and virtual-memory reservations with mapped pages
 * (cuMemAddressReserve/cuMemMap for expandable segments), reports free/total memory, and runs or
 * accounts kernels and says how long they took. What a device can do is in its kind's flags
 * (device_has) and in which optional ops it fills; callers never test which device it is.
 * Devices: sim (modelled), host (real memory, CPU kernels), cuda (plugin: real GPU); their kinds are
 * listed in device_kind.h. */
#ifndef OOMLAB_DEVICE_H
#define OOMLAB_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct device;
struct device_kind;
struct kernel_call;
struct kernel_cost;

/* Results of memory requests: a device out of memory is an expected outcome, not an error. */
enum dev_status { DEV_OK = 0, DEV_OOM = 1, DEV_ERROR = -1 };

/* What a kind of device can do (struct device_kind.flags). */
enum device_flag {
    /* Its figures are measured (times by a clock or CUDA events); without it they are modelled. */
    DEVICE_MEASURED = 1u << 0,
    /* launch computes on the data at the tensors' addresses, so the caller must pass them (live). */
    DEVICE_RUNS_KERNELS = 1u << 1,
    /* Segments and reservations are placed by the sim's policy (each above every earlier one, 1 GiB
     * apart, never reused), so the allocator model breaks best-fit ties identically run after run. */
    DEVICE_DETERMINISTIC_PLACEMENT = 1u << 2,
    /* launch returns before the kernel ends: its time is known only once kernel_seconds has waited,
     * so callers read kernel time at phase and step boundaries rather than after each launch. */
    DEVICE_ASYNC_KERNELS = 1u << 3,
};

/* Device memory for library workspaces and kernel scratch (cuBLAS per stream, cuDNN per call, a
 * kernel's temporaries), taken from the caller's allocator the way PyTorch takes them from its
 * caching allocator, so they count in the memory model. alloc returns 0 with *addr, or -1 when the
 * memory is not there (an OOM). Frees are stream-ordered: memory freed after a launch may be reused
 * by later work on the same stream. */
struct device_workspace {
    int (*alloc)(void *user, uint64_t bytes, int stream, uint64_t *addr);
    void (*free)(void *user, uint64_t addr);
    void *user;
};

/* Ops marked optional may be NULL: the device cannot do that. */
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
    /* Runs one kernel, or on a modelled device accounts its time (optional: without it kernels cost
     * nothing). cost: the call's kernel_cost (kernels.h), which the caller has counted already and a
     * modelled device times by; its shape_id, when not 0, lets the device keep what it worked out for the
     * call's shape (kernel_shape.h). tensor_addrs: the k->ntensors tensors' addresses in kernels.h order,
     * NULL unless the kind has DEVICE_RUNS_KERNELS. 0, or -1 with e set. */
    int (*launch)(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost,
                  const uint64_t *tensor_addrs, struct err *e);
    /* Kernel time in seconds accumulated since the previous call (or since the device opened), then
     * a new count starts: modelled or measured as the kind's DEVICE_MEASURED says. Waits for launched
     * kernels first on a DEVICE_ASYNC_KERNELS device. Optional. */
    double (*kernel_seconds)(struct device *d);
    /* The next n new segments take these addresses, then the placement policy resumes (replaying a
     * snapshot at its recorded addresses). Optional: NULL where the device cannot choose addresses.
     * 0, or -1 with e set. */
    int (*place_next)(struct device *d, const uint64_t *addrs, size_t n, struct err *e);
    /* Sets where library workspaces and kernel scratch come from (NULL: the device's own memory);
     * workspaces held from the previous source are given back to it first, so that source may go
     * away afterwards. Optional: NULL on devices without library workspaces. */
    void (*set_workspace)(struct device *d, const struct device_workspace *ws);
    /* Waits for every launched kernel (optional: NULL where launches are synchronous). */
    void (*sync)(struct device *d);
    void (*destroy)(struct device *d);
};

struct device {
    const struct device_ops *ops;
    const struct device_kind *kind; /* its row of the device-kind table: name and flags */
    char name[64];                  /* "sim:rtx5090", "sim:24GiB", "host", "cuda:0" */
    char detail[128];               /* what the name leaves out ("" if nothing): a bare size's architecture, the GPU */
    char uuid[48];                  /* a real GPU's UUID as NVML and nvidia-smi write it ("GPU-..."), else "" */
    char timed_by[256];             /* how kernel time is obtained: "kernel-time model for Ampere (a100-80),
                                     * calibrated on ...", "CUDA events", ... */
    uint64_t total;                 /* what cudaMemGetInfo reports as total */
    uint64_t cublas_workspace_bytes; /* per stream: the job's, or PyTorch's default for the architecture */
    void *impl;
};

/* True if d's kind has every flag in `flags` (enum device_flag). */
bool device_has(const struct device *d, unsigned flags);

#endif
