/* blocks.c: block bookkeeping for the allocator model: the unmapped-range tree, block and segment
 * records, merging with free neighbours (try_merge_blocks), returning a block to its pool (free_block) and
 * DeviceCachingAllocator::free (allocator_free), here so that free_block runs inline in it. */
#include <stdlib.h>
#include <string.h>

#include "alloc/internal.h"
#include "util/prefault.h"

static int cmp_addr(const struct alloc_block *x, const struct alloc_block *y)
{
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

RB_GENERATE(addr_tree, alloc_block, node, cmp_addr)

/* Block and segment structs are cut from 64 KiB slabs (64-byte aligned), front to back, and recycled through
 * free lists: a flux.1-dev step makes thousands of both, and a malloc and free each cost more than the rest
 * of making one. A fresh slab's pages are made present in one call (util/prefault.h) instead of faulting in
 * one by one as structs are cut: flux.1-dev one step, page faults 435 with 8 KiB slabs faulted in, 351 with
 * 8 KiB slabs prefaulted, 266 with 64 KiB ones (a slab from a heap hole already present is not prefaulted).
 * Segments have slabs of their own: allocator_destroy walks them all, and reads 3,371 of them (flux.1-dev)
 * from 52 pages instead of one line in each of 1,300 strewn among the blocks. */
#define SLAB_ALIGN 64
#define SLAB_BYTES (64u << 10)
struct block_slab {
    struct block_slab *next;
} __attribute__((aligned(SLAB_ALIGN)));

static __attribute__((noinline)) void slab_grow(struct allocator *a, struct slab_room *room)
{
    struct block_slab *slab = aligned_alloc(SLAB_ALIGN, SLAB_BYTES);
    if (!slab)
        abort(); /* out of host memory: nothing sensible to return to */
    prefault_if_fresh(slab, SLAB_BYTES);
    slab->next = a->slabs;
    a->slabs = slab;
    room->next = (char *)(slab + 1);
    room->end = (char *)slab + SLAB_BYTES;
}

/* size bytes from room's slab (a multiple of 32, far below SLAB_BYTES). */
static void *slab_take(struct allocator *a, struct slab_room *room, size_t size)
{
    if ((size_t)(room->end - room->next) < size)
        slab_grow(a, room);
    void *p = room->next;
    room->next += size;
    return p;
}

void block_slabs_free(struct allocator *a)
{
    while (a->slabs) {
        struct block_slab *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
    a->free_structs = NULL;
    a->free_segments = NULL;
    a->block_room = a->segment_room = (struct slab_room){NULL, NULL};
}

struct alloc_block *block_take_slab(struct allocator *a)
{
    return slab_take(a, &a->block_room, sizeof(struct alloc_block));
}

/* b is free (merged away or released): it holds no stream uses, insert_events took them. */
void block_delete(struct allocator *a, struct alloc_block *b)
{
    b->next = a->free_structs;
    a->free_structs = b;
}

struct segment *segment_new(struct allocator *a, uint64_t addr, uint64_t size, uint64_t stream, bool small)
{
    struct segment *s = a->free_segments;
    if (s)
        a->free_segments = s->next_seg;
    else
        s = slab_take(a, &a->segment_room, sizeof(struct segment));
    *s = (struct segment){.addr = addr, .size = size, .stream = stream, .small = small, .next_seg = a->segments};
    if (a->segments)
        a->segments->prev_seg = s;
    a->segments = s;
    return s;
}

void segment_delete(struct allocator *a, struct segment *s)
{
    if (s->prev_seg)
        s->prev_seg->next_seg = s->next_seg;
    else
        a->segments = s->next_seg;
    if (s->next_seg)
        s->next_seg->prev_seg = s->prev_seg;
    s->next_seg = a->free_segments;
    a->free_segments = s;
}

/* Combines src into dst if src is a free neighbour in the same mapped state; returns the bytes subsumed.
 * Inline in free_block, which runs it twice per free. */
static inline uint64_t merge_blocks(struct allocator *a, struct alloc_block *dst, struct alloc_block *src,
                                    struct pool *p)
{
    /* a missing neighbour reads as an allocated one, so the state checks are one bitwise test */
    static const struct alloc_block none = {.allocated = true};
    const struct alloc_block *s = pick_addr(src != NULL, src, &none);
    bool mergeable = !s->allocated & !s->pending & (dst->mapped == s->mapped);
    if (!mergeable)
        return 0;
    if (dst->prev == src) { /* [src dst] */
        dst->addr = src->addr;
        dst->prev = src->prev;
        block_link_prev(dst);
    } else { /* [dst src] */
        dst->next = src->next;
        block_link_next(dst);
    }
    uint64_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped)
        pool_remove(p, src);
    else
        RB_REMOVE(addr_tree, &p->unmapped, src);
    block_delete(a, src);
    return subsumed;
}

uint64_t try_merge_blocks(struct allocator *a, struct alloc_block *dst, struct alloc_block *src, struct pool *p)
{
    return merge_blocks(a, dst, src, p);
}

static inline __attribute__((always_inline)) void return_block(struct allocator *a, struct alloc_block *b)
{
    record_trace(a, ACT_FREE_COMPLETED, b->addr, b->requested_size, b->stream);
    uint64_t requested = b->requested_size;
    struct pool *p = block_pool(a, b);
    int64_t split_blocks = 0, split_bytes = 0;
    struct alloc_block *next = b->next;
    uint64_t subsumed = merge_blocks(a, b, b->prev, p); /* blocks are never empty: 0 = not merged */
    split_blocks -= subsumed != 0;
    split_bytes -= (int64_t)subsumed;
    subsumed = merge_blocks(a, b, next, p);
    split_blocks -= subsumed != 0;
    split_bytes -= (int64_t)subsumed;
    pool_insert(p, b);
    bool split = block_is_split(b);
    split_blocks += split;
    split_bytes += (int64_t)(b->size & -(uint64_t)split);
    struct alloc_stats *s = &a->stats;
    if (!b->expandable) {
        stat_array_change(s->inactive_split, p->small, split_blocks);
        stat_array_change(s->inactive_split_bytes, p->small, split_bytes);
    }
    stat_array_decrease(s->requested_bytes, p->small, (int64_t)requested);
}

void free_block(struct allocator *a, struct alloc_block *b)
{
    return_block(a, b);
}

void allocator_free(struct allocator *a, struct alloc_block *b)
{
    if (!b)
        return;
    struct pool *p = block_pool(a, b);
    b->allocated = false;
    stat_array_count_down(a->stats.allocation, p->small);
    stat_array_decrease(a->stats.allocated_bytes, p->small, (int64_t)b->size);
    record_trace(a, ACT_FREE_REQUESTED, b->addr, b->requested_size, b->stream);
    if (b->size >= a->cfg.max_split_size)
        stat_count_down(&a->stats.oversize_allocations);
    if (b->uses.nstream_uses)
        insert_events(a, b); /* back to the pool once the other streams are done with it */
    else
        return_block(a, b);
}
