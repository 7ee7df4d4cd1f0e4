/* kernel_call.h: one kernel launch as the op program carries it and every kernel takes it. */
#ifndef OOMLAB_KERNEL_CALL_H
#define OOMLAB_KERNEL_CALL_H

#include <stdint.h>

#include "dtype.h"

#define KERNEL_MAX_DIMS 8
#define KERNEL_MAX_TENSORS 6

/* Which kernel (enum kernel_id, kernels.h), its dimensions (meaning per kernel, documented in
 * kernels.h), the compute dtype and the tensors it reads and writes (by op-program tensor id). */
struct kernel_call {
    uint16_t kernel;
    uint8_t dtype;
    uint8_t ntensors;
    int64_t dims[KERNEL_MAX_DIMS];
    uint64_t tensors[KERNEL_MAX_TENSORS];
    float fparam[4]; /* scalar parameters (lr, beta1, eps, dropout p, ...) */
};

/* What a call costs as the roofline counts it (kernels.h, kernel_cost): its floating-point operations and
 * the bytes it must move. Computed once per launch by the caller and handed to the device with the call. */
struct kernel_cost {
    double flops, bytes;
};

#endif
