/* snapshot_out.c: recording a run as PyTorch's memory snapshot and writing it (see snapshot_out.h). */
#include "report/snapshot_out.h"

#include <stdlib.h>
#include <string.h>

#include "alloc/snapshot.h"
#include "report/json_out.h"
#include "report/pickle_out.h"
#include "util/output.h"
#include "util/hash.h"
#include "util/vec.h"

struct frame { /* where an event happened: module tag, phase, step */
    uint32_t tag, phase;
    int64_t step;
};

struct event {
    enum alloc_action action;
    uint64_t addr, size, stream;
    uint32_t frame;
};

struct name_entry {
    uint32_t id;
    UT_hash_handle hh;
    char text[];
};

struct addr_frame { /* the frame a live block or a segment was created in */
    uint64_t addr;
    uint32_t frame;
    UT_hash_handle hh;
};

struct snapshot_recorder {
    struct run_observer base; /* first */
    struct name_entry *names;
    char **texts;
    size_t ntexts, texts_cap;
    struct frame *frames;
    size_t nframes, frames_cap;
    struct event *events;
    size_t nevents, events_cap;
    struct addr_frame *blocks, *segments;
    uint32_t tag, phase;
    int64_t step;
    bool failed; /* out of host memory on the way */
};

static uint32_t intern(struct snapshot_recorder *s, const char *text)
{
    size_t n = strlen(text);
    struct name_entry *e;
    HASH_FIND(hh, s->names, text, n, e);
    if (e)
        return e->id;
    if (vec_grow((void **)&s->texts, &s->texts_cap, s->ntexts + 1, sizeof *s->texts) ||
        !(e = malloc(sizeof *e + n + 1))) {
        s->failed = true;
        return 0;
    }
    memcpy(e->text, text, n + 1);
    e->id = (uint32_t)s->ntexts;
    HASH_ADD_KEYPTR(hh, s->names, e->text, n, e);
    if (!HASH_ADDED(e)) {
        free(e);
        s->failed = true;
        return 0;
    }
    s->texts[s->ntexts++] = e->text;
    return e->id;
}

static uint32_t current_frame(struct snapshot_recorder *s)
{
    if (s->nframes) {
        const struct frame *f = &s->frames[s->nframes - 1];
        if (f->tag == s->tag && f->phase == s->phase && f->step == s->step)
            return (uint32_t)(s->nframes - 1);
    }
    if (vec_grow((void **)&s->frames, &s->frames_cap, s->nframes + 1, sizeof *s->frames)) {
        s->failed = true;
        return 0;
    }
    s->frames[s->nframes] = (struct frame){s->tag, s->phase, s->step};
    return (uint32_t)s->nframes++;
}

static void remember(struct snapshot_recorder *s, struct addr_frame **table, uint64_t addr, uint32_t frame)
{
    struct addr_frame *a;
    HASH_FIND(hh, *table, &addr, sizeof addr, a);
    if (!a) {
        if (!(a = malloc(sizeof *a))) {
            s->failed = true;
            return;
        }
        a->addr = addr;
        HASH_ADD(hh, *table, addr, sizeof a->addr, a);
        if (!HASH_ADDED(a)) {
            free(a);
            s->failed = true;
            return;
        }
    }
    a->frame = frame;
}

static void forget(struct addr_frame **table, uint64_t addr)
{
    struct addr_frame *a;
    HASH_FIND(hh, *table, &addr, sizeof addr, a);
    if (a) {
        HASH_DEL(*table, a);
        free(a);
    }
}

static int lookup(struct addr_frame *table, uint64_t addr)
{
    struct addr_frame *a;
    HASH_FIND(hh, table, &addr, sizeof addr, a);
    return a ? (int)a->frame : -1;
}

static void before_op(struct run_observer *base, const struct op *op)
{
    struct snapshot_recorder *s = (struct snapshot_recorder *)base;
    switch (op->kind) {
    case OP_PHASE: s->phase = intern(s, op->name ? op->name : "-"); break;
    case OP_STEP: s->step = (int64_t)op->id; break;
    case OP_ALLOC:
    case OP_FREE:
    case OP_KERNEL: s->tag = intern(s, op->name && op->name[0] ? op->name : "-"); break;
    default: break;
    }
}

static void on_alloc_event(struct run_observer *base, const struct alloc_trace_event *ev)
{
    struct snapshot_recorder *s = (struct snapshot_recorder *)base;
    uint32_t frame = current_frame(s);
    if (vec_grow((void **)&s->events, &s->events_cap, s->nevents + 1, sizeof *s->events)) {
        s->failed = true;
        return;
    }
    s->events[s->nevents++] = (struct event){ev->action, ev->addr, ev->size, ev->stream, frame};
    if (ev->action == ACT_ALLOC)
        remember(s, &s->blocks, ev->addr, frame);
    else if (ev->action == ACT_FREE_COMPLETED)
        forget(&s->blocks, ev->addr);
    else if (ev->action == ACT_SEGMENT_ALLOC)
        remember(s, &s->segments, ev->addr, frame);
    else if (ev->action == ACT_SEGMENT_FREE)
        forget(&s->segments, ev->addr);
}

struct snapshot_recorder *snapshot_recorder_create(void)
{
    struct snapshot_recorder *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->base = (struct run_observer){.before_op = before_op, .on_alloc_event = on_alloc_event};
    s->phase = s->tag = intern(s, "-");
    return s->failed ? (snapshot_recorder_destroy(s), NULL) : s;
}

struct run_observer *snapshot_recorder_base(struct snapshot_recorder *s)
{
    return &s->base;
}

/* [{"filename": phase, "line": step, "name": tag}], or [] without one */
static void write_frames(struct pickle_out *p, const struct snapshot_recorder *s, int frame)
{
    po_list_begin(p);
    if (frame >= 0) {
        const struct frame *f = &s->frames[frame];
        po_dict_begin(p);
        po_key(p, "filename");
        po_str(p, s->texts[f->phase]);
        po_key(p, "line");
        po_int(p, f->step);
        po_key(p, "name");
        po_str(p, s->texts[f->tag]);
        po_dict_end(p);
    }
    po_list_end(p);
}

static void write_segments(struct pickle_out *p, const struct snapshot_recorder *s, const struct alloc_snapshot *snap)
{
    static const char *const states[] = {"active_allocated", "active_pending_free", "inactive"};
    po_list_begin(p);
    for (size_t i = 0; i < snap->nsegments; i++) {
        const struct segment_info *g = &snap->segments[i];
        po_dict_begin(p);
        po_key(p, "device");
        po_int(p, 0);
        po_key(p, "address");
        po_uint(p, g->address);
        po_key(p, "total_size");
        po_uint(p, g->total_size);
        po_key(p, "allocated_size");
        po_uint(p, g->allocated_size);
        po_key(p, "active_size");
        po_uint(p, g->active_size);
        po_key(p, "requested_size");
        po_uint(p, g->requested_size);
        po_key(p, "stream");
        po_uint(p, g->stream);
        po_key(p, "segment_type");
        po_str(p, g->small ? "small" : "large");
        po_key(p, "segment_pool_id");
        po_tuple_begin(p);
        po_int(p, 0);
        po_int(p, 0);
        po_tuple_end(p);
        po_key(p, "is_expandable");
        po_bool(p, g->is_expandable);
        po_key(p, "frames");
        write_frames(p, s, lookup(s->segments, g->address));
        po_key(p, "blocks");
        po_list_begin(p);
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct block_info *b = &g->blocks[k];
            po_dict_begin(p);
            po_key(p, "address");
            po_uint(p, b->address);
            po_key(p, "size");
            po_uint(p, b->size);
            po_key(p, "requested_size");
            po_uint(p, b->requested_size);
            po_key(p, "state");
            po_str(p, states[b->state]);
            po_key(p, "frames");
            write_frames(p, s, b->state == BLOCK_INACTIVE ? -1 : lookup(s->blocks, b->address));
            po_dict_end(p);
        }
        po_list_end(p);
        po_dict_end(p);
    }
    po_list_end(p);
}

static void write_trace(struct pickle_out *p, const struct snapshot_recorder *s)
{
    po_list_begin(p); /* one trace per device: device 0 */
    po_list_begin(p);
    for (size_t i = 0; i < s->nevents; i++) {
        const struct event *ev = &s->events[i];
        po_dict_begin(p);
        po_key(p, "action");
        po_str(p, alloc_action_name(ev->action));
        po_key(p, ev->action == ACT_OOM ? "device_free" : "addr");
        po_uint(p, ev->addr);
        po_key(p, "size");
        po_uint(p, ev->size);
        po_key(p, "stream");
        po_uint(p, ev->stream);
        po_key(p, "time_us");
        po_uint(p, i); /* the order of events; the model has no wall clock */
        po_key(p, "frames");
        write_frames(p, s, (int)ev->frame);
        po_dict_end(p);
    }
    po_list_end(p);
    po_list_end(p);
}

static void write_settings(struct pickle_out *p, const struct alloc_config *cfg)
{
    po_dict_begin(p);
    po_key(p, "PYTORCH_CUDA_ALLOC_CONF");
    po_str(p, cfg->text);
    po_key(p, "max_split_size");
    po_int(p, cfg->max_split_size == UINT64_MAX ? -1 : (int64_t)cfg->max_split_size);
    po_key(p, "garbage_collection_threshold");
    po_float(p, cfg->garbage_collection_threshold);
    po_key(p, "expandable_segments");
    po_bool(p, cfg->expandable_segments);
    po_key(p, "roundup_power2_divisions");
    po_dict_begin(p);
    for (int k = 0; k < ALLOC_ROUNDUP_INTERVALS; k++) {
        char key[16];
        snprintf(key, sizeof key, "%u", 1u << k);
        po_key(p, key);
        po_uint(p, cfg->roundup_power2_divisions[k]);
    }
    po_dict_end(p);
    po_dict_end(p);
}

static int write_pickle(struct snapshot_recorder *s, struct runner *r, const struct alloc_snapshot *snap, FILE *f)
{
    struct pickle_out *p = pickle_out_create(f);
    if (!p)
        return -1;
    po_dict_begin(p);
    po_key(p, "segments");
    write_segments(p, s, snap);
    po_key(p, "device_traces");
    write_trace(p, s);
    po_key(p, "allocator_settings");
    write_settings(p, allocator_config(runner_allocator(r)));
    po_dict_end(p);
    int rc = pickle_out_finish(p);
    pickle_out_destroy(p);
    return rc;
}

static bool is_json(const char *path)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".json");
}

int snapshot_recorder_write(struct snapshot_recorder *s, struct runner *r, const char *path, struct err *e)
{
    struct alloc_snapshot snap;
    if (s->failed || allocator_snapshot(runner_allocator(r), &snap))
        return err_set(e, ERR_INTERNAL, "out of host memory recording the snapshot for %s", path);
    int rc;
    if (is_json(path)) {
        rc = json_write_file(path, json_alloc_snapshot(&snap), e);
    } else {
        struct output af;
        rc = output_open(&af, path, e);
        if (rc == 0 && write_pickle(s, r, &snap, af.f)) {
            output_abort(&af);
            rc = err_set(e, ERR_INTERNAL, "%s: cannot write the snapshot", path);
        } else if (rc == 0) {
            rc = output_commit(&af, e);
        }
    }
    alloc_snapshot_free(&snap);
    return rc;
}

static void free_table(struct addr_frame **table)
{
    struct addr_frame *a, *tmp;
    HASH_ITER(hh, *table, a, tmp) {
        HASH_DEL(*table, a);
        free(a);
    }
}

void snapshot_recorder_destroy(struct snapshot_recorder *s)
{
    if (!s)
        return;
    struct name_entry *n, *tmp;
    HASH_ITER(hh, s->names, n, tmp) {
        HASH_DEL(s->names, n);
        free(n);
    }
    free_table(&s->blocks);
    free_table(&s->segments);
    free(s->texts);
    free(s->frames);
    free(s->events);
    free(s);
}
