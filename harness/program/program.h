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
    OP_RESET_PEAK,        /* torch.cuda.reset_peak_memory_stats() */
    OP_RESET_ACCUMULATED, /* torch.cuda.reset_accumulated_memory_stats() */
    /* What a snapshot recorded of the driver (id = the address it returned, bytes = the segment size,
     * stream): a segment_alloc is checked against the model's own, not run; a segment_free (empty_cache,
     * or PyTorch's release before a retry) releases the model's counterpart if it is wholly free. */
    OP_SEGMENT_ALLOC,
    OP_SEGMENT_FREE,
    /* ... and of expandable segments (id = the mapped range's address, bytes = its size): a map is checked,
     * an unmap (empty_cache, or a release before a retry) unmaps the model's free pages there. */
    OP_SEGMENT_MAP,
    OP_SEGMENT_UNMAP,
    /* A request the recording OOMed on (bytes, stream; name = its site): the model tries it at this point.
     * If the model OOMs too, the OOM is the run's, as recorded; if it succeeds (more room, other settings),
     * the block is freed at once and memory mapped or allocated for it is given back, so the rest of the
     * trace runs on the recorded state. */
    OP_RECORDED_OOM,
    /* cudaMallocManaged outside the caching allocator (bitsandbytes' paged optimizer state: id, bytes,
     * stream, category, name as OP_ALLOC; freed by OP_FREE): device memory while resident, never part
     * of the allocator's reserved memory. */
    OP_MANAGED_ALLOC,
    OP_KIND_COUNT
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
    uint64_t where;   /* position in the source: line of a text trace, event of a snapshot; 0 if generated */
    struct kernel_call kernel;
};

/* Where ops go: the runner (executes them) or a recorder (keeps them, for `oomlab program`). */
struct op_sink {
    int (*emit)(struct op_sink *sink, const struct op *op, struct err *e);
};

/* The verb of an op in the text form ("alloc", "reset_peak_memory_stats", ...); -1 if unknown. */
const char *op_kind_name(enum op_kind k);
int op_kind_from_name(const char *s);
const char *category_name(enum category c);
int category_from_name(const char *s); /* -1 if unknown */

#endif
