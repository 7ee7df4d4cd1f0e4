/* nvml.h: the GPUs of this machine as the NVIDIA driver's NVML reports them, loaded at run time
 * (libnvidia-ml.so.1, or the library $OOMLAB_NVML names), so oomlab runs where there is no driver and
 * says why. What it reads: each GPU's name, UUID, total/free/used memory, the memory of the compute
 * processes running on it (other than this one), MIG and compute mode, and the telemetry a stress run
 * watches (temperature, power, SM and memory clocks, clock-event (throttle) reasons, ECC counts).
 * A figure the GPU does not report is NVML_UNKNOWN. */
#ifndef OOMLAB_NVML_H
#define OOMLAB_NVML_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define NVML_MAX_GPUS 64
#define NVML_UNKNOWN (-1LL)

/* nvmlComputeMode_t */
enum nvml_compute_mode { NVML_MODE_DEFAULT, NVML_MODE_EXCLUSIVE_THREAD, NVML_MODE_PROHIBITED, NVML_MODE_EXCLUSIVE_PROCESS };

struct nvml_gpu {
    unsigned index;                  /* NVML's index: PCI bus order, as nvidia-smi numbers GPUs */
    char name[96];                   /* "NVIDIA GeForce RTX 5090" */
    char uuid[96];                   /* "GPU-..." */
    uint64_t total, free, used;      /* nvmlDeviceGetMemoryInfo, bytes */
    long long others, others_used;   /* compute processes other than this one and their memory */
    long long mig;                   /* MIG mode: 1 enabled, 0 disabled */
    long long compute_mode;          /* enum nvml_compute_mode */
    long long temperature_c, power_mw, sm_mhz, mem_mhz;
    long long clock_event_reasons;   /* nvmlClocksEventReason bits (throttle reasons) */
    long long ecc_corrected, ecc_uncorrected; /* volatile counts since the driver loaded */
};

/* Every GPU NVML sees, at most `max`: 0 with *count set, or -1 with e saying why
 * (ERR_INPUT, as for any device this machine cannot give) "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file ... (no NVIDIA driver)", or
 * NVML's own message for a driver that is there but failed. */
int nvml_list(struct nvml_gpu *gpus, int max, int *count, struct err *e);

/* A reading in fmt (a "%lld" with its unit: "%lld C"), or "n/a" when the GPU reports none; returns buf. */
const char *nvml_reading_format(long long v, const char *fmt, char *buf, size_t n);

/* The clock-event reasons as words ("sw power cap, hw thermal slowdown"; "none"). */
void nvml_reasons_format(long long reasons, char *buf, size_t n);

#endif
