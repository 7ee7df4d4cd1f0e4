/* perfetto.c: a run's timeline as a Trace Event Format JSON trace (see perfetto.h). The events are
 * streamed, each built and escaped by jansson, so a run of a million kernels needs no document in memory. */
#include "report/perfetto.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"
#include "report/plot.h"
#include "util/output.h"
#include "util/size.h"

enum { PID = 1, TID_PHASES = 1, TID_KERNELS = 2 };

struct writer {
    FILE *f;
    bool timed; /* ts is kernel time; else one microsecond per op */
    bool first, failed;
    unsigned categories; /* the categories the counter carries */
};

static void emit(struct writer *w, json_t *ev)
{
    if (!ev) {
        w->failed = true;
        return;
    }
    fputs(w->first ? "\n" : ",\n", w->f);
    w->first = false;
    if (json_dumpf(ev, w->f, JSON_COMPACT))
        w->failed = true;
    json_decref(ev);
}

static double ts_of(const struct writer *w, double seconds, uint64_t op)
{
    return w->timed ? seconds * 1e6 : (double)op;
}

/* An event of the process; tid < 0: of no thread (a counter). */
static json_t *event(const char *ph, const char *name, int tid, double ts)
{
    json_t *ev = json_pack("{s:s, s:s, s:i, s:f}", "ph", ph, "name", name, "pid", PID, "ts", ts);
    if (ev && tid >= 0)
        json_object_set_new(ev, "tid", json_integer(tid));
    return ev;
}

static void metadata(struct writer *w, const char *what, int tid, const char *name)
{
    emit(w, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "ph", "M", "name", what, "pid", PID, "tid", tid, "args",
                      "name", name));
}

/* The points from *i with the same time, as one: the highest allocated (with its categories) and the
 * highest reserved among them; *i moves past them. */
static struct timeline_point merge_same_time(const struct writer *w, const struct timeline_view *v, size_t *i)
{
    struct timeline_point p = v->points[(*i)++];
    double ts = ts_of(w, p.peak_s, p.peak_op);
    for (; *i < v->npoints && ts_of(w, v->points[*i].peak_s, v->points[*i].peak_op) == ts; (*i)++) {
        const struct timeline_point *q = &v->points[*i];
        if (q->allocated > p.allocated) {
            p.allocated = q->allocated;
            memcpy(p.category, q->category, sizeof p.category);
        }
        if (q->reserved > p.reserved)
            p.reserved = q->reserved;
    }
    return p;
}

static void counters(struct writer *w, const struct timeline_point *p, double ts)
{
    json_t *ev = event("C", "allocated", -1, ts), *args = json_object();
    for (int k = 0; k < CAT_COUNT; k++)
        if (w->categories & 1u << k)
            json_object_set_new(args, category_name((enum category)k), json_integer((json_int_t)p->category[k]));
    json_object_set_new(ev, "args", args);
    emit(w, ev);
    ev = event("C", "reserved", -1, ts);
    json_object_set_new(ev, "args", json_pack("{s:I}", "bytes", (json_int_t)p->reserved));
    emit(w, ev);
}

static void span(struct writer *w, const struct timeline_view *v, const struct timeline_span *s)
{
    double ts = ts_of(w, s->start_s, s->first_op), end = ts_of(w, s->end_s, timeline_span_end_op(v, s));
    json_t *ev = event("X", s->name, TID_PHASES, ts);
    json_object_set_new(ev, "dur", json_real(end > ts ? end - ts : 0));
    json_object_set_new(ev, "args", json_pack("{s:I, s:I, s:I}", "step", (json_int_t)s->step, "first_op",
                                              (json_int_t)s->first_op, "last_op", (json_int_t)s->last_op));
    emit(w, ev);
}

static void kernel(struct writer *w, const struct timeline_kernel *k)
{
    const struct kernel_desc *d = kernel_get(k->kernel);
    double ts = ts_of(w, k->start_s, k->op - 1), end = ts_of(w, k->end_s, k->op);
    json_t *ev = event("X", d ? d->name : "kernel", TID_KERNELS, ts);
    json_object_set_new(ev, "dur", json_real(end > ts ? end - ts : 0));
    json_object_set_new(ev, "args", json_pack("{s:s, s:I}", "module", k->tag, "op", (json_int_t)k->op));
    emit(w, ev);
}

static void step(struct writer *w, const struct timeline_step *s)
{
    char name[48];
    snprintf(name, sizeof name, "step %lld", (long long)s->step);
    json_t *ev = event("i", name, TID_PHASES, ts_of(w, s->at_s, s->op));
    json_object_set_new(ev, "s", json_string("t"));
    emit(w, ev);
}

static void oom(struct writer *w, const struct timeline_oom *o)
{
    char size[32], name[96];
    size_format_pytorch(o->rounded, size, sizeof size);
    snprintf(name, sizeof name, "OOM: %s", size);
    json_t *ev = event("i", name, TID_PHASES, ts_of(w, o->at_s, o->op));
    json_object_set_new(ev, "s", json_string("g"));
    json_object_set_new(ev, "args", json_pack("{s:s, s:I, s:I, s:I}", "phase", o->phase, "step", (json_int_t)o->step,
                                              "bytes", (json_int_t)o->rounded, "op", (json_int_t)o->op));
    emit(w, ev);
}

/* Every event in time order: a merge of the sorted streams (ties: phases, steps, counters, kernels,
 * OOMs). */
static void events(struct writer *w, const struct timeline_view *v)
{
    size_t is = 0, it = 0, ip = 0, ik = 0, io = 0;
    for (;;) {
        double best = INFINITY;
        int which = -1;
#define CANDIDATE(cond, ts, id)          \
    if ((cond) && (ts) < best) {         \
        best = (ts);                     \
        which = (id);                    \
    }
        CANDIDATE(is < v->nspans, ts_of(w, v->spans[is].start_s, v->spans[is].first_op), 0)
        CANDIDATE(it < v->nsteps, ts_of(w, v->steps[it].at_s, v->steps[it].op), 1)
        CANDIDATE(ip < v->npoints, ts_of(w, v->points[ip].peak_s, v->points[ip].peak_op), 2)
        CANDIDATE(ik < v->nkernels, ts_of(w, v->kernels[ik].start_s, v->kernels[ik].op - 1), 3)
        CANDIDATE(io < v->nooms, ts_of(w, v->ooms[io].at_s, v->ooms[io].op), 4)
#undef CANDIDATE
        switch (which) {
        case 0: span(w, v, &v->spans[is++]); break;
        case 1: step(w, &v->steps[it++]); break;
        case 2: {
            struct timeline_point p = merge_same_time(w, v, &ip);
            counters(w, &p, best);
            break;
        }
        case 3: kernel(w, &v->kernels[ik++]); break;
        case 4: oom(w, &v->ooms[io++]); break;
        default: return;
        }
    }
}

static json_t *other_data(const struct writer *w, const struct timeline_view *v, const struct job_result *r)
{
    char title[512], clock[320];
    plot_run_heading(r, "memory and kernels", title, sizeof title);
    if (w->timed)
        snprintf(clock, sizeof clock, "kernel time, %s: %s", plot_run_kind(r), r->timed_by);
    else
        snprintf(clock, sizeof clock, "one microsecond per op (the run has no kernel time)");
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "oomlab", title, "device", r->device, "clock", clock,
                     "peak_allocated", (json_int_t)v->peak_allocated, "peak_reserved", (json_int_t)v->peak_reserved,
                     "kernels_omitted", (json_int_t)v->kernels_dropped, "phases_omitted",
                     (json_int_t)v->spans_dropped, "steps_omitted", (json_int_t)v->steps_dropped);
}

static int write_trace(FILE *f, const struct timeline_view *v, const struct job_result *r)
{
    struct writer w = {.f = f, .timed = v->end_s > 0, .first = true};
    for (size_t i = 0; i < v->npoints; i++)
        for (int k = 0; k < CAT_COUNT; k++)
            if (v->points[i].category[k])
                w.categories |= 1u << k;
    json_t *other = other_data(&w, v, r);
    if (!other)
        return -1;
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":", f);
    int rc = json_dumpf(other, f, JSON_COMPACT);
    json_decref(other);
    fputs(",\"traceEvents\":[", f);
    char title[512];
    plot_run_heading(r, "memory and kernels", title, sizeof title);
    metadata(&w, "process_name", 0, title);
    metadata(&w, "thread_name", TID_PHASES, "phases");
    metadata(&w, "thread_name", TID_KERNELS, "kernels");
    events(&w, v);
    fputs("\n]}\n", f);
    return rc || w.failed ? -1 : 0;
}

int perfetto_write(const char *path, struct timeline *t, const struct job_result *r, struct err *e)
{
    const struct timeline_view *v = timeline_view(t, e);
    if (!v)
        return -1;
    struct output af;
    if (output_open(&af, path, e))
        return -1;
    if (write_trace(af.f, v, r)) {
        output_abort(&af);
        return err_set(e, ERR_INTERNAL, "%s: cannot write the trace: out of host memory", path);
    }
    return output_commit(&af, e);
}
