/* snapshot_replay.c: turning a PyTorch snapshot into a replay plan: its alloc, free_completed,
 * segment_alloc and segment_free events as ops in order, its final segments to compare with, and,
 * when recording began mid-run, the state at trace start: the final segments and live blocks minus the
 * net effect of the traced events. A live block whose size the file no longer shows gets the size the
 * allocator's rules give its request (rounded, or the whole gap when that remainder would not be split). */
#include <stdlib.h>
#include <string.h>

#include "replay/snapshot_plan.h"
#include "util/hash.h"
#include "util/size.h"
#include "util/vec.h"

struct live_entry {
    uint64_t addr, size, requested, stream;
    UT_hash_handle hh;
};

struct seg_entry {
    uint64_t addr, size, stream;
    bool small;
    UT_hash_handle hh;
};

static bool is_live_state(enum snap_block_state st)
{
    return st == SNAP_ACTIVE_ALLOCATED || st == SNAP_ACTIVE_PENDING_FREE;
}

static int build_ops(const struct snapshot *s, struct snapshot_plan *p)
{
    size_t cap = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        const struct snap_event *ev = &s->events[i];
        struct op op = {.id = ev->addr, .bytes = ev->size, .stream = (int32_t)ev->stream, .where = i,
                        .category = CAT_OTHER};
        switch (ev->action) {
        case SNAP_ALLOC: op.kind = OP_ALLOC; break;
        case SNAP_FREE_COMPLETED: op.kind = OP_FREE; break;
        case SNAP_SEGMENT_ALLOC: op.kind = OP_SEGMENT_ALLOC; break;
        case SNAP_SEGMENT_FREE: op.kind = OP_SEGMENT_FREE; break;
        default: p->skipped_events++; continue;
        }
        if (vec_grow((void **)&p->ops, &cap, p->nops + 1, sizeof *p->ops))
            return -1;
        p->ops[p->nops++] = op;
    }
    return 0;
}

static int build_final(const struct snapshot *s, struct snapshot_plan *in)
{
    if (!s->nsegments)
        return 0;
    if (!(in->final.segments = calloc(s->nsegments, sizeof *in->final.segments)))
        return -1;
    in->final.nsegments = s->nsegments;
    for (size_t i = 0; i < s->nsegments; i++) {
        const struct snap_segment *ss = &s->segments[i];
        struct segment_info *si = &in->final.segments[i];
        *si = (struct segment_info){.address = ss->address, .total_size = ss->total_size,
                                    .allocated_size = ss->allocated_size, .active_size = ss->active_size,
                                    .requested_size = ss->requested_size, .stream = ss->stream, .small = ss->small,
                                    .is_expandable = ss->is_expandable, .nblocks = ss->nblocks};
        if (ss->nblocks && !(si->blocks = calloc(ss->nblocks, sizeof *si->blocks)))
            return -1;
        for (size_t k = 0; k < ss->nblocks; k++) {
            const struct snap_block *sb = &ss->blocks[k];
            si->blocks[k] = (struct block_info){sb->address, sb->size, sb->requested_size,
                                                is_live_state(sb->state) ? BLOCK_ACTIVE_ALLOCATED : BLOCK_INACTIVE};
        }
    }
    return 0;
}

/* Walks the trace backwards from the final state to the live blocks and segments at its start. */
static int unwind(const struct snapshot *s, struct live_entry **live, struct seg_entry **segs)
{
    for (size_t i = 0; i < s->nsegments; i++) {
        const struct snap_segment *ss = &s->segments[i];
        struct seg_entry *g = calloc(1, sizeof *g);
        if (!g)
            return -1;
        *g = (struct seg_entry){.addr = ss->address, .size = ss->total_size, .stream = ss->stream, .small = ss->small};
        HASH_ADD(hh, *segs, addr, sizeof g->addr, g);
        if (!HASH_ADDED(g)) {
            free(g);
            return -1;
        }
        for (size_t k = 0; k < ss->nblocks; k++) {
            const struct snap_block *sb = &ss->blocks[k];
            if (!is_live_state(sb->state))
                continue;
            struct live_entry *l = calloc(1, sizeof *l);
            if (!l)
                return -1;
            *l = (struct live_entry){.addr = sb->address, .size = sb->size, .requested = sb->requested_size,
                                     .stream = ss->stream};
            HASH_ADD(hh, *live, addr, sizeof l->addr, l);
            if (!HASH_ADDED(l)) {
                free(l);
                return -1;
            }
        }
    }
    for (size_t i = s->nevents; i-- > 0;) {
        const struct snap_event *ev = &s->events[i];
        struct live_entry *l;
        struct seg_entry *g;
        switch (ev->action) {
        case SNAP_ALLOC:
            HASH_FIND(hh, *live, &ev->addr, sizeof ev->addr, l);
            if (l) {
                HASH_DEL(*live, l);
                free(l);
            }
            break;
        case SNAP_FREE_COMPLETED:
            HASH_FIND(hh, *live, &ev->addr, sizeof ev->addr, l);
            if (!l) {
                if (!(l = calloc(1, sizeof *l)))
                    return -1;
                *l = (struct live_entry){.addr = ev->addr, .requested = ev->size, .stream = ev->stream};
                HASH_ADD(hh, *live, addr, sizeof l->addr, l);
                if (!HASH_ADDED(l)) {
                    free(l);
                    return -1;
                }
            }
            break;
        case SNAP_SEGMENT_ALLOC:
            HASH_FIND(hh, *segs, &ev->addr, sizeof ev->addr, g);
            if (g) {
                HASH_DEL(*segs, g);
                free(g);
            }
            break;
        case SNAP_SEGMENT_FREE:
            if (!(g = calloc(1, sizeof *g)))
                return -1;
            *g = (struct seg_entry){.addr = ev->addr, .size = ev->size, .stream = ev->stream, .small = ev->size == 2 * MiB};
            HASH_ADD(hh, *segs, addr, sizeof g->addr, g);
            if (!HASH_ADDED(g)) {
                free(g);
                return -1;
            }
            break;
        default:
            break;
        }
    }
    return 0;
}

static int by_addr_seg(const struct seg_entry *x, const struct seg_entry *y)
{
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_addr_live(const struct live_entry *x, const struct live_entry *y)
{
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Size of a live block the final state no longer shows, by the allocator's rules (see the header). */
static uint64_t inferred_size(const struct alloc_config *cfg, bool small, uint64_t requested, uint64_t gap)
{
    uint64_t rounded = alloc_round_size(cfg, requested);
    if (rounded >= gap)
        return gap;
    uint64_t remainder = gap - rounded;
    bool split = small ? remainder >= 512 : (rounded < cfg->max_split_size && remainder > MiB);
    return split ? rounded : gap;
}

static int build_initial(const struct snapshot *s, const struct alloc_config *cfg, struct snapshot_plan *in,
                         struct err *e)
{
    struct live_entry *live = NULL, *l, *ltmp;
    struct seg_entry *segs = NULL, *g, *gtmp;
    int rc = unwind(s, &live, &segs);
    if (rc == 0 && HASH_COUNT(segs)) {
        HASH_SORT(segs, by_addr_seg);
        HASH_SORT(live, by_addr_live);
        if (!(in->initial = calloc(HASH_COUNT(segs), sizeof *in->initial)))
            rc = -1;
    }
    l = live;
    for (g = segs; rc == 0 && g; g = g->hh.next) {
        struct replay_segment *rs = &in->initial[in->ninitial++];
        *rs = (struct replay_segment){.address = g->addr, .size = g->size, .stream = g->stream, .small = g->small};
        while (l && l->addr < g->addr)
            l = l->hh.next; /* a live block outside every segment: the trace lost its segment */
        size_t cap = 0;
        for (; l && l->addr < g->addr + g->size; l = l->hh.next) {
            if (vec_grow((void **)&rs->blocks, &cap, rs->nblocks + 1, sizeof *rs->blocks) ||
                !(rs->keys = realloc(rs->keys, cap * sizeof *rs->keys))) {
                rc = -1;
                break;
            }
            rs->keys[rs->nblocks] = l->addr;
            rs->blocks[rs->nblocks++] = (struct restore_block){l->addr - g->addr, l->size, l->requested};
        }
        for (size_t k = 0; rc == 0 && k < rs->nblocks; k++) {
            struct restore_block *rb = &rs->blocks[k];
            uint64_t next = k + 1 < rs->nblocks ? rs->blocks[k + 1].offset : g->size;
            if (rb->size == 0)
                rb->size = inferred_size(cfg, g->small, rb->requested_size, next - rb->offset);
        }
    }
    HASH_ITER(hh, live, l, ltmp) {
        HASH_DEL(live, l);
        free(l);
    }
    HASH_ITER(hh, segs, g, gtmp) {
        HASH_DEL(segs, g);
        free(g);
    }
    if (rc)
        return err_set(e, ERR_INTERNAL, "%s: out of host memory rebuilding the state at trace start", in->name);
    return 0;
}

/* The settings the recording ran under: its PYTORCH_CUDA_ALLOC_CONF, then the values the allocator
 * reported (which include settings made through torch.cuda.memory._set_allocator_settings). */
static int recorded_settings(const struct snapshot *s, struct snapshot_plan *p, struct err *e)
{
    alloc_config_default(&p->settings);
    p->has_settings = s->has_settings;
    if (!s->has_settings)
        return 0;
    if (alloc_config_parse(&p->settings, s->alloc_conf, e))
        return err_prefix(e, "%s: allocator_settings: ", p->name);
    p->settings.expandable_segments = s->expandable_segments;
    p->settings.max_split_size = s->max_split_size < 0 ? UINT64_MAX : (uint64_t)s->max_split_size;
    p->settings.garbage_collection_threshold = s->garbage_collection_threshold;
    return 0;
}

int snapshot_plan_build(const char *name, const unsigned char *data, size_t len, struct snapshot_plan *p,
                        struct err *e)
{
    *p = (struct snapshot_plan){.name = name};
    struct snapshot s;
    if (snapshot_parse(name, data, len, &s, e))
        return -1;
    for (size_t i = 0; i < s.nsegments; i++) {
        if (s.segments[i].is_expandable) {
            uint64_t addr = s.segments[i].address;
            snapshot_free(&s);
            return err_set(e, ERR_INPUT,
                           "%s: segment at 0x%llx is expandable; replaying snapshots with expandable segments "
                           "is not supported yet",
                           name, (unsigned long long)addr);
        }
    }
    int rc = recorded_settings(&s, p, e);
    if (rc == 0 && (build_ops(&s, p) || build_final(&s, p)))
        rc = err_set(e, ERR_INTERNAL, "%s: out of host memory", name);
    if (rc == 0)
        rc = build_initial(&s, &p->settings, p, e);
    snapshot_free(&s);
    if (rc)
        snapshot_plan_free(p);
    return rc;
}

void snapshot_plan_free(struct snapshot_plan *p)
{
    free(p->ops);
    for (size_t i = 0; i < p->ninitial; i++) {
        free(p->initial[i].blocks);
        free(p->initial[i].keys);
    }
    free(p->initial);
    alloc_snapshot_free(&p->final);
    *p = (struct snapshot_plan){0};
}
