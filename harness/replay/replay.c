/* replay.c: running a replay input through the allocator model and checking it against the snapshot:
 * each recorded segment_alloc is paired in order with the model's own (size and place in the event order
 * must agree), every alloc's address is compared segment-relative (literally, with --same-addresses), and
 * the final block layout of every segment is compared with the file's. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "util/hash.h"
#include "util/vec.h"

struct live {
    uint64_t key;
    struct alloc_block *block;
    UT_hash_handle hh;
};

struct seg_pair { /* a recorded segment and where the model put it */
    uint64_t rec_addr, size, our_addr;
};

struct seg_log {
    uint64_t addr, size;
    size_t at_alloc;
};

struct run {
    const struct replay_input *in;
    struct allocator *a;
    struct replay_result *res;
    struct live *live;
    size_t allocs_done;
    size_t ooms_cap;
    /* the model's segment_allocs not yet paired with a recorded one */
    struct seg_log *ours;
    size_t nours, ours_head, ours_cap;
    /* recorded segment_allocs not yet paired */
    struct seg_log *recorded;
    size_t nrecorded, recorded_head, recorded_cap;
    /* recorded segments alive now, sorted by recorded address */
    struct seg_pair *pairs;
    size_t npairs, pairs_cap;
    bool out_of_memory; /* a growth failed where no error could be returned; the run stops */
};

/* Grows a run's array to hold need elements; on failure marks the run out of memory. */
static bool grow(struct run *r, void **p, size_t *cap, size_t need, size_t elem)
{
    if (vec_grow(p, cap, need, elem))
        r->out_of_memory = true;
    return !r->out_of_memory;
}

static void warn(struct replay_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct replay_result *res, const char *fmt, ...)
{
    if (res->nwarnings == sizeof res->warnings / sizeof res->warnings[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->warnings[res->nwarnings++], sizeof res->warnings[0], fmt, ap);
    va_end(ap);
}

static void mismatch(struct replay_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mismatch(struct replay_result *res, const char *fmt, ...)
{
    if (res->check.first_mismatch[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->check.first_mismatch, sizeof res->check.first_mismatch, fmt, ap);
    va_end(ap);
}

static void on_trace(void *ctx, const struct alloc_trace_event *ev)
{
    struct run *r = ctx;
    if (ev->action != ACT_SEGMENT_ALLOC)
        return;
    if (grow(r, (void **)&r->ours, &r->ours_cap, r->nours + 1, sizeof *r->ours))
        r->ours[r->nours++] = (struct seg_log){ev->addr, ev->size, r->allocs_done};
}

static size_t pair_index(const struct run *r, uint64_t rec_addr) /* first pair with rec_addr >= rec_addr */
{
    size_t lo = 0, hi = r->npairs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->pairs[mid].rec_addr < rec_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void pair_add(struct run *r, uint64_t rec_addr, uint64_t size, uint64_t our_addr)
{
    size_t i = pair_index(r, rec_addr);
    if (i < r->npairs && r->pairs[i].rec_addr == rec_addr) {
        r->pairs[i] = (struct seg_pair){rec_addr, size, our_addr};
        return;
    }
    if (!grow(r, (void **)&r->pairs, &r->pairs_cap, r->npairs + 1, sizeof *r->pairs))
        return;
    memmove(&r->pairs[i + 1], &r->pairs[i], (r->npairs - i) * sizeof *r->pairs);
    r->pairs[i] = (struct seg_pair){rec_addr, size, our_addr};
    r->npairs++;
}

static void pair_remove(struct run *r, uint64_t rec_addr)
{
    size_t i = pair_index(r, rec_addr);
    if (i < r->npairs && r->pairs[i].rec_addr == rec_addr) {
        memmove(&r->pairs[i], &r->pairs[i + 1], (r->npairs - i - 1) * sizeof *r->pairs);
        r->npairs--;
    }
}

/* The model's address for a recorded address, through the segment containing it; 0 if none. */
static uint64_t translate(const struct run *r, uint64_t rec_addr)
{
    size_t i = pair_index(r, rec_addr + 1);
    if (i == 0)
        return 0;
    const struct seg_pair *p = &r->pairs[i - 1];
    return rec_addr < p->rec_addr + p->size ? p->our_addr + (rec_addr - p->rec_addr) : 0;
}

static void pair_segments(struct run *r)
{
    struct replay_check *c = &r->res->check;
    while (r->ours_head < r->nours && r->recorded_head < r->nrecorded) {
        const struct seg_log *o = &r->ours[r->ours_head++], *g = &r->recorded[r->recorded_head++];
        if (o->size == g->size && o->at_alloc == g->at_alloc)
            c->segment_allocs_matched++;
        else
            mismatch(r->res,
                     "segment_alloc #%zu: recorded %" PRIu64 " bytes before alloc #%zu, the model allocated %" PRIu64
                     " bytes before alloc #%zu",
                     r->recorded_head, g->size, g->at_alloc + 1, o->size, o->at_alloc + 1);
        pair_add(r, g->addr, g->size, o->addr);
    }
}

static int do_alloc(struct run *r, const struct replay_event *ev, struct err *e)
{
    struct live *l;
    HASH_FIND(hh, r->live, &ev->key, sizeof ev->key, l);
    if (l) {
        if (!r->in->is_snapshot)
            return err_set(e, ERR_INPUT, "%s:%zu: '%s' is allocated again while still live", r->in->name, ev->index,
                           r->in->id_names[ev->key]);
        warn(r->res, "event %zu: address 0x%" PRIx64 " allocated again while live; the earlier block is freed",
             ev->index, ev->key);
        allocator_free(r->a, l->block);
        HASH_DEL(r->live, l);
        free(l);
    }
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    int rc = allocator_malloc(r->a, ev->bytes, ev->stream, &b, &oom, e);
    if (rc < 0)
        return err_prefix(e, "%s: event %zu: ", r->in->name, ev->index);
    r->allocs_done++;
    if (rc == 1) {
        if (!grow(r, (void **)&r->res->ooms, &r->ooms_cap, r->res->nooms + 1, sizeof *r->res->ooms))
            return 0;
        struct replay_oom *o = &r->res->ooms[r->res->nooms++];
        o->event = ev->index;
        alloc_oom_message(&oom, 0, o->message, sizeof o->message);
    } else if (b) {
        if (!(l = calloc(1, sizeof *l))) {
            r->out_of_memory = true;
            return 0;
        }
        l->key = ev->key;
        l->block = b;
        HASH_ADD(hh, r->live, key, sizeof l->key, l);
        if (!HASH_ADDED(l)) {
            free(l);
            r->out_of_memory = true;
            return 0;
        }
    }
    if (r->in->is_snapshot) {
        pair_segments(r);
        r->res->check.allocs++;
        uint64_t want = translate(r, ev->key);
        if (b && want == alloc_block_addr(b))
            r->res->check.addresses_matched++;
        else
            mismatch(r->res, "alloc #%zu (event %zu, %" PRIu64 " bytes): recorded at 0x%" PRIx64 ", the model placed it %s",
                     r->allocs_done, ev->index, ev->bytes, ev->key, b ? "elsewhere" : "nowhere (OOM)");
    }
    return 0;
}

static void do_free(struct run *r, const struct replay_event *ev)
{
    struct live *l;
    HASH_FIND(hh, r->live, &ev->key, sizeof ev->key, l);
    if (!l) {
        r->res->frees_of_unknown++;
        if (r->in->is_snapshot)
            warn(r->res, "event %zu: free of 0x%" PRIx64 ", which is not allocated; ignored", ev->index, ev->key);
        else
            warn(r->res, "%s:%zu: free of '%s', whose allocation failed; ignored", r->in->name, ev->index,
                 r->in->id_names[ev->key]);
        return;
    }
    allocator_free(r->a, l->block);
    HASH_DEL(r->live, l);
    free(l);
}

static int restore_initial(struct run *r, struct device *dev, struct err *e)
{
    const struct replay_input *in = r->in;
    if (!in->ninitial)
        return 0;
    uint64_t *addrs = malloc(in->ninitial * sizeof *addrs);
    if (!addrs)
        return err_set(e, ERR_INTERNAL, "out of host memory restoring %zu segments", in->ninitial);
    for (size_t i = 0; i < in->ninitial; i++)
        addrs[i] = in->initial[i].address;
    int rc = dev->ops->place_next ? dev->ops->place_next(dev, addrs, in->ninitial, e) : 0;
    free(addrs);
    if (rc)
        return -1;
    for (size_t i = 0; i < in->ninitial; i++) {
        const struct replay_segment *s = &in->initial[i];
        struct alloc_block **handles = calloc(s->nblocks + 1, sizeof *handles);
        uint64_t addr;
        if (!handles)
            return err_set(e, ERR_INTERNAL, "out of host memory restoring a segment of %zu blocks", s->nblocks);
        if (allocator_restore_segment(r->a, s->size, s->stream, s->small, s->blocks, s->nblocks, handles, &addr, e)) {
            free(handles);
            return err_prefix(e, "%s: restoring the segment at 0x%" PRIx64 " live at trace start: ", in->name,
                              s->address);
        }
        pair_add(r, s->address, s->size, addr);
        for (size_t k = 0; k < s->nblocks; k++) {
            struct live *l = calloc(1, sizeof *l);
            if (!l) {
                free(handles);
                return err_set(e, ERR_INTERNAL, "out of host memory restoring a segment of %zu blocks", s->nblocks);
            }
            l->key = s->keys[k];
            l->block = handles[k];
            HASH_ADD(hh, r->live, key, sizeof l->key, l);
            if (!HASH_ADDED(l)) {
                free(l);
                free(handles);
                return err_set(e, ERR_INTERNAL, "out of host memory restoring a segment of %zu blocks", s->nblocks);
            }
        }
        free(handles);
    }
    return 0;
}

static int force_recorded_addresses(const struct replay_input *in, struct device *dev, struct err *e)
{
    size_t n = 0;
    for (size_t i = 0; i < in->nevents; i++)
        n += in->events[i].op == RP_RECORDED_SEGMENT_ALLOC;
    uint64_t *addrs = malloc((n + 1) * sizeof *addrs);
    if (!addrs)
        return err_set(e, ERR_INTERNAL, "out of host memory for %zu recorded segment addresses", n);
    n = 0;
    for (size_t i = 0; i < in->nevents; i++)
        if (in->events[i].op == RP_RECORDED_SEGMENT_ALLOC)
            addrs[n++] = in->events[i].key;
    int rc = dev->ops->place_next(dev, addrs, n, e);
    free(addrs);
    return rc;
}

/* A recorded segment_free (empty_cache, or PyTorch's own release before a retry): the model releases its
 * counterpart if that is a whole free segment; if the model still uses it, the difference shows later. */
static void release_recorded(struct run *r, const struct replay_event *ev)
{
    pair_segments(r);
    uint64_t ours = translate(r, ev->key);
    if (ours && !allocator_release_segment(r->a, ours))
        mismatch(r->res, "event %zu: segment_free of 0x%" PRIx64 ", which the model still uses", ev->index, ev->key);
    pair_remove(r, ev->key);
}

static bool same_layout(const struct segment_info *ours, const struct segment_info *rec)
{
    if (ours->total_size != rec->total_size || ours->nblocks != rec->nblocks)
        return false;
    for (size_t k = 0; k < rec->nblocks; k++) {
        const struct block_info *x = &ours->blocks[k], *y = &rec->blocks[k];
        if (x->address - ours->address != y->address - rec->address || x->size != y->size || x->state != y->state)
            return false;
    }
    return true;
}

static void check_final(struct run *r)
{
    const struct alloc_snapshot *rec = &r->in->final;
    struct alloc_snapshot ours;
    if (allocator_snapshot(r->a, &ours)) {
        r->out_of_memory = true;
        return;
    }
    bool all = ours.nsegments == rec->nsegments;
    if (!all)
        mismatch(r->res, "final state: the model holds %zu segments, the snapshot %zu", ours.nsegments, rec->nsegments);
    for (size_t i = 0; i < rec->nsegments; i++) {
        const struct segment_info *g = &rec->segments[i];
        uint64_t addr = translate(r, g->address);
        const struct segment_info *o = NULL;
        for (size_t k = 0; k < ours.nsegments && !o; k++)
            if (ours.segments[k].address == addr)
                o = &ours.segments[k];
        r->res->check.final_segments++;
        if (o && same_layout(o, g)) {
            r->res->check.final_segments_matched++;
        } else {
            all = false;
            mismatch(r->res, "final state: the segment recorded at 0x%" PRIx64 " (%" PRIu64 " bytes, %zu blocks) %s",
                     g->address, g->total_size, g->nblocks, o ? "has a different block layout" : "has no counterpart");
        }
    }
    r->res->check.final_layout_matched = all;
    alloc_snapshot_free(&ours);
}

int replay_run(const struct replay_input *in, struct device *dev, const struct alloc_config *cfg,
               const struct replay_options *opt, struct replay_result *res, struct err *e)
{
    *res = (struct replay_result){0};
    struct run r = {.in = in, .res = res};
    if (!(r.a = allocator_create(dev, cfg)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    int rc = restore_initial(&r, dev, e);
    if (rc == 0 && opt->same_addresses && dev->ops->place_next)
        rc = force_recorded_addresses(in, dev, e);
    allocator_set_trace(r.a, on_trace, &r);
    for (size_t i = 0; rc == 0 && i < in->nevents; i++) {
        const struct replay_event *ev = &in->events[i];
        switch (ev->op) {
        case RP_ALLOC: rc = do_alloc(&r, ev, e); break;
        case RP_FREE: do_free(&r, ev); break;
        case RP_EMPTY_CACHE: allocator_empty_cache(r.a); break;
        case RP_RESET_PEAK: allocator_reset_peak_stats(r.a); break;
        case RP_RESET_ACCUMULATED: allocator_reset_accumulated_stats(r.a); break;
        case RP_RECORDED_SEGMENT_ALLOC:
            res->check.segment_allocs_recorded++;
            if (grow(&r, (void **)&r.recorded, &r.recorded_cap, r.nrecorded + 1, sizeof *r.recorded))
                r.recorded[r.nrecorded++] = (struct seg_log){ev->key, ev->bytes, r.allocs_done};
            break;
        case RP_RECORDED_SEGMENT_FREE: release_recorded(&r, ev); break;
        }
        res->events_replayed += ev->op != RP_RECORDED_SEGMENT_ALLOC && ev->op != RP_RECORDED_SEGMENT_FREE;
        if (rc == 0 && r.out_of_memory)
            rc = err_set(e, ERR_INTERNAL, "%s: event %zu: out of host memory", in->name, ev->index);
    }
    if (rc == 0 && in->is_snapshot) {
        pair_segments(&r);
        if (r.nours != r.nrecorded)
            mismatch(res, "the snapshot records %zu segment_allocs, the model made %zu", r.nrecorded, r.nours);
        check_final(&r);
        if (r.out_of_memory)
            rc = err_set(e, ERR_INTERNAL, "%s: out of host memory checking the final state", in->name);
    }
    res->stats = *allocator_stats(r.a);
    if (rc == 0 && allocator_snapshot(r.a, &res->final))
        rc = err_set(e, ERR_INTERNAL, "out of host memory taking the final snapshot");
    struct live *l, *tmp;
    HASH_ITER(hh, r.live, l, tmp) {
        HASH_DEL(r.live, l);
        free(l);
    }
    allocator_destroy(r.a);
    free(r.ours);
    free(r.recorded);
    free(r.pairs);
    if (rc)
        replay_result_free(res);
    return rc;
}

void replay_result_free(struct replay_result *res)
{
    free(res->ooms);
    res->ooms = NULL;
    res->nooms = 0;
    alloc_snapshot_free(&res->final);
}
