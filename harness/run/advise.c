/* advise.c: fixes and settings tried, proven and ranked (see advise.h). */
#include "run/advise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/profiles.h"
#include "replay/replay.h"
#include "workload/switches.h"

#define COMBINED_MAX 4 /* fixes in one combination */

/* Better first: what fits; then modelled samples/s; then the lowest peak reserved; then fewer fixes. */
static int rank(const struct job_result *a, uint32_t fa, const struct job_result *b, uint32_t fb)
{
    bool fits_a = !a->run.oom.happened, fits_b = !b->run.oom.happened;
    if (fits_a != fits_b)
        return fits_a ? -1 : 1;
    if (fits_a && a->samples_per_s != b->samples_per_s)
        return a->samples_per_s > b->samples_per_s ? -1 : 1;
    if (a->run.peak_reserved != b->run.peak_reserved)
        return a->run.peak_reserved < b->run.peak_reserved ? -1 : 1;
    return __builtin_popcount(fa) - __builtin_popcount(fb);
}

static int by_rank(const void *x, const void *y)
{
    const struct advice_entry *a = x, *b = y;
    return rank(&a->run, a->fixes, &b->run, b->fixes);
}

static bool same_figures(const struct job_result *a, const struct job_result *b)
{
    return a->run.oom.happened == b->run.oom.happened && a->run.peak_allocated == b->run.peak_allocated &&
           a->run.peak_reserved == b->run.peak_reserved && a->samples_per_s == b->samples_per_s;
}

static bool tried(const struct advice *out, uint32_t fixes)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->entries[i].fixes == fixes)
            return true;
    return false;
}

/* Runs the base variant with `fixes` added; 1 if it ran, 0 if the job refuses them, -1 on an error. */
static int try_fixes(const struct scenario *sc, const struct variant *base, uint32_t fixes,
                     const struct harness_options *opt, struct advice *out, struct err *e)
{
    if (out->n == ADVICE_MAX || tried(out, fixes))
        return 0;
    struct variant v = *base;
    v.job.fixes |= fixes;
    v.expect = (struct expectation){0};
    struct err why = {0};
    if (job_spec_validate(&v.job, &why) || switches_edit_alloc(&v.job, &v.alloc, &why))
        return 0; /* a combination the job's own rules refuse is not advice */
    struct advice_entry *a = &out->entries[out->n];
    *a = (struct advice_entry){.fixes = fixes};
    if (harness_run_variant(sc, &v, NULL, opt, &a->run, e))
        return -1;
    a->same_as_base = same_figures(&a->run, &out->base);
    out->n++;
    return 1;
}

/* Adding to `with` the candidate fix that ranks best, as long as it keeps improving. */
static int greedy(const struct scenario *sc, const struct variant *base, uint32_t candidates, uint32_t with,
                  const struct harness_options *opt, struct advice *out, struct err *e)
{
    const struct job_result *cur = NULL;
    for (size_t i = 0; i < out->n; i++)
        if (out->entries[i].fixes == with)
            cur = &out->entries[i].run;
    while (cur && __builtin_popcount(with) < COMBINED_MAX) {
        const struct advice_entry *best = NULL;
        for (int f = 0; f < FIX_COUNT; f++) {
            if (!(candidates >> f & 1) || (with >> f & 1))
                continue;
            int rc = try_fixes(sc, base, with | 1u << f, opt, out, e);
            if (rc < 0)
                return -1;
            for (size_t i = 0; i < out->n; i++)
                if (out->entries[i].fixes == (with | 1u << f) &&
                    (!best || rank(&out->entries[i].run, 0, &best->run, 0) < 0))
                    best = &out->entries[i];
        }
        if (!best || rank(&best->run, 0, cur, 0) >= 0)
            break;
        with = best->fixes;
        cur = &best->run;
    }
    return 0;
}

int advise_scenario(const struct scenario *sc, const struct harness_options *opt, struct advice *out, struct err *e)
{
    *out = (struct advice){0};
    const struct variant *base = NULL;
    for (size_t i = 0; i < sc->nvariants && !base; i++)
        if (!strcmp(sc->variants[i].name, "before"))
            base = &sc->variants[i];
    if (!base && !(base = sc->nvariants ? &sc->variants[0] : NULL))
        return err_set(e, ERR_INPUT, "%s has no variant to advise on", sc->path);
    if (harness_run_variant(sc, base, NULL, opt, &out->base, e))
        return -1;
    int count;
    const struct switch_info *fixes = fix_table(&count);
    /* helpful: better alone; unjudged: alone the same as the base, which ran out of memory before the fix
     * could act (gradient checkpointing when the load OOMs): worth trying on top of a helpful one */
    uint32_t helpful = 0, unjudged = 0;
    for (int f = 0; f < count; f++) {
        if (base->job.fixes >> fixes[f].id & 1)
            continue;
        int rc = try_fixes(sc, base, 1u << fixes[f].id, opt, out, e);
        if (rc < 0)
            return -1;
        if (rc == 0)
            continue;
        struct advice_entry *a = &out->entries[out->n - 1];
        a->inert = fixes[f].inert ? fixes[f].inert(&base->job) : NULL;
        if (!a->same_as_base && rank(&a->run, 0, &out->base, 0) < 0)
            helpful |= 1u << fixes[f].id;
        else if (a->same_as_base && out->base.run.oom.happened && !a->inert)
            unjudged |= 1u << fixes[f].id;
    }
    qsort(out->entries, out->n, sizeof out->entries[0], by_rank);
    uint32_t top[4] = {0};
    size_t ntop = 0;
    for (size_t i = 0; i < out->n && ntop < 4; i++)
        if (helpful & out->entries[i].fixes)
            top[ntop++] = out->entries[i].fixes;
    for (size_t i = 0; i < ntop; i++) /* pairs of the best four, then greedy growth from the best */
        for (size_t k = i + 1; k < ntop; k++)
            if (try_fixes(sc, base, top[i] | top[k], opt, out, e) < 0)
                return -1;
    if (ntop && greedy(sc, base, helpful | unjudged, top[0], opt, out, e))
        return -1;
    qsort(out->entries, out->n, sizeof out->entries[0], by_rank);
    return 0;
}

/* The allocator settings a snapshot is tried under, beside the ones it recorded. */
static const struct {
    const char *settings;
    const char *inert; /* why it can change nothing, when it does */
} trace_settings[] = {
    {"expandable_segments:True", NULL},
    {"max_split_size_mb:128", NULL},
    {"max_split_size_mb:512", NULL},
    {"expandable_segments:True,max_split_size_mb:512", NULL},
    {"roundup_power2_divisions:4", NULL},
    {"garbage_collection_threshold:0.6", "the collector runs only under a per-process memory fraction"},
    {"garbage_collection_threshold:0.6,per_process_memory_fraction:0.99", NULL},
};

#define CAPACITY_STEP (2ULL << 20) /* the bisection's resolution: the allocator's smallest segment */

static uint64_t usable(const struct gpu_profile *p)
{
    return p->total_bytes - p->context_bytes;
}

/* The GPU profiles, smallest usable memory first (malloc'd; NULL when out of memory). */
static const struct gpu_profile **profiles_by_usable(void)
{
    size_t n = gpu_profile_count();
    const struct gpu_profile **order = malloc(n * sizeof *order);
    for (size_t i = 0; order && i < n; i++) { /* insertion sort: a handful of profiles */
        size_t k = i;
        const struct gpu_profile *p = gpu_profile_at(i);
        for (; k && usable(order[k - 1]) > usable(p); k--)
            order[k] = order[k - 1];
        order[k] = p;
    }
    return order;
}

/* The trace advised on: a file, and which device of a snapshot. */
struct trace_target {
    const char *path;
    int cuda_device; /* -1: the file's only device */
};

/* Replays one device of the trace into *out; a file with several devices needs one named. */
static int replay_one(const struct trace_target *t, struct replay_options *opt, struct job_result *out,
                      struct err *e)
{
    opt->one_device = t->cuda_device >= 0;
    opt->cuda_device = t->cuda_device;
    struct job_result *jobs = NULL;
    size_t n = 0;
    if (replay_path(t->path, opt, &jobs, &n, e))
        return -1;
    int rc = 0;
    if (n == 1)
        *out = jobs[0];
    else
        rc = err_set(e, ERR_INPUT, "%s holds %zu devices with allocations: give --cuda-device N to advise on one",
                     t->path, n);
    free(jobs);
    return rc;
}

/* Whether the trace replays under `settings` on a device of `capacity` bytes without an OOM. */
static int survives(const struct trace_target *t, const char *settings, const char *device, uint64_t capacity,
                    struct job_result *scratch, bool *ok, struct err *e)
{
    struct replay_options opt = {.device = device, .capacity = {capacity, 0.0}, .alloc_conf = settings,
                                 .stop_at_oom = true};
    if (replay_one(t, &opt, scratch, e))
        return -1;
    *ok = !scratch->run.nooms;
    return 0;
}

/* The smallest capacity (to CAPACITY_STEP) the trace replays on without an OOM, by bisection between
 * its peak allocated or what its start holds (it cannot need less) and its peak reserved with room to spare (it holds there):
 * the allocator frees its cache only under pressure, so the least it needs can sit well below what it
 * reserves when never pressed. Then the smallest GPU profile that holds that much, proven by a run on
 * it (and the next larger ones, should the allocator behave otherwise on a card). */
static int smallest_fit(const struct trace_target *t, const char *settings, const struct job_result *wide,
                        struct advice_entry *a, struct err *e)
{
    struct job_result *r = malloc(sizeof *r);
    if (!r)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    uint64_t floor = wide->run.peak_allocated > wide->replay.start_reserved ? wide->run.peak_allocated
                                                                             : wide->replay.start_reserved;
    uint64_t lo = (floor + CAPACITY_STEP - 1) / CAPACITY_STEP, hi = wide->replay.needed / CAPACITY_STEP + 1;
    int rc = 0;
    while (rc == 0 && lo < hi) { /* the answer is in [lo, hi] steps, hi known to hold */
        uint64_t mid = lo + (hi - lo) / 2;
        bool ok = false;
        rc = survives(t, settings, "sim", mid * CAPACITY_STEP, r, &ok, e);
        if (ok)
            hi = mid;
        else
            lo = mid + 1;
    }
    a->least_capacity = hi * CAPACITY_STEP;
    a->smallest_card[0] = 0;
    const struct gpu_profile **by_usable = profiles_by_usable();
    if (!by_usable)
        rc = err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; rc == 0 && i < gpu_profile_count() && !a->smallest_card[0]; i++) {
        const struct gpu_profile *p = by_usable[i];
        bool ok = false;
        if (usable(p) < a->least_capacity)
            continue;
        char device[64];
        snprintf(device, sizeof device, "sim:%s", p->name);
        rc = survives(t, settings, device, 0, r, &ok, e);
        if (ok)
            snprintf(a->smallest_card, sizeof a->smallest_card, "%s", p->name);
    }
    free(by_usable);
    free(r);
    return rc;
}

static int try_settings(const struct trace_target *t, const char *settings, const char *inert, struct advice *out,
                        struct err *e)
{
    struct advice_entry *a = &out->entries[out->n];
    *a = (struct advice_entry){.inert = inert};
    snprintf(a->settings, sizeof a->settings, "%s", settings ? settings : "");
    struct replay_options opt = {.alloc_conf = settings};
    if (replay_one(t, &opt, &a->run, e) || smallest_fit(t, settings, &a->run, a, e))
        return -1;
    a->same_as_base = settings && a->least_capacity == out->recorded.least_capacity &&
                      same_figures(&a->run, &out->recorded.run);
    out->n++;
    return 0;
}

static int by_needed(const void *x, const void *y)
{
    const struct advice_entry *a = x, *b = y;
    return a->least_capacity < b->least_capacity ? -1 : a->least_capacity > b->least_capacity;
}

int advise_trace(const char *path, int cuda_device, struct advice *out, struct err *e)
{
    *out = (struct advice){0};
    const struct trace_target t = {path, cuda_device};
    if (try_settings(&t, NULL, NULL, out, e))
        return -1;
    out->recorded = out->entries[0];
    out->base = out->recorded.run;
    out->n = 0;
    for (size_t i = 0; i < sizeof trace_settings / sizeof trace_settings[0]; i++)
        if (try_settings(&t, trace_settings[i].settings, trace_settings[i].inert, out, e))
            return -1;
    qsort(out->entries, out->n, sizeof out->entries[0], by_needed);
    return 0;
}
