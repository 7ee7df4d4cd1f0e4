/* snapshot_plan.h: one device of a PyTorch snapshot made ready to replay (snapshot_replay.c): which of its
 * events become ops (an alloc's name is its recorded site; each op is made from its event as it is replayed), the allocator state at trace start when recording began
 * mid-run (each live block with its site), and its final segments to check the replay against. A plan
 * points into the snapshot it was built from (its final segments, the sites' text): free it first. */
#ifndef OOMLAB_SNAPSHOT_PLAN_H
#define OOMLAB_SNAPSHOT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "program/program.h"
#include "replay/snapshot_file.h"
#include "util/err.h"

/* A segment that existed before the trace started, with the allocations then live in it. */
struct replay_segment {
    uint64_t address, size, stream;
    bool small;
    struct restore_block *blocks;
    uint64_t *keys;     /* recorded address of each live block */
    const char **sites; /* where each was allocated, or NULL */
    size_t nblocks;
};

/* An expandable segment's reservation live at trace start: its mapped ranges (offsets from rec_base, the
 * lowest mapped address, which a new reservation's first map takes) and the allocations live in them. */
struct replay_expandable {
    uint64_t stream, rec_base;
    bool small;
    struct restore_block *ranges; /* offset, size */
    size_t nranges;
    struct restore_block *blocks;
    uint64_t *keys;
    const char **sites;
    size_t nblocks;
};

struct snapshot_plan {
    const char *name;                /* starts every message: the file, and the device when it has several */
    int device;
    const struct snapshot_device *events; /* the device whose events the ops are made from */
    size_t *op_events;               /* the events that become ops (alloc, free_completed, segment_*, oom), in order */
    size_t nops;
    struct replay_segment *initial;  /* the state at trace start, sorted by address */
    size_t ninitial;
    struct replay_expandable *initial_expandable; /* ... and its expandable segments */
    size_t ninitial_expandable;
    const struct segment_info *final; /* the device's final segments, in the snapshot */
    size_t nfinal;
    bool has_settings;               /* the file records its allocator settings */
    struct alloc_config settings;    /* ... which are these (PyTorch's defaults when it records none) */
    size_t skipped_events;           /* events that are not replayed (free_requested, snapshot markers, ...) */
    size_t inferred_sizes;           /* blocks live at trace start whose size the file lost, inferred */
    size_t private_pool_segments;    /* final segments in a CUDA graph's private pool (segment_pool_id != (0, 0)) */
};

/* Op i of the plan: its event as an op (ids are addresses; an alloc's or OOM's name its site). */
void snapshot_plan_op(const struct snapshot_plan *p, size_t i, struct op *op);

/* The plan of device d of s (d NULL: an empty device 0, for a file that records nothing); name starts
 * every message. */
int snapshot_plan_build(const char *name, const struct snapshot *s, const struct snapshot_device *d,
                        struct snapshot_plan *p, struct err *e);
void snapshot_plan_free(struct snapshot_plan *p);

/* Whether device d has anything to replay: segments, or an event that becomes an op. */
bool snapshot_device_replayable(const struct snapshot_device *d);

#endif
