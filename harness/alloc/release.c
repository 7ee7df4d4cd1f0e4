/* release.c: giving cached memory back to the device: release_available_cached_blocks (max_split_size_mb),
 * release_cached_blocks (empty_cache and the last retry before an OOM) and garbage_collect_cached_blocks
 * (garbage_collection_threshold under a memory fraction). */
#include <stdlib.h>

#include "alloc/internal.h"

void release_block(struct allocator *a, struct alloc_block *b)
{
    struct pool *p = block_pool(a, b);
    a->stats.num_device_free++;
    record_trace(a, ACT_SEGMENT_FREE, b->addr, b->size, b->stream);
    a->dev->ops->seg_free(a->dev, b->addr, b->size);
    a->total_allocated_memory -= b->size;
    stat_array_count_down(a->stats.segment, p->small);
    stat_array_decrease(a->stats.reserved_bytes, p->small, (int64_t)b->size);
    if (b->size >= a->cfg.max_split_size)
        stat_count_down(&a->stats.oversize_segments);
    pool_remove(p, b);
    segment_delete(a, b->seg);
    block_delete(a, b);
}

bool release_available_cached_blocks(struct allocator *a, uint64_t size, uint64_t stream, struct pool *p)
{
    uint64_t max_split = a->cfg.max_split_size;
    if (max_split == UINT64_MAX)
        return false;
    uint64_t key_size = size < max_split ? max_split : size;
    struct alloc_block *it = pool_lower_bound(p, stream, key_size, 0);
    if (it && it->stream == stream && !it->expandable) {
        release_block(a, it);
        return true;
    }
    /* No single block is large enough: free oversize blocks from the largest down. */
    it = it ? pool_prev(p, it) : pool_last(p);
    uint64_t released = 0;
    while (it && released < key_size && it->size >= max_split && it->stream == stream) {
        struct alloc_block *cur = it;
        it = pool_prev(p, it);
        if (!cur->expandable) {
            released += cur->size;
            release_block(a, cur);
        }
    }
    return released >= key_size;
}

/* Frees every whole free segment of the pool; unmaps free pages of expandable segments. */
static void release_blocks(struct allocator *a, struct pool *p)
{
    size_t n = 0, cap = 0;
    struct alloc_block **to_unmap = NULL;
    struct alloc_block *b = pool_first(p);
    while (b) {
        struct alloc_block *next = pool_next(p, b);
        if (b->expandable) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                if (!(to_unmap = realloc(to_unmap, cap * sizeof *to_unmap)))
                    abort();
            }
            to_unmap[n++] = b;
        } else if (!block_is_split(b)) {
            release_block(a, b);
        }
        b = next;
    }
    for (size_t i = 0; i < n; i++) {
        unmap_block(a, to_unmap[i]);
        if (!block_is_split(to_unmap[i]) && !to_unmap[i]->mapped)
            release_expandable_segment(a, to_unmap[i]);
    }
    free(to_unmap);
}

void release_cached_blocks(struct allocator *a)
{
    a->stats.num_sync_all_streams++;
    synchronize_and_free_events(a); /* blocks waiting for stream events first return to their pools */
    release_blocks(a, &a->large);
    release_blocks(a, &a->small);
}

void garbage_collect_cached_blocks(struct allocator *a)
{
    uint64_t threshold = (uint64_t)(a->cfg.garbage_collection_threshold * (double)a->allowed_memory_maximum);
    if (a->total_allocated_memory <= threshold)
        return;
    uint64_t target = a->total_allocated_memory - threshold, reclaimed = 0;
    struct pool *p = &a->large;
    uint64_t total_age = 0;
    int64_t freeable = 0;
    for (struct alloc_block *b = pool_first(p); b; b = pool_next(p, b)) {
        if (!block_is_split(b)) {
            total_age += (uint64_t)(int)(p->get_free_blocks_call_count - b->gc_count_base);
            freeable++;
        }
    }
    if (freeable == 0)
        return;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;
        freed = false;
        struct alloc_block *b = pool_first(p);
        while (b) {
            struct alloc_block *next = pool_next(p, b);
            uint64_t age = (uint64_t)(int)(p->get_free_blocks_call_count - b->gc_count_base);
            if (!block_is_split(b) && !b->expandable && (double)age >= age_threshold) {
                freed = true;
                reclaimed += b->size;
                total_age -= age;
                freeable--;
                release_block(a, b);
            }
            b = next;
        }
    }
}

bool allocator_release_segment(struct allocator *a, uint64_t addr)
{
    for (struct segment *s = a->segments; s; s = s->next_seg) {
        if (s->addr == addr && !s->expandable) {
            struct alloc_block *b = s->head;
            if (!block_is_free(b) || block_is_split(b))
                return false;
            release_block(a, b);
            return true;
        }
    }
    return false;
}

bool allocator_release_mapped(struct allocator *a, uint64_t addr, uint64_t size)
{
    for (struct segment *s = a->segments; s; s = s->next_seg) {
        if (!s->expandable || addr < s->addr || addr + size > s->addr + s->size)
            continue;
        for (struct alloc_block *b = s->head; b; b = b->next) {
            if (b->addr + b->size <= addr)
                continue;
            if (!block_is_free(b) || !b->mapped || b->addr > addr || b->addr + b->size < addr + size)
                return false; /* the model still uses these pages, or they are not mapped */
            unmap_block(a, b);
            return true;
        }
    }
    return false;
}
