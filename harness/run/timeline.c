/* timeline.c: a run's memory over time, as a runner observer (see timeline.h). */
#include "run/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "util/vec.h"
#include "workload/strpool.h"

struct timeline {
    struct run_observer base; /* first */
    struct timeline_view v;
    struct timeline_point *points;
    size_t max_points;
    uint64_t width; /* ops per point: a point holds the ops n with the same n / width */
    struct timeline_span *spans;
    struct timeline_step *steps;
    struct timeline_oom *ooms;
    struct timeline_kernel *kernels;
    size_t spans_cap, steps_cap, ooms_cap, kernels_cap;
    struct timeline_segments seg;
    struct strpool *names;
    struct runner *runner; /* attached to (NULL: fed by timeline_record alone) */
    bool started;        /* the state before the first op is in point 0 */
    uint64_t ops;        /* ops recorded */
    double now_s;        /* the device's kernel time after the last op */
    uint64_t reading_op; /* the op after which that time last changed */
    uint64_t *pending;   /* the kernels' ops since then: a new reading's time is theirs */
    size_t npending, pending_cap;
    const char *phase;
    int64_t step;
    bool oom_pending;    /* an allocation failed and its op has not been recorded yet */
    bool failed;         /* out of host memory on the way */
};

static const char *intern(struct timeline *t, const char *s)
{
    const char *p = strpool_intern(t->names, s && s[0] ? s : "-");
    if (!p) {
        t->failed = true;
        return "-";
    }
    return p;
}

/* Room for one more of an array's elements, or false (then the element is counted as dropped). */
static bool room(struct timeline *t, void **p, size_t *cap, size_t n, size_t elem, size_t limit)
{
    if (n >= limit)
        return false;
    if (vec_grow(p, cap, n + 1, elem)) {
        t->failed = true;
        return false;
    }
    return true;
}

/* The time of op k in (a, b], between readings t0 (after op a) and t1 (after op b): the kernels in
 * between ran in op order and share the interval evenly. */
struct reading {
    uint64_t a, b;
    double t0, t1;
    const uint64_t *kernels; /* their ops, ascending */
    size_t n;
};

static double time_at(const struct reading *r, uint64_t k)
{
    if (k <= r->a)
        return r->t0;
    if (k >= r->b)
        return r->t1;
    if (!r->n)
        return r->t0;
    size_t lo = 0, hi = r->n; /* kernels at or before k */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->kernels[mid] <= k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return r->t0 + (r->t1 - r->t0) * (double)lo / (double)r->n;
}

/* *at becomes op k's time if k comes after the reading's start (earlier ops keep theirs). */
static void retime_one(const struct reading *r, uint64_t k, double *at)
{
    if (k > r->a)
        *at = time_at(r, k);
}

/* Everything recorded after op a gets its time from the reading. */
static void retime(struct timeline *t, const struct reading *r)
{
    for (size_t i = t->v.nkernels; i-- && t->kernels[i].op > r->a;) {
        t->kernels[i].start_s = time_at(r, t->kernels[i].op - 1);
        t->kernels[i].end_s = time_at(r, t->kernels[i].op);
    }
    for (size_t i = t->v.npoints; i-- && t->points[i].last_op > r->a;) {
        struct timeline_point *p = &t->points[i];
        retime_one(r, p->first_op, &p->first_s);
        retime_one(r, p->last_op, &p->last_s);
        retime_one(r, p->peak_op, &p->peak_s);
    }
    for (size_t i = t->v.nspans; i-- && t->spans[i].last_op >= r->a;) { /* an open span's last_op is UINT64_MAX */
        retime_one(r, t->spans[i].first_op, &t->spans[i].start_s);
        if (t->spans[i].last_op != UINT64_MAX) /* closed by the next PHASE op */
            retime_one(r, t->spans[i].last_op + 1, &t->spans[i].end_s);
    }
    for (size_t i = t->v.nsteps; i-- && t->steps[i].op > r->a;)
        t->steps[i].at_s = time_at(r, t->steps[i].op);
    for (size_t i = t->v.nooms; i-- && t->ooms[i].op > r->a;)
        t->ooms[i].at_s = time_at(r, t->ooms[i].op);
    if (t->seg.captured)
        retime_one(r, t->seg.op, &t->seg.at_s);
}

/* The device's kernel time changed after op n (its reading covers the ops since the last change). */
static void new_reading(struct timeline *t, uint64_t n, double seconds)
{
    struct reading r = {t->reading_op, n, t->now_s, seconds, t->pending, t->npending};
    t->now_s = seconds;
    retime(t, &r);
    t->reading_op = n;
    t->npending = 0;
}

static void take_sample(struct timeline_point *p, uint64_t n, double s, const struct timeline_sample *x)
{
    p->last_op = n;
    p->last_s = s;
    if (x->allocated > p->allocated || p->first_op == n) {
        p->allocated = x->allocated;
        p->peak_op = n;
        p->peak_s = s;
        for (int c = 0; c < CAT_COUNT; c++)
            p->category[c] = x->category ? x->category[c] : 0;
    }
    if (x->reserved > p->reserved)
        p->reserved = x->reserved;
}

/* Two neighbouring points become one, keeping the higher peak (the earlier one of equal peaks). */
static void merge_into(struct timeline_point *into, const struct timeline_point *p)
{
    into->last_op = p->last_op;
    into->last_s = p->last_s;
    if (p->allocated > into->allocated) {
        into->allocated = p->allocated;
        into->peak_op = p->peak_op;
        into->peak_s = p->peak_s;
        memcpy(into->category, p->category, sizeof into->category);
    }
    if (p->reserved > into->reserved)
        into->reserved = p->reserved;
}

/* Twice as many ops per point: neighbours that now share a point merge. */
static void coarsen(struct timeline *t)
{
    t->width *= 2;
    size_t j = 0;
    for (size_t i = 0; i < t->v.npoints; i++) {
        if (j && t->points[j - 1].first_op / t->width == t->points[i].first_op / t->width)
            merge_into(&t->points[j - 1], &t->points[i]);
        else
            t->points[j++] = t->points[i];
    }
    t->v.npoints = j;
}

static void add_sample(struct timeline *t, uint64_t n, const struct timeline_sample *x)
{
    for (;;) {
        struct timeline_point *last = t->v.npoints ? &t->points[t->v.npoints - 1] : NULL;
        if (last && last->first_op / t->width == n / t->width) {
            take_sample(last, n, t->now_s, x);
            break;
        }
        if (t->v.npoints < t->max_points) {
            struct timeline_point *p = &t->points[t->v.npoints++];
            *p = (struct timeline_point){.first_op = n, .first_s = t->now_s};
            take_sample(p, n, t->now_s, x);
            break;
        }
        coarsen(t);
    }
    if (x->allocated > t->v.peak_allocated)
        t->v.peak_allocated = x->allocated;
    if (x->reserved > t->v.peak_reserved)
        t->v.peak_reserved = x->reserved;
}

static void close_span(struct timeline *t, uint64_t last_op)
{
    if (t->v.nspans) {
        t->spans[t->v.nspans - 1].last_op = last_op;
        t->spans[t->v.nspans - 1].end_s = t->now_s;
    }
}

static void enter_phase(struct timeline *t, uint64_t n, const char *name)
{
    t->phase = intern(t, name);
    if (t->v.nspans && t->spans[t->v.nspans - 1].last_op == UINT64_MAX)
        close_span(t, n - 1);
    if (!room(t, (void **)&t->spans, &t->spans_cap, t->v.nspans, sizeof *t->spans, TIMELINE_MAX_MARKS)) {
        t->v.spans_dropped++;
        return;
    }
    t->spans[t->v.nspans++] = (struct timeline_span){t->phase, t->step, n, UINT64_MAX, t->now_s, t->now_s};
}

static void add_kernel(struct timeline *t, uint64_t n, const struct op *op, double start_s)
{
    if (vec_grow((void **)&t->pending, &t->pending_cap, t->npending + 1, sizeof *t->pending))
        t->failed = true;
    else
        t->pending[t->npending++] = n;
    if (!room(t, (void **)&t->kernels, &t->kernels_cap, t->v.nkernels, sizeof *t->kernels, TIMELINE_MAX_KERNELS)) {
        t->v.kernels_dropped++;
        return;
    }
    t->kernels[t->v.nkernels++] = (struct timeline_kernel){op->kernel.kernel, intern(t, op->name), n, start_s, t->now_s};
}

void timeline_record(struct timeline *t, const struct op *op, const struct timeline_sample *x)
{
    uint64_t n = ++t->ops;
    double before = t->now_s;
    t->oom_pending = false;
    if (op->kind == OP_KERNEL)
        add_kernel(t, n, op, before);
    if (x->seconds != t->now_s)
        new_reading(t, n, x->seconds);
    switch (op->kind) {
    case OP_PHASE: enter_phase(t, n, op->name); break;
    case OP_STEP:
        t->step = (int64_t)op->id;
        if (room(t, (void **)&t->steps, &t->steps_cap, t->v.nsteps, sizeof *t->steps, TIMELINE_MAX_MARKS))
            t->steps[t->v.nsteps++] = (struct timeline_step){t->step, n, t->now_s};
        else
            t->v.steps_dropped++;
        break;
    default: break;
    }
    add_sample(t, n, x);
}

static void on_alloc_event(struct run_observer *base, const struct alloc_trace_event *ev)
{
    struct timeline *t = (struct timeline *)base;
    if (ev->action != ACT_OOM)
        return;
    t->oom_pending = true;
    if (!room(t, (void **)&t->ooms, &t->ooms_cap, t->v.nooms, sizeof *t->ooms, TIMELINE_MAX_MARKS)) {
        t->v.ooms_dropped++;
        return;
    }
    t->ooms[t->v.nooms++] = (struct timeline_oom){t->ops + 1, t->now_s, t->phase, t->step, ev->size};
}

static void sample_of(struct runner *r, struct timeline_sample *x)
{
    const struct alloc_stats *s = allocator_stats(runner_allocator(r));
    *x = (struct timeline_sample){
        .seconds = runner_kernel_seconds(r),
        .allocated = (uint64_t)s->allocated_bytes[STAT_ALL].current,
        .reserved = (uint64_t)s->reserved_bytes[STAT_ALL].current,
        .category = runner_category_live(r),
    };
}

/* The segments now, as the reserved peak's. */
static int capture_segments(struct timeline *t, struct runner *r, const struct timeline_sample *x)
{
    alloc_snapshot_free(&t->seg.snap);
    t->seg = (struct timeline_segments){.op = t->ops, .at_s = t->now_s, .phase = t->phase, .step = t->step,
                                        .allocated = x->allocated, .reserved = x->reserved};
    if (allocator_snapshot(runner_allocator(r), &t->seg.snap)) {
        t->failed = true;
        return -1;
    }
    t->seg.captured = true;
    return 0;
}

/* Op 0 is the state before the first op: empty, or what a replay rebuilt at trace start. */
static int record_start(struct timeline *t)
{
    t->started = true;
    struct timeline_sample x;
    sample_of(t->runner, &x);
    take_sample(&t->points[0], 0, 0, &x);
    t->v.peak_allocated = x.allocated;
    t->v.peak_reserved = x.reserved;
    return x.reserved ? capture_segments(t, t->runner, &x) : 0;
}

static void before_op(struct run_observer *base, const struct op *op)
{
    struct timeline *t = (struct timeline *)base;
    if (!t->started)
        record_start(t); /* out of host memory: t->failed says so */
}

static int on_op(struct run_observer *base, struct runner *r, const struct op *op, const struct alloc_block *block,
                 struct err *e)
{
    struct timeline *t = (struct timeline *)base;
    struct timeline_sample x;
    sample_of(r, &x);
    bool new_peak = x.reserved > t->v.peak_reserved;
    timeline_record(t, op, &x);
    if (new_peak && capture_segments(t, r, &x))
        return err_set(e, ERR_INTERNAL, "out of host memory capturing the segments at the reserved peak");
    return 0;
}

void timeline_end(struct timeline *t, const struct timeline_sample *x)
{
    if (t->oom_pending) { /* the failed allocation ended the run: it is the last op */
        t->oom_pending = false;
        add_sample(t, ++t->ops, x);
    }
    if (x->seconds != t->now_s)
        new_reading(t, t->ops, x->seconds);
    if (t->v.nspans && t->spans[t->v.nspans - 1].last_op == UINT64_MAX)
        close_span(t, t->ops);
    t->v.end_op = t->ops;
    t->v.end_s = t->now_s;
}

void timeline_finish(struct timeline *t)
{
    if (!t->started)
        record_start(t);
    struct timeline_sample x;
    sample_of(t->runner, &x);
    timeline_end(t, &x);
}

struct timeline *timeline_create(size_t max_points)
{
    struct timeline *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->base = (struct run_observer){.before_op = before_op, .on_alloc_event = on_alloc_event, .on_op = on_op};
    t->max_points = max_points < 2 ? 2 : max_points;
    t->width = 1;
    t->points = calloc(t->max_points, sizeof *t->points);
    t->names = strpool_create();
    if (!t->points || !t->names) {
        timeline_destroy(t);
        return NULL;
    }
    t->phase = intern(t, "start");
    t->v.npoints = 1; /* op 0: nothing allocated yet */
    return t;
}

int timeline_attach(struct timeline *t, struct runner *r)
{
    t->runner = r;
    return runner_add_observer(r, &t->base);
}

const struct timeline_view *timeline_view(struct timeline *t, struct err *e)
{
    if (t->failed) {
        err_set(e, ERR_INTERNAL, "out of host memory recording the run's timeline");
        return NULL;
    }
    t->v.points = t->points; /* the arrays may have moved since the last view */
    t->v.spans = t->spans;
    t->v.steps = t->steps;
    t->v.ooms = t->ooms;
    t->v.kernels = t->kernels;
    t->v.segments = &t->seg;
    return &t->v;
}

uint64_t timeline_span_end_op(const struct timeline_view *v, const struct timeline_span *s)
{
    return s->last_op < v->end_op ? s->last_op + 1 : v->end_op;
}

void timeline_destroy(struct timeline *t)
{
    if (!t)
        return;
    alloc_snapshot_free(&t->seg.snap);
    strpool_destroy(t->names);
    free(t->points);
    free(t->spans);
    free(t->steps);
    free(t->ooms);
    free(t->kernels);
    free(t->pending);
    free(t);
}
