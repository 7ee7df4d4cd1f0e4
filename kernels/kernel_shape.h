/* kernel_shape.h: a kernel call's shape, and the memo of what the roofline counts for a shape.
 *
 * A call's shape is everything about it but which tensors it names: the kernel, dtype, tensor count,
 * dims, fparam bit patterns, and which of its tensor slots name the same tensor (the only thing about
 * tensor ids any cost or time rule reads: generic_bytes counts a tensor named twice once), among the
 * slots below the call's tensor count or its kernel's (no rule reads a slot past both). Two calls of
 * one shape cost the same FLOPs and bytes and take the same modelled time, and a training step repeats
 * each block's kernels layer after layer, so the runner keeps a shape's cost (kernel_cost_memo) and tells
 * the device which shape a call has (struct kernel_cost's shape_id), and the sim keeps a shape's time by
 * that number. The memo is a direct-mapped cache: a call whose slot holds another shape is counted afresh
 * and takes the slot under a new shape id; a hit is the exact value counted before. */
#ifndef OOMLAB_KERNEL_SHAPE_H
#define OOMLAB_KERNEL_SHAPE_H

#include <stdint.h>

#include "kernel_call.h"

struct kernel_shape {
    uint64_t head; /* kernel | dtype << 16 | ntensors << 24 | 1 << 31 | same-tensor bits << 32 */
    int64_t dims[KERNEL_MAX_DIMS];
    uint64_t fparam[2]; /* the four floats' bit patterns */
};

#define KERNEL_COST_MEMO_SLOTS 512 /* a power of two */

struct kernel_cost_slot {
    struct kernel_shape shape; /* head 0: empty (a shape's head has bit 31 set) */
    struct kernel_cost cost;   /* with the shape's id */
};

/* Zeroed: empty. */
struct kernel_cost_memo {
    struct kernel_cost_slot *slots; /* KERNEL_COST_MEMO_SLOTS, allocated at the first call */
    const uint8_t *kernel_tensors;  /* each kernel's tensor count (kernel_get's), after the slots */
};

/* k's cost (kernel_cost, kernels.h; k's kernel must be in the table) with the shape id of k's shape: kept
 * from an earlier call of the same shape, or counted now and kept (under a new shape id, never given before
 * in this process). Without host memory for the memo it counts every call, with shape id 0. */
struct kernel_cost kernel_cost_memo(struct kernel_cost_memo *m, const struct kernel_call *k);
void kernel_cost_memo_free(struct kernel_cost_memo *m);

#endif
