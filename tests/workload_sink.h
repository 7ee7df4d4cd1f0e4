/* workload_sink.h: a test sink for the workload tests: tracks live ALLOC bytes per category, the
 * peak overall and per phase, live bytes at each PHASE/STEP op, and checks consistency (unique ids,
 * FREE of live ids only, KERNEL tensors live). */
#ifndef OOMLAB_TEST_WORKLOAD_SINK_H
#define OOMLAB_TEST_WORKLOAD_SINK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "program/program.h"

#define WS_SLOTS (1u << 22)
#define WS_MARKS 256

struct ws_entry {
    uint64_t id, bytes;
    uint8_t cat, used;
};

struct ws_mark {
    const char *name;
    int64_t live, cat[CAT_COUNT];
    int64_t peak_after; /* peak from this op until the next PHASE */
};

struct wsink {
    struct op_sink base;
    struct ws_entry *tab;
    int64_t live, peak, cat[CAT_COUNT];
    uint64_t ops, allocs, frees, kernels, bad_free, dup_id, dead_kernel_tensor;
    struct ws_mark marks[WS_MARKS];
    int nmarks;
    int64_t input_sizes[64];
    int ninput_sizes;
};

static struct ws_entry *ws_find(struct wsink *s, uint64_t id, int insert)
{
    uint64_t h = (id * 0x9E3779B97F4A7C15ULL) >> 42;
    for (;;) {
        struct ws_entry *e = &s->tab[h & (WS_SLOTS - 1)];
        if (e->used == 1 && e->id == id)
            return e;
        if (e->used == 0)
            return insert ? e : NULL;
        h++;
    }
}

static int ws_emit(struct op_sink *base, const struct op *op, struct err *e)
{
    struct wsink *s = (struct wsink *)base;
    (void)e;
    s->ops++;
    switch (op->kind) {
    case OP_ALLOC: {
        struct ws_entry *x = ws_find(s, op->id, 1);
        if (x->used == 1) {
            s->dup_id++;
            break;
        }
        x->used = 1;
        x->id = op->id;
        x->bytes = op->bytes;
        x->cat = op->category;
        s->allocs++;
        s->live += (int64_t)op->bytes;
        s->cat[op->category] += (int64_t)op->bytes;
        if (s->live > s->peak)
            s->peak = s->live;
        if (s->nmarks && s->live > s->marks[s->nmarks - 1].peak_after)
            s->marks[s->nmarks - 1].peak_after = s->live;
        if (op->category == CAT_INPUT && op->name && strcmp(op->name, "input_ids") == 0 && s->ninput_sizes < 64)
            s->input_sizes[s->ninput_sizes++] = (int64_t)op->bytes;
        break;
    }
    case OP_FREE: {
        struct ws_entry *x = ws_find(s, op->id, 0);
        if (!x) {
            s->bad_free++;
            break;
        }
        s->frees++;
        s->live -= (int64_t)x->bytes;
        s->cat[x->cat] -= (int64_t)x->bytes;
        x->used = 2; /* tombstone: ids are never reused */
        break;
    }
    case OP_KERNEL:
        s->kernels++;
        for (int i = 0; i < op->kernel.ntensors; i++)
            if (!ws_find(s, op->kernel.tensors[i], 0))
                s->dead_kernel_tensor++;
        break;
    case OP_PHASE:
    case OP_STEP:
    case OP_MARK:
        if (s->nmarks < WS_MARKS) {
            struct ws_mark *m = &s->marks[s->nmarks++];
            m->name = op->kind == OP_STEP ? "step" : op->name;
            m->live = s->live;
            m->peak_after = s->live;
            memcpy(m->cat, s->cat, sizeof m->cat);
        }
        break;
    default:
        break;
    }
    return 0;
}

static void ws_init(struct wsink *s)
{
    memset(s, 0, sizeof *s);
    s->base.emit = ws_emit;
    s->tab = calloc(WS_SLOTS, sizeof *s->tab);
}

static void ws_fini(struct wsink *s)
{
    free(s->tab);
}

/* The n-th (0-based) mark named `name`, or NULL. */
static const struct ws_mark *ws_mark(const struct wsink *s, const char *name, int n)
{
    for (int i = 0; i < s->nmarks; i++)
        if (strcmp(s->marks[i].name, name) == 0 && n-- == 0)
            return &s->marks[i];
    return NULL;
}

/* Highest live bytes from the n-th `name` mark to the next mark of any name. */
static int64_t ws_phase_peak(const struct wsink *s, const char *name, int n)
{
    const struct ws_mark *m = ws_mark(s, name, n);
    return m ? m->peak_after : -1;
}

static int ws_consistent(const struct wsink *s)
{
    return s->bad_free == 0 && s->dup_id == 0 && s->dead_kernel_tensor == 0;
}

#endif
