/* snapshot.h: torch.cuda.memory_snapshot() of the allocator model: segments sorted by address with their
 * blocks, in PyTorch's structure (an expandable segment is reported as one segment per contiguous mapped
 * range), and PyTorch's stat-consistency check (_check_memory_stat_consistency) over it. The same structs
 * hold a recorded snapshot's segments (replay/snapshot_file.h), which also fills the device, the pool
 * and the allocation sites; the model's own snapshot leaves those 0 and NULL. */
#ifndef OOMLAB_ALLOC_SNAPSHOT_H
#define OOMLAB_ALLOC_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/allocator.h"

enum block_state { BLOCK_ACTIVE_ALLOCATED, BLOCK_ACTIVE_PENDING_FREE, BLOCK_INACTIVE };

struct block_info {
    uint64_t address, size, requested_size;
    enum block_state state;
    const char *site; /* where it was allocated ("model.py:101 forward"); NULL: not recorded */
};

struct segment_info {
    uint64_t address, total_size, allocated_size, active_size, requested_size;
    uint64_t stream;
    bool small; /* segment_type "small" */
    bool is_expandable;
    int device;
    int64_t segment_pool_id[2]; /* a CUDA graph's private pool; (0, 0): the default pools */
    const char *site;           /* where its cudaMalloc was called; NULL: not recorded */
    struct block_info *blocks;
    size_t nblocks;
};

struct alloc_snapshot {
    struct segment_info *segments;
    size_t nsegments;
};

int allocator_snapshot(const struct allocator *a, struct alloc_snapshot *out);
/* PyTorch's name of a trace event's action ("alloc", "free_completed", "segment_map", "snapshot", ...);
 * NULL for ACT_OTHER, which stands for any name oomlab does not know. */
const char *alloc_action_name(enum alloc_action a);
void alloc_snapshot_free(struct alloc_snapshot *s);

/* Checks every invariant of PyTorch's _check_memory_stat_consistency (per pool and in aggregate) plus
 * that blocks tile each segment, free neighbours are merged, and the blocks waiting for stream events are
 * the ones counted as such; returns 0, or -1 with a description of the first violation in why. */
int alloc_check_consistency(const struct allocator *a, char *why, size_t len);

#endif
