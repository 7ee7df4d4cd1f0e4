/* csv_tap.c: `oomlab run --csv` (one row per variant) and `--tap` (one TAP line per expectation). */
#include <string.h>

#include "report/run_report.h"

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
    fprintf(f, "scenario,variant,fixes,device,figures,peak_allocated_bytes,peak_reserved_bytes,"
               "unallocated_at_peak_bytes,num_alloc_retries,num_ooms,oom_phase,oom_step,oom_tag");
    for (int c = 0; c < CAT_COUNT; c++)
        fprintf(f, ",%s_at_peak_bytes", category_name((enum category)c));
    fprintf(f, ",steps_per_s,samples_per_s,expect_ok\n");
}

void report_csv_rows(FILE *f, const struct variant_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char fixes[256];
        variant_fixes_text(r[i].variant, fixes, sizeof fixes);
        const struct run_oom *o = &r[i].run.oom;
        csv_field(f, r[i].scenario->name);
        fputc(',', f);
        csv_field(f, r[i].variant->name);
        fputc(',', f);
        csv_field(f, fixes);
        fputc(',', f);
        csv_field(f, r[i].device);
        fprintf(f, ",%s,%llu,%llu,%llu,%lld,%lld,", r[i].run.measured ? "measured" : "modelled",
                (unsigned long long)r[i].run.peak_allocated, (unsigned long long)r[i].run.peak_reserved,
                (unsigned long long)r[i].run.unallocated_at_peak, (long long)r[i].run.stats.num_alloc_retries,
                (long long)r[i].run.stats.num_ooms);
        csv_field(f, o->happened ? o->phase : "");
        fprintf(f, ",%lld,", o->happened ? (long long)o->step : -1LL);
        csv_field(f, o->happened ? o->tag : "");
        for (int c = 0; c < CAT_COUNT; c++)
            fprintf(f, ",%llu", (unsigned long long)r[i].run.category_at_peak[c]);
        fprintf(f, ",%.6f,%.6f,%s\n", r[i].steps_per_s, r[i].samples_per_s, r[i].expect_ok ? "true" : "false");
    }
}

int report_tap(FILE *f, const struct variant_result *r, size_t n, int *counter)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        char outcome[256];
        report_outcome(&r[i], outcome, sizeof outcome);
        const struct expectation *x = &r[i].variant->expect;
        fprintf(f, "%sok %d - %s/%s: expected %s, got %s%s%s\n", r[i].expect_ok ? "" : "not ", ++*counter,
                r[i].scenario->name, r[i].variant->name, x->oom ? "an OOM" : "to fit", outcome,
                r[i].expect_ok ? "" : ": ", r[i].expect_why);
        failures += !r[i].expect_ok;
    }
    return failures;
}
