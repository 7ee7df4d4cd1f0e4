/* sim.h: the simulated device: accounting only, no backing memory, deterministic addresses, kernel
 * time modelled. A request fails when reserved + context + the new bytes > total; free = total -
 * context - reserved. Each new segment or VA reservation is placed above every earlier one (first base
 * 2^40, next = previous base + size + 1 GiB) and freed ranges are never reused. Each launched kernel
 * costs the roofline of its GPU profile: max(FLOPs / tensor rate for its dtype, bytes / bandwidth). */
#ifndef OOMLAB_SIM_H
#define OOMLAB_SIM_H

#include "device/device_kind.h"

/* sim, sim:PROFILE, or sim:SIZE: a card of SIZE total (what CUDA reports) with the architecture of
 * the default profile: its roofline rates, cuBLAS workspace and CUDA context. */
extern const struct device_kind sim_device_kind;

/* A sim device of `total` bytes (what CUDA reports) of which `context` are taken by a CUDA context;
 * profile: its roofline rates and cuBLAS workspace (NULL: the default profile's). NULL without host
 * memory. */
struct device *sim_device_create(const char *name, uint64_t total, uint64_t context, const struct gpu_profile *profile);

#endif
