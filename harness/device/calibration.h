/* calibration.h: the constants of the sim's kernel-time model (kernel_time.h), one row per GPU
 * architecture, each taken once from published measurements of that architecture's cards (the rows
 * in calibration.c cite them), never fitted to a scenario. A GPU profile names its architecture; a
 * profile's own measured matmul rates, where published, take precedence over the row's efficiencies. */
#ifndef OOMLAB_CALIBRATION_H
#define OOMLAB_CALIBRATION_H

#include "dtype.h"

enum gpu_arch {
    ARCH_VOLTA,              /* sm_70: V100 */
    ARCH_TURING,             /* sm_75: T4 */
    ARCH_AMPERE,             /* sm_80/86: A100, A10G, RTX 3090, RTX A6000 */
    ARCH_ADA,                /* sm_89: RTX 4080/4090, L4, L40S */
    ARCH_HOPPER,             /* sm_90: H100, H200 */
    ARCH_BLACKWELL_DC,       /* sm_100: B200 */
    ARCH_BLACKWELL_CONSUMER, /* sm_120: RTX 50xx, RTX PRO 6000 Blackwell */
    ARCH_COUNT
};

struct arch_calibration {
    const char *name;   /* "Ampere" */
    const char *source; /* one line: what the row was calibrated on (shown in timed_by and `oomlab list profiles`) */
    /* Large-matmul rate as a share of the profile's spec rate (tflops_fp32, or tflops_16bit for bf16
     * and fp16), by dtype: used for a profile without a published measurement of its own. */
    double gemm_share[DT_COUNT];
    /* Launch-to-completion time every GEMM pays on top of its compute or memory time. */
    double gemm_fixed_us;
    /* Side of the square output tile cuBLAS computes per SM: a GEMM of T tiles runs in ceil(T / SMs)
     * waves, the last one partly idle (wave quantization); 0 where the measured shapes show no such
     * steps (Hopper's kernels adapt their tiles). */
    int gemm_tile;
    /* Achieved share of the spec bandwidth of streaming kernels (elementwise, norms, reductions). */
    double bandwidth_share;
    /* Fused (flash / memory-efficient) attention, forward and backward: its FLOP rate as a share of the
     * spec rate for the dtype, reaching flash_share * T / (T + flash_half_keys) at T keys per query. */
    double flash_share, flash_half_keys;
    /* Shortest time a non-GEMM kernel occupies the GPU. */
    double kernel_min_us;
};

/* The rows, by enum gpu_arch (profiles.c points at them). */
extern const struct arch_calibration arch_calibrations[ARCH_COUNT];

#endif
