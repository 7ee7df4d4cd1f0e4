/* advice_table.c: the ranking of `oomlab advise` (see advice_table.h). */
#include "report/advice_table.h"

#include <string.h>

#include "report/wrap.h"
#include "util/size.h"
#include "workload/switches.h"

static void fixes_text(uint32_t fixes, char *buf, size_t len)
{
    int count;
    const struct switch_info *t = fix_table(&count);
    size_t at = 0;
    buf[0] = '\0';
    for (int f = 0; f < count && at < len; f++)
        if (fixes >> t[f].id & 1)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? " + " : "", t[f].name);
}

static void gib(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f GiB", (double)n / (double)GiB);
}

/* "fits", "OOM: backward, step 1" */
static void outcome(const struct job_result *r, char *buf, size_t len)
{
    if (r->run.oom.happened)
        snprintf(buf, len, "OOM: %s, step %lld", r->run.oom.phase, (long long)r->run.oom.step);
    else
        snprintf(buf, len, "fits");
}

/* samples/s and its change against the base, when both are modelled and the base ran a step */
static void rate(const struct job_result *r, const struct job_result *base, char *buf, size_t len)
{
    if (r->samples_per_s <= 0)
        snprintf(buf, len, "-");
    else if (base->samples_per_s > 0)
        snprintf(buf, len, "%.2f (%+.0f%%)", r->samples_per_s, 100.0 * (r->samples_per_s / base->samples_per_s - 1));
    else
        snprintf(buf, len, "%.2f", r->samples_per_s);
}

/* The fixes or settings whose runs equal the job's, each with why where it is known. */
static void print_unchanged(FILE *f, const struct advice *a)
{
    bool header = false;
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_entry *e = &a->entries[i];
        if (!e->same_as_base)
            continue;
        if (!header)
            fprintf(f, "   changes nothing here (its runs' figures equal those %s):\n",
                    a->base.replay.input_kind ? "as recorded" : "of the job as it is");
        header = true;
        char fx[128], text[320], why[160];
        if (e->settings[0])
            snprintf(fx, sizeof fx, "%s", e->settings);
        else
            fixes_text(e->fixes, fx, sizeof fx);
        if (e->inert)
            snprintf(why, sizeof why, ": %s", e->inert);
        else if (a->base.run.oom.happened && !e->settings[0])
            snprintf(why, sizeof why, ": the job OOMs (%s, step %lld) before it acts", a->base.run.oom.phase,
                     (long long)a->base.run.oom.step);
        else
            why[0] = '\0';
        snprintf(text, sizeof text, "%s%s", fx, why);
        wrap_print(f, "     ", 7, text);
    }
}

static void print_trace_advice(FILE *f, const struct advice *a)
{
    const struct advice_entry *rec = &a->recorded;
    char least[32], peak[32], line[768];
    size_format_flag(rec->least_capacity, least, sizeof least);
    size_format_pytorch(rec->run.replay.needed, peak, sizeof peak);
    snprintf(line, sizeof line, "%s: needs %s (reserves %s when never pressed); the smallest card: %s",
             rec->run.alloc_conf[0] ? rec->run.alloc_conf : "PyTorch's defaults",
             least, peak, rec->smallest_card[0] ? rec->smallest_card : "none");
    wrap_print(f, "   as recorded, ", 16, line);
    fprintf(f, "   %-4s %-46s %10s %8s  %s\n", "rank", "allocator settings", "needs", "change", "smallest card");
    for (size_t i = 0, shown = 0; i < a->n; i++) {
        const struct advice_entry *e = &a->entries[i];
        if (e->same_as_base)
            continue;
        char n[32], change[16];
        size_format_flag(e->least_capacity, n, sizeof n);
        snprintf(change, sizeof change, "%+.1f%%",
                 rec->least_capacity ? 100.0 * ((double)e->least_capacity / (double)rec->least_capacity - 1) : 0.0);
        bool own_line = strlen(e->settings) > 46; /* the figures go on the line below */
        fprintf(f, "   %-4zu %-46s%s %10s %8s  %s\n", ++shown, e->settings,
                own_line ? "\n                                                    " : "", n, change,
                e->smallest_card[0] ? e->smallest_card : "none");
    }
    print_unchanged(f, a);
    wrap_print(f, "   ", 3,
               "needs: the least device capacity the trace replays on without an OOM (as --capacity takes it, "
               "rounded up), found by bisection to 2 MiB (the allocator frees its cache only under pressure, so this can sit well below what it "
               "reserves with room to spare); smallest card: the smallest GPU profile it replays on, proven "
               "by a run on it. All figures modelled by the allocator model.");
}

void report_advice(FILE *f, const char *name, const char *title, const struct advice *a)
{
    char line[512];
    snprintf(line, sizeof line, "== %s: ", name);
    wrap_print(f, line, 3, title);
    if (a->base.replay.input_kind) {
        wrap_print(f, "   device: ", 11, "simulated: each setting replayed on capacities bisected to 2 MiB and on "
                                         "the GPU profiles (modelled)");
        print_trace_advice(f, a);
        fprintf(f, "\n");
        return;
    }
    snprintf(line, sizeof line, "%s (%s)", a->base.device, a->base.run.measured ? "measured" : "modelled");
    wrap_print(f, "   device: ", 11, line);
    char out[64], resv[32], r[48];
    outcome(&a->base, out, sizeof out);
    gib(a->base.run.peak_reserved, resv, sizeof resv);
    rate(&a->base, &a->base, r, sizeof r);
    fprintf(f, "   as it is (%s): %s, peak reserved %s, %s samples/s\n", a->base.name, out, resv, r);
    wrap_print(f, "   ", 3,
               "each fix added to the job and proven by a full run; ranked: what fits first, then the highest "
               "samples/s, then the lowest peak reserved");
    fprintf(f, "   %-4s %-22s %10s  %-18s %s\n", "rank", "result", "peak resv", "samples/s", "fixes");
    size_t shown = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_entry *e = &a->entries[i];
        if (e->same_as_base)
            continue;
        char fx[512], first[160];
        outcome(&e->run, out, sizeof out);
        gib(e->run.run.peak_reserved, resv, sizeof resv);
        rate(&e->run, &a->base, r, sizeof r);
        fixes_text(e->fixes, fx, sizeof fx);
        snprintf(first, sizeof first, "   %-4zu %-22s %10s  %-18s ", ++shown, out, resv, r);
        wrap_print(f, first, 63, fx);
    }
    for (size_t i = 0, rank = 0; i < a->n; i++) { /* the best that fits, as YAML to paste */
        const struct advice_entry *e = &a->entries[i];
        rank += !e->same_as_base;
        if (e->same_as_base || e->run.run.oom.happened)
            continue;
        char fx[512];
        fixes_text(e->fixes, fx, sizeof fx);
        for (char *p = strstr(fx, " + "); p; p = strstr(p, " + ")) /* "a + b" -> "a, b" */
            memmove(p, p + 1, strlen(p + 1) + 1), p[0] = ',';
        char text[560];
        fprintf(f, "   rank %zu as a scenario variant (YAML):\n     after-advised:\n", rank);
        snprintf(text, sizeof text, "[%s]", fx);
        wrap_print(f, "       fixes: ", 15, text);
        fprintf(f, "       expect: { oom: false }\n");
        break;
    }
    print_unchanged(f, a);
    fprintf(f, "\n");
}
