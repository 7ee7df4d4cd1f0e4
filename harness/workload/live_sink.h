/* live_sink.h: an op sink that follows live ALLOC bytes without an allocator: totals per category,
 * the peak overall and after each PHASE/STEP/MARK op, and consistency checks (ids unique, FREE of
 * live ids only, KERNEL tensors live). Used by the workload tests and benchmark to check the
 * generator against formulas. C++-includable. */
#ifndef OOMLAB_WORKLOAD_LIVE_SINK_H
#define OOMLAB_WORKLOAD_LIVE_SINK_H

#include <stdint.h>

#include "program/program.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LIVE_SINK_MARKS 256

struct live_mark {
    const char *name;            /* phase name, "step" or the mark's label */
    int64_t live;                /* live bytes when the op arrived */
    int64_t cat[CAT_COUNT];      /* per category */
    int64_t peak_after;          /* highest live bytes until the next mark */
};

struct live_entry;

struct live_sink {
    struct op_sink base;         /* pass &sink.base to the generator */
    struct live_entry *tab;
    uint64_t nslots, nused;
    int64_t live, peak, cat[CAT_COUNT];
    uint64_t ops, allocs, frees, kernels;
    uint64_t bad_free, dup_id, dead_kernel_tensor;
    struct live_mark marks[LIVE_SINK_MARKS];
    int nmarks;
};

int live_sink_init(struct live_sink *s, struct err *e);
void live_sink_fini(struct live_sink *s);
/* The n-th (0-based) mark named `name`, or NULL. */
const struct live_mark *live_sink_mark(const struct live_sink *s, const char *name, int n);
/* 1 if no FREE named a dead id, no id was allocated twice and every kernel tensor was live. */
int live_sink_consistent(const struct live_sink *s);

#ifdef __cplusplus
}
#endif

#endif
