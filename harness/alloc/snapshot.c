/* snapshot.c: building PyTorch-shaped snapshots of the allocator model and checking its statistics
 * against them. */
#include "alloc/snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc/internal.h"
#include "util/vec.h"

static struct segment_info *open_segment(struct alloc_snapshot *s, size_t *cap, const struct segment *seg,
                                         uint64_t addr)
{
    if (vec_grow((void **)&s->segments, cap, s->nsegments + 1, sizeof *s->segments))
        return NULL;
    struct segment_info *si = &s->segments[s->nsegments++];
    *si = (struct segment_info){.address = addr, .stream = seg->stream, .small = seg->small,
                                .is_expandable = seg->expandable};
    return si;
}

static int add_block(struct segment_info *si, size_t *cap, const struct alloc_block *b)
{
    if (vec_grow((void **)&si->blocks, cap, si->nblocks + 1, sizeof *si->blocks))
        return -1;
    enum block_state st = b->allocated            ? BLOCK_ACTIVE_ALLOCATED
                          : block_pending_free(b) ? BLOCK_ACTIVE_PENDING_FREE
                                                  : BLOCK_INACTIVE;
    si->blocks[si->nblocks++] =
        (struct block_info){.address = b->addr, .size = b->size, .requested_size = b->requested_size, .state = st};
    si->total_size += b->size;
    if (b->allocated) {
        si->allocated_size += b->size;
        si->active_size += b->size;
        si->requested_size += b->requested_size;
    } else if (block_pending_free(b)) {
        si->active_size += b->size;
    }
    return 0;
}

static int by_address(const void *x, const void *y)
{
    uint64_t a = ((const struct segment_info *)x)->address, b = ((const struct segment_info *)y)->address;
    return a < b ? -1 : a > b;
}

int allocator_snapshot(const struct allocator *a, struct alloc_snapshot *out)
{
    *out = (struct alloc_snapshot){0};
    size_t seg_cap = 0;
    for (const struct segment *seg = a->segments; seg; seg = seg->next_seg) {
        struct segment_info *si = NULL;
        size_t block_cap = 0;
        for (const struct alloc_block *b = seg->head; b; b = b->next) {
            if (!b->mapped) { /* an unmapped gap ends an expandable segment's mapped range */
                si = NULL;
                continue;
            }
            if (!si) {
                if (!(si = open_segment(out, &seg_cap, seg, b->addr)))
                    goto fail;
                block_cap = 0;
            }
            if (add_block(si, &block_cap, b))
                goto fail;
        }
    }
    if (out->nsegments)
        qsort(out->segments, out->nsegments, sizeof *out->segments, by_address);
    return 0;
fail:
    alloc_snapshot_free(out);
    return -1;
}

const char *alloc_action_name(enum alloc_action a)
{
    static const char *const names[] = {
        [ACT_ALLOC] = "alloc",
        [ACT_FREE_REQUESTED] = "free_requested",
        [ACT_FREE_COMPLETED] = "free_completed",
        [ACT_SEGMENT_ALLOC] = "segment_alloc",
        [ACT_SEGMENT_FREE] = "segment_free",
        [ACT_SEGMENT_MAP] = "segment_map",
        [ACT_SEGMENT_UNMAP] = "segment_unmap",
        [ACT_OOM] = "oom",
        [ACT_SNAPSHOT] = "snapshot",
    };
    return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : NULL;
}

void alloc_snapshot_free(struct alloc_snapshot *s)
{
    for (size_t i = 0; i < s->nsegments; i++)
        free(s->segments[i].blocks);
    free(s->segments);
    *s = (struct alloc_snapshot){0};
}

struct totals {
    int64_t segment, reserved, allocated, active_bytes, requested, allocation, active, inactive_split,
        inactive_split_bytes, pending, pending_bytes;
};

/* Adds one segment's blocks to the totals the snapshot would give (walking the chain directly, so the
 * check costs no allocation and can run after every operation). */
static void tally_segment(struct totals *t, const struct segment *seg)
{
    bool whole_split = !seg->expandable && block_is_split(seg->head);
    if (!seg->expandable)
        t->segment++;
    for (const struct alloc_block *b = seg->head; b; b = b->next) {
        if (!b->mapped)
            continue;
        t->reserved += (int64_t)b->size;
        if (b->allocated) {
            t->allocated += (int64_t)b->size;
            t->active_bytes += (int64_t)b->size;
            t->requested += (int64_t)b->requested_size;
            t->allocation++;
            t->active++;
        } else if (block_pending_free(b)) { /* freed, waiting for stream events: still active */
            t->active_bytes += (int64_t)b->size;
            t->requested += (int64_t)b->requested_size;
            t->active++;
            t->pending++;
            t->pending_bytes += (int64_t)b->size;
        } else if (whole_split) {
            t->inactive_split++;
            t->inactive_split_bytes += (int64_t)b->size;
        }
    }
}

#define CHECK_STAT(name, field, type_name)                                                                  \
    if (s->name[type].current != t->field) {                                                                 \
        snprintf(why, len, "%s.%s.current = %" PRId64 " but the snapshot gives %" PRId64, #name, type_name,   \
                 s->name[type].current, t->field);                                                           \
        return -1;                                                                                           \
    }

static int compare(const struct alloc_stats *s, int type, const struct totals *t, const char *type_name, char *why,
                   size_t len)
{
    CHECK_STAT(segment, segment, type_name)
    CHECK_STAT(reserved_bytes, reserved, type_name)
    CHECK_STAT(allocated_bytes, allocated, type_name)
    CHECK_STAT(active_bytes, active_bytes, type_name)
    CHECK_STAT(requested_bytes, requested, type_name)
    CHECK_STAT(allocation, allocation, type_name)
    CHECK_STAT(active, active, type_name)
    CHECK_STAT(inactive_split, inactive_split, type_name)
    CHECK_STAT(inactive_split_bytes, inactive_split_bytes, type_name)
    return 0;
}

static int check_tiling(const struct allocator *a, char *why, size_t len)
{
    for (const struct segment *seg = a->segments; seg; seg = seg->next_seg) {
        uint64_t at = seg->addr;
        const struct alloc_block *prev = NULL;
        for (const struct alloc_block *b = seg->head; b; prev = b, b = b->next) {
            if (b->addr != at || b->prev != prev || b->seg != seg) {
                snprintf(why, len, "segment 0x%" PRIx64 ": block at 0x%" PRIx64 " does not follow its neighbour",
                         seg->addr, b->addr);
                return -1;
            }
            if (prev && block_is_free(b) && block_is_free(prev) && b->mapped == prev->mapped) {
                snprintf(why, len, "segment 0x%" PRIx64 ": free neighbours at 0x%" PRIx64 " were not merged",
                         seg->addr, b->addr);
                return -1;
            }
            at += b->size;
        }
        if (at != seg->addr + seg->size) {
            snprintf(why, len, "segment 0x%" PRIx64 ": blocks cover %" PRIu64 " of %" PRIu64 " bytes", seg->addr,
                     at - seg->addr, seg->size);
            return -1;
        }
    }
    return 0;
}

int alloc_check_consistency(const struct allocator *a, char *why, size_t len)
{
    struct totals t[STAT_TYPES] = {0};
    for (const struct segment *seg = a->segments; seg; seg = seg->next_seg) {
        tally_segment(&t[STAT_ALL], seg);
        tally_segment(&t[seg->small ? STAT_SMALL_POOL : STAT_LARGE_POOL], seg);
    }
    static const char *const names[STAT_TYPES] = {"all", "small_pool", "large_pool"};
    const struct alloc_stats *s = allocator_stats(a); /* settled: the active stats are derived */
    for (int type = 0; type < STAT_TYPES; type++) {
        if (compare(s, type, &t[type], names[type], why, len))
            return -1;
        if (t[type].pending != s->pending[type] || t[type].pending_bytes != s->pending_bytes[type]) {
            snprintf(why, len, "%s: %" PRId64 " blocks (%" PRId64 " bytes) wait for stream events, but the blocks show %" PRId64 " (%" PRId64 ")",
                     names[type], s->pending[type], s->pending_bytes[type], t[type].pending, t[type].pending_bytes);
            return -1;
        }
    }
    if ((uint64_t)s->reserved_bytes[STAT_ALL].current != a->total_allocated_memory) {
        snprintf(why, len, "reserved_bytes.all.current differs from the device bytes held");
        return -1;
    }
    return check_tiling(a, why, len);
}
