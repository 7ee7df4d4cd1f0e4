/* allocator.h: a model of PyTorch's native CUDA caching allocator (DeviceCachingAllocator), rule for
 * rule: rounding, small and large pools, best fit by (stream, size, address), splitting and merging,
 * the free-block search -> GC -> new segment -> release -> retry chain before an OOM, memory fraction,
 * max_split_size, expandable segments, memory_stats, snapshots, the OOM message and record_stream's
 * deferred frees (stream_events.c).
 * It runs on any device (device/device.h): sim, host or cuda. Not modelled: CUDA-graph private pools,
 * cudaMallocAsync. */
#ifndef OOMLAB_ALLOCATOR_H
#define OOMLAB_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/config.h"
#include "alloc/stats.h"
#include "device/device.h"
#include "util/err.h"

struct allocator;
struct alloc_block; /* a live allocation */

enum alloc_action {
    ACT_ALLOC,
    ACT_FREE_REQUESTED,
    ACT_FREE_COMPLETED,
    ACT_SEGMENT_ALLOC,
    ACT_SEGMENT_FREE,
    ACT_SEGMENT_MAP,
    ACT_SEGMENT_UNMAP,
    ACT_OOM,
    /* Recorded in snapshot files (replay/snapshot_file.h), never emitted by the model: a snapshot marker,
     * and an action oomlab does not know. */
    ACT_SNAPSHOT,
    ACT_OTHER,
};

/* A trace entry, as PyTorch records them (sizes: alloc = unrounded request, segment ops = bytes,
 * oom: addr = device free bytes, size = rounded request). */
struct alloc_trace_event {
    enum alloc_action action;
    uint64_t addr, size, stream;
};
typedef void (*alloc_trace_fn)(void *ctx, const struct alloc_trace_event *ev);

/* Everything the OOM message and OOM observers are given. */
struct alloc_oom {
    uint64_t requested;  /* the caller's byte count */
    uint64_t rounded;    /* round_size(requested) */
    uint64_t alloc_size; /* the would-be segment size: "Tried to allocate" */
    uint64_t stream;
    uint64_t device_free, device_total;
    bool has_allowed;
    uint64_t allowed; /* allowed_memory_maximum */
    uint64_t allocated, reserved;
    bool too_large;   /* >= 1 EB: rejected before the allocator runs */
};

struct allocator *allocator_create(struct device *dev, const struct alloc_config *cfg);
void allocator_destroy(struct allocator *a);

/* torch.cuda.memory._set_allocator_settings: new settings for later calls (stats.max_split_size keeps its
 * construction-time value, as in PyTorch). */
void allocator_set_config(struct allocator *a, const struct alloc_config *cfg);
const struct alloc_config *allocator_config(const struct allocator *a);
/* torch.cuda.set_per_process_memory_fraction (newest rule: a limit only when fraction < 1). */
void allocator_set_memory_fraction(struct allocator *a, double fraction);
void allocator_set_trace(struct allocator *a, alloc_trace_fn fn, void *ctx);

/* Returns 0 with *out set, 1 on an out-of-memory error (oom filled; nothing allocated), or -1 on a device
 * error. A zero-byte request succeeds with *out = NULL and touches nothing. */
int allocator_malloc(struct allocator *a, uint64_t size, uint64_t stream, struct alloc_block **out,
                     struct alloc_oom *oom, struct err *e);
/* allocator_malloc as a recording shows it when the request released cached memory and then allocated or
 * mapped new memory: the free-block search (which found nothing before the release) is skipped, so a free
 * block the release left behind (a shrunk expandable block under max_split_size) is not taken. */
int allocator_malloc_fresh(struct allocator *a, uint64_t size, uint64_t stream, struct alloc_block **out,
                           struct alloc_oom *oom, struct err *e);
void allocator_free(struct allocator *a, struct alloc_block *b);
/* tensor.record_stream(stream): b is in use on stream too, so its free waits for that stream (ignored for
 * b's own stream). */
void allocator_record_stream(struct allocator *a, struct alloc_block *b, uint64_t stream);
/* The stream has synchronised: the events recorded on it so far are complete; the blocks waiting only for
 * them return to their pool at the next malloc (or empty_cache), as PyTorch's process_events finds them. */
void allocator_stream_sync(struct allocator *a, uint64_t stream);
/* Blocks freed but still waiting for stream events, and their bytes (bytes may be NULL). */
size_t allocator_pending_frees(const struct allocator *a, uint64_t *bytes);
/* The largest free (cached, mapped) block of either pool, in bytes; 0 if none. */
uint64_t allocator_largest_free_block(const struct allocator *a);
/* torch.cuda.empty_cache() */
void allocator_empty_cache(struct allocator *a);
/* cudaFree of one whole cached segment at addr (what a recorded segment_free shows); false if the segment
 * does not exist or is not entirely free. */
bool allocator_release_segment(struct allocator *a, uint64_t addr);

/* Unmaps the pages of the free block holding [addr, addr + size) in an expandable segment (what a recorded
 * segment_unmap shows: empty_cache, or a release before a retry), as the release paths do; false if
 * those pages are not mapped or the block holding them is not free. */
bool allocator_release_mapped(struct allocator *a, uint64_t addr, uint64_t size);

uint64_t alloc_block_addr(const struct alloc_block *b);
uint64_t alloc_block_size(const struct alloc_block *b);

const struct alloc_stats *allocator_stats(const struct allocator *a);
/* allocated_bytes.all.current and reserved_bytes.all.current, without settling the other stats: for a check
 * after every op. */
void allocator_current_bytes(const struct allocator *a, uint64_t *allocated, uint64_t *reserved);
void allocator_reset_peak_stats(struct allocator *a);
void allocator_reset_accumulated_stats(struct allocator *a);

/* PyTorch's OOM text, byte for byte (the NVML per-process part is omitted: oomlab is the only process). */
void alloc_oom_message(const struct alloc_oom *oom, int device_index, char *buf, size_t len);

/* Rounding rules (alloc_round_size, alloc_segment_size, alloc_is_small), exposed for tests and reports. */
#include "alloc/rounding.h"

/* Rebuilding a state that existed before a trace started (replay of a snapshot recorded mid-run):
 * one segment at the address the device gives (sim: force it first), with its live blocks; the gaps
 * between them become free blocks. Stats are updated as if the blocks had been allocated normally. */
struct restore_block {
    uint64_t offset, size, requested_size;
};
int allocator_restore_segment(struct allocator *a, uint64_t size, uint64_t stream, bool small,
                              const struct restore_block *blocks, size_t n, struct alloc_block **handles,
                              uint64_t *addr, struct err *e);

/* The same for an expandable segment: a new reservation (*base) in which ranges[] (offset from the base,
 * size) are mapped and blocks[] (offsets from the base, inside those ranges) are live; the rest of each
 * range is free, the rest of the reservation unmapped. */
int allocator_restore_expandable(struct allocator *a, uint64_t stream, bool small, const struct restore_block *ranges,
                                 size_t nranges, const struct restore_block *blocks, size_t n,
                                 struct alloc_block **handles, uint64_t *base, struct err *e);

#endif
