/* timeline.h: a run's memory over time, kept small enough to draw and to trace. A timeline is a runner
 * observer that keeps the allocated bytes per category and the reserved bytes after every op,
 * down-sampled to at most max_points points (each point covers a run of consecutive ops and keeps their
 * maximum, so peaks survive any down-sampling), the phase spans, the step boundaries, each OOM, the
 * kernels (up to TIMELINE_MAX_KERNELS, for a trace's slices) and the allocator's segments when reserved
 * last reached its peak (captured only when reserved sets a new peak, so the picture matches the
 * reserved-but-unallocated figure of the run's table).
 *
 * Its clock is the device's kernel time: modelled on sim, measured on host and cuda. Where a device
 * reports that time only at phase and step boundaries (an asynchronous one), the time between two
 * readings is spread evenly over the ops between them, so kernels lie in op order within their phase. */
#ifndef OOMLAB_TIMELINE_H
#define OOMLAB_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/snapshot.h"
#include "run/runner.h"

#define TIMELINE_POINTS 2048        /* points kept by default */
#define TIMELINE_MAX_KERNELS 200000 /* kernel slices kept; later ones are counted */
#define TIMELINE_MAX_MARKS 100000   /* phase spans and steps kept each; later ones are counted */

/* Ops are numbered from 1 in the order the runner executed them; op 0 is the empty start. */
struct timeline_point {
    uint64_t first_op, last_op; /* the ops it covers */
    double first_s, last_s;     /* their times */
    uint64_t peak_op;           /* where allocated was highest (the first such op) */
    double peak_s;
    uint64_t allocated;         /* the highest allocated bytes over its ops */
    uint64_t category[CAT_COUNT]; /* live bytes per category at peak_op: they sum to allocated */
    uint64_t reserved;          /* the highest reserved bytes over its ops */
};

struct timeline_span { /* a phase, from its PHASE op to the next one (or the end) */
    const char *name;
    int64_t step;      /* the step it began in (0: before the first) */
    uint64_t first_op, last_op;
    double start_s, end_s;
};

struct timeline_step {
    int64_t step;
    uint64_t op;
    double at_s;
};

struct timeline_oom {
    uint64_t op; /* the allocation that failed */
    double at_s;
    const char *phase;
    int64_t step;
    uint64_t rounded; /* the request, rounded as the allocator rounds it */
};

struct timeline_kernel {
    uint32_t kernel;   /* enum kernel_id */
    const char *tag;   /* the module it ran for */
    uint64_t op;
    double start_s, end_s;
};

/* The allocator's segments just after the op that last raised the reserved peak. */
struct timeline_segments {
    bool captured;
    uint64_t op;
    double at_s;
    const char *phase;
    int64_t step;
    uint64_t allocated, reserved;
    struct alloc_snapshot snap;
};

/* What a timeline holds; valid until timeline_destroy. */
struct timeline_view {
    const struct timeline_point *points;
    size_t npoints;
    const struct timeline_span *spans;
    size_t nspans, spans_dropped;
    const struct timeline_step *steps;
    size_t nsteps, steps_dropped;
    const struct timeline_oom *ooms;
    size_t nooms, ooms_dropped;
    const struct timeline_kernel *kernels;
    size_t nkernels, kernels_dropped;
    const struct timeline_segments *segments;
    uint64_t end_op; /* the last op (the failed allocation, when an OOM ended the run) */
    double end_s;    /* the kernel time of the whole run */
    uint64_t peak_allocated, peak_reserved;
};

/* The op after a span's last: where its last op's state ends (the run's last op for the last span). */
uint64_t timeline_span_end_op(const struct timeline_view *v, const struct timeline_span *s);

/* The state of a run after an op, as the observer reads it from the runner. */
struct timeline_sample {
    double seconds; /* kernel time so far */
    uint64_t allocated, reserved;
    const uint64_t *category; /* CAT_COUNT live bytes per category */
};

struct timeline;

/* max_points >= 2; NULL without host memory. */
struct timeline *timeline_create(size_t max_points);
/* Observes r's run from its next op on (op 0 is r's state then); 0, or -1 (r has its most observers). */
int timeline_attach(struct timeline *t, struct runner *r);
/* What the observer does after each op, given the run's state then (tests call it directly). */
void timeline_record(struct timeline *t, const struct op *op, const struct timeline_sample *s);
/* Ends the timeline with the run's final state: the allocation whose OOM ended the run gets its point,
 * the last phase its end and the device's last time reading its ops. */
void timeline_end(struct timeline *t, const struct timeline_sample *s);
/* timeline_end with the attached runner's state, after runner_finish. */
void timeline_finish(struct timeline *t);
/* NULL with e set if recording ran out of host memory. */
const struct timeline_view *timeline_view(struct timeline *t, struct err *e);
void timeline_destroy(struct timeline *t);

#endif
