/* sim.h: the simulated device: accounting only, no backing memory, deterministic addresses.
 * A request fails when reserved + context + the new bytes > total; free = total - context - reserved.
 * Each new segment or VA reservation is placed above every earlier one (first base 2^40, next = previous
 * base + size + 1 GiB) and freed ranges are never reused. */
#ifndef OOMLAB_SIM_H
#define OOMLAB_SIM_H

#include "device/device.h"
#include "device/profiles.h"

/* total: what CUDA reports; context: bytes already used by the CUDA context (0 for a bare capacity). */
struct device *sim_device_create(const char *name, uint64_t total, uint64_t context, const struct gpu_profile *profile);
/* The next n segment allocations take these addresses (replay --same-addresses), then the policy resumes.
 * -1 without host memory for the list (no address is forced then). */
int sim_device_force_addresses(struct device *d, const uint64_t *addrs, size_t n);
const struct gpu_profile *sim_device_profile(const struct device *d);
bool device_is_sim(const struct device *d);

#endif
