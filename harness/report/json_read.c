/* json_read.c: a scenario job of a results document back into a job_result (see json_read.h). Keys are
 * the writer's (json_report.c, docs/results-schema.md); json_unpack_ex checks each one's type. */
#include "report/json_read.h"

#include <string.h>

#include "program/program.h"

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

static int unpack_error(const json_error_t *je, const char *what, struct err *e)
{
    return err_set(e, ERR_INPUT, "%s: %s", what, je->text);
}

/* Fails unless a is an array of at most max elements (the fixed arrays of a job_result). */
static int bounded_array(const json_t *a, size_t max, const char *what, struct err *e)
{
    if (!json_is_array(a) || json_array_size(a) > max)
        return err_set(e, ERR_INPUT, "%s: not an array of at most %zu", what, max);
    return 0;
}

static int read_categories(const json_t *o, uint64_t *bytes, const char *what, struct err *e)
{
    for (int c = 0; c < CAT_COUNT; c++) {
        const json_t *v = json_object_get(o, category_name((enum category)c));
        if (!json_is_integer(v))
            return err_set(e, ERR_INPUT, "%s: no integer '%s'", what, category_name((enum category)c));
        bytes[c] = (uint64_t)json_integer_value(v);
    }
    return 0;
}

static int read_stats(const json_t *o, struct alloc_stats *s, struct err *e)
{
    const char *key;
    const json_t *v;
    if (!json_is_object(o))
        return err_set(e, ERR_INPUT, "stats: not an object");
    json_object_foreach((json_t *)o, key, v)
        if (!json_is_integer(v) || alloc_stats_set(s, key, json_integer_value(v)))
            return err_set(e, ERR_INPUT, "stats: '%s' is not a memory_stats key with an integer", key);
    return 0;
}

static int read_oom(const json_t *o, struct run_oom *oom, struct err *e)
{
    json_error_t je;
    const char *phase, *tag, *category, *message;
    json_int_t where, step, bytes;
    json_t *live;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:I, s:s, s:I, s:s, s:s, s:I, s:o, s:s}", "where", &where, "phase",
                       &phase, "step", &step, "tag", &tag, "category", &category, "bytes", &bytes,
                       "breakdown_at_oom", &live, "message", &message))
        return unpack_error(&je, "oom", e);
    int cat = category_from_name(category);
    if (cat < 0)
        return err_set(e, ERR_INPUT, "oom: unknown category '%s'", category);
    *oom = (struct run_oom){.happened = true, .where = (uint64_t)where, .step = step, .category = cat,
                            .bytes = (uint64_t)bytes};
    COPY(oom->phase, phase);
    COPY(oom->tag, tag);
    COPY(oom->message, message);
    return read_categories(live, oom->category_live, "oom.breakdown_at_oom", e);
}

static int read_phases(const json_t *a, struct run_result *run, struct err *e)
{
    size_t i;
    const json_t *p;
    if (bounded_array(a, RUN_MAX_PHASES, "phases", e))
        return -1;
    json_array_foreach(a, i, p) {
        struct phase_peak *ph = &run->phases[i];
        json_error_t je;
        const char *name;
        json_int_t pa, pr, pas, prs, delta;
        if (json_unpack_ex((json_t *)p, &je, 0, "{s:s, s:I, s:I, s:I, s:I, s:F, s:I}", "phase", &name,
                           "peak_allocated", &pa, "peak_reserved", &pr, "peak_allocated_step", &pas,
                           "peak_reserved_step", &prs, "kernel_seconds", &ph->seconds, "device_used_delta", &delta))
            return unpack_error(&je, "phases", e);
        COPY(ph->name, name);
        ph->peak_allocated = (uint64_t)pa, ph->peak_reserved = (uint64_t)pr;
        ph->peak_allocated_step = pas, ph->peak_reserved_step = prs, ph->device_used_delta = delta;
    }
    run->nphases = json_array_size(a);
    return 0;
}

static int read_points(const json_t *a, struct run_result *run, struct err *e)
{
    size_t i;
    const json_t *p;
    if (bounded_array(a, RUN_MAX_POINTS, "points", e))
        return -1;
    json_array_foreach(a, i, p) {
        struct run_point *pt = &run->points[i];
        json_error_t je;
        const char *phase;
        json_int_t step, allocated, reserved;
        json_t *cats;
        if (json_unpack_ex((json_t *)p, &je, 0, "{s:s, s:I, s:I, s:I, s:o}", "phase", &phase, "step", &step,
                           "allocated", &allocated, "reserved", &reserved, "categories", &cats))
            return unpack_error(&je, "points", e);
        COPY(pt->phase, phase);
        pt->step = step, pt->allocated = (uint64_t)allocated, pt->reserved = (uint64_t)reserved;
        if (read_categories(cats, pt->category, "points.categories", e))
            return -1;
    }
    run->npoints = json_array_size(a);
    return 0;
}

static int read_events(const json_t *o, struct run_result *run, struct err *e)
{
    json_error_t je;
    json_int_t nooms, nwarnings, unknown;
    json_t *ooms, *warnings;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:I, s:o, s:I, s:o, s:I}", "ooms", &nooms, "first_ooms", &ooms,
                       "warnings", &nwarnings, "first_warnings", &warnings, "frees_of_unknown", &unknown))
        return unpack_error(&je, "events", e);
    if (bounded_array(ooms, RUN_MAX_OOMS, "events.first_ooms", e) ||
        bounded_array(warnings, RUN_MAX_WARNINGS, "events.first_warnings", e))
        return -1;
    run->nooms = (uint64_t)nooms, run->nwarnings = (uint64_t)nwarnings, run->frees_of_unknown = (uint64_t)unknown;
    size_t i;
    const json_t *v;
    json_array_foreach(ooms, i, v)
        if (read_oom(v, &run->ooms[i], e))
            return err_prefix(e, "events.first_ooms: ");
    json_array_foreach(warnings, i, v) {
        if (!json_is_string(v))
            return err_set(e, ERR_INPUT, "events.first_warnings: not a string");
        COPY(run->warnings[i], json_string_value(v));
    }
    return 0;
}

static int read_holders_view(const json_t *o, struct holders_view *h, const char *what, struct err *e)
{
    *h = (struct holders_view){0};
    if (json_is_null(o))
        return 0;
    json_error_t je;
    json_int_t step, total;
    json_t *top;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:I, s:I, s:o}", "step", &step, "allocated", &total, "top", &top))
        return unpack_error(&je, what, e);
    if (bounded_array(top, HOLDERS_TOP, what, e))
        return -1;
    h->seen = true, h->step = step, h->total = (uint64_t)total, h->n = json_array_size(top);
    size_t i;
    const json_t *v;
    json_array_foreach(top, i, v) {
        const char *tag, *category, *phase;
        json_int_t bytes, count;
        if (json_unpack_ex((json_t *)v, &je, 0, "{s:s, s:s, s:s, s:I, s:I}", "holder", &tag, "category", &category,
                           "phase", &phase, "bytes", &bytes, "count", &count))
            return unpack_error(&je, what, e);
        int cat = category_from_name(category);
        if (cat < 0)
            return err_set(e, ERR_INPUT, "%s: unknown category '%s'", what, category);
        COPY(h->top[i].tag, tag);
        COPY(h->top[i].phase, phase);
        h->top[i].category = (uint8_t)cat, h->top[i].bytes = (uint64_t)bytes, h->top[i].count = (uint64_t)count;
    }
    return 0;
}

static int read_holders(const json_t *o, struct holders_result *h, struct err *e)
{
    json_error_t je;
    json_t *at_peak, *at_oom, *leaks;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:o, s:o, s:o}", "at_peak", &at_peak, "at_oom", &at_oom, "leaks",
                       &leaks))
        return unpack_error(&je, "holders", e);
    if (read_holders_view(at_peak, &h->at_peak, "holders.at_peak", e) ||
        read_holders_view(at_oom, &h->at_oom, "holders.at_oom", e))
        return -1;
    if (bounded_array(leaks, HOLDERS_TOP, "holders.leaks", e))
        return -1;
    size_t i;
    const json_t *v;
    json_array_foreach(leaks, i, v) {
        const char *tag, *category;
        json_int_t since, grown;
        if (json_unpack_ex((json_t *)v, &je, 0, "{s:s, s:s, s:I, s:I}", "holder", &tag, "category", &category,
                           "since_step", &since, "grown", &grown))
            return unpack_error(&je, "holders.leaks", e);
        int cat = category_from_name(category);
        if (cat < 0)
            return err_set(e, ERR_INPUT, "holders.leaks: unknown category '%s'", category);
        COPY(h->leaks[i].tag, tag);
        h->leaks[i].category = (uint8_t)cat, h->leaks[i].since_step = since, h->leaks[i].grown = (uint64_t)grown;
    }
    h->nleaks = json_array_size(leaks);
    return 0;
}

static int read_throughput(const json_t *o, struct job_result *r, struct err *e)
{
    json_error_t je;
    const char *figures, *timed_by;
    json_int_t steps;
    struct run_result *run = &r->run;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:F, s:F, s:F, s:F, s:{s:I, s:F, s:F, s:F}, s:s, s:s}", "steps_per_s",
                       &r->steps_per_s, "samples_per_s", &r->samples_per_s, "train_seconds", &r->train_seconds,
                       "train_flops", &r->train_flops, "step_seconds", "steps", &steps, "median",
                       &run->step_seconds_median, "min", &run->step_seconds_min, "max", &run->step_seconds_max,
                       "figures", &figures, "timed_by", &timed_by))
        return unpack_error(&je, "throughput", e);
    run->steps_timed = steps;
    COPY(r->timed_by, timed_by);
    if (run->measured &&
        json_unpack_ex((json_t *)o, &je, 0, "{s:{s:F, s:F, s:F}, s:F}", "step_wall_seconds", "median",
                       &run->step_wall_seconds_median, "min", &run->step_wall_seconds_min, "max",
                       &run->step_wall_seconds_max, "wall_seconds", &run->wall_seconds))
        return unpack_error(&je, "throughput", e);
    return 0;
}

static int read_assumptions(const json_t *o, struct job_result *r, struct err *e)
{
    if ((r->has_assumptions = !json_is_null(o)) == false)
        return 0;
    struct job_assumptions *a = &r->assumptions;
    json_error_t je;
    const char *attention, *activation, *precision, *optimizer, *routing = "";
    int use_cache, scratch;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:s, s:s, s:s, s:s, s:i, s:b, s:b, s?:s}", "attention", &attention,
                       "activation", &activation, "precision", &precision, "optimizer", &optimizer, "steps", &a->steps,
                       "use_cache", &use_cache, "kernel_scratch", &scratch, "routing", &routing))
        return unpack_error(&je, "assumptions", e);
    COPY(a->attention, attention);
    COPY(a->activation, activation);
    COPY(a->precision, precision);
    COPY(a->optimizer, optimizer);
    COPY(a->routing, routing);
    a->use_cache = use_cache, a->kernel_scratch = scratch;
    return 0;
}

static int read_expect(const json_t *o, struct job_result *r, struct err *e)
{
    if ((r->has_expect = !json_is_null(o)) == false)
        return 0;
    json_error_t je;
    const char *why;
    int oom, ok;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:b, s:b, s:s}", "oom", &oom, "ok", &ok, "why", &why))
        return unpack_error(&je, "expect", e);
    r->expect_oom = oom, r->expect_ok = ok;
    COPY(r->expect_why, why);
    return 0;
}

/* job.robust's attempts; the figures derived from them are computed again, not read. */
static int read_robust(const json_t *o, struct robust_result *rb, bool measured, struct err *e)
{
    if (json_is_null(o))
        return 0;
    json_error_t je;
    json_t *attempts, *batch, *accum, *fit;
    int settled;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:o, s:b, s:o, s:o, s:o}", "attempts", &attempts, "settled", &settled,
                       "batch_size", &batch, "grad_accum", &accum, "fit_batch_size", &fit))
        return unpack_error(&je, "robust", e);
    if (bounded_array(attempts, ROBUST_MAX_ATTEMPTS, "robust.attempts", e))
        return -1;
    *rb = (struct robust_result){.on = true, .settled = settled, .measured = measured,
                                 .batch = (int)json_integer_value(batch), .grad_accum = (int)json_integer_value(accum),
                                 .fit_known = json_is_integer(fit), .fit_batch = (int)json_integer_value(fit)};
    size_t i;
    json_t *a;
    json_array_foreach(attempts, i, a) {
        struct robust_attempt *t = &rb->attempts[rb->nattempts++];
        const char *device, *phase, *tag;
        int oom;
        json_int_t step, done, samples, freed, after;
        if (json_unpack_ex(a, &je, 0, "{s:s, s:i, s:i, s:b, s:s, s:I, s:s, s:I, s:I, s:f, s:I, s:I}", "device",
                           &device, "batch_size", &t->batch, "grad_accum", &t->grad_accum, "oom", &oom, "phase", &phase,
                           "step", &step, "tag", &tag, "steps_done", &done, "samples", &samples, "kernel_seconds",
                           &t->seconds, "freed", &freed, "reserved_after", &after))
            return unpack_error(&je, "robust.attempts", e);
        t->oom = oom;
        t->step = step, t->steps_done = done;
        t->samples = (uint64_t)samples, t->freed = (uint64_t)freed, t->reserved_after = (uint64_t)after;
        COPY(t->device, device);
        COPY(t->phase, phase);
        COPY(t->tag, tag);
    }
    return 0;
}

/* Paged optimizer state in unified memory, outside the caching allocator. */
static int read_unified(const json_t *o, struct run_result *run, struct err *e)
{
    json_error_t je;
    json_int_t peak, on_host;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:I, s:I}", "peak_resident", &peak, "on_host", &on_host))
        return unpack_error(&je, "unified_memory", e);
    run->managed_peak = (uint64_t)peak, run->managed_on_host = (uint64_t)on_host;
    return 0;
}

static int read_nccl(const json_t *o, struct job_result *r, struct err *e)
{
    if (!o)
        return 0;
    json_error_t je;
    json_int_t bytes;
    const char *figures;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:I, s:i, s:s}", "bytes", &bytes, "channels",
                       &r->assumptions.nccl_channels, "figures", &figures))
        return unpack_error(&je, "nccl_buffers", e);
    r->assumptions.nccl_bytes = (int64_t)bytes;
    return 0;
}

static int read_job(const json_t *job, struct job_result *r, struct err *e)
{
    json_error_t je;
    const char *name, *fixes, *alloc_conf, *device, *detail, *figures, *ap, *rp;
    json_int_t total, unalloc, as, rs, pa, pr;
    json_t *stats, *breakdown, *phases, *points, *assumptions, *oom, *events, *holders, *throughput, *expect;
    if (json_unpack_ex((json_t *)job, &je, 0,
                       "{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:s, s:o, s:I, s:o, s:{s:I, s:I, s:s, s:I, s:I, s:s}, "
                       "s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                       "name", &name, "fixes", &fixes, "alloc_conf", &alloc_conf, "device", &device, "device_detail",
                       &detail, "device_total", &total, "steps_planned", &r->steps_planned, "figures", &figures,
                       "stats", &stats, "unallocated_at_peak_reserved", &unalloc, "breakdown_at_peak_allocated",
                       &breakdown, "peaks", "allocated", &pa, "allocated_step", &as, "allocated_phase", &ap,
                       "reserved", &pr, "reserved_step", &rs, "reserved_phase", &rp, "phases", &phases, "points",
                       &points, "assumptions", &assumptions, "oom", &oom, "events", &events, "holders", &holders,
                       "throughput", &throughput, "expect", &expect))
        return unpack_error(&je, "job", e);
    COPY(r->name, name);
    COPY(r->fixes, fixes);
    COPY(r->alloc_conf, alloc_conf);
    COPY(r->device, device);
    COPY(r->device_detail, detail);
    r->device_total = (uint64_t)total;
    struct run_result *run = &r->run;
    run->measured = !strcmp(figures, "measured");
    run->unallocated_at_peak = (uint64_t)unalloc;
    run->peak_allocated = (uint64_t)pa, run->peak_reserved = (uint64_t)pr;
    run->peak_allocated_step = as, run->peak_reserved_step = rs;
    COPY(run->peak_allocated_phase, ap);
    COPY(run->peak_reserved_phase, rp);
    if (read_stats(stats, &run->stats, e) || read_categories(breakdown, run->category_at_peak, "breakdown", e) ||
        read_phases(phases, run, e) || read_points(points, run, e) || read_assumptions(assumptions, r, e) ||
        (!json_is_null(oom) && read_oom(oom, &run->oom, e)) || read_events(events, run, e) ||
        read_holders(holders, &r->holders, e) || read_throughput(throughput, r, e) || read_expect(expect, r, e) ||
        read_robust(json_object_get(job, "robust"), &r->robust, run->measured, e) ||
        read_unified(json_object_get(job, "unified_memory"), run, e) ||
        read_nccl(json_object_get(job, "nccl_buffers"), r, e))
        return -1;
    return 0;
}

int job_result_from_json(const json_t *job, struct job_result *r, struct err *e)
{
    *r = (struct job_result){0};
    if (read_job(job, r, e)) {
        const char *name = json_string_value(json_object_get(job, "name"));
        return err_prefix(e, "job %s: ", name ? name : "?");
    }
    return 0;
}
