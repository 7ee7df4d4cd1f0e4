/* restore_expandable.c: rebuilding an expandable segment that existed before a trace started: a new
 * reservation of the size the allocator would make, the recorded mapped ranges mapped at the same offsets
 * from its base, their live blocks allocated and the gaps free, the rest unmapped. */
#include "alloc/internal.h"
#include "util/size.h"

static struct alloc_block *link_block(struct allocator *a, struct segment *seg, struct pool *p, struct alloc_block *prev,
                                      uint64_t addr, uint64_t size, bool mapped)
{
    struct alloc_block *b = block_append(a, seg, p, prev, addr, size);
    b->expandable = true;
    b->mapped = mapped;
    return b;
}

static int check_layout(const struct restore_block *ranges, size_t nranges, const struct restore_block *blocks,
                        size_t n, uint64_t reserve, struct err *e)
{
    size_t r = 0;
    for (size_t i = 0; i < nranges; i++) {
        uint64_t prev_end = i ? ranges[i - 1].offset + ranges[i - 1].size : 0;
        if (!ranges[i].size || ranges[i].offset < prev_end || ranges[i].size > reserve ||
            ranges[i].offset > reserve - ranges[i].size)
            return err_set(e, ERR_INPUT, "mapped range %zu (offset %llu, %llu bytes) overlaps another or leaves the "
                           "%llu-byte reservation", i, (unsigned long long)ranges[i].offset,
                           (unsigned long long)ranges[i].size, (unsigned long long)reserve);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t prev_end = i ? blocks[i - 1].offset + blocks[i - 1].size : 0;
        while (r < nranges && ranges[r].offset + ranges[r].size <= blocks[i].offset)
            r++;
        if (!blocks[i].size || blocks[i].offset < prev_end || r == nranges || blocks[i].offset < ranges[r].offset ||
            blocks[i].size > ranges[r].offset + ranges[r].size - blocks[i].offset)
            return err_set(e, ERR_INPUT, "restored block %zu (offset %llu, %llu bytes) overlaps another or leaves its "
                           "mapped range", i, (unsigned long long)blocks[i].offset, (unsigned long long)blocks[i].size);
    }
    return 0;
}

int allocator_restore_expandable(struct allocator *a, uint64_t stream, bool small, const struct restore_block *ranges,
                                 size_t nranges, const struct restore_block *blocks, size_t n,
                                 struct alloc_block **handles, uint64_t *base, struct err *e)
{
    struct pool *p = small ? &a->small : &a->large;
    uint64_t page = small ? 2 * MiB : 20 * MiB, total = a->dev->total;
    uint64_t reserve = page * ((total + total / 8 + page - 1) / page);
    if (check_layout(ranges, nranges, blocks, n, reserve, e))
        return -1;
    enum dev_status st = a->dev->ops->va_reserve(a->dev, reserve, base, e);
    if (st != DEV_OK)
        return st == DEV_OOM ? err_set(e, ERR_INPUT, "the device cannot reserve the expandable segment's address space")
                             : -1;
    struct segment *seg = segment_new(a, *base, reserve, stream, small);
    seg->expandable = true;
    seg->page = page;
    struct alloc_stats *s = &a->stats;
    struct alloc_block *prev = NULL;
    uint64_t at = 0;
    size_t k = 0;
    for (size_t i = 0; i <= nranges; i++) {
        uint64_t start = i < nranges ? ranges[i].offset : reserve;
        if (start > at) { /* unmapped up to the next range */
            prev = link_block(a, seg, p, prev, *base + at, start - at, false);
            RB_INSERT(addr_tree, &p->unmapped, prev);
        }
        if (i == nranges)
            break;
        uint64_t end = ranges[i].offset + ranges[i].size;
        st = a->dev->ops->map(a->dev, *base + ranges[i].offset, ranges[i].size, e);
        if (st != DEV_OK)
            return st == DEV_OOM ? err_set(e, ERR_INPUT, "the device cannot hold the restored %llu-byte mapped range",
                                           (unsigned long long)ranges[i].size)
                                 : -1;
        a->total_allocated_memory += ranges[i].size;
        stat_array_increase(s->reserved_bytes, small, (int64_t)ranges[i].size);
        s->num_device_alloc++;
        for (at = ranges[i].offset; at < end;) {
            bool live = k < n && blocks[k].offset == at;
            uint64_t size = live ? blocks[k].size : (k < n && blocks[k].offset < end ? blocks[k].offset : end) - at;
            prev = link_block(a, seg, p, prev, *base + at, size, true);
            if (live) {
                prev->allocated = true;
                prev->requested_size = blocks[k].requested_size;
                handles[k++] = prev;
                stat_block_allocated(s, small, (int64_t)size, (int64_t)prev->requested_size);
                if (size >= a->cfg.max_split_size)
                    stat_count_up(&s->oversize_allocations);
            }
            at += size;
        }
    }
    for (struct alloc_block *b = seg->head; b; b = b->next) { /* free mapped blocks are cached */
        if (!b->mapped || b->allocated)
            continue;
        pool_insert(p, b);
        if (block_is_split(b)) {
            stat_array_count_up(s->inactive_split, small);
            stat_array_increase(s->inactive_split_bytes, small, (int64_t)b->size);
        }
    }
    return 0;
}
