/* profile_detect.h: the GPU profile of a GPU NVML detected, by its name ("NVIDIA GeForce RTX 5090"
 * is rtx5090; "NVIDIA A100-SXM4-80GB" is a100-80, the A100 profile nearest its memory), so that
 * `sim:gpuN` simulates this machine's GPU N, and `oomlab devices` says which profile stands for it. */
#ifndef OOMLAB_PROFILE_DETECT_H
#define OOMLAB_PROFILE_DETECT_H

#include "device/nvml.h"
#include "device/profiles.h"
#include "util/err.h"

/* The profile for g, or NULL when none matches its name. */
const struct gpu_profile *gpu_profile_for(const struct nvml_gpu *g);

/* sim:gpuN: NVML's GPU `index` and its profile; -1 with e (ERR_INPUT) when NVML is unavailable, there
 * is no such GPU, or no profile matches it (then sim:SIZE with its total is the way). */
int gpu_profile_detect(unsigned index, const struct gpu_profile **out, struct err *e);

#endif
