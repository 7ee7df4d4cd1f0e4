/* snapshot.h: torch.cuda.memory_snapshot() of the allocator model: segments sorted by address with their
 * blocks, in PyTorch's structure (an expandable segment is reported as one segment per contiguous mapped
 * range), and PyTorch's stat-consistency check (_check_memory_stat_consistency) over it. */
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
};

struct segment_info {
    uint64_t address, total_size, allocated_size, active_size, requested_size;
    uint64_t stream;
    bool small; /* segment_type "small" */
    bool is_expandable;
    struct block_info *blocks;
    size_t nblocks;
};

struct alloc_snapshot {
    struct segment_info *segments;
    size_t nsegments;
};

int allocator_snapshot(const struct allocator *a, struct alloc_snapshot *out);
void alloc_snapshot_free(struct alloc_snapshot *s);

/* Checks every invariant of PyTorch's _check_memory_stat_consistency (per pool and in aggregate) plus
 * that blocks tile each segment; returns 0, or -1 with a description of the first violation in why. */
int alloc_check_consistency(const struct allocator *a, char *why, size_t len);

#endif
