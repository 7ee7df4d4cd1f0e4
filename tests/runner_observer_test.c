/* runner_observer_test.c: what the runner's observers see. An observer that asks for some op kinds sees
 * only those (before_op and on_op each their own), one that asks for none sees every op; the on_tensor
 * observer hears of each tensor with a block becoming live and leaving (a FREE, an id allocated again
 * while live under lenient ids), not of zero-byte or managed ones, and finds its note word as it left it;
 * the on_oom observer hears of each allocation that OOMs. */
#include <string.h>

#include "device/device_kind.h"
#include "kernels.h"
#include "run/runner.h"
#include "sim_runner.h"
#include "tap.h"
#include "util/size.h"

struct watcher {
    struct run_observer base; /* first */
    char before[64], after[64]; /* one letter per op seen: its kind's first */
    char tensors[128];          /* "+id:bytes:tag" as tensors become live, "-id:note" as they leave */
    size_t nbefore, nafter;
};

static char letter(const struct op *op)
{
    return op_kind_name(op->kind)[0];
}

static void before_op(struct run_observer *o, const struct op *op)
{
    struct watcher *w = (struct watcher *)o;
    w->before[w->nbefore++] = letter(op);
}

static int on_op(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *block,
                 struct err *e)
{
    struct watcher *w = (struct watcher *)o;
    w->after[w->nafter++] = letter(op);
    return 0;
}

static void on_tensor(struct run_observer *o, const struct run_tensor *t, void **note, bool live)
{
    struct watcher *w = (struct watcher *)o;
    size_t n = strlen(w->tensors);
    static int notes[16];
    if (live) {
        snprintf(w->tensors + n, sizeof w->tensors - n, "+%llu:%llu:%s", (unsigned long long)t->id,
                 (unsigned long long)(t->bytes / MiB), t->tag ? t->tag : "-");
        *note = &notes[t->id % 16];
    } else {
        snprintf(w->tensors + n, sizeof w->tensors - n, "-%llu:%s", (unsigned long long)t->id,
                 *note == &notes[t->id % 16] ? "kept" : "lost");
    }
}

/* The ids of the FREE ops seen, in order. */
struct frees {
    struct run_observer base; /* first */
    uint64_t ids[8];
    size_t n;
};

static int on_free(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *block,
                   struct err *e)
{
    struct frees *f = (struct frees *)o;
    if (f->n < 8)
        f->ids[f->n++] = op->id;
    return 0;
}

static bool keep_none(void *user, uint64_t id, uint8_t category)
{
    return false;
}

/* runner_recover frees in allocation order: 6, 5, 3 (the live index holds them 5, 6, 3). */
static void recover_order(void)
{
    struct err e = {0};
    struct device *dev;
    struct runner *r = sim_runner("64MiB", &dev, &e);
    struct frees seen = {.base = {.on_op = on_free, .on_op_kinds = 1u << OP_FREE}};
    if (!ok(r && runner_add_observer(r, &seen.base) == 0, "a runner on a 64 MiB sim")) {
        diag("%s", e.msg);
        return;
    }
    struct op_sink *sink = runner_sink(r);
    static const uint64_t ids[] = {6, 5, 3};
    bool emitted = true;
    for (size_t i = 0; i < 3 && emitted; i++)
        emitted = sink->emit(sink, &(struct op){.kind = OP_ALLOC, .id = ids[i], .bytes = 8 * MiB, .name = "t"}, &e) == 0;
    struct op big = {.kind = OP_ALLOC, .id = 7, .bytes = 64 * MiB, .name = "big"};
    ok(emitted && sink->emit(sink, &big, &e) != 0 && runner_stopped_by_oom(r), "6, 5, 3 allocated, then an OOM");
    bool recovered = runner_recover(r, keep_none, NULL, &e) == 0;
    ok(recovered && seen.n == 3 && seen.ids[0] == 6 && seen.ids[1] == 5 && seen.ids[2] == 3,
       "recovered: freed in allocation order (%zu frees)", seen.n);
    runner_destroy(r);
    dev->ops->destroy(dev);
}

/* The allocations that OOMed, as on_oom hears of them. */
struct ooms {
    struct run_observer base; /* first */
    uint64_t ids[4];
    size_t n;
};

static void on_oom(struct run_observer *o, const struct op *op)
{
    struct ooms *w = (struct ooms *)o;
    if (w->n < 4)
        w->ids[w->n++] = op->id;
}

/* on_oom hears of each ALLOC that OOMs (the run going on after them), not of the ones that fit, nor of a
 * recorded OOM (OP_RECORDED_OOM) that OOMs again. */
static void oom_told(void)
{
    struct err e = {0};
    struct capacity cap;
    struct device *dev = capacity_parse("64MiB", &cap, &e) ? NULL
                         : device_open("sim", &(struct device_open_options){.capacity = cap}, &e);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *r = dev ? runner_create(dev, &cfg, &(struct runner_options){.continue_after_oom = true}) : NULL;
    struct ooms seen = {.base = {.on_oom = on_oom}};
    if (!ok(r && runner_add_observer(r, &seen.base) == 0, "a runner on a 64 MiB sim that goes on after OOMs")) {
        diag("%s", e.msg);
        return;
    }
    struct op ops[] = {{.kind = OP_ALLOC, .id = 1, .bytes = 8 * MiB, .name = "fits"},
                       {.kind = OP_ALLOC, .id = 2, .bytes = 128 * MiB, .name = "big"},
                       {.kind = OP_RECORDED_OOM, .bytes = 128 * MiB, .name = "recorded"},
                       {.kind = OP_ALLOC, .id = 3, .bytes = 8 * MiB, .name = "fits"},
                       {.kind = OP_ALLOC, .id = 4, .bytes = 96 * MiB, .name = "big"}};
    if (!ok(emit_ops(r, ops, sizeof ops / sizeof ops[0], &e), "five ops run"))
        diag("%s", e.msg);
    ok(runner_peek(r)->nooms == 3, "three OOMs in the run's result (%llu)", (unsigned long long)runner_peek(r)->nooms);
    ok(seen.n == 2 && seen.ids[0] == 2 && seen.ids[1] == 4, "on_oom: the allocations 2 and 4 (%zu told)", seen.n);
    runner_destroy(r);
    dev->ops->destroy(dev);
}

int main(void)
{
    struct err e = {0};
    struct device *dev = device_open("sim", &(struct device_open_options){0}, &e);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *r = dev ? runner_create(dev, &cfg, &(struct runner_options){.lenient_ids = true}) : NULL;
    struct watcher all = {.base = {.before_op = before_op, .on_op = on_op}};
    struct watcher some = {.base = {.before_op = before_op, .on_op = on_op, .on_tensor = on_tensor,
                                    .before_kinds = 1u << OP_PHASE | 1u << OP_STEP, .on_op_kinds = 1u << OP_ALLOC}};
    struct watcher second = {.base = {.on_tensor = on_tensor}};
    if (!ok(r && runner_add_observer(r, &all.base) == 0 && runner_add_observer(r, &some.base) == 0,
            "a runner on sim with two observers")) {
        diag("%s", e.msg);
        return done_testing();
    }
    ok(runner_add_observer(r, &second.base) == -1, "a second observer with on_tensor is refused");
    struct op ops[] = {{.kind = OP_STEP, .id = 1},
                       {.kind = OP_PHASE, .name = "forward"},
                       {.kind = OP_ALLOC, .id = 1, .bytes = 2 * MiB, .name = "a"},
                       {.kind = OP_ALLOC, .id = 2, .bytes = 0, .name = "empty"},
                       {.kind = OP_MANAGED_ALLOC, .id = 3, .bytes = MiB, .name = "paged"},
                       {.kind = OP_KERNEL, .kernel = {.kernel = K_FILL}},
                       {.kind = OP_ALLOC, .id = 1, .bytes = 3 * MiB, .name = "b"},
                       {.kind = OP_FREE, .id = 2},
                       {.kind = OP_FREE, .id = 3},
                       {.kind = OP_FREE, .id = 1}};
    if (!ok(emit_ops(r, ops, sizeof ops / sizeof ops[0], &e), "ten ops run"))
        diag("%s", e.msg);
    is_str(all.before, "spaamkafff", "no kinds asked: before_op sees every op");
    is_str(all.after, "spaamkafff", "  and on_op too");
    is_str(some.before, "sp", "before_kinds phase and step: before_op sees those only");
    is_str(some.after, "aaa", "on_op_kinds alloc: on_op sees the allocations only");
    is_str(some.tensors, "+1:2:a-1:kept+1:3:b-1:kept",
           "on_tensor: 1 live, freed by its allocation again, live again, freed; never the empty or managed ones");
    runner_destroy(r);
    /* alone, the observer that asks for some kinds: the kinds nobody asked for run without hooks */
    struct watcher alone = {.base = {.before_op = before_op, .on_op = on_op, .before_kinds = 1u << OP_PHASE,
                                     .on_op_kinds = 1u << OP_ALLOC}};
    r = runner_create(dev, &cfg, NULL);
    ok(r && runner_add_observer(r, &alone.base) == 0, "a runner with the one observer");
    struct op few[] = {{.kind = OP_PHASE, .name = "forward"},
                       {.kind = OP_ALLOC, .id = 1, .bytes = MiB, .name = "a"},
                       {.kind = OP_FREE, .id = 1}};
    ok(r && emit_ops(r, few, 3, &e) && !strcmp(alone.before, "p") && !strcmp(alone.after, "a"),
       "it sees the phase before and the allocation after, nothing of the free (%s, %s)", alone.before, alone.after);
    runner_destroy(r);
    dev->ops->destroy(dev);
    recover_order();
    oom_told();
    return done_testing();
}
