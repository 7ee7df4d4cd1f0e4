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

#endif
