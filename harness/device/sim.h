/* sim.h: the simulated device: accounting only, no backing memory, deterministic addresses, kernel
 * time modelled. A request fails when reserved + context + the new bytes > total; free = total -
 * context - reserved. Each new segment or VA reservation is placed above every earlier one (first base
 * 2^40, next = previous base + size + 1 GiB) and freed ranges are never reused. Each launched kernel
 * costs what the kernel-time model (kernel_time.h) gives for its GPU profile: GPU time, and host time
 * to issue it; launches are asynchronous, so host and GPU time overlap until the next synchronisation
 * (kernel_seconds). */
#ifndef OOMLAB_SIM_H
#define OOMLAB_SIM_H

#include "device/device_kind.h"

/* sim, sim:PROFILE, or sim:SIZE: a card of SIZE total (what CUDA reports) with the architecture of
 * the default profile: its rates, kernel-time calibration, cuBLAS workspace and CUDA context. Either
 * may end in @cudaMAJOR.MINOR: the CUDA context of that version (profiles.h) replaces the profile's. */
extern const struct device_kind sim_device_kind;

/* A sim device of `total` bytes (what CUDA reports) of which `context` are taken by a CUDA context;
 * profile: its rates, calibration and cuBLAS workspace (NULL: the default profile's); today's
 * software stack. NULL without host memory. */
struct device *sim_device_create(const char *name, uint64_t total, uint64_t context, const struct gpu_profile *profile);
/* Times d's kernels with that stack's host time per op (its context is the caller's to choose). */
void sim_device_set_stack(struct device *d, const struct software_stack *stack);

#endif
