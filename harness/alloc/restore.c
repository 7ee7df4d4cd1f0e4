/* restore.c: rebuilding a pre-existing segment with live blocks (for replays of traces that start mid-run). */
#include "alloc/internal.h"

/* A new block of seg after prev (at its head when prev is NULL); restore_expandable.c uses it too. */
struct alloc_block *block_append(struct allocator *a, struct segment *seg, struct pool *p, struct alloc_block *prev,
                                 uint64_t addr, uint64_t size)
{
    struct alloc_block *b = block_new(a, seg->stream, size, p, addr);
    b->seg = seg;
    b->prev = prev;
    if (prev)
        prev->next = b;
    else
        seg->head = b;
    return b;
}

int allocator_restore_segment(struct allocator *a, uint64_t size, uint64_t stream, bool small,
                              const struct restore_block *blocks, size_t n, struct alloc_block **handles,
                              uint64_t *addr, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        const struct restore_block *b = &blocks[i];
        uint64_t prev_end = i ? blocks[i - 1].offset + blocks[i - 1].size : 0; /* checked below: no wrap */
        /* written so that no sum can wrap past 2^64 */
        if (b->size == 0 || b->offset < prev_end || b->size > size || b->offset > size - b->size)
            return err_set(e, ERR_INPUT, "restored block %zu (offset %llu, %llu bytes) overlaps or leaves its %llu-byte segment",
                           i, (unsigned long long)b->offset, (unsigned long long)b->size, (unsigned long long)size);
        if (b->requested_size > b->size)
            return err_set(e, ERR_INPUT, "restored block %zu: requested size %llu is larger than the block (%llu bytes)", i,
                           (unsigned long long)b->requested_size, (unsigned long long)b->size);
    }
    struct pool *p = small ? &a->small : &a->large;
    enum dev_status st = a->dev->ops->seg_alloc(a->dev, size, 0, addr, e);
    if (st == DEV_OOM)
        return err_set(e, ERR_INPUT, "the device cannot hold the restored %llu-byte segment", (unsigned long long)size);
    if (st != DEV_OK)
        return -1;
    struct alloc_stats *s = &a->stats;
    a->total_allocated_memory += size;
    struct segment *seg = segment_new(a, *addr, size, stream, small);
    stat_array_count_up(s->segment, small);
    stat_array_increase(s->reserved_bytes, small, (int64_t)size);
    if (size >= a->cfg.max_split_size)
        stat_count_up(&s->oversize_segments);
    a->stats.num_device_alloc++;

    struct alloc_block *prev = NULL;
    uint64_t at = 0;
    bool split = !(n == 0 || (n == 1 && blocks[0].offset == 0 && blocks[0].size == size));
    for (size_t i = 0; i <= n; i++) {
        uint64_t gap_end = i < n ? blocks[i].offset : size;
        if (gap_end > at) {
            prev = block_append(a, seg, p, prev, *addr + at, gap_end - at);
            pool_insert(p, prev);
            if (split) {
                stat_array_count_up(s->inactive_split, small);
                stat_array_increase(s->inactive_split_bytes, small, (int64_t)prev->size);
            }
        }
        if (i == n)
            break;
        prev = block_append(a, seg, p, prev, *addr + blocks[i].offset, blocks[i].size);
        prev->allocated = true;
        prev->requested_size = blocks[i].requested_size;
        handles[i] = prev;
        stat_block_allocated(s, small, (int64_t)prev->size, (int64_t)prev->requested_size);
        if (prev->size >= a->cfg.max_split_size)
            stat_count_up(&s->oversize_allocations);
        at = blocks[i].offset + blocks[i].size;
    }
    return 0;
}
