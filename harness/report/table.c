/* table.c: the human-readable before/after table of one scenario. */
#include <string.h>

#include "report/run_report.h"
#include "util/size.h"

static const char *figures(const struct variant_result *r)
{
    return r->run.measured ? "measured" : "modelled";
}

void report_outcome(const struct variant_result *r, char *buf, size_t len)
{
    const struct run_oom *o = &r->run.oom;
    if (!o->happened)
        snprintf(buf, len, "fits");
    else
        snprintf(buf, len, "OOM in %s, step %lld (%s)", o->phase, (long long)o->step,
                 o->tag);
}

static void gib(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f GiB", (double)n / (double)GiB);
}

static void print_categories(FILE *f, const char *variant, const char *when, const uint64_t *bytes)
{
    fprintf(f, "    %-26s %s:", variant, when);
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

static void print_breakdown(FILE *f, const struct variant_result *r)
{
    char when[64];
    snprintf(when, sizeof when, "at peak allocated (%s)", figures(r));
    print_categories(f, r->variant->name, when, r->run.category_at_peak);
    if (r->run.oom.happened)
        print_categories(f, "", "at the OOM", r->run.oom.category_live);
}

void report_table(FILE *f, const struct scenario *sc, const struct variant_result *r, size_t n)
{
    char total[32];
    size_format_pytorch(n ? r[0].device_total : 0, total, sizeof total);
    fprintf(f, "== %s: %s\n", sc->name, sc->title);
    fprintf(f, "   source: %s\n", sc->source);
    fprintf(f, "   device: %s (%s%s%s total, %s)\n", n ? r[0].device : sc->device, n ? r[0].device_detail : "",
            n && r[0].device_detail[0] ? "; " : "", total, n && r[0].run.measured ? "measured" : "modelled by the allocator model");
    fprintf(f, "   %-26s %-44s %10s %10s %10s %7s  %-6s %s\n", "variant", "fixes", "peak alloc", "peak resv",
            "unalloc@pk", "retries", "expect", "result");
    for (size_t i = 0; i < n; i++) {
        char fixes[256], a[32], b[32], u[32], outcome[256];
        variant_fixes_text(r[i].variant, fixes, sizeof fixes);
        gib(r[i].run.peak_allocated, a, sizeof a);
        gib(r[i].run.peak_reserved, b, sizeof b);
        gib(r[i].run.unallocated_at_peak, u, sizeof u);
        report_outcome(&r[i], outcome, sizeof outcome);
        fprintf(f, "   %-26s %-44s %10s %10s %10s %7lld  %-6s %s\n", r[i].variant->name, fixes, a, b, u,
                (long long)r[i].run.stats.num_alloc_retries, r[i].expect_ok ? "ok" : "FAILED", outcome);
        if (!r[i].expect_ok)
            fprintf(f, "   %-26s expectation failed: %s\n", "", r[i].expect_why);
    }
    fprintf(f, "   breakdown by category:\n");
    for (size_t i = 0; i < n; i++)
        print_breakdown(f, &r[i]);
    fprintf(f, "   throughput:\n");
    for (size_t i = 0; i < n; i++) {
        double eval = 0;
        for (size_t k = 0; k < r[i].run.nphases; k++)
            if (phase_is_eval(r[i].run.phases[k].name))
                eval += r[i].run.phases[k].seconds;
        if (eval > 0 && !r[i].run.oom.happened)
            fprintf(f, "    %-26s eval (sampling and decode) %.3f s in kernels (%s)\n", r[i].variant->name, eval,
                    figures(&r[i]));
        if (r[i].run.oom.happened)
            fprintf(f, "    %-26s none: the job OOMs\n", r[i].variant->name);
        else if (r[i].run.measured)
            fprintf(f, "    %-26s %.3f steps/s, %.2f samples/s (measured: median of %lld steps' training kernels by "
                       "%s, %.3f s; range %.3f-%.3f s; wall clock %.3f s, range %.3f-%.3f s)\n",
                    r[i].variant->name, r[i].steps_per_s, r[i].samples_per_s, (long long)r[i].run.steps_timed,
                    r[i].timed_by, r[i].run.step_seconds_median, r[i].run.step_seconds_min, r[i].run.step_seconds_max,
                    r[i].run.step_wall_seconds_median, r[i].run.step_wall_seconds_min, r[i].run.step_wall_seconds_max);
        else
            fprintf(f, "    %-26s %.3f steps/s, %.2f samples/s (modelled: %s, %.2f TFLOP per step)\n",
                    r[i].variant->name, r[i].steps_per_s, r[i].samples_per_s, r[i].timed_by,
                    r[i].variant->job.steps ? r[i].train_flops / 1e12 / r[i].variant->job.steps : 0.0);
    }
    for (size_t i = 0; i < n; i++) {
        if (!r[i].run.measured)
            continue;
        fprintf(f, "    %-26s device memory growth in each phase's first run (measured, total - free):", r[i].variant->name);
        for (size_t k = 0; k < r[i].run.nphases; k++) {
            int64_t d = r[i].run.phases[k].device_used_delta;
            char s[32];
            size_format_pytorch((uint64_t)(d < 0 ? -d : d), s, sizeof s);
            fprintf(f, "%s %s %c%s", k ? "," : "", r[i].run.phases[k].name, d < 0 ? '-' : '+', s);
        }
        fprintf(f, "\n");
    }
    for (size_t i = 0; i < n; i++)
        if (r[i].run.oom.happened)
            fprintf(f, "   %s: %s\n", r[i].variant->name, r[i].run.oom.message);
    fprintf(f, "\n");
}
