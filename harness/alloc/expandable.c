/* expandable.c: expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): one virtual
 * reservation of ~1.125x device memory per (stream, pool), mapped page by page (2 MiB pages in the small
 * pool, 20 MiB in the large) as allocations need them, and unmapped page-wise in the release paths. */
#include "alloc/internal.h"
#include "util/size.h"

/* as PyTorch's try_allocate_expandable_block: not allocated and no stream events outstanding */
static bool allocatable(const struct alloc_block *b)
{
    return b && block_is_free(b);
}

static bool has_address_space(const struct alloc_block *b, uint64_t size)
{
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
    }
    return bytes >= size;
}

/* The lowest-address place on this stream with room for `size` bytes (an unmapped range, possibly with the
 * free block before it), or a new reservation. NULL only if the device refused the reservation. */
static struct alloc_block *find_expandable_block(struct allocator *a, uint64_t stream, struct pool *p,
                                                 uint64_t size, int *device_error)
{
    struct alloc_block key = {.stream = stream, .addr = 0};
    for (struct alloc_block *c = RB_NFIND(addr_tree, &p->unmapped, &key); c && c->stream == stream;
         c = RB_NEXT(addr_tree, &p->unmapped, c)) {
        struct alloc_block *start = allocatable(c->prev) ? c->prev : c;
        if (has_address_space(start, size))
            return start;
    }
    uint64_t page = p->small ? 2 * MiB : 20 * MiB;
    uint64_t total = a->dev->total;
    uint64_t reserve = page * ((total + total / 8 + page - 1) / page);
    uint64_t addr;
    enum dev_status st = a->dev->ops->va_reserve(a->dev, reserve, &addr, a->err);
    if (st != DEV_OK) {
        *device_error = st == DEV_ERROR;
        return NULL;
    }
    struct segment *seg = segment_new(a, addr, reserve, stream, p->small);
    seg->expandable = true;
    seg->page = page;
    struct alloc_block *c = block_new(a, stream, reserve, p, addr);
    c->mapped = false;
    c->expandable = true;
    c->seg = seg;
    seg->head = c;
    RB_INSERT(addr_tree, &p->unmapped, c);
    return c;
}

static uint64_t page_floor(const struct segment *s, uint64_t addr)
{
    return s->addr + (addr - s->addr) / s->page * s->page;
}

static uint64_t page_ceil(const struct segment *s, uint64_t addr)
{
    return s->addr + (addr - s->addr + s->page - 1) / s->page * s->page;
}

/* Maps the pages covering the first `size` bytes of the unmapped block to_map; false on device OOM. */
static bool map_block(struct allocator *a, struct alloc_block *to_map, uint64_t size, int *device_error)
{
    struct segment *seg = to_map->seg;
    uint64_t begin = page_floor(seg, to_map->addr), end = page_ceil(seg, to_map->addr + size);
    uint64_t mapped = end - begin;
    enum dev_status st = a->dev->ops->map(a->dev, begin, mapped, a->err);
    if (st != DEV_OK) {
        *device_error = st == DEV_ERROR;
        return false;
    }
    struct pool *p = block_pool(a, to_map);
    RB_REMOVE(addr_tree, &p->unmapped, to_map);
    to_map->mapped = true;
    if (mapped < to_map->size) {
        struct alloc_block *rest = block_new(a, to_map->stream, to_map->size - mapped, p, to_map->addr + mapped);
        rest->mapped = false;
        rest->expandable = true;
        rest->seg = seg;
        rest->prev = to_map;
        rest->next = to_map->next;
        block_link_next(rest);
        to_map->next = rest;
        RB_INSERT(addr_tree, &p->unmapped, rest);
        to_map->size = mapped;
    }
    try_merge_blocks(a, to_map, to_map->prev, p);
    try_merge_blocks(a, to_map, to_map->next, p);
    pool_insert(p, to_map);
    a->total_allocated_memory += mapped;
    stat_array_increase(a->stats.reserved_bytes, p->small, (int64_t)mapped);
    a->stats.num_device_alloc++;
    record_trace(a, ACT_SEGMENT_MAP, begin, mapped, to_map->stream);
    return true;
}

struct alloc_block *try_allocate_expandable_block(struct allocator *a, uint64_t stream, struct pool *p,
                                                  uint64_t size, int *device_error)
{
    struct alloc_block *c = find_expandable_block(a, stream, p, size, device_error);
    if (!c)
        return NULL;
    if (!c->mapped && !map_block(a, c, c->size < size ? c->size : size, device_error))
        return NULL;
    while (c->size < size) {
        uint64_t remaining = size - c->size;
        struct alloc_block *next = c->next;
        if (!map_block(a, next, remaining < next->size ? remaining : next->size, device_error))
            return NULL;
        c = next;
    }
    return c; /* in the pool, as alloc_found_block takes it */
}

/* Unmaps every whole page inside the free block b, leaving partial pages mapped as free blocks. */
void unmap_block(struct allocator *a, struct alloc_block *b)
{
    struct segment *seg = b->seg;
    uint64_t begin = page_ceil(seg, b->addr), end = page_floor(seg, b->addr + b->size);
    if (begin >= end)
        return;
    struct pool *p = block_pool(a, b);
    pool_remove(p, b);
    uint64_t before = begin - b->addr, unmapped = end - begin, after = b->size - before - unmapped;
    if (before) {
        struct alloc_block *f = block_new(a, b->stream, before, p, b->addr);
        f->expandable = true;
        f->seg = seg;
        f->prev = b->prev;
        f->next = b;
        block_link_prev(f);
        b->prev = f;
        pool_insert(p, f);
    }
    if (after) {
        struct alloc_block *f = block_new(a, b->stream, after, p, end);
        f->expandable = true;
        f->seg = seg;
        f->prev = b;
        f->next = b->next;
        block_link_next(f);
        b->next = f;
        pool_insert(p, f);
    }
    b->addr = begin;
    b->size = unmapped;
    b->mapped = false;
    try_merge_blocks(a, b, b->prev, p);
    try_merge_blocks(a, b, b->next, p);
    RB_INSERT(addr_tree, &p->unmapped, b);
    a->dev->ops->unmap(a->dev, begin, unmapped);
    a->total_allocated_memory -= unmapped;
    stat_array_decrease(a->stats.reserved_bytes, p->small, (int64_t)unmapped);
    a->stats.num_device_free++;
    record_trace(a, ACT_SEGMENT_UNMAP, begin, unmapped, b->stream);
}

void release_expandable_segment(struct allocator *a, struct alloc_block *b)
{
    struct segment *seg = b->seg;
    RB_REMOVE(addr_tree, &block_pool(a, b)->unmapped, b);
    a->dev->ops->va_release(a->dev, seg->addr, seg->size);
    segment_delete(a, seg);
    block_delete(a, b);
}
