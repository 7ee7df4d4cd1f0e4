/* live_sink.c: the live-bytes sink (see live_sink.h): an open-addressing table of live tensor ids
 * that grows as needed, with tombstones so a FREE of an id never allocated is caught. */
#include "workload/live_sink.h"

#include <stdlib.h>
#include <string.h>

struct live_entry {
    uint64_t id, bytes;
    uint8_t cat, state; /* 0 empty, 1 live, 2 freed */
};

static struct live_entry *slot(struct live_entry *tab, uint64_t n, uint64_t id, int insert)
{
    uint64_t h = id * 0x9E3779B97F4A7C15ULL;
    for (;; h++) {
        struct live_entry *x = &tab[h & (n - 1)];
        if (x->state && x->id == id)
            return x;
        if (!x->state)
            return insert ? x : NULL;
    }
}

static int grow(struct live_sink *s)
{
    uint64_t n = s->nslots * 2;
    struct live_entry *t = calloc(n, sizeof *t);
    if (!t)
        return -1;
    for (uint64_t i = 0; i < s->nslots; i++)
        if (s->tab[i].state)
            *slot(t, n, s->tab[i].id, 1) = s->tab[i];
    free(s->tab);
    s->tab = t;
    s->nslots = n;
    return 0;
}

static void mark(struct live_sink *s, const char *name)
{
    if (s->nmarks >= LIVE_SINK_MARKS)
        return;
    struct live_mark *m = &s->marks[s->nmarks++];
    m->name = name ? name : "?";
    m->live = m->peak_after = s->live;
    memcpy(m->cat, s->cat, sizeof m->cat);
}

static int emit(struct op_sink *base, const struct op *op, struct err *e)
{
    struct live_sink *s = (struct live_sink *)base;
    s->ops++;
    switch (op->kind) {
    case OP_ALLOC:
    case OP_MANAGED_ALLOC: {
        if (2 * (s->nused + 1) > s->nslots && grow(s) < 0)
            return err_set(e, ERR_INTERNAL, "live sink: out of host memory");
        struct live_entry *x = slot(s->tab, s->nslots, op->id, 1);
        if (x->state) {
            s->dup_id++;
            break;
        }
        *x = (struct live_entry){op->id, op->bytes, op->category, 1};
        s->nused++;
        s->allocs++;
        s->live += (int64_t)op->bytes;
        s->cat[op->category] += (int64_t)op->bytes;
        if (s->live > s->peak)
            s->peak = s->live;
        if (s->nmarks && s->live > s->marks[s->nmarks - 1].peak_after)
            s->marks[s->nmarks - 1].peak_after = s->live;
        break;
    }
    case OP_FREE: {
        struct live_entry *x = slot(s->tab, s->nslots, op->id, 0);
        if (!x || x->state != 1) {
            s->bad_free++;
            break;
        }
        x->state = 2;
        s->frees++;
        s->live -= (int64_t)x->bytes;
        s->cat[x->cat] -= (int64_t)x->bytes;
        break;
    }
    case OP_KERNEL:
        s->kernels++;
        for (int i = 0; i < op->kernel.ntensors; i++) {
            struct live_entry *x = slot(s->tab, s->nslots, op->kernel.tensors[i], 0);
            if (!x || x->state != 1)
                s->dead_kernel_tensor++;
        }
        break;
    case OP_PHASE:
    case OP_MARK:
        mark(s, op->name);
        break;
    case OP_STEP:
        mark(s, "step");
        break;
    default: /* allocator-only ops: nothing live changes */
        break;
    }
    return 0;
}

int live_sink_init(struct live_sink *s, struct err *e)
{
    memset(s, 0, sizeof *s);
    s->base.emit = emit;
    s->nslots = 1u << 16;
    s->tab = calloc(s->nslots, sizeof *s->tab);
    if (!s->tab)
        return err_set(e, ERR_INTERNAL, "live sink: out of host memory");
    return 0;
}

void live_sink_fini(struct live_sink *s)
{
    free(s->tab);
    s->tab = NULL;
}

const struct live_mark *live_sink_mark(const struct live_sink *s, const char *name, int n)
{
    for (int i = 0; i < s->nmarks; i++)
        if (strcmp(s->marks[i].name, name) == 0 && n-- == 0)
            return &s->marks[i];
    return NULL;
}

int live_sink_consistent(const struct live_sink *s)
{
    return s->bad_free == 0 && s->dup_id == 0 && s->dead_kernel_tensor == 0;
}
