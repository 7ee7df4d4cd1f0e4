/* blocks.c: block bookkeeping for the allocator model: the ordered free-block trees, block and segment
 * records, merging with free neighbours (try_merge_blocks) and returning a block to its pool (free_block). */
#include <stdlib.h>

#include "alloc/internal.h"

static int cmp_size(const struct alloc_block *x, const struct alloc_block *y)
{
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_addr(const struct alloc_block *x, const struct alloc_block *y)
{
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

RB_GENERATE(size_tree, alloc_block, node, cmp_size)
RB_GENERATE(addr_tree, alloc_block, node, cmp_addr)

struct alloc_block *block_new(struct allocator *a, uint64_t stream, uint64_t size, struct pool *pool, uint64_t addr)
{
    struct alloc_block *b = a->free_structs;
    if (b)
        a->free_structs = b->next;
    else if (!(b = malloc(sizeof *b)))
        abort(); /* out of host memory: nothing sensible to return to */
    *b = (struct alloc_block){.stream = stream, .size = size, .pool = pool, .addr = addr, .mapped = true};
    return b;
}

void block_delete(struct allocator *a, struct alloc_block *b)
{
    free(b->stream_uses);
    b->stream_uses = NULL;
    b->next = a->free_structs;
    a->free_structs = b;
}

void pool_insert(struct pool *p, struct alloc_block *b)
{
    b->gc_count_base = p->get_free_blocks_call_count;
    RB_INSERT(size_tree, &p->blocks, b);
}

void record_trace(struct allocator *a, enum alloc_action act, uint64_t addr, uint64_t size, uint64_t stream)
{
    if (a->trace) {
        struct alloc_trace_event ev = {act, addr, size, stream};
        a->trace(a->trace_ctx, &ev);
    }
}

struct segment *segment_new(struct allocator *a, uint64_t addr, uint64_t size, uint64_t stream, bool small)
{
    struct segment *s = calloc(1, sizeof *s);
    if (!s)
        abort();
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
    free(s);
}

/* Combines src into dst if src is a free neighbour in the same mapped state; returns the bytes subsumed. */
uint64_t try_merge_blocks(struct allocator *a, struct alloc_block *dst, struct alloc_block *src, struct pool *p)
{
    if (!src || !block_is_free(src) || dst->mapped != src->mapped)
        return 0;
    if (dst->prev == src) { /* [src dst] */
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        block_fix_head(dst);
    } else { /* [dst src] */
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    uint64_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped)
        RB_REMOVE(size_tree, &p->blocks, src);
    else
        RB_REMOVE(addr_tree, &p->unmapped, src);
    block_delete(a, src);
    return subsumed;
}

void free_block(struct allocator *a, struct alloc_block *b)
{
    record_trace(a, ACT_FREE_COMPLETED, b->addr, b->requested_size, b->stream);
    uint64_t original_size = b->size, requested = b->requested_size;
    struct pool *p = b->pool;
    int64_t split_blocks = 0, split_bytes = 0;
    struct alloc_block *candidates[2] = {b->prev, b->next};
    for (int i = 0; i < 2; i++) {
        uint64_t subsumed = try_merge_blocks(a, b, candidates[i], p);
        if (subsumed) {
            split_blocks -= 1;
            split_bytes -= (int64_t)subsumed;
        }
    }
    pool_insert(p, b);
    if (block_is_split(b)) {
        split_blocks += 1;
        split_bytes += (int64_t)b->size;
    }
    struct alloc_stats *s = &a->stats;
    if (!b->expandable) {
        if (split_blocks > 0)
            stat_array_increase(s->inactive_split, p->small, split_blocks);
        else if (split_blocks < 0)
            stat_array_decrease(s->inactive_split, p->small, -split_blocks);
        if (split_bytes > 0)
            stat_array_increase(s->inactive_split_bytes, p->small, split_bytes);
        else if (split_bytes < 0)
            stat_array_decrease(s->inactive_split_bytes, p->small, -split_bytes);
    }
    stat_array_decrease(s->active, p->small, 1);
    stat_array_decrease(s->active_bytes, p->small, (int64_t)original_size);
    stat_array_decrease(s->requested_bytes, p->small, (int64_t)requested);
}
