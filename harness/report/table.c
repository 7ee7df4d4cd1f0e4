/* table.c: the human-readable tables: a scenario's before/after table, a replay's summary and check
 * against its recording, and fit's largest values; every figure labelled measured or modelled. */
#include <string.h>

#include "report/report.h"
#include "util/size.h"

static const char *figures(const struct job_result *r)
{
    return r->run.measured ? "measured" : "modelled";
}

static void gib(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f GiB", (double)n / (double)GiB);
}

static void print_categories(FILE *f, const char *name, const char *when, const uint64_t *bytes)
{
    fprintf(f, "    %-26s %s:", name, when);
    int printed = 0;
    for (int c = 0; c < CAT_COUNT; c++) {
        if (!bytes[c])
            continue;
        char s[32];
        size_format_pytorch(bytes[c], s, sizeof s);
        fprintf(f, "%s %s %s", printed++ ? "," : "", category_name((enum category)c), s);
    }
    fprintf(f, "%s\n", printed ? "" : " nothing allocated");
}

static void print_breakdown(FILE *f, const struct job_result *r)
{
    char when[160];
    snprintf(when, sizeof when, "at peak allocated (%s) in step %lld %s, peak reserved in step %lld %s", figures(r),
             (long long)r->run.peak_allocated_step, r->run.peak_allocated_phase, (long long)r->run.peak_reserved_step,
             r->run.peak_reserved_phase);
    print_categories(f, r->name, when, r->run.category_at_peak);
    if (r->run.oom.happened)
        print_categories(f, "", "at the OOM", r->run.oom.category_live);
}

/* What the jobs' op programs assumed: the first job's, then any variant's that differs. */
static void print_assumptions(FILE *f, const struct report_group *g)
{
    char first[320] = "", text[320];
    for (size_t i = 0; i < g->njobs; i++) {
        if (!g->jobs[i].has_assumptions)
            continue;
        job_assumptions_text(&g->jobs[i].assumptions, text, sizeof text);
        if (i == 0)
            fprintf(f, "   assumed: %s\n", strcpy(first, text));
        else if (strcmp(text, first))
            fprintf(f, "   assumed by %s: %s\n", g->jobs[i].name, text);
    }
}

static void print_header(FILE *f, const struct report_group *g)
{
    const struct job_result *r = g->njobs ? &g->jobs[0] : NULL;
    char total[32];
    size_format_pytorch(r ? r->device_total : 0, total, sizeof total);
    if (g->kind == REPORT_REPLAY)
        fprintf(f, "== %s: replay of a %s\n", g->name, r && r->replay.input_kind ? r->replay.input_kind : "trace");
    else
        fprintf(f, "== %s: %s\n", g->name, g->title);
    if (g->source)
        fprintf(f, "   source: %s\n", g->source);
    if (r && !strcmp(r->device, "sim:unbounded"))
        fprintf(f, "   device: %s (modelled by the allocator model)\n", r->device);
    else
        fprintf(f, "   device: %s (%s%s%s total, %s)\n", r ? r->device : "-", r ? r->device_detail : "",
                r && r->device_detail[0] ? "; " : "", total,
                r && r->run.measured ? "measured" : "modelled by the allocator model");
    print_assumptions(f, g);
}

static void print_rows(FILE *f, const struct report_group *g)
{
    fprintf(f, "   %-26s %-44s %10s %10s %10s %7s  %-6s %s\n", "variant", "fixes", "peak alloc", "peak resv",
            "unalloc@pk", "retries", "expect", "result");
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        char a[32], b[32], u[32], outcome[256];
        gib(r->run.peak_allocated, a, sizeof a);
        gib(r->run.peak_reserved, b, sizeof b);
        gib(r->run.unallocated_at_peak, u, sizeof u);
        job_outcome(r, outcome, sizeof outcome);
        if (g->kind == REPORT_REPLAY && r->run.nooms > 1)
            snprintf(outcome + strlen(outcome), sizeof outcome - strlen(outcome), ", %llu OOMs in all",
                     (unsigned long long)r->run.nooms);
        fprintf(f, "   %-26s %-44s %10s %10s %10s %7lld  %-6s %s\n", r->name, r->fixes, a, b, u,
                (long long)r->run.stats.num_alloc_retries, !r->has_expect ? "-" : r->expect_ok ? "ok" : "FAILED",
                outcome);
        if (r->has_expect && !r->expect_ok)
            fprintf(f, "   %-26s expectation failed: %s\n", "", r->expect_why);
    }
}

static void print_throughput(FILE *f, const struct job_result *r)
{
    double eval = 0;
    for (size_t k = 0; k < r->run.nphases; k++)
        if (phase_is_eval(r->run.phases[k].name))
            eval += r->run.phases[k].seconds;
    if (eval > 0 && !r->run.oom.happened)
        fprintf(f, "    %-26s eval (sampling and decode) %.3f s in kernels (%s)\n", r->name, eval, figures(r));
    if (r->run.oom.happened)
        fprintf(f, "    %-26s none: the job OOMs\n", r->name);
    else if (r->steps_per_s <= 0)
        fprintf(f, "    %-26s none: no training step was timed\n", r->name);
    else if (r->run.measured)
        fprintf(f, "    %-26s %.3f steps/s, %.2f samples/s (measured: median of %lld steps' training kernels by "
                   "%s, %.3f s; range %.3f-%.3f s; wall clock %.3f s, range %.3f-%.3f s)\n",
                r->name, r->steps_per_s, r->samples_per_s, (long long)r->run.steps_timed, r->timed_by,
                r->run.step_seconds_median, r->run.step_seconds_min, r->run.step_seconds_max,
                r->run.step_wall_seconds_median, r->run.step_wall_seconds_min, r->run.step_wall_seconds_max);
    else
        fprintf(f, "    %-26s %.3f steps/s, %.2f samples/s (modelled: %s, %.2f TFLOP per step)\n", r->name,
                r->steps_per_s, r->samples_per_s, r->timed_by,
                r->steps_planned ? r->train_flops / 1e12 / r->steps_planned
                                 : r->train_flops / 1e12 / (double)r->run.steps);
}

static void print_device_growth(FILE *f, const struct job_result *r)
{
    fprintf(f, "    %-26s device memory growth in each phase's first run (measured, total - free):", r->name);
    for (size_t k = 0; k < r->run.nphases; k++) {
        int64_t d = r->run.phases[k].device_used_delta;
        char s[32];
        size_format_pytorch((uint64_t)(d < 0 ? -d : d), s, sizeof s);
        fprintf(f, "%s %s %c%s", k ? "," : "", r->run.phases[k].name, d < 0 ? '-' : '+', s);
    }
    fprintf(f, "\n");
}

/* A replay's OOMs with their position, its warnings, and how it matched its recording. */
static void print_replay_details(FILE *f, const struct job_result *r)
{
    const struct run_result *run = &r->run;
    size_t shown = run->nooms < RUN_MAX_OOMS ? (size_t)run->nooms : RUN_MAX_OOMS;
    const char *unit = r->replay.checked ? "event" : "line";
    for (size_t i = 0; i < shown; i++)
        fprintf(f, "   OOM at %s %llu: %s\n", unit, (unsigned long long)run->ooms[i].where, run->ooms[i].message);
    if (run->nooms > shown)
        fprintf(f, "   ... and %llu more OOMs (memory_stats num_ooms counts them all)\n",
                (unsigned long long)(run->nooms - shown));
    size_t nwarn = run->nwarnings < RUN_MAX_WARNINGS ? (size_t)run->nwarnings : RUN_MAX_WARNINGS;
    for (size_t i = 0; i < nwarn; i++)
        fprintf(f, "   warning: %s\n", run->warnings[i]);
    if (run->nwarnings > nwarn)
        fprintf(f, "   ... and %llu more warnings\n", (unsigned long long)(run->nwarnings - nwarn));
    const struct replay_info *ri = &r->replay;
    char need[32];
    size_format_pytorch(ri->needed, need, sizeof need);
    fprintf(f, "   settings:  %s: %s\n", ri->settings_from, r->alloc_conf[0] ? r->alloc_conf : "(PyTorch defaults)");
    fprintf(f, "   capacity:  %s", ri->capacity_from);
    if (ri->needed)
        fprintf(f, "; the trace holds in %s reserved at its peak", need);
    fprintf(f, "\n");
    if (run->nooms && ri->needed) {
        char flag[32];
        size_format_flag(ri->needed, flag, sizeof flag);
        fprintf(f, "   too small: the trace needs %s reserved; replay without --device/--capacity to reproduce the "
                   "recording, or give --capacity %s\n", need, flag);
    }
    fprintf(f, "   addresses: %s\n", ri->addresses);
    if (ri->rebuilt_start)
        fprintf(f, "   recording began mid-run: the state at trace start was rebuilt from the file\n");
    if (!ri->checked)
        return;
    const struct recorded_check *c = &ri->check;
    fprintf(f, "   check against the snapshot:\n");
    fprintf(f, "    segment_allocs   %zu/%zu matched (size and place in the event order)\n", c->segment_allocs_matched,
            c->segment_allocs_recorded);
    if (c->final_layout_matched)
        fprintf(f, "    final layout     every segment's blocks match\n");
    else
        fprintf(f, "    final layout     %zu/%zu segments laid out alike\n", c->final_segments_matched,
                c->final_segments);
    fprintf(f, "    alloc addresses  %zu/%zu matched\n", c->addresses_matched, c->allocs);
    if (c->first_mismatch[0])
        fprintf(f, "    first mismatch   %s\n", c->first_mismatch);
}

static void print_fit(FILE *f, const struct report_group *g)
{
    const struct job_result *first = g->njobs ? &g->jobs[0] : NULL;
    fprintf(f, "== %s: largest %s that fits", g->name, g->fit_param);
    if (g->fit_margin > 0)
        fprintf(f, " with %g%% of the device free", g->fit_margin * 100.0);
    fprintf(f, " (%s on %s%s%s)\n", first && first->run.measured ? "measured" : "modelled", first ? first->device : "-",
            g->capacity_text ? " with capacity " : "", g->capacity_text ? g->capacity_text : "");
    print_assumptions(f, g);
    fprintf(f, "   %-22s %-44s %8s %12s %-24s %7s\n", "variant", "fixes", g->fit_param, "peak resv", "samples/s",
            "probes");
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        const struct fit_row *row = &g->fits[i];
        char resv[32], rate[48];
        gib(r->run.peak_reserved, resv, sizeof resv);
        if (r->samples_per_s > 0)
            snprintf(rate, sizeof rate, "%.2f (%s)", r->samples_per_s, figures(r));
        else
            snprintf(rate, sizeof rate, "-");
        fprintf(f, "   %-22s %-44s %7d%s %12s %-24s %7d\n", r->name, r->fixes, row->largest, row->hit_limit ? "+" : " ",
                row->largest ? resv : "-", row->largest ? rate : "-", row->probes);
    }
}

void report_table(FILE *f, const struct report_group *g)
{
    if (g->kind == REPORT_FIT) {
        print_fit(f, g);
        return;
    }
    print_header(f, g);
    print_rows(f, g);
    fprintf(f, "   breakdown by category:\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_breakdown(f, &g->jobs[i]);
    fprintf(f, "   throughput:\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_throughput(f, &g->jobs[i]);
    for (size_t i = 0; i < g->njobs; i++)
        if (g->jobs[i].run.measured)
            print_device_growth(f, &g->jobs[i]);
    for (size_t i = 0; i < g->njobs; i++) {
        if (g->kind == REPORT_REPLAY)
            print_replay_details(f, &g->jobs[i]);
        else if (g->jobs[i].run.oom.happened)
            fprintf(f, "   %s: %s\n", g->jobs[i].name, g->jobs[i].run.oom.message);
    }
    fprintf(f, "\n");
}
