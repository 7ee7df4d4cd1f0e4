/* recorded.c: the observer that checks a replay against its snapshot (see recorded.h). */
#include "replay/recorded.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/snapshot_file.h"
#include "util/vec.h"

struct seg_pair { /* a recorded segment and where the model put it */
    uint64_t rec_addr, size, our_addr;
};

struct seg_log {
    uint64_t addr, size;
    size_t at_alloc;
};

/* An expandable segment's reservation, per (stream, pool): PyTorch maps its pages from the base up, so the
 * first map seen on each side is the base, and offsets from it translate recorded addresses. */
struct reservation {
    uint64_t stream;
    bool small;
    bool have_rec, have_ours, paired;
    uint64_t rec_base, our_base;
};

#define MAX_RESERVATIONS 64
#define RESERVATION_SPAN (1ULL << 40) /* more than any recorded GPU's ~1.125 x memory reservation */

struct recorded_observer {
    struct run_observer base; /* first */
    struct recorded_check check;
    size_t allocs_done;
    struct reservation res[MAX_RESERVATIONS];
    size_t nres;
    /* segment_maps, recorded and the model's, not yet paired */
    struct seg_log *maps_ours, *maps_rec;
    size_t nmaps_ours, maps_ours_head, maps_ours_cap, nmaps_rec, maps_rec_head, maps_rec_cap;
    /* the model's segment_allocs not yet paired with a recorded one */
    struct seg_log *ours;
    size_t nours, ours_head, ours_cap;
    /* recorded segment_allocs not yet paired */
    struct seg_log *recorded;
    size_t nrecorded, recorded_head, recorded_cap;
    /* recorded segments alive now, sorted by recorded address */
    struct seg_pair *pairs;
    size_t npairs, pairs_cap;
    bool out_of_memory; /* a growth failed where no error could be returned */
    /* a request the recording OOMed on is being tried: the model's own segment events for it are not the
     * recording's; whether it OOMed again */
    bool in_recorded_oom, oomed_again;
};

static bool grow(struct recorded_observer *o, void **p, size_t *cap, size_t need, size_t elem)
{
    if (vec_grow(p, cap, need, elem))
        o->out_of_memory = true;
    return !o->out_of_memory;
}

static void mismatch(struct recorded_observer *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mismatch(struct recorded_observer *o, const char *fmt, ...)
{
    if (o->check.first_mismatch[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->check.first_mismatch, sizeof o->check.first_mismatch, fmt, ap);
    va_end(ap);
}

static size_t pair_index(const struct recorded_observer *o, uint64_t rec_addr) /* first pair >= rec_addr */
{
    size_t lo = 0, hi = o->npairs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (o->pairs[mid].rec_addr < rec_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void pair_add(struct recorded_observer *o, uint64_t rec_addr, uint64_t size, uint64_t our_addr)
{
    size_t i = pair_index(o, rec_addr);
    if (i < o->npairs && o->pairs[i].rec_addr == rec_addr) {
        o->pairs[i] = (struct seg_pair){rec_addr, size, our_addr};
        return;
    }
    if (!grow(o, (void **)&o->pairs, &o->pairs_cap, o->npairs + 1, sizeof *o->pairs))
        return;
    memmove(&o->pairs[i + 1], &o->pairs[i], (o->npairs - i) * sizeof *o->pairs);
    o->pairs[i] = (struct seg_pair){rec_addr, size, our_addr};
    o->npairs++;
}

static void pair_remove(struct recorded_observer *o, uint64_t rec_addr)
{
    size_t i = pair_index(o, rec_addr);
    if (i < o->npairs && o->pairs[i].rec_addr == rec_addr) {
        memmove(&o->pairs[i], &o->pairs[i + 1], (o->npairs - i - 1) * sizeof *o->pairs);
        o->npairs--;
    }
}

/* The model's address for a recorded address, through the segment containing it; 0 if none. */
static uint64_t translate(const struct recorded_observer *o, uint64_t rec_addr)
{
    size_t i = pair_index(o, rec_addr + 1);
    if (i == 0)
        return 0;
    const struct seg_pair *p = &o->pairs[i - 1];
    return rec_addr < p->rec_addr + p->size ? p->our_addr + (rec_addr - p->rec_addr) : 0;
}

static void pair_segments(struct recorded_observer *o)
{
    struct recorded_check *c = &o->check;
    while (o->ours_head < o->nours && o->recorded_head < o->nrecorded) {
        const struct seg_log *ours = &o->ours[o->ours_head++], *rec = &o->recorded[o->recorded_head++];
        if (ours->size == rec->size && ours->at_alloc == rec->at_alloc)
            c->segment_allocs_matched++;
        else
            mismatch(o,
                     "segment_alloc #%zu: recorded %" PRIu64 " bytes before alloc #%zu, the model allocated %" PRIu64
                     " bytes before alloc #%zu",
                     o->recorded_head, rec->size, rec->at_alloc + 1, ours->size, ours->at_alloc + 1);
        pair_add(o, rec->addr, rec->size, ours->addr);
    }
}

/* A map of whole 20 MiB pages is the large pool's; the small pool maps 2 MiB pages one or two at a time. */
static bool small_pool_map(uint64_t size)
{
    return size % (20ULL << 20) != 0;
}

/* The first map of each side on a (stream, pool) is its reservation's base; once both are known, offsets
 * from them translate. */
static void note_map(struct recorded_observer *o, uint64_t stream, uint64_t addr, uint64_t size, bool recorded)
{
    bool small = small_pool_map(size);
    struct reservation *r = NULL;
    for (size_t i = 0; i < o->nres && !r; i++)
        if (o->res[i].stream == stream && o->res[i].small == small)
            r = &o->res[i];
    if (!r) {
        if (o->nres == MAX_RESERVATIONS)
            return;
        r = &o->res[o->nres++];
        *r = (struct reservation){.stream = stream, .small = small};
    }
    if (recorded && !r->have_rec)
        r->have_rec = true, r->rec_base = addr;
    if (!recorded && !r->have_ours)
        r->have_ours = true, r->our_base = addr;
    if (r->have_rec && r->have_ours && !r->paired) {
        r->paired = true;
        pair_add(o, r->rec_base, RESERVATION_SPAN, r->our_base);
    }
}

static void pair_maps(struct recorded_observer *o)
{
    struct recorded_check *c = &o->check;
    while (o->maps_ours_head < o->nmaps_ours && o->maps_rec_head < o->nmaps_rec) {
        const struct seg_log *ours = &o->maps_ours[o->maps_ours_head++], *rec = &o->maps_rec[o->maps_rec_head++];
        if (ours->size == rec->size && ours->at_alloc == rec->at_alloc)
            c->segment_maps_matched++;
        else
            mismatch(o,
                     "segment_map #%zu: recorded %" PRIu64 " bytes before alloc #%zu, the model mapped %" PRIu64
                     " bytes before alloc #%zu",
                     o->maps_rec_head, rec->size, rec->at_alloc + 1, ours->size, ours->at_alloc + 1);
    }
}

static void before_op(struct run_observer *base, const struct op *op)
{
    struct recorded_observer *o = (struct recorded_observer *)base;
    o->in_recorded_oom = op->kind == OP_RECORDED_OOM;
    o->oomed_again = false;
}

static void on_alloc_event(struct run_observer *base, const struct alloc_trace_event *ev)
{
    struct recorded_observer *o = (struct recorded_observer *)base;
    if (o->in_recorded_oom) {
        o->oomed_again |= ev->action == ACT_OOM;
        return;
    }
    if (ev->action == ACT_SEGMENT_ALLOC &&
        grow(o, (void **)&o->ours, &o->ours_cap, o->nours + 1, sizeof *o->ours))
        o->ours[o->nours++] = (struct seg_log){ev->addr, ev->size, o->allocs_done};
    if (ev->action == ACT_SEGMENT_MAP) {
        note_map(o, ev->stream, ev->addr, ev->size, false);
        if (grow(o, (void **)&o->maps_ours, &o->maps_ours_cap, o->nmaps_ours + 1, sizeof *o->maps_ours))
            o->maps_ours[o->nmaps_ours++] = (struct seg_log){ev->addr, ev->size, o->allocs_done};
    }
}

static void check_alloc(struct recorded_observer *o, const struct op *op, const struct alloc_block *b)
{
    o->allocs_done++;
    pair_segments(o);
    pair_maps(o);
    o->check.allocs++;
    uint64_t want = translate(o, op->id);
    if (b && want == alloc_block_addr(b))
        o->check.addresses_matched++;
    else
        mismatch(o, "alloc #%zu (event %" PRIu64 ", %" PRIu64 " bytes): recorded at 0x%" PRIx64
                 ", the model placed it %s",
                 o->allocs_done, op->where, op->bytes, op->id, b ? "elsewhere" : "nowhere (OOM)");
}

/* A recorded segment_free (empty_cache, or PyTorch's own release before a retry): the model releases its
 * counterpart if that is a whole free segment; if the model still uses it, the difference shows later. */
static void release_recorded(struct recorded_observer *o, struct runner *r, const struct op *op)
{
    pair_segments(o);
    uint64_t ours = translate(o, op->id);
    if (ours && !allocator_release_segment(runner_allocator(r), ours))
        mismatch(o, "event %" PRIu64 ": segment_free of 0x%" PRIx64 ", which the model still uses", op->where, op->id);
    pair_remove(o, op->id);
}

/* A recorded segment_unmap: the model unmaps its free pages there. */
static void unmap_recorded(struct recorded_observer *o, struct runner *r, const struct op *op)
{
    pair_maps(o);
    uint64_t ours = translate(o, op->id);
    if (!ours || !allocator_release_mapped(runner_allocator(r), ours, op->bytes))
        mismatch(o, "event %" PRIu64 ": segment_unmap of %" PRIu64 " bytes at 0x%" PRIx64 ", which the model %s",
                 op->where, op->bytes, op->id, ours ? "still uses or has not mapped" : "has no counterpart for");
}

static int on_op(struct run_observer *base, struct runner *r, const struct op *op, const struct alloc_block *block,
                 struct err *e)
{
    struct recorded_observer *o = (struct recorded_observer *)base;
    switch (op->kind) {
    case OP_ALLOC: check_alloc(o, op, block); break;
    case OP_SEGMENT_ALLOC:
        o->check.segment_allocs_recorded++;
        if (grow(o, (void **)&o->recorded, &o->recorded_cap, o->nrecorded + 1, sizeof *o->recorded))
            o->recorded[o->nrecorded++] = (struct seg_log){op->id, op->bytes, o->allocs_done};
        break;
    case OP_SEGMENT_FREE: release_recorded(o, r, op); break;
    case OP_SEGMENT_MAP:
        o->check.segment_maps_recorded++;
        note_map(o, (uint64_t)op->stream, op->id, op->bytes, true);
        if (grow(o, (void **)&o->maps_rec, &o->maps_rec_cap, o->nmaps_rec + 1, sizeof *o->maps_rec))
            o->maps_rec[o->nmaps_rec++] = (struct seg_log){op->id, op->bytes, o->allocs_done};
        break;
    case OP_SEGMENT_UNMAP: unmap_recorded(o, r, op); break;
    case OP_RECORDED_OOM:
        o->check.ooms_recorded++;
        o->check.ooms_reproduced += o->oomed_again;
        o->in_recorded_oom = false;
        break;
    default: break;
    }
    if (o->out_of_memory)
        return err_set(e, ERR_INTERNAL, "event %llu: out of host memory checking the replay",
                       (unsigned long long)op->where);
    return 0;
}

struct recorded_observer *recorded_observer_create(void)
{
    struct recorded_observer *o = calloc(1, sizeof *o);
    if (o)
        o->base = (struct run_observer){.before_op = before_op, .on_alloc_event = on_alloc_event, .on_op = on_op};
    return o;
}

struct run_observer *recorded_observer_base(struct recorded_observer *o)
{
    return &o->base;
}

int recorded_observer_restored(struct recorded_observer *o, uint64_t rec_addr, uint64_t size, uint64_t our_addr)
{
    pair_add(o, rec_addr, size, our_addr);
    return o->out_of_memory ? -1 : 0;
}

int recorded_observer_restored_reservation(struct recorded_observer *o, uint64_t stream, bool small,
                                           uint64_t rec_base, uint64_t our_base)
{
    if (o->nres == MAX_RESERVATIONS)
        return -1;
    o->res[o->nres++] = (struct reservation){stream, small, true, true, true, rec_base, our_base};
    pair_add(o, rec_base, RESERVATION_SPAN, our_base);
    return o->out_of_memory ? -1 : 0;
}

static bool same_layout(const struct segment_info *ours, const struct segment_info *rec)
{
    if (ours->total_size != rec->total_size || ours->nblocks != rec->nblocks)
        return false;
    for (size_t k = 0; k < rec->nblocks; k++) {
        const struct block_info *x = &ours->blocks[k], *y = &rec->blocks[k];
        if (x->address - ours->address != y->address - rec->address || x->size != y->size ||
            block_state_live(x->state) != block_state_live(y->state))
            return false;
    }
    return true;
}

/* Reserved and allocated bytes of a final state (as memory_stats counts them: a block freed and awaiting
 * its stream's work is no longer allocated). */
static void held(const struct segment_info *segs, size_t n, uint64_t *reserved, uint64_t *allocated)
{
    *reserved = *allocated = 0;
    for (size_t i = 0; i < n; i++) {
        *reserved += segs[i].total_size;
        for (size_t k = 0; k < segs[i].nblocks; k++)
            *allocated += segs[i].blocks[k].state == BLOCK_ACTIVE_ALLOCATED ? segs[i].blocks[k].size : 0;
    }
}

int recorded_observer_finish(struct recorded_observer *o, struct runner *r, const struct segment_info *final,
                             size_t nfinal, struct recorded_check *out, struct err *e)
{
    pair_segments(o);
    pair_maps(o);
    if (o->nours != o->nrecorded)
        mismatch(o, "the snapshot records %zu segment_allocs, the model made %zu", o->nrecorded, o->nours);
    if (o->nmaps_ours != o->nmaps_rec)
        mismatch(o, "the snapshot records %zu segment_maps, the model made %zu", o->nmaps_rec, o->nmaps_ours);
    struct alloc_snapshot ours;
    if (o->out_of_memory || allocator_snapshot(runner_allocator(r), &ours))
        return err_set(e, ERR_INTERNAL, "out of host memory checking the final state");
    bool all = ours.nsegments == nfinal;
    if (!all)
        mismatch(o, "final state: the model holds %zu segments, the snapshot %zu", ours.nsegments, nfinal);
    for (size_t i = 0; i < nfinal; i++) {
        const struct segment_info *g = &final[i];
        uint64_t addr = translate(o, g->address);
        const struct segment_info *mine = NULL;
        for (size_t k = 0; k < ours.nsegments && !mine; k++)
            if (ours.segments[k].address == addr)
                mine = &ours.segments[k];
        o->check.final_segments++;
        if (mine && same_layout(mine, g)) {
            o->check.final_segments_matched++;
        } else {
            all = false;
            mismatch(o, "final state: the segment recorded at 0x%" PRIx64 " (%" PRIu64 " bytes, %zu blocks) %s",
                     g->address, g->total_size, g->nblocks, mine ? "has a different block layout" : "has no counterpart");
        }
    }
    o->check.final_layout_matched = all;
    held(final, nfinal, &o->check.recorded_reserved, &o->check.recorded_allocated);
    held(ours.segments, ours.nsegments, &o->check.replayed_reserved, &o->check.replayed_allocated);
    alloc_snapshot_free(&ours);
    *out = o->check;
    return 0;
}

void recorded_observer_destroy(struct recorded_observer *o)
{
    if (!o)
        return;
    free(o->ours);
    free(o->recorded);
    free(o->maps_ours);
    free(o->maps_rec);
    free(o->pairs);
    free(o);
}
