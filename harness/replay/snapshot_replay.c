/* snapshot_replay.c: turning one device of a PyTorch snapshot into a replay plan: its alloc,
 * free_completed, segment_alloc, segment_free, segment_map and segment_unmap events as ops in order (an
 * alloc named by its site), its final segments to compare with, and, when recording began mid-run, the
 * state at trace start: the final segments, expandable segments' mapped ranges and live blocks minus the
 * net effect of the traced events. A live block whose size the file no longer shows gets the size the
 * allocator's rules give its request (rounded, or the whole gap when that remainder would not be split);
 * a block live at both ends keeps its recorded site, one allocated before recording and freed during it
 * has none (its free's frames are not where it was made). */
#include <stdlib.h>
#include <string.h>

#include "replay/snapshot_plan.h"
#include "util/hash.h"
#include "util/size.h"
#include "util/vec.h"

struct live_entry {
    uint64_t addr, size, requested, stream;
    const char *site;
    size_t free_index; /* a block live at trace start whose size the file lost: the event that first frees it */
    UT_hash_handle hh;
};

struct seg_entry {
    uint64_t addr, size, stream;
    bool small;
    UT_hash_handle hh;
};

/* The op a recorded action becomes; OP_KIND_COUNT for one that is not replayed. */
static enum op_kind op_of(enum alloc_action a)
{
    switch (a) {
    case ACT_ALLOC: return OP_ALLOC;
    case ACT_FREE_COMPLETED: return OP_FREE;
    case ACT_SEGMENT_ALLOC: return OP_SEGMENT_ALLOC;
    case ACT_SEGMENT_FREE: return OP_SEGMENT_FREE;
    case ACT_SEGMENT_MAP: return OP_SEGMENT_MAP;
    case ACT_SEGMENT_UNMAP: return OP_SEGMENT_UNMAP;
    case ACT_OOM: return OP_RECORDED_OOM;
    default: return OP_KIND_COUNT;
    }
}

bool snapshot_device_replayable(const struct snapshot_device *d)
{
    if (d->nsegments)
        return true;
    for (size_t i = 0; i < d->nevents; i++)
        if (op_of(d->events[i].action) != OP_KIND_COUNT)
            return true;
    return false;
}

/* The events that become ops: a few bytes each, not an op each (a struct op is some 200 bytes). */
static int build_ops(const struct snapshot_device *d, struct snapshot_plan *p)
{
    p->events = d;
    if (d->nevents && !(p->op_events = malloc(d->nevents * sizeof *p->op_events)))
        return -1;
    for (size_t i = 0; i < d->nevents; i++) {
        if (op_of(d->events[i].action) == OP_KIND_COUNT)
            p->skipped_events++;
        else
            p->op_events[p->nops++] = i;
    }
    return 0;
}

void snapshot_plan_op(const struct snapshot_plan *p, size_t i, struct op *op)
{
    const struct snapshot_device *d = p->events;
    size_t k = p->op_events[i];
    const struct alloc_trace_event *ev = &d->events[k];
    *op = (struct op){.kind = op_of(ev->action), .id = ev->addr, .bytes = ev->size, .stream = (int32_t)ev->stream,
                      .where = k, .category = CAT_OTHER,
                      .name = ev->action == ACT_ALLOC || ev->action == ACT_OOM ? d->event_sites[k] : NULL};
    if (ev->action == ACT_OOM)
        op->id = 0; /* its addr is the device's free bytes then, not an address */
}

/* Walks the trace backwards from the final state to the live blocks and segments at its start. */
static int unwind(const struct snapshot_device *s, struct live_entry **live, struct seg_entry **segs)
{
    for (size_t i = 0; i < s->nsegments; i++) {
        const struct segment_info *ss = &s->segments[i];
        struct seg_entry *g = ss->is_expandable ? NULL : calloc(1, sizeof *g);
        if (!ss->is_expandable) {
            if (!g)
                return -1;
            *g = (struct seg_entry){.addr = ss->address, .size = ss->total_size, .stream = ss->stream,
                                    .small = ss->small};
            HASH_ADD(hh, *segs, addr, sizeof g->addr, g);
            if (!HASH_ADDED(g)) {
                free(g);
                return -1;
            }
        }
        for (size_t k = 0; k < ss->nblocks; k++) {
            const struct block_info *sb = &ss->blocks[k];
            if (!block_state_live(sb->state))
                continue;
            struct live_entry *l = calloc(1, sizeof *l);
            if (!l)
                return -1;
            *l = (struct live_entry){.addr = sb->address, .size = sb->size, .requested = sb->requested_size,
                                     .stream = ss->stream, .site = sb->site};
            HASH_ADD(hh, *live, addr, sizeof l->addr, l);
            if (!HASH_ADDED(l)) {
                free(l);
                return -1;
            }
        }
    }
    for (size_t i = s->nevents; i-- > 0;) {
        const struct alloc_trace_event *ev = &s->events[i];
        struct live_entry *l;
        struct seg_entry *g;
        switch (ev->action) {
        case ACT_ALLOC:
            HASH_FIND(hh, *live, &ev->addr, sizeof ev->addr, l);
            if (l) {
                HASH_DEL(*live, l);
                free(l);
            }
            break;
        case ACT_FREE_COMPLETED:
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
            l->free_index = i; /* walking backwards, the last one seen is the first free */
            break;
        case ACT_SEGMENT_ALLOC:
            HASH_FIND(hh, *segs, &ev->addr, sizeof ev->addr, g);
            if (g) {
                HASH_DEL(*segs, g);
                free(g);
            }
            break;
        case ACT_SEGMENT_FREE:
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

/* Where a block live at trace start, whose size the file lost, must end: no later than the lowest traced
 * allocation placed above it (below end) before its first free. */
static uint64_t end_bound(const struct snapshot_device *s, const struct live_entry *l, uint64_t end)
{
    for (size_t j = 0; j < l->free_index && j < s->nevents; j++) {
        const struct alloc_trace_event *ev = &s->events[j];
        if (ev->action == ACT_ALLOC && ev->addr > l->addr && ev->addr < end)
            end = ev->addr;
    }
    return end;
}

/* Mapped address ranges [start, end) of one (stream, pool), sorted and apart. */
struct ranges {
    uint64_t stream;
    bool small;
    uint64_t (*r)[2];
    size_t n, cap;
};

/* The large pool maps whole 20 MiB pages; the small pool one or two 2 MiB pages at a time. */
static bool small_pool_map(uint64_t size)
{
    return size % (20 * MiB) != 0;
}

static struct ranges *ranges_for(struct ranges **all, size_t *n, size_t *cap, uint64_t stream, bool small)
{
    for (size_t i = 0; i < *n; i++)
        if ((*all)[i].stream == stream && (*all)[i].small == small)
            return &(*all)[i];
    if (vec_grow((void **)all, cap, *n + 1, sizeof **all))
        return NULL;
    (*all)[*n] = (struct ranges){.stream = stream, .small = small};
    return &(*all)[(*n)++];
}

/* Adds [a, b), merging what it touches. */
static int ranges_add(struct ranges *x, uint64_t a, uint64_t b)
{
    size_t i = 0;
    while (i < x->n && x->r[i][1] < a)
        i++;
    size_t j = i;
    while (j < x->n && x->r[j][0] <= b) {
        a = x->r[j][0] < a ? x->r[j][0] : a;
        b = x->r[j][1] > b ? x->r[j][1] : b;
        j++;
    }
    if (j == i && vec_grow((void **)&x->r, &x->cap, x->n + 1, sizeof *x->r))
        return -1;
    memmove(&x->r[i + 1], &x->r[j], (x->n - j) * sizeof *x->r);
    x->n = x->n - (j - i) + 1;
    x->r[i][0] = a;
    x->r[i][1] = b;
    return 0;
}

/* Removes [a, b), splitting a range it falls inside. */
static int ranges_remove(struct ranges *x, uint64_t a, uint64_t b)
{
    for (size_t i = 0; i < x->n; i++) {
        uint64_t s0 = x->r[i][0], s1 = x->r[i][1];
        if (s1 <= a || s0 >= b)
            continue;
        if (s0 < a && s1 > b) { /* a hole in the middle */
            if (vec_grow((void **)&x->r, &x->cap, x->n + 1, sizeof *x->r))
                return -1;
            memmove(&x->r[i + 2], &x->r[i + 1], (x->n - i - 1) * sizeof *x->r);
            x->n++;
            x->r[i][1] = a;
            x->r[i + 1][0] = b;
            x->r[i + 1][1] = s1;
            return 0;
        }
        if (s0 < a)
            x->r[i][1] = a;
        else if (s1 > b)
            x->r[i][0] = b;
        else {
            memmove(&x->r[i], &x->r[i + 1], (x->n - i - 1) * sizeof *x->r);
            x->n--;
            i--;
        }
    }
    return 0;
}

/* The mapped ranges of expandable segments at trace start: the final ones, without what the trace
 * mapped and with what it unmapped, walking it backwards. */
static int unwind_mapped(const struct snapshot_device *s, struct ranges **all, size_t *n)
{
    size_t cap = 0;
    for (size_t i = 0; i < s->nsegments; i++) {
        const struct segment_info *ss = &s->segments[i];
        struct ranges *x = ss->is_expandable ? ranges_for(all, n, &cap, ss->stream, ss->small) : NULL;
        if (ss->is_expandable && (!x || ranges_add(x, ss->address, ss->address + ss->total_size)))
            return -1;
    }
    for (size_t i = s->nevents; i-- > 0;) {
        const struct alloc_trace_event *ev = &s->events[i];
        if (ev->action != ACT_SEGMENT_MAP && ev->action != ACT_SEGMENT_UNMAP)
            continue;
        struct ranges *x = ranges_for(all, n, &cap, ev->stream, small_pool_map(ev->size));
        if (!x || (ev->action == ACT_SEGMENT_MAP ? ranges_remove(x, ev->addr, ev->addr + ev->size)
                                                  : ranges_add(x, ev->addr, ev->addr + ev->size)))
            return -1;
    }
    return 0;
}

/* The blocks live at trace start inside [start, end), from l on (sorted by address), appended to blocks,
 * keys and sites with offsets from base. A block whose size the file lost ends no later than the next live block,
 * the end, or the lowest traced allocation placed above it while it was live; within that, the allocator's
 * split rules say its size (inferred_size). */
struct block_list {
    struct restore_block *blocks;
    uint64_t *keys;
    const char **sites;
    size_t n, cap;
    size_t inferred;
};

static int take_blocks(const struct snapshot_device *s, const struct alloc_config *cfg, bool small, struct live_entry *l,
                       uint64_t start, uint64_t end, uint64_t base, struct block_list *out)
{
    for (; l && l->addr < end; l = l->hh.next) {
        if (l->addr < start)
            continue;
        if (vec_grow((void **)&out->blocks, &out->cap, out->n + 1, sizeof *out->blocks) ||
            !(out->keys = realloc(out->keys, out->cap * sizeof *out->keys)) ||
            !(out->sites = realloc(out->sites, out->cap * sizeof *out->sites)))
            return -1;
        uint64_t size = l->size;
        if (!size) {
            const struct live_entry *next = l->hh.next;
            uint64_t limit = end_bound(s, l, next && next->addr < end ? next->addr : end);
            size = inferred_size(cfg, small, l->requested, limit - l->addr);
            out->inferred++;
        }
        out->keys[out->n] = l->addr;
        out->sites[out->n] = l->site;
        out->blocks[out->n++] = (struct restore_block){l->addr - base, size, l->requested};
    }
    return 0;
}

static int build_initial_expandable(const struct snapshot_device *s, const struct alloc_config *cfg, struct live_entry *live,
                                    struct snapshot_plan *p)
{
    struct ranges *all = NULL;
    size_t n = 0;
    int rc = unwind_mapped(s, &all, &n);
    if (rc == 0 && n && !(p->initial_expandable = calloc(n, sizeof *p->initial_expandable)))
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct ranges *x = &all[i];
        if (!x->n)
            continue;
        struct replay_expandable *ex = &p->initial_expandable[p->ninitial_expandable++];
        *ex = (struct replay_expandable){.stream = x->stream, .small = x->small, .rec_base = x->r[0][0]};
        if (!(ex->ranges = calloc(x->n, sizeof *ex->ranges)))
            rc = -1;
        struct block_list bl = {0};
        for (size_t k = 0; rc == 0 && k < x->n; k++) {
            ex->ranges[ex->nranges++] = (struct restore_block){x->r[k][0] - ex->rec_base, x->r[k][1] - x->r[k][0], 0};
            rc = take_blocks(s, cfg, x->small, live, x->r[k][0], x->r[k][1], ex->rec_base, &bl);
        }
        ex->blocks = bl.blocks;
        ex->keys = bl.keys;
        ex->sites = bl.sites;
        ex->nblocks = bl.n;
        p->inferred_sizes += bl.inferred;
    }
    for (size_t i = 0; i < n; i++)
        free(all[i].r);
    free(all);
    return rc;
}

static int by_addr_seg(const struct seg_entry *x, const struct seg_entry *y)
{
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_addr_live(const struct live_entry *x, const struct live_entry *y)
{
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int build_initial(const struct snapshot_device *s, const struct alloc_config *cfg, struct snapshot_plan *in,
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
        struct block_list bl = {0};
        rc = take_blocks(s, cfg, g->small, l, g->addr, g->addr + g->size, g->addr, &bl);
        rs->blocks = bl.blocks;
        rs->keys = bl.keys;
        rs->sites = bl.sites;
        rs->nblocks = bl.n;
        in->inferred_sizes += bl.inferred;
    }
    if (rc == 0) {
        HASH_SORT(live, by_addr_live);
        rc = build_initial_expandable(s, cfg, live, in);
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

int snapshot_plan_build(const char *name, const struct snapshot *s, const struct snapshot_device *d,
                        struct snapshot_plan *p, struct err *e)
{
    static const struct snapshot_device nothing = {0};
    d = d ? d : &nothing;
    *p = (struct snapshot_plan){.name = name, .device = d->device, .final = d->segments, .nfinal = d->nsegments};
    for (size_t i = 0; i < d->nsegments; i++)
        p->private_pool_segments += d->segments[i].segment_pool_id[0] || d->segments[i].segment_pool_id[1];
    int rc = recorded_settings(s, p, e);
    if (rc == 0 && build_ops(d, p))
        rc = err_set(e, ERR_INTERNAL, "%s: out of host memory", name);
    if (rc == 0)
        rc = build_initial(d, &p->settings, p, e);
    if (rc)
        snapshot_plan_free(p);
    return rc;
}

void snapshot_plan_free(struct snapshot_plan *p)
{
    free(p->op_events);
    for (size_t i = 0; i < p->ninitial; i++) {
        free(p->initial[i].blocks);
        free(p->initial[i].keys);
        free(p->initial[i].sites);
    }
    free(p->initial);
    for (size_t i = 0; i < p->ninitial_expandable; i++) {
        free(p->initial_expandable[i].ranges);
        free(p->initial_expandable[i].blocks);
        free(p->initial_expandable[i].keys);
        free(p->initial_expandable[i].sites);
    }
    free(p->initial_expandable);
    *p = (struct snapshot_plan){0};
}
