/* csv_tap.c: CSV (one row per job) and TAP (one line per expectation) for run, fit and replay. */
#include <stdarg.h>
#include <string.h>

#include "report/report.h"
#include "stress/stress.h"

bool report_job_failed(const struct report_group *g, size_t i)
{
    const struct job_result *r = &g->jobs[i];
    switch (g->kind) {
    case REPORT_SCENARIO: return r->has_expect && !r->expect_ok;
    case REPORT_FIT: return g->fits[i].largest == 0;
    case REPORT_REPLAY: return r->run.nooms > 0;
    case REPORT_STRESS: return !stress_ok(&g->stress[i]);
    }
    return false;
}

static void csv_field(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void report_csv_header(FILE *f)
{
    fprintf(f, "group,job,fixes,device,figures,peak_allocated_bytes,peak_reserved_bytes,"
               "unallocated_at_peak_bytes,num_alloc_retries,num_ooms,oom_phase,oom_step,oom_tag");
    for (int c = 0; c < CAT_COUNT; c++)
        fprintf(f, ",%s_at_peak_bytes", category_name((enum category)c));
    fprintf(f, ",steps_per_s,samples_per_s,fit_largest,failed\n");
}

void report_csv_rows(FILE *f, const struct report_group *g)
{
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        const struct run_oom *o = &r->run.oom;
        csv_field(f, g->name);
        fputc(',', f);
        csv_field(f, r->name);
        fputc(',', f);
        csv_field(f, r->fixes);
        fputc(',', f);
        csv_field(f, r->device);
        fprintf(f, ",%s,%llu,%llu,%llu,%lld,%lld,", r->run.measured ? "measured" : "modelled",
                (unsigned long long)r->run.peak_allocated, (unsigned long long)r->run.peak_reserved,
                (unsigned long long)r->run.unallocated_at_peak, (long long)r->run.stats.num_alloc_retries,
                (long long)r->run.stats.num_ooms);
        csv_field(f, o->happened ? o->phase : "");
        fprintf(f, ",%lld,", o->happened ? (long long)o->step : -1LL);
        csv_field(f, o->happened ? o->tag : "");
        for (int c = 0; c < CAT_COUNT; c++)
            fprintf(f, ",%llu", (unsigned long long)r->run.category_at_peak[c]);
        fprintf(f, ",%.6f,%.6f,", r->steps_per_s, r->samples_per_s);
        if (g->kind == REPORT_FIT)
            fprintf(f, "%d", g->fits[i].largest);
        fprintf(f, ",%s\n", report_job_failed(g, i) ? "true" : "false");
    }
}

static void tap_line(FILE *f, bool failed, int *counter, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void tap_line(FILE *f, bool failed, int *counter, const char *fmt, ...)
{
    va_list ap;
    fprintf(f, "%sok %d - ", failed ? "not " : "", ++*counter);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

int report_tap(FILE *f, const struct report_group *g, int *counter)
{
    int failures = 0;
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        bool failed = report_job_failed(g, i);
        char outcome[256];
        job_outcome(r, outcome, sizeof outcome);
        failures += failed;
        switch (g->kind) {
        case REPORT_SCENARIO:
            tap_line(f, failed, counter, "%s/%s: expected %s, got %s%s%s", g->name, r->name,
                     r->expect_oom ? "an OOM" : "to fit", outcome, failed ? ": " : "", r->expect_why);
            break;
        case REPORT_FIT:
            tap_line(f, failed, counter, "%s/%s: %s %s that fits: %d%s", g->name, r->name,
                     g->fit_smallest ? "smallest" : "largest", g->fit_param,
                     g->fits[i].largest, g->fits[i].hit_limit ? " (the search limit)" : "");
            break;
        case REPORT_REPLAY:
            tap_line(f, failed, counter, "%s: replays without an OOM (%llu OOMs)", g->name,
                     (unsigned long long)r->run.nooms);
            break;
        case REPORT_STRESS:
            for (int k = 0; k < g->stress[i].nchecks; k++) {
                const struct stress_check *c = &g->stress[i].checks[k];
                tap_line(f, !c->ok, counter, "%s/%s: %s: %s", g->name, r->name, c->what, c->detail);
            }
            break;
        }
    }
    return failures;
}
