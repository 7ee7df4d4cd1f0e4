/* program.h: the op program, oomlab's one intermediate form.
 * Scenarios (via the workload generator), replays of PyTorch snapshots and text traces all become
 * a flat stream of these ops; one runner feeds them through the allocator model to a device. */
#ifndef OOMLAB_PROGRAM_H
#define OOMLAB_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "kernel_call.h" /* struct kernel_call, enum dtype (kernels/) */
#include "util/err.h"

enum op_kind {
    OP_ALLOC,       /* id, bytes, stream, category, name = module tag */
    OP_FREE,        /* id */
    OP_KERNEL,      /* kernel (see kernels/kernels.h), name = module tag */
    OP_EMPTY_CACHE, /* torch.cuda.empty_cache() */
    OP_PHASE,       /* name = phase ("load", "forward", "backward", "optimizer", "eval", ...) */
    OP_STEP,        /* id = training step number */
    OP_MARK,        /* name = free-form label */
};

enum category {
    CAT_PARAM,
    CAT_GRAD,
    CAT_OPTIMIZER_STATE,
    CAT_EMA,
    CAT_ACTIVATION,
    CAT_TEMP,
    CAT_WORKSPACE,
    CAT_INPUT,
    CAT_OUTPUT,
    CAT_OTHER,
    CAT_COUNT
};

struct op {
    enum op_kind kind;
    uint8_t category; /* enum category, for OP_ALLOC */
    int32_t stream;
    uint64_t id;      /* tensor id (ALLOC, FREE, and the tensor ids a kernel names); step number (STEP) */
    uint64_t bytes;   /* requested bytes (ALLOC); training samples in the step (STEP) */
    const char *name; /* interned: module tag, phase or label; valid while the producer lives */
    struct kernel_call kernel;
};

/* Where ops go: the runner (executes them) or a recorder (keeps them, for `oomlab program`). */
struct op_sink {
    int (*emit)(struct op_sink *sink, const struct op *op, struct err *e);
};

const char *category_name(enum category c);
int category_from_name(const char *s); /* -1 if unknown */

#endif
