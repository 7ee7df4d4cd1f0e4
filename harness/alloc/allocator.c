/* allocator.c: DeviceCachingAllocator::malloc: the free-block search (get_free_block), the chain of fallbacks
 * before an OOM, splitting a found block (alloc_found_block), and new cudaMalloc segments (alloc_block). free
 * is in blocks.c (with free_block, which it runs inline), release paths in release.c, expandable segments in
 * expandable.c. */
#include <stdlib.h>
#include <string.h>

#include "alloc/internal.h"
#include "util/size.h"

#define ONE_EB (1ULL << 60)

struct allocator *allocator_create(struct device *dev, const struct alloc_config *cfg)
{
    struct allocator *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->dev = dev;
    a->cfg = *cfg;
    a->divisions = alloc_config_has_divisions(cfg);
    RB_INIT(&a->large.unmapped);
    RB_INIT(&a->small.unmapped);
    a->small.small = true;
    a->stats.max_split_size = cfg->max_split_size == UINT64_MAX ? -1 : (int64_t)cfg->max_split_size;
    allocator_set_memory_fraction(a, cfg->per_process_memory_fraction);
    return a;
}

void allocator_destroy(struct allocator *a)
{
    if (!a)
        return;
    /* Return every segment to the device, then the bookkeeping (block and segment structs: slabs) to the host.
     * A segment's blocks are visited only for expandable pages or stream_uses arrays: after a flux.1-dev step
     * they are 5,000 cache misses for nothing. */
    for (struct segment *s = a->segments; s; s = s->next_seg) {
        for (struct alloc_block *b = s->expandable || a->blocks_with_uses ? s->head : NULL; b; b = b->next) {
            if (s->expandable && b->mapped)
                a->dev->ops->unmap(a->dev, b->addr, b->size);
            if (b->allocated && b->uses.stream_uses) /* only blocks outside the trees have uses */
                free(b->uses.stream_uses);
        }
        if (s->expandable)
            a->dev->ops->va_release(a->dev, s->addr, s->size);
        else
            a->dev->ops->seg_free(a->dev, s->addr, s->size);
    }
    block_slabs_free(a);
    pool_free(&a->large);
    pool_free(&a->small);
    free(a->events);
    free(a);
}

void allocator_set_config(struct allocator *a, const struct alloc_config *cfg)
{
    a->cfg = *cfg;
    a->divisions = alloc_config_has_divisions(cfg);
    allocator_set_memory_fraction(a, cfg->per_process_memory_fraction);
}

const struct alloc_config *allocator_config(const struct allocator *a)
{
    return &a->cfg;
}

void allocator_set_memory_fraction(struct allocator *a, double fraction)
{
    a->has_allowed = fraction < 1.0;
    a->allowed_memory_maximum = a->has_allowed ? (uint64_t)(fraction * (double)a->dev->total) : 0;
}

void allocator_set_trace(struct allocator *a, alloc_trace_fn fn, void *ctx)
{
    a->trace = fn;
    a->trace_ctx = ctx;
}

uint64_t alloc_block_addr(const struct alloc_block *b)
{
    return b->addr;
}

uint64_t alloc_block_size(const struct alloc_block *b)
{
    return b->size;
}

const struct alloc_stats *allocator_stats(const struct allocator *a)
{
    alloc_stats_settle((struct alloc_stats *)&a->stats); /* only derived fields: a is not changed */
    return &a->stats;
}

void allocator_current_bytes(const struct allocator *a, uint64_t *allocated, uint64_t *reserved)
{
    *allocated = (uint64_t)a->stats.allocated_bytes[STAT_ALL].current;
    *reserved = (uint64_t)a->stats.reserved_bytes[STAT_ALL].current;
}

void allocator_reset_peak_stats(struct allocator *a)
{
    alloc_stats_reset_peak(&a->stats);
}

void allocator_reset_accumulated_stats(struct allocator *a)
{
    alloc_stats_reset_accumulated(&a->stats);
}

static bool gc_enabled(const struct allocator *a)
{
    return a->has_allowed && a->cfg.garbage_collection_threshold > 0.0;
}

static struct alloc_block *get_free_block(struct allocator *a, struct pool *p, uint64_t size, uint64_t stream)
{
    if (gc_enabled(a))
        p->get_free_blocks_call_count++;
    struct alloc_block *b = pool_lower_bound(p, stream, size, 0);
    if (!b || b->stream != stream)
        return NULL;
    if (b->expandable) {
        if (a->cfg.expandable_segments) {
            /* Best fit counts an expandable block as the size it can grow to (its unmapped successor). The pool
             * is ordered by size, so no later block of the stream counts less than one with nothing to grow
             * into: the next block is fetched only when b can grow. */
#define EXPANDABLE_SIZE(x) ((x)->size + ((x)->next && !(x)->next->mapped ? (x)->next->size : 0))
            while (b->expandable && EXPANDABLE_SIZE(b) > b->size) {
                struct alloc_block *next = pool_next(p, b);
                if (!next || next->stream != stream || EXPANDABLE_SIZE(next) >= EXPANDABLE_SIZE(b))
                    break;
                b = next;
            }
#undef EXPANDABLE_SIZE
        } else {
            do
                b = pool_next(p, b);
            while (b && b->expandable && b->stream == stream);
            if (!b || b->stream != stream)
                return NULL;
        }
    }
    uint64_t max_split = a->cfg.max_split_size;
    if (size < max_split && b->size >= max_split)
        return NULL; /* an oversize cached block never serves a normal request */
    if (size >= max_split && b->size >= size + a->cfg.max_non_split_rounding)
        return NULL;
    return b; /* still in the pool: alloc_found_block takes it out, or only its low part */
}

/* alloc_block: a new segment from the device (or mapped pages, with expandable segments).
 * Returns the block, or NULL with *device_error set when the device failed for another reason than OOM. A new
 * segment's block is not in its pool (as PyTorch's, it enters it only as the remainder of a split); mapped
 * expandable pages are, as get_free_block's blocks. */
static struct alloc_block *alloc_block(struct allocator *a, struct pool *p, uint64_t size, uint64_t alloc_size,
                                       uint64_t stream, bool is_retry, int *device_error)
{
    if (is_retry)
        a->stats.num_alloc_retries++;
    if (a->has_allowed && a->total_allocated_memory + alloc_size > a->allowed_memory_maximum)
        return NULL;
    if (a->cfg.expandable_segments)
        return try_allocate_expandable_block(a, stream, p, size, device_error);
    uint64_t addr;
    enum dev_status st = a->dev->ops->seg_alloc(a->dev, alloc_size, 0, &addr, a->err);
    if (st != DEV_OK) {
        *device_error = st == DEV_ERROR;
        return NULL;
    }
    a->total_allocated_memory += alloc_size;
    struct alloc_block *b = block_new(a, stream, alloc_size, p, addr);
    b->seg = segment_new(a, addr, alloc_size, stream, p->small);
    b->seg->head = b;
    stat_array_count_up(a->stats.segment, p->small);
    stat_array_increase(a->stats.reserved_bytes, p->small, (int64_t)alloc_size);
    if (alloc_size >= a->cfg.max_split_size)
        stat_count_up(&a->stats.oversize_segments);
    a->stats.num_device_alloc++;
    record_trace(a, ACT_SEGMENT_ALLOC, addr, alloc_size, stream);
    return b;
}

/* Both rules evaluated and one picked, without branches: which applies is as random as the request sizes. */
static bool should_split(const struct allocator *a, const struct alloc_block *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    bool small_rule = b->small | a->cfg.expandable_segments;
    bool small_split = remaining >= 512;
    bool large_split = (size < a->cfg.max_split_size) & (remaining > MiB);
    return (small_rule & small_split) | (!small_rule & large_split);
}

/* b is handed out whole, or its low `size` bytes are split off and handed out and the rest goes to (or stays
 * in) the pool. b is in its pool when in_pool (a cached block), else a new segment's. */
static struct alloc_block *alloc_found_block(struct allocator *a, struct alloc_block *b, uint64_t size,
                                             uint64_t orig_size, uint64_t stream, bool in_pool)
{
    struct pool *p = block_pool(a, b);
    struct alloc_stats *s = &a->stats;
    bool already_split = block_is_split(b);
    if (should_split(a, b, size)) {
        struct alloc_block *remaining = b;
        /* read before block_new's stores, which then are replaced rather than done twice */
        struct segment *seg = remaining->seg;
        struct alloc_block *prev = remaining->prev;
        bool expandable = remaining->expandable;
        b = block_new(a, stream, size, p, remaining->addr);
        b->seg = seg;
        b->expandable = expandable;
        b->prev = prev;
        b->next = remaining;
        block_link_prev(b);
        remaining->prev = b;
        if (in_pool) {
            pool_shrink_front(p, remaining, remaining->addr + size);
        } else {
            remaining->addr += size;
            remaining->size -= size;
            pool_insert(p, remaining);
        }
        if (already_split && !b->expandable) {
            stat_array_decrease(s->inactive_split_bytes, p->small, (int64_t)b->size);
        } else if (!b->expandable) {
            stat_array_increase(s->inactive_split_bytes, p->small, (int64_t)remaining->size);
            stat_array_count_up(s->inactive_split, p->small);
        }
    } else {
        if (in_pool) {
            pool_remove(p, b);
            block_clear_uses(b);
        }
        if (already_split && !b->expandable) {
            stat_array_decrease(s->inactive_split_bytes, p->small, (int64_t)b->size);
            stat_array_count_down(s->inactive_split, p->small);
        }
    }
    b->allocated = true;
    b->requested_size = orig_size;
    record_trace(a, ACT_ALLOC, b->addr, orig_size, b->stream);
    stat_block_allocated(s, p->small, (int64_t)b->size, (int64_t)orig_size);
    if (b->size >= a->cfg.max_split_size)
        stat_count_up(&s->oversize_allocations);
    return b;
}

static void fill_oom(struct allocator *a, struct alloc_oom *oom, uint64_t orig, uint64_t size, uint64_t alloc_size,
                     uint64_t stream)
{
    uint64_t free_bytes = 0, total = 0;
    a->dev->ops->mem_info(a->dev, &free_bytes, &total);
    *oom = (struct alloc_oom){
        .requested = orig,
        .rounded = size,
        .alloc_size = alloc_size,
        .stream = stream,
        .device_free = free_bytes,
        .device_total = total,
        .has_allowed = a->has_allowed,
        .allowed = a->allowed_memory_maximum,
        .allocated = (uint64_t)a->stats.allocated_bytes[STAT_ALL].current,
        .reserved = (uint64_t)a->stats.reserved_bytes[STAT_ALL].current,
    };
    record_trace(a, ACT_OOM, free_bytes, size, stream);
    a->stats.num_ooms++;
}

/* No cached block fits: a new segment, after releasing cached blocks if need be (malloc's chain of fallbacks).
 * 0 with *found (in its pool only with expandable segments, see alloc_block), 1 for an OOM (filled in), -1 for
 * a device error. Out of line: most mallocs find a cached block, and need not save registers for this. */
static __attribute__((noinline)) int malloc_new_segment(struct allocator *a, struct pool *p, uint64_t orig_size,
                                                        uint64_t size, uint64_t stream, struct alloc_block **found,
                                                        struct alloc_oom *oom)
{
    uint64_t alloc_size = alloc_segment_size(size);
    int device_error = 0;
    if (gc_enabled(a))
        garbage_collect_cached_blocks(a);
    struct alloc_block *b = alloc_block(a, p, size, alloc_size, stream, false, &device_error);
    if (!b && !device_error && release_available_cached_blocks(a, size, stream, p))
        b = alloc_block(a, p, size, alloc_size, stream, false, &device_error);
    if (!b && !device_error) {
        release_cached_blocks(a);
        b = alloc_block(a, p, size, alloc_size, stream, true, &device_error);
    }
    if (device_error)
        return -1;
    if (!b) {
        fill_oom(a, oom, orig_size, size, alloc_size, stream);
        return 1;
    }
    *found = b;
    return 0;
}

static int malloc_block(struct allocator *a, uint64_t orig_size, uint64_t stream, bool search,
                        struct alloc_block **out, struct alloc_oom *oom, struct err *e)
{
    *out = NULL;
    if (orig_size == 0)
        return 0;
    if (orig_size >= ONE_EB) {
        *oom = (struct alloc_oom){.requested = orig_size, .stream = stream, .too_large = true};
        return 1;
    }
    a->err = e;
    if (a->nevents)
        process_events(a); /* blocks whose stream events completed return to their pools first */
    uint64_t size = a->divisions ? alloc_round_size(&a->cfg, orig_size) : alloc_round_min_block(orig_size);
    struct pool *p = pick_addr(alloc_is_small(size), &a->small, &a->large);
    struct alloc_block *b = NULL;
    bool in_pool = true;
    if (search)
        b = get_free_block(a, p, size, stream);
    else
        p->get_free_blocks_call_count++; /* the recording searched (before its release) and found nothing */
    if (!b) {
        int rc = malloc_new_segment(a, p, orig_size, size, stream, &b, oom);
        if (rc)
            return rc;
        in_pool = a->cfg.expandable_segments;
    }
    *out = alloc_found_block(a, b, size, orig_size, stream, in_pool);
    return 0;
}

int allocator_malloc(struct allocator *a, uint64_t size, uint64_t stream, struct alloc_block **out,
                     struct alloc_oom *oom, struct err *e)
{
    return malloc_block(a, size, stream, true, out, oom, e);
}

int allocator_malloc_fresh(struct allocator *a, uint64_t size, uint64_t stream, struct alloc_block **out,
                           struct alloc_oom *oom, struct err *e)
{
    return malloc_block(a, size, stream, false, out, oom, e);
}

uint64_t allocator_largest_free_block(const struct allocator *a)
{
    uint64_t largest = 0;
    const struct pool *pools[2] = {&a->large, &a->small};
    for (int i = 0; i < 2; i++) {
        /* ordered by stream first: every stream's largest is a candidate */
        for (struct alloc_block *b = pool_first(pools[i]); b; b = pool_next(pools[i], b))
            if (b->size > largest)
                largest = b->size;
    }
    return largest;
}

void allocator_empty_cache(struct allocator *a)
{
    release_cached_blocks(a);
}
