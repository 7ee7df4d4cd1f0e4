/* timeline_test.c: the run timeline (run/timeline.h). Down-sampling keeps each point's maximum, so the
 * peak survives (worked numbers below, and a long sawtooth); points cover every op without gaps; where a
 * device reads kernel time only at boundaries, the kernels share it in op order; and for a small text
 * trace (timeline_run.h) the phase spans, the step, the OOM, the peaks and the segments at the reserved
 * peak are the run's. */
#include <string.h>

#include "tap.h"
#include "timeline_run.h"

static struct op alloc_op(void)
{
    return (struct op){.kind = OP_ALLOC, .name = "x"};
}

/* Feeds op n (n = 1..) with allocated a, reserved res at time s; param holds all but 1 byte of it. */
static void feed(struct timeline *t, struct op op, uint64_t a, uint64_t res, double s)
{
    uint64_t cat[CAT_COUNT] = {0};
    cat[CAT_PARAM] = a ? a - 1 : 0;
    cat[CAT_ACTIVATION] = a ? 1 : 0;
    timeline_record(t, &op, &(struct timeline_sample){s, a, res, cat});
}

/* Four points at most; ops 1..9 allocate 5 9 2 7 2 1 4 6 3 with reserved 8 8 12 12 12 12 12 10 10.
 * Op 4 doubles the ops per point to 2: {0,1} keeps 5 (op 1), {2,3} keeps 9 (op 2, the earlier half);
 * then {4,5} keeps 7 (op 4), {6,7} 4 (op 7). Op 8 doubles it to 4: {0-3} keeps 9 (op 2), {4-7} 7 (op 4,
 * the earlier half), and {8-9} 6 (op 8); reserved 12, 12, 10. */
static void worked_numbers(void)
{
    static const uint64_t a[] = {5, 9, 2, 7, 2, 1, 4, 6, 3}, res[] = {8, 8, 12, 12, 12, 12, 12, 10, 10};
    struct timeline *t = timeline_create(4);
    for (int i = 0; i < 9; i++)
        feed(t, alloc_op(), a[i], res[i], 0);
    timeline_end(t, &(struct timeline_sample){0, 3, 10, NULL});
    const struct timeline_view *v = timeline_view(t, &(struct err){0});
    is_int(v->npoints, 3, "9 ops in at most 4 points: 3 points of 4, 4 and 2 ops");
    static const uint64_t first[] = {0, 4, 8}, last[] = {3, 7, 9}, peak[] = {9, 7, 6}, at[] = {2, 4, 8},
                          reserved[] = {12, 12, 10};
    for (size_t i = 0; i < 3 && i < v->npoints; i++) {
        const struct timeline_point *p = &v->points[i];
        ok(p->first_op == first[i] && p->last_op == last[i], "point %zu covers ops %llu-%llu (got %llu-%llu)", i,
           (unsigned long long)first[i], (unsigned long long)last[i], (unsigned long long)p->first_op,
           (unsigned long long)p->last_op);
        ok(p->allocated == peak[i] && p->peak_op == at[i], "point %zu keeps its maximum %llu, at op %llu (got %llu at %llu)",
           i, (unsigned long long)peak[i], (unsigned long long)at[i], (unsigned long long)p->allocated,
           (unsigned long long)p->peak_op);
        is_u64(p->reserved, reserved[i], "point %zu keeps the highest reserved", i);
        ok(p->category[CAT_PARAM] == peak[i] - 1 && p->category[CAT_ACTIVATION] == 1,
           "point %zu: the categories of its maximum, summing to it", i);
    }
    is_u64(v->peak_allocated, 9, "the peak, 9, survives");
    is_u64(v->end_op, 9, "the run ends at op 9");
    timeline_destroy(t);
}

/* 100000 ops of a sawtooth (allocated = op mod 1000) with one spike at op 77777: at most 2048 points,
 * covering every op once, and the spike is a point's maximum. */
static void long_sawtooth(void)
{
    struct timeline *t = timeline_create(TIMELINE_POINTS);
    for (uint64_t n = 1; n <= 100000; n++)
        feed(t, alloc_op(), n == 77777 ? 5000 : n % 1000, 4096, 0);
    timeline_end(t, &(struct timeline_sample){0, 0, 4096, NULL});
    const struct timeline_view *v = timeline_view(t, &(struct err){0});
    ok(v->npoints <= TIMELINE_POINTS && v->npoints > TIMELINE_POINTS / 2, "100000 ops in %zu points (at most %d)",
       v->npoints, TIMELINE_POINTS);
    bool contiguous = v->points[0].first_op == 0 && v->points[v->npoints - 1].last_op == 100000;
    uint64_t top = 0, top_op = 0;
    for (size_t i = 0; i < v->npoints; i++) {
        if (i && v->points[i].first_op != v->points[i - 1].last_op + 1)
            contiguous = false;
        if (v->points[i].allocated > top)
            top = v->points[i].allocated, top_op = v->points[i].peak_op;
    }
    ok(contiguous, "the points cover ops 0-100000 without gaps or overlaps");
    ok(top == 5000 && top_op == 77777, "the spike survives: 5000 at op 77777 (got %llu at %llu)",
       (unsigned long long)top, (unsigned long long)top_op);
    timeline_destroy(t);
}

static struct op phase_op(const char *name)
{
    return (struct op){.kind = OP_PHASE, .name = name};
}

static struct op kernel_op(void)
{
    return (struct op){.kind = OP_KERNEL, .name = "m", .kernel = {.kernel = 0}};
}

static bool near(double got, double want)
{
    return got > want - 1e-12 && got < want + 1e-12;
}

/* forward: alloc, 3 kernels; backward: 2 kernels, each kernel 1 ms. A synchronous device's time grows
 * after each kernel; an asynchronous one's only at the backward PHASE op (3 ms) and at the end (5 ms).
 * Either way: kernels at [0,1] [1,2] [2,3] [3,4] [4,5] ms, forward 0-3 ms, backward 3-5 ms, and the
 * alloc before the first kernel at 0. */
static void kernel_time(const char *what, bool async)
{
    struct timeline *t = timeline_create(64);
    double now = 0;
    feed(t, phase_op("forward"), 0, 0, now);
    feed(t, alloc_op(), 1, 1, now);
    for (int i = 0; i < 3; i++)
        feed(t, kernel_op(), 1, 1, async ? now : (now += 0.001));
    feed(t, phase_op("backward"), 1, 1, now = 0.003);
    for (int i = 0; i < 2; i++)
        feed(t, kernel_op(), 1, 1, async ? now : (now += 0.001));
    timeline_end(t, &(struct timeline_sample){0.005, 1, 1, NULL});
    const struct timeline_view *v = timeline_view(t, &(struct err){0});
    bool laid_out = v->nkernels == 5;
    for (size_t i = 0; laid_out && i < 5; i++)
        laid_out = near(v->kernels[i].start_s, 0.001 * (double)i) && near(v->kernels[i].end_s, 0.001 * (double)(i + 1));
    ok(laid_out, "%s: five kernels of 1 ms back to back in op order", what);
    ok(v->nspans == 2 && near(v->spans[0].start_s, 0) && near(v->spans[0].end_s, 0.003) &&
           near(v->spans[1].start_s, 0.003) && near(v->spans[1].end_s, 0.005),
       "%s: forward 0-3 ms, backward 3-5 ms", what);
    ok(near(v->points[2].first_s, 0) && near(v->end_s, 0.005), "%s: the alloc at 0 ms, the run ends at 5 ms", what);
    timeline_destroy(t);
}

static const struct timeline_span *span(const struct timeline_view *v, size_t i)
{
    static const struct timeline_span none = {.name = "(none)"};
    return i < v->nspans ? &v->spans[i] : &none;
}

static void text_trace(void)
{
    struct timeline *tl;
    struct job_result r;
    ok(tiny_run(&tl, &r) == 0, "the small text trace runs");
    const struct timeline_view *v = timeline_view(tl, &(struct err){0});
    static const char *const names[] = {"load", "forward", "backward"};
    static const uint64_t first[] = {1, 4, 8}, last[] = {3, 7, 10};
    is_int(v->nspans, 3, "three phase spans");
    for (size_t i = 0; i < 3; i++)
        ok(!strcmp(span(v, i)->name, names[i]) && span(v, i)->first_op == first[i] && span(v, i)->last_op == last[i],
           "%s spans ops %llu-%llu (got %s %llu-%llu)", names[i], (unsigned long long)first[i],
           (unsigned long long)last[i], span(v, i)->name, (unsigned long long)span(v, i)->first_op,
           (unsigned long long)span(v, i)->last_op);
    ok(v->nsteps == 1 && v->steps[0].step == 1 && v->steps[0].op == 3, "step 1 begins at op 3");
    ok(v->nooms == 1 && v->ooms[0].op == 10 && !strcmp(v->ooms[0].phase, "backward") && v->ooms[0].step == 1 &&
           v->ooms[0].rounded == 48 * MiB,
       "the OOM: op 10, backward, step 1, 48 MiB");
    is_u64(v->end_op, 10, "the OOM's allocation is the last op");
    is_u64(v->peak_allocated, 28 * MiB, "peak allocated 28 MiB");
    is_u64(v->peak_allocated, r.run.peak_allocated, "... as the run says");
    is_u64(v->peak_reserved, r.run.peak_reserved, "peak reserved as the run says (36 MiB)");
    const struct timeline_point *last_point = &v->points[v->npoints - 1];
    ok(last_point->last_op == 10 && last_point->reserved == 20 * MiB,
       "after the OOM 20 MiB stay reserved (the free 16 MiB segment went back)");
    uint64_t sum = 0;
    for (size_t i = 0; i < v->npoints; i++)
        if (v->points[i].allocated == v->peak_allocated)
            for (int k = 0; k < CAT_COUNT; k++)
                sum += v->points[i].category[k];
    is_u64(sum, r.run.peak_allocated, "the categories at the peak sum to it");
    const struct timeline_segments *seg = v->segments;
    ok(seg->captured && seg->op == 5 && seg->reserved == 36 * MiB && seg->allocated == 24 * MiB,
       "segments captured at op 5, when reserved peaked: 36 MiB reserved, 24 MiB allocated");
    is_u64(seg->reserved - seg->allocated, r.run.unallocated_at_peak, "the run's unallocated-at-peak figure");
    ok(seg->snap.nsegments == 2 && seg->snap.segments[0].total_size == 20 * MiB &&
           seg->snap.segments[1].total_size == 16 * MiB,
       "two segments: 20 MiB and 16 MiB");
    timeline_destroy(tl);
}

int main(void)
{
    worked_numbers();
    long_sawtooth();
    kernel_time("synchronous", false);
    kernel_time("asynchronous", true);
    text_trace();
    return done_testing();
}
