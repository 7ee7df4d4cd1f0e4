/* kernel_time.h: the sim's kernel-time model. One program kernel stands for one or more CUDA
 * kernels PyTorch launches (an eager attention is two batched GEMMs and its softmax passes; a
 * for-loop AdamW step is eight elementwise ops per parameter), each costing the framework host time
 * to issue and the GPU time of its class:
 *   GEMM, convolution   fixed time + the slower of FLOPs at the measured matmul rate (over the waves
 *                       of its tiles; off tensor cores for a 16-bit one not aligned to 8 under
 *                       cuBLAS 10) and bytes at the achieved bandwidth
 *   eager attention     its batched GEMMs by the GEMM rule, its score-matrix passes at the bandwidth
 *   fused attention     FLOPs at the architecture's flash share of the spec rate, rising with keys
 *   optimizer steps     the unfused ops of torch.optim's for-loop (one launch each per tensor),
 *                       foreach (launches shared by a tensor list) or fused path, and transformers'
 *                       Adafactor op by op
 *   the rest            bytes at the achieved bandwidth, never under the minimum kernel time
 * with every GPU constant from the profile's architecture row (calibration.h) and the host time per
 * op from the software stack (profiles.h). */
#ifndef OOMLAB_KERNEL_TIME_H
#define OOMLAB_KERNEL_TIME_H

#include "device/profiles.h"
#include "kernel_call.h"
#include "util/err.h"

struct kernel_time {
    double gpu_seconds; /* of all its CUDA kernels */
    double launches;    /* CUDA kernels (fractional where a foreach op shares one launch among tensors) */
    double host_seconds; /* the framework's time to issue them */
};

/* What the model times by on profile p under a software stack, worked out once per device
 * (kernel_rates_for). */
struct kernel_rates {
    const struct gpu_profile *p;
    const struct arch_calibration *cal;     /* p's architecture's */
    const struct software_stack *stack;
    double bandwidth;                       /* achieved, bytes/s */
    double kernel_min, gemm_fixed, host_op; /* seconds */
};

struct kernel_rates kernel_rates_for(const struct gpu_profile *p, const struct software_stack *stack);

/* The modelled cost of one program kernel, whose FLOP and byte counts are cost (kernels.h, kernel_cost), at
 * rates r: 0, or -1 with e set (ERR_INTERNAL for an unknown kernel, ERR_INPUT for an optimizer impl that is
 * not 0, 1 or 2). */
int kernel_time_model(const struct kernel_call *k, const struct kernel_cost *cost, const struct kernel_rates *r,
                      struct kernel_time *out, struct err *e);

#endif
