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

/* x sorts before the key (stream, size, addr), computed without branches: the way down a tree is
 * unpredictable, so the searches below pick each child with a conditional move. */
static inline bool block_before(const struct alloc_block *x, uint64_t stream, uint64_t size, uint64_t addr)
{
    unsigned __int128 xk = (unsigned __int128)x->size << 64 | x->addr;
    unsigned __int128 k = (unsigned __int128)size << 64 | addr;
    return (x->stream < stream) | ((x->stream == stream) & (xk < k));
}

/* c ? x : y as a mask: GCC turns the ternary back into a branch. */
static inline struct alloc_block *pick(bool c, struct alloc_block *x, struct alloc_block *y)
{
    uintptr_t mask = -(uintptr_t)c;
    return (struct alloc_block *)(((uintptr_t)x & mask) | ((uintptr_t)y & ~mask));
}

struct alloc_block *pool_lower_bound(const struct pool *p, uint64_t stream, uint64_t size, uint64_t addr)
{
    struct alloc_block *n = RB_ROOT(&p->blocks), *res = NULL;
    while (n) {
        bool before = block_before(n, stream, size, addr);
        struct alloc_block *l = RB_LEFT(n, node), *r = RB_RIGHT(n, node);
        res = pick(before, res, n);
        n = pick(before, r, l);
    }
    return res;
}

/* RB_INSERT's descent (keys are unique: no two free blocks share an address), then libbsd's rebalancing. */
void pool_insert(struct pool *p, struct alloc_block *b)
{
    b->gc_count_base = p->get_free_blocks_call_count;
    struct alloc_block *parent = NULL, *n = RB_ROOT(&p->blocks);
    bool right = false;
    while (n) {
        parent = n;
        right = block_before(n, b->stream, b->size, b->addr);
        struct alloc_block *l = RB_LEFT(n, node), *r = RB_RIGHT(n, node);
        n = pick(right, r, l);
    }
    RB_SET(b, parent, node);
    if (!parent)
        RB_ROOT(&p->blocks) = b;
    else if (right)
        RB_RIGHT(parent, node) = b;
    else
        RB_LEFT(parent, node) = b;
    size_tree_RB_INSERT_COLOR(&p->blocks, b);
}

/* A smaller key still sorts before b's successor; it keeps b's place when it also sorts after b's
 * predecessor, which saves a removal and an insertion for most splits. */
void pool_shrink_front(struct pool *p, struct alloc_block *b, uint64_t addr)
{
    uint64_t size = b->size - (addr - b->addr);
    struct alloc_block *prev = RB_PREV(size_tree, &p->blocks, b);
    bool in_place = !prev || block_before(prev, b->stream, size, addr);
    if (!in_place)
        RB_REMOVE(size_tree, &p->blocks, b);
    b->addr = addr;
    b->size = size;
    if (in_place)
        b->gc_count_base = p->get_free_blocks_call_count;
    else
        pool_insert(p, b);
}

/* Block structs come from 64-byte aligned slabs and go back to a free list: one malloc per 63 blocks. */
struct block_slab {
    struct block_slab *next;
    struct alloc_block blocks[63];
};

static struct alloc_block *slab_grow(struct allocator *a)
{
    struct block_slab *slab = aligned_alloc(_Alignof(struct block_slab), sizeof *slab);
    if (!slab)
        abort(); /* out of host memory: nothing sensible to return to */
    slab->next = a->slabs;
    a->slabs = slab;
    size_t n = sizeof slab->blocks / sizeof slab->blocks[0];
    for (size_t i = n - 1; i > 0; i--) {
        slab->blocks[i].next = a->free_structs;
        a->free_structs = &slab->blocks[i];
    }
    return &slab->blocks[0];
}

void block_slabs_free(struct allocator *a)
{
    while (a->slabs) {
        struct block_slab *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
    a->free_structs = NULL;
}

struct alloc_block *block_new(struct allocator *a, uint64_t stream, uint64_t size, struct pool *pool, uint64_t addr)
{
    struct alloc_block *b = a->free_structs;
    if (b)
        a->free_structs = b->next;
    else
        b = slab_grow(a);
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
