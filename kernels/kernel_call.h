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
 * the bytes it must move. Computed once per launch by the caller and handed to the device with the call.
 * shape_id, when not 0, numbers the call's shape (kernel_shape.h): calls with the same non-zero shape_id
 * have the same shape, so a device may keep what it models for one and take it again for the next. */
struct kernel_cost {
    double flops, bytes;
    uint64_t shape_id;
};

#endif
