/* snapshot_plan.h: a PyTorch snapshot made ready to replay (snapshot_replay.c): its events as ops, the
 * allocator state at trace start when recording began mid-run, and its final segments to check the
 * replay against. */
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
    uint64_t *keys; /* recorded address of each live block */
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
    size_t nblocks;
};

struct snapshot_plan {
    const char *name;
    struct op *ops;                  /* alloc, free_completed, segment_alloc, segment_free; ids are addresses */
    size_t nops;
    struct replay_segment *initial;  /* the state at trace start, sorted by address */
    size_t ninitial;
    struct replay_expandable *initial_expandable; /* ... and its expandable segments */
    size_t ninitial_expandable;
    struct alloc_snapshot final;     /* the file's final segments */
    bool has_settings;               /* the file records its allocator settings */
    struct alloc_config settings;    /* ... which are these (PyTorch's defaults when it records none) */
    size_t skipped_events;           /* events that are not replayed (free_requested, snapshot markers, ...) */
    size_t inferred_sizes;           /* blocks live at trace start whose size the file lost, inferred */
    size_t private_pool_segments;    /* final segments in a CUDA graph's private pool (segment_pool_id != (0, 0)) */
};

/* Parses the pickle in data (name starts every message) into a plan. */
int snapshot_plan_build(const char *name, const unsigned char *data, size_t len, struct snapshot_plan *p,
                        struct err *e);
void snapshot_plan_free(struct snapshot_plan *p);

#endif
