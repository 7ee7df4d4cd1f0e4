/* holders.c: live bytes by holder, the largest at the peak and at the OOM, and leaks (see holders.h). */
#define _GNU_SOURCE /* strchrnul */
#include "run/holders.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/bump.h"
#include "util/hash.h"
#include "util/open_index.h"
#include "util/vec.h"

/* A folded tag: its holders so far, by phase and category: a folded tag (a layer's module) is met in a few
 * phases and categories, under as many raw tags as there are layers. */
struct folded {
    struct key_entry *keys; /* its holders (key_entry.next_of_fold) */
    size_t len;
    char text[]; /* the folded tag, under HOLDER_TAG_MAX bytes */
};

/* A holder: a folded tag in a phase and a category, and its live bytes. */
struct key_entry {
    struct folded *f;
    uint32_t phase_id;       /* into phases */
    uint8_t category;
    uint64_t bytes, count;   /* live block bytes and allocations */
    uint64_t bytes_at_step;  /* at the last step boundary */
    int grow_run;            /* consecutive step boundaries it grew at */
    int64_t since_step;
    uint64_t grown;
    struct key_entry *next_of_fold; /* the fold's next holder */
    struct key_entry *next;  /* every holder, in the order they were made */
    uint64_t peak_bytes, peak_count; /* bytes and count at the pending peak, if peak_epoch is its epoch */
    uint64_t peak_epoch;
};

/* A tag pointer met where names may change, by the text it read as (its first HOLDER_TAG_MAX - 1 bytes) and
 * that text's fold: a run's tags are mostly the same strings again, so this skips hashing and folding the
 * tag's text; the entry is used only if the pointer's text still matches (a caller may reuse a buffer). Where
 * the run's names are stable (run_tensor.stable_tag) the pointer is its text, and the fold is kept itself. */
struct raw_entry {
    struct folded *f;
    size_t len;
    char tag[]; /* len bytes and a NUL */
};
#define USES_MAX 65536 /* then the pointers are forgotten and met afresh: ever new ones keep memory bounded */

struct holders {
    struct run_observer base; /* first */
    struct key_entry *keys, **keys_end; /* every holder, in the order made; where the next goes */
    struct open_index folds;  /* by hash_bytes of the text: a run's few hundred folds, a small table */
    /* by open_index_hash_u64 of the tag pointer, the folds met under stable names, raw_entries otherwise */
    struct open_index uses;
    struct bump raw_mem;      /* the raw_entries: freed when USES_MAX pointers were met */
    size_t nuses;
    struct bump mem;          /* the holders and folded tags: freed with the holders */
    uint32_t phase_id;       /* the current phase's index in phases */
    char (*phases)[32];      /* the phase names seen, cut to 31 bytes */
    size_t nphases, phases_cap;
    int64_t step;
    uint64_t current, peak;
    bool rising;             /* a new peak not yet passed (the state at the next free is the peak's) */
    /* The peak passed at step peak_step, not captured (a capture at every peak passed walks every holder, and
     * most are passed again soon after): a holder changed since keeps its bytes at the peak, once per peak
     * passed (its peak_epoch is then epoch), and finishing captures the peak from those. */
    bool pending;
    int64_t peak_step;
    uint64_t epoch;          /* peaks passed */
    /* the last tensor's tag and category under stable names, and its holder in this phase (NULL: none, as
     * after a phase change) */
    const char *last_tag;
    uint8_t last_category;
    struct key_entry *last_key;
    bool failed;
    struct holders_result res;
};

/* The n bytes at s after the at bytes in buf, cut to len - 1 bytes in all, and a NUL: the length then. */
static size_t append(char *buf, size_t at, size_t len, const char *s, size_t n)
{
    n = n < len - 1 - at ? n : len - 1 - at;
    memcpy(buf + at, s, n);
    buf[at + n] = '\0';
    return at + n;
}

/* The whole folded tag cut to len - 1 bytes: the text before the first all-digit part, "*", the text after.
 * A tag is met once per pointer; strchrnul finds a part's end with no per-call setup (strcspn's was half the
 * cost of a fold). */
size_t holders_fold_tag(const char *tag, char *buf, size_t len)
{
    const char *part = tag, *end = NULL, *c; /* the first all-digit part: [part, end) */
    for (;;) {
        for (c = part; *c >= '0' && *c <= '9'; c++)
            ;
        if (c > part && (*c == '.' || *c == '\0')) {
            end = c;
            break;
        }
        c = strchrnul(c, '.'); /* not digits: on to the next part */
        if (*c == '\0')
            break;
        part = c + 1;
    }
    if (!end)
        return append(buf, 0, len, tag, (size_t)(c - tag));
    size_t at = append(buf, 0, len, tag, (size_t)(part - tag));
    buf[at] = '*';
    at += at < len - 1;
    return append(buf, at, len, end, strlen(end));
}

/* Largest first; ties by tag, then category, so views are deterministic. */
static int by_bytes(const struct key_entry *x, const struct key_entry *y)
{
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    int c = strcmp(x->f->text, y->f->text);
    return c ? c : (int)x->category - (int)y->category;
}

/* The largest holders now, as sorting every nonzero holder by by_bytes (a stable sort) and keeping the
 * first HOLDERS_TOP would: each enters after the ones that compare equal to it. It keeps pointers and
 * copies the holders kept once. */
static void capture(struct holders *hs, struct holders_view *v, uint64_t total, int64_t step)
{
    const struct key_entry *top[HOLDERS_TOP];
    size_t n = 0;
    for (const struct key_entry *k = hs->keys; k; k = k->next) {
        if (!k->bytes || (n == HOLDERS_TOP && by_bytes(k, top[n - 1]) >= 0))
            continue;
        size_t at = n < HOLDERS_TOP ? n++ : n - 1;
        for (; at > 0 && by_bytes(k, top[at - 1]) < 0; at--)
            top[at] = top[at - 1];
        top[at] = k;
    }
    *v = (struct holders_view){.total = total, .step = step, .seen = true, .n = n};
    for (size_t i = 0; i < n; i++) {
        struct holder *h = &v->top[i];
        memcpy(h->tag, top[i]->f->text, top[i]->f->len + 1);
        h->category = top[i]->category;
        memcpy(h->phase, hs->phases[top[i]->phase_id], sizeof h->phase);
        h->bytes = top[i]->bytes;
        h->count = top[i]->count;
    }
}

/* At a step boundary: which holders grew since the last one, and for how many boundaries in a row. */
static void step_boundary(struct holders *hs)
{
    for (struct key_entry *k = hs->keys; k; k = k->next) {
        if (k->bytes > k->bytes_at_step) {
            if (k->grow_run++ == 0) {
                k->since_step = hs->step;
                k->grown = 0;
            }
            k->grown += k->bytes - k->bytes_at_step;
        } else {
            k->grow_run = 0;
        }
        k->bytes_at_step = k->bytes;
    }
}

/* The current phase becomes name's (cut to 31 bytes), numbered in the order phases are first met. */
static void set_phase(struct holders *hs, const char *name)
{
    hs->last_key = NULL; /* a holder of the phase before */
    char cut[sizeof *hs->phases];
    snprintf(cut, sizeof cut, "%s", name);
    for (hs->phase_id = 0; hs->phase_id < hs->nphases; hs->phase_id++)
        if (!strcmp(hs->phases[hs->phase_id], cut))
            return;
    if (vec_grow((void **)&hs->phases, &hs->phases_cap, hs->nphases + 1, sizeof *hs->phases)) {
        hs->failed = true; /* the bytes go to the last phase known */
        hs->phase_id = hs->nphases - 1;
        return;
    }
    memcpy(hs->phases[hs->nphases++], cut, sizeof cut);
}

/* A phase or a step (before_kinds). */
static void before_op(struct run_observer *base, const struct op *op)
{
    struct holders *hs = (struct holders *)base;
    if (op->kind == OP_PHASE) {
        set_phase(hs, op->name ? op->name : "-");
    } else if (op->kind == OP_STEP) {
        if (hs->step > 0)
            step_boundary(hs);
        hs->step = (int64_t)op->id;
    }
}

/* Whether tag (not NULL) reads as raw's text: the same first HOLDER_TAG_MAX - 1 bytes, and ending where
 * raw's does if that is sooner. */
static bool same_text(const struct raw_entry *raw, const char *tag)
{
    return !strncmp(raw->tag, tag, raw->len < HOLDER_TAG_MAX - 1 ? raw->len + 1 : raw->len);
}

/* The fold of tag (NULL or empty: "-"), made if new; NULL without host memory. */
static struct folded *fold_of(struct holders *hs, const char *tag)
{
    char text[HOLDER_TAG_MAX];
    size_t len = holders_fold_tag(tag && tag[0] ? tag : "-", text, sizeof text); /* the whole tag, then cut */
    uint64_t hash = hash_bytes(text, len);
    ptrdiff_t slot = open_index_slot(&hs->folds, hash);
    if (slot < 0)
        return NULL;
    size_t at = (size_t)slot; /* the folds under hash, then the empty slot ending their run */
    for (struct folded *f; (f = hs->folds.slots[at].item);) {
        if (f->len == len && !memcmp(f->text, text, len))
            return f;
        at = open_index_seek(&hs->folds, hash, (at + 1) & hs->folds.mask);
    }
    struct folded *f = bump_alloc(&hs->mem, sizeof *f + len + 1);
    if (!f)
        return NULL;
    f->keys = NULL;
    f->len = len;
    memcpy(f->text, text, len + 1);
    open_index_put(&hs->folds, at, hash, f);
    return f;
}

/* A raw tag entry for tag's first n bytes, of fold f. */
static struct raw_entry *new_raw(struct holders *hs, struct folded *f, const char *tag, size_t n)
{
    struct raw_entry *raw = bump_alloc(&hs->raw_mem, sizeof *raw + n + 1);
    if (!raw)
        return NULL;
    raw->f = f;
    raw->len = n;
    if (n)
        memcpy(raw->tag, tag, n);
    raw->tag[n] = '\0';
    return raw;
}

/* A new holder of a folded tag, in this phase and category. */
static __attribute__((noinline)) struct key_entry *new_key(struct holders *hs, struct folded *f, uint8_t category)
{
    struct key_entry *k = bump_alloc(&hs->mem, sizeof *k);
    if (!k)
        return NULL;
    *k = (struct key_entry){.f = f, .phase_id = hs->phase_id, .category = category, .next_of_fold = f->keys};
    f->keys = k;
    *hs->keys_end = k;
    hs->keys_end = &k->next;
    return k;
}

/* The holder of a fold in this phase and category, made if new. */
static struct key_entry *key_of_fold(struct holders *hs, struct folded *f, uint8_t category)
{
    for (struct key_entry *k = f->keys; k; k = k->next_of_fold)
        if (k->phase_id == hs->phase_id && k->category == category)
            return k;
    return new_key(hs, f, category);
}

/* cached_key's slow path: tag's pointer is new (slot at of uses is the empty one ending its probe run), or
 * its text changed (at holds its entry). */
static __attribute__((noinline)) struct key_entry *key_of_new_tag(struct holders *hs, const char *tag, bool stable,
                                                                  uint8_t category, uint64_t hash, size_t at)
{
    if (hs->nuses == USES_MAX) {
        open_index_free(&hs->uses);
        bump_free_all(&hs->raw_mem);
        hs->nuses = 0;
        ptrdiff_t i = open_index_slot(&hs->uses, hash);
        if (i < 0)
            return NULL;
        at = (size_t)i;
    }
    struct folded *f = fold_of(hs, tag);
    void *use = f;
    if (f && !stable) /* a NULL tag reads as "" */
        use = new_raw(hs, f, tag ? tag : "", tag ? strnlen(tag, HOLDER_TAG_MAX - 1) : 0);
    if (!use)
        return NULL;
    if (hs->uses.slots[at].item)
        hs->uses.slots[at].item = use;
    else
        open_index_put(&hs->uses, at, hash, use);
    hs->nuses++;
    return key_of_fold(hs, f, category);
}

/* The holder of tag in this phase and category, made if new; stable: tag's pointer is its text (the run's
 * names are stable or not for all of it, so the uses hold folds or raw entries alike). */
static struct key_entry *cached_key(struct holders *hs, const char *tag, bool stable, uint8_t category)
{
    uint64_t hash = open_index_hash_u64((uint64_t)(uintptr_t)tag);
    ptrdiff_t at = open_index_slot(&hs->uses, hash); /* one probe finds the pointer or where it goes */
    if (at < 0)
        return NULL;
    void *use = hs->uses.slots[at].item;
    if (use && stable)
        return key_of_fold(hs, use, category);
    const struct raw_entry *raw = use;
    if (raw && (!tag || same_text(raw, tag)))
        return key_of_fold(hs, raw->f, category);
    return key_of_new_tag(hs, tag, stable, category, hash, (size_t)at);
}

/* Swaps the holders changed since the pending peak with their state at it (twice: back). */
static void swap_peak(struct holders *hs)
{
    for (struct key_entry *k = hs->keys; k; k = k->next) {
        if (k->peak_epoch != hs->epoch)
            continue;
        uint64_t bytes = k->bytes, count = k->count;
        k->bytes = k->peak_bytes;
        k->count = k->peak_count;
        k->peak_bytes = bytes;
        k->peak_count = count;
    }
}

/* Captures the pending peak: the holders as they were at it. */
static void capture_pending(struct holders *hs)
{
    if (!hs->pending)
        return;
    swap_peak(hs);
    capture(hs, &hs->res.at_peak, hs->peak, hs->peak_step);
    swap_peak(hs);
    hs->pending = false;
}

/* Before k changes while a peak is pending: its state at the peak, if not kept yet. */
static inline void note_change(struct holders *hs, struct key_entry *k)
{
    if (hs->pending && k->peak_epoch != hs->epoch) {
        k->peak_bytes = k->bytes;
        k->peak_count = k->count;
        k->peak_epoch = hs->epoch;
    }
}

/* A new live tensor to its holder, which it returns (NULL without host memory). */
static inline struct key_entry *add(struct holders *hs, const struct run_tensor *t)
{
    uint64_t bytes = t->bytes;
    struct key_entry *k = hs->last_key;
    /* a module allocates a few tensors in a row: under stable names, the last holder is mostly the one */
    if (!(k && t->tag == hs->last_tag && t->category == hs->last_category)) {
        if (!(k = cached_key(hs, t->tag, t->stable_tag, t->category))) {
            hs->failed = true;
            return NULL;
        }
        if (t->stable_tag) {
            hs->last_tag = t->tag;
            hs->last_category = t->category;
            hs->last_key = k;
        }
    }
    hs->current += bytes;
    if (hs->current > hs->peak) {
        hs->peak = hs->current;
        hs->rising = true;
        hs->pending = false; /* a higher peak */
    } else {
        note_change(hs, k);
    }
    k->bytes += bytes;
    k->count++;
    return k;
}

/* A block restored live at a recording's start: its holder is in the phase "before recording". Out of line
 * (restores are rare), so add inlines into on_tensor alone. */
static __attribute__((noinline)) struct key_entry *adopt(struct holders *hs, const struct run_tensor *t)
{
    uint32_t phase_id = hs->phase_id;
    set_phase(hs, "before recording");
    struct key_entry *k = add(hs, t);
    hs->phase_id = phase_id;
    hs->last_key = NULL; /* a holder of "before recording" */
    return k;
}

/* A live allocation of `bytes` leaves its holder k. */
static void release(struct holders *hs, struct key_entry *k, uint64_t bytes)
{
    if (hs->rising) { /* the peak was just before this free */
        hs->rising = false;
        hs->pending = true;
        hs->peak_step = hs->step;
        hs->epoch++;
    }
    note_change(hs, k);
    k->bytes -= bytes;
    k->count--;
    hs->current -= bytes;
}

/* The runner's live tensors: the note it keeps with each is the tensor's holder (NULL: host memory ran out). */
static void on_tensor(struct run_observer *base, const struct run_tensor *t, void **note, bool live)
{
    struct holders *hs = (struct holders *)base;
    if (live)
        *note = t->restored ? adopt(hs, t) : add(hs, t);
    else if (*note)
        release(hs, *note, t->bytes);
}

/* An allocation that OOMed: the holders at the first. */
static void on_oom(struct run_observer *base, const struct op *op)
{
    struct holders *hs = (struct holders *)base;
    if (!hs->res.at_oom.seen)
        capture(hs, &hs->res.at_oom, hs->current, hs->step);
}

struct holders *holders_create(void)
{
    struct holders *hs = calloc(1, sizeof *hs);
    if (hs) {
        hs->base = (struct run_observer){.on_tensor = on_tensor, .before_op = before_op, .on_oom = on_oom,
                                         .before_kinds = 1u << OP_PHASE | 1u << OP_STEP};
        hs->uses.packed = true; /* pointers hashed by open_index_hash_u64 */
        hs->keys_end = &hs->keys;
        set_phase(hs, "start");
        if (hs->failed) {
            free(hs);
            return NULL;
        }
    }
    return hs;
}

struct run_observer *holders_base(struct holders *h)
{
    return &h->base;
}

static int by_growth(const void *a, const void *b)
{
    const struct leak *x = a, *y = b;
    if (x->grown != y->grown)
        return x->grown < y->grown ? 1 : -1;
    return strcmp(x->tag, y->tag);
}

int holders_finish(struct holders *hs, struct holders_result *out)
{
    capture_pending(hs);
    if (hs->rising) {
        capture(hs, &hs->res.at_peak, hs->current, hs->step);
        hs->rising = false;
    }
    if (hs->step > 0)
        step_boundary(hs); /* the end of the last step */
    hs->res.nleaks = 0;
    for (const struct key_entry *k = hs->keys; k; k = k->next) {
        if (k->grow_run < 2) /* grew at two boundaries in a row at least: the first step's growth is setup */
            continue;
        struct leak l = {.category = k->category, .since_step = k->since_step, .grown = k->grown};
        memcpy(l.tag, k->f->text, k->f->len + 1);
        if (hs->res.nleaks < HOLDERS_TOP)
            hs->res.leaks[hs->res.nleaks++] = l;
        else if (l.grown > hs->res.leaks[HOLDERS_TOP - 1].grown)
            hs->res.leaks[HOLDERS_TOP - 1] = l;
        qsort(hs->res.leaks, hs->res.nleaks, sizeof hs->res.leaks[0], by_growth);
    }
    *out = hs->res;
    return hs->failed ? -1 : 0;
}

void holders_destroy(struct holders *hs)
{
    if (!hs)
        return;
    open_index_free(&hs->folds);
    free(hs->phases);
    open_index_free(&hs->uses);
    bump_free_all(&hs->raw_mem);
    bump_free_all(&hs->mem);
    free(hs);
}
