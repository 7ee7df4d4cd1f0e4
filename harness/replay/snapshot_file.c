/* snapshot_file.c: walks the value tree of a snapshot pickle (replay/pickle.h) into struct snapshot.
 * Every read goes through a typed getter that knows the path of the value inside the file, so a
 * missing key or a wrong type is reported as "FILE: segments[3].blocks[2].size: ...".
 * A pickle shares values through its memo, so a small file can list one segment N times whose block
 * list is N references to one block: N^2 blocks from O(N) bytes. The walk therefore has a budget of
 * one record (segment, block or event) per byte of input, charged before anything is allocated.
 * Frames are shared the same way: PyTorch pickles each distinct frame once and refers to it after, so
 * each distinct frame is read once (remembered by its value); the frames a fold visits are charged to the
 * same budget, so a list of frames shared by many events cannot multiply the work either. */
#include "replay/snapshot_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "replay/frame_site.h"
#include "replay/pickle.h"

#include "util/hash.h"
#include "util/vec.h"

/* One step of a path inside the file: a dict key, or (key NULL) a list index. */
struct path_step {
    const char *key;
    size_t index;
};

/* more than the deepest path read: segments[i].blocks[j].history[k].frames[m].filename has 9 steps */
#define PATH_DEPTH 10

/* A frame already read: its kind, its fields (in the pickle) and, once it is chosen, its site. */
struct frame_seen {
    const struct pickle_value *value;
    enum frame_kind kind;
    bool autograd_node, aten_op;     /* a native frame naming an autograd node / an ATen operator */
    const char *filename, *name;
    size_t len;
    int64_t line;
    const char *site;
    const struct frame_seen *caller; /* the user's frame that called it, the last time it was chosen, */
    const char *call_site;           /* and "CALLER > CALLEE" of the two */
    UT_hash_handle hh;
};

#define RECENT_FRAMES 1024 /* a cache in front of the table: most frames repeat */

/* A dict key already matched against the fields an event is read for: its field, or -1. An event's keys are
 * memoized strs shared by every event, so a key is matched once and then known by its address. */
struct key_seen {
    const struct pickle_value *key;
    int field;
};
#define KEYS_SEEN 64

struct reader {
    const char *name;
    struct err *e;
    struct path_step path[PATH_DEPTH];  /* where the value being read sits; formatted only for messages */
    size_t depth;
    char where[256];
    enum { BLOCKS_UNSEEN, BLOCKS_WITH_ADDRESS, BLOCKS_WITHOUT_ADDRESS } block_layout;
    size_t input_bytes;
    size_t budget;  /* records the walk may still create: starts at input_bytes */
    struct site_table *sites;
    struct frame_seen *frames;                 /* by value */
    struct frame_seen *recent[RECENT_FRAMES];  /* the last found, by their value's address */
    const struct pickle_value *last_frames;    /* the list folded last (a free_completed repeats its */
    const char *last_site;                     /* free_requested's), and its site */
    struct key_seen event_keys_seen[KEYS_SEEN];
    /* A streamed parse (pickle_parse_streamed): the events read as the pickle is, each with its frames list
     * (the value, for last_frames), that list's site and the frames its fold visited, charged when the
     * events are taken in read_events; and the folds of the frames lists the pickle handed over. */
    bool streamed;
    struct alloc_trace_event *sevents;
    struct streamed_frames {
        const struct pickle_value *frames;
        const char *site;
        size_t visited;
    } *sframes;
    size_t nsevents, sevents_cap, sframes_cap;
    struct fold {
        const char *site;
        size_t visited;
    } *folds;
    size_t nfolds, folds_cap;
};

/* ---- paths and typed getters ---- */

/* Steps into a key or index of the current value; returns the previous depth, for path_restore. */
static size_t path_enter(struct reader *r, const char *key, size_t index)
{
    size_t saved = r->depth;
    if (r->depth < PATH_DEPTH)
        r->path[r->depth++] = (struct path_step){key, index};
    return saved;
}

static size_t path_enter_key(struct reader *r, const char *key)
{
    return path_enter(r, key, 0);
}

static size_t path_enter_index(struct reader *r, size_t i)
{
    return path_enter(r, NULL, i);
}

static void path_restore(struct reader *r, size_t depth)
{
    r->depth = depth;
}

/* The current path as text ("segments[3].blocks[2].size"), or "top level". */
static const char *where(struct reader *r)
{
    size_t used = 0;
    r->where[0] = '\0';
    for (size_t i = 0; i < r->depth && used < sizeof r->where; i++) {
        const struct path_step *s = &r->path[i];
        int n = s->key ? snprintf(r->where + used, sizeof r->where - used, "%s%s", i ? "." : "", s->key)
                       : snprintf(r->where + used, sizeof r->where - used, "[%zu]", s->index);
        used += n < 0 ? 0 : (size_t)n;
    }
    return r->depth ? r->where : "top level";
}

static int type_error(struct reader *r, const char *expected, const struct pickle_value *v)
{
    return err_set(r->e, ERR_INPUT, "%s: %s: expected %s, got %s", r->name, where(r), expected,
                   pickle_type_name(pickle_type(v)));
}

/* The value under `key` of the dict at the current path, or NULL: with an error when `required`. */
static const struct pickle_value *lookup(struct reader *r, const struct pickle_value *dict, const char *key,
                                         bool required)
{
    const struct pickle_value *v = pickle_dict_get(dict, key);
    if (!v && required)
        err_set(r->e, ERR_INPUT, "%s: %s: missing key '%s'", r->name, where(r), key);
    return v;
}

static int as_u64(struct reader *r, const struct pickle_value *v, uint64_t *out)
{
    if (pickle_get_u64(v, out))
        return 0;
    int64_t negative;
    if (pickle_get_i64(v, &negative))
        return err_set(r->e, ERR_INPUT, "%s: %s: expected a non-negative int, got %lld", r->name, where(r),
                       (long long)negative);
    return type_error(r, "an int", v);
}

static int as_i64(struct reader *r, const struct pickle_value *v, int64_t *out)
{
    if (pickle_get_i64(v, out))
        return 0;
    uint64_t big;
    if (pickle_get_u64(v, &big))
        return err_set(r->e, ERR_INPUT, "%s: %s: expected an int below 2^63, got %llu", r->name, where(r),
                       (unsigned long long)big);
    return type_error(r, "an int", v);
}

static int as_str(struct reader *r, const struct pickle_value *v, const char **out)
{
    *out = pickle_str(v, NULL);
    return *out ? 0 : type_error(r, "a str", v);
}

static int as_bool(struct reader *r, const struct pickle_value *v, bool *out)
{
    return pickle_get_bool(v, out) ? 0 : type_error(r, "a bool", v);
}

/* A float, or an int standing for one. */
static int as_float(struct reader *r, const struct pickle_value *v, double *out)
{
    int64_t i;
    if (pickle_get_float(v, out))
        return 0;
    if (!pickle_get_i64(v, &i))
        return type_error(r, "a float", v);
    *out = (double)i;
    return 0;
}

static int as_list(struct reader *r, const struct pickle_value *v)
{
    return pickle_type(v) == PICKLE_LIST ? 0 : type_error(r, "a list", v);
}

static int as_dict(struct reader *r, const struct pickle_value *v)
{
    return pickle_type(v) == PICKLE_DICT ? 0 : type_error(r, "a dict", v);
}

/* Finds `text` among `n` names: its index, or -1 with an error listing the accepted names. */
static int as_name(struct reader *r, const char *text, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0)
            return (int)i;
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(list + used, sizeof list - used, "%s'%s'", sep, names[i]);
        used += w < 0 ? 0 : (size_t)w;
    }
    return err_set(r->e, ERR_INPUT, "%s: %s: unknown value '%s' (expected %s)", r->name, where(r), text, list);
}

/* Field getters: the value under `key` of the dict at the current path, converted by as_*. Required
 * unless `optional`, in which case a missing key leaves *out alone. The value_* twins take the value
 * already looked up (NULL: missing), for dicts read in one pass (pick_fields). */
#define FIELD_GETTER(fn, value_fn, type, convert)                                                         \
    static int value_fn(struct reader *r, const struct pickle_value *v, const char *key, bool optional,  \
                        type *out)                                                                        \
    {                                                                                                     \
        if (!v)                                                                                           \
            return optional ? 0 : err_set(r->e, ERR_INPUT, "%s: %s: missing key '%s'", r->name, where(r), key); \
        size_t saved = path_enter_key(r, key);                                                            \
        int rc = convert(r, v, out);                                                                      \
        path_restore(r, saved);                                                                           \
        return rc;                                                                                        \
    }                                                                                                     \
    static int fn(struct reader *r, const struct pickle_value *dict, const char *key, bool optional,       \
                  type *out)                                                                              \
    {                                                                                                     \
        return value_fn(r, pickle_dict_get(dict, key), key, optional, out);                               \
    }

FIELD_GETTER(field_u64, value_u64, uint64_t, as_u64)
FIELD_GETTER(field_i64, value_i64, int64_t, as_i64)
FIELD_GETTER(field_str, value_str, const char *, as_str)
FIELD_GETTER(field_bool, value_bool, bool, as_bool)
FIELD_GETTER(field_float, value_float, double, as_float)

/* The values under keys[0..n) of a dict, read in one pass over its pairs (the later of a key set twice,
 * as pickle_dict_get): NULL where a key is missing. */
static void pick_fields(struct key_seen *seen, const struct pickle_value *const *pairs, size_t npairs,
                        const char *const *keys, const size_t *key_lens, size_t n, const struct pickle_value **out)
{
    for (size_t j = 0; j < n; j++)
        out[j] = NULL;
    for (size_t i = 0; i < npairs; i++) {
        const struct pickle_value *key = pairs[2 * i];
        struct key_seen *ks = &seen[((uintptr_t)key >> 4) % KEYS_SEEN];
        if (ks->key != key) {
            size_t len;
            const char *k = pickle_str(key, &len);
            *ks = (struct key_seen){key, -1};
            for (size_t j = 0; k && j < n; j++)
                if (len == key_lens[j] && memcmp(k, keys[j], len) == 0) {
                    ks->field = (int)j;
                    break;
                }
        }
        if (ks->field >= 0)
            out[ks->field] = pairs[2 * i + 1];
    }
}

/* A required field that must be a list. */
static const struct pickle_value *field_list(struct reader *r, const struct pickle_value *dict, const char *key)
{
    const struct pickle_value *v = lookup(r, dict, key, true);
    if (!v)
        return NULL;
    size_t saved = path_enter_key(r, key);
    int rc = as_list(r, v);
    path_restore(r, saved);
    return rc ? NULL : v;
}

/* A required str field that must be one of `names`: its index, or -1. */
static int field_name(struct reader *r, const struct pickle_value *dict, const char *key, const char *const *names,
                      size_t n)
{
    const char *text;
    if (field_str(r, dict, key, false, &text))
        return -1;
    size_t saved = path_enter_key(r, key);
    int i = as_name(r, text, names, n);
    path_restore(r, saved);
    return i;
}

/* Takes n records (segments, blocks or events, at the current path) from the budget. */
static int charge(struct reader *r, size_t n, const char *what)
{
    if (n <= r->budget) {
        r->budget -= n;
        return 0;
    }
    return err_set(r->e, ERR_INPUT,
                   "%s: %s: %zu more %s would exceed one record per byte of this %zu-byte file (shared pickle "
                   "objects repeated); refusing to expand it",
                   r->name, where(r), n, what, r->input_bytes);
}

/* ---- stack frames to sites (replay/frame_site.h) ---- */

static int out_of_memory(struct reader *r)
{
    return err_set(r->e, ERR_INTERNAL, "%s: out of host memory", r->name);
}

/* Frame i of the list at the current path, read at its first sight. */
static struct frame_seen *read_frame(struct reader *r, const struct pickle_value *frame, size_t i)
{
    size_t slot = ((uintptr_t)frame >> 4) % RECENT_FRAMES;
    if (r->recent[slot] && r->recent[slot]->value == frame)
        return r->recent[slot];
    struct frame_seen *f;
    HASH_FIND(hh, r->frames, &frame, sizeof frame, f);
    if (f)
        return r->recent[slot] = f;
    const char *filename, *name;
    int64_t line;
    size_t saved = path_enter_index(r, i);
    int rc = as_dict(r, frame) || field_str(r, frame, "filename", false, &filename) ||
             field_i64(r, frame, "line", false, &line) || field_str(r, frame, "name", false, &name);
    path_restore(r, saved);
    if (rc)
        return NULL;
    size_t len = strlen(filename);
    if (!(f = malloc(sizeof *f))) {
        out_of_memory(r);
        return NULL;
    }
    *f = (struct frame_seen){.value = frame, .kind = frame_kind(filename, len), .filename = filename, .name = name,
                             .len = len, .line = line};
    if (f->kind == FRAME_NATIVE) { /* told once per distinct frame, not at every fold that passes it */
        f->autograd_node = frame_autograd_node(name, NULL, 0);
        f->aten_op = frame_aten_op(name, NULL, 0);
    }
    HASH_ADD(hh, r->frames, value, sizeof f->value, f);
    if (!HASH_ADDED(f)) {
        free(f);
        out_of_memory(r);
        return NULL;
    }
    return r->recent[slot] = f;
}

/* The site a native frame names (an autograd node, or an ATen operator), interned. */
static const char *native_site(struct reader *r, bool node, const char *name)
{
    char text[160];
    if (node)
        frame_autograd_node(name, text, sizeof text);
    else
        frame_aten_op(name, text, sizeof text);
    return site_table_text(r->sites, text);
}

/* Folds the list of frames at the current path: the user's innermost frame with its user caller, else
 * the innermost library Python frame, else the innermost frame (frame_site.h); NULL for an empty list. The frames visited are
 * charged to the budget: a list shared by many events is walked again for each. */
static int fold_items(struct reader *r, const struct pickle_value *const *items, size_t n, const char **site,
                      size_t *visited)
{
    struct frame_seen *innermost = NULL, *library = NULL, *user = NULL, *caller = NULL, *inlined = NULL;
    struct frame_seen *node = NULL, *op = NULL;
    size_t i = 0;
    for (; i < n && !caller; i++) {
        struct frame_seen *f = read_frame(r, items[i], i);
        if (!f)
            return -1;
        if (f->kind == FRAME_USER && frame_is_inline(f->name))
            inlined = inlined ? inlined : f;
        else if (f->kind == FRAME_USER && user)
            caller = f;
        else if (f->kind == FRAME_USER)
            user = f;
        else if (f->kind == FRAME_LIBRARY && !library)
            library = f;
        else if (f->autograd_node && !node)
            node = f;
        else if (f->aten_op && !op)
            op = f;
        if (i == 0)
            innermost = f;
    }
    struct frame_seen *native = node ? node : op;
    struct frame_seen *chosen = user ? user : inlined ? inlined : library ? library : native ? native : innermost;
    if (chosen == native && native && !native->site && !(native->site = native_site(r, native == node, native->name)))
        return out_of_memory(r);
    if ((chosen && !chosen->site &&
         !(chosen->site = site_table_frame(r->sites, chosen->filename, chosen->len, chosen->line, chosen->name))) ||
        (caller && !caller->site &&
         !(caller->site = site_table_frame(r->sites, caller->filename, caller->len, caller->line, caller->name))))
        return out_of_memory(r);
    *site = chosen ? chosen->site : NULL;
    if (caller && chosen->caller != caller) { /* an allocation helper is mostly called from one place */
        if (!(chosen->call_site = site_table_call(r->sites, caller->site, chosen->site)))
            return out_of_memory(r);
        chosen->caller = caller;
    }
    if (caller)
        *site = chosen->call_site;
    *visited = i;
    return 0;
}

static int fold_frames(struct reader *r, const struct pickle_value *frames, const char **site)
{
    size_t n, visited;
    const struct pickle_value *const *items = pickle_items(frames, &n);
    return fold_items(r, items, n, site, &visited) || charge(r, visited, "frames") ? -1 : 0;
}

/* The site of a dict's `frames` value (NULL without them). */
static int read_frames_site(struct reader *r, const struct pickle_value *frames, const char **site)
{
    *site = frames && frames == r->last_frames ? r->last_site : NULL;
    if (!frames || frames == r->last_frames)
        return 0;
    size_t saved = path_enter_key(r, "frames");
    int rc = as_list(r, frames) || fold_frames(r, frames, site);
    path_restore(r, saved);
    r->last_frames = rc ? NULL : frames;
    r->last_site = *site;
    return rc ? -1 : 0;
}

/* The site of the `frames` of the dict v (NULL without them). */
static int read_site(struct reader *r, const struct pickle_value *v, const char **site)
{
    return read_frames_site(r, pickle_dict_get(v, "frames"), site);
}

/* A torch 2.0 live block's site: that of its history entry at its address (NULL without one). */
static int read_history_site(struct reader *r, const struct pickle_value *block, uint64_t address, const char **site)
{
    const struct pickle_value *history = pickle_dict_get(block, "history");
    *site = NULL;
    if (!history)
        return 0;
    size_t saved = path_enter_key(r, "history");
    int rc = as_list(r, history);
    for (size_t i = 0; rc == 0 && i < pickle_len(history); i++) {
        const struct pickle_value *h = pickle_item(history, i);
        uint64_t addr;
        size_t in_list = path_enter_index(r, i);
        rc = as_dict(r, h) || field_u64(r, h, "addr", false, &addr);
        if (rc == 0 && addr == address) {
            rc = read_site(r, h, site);
            path_restore(r, in_list);
            break;
        }
        path_restore(r, in_list);
    }
    path_restore(r, saved);
    return rc ? -1 : 0;
}

/* ---- blocks and segments ---- */

static const char *const block_states[] = {[BLOCK_ACTIVE_ALLOCATED] = "active_allocated",
                                           [BLOCK_ACTIVE_PENDING_FREE] = "active_pending_free",
                                           [BLOCK_INACTIVE] = "inactive"};

/* torch 2.0 blocks carry `history` instead of `address` (inactive ones carry neither): the first
 * block of the file decides whether blocks have addresses, and where they do not, a block starts
 * where its predecessor ends, at `next_address`. */
static int read_block(struct reader *r, const struct pickle_value *v, uint64_t next_address,
                      struct block_info *out)
{
    if (as_dict(r, v) || field_u64(r, v, "size", false, &out->size) ||
        field_u64(r, v, "requested_size", true, &out->requested_size))
        return -1;
    int state = field_name(r, v, "state", block_states, sizeof block_states / sizeof block_states[0]);
    if (state < 0)
        return -1;
    out->state = (enum block_state)state;
    if (r->block_layout == BLOCKS_UNSEEN)
        r->block_layout = pickle_dict_get(v, "address") ? BLOCKS_WITH_ADDRESS : BLOCKS_WITHOUT_ADDRESS;
    if (r->block_layout == BLOCKS_WITHOUT_ADDRESS) {
        out->address = next_address;
        return block_state_live(out->state) ? read_history_site(r, v, out->address, &out->site) : 0;
    }
    return field_u64(r, v, "address", false, &out->address) || read_site(r, v, &out->site) ? -1 : 0;
}

static int read_blocks(struct reader *r, const struct pickle_value *seg, struct segment_info *out)
{
    const struct pickle_value *list = field_list(r, seg, "blocks");
    if (!list)
        return -1;
    size_t n = pickle_len(list);
    size_t in_blocks = path_enter_key(r, "blocks");
    int over = charge(r, n, "blocks");
    path_restore(r, in_blocks);
    if (over)
        return -1;
    out->blocks = n ? calloc(n, sizeof *out->blocks) : NULL;
    if (n && !out->blocks)
        return err_set(r->e, ERR_INTERNAL, "%s: out of memory for %zu blocks", r->name, n);
    out->nblocks = n;
    size_t saved = path_enter_key(r, "blocks");
    uint64_t next = out->address;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t in_list = path_enter_index(r, i);
        rc = read_block(r, pickle_item(list, i), next, &out->blocks[i]);
        path_restore(r, in_list);
        next = out->blocks[i].address + out->blocks[i].size;
    }
    path_restore(r, saved);
    return rc;
}

/* segment_pool_id, optional: a pair of ints (a tuple from Python; a list is accepted too). */
static int read_pool_id(struct reader *r, const struct pickle_value *seg, int64_t pool_id[2])
{
    const struct pickle_value *v = lookup(r, seg, "segment_pool_id", false);
    if (!v)
        return 0;
    size_t saved = path_enter_key(r, "segment_pool_id");
    int rc = 0;
    if ((pickle_type(v) != PICKLE_TUPLE && pickle_type(v) != PICKLE_LIST) || pickle_len(v) != 2)
        rc = err_set(r->e, ERR_INPUT, "%s: %s: expected a tuple of two ints, got a %s of length %zu", r->name,
                     where(r), pickle_type_name(pickle_type(v)), pickle_len(v));
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        size_t in_pair = path_enter_index(r, i);
        rc = as_i64(r, pickle_item(v, i), &pool_id[i]);
        path_restore(r, in_pair);
    }
    path_restore(r, saved);
    return rc;
}

/* The device of the segment at the current path, which must be a dict. */
static int segment_device(struct reader *r, const struct pickle_value *seg, int *device)
{
    int64_t d;
    if (as_dict(r, seg) || field_i64(r, seg, "device", false, &d))
        return -1;
    if (d < 0 || d > INT_MAX) {
        size_t saved = path_enter_key(r, "device");
        err_set(r->e, ERR_INPUT, "%s: %s: expected a device index, got %lld", r->name, where(r), (long long)d);
        path_restore(r, saved);
        return -1;
    }
    *device = (int)d;
    return 0;
}

static int read_segment(struct reader *r, const struct pickle_value *seg, struct segment_info *out)
{
    static const char *const segment_types[] = {"large", "small"};
    if (segment_device(r, seg, &out->device) || field_u64(r, seg, "address", false, &out->address) ||
        field_u64(r, seg, "total_size", false, &out->total_size) ||
        field_u64(r, seg, "allocated_size", false, &out->allocated_size) ||
        field_u64(r, seg, "active_size", false, &out->active_size) ||
        field_u64(r, seg, "requested_size", false, &out->requested_size) ||
        field_u64(r, seg, "stream", false, &out->stream) ||
        field_bool(r, seg, "is_expandable", true, &out->is_expandable) ||
        read_pool_id(r, seg, out->segment_pool_id) || read_site(r, seg, &out->site))
        return -1;
    int type = field_name(r, seg, "segment_type", segment_types, 2);
    if (type < 0)
        return -1;
    out->small = type == 1;
    return read_blocks(r, seg, out);
}

static int by_device_and_address(const void *a, const void *b)
{
    const struct segment_info *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->address < y->address ? -1 : x->address > y->address;
}

/* Reads every segment of the list at the current path, sorted by device, then address. */
static int read_segments(struct reader *r, const struct pickle_value *segs, struct snapshot *out)
{
    size_t n = pickle_len(segs);
    if (charge(r, n, "segments"))
        return -1;
    out->segments = n ? calloc(n, sizeof *out->segments) : NULL;
    if (n && !out->segments)
        return err_set(r->e, ERR_INTERNAL, "%s: out of memory for %zu segments", r->name, n);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t saved = path_enter_index(r, i);
        rc = read_segment(r, pickle_item(segs, i), &out->segments[out->nsegments++]);
        path_restore(r, saved);
    }
    if (out->nsegments > 1)
        qsort(out->segments, out->nsegments, sizeof *out->segments, by_device_and_address);
    return rc;
}

/* ---- trace events ---- */

static enum alloc_action action_of(const char *name)
{
    for (int a = 0; a < ACT_OTHER; a++)
        if (strcmp(name, alloc_action_name((enum alloc_action)a)) == 0)
            return (enum alloc_action)a;
    return ACT_OTHER;
}

/* An event's fields, read in one pass (there are tens of thousands of events). */
enum { EV_ACTION, EV_ADDR, EV_DEVICE_FREE, EV_SIZE, EV_STREAM, EV_FRAMES, EV_FIELDS };
static const char *const event_keys[EV_FIELDS] = {"action", "addr", "device_free", "size", "stream", "frames"};
static const size_t event_key_lens[EV_FIELDS] = {6, 4, 11, 4, 6, 6};

/* An event's action, addr (device_free), size and stream from its fields f. */
static int event_fields(struct reader *r, const struct pickle_value *const *f, struct alloc_trace_event *out)
{
    const char *action;
    if (value_str(r, f[EV_ACTION], "action", false, &action))
        return -1;
    out->action = action_of(action);
    bool optional = out->action == ACT_OTHER, oom = out->action == ACT_OOM;
    if (value_u64(r, f[oom ? EV_DEVICE_FREE : EV_ADDR], oom ? "device_free" : "addr", optional, &out->addr) ||
        value_u64(r, f[EV_SIZE], "size", optional, &out->size) ||
        value_u64(r, f[EV_STREAM], "stream", optional, &out->stream))
        return -1;
    return 0;
}

static int read_event(struct reader *r, const struct pickle_value *ev, struct alloc_trace_event *out, const char **site)
{
    const struct pickle_value *f[EV_FIELDS];
    size_t npairs;
    if (as_dict(r, ev))
        return -1;
    const struct pickle_value *const *pairs = pickle_dict_pairs(ev, &npairs);
    pick_fields(r->event_keys_seen, pairs, npairs, event_keys, event_key_lens, EV_FIELDS, f);
    return event_fields(r, f, out) || read_frames_site(r, f[EV_FRAMES], site) ? -1 : 0;
}

/* ---- events as the pickle is read (pickle_parse_streamed) ----
 * Any failure here only abandons the streamed parse: the whole one that follows gives the message. */

/* A frames list handed over as its items are appended: folded now, its visits charged with its event. */
static int stream_list(void *ctx, const struct pickle_value *const *items, size_t n, uintptr_t *token)
{
    struct reader *r = ctx;
    struct fold f;
    if (fold_items(r, items, n, &f.site, &f.visited) || vec_grow((void **)&r->folds, &r->folds_cap, r->nfolds + 1,
                                                                 sizeof *r->folds))
        return -1;
    r->folds[r->nfolds++] = f;
    *token = r->nfolds;
    return 0;
}

/* Event `index` complete: its fields, and its frames' site and visits (a streamed list's, or a list
 * the file shares with a segment or block, folded here). */
static int stream_event(void *ctx, size_t index, const struct pickle_value *const *pairs, size_t npairs)
{
    struct reader *r = ctx;
    const struct pickle_value *f[EV_FIELDS];
    if (index != r->nsevents ||
        vec_grow((void **)&r->sevents, &r->sevents_cap, index + 1, sizeof *r->sevents) ||
        vec_grow((void **)&r->sframes, &r->sframes_cap, index + 1, sizeof *r->sframes))
        return -1;
    pick_fields(r->event_keys_seen, pairs, npairs, event_keys, event_key_lens, EV_FIELDS, f);
    struct alloc_trace_event *ev = &r->sevents[index];
    struct streamed_frames *sf = &r->sframes[index];
    *ev = (struct alloc_trace_event){0};
    *sf = (struct streamed_frames){.frames = f[EV_FRAMES]};
    uintptr_t token;
    size_t n = 0;
    const struct pickle_value *const *items = sf->frames ? pickle_items(sf->frames, &n) : NULL;
    if (event_fields(r, f, ev))
        return -1;
    if (sf->frames && pickle_streamed_list(sf->frames, &token)) {
        if (token)
            *sf = (struct streamed_frames){sf->frames, r->folds[token - 1].site, r->folds[token - 1].visited};
    } else if (sf->frames && (pickle_type(sf->frames) != PICKLE_LIST ||
                              fold_items(r, items, n, &sf->site, &sf->visited))) {
        return -1;
    }
    r->nsevents++;
    return 0;
}

/* The streamed events into out (n of them, counted in the document), their visits charged as a whole
 * read would: a frames list repeated by the next event is not folded again. */
static int take_streamed_events(struct reader *r, size_t n, struct snapshot *out)
{
    if (n != r->nsevents || (n && !(out->event_sites = calloc(n, sizeof *out->event_sites))))
        return -1;
    out->events = r->sevents;
    out->nevents = n;
    r->sevents = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct streamed_frames *sf = &r->sframes[i];
        if (!sf->frames || sf->frames == r->last_frames) {
            out->event_sites[i] = sf->frames ? r->last_site : NULL;
            continue;
        }
        if (charge(r, sf->visited, "frames"))
            return -1;
        out->event_sites[i] = r->last_site = sf->site;
        r->last_frames = sf->frames;
    }
    return 0;
}

/* The number of events of all devices, checking each trace is a list. */
static int count_events(struct reader *r, const struct pickle_value *traces, size_t *n)
{
    int rc = 0;
    *n = 0;
    for (size_t d = 0; d < pickle_len(traces) && rc == 0; d++) {
        size_t in_list = path_enter_index(r, d);
        rc = as_list(r, pickle_item(traces, d));
        if (rc == 0 && d > INT_MAX && pickle_len(pickle_item(traces, d)))
            rc = err_set(r->e, ERR_INPUT, "%s: %s: a trace for a device index above %d", r->name, where(r), INT_MAX);
        path_restore(r, in_list);
        *n += pickle_len(pickle_item(traces, d));
    }
    return rc;
}

/* Reads every device's trace into out->events, in device order. */
static int read_events(struct reader *r, const struct pickle_value *traces, struct snapshot *out)
{
    size_t saved = path_enter_key(r, "device_traces"), n;
    int rc = count_events(r, traces, &n) || charge(r, n, "events");
    if (r->streamed) {
        path_restore(r, saved);
        return rc || take_streamed_events(r, n, out) ? -1 : 0;
    }
    if (rc == 0 && n && (!(out->events = calloc(n, sizeof *out->events)) ||
                         !(out->event_sites = calloc(n, sizeof *out->event_sites))))
        rc = err_set(r->e, ERR_INTERNAL, "%s: out of memory for %zu events", r->name, n);
    for (size_t d = 0; rc == 0 && d < pickle_len(traces); d++) {
        const struct pickle_value *list = pickle_item(traces, d);
        size_t in_traces = path_enter_index(r, d);
        for (size_t i = 0; rc == 0 && i < pickle_len(list); i++) {
            size_t in_list = path_enter_index(r, i);
            rc = read_event(r, pickle_item(list, i), &out->events[out->nevents], &out->event_sites[out->nevents]);
            out->nevents++;
            path_restore(r, in_list);
        }
        path_restore(r, in_traces);
    }
    path_restore(r, saved);
    return rc;
}

/* ---- allocator settings ---- */

static int read_settings(struct reader *r, const struct pickle_value *top, struct snapshot *out)
{
    const struct pickle_value *s = lookup(r, top, "allocator_settings", false);
    if (!s)
        return 0;
    size_t saved = path_enter_key(r, "allocator_settings");
    const char *conf = NULL;
    int rc = 0;
    if (as_dict(r, s) || field_bool(r, s, "expandable_segments", false, &out->expandable_segments) ||
        field_i64(r, s, "max_split_size", false, &out->max_split_size) ||
        field_float(r, s, "garbage_collection_threshold", false, &out->garbage_collection_threshold) ||
        field_str(r, s, "PYTORCH_CUDA_ALLOC_CONF", true, &conf))
        rc = -1;
    path_restore(r, saved);
    if (rc)
        return -1;
    out->has_settings = true;
    if (conf && !(out->alloc_conf = strdup(conf)))
        return err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
    return 0;
}

/* ---- devices ---- */

/* Each device with segments or a non-empty trace, by number, pointing into out->segments and out->events
 * (both in device order). */
static int build_devices(struct reader *r, const struct pickle_value *traces, struct snapshot *out)
{
    size_t ntraces = traces ? pickle_len(traces) : 0, seg = 0, trace = 0, event = 0;
    size_t cap = out->nsegments + ntraces;
    if (cap && !(out->devices = calloc(cap, sizeof *out->devices)))
        return out_of_memory(r);
    for (;;) {
        while (trace < ntraces && pickle_len(pickle_item(traces, trace)) == 0)
            trace++;
        bool segments = seg < out->nsegments, events = trace < ntraces;
        if (!segments && !events)
            return 0;
        int device = !events ? out->segments[seg].device
                     : segments && out->segments[seg].device < (int)trace ? out->segments[seg].device
                                                                          : (int)trace;
        struct snapshot_device *d = &out->devices[out->ndevices++];
        d->device = device;
        size_t first = seg;
        while (seg < out->nsegments && out->segments[seg].device == device)
            seg++;
        if (seg > first) {
            d->segments = out->segments + first;
            d->nsegments = seg - first;
        }
        if (events && (int)trace == device) {
            d->nevents = pickle_len(pickle_item(traces, trace++));
            d->events = out->events + event;
            d->event_sites = out->event_sites + event;
            event += d->nevents;
        }
    }
}

const struct snapshot_device *snapshot_device(const struct snapshot *s, int device)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].device == device)
            return &s->devices[i];
    return NULL;
}

/* ---- the whole file ---- */

/* The path of the segment list: "segments" in the dict formats, the top level in the list one. */
static size_t path_enter_segments(struct reader *r, bool in_dict)
{
    return in_dict ? path_enter_key(r, "segments") : r->depth;
}

static int read_snapshot(struct reader *r, const struct pickle_value *top, struct snapshot *out)
{
    const struct pickle_value *segs = top, *traces = NULL;
    if (pickle_type(top) == PICKLE_LIST) {
        out->format = SNAP_FORMAT_SEGMENT_LIST;
    } else if (pickle_type(top) == PICKLE_DICT) {
        out->format = SNAP_FORMAT_DICT;
        segs = field_list(r, top, "segments");
        traces = segs ? field_list(r, top, "device_traces") : NULL;
        if (!traces || read_settings(r, top, out))
            return -1;
    } else {
        return type_error(r, "a dict (from _dump_snapshot) or a list of segments", top);
    }
    size_t saved = path_enter_segments(r, traces != NULL);
    int rc = read_segments(r, segs, out);
    path_restore(r, saved);
    if (rc || (traces && read_events(r, traces, out)) || build_devices(r, traces, out))
        return -1;
    if (r->block_layout == BLOCKS_WITHOUT_ADDRESS && traces)
        out->format = SNAP_FORMAT_TORCH20;
    return 0;
}

static void reader_free(struct reader *r)
{
    struct frame_seen *f, *tmp;
    HASH_ITER(hh, r->frames, f, tmp) {
        HASH_DEL(r->frames, f);
        free(f);
    }
    free(r->sevents);
    free(r->sframes);
    free(r->folds);
}

int snapshot_parse_streamed(const char *name, const unsigned char *data, size_t len, struct snapshot *out)
{
    memset(out, 0, sizeof *out);
    out->max_split_size = -1;
    struct err ignored = {0};
    struct reader r = {.name = name, .e = &ignored, .input_bytes = len, .budget = len, .streamed = true};
    struct pickle_stream st = {.root_key = "device_traces", .list_key = "frames", .ctx = &r,
                               .on_list = stream_list, .on_record = stream_event};
    struct pickle_doc *doc = NULL;
    int rc = (out->sites = r.sites = site_table_create()) && pickle_parse_streamed(name, data, len, &st, &doc) == 0
                 ? read_snapshot(&r, pickle_root(doc), out)
                 : -1;
    reader_free(&r);
    pickle_free(doc);
    if (rc) {
        snapshot_free(out);
        out->max_split_size = -1;
    }
    return rc;
}

int snapshot_parse_whole(const char *name, const unsigned char *data, size_t len, struct snapshot *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    out->max_split_size = -1;
    struct pickle_doc *doc;
    if (pickle_parse(name, data, len, &doc, e))
        return -1;
    struct reader r = {.name = name, .e = e, .input_bytes = len, .budget = len};
    int rc = (out->sites = r.sites = site_table_create()) ? read_snapshot(&r, pickle_root(doc), out)
                                                          : out_of_memory(&r);
    reader_free(&r);
    pickle_free(doc);
    if (rc)
        snapshot_free(out);
    return rc;
}

int snapshot_parse(const char *name, const unsigned char *data, size_t len, struct snapshot *out, struct err *e)
{
    return snapshot_parse_streamed(name, data, len, out) == 0 ? 0 : snapshot_parse_whole(name, data, len, out, e);
}

static int too_large(const char *path, struct err *e)
{
    return err_set(e, ERR_INPUT, "%s: larger than %llu bytes (2 GiB), the largest snapshot oomlab reads", path,
                   (unsigned long long)SNAPSHOT_MAX_BYTES);
}

static int read_whole_file(const char *path, unsigned char **data, size_t *len, struct err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    /* a file that can seek says its size before it is read (<sys/stat.h> clashes with alloc/stats.h) */
    off_t size = fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : -1;
    if (size >= 0 && ((uint64_t)size > SNAPSHOT_MAX_BYTES || fseeko(f, 0, SEEK_SET) != 0)) {
        int saved = errno;
        fclose(f);
        return (uint64_t)size > SNAPSHOT_MAX_BYTES ? too_large(path, e)
                                                   : err_set(e, ERR_INPUT, "%s: cannot read: %s", path, strerror(saved));
    }
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || n > SNAPSHOT_MAX_BYTES)
            break;
        cap = 2 * cap < SNAPSHOT_MAX_BYTES + 1 ? 2 * cap : SNAPSHOT_MAX_BYTES + 1; /* one byte past: too large */
        unsigned char *grown = realloc(buf, cap);
        if (!grown)
            free(buf);
        buf = grown;
    }
    int failed = !buf || ferror(f);
    int saved = errno;
    fclose(f);
    if (!buf)
        return err_set(e, ERR_INTERNAL, "%s: out of memory reading the file", path);
    if (failed || n > SNAPSHOT_MAX_BYTES) {
        free(buf);
        return failed ? err_set(e, ERR_INPUT, "%s: cannot read: %s", path, strerror(saved)) : too_large(path, e);
    }
    *data = buf;
    *len = n;
    return 0;
}

int snapshot_load(const char *path, struct snapshot *out, struct err *e)
{
    unsigned char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    if (read_whole_file(path, &data, &len, e))
        return -1;
    int rc = snapshot_parse(path, data, len, out, e);
    free(data);
    return rc;
}

void snapshot_free(struct snapshot *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nsegments; i++)
        free(s->segments[i].blocks);
    free(s->segments);
    free(s->events);
    free(s->event_sites);
    free(s->devices);
    free(s->alloc_conf);
    site_table_free(s->sites);
    memset(s, 0, sizeof *s);
}
