/* stream_events.c: record_stream, as PyTorch's caching allocator does it (c10/cuda/CUDACachingAllocator.cpp:
 * recordStream, insert_events, process_events, synchronize_and_free_events). A block used on a stream other
 * than the one it was allocated on is recorded there (block->stream_uses); when it is freed, an event is
 * recorded on each of those streams and the block stays active, outside its pool, until every event has
 * completed. Allocations and allocated bytes drop at the free; active, active_bytes and requested_bytes
 * only when the block reaches its pool.
 *
 * The model has no GPU clock: an event completes when its stream is synchronised (allocator_stream_sync,
 * the op program's `sync STREAM`), and, as PyTorch queries its events only at the start of a malloc, the
 * block returns to its pool at the next malloc after that; empty_cache and the release before an OOM's
 * retry synchronise every event first. */
#include <stdlib.h>

#include "alloc/internal.h"

void allocator_record_stream(struct allocator *a, struct alloc_block *b, uint64_t stream)
{
    /* uses on the allocation stream need no synchronisation; PyTorch's recordStream finds only allocated
     * blocks (get_allocated_block) */
    if (!b || !b->allocated || stream == b->stream)
        return;
    struct block_uses *u = &b->uses;
    for (uint32_t i = 0; i < u->nstream_uses; i++)
        if (u->stream_uses[i] == stream)
            return;
    uint64_t *grown = realloc(u->stream_uses, (u->nstream_uses + 1) * sizeof *grown);
    if (!grown)
        abort(); /* out of host memory: as block_new */
    a->blocks_with_uses += !u->stream_uses;
    u->stream_uses = grown;
    u->stream_uses[u->nstream_uses++] = stream;
}

void allocator_stream_sync(struct allocator *a, uint64_t stream)
{
    for (size_t i = 0; i < a->nevents; i++)
        if (a->events[i].stream == stream)
            a->events[i].done = true;
}

size_t allocator_pending_frees(const struct allocator *a, uint64_t *bytes)
{
    if (bytes)
        *bytes = (uint64_t)a->stats.pending_bytes[STAT_ALL];
    return (size_t)a->stats.pending[STAT_ALL];
}

void insert_events(struct allocator *a, struct alloc_block *b)
{
    size_t need = a->nevents + b->uses.nstream_uses;
    if (need > a->events_cap) {
        size_t cap = a->events_cap ? a->events_cap : 16;
        while (cap < need)
            cap *= 2;
        struct stream_event *grown = realloc(a->events, cap * sizeof *grown);
        if (!grown)
            abort();
        a->events = grown;
        a->events_cap = cap;
    }
    struct block_uses *u = &b->uses;
    for (uint32_t i = 0; i < u->nstream_uses; i++)
        a->events[a->nevents++] = (struct stream_event){.block = b, .stream = u->stream_uses[i]};
    u->event_count += u->nstream_uses;
    b->pending = true;
    stat_block_pending(&a->stats, b->small, 1, (int64_t)b->size);
    free(u->stream_uses);
    u->stream_uses = NULL;
    u->nstream_uses = 0;
    a->blocks_with_uses--;
}

/* Drops the events for which done(ev) holds, in order, returning each block whose last event it was to
 * its pool. */
static void free_events(struct allocator *a, bool all)
{
    size_t kept = 0;
    for (size_t i = 0; i < a->nevents; i++) {
        struct stream_event ev = a->events[i];
        if (!all && !ev.done) {
            a->events[kept++] = ev;
            continue;
        }
        if (--ev.block->uses.event_count == 0) {
            ev.block->pending = false;
            stat_block_pending(&a->stats, ev.block->small, -1, (int64_t)ev.block->size);
            free_block(a, ev.block);
        }
    }
    a->nevents = kept;
}

void process_events(struct allocator *a)
{
    free_events(a, false);
}

void synchronize_and_free_events(struct allocator *a)
{
    free_events(a, true);
}
