/* gpu_select.h: `--device cuda:auto`: the GPU with the most free memory, as NVML reports it, among
 * those this process may use, optionally with at least --min-free SIZE free and waiting up to
 * --wait-for-gpu DURATION for one, polling every --poll DURATION. The choice is made once per process,
 * so every job of a run uses the same GPU. */
#ifndef OOMLAB_GPU_SELECT_H
#define OOMLAB_GPU_SELECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "device/nvml.h"
#include "util/err.h"

#define GPU_POLL_DEFAULT_SECONDS 5.0

struct gpu_select_options {
    uint64_t min_free;   /* 0: any free memory will do */
    double wait_seconds; /* 0: do not wait */
    double poll_seconds; /* 0: GPU_POLL_DEFAULT_SECONDS */
};

/* Sets the options cuda:auto uses in this process (the CLI's --min-free, --wait-for-gpu, --poll). */
void gpu_select_configure(const struct gpu_select_options *o);

/* The choice among n GPUs: the index into g of the usable one with the most free memory (ties: the
 * lowest index), at least min_free; or -1, with one line per GPU in why saying why not. A GPU is
 * usable if visible[i] (this process may see it), MIG is off (a MIG GPU is used through a MIG device
 * in CUDA_VISIBLE_DEVICES), its compute mode is not prohibited, and in exclusive-process mode no
 * other process holds it. */
int gpu_pick(const struct nvml_gpu *g, int n, const bool *visible, uint64_t min_free, char *why, size_t whyn);

/* Which NVML GPUs CUDA shows this process, and as which CUDA ordinal, under CUDA_VISIBLE_DEVICES
 * (indices in PCI order, or GPU UUIDs or their prefixes; CUDA stops at the first entry it cannot
 * resolve); ordinal[i] is -1 for a hidden GPU. -1 with e for a MIG entry (name cuda:N instead). */
int gpu_visible(const struct nvml_gpu *g, int n, const char *cuda_visible_devices, int *ordinal, struct err *e);

/* cuda:auto: the CUDA ordinal to open, waiting as configured (a line on progress for each poll that
 * finds none). Sets CUDA_DEVICE_ORDER=PCI_BUS_ID when unset, so that CUDA numbers GPUs as NVML does.
 * -1 with e (ERR_INPUT): no NVML, no usable GPU, or none freed up in time, with every GPU's reason. */
int gpu_select_auto(int *ordinal, FILE *progress, struct err *e);

#endif
